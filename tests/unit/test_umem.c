// SPDX-License-Identifier: MIT
/*
 * test_umem.c - RDMA-style memory registration (src/consumers/umem.c).
 *
 * Checked against an independent record of the range taken before registering (one
 * pm_get_user_pages() per page): the SG table expands to exactly the range's frames in order,
 * its runs are maximal, every release mode gives the refcounts and pincounts back exactly, a
 * writable registration leaves its folios dirty, and failures leave nothing pinned.
 */
#include <errno.h>
#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE

static struct pm_machine *m;
static struct pm_mm *mm;

static const char *const mode_name[] = {
	[PM_UNPIN_RANGE] = "range",
	[PM_UNPIN_BATCH] = "batch",
	[PM_UNPIN_PER_PAGE] = "per-page",
};

/* While registered: +1024 per small folio page, +1 ref and +1 pincount per large folio page. */
static bool counts_pinned(const struct pmt_snap *s, unsigned long npages)
{
	for (unsigned long i = 0; i < npages; i++) {
		struct pm_folio *f = s[i].folio;
		unsigned long same = 0;
		int want_ref, want_pin;

		for (unsigned long j = 0; j < npages; j++)
			same += s[j].folio == f;
		if (pm_folio_order(f)) {
			want_ref = s[i].ref + (int)same;
			want_pin = s[i].pin + (int)same;
		} else {
			want_ref = s[i].ref + PM_GUP_PIN_COUNTING_BIAS * (int)same;
			want_pin = 0;
		}
		if (pm_folio_ref_count(f) != want_ref || pm_folio_pincount(f) != want_pin ||
		    !pm_folio_maybe_dma_pinned(f)) {
			diag("page %lu (pfn %#lx): ref %d pin %d, want ref %d pin %d", i, s[i].pfn,
			     pm_folio_ref_count(f), pm_folio_pincount(f), want_ref, want_pin);
			return false;
		}
	}
	return true;
}

/* The SG table lists exactly the frames of @s, in order, in maximal runs. */
static bool sg_matches(const struct pm_umem *umem, const struct pmt_snap *s, unsigned long npages)
{
	unsigned long nents, k = 0;
	const struct pm_sg *sg = pm_umem_sg(umem, &nents);

	for (unsigned long i = 0; i < nents; i++) {
		if (!sg[i].npages) {
			diag("entry %lu is empty", i);
			return false;
		}
		if (i + 1 < nents && sg[i].pfn + sg[i].npages == sg[i + 1].pfn) {
			diag("entries %lu and %lu are contiguous but not merged", i, i + 1);
			return false;
		}
		for (unsigned long j = 0; j < sg[i].npages; j++, k++) {
			if (k >= npages || sg[i].pfn + j != s[k].pfn) {
				diag("entry %lu page %lu: pfn %#lx, want %#lx", i, j, sg[i].pfn + j,
				     k < npages ? s[k].pfn : 0UL);
				return false;
			}
		}
	}
	if (k != npages)
		diag("SG table covers %lu pages, want %lu", k, npages);
	return k == npages;
}

/* The fewest runs the frames of @s can make. */
static unsigned long min_runs(const struct pmt_snap *s, unsigned long npages)
{
	unsigned long runs = npages ? 1 : 0;

	for (unsigned long i = 1; i < npages; i++)
		runs += s[i].pfn != s[i - 1].pfn + 1;
	return runs;
}

/* Register [addr, addr + len) writable and release it in every mode; check counts and SG. */
static void check_region(const char *what, unsigned long addr, size_t len, unsigned long max_nents)
{
	unsigned long npages = len / PAGE, nents = 0;
	struct pmt_snap *s = pmt_snapshot(mm, addr, npages);

	for (int mode = PM_UNPIN_RANGE; mode <= PM_UNPIN_PER_PAGE; mode++) {
		struct pm_umem *umem = pm_umem_get(mm, addr, len, PM_UMEM_WRITE);

		if (!ok(umem, "%s: register (%s)", what, mode_name[mode])) {
			diag("errno %d", errno);
			continue;
		}
		pm_umem_sg(umem, &nents);
		ok(sg_matches(umem, s, npages),
		   "%s: SG table is the range's frames, in maximal runs", what);
		is_int(nents, min_runs(s, npages), "%s: %lu SG entries (max %lu)", what, nents,
		       max_nents);
		ok(nents <= max_nents, "%s: at most %lu entries", what, max_nents);
		ok(counts_pinned(s, npages), "%s: every page pinned once while registered", what);
		pm_umem_release(umem, mode);
		ok(pmt_counts_equal(s, npages), "%s: %s release gives refcount and pincount back",
		   what, mode_name[mode]);
	}
	ok(pmt_pins_balanced(m), "%s: pins acquired == released", what);
	free(s);
}

static void test_4k(void)
{
	size_t len = 1100 * PAGE; /* more than two 512-page pin chunks */
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, false);

	pmt_touch(mm, addr, len);
	check_region("4K", addr, len, len / PAGE);

	/* Unaligned start and length: the pages that hold any byte of the range. */
	{
		unsigned long a = addr + 2 * PAGE + 100;
		struct pmt_snap *s = pmt_snapshot(mm, addr + 2 * PAGE, 4);
		struct pm_umem *umem = pm_umem_get(mm, a, 3 * PAGE, 0);

		ok(umem && sg_matches(umem, s, 4), "unaligned 3 pages at +100 cover 4 pages");
		pm_umem_release(umem, PM_UNPIN_RANGE);
		ok(pmt_counts_equal(s, 4), "unaligned: counts back");
		free(s);
	}
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

static void test_thp(void)
{
	size_t len = 8 * MiB;
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, true);
	unsigned long nents;
	struct pm_umem *umem;
	const struct pm_sg *sg;
	bool aligned = true;

	pmt_touch(mm, addr, len);
	is_int(addr % PM_PMD_SIZE, 0, "THP mapping is 2 MiB-aligned");
	is_int(pm_folio_order(pm_page_folio(pmt_page_at(mm, addr))), 9,
	       "THP region is backed by order 9");
	check_region("THP", addr, len, len / PM_PMD_SIZE);

	umem = pm_umem_get(mm, addr, len, 0);
	ASSERT_TRUE(umem);
	sg = pm_umem_sg(umem, &nents);
	for (unsigned long i = 0; i < nents; i++)
		aligned &= !(sg[i].pfn % PM_HPAGE_PMD_NR) && !(sg[i].npages % PM_HPAGE_PMD_NR);
	ok(aligned, "THP: every entry is whole folios");
	pm_umem_release(umem, PM_UNPIN_RANGE);
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

/*
 *  0       2 MiB     4 MiB     6 MiB
 *  [ THP   |  THP, one 4K page  | 4 KiB pages ]
 *  HUGEPAGE          replaced     default
 */
static void test_mixed(void)
{
	size_t len = 6 * MiB;
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, false);
	unsigned long hole = addr + 3 * MiB;

	ASSERT_EQ(pm_madvise(mm, addr, 4 * MiB, PM_MADV_HUGEPAGE), 0);
	pmt_touch(mm, addr, len);
	/* Knock one page out of the second THP and fault a fresh 4 KiB page in its place. */
	ASSERT_EQ(pm_madvise(mm, hole, PAGE, PM_MADV_DONTNEED), 0);
	pmt_touch(mm, hole, PAGE);
	ok(pm_folio_order(pm_page_folio(pmt_page_at(mm, addr + 2 * MiB))) == 9 &&
		   pm_folio_order(pm_page_folio(pmt_page_at(mm, hole))) == 0 &&
		   pm_folio_order(pm_page_folio(pmt_page_at(mm, addr + 5 * MiB))) == 0,
	   "mixed: THP, PTE-mapped THP with a small page, small pages");
	/* Runs: THP 1, THP 2 split around the small page (3), then one per small run. */
	check_region("mixed", addr, len, 1 + 3 + 512);
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

/* Writable registrations release dirty, in every mode; read-only ones leave dirt alone. */
static void test_dirty(void)
{
	for (int mode = PM_UNPIN_RANGE; mode <= PM_UNPIN_PER_PAGE; mode++) {
		for (int thp = 0; thp <= 1; thp++) {
			size_t len = thp ? 2 * MiB : 16 * PAGE;
			unsigned long addr =
				pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, thp);
			unsigned long npages = len / PAGE, clean = 0;
			struct pm_umem *umem;
			struct pmt_snap *s;
			bool same = true, dirty = true;

			pmt_touch(mm, addr, len);
			s = pmt_snapshot(mm, addr, npages);
			for (unsigned long i = 0; i < npages; i++)
				clean += !s[i].dirty;

			umem = pm_umem_get(mm, addr, len, 0);
			ASSERT_TRUE(umem);
			pm_umem_release(umem, mode);
			for (unsigned long i = 0; i < npages; i++)
				same &= pm_folio_test_dirty(s[i].folio) == s[i].dirty;
			ok(same, "dirty %s %s: read-only registration changes no dirty bit",
			   mode_name[mode], thp ? "THP" : "4K");

			umem = pm_umem_get(mm, addr, len, PM_UMEM_WRITE);
			ASSERT_TRUE(umem);
			pm_umem_release(umem, mode);
			for (unsigned long i = 0; i < npages; i++)
				dirty &= pm_folio_test_dirty(s[i].folio);
			ok(dirty,
			   "dirty %s %s: writable registration releases dirty (%lu were clean)",
			   mode_name[mode], thp ? "THP" : "4K", clean);
			ok(pmt_counts_equal(s, npages), "dirty %s %s: counts back", mode_name[mode],
			   thp ? "THP" : "4K");
			free(s);
			ASSERT_EQ(pm_munmap(mm, addr, len), 0);
		}
	}
}

static void expect_fail(const char *what, unsigned long addr, size_t len, unsigned access,
			int want_errno)
{
	struct pm_umem *umem;

	errno = 0;
	umem = pm_umem_get(mm, addr, len, access);
	ok(!umem && errno == want_errno, "%s: NULL, errno %d (got %d)", what, want_errno, errno);
	if (umem)
		pm_umem_release(umem, PM_UNPIN_RANGE);
	ok(pmt_pins_balanced(m), "%s: nothing left pinned", what);
}

static void test_errors(void)
{
	size_t len = 600 * PAGE;
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, false);
	unsigned long ro = pmt_map_anon(mm, 4 * PAGE, PM_PROT_READ, false);
	struct pm_umem *umem;
	unsigned long nents = 99, gone;
	struct pmt_snap *s;

	pmt_touch(mm, addr, len);
	expect_fail("len 0", addr, 0, 0, EINVAL);
	expect_fail("unknown access bit", addr, PAGE, 0x2, EINVAL);
	expect_fail("wrapping range", ~0UL - PAGE + 1, 2 * PAGE, 0, EINVAL);
	expect_fail("end past the page-aligned top", ~0UL - 10, 5, 0, EINVAL);
	expect_fail("beyond the user address space", PM_TASK_SIZE, PAGE, 0, EFAULT);
	errno = 0;
	ok(!pm_umem_get(NULL, addr, PAGE, 0) && errno == EINVAL, "NULL mm: EINVAL");
	gone = pmt_map_anon(mm, 4 * PAGE, PM_PROT_READ | PM_PROT_WRITE, false);
	ASSERT_EQ(pm_munmap(mm, gone, 4 * PAGE), 0);
	expect_fail("unmapped", gone, 4 * PAGE, 0, EFAULT);
	expect_fail("writable registration of a read-only mapping", ro, 4 * PAGE, PM_UMEM_WRITE,
		    EFAULT);

	/*
	 *  page 0        549 550 551        599
	 *  [ mapped ...   ][hole][ mapped ...  ]
	 * The first 512-page chunk and 37 more pages are pinned before the hole is met.
	 */
	s = pmt_snapshot(mm, addr, 549);
	ASSERT_EQ(pm_munmap(mm, addr + 549 * PAGE, PAGE), 0);
	expect_fail("hole after the first chunk", addr, len, PM_UMEM_WRITE, EFAULT);
	ok(pmt_counts_equal(s, 549), "hole: counts of the pages before it are back");
	expect_fail("hole at the start", addr + 549 * PAGE, 2 * PAGE, 0, EFAULT);
	expect_fail("hole in the first chunk", addr + 540 * PAGE, 20 * PAGE, 0, EFAULT);
	free(s);

	ok(pm_umem_sg(NULL, &nents) == NULL && nents == 0, "pm_umem_sg(NULL)");
	pm_umem_release(NULL, PM_UNPIN_RANGE);

	/* An unknown release mode still releases everything. */
	s = pmt_snapshot(mm, addr, 8);
	umem = pm_umem_get(mm, addr, 8 * PAGE, PM_UMEM_WRITE);
	ASSERT_TRUE(umem);
	pm_umem_release(umem, (enum pm_unpin_mode)42);
	ok(pmt_counts_equal(s, 8), "unknown release mode releases like the default");
	free(s);

	ASSERT_EQ(pm_munmap(mm, addr, 549 * PAGE), 0);
	ASSERT_EQ(pm_munmap(mm, addr + 550 * PAGE, 50 * PAGE), 0);
	ASSERT_EQ(pm_munmap(mm, ro, 4 * PAGE), 0);
}

/* The registration outlives the address space, as a device's would outlive munmap. */
static void test_outlives_mm(void)
{
	struct pm_mm *saved = mm;
	struct pm_umem *umem;
	unsigned long addr;

	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	addr = pmt_map_anon(mm, 2 * MiB, PM_PROT_READ | PM_PROT_WRITE, true);
	pmt_touch(mm, addr, 2 * MiB);
	umem = pm_umem_get(mm, addr, 2 * MiB, PM_UMEM_WRITE);
	ok(umem != NULL, "outlives mm: registered");
	pm_mm_destroy(mm);
	mm = saved;
	pm_umem_release(umem, PM_UNPIN_BATCH);
	ok(pmt_pins_balanced(m), "outlives mm: released after pm_mm_destroy");
}

/*
 * Any allocation a registration makes (frames and page tables while faulting, the core's
 * metadata) may fail: the registration then fails with ENOMEM and leaves nothing pinned. The
 * region spans three pin chunks; failures are injected from the first allocation to the last.
 */
static void test_fail_nth(void)
{
	static const int nth[] = { 1, 2, 3, 5, 8, 13, 50, 300, 511, 513, 700, 1025, 1090, 1200 };
	size_t len = 4 * MiB + 64 * PAGE;
	int failed = 0, succeeded = 0;
	bool clean = true;

	for (unsigned i = 0; i < sizeof(nth) / sizeof(nth[0]); i++) {
		unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, false);
		struct pm_umem *umem;

		pm_fail_nth(m, nth[i]);
		errno = 0;
		umem = pm_umem_get(mm, addr, len, PM_UMEM_WRITE);
		pm_fail_nth(m, 0);
		if (umem) {
			succeeded++;
			pm_umem_release(umem, PM_UNPIN_RANGE);
		} else if (errno == ENOMEM) {
			failed++;
		} else {
			diag("fail_nth %d: errno %d", nth[i], errno);
			clean = false;
		}
		clean &= pmt_pins_balanced(m);
		ASSERT_EQ(pm_munmap(mm, addr, len), 0);
	}
	ok(clean, "injected allocation failures: ENOMEM, nothing pinned");
	ok(failed > 0, "some registrations met an injected failure (%d failed, %d succeeded)",
	   failed, succeeded);
}

int main(void)
{
	size_t free_at_start;

	plan_no_plan();
	free_at_start = pmt_setup(&m, &mm, 128, 0);

	test_4k();
	test_thp();
	test_mixed();
	test_dirty();
	test_errors();
	test_outlives_mm();
	test_fail_nth();

	pm_mm_destroy(mm);
	pmt_end(m, free_at_start, &pmt_end_free_again, NULL);
	return done_testing();
}
