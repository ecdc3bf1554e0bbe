/* SPDX-License-Identifier: MIT */
/*
 * rcu.h - the only file that names liburcu.
 *
 * pinmm uses RCU for two things: page-table pages and shmem tree nodes are freed through
 * pm_call_rcu(), and lockless walkers (GUP-fast, pm_access, page-cache lookups) run between
 * pm_rcu_read_lock() and pm_rcu_read_unlock(), so that a table or node they reach stays valid
 * memory until they leave. Pointers published for those walkers are stored with release and
 * loaded with acquire (the C11 spelling of rcu_assign_pointer/rcu_dereference); see atomic.h.
 *
 * The flavor is urcu-memb (membarrier-based: a read lock is a thread-local increment). Threads
 * need no explicit registration: the first read lock or call_rcu of a thread registers it, and
 * a thread-exit destructor unregisters it. A fork child drops the registrations of the threads
 * it does not have (rcu.c).
 *
 * Under ThreadSanitizer, liburcu 0.13's inline-assembly atomics and missing annotations make
 * TSan report races that are not there, so the same calls map to an implementation TSan can
 * follow (src/lib/rcu.c): readers share a pthread rwlock, a grace period takes it for write,
 * and deferred callbacks run on a helper thread after one. It is slower and just as correct.
 *
 * Rules (as the kernel's): never block, allocate or call pm_synchronize_rcu() inside a read
 * section; never call pm_rcu_barrier() from a callback.
 */
#ifndef PM_LIB_RCU_H
#define PM_LIB_RCU_H

#include <stdbool.h>
#include "lib/compiler.h"

#if !PM_TSAN
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>
#include <urcu/call-rcu.h>

/* Our callbacks then have liburcu's exact type: no casts between function types. */
#define pm_rcu_head rcu_head
#else
struct pm_rcu_head {
	struct pm_rcu_head *next;
	void (*func)(struct pm_rcu_head *);
};
#endif

extern __thread bool pm__rcu_registered __hidden;
__hidden void pm__rcu_register_thread(void);

static inline void pm_rcu_ensure_registered(void)
{
	if (unlikely(!pm__rcu_registered))
		pm__rcu_register_thread();
}

#if !PM_TSAN
static inline void pm_rcu_read_lock(void)
{
	pm_rcu_ensure_registered();
	urcu_memb_read_lock();
}

static inline void pm_rcu_read_unlock(void)
{
	urcu_memb_read_unlock();
}

static inline bool pm_rcu_read_ongoing(void)
{
	return pm__rcu_registered && urcu_memb_read_ongoing();
}
#else
__hidden void pm_rcu_read_lock(void);
__hidden void pm_rcu_read_unlock(void);
__hidden bool pm_rcu_read_ongoing(void);
#endif

/* Run @func(@head) after every read section that may have seen the object has ended. */
__hidden void pm_call_rcu(struct pm_rcu_head *head, void (*func)(struct pm_rcu_head *));
/* Wait for a grace period. Not inside a read section. */
__hidden void pm_synchronize_rcu(void);

#endif /* PM_LIB_RCU_H */
