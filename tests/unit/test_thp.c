// SPDX-License-Identifier: MIT
/*
 * test_thp.c - transparent huge pages: a write fault in a MADV_HUGEPAGE VMA whose aligned
 * 2 MiB window fits maps one order-9 folio at PMD level; it falls back to 4 KiB pages when the
 * window does not fit, without the advice, or when no 2 MiB block is free even after the
 * compaction the fault runs first; munmap, mprotect
 * and MADV_DONTNEED of part of a THP split the PMD and keep the rest of the data.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define THP (2 * MiB)

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;
static struct pm_page *pages[1024];

static void setup(size_t mib)
{
	free0 = pmt_setup(&m, &mm, mib, 0);
}

static void teardown(const char *what)
{
	pmt_teardown(&m, &mm, free0, what);
}

static void test_thp_fault(void)
{
	setup(64);
	long a = pm_mmap(mm, 0, 2 * THP, RW, PRIV, NULL, 0);

	ok(a > 0 && (a & (THP - 1)) == 0, "a 4 MiB mapping is 2 MiB aligned");
	is_int(pm_madvise(mm, a, 2 * THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	size_t f1 = pmt_free_pages(m);
	struct pm_stats s0 = pmt_stats(m);
	char c = 'x';

	is_int(pm_access(mm, a + 5000, &c, 1, 1), 1, "write one byte");
	struct pm_stats s1 = pmt_stats(m);

	is_int(s1.thp_faults - s0.thp_faults, 1, "thp_faults +1");
	is_int(s1.thp_fallbacks - s0.thp_fallbacks, 0, "no fallback");
	size_t used = f1 - pmt_free_pages(m);

	ok(used >= 512 && used <= 512 + 4, "one 2 MiB folio (+ tables): %zu frames", used);

	/* One pin: +1 ref, +1 pincount on the 2 MiB folio. */
	struct pm_page *p;

	is_int(pm_pin_user_pages(mm, a, 1, 0, &p), 1, "pin the first page");
	struct pm_folio *f = pm_page_folio(p);

	is_int(pm_folio_order(f), 9, "it is an order-9 folio");
	is_int(pm_folio_mapcount(f), 1,
	       "mapped once at PMD level: mapcount 1 (a PMD mapping counts once)");
	is_int(pm_folio_ref_count(f), 2, "refcount: 1 for the PMD mapping + 1 pin");
	is_int(pm_folio_pincount(f), 1, "pincount 1");
	ok(pm_folio_test_anon(f), "anonymous");
	pm_unpin_user_page(p);
	is_int(pm_folio_ref_count(f), 1, "unpinned: refcount 1");
	is_int(pm_folio_pincount(f), 0, "unpinned: pincount 0");

	/* All 512 pages are consecutive frames of that folio. */
	bool same = true, consecutive = true;

	is_int(pm_pin_user_pages(mm, a, 512, 0, pages), 512, "pin all 512 pages");
	for (int i = 0; i < 512; i++) {
		same &= pm_page_folio(pages[i]) == f;
		consecutive &= pm_page_to_pfn(pages[i]) == pm_page_to_pfn(pages[0]) + i;
	}
	ok(same, "every page belongs to the one folio");
	ok(consecutive, "the frames are consecutive");
	is_int(((char *)pm_page_address(pages[1]))[5000 - 4096], 'x',
	       "the written byte is in the second frame");
	is_int(pm_folio_pincount(f), 512, "pincount 512");
	pm_unpin_user_pages(pages, 512);
	is_int(pm_folio_pincount(f), 0, "all unpinned");

	ok(pmt_fill(mm, a, 1024, 0), "fill both windows");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 2,
	       "the second window was one more THP fault");
	ok(pmt_check(mm, a, 1024, 0), "4 MiB of data read back");
	teardown("THP fault");
}

static void test_fallback_window(void)
{
	const unsigned long x = 0x20000000UL; /* 2 MiB aligned */

	setup(64);
	/* [x+4K, x+2M): the window x..x+2M starts before the VMA. */
	is_int(pmt_map_fixed(mm, x + PG, THP - PG, RW), x + PG, "map 511 pages at x + 4 KiB");
	is_int(pm_madvise(mm, x + PG, THP - PG, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	struct pm_stats s0 = pmt_stats(m);

	ok(pmt_fill(mm, x + PG, 511, 0), "fill them");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 0, "no THP: the window does not fit");
	is_int(pmt_order_at(mm, x + 10 * PG), 0, "small folios");
	ok(pmt_check(mm, x + PG, 511, 0), "data reads back");

	/* [y+4K, y+4M+4K): only the window y+2M..y+4M fits. */
	const unsigned long y = 0x30000000UL;

	is_int(pmt_map_fixed(mm, y + PG, 2 * THP, RW), y + PG, "map 4 MiB at y + 4 KiB");
	is_int(pm_madvise(mm, y + PG, 2 * THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	s0 = pmt_stats(m);
	ok(pmt_fill(mm, y + PG, 4, 0), "write at its start");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 0, "the first window does not fit");
	ok(pmt_fill(mm, y + THP + 7 * PG, 1, 0), "write in the second window");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 1, "the second window fits: THP");
	is_int(pmt_order_at(mm, y + PG), 0, "4 KiB at the start");
	is_int(pmt_order_at(mm, y + THP + 7 * PG), 9, "2 MiB in the second window");
	ok(pmt_fill(mm, y + 2 * THP, 1, 0), "write the last page, past the second window");
	is_int(pmt_order_at(mm, y + 2 * THP), 0, "4 KiB there");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 1, "still one THP fault");

	/* No advice: THP policy is "madvise". Then NOHUGEPAGE undoes HUGEPAGE. */
	long b = pm_mmap(mm, 0, THP, RW, PRIV, NULL, 0);

	ok(b > 0 && (b & (THP - 1)) == 0, "an aligned 2 MiB mapping without advice");
	s0 = pmt_stats(m);
	ok(pmt_fill(mm, b, 2, 0), "write it");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 0, "no THP without MADV_HUGEPAGE");
	is_int(pmt_order_at(mm, b), 0, "small folio");
	long c = pm_mmap(mm, 0, THP, RW, PRIV, NULL, 0);

	ok(c > 0 && (c & (THP - 1)) == 0, "another aligned 2 MiB mapping");
	is_int(pm_madvise(mm, c, THP, PM_MADV_HUGEPAGE), 0, "HUGEPAGE");
	is_int(pm_madvise(mm, c, THP, PM_MADV_NOHUGEPAGE), 0, "then NOHUGEPAGE");
	ok(pmt_fill(mm, c, 2, 0), "write it");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 0, "no THP after NOHUGEPAGE");
	is_int(pmt_order_at(mm, c), 0, "small folio");
	teardown("window fallback");
}

static void test_fallback_memory(void)
{
	const unsigned long x = 0x20000000UL;

	/* A 2 MiB machine: the zero page breaks its only 2 MiB block. */
	setup(2);
	is_int(pmt_map_fixed(mm, x, THP, RW), x, "2 MiB machine: map 2 MiB");
	is_int(pm_madvise(mm, x, THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	struct pm_stats s0 = pmt_stats(m);

	ok(pmt_fill(mm, x, 8, 0), "write 8 pages");
	struct pm_stats s1 = pmt_stats(m);

	is_int(s1.thp_faults - s0.thp_faults, 0, "no THP fault");
	ok(s1.thp_fallbacks - s0.thp_fallbacks >= 1, "the THP fault fell back (%lu)",
	   s1.thp_fallbacks - s0.thp_fallbacks);
	is_int(pmt_order_at(mm, x), 0, "4 KiB folios");
	ok(pmt_check(mm, x, 8, 0), "data reads back");
	teardown("2 MiB machine");

	/* A fragmented 16 MiB machine: plenty free, no 2 MiB block until the fault compacts. */
	setup(16);
	is_int(pmt_map_fixed(mm, x, 32 * MiB, RW), x, "16 MiB machine: map 32 MiB of 4 KiB pages");
	long n = 0;
	char c = 1;

	while (pm_access(mm, x + n * PG, &c, 1, 1) == 1)
		n++;
	ok(n > 3000, "filled memory with %ld pages", n);
	for (long i = 0; i < n; i += 2)
		ASSERT_EQ(pm_madvise(mm, x + i * PG, PG, PM_MADV_DONTNEED), 0);
	ok(pmt_free_pages(m) > 1500, "freed every other page: %zu free", pm_machine_free_pages(m));
	const unsigned long y = 0x60000000UL;

	is_int(pmt_map_fixed(mm, y, THP, RW), y, "map 2 MiB");
	is_int(pm_madvise(mm, y, THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	s0 = pmt_stats(m);
	ok(pmt_fill(mm, y, 8, 0), "write 8 pages");
	s1 = pmt_stats(m);
	/* defrag=madvise: the fault compacts first (mm/migrate.c), then gets its THP. */
	is_int(s1.compact_success - s0.compact_success, 1, "the THP fault compacted first");
	is_int(s1.thp_faults - s0.thp_faults, 1, "then got a THP");
	is_int(pmt_order_at(mm, y + 3 * PG), 9, "a 2 MiB folio");
	ok(pmt_check(mm, y, 8, 0), "data reads back");
	teardown("fragmented machine");
}

/* Set up one filled 2 MiB THP at @x; returns false if it is not one. */
static bool one_thp(unsigned long x)
{
	if (pmt_map_fixed(mm, x, THP, RW) != (long)x || pm_madvise(mm, x, THP, PM_MADV_HUGEPAGE))
		return false;
	if (!pmt_fill(mm, x, 512, 0))
		return false;
	return pmt_order_at(mm, x) == 9;
}

static void test_splits(void)
{
	const unsigned long a = 0x20000000UL, b = 0x30000000UL, c = 0x40000000UL;
	const unsigned long d = 0x50000000UL, e = 0x60000000UL;
	struct pm_stats s0;

	setup(64);

	/* munmap one page in the middle. */
	ok(one_thp(a), "THP at a");
	s0 = pmt_stats(m);
	is_int(pm_munmap(mm, a + 100 * PG, PG), 0, "munmap page 100");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "thp_splits +1");
	ok(pmt_check(mm, a, 100, 0) && pmt_check(mm, a + 101 * PG, 411, 0),
	   "the other 511 pages are intact");
	is_int(pm_access(mm, a + 100 * PG, &(char){ 0 }, 1, 0), -EFAULT, "the hole -> -EFAULT");
	struct pm_page *p;

	is_int(pm_pin_user_pages(mm, a + 200 * PG, 1, 0, &p), 1, "pin page 200");
	is_int(pm_folio_mapcount(pm_page_folio(p)), 511, "PTE-mapped: 511 mappings");
	is_int(pm_folio_ref_count(pm_page_folio(p)), 512, "refcount 511 mappings + 1 pin");
	pm_unpin_user_page(p);
	size_t f1 = pmt_free_pages(m);

	ok(pmt_fill(mm, a, 100, 0) && pmt_fill(mm, a + 101 * PG, 411, 0),
	   "rewrite the mapped pages");
	is_int(pmt_free_pages(m), f1, "rewriting split pages allocates nothing");
	is_int(pm_machine_check(m), 0, "check after the split");

	/* mprotect one page read-only. */
	ok(one_thp(b), "THP at b");
	s0 = pmt_stats(m);
	is_int(pm_mprotect(mm, b + 300 * PG, PG, PM_PROT_READ), 0, "mprotect page 300 read-only");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "thp_splits +1");
	is_int(pm_access(mm, b + 300 * PG, &(char){ 1 }, 1, 1), -EFAULT, "it refuses writes");
	ok(pmt_check(mm, b, 512, 0), "all 512 pages read their data");
	ok(pmt_fill(mm, b + 299 * PG, 1, 0) && pmt_fill(mm, b + 301 * PG, 1, 0),
	   "its neighbours take writes");
	is_int(pm_mprotect(mm, b + 300 * PG, PG, RW), 0, "back to read-write");
	ok(pmt_fill(mm, b + 300 * PG, 1, 0) && pmt_check(mm, b, 512, 0),
	   "writable again, data intact");

	/* DONTNEED one page. */
	ok(one_thp(c), "THP at c");
	s0 = pmt_stats(m);
	is_int(pm_madvise(mm, c + 511 * PG, PG, PM_MADV_DONTNEED), 0, "DONTNEED the last page");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "thp_splits +1");
	ok(pmt_reads_zero(mm, c + 511 * PG, 1), "it reads zero");
	ok(pmt_check(mm, c, 511, 0), "the other 511 pages are intact");

	/* Whole-THP operations do not split. */
	ok(one_thp(d), "THP at d");
	s0 = pmt_stats(m);
	f1 = pmt_free_pages(m);
	is_int(pm_madvise(mm, d, THP, PM_MADV_DONTNEED), 0, "DONTNEED the whole THP");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 0, "no split");
	ok(pmt_free_pages(m) >= f1 + 512, "its 512 frames are free");
	ok(pmt_reads_zero(mm, d, 512), "it reads zero");
	ok(one_thp(e) && one_thp(e + THP), "two THPs at e");
	s0 = pmt_stats(m);
	is_int(pm_munmap(mm, e, THP), 0, "munmap the first whole THP");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 0, "no split");
	ok(pmt_check(mm, e + THP, 512, 0), "the second THP is intact");

	/* A fixed mapping over two pages inside a THP replaces just them. */
	const unsigned long f = 0x70000000UL;

	ok(one_thp(f), "THP at f");
	s0 = pmt_stats(m);
	is_int(pmt_map_fixed(mm, f + 10 * PG, 2 * PG, RW), f + 10 * PG,
	       "MAP_FIXED over pages 10-11");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "thp_splits +1");
	ok(pmt_reads_zero(mm, f + 10 * PG, 2), "the new pages read zero");
	ok(pmt_check(mm, f, 10, 0) && pmt_check(mm, f + 12 * PG, 500, 0),
	   "the other 510 pages are intact");

	/* A range across the boundary of two THPs splits both. */
	ok(one_thp(e), "THP at e again");
	s0 = pmt_stats(m);
	is_int(pm_munmap(mm, e + THP - 4 * PG, 8 * PG), 0, "munmap 8 pages across the boundary");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 2, "both PMDs split");
	ok(pmt_check(mm, e, 508, 0) && pmt_check(mm, e + THP + 4 * PG, 508, 0),
	   "the rest of both is intact");
	is_int(pm_machine_check(m), 0, "check with split THPs mapped");
	teardown("splits");
}

/*
 * Two threads fault the same window (or page) at once: one wins, the other backs out and
 * finds the winner's mapping. Exactly one folio per window; both threads' bytes are there.
 */
struct racer {
	pthread_barrier_t *bar;
	unsigned long base, stride;
	int n, id, bad;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < r->n; i++) {
		unsigned long a = r->base + i * r->stride + r->id * 64;
		unsigned char v = (unsigned char)(r->id + 1);

		pthread_barrier_wait(r->bar);
		if (pm_access(mm, a, &v, 1, 1) != 1)
			r->bad++;
	}
	return NULL;
}

static void race(unsigned long base, unsigned long stride, int n)
{
	pthread_barrier_t bar;
	struct racer r[2];
	pthread_t th[2];

	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct racer){ &bar, base, stride, n, i, 0 };
		ASSERT_EQ(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	is_int(r[0].bad + r[1].bad, 0, "every racing write succeeded");
}

static bool both_bytes(unsigned long a)
{
	unsigned char v[2] = { 0, 0 };

	return pm_access(mm, a, &v[0], 1, 0) == 1 && pm_access(mm, a + 64, &v[1], 1, 0) == 1 &&
	       v[0] == 1 && v[1] == 2;
}

static void test_racing_faults(void)
{
	const unsigned long t = 0x40000000UL, x = 0x10000000UL;
	const int nthp = 8, npages = 256;
	bool good = true;

	setup(64);
	is_int(pmt_map_fixed(mm, t, nthp * THP, RW), t, "map %d THP windows", nthp);
	is_int(pm_madvise(mm, t, nthp * THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	struct pm_stats s0 = pmt_stats(m);
	size_t f1 = pmt_free_pages(m);

	race(t, THP, nthp);
	struct pm_stats s1 = pmt_stats(m);

	is_int(s1.thp_faults - s0.thp_faults, nthp, "one THP fault per window");
	for (int i = 0; i < nthp; i++)
		good &= both_bytes(t + i * THP) && pmt_order_at(mm, t + i * THP) == 9;
	ok(good, "each window is one 2 MiB folio holding both threads' bytes");
	size_t used = f1 - pmt_free_pages(m);

	ok(used >= (size_t)nthp * 512 && used <= (size_t)nthp * 512 + nthp + 4,
	   "no folio leaked by the losers: %zu frames for %d windows", used, nthp);

	/* The same with 4 KiB pages (tables built first: only the pages race). */
	is_int(pmt_map_fixed(mm, x, npages * PG, RW), x, "map %d pages", npages);
	ok(pmt_fill(mm, x + (npages - 1) * PG, 1, 0), "build the page tables");
	f1 = pmt_free_pages(m);
	race(x, PG, npages - 1);
	is_int(f1 - pmt_free_pages(m), npages - 1, "one frame per page, none leaked");
	good = true;
	for (int i = 0; i < npages - 1; i++)
		good &= both_bytes(x + i * PG);
	ok(good, "every page holds both threads' bytes");
	teardown("racing faults");
}

/*
 * docs/linux-differences.md, decision 8: a PTE table that MADV_DONTNEED empties stays, so a
 * later write fault in a MADV_HUGEPAGE window maps a 4 KiB page, as Linux up to 6.13 (6.14's
 * PT_RECLAIM frees the table and maps a THP). A window never faulted maps a THP.
 */
static void test_dontneed_keeps_table(void)
{
	const unsigned long t = 0x40000000UL;
	struct pm_page_info pi;
	struct pm_stats s0, s1;

	setup(64);
	is_int(pmt_map_fixed(mm, t, 2 * THP, RW), t, "map two THP windows");
	is_int(pmt_poke(mm, t + 5 * PG, 'a'), 1, "a 4 KiB fault before the advice");
	is_int(pm_madvise(mm, t, 2 * THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	is_int(pm_madvise(mm, t, THP, PM_MADV_DONTNEED), 0, "MADV_DONTNEED of the whole window");
	s0 = pmt_stats(m);
	is_int(pmt_poke(mm, t + 7 * PG, 'b'), 1, "write in the emptied window");
	is_int(pmt_poke(mm, t + THP + 7 * PG, 'c'), 1, "write in the window never faulted");
	s1 = pmt_stats(m);
	is_int(s1.thp_faults - s0.thp_faults, 1, "one THP fault: the never-faulted window's");
	is_int(pm_pagemap(mm, t + 7 * PG, 1, &pi), 1, "pm_pagemap of the emptied window");
	ok((pi.flags & PM_PAGE_PRESENT) && !(pi.flags & PM_PAGE_THP),
	   "its table stays: a 4 KiB page (flags %#x)", pi.flags);
	is_int(pm_pagemap(mm, t + THP + 7 * PG, 1, &pi), 1, "pm_pagemap of the other window");
	ok(pi.flags & PM_PAGE_THP, "a THP there (flags %#x)", pi.flags);
	teardown("DONTNEED keeps the table");
}

int main(void)
{
	plan_no_plan();
	test_thp_fault();
	test_fallback_window();
	test_fallback_memory();
	test_splits();
	test_racing_faults();
	test_dontneed_keeps_table();
	return done_testing();
}
