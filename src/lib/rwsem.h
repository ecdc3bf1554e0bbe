/* SPDX-License-Identifier: MIT */
/*
 * rwsem.h - a reader-writer semaphore for mmap_lock, in the kernel's spirit: readers share it
 * with one atomic add, a writer takes it with one compare-and-swap, waiting writers hold new
 * readers back (no writer starvation), and a waiter spins briefly before it sleeps - the
 * critical sections it guards (a VMA change, a fault) are short, and handing the lock over
 * through a futex sleep and wake-up costs a thousand times more than they do. That is what
 * Linux's rwsem does with optimistic spinning; a plain pthread rwlock sleeps at once, which
 * turns mmap/munmap from several threads of one mm into a convoy of futex wake-ups.
 *
 * xcount: bit 0 a writer holds it, bit 1 a writer waits, bits 8.. the number of readers.
 * Sleepers wait on xseq (a futex word) after announcing themselves in xsleepers; an unlock
 * that may let someone in bumps xseq and wakes them when xsleepers is non-zero. The announce
 * -> re-check -> sleep order on one side and change -> check sleepers -> bump on the other
 * are sequentially consistent, so no wake-up is lost (see rwsem.c).
 *
 * Debug builds also record the writer's lock-owner id (owner.h) in xowner, so that
 * pm_rwsem_is_write_locked() means "write-locked by this thread"; pm_rwsem_is_locked() means
 * "held by someone", as Linux's rwsem_is_locked(): readers are not tracked one by one.
 */
#ifndef PM_LIB_RWSEM_H
#define PM_LIB_RWSEM_H

#include <stdbool.h>
#include "lib/atomic.h"
#include "lib/compiler.h"
#include "lib/owner.h"
#include "lib/trace.h"

struct pm_rwsem {
	_Atomic long xcount;
	_Atomic unsigned xseq;
	_Atomic int xsleepers;
	/* The writer's lock-owner id, 0 when no writer: debug builds only, but always there, so
	 * that code built at another PM_DEBUG (tests/unit/test_unpin_release.c) sees one layout. */
	_Atomic int xowner;
};

/*
 * A run [lo, hi] of an array of rwsems, all of one owner, that this thread holds: what lock
 * assertions ask (as lockdep's held-lock records). At most two owners at a time.
 */
struct pm_rwsem_run {
	const void *owner;	/* NULL: the record is free */
	unsigned lo, hi;
	bool write;		/* taken for write (downgraded ones too) */
	bool downgraded;	/* the owner downgraded it: its write side has ended */
};
extern __thread struct pm_rwsem_run pm__rwsem_runs[2] __hidden;

/* The other per-thread lock records that assertions read (internal.h, pgtable/pgtable.h,
 * mm/mm.h), defined in rwsem.c beside pm__rwsem_runs. */
extern __thread int pm__vma_read_held __hidden; /* counted in debug builds only */
#if PM_DEBUG >= 1
#define pm__vma_read_held_here() (pm__vma_read_held > 0)
#else
#define pm__vma_read_held_here() true
#endif

/* The i_mmap lock, counted per thread in debug builds for zap_assert_held(). */
#if PM_DEBUG >= 1
extern __thread int pm__i_mmap_held __hidden;
#define PM_I_MMAP_HELD(delta) (pm__i_mmap_held += (delta))
#else
#define pm__i_mmap_held 1
#define PM_I_MMAP_HELD(delta) ((void)0)
#endif

#define PM_RWSEM_WRITER 1L
#define PM_RWSEM_WWAIT 2L
#define PM_RWSEM_READER (1L << 8)

__hidden void pm__down_read_slow(struct pm_rwsem *sem);
__hidden void pm__down_write_slow(struct pm_rwsem *sem);
__hidden void pm__rwsem_wake(struct pm_rwsem *sem);

static inline void pm_rwsem_init(struct pm_rwsem *sem)
{
	atomic_store_relaxed(&sem->xcount, 0);
	atomic_store_relaxed(&sem->xseq, 0);
	atomic_store_relaxed(&sem->xsleepers, 0);
#if PM_DEBUG >= 1
	atomic_store_relaxed(&sem->xowner, 0);
#endif
}

static inline void pm_down_read(struct pm_rwsem *sem)
{
	long c = atomic_load_relaxed(&sem->xcount);

	if (unlikely(c & (PM_RWSEM_WRITER | PM_RWSEM_WWAIT)) ||
	    !atomic_cas_mb(&sem->xcount, &c, c + PM_RWSEM_READER))
		pm__down_read_slow(sem);
	pm__trace_lock(sem, 0);
}

static inline void pm_up_read(struct pm_rwsem *sem)
{
	long c;

	pm__trace_unlock(sem);
	c = atomic_sub_mb(&sem->xcount, PM_RWSEM_READER) - PM_RWSEM_READER;

	/* The last reader lets a waiting writer in. */
	if (unlikely(c < PM_RWSEM_READER && atomic_load_mb(&sem->xsleepers)))
		pm__rwsem_wake(sem);
}

static inline void pm_down_write(struct pm_rwsem *sem)
{
	long c = 0;

	if (unlikely(!atomic_cas_strong_mb(&sem->xcount, &c, PM_RWSEM_WRITER)))
		pm__down_write_slow(sem);
#if PM_DEBUG >= 1
	atomic_store_relaxed(&sem->xowner, pm_lock_owner_id());
#endif
	pm__trace_lock(sem, 1);
}

static inline void pm_up_write(struct pm_rwsem *sem)
{
	pm__trace_unlock(sem);
#if PM_DEBUG >= 1
	atomic_store_relaxed(&sem->xowner, 0);
#endif
	atomic_and_mb(&sem->xcount, ~PM_RWSEM_WRITER);
	if (unlikely(atomic_load_mb(&sem->xsleepers)))
		pm__rwsem_wake(sem);
}

/*
 * pm_downgrade_write() - turn the write hold into a read hold, atomically: no writer can get
 * in between, and readers that waited only for this writer may enter now (Linux's
 * downgrade_write).
 */
static inline void pm_downgrade_write(struct pm_rwsem *sem)
{
	pm__trace_unlock(sem);
	pm__trace_lock(sem, 0);
#if PM_DEBUG >= 1
	atomic_store_relaxed(&sem->xowner, 0);
#endif
	atomic_add_mb(&sem->xcount, PM_RWSEM_READER - PM_RWSEM_WRITER);
	if (unlikely(atomic_load_mb(&sem->xsleepers)))
		pm__rwsem_wake(sem);
}

/* Held by anyone, for read or write (Linux's rwsem_is_locked). */
static inline bool pm_rwsem_is_locked(struct pm_rwsem *sem)
{
	return atomic_load_relaxed(&sem->xcount) & ~PM_RWSEM_WWAIT;
}

/* Write-locked by this thread (debug builds); by anyone (release builds). */
static inline bool pm_rwsem_is_write_locked(struct pm_rwsem *sem)
{
#if PM_DEBUG >= 1
	return atomic_load_relaxed(&sem->xowner) == pm_lock_owner_id();
#else
	return atomic_load_relaxed(&sem->xcount) & PM_RWSEM_WRITER;
#endif
}

#endif /* PM_LIB_RWSEM_H */
