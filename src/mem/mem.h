/* SPDX-License-Identifier: MIT */
/*
 * mem/mem.h - frames, pages and folios, the machine, and what crosses the files of mem/
 * (internal.h has the naming rule, the invariants and the assertion macros). Its inline
 * helpers call only mem.c, its own source, so every other file of mem/ stands above both; the
 * folio helpers that must know hot mode (folio_put() among them) are mem/folio_hot.h's.
 */
#ifndef PM_MEM_MEM_H
#define PM_MEM_MEM_H

#include <pinmm/pinmm.h>

#include "internal.h"
#include "lib/atomic.h"
#include "lib/compiler.h"
#include "lib/cpu.h"
#include "lib/list.h"
#include "lib/rcu.h"
#include "lib/rwsem.h"
#include "lib/spinlock.h"
#include "lib/trace.h"

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
	PG_huge_zero,	   /* the machine's huge zero folio (mem/machine.c); on its head */
	PG_hot,		   /* head: pins count per CPU, the bias is held (mem/folio_hot.c) */
	PG_hot_leave,	   /* head: hot mode is ending; its pins are being folded */
	PG_hugetlb_restore, /* head: freed, it gives a reservation back (mem/hugetlb_pool.c) */
};
#define PGF(bit) (1UL << (bit))
/* The top byte of a head's flags: the thread of the folio's last contended pin (folio_hot.h). */
#define PG_PIN_TAG_SHIFT 56
#define PG_PIN_TAG_MASK (0xffUL << PG_PIN_TAG_SHIFT)

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
	union {
		struct {
			_Atomic int xpincount;	      /* head of a large folio: outstanding pins */
			_Atomic int xentire_mapcount; /* head of a large folio: PMD mappings */
		};
		/* A PMD table: a byte per class of CPUs (CPU % 8) that handed out one of its
		 * slots since it was last all empty (pgtable/pgtable.c, "Used PMD tables") */
		_Atomic uint8_t xtable_used[8];
		_Atomic uint64_t xtable_used_any;
	};
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
		/* tail page 1 of a THP: the deposited PTE table of the one leaf that maps it,
		 * where its fault installed that leaf without the PMD lock; else NULL
		 * (pgtable/huge_memory.c, "Deposit") */
		struct pm_page *thp_deposit;
		struct {		     /* a page-table page */
			struct pm_spinlock ptl; /* split lock: PTE table's PTL, PMD table's PMD lock */
			int16_t level;		/* 4 = PGD ... 1 = PTE */
			/* pm_access's copies through this table (pgtable.c, "Lockless
			 * readers"): the threads (bit: pin tag % 8) that copied under the
			 * lock, and TABLE_READERS once the table has its reader slots; written
			 * under the lock */
			_Atomic uint16_t xaccess_threads;
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
 * Per-CPU free-frame cache, the pcp lists of Linux: for order 0, a list per kind of memory
 * (page_alloc.c, "Two kinds"), each refilled one PCP_BATCH block at a time, drained
 * PCP_BATCH frames at a time when both together pass @high, which tunes itself between the
 * machine's pcp_high_min and pcp_high_max; and a list of freed max-order user blocks, at most
 * pcp_thp_high (page_alloc.c, "THP-sized blocks"). Only its CPU's threads use it in
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
	_Atomic int xcount;	/* frames on all lists, thp's blocks included; written under
				 * lock, read by anyone */
	int high;		/* drain above this; under lock */
	unsigned home;		/* the zone whose frames it caches; read-only */
	int nr[PCP_NR_LISTS];	/* frames on each list; under lock */
	struct pm_list lists[PCP_NR_LISTS]; /* hottest first; under lock */
	int nr_thp;		/* blocks on thp; under lock */
	struct pm_list thp;	/* free user blocks of PM_MAX_ORDER, the oldest first (Linux's
				 * pcp list for THP-sized pages); under lock */
	_Atomic int xnr_thp;	/* nr_thp, for readers without the lock */
	_Atomic unsigned long xids; /* ids this CPU gave (pm__machine_id) */
	/* The range design's hugetlb pool pages, each with a reservation, set aside for this
	 * CPU's reserved faults (hugetlb_pool.c, "Per-CPU lists"); under lock */
	int nr_hugetlb;
	struct pm_list hugetlb;
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
	THP_SPLIT_PAGE,
	THP_SPLIT_PAGE_FAILED,
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
	bool fork_busy;			/* a fork child's copy, whose allocator a thread it
					 * lacks was inside at the fork (mem.c) */
	char *frames;			/* the machine's memory: nr_pages frames, 2 MiB aligned */
	struct pm_page *pages;		/* nr_pages descriptors; initialised below the zones'
					 * frontiers */
	unsigned long nr_pages;
	struct pm_page *zero_page;
	/* The huge zero folio (mem/machine.c): made when a first address space wants it, given
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
	int pcp_thp_high;		/* max-order blocks a cache keeps at most */
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

	/* The hugetlb pool (mem/hugetlb_pool.c): free 2 MiB pages on a list, under hugetlb_lock. */
	struct pm_spinlock hugetlb_lock __cacheline_aligned;
	struct pm_list hugetlb_free;	/* free pool pages, linked through the head's lru */
	unsigned long hugetlb_total;	/* nr_hugepages; read-only after creation */
	unsigned long hugetlb_nr_free;	/* pages on hugetlb_free; under hugetlb_lock */
	long hugetlb_resv;		/* HugePages_Rsvd (may dip below 0); under hugetlb_lock */
	_Atomic bool xhugetlb_lists;	/* reserved pages come from per-CPU lists; set once,
					 * under hugetlb_lock (hugetlb_pool.c, "Per-CPU lists") */
	/* Linux's hugetlb_fault_mutex_table: the faults of private mappings on one 2 MiB page
	 * (object, index), and MADV_DONTNEED of it, one at a time (mem/hugetlb_pool.c). */
	pthread_mutex_t hugetlb_fault_mutex[PM_HUGETLB_FAULT_MUTEXES];

	/* Hot folios (mem/folio_hot.c): per-CPU pin counts of folios several CPUs pin. */
	struct pm_folio_hot *_Atomic *_Atomic xhot; /* nr_pages entries by head pfn, or NULL
						     * before the first folio is hot */
	struct pm_spinlock hot_lock __cacheline_aligned; /* entering hot mode; the list */
	struct pm_folio_hot *hot_list;	/* every state made; under hot_lock */
	struct pm_folio_hot *hot_free;	/* states past their grace period; under hot_lock */
	unsigned hot_nr, hot_max;	/* states made, and the most there may be */
	long hot_slot_limit;		/* PM_HOT_REF_LIMIT / nr_cpus: one slot's share */

	/* pm_access's lockless readers of page tables (pgtable.c, "Lockless readers"): the
	 * reader slots of a table, by its pfn, for tables that several CPUs copy through;
	 * NULL until the first such table. table_reader_slots: slots per table. */
	struct pm_reader_slot *_Atomic *_Atomic xtable_readers;
	unsigned table_reader_slots;

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
 * any large folio; one reference stands for all the address spaces that use it (mem/machine.c).
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
 * One CPU's count of a hot folio: the net pins taken on this CPU (signed; each is a pin of a
 * page, 1024 references of a small folio or one reference and one pincount of a large one),
 * so that a hot pin or unpin is one locked instruction on its own line. The leave folds the
 * slot by exchanging it with HOT_FOLDED, so an operation whose add returns a folded value
 * knows that its add was not counted (slot values stay far from it: |pins| < 2^40).
 */
#define HOT_FOLDED (-(1LL << 62))
#define hot_folded(v) ((v) < -(1LL << 61))
/* One CPU class's lockless readers of one table: 1 while one copies through it. */
struct pm_reader_slot {
	_Atomic unsigned long xin;
} __cacheline_aligned;

struct pm_hot_slot {
	_Atomic int64_t xv;
} __cacheline_aligned;

/* The state of one hot period of one folio: made hot, folded, then retired after a grace
 * period, never moved to another folio while an operation may hold it (folio_hot.c, (H5)). */
struct pm_folio_hot {
	struct pm_folio_hot *next;  /* on the machine's hot_list; under hot_lock */
	struct pm_folio_hot *free;  /* on hot_free; under hot_lock */
	struct pm_machine *m;
	struct pm_rcu_head rcu;	    /* the retirement */
	struct pm_hot_slot slot[];  /* nr_cpus, a line each */
};

static inline bool folio_hot(const struct pm_folio *folio)
{
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xflags) &
	       (PGF(PG_hot) | PGF(PG_hot_leave));
}

static inline bool page_anon_exclusive(const struct pm_page *page)
{
	return page_test(page, PG_anon_exclusive);
}

/* // mem/mem.c */
__hidden struct pm_stat_block *pm__stat_block_slow(struct pm_machine *m);
extern __thread struct pm_stat_tls {
	uint64_t id;
	struct pm_stat_block *block;
} pm__stat_tls[4] __hidden;

/* This thread's pin tag, 1..255 (mem/folio_hot.h's pm__folio_pin_contended). */
__hidden unsigned pm__pin_tag_slow(void);
extern __thread unsigned pm__pin_tag __hidden;

static inline unsigned pm__this_pin_tag(void)
{
	return likely(pm__pin_tag) ? pm__pin_tag : pm__pin_tag_slow();
}

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
	return pm_cpu_index(m->nr_cpus);
}

/*
 * An id unique in the machine, never 0, from this CPU's own counter (on its page cache's line,
 * which its allocations write anyway): ids taken on different CPUs share no written byte.
 */
static inline unsigned long pm__machine_id(struct pm_machine *m)
{
	unsigned cpu = pm__this_cpu(m);

	return (atomic_add_relaxed(&m->pcp[cpu].xids, 1) + 1) * m->nr_cpus + cpu;
}

static inline bool knob(const struct pm_machine *m, unsigned k)
{
	return unlikely(m->knobs & k);
}

__hidden void *pm__kzalloc(struct pm_machine *m, size_t size); /* failure-injectable */
__hidden bool pm__should_fail(struct pm_machine *m);
__hidden int pm__machine_register(struct pm_machine *m);
__hidden void pm__machines_lock(void);
__hidden void pm__machines_unlock(void);
__hidden void pm__machine_unregister(struct pm_machine *m);

/* // mem/machine.c */
__hidden struct pm_folio *pm__huge_zero_folio_get(struct pm_machine *m, _Atomic bool *used);
__hidden void pm__huge_zero_folio_put(struct pm_machine *m, _Atomic bool *used);

/* // mem/objcache.c */
__hidden struct pm_obj_cache *pm__obj_cache_create(struct pm_machine *m);
__hidden void pm__obj_cache_destroy(struct pm_machine *m, struct pm_obj_cache *c);
__hidden void *pm__obj_cache_get(struct pm_machine *m, struct pm_obj_cache *c);
__hidden void pm__obj_cache_put(struct pm_machine *m, struct pm_obj_cache *c, void *obj);
__hidden bool pm__obj_cache_locked(struct pm_machine *m, struct pm_obj_cache *c);

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
__hidden bool pm__page_alloc_locked(struct pm_machine *m);
__hidden unsigned long pm__free_pmd_blocks(struct pm_machine *m, unsigned flags);
__hidden bool pm__pmd_block_available(struct pm_machine *m);
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
__hidden void pm__hugetlb_zap_restore(struct pm_hugetlb_resv *resv, unsigned long addr,
				      struct pm_folio *folio);
__hidden bool pm__hugetlb_reserve(struct pm_machine *m, unsigned long nr);
__hidden bool pm__hugetlb_reserve_credit(struct pm_machine *m, unsigned long nr,
					 unsigned long credit);
__hidden void pm__hugetlb_unreserve(struct pm_machine *m, unsigned long nr);
__hidden struct pm_folio *pm__hugetlb_alloc(struct pm_machine *m, bool reserved);
__hidden struct pm_folio *pm__hugetlb_alloc_migrate(struct pm_machine *m, unsigned alloc_flags);
__hidden bool pm__hugetlb_free_in(struct pm_machine *m, unsigned alloc_flags);
__hidden void pm__hugetlb_free_folio(struct pm_folio *folio);
__hidden void pm__hugetlb_lock_exact(struct pm_machine *m);
__hidden void pm__hugetlb_lists_enable(struct pm_machine *m);
__hidden void pm__hugetlb_unlock_exact(struct pm_machine *m);
__hidden struct pm_hugetlb_resv *pm__hugetlb_resv_create(struct pm_machine *m,
							 unsigned long nr, unsigned long credit);
__hidden unsigned long pm__hugetlb_resv_count(struct pm_hugetlb_resv *resv, unsigned long start,
					      unsigned long end);
__hidden void pm__hugetlb_resv_set_base(struct pm_hugetlb_resv *resv, unsigned long base);
__hidden void pm__hugetlb_resv_get(struct pm_hugetlb_resv *resv);
__hidden void pm__hugetlb_resv_put(struct pm_hugetlb_resv *resv);
__hidden void pm__hugetlb_resv_release(struct pm_hugetlb_resv *resv, unsigned long start,
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

/* // mem/folio.c (pm__folio_prep: mem/page_alloc.c) */
__hidden struct pm_folio *pm__folio_alloc(struct pm_machine *m, unsigned order, unsigned flags);
__hidden struct pm_folio *pm__folio_prep(struct pm_page *page, unsigned order);
__hidden void pm__folio_free(struct pm_folio *folio);
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

/* Take @refs references on a folio the caller already holds one on (or a mapping of). */
static inline void folio_get_refs(struct pm_folio *folio, int refs)
{
	atomic_add_relaxed(&folio->page.xrefcount, refs);
}

/* // mem/folio_put.c */
__hidden void pm__folios_put(struct pm_machine *m, struct pm_folio **folios, unsigned n);
__hidden void pm__folios_put_cache(struct pm_machine *m, struct pm_folio **folios, unsigned n);
__hidden struct pm_page *pm__folio_unmap_put(struct pm_folio *folio);

#endif /* PM_MEM_MEM_H */
