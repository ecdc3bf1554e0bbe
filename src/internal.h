/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the types every layer of pinmm shares, and the prototypes that cross files,
 * grouped by the file that defines them ("// mem/page_alloc.c").
 *
 * Naming: public names are pm_*; internal names that cross files are pm__*; file-local names
 * are static with no prefix. A leading double underscore in a helper (__folio_put) means "the
 * caller holds the lock or provides the context the comment names", as in the kernel.
 *
 * Glossary (Linux's words):
 *  frame	one 4 KiB unit of the machine's arena; pfn = its index
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
 *  (F) free frames = frames on buddy lists + frames in per-CPU caches
 *  (T) total frames = free + page tables + frames of allocated folios + 1 (zero page)
 *  (X) a page mapped writable in a private mapping is AnonExclusive, and an AnonExclusive
 *	page is mapped by at most one address space.
 */
#ifndef PM_INTERNAL_H
#define PM_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
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
};
#define PGF(bit) (1UL << (bit))

/*
 * struct pm_page - one frame's descriptor, 64 bytes.
 *
 * xflags, xcompound_head and xrefcount may be read by speculative walkers (GUP-fast) at any
 * time, whatever the frame is used for, so they are atomic and outside the union. The rest is
 * owned by whoever owns the frame: the buddy allocator (free), the folio's holders (folio
 * fields, under the locks their comments name), or the page-table code (table fields).
 */
struct pm_page {
	_Atomic unsigned long xflags;
	_Atomic uintptr_t xcompound_head; /* tail page: head | 1; otherwise 0 */
	_Atomic int xrefcount;		  /* head/small: folio refcount; 0 = free/tail/table */
	_Atomic int xmapcount;		  /* PTE mappings of this page */
	_Atomic int xpincount;		  /* head of a large folio: outstanding pins */
	_Atomic int xentire_mapcount;	  /* head of a large folio: PMD mappings */
	_Atomic uint8_t xorder;		  /* folio order (head), or free block order (buddy) */
	uint8_t pad;
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

/*
 * struct pm_folio - a folio is named by its head page; its fields are the head's. Code that
 * works on whole folios takes a struct pm_folio * so that the type says which one it means.
 */
struct pm_folio {
	struct pm_page page;
};

/* Per-CPU free-frame cache (order 0), the pcp lists of Linux. */
struct pm_pcp {
	struct pm_spinlock lock;
	_Atomic int xcount;
	struct pm_list list;
} __cacheline_aligned;

#define PCP_BATCH 31
#define PCP_HIGH (4 * PCP_BATCH)

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
	PM_NR_STAT_ITEMS
};
_Static_assert(PM_NR_STAT_ITEMS == PM_NR_STATS, "enum pm_stat_item matches struct pm_stats");

struct pm_stat_block {
	_Atomic unsigned long v[PM_NR_STATS]; /* written only by the owning thread */
	struct pm_list link;		      /* on machine->stat_blocks, under machine->lock */
	bool in_use;			      /* owned by a live thread; under machine->lock */
} __cacheline_aligned;

/*
 * struct pm_machine - physical memory and everything global to it.
 */
struct pm_machine {
	/* Read-mostly after creation. */
	uint64_t id;			/* unique for the process's life, never reused */
	unsigned knobs;
	unsigned nr_cpus;
	uint16_t slot;			/* index in pm__machines[] */
	char *arena;			/* nr_pages frames, 2 MiB aligned */
	struct pm_page *pages;		/* nr_pages descriptors */
	unsigned long nr_pages;
	struct pm_page *zero_page;
	struct pm_pcp *pcp;		/* nr_cpus per-CPU caches */
	_Atomic long xfail_nth;		/* pm_fail_nth(): allocations until one fails; 0 = off */
	_Atomic long xrcu_pending;	/* page tables waiting for a grace period to be freed */
	struct pm_stat_block shared_stats; /* fallback when a thread cannot get a block */
	void *arena_map;		/* the mmap that holds the arena */
	size_t arena_map_len;

	/* The buddy zone: free_area lists under zone_lock. */
	struct pm_spinlock zone_lock __cacheline_aligned;
	struct pm_list free_area[PM_MAX_ORDER + 1];
	_Atomic unsigned long xnr_free[PM_MAX_ORDER + 1]; /* blocks; written under zone_lock */

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

static inline struct pm_machine *page_machine(const struct pm_page *page)
{
	return atomic_load_relaxed(&pm__machines[page->mslot]);
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
	return m->arena + (pfn << PAGE_SHIFT);
}

static inline void *page_address(const struct pm_machine *m, const struct pm_page *page)
{
	return pfn_to_virt(m, page_to_pfn(m, page));
}

static inline unsigned long virt_to_pfn(const struct pm_machine *m, const void *p)
{
	return (unsigned long)((const char *)p - m->arena) >> PAGE_SHIFT;
}

static inline bool page_test(const struct pm_page *page, enum pm_pageflag bit)
{
	return atomic_load_relaxed(&((struct pm_page *)page)->xflags) & PGF(bit);
}

static inline void page_set(struct pm_page *page, enum pm_pageflag bit)
{
	atomic_or_relaxed(&page->xflags, PGF(bit));
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

static inline bool folio_is_zero(const struct pm_folio *folio)
{
	return folio_test(folio, PG_zero);
}

static inline int folio_ref_count(const struct pm_folio *folio)
{
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xrefcount);
}

static inline bool page_anon_exclusive(const struct pm_page *page)
{
	return page_test(page, PG_anon_exclusive);
}

/* folio_maybe_dma_pinned(): exact for large folios, no false negatives for small ones. */
static inline bool folio_maybe_dma_pinned(const struct pm_folio *folio)
{
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

static inline void count_event(struct pm_machine *m, enum pm_stat_item item, unsigned long n)
{
	struct pm_stat_block *b = pm__stat_block(m);

	if (likely(b != &m->shared_stats))
		atomic_inc_owned(&b->v[item], n);
	else
		atomic_add_relaxed(&b->v[item], n);
}

static inline bool knob(const struct pm_machine *m, unsigned k)
{
	return unlikely(m->knobs & k);
}

__hidden void *pm__kmalloc(struct pm_machine *m, size_t size);	/* failure-injectable */
__hidden void *pm__kzalloc(struct pm_machine *m, size_t size);
__hidden bool pm__should_fail(struct pm_machine *m);

/* // mem/page_alloc.c */
#define PM_ALLOC_ZERO 0x1 /* zero the frames */
__hidden struct pm_page *pm__alloc_frames(struct pm_machine *m, unsigned order, unsigned flags);
__hidden void pm__free_frames(struct pm_machine *m, struct pm_page *page, unsigned order);
__hidden int pm__page_alloc_init(struct pm_machine *m);
__hidden void pm__page_alloc_fini(struct pm_machine *m);
__hidden size_t pm__nr_free_frames(struct pm_machine *m);
__hidden bool pm__frame_is_free(struct pm_machine *m, struct pm_page *page, unsigned *order);

/* // mem/folio.c */
__hidden struct pm_folio *pm__folio_alloc(struct pm_machine *m, unsigned order, unsigned flags);
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

/* Drop @refs references; the last one frees the folio. */
static inline void folio_put_refs(struct pm_folio *folio, int refs)
{
	int old = atomic_sub_mb(&folio->page.xrefcount, refs);

	pm_assert_cmp(old, >=, refs);
	if (old == refs)
		pm__folio_free(folio);
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
typedef _Atomic uint64_t pm_entry_t; /* a slot of a table at any level */

/* Entry bits, x86-64's layout. Upper levels use PRESENT|RW|USER and the table's pfn. */
#define _PAGE_PRESENT (1UL << 0)
#define _PAGE_RW (1UL << 1)
#define _PAGE_USER (1UL << 2) /* cleared for PROT_NONE: present, but no user access */
#define _PAGE_ACCESSED (1UL << 5)
#define _PAGE_DIRTY (1UL << 6)
#define _PAGE_PSE (1UL << 7)	 /* pmd: a 2 MiB leaf */
#define _PAGE_SPECIAL (1UL << 9) /* no refcounted page behind it (the zero page) */
#define _PAGE_PFN_MASK 0x000ffffffffff000UL
#define _PAGE_TABLE (_PAGE_PRESENT | _PAGE_RW | _PAGE_USER | _PAGE_ACCESSED)

typedef struct { uint64_t val; } pte_t;
typedef struct { uint64_t val; } pmd_t;

static inline pte_t ptep_get(pm_entry_t *p) { return (pte_t){ atomic_load_acquire(p) }; }
static inline pmd_t pmdp_get(pm_entry_t *p) { return (pmd_t){ atomic_load_acquire(p) }; }
/* A re-check after a speculative reference must be ordered after it: see gup_fast.c. */
static inline pte_t ptep_get_mb(pm_entry_t *p) { return (pte_t){ atomic_load_mb(p) }; }
static inline pmd_t pmdp_get_mb(pm_entry_t *p) { return (pmd_t){ atomic_load_mb(p) }; }
static inline void set_pte(pm_entry_t *p, pte_t v) { atomic_store_release(p, v.val); }
static inline void set_pmd(pm_entry_t *p, pmd_t v) { atomic_store_release(p, v.val); }
static inline pte_t ptep_get_and_clear(pm_entry_t *p) { return (pte_t){ atomic_xchg_mb(p, 0) }; }
static inline pmd_t pmdp_get_and_clear(pm_entry_t *p) { return (pmd_t){ atomic_xchg_mb(p, 0) }; }

static inline bool pte_none(pte_t p) { return p.val == 0; }
static inline bool pte_present(pte_t p) { return p.val & _PAGE_PRESENT; }
static inline bool pte_write(pte_t p) { return p.val & _PAGE_RW; }
static inline bool pte_user(pte_t p) { return p.val & _PAGE_USER; }
static inline bool pte_dirty(pte_t p) { return p.val & _PAGE_DIRTY; }
static inline bool pte_special(pte_t p) { return p.val & _PAGE_SPECIAL; }
static inline unsigned long pte_pfn(pte_t p) { return (p.val & _PAGE_PFN_MASK) >> PAGE_SHIFT; }
static inline bool pte_same(pte_t a, pte_t b) { return a.val == b.val; }
static inline pte_t pte_wrprotect(pte_t p) { return (pte_t){ p.val & ~_PAGE_RW }; }
static inline pte_t pte_mkwrite(pte_t p) { return (pte_t){ p.val | _PAGE_RW | _PAGE_DIRTY }; }
static inline pte_t pfn_pte(unsigned long pfn, uint64_t bits)
{
	return (pte_t){ (pfn << PAGE_SHIFT) | bits };
}

static inline bool pmd_none(pmd_t p) { return p.val == 0; }
static inline bool pmd_present(pmd_t p) { return p.val & _PAGE_PRESENT; }
static inline bool pmd_leaf(pmd_t p) { return (p.val & (_PAGE_PRESENT | _PAGE_PSE)) ==
					    (_PAGE_PRESENT | _PAGE_PSE); }
static inline bool pmd_table(pmd_t p) { return pmd_present(p) && !(p.val & _PAGE_PSE); }
static inline bool pmd_write(pmd_t p) { return p.val & _PAGE_RW; }
static inline bool pmd_user(pmd_t p) { return p.val & _PAGE_USER; }
static inline unsigned long pmd_pfn(pmd_t p) { return (p.val & _PAGE_PFN_MASK) >> PAGE_SHIFT; }
static inline bool pmd_same(pmd_t a, pmd_t b) { return a.val == b.val; }
static inline pmd_t pmd_wrprotect(pmd_t p) { return (pmd_t){ p.val & ~_PAGE_RW }; }
static inline pmd_t pmd_mkwrite(pmd_t p) { return (pmd_t){ p.val | _PAGE_RW | _PAGE_DIRTY }; }
static inline pmd_t pfn_pmd(unsigned long pfn, uint64_t bits)
{
	return (pmd_t){ (pfn << PAGE_SHIFT) | bits | _PAGE_PSE };
}

static inline unsigned pgd_index(unsigned long a) { return (a >> PGDIR_SHIFT) & 511; }
static inline unsigned pud_index(unsigned long a) { return (a >> PUD_SHIFT) & 511; }
static inline unsigned pmd_index(unsigned long a) { return (a >> PMD_SHIFT) & 511; }
static inline unsigned pte_index(unsigned long a) { return (a >> PAGE_SHIFT) & 511; }

/* End of the span of size @size containing @addr, clamped to @end (the kernel's pXd_addr_end). */
static inline unsigned long span_end(unsigned long addr, unsigned long end, unsigned long size)
{
	unsigned long boundary = (addr + size) & ~(size - 1);

	return boundary - 1 < end - 1 ? boundary : end;
}

/* The descriptor of the table page that holds slot @p. */
static inline struct pm_page *table_page(struct pm_machine *m, pm_entry_t *p)
{
	return pfn_to_page(m, virt_to_pfn(m, p));
}

/* The table an upper-level entry or a PMD table entry points to. */
static inline pm_entry_t *entry_table(struct pm_machine *m, uint64_t val)
{
	return pfn_to_virt(m, (val & _PAGE_PFN_MASK) >> PAGE_SHIFT);
}

/* // pgtable/pgtable.c */
__hidden pm_entry_t *pm__pgd_alloc(struct pm_machine *m);
__hidden void pm__pgd_free(struct pm_machine *m, pm_entry_t *pgd);
__hidden pm_entry_t *pm__pmd_lookup(struct pm_mm *mm, unsigned long addr);
__hidden pm_entry_t *pm__pmd_span(struct pm_mm *mm, unsigned long addr, unsigned long end,
				  unsigned long *next);
__hidden pm_entry_t *pm__pmd_alloc(struct pm_mm *mm, unsigned long addr);
__hidden int pm__pte_alloc(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden pm_entry_t *pm__pte_alloc_one(struct pm_machine *m);
__hidden void pm__pte_free_now(struct pm_machine *m, pm_entry_t *table);
__hidden void pm__pgtable_deposit(struct pm_mm *mm, pm_entry_t *pmdp, pm_entry_t *table);
__hidden pm_entry_t *pm__pgtable_withdraw(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden pm_entry_t *pm__pte_offset_map_lock(struct pm_mm *mm, pm_entry_t *pmdp,
					     unsigned long addr, struct pm_spinlock **ptlp);
__hidden struct pm_spinlock *pm__pmd_lockptr(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__free_pgtables(struct pm_mm *mm, unsigned long start, unsigned long end);

/* ------------------------------------------------------------------------------------------
 * Address spaces (mm/).
 */
#define VM_READ 0x00000001UL
#define VM_WRITE 0x00000002UL
#define VM_SHARED 0x00000008UL
#define VM_MAYREAD 0x00000010UL
#define VM_MAYWRITE 0x00000020UL
#define VM_MAYSHARE 0x00000080UL
#define VM_DONTCOPY 0x00020000UL
#define VM_HUGEPAGE 0x20000000UL
#define VM_NOHUGEPAGE 0x40000000UL

struct pm_vma {
	unsigned long start, end; /* [start, end); under mmap_lock, and file->i_mmap_lock too */
	unsigned long flags;	  /* VM_*; under mmap_lock (write) */
	struct pm_mm *mm;
	struct pm_shmem *file;	  /* backing object (holds a reference), NULL = private anon */
	unsigned long pgoff;	  /* file page index of start */
	struct pm_list shared;	  /* on file->i_mmap, under file->i_mmap_lock */
};

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
	unsigned knobs;

	struct pm_rwsem mmap_lock __cacheline_aligned;
	struct pm_spinlock page_table_lock; /* populating PGD/PUD entries */
	struct pm_vma **vmas;		    /* sorted by start; under mmap_lock */
	unsigned nr_vmas, cap_vmas;
	unsigned long mmap_base;	    /* top of the top-down search area */
	struct pm_list link;		    /* on machine->mms, under machine->lock */
};

static inline bool mm_has_pinned(struct pm_mm *mm)
{
	return atomic_load_relaxed(&mm->xhas_pinned) != 0;
}

static inline void mmap_read_lock(struct pm_mm *mm) { pm_down_read(&mm->mmap_lock); }
static inline void mmap_read_unlock(struct pm_mm *mm) { pm_up_read(&mm->mmap_lock); }
static inline void mmap_write_lock(struct pm_mm *mm) { pm_down_write(&mm->mmap_lock); }
static inline void mmap_write_unlock(struct pm_mm *mm) { pm_up_write(&mm->mmap_lock); }

/* // mm/vma.c */
__hidden struct pm_vma *pm__find_vma(struct pm_mm *mm, unsigned long addr);
__hidden int pm__vma_index(struct pm_mm *mm, unsigned long addr);
__hidden struct pm_vma *pm__find_vma_intersection(struct pm_mm *mm, unsigned long start,
						  unsigned long end);
__hidden int pm__vma_insert(struct pm_mm *mm, struct pm_vma *vma);
__hidden void pm__vma_remove_at(struct pm_mm *mm, unsigned idx);
__hidden struct pm_vma *pm__vma_alloc(struct pm_mm *mm);
__hidden void pm__vma_free(struct pm_vma *vma);
__hidden int pm__split_vma(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr);
__hidden void pm__vma_try_merge(struct pm_mm *mm, struct pm_vma *vma);
__hidden void pm__vma_set_bounds(struct pm_vma *vma, unsigned long start, unsigned long end,
				 unsigned long pgoff);
__hidden void pm__vma_link_file(struct pm_vma *vma);
__hidden void pm__vma_unlink_file(struct pm_vma *vma);

/* // mm/mm.c */
__hidden struct pm_mm *pm__mm_alloc(struct pm_machine *m);
__hidden void pm__unmap_all(struct pm_mm *mm);

/* // mm/mmap.c */
__hidden void pm__split_huge_pmd_at(struct pm_mm *mm, unsigned long addr);

/* ------------------------------------------------------------------------------------------
 * Faults (fault/).
 */
#define FAULT_FLAG_WRITE 0x01
#define FAULT_FLAG_UNSHARE 0x02 /* make the page exclusive but keep it read-only */

/* Result of the internal fault handler: 0, or -EFAULT (SIGSEGV/SIGBUS), -ENOMEM, -EAGAIN. */
/* // fault/fault.c */
__hidden int pm__handle_mm_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
				 unsigned fault_flags);
__hidden pte_t pm__mk_pte(struct pm_vma *vma, unsigned long pfn, bool writable, bool dirty);

/* // fault/anon.c */
__hidden int pm__do_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				   unsigned long addr, unsigned fault_flags);
__hidden int pm__do_huge_pmd_anonymous_page(struct pm_mm *mm, struct pm_vma *vma,
					    pm_entry_t *pmdp, unsigned long addr);
__hidden bool pm__thp_vma_suitable(struct pm_vma *vma, unsigned long addr);

/* // fault/cow.c */
__hidden int pm__do_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			    unsigned long addr, unsigned fault_flags);
__hidden int pm__do_huge_pmd_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				     unsigned long addr, unsigned fault_flags);
__hidden void pm__split_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__split_huge_pmd_locked(struct pm_mm *mm, pm_entry_t *pmdp);

/*
 * struct pm_shmem - a memfd-like object: a page cache (a radix tree of folios with lockless
 * lookups), a size, an optional exact limit, and the list of VMAs mapping it.
 * See fault/shmem.c for the locking.
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

	struct pm_spinlock tree_lock __cacheline_aligned; /* page-cache writers */
	struct pm_shmem_node *_Atomic xroot;	/* RCU-protected */
	_Atomic unsigned long xnrpages;		/* pages in the cache; under tree_lock */

	struct pm_spinlock info_lock __cacheline_aligned; /* only what must be exact */
	unsigned long alloced;		/* pages charged to this object; under info_lock */
	struct pm_shmem_limit limit;	/* max_pages accounting (when max_pages != 0) */

	pthread_mutex_t i_mmap_lock __cacheline_aligned; /* the mapping list and VMA bounds */
	struct pm_list i_mmap;
	pthread_mutex_t truncate_lock;	/* serialises size changes */
	struct pm_list link;		/* on machine->shmems, under machine->lock */
};

/* // fault/shmem.c */
__hidden int pm__shmem_fault(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			     unsigned long addr, unsigned fault_flags);
__hidden void pm__shmem_get(struct pm_shmem *f);
__hidden struct pm_shmem *pm__shmem_create_internal(struct pm_machine *m, size_t size);
__hidden struct pm_folio *pm__shmem_peek(struct pm_shmem *f, unsigned long index);

static inline void pm__shmem_map_lock(struct pm_shmem *f)
{
	pthread_mutex_lock(&f->i_mmap_lock);
}

static inline void pm__shmem_map_unlock(struct pm_shmem *f)
{
	pthread_mutex_unlock(&f->i_mmap_lock);
}

static inline struct pm_list *pm__shmem_i_mmap(struct pm_shmem *f)
{
	return &f->i_mmap;
}

/* // fault/fork.c is the public pm_mm_fork(). */

/* ------------------------------------------------------------------------------------------
 * Zapping: removing mappings (mm/zap.c).
 */
__hidden void pm__zap_range(struct pm_mm *mm, unsigned long start, unsigned long end);

/* ------------------------------------------------------------------------------------------
 * GUP (gup/).
 */
#define FOLL_WRITE PM_FOLL_WRITE
#define FOLL_GET 0x02
#define FOLL_FORCE PM_FOLL_FORCE
#define FOLL_NOFAULT PM_FOLL_NOFAULT
#define FOLL_LONGTERM PM_FOLL_LONGTERM
#define FOLL_PIN (1U << 19)
#define FOLL_PUBLIC_MASK (FOLL_WRITE | FOLL_FORCE | FOLL_NOFAULT | FOLL_LONGTERM)

/* // gup/gup.c */
__hidden long pm__gup_slow(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			   unsigned flags, struct pm_page **pages);
__hidden bool pm__try_grab_folio(struct pm_folio *folio, int refs, unsigned flags);
__hidden void pm__gup_put_folio(struct pm_folio *folio, int refs, unsigned flags);
__hidden void pm__mm_set_has_pinned(struct pm_mm *mm);
__hidden bool pm__gup_must_unshare(struct pm_vma *vma, unsigned flags, struct pm_page *page);

/* // gup/gup_fast.c */
__hidden unsigned long pm__gup_fast_walk(struct pm_mm *mm, unsigned long start,
					 unsigned long end, unsigned flags,
					 struct pm_page **pages);

/* // debug/check.c */
__hidden int pm__check_machine(struct pm_machine *m);

#endif /* PM_INTERNAL_H */
