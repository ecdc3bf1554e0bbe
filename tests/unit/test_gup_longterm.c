// SPDX-License-Identifier: MIT
/*
 * test_gup_longterm.c - gup_test's long-term pin sessions, pm_gup_test_longterm()
 * (PIN_LONGTERM_TEST_START/STOP/READ, src/consumers/gup_test.c), and the mm teardown notifiers
 * that end them.
 *
 *  - the session's rules, as mm/gup_test.c has them: START -EINVAL when a session exists, for
 *    unknown flags, an unaligned address or size, size 0 or above LONG_MAX; a failed pin call
 *    releases everything; READ copies the pinned pages in order, -EINVAL without a session;
 *    STOP always 0;
 *  - one session per mm: pm_mm_destroy() ends it (the pins go, the frames come back), fork
 *    does not copy it, two mms have two;
 *  - Linux's gup_longterm.c (written anew): R/O and R/W long-term pins, GUP and GUP-fast, in
 *    MAP_SHARED and MAP_PRIVATE mappings of a memfd (a shmem object), and of anonymous memory
 *    (4 KiB and THP). pinmm's files are all tmpfs-like, so every case must work; a working
 *    pin must hold every page until STOP and follow the process's later writes;
 *  - Linux's cow.c R/O long-term pin cases that read back with READ: a R/O pin of a page
 *    shared with a live child, previously shared, or exclusive but mapped R/O, on each of
 *    cow.c's anonymous layouts and on an anonymous hugetlb page; and of the zero page, a
 *    read-faulted THP area (cow.c's huge zero page case: pinmm has none, a read fault maps a
 *    THP) and a memfd page (4 KiB or hugetlb) in a private mapping. The process writes after
 *    the pin; READ must return what the process now reads;
 *  - a R/W long-term pin held across fork (cow.c's io_uring fork case): the parent's writes
 *    show through READ, the child's never do;
 *  - allocation failures while START faults leave no pin and no session; threads run sessions
 *    on their own mms, race for one mm's session, and destroy mms with sessions alive; a
 *    process fork() while a thread runs sessions leaves the child able to run its own.
 *
 * The hugetlb backings of gup_longterm.c (memfd hugetlb and anonymous PM_MAP_HUGETLB) and of
 * cow.c (run_with_hugetlb, run_with_memfd_hugetlb) run on machines with a hugetlb pool.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define W PM_PIN_LONGTERM_TEST_FLAG_USE_WRITE
#define FAST PM_PIN_LONGTERM_TEST_FLAG_USE_FAST

/* ---- helpers ---- */

/* Pins taken and not yet released on @m. */
static long pins_held(struct pm_machine *m)
{
	struct pm_stats s = pmt_stats(m);

	return (long)(s.nr_foll_pin_acquired - s.nr_foll_pin_released);
}

/* Does READ into a fresh buffer of @n pages give back pages tagged @tag, 0..@n-1? */
static long read_bad(struct pm_mm *mm, unsigned long n, uint32_t tag)
{
	unsigned long tmp = pmt_map_anon(mm, n * PG, RW, false);
	int r = pmt_longterm_read(mm, tmp);
	long bad = r ? -1 : pmt_bad_tag(mm, tmp, n, tag, 0);

	if (r)
		diag("READ: %d", r);
	ASSERT_EQ(pm_munmap(mm, tmp, n * PG), 0);
	return bad;
}

/* ---- the session's rules ---- */

static void test_arguments(void)
{
	const char *what = "arguments";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long x = pmt_map_anon(mm, 8 * PG, RW, false);
	struct pm_pin_longterm_test a = { .addr = x, .size = 8 * PG };
	uint64_t dst = x;

	pmt_touch(mm, x, 8 * PG);
	is_int(pmt_longterm_start(mm, x, 8 * PG, 4), -EINVAL, "%s: START, unknown flag 4", what);
	is_int(pmt_longterm_start(mm, x, 8 * PG, 0x80000000u), -EINVAL,
	       "%s: START, unknown flag 1<<31", what);
	is_int(pmt_longterm_start(mm, x + 1, 8 * PG, 0), -EINVAL, "%s: START, unaligned address",
	       what);
	is_int(pmt_longterm_start(mm, x + 2048, 8 * PG, FAST), -EINVAL,
	       "%s: START, address in a page", what);
	is_int(pmt_longterm_start(mm, x, 8 * PG - 1, 0), -EINVAL, "%s: START, unaligned size",
	       what);
	is_int(pmt_longterm_start(mm, x, 100, W), -EINVAL, "%s: START, size below a page", what);
	is_int(pmt_longterm_start(mm, x, 0, 0), -EINVAL, "%s: START, size 0", what);
	is_int(pmt_longterm_start(mm, x, 1ULL << 63, 0), -EINVAL, "%s: START, size above LONG_MAX",
	       what);
	is_int(pmt_longterm_start(mm, x, ~0ULL & ~(PG - 1), FAST), -EINVAL,
	       "%s: START, size ~0 & PAGE_MASK", what);
	is_int(pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_START, NULL), -EFAULT,
	       "%s: START, NULL arg (copy_from_user)", what);
	is_int(pm_gup_test_longterm(NULL, PM_PIN_LONGTERM_TEST_START, &a), -EINVAL,
	       "%s: START, NULL mm", what);
	is_int(pm_gup_test_longterm(NULL, PM_PIN_LONGTERM_TEST_STOP, NULL), -EINVAL,
	       "%s: STOP, NULL mm", what);
	is_int(pm_gup_test_longterm(mm, PM_DUMP_USER_PAGES_TEST, &a), -EINVAL,
	       "%s: command 6 is not a session command", what);
	is_int(pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_READ + 1, &a), -EINVAL,
	       "%s: command 10", what);
	is_int(pins_held(m), 0, "%s: nothing pinned by the refusals", what);
	is_int(pmt_longterm_read(mm, x), -EINVAL, "%s: READ without a session", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP without a session", what);
	is_int(pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_READ, &dst), -EINVAL,
	       "%s: still no session after STOP", what);
	{
		struct pm_gup_test g = { .addr = x, .size = PG, .nr_pages_per_call = 1 };

		is_int(pm_gup_test(mm, PM_PIN_LONGTERM_TEST_START, &g), -EINVAL,
		       "%s: pm_gup_test() refuses the session commands", what);
	}
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* START, a second START, READ, STOP, STOP: the life of one session. */
static void test_session(bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long x = pmt_map_anon(mm, 8 * PG, RW, false);
	unsigned long y = pmt_map_anon(mm, 4 * PG, RW, false);
	uint32_t f = fast ? FAST : 0;
	struct pm_stats s0, s1;
	char what[48];

	snprintf(what, sizeof(what), "session (%s)", fast ? "fast" : "slow");
	is_int(pmt_put_tag(mm, x, 8, 0x21, 0), 8, "%s: fill", what);
	pmt_touch(mm, y, 4 * PG);
	s0 = pmt_stats(m);
	is_int(pmt_longterm_start(mm, x, 8 * PG, f), 0, "%s: START", what);
	s1 = pmt_stats(m);
	is_int(pins_held(m), 8, "%s: 8 pages pinned", what);
	ok(fast ? s1.gup_fast_pages - s0.gup_fast_pages == 8 && s1.gup_slow_pages == s0.gup_slow_pages
		: s1.gup_slow_pages - s0.gup_slow_pages == 8 && s1.gup_fast_pages == s0.gup_fast_pages,
	   "%s: the %s path took the 8 present pages", what, fast ? "lockless" : "slow");
	is_int(pmt_longterm_start(mm, y, 4 * PG, f), -EINVAL, "%s: a second START is -EINVAL",
	       what);
	is_int(pmt_longterm_start(mm, y, 0, 0x40), -EINVAL, "%s: ... whatever its arguments", what);
	is_int(pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_START, NULL), -EINVAL,
	       "%s: ... even a NULL one (the session is looked at first)", what);
	is_int(pins_held(m), 8, "%s: the first session still holds its 8 pins", what);
	is_int(read_bad(mm, 8, 0x21), 0, "%s: READ returns the 8 pages in order", what);
	is_int(pm_gup_test_longterm(mm, PM_PIN_LONGTERM_TEST_READ, NULL), -EFAULT,
	       "%s: READ, NULL arg", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	is_int(pins_held(m), 0, "%s: STOP released every pin", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP again is 0", what);
	is_int(pmt_longterm_read(mm, y), -EINVAL, "%s: READ after STOP is -EINVAL", what);
	is_int(pmt_longterm_start(mm, y, 4 * PG, f | W), 0, "%s: a new START after STOP", what);
	is_int(pins_held(m), 4, "%s: ... pins its 4 pages", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* A pin call that fails ends START with its error and leaves nothing pinned. */
static void test_start_fails(bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long x = pmt_map_anon(mm, 8 * PG, RW, false);
	unsigned long r = pmt_map_anon(mm, 4 * PG, PM_PROT_READ, false);
	uint32_t f = fast ? FAST : 0;
	char what[48];

	snprintf(what, sizeof(what), "START fails (%s)", fast ? "fast" : "slow");
	pmt_touch(mm, x, 8 * PG);
	ASSERT_EQ(pm_munmap(mm, x + 5 * PG, PG), 0);
	is_int(pmt_longterm_start(mm, x, 8 * PG, f), -EFAULT, "%s: a hole at page 5 is -EFAULT",
	       what);
	is_int(pins_held(m), 0, "%s: ... the 5 pages before it are released", what);
	is_int(pmt_longterm_read(mm, x), -EINVAL, "%s: ... and there is no session", what);
	is_int(pmt_longterm_start(mm, x + 5 * PG, PG, f), -EFAULT, "%s: START in the hole", what);
	is_int(pmt_longterm_start(mm, x, 1UL << 40, f), -EFAULT,
	       "%s: a 1 TiB size over 5 pages fails at the hole, not for memory", what);
	is_int(pmt_longterm_start(mm, r, 4 * PG, f | W), -EFAULT, "%s: R/W START of a R/O mapping",
	       what);
	is_int(pmt_longterm_start(mm, PM_TASK_SIZE - PG, 2 * PG, f), -EFAULT,
	       "%s: a range past the user address space", what);
	is_int(pins_held(m), 0, "%s: nothing pinned", what);
	is_int(pmt_longterm_start(mm, r, 4 * PG, f), 0, "%s: R/O START of the R/O mapping works",
	       what);
	is_int(pins_held(m), 4, "%s: ... 4 pins", what);
	is_int(read_bad(mm, 4, 0), 0, "%s: ... READ gives zeros", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* READ: in order, to any writable address of the mm, -EFAULT where it cannot write. */
static void test_read(void)
{
	const char *what = "READ";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long x = pmt_map_anon(mm, 16 * PG, RW, false);
	unsigned long ro = pmt_map_anon(mm, 16 * PG, PM_PROT_READ, false);
	unsigned long d = pmt_map_anon(mm, 16 * PG, RW, false);

	ASSERT_EQ(pmt_put_tag(mm, x, 16, 0x31, 0), 16);
	is_int(pmt_longterm_start(mm, x + 4 * PG, 8 * PG, FAST), 0, "%s: START of pages 4..11",
	       what);
	is_int(pmt_longterm_read(mm, d), 0, "%s: into another mapping", what);
	is_int(pmt_bad_tag(mm, d, 8, 0x31, 4), 0, "%s: pages 4..11, in order", what);
	is_int(pmt_reads_zero(mm, d + 8 * PG, 8), 1, "%s: nothing written past them", what);
	is_int(pmt_longterm_read(mm, x + 5 * PG), 0,
	       "%s: onto the pinned range itself, one page on", what);
	{
		long bad = 0;

		/* Page by page, in order, as Linux's: each copy lands on the next pinned page
		 * before that one is read, so page 4 is carried along through pages 5..12. */
		for (unsigned long i = 0; i < 8; i++)
			bad += pmt_bad_tag(mm, x + (5 + i) * PG, 1, 0x31, 4);
		is_int(bad, 0, "%s: ... page 4's data carried through pages 5..12", what);
	}
	ASSERT_EQ(pmt_put_tag(mm, x, 16, 0x31, 0), 16);
	is_int(pmt_longterm_read(mm, x + 4 * PG), 0, "%s: onto the pinned pages themselves", what);
	is_int(pmt_bad_tag(mm, x, 16, 0x31, 0), 0, "%s: ... changes nothing", what);
	is_int(pmt_longterm_read(mm, ro), -EFAULT, "%s: into a R/O mapping is -EFAULT", what);
	is_int(pmt_reads_zero(mm, ro, 8), 1, "%s: ... which stays zero", what);
	ASSERT_EQ(pm_munmap(mm, d + 4 * PG, PG), 0);
	is_int(pmt_longterm_read(mm, d), -EFAULT, "%s: into a range with a hole at page 4", what);
	is_int(pmt_bad_tag(mm, d, 4, 0x31, 4), 0, "%s: ... the 4 pages before it are copied",
	       what);
	is_int(pmt_longterm_read(mm, PM_TASK_SIZE - 2 * PG), -EFAULT,
	       "%s: past the user address space", what);
	is_int(pmt_longterm_read(mm, 0), -EFAULT, "%s: to address 0", what);
	is_int(pins_held(m), 8, "%s: the session outlives failed READs", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- one session per mm: destroy ends it, fork does not copy it ---- */

static void test_per_mm(void)
{
	const char *what = "per mm";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *a = pm_mm_create(m), *b = pm_mm_create(m);
	unsigned long xa = pmt_map_anon(a, 4 * PG, RW, false);
	unsigned long xb = pmt_map_anon(b, 2 * PG, RW, false);

	ASSERT_EQ(pmt_put_tag(a, xa, 4, 0x41, 0), 4);
	ASSERT_EQ(pmt_put_tag(b, xb, 2, 0x42, 0), 2);
	is_int(pmt_longterm_start(a, xa, 4 * PG, 0), 0, "%s: START on mm A", what);
	is_int(pmt_longterm_start(b, xb, 2 * PG, W), 0, "%s: START on mm B, while A has a session",
	       what);
	is_int(pins_held(m), 6, "%s: 4 + 2 pins", what);
	is_int(read_bad(a, 4, 0x41), 0, "%s: A reads A's pages", what);
	is_int(read_bad(b, 2, 0x42), 0, "%s: B reads B's pages", what);
	is_int(pmt_longterm_stop(a), 0, "%s: STOP on A", what);
	is_int(pins_held(m), 2, "%s: B's pins stay", what);
	is_int(read_bad(b, 2, 0x42), 0, "%s: B's session stays", what);
	is_int(pmt_longterm_read(a, xa), -EINVAL, "%s: A has none", what);
	is_int(pmt_longterm_stop(b), 0, "%s: STOP on B", what);
	pm_mm_destroy(a);
	pm_mm_destroy(b);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* pm_mm_destroy() with a session alive releases its pins; the next mm starts without one. */
static void test_destroy_ends(void)
{
	const char *what = "destroy ends the session";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	long bad_new = 0, bad_pins = 0, bad_frames = 0;

	for (int i = 0; i < 64; i++) {
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long x;

		ASSERT_TRUE(mm);
		/* A new mm, often at the address of the one destroyed last: no session. */
		x = pmt_map_anon(mm, 4 * PG, RW, (i & 1) != 0);
		bad_new += pmt_longterm_read(mm, x) != -EINVAL;
		pmt_touch(mm, x, 4 * PG);
		ASSERT_EQ(pmt_longterm_start(mm, x, 4 * PG, (i & 2) ? FAST : W), 0);
		bad_pins += pins_held(m) != 4;
		pm_mm_destroy(mm);
		bad_pins += pins_held(m) != 0;
		pm_rcu_barrier();
		bad_frames += pm_machine_free_pages(m) != free0;
	}
	is_int(bad_new, 0, "%s: a new mm never finds a session", what);
	is_int(bad_pins, 0, "%s: 4 pins while alive, none after pm_mm_destroy", what);
	is_int(bad_frames, 0, "%s: every frame back after each pm_mm_destroy", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * Fork copies no session; the child may start its own, and its end (STOP or destroy) leaves the
 * parent's alone. The pages pinned R/W are copied for the child at fork (maybe pinned), so the
 * parent's writes show through READ and the child's never do (cow.c's io_uring fork case).
 */
static void test_fork(bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	unsigned long x = pmt_map_anon(p, 8 * PG, RW, false);
	uint32_t f = (fast ? FAST : 0) | W;
	char what[48];

	snprintf(what, sizeof(what), "fork (%s)", fast ? "fast" : "slow");
	ASSERT_EQ(pmt_put_tag(p, x, 8, 0x51, 0), 8);
	is_int(pmt_longterm_start(p, x, 8 * PG, f), 0, "%s: R/W START in the parent", what);
	c = pmt_fork(p);
	is_int(pmt_longterm_read(c, x), -EINVAL, "%s: the child has no session", what);
	is_int(pmt_longterm_stop(c), 0, "%s: STOP in the child", what);
	is_int(pins_held(m), 8, "%s: ... leaves the parent's pins", what);
	is_int(pmt_put_tag(p, x, 8, 0x52, 0), 8, "%s: the parent writes", what);
	is_int(pmt_put_tag(c, x, 8, 0x53, 0), 8, "%s: the child writes", what);
	is_int(read_bad(p, 8, 0x52), 0, "%s: READ shows the parent's writes, not the child's",
	       what);
	is_int(pmt_longterm_start(c, x, 8 * PG, f & ~W), 0, "%s: the child starts its own", what);
	is_int(pins_held(m), 16, "%s: 8 + 8 pins", what);
	is_int(read_bad(c, 8, 0x53), 0, "%s: the child's READ shows the child's pages", what);
	is_int(read_bad(p, 8, 0x52), 0, "%s: the parent's still the parent's", what);
	pm_mm_destroy(c);
	is_int(pins_held(m), 8, "%s: the child's destroy ended its session only", what);
	is_int(read_bad(p, 8, 0x52), 0, "%s: the parent's session goes on", what);
	is_int(pmt_longterm_stop(p), 0, "%s: STOP", what);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- gup_longterm.c ---- */

enum backing {
	BK_MEMFD,    /* a shmem object (memfd_create, tmpfs): must work in every case */
	BK_ANON,     /* anonymous memory, 4 KiB pages (MAP_SHARED|MAP_ANONYMOUS is shmem) */
	BK_ANON_THP, /* anonymous memory, 2 MiB, MADV_HUGEPAGE */
	BK_MEMFD_HUGETLB, /* a hugetlb object (memfd MFD_HUGETLB), one 2 MiB page */
	BK_ANON_HUGETLB,  /* PM_MAP_HUGETLB anonymous memory, one 2 MiB page */
	NR_BACKINGS
};

static const char *const backing_name[NR_BACKINGS] = { "memfd", "anon", "anon THP",
						       "memfd hugetlb", "anon hugetlb" };

enum lt_type { LT_RO, LT_RO_FAST, LT_RW, LT_RW_FAST, NR_LT_TYPES };

static const char *const lt_type_name[NR_LT_TYPES] = {
	"R/O longterm GUP pin", "R/O longterm GUP-fast pin", "R/W longterm GUP pin",
	"R/W longterm GUP-fast pin",
};

/*
 * gup_longterm.c's do_test(): fill, map R/O for the R/O types, START. Linux only asks that it
 * works (or, for R/W on a shared mapping of a file system that cannot, fails with EFAULT); here
 * the pin must also hold every page until STOP, READ must give the data, and after the mapping
 * is made writable again the process's writes must reach the pinned pages.
 */
static void test_gup_longterm(enum backing bk, enum lt_type type, bool shared)
{
	bool hugetlb = bk == BK_MEMFD_HUGETLB || bk == BK_ANON_HUGETLB;
	struct pm_config cfg = { .mem_bytes = 68UL << 20, .nr_hugepages = hugetlb ? 2 : 0 };
	struct pm_machine *m = pm_machine_create(&cfg);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long size = bk == BK_ANON_THP || hugetlb ? PM_PMD_SIZE : PG, n = size / PG;
	bool rw = type == LT_RW || type == LT_RW_FAST;
	bool fast = type == LT_RO_FAST || type == LT_RW_FAST;
	bool file = bk == BK_MEMFD || bk == BK_MEMFD_HUGETLB;
	int flags = (shared ? PM_MAP_SHARED : PM_MAP_PRIVATE) | (file ? 0 : PM_MAP_ANONYMOUS) |
		    (bk == BK_ANON_HUGETLB ? PM_MAP_HUGETLB : 0);
	struct pm_shmem *f = NULL;
	char what[112];
	long x;

	snprintf(what, sizeof(what), "gup_longterm: %s in MAP_%s %s mapping", lt_type_name[type],
		 shared ? "SHARED" : "PRIVATE", backing_name[bk]);
	ASSERT_TRUE(m && mm);
	if (file) {
		/* ftruncate + fallocate */
		f = hugetlb ? pm_shmem_create_hugetlb(m, size) : pm_shmem_create(m, size, 0);
		ASSERT_TRUE(f);
	}
	x = pm_mmap(mm, 0, size, RW, flags, f, 0);
	ASSERT_TRUE(x > 0);
	if (bk == BK_ANON_THP)
		ASSERT_EQ(pm_madvise(mm, x, size, PM_MADV_HUGEPAGE), 0);
	/* "memset(mem, 0, size)": fault in for write, so that GUP-fast finds the pages. */
	is_int(pmt_put_tag(mm, x, n, 0x61, 0), n, "%s: fill", what);
	if (!rw)
		is_int(pm_mprotect(mm, x, size, PM_PROT_READ), 0, "%s: mprotect R", what);
	is_int(pmt_longterm_start(mm, x, size, (fast ? FAST : 0) | (rw ? W : 0)), 0,
	       "%s: should work", what);
	is_int(pins_held(m), n, "%s: every page pinned", what);
	is_int(read_bad(mm, n, 0x61), 0, "%s: READ gives the data", what);
	if (!rw)
		ASSERT_EQ(pm_mprotect(mm, x, size, RW), 0);
	is_int(pmt_put_tag(mm, x, n, 0x62, 0), n, "%s: the process writes", what);
	is_int(read_bad(mm, n, 0x62), 0, "%s: READ sees the write", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	is_int(pins_held(m), 0, "%s: STOP released every pin", what);
	pm_mm_destroy(mm);
	if (f)
		pm_shmem_put(f);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- cow.c: R/O long-term pins read back with READ ---- */

enum ro_pin_test { RO_SHARED, RO_PREVIOUSLY_SHARED, RO_EXCLUSIVE, NR_RO_TESTS };

static const char *const ro_test_name[NR_RO_TESTS] = {
	"R/O-mapped shared page", "R/O-mapped previously-shared page",
	"R/O-mapped exclusive page",
};

/*
 * cow.c's do_test_ro_pin() on an anonymous layout: share with a child (which stays, or has
 * gone), or map R/O and back; take a R/O long-term pin (it must unshare); the process writes;
 * READ must return what the process reads now. The child keeps its data.
 */
static void test_ro_pin(enum pmt_layout l, enum ro_pin_test t, bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c = NULL;
	struct pmt_area ar;
	char what[128];

	snprintf(what, sizeof(what), "cow: R/O GUP%s pin on %s, %s", fast ? "-fast" : "",
		 ro_test_name[t], pmt_layout_name[l]);
	ASSERT_TRUE(mm);
	pmt_area_setup(m, mm, l, 0x71, false, &ar);
	switch (t) {
	case RO_SHARED:
	case RO_PREVIOUSLY_SHARED:
		c = pmt_fork(mm);
		if (t == RO_PREVIOUSLY_SHARED) {
			pm_mm_destroy(c);
			c = NULL;
		}
		break;
	case RO_EXCLUSIVE:
		/* cow.c maps R/O and back with soft-dirty cleared, so that the page stays mapped
		 * R/O; pinmm's mprotect maps an exclusive page writable at once, so the pin is
		 * taken while the mapping is R/O, and the mapping is made RW after it. */
		ASSERT_EQ(pm_mprotect(mm, ar.addr, ar.len, PM_PROT_READ), 0);
		break;
	default:
		break;
	}
	is_int(pmt_longterm_start(mm, ar.addr, ar.n * PG, fast ? FAST : 0), 0, "%s: START", what);
	if (t == RO_EXCLUSIVE)
		ASSERT_EQ(pm_mprotect(mm, ar.addr, ar.len, RW), 0);
	is_int(pmt_put_tag(mm, ar.addr, ar.n, 0x72, 0), ar.n, "%s: modify the pages", what);
	is_int(read_bad(mm, ar.n, 0x72), 0, "%s: READ sees the modification", what);
	if (c) {
		is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x71, 0), 0, "%s: the child keeps its data",
		       what);
		pm_mm_destroy(c);
	}
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * cow.c's run_with_hugetlb() for the R/O pin cases: one private anonymous PM_MAP_HUGETLB page,
 * populated, on a pool with a second page free (cow.c checks that one more page is there, so
 * that unsharing copies rather than taking the page from the child: unmap_ref_private, which
 * test_hugetlb.c covers). The unshare copies the whole 2 MiB page; the child keeps the old one.
 */
static void test_ro_pin_hugetlb(enum ro_pin_test t, bool fast)
{
	struct pm_config cfg = { .mem_bytes = 68UL << 20, .nr_hugepages = 2 };
	struct pm_machine *m = pm_machine_create(&cfg);
	size_t free0 = pm_machine_free_pages(m), total = 0, hfree = 0;
	struct pm_mm *mm = pm_mm_create(m), *c = NULL;
	unsigned long n = PM_PMD_SIZE / PG;
	struct pm_stats s0;
	char what[128];
	long x;

	snprintf(what, sizeof(what), "cow: R/O GUP%s pin on %s, hugetlb", fast ? "-fast" : "",
		 ro_test_name[t]);
	ASSERT_TRUE(m && mm);
	x = pm_mmap(mm, 0, PM_PMD_SIZE, RW, ANON | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(x > 0);
	is_int(pmt_put_tag(mm, x, n, 0x71, 0), n, "%s: populate", what);
	switch (t) {
	case RO_SHARED:
	case RO_PREVIOUSLY_SHARED:
		c = pmt_fork(mm);
		if (t == RO_PREVIOUSLY_SHARED) {
			pm_mm_destroy(c);
			c = NULL;
		}
		break;
	case RO_EXCLUSIVE:
		ASSERT_EQ(pm_mprotect(mm, x, PM_PMD_SIZE, PM_PROT_READ), 0);
		break;
	default:
		break;
	}
	s0 = pmt_stats(m);
	is_int(pmt_longterm_start(mm, x, PM_PMD_SIZE, fast ? FAST : 0), 0, "%s: START", what);
	is_int(pins_held(m), n, "%s: every subpage pinned", what);
	is_int(pmt_stats(m).cow_copies - s0.cow_copies, t == RO_SHARED,
	       "%s: unshared by a copy only while the child maps it", what);
	pm_hugetlb_pool(m, &total, &hfree);
	is_int(hfree, t == RO_SHARED ? 0 : 1, "%s: pool pages in use", what);
	if (t == RO_EXCLUSIVE)
		ASSERT_EQ(pm_mprotect(mm, x, PM_PMD_SIZE, RW), 0);
	is_int(pmt_put_tag(mm, x, n, 0x72, 0), n, "%s: modify the page", what);
	is_int(read_bad(mm, n, 0x72), 0, "%s: READ sees the modification", what);
	if (c) {
		is_int(pmt_bad_tag(c, x, n, 0x71, 0), 0, "%s: the child keeps its data", what);
		pm_mm_destroy(c);
	}
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	is_int(pins_held(m), 0, "%s: STOP released every pin", what);
	pm_mm_destroy(mm);
	pm_hugetlb_pool(m, &total, &hfree);
	is_int(hfree, total, "%s: the pool is whole again", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

enum non_anon { NA_ZERO, NA_ZERO_THP, NA_MEMFD, NA_MEMFD_HUGETLB, NR_NON_ANON };

static const char *const non_anon_name[NR_NON_ANON] = {
	"shared zeropage", "read-faulted THP area (no huge zeropage: a read fault maps a THP)",
	"memfd", "memfd hugetlb",
};

/*
 * cow.c's non-anonymous cases (test_ro_pin): a private mapping whose pages are not the
 * process's own - the zero page, or a memfd's page cache - read-faulted; a R/O long-term pin
 * must give the process a page of its own first, which its later writes reach. The other
 * mapping (smem) keeps reading the old data. The memfd hugetlb case is cow.c's
 * run_with_memfd_hugetlb(): a pool of two, one for the page cache (the shared mapping's
 * reservation), one for the private copy (the private mapping's).
 */
static void test_ro_pin_non_anon(enum non_anon na, bool fast)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20,
				 .nr_hugepages = na == NA_MEMFD_HUGETLB ? 2 : 0 };
	struct pm_machine *m = pm_machine_create(&cfg);
	size_t free0 = pm_machine_free_pages(m), total = 0, hfree = 0;
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long size = na == NA_ZERO_THP || na == NA_MEMFD_HUGETLB ? PM_PMD_SIZE : PG;
	unsigned long n = size / PG;
	struct pm_shmem *f = NULL;
	long mem, smem;
	char what[112];

	snprintf(what, sizeof(what), "cow: R/O longterm GUP%s pin, %s", fast ? "-fast" : "",
		 non_anon_name[na]);
	ASSERT_TRUE(m && mm);
	if (na == NA_MEMFD || na == NA_MEMFD_HUGETLB) {
		f = na == NA_MEMFD ? pm_shmem_create(m, size, 0) : pm_shmem_create_hugetlb(m, size);
		ASSERT_TRUE(f);
		mem = pm_mmap(mm, 0, size, RW, PM_MAP_PRIVATE, f, 0);
		smem = pm_mmap(mm, 0, size, PM_PROT_READ, PM_MAP_SHARED, f, 0);
	} else {
		mem = pm_mmap(mm, 0, size, RW, ANON, NULL, 0);
		smem = pm_mmap(mm, 0, size, PM_PROT_READ, ANON, NULL, 0);
	}
	ASSERT_TRUE(mem > 0 && smem > 0);
	if (na == NA_ZERO_THP) {
		ASSERT_EQ(pm_madvise(mm, mem, size, PM_MADV_HUGEPAGE), 0);
		ASSERT_EQ(pm_madvise(mm, smem, size, PM_MADV_HUGEPAGE), 0);
	}
	/* FORCE_READ: populate with read faults. */
	is_int(pmt_reads_zero(mm, mem, n) && pmt_reads_zero(mm, smem, n), 1, "%s: reads zero",
	       what);
	is_int(pmt_longterm_start(mm, mem, size, fast ? FAST : 0), 0, "%s: START", what);
	is_int(pins_held(m), n, "%s: every page pinned", what);
	is_int(pmt_put_tag(mm, mem, n, 0x81, 0), n, "%s: modify the pages", what);
	is_int(read_bad(mm, n, 0x81), 0, "%s: READ sees the modification", what);
	is_int(pmt_reads_zero(mm, smem, n), 1, "%s: the other mapping still reads zero", what);
	is_int(pmt_longterm_stop(mm), 0, "%s: STOP", what);
	pm_mm_destroy(mm);
	if (f)
		pm_shmem_put(f);
	pm_hugetlb_pool(m, &total, &hfree);
	is_int(hfree, total, "%s: the hugetlb pool is whole again", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- allocation failures ---- */

/* Fail the n-th allocation of the faults START takes: -ENOMEM, nothing pinned, no session. */
static void test_alloc_failures(void)
{
	const char *what = "allocation failures";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	long failed = 0, bad = 0, ok_runs = 0;

	for (long nth = 1; nth <= 24; nth++) {
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long x;
		int r;

		ASSERT_TRUE(mm);
		x = pmt_map_anon(mm, 8 * PG, RW, false);
		pm_fail_nth(m, nth);
		r = pmt_longterm_start(mm, x, 8 * PG, (nth & 1) ? FAST | W : W);
		pm_fail_nth(m, 0);
		if (r == -ENOMEM) {
			failed++;
			bad += pins_held(m) != 0 || pmt_longterm_read(mm, x) != -EINVAL;
		} else if (r == 0) {
			ok_runs++;
			bad += pins_held(m) != 8 || pmt_longterm_stop(mm) != 0 || pins_held(m) != 0;
		} else {
			diag("nth %ld: START %d", nth, r);
			bad++;
		}
		pm_mm_destroy(mm);
	}
	ok(failed > 0 && ok_runs > 0, "%s: some STARTs failed (%ld), some worked (%ld)", what,
	   failed, ok_runs);
	is_int(bad, 0, "%s: a failed START leaves no pin and no session", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- the mm teardown notifiers themselves ---- */

struct counted {
	struct pm_mm_notifier mn;
	struct pm_mm *seen;
	int calls;
};

static void count_release(struct pm_mm_notifier *mn, struct pm_mm *mm)
{
	struct counted *c = (struct counted *)mn;

	c->calls++;
	c->seen = mm;
}

static void test_notifiers(void)
{
	const char *what = "mm notifiers";
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct counted a = { .mn.release = count_release }, b = { .mn.release = count_release };
	struct counted gone = { .mn.release = count_release };
	struct pm_mm_notifier none = { 0 };

	is_int(pm_mm_notifier_register(NULL, p), -EINVAL, "%s: NULL notifier", what);
	is_int(pm_mm_notifier_register(&a.mn, NULL), -EINVAL, "%s: NULL mm", what);
	is_int(pm_mm_notifier_register(&none, p), -EINVAL, "%s: no ->release", what);
	is_int(pm_mm_notifier_register(&a.mn, p), 0, "%s: register A", what);
	is_int(pm_mm_notifier_register(&a.mn, p), -EEXIST, "%s: A again", what);
	is_int(pm_mm_notifier_register(&gone.mn, p), 0, "%s: register G", what);
	is_int(pm_mm_notifier_register(&b.mn, p), 0, "%s: register B", what);
	pm_mm_notifier_unregister(&gone.mn, p);
	pm_mm_notifier_unregister(&gone.mn, p); /* not on the list: nothing */
	c = pmt_fork(p);
	pm_mm_destroy(c);
	is_int(a.calls + b.calls, 0, "%s: the fork child inherited none", what);
	pm_mm_destroy(p);
	ok(a.calls == 1 && a.seen == p && b.calls == 1 && b.seen == p,
	   "%s: A and B called once each, with the mm, at destroy", what);
	is_int(gone.calls, 0, "%s: the unregistered one never", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- threads ---- */

struct worker {
	pthread_t tid;
	struct pm_machine *m;
	struct pm_mm *shared_mm; /* the race: every worker STARTs on it */
	unsigned long shared_x;
	int id;
	long rounds;
	atomic_long *errors, *won;
	pthread_barrier_t *bar;
};

/*
 * Own mm: START, write, READ, compare, and STOP or destroy with the session alive; the shared
 * mm: every worker STARTs on it at once between two barriers, exactly one wins, and the winner
 * stops it after the second barrier.
 */
static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (long i = 0; i < w->rounds; i++) {
		struct pm_mm *mm = pm_mm_create(w->m);
		uint32_t tag = (uint32_t)(w->id << 16 | (i & 0xffff)) + 1;
		unsigned long x, d;
		int r;

		if (!mm) {
			pmt_error(w->errors, "worker %d: pm_mm_create", w->id);
			break;
		}
		x = pmt_map_anon(mm, 4 * PG, RW, false);
		d = pmt_map_anon(mm, 4 * PG, RW, false);
		if (pmt_put_tag(mm, x, 4, tag, 0) != 4 ||
		    pmt_longterm_start(mm, x, 4 * PG, (i & 1) ? FAST : W) != 0)
			pmt_error(w->errors, "worker %d: START", w->id);
		else if (pmt_put_tag(mm, x, 4, tag + 1, 0) != 4 || pmt_longterm_read(mm, d) != 0 ||
			 pmt_bad_tag(mm, d, 4, tag + 1, 0) != 0)
			pmt_error(w->errors, "worker %d: READ", w->id);
		if (i % 3 && pmt_longterm_stop(mm) != 0)
			pmt_error(w->errors, "worker %d: STOP", w->id);
		pm_mm_destroy(mm);

		pthread_barrier_wait(w->bar);
		r = pmt_longterm_start(w->shared_mm, w->shared_x, 8 * PG, (w->id & 1) ? FAST : 0);
		if (r == 0)
			atomic_fetch_add(w->won, 1);
		else if (r != -EINVAL)
			pmt_error(w->errors, "worker %d: race START %d", w->id, r);
		pthread_barrier_wait(w->bar);
		if (r == 0 && (pmt_longterm_read(w->shared_mm, w->shared_x + 8 * PG) != 0 ||
			       pmt_longterm_stop(w->shared_mm) != 0))
			pmt_error(w->errors, "worker %d: winner READ/STOP", w->id);
		pthread_barrier_wait(w->bar);
	}
	return NULL;
}

static void test_threads(void)
{
	const char *what = "threads";
	enum { NW = 4 };
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *shared = pm_mm_create(m);
	unsigned long sx = pmt_map_anon(shared, 16 * PG, RW, false);
	atomic_long errors = 0, won = 0;
	long rounds = tap_scale(200);
	pthread_barrier_t bar;
	struct worker w[NW];

	if (rounds < 4)
		rounds = 4;
	pmt_touch(shared, sx, 16 * PG);
	pthread_barrier_init(&bar, NULL, NW);
	for (int i = 0; i < NW; i++) {
		w[i] = (struct worker){ .m = m, .shared_mm = shared, .shared_x = sx, .id = i,
					.rounds = rounds, .errors = &errors, .won = &won,
					.bar = &bar };
		ASSERT_EQ(pthread_create(&w[i].tid, NULL, worker_fn, &w[i]), 0);
	}
	for (int i = 0; i < NW; i++)
		pthread_join(w[i].tid, NULL);
	pthread_barrier_destroy(&bar);
	is_int(atomic_load(&errors), 0, "%s: sessions on own mms, %ld rounds x %d", what, rounds,
	       NW);
	is_int(atomic_load(&won), rounds, "%s: one START won each race on the shared mm", what);
	is_int(pins_held(m), 0, "%s: every pin released", what);
	pm_mm_destroy(shared);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- process fork while another thread runs sessions ---- */

/* ThreadSanitizer: the fork child starts threads (RCU's helper); allow it. */
__attribute__((visibility("default"))) const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

struct churn {
	pthread_t tid;
	struct pm_machine *m;
	atomic_int stop;
	atomic_long rounds, errors;
};

/* Session commands, back to back, each holding gup_test's lock. */
static void *churn_fn(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(&c->stop)) {
		struct pm_mm *mm = pm_mm_create(c->m);
		unsigned long x;

		if (!mm) {
			pmt_error(&c->errors, "churn: pm_mm_create");
			break;
		}
		x = pmt_map_anon(mm, 16 * PG, RW, false);
		for (int i = 0; i < 8; i++)
			if (pmt_longterm_start(mm, x, 8 * PG, i & 1 ? FAST : W) ||
			    pmt_longterm_read(mm, x + 8 * PG) || pmt_longterm_stop(mm))
				pmt_error(&c->errors, "churn: a session command failed");
		if (pmt_longterm_start(mm, x, 8 * PG, 0))
			pmt_error(&c->errors, "churn: START");
		pm_mm_destroy(mm); /* with the session alive */
		atomic_fetch_add(&c->rounds, 1);
	}
	return NULL;
}

/*
 * The fork child: a session on a new machine, within 20 s (a hang is a failure). It destroys
 * the machine, which waits for a grace period: one must end even when the fork came while the
 * parent's thread was inside an RCU read-side section (lib/rcu.c, "fork()").
 */
static void fork_child(void *arg)
{
	struct pm_machine *m;
	struct pm_mm *mm;
	unsigned long x;
	int bad = 0;

	(void)arg;
	pmt_fork_watchdog(20);
	m = pmt_machine(16, 0);
	mm = pm_mm_create(m);
	if (!mm)
		_exit(2);
	x = pmt_map_anon(mm, 8 * PG, RW, false);
	bad |= pmt_put_tag(mm, x, 4, 0x91, 0) != 4;
	bad |= pmt_longterm_start(mm, x, 4 * PG, FAST) != 0;
	bad |= pmt_longterm_read(mm, x + 4 * PG) != 0;
	bad |= pmt_bad_tag(mm, x + 4 * PG, 4, 0x91, 0) != 0;
	bad |= pmt_longterm_stop(mm) != 0;
	bad |= pmt_longterm_start(mm, x, 4 * PG, W) != 0;
	pm_mm_destroy(mm); /* ends the session: gup_test's lock again */
	mm = pm_mm_create(m);
	bad |= !mm || pmt_longterm_read(mm, x) != -EINVAL;
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
	fflush(NULL);
	_exit(bad);
}

static void test_process_fork(void)
{
	const char *what = "process fork";
	struct churn c = { .m = pmt_machine(64, 0) };
	size_t free0 = pm_machine_free_pages(c.m);
	long forks = tap_scale(20), good = 0, hung = 0, runtime_hung = 0;

	if (forks < 3)
		forks = 3;
	pmt_fork_watchdog_init();
	ASSERT_EQ(pthread_create(&c.tid, NULL, churn_fn, &c), 0);
	while (atomic_load(&c.rounds) < 1 && !atomic_load(&c.errors))
		pmt_wait_until(tap_now() + 0.01, NULL);
	for (long i = 0; i < forks; i++) {
		/* A hang in ASan's allocator (pmtest.h) is the toolchain's, not pinmm's: the fork
		 * is done again, a bounded number of times. */
		int status = pmt_fork_wait(fork_child, NULL, &runtime_hung, forks);

		good += pmt_fork_good(status);
		hung += pmt_fork_hung(status);
	}
	if (runtime_hung)
		diag("%s: %ld children hung in the sanitizer's allocator and were forked again",
		     what, runtime_hung);
	atomic_store(&c.stop, 1);
	pthread_join(c.tid, NULL);
	is_int(good, forks, "%s: %ld children ran a session while the parent's thread ran "
	       "sessions (%ld hung)", what, forks, hung);
	is_int(atomic_load(&c.errors), 0, "%s: the parent's sessions (%ld rounds)", what,
	       atomic_load(&c.rounds));
	pmt_end(c.m, free0, &pmt_end_returned, what);
}

int main(void)
{
	plan_no_plan();
	test_arguments();
	for (int fast = 0; fast < 2; fast++) {
		test_session(fast);
		test_start_fails(fast);
		test_fork(fast);
	}
	test_read();
	test_per_mm();
	test_destroy_ends();
	test_notifiers();
	test_alloc_failures();

	for (int t = 0; t < NR_LT_TYPES; t++)
		for (int shared = 1; shared >= 0; shared--)
			for (int bk = 0; bk < NR_BACKINGS; bk++)
				test_gup_longterm(bk, t, shared);

	for (int t = 0; t < NR_RO_TESTS; t++)
		for (int fast = 0; fast < 2; fast++)
			for (int l = 0; l < PMT_NR_LAYOUTS; l++)
				test_ro_pin(l, t, fast);
	for (int t = 0; t < NR_RO_TESTS; t++)
		for (int fast = 0; fast < 2; fast++)
			test_ro_pin_hugetlb(t, fast);
	for (int na = 0; na < NR_NON_ANON; na++)
		for (int fast = 0; fast < 2; fast++)
			test_ro_pin_non_anon(na, fast);

	test_threads();
	test_process_fork();
	return done_testing();
}
