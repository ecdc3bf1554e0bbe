/* SPDX-License-Identifier: MIT */
/*
 * owner.h - the per-thread lock-owner ids that debug builds store in held locks: a small
 * number per thread, never 0, handed out on a thread's first use (owner.c).
 *
 * spinlock.h stores the holder's id in the lock word and rwsem.h the writer's in xowner, so
 * that pm_spin_held() and pm_rwsem_is_write_locked() can tell "held by this thread" - what
 * the lock assertions of internal.h (pm_assert_locked) check. Neither lock needs the other
 * for it; both include this.
 */
#ifndef PM_LIB_OWNER_H
#define PM_LIB_OWNER_H

#include "lib/compiler.h"

/* This thread's id, 0 until its first pm_lock_owner_id(). */
extern __thread int pm__lock_owner __hidden;
__hidden int pm__lock_owner_init(void);

static inline int pm_lock_owner_id(void)
{
	return likely(pm__lock_owner) ? pm__lock_owner : pm__lock_owner_init();
}

#endif /* PM_LIB_OWNER_H */
