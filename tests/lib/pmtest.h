/* SPDX-License-Identifier: MIT */
/*
 * pmtest.h - helpers that the test programs share (tests/lib/pmtest.c, which the Makefile
 * links into every test binary like every other source file in tests/lib).
 *
 *   machines      pmt_machine(), pmt_hmachine() (with a hugetlb pool), pmt_fork(); one
 *                 machine and one address space in a test's file-scope variables:
 *                 pmt_setup() / pmt_teardown()
 *   between rounds pmt_quiescent_check(): pm_rcu_barrier(), then pm_machine_check()
 *   the end       pmt_end(): after pm_rcu_barrier(), every frame back, every pin released,
 *                 pm_machine_check(); then the machine is destroyed; pmt_hend(): the
 *                 hugetlb pool whole again first
 *   groups        pmt_run_groups(): a program's named groups in order, "-t NAME" for one
 *   counters      pmt_stats(), PMT_STAT(), pmt_free_pages(), pmt_kept_tables(),
 *                 pmt_pins_balanced()
 *   pages         pmt_pfn_at(), pmt_page_at(), pmt_order_at(), pmt_page_kind(), pmt_snapshot()
 *                 and pmt_counts_equal() (refcounts and pincounts back where they were)
 *   mappings      pmt_map_fixed(), pmt_map_anon(), pmt_touch(); one byte: pmt_poke(),
 *                 pmt_peek(); VMAs in a range: pmt_nr_maps()
 *   contents      address patterns: pmt_fill(), pmt_check(), pmt_reads_zero();
 *                 tagged pages (tag << 32 | page index): pmt_put_tag(), pmt_bad_tag(),
 *                 pmt_bad_pin(), pmt_page_is(); whole pages of one word: pmt_fill_words(),
 *                 pmt_page_all()
 *   layouts       cow.c's anonymous layouts (4 KiB, PMD THP, PTE-mapped THP, ...):
 *                 pmt_area_setup()
 *   threads       pmt_mix(), pmt_error(), pmt_wait_until(), struct pmt_gate (pause every
 *                 worker for a check on the quiescent machine, then let them go on)
 *   fork          pmt_fork_watchdog_init(), pmt_fork_watchdog(): a process fork child's
 *                 alarm, which tells a hang in the sanitizer's runtime from one elsewhere;
 *                 pmt_fork_wait() forks such a child again
 *   gup_test      pmt_longterm_start(), pmt_longterm_read(), pmt_longterm_stop()
 *
 * tap.h keeps its counters in static variables, one set per translation unit, so a helper
 * that runs TAP tests (ok(), is_int(), skip()) must be compiled into the test program itself:
 * those are the static inline functions below (pmt_end(), pmt_teardown(), pmt_area_setup()).
 * The helpers in pmtest.c only compute, diag() and bail out (ASSERT_*) when a test cannot go
 * on; what a test checks stays an ok() or is_int() in the test.
 */
#ifndef PM_TESTS_PMTEST_H
#define PM_TESTS_PMTEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <pinmm/pinmm.h>

#include "tap.h"

/* ---- machines and address spaces ---- */

/* A machine of @mib MiB with @knobs; bails out if it cannot be created. */
struct pm_machine *pmt_machine(size_t mib, unsigned knobs);

/* A machine of @mib MiB with a pool of @nr_huge 2 MiB hugetlb pages; bails out if it cannot
 * be created. */
struct pm_machine *pmt_hmachine(size_t mib, size_t nr_huge);

/* pm_mm_fork(), bailing out (with errno in a diag) if it fails. */
struct pm_mm *pmt_fork(struct pm_mm *mm);

/*
 * For tests with one machine and one address space in file-scope variables: create both into
 * *@m and *@mm; returns the machine's free frame count before the address space existed, for
 * pmt_teardown().
 */
size_t pmt_setup(struct pm_machine **m, struct pm_mm **mm, size_t mib, unsigned knobs);

/*
 * Move this thread to CPU @cpu (sched_setaffinity) and yield, so that it runs there before
 * returning: false if the CPU cannot be had. pinmm's per-CPU caches follow sched_getcpu().
 */
bool pmt_run_on(int cpu);

/* ---- counters ---- */

struct pm_stats pmt_stats(struct pm_machine *m);
#define PMT_STAT(m, field) (pmt_stats(m).field)

/* Free frames once RCU has run every pending free. */
size_t pmt_free_pages(struct pm_machine *m);

/*
 * The frames an mm with no VMA left keeps after mapping inside one 1 GiB span: its PGD, and
 * in the range design that range's PUD table and the span's PMD table, kept until the
 * teardown (pgtable.c).
 */
size_t pmt_kept_tables(struct pm_machine *m);

/* nr_foll_pin_acquired == nr_foll_pin_released (both in a diag when not). */
bool pmt_pins_balanced(struct pm_machine *m);

/* ---- the end of a test ---- */

/*
 * The names of pmt_end()'s TAP tests; each is prefixed with "<what>: " when pmt_end() is
 * given a @what. A NULL @pins skips the pin check.
 */
struct pmt_end_names {
	const char *frames; /* the free frame count is back to where it started */
	const char *pins;   /* nr_foll_pin_acquired == nr_foll_pin_released */
	const char *check;  /* pm_machine_check() == 0 */
};

/* Per-case checks of the unit tests that make a machine per case. */
static const struct pmt_end_names pmt_end_returned = {
	"every frame returned", "every pin released", "pm_machine_check"
};

/* pmt_teardown()'s names. */
static const struct pmt_end_names pmt_end_after_destroy = {
	"every frame free after destroy", NULL, "pm_machine_check"
};

/* The unit tests that share one machine between their cases check it once, at the end. */
static const struct pmt_end_names pmt_end_free_again = {
	"every frame is free again", "all pins released", "pm_machine_check"
};

/* A quiescent check between a stress test's rounds: deferred frees flushed, then
 * pm_machine_check(). Return: true if it passed. */
static inline bool pmt_quiescent_check(struct pm_machine *m)
{
	pm_rcu_barrier();
	return pm_machine_check(m) == 0;
}

/* The stress tests that run one address space for a while check it once, after the run. */
static const struct pmt_end_names pmt_end_after_run = {
	"every frame free after destroy", NULL, "pm_machine_check after destroy"
};

/*
 * Everything on @m has been released (address spaces, objects, pins): wait for RCU, check
 * that the free frame count is back to @free0, that every pin was released (unless
 * @names->pins is NULL) and that pm_machine_check() passes, one TAP test each; then destroy
 * the machine.
 */
static inline void pmt_end(struct pm_machine *m, size_t free0, const struct pmt_end_names *names,
			   const char *what)
{
	const char *sep = what ? ": " : "";

	if (!what)
		what = "";
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "%s%s%s", what, sep, names->frames);
	if (names->pins)
		is_int(PMT_STAT(m, nr_foll_pin_acquired) - PMT_STAT(m, nr_foll_pin_released), 0,
		       "%s%s%s", what, sep, names->pins);
	is_int(pm_machine_check(m), 0, "%s%s%s", what, sep, names->check);
	pm_machine_destroy(m);
}

/* pmt_end() for a machine of pmt_hmachine(): first, the pool of @nr_huge is whole again. */
static inline void pmt_hend(struct pm_machine *m, size_t free0, size_t nr_huge, const char *what)
{
	size_t total = 0, free = 0;

	pm_rcu_barrier();
	pm_hugetlb_pool(m, &total, &free);
	ok(total == nr_huge && free == nr_huge, "%s: the pool is whole again (%zu of %zu free)",
	   what, free, total);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* One named group of a test program's tests. */
struct pmt_group {
	const char *name;
	void (*fn)(void);
};

/*
 * Run @groups in order, or only the one "-t NAME" names, each under alarm(@alarm_s) when that
 * is not 0 (a hang fails there, not at the runner's timeout); return done_testing().
 */
static inline void pmt__run_groups_once(const char *only, const char *prefix,
					const struct pmt_group *groups, size_t n, unsigned alarm_s)
{
	for (size_t i = 0; i < n; i++) {
		if (only && strcmp(only, groups[i].name))
			continue;
		diag("%s%s", prefix, groups[i].name);
		alarm(alarm_s);
		groups[i].fn();
		alarm(0);
	}
}

static inline const char *pmt__only(int argc, char **argv)
{
	const char *only = NULL;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-t"))
			only = argv[i + 1];
	return only;
}

static inline int pmt_run_groups(int argc, char **argv, const struct pmt_group *groups,
				 size_t n, unsigned alarm_s)
{
	const char *only = pmt__only(argc, argv);

	plan_no_plan();
	pmt__run_groups_once(only, "", groups, n, alarm_s);
	return done_testing();
}

/* The two designs, for a program that runs each group in both whatever the environment says. */
static const struct {
	unsigned flags; /* PM_MACHINE_LINUX_MM or PM_MACHINE_RANGE_MM */
	const char *name;
} pmt_designs[] = { { PM_MACHINE_LINUX_MM, "linux" }, { PM_MACHINE_RANGE_MM, "range" } };

/* pmt_run_groups() in each design in turn, *@cur the index in pmt_designs of the one running. */
static inline int pmt_run_groups_designs(int argc, char **argv, const struct pmt_group *groups,
					 size_t n, unsigned alarm_s, unsigned *cur)
{
	const char *only = pmt__only(argc, argv);
	char prefix[16];

	plan_no_plan();
	for (*cur = 0; *cur < sizeof(pmt_designs) / sizeof(pmt_designs[0]); (*cur)++) {
		snprintf(prefix, sizeof(prefix), "%s: ", pmt_designs[*cur].name);
		pmt__run_groups_once(only, prefix, groups, n, alarm_s);
	}
	return done_testing();
}

/* pmt_setup()'s counterpart: destroy *@mm (if any), pmt_end() the machine, clear both. */
static inline void pmt_teardown(struct pm_machine **m, struct pm_mm **mm, size_t free0,
				const char *what)
{
	if (*mm)
		pm_mm_destroy(*mm);
	*mm = NULL;
	pmt_end(*m, free0, &pmt_end_after_destroy, what);
	*m = NULL;
}

/* One user-mode byte: pm_access's answer (1, or -errno) for a store of @c at @addr. */
static inline long pmt_poke(struct pm_mm *mm, unsigned long addr, char c)
{
	return pm_access(mm, addr, &c, 1, 1);
}

/* The byte a user-mode load at @addr reads (0..255), or pm_access's -errno. */
static inline int pmt_peek(struct pm_mm *mm, unsigned long addr)
{
	char c = 0;
	long ret = pm_access(mm, addr, &c, 1, 0);

	return ret == 1 ? (unsigned char)c : (int)ret;
}

/* ---- pages and folios ---- */

/* The frame mapped at @addr, without faulting; ULONG_MAX if there is none. */
unsigned long pmt_pfn_at(struct pm_mm *mm, unsigned long addr);

/* How many VMAs (pm_mm_maps rows, at most 64) lie in [@start, @end). */
long pmt_nr_maps(struct pm_mm *mm, unsigned long start, unsigned long end);

/* The page at @addr (faulted in for read if need be), no reference kept; bails out if none. */
struct pm_page *pmt_page_at(struct pm_mm *mm, unsigned long addr);

/* The order of the folio behind @addr (pinned and unpinned again), or -errno (-1000: 0 pages). */
long pmt_order_at(struct pm_mm *mm, unsigned long addr);

/* What one page of a range looks like, read without taking anything that lasts. */
struct pmt_snap {
	unsigned long pfn;
	struct pm_folio *folio;
	int ref, pin;
	bool dirty;
};

/* A snapshot of the @npages pages at @addr (free() it); bails out if one is not there. */
struct pmt_snap *pmt_snapshot(struct pm_mm *mm, unsigned long addr, unsigned long npages);

/* Are refcount and pincount of every page's folio back where @s saw them? */
bool pmt_counts_equal(const struct pmt_snap *s, unsigned long npages);

/* ---- mappings ---- */

/* pm_mmap() of private anonymous memory at exactly @addr (PM_MAP_FIXED). */
long pmt_map_fixed(struct pm_mm *mm, unsigned long addr, size_t len, int prot);

/* Private anonymous memory anywhere, MADV_HUGEPAGE if @thp; bails out on failure. */
unsigned long pmt_map_anon(struct pm_mm *mm, size_t len, int prot, bool thp);

/* Write one byte into each page of [addr, addr + len) (a write fault each); bails out. */
void pmt_touch(struct pm_mm *mm, unsigned long addr, size_t len);

/* ---- page contents ---- */

/*
 * Address patterns: word i of the page at @addr holds pmt_pattern(@addr + 8 * i, @seed), so a
 * page that moved, was lost or was replaced by another is seen.
 */
uint64_t pmt_pattern(unsigned long addr, uint64_t seed);
void pmt_pattern_page(uint64_t *page, unsigned long addr, uint64_t seed);
/* Write the pattern into @npages pages at @addr; false at the first that is not copied whole. */
bool pmt_fill(struct pm_mm *mm, unsigned long addr, unsigned long npages, uint64_t seed);
/* Do the @npages pages at @addr hold the pattern? (diag() of the first that does not) */
bool pmt_check(struct pm_mm *mm, unsigned long addr, unsigned long npages, uint64_t seed);
/* Do the @npages pages at @addr read zero? */
bool pmt_reads_zero(struct pm_mm *mm, unsigned long addr, unsigned long npages);

/* Every word of the page at @page is @v / set to @v. */
void pmt_fill_words(void *page, uint64_t v);
bool pmt_page_all(const void *page, uint64_t v);

/*
 * Tagged pages: every word of page index @idx tagged @tag is @tag << 32 | @idx (tag 0: zero),
 * so data from the wrong page, or from the other side of a fork, is told apart. The functions
 * over @n pages give page i the index @first + i.
 */
uint64_t pmt_tag_word(uint32_t tag, unsigned long idx);
void pmt_fill_tag(void *page, uint32_t tag, unsigned long idx);
bool pmt_page_is(const void *page, uint32_t tag, unsigned long idx);
/* Write @n tagged pages at @addr; returns how many were written whole (stops at the first not). */
long pmt_put_tag(struct pm_mm *mm, unsigned long addr, unsigned long n, uint32_t tag,
		 unsigned long first);
/* Pages of [addr, addr + n pages) that cannot be read or are not tagged so (diag of the first). */
long pmt_bad_tag(struct pm_mm *mm, unsigned long addr, unsigned long n, uint32_t tag,
		 unsigned long first);
/* Pinned or referenced pages (NULL entries count) that are not tagged so (diag of the first). */
long pmt_bad_pin(struct pm_page **pages, unsigned long n, uint32_t tag, unsigned long first);

/* ---- cow.c's anonymous layouts (Linux's tools/testing/selftests/mm/cow.c) ---- */

enum pmt_layout {
	PMT_L_BASE,	    /* 16 small pages */
	PMT_L_THP_PMD,	    /* a PMD-mapped THP */
	PMT_L_THP_PTE,	    /* a THP mapped by PTEs (after an mprotect of one page) */
	PMT_L_THP_SINGLE,   /* one PTE of a THP, the rest discarded */
	PMT_L_THP_PARTIAL,  /* a THP whose page 0 was shared with a child that has gone */
	PMT_NR_LAYOUTS
};

static const char *const pmt_layout_name[PMT_NR_LAYOUTS] = {
	"4KiB", "PMD THP", "PTE-mapped THP", "single PTE of THP", "partially shared THP",
};

struct pmt_area {
	unsigned long addr; /* start of the pages under test */
	unsigned long n;    /* pages under test */
	unsigned long len;  /* the whole mapping */
};

/*
 * Map a private anonymous area of layout @l in @mm and fill its pages with @tag (indexes from
 * 0). THP layouts are checked to be what they claim with TAP tests (a test fails otherwise;
 * the properties are then still tested on whatever the area is); @check_still_thp adds one
 * more for the layouts that change a THP after it was faulted: it is still part of one.
 */
static inline void pmt_area_setup(struct pm_machine *m, struct pm_mm *mm, enum pmt_layout l,
				  uint32_t tag, bool check_still_thp, struct pmt_area *ar)
{
	const unsigned long pg = PM_PAGE_SIZE;
	const int rw = PM_PROT_READ | PM_PROT_WRITE;
	const char *name = pmt_layout_name[l];
	unsigned long len = l == PMT_L_BASE ? 16 * pg : PM_PMD_SIZE;
	unsigned long thp0 = PMT_STAT(m, thp_faults), split0;
	long a = pm_mmap(mm, 0, len, rw, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	struct pm_page *p = NULL;

	ASSERT_TRUE(a > 0);
	ar->addr = a;
	ar->len = len;
	ar->n = len / pg;
	if (l != PMT_L_BASE)
		ASSERT_EQ(pm_madvise(mm, a, len, PM_MADV_HUGEPAGE), 0);
	ASSERT_EQ(pmt_put_tag(mm, a, ar->n, tag, 0), ar->n);
	if (l == PMT_L_BASE)
		return;
	split0 = PMT_STAT(m, thp_splits);
	ASSERT_EQ(pm_get_user_pages(mm, a, 1, PM_FOLL_NOFAULT, &p), 1);
	ok(!(a & (PM_PMD_SIZE - 1)) && PMT_STAT(m, thp_faults) - thp0 == 1 &&
		   pm_folio_order(pm_page_folio(p)) == 9,
	   "%s: the area is one 2 MiB folio", name);
	pm_put_page(p);
	switch (l) {
	case PMT_L_THP_PTE:
		ASSERT_EQ(pm_mprotect(mm, a + pg, pg, PM_PROT_READ), 0);
		ASSERT_EQ(pm_mprotect(mm, a + pg, pg, rw), 0);
		is_int(PMT_STAT(m, thp_splits) - split0, 1, "%s: the PMD was split", name);
		break;
	case PMT_L_THP_SINGLE:
		ASSERT_EQ(pm_madvise(mm, a + pg, len - pg, PM_MADV_DONTNEED), 0);
		ar->n = 1;
		break;
	case PMT_L_THP_PARTIAL: {
		struct pm_mm *c;

		ASSERT_EQ(pm_madvise(mm, a + pg, len - pg, PM_MADV_DONTFORK), 0);
		c = pmt_fork(mm);
		is_int(pmt_bad_tag(c, a, 1, tag, 0), 0, "%s: the child shared page 0", name);
		pm_mm_destroy(c);
		ASSERT_EQ(pm_madvise(mm, a + pg, len - pg, PM_MADV_DOFORK), 0);
		break;
	}
	default:
		break;
	}
	if (check_still_thp && l != PMT_L_THP_PMD) {
		ASSERT_EQ(pm_get_user_pages(mm, a, 1, PM_FOLL_NOFAULT, &p), 1);
		is_int(pm_folio_order(pm_page_folio(p)), 9, "%s: still part of a THP", name);
		pm_put_page(p);
	}
}

/* ---- threads ---- */

/* A 64-bit hash of two values: per-thread seeds, and data that depends on where it is. */
uint64_t pmt_mix(uint64_t a, uint64_t b);

/* Count one error in @errors (shared by threads); only the first 10 are told with diag(). */
__attribute__((format(printf, 2, 3))) void pmt_error(atomic_long *errors, const char *fmt, ...);

/* Sleep in 10 ms steps until tap_now() reaches @end, or until *@errors (if given) is not 0. */
void pmt_wait_until(double end, atomic_long *errors);

/*
 * A gate where worker threads pause so that the main thread can check the quiescent machine:
 *   worker:  if (!pmt_gate_point(&g)) break;    (pauses there while the main thread checks)
 *   main:    pmt_gate_pause(&g); check ...; pmt_gate_resume(&g, last);
 * After pmt_gate_resume(&g, true) every worker's pmt_gate_point() returns false.
 */
struct pmt_gate {
	_Atomic int pause, done;
	pthread_barrier_t paused, resume;
};

void pmt_gate_init(struct pmt_gate *g, unsigned nworkers);
void pmt_gate_destroy(struct pmt_gate *g);
/* Worker: has the main thread asked for a pause? */
bool pmt_gate_pausing(struct pmt_gate *g);
/* Worker: pause until the main thread resumes; false when the run is over. */
bool pmt_gate_wait(struct pmt_gate *g);
/* Worker: pmt_gate_wait() if a pause is asked for, else true. */
bool pmt_gate_point(struct pmt_gate *g);
/* Main: returns once every worker is paused. */
void pmt_gate_pause(struct pmt_gate *g);
/* Main: let the workers go on, or (@last) end the run. */
void pmt_gate_resume(struct pmt_gate *g, bool last);

/*
 * Process fork() children of a multi-threaded parent. GCC 12's ASan runtime (and clang 14's)
 * does not hold its allocator's locks across fork(): a child whose parent had another thread
 * inside ASan's malloc or free at the fork can wait for ever on that lock, in the runtime,
 * whatever pinmm does (newer compiler-rt takes them in its own fork handler). The watchdog
 * tells the two apart: pmt_fork_watchdog_init() (the parent, before it forks) finds the
 * runtime's code, and pmt_fork_watchdog(@seconds) (the child) arms an alarm that, if a thread
 * of the child was stopped in that code, exits with PMT_EXIT_RUNTIME_HANG, and otherwise ends
 * the child by SIGALRM as a plain alarm() would. "A thread": the child's own, or one it
 * started (liburcu's call_rcu worker, which the child waits for at pm_machine_destroy()),
 * whose stop is read from /proc. Without ASan, every hang is a SIGALRM.
 */
#define PMT_EXIT_RUNTIME_HANG 125
void pmt_fork_watchdog_init(void);
void pmt_fork_watchdog(unsigned seconds);

/*
 * Fork a child that runs @child(@arg) (it never returns: it _exits, arming its own
 * pmt_fork_watchdog()) and wait for it, 60 s at most (pmtest.c, fork_reap()). A child that
 * exited PMT_EXIT_RUNTIME_HANG is the runtime's hang, not the test's: it is forked again while *@retries < @max_retries, each
 * retry counted in *@retries. Return: the wait status of the last child.
 */
int pmt_fork_wait(void (*child)(void *arg), void *arg, long *retries, long max_retries);
/* The child exited 0 / was ended by its watchdog's SIGALRM / hung in the runtime. */
static inline bool pmt_fork_good(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
static inline bool pmt_fork_hung(int status)
{
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
}
static inline bool pmt_fork_runtime_hung(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == PMT_EXIT_RUNTIME_HANG;
}

/* pm_gup_test_longterm()'s three steps, as gup_longterm.c calls them. */
int pmt_longterm_start(struct pm_mm *mm, unsigned long addr, uint64_t size, uint32_t flags);
int pmt_longterm_read(struct pm_mm *mm, unsigned long dst);
int pmt_longterm_stop(struct pm_mm *mm);

/* pm_pagemap()'s flags of @addr, masked to PRESENT, ANON, ZERO and THP. */
unsigned pmt_page_kind(struct pm_mm *mm, unsigned long addr);

#endif /* PM_TESTS_PMTEST_H */
