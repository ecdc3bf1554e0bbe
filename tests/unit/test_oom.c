// SPDX-License-Identifier: MIT
/*
 * test_oom.c - running out of memory: a tiny machine fills up and answers -ENOMEM, keeps the
 * data it had and leaks nothing; and pm_fail_nth() makes each allocation of mmap, munmap,
 * mprotect, faults, THP faults, pm_access and pinning fail in turn: every call answers -ENOMEM
 * (or a partial count), changes nothing when it says so, and leaks nothing.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define THP (2 * MiB)
#define MAX_N 64 /* no call here makes more allocations than this */

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;

static void setup(size_t mib)
{
	free0 = pmt_setup(&m, &mm, mib, 0);
}

static void teardown(const char *what)
{
	pm_fail_nth(m, 0);
	pmt_teardown(&m, &mm, free0, what);
}

/* Run the calling thread on @cpu only; false if it cannot. */
static bool run_on(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0 && sched_getcpu() == cpu;
}

static void run_anywhere(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void test_tiny_machine(void)
{
	const unsigned long x = 0x10000000UL;
	uint64_t buf[PG / 8];
	long n = 0, r;

	/* One CPU throughout, so no free frame waits in another CPU's cache. */
	run_on(sched_getcpu());
	setup(4);
	is_int(pmt_map_fixed(mm, x, 8 * MiB, RW), x, "4 MiB machine: map 8 MiB");
	for (;;) {
		pmt_pattern_page(buf, x + n * PG, 0);
		r = pm_access(mm, x + n * PG, buf, PG, 1);
		if (r != (long)PG)
			break;
		n++;
	}
	is_int(r, -ENOMEM, "writing page after page ends in -ENOMEM");
	ok(n > 900 && n < 1024, "after %ld pages", n);
	ok(pmt_stats(m).alloc_failures > 0, "alloc_failures counted");
	is_int(pm_fault(mm, x + n * PG, PM_FAULT_WRITE), -ENOMEM, "pm_fault write -> -ENOMEM");
	is_int(pm_fault(mm, x + (n + 1) * PG, PM_FAULT_WRITE), -ENOMEM, "again -> -ENOMEM");
	ok(pmt_check(mm, x, n, 0), "every page written before is intact");
	is_int(pm_machine_check(m), 0, "the machine is consistent when full");
	/* Reading an untouched page of an existing table needs no frame. */
	long idx = (n - 1) | 511;

	if (idx > n - 1 && idx < 2048)
		ok(pmt_reads_zero(mm, x + idx * PG, 1), "a read still maps the zero page");
	else
		skip(1, "no untouched page in an existing table");

	/* A THP fault when full: falls back, then -ENOMEM. */
	const unsigned long y = 0x20000000UL;
	struct pm_stats s0 = pmt_stats(m);

	is_int(pmt_map_fixed(mm, y, THP, RW), y, "map 2 MiB");
	is_int(pm_madvise(mm, y, THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	is_int(pm_access(mm, y, buf, 8, 1), -ENOMEM, "a THP write fault when full -> -ENOMEM");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 0, "no THP mapped");

	/* Free 3 pages: a 5-page write copies what fits, then -ENOMEM. */
	long first = n > 600 ? 600 : 0;

	is_int(pm_madvise(mm, x + first * PG, 3 * PG, PM_MADV_DONTNEED), 0, "DONTNEED 3 pages");
	ok(pmt_reads_zero(mm, x + first * PG, 3), "they read zero");
	char big[5 * PG];

	memset(big, 0x77, sizeof(big));
	r = pm_access(mm, x + n * PG, big, sizeof(big), 1);
	ok(r > 0 && r < (long)sizeof(big) && r % PG == 0,
	   "a 5-page write with 3 frames free copies whole pages and stops: %ld", r);
	if (r > 0) {
		char back[5 * PG];

		is_int(pm_access(mm, x + n * PG, back, r, 0), r, "the copied part reads back");
		ok(!memcmp(back, big, r), "with the right bytes");
		is_int(pm_access(mm, x + n * PG + r, big, PG, 1), -ENOMEM, "then -ENOMEM");
	} else {
		skip(3, "no partial write");
	}
	ok(pmt_check(mm, x, first, 0) && pmt_check(mm, x + (first + 3) * PG, n - first - 3, 0),
	   "the other pages are intact");
	is_int(pm_munmap(mm, x, 8 * MiB), 0, "munmap all");
	ok(pmt_fill(mm, x, 0, 0) && pmt_map_fixed(mm, x, 16 * PG, RW) == (long)x &&
		   pmt_fill(mm, x, 16, 0) && pmt_check(mm, x, 16, 0),
	   "memory is usable again");
	teardown("tiny machine");
	run_anywhere();
}

/*
 * Frames freed on one CPU must be allocatable from another when memory is short (Linux
 * drains the per-CPU lists before it fails an allocation).
 */
static void test_full_cross_cpu(void)
{
	const unsigned long x = 0x10000000UL;
	char c = 1;
	long n = 0;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || !run_on(0)) {
		skip(4, "needs two CPUs");
		run_anywhere();
		return;
	}
	setup(4);
	is_int(pmt_map_fixed(mm, x, 8 * MiB, RW), x, "4 MiB machine: map 8 MiB");
	while (pm_access(mm, x + n * PG, &c, 1, 1) == 1)
		n++;
	ok(n > 900, "filled on CPU 0: %ld pages", n);
	is_int(pm_madvise(mm, x + 16 * PG, 8 * PG, PM_MADV_DONTNEED), 0,
	       "free 8 pages on CPU 0");
	if (run_on(1)) {
		long r = pm_access(mm, x + 16 * PG, &c, 1, 1);

		is_int(r, 1, "on CPU 1 a page can be allocated again (got %ld)", r);
	} else {
		skip(1, "cannot move to CPU 1");
	}
	teardown("cross-CPU");
	run_anywhere();
}

static void test_fail_mmap(void)
{
	const unsigned long x = 0x10000000UL;
	int fails = 0, n;
	long r = 0;

	setup(16);
	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = pm_mmap(mm, x, 4 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE, NULL, 0);
		pm_fail_nth(m, 0);
		if (r != -ENOMEM)
			break;
		fails++;
		if (pm_access(mm, x, &(char){ 0 }, 1, 0) != -EFAULT) {
			diag("a failed mmap left a mapping (n = %d)", n);
			break;
		}
	}
	is_int(r, x, "mmap succeeds once the injected failure is past it (n = %d)", n);
	ok(fails >= 1, "and failed with -ENOMEM before (%d times)", fails);
	ok(pmt_fill(mm, x, 4, 0) && pmt_check(mm, x, 4, 0), "the mapping works");
	teardown("fail mmap");
}

/* munmap or mprotect of the middle of a VMA (a split): -ENOMEM changes nothing. */
static void test_fail_split(bool prot)
{
	const unsigned long x = 0x10000000UL;
	int fails = 0, bad = 0, n;
	long r = 0;

	setup(16);
	is_int(pmt_map_fixed(mm, x, 8 * PG, RW), x, "map 8 pages");
	ok(pmt_fill(mm, x, 8, 0), "stamp them");
	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = prot ? pm_mprotect(mm, x + 3 * PG, 2 * PG, PM_PROT_READ) :
			   pm_munmap(mm, x + 3 * PG, 2 * PG);
		pm_fail_nth(m, 0);
		if (r != -ENOMEM)
			break;
		fails++;
		/* Nothing changed: every page readable and writable with its data. */
		if (!pmt_check(mm, x, 8, 0) || !pmt_fill(mm, x, 8, 0))
			bad++;
	}
	is_int(r, 0, "%s succeeds once past the failure (n = %d)", prot ? "mprotect" : "munmap", n);
	ok(fails >= 1, "the split failed with -ENOMEM before (%d times)", fails);
	is_int(bad, 0, "each -ENOMEM left every page as it was");
	if (prot) {
		is_int(pm_access(mm, x + 3 * PG, &(char){ 0 }, 1, 1), -EFAULT, "now read-only");
		ok(pmt_check(mm, x, 8, 0), "all data intact");
	} else {
		is_int(pm_access(mm, x + 3 * PG, &(char){ 0 }, 1, 0), -EFAULT, "now unmapped");
		ok(pmt_check(mm, x, 3, 0) && pmt_check(mm, x + 5 * PG, 3, 0),
		   "data either side intact");
	}
	teardown(prot ? "fail mprotect split" : "fail munmap split");
}

/* munmap of one page of a THP: a PMD split and a VMA split, each may fail. */
static void test_fail_thp_split(void)
{
	const unsigned long x = 0x20000000UL;
	int fails = 0, bad = 0, n;
	long r = 0;

	setup(16);
	is_int(pmt_map_fixed(mm, x, THP, RW), x, "map 2 MiB");
	is_int(pm_madvise(mm, x, THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	ok(pmt_fill(mm, x, 512, 0), "stamp 512 pages");
	is_int(pmt_order_at(mm, x), 9, "it is a THP");
	struct pm_stats s0 = pmt_stats(m);

	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = pm_munmap(mm, x + 10 * PG, PG);
		pm_fail_nth(m, 0);
		if (r != -ENOMEM)
			break;
		fails++;
		if (!pmt_check(mm, x, 512, 0))
			bad++;
	}
	is_int(r, 0, "munmap succeeds once past the failure (n = %d)", n);
	ok(fails >= 1, "and failed with -ENOMEM before (%d times)", fails);
	is_int(bad, 0, "each -ENOMEM left all 512 pages readable with their data");
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "exactly one split in the end");
	ok(pmt_check(mm, x, 10, 0) && pmt_check(mm, x + 11 * PG, 501, 0), "the rest intact");
	teardown("fail THP split");
}

static void test_fail_fault(void)
{
	const unsigned long x = 0x10000000UL;
	int n, fails = 0, others = 0;
	long r = 0;

	setup(16);
	is_int(pmt_map_fixed(mm, x, 4 * PG, RW), x, "map 4 pages in a fresh mm");
	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = pm_fault(mm, x + PG, PM_FAULT_WRITE);
		pm_fail_nth(m, 0);
		if (r == 0)
			break;
		if (r == -ENOMEM)
			fails++;
		else
			others++;
		if (n == 1)
			is_int(r, -ENOMEM, "the first allocation of a write fault fails: -ENOMEM");
	}
	is_int(r, 0, "the fault succeeds once past the failure (n = %d)", n);
	is_int(fails, n - 1, "every earlier try was -ENOMEM");
	is_int(others, 0, "never another error");
	ok(pmt_reads_zero(mm, x, 4), "the pages read zero");
	ok(pmt_fill(mm, x, 4, 0) && pmt_check(mm, x, 4, 0), "and take data");

	/* pm_access of 4 fresh pages with each allocation failing in turn. */
	const unsigned long y = 0x20000000UL;
	int bad = 0;

	is_int(pmt_map_fixed(mm, y, 4 * PG, RW), y, "map 4 more pages");
	for (n = 1; n <= MAX_N; n++) {
		char buf[4 * PG];

		memset(buf, n, sizeof(buf));
		pm_fail_nth(m, n);
		r = pm_access(mm, y, buf, sizeof(buf), 1);
		pm_fail_nth(m, 0);
		if (r == (long)sizeof(buf))
			break;
		if (r != -ENOMEM && (r <= 0 || r % PG))
			bad++;
		if (r > 0) {
			char back[4 * PG];

			if (pm_access(mm, y, back, r, 0) != r || memcmp(back, buf, r))
				bad++;
		}
		pm_madvise(mm, y, 4 * PG, PM_MADV_DONTNEED);
	}
	is_int(r, 4 * PG, "a 4-page write succeeds once past the failures (n = %d)", n);
	is_int(bad, 0, "each failed write was -ENOMEM or whole pages that read back");
	teardown("fail fault");
}

static void test_fail_thp_fault(void)
{
	const unsigned long x = 0x40000000UL;
	int n, fails = 0, others = 0;
	long r = 0;
	struct pm_stats s0, s1;
	bool eager;

	setup(64);
	eager = pm_machine_flags(m) & PM_MACHINE_RANGE_MM;
	pm_machine_stats(m, &s0);
	is_int(pmt_map_fixed(mm, x, 8 * THP, RW), x, "map 16 MiB (8 THP windows)");
	pm_machine_stats(m, &s1);
	/* The range design's mmap fills the PGD and PUD entries (a PUD and a PMD table). */
	is_int(s1.pgtable_allocs - s0.pgtable_allocs, eager ? 2 : 0,
	       "mmap made %d page tables", eager ? 2 : 0);
	is_int(pm_madvise(mm, x, 8 * THP, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");

	/* Window 0 in a fresh mm: the page tables fail first. */
	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = pm_fault(mm, x, PM_FAULT_WRITE);
		pm_fail_nth(m, 0);
		if (r == 0)
			break;
		if (r == -ENOMEM)
			fails++;
		else
			others++;
	}
	is_int(r, 0, "window 0: the fault succeeds once past the failures (n = %d)", n);
	if (eager) /* a THP fault whose deposit table fails falls back to 4 KiB pages */
		is_int(fails, 0, "with the upper tables made by mmap, no failure fails the fault");
	else
		ok(fails >= 1, "page tables failed first (-ENOMEM, %d times)", fails);
	is_int(others, 0, "no other error");
	ok(pmt_reads_zero(mm, x, 4) && pmt_fill(mm, x, 4, 0) && pmt_check(mm, x, 4, 0),
	   "window 0 reads zero, takes data");

	/*
	 * Windows 1..6 share window 0's tables: failing the n-th allocation hits the folio (or
	 * a table deposited for a later split). A failed folio falls back to 4 KiB; once n is
	 * past every allocation the fault maps a THP.
	 */
	int fallbacks = 0, thps = 0, last = 0;

	for (n = 1; n <= 6; n++) {
		unsigned long w = x + n * THP;
		struct pm_stats a = pmt_stats(m), b;

		pm_fail_nth(m, n);
		r = pm_fault(mm, w + 5 * PG, PM_FAULT_WRITE);
		pm_fail_nth(m, 0);
		b = pmt_stats(m);
		if (r == 0 && b.thp_faults > a.thp_faults) {
			thps++;
			last = 9;
		} else if (r == 0) {
			if (b.thp_fallbacks > a.thp_fallbacks)
				fallbacks++;
			last = 0;
		} else if (r != -ENOMEM) {
			others++;
		}
		if (r == 0 && pmt_order_at(mm, w + 5 * PG) != last)
			others++;
		if (r == 0 &&
		    !(pmt_reads_zero(mm, w, 8) && pmt_fill(mm, w, 8, 0) && pmt_check(mm, w, 8, 0)))
			others++;
	}
	ok(fallbacks >= 1, "a failed folio allocation fell back to 4 KiB (%d times)", fallbacks);
	ok(thps >= 1, "with enough allocations left the fault maps a THP (%d times)", thps);
	is_int(last, 9, "window 6 is a THP");
	is_int(others, 0, "never another error; orders and data as counted");
	is_int(pm_machine_check(m), 0, "consistent");
	teardown("fail THP fault");
}

static void test_fail_pin(void)
{
	const unsigned long x = 0x10000000UL;
	struct pm_page *pages[8];
	int n, bad = 0, partial = 0;
	long r = 0;

	setup(16);
	is_int(pmt_map_fixed(mm, x, 8 * PG, RW), x, "map 8 pages");
	for (n = 1; n <= MAX_N; n++) {
		pm_fail_nth(m, n);
		r = pm_pin_user_pages(mm, x, 8, PM_FOLL_WRITE, pages);
		pm_fail_nth(m, 0);
		if (n == 1)
			is_int(r, -ENOMEM,
			       "pin of unpopulated pages, first allocation fails: -ENOMEM");
		if (r > 0) {
			if (r < 8)
				partial++;
			pm_unpin_user_pages(pages, r);
		} else if (r != -ENOMEM) {
			bad++;
		}
		if (r == 8)
			break;
		pm_madvise(mm, x, 8 * PG, PM_MADV_DONTNEED);
	}
	is_int(r, 8, "the pin succeeds once past the failures (n = %d)", n);
	is_int(bad, 0, "no error but -ENOMEM");
	ok(partial >= 1, "a failure after the first page gives a partial count (%d times)",
	   partial);

	/* A fast pin keeps its lockless head when the slow tail runs out of memory. */
	const unsigned long y = 0x20000000UL;

	is_int(pmt_map_fixed(mm, y, 8 * PG, RW), y, "map 8 more pages");
	ok(pmt_fill(mm, y, 4, 0), "populate the first 4");
	pm_fail_nth(m, 1);
	r = pm_pin_user_pages_fast(mm, y, 8, PM_FOLL_WRITE, pages);
	pm_fail_nth(m, 0);
	is_int(r, 4, "pin_fast: 4 present pages, then -ENOMEM for the tail -> 4");
	if (r > 0)
		pm_unpin_user_pages(pages, r);
	struct pm_stats s = pmt_stats(m);

	is_int(s.nr_foll_pin_acquired, s.nr_foll_pin_released, "pins balanced");
	teardown("fail pin");
}

int main(void)
{
	plan_no_plan();
	test_tiny_machine();
	test_full_cross_cpu();
	test_fail_mmap();
	test_fail_split(false);
	test_fail_split(true);
	test_fail_thp_split();
	test_fail_fault();
	test_fail_thp_fault();
	test_fail_pin();
	return done_testing();
}
