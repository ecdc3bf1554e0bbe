/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the types every layer of pinmm shares, and the prototypes that cross files,
 * grouped by the file that defines them ("// mem/page_alloc.c").
 *
 * Naming (the one rule; docs/architecture.md repeats it):
 *  pm_*		the public API (include/pinmm/), and the primitives of lib/ (pm_spin_lock,
 *		pm_rcu_read_lock, pm_down_read: a small library of their own, named as such)
 *  pm__*		hidden functions and variables that cross files, declared here (or, for
 *		lib/, in the primitive's header) under the file that defines them
 *  no prefix	static functions of one file, and the static inline helpers below, which
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

#include <pinmm/pinmm.h>

#include "lib/atomic.h"
#include "lib/compiler.h"
#include "lib/list.h"
#include "lib/rcu.h"
#include "lib/rwsem.h"
#include "lib/spinlock.h"
#include "lib/trace.h"
#include "mm/vma_tree.h"

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
#define mmap_assert_locked(mm) pm_assert(mm_locked(mm))
#define mmap_assert_write_locked(mm) pm_assert(mm_write_locked(mm))
/*
 * Page-table walks: mmap_lock, an RCU read section (tables are freed through RCU), a VMA's read
 * lock (a fault: the tables under a live VMA are not freed), or - for truncation's zaps of
 * other mms - an i_mmap lock, which keeps the VMA and its tables.
 */
#define walk_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm_rcu_read_ongoing() || \
		  pm__i_mmap_held > 0 || (PM_DEBUG >= 1 && pm__vma_read_held_here()))
/*
 * The fault path: mmap_lock, or the VMA's own read lock (Linux's assert_fault_locked). Debug
 * builds count the VMA read locks each thread holds (pm__vma_read_held, mm/vma_lock.c).
 */
#define VMA_LOCK_WRITER (1U << 31)
#define VMA_LOCK_WAITER (1U << 30)
#define VMA_LOCK_READERS (VMA_LOCK_WAITER - 1)
/* Populating page tables: mmap_lock, or a fault's VMA read lock (the tables under a live VMA
 * are never freed, and populating takes the parent table's lock). */
#define pgtable_populate_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__vma_read_held_here())
#define assert_vma_read_locked(vma) pm_assert(pm__vma_read_held_here())
#define assert_fault_locked(vma) \
	pm_assert(mm_locked((vma)->mm) || pm__vma_read_held_here())
/* Splitting a PMD leaf: mmap_lock, a COW fault's VMA lock, or truncation's i_mmap lock. */
#define split_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__i_mmap_held > 0 || \
		  pm__vma_read_held_here())
/* Zaps: the mm's mmap_lock, or - truncation zapping other mms - an object's i_mmap lock. */
#define zap_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__i_mmap_held > 0)
/* The fault path when only the mm is at hand (assert_fault_locked without the VMA). */
#define fault_assert_held(mm) pm_assert(mm_locked(mm) || pm__vma_read_held_here())
/* Some object's i_mmap lock (this thread's count of them, debug builds). */
#define i_mmap_assert_held() pm_assert(pm__i_mmap_held > 0)
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

#define PM_POISON_FREE 0xdf /* fills freed frames in debug builds */

/* ------------------------------------------------------------------------------------------
 * Frames, pages and folios (mem/).
 */
#define PAGE_SHIFT PM_PAGE_SHIFT
#define PAGE_SIZE ((unsigned long)PM_PAGE_SIZE)
#define PAGE_MASK (~(PAGE_SIZE - 1))
#define PMD_SHIFT PM_PMD_SHIFT
#define PMD_SIZE PM_PMD_SIZE
#define PMD_MASK (~(PMD_SIZE - 1))
#define PUD_SHIFT 30
#define PUD_SIZE (1UL << PUD_SHIFT)
#define PUD_MASK (~(PUD_SIZE - 1))
#define PGDIR_SHIFT 39
#define PGDIR_SIZE (1UL << PGDIR_SHIFT)
#define PGDIR_MASK (~(PGDIR_SIZE - 1))
#define PTRS_PER_TABLE 512
#define HPAGE_PMD_ORDER (PMD_SHIFT - PAGE_SHIFT)
#define HPAGE_PMD_NR (1 << HPAGE_PMD_ORDER)
#define PM_MAX_ORDER HPAGE_PMD_ORDER /* buddy orders 0..9 */
#define GUP_PIN_COUNTING_BIAS PM_GUP_PIN_COUNTING_BIAS

/* Bits of page->xflags. Per-page bits are marked; the others are meaningful on a head page. */
enum pm_pageflag {
	PG_locked,	   /* folio lock (bit spinlock) */
	PG_anon,	   /* anonymous folio (no page cache) */
	PG_dirty,	   /* folio contents differ from their backing (shmem: always fine) */
	PG_head,	   /* first page of a large folio */
	PG_anon_exclusive, /* per page: mapped by exactly one address space, may be pinned */
	PG_buddy,	   /* free block head on a buddy list (order in page->xorder) */
	PG_pcp,		   /* free frame in a per-CPU cache */
	PG_table,	   /* a page-table page */
	PG_zero,	   /* the machine's shared zero page */
	PG_shmem,	   /* in (or removed from) a shmem page cache */
	PG_hugetlb,	   /* a 2 MiB page of the hugetlb pool, in use or free (mem/hugetlb_pool.c) */
	PG_huge_zero,	   /* the machine's huge zero folio (mem/folio.c); on its head */
	PG_hot,		   /* head: pins count per CPU, the bias is held (mem/folio_hot.c) */
	PG_hot_leave,	   /* head: hot mode is ending; its pins are being folded */
};
#define PGF(bit) (1UL << (bit))

/*
 * struct pm_page - one frame's descriptor, 64 bytes.
 *
 * xflags, xcompound_head and xrefcount may be read by speculative walkers (GUP-fast) at any
 * time, whatever the frame is used for, so they are atomic and outside the union. A frame
 * never allocated has a descriptor that was never written (all zero, mslot 0 included: see
 * page_alloc.c), which reads as a free frame. The rest is
 * owned by whoever owns the frame: the buddy allocator (free), the folio's holders (folio
 * fields, under the locks their comments name), or the page-table code (table fields).
 */
struct pm_page {
	_Atomic unsigned long xflags;
	_Atomic uintptr_t xcompound_head; /* tail page: head | 1; otherwise 0 */
	union {
		struct {
			_Atomic int xrefcount; /* head/small: folio refcount; 0 = free/tail/table */
			_Atomic int xmapcount; /* PTE mappings of this page */
		};
		/* Both at once: a small folio's unmap drops one of each (pm__folio_unmap_put) */
		_Atomic uint64_t xref_map;
	};
	_Atomic int xpincount;		  /* head of a large folio: outstanding pins */
	_Atomic int xentire_mapcount;	  /* head of a large folio: PMD mappings */
	_Atomic uint8_t xorder;		  /* folio order (head), or free block order (buddy) */
	uint8_t free_cpu;		  /* 1 + the CPU whose cache took the frame when it
					   * was last freed (mod 255), 0 = never; its owner's */
	uint16_t mslot;			  /* index of the owning machine in pm__machines[] */
	_Atomic uint32_t xgen;		  /* bumped each time the frame is freed (debug) */
	union {
		struct {		     /* an allocated folio (head page) */
			struct pm_shmem *mapping; /* shmem object, or NULL; under the tree lock */
			unsigned long index;	  /* page index in mapping */
		};
		struct pm_list lru;	     /* free: buddy or per-CPU list link */
		struct {		     /* a page-table page */
			struct pm_spinlock ptl; /* split lock: PTE table's PTL, PMD table's PMD lock */
			int level;		/* 4 = PGD ... 1 = PTE */
			union {		/* never overlaps the lock */
				struct pm_rcu_head rcu;	   /* deferred free */
				struct pm_page *huge_ptes; /* PMD table: PTE tables deposited for
							    * its 2 MiB leaves; under its lock */
				struct pm_page *deposit_next; /* a deposited PTE table: the next */
			};
		};
	};
};
_Static_assert(sizeof(struct pm_page) == 64, "struct pm_page is one cache line");
_Static_assert(offsetof(struct pm_page, xref_map) % 8 == 0 &&
		       offsetof(struct pm_page, xmapcount) == offsetof(struct pm_page, xrefcount) + 4,
	       "xref_map covers exactly xrefcount and xmapcount");

/*
 * struct pm_folio - a folio is named by its head page; its fields are the head's. Code that
 * works on whole folios takes a struct pm_folio * so that the type says which one it means.
 */
struct pm_folio {
	struct pm_page page;
};

/*
 * Per-CPU free-frame cache (order 0), the pcp lists of Linux: a list per kind of memory
 * (page_alloc.c, "Two kinds"), each refilled one PCP_BATCH block at a time, drained
 * PCP_BATCH frames at a time when both together pass @high, which tunes itself between the
 * machine's pcp_high_min and pcp_high_max (page_alloc.c). Only its CPU's threads use it in
 * the common case; a thread that migrated, and the drain before an allocation fails, take its
 * lock like anyone else.
 */
enum pcp_list {
	PCP_MOVABLE,	/* user memory: anonymous, shmem and COW pages */
	PCP_UNMOVABLE,	/* the machine's own: page tables (PM_ALLOC_UNMOVABLE) */
	PCP_NR_LISTS
};

struct pm_pcp {
	struct pm_spinlock lock;
	_Atomic int xcount;	/* frames on both lists; written under lock, read by anyone */
	int high;		/* drain above this; under lock */
	unsigned home;		/* the zone whose frames it caches; read-only */
	int nr[PCP_NR_LISTS];	/* frames on each list; under lock */
	struct pm_list lists[PCP_NR_LISTS]; /* hottest first; under lock */
} __cacheline_aligned;

/*
 * A buddy zone: the free blocks of one home, a contiguous, max-order-aligned run of frames
 * [base, end) (page_alloc.c). The per-CPU caches of the CPUs whose home it is refill from it
 * first, so that frames used by different CPUs lie far apart in the descriptor array.
 */
struct pm_zone {
	struct pm_spinlock lock;	/* zone_lock: free_area, xnr_free, xfrontier */
	unsigned long base, end;	/* pfns; read-only after creation */
	_Atomic unsigned long xfrontier; /* pfn: frames from here to end were never allocated
					  * and their descriptors never written */
	struct pm_list free_area[PM_MAX_ORDER + 1];
	_Atomic unsigned long xnr_free[PM_MAX_ORDER + 1]; /* blocks; written under lock */
} __cacheline_aligned;

#define PCP_BATCH_ORDER 6
#define PCP_BATCH (1 << PCP_BATCH_ORDER) /* frames per refill and per drain */

/* Per-thread event counters: the order of struct pm_stats. */
#define PM_NR_STATS (sizeof(struct pm_stats) / sizeof(unsigned long))
enum pm_stat_item {
	NR_FOLL_PIN_ACQUIRED,
	NR_FOLL_PIN_RELEASED,
	GUP_FAST_PAGES,
	GUP_SLOW_PAGES,
	GUP_FAST_FALLBACKS,
	FAULTS,
	THP_FAULTS,
	THP_FALLBACKS,
	THP_SPLITS,
	COW_COPIES,
	COW_REUSES,
	FORK_PINNED_COPIES,
	SHMEM_ALLOCS,
	SHMEM_ALLOC_RACES,
	SHMEM_LOCK_ACQUISITIONS,
	HAS_PINNED_WRITES,
	UNPIN_FOLIO_UPDATES,
	PGTABLE_ALLOCS,
	PGTABLE_FREES,
	ALLOC_FAILURES,
	VMA_LOCK_SUCCESS,
	VMA_LOCK_ABORT,
	VMA_LOCK_RETRY,
	VMA_LOCK_MISS,
	HUGETLB_FAULTS,
	ZONE_LOCK_ACQUISITIONS,
	REMOTE_FRAMES,
	PGMIGRATE_SUCCESS,
	PGMIGRATE_FAIL,
	COMPACT_SUCCESS,
	COMPACT_FAIL,
	MIGRATE_PINNED_SKIPS,
	PM_NR_PUBLIC_ITEMS,
	/*
	 * Private items, each an event that several public counters count: the hot path adds to
	 * one slot and pm_machine_stats() adds it to each of them, so that a one-page pin or
	 * unpin writes one counter, not two.
	 */
	GUP_FAST_PINS = PM_NR_PUBLIC_ITEMS, /* nr_foll_pin_acquired and gup_fast_pages */
	UNPIN_SMALL_ONE,		    /* nr_foll_pin_released and unpin_folio_updates */
	PM_NR_STAT_ITEMS
};
_Static_assert(PM_NR_PUBLIC_ITEMS == PM_NR_STATS, "enum pm_stat_item matches struct pm_stats");

struct pm_stat_block {
	_Atomic unsigned long v[PM_NR_STAT_ITEMS]; /* written only by the owning thread */
	struct pm_list link;		      /* on machine->stat_blocks, under machine->lock */
	bool in_use;			      /* owned by a live thread; under machine->lock */
} __cacheline_aligned;

/*
 * Free fixed-size objects of one kind (mem/objcache.c), as Linux's slab keeps them: a cache
 * per CPU, and the machine's depot behind them (the last entry of the array).
 */
struct pm_obj_cache {
	struct pm_spinlock lock;
	_Atomic unsigned xcount;	/* objects on head; written under lock, peeked at
					 * without it */
	void *head;			/* linked through their first word; under lock */
} __cacheline_aligned;

#define OBJ_CACHE_BATCH 32	/* objects moved between a CPU's cache and the depot at once */
#define OBJ_CACHE_HIGH 128	/* a CPU's cache gives a batch back to the depot above this */
#define OBJ_DEPOT_MAX 4096	/* the depot frees to malloc above this */

#define PM_HUGETLB_FAULT_MUTEXES 64 /* hashed by (object, 2 MiB index), mem/hugetlb_pool.c */

/*
 * struct pm_machine - physical memory and everything global to it.
 */
struct pm_machine {
	/* Read-mostly after creation. */
	uint64_t id;			/* unique for the process's life, never reused */
	unsigned knobs;
	unsigned nr_cpus;
	bool range_mm;			/* new mms use the range design (mm/range.c) */
	uint16_t slot;			/* index in pm__machines[] */
	char *frames;			/* the machine's memory: nr_pages frames, 2 MiB aligned */
	struct pm_page *pages;		/* nr_pages descriptors; initialised below the zones'
					 * frontiers */
	unsigned long nr_pages;
	struct pm_page *zero_page;
	/* The huge zero folio (mem/folio.c): made when a first address space wants it, given
	 * back when the last one that used it goes (Linux's huge_zero_refcount, with an
	 * immediate shrinker). Written under huge_zero_lock; read locklessly by its users. */
	struct pm_folio *_Atomic xhuge_zero_folio;
	unsigned long huge_zero_users;	/* address spaces that used it; under huge_zero_lock */
	struct pm_spinlock huge_zero_lock;
	struct pm_pcp *pcp;		/* nr_cpus per-CPU caches, each of its CPU's home zone */
	struct pm_pcp *pcp_away;	/* nr_cpus x nr_zones: a CPU's caches of the other
					 * zones' frames (its home's entry unused); NULL with
					 * one zone */
	int pcp_high_min, pcp_high_max;	/* bounds of each cache's high mark */
	struct pm_obj_cache *shmem_nodes; /* free shmem tree nodes: nr_cpus caches and the
					   * depot (mem/objcache.c, shmem/cache.c) */
	_Atomic long xfail_nth;		/* pm_fail_nth(): allocations until one fails; 0 = off */
	struct pm_stat_block shared_stats; /* fallback when a thread cannot get a block */
	void *frames_map;		/* the mmap that holds the frames */
	size_t frames_map_len;

	/* The buddy zones (page_alloc.c): one per home, each with its own lock and lists. */
	struct pm_zone *zones;		/* nr_zones, each __cacheline_aligned */
	unsigned nr_zones;
	unsigned nr_normal_zones;	/* the homes, below movable_base; the movable zone,
					 * if any, is zones[nr_normal_zones] */
	unsigned long zone_pages;	/* frames per home (the last home takes the rest) */
	unsigned long movable_base;	/* pfn: the movable zone is [movable_base, nr_pages);
					 * nr_pages when there is none */
	/* Page tables waiting for a grace period to be freed: written per table, so not on
	 * the read-mostly lines above that every allocation reads. */
	_Atomic long xrcu_pending __cacheline_aligned;
	_Atomic unsigned long xanon_vma_seq; /* the last anon_vma id given (pm_vma.xanon_vma) */

	/* The hugetlb pool (mem/hugetlb_pool.c): free 2 MiB pages on a list, under hugetlb_lock. */
	struct pm_spinlock hugetlb_lock __cacheline_aligned;
	struct pm_list hugetlb_free;	/* free pool pages, linked through the head's lru */
	unsigned long hugetlb_total;	/* nr_hugepages; read-only after creation */
	unsigned long hugetlb_nr_free;	/* pages on hugetlb_free; under hugetlb_lock */
	unsigned long hugetlb_resv;	/* free pages promised to mappings; under hugetlb_lock */
	/* Linux's hugetlb_fault_mutex_table: the faults of private mappings on one 2 MiB page
	 * (object, index), and MADV_DONTNEED of it, one at a time (mem/hugetlb_pool.c). */
	pthread_mutex_t hugetlb_fault_mutex[PM_HUGETLB_FAULT_MUTEXES];

	/* Hot folios (mem/folio_hot.c): per-CPU pin counts of folios several CPUs pin. */
	struct pm_folio_hot *_Atomic *_Atomic xhot; /* nr_pages entries by head pfn, or NULL
						     * before the first folio is hot */
	struct pm_spinlock hot_lock __cacheline_aligned; /* entering hot mode; the list */
	struct pm_folio_hot *hot_list;	/* every state made; under hot_lock */
	unsigned hot_nr, hot_max;	/* states made, and the most there may be */

	/* Compaction (mm/migrate.c): one run at a time; an mm leaves the mms list only under
	 * it, so a run may use the mms it found there. Taken before any mm's lock. */
	pthread_mutex_t compact_lock __cacheline_aligned;
	_Atomic unsigned xcompact_considered;	/* THP faults' compaction requests since the
						 * last run (pm__compact_for_fault) */
	_Atomic unsigned xcompact_defer_shift;	/* skip 2^shift requests after a failed run */

	/* Registry: address spaces, shmem objects, stat blocks. */
	pthread_mutex_t lock __cacheline_aligned;
	struct pm_list mms;
	struct pm_list shmems;
	struct pm_list stat_blocks;
};

/* Every live machine by slot, so that a bare page (pm_put_page) finds its machine. */
#define PM_MAX_MACHINES 4096
_Static_assert(PM_MACHINES_MAX == PM_MAX_MACHINES - 1, "slot 0 is never used");
extern struct pm_machine *_Atomic pm__machines[PM_MAX_MACHINES] __hidden;

/* The machine of a page that has been allocated at least once (below the frontier). */
static inline struct pm_machine *page_machine(const struct pm_page *page)
{
	return atomic_load_relaxed(&pm__machines[page->mslot]);
}

/* The machine of any descriptor, a never-used one too (slot 0: found by its address). */
__hidden struct pm_machine *pm__page_machine_search(const struct pm_page *page);
__hidden void pm__machine_free(struct pm_machine *m);

/* The machine of any descriptor, even one above the frontier (its slot is still 0). */
static inline struct pm_machine *pm__page_machine_any(const struct pm_page *page)
{
	struct pm_machine *m = page_machine(page);

	return likely(m) ? m : pm__page_machine_search(page);
}

static inline unsigned long page_to_pfn(const struct pm_machine *m, const struct pm_page *page)
{
	return (unsigned long)(page - m->pages);
}

static inline struct pm_page *pfn_to_page(const struct pm_machine *m, unsigned long pfn)
{
	return &m->pages[pfn];
}

static inline void *pfn_to_virt(const struct pm_machine *m, unsigned long pfn)
{
	return m->frames + (pfn << PAGE_SHIFT);
}

static inline void *page_address(const struct pm_machine *m, const struct pm_page *page)
{
	return pfn_to_virt(m, page_to_pfn(m, page));
}

static inline unsigned long virt_to_pfn(const struct pm_machine *m, const void *p)
{
	return (unsigned long)((const char *)p - m->frames) >> PAGE_SHIFT;
}

static inline bool page_test(const struct pm_page *page, enum pm_pageflag bit)
{
	return atomic_load_relaxed(&((struct pm_page *)page)->xflags) & PGF(bit);
}

static inline void page_set(struct pm_page *page, enum pm_pageflag bit)
{
	atomic_or_relaxed(&page->xflags, PGF(bit));
}

/*
 * folio_set_flags_new() - set @bits (PGF() masks) on a folio just allocated, that no page
 * table, cache or list holds yet: Linux's __folio_set_anon and friends, non-atomic while the
 * folio is private. Nobody else writes its flags before it is published (set_pte and
 * set_pmd are release stores; a cache insert is under its lock), so a load and a store do,
 * relaxed atomics only because GUP-fast may read any descriptor's flags speculatively. A
 * locked RMW here, right after zeroing or copying the page, would wait for all of those
 * stores to drain first.
 */
static inline void folio_set_flags_new(struct pm_folio *folio, unsigned long bits)
{
	atomic_store_relaxed(&folio->page.xflags, atomic_load_relaxed(&folio->page.xflags) | bits);
}

static inline void page_clear(struct pm_page *page, enum pm_pageflag bit)
{
	atomic_and_relaxed(&page->xflags, ~PGF(bit));
}

/* The folio a page belongs to. Speculative callers must re-check it after taking a ref. */
static inline struct pm_folio *page_folio(const struct pm_page *page)
{
	uintptr_t head = atomic_load_relaxed(&((struct pm_page *)page)->xcompound_head);

	if (head & 1)
		return (struct pm_folio *)(head - 1);
	return (struct pm_folio *)page;
}

static inline struct pm_page *folio_page(struct pm_folio *folio, unsigned long n)
{
	return &folio->page + n;
}

static inline unsigned folio_order(const struct pm_folio *folio)
{
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xorder);
}

static inline unsigned long folio_nr_pages(const struct pm_folio *folio)
{
	return 1UL << folio_order(folio);
}

static inline bool folio_test_large(const struct pm_folio *folio)
{
	return folio_order(folio) != 0;
}

static inline bool folio_test(const struct pm_folio *folio, enum pm_pageflag bit)
{
	return page_test(&folio->page, bit);
}

static inline bool folio_test_anon(const struct pm_folio *folio)
{
	return folio_test(folio, PG_anon);
}

/* The 4 KiB zero page (Linux's is_zero_folio): never referenced, never pinned, never counted. */
static inline bool folio_is_zero(const struct pm_folio *folio)
{
	return folio_test(folio, PG_zero);
}

/*
 * The huge zero folio (Linux's is_huge_zero_folio): an order-9 folio of zeros that read faults
 * of THP-eligible anonymous VMAs map read-only at PMD level, with _PAGE_SPECIAL on the leaf.
 * Its mappings take no reference and no mapcount; GUP references and pins count on it as on
 * any large folio; one reference stands for all the address spaces that use it (mem/folio.c).
 */
static inline bool is_huge_zero_folio(const struct pm_folio *folio)
{
	return folio_test(folio, PG_huge_zero);
}

/*
 * Hot folios (mem/folio_hot.c): a folio that several CPUs pin counts its pins per CPU while
 * PG_hot is set, and holds PM_HOT_BIAS references of its own meanwhile, so that no expected
 * count can match until it leaves hot mode (pm__folio_cool).
 */
#define PM_HOT_BIAS (1 << 28)
#define PM_HOT_REF_LIMIT (1L << 29) /* references all of a folio's slots may hold */

/*
 * One CPU's counts of a hot folio, in one word so that a hot pin or unpin is two locked
 * instructions on its own line: the net pins taken here (signed, high half; each is a pin of
 * a page, 1024 references of a small folio or one reference and one pincount of a large
 * one), and the hot operations in progress here (low half).
 */
#define HOT_ACTIVE 1LL
#define HOT_PIN (1LL << 32)
struct pm_hot_slot {
	_Atomic int64_t xv;
} __cacheline_aligned;

struct pm_folio_hot {
	unsigned long pfn;	    /* the head it serves; under hot_lock */
	struct pm_folio_hot *next;  /* on the machine's hot_list; under hot_lock */
	struct pm_hot_slot slot[];  /* nr_cpus, a line each */
};

static inline bool folio_hot(const struct pm_folio *folio)
{
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xflags) &
	       (PGF(PG_hot) | PGF(PG_hot_leave));
}

/* // mem/folio_hot.c */
__hidden bool pm__folio_hot_grab(struct pm_folio *folio, int refs);
__hidden bool pm__folio_hot_put(struct pm_folio *folio, int refs);
__hidden void pm__folio_hot_enter(struct pm_folio *folio);
__hidden void pm__folio_leave_hot(struct pm_folio *folio);
__hidden void pm__folio_hot_unmapped(struct pm_folio *folio);
__hidden int pm__folio_hot_ref_count(const struct pm_folio *folio);
__hidden int pm__folio_hot_pincount(const struct pm_folio *folio);
__hidden int pm__folio_counts_exact(struct pm_folio *folio, int *pincount);
__hidden void pm__machine_hot_exit(struct pm_machine *m);

/* Before a decision on @folio's counts: out of hot mode (mem/folio_hot.c). */
static inline void pm__folio_cool(struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		pm__folio_leave_hot(folio);
}

/* refcount: exact at quiescence, hot or not (the bias aside). */
static inline int folio_ref_count(const struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		return pm__folio_hot_ref_count(folio);
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xrefcount);
}

static inline bool page_anon_exclusive(const struct pm_page *page)
{
	return page_test(page, PG_anon_exclusive);
}

/* folio_maybe_dma_pinned(): exact for large folios, no false negatives for small ones. */
static inline bool folio_maybe_dma_pinned(const struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		pm__folio_leave_hot((struct pm_folio *)folio); /* an exact answer (folio_hot.c) */
	if (folio_test_large(folio))
		return atomic_load_mb(&((struct pm_folio *)folio)->page.xpincount) > 0;
	return (unsigned)atomic_load_mb(&((struct pm_folio *)folio)->page.xrefcount) >=
	       GUP_PIN_COUNTING_BIAS;
}

/* // mem/machine.c */
__hidden struct pm_stat_block *pm__stat_block_slow(struct pm_machine *m);
extern __thread struct pm_stat_tls {
	uint64_t id;
	struct pm_stat_block *block;
} pm__stat_tls[4] __hidden;

/* This thread's counter block for @m: one TLS compare on the common path. */
static inline struct pm_stat_block *pm__stat_block(struct pm_machine *m)
{
	if (likely(pm__stat_tls[0].id == m->id))
		return pm__stat_tls[0].block;
	return pm__stat_block_slow(m);
}

/* Count in @b, this thread's block for @m (pm__stat_block): for several events at once. */
static inline void count_event_in(struct pm_machine *m, struct pm_stat_block *b,
				  enum pm_stat_item item, unsigned long n)
{
	if (likely(b != &m->shared_stats))
		atomic_inc_owned(&b->v[item], n);
	else
		atomic_add_relaxed(&b->v[item], n);
}

static inline void count_event(struct pm_machine *m, enum pm_stat_item item, unsigned long n)
{
	count_event_in(m, pm__stat_block(m), item, n);
}

/* The CPU this thread runs on now, as an index of the machine's per-CPU arrays. */
static inline unsigned pm__this_cpu(const struct pm_machine *m)
{
	int cpu = sched_getcpu();

	return cpu > 0 ? (unsigned)cpu % m->nr_cpus : 0;
}

static inline bool knob(const struct pm_machine *m, unsigned k)
{
	return unlikely(m->knobs & k);
}

__hidden void *pm__kzalloc(struct pm_machine *m, size_t size); /* failure-injectable */
__hidden bool pm__should_fail(struct pm_machine *m);

/* // mem/objcache.c */
__hidden struct pm_obj_cache *pm__obj_cache_create(struct pm_machine *m);
__hidden void pm__obj_cache_destroy(struct pm_machine *m, struct pm_obj_cache *c);
__hidden void *pm__obj_cache_get(struct pm_machine *m, struct pm_obj_cache *c);
__hidden void pm__obj_cache_put(struct pm_machine *m, struct pm_obj_cache *c, void *obj);

/* // mem/page_alloc.c */
#define PM_ALLOC_ZERO 0x1	/* zero the frames */
#define PM_ALLOC_UNMOVABLE 0x2	/* a page table, not user memory: its own per-CPU lists,
				 * never the movable zone */
#define PM_ALLOC_NO_MOVABLE_ZONE 0x4 /* user memory outside the movable zone (long-term pins,
				      * PM_MIGRATE_AWAY_MOVABLE) */
#define PM_ALLOC_MOVABLE_ZONE 0x8 /* user memory from the movable zone only */
__hidden struct pm_page *pm__alloc_frames(struct pm_machine *m, unsigned order, unsigned flags);
__hidden void pm__free_frames(struct pm_machine *m, struct pm_page *page, unsigned order,
			      unsigned flags);
__hidden void pm__free_frames_batch(struct pm_machine *m, struct pm_page **pages, unsigned n);
__hidden int pm__page_alloc_init(struct pm_machine *m);
__hidden struct pm_page *pm__alloc_boot_frame(struct pm_machine *m);
__hidden size_t pm__nr_free_frames(struct pm_machine *m);
__hidden size_t pm__nr_free_frames_in(struct pm_machine *m, unsigned flags);
__hidden bool pm__frame_is_free(struct pm_page *page, unsigned *order);
__hidden unsigned long pm__frames_touched(struct pm_machine *m);
__hidden unsigned long pm__frames_unused_end(struct pm_machine *m, unsigned long pfn);
__hidden void pm__page_alloc_exit(struct pm_machine *m);
__hidden unsigned long pm__free_pmd_blocks(struct pm_machine *m, unsigned flags);
__hidden void pm__drain_all_pcp(struct pm_machine *m);
__hidden void pm__zone_block_usage(struct pm_machine *m, unsigned zi, uint16_t *used);
__hidden struct pm_page *pm__alloc_frame_in_blocks(struct pm_machine *m, unsigned zi,
						   const uint8_t *target);

/* Is @pfn in the movable zone (Linux's ZONE_MOVABLE, pm_config.movable_bytes)? */
static inline bool pfn_in_movable_zone(const struct pm_machine *m, unsigned long pfn)
{
	return pfn >= m->movable_base;
}

/* // mem/hugetlb_pool.c */
struct pm_hugetlb_resv;
__hidden int pm__hugetlb_pool_init(struct pm_machine *m, size_t nr);
__hidden void pm__hugetlb_pool_exit(struct pm_machine *m);
__hidden pthread_mutex_t *pm__hugetlb_fault_mutex(struct pm_machine *m, const void *mapping,
						  unsigned long idx);
__hidden void pm__hugetlb_put_restore(struct pm_hugetlb_resv *resv, unsigned long addr,
				      struct pm_folio *folio);
__hidden bool pm__hugetlb_reserve(struct pm_machine *m, unsigned long nr);
__hidden bool pm__hugetlb_reserve_credit(struct pm_machine *m, unsigned long nr,
					 unsigned long credit);
__hidden void pm__hugetlb_unreserve(struct pm_machine *m, unsigned long nr);
__hidden struct pm_folio *pm__hugetlb_alloc(struct pm_machine *m, bool reserved);
__hidden struct pm_folio *pm__hugetlb_alloc_migrate(struct pm_machine *m, unsigned alloc_flags);
__hidden bool pm__hugetlb_free_in(struct pm_machine *m, unsigned alloc_flags);
__hidden void pm__hugetlb_free_folio(struct pm_folio *folio);
__hidden struct pm_hugetlb_resv *pm__hugetlb_resv_create(struct pm_machine *m,
							 unsigned long nr, unsigned long credit);
__hidden unsigned long pm__hugetlb_resv_count(struct pm_hugetlb_resv *resv, unsigned long start,
					      unsigned long end);
__hidden void pm__hugetlb_resv_set_base(struct pm_hugetlb_resv *resv, unsigned long base);
__hidden void pm__hugetlb_resv_get(struct pm_hugetlb_resv *resv);
__hidden void pm__hugetlb_resv_put(struct pm_hugetlb_resv *resv);
__hidden void pm__hugetlb_resv_release(struct pm_hugetlb_resv *resv, unsigned long start,
				       unsigned long end);
__hidden void pm__hugetlb_resv_restore(struct pm_hugetlb_resv *resv, unsigned long start,
				       unsigned long end);
__hidden struct pm_folio *pm__hugetlb_alloc_resv(struct pm_machine *m,
						 struct pm_hugetlb_resv *resv,
						 unsigned long addr, bool *consumed);
__hidden void pm__hugetlb_resv_undo(struct pm_hugetlb_resv *resv, unsigned long addr);
__hidden struct pm_hugetlb_resv *pm__hugetlb_resv_alloc_moved(struct pm_machine *m,
							 unsigned long nr, unsigned long base);
__hidden void pm__hugetlb_resv_move(struct pm_hugetlb_resv *from, unsigned long start,
				   struct pm_hugetlb_resv *to);

static inline bool folio_test_hugetlb(const struct pm_folio *folio)
{
	return folio_test(folio, PG_hugetlb);
}

/* // mem/folio.c */
__hidden struct pm_folio *pm__folio_alloc(struct pm_machine *m, unsigned order, unsigned flags);
__hidden struct pm_folio *pm__folio_prep(struct pm_page *page, unsigned order);
__hidden void pm__folio_free(struct pm_folio *folio);
__hidden void pm__folios_put(struct pm_machine *m, struct pm_folio **folios, unsigned n);
__hidden void pm__folios_put_cache(struct pm_machine *m, struct pm_folio **folios, unsigned n);
__hidden struct pm_page *pm__folio_unmap_put(struct pm_folio *folio);
/*
 * References GUP hands out stop at PM_GUP_REF_LIMIT (2^30), far below INT_MAX, so that the
 * references nobody may refuse - mappings (fork, faults, PMD splits) and the transient ones of a
 * COW copy or a page-cache lookup - always have 2^30 of headroom and can never wrap the count.
 */
#define PM_GUP_REF_LIMIT (1 << 30)
__hidden bool pm__folio_try_get(struct pm_folio *folio, int refs, int limit);
__hidden bool pm__folio_ref_add(struct pm_folio *folio, int refs, int limit);
__hidden void pm__folio_lock(struct pm_folio *folio);
__hidden void pm__folio_unlock(struct pm_folio *folio);
__hidden void pm__folio_mark_dirty(struct pm_folio *folio);
__hidden struct pm_folio *pm__huge_zero_folio_get(struct pm_machine *m, _Atomic bool *used);
__hidden void pm__huge_zero_folio_put(struct pm_machine *m, _Atomic bool *used);

/* Drop @refs references; the last one frees the folio. */
static inline void folio_put_refs(struct pm_folio *folio, int refs)
{
	int old = atomic_sub_mb(&folio->page.xrefcount, refs);

	pm_assert_cmp(old, >=, refs);
	if (old == refs)
		pm__folio_free(folio);
	else if (unlikely(folio_hot(folio)))
		pm__folio_hot_unmapped(folio); /* (H3) */
}

static inline void folio_put(struct pm_folio *folio)
{
	folio_put_refs(folio, 1);
}

/* Take @refs references on a folio the caller already holds one on (or a mapping of). */
static inline void folio_get_refs(struct pm_folio *folio, int refs)
{
	atomic_add_relaxed(&folio->page.xrefcount, refs);
}

/* ------------------------------------------------------------------------------------------
 * Page tables (pgtable/).
 */
#include "pgtable/pgtable.h"

/* // pgtable/pgtable.c */
__hidden pm_entry_t *pm__pgd_alloc(struct pm_machine *m);
__hidden void pm__pgd_free(struct pm_machine *m, pm_entry_t *pgd);
__hidden pm_entry_t *pm__pmd_lookup(struct pm_mm *mm, unsigned long addr);
__hidden pm_entry_t *pm__pmd_span(struct pm_mm *mm, unsigned long addr, unsigned long end,
				  unsigned long *next);
/*
 * Walk [@start, @end) of @mm one PMD span at a time, declaring @addr and @next: the body runs
 * for each span whose PMD table exists, with @pmdp its slot; spans without one are skipped.
 * The body may set @next = @addr to look at the same span again.
 */
#define for_each_pmd_span(mm, addr, next, start, end, pmdp) \
	for (unsigned long addr = (start), next; addr < (end); addr = next) \
		if (!((pmdp) = pm__pmd_span((mm), addr, (end), &next))) \
			continue; \
		else
__hidden pm_entry_t *pm__pmd_alloc(struct pm_mm *mm, unsigned long addr);
__hidden int pm__pte_alloc(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden pm_entry_t *pm__pte_alloc_one(struct pm_machine *m);
__hidden void pm__pte_free_now(struct pm_machine *m, pm_entry_t *table);
__hidden pm_entry_t *pm__pte_offset_map_lock(struct pm_mm *mm, pm_entry_t *pmdp,
					     unsigned long addr, struct pm_spinlock **ptlp);
__hidden struct pm_spinlock *pm__pmd_lockptr(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__free_pgd_range(struct pm_mm *mm, unsigned long start, unsigned long end,
				 unsigned long floor, unsigned long ceiling);

/* // pgtable/huge_memory.c */
__hidden void pm__pgtable_deposit(struct pm_mm *mm, pm_entry_t *pmdp, pm_entry_t *table);
__hidden pm_entry_t *pm__pgtable_withdraw(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__split_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__split_huge_pmd_at(struct pm_mm *mm, unsigned long addr);

/* ------------------------------------------------------------------------------------------
 * Address spaces (mm/).
 */
#define VM_READ 0x00000001UL
#define VM_WRITE 0x00000002UL
#define VM_EXEC 0x00000004UL /* kept and reported; grants what x86 grants it: reads */
#define VM_SHARED 0x00000008UL
#define VM_MAYREAD 0x00000010UL
#define VM_MAYWRITE 0x00000020UL
#define VM_MAYSHARE 0x00000080UL
#define VM_GROWSDOWN 0x00000100UL /* MAP_GROWSDOWN: a fault below grows it (fault.c) */
#define VM_LOCKED 0x00002000UL	  /* MAP_LOCKED: populated at mmap; no DONTNEED, FREE or
				   * REMOVE; not inherited by fork */
#define VM_DONTCOPY 0x00020000UL
#define VM_NORESERVE 0x00200000UL /* MAP_NORESERVE: no hugetlb reservation; never merges
				   * with a VMA without it */
#define VM_HUGETLB 0x00400000UL /* backed by the hugetlb pool: 2 MiB pages, never split */
#define VM_WIPEONFORK 0x02000000UL /* MADV_WIPEONFORK: a fork child gets this range empty;
				    * private anonymous only; kept by the child's VMA */
#define VM_HUGEPAGE 0x20000000UL
#define VM_NOHUGEPAGE 0x40000000UL

struct pm_vma {
	unsigned long start, end; /* [start, end); under mmap_lock (W) and the VMA's write lock,
				   * and file->i_mmap_lock too */
	unsigned long flags;	  /* VM_*; under mmap_lock (W) and the VMA's write lock */
	struct pm_mm *mm;
	struct pm_shmem *file;	  /* backing object (holds a reference), NULL = private anon */
	unsigned long pgoff;	  /* file page index of start */
	struct pm_list shared;	  /* on file->i_mmap, under file->i_mmap_lock */
	struct pm_hugetlb_resv *hresv; /* private hugetlb: the mapping's reservations (shared
					* by the VMAs split from it); NULL in a fork child
					* and with MAP_NORESERVE */
	_Atomic bool xhugetlb_unmapped; /* a fork child's private hugetlb VMA that lost a page
					 * to its parent (HPAGE_RESV_UNMAPPED): its faults on
					 * empty entries are SIGBUS. Set under file->i_mmap_lock
					 * and the PMD lock (fault/hugetlb_fault.c); not inherited by
					 * fork */
	/*
	 * Linux's vma->anon_vma, as far as it is observable (vma_needs_copy at fork, VMA
	 * merging): 0 = none; else an id unique in the machine (PM_ANON_VMA_ID steps), with
	 * PM_ANON_VMA_FORKED when fork gave it (the anon_vma_chain is not singular). A private
	 * VMA gets one at its first anonymous page (anon_vma_prepare: a write or COW fault, a
	 * THP fault even for the huge zero page, a private hugetlb page), never for a 4 KiB
	 * zero page or a page-cache page mapped read-only; split, move and merge keep it.
	 * Set from 0 by a cmpxchg under a fault lock; otherwise changed under the VMA's write
	 * lock (vma_anon_prepare, dup_vma, vma.c).
	 */
	_Atomic unsigned long xanon_vma;

	/* The per-VMA lock (Linux 6.4's vm_lock + vm_lock_seq): see mm/vma_lock.c. */
	_Atomic unsigned xvm_refcnt;	     /* readers, VMA_LOCK_WRITER, VMA_LOCK_WAITER */
	_Atomic unsigned xcontended;	     /* read locks taken while another reader held it */
	struct pm_vma_pcpu *_Atomic xpcpu;   /* per-CPU reader counts, once contended */
	_Atomic unsigned long xvm_lock_seq;  /* == *xlock_seqp: write-locked */
	_Atomic unsigned long *_Atomic xlock_seqp; /* its range's lock sequence (range.c) */
	bool uncounted;			     /* in the tree without a VMA count unit, for one change:
					      * it merges or goes before the change ends (vma.c) */
	_Atomic bool xdetached;		     /* out of the tree; set under the write lock */
	struct pm_vma *retire_next;	     /* on a set's retired_vmas, or a detach list */
	struct pm_vma_cache *rcache;	     /* where its batch goes after the grace period */
	struct pm_vma *batch_tail;	     /* a batch's head: its last VMA */
	struct pm_rcu_head rcu;		     /* reused a grace period after it left the tree */
};

/*
 * VMAs that left the tree come back to their mm for reuse a grace period later, instead of
 * going through free() and malloc() on two threads (vma_lock.c). The cache outlives the mm
 * while batches are in flight: one reference for the mm, one per batch.
 */
struct pm_vma_cache {
	_Atomic long xrefs;
	struct pm_vma *_Atomic xreclaimed; /* pushed by RCU callbacks, taken by the mm's writer */
};

#define PM_ANON_VMA_FORKED 1UL
#define PM_ANON_VMA_ID 2UL

__hidden void pm__vma_anon_prepare(struct pm_vma *vma);

/* The VMA is about to hold an anonymous page: it needs an anon_vma (Linux's
 * vmf_anon_prepare). Tested before set: a fault in a VMA that has one writes nothing. */
static inline void vma_anon_prepare(struct pm_vma *vma)
{
	if (!atomic_load_relaxed(&vma->xanon_vma))
		pm__vma_anon_prepare(vma);
}

static inline bool is_vm_hugetlb_page(const struct pm_vma *vma)
{
	return vma->flags & VM_HUGETLB;
}

/*
 * Does @vma allow any access (not PROT_NONE)? Its entries are then _PAGE_USER (mk_pte()).
 * Linux's VM_ACCESS_FLAGS: exec counts, and x86's protection_map makes an exec-only page
 * user-readable (pinmm has no protection keys, so no execute-only key either).
 */
static inline bool vma_is_accessible(const struct pm_vma *vma)
{
	return vma->flags & (VM_READ | VM_WRITE | VM_EXEC);
}

static inline bool vma_is_anonymous(const struct pm_vma *vma)
{
	return vma->file == NULL;
}

/* A private mapping whose pages may be COW-shared: Linux's is_cow_mapping(). */
static inline bool is_cow_mapping(unsigned long flags)
{
	return (flags & (VM_SHARED | VM_MAYWRITE)) == VM_MAYWRITE;
}

static inline unsigned long vma_pgoff(const struct pm_vma *vma, unsigned long addr)
{
	return vma->pgoff + ((addr - vma->start) >> PAGE_SHIFT);
}

/*
 * The VMAs of one range (mm/range.c) - the whole address space in Linux's design, 512 GiB in
 * the range design - and what left them: written by the range's writer only.
 */
struct pm_vma_set {
	struct pm_vma_tree vmt;		    /* the VMAs; read under the domain's lock or RCU */
	struct pm_vma *retired_vmas;	    /* left the tree, waiting for a batch to go to RCU */
	struct pm_vma *retired_tail;	    /* the last of them (the first retired) */
	unsigned nr_retired_vmas;
	struct pm_vma *free_vmas;	    /* a grace period old: ready for reuse */
	struct pm_vma_cache *vcache;	    /* range design: where this set's batches come back
					     * (vma_lock.c); NULL: the mm's */
};

/*
 * One range of an address space (mm/range.c): a slice of it with its own lock, VMA set and
 * lock sequence. Linux's design is the one-range case: that range's lock is mmap_lock.
 */
struct pm_mm_range {
	struct pm_rwsem lock;
	/* Bumped when the range's write hold ends: the VMA write locks taken under it end too
	 * (the range design's vma_end_write_all). */
	_Atomic unsigned long xlock_seq;
	/* VMA count units this range holds in reserve (the range design's count, range.c):
	 * written by its writer only. */
	_Atomic long xcredit;
	struct pm_vma_set set;
} __cacheline_aligned;

struct pm_mm_count; /* the range design's exact VMA count: a pool behind per-range credits */

/*
 * What differs between the two designs, chosen when the mm is made (mm/range.c); everything
 * else - lookups, stores, gaps, lock sequences, lock_vma_under_rcu - is one code path over
 * the mm's ranges, of which Linux's design has one.
 *  @nr_ranges, @range_shift	how the address space is cut: range r is
 *				[r << range_shift, (r + 1) << range_shift), the last to the top
 *  @downgrade			mmap_write_downgrade() lets readers in (Linux's rwsem
 *				downgrade), or keeps the write hold and ends only the VMA write
 *				locks (faults never take a range lock there)
 *  @lock_area			lock and place a non-fixed mmap: Linux's top-down search under
 *				mmap_lock, or the thread's own range
 *  @area			place a mapping with every range held (mremap's target): that
 *				search, or the thread's range, then the whole address space
 *  @count_*			the VMA count: the tree's entries, or per-range credits
 */
struct pm_mm_policy {
	const char *name;
	unsigned nr_ranges, range_shift;
	bool downgrade;
	bool gup_vma_lock;	/* slow GUP tries the VMA's own lock first (gup/gup.c) */
	bool upper_cas;		/* PGD/PUD entries published by CAS (pgtable/pgtable.c) */
	bool pte_cas;		/* PTE installs compare-and-swap, not under the PTL (fault/anon.c) */
	bool hot_folios;	/* pins may make a folio hot (mem/folio_hot.c) */
	long (*lock_area)(struct pm_mm *mm, unsigned long hint, unsigned long len,
			  unsigned long align, bool all);
	long (*area)(struct pm_mm *mm, unsigned long hint, unsigned long len, unsigned long align);
	int (*count_charge)(struct pm_mm *mm);
	void (*count_force)(struct pm_mm *mm);
	void (*count_uncharge)(struct pm_mm *mm, long n);
	unsigned long (*count_read)(struct pm_mm *mm);
};

/*
 * struct pm_mm - an address space.
 *
 * The first cache line is what every fast pin and every access reads; after the first pin
 * nothing writes it (the has-pinned flag is tested before it is set, and fork's
 * write_protect_seq changes only during a fork). PM_KNOB_HAS_PINNED_ALWAYS_WRITE stores the
 * flag on every pin call, which makes this line bounce between CPUs: the 2021 seed.
 */
struct pm_mm {
	struct pm_machine *m;
	pm_entry_t *pgd;
	_Atomic int xhas_pinned;	     /* MMF_HAS_PINNED: set before the first pin, never cleared */
	_Atomic unsigned xwrite_protect_seq; /* odd while fork write-protects; under mmap_lock (W) */
	const struct pm_mm_policy *policy;   /* the design; read-only */
	struct pm_mm_range *ranges;	     /* policy->nr_ranges: the VMAs, their locks; read-only */
	unsigned nr_ranges, range_shift;     /* the policy's, next to the pointer they index */
	_Atomic bool xhuge_zero;	     /* MMF_HUGE_ZERO_FOLIO: holds a use of the machine's huge
					      * zero folio (mem/folio.c); set once, cleared at teardown */
	bool dead;			     /* emptied by pm_machine_destroy (pm__mm_bad): every
					      * call reads it, only the destroy writes it */

	struct pm_spinlock page_table_lock __cacheline_aligned; /* populating PGD/PUD entries */
	bool upper_cas;			    /* PGD/PUD entries published by CAS, not under
					     * page_table_lock (policy->upper_cas; pgtable.c) */
	struct pm_mm_count *count;	    /* the range design: VMAs, counted per range */
	struct pm_vma_cache *vcache;
	unsigned long mmap_base;	    /* top of the top-down search area */
	struct pm_list link;		    /* on machine->mms, under machine->lock */
	struct pm_mm_notifier *notifiers;   /* told of the teardown; under machine->lock */
};

/*
 * An address space its machine was destroyed under (a misuse, documented) was emptied then
 * and is dead: every call on it is -EINVAL, and pm_mm_destroy only frees it. Set once, with
 * no other thread using the mm (the caller's promise), so a plain read suffices.
 */
static inline bool pm__mm_bad(const struct pm_mm *mm)
{
	return unlikely(!mm || mm->dead);
}

/* Linux's vm.max_map_count default: a call that would make more VMAs fails with -ENOMEM. */
#define PM_MAX_MAP_COUNT 65530

/* The range design's ranges: 512 GiB, one PGD entry each (Linux's design has one range). */
#define PM_RANGE_SHIFT PGDIR_SHIFT

/* The range that holds @addr (addresses at or above PM_TASK_SIZE: the last). */
static inline unsigned range_of(const struct pm_mm *mm, unsigned long addr)
{
	unsigned long r = addr >> mm->range_shift;

	return r < mm->nr_ranges ? (unsigned)r : mm->nr_ranges - 1;
}

static inline unsigned long range_start(const struct pm_mm *mm, unsigned r)
{
	return (unsigned long)r << mm->range_shift;
}

static inline unsigned long range_end(const struct pm_mm *mm, unsigned r)
{
	return (unsigned long)(r + 1) << mm->range_shift;
}

/*
 * Has @mm a single range (Linux's design)? Geometry, not policy: with one range every hold
 * is all of it, a lookup has no neighbour range to walk to, and a hold record has nothing to
 * bound; the fast paths that ask are right for any mm of one range.
 */
static inline bool mm_one_range(const struct pm_mm *mm)
{
	return mm->nr_ranges == 1;
}

/* // mm/range.c */
/* What this thread holds of @mm: a run of its ranges (lib/rwsem.h's per-thread records, which
 * every layer's lock assertions read), or NULL. */
static inline struct pm_rwsem_run *pm__range_hold(const struct pm_mm *mm)
{
	if (pm__rwsem_runs[0].owner == mm)
		return &pm__rwsem_runs[0];
	if (pm__rwsem_runs[1].owner == mm)
		return &pm__rwsem_runs[1];
	return NULL;
}
__hidden int pm__range_init(struct pm_mm *mm, bool range_design);
__hidden void pm__range_fini(struct pm_mm *mm);
__hidden void pm__range_lock_change(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__range_lock_read(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__range_lock_all(struct pm_mm *mm);
__hidden void pm__range_lock_slots(struct pm_mm *mm, unsigned lo, unsigned hi, bool write);
__hidden bool pm__range_covers(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__range_downgrade(struct pm_mm *mm);
__hidden void pm__range_unlock(struct pm_mm *mm);
__hidden long pm__range_gap_scan(struct pm_mm *mm, unsigned long len, unsigned long align);
__hidden long pm__get_unmapped_area(struct pm_mm *mm, unsigned long hint, unsigned long len,
				    unsigned long align);

/* The number of VMAs (Linux's map_count): the tree's entries in Linux's design; in the range
 * design the pool and the per-range credits (range.c), exact. */
static inline unsigned long mm_map_count(struct pm_mm *mm)
{
	return mm->policy->count_read(mm);
}

/* Does this thread hold @mm's lock - some of its ranges, mmap_lock in Linux's design? */
static inline bool mm_locked(struct pm_mm *mm)
{
	return pm__range_hold(mm) != NULL;
}

static inline bool mm_write_locked(struct pm_mm *mm)
{
	const struct pm_rwsem_run *h = pm__range_hold(mm);

	return h && h->write && !h->downgraded;
}

static inline bool mm_has_pinned(struct pm_mm *mm)
{
	return atomic_load_relaxed(&mm->xhas_pinned) != 0;
}

/* // mm/vma_lock.c */
/*
 * Objects that left a VMA tree wait until this many have, then go to RCU together. An mmap and
 * its munmap retire about three (the VMA and two tree leaves), and each call_rcu wakes the
 * grace-period thread, which takes a CPU from the tasks when every CPU has one: so one batch
 * covers many mmap+munmap pairs (docs/perf-log.md, "VMA retire batches").
 */
#define PM_RETIRE_BATCH 256
__hidden void pm__vma_set_flush(struct pm_mm *mm, struct pm_vma_set *set, bool all);
__hidden void pm__vma_set_free_now(struct pm_vma_set *set);
__hidden struct pm_vma_set *pm__vma_set_here(struct pm_mm *mm);
__hidden void pm__mm_retire_free_now(struct pm_mm *mm);
__hidden struct pm_vma *pm__vma_cache_get(struct pm_mm *mm);
__hidden void pm__vma_free_pcpu(struct pm_vma *vma);
__hidden void pm__vma_start_write(struct pm_vma *vma);
__hidden bool pm__vma_start_read(struct pm_vma *vma);
__hidden void pm__vma_end_read(struct pm_vma *vma);
__hidden struct pm_vma *pm__lock_vma_under_rcu(struct pm_mm *mm, unsigned long addr);

/*
 * The locks of an address space, in pairs: a lock call and the unlock that ends it.
 *	mmap_write_lock_range(mm, start, end)	a change of [start, end): the ranges it may
 *						touch, for write (all of it in Linux's design)
 *	mmap_write_lock_all(mm)			a whole-mm operation (fork, teardown)
 *	  ... mmap_write_downgrade(mm)		(optional) the VMA write locks end
 *	mmap_write_unlock(mm)
 *	mmap_read_lock_range(mm, start, end)	a read of [start, end) (slow GUP, a fault's
 *						fallback, MADV_DONTNEED)
 *	mmap_read_unlock(mm)
 * Each range's VMA write locks end when its write hold does (its lock sequence moves on: the
 * range design's and Linux's vma_end_write_all); what left its tree goes to RCU once a batch
 * is full. See mm/range.c.
 */
/*
 * Most holds are a run of one range - every hold of Linux's design, and the range design's
 * changes inside one range - so taking, downgrading and letting go of one range is inline;
 * longer runs and widening are range.c's.
 */
static inline struct pm_rwsem_run *range_hold_one(struct pm_mm *mm, unsigned r, bool write)
{
	struct pm_rwsem_run *runs = pm__rwsem_runs, *h = runs[0].owner ? &runs[1] : &runs[0];

	pm_bug_on(h->owner || runs[0].owner == mm || runs[1].owner == mm);
	if (write)
		pm_down_write(&mm->ranges[r].lock);
	else
		pm_down_read(&mm->ranges[r].lock);
	h->owner = mm;
	h->lo = h->hi = r;
	h->write = write;
	h->downgraded = false;
	return h;
}

static inline void mmap_write_lock_range(struct pm_mm *mm, unsigned long start,
					 unsigned long end)
{
	if (mm_one_range(mm))
		range_hold_one(mm, 0, true); /* the only range: nothing can widen it */
	else
		pm__range_lock_change(mm, start, end);
}

static inline void mmap_write_lock_all(struct pm_mm *mm)
{
	if (mm_one_range(mm))
		range_hold_one(mm, 0, true);
	else
		pm__range_lock_all(mm);
}

/* A change that must start again with every range held (-EAGAIN from the range design's VMA
 * count) asks for @all. */
static inline void mmap_write_lock_range_or_all(struct pm_mm *mm, unsigned long start,
						unsigned long end, bool all)
{
	if (all)
		mmap_write_lock_all(mm);
	else
		mmap_write_lock_range(mm, start, end);
}

static inline void mmap_read_lock_range(struct pm_mm *mm, unsigned long start,
					unsigned long end)
{
	unsigned lo, hi;

	if (mm_one_range(mm)) {
		range_hold_one(mm, 0, false);
		return;
	}
	lo = range_of(mm, start);
	hi = range_of(mm, end > start ? end - 1 : start);
	if (lo == hi)
		range_hold_one(mm, lo, false);
	else
		pm__range_lock_read(mm, start, end);
}

/*
 * mmap_write_downgrade() - end every VMA write lock of the section, and - where the policy
 * says so (Linux's mmap_write_downgrade) - keep the ranges for read only. The caller may still
 * retire VMAs until it unlocks: no other thread touches those lists before the next writer,
 * which cannot come in before then.
 */
static inline void mmap_write_downgrade(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_mm_range *rg;

	mmap_assert_write_locked(mm);
	pm_bug_on(!h || !h->write || h->downgraded);
	if (h->lo != h->hi) {
		pm__range_downgrade(mm);
		return;
	}
	rg = &mm->ranges[h->lo];
	atomic_store_release(&rg->xlock_seq, atomic_load_relaxed(&rg->xlock_seq) + 1);
	if (mm->policy->downgrade)
		pm_downgrade_write(&rg->lock);
	h->downgraded = true;
}

/* Let go of a run of one range; a longer one is range.c's. */
static inline void mmap_unlock(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_mm_range *rg;

	pm_bug_on(!h);
	if (h->lo != h->hi) {
		pm__range_unlock(mm);
		return;
	}
	rg = &mm->ranges[h->lo];
	if (!h->write) {
		h->owner = NULL;
		pm_up_read(&rg->lock);
		return;
	}
	if (unlikely(rg->set.nr_retired_vmas + rg->set.vmt.nr_retired >= PM_RETIRE_BATCH))
		pm__vma_set_flush(mm, &rg->set, false);
	h->owner = NULL;
	if (h->downgraded && mm->policy->downgrade) {
		pm_up_read(&rg->lock);
		return;
	}
	if (!h->downgraded)
		atomic_store_release(&rg->xlock_seq, atomic_load_relaxed(&rg->xlock_seq) + 1);
	pm_up_write(&rg->lock);
}

static inline void mmap_write_unlock(struct pm_mm *mm)
{
	mmap_unlock(mm);
}

static inline void mmap_read_unlock(struct pm_mm *mm)
{
	mmap_unlock(mm);
}

/* The sequence that ends a write lock of @vma taken now: that of the range holding the VMA's
 * start, which its writer holds. */
static inline _Atomic unsigned long *vma_lock_seq_source(struct pm_vma *vma)
{
	struct pm_mm *mm = vma->mm;

	return &mm->ranges[range_of(mm, vma->start)].xlock_seq;
}

/*
 * vma_mark_new() - a VMA about to enter the tree starts write-locked, so that no fault can use
 * it before the section that made it ends (Linux 6.4.2). Context: mmap_lock (W).
 */
static inline void vma_mark_new(struct pm_vma *vma)
{
	_Atomic unsigned long *seq = vma_lock_seq_source(vma);

	mmap_assert_write_locked(vma->mm);
	atomic_store_relaxed(&vma->xlock_seqp, seq);
	atomic_store_relaxed(&vma->xvm_lock_seq, atomic_load_relaxed(seq));
}

/* // mm/vma.c */
__hidden struct pm_vma *pm__find_vma(struct pm_mm *mm, unsigned long addr);
__hidden struct pm_vma *pm__find_vma_intersection(struct pm_mm *mm, unsigned long start,
						  unsigned long end);
__hidden struct pm_vma *pm__vma_next(struct pm_mm *mm, struct pm_vma *vma);
__hidden struct pm_vma *pm__vma_prev(struct pm_mm *mm, struct pm_vma *vma);
__hidden void pm__vma_gap_bounds(struct pm_mm *mm, unsigned long start, unsigned long end,
				 unsigned long *floor, unsigned long *ceiling);
__hidden int pm__vma_insert(struct pm_mm *mm, struct pm_vma *vma);
__hidden struct pm_vma *pm__vma_detach_range(struct pm_mm *mm, unsigned long start,
					     unsigned long end, int *err);
__hidden void pm__vma_retire(struct pm_mm *mm, struct pm_vma *vma);
__hidden struct pm_vma *pm__vma_alloc(struct pm_mm *mm);
__hidden void pm__vma_free(struct pm_vma *vma);
/* What a split adds to the VMA count: one, or none when that piece goes in the same change. */
enum pm_split { PM_SPLIT_CHARGE, PM_SPLIT_LOWER_GOES, PM_SPLIT_UPPER_GOES };
__hidden int pm__split_vma(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			   enum pm_split how);
__hidden int pm__vma_modify(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			    unsigned long end, unsigned long flags);
/* A VM_GROWSDOWN VMA grows while the gap below it stays this wide and it this small (Linux's
 * stack_guard_gap, 256 pages, and the default RLIMIT_STACK, 8 MiB). */
#define STACK_GUARD_GAP (256UL << PAGE_SHIFT)
#define STACK_RLIMIT (8UL << 20)
__hidden int pm__expand_downwards(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr);
__hidden void pm__vma_settle(struct pm_mm *mm, struct pm_vma *vma);
__hidden struct pm_vma *pm__vma_try_merge(struct pm_mm *mm, struct pm_vma *vma);

/* // mm/mmap.c (for mremap.c) */
__hidden int pm__do_munmap(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__unmap_region(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			       unsigned long end);
__hidden void pm__vma_link_file(struct pm_vma *vma);
__hidden void pm__vma_unlink_file(struct pm_vma *vma);

/* // mm/mm.c */
__hidden struct pm_mm *pm__mm_alloc(struct pm_machine *m);

/* // mm/migrate.c */
__hidden void pm__migration_entry_wait(struct pm_mm *mm, pm_entry_t *ptep, pte_t entry);
__hidden void pm__compact_for_fault(struct pm_machine *m);
/* Tests only: called by a migration between its unmap and its copy, nothing locked. */
extern void (*pm__migrate_hook)(struct pm_mm *mm, unsigned long addr) __hidden;
/* ... and of a page-cache folio, between its unmap and its freeze, under the i_mmap lock. */
extern void (*pm__shmem_migrate_hook)(struct pm_shmem *f, unsigned long index) __hidden;
/* ... and of a hugetlb folio, between its unmap and its freeze, under its fault mutex. */
extern void (*pm__hugetlb_migrate_hook)(struct pm_mm *mm, unsigned long haddr) __hidden;

/* ------------------------------------------------------------------------------------------
 * Faults (fault/).
 */
#define FAULT_FLAG_WRITE 0x01
#define FAULT_FLAG_UNSHARE 0x02 /* make the page exclusive but keep it read-only */
#define FAULT_FLAG_VMA_LOCK 0x04 /* under the VMA's lock, not mmap_lock (vma_lock.c) */
#define FAULT_FLAG_COMPACT 0x08	/* the caller can drop its locks and compact (pm_fault) */

/*
 * What the fault handlers return, as Linux's: 0 (the entry is mapped as asked), or a set of
 * VM_FAULT_* bits with the values of Linux's enum vm_fault_reason. Only the error bits leave
 * pm__handle_mm_fault(); its callers (pm_fault(), GUP) turn them into -errno at their edge
 * (vm_fault_to_errno()). Errors from the layers below (-errno) come in through vmf_error().
 */
typedef unsigned int vm_fault_t;
enum vm_fault_reason {
	VM_FAULT_OOM = 0x000001,	/* no memory: -ENOMEM */
	VM_FAULT_SIGBUS = 0x000002,	/* nothing can back the address (beyond the object, over
					 * its limit, no pool page): -EFAULT */
	VM_FAULT_SIGSEGV = 0x000040,	/* no VMA there, or it forbids the access: -EFAULT */
	/* Under FAULT_FLAG_VMA_LOCK: cannot finish there, nothing done; pm_fault() retries under
	 * mmap_lock (vma_lock_retry). No handler asks for it yet. */
	VM_FAULT_RETRY = 0x000400,
	/* No 2 MiB block for a PMD-level fault: the dispatcher goes on at PTE level. */
	VM_FAULT_FALLBACK = 0x000800,
	/* pinmm's own, in a bit Linux does not use: the entry changed before the handler could
	 * commit, nothing done; the dispatcher looks at it again under the same lock (Linux
	 * returns 0 and the CPU faults again). */
	VM_FAULT_AGAIN = 0x100000,
	/* pinmm's own: a THP fault in a MADV_HUGEPAGE VMA found no free 2 MiB block, nothing
	 * done; under FAULT_FLAG_COMPACT only. pm_fault() compacts with no lock held and faults
	 * again (Linux's defrag=madvise: direct compaction for madvised VMAs). */
	VM_FAULT_COMPACT = 0x200000,
};

/* Linux's vm_fault_to_errno() (pinmm has no hwpoison): what pm__handle_mm_fault()'s result
 * is at the edge - 0, -ENOMEM or -EFAULT. */
static inline int vm_fault_to_errno(vm_fault_t fault)
{
	pm_assert(!(fault & ~(VM_FAULT_OOM | VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV)));
	if (fault & VM_FAULT_OOM)
		return -ENOMEM;
	if (fault & (VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV))
		return -EFAULT;
	return 0;
}

/* Linux's vmf_error(): the fault's result for an -errno from below (-ENOMEM, or -EFAULT). */
static inline vm_fault_t vmf_error(int err)
{
	return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

/* // fault/fault.c */
__hidden vm_fault_t pm__handle_mm_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
					unsigned fault_flags);

/* // fault/anon.c */
__hidden vm_fault_t pm__do_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
					  unsigned long addr, unsigned fault_flags);
__hidden vm_fault_t pm__do_huge_pmd_anonymous_page(struct pm_mm *mm, struct pm_vma *vma,
						   pm_entry_t *pmdp, unsigned fault_flags);
__hidden bool pm__thp_vma_suitable(struct pm_vma *vma, unsigned long addr);

/* // fault/cow.c */
__hidden vm_fault_t pm__do_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				   unsigned long addr, unsigned fault_flags);
__hidden vm_fault_t pm__do_huge_pmd_wp_page(struct pm_mm *mm, struct pm_vma *vma,
					    pm_entry_t *pmdp, unsigned long addr,
					    unsigned fault_flags);

/* // fault/huge_pmd.c: the PMD-leaf steps THP (cow.c, fork.c) and hugetlb (hugetlb_fault.c) share */
__hidden struct pm_folio *pm__wp_huge_pmd_lock(struct pm_mm *mm, pm_entry_t *pmdp, pmd_t *pmd,
					       vm_fault_t *ret);
__hidden bool pm__wp_huge_pmd_can_reuse_locked(struct pm_spinlock *pml, struct pm_folio *folio,
					       bool sole);
__hidden vm_fault_t pm__wp_huge_pmd_reuse_locked(struct pm_mm *mm, struct pm_vma *vma,
						 pm_entry_t *pmdp, pmd_t pmd, bool unshare);
__hidden void pm__fork_share_huge_pmd_locked(struct pm_mm *dst, struct pm_mm *src,
					     pm_entry_t *dst_pmdp, pm_entry_t *src_pmdp, pmd_t pmd,
					     struct pm_folio *folio, pm_entry_t *deposit);

/* fork: an anonymous page (or a leaf's folio) it shares with the child stops being exclusive
 * (fork.c, huge_pmd.c). */
static inline void share_anon_page(struct pm_page *page)
{
	/* Order the "may it be pinned?" test before the clear, as folio_try_dup_anon_rmap. */
	pm_smp_mb();
	page_clear(page, PG_anon_exclusive);
}

/* fork: must the child get its own copy of a leaf's folio now, rather than share it (Linux's
 * folio_needs_cow_for_dma)? An exclusive anonymous folio of an mm that has pinned, which may
 * be pinned. */
static inline bool fork_leaf_needs_copy(struct pm_mm *src, struct pm_folio *folio)
{
	if (!folio_test_anon(folio) || !mm_has_pinned(src))
		return false;
	pm__folio_cool(folio); /* an exact answer: fork excludes new pins (folio_hot.c) */
	return folio_maybe_dma_pinned(folio) && page_anon_exclusive(&folio->page);
}

/*
 * struct pm_shmem - a memfd-like object: a page cache (a radix tree of folios with lockless
 * lookups), a size, an optional exact limit, and the list of VMAs mapping it. The object sits
 * below the address spaces (src/shmem/: object.c, cache.c, limit.c); its fault and truncate
 * paths are fault/shmem.c, whose top comment gives the locking.
 */
struct pm_shmem_node;
struct pm_shmem_limit {
	_Atomic long *xpcpu;		/* per-CPU reserved pages (nr_cpus slots, 64 B apart) */
	struct pm_spinlock lock;	/* the global pool */
	long pool;			/* pages neither used nor reserved; under lock */
};
struct pm_shmem {
	struct pm_machine *m;
	_Atomic long xrefs;		/* creator + one per VMA */
	_Atomic unsigned long xsize;	/* bytes; written under truncate_lock */
	unsigned long max_pages;	/* 0 = unlimited */
	bool internal;			/* made by PM_MAP_SHARED|PM_MAP_ANONYMOUS */
	bool hugetlb;			/* 2 MiB pages from the pool; cache indices in 2 MiB units */
	bool dead;			/* emptied by pm_machine_destroy: calls fail, the last
					 * pm_shmem_put frees it (as pm__mm_bad) */
	struct pm_shmem_node *_Atomic xroot;	/* RCU-protected; read by every lookup and
						 * insert, written only when the tree grows:
						 * not on tree_lock's line */

	struct pm_spinlock tree_lock __cacheline_aligned; /* page-cache writers */

	/* The 2010 seed's inode info lock: PM_KNOB_SHMEM_LOCK_TWICE's faults take it twice per
	 * new page, around the lookup and around the insert. Modern faults do not take it. */
	struct pm_spinlock info_lock __cacheline_aligned;
	struct pm_shmem_limit limit;	/* max_pages accounting (when max_pages != 0) */

	pthread_mutex_t i_mmap_lock __cacheline_aligned; /* the mapping list and VMA bounds */
	struct pm_list i_mmap;
	pthread_mutex_t truncate_lock;	/* serialises size changes */
	/* hugetlb objects (shmem/hugetlbfs.c): Linux's hugetlb_fault_mutex and the object's
	 * reservation map - bit i set: 2 MiB page i is reserved in the pool, not yet in the
	 * cache. Under hugetlb_mutex. */
	pthread_mutex_t hugetlb_mutex;
	unsigned long *hresv;
	unsigned long hresv_nr;		/* bits in hresv */
	struct pm_list link;		/* on machine->shmems, under machine->lock */
};

#define PM_SHMEM_MAX_BYTES (1UL << 46)

/* Pages the object's size covers: a partial last page counts. */
static inline unsigned long shmem_size_pages(struct pm_shmem *f)
{
	return (atomic_load_acquire(&f->xsize) + PAGE_SIZE - 1) >> PAGE_SHIFT;
}

/* // shmem/object.c */
__hidden void pm__shmem_get(struct pm_shmem *f);
__hidden void pm__shmem_kill(struct pm_shmem *f);
__hidden struct pm_shmem *pm__shmem_create_internal(struct pm_machine *m, size_t size);

/* // shmem/hugetlbfs.c */
__hidden struct pm_shmem *pm__shmem_create_internal_hugetlb(struct pm_machine *m, size_t size);
__hidden int pm__shmem_hugetlb_reserve(struct pm_shmem *f, unsigned long first,
				       unsigned long nr, unsigned long credit);
__hidden struct pm_folio *pm__shmem_hugetlb_get_folio(struct pm_shmem *f, unsigned long hidx,
						      int *err);
__hidden void pm__shmem_hugetlb_unreserve_from(struct pm_shmem *f, unsigned long first,
					       unsigned long end);
__hidden void pm__shmem_hugetlb_extend(struct pm_shmem *f, size_t end);

/* // shmem/cache.c */
__hidden struct pm_folio *pm__shmem_peek(struct pm_shmem *f, unsigned long index);
__hidden unsigned long pm__shmem_nr_pages(struct pm_shmem *f);
__hidden struct pm_folio *pm__shmem_lookup(struct pm_shmem *f, unsigned long index);
__hidden int pm__shmem_add(struct pm_shmem *f, unsigned long index, struct pm_folio *folio);
__hidden bool pm__shmem_delete(struct pm_shmem *f, unsigned long index, struct pm_folio *folio);
__hidden bool pm__shmem_migrate_folio(struct pm_shmem *f, unsigned long index,
				      struct pm_folio *old, struct pm_folio *new, int expected);
__hidden unsigned pm__shmem_remove_from(struct pm_shmem *f, unsigned long start,
					unsigned long end, struct pm_folio **batch, unsigned max);
__hidden void pm__shmem_cache_fini(struct pm_shmem *f);

/* // shmem/limit.c */
__hidden int pm__shmem_limit_init(struct pm_shmem *f);
__hidden void pm__shmem_limit_fini(struct pm_shmem *f);
__hidden bool pm__shmem_limit_charge(struct pm_shmem *f);
__hidden void pm__shmem_limit_uncharge(struct pm_shmem *f, long n);


static inline void pm__shmem_map_lock(struct pm_shmem *f)
{
	pthread_mutex_lock(&f->i_mmap_lock);
	PM_I_MMAP_HELD(1);
}

static inline void pm__shmem_map_unlock(struct pm_shmem *f)
{
	PM_I_MMAP_HELD(-1);
	pthread_mutex_unlock(&f->i_mmap_lock);
}

static inline struct pm_list *pm__shmem_i_mmap(struct pm_shmem *f)
{
	return &f->i_mmap;
}

/* // fault/shmem.c */
__hidden vm_fault_t pm__shmem_fault(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				    unsigned long addr, unsigned fault_flags);
__hidden void pm__shmem_punch_hole(struct pm_shmem *f, unsigned long first, unsigned long end);

/* // fault/hugetlb_fault.c */
__hidden vm_fault_t pm__hugetlb_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
				      unsigned fault_flags);
__hidden int pm__copy_hugetlb_page_range(struct pm_mm *dst, struct pm_mm *src,
					 struct pm_vma *vma);

/* // fault/fork.c (and the public pm_mm_fork()) */
/* What fork's copy of one PMD leaf did (fork.c's copy_huge_pmd(), hugetlb_fault.c's
 * copy_hugetlb_pmd()), when it did not fail with -errno. */
enum pm_fork_leaf {
	PM_FORK_LEAF_SHARED,	/* shared with the child, write-protected in both (or no leaf) */
	PM_FORK_LEAF_COPY,	/* may be pinned: the child needs a copy of its own, which the
				 * caller makes (THP: at PTE level; hugetlb: pass a page) */
	PM_FORK_LEAF_COPIED,	/* copied into the page the caller passed: now the child's */
};

/* ------------------------------------------------------------------------------------------
 * Zapping: removing mappings (mm/zap.c).
 */
__hidden void pm__zap_range(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__zap_file_range(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__zap_hugetlb_resv(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
				   unsigned long end);

/* ------------------------------------------------------------------------------------------
 * GUP (gup/).
 */
#define FOLL_WRITE PM_FOLL_WRITE
#define FOLL_GET 0x02
#define FOLL_FORCE PM_FOLL_FORCE
#define FOLL_NOFAULT PM_FOLL_NOFAULT
#define FOLL_LONGTERM PM_FOLL_LONGTERM
#define FOLL_PIN (1U << 19)
/* MADV_POPULATE_*: no VMA at an address is -ENOMEM, one that forbids the access -EINVAL
 * (Linux's FOLL_MADV_POPULATE); never with @pages. */
#define FOLL_MADV_POPULATE (1U << 22)
/* A pin that may make its folio hot (mem/folio_hot.c): the range design, unless
 * PM_KNOB_FOLIO_SHARED_PINS. Never with FOLL_GET. */
#define FOLL_HOT (1U << 23)
#define FOLL_PUBLIC_MASK (FOLL_WRITE | FOLL_FORCE | FOLL_NOFAULT | FOLL_LONGTERM)

/* // gup/gup.c */
/* FOLL_HOT where pins may make a folio hot: the policy's, unless PM_KNOB_FOLIO_SHARED_PINS. */
static __always_inline unsigned gup_hot_flag(const struct pm_mm *mm)
{
	return mm->policy->hot_folios && !knob(mm->m, PM_KNOB_FOLIO_SHARED_PINS) ? FOLL_HOT : 0;
}

static __always_inline unsigned gup_pin_flags(const struct pm_mm *mm, unsigned gup_flags)
{
	return gup_flags | FOLL_PIN | gup_hot_flag(mm);
}

/*
 * The has-pinned flag, tested before it is set (gup.c's top comment). Both GUP entry files use
 * it.
 */
static __always_inline void mm_set_has_pinned(struct pm_mm *mm)
{
	if (knob(mm->m, PM_KNOB_HAS_PINNED_ALWAYS_WRITE)) {
		/* Before 2021: atomic_set(&mm->has_pinned, 1) on every pin call. */
		atomic_store_relaxed(&mm->xhas_pinned, 1);
		count_event(mm->m, HAS_PINNED_WRITES, 1);
		return;
	}
	if (likely(atomic_load_relaxed(&mm->xhas_pinned)))
		return;
	atomic_store_mb(&mm->xhas_pinned, 1);
	count_event(mm->m, HAS_PINNED_WRITES, 1);
}


/* Linux's is_valid_gup_args plus the range checks. Return: 0 or -errno. */
static __always_inline long pm__gup_check_args(struct pm_mm *mm, unsigned long start,
					   unsigned long nr_pages, unsigned flags,
					   struct pm_page **pages, bool pin, bool fast)
{
	unsigned long len, end;

	if (pm__mm_bad(mm) || (flags & ~FOLL_PUBLIC_MASK))
		return -EINVAL;
	if ((flags & FOLL_LONGTERM) && !pin)
		return -EINVAL;
	if ((pin || fast) && !pages)
		return -EINVAL;
	if (fast && nr_pages > INT_MAX)
		return -EINVAL;
	start &= PAGE_MASK;
	if (nr_pages > (ULONG_MAX >> PAGE_SHIFT))
		return -EOVERFLOW;
	len = nr_pages << PAGE_SHIFT;
	if (start + len < start)
		return -EOVERFLOW;
	end = start + len;
	if (end > PM_TASK_SIZE)
		return -EFAULT;
	return 0;
}


__hidden long pm__gup_slow(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			   unsigned flags, struct pm_page **pages);
__hidden long pm__gup_locked(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			     unsigned flags, struct pm_page **pages);
__hidden void pm__gup_put_folio(struct pm_folio *folio, int refs, unsigned flags);
__hidden long pm__gup_longterm(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			       unsigned flags, struct pm_page **pages);

/* Must a pin with @flags leave the movable zone first (FOLL_LONGTERM, Linux 5.13)? */
static inline bool pm__gup_longterm_migrates(const struct pm_machine *m, unsigned flags)
{
	return (flags & FOLL_LONGTERM) && m->movable_base < m->nr_pages &&
	       !knob(m, PM_KNOB_LONGTERM_PIN_IN_PLACE);
}
__hidden bool pm__gup_must_unshare(struct pm_vma *vma, unsigned flags, struct pm_page *page);

/* // gup/gup_fast.c */
__hidden unsigned long pm__gup_fast_walk(struct pm_mm *mm, unsigned long start,
					 unsigned long end, unsigned flags,
					 struct pm_page **pages);

/* // debug/check.c is the public pm_machine_check(). */

#endif /* PM_INTERNAL_H */
