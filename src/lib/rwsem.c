// SPDX-License-Identifier: MIT
/*
 * rwsem.c - the slow paths of pm_rwsem (see rwsem.h): spin, yield, then sleep on a futex.
 *
 * No lost wake-up. A sleeper reads xseq, increments xsleepers, re-reads xcount and sleeps only
 * if it is still blocked, on the value of xseq it read first. An unlocker changes xcount, then
 * reads xsleepers and, if non-zero, bumps xseq and wakes everyone. All four are sequentially
 * consistent, so either the unlocker sees the sleeper (and the bump makes the futex wait return
 * or the wake finds it asleep), or the sleeper's re-read of xcount sees the unlock and does not
 * sleep. Waking every sleeper is simple and, for mmap_lock's few waiters, cheap.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/rwsem.h"

__thread struct pm_rwsem_run pm__rwsem_runs[2]; /* ranges this thread holds (mm/range.c) */
#if PM_DEBUG >= 1
__thread int pm__i_mmap_held; /* i_mmap locks this thread holds (rwsem.h) */
__thread int pm__vma_read_held; /* VMA read locks this thread holds (mm/vma_lock.c) */
#endif

/* cpu_relax() spins before yielding, meant to outlast a VMA change; what a spin costs
 * depends on the CPU (docs/perf-log.md, 2026-12-02, "spinning"). */
#define SPINS 512
#define YIELDS 4

static bool read_blocked(long c)
{
	return c & (PM_RWSEM_WRITER | PM_RWSEM_WWAIT);
}

static bool write_blocked(long c)
{
	return c & ~PM_RWSEM_WWAIT;
}

static void rwsem_sleep(struct pm_rwsem *sem, bool (*blocked)(long))
{
	unsigned seq = atomic_load_mb(&sem->xseq);

	atomic_add_mb(&sem->xsleepers, 1);
	if (blocked(atomic_load_mb(&sem->xcount)))
		syscall(SYS_futex, (unsigned *)&sem->xseq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
	atomic_sub_mb(&sem->xsleepers, 1);
}

static void backoff(struct pm_rwsem *sem, unsigned tries, bool (*blocked)(long))
{
	if (tries < SPINS)
		cpu_relax();
	else if (tries < SPINS + YIELDS)
		sched_yield();
	else
		rwsem_sleep(sem, blocked);
}

void pm__rwsem_wake(struct pm_rwsem *sem)
{
	atomic_add_mb(&sem->xseq, 1);
	syscall(SYS_futex, (unsigned *)&sem->xseq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void pm__down_read_slow(struct pm_rwsem *sem)
{
	for (unsigned tries = 0;; tries++) {
		long c = atomic_load_relaxed(&sem->xcount);

		if (!read_blocked(c)) {
			if (atomic_cas_mb(&sem->xcount, &c, c + PM_RWSEM_READER))
				return;
			continue;
		}
		backoff(sem, tries, read_blocked);
	}
}

void pm__down_write_slow(struct pm_rwsem *sem)
{
	for (unsigned tries = 0;; tries++) {
		long c = atomic_load_relaxed(&sem->xcount);

		if (!write_blocked(c)) {
			/* Free (maybe with our waiting bit): take it, clearing the bit. */
			if (atomic_cas_mb(&sem->xcount, &c, PM_RWSEM_WRITER))
				return;
			continue;
		}
		/* Hold new readers back, so that a stream of them cannot starve us. */
		if (!(c & PM_RWSEM_WWAIT))
			atomic_or_mb(&sem->xcount, PM_RWSEM_WWAIT);
		backoff(sem, tries, write_blocked);
	}
}
