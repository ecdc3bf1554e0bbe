/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h - a four-byte test-and-test-and-set lock that yields the CPU when it spins long.
 *
 * Page-table locks live in every page-table page's descriptor, so they must be small; they are
 * held for a few dozen instructions (or one 4 KiB copy). On a machine with fewer CPUs than
 * threads a holder can be preempted, so a waiter yields after a short spin instead of burning
 * its time slice.
 *
 * Debug builds (PM_DEBUG >= 1) store the holder's lock-owner id (pm_lock_owner_id() of
 * owner.h, never 0) instead of 1, with a compare-and-swap instead of an exchange, so that
 * pm_spin_held() can tell "held by this thread" - what the lock assertions of internal.h
 * (pm_assert_locked) check. Release builds store 1 with an exchange, as before: no cost.
 */
#ifndef PM_LIB_SPINLOCK_H
#define PM_LIB_SPINLOCK_H

#include <sched.h>
#include <stdbool.h>
#include "lib/atomic.h"
#include "lib/compiler.h"
#include "lib/owner.h"
#include "lib/trace.h"

struct pm_spinlock {
	_Atomic int xlocked;
};

#define PM_SPINLOCK_INIT { 0 }
/* cpu_relax() spins before each yield, meant to outlast the critical sections it guards; a
 * spin's cost depends on the CPU (docs/perf-log.md, 2026-12-02, "spinning"). */
#define PM_SPIN_BEFORE_YIELD 128

/*
 * One attempt to take @l. Debug builds use a compare-and-swap, so that a failed attempt does
 * not overwrite the holder's id; release builds keep the plain exchange. Sequentially
 * consistent, not just acquire: a page-table lock's holder then reads what the table's
 * lockless readers stored before they read the lock (pgtable.h, pm__ptl_lock). On x86 it is
 * the same instruction.
 */
static inline bool pm_spin_try_acquire(struct pm_spinlock *l)
{
#if PM_DEBUG >= 1
	int unlocked = 0;

	return atomic_cas_mb(&l->xlocked, &unlocked, pm_lock_owner_id());
#else
	return !atomic_xchg_mb(&l->xlocked, 1);
#endif
}

static inline void pm_spin_init(struct pm_spinlock *l)
{
	atomic_store_relaxed(&l->xlocked, 0);
}

static inline bool pm_spin_trylock(struct pm_spinlock *l)
{
	if (atomic_load_relaxed(&l->xlocked) || !pm_spin_try_acquire(l))
		return false;
	pm__trace_lock(l, 1);
	return true;
}

static inline void pm_spin_lock(struct pm_spinlock *l)
{
	while (unlikely(!pm_spin_try_acquire(l))) {
		unsigned spins = 0;

		while (atomic_load_relaxed(&l->xlocked)) {
			if (++spins < PM_SPIN_BEFORE_YIELD)
				cpu_relax();
			else
				sched_yield();
		}
	}
	pm__trace_lock(l, 1);
}

static inline void pm_spin_unlock(struct pm_spinlock *l)
{
	pm__trace_unlock(l);
	atomic_store_release(&l->xlocked, 0);
}

static inline bool pm_spin_is_locked(struct pm_spinlock *l)
{
	return atomic_load_relaxed(&l->xlocked) != 0;
}

/* Held by this thread? Exact in debug builds; release builds can only say "held". */
static inline bool pm_spin_held(struct pm_spinlock *l)
{
#if PM_DEBUG >= 1
	return atomic_load_relaxed(&l->xlocked) == pm_lock_owner_id();
#else
	return pm_spin_is_locked(l);
#endif
}

#endif /* PM_LIB_SPINLOCK_H */
