// SPDX-License-Identifier: MIT
/*
 * test_hostile3.c - hostile input, third set (issue 26): address-space edges where both
 * designs must answer as Linux does. Each group runs in the design the environment picks
 * (make check: Linux's, make check-range: the range design).
 *
 *   gap_fallback	the lower half of the address space taken: non-fixed mmaps of 600 GiB
 *			and 2 x 400 GiB find room, and 400 GiB mappings keep finding it until
 *			the upper half is full (the range design's search of the whole address
 *			space looked only below the arenas and above mmap_base)
 *   map_count		at max_map_count (65530 VMAs): a munmap of a VMA's head, of its tail,
 *			of a tail and the next head, an mprotect or madvise of a head or tail
 *			that merges into the neighbour, and an mprotect that changes nothing
 *			add no VMA and succeed; a munmap, mprotect or madvise of a middle
 *			adds one and is -ENOMEM; the count stays exact throughout
 *   map_count_fail	a munmap of a tail and the next head at the limit, failed at each of
 *			its allocations: the count stays exact, past the limit the pieces it
 *			split off stay counted, and no VMA comes in until it is below again
 *   map_count_race	the same count-neutral calls and refused ones from threads in ranges
 *			of their own, at the limit all the while: every answer as alone, the
 *			count exact at the end
 *
 * "-t NAME" runs one group only.
 */
#include <errno.h>
#include <pthread.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define GiB (1UL << 30)
#define TiB (1UL << 40)
#define RANGE (1UL << PM_RANGE_SHIFT)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RO PM_PROT_READ
#define FIX (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

static const char *design(struct pm_machine *m)
{
	return pm_machine_flags(m) == PM_MACHINE_RANGE_MM ? "range design" : "Linux's design";
}

/* The VMAs found by a walk of the whole address space. Context: a quiescent mm. */
static unsigned long vmas_walked(struct pm_mm *mm)
{
	unsigned long n = 0;

	for (struct pm_vma *vma = pm__find_vma(mm, 0); vma; vma = pm__vma_next(mm, vma))
		n++;
	return n;
}

/* [@a, @a + @len) lies in the user address space above @floor and misses [@b, @b + @blen). */
static bool placed(long a, unsigned long len, unsigned long floor, long b, unsigned long blen)
{
	unsigned long x = (unsigned long)a, y = (unsigned long)b;

	return a > 0 && x >= floor && x <= PM_TASK_SIZE - len && (x + len <= y || x >= y + blen);
}

/* ---- 1. the fallback search finds every gap ---- */

static void test_gap_fallback(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long half = (PM_TASK_SIZE + PG) / 2; /* 64 TiB: ranges 128 and up */
	unsigned long total;
	long a, b, c, r;
	int n = 0, low = 0;

	ASSERT_TRUE(mm != NULL);
	diag("%s", design(m));
	is_int(pm_mmap(mm, PM_USER_MIN, half - PM_USER_MIN, RO, FIX, NULL, 0), (long)PM_USER_MIN,
	       "the lower half of the address space is taken");
	a = pm_mmap(mm, 0, 600 * GiB, RW, PRIV, NULL, 0);
	ok(placed(a, 600 * GiB, half, 0, 0), "600 GiB, more than one range, finds room (%#lx)", a);
	b = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0);
	ok(placed(b, 400 * GiB, half, a, 600 * GiB), "400 GiB finds room (%#lx)", b);
	c = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0);
	ok(placed(c, 400 * GiB, half, a, 600 * GiB) && placed(c, 400 * GiB, half, b, 400 * GiB),
	   "another 400 GiB too, apart from both (%#lx)", c);
	is_int(pm_access(mm, (unsigned long)a + 600 * GiB - 8, (char[8]){ 1 }, 8, 1), 8,
	       "the 600 GiB mapping is usable at its end");
	is_int(pm_access(mm, (unsigned long)c, (char[8]){ 2 }, 8, 1), 8,
	       "the last 400 GiB one at its start");
	/* About 63 TiB are free: every 400 GiB that fits in the gaps left must come in. */
	total = 1400 * GiB;
	while ((r = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0)) > 0 && n++ < 1000) {
		low += !placed(r, 400 * GiB, half, 0, 0);
		total += 400 * GiB;
	}
	is_int(r, -ENOMEM, "400 GiB mappings come in until the upper half is full");
	ok(!low && total >= 63 * TiB, "it holds %lu GiB of mappings then", total / GiB);
	ok(pm_mmap(mm, 0, GiB, RW, PRIV, NULL, 0) > 0, "1 GiB still finds what is left over");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "gap_fallback");
}

/* ---- 2. max_map_count counts only what adds a VMA ---- */

/*
 * @n two-page VMAs from @base, protections alternating so that none merges: VMA i is
 * [base + 2i pages, base + 2i + 2 pages), read-only for even i, read-write for odd i.
 */
static bool fill(struct pm_mm *mm, unsigned long base, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long a = base + 2 * i * PG;

		if (pm_mmap(mm, a, 2 * PG, i & 1 ? RW : RO, FIX, NULL, 0) != (long)a)
			return false;
	}
	return true;
}

/* VMA i of fill() at @base. */
#define V(i) (base + 2 * (i) * PG)

/* [@start, @end) is one VMA, as a walk sees it. */
static bool one_vma(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_vma *vma = pm__find_vma(mm, start);

	return vma && vma->start == start && vma->end == end;
}

static void test_map_count(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long base = 20 * RANGE, x = 40 * RANGE, n = PM_MAX_MAP_COUNT;
	char byte;

	ASSERT_TRUE(mm != NULL);
	diag("%s", design(m));
	/* Two VMAs in range 40 that differ only in VM_HUGEPAGE, and the rest in range 20. */
	ASSERT_EQ(pm_mmap(mm, x, 4 * PG, RO, FIX, NULL, 0), (long)x);
	ASSERT_EQ(pm_madvise(mm, x + 2 * PG, 2 * PG, PM_MADV_HUGEPAGE), 0);
	ok(fill(mm, base, n - 2) && mm_map_count(mm) == n, "65530 VMAs");
	is_int(pm_mmap(mm, 60 * RANGE, PG, RW, FIX, NULL, 0), -ENOMEM, "one more: -ENOMEM");

	is_int(pm_munmap(mm, V(10), PG), 0, "munmap of a VMA's head at the limit: 0");
	ok(one_vma(mm, V(10) + PG, V(11)), "the tail is left");
	is_int(pm_munmap(mm, V(12) + PG, PG), 0, "munmap of a VMA's tail at the limit: 0");
	ok(one_vma(mm, V(12), V(12) + PG), "the head is left");
	is_int(pm_munmap(mm, V(20) + PG, 2 * PG), 0, "munmap of a tail and the next head: 0");
	ok(one_vma(mm, V(20), V(20) + PG) && one_vma(mm, V(21) + PG, V(22)), "both shrank");
	is_int(mm_map_count(mm), n, "still 65530");

	is_int(pm_mprotect(mm, V(14) + PG, PG, RW), 0,
	       "mprotect of a tail that then merges into the next VMA: 0");
	ok(one_vma(mm, V(14), V(14) + PG) && one_vma(mm, V(14) + PG, V(16)),
	   "the next VMA took it");
	is_int(pm_mprotect(mm, V(17), PG, RO), 0,
	       "mprotect of a head that then merges into the VMA before: 0");
	ok(one_vma(mm, V(16), V(17) + PG) && one_vma(mm, V(17) + PG, V(18)),
	   "the VMA before took it");
	is_int(pm_mprotect(mm, V(14) + 2 * PG, PG, RW), 0,
	       "mprotect of a middle that changes nothing: 0");
	is_int(pm_madvise(mm, x + PG, PG, PM_MADV_HUGEPAGE), 0,
	       "madvise of a tail that then merges into the next VMA: 0");
	ok(one_vma(mm, x, x + PG) && one_vma(mm, x + PG, x + 4 * PG), "the next VMA took it");
	is_int(mm_map_count(mm), n, "still 65530");
	is_int(vmas_walked(mm), n, "and a walk finds 65530");

	/* V(15) is now [V(14) + 1 page, V(16)): three pages, read-write. */
	is_int(pm_munmap(mm, V(14) + 2 * PG, PG), -ENOMEM, "munmap of a middle adds one: -ENOMEM");
	is_int(pm_mprotect(mm, V(14) + 2 * PG, PG, RO), -ENOMEM,
	       "mprotect of a middle: -ENOMEM");
	is_int(pm_madvise(mm, V(14) + 2 * PG, PG, PM_MADV_HUGEPAGE), -ENOMEM,
	       "madvise of a middle: -ENOMEM");
	ok(one_vma(mm, V(14) + PG, V(16)), "the VMA is as it was");
	is_int(pm_access(mm, V(14) + 2 * PG, &byte, 1, 0), 1, "its middle still mapped");
	is_int(pm_mmap(mm, 60 * RANGE, PG, RW, FIX, NULL, 0), -ENOMEM, "a new VMA still: -ENOMEM");
	is_int(mm_map_count(mm), n, "still 65530");

	is_int(pm_munmap(mm, V(30), 2 * PG), 0, "a whole VMA goes");
	is_int(pm_munmap(mm, V(14) + 2 * PG, PG), 0, "then the middle munmap comes in");
	is_int(mm_map_count(mm), n, "65530 again");
	is_int(vmas_walked(mm), n, "a walk agrees");
	is_int(pm_machine_check(m), 0, "pm_machine_check, the address space alive");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "map_count");
}

/* ---- 3. a munmap that fails half-way at the limit ---- */

/*
 * One walk of the failure points of a munmap of a tail and the next head at the limit (both
 * splits make a piece that goes): whatever fails, the count stays exact - it may end past the
 * limit with the pieces split off, as Linux's map_count does - and while it is past, VMAs go
 * but none comes in. @nth: the allocation to fail. Return: false once no allocation failed.
 */
static bool fail_once(long nth, long *bad)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long base = 20 * RANGE, n = PM_MAX_MAP_COUNT;
	unsigned long fails, over;
	bool failed;
	long r;

	ASSERT_TRUE(mm != NULL && fill(mm, base, n));
	fails = PMT_STAT(m, alloc_failures);
	pm_fail_nth(m, nth);
	r = pm_munmap(mm, V(20) + PG, 2 * PG);
	pm_fail_nth(m, 0);
	failed = PMT_STAT(m, alloc_failures) != fails;
	over = mm_map_count(mm) - n;
	if ((failed ? r != 0 && r != -ENOMEM : r != 0) || over > 2 || (!r && over) ||
	    vmas_walked(mm) != mm_map_count(mm)) {
		diag("fail_nth %ld: munmap %ld, %lu VMAs walked, counted %lu", nth, r,
		     vmas_walked(mm), mm_map_count(mm));
		++*bad;
	}
	/* Past the limit by @over: one whole VMA goes, and still no new one comes in - neither
	 * in its range, which holds the unit it gave back, nor in another. */
	if (over && (pm_munmap(mm, V(100), 2 * PG) ||
		     pm_mmap(mm, V(n + 10), PG, RW, FIX, NULL, 0) != -ENOMEM ||
		     pm_mmap(mm, 60 * RANGE, PG, RW, FIX, NULL, 0) != -ENOMEM)) {
		diag("fail_nth %ld: past the limit by %lu, a new VMA came in", nth, over);
		++*bad;
	}
	/* Back to the limit; unmapped again without failures, the pieces split off go. */
	for (unsigned long i = 1; i < over; i++)
		pm_munmap(mm, V(100 + 2 * i), 2 * PG);
	if (pm_munmap(mm, V(20) + PG, 2 * PG) || mm_map_count(mm) != n - over ||
	    pm_mmap(mm, 60 * RANGE, PG, RW, FIX, NULL, 0) != (over ? (long)(60 * RANGE) : -ENOMEM)) {
		diag("fail_nth %ld: after the retry, %lu VMAs counted", nth, mm_map_count(mm));
		++*bad;
	}
	if (pm_machine_check(m))
		++*bad;
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	if (pmt_free_pages(m) != free0 || pm_machine_check(m))
		++*bad;
	pm_machine_destroy(m);
	return failed;
}

static void test_map_count_fail(void)
{
	long nth, bad = 0;

	for (nth = 1; nth < 64 && fail_once(nth, &bad); nth++)
		;
	ok(nth > 1 && nth < 64, "a munmap at the limit fails at %ld allocations", nth - 1);
	is_int(bad, 0, "each failure leaves the count exact and the limit kept");
}

/* ---- 4. the same from threads in ranges of their own ---- */

#define WORKERS 3

struct edger {
	struct pm_mm *mm;
	unsigned long p; /* P = [p, p + 2 pages) read-only, Q = [p + 2, p + 4) read-write,
			  * R = [p + 8, p + 11) read-write */
	long rounds, errors;
};

static void expect(struct edger *w, long got, long want)
{
	if (got != want && w->errors++ < 5)
		diag("worker at %#lx: got %ld, want %ld", w->p, got, want);
}

static void *edge_worker(void *arg)
{
	struct edger *w = arg;
	struct pm_mm *mm = w->mm;
	unsigned long p = w->p;

	for (long i = 0; i < w->rounds; i++) {
		expect(w, pm_munmap(mm, p, PG), 0);			/* P's head */
		expect(w, pm_mmap(mm, p, PG, RO, FIX, NULL, 0), (long)p); /* merges back */
		expect(w, pm_munmap(mm, p + 3 * PG, PG), 0);		/* Q's tail */
		expect(w, pm_mmap(mm, p + 3 * PG, PG, RW, FIX, NULL, 0), (long)(p + 3 * PG));
		expect(w, pm_mprotect(mm, p + PG, PG, RW), 0);		/* P's tail into Q */
		expect(w, pm_mprotect(mm, p + PG, PG, RO), 0);		/* and back into P */
		expect(w, pm_munmap(mm, p + PG, 2 * PG), 0);		/* P's tail, Q's head */
		expect(w, pm_mmap(mm, p + PG, PG, RO, FIX, NULL, 0), (long)(p + PG));
		expect(w, pm_mmap(mm, p + 2 * PG, PG, RW, FIX, NULL, 0), (long)(p + 2 * PG));
		expect(w, pm_munmap(mm, p + 9 * PG, PG), -ENOMEM);	/* R's middle */
		expect(w, pm_mprotect(mm, p + 9 * PG, PG, RO), -ENOMEM);
	}
	return NULL;
}

static void test_map_count_race(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long base = 20 * RANGE, n = PM_MAX_MAP_COUNT;
	struct edger w[WORKERS];
	pthread_t th[WORKERS];
	long errors = 0;

	ASSERT_TRUE(mm != NULL);
	diag("%s", design(m));
	for (int i = 0; i < WORKERS; i++) {
		unsigned long p = (40 + 20 * (unsigned long)i) * RANGE;

		w[i] = (struct edger){ mm, p, tap_scale(2000), 0 };
		ASSERT_EQ(pm_mmap(mm, p, 2 * PG, RO, FIX, NULL, 0), (long)p);
		ASSERT_EQ(pm_mmap(mm, p + 2 * PG, 2 * PG, RW, FIX, NULL, 0), (long)(p + 2 * PG));
		ASSERT_EQ(pm_mmap(mm, p + 8 * PG, 3 * PG, RW, FIX, NULL, 0), (long)(p + 8 * PG));
	}
	ok(fill(mm, base, n - 3 * WORKERS) && mm_map_count(mm) == n, "65530 VMAs");
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, edge_worker, &w[i]);
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(th[i], NULL);
		errors += w[i].errors;
	}
	is_int(errors, 0, "%d threads x %ld rounds at the limit: every answer as alone", WORKERS,
	       w[0].rounds);
	is_int(mm_map_count(mm), n, "the count is exact: 65530");
	is_int(vmas_walked(mm), n, "a walk agrees");
	is_int(pm_mmap(mm, 10 * RANGE, PG, RW, FIX, NULL, 0), -ENOMEM, "and no VMA more comes in");
	is_int(pm_machine_check(m), 0, "pm_machine_check, the address space alive");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "map_count_race");
}

static const struct pmt_group groups[] = {
	{ "gap_fallback", test_gap_fallback },
	{ "map_count", test_map_count },
	{ "map_count_fail", test_map_count_fail },
	{ "map_count_race", test_map_count_race },
};

int main(int argc, char **argv)
{
	return pmt_run_groups(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 0);
}
