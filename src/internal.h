/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what every layer of pinmm shares: the naming rule, the invariants and the
 * assertion macros. Each layer's types, inline helpers and the prototypes that cross its files
 * are in the layer's own header (mem/mem.h, pgtable/pgtable.h, shmem/shmem.h, mm/mm.h,
 * fault/fault.h, gup/gup.h), grouped by the file that defines them ("// mem/page_alloc.c");
 * a file includes the highest one it uses, which includes those below it.
 *
 * Naming (the one rule; docs/architecture.md repeats it):
 *  pm_*		the public API (include/pinmm/), and the primitives of lib/ (pm_spin_lock,
 *		pm_rcu_read_lock, pm_down_read: a small library of their own, named as such)
 *  pm__*		hidden functions and variables that cross files, declared in their layer's
 *		header (for lib/, the primitive's) under the file that defines them
 *  no prefix	static functions of one file, and the static inline helpers in the headers, which
 *		keep Linux's names (folio_put, pte_none, mmap_read_lock)
 *  *_locked	the caller holds the lock that the function's "Context:" line names; the
 *		function asserts it (pm_assert_locked and friends, below)
 *  *_assert_*locked / *_held
 *		a lock assertion: compiled only into debug builds
 * A double underscore inside a name means nothing more: there is no "__" variant convention.
 *
 * Glossary (Linux's words):
 *  frame	one 4 KiB unit of the machine's memory (m->frames); pfn = its index
 *  struct pm_page	the descriptor of one frame; type-stable for the machine's life
 *  folio	2^order frames managed as one; its fields live in the head page's descriptor
 *  pte/pmd/pud/pgd	entries of the four page-table levels; a pmd may be a 2 MiB leaf
 *  vma		a mapped range of an address space with one protection and one backing
 *
 * Invariants, as equations (checked by pm_machine_check() on a quiescent machine):
 *  (R) for an allocated small folio f:
 *	refcount(f) = mapcount(f) + gets(f) + 1024 * pins(f) + cache(f)
 *  (L) for a large folio f (order 9):
 *	refcount(f) = entire_mapcount(f) + sum(mapcount(p) for p in f) + gets(f) + pincount(f)
 *  where cache(f) is 1 when f is in a shmem page cache. The zero page is never counted.
 *  (Z) the huge zero folio z: entire_mapcount(z) = 0 and every mapcount 0 however many PMDs
 *	map it; refcount(z) = [z is the machine's current one] + gets(z) + pincount(z), and it
 *	is the machine's current one while some address space holds a use of it (xhuge_zero).
 *  (F) free frames = frames on buddy lists + frames in per-CPU caches
 *	+ never-used frames above the allocator's frontier (page_alloc.c)
 *  (T) total frames = free + page tables + frames of allocated folios + 1 (zero page)
 *	+ 512 * free hugetlb pool pages (mem/hugetlb_pool.c)
 *  (H) hugetlb pool: total = free + hugetlb folios in use; reserved <= free
 *  (X) a page mapped writable in a private mapping is AnonExclusive, and an AnonExclusive
 *	page is mapped by at most one address space.
 */
#ifndef PM_INTERNAL_H
#define PM_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/compiler.h"

/* ------------------------------------------------------------------------------------------
 * Debug levels: PM_DEBUG=0 (release), 1 (asserts, poisoning, generation counts), 2 (also
 * expensive walks). pm_assert() is level 1, pm_assert_expensive() level 2.
 */
#ifndef PM_DEBUG
#define PM_DEBUG 0
#endif

__hidden __cold __attribute__((noreturn)) void pm__die(const char *file, int line,
						       const char *func, const char *msg);
__hidden __cold __attribute__((noreturn)) void pm__die_cmp(const char *file, int line,
							   const char *func, const char *expr,
							   long a, long b);
#define pm_die(msg) pm__die(__FILE__, __LINE__, __func__, (msg))
/*
 * Each macro stringifies its own argument: a condition handed on to another macro would be
 * macro-expanded first and print as the expansion of atomic_load_relaxed() and friends.
 * pm_assert_cmp() prints both values as well.
 */
#define pm_bug_on(cond) \
	do { \
		if (unlikely(cond)) \
			pm_die("BUG: " #cond); \
	} while (0)
#if PM_DEBUG >= 1
#define pm_assert(cond) \
	do { \
		if (unlikely(!(cond))) \
			pm_die("BUG: !(" #cond ")"); \
	} while (0)
#define pm_assert_cmp(a, op, b) \
	do { \
		long a__ = (long)(a), b__ = (long)(b); \
		if (unlikely(!(a__ op b__))) \
			pm__die_cmp(__FILE__, __LINE__, __func__, "BUG: !(" #a " " #op " " #b ")", \
				    a__, b__); \
	} while (0)
#else
#define pm_assert(cond) ((void)0)
#define pm_assert_cmp(a, op, b) ((void)0)
#endif
#if PM_DEBUG >= 2
#define pm_assert_expensive(cond) \
	do { \
		if (unlikely(!(cond))) \
			pm_die("BUG: !(" #cond ")"); \
	} while (0)
#else
#define pm_assert_expensive(cond) ((void)0)
#endif
/*
 * Lock assertions (Linux's lockdep_assert_held and mmap_assert_locked), one per "Context:"
 * line that names a lock the caller holds. Debug builds check that this thread holds the
 * spinlock or write-holds mmap_lock; for mmap_lock held for read they can only check that
 * someone holds it (readers are not tracked one by one). Release builds compile them away.
 */
#define pm_assert_locked(spinlock) pm_assert(pm_spin_held(spinlock))
/* The assertions on an mm's locks are in the layers' headers: mmap_assert_locked() and the
 * page-table walks' in pgtable/pgtable.h, the VMA, fault and zap ones in mm/mm.h, the i_mmap
 * lock's in shmem/shmem.h; they read lib/rwsem.h's per-thread records. */
/* An RCU read-side section (Linux's rcu_read_lock_held()). */
#define rcu_assert_held() pm_assert(pm_rcu_read_ongoing())

#define pm_warn_once(cond, msg) \
	({ \
		static _Atomic int warned__; \
		int c__ = !!(cond); \
		if (unlikely(c__) && !atomic_xchg_mb(&warned__, 1)) \
			fprintf(stderr, "pinmm: WARNING: %s (%s:%d)\n", (msg), __FILE__, __LINE__); \
		c__; \
	})

#endif /* PM_INTERNAL_H */
