/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h - a four-byte test-and-test-and-set lock that yields the CPU when it spins long.
 *
 * Page-table locks live in every page-table page's descriptor, so they must be small; they are
 * held for a few dozen instructions (or one 4 KiB copy). On a machine with fewer CPUs than
 * threads a holder can be preempted, so a waiter yields after a short spin instead of burning
 * its time slice.
 */
#ifndef PM_LIB_SPINLOCK_H
#define PM_LIB_SPINLOCK_H

#include <sched.h>
#include <stdbool.h>
#include "lib/atomic.h"
#include "lib/compiler.h"

struct pm_spinlock {
	_Atomic int xlocked;
};

#define PM_SPINLOCK_INIT { 0 }
#define PM_SPIN_BEFORE_YIELD 128

static inline void pm_spin_init(struct pm_spinlock *l)
{
	atomic_store_relaxed(&l->xlocked, 0);
}

static inline bool pm_spin_trylock(struct pm_spinlock *l)
{
	return !atomic_load_relaxed(&l->xlocked) && !atomic_xchg_acquire(&l->xlocked, 1);
}

static inline void pm_spin_lock(struct pm_spinlock *l)
{
	while (unlikely(atomic_xchg_acquire(&l->xlocked, 1))) {
		unsigned spins = 0;

		while (atomic_load_relaxed(&l->xlocked)) {
			if (++spins < PM_SPIN_BEFORE_YIELD)
				cpu_relax();
			else
				sched_yield();
		}
	}
}

static inline void pm_spin_unlock(struct pm_spinlock *l)
{
	atomic_store_release(&l->xlocked, 0);
}

static inline bool pm_spin_is_locked(struct pm_spinlock *l)
{
	return atomic_load_relaxed(&l->xlocked) != 0;
}

#endif /* PM_LIB_SPINLOCK_H */
