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
 */
#ifndef PM_LIB_RWSEM_H
#define PM_LIB_RWSEM_H

#include <stdbool.h>
#include "lib/atomic.h"
#include "lib/compiler.h"

struct pm_rwsem {
	_Atomic long xcount;
	_Atomic unsigned xseq;
	_Atomic int xsleepers;
};

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
}

static inline void pm_down_read(struct pm_rwsem *sem)
{
	long c = atomic_load_relaxed(&sem->xcount);

	if (likely(!(c & (PM_RWSEM_WRITER | PM_RWSEM_WWAIT))) &&
	    atomic_compare_exchange_weak_explicit(&sem->xcount, &c, c + PM_RWSEM_READER,
						  memory_order_seq_cst, memory_order_relaxed))
		return;
	pm__down_read_slow(sem);
}

static inline void pm_up_read(struct pm_rwsem *sem)
{
	long c = atomic_fetch_sub_explicit(&sem->xcount, PM_RWSEM_READER, memory_order_seq_cst) -
		 PM_RWSEM_READER;

	/* The last reader lets a waiting writer in. */
	if (unlikely(c < PM_RWSEM_READER && atomic_load_mb(&sem->xsleepers)))
		pm__rwsem_wake(sem);
}

static inline void pm_down_write(struct pm_rwsem *sem)
{
	long c = 0;

	if (likely(atomic_compare_exchange_strong_explicit(&sem->xcount, &c, PM_RWSEM_WRITER,
							   memory_order_seq_cst,
							   memory_order_relaxed)))
		return;
	pm__down_write_slow(sem);
}

static inline void pm_up_write(struct pm_rwsem *sem)
{
	atomic_fetch_and_explicit(&sem->xcount, ~PM_RWSEM_WRITER, memory_order_seq_cst);
	if (unlikely(atomic_load_mb(&sem->xsleepers)))
		pm__rwsem_wake(sem);
}

#endif /* PM_LIB_RWSEM_H */
