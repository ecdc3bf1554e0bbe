// SPDX-License-Identifier: MIT
/*
 * stress_pmd_install.c - a THP leaf and a PTE table race for one empty PMD entry.
 *
 * Every install into a none PMD entry is a compare-and-swap from it (pmd_install_none()):
 * a THP or huge zero leaf under the PMD lock, a PTE table under it in Linux's design and
 * without it in the range design (pm__pte_alloc, fault/anon.c's top comment). Here two
 * threads write-fault two pages of one 2 MiB block of a MADV_HUGEPAGE VMA at once, after
 * pm_fail_nth(1, 2 or 3): the THP of one of them, or its deposit table, is refused, so it
 * falls back to a PTE table while the other installs a THP leaf (or, where both fall back,
 * two PTE tables race). Whichever
 * CAS wins, the loser backs out and faults again into what the winner installed: each thread
 * reads its own byte back, neither loses the other's, and at the end every frame comes back
 * and pm_machine_check() passes. A fault that the injection refused outright (-ENOMEM) is
 * made again.
 *
 * Then neighbouring slots: in the range design a THP write fault installs its leaf without
 * the PMD lock and parks its deposit on the folio (pgtable/huge_memory.c, "Deposit"). Two
 * threads write-fault THPs into alternate 2 MiB blocks of one PMD table while a third, in the
 * same table, forks (the parent's parked deposits go to the list), splits leaves by an
 * mprotect of one page (withdraws), and faults and zaps blocks of its own (withdraws while
 * the others' CASes land beside them). Each round checks every thread's data, and
 * pm_machine_check() finds each leaf's deposit exactly once, on its folio or on the list.
 * Both designs, each phase for a quarter of tap_seconds(2).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define HPAGE (2UL << 20)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define BASE (1UL << 40)

static struct pm_mm *mm;
static pthread_barrier_t start, done;
static _Atomic bool stop;
static _Atomic long bad;

/* One byte at @addr, written and read back; a fault the injection refused is made again. */
static bool write_check(unsigned long addr, char tag)
{
	int r = pmt_poke(mm, addr, tag);

	if (r == -ENOMEM)
		r = pmt_poke(mm, addr, tag);
	return r == 1 && pmt_peek(mm, addr) == tag;
}

static void *faulter(void *arg)
{
	unsigned long off = (unsigned long)(uintptr_t)arg;

	for (;;) {
		pthread_barrier_wait(&start);
		if (atomic_load(&stop))
			return NULL;
		if (!write_check(BASE + off, (char)('a' + off / (256 * PG))))
			atomic_fetch_add(&bad, 1);
		pthread_barrier_wait(&done);
	}
}

/* A machine of @mib MiB with an mm (free frames in *@free0), and two threads running @fn(@a0)
 * and @fn(@a1) round by round between the barriers; the stats as they start in *@s0. */
static struct pm_machine *start_run(unsigned flags, size_t mib, void *(*fn)(void *),
				    uintptr_t a0, uintptr_t a1, pthread_t t[2],
				    struct pm_stats *s0, size_t *free0)
{
	struct pm_config cfg = { .mem_bytes = mib << 20, .flags = flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	*free0 = pmt_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
	atomic_store(&stop, false);
	atomic_store(&bad, 0);
	ASSERT_EQ(pthread_barrier_init(&start, NULL, 3), 0);
	ASSERT_EQ(pthread_barrier_init(&done, NULL, 3), 0);
	ASSERT_EQ(pthread_create(&t[0], NULL, fn, (void *)a0), 0);
	ASSERT_EQ(pthread_create(&t[1], NULL, fn, (void *)a1), 0);
	pm_machine_stats(m, s0);
	return m;
}

/* The stats as the rounds end in *@s1; the threads stopped. */
static void stop_run(struct pm_machine *m, pthread_t t[2], struct pm_stats *s1)
{
	pm_machine_stats(m, s1);
	atomic_store(&stop, true);
	pthread_barrier_wait(&start);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
}

static void run(unsigned flags, const char *name)
{
	struct pm_stats s0, s1;
	pthread_t t[2];
	size_t free0;
	struct pm_machine *m = start_run(flags, 64, faulter, 0, 256 * PG, t, &s0, &free0);
	double end;
	long rounds = 0;

	end = tap_now() + tap_seconds(2) / 4;
	do {
		/* Two blocks: the second one's page, faulted first, gives the VMA its anon_vma,
		 * so that the injected failure falls on one of the racing faults. */
		if (pm_mmap(mm, BASE, 2 * HPAGE, RW,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0) != (long)BASE ||
		    pm_madvise(mm, BASE, 2 * HPAGE, PM_MADV_HUGEPAGE) ||
		    !write_check(BASE + HPAGE, 'z')) {
			atomic_fetch_add(&bad, 1);
			break;
		}
		pm_fail_nth(m, 1 + rounds % 3); /* a THP, or a deposit table, of either one */
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		pm_fail_nth(m, 0);
		if (pmt_peek(mm, BASE) != 'a' || pmt_peek(mm, BASE + 256 * PG) != 'b')
			atomic_fetch_add(&bad, 1);
		if (pm_munmap(mm, BASE, 2 * HPAGE))
			atomic_fetch_add(&bad, 1);
		rounds++;
	} while (tap_now() < end);
	stop_run(m, t, &s1);
	is_int(atomic_load(&bad), 0, "%s: %ld rounds of a THP and a PTE table raced for one PMD "
	       "entry (%lu THP faults, %lu fallbacks): every byte read back", name, rounds,
	       s1.thp_faults - s0.thp_faults, s1.thp_fallbacks - s0.thp_fallbacks);
	ok(s1.thp_fallbacks - s0.thp_fallbacks >= (unsigned long)rounds / 4,
	   "%s: ... in many rounds one fault fell back to a PTE table", name);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, name);
}

/* Neighbouring slots: blocks 0-7 the faulters', 8-9 the disturber's, all in one PMD table. */
#define NB_BLOCKS 10
#define NB_FAULTED 8

static void *nb_faulter(void *arg)
{
	unsigned long first = (unsigned long)(uintptr_t)arg;

	for (;;) {
		pthread_barrier_wait(&start);
		if (atomic_load(&stop))
			return NULL;
		for (unsigned long b = first; b < NB_FAULTED; b += 2)
			if (!write_check(BASE + b * HPAGE, (char)('A' + b)))
				atomic_fetch_add(&bad, 1);
		pthread_barrier_wait(&done);
	}
}

/* The third thread: a fork, a split by mprotect of a page no faulter writes, and a THP of its
 * own faulted and zapped, whole or in half (each zap withdraws a deposit). */
static void disturb(long round)
{
	unsigned long b = (unsigned long)round % NB_FAULTED;
	unsigned long last = BASE + b * HPAGE + HPAGE - PG, own = BASE + (8 + round % 2) * HPAGE;
	struct pm_mm *child = pm_mm_fork(mm);

	if (child)
		pm_mm_destroy(child);
	if (pm_mprotect(mm, last, PG, PM_PROT_READ) || pm_mprotect(mm, last, PG, RW))
		atomic_fetch_add(&bad, 1);
	if (!write_check(own, 'z') ||
	    pm_madvise(mm, own, round % 3 ? HPAGE : HPAGE / 2, PM_MADV_DONTNEED))
		atomic_fetch_add(&bad, 1);
}

static void run_neighbours(unsigned flags, const char *name)
{
	struct pm_stats s0, s1;
	pthread_t t[2];
	size_t free0;
	struct pm_machine *m = start_run(flags, 256, nb_faulter, 0, 1, t, &s0, &free0);
	double end;
	long rounds = 0, checks = 0;

	end = tap_now() + tap_seconds(2) / 4;
	do {
		if (pm_mmap(mm, BASE, NB_BLOCKS * HPAGE, RW,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0) != (long)BASE ||
		    pm_madvise(mm, BASE, NB_BLOCKS * HPAGE, PM_MADV_HUGEPAGE)) {
			atomic_fetch_add(&bad, 1);
			break;
		}
		pthread_barrier_wait(&start);
		disturb(rounds);
		pthread_barrier_wait(&done);
		for (unsigned long b = 0; b < NB_FAULTED; b++)
			if (pmt_peek(mm, BASE + b * HPAGE) != (char)('A' + b))
				atomic_fetch_add(&bad, 1);
		if (rounds % 8 == 0) {
			checks++;
			if (!pmt_quiescent_check(m))
				atomic_fetch_add(&bad, 1);
		}
		if (pm_munmap(mm, BASE, NB_BLOCKS * HPAGE))
			atomic_fetch_add(&bad, 1);
		rounds++;
	} while (tap_now() < end);
	stop_run(m, t, &s1);
	is_int(atomic_load(&bad), 0, "%s: %ld rounds of THP faults in neighbouring PMD slots "
	       "beside a fork, a split and zaps (%lu THP faults, %lu splits), %ld machine checks: "
	       "every byte read back", name, rounds, s1.thp_faults - s0.thp_faults,
	       s1.thp_splits - s0.thp_splits, checks);
	ok(s1.thp_faults - s0.thp_faults >= (unsigned long)rounds * NB_FAULTED,
	   "%s: ... every faulter's block was a THP", name);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, name);
}

int main(void)
{
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, "linux");
	run(PM_MACHINE_RANGE_MM, "range");
	run_neighbours(PM_MACHINE_LINUX_MM, "linux");
	run_neighbours(PM_MACHINE_RANGE_MM, "range");
	return done_testing();
}
