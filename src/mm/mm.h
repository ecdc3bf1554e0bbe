/* SPDX-License-Identifier: MIT */
/*
 * mm/mm.h - address spaces: VMAs, the mm and its ranges, their lock assertions, and what
 * crosses the files of mm/. The lock verbs (mmap_write_lock_range() and the rest) are range.h's,
 * since they call range.c: the files that range.c calls include only this header. The calls
 * mm/ makes up into GUP and shmem's fault code (MAP_POPULATE, mremap's populate,
 * MADV_POPULATE_*, MADV_REMOVE: as Linux) are declared here and defined above.
 */
#ifndef PM_MM_MM_H
#define PM_MM_MM_H

#include "mem/mem.h"
#include "mem/folio_hot.h"
#include "pgtable/pgtable.h"
#include "shmem/shmem.h"
#include "mm/vma_tree.h"

/* The lock assertions that name a VMA's or an mm's locks (internal.h's list; the page-table
 * walks' are in pgtable/pgtable.h). */
/*
 * The fault path: mmap_lock, or the VMA's own read lock (Linux's assert_fault_locked). Debug
 * builds count the VMA read locks each thread holds (pm__vma_read_held, mm/vma_lock.c).
 */
#define VMA_LOCK_WRITER (1U << 31)
#define VMA_LOCK_WAITER (1U << 30)
#define VMA_LOCK_READERS (VMA_LOCK_WAITER - 1)
#define assert_vma_read_locked(vma) pm_assert(pm__vma_read_held_here())
#define assert_fault_locked(vma) \
	pm_assert(mm_locked((vma)->mm) || pm__vma_read_held_here())
/* Zaps: the mm's mmap_lock, the VMA's read lock (MADV_DONTNEED inside one VMA), or -
 * truncation zapping other mms - an object's i_mmap lock. */
#define zap_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__i_mmap_held > 0 || pm__vma_read_held_here())
/* The fault path when only the mm is at hand (assert_fault_locked without the VMA). */
#define fault_assert_held(mm) pm_assert(mm_locked(mm) || pm__vma_read_held_here())

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
#define VM_GROWSDOWN 0x00000100UL /* MAP_GROWSDOWN: a fault below grows it (dispatch.c) */
#define VM_LOCKED 0x00002000UL	  /* MAP_LOCKED: populated at mmap; no DONTNEED, FREE or
				   * REMOVE; not inherited by fork */
#define VM_DONTCOPY 0x00020000UL
#define VM_ACCOUNT 0x00100000UL /* charged to the commit (accountable_mapping): private,
				 * writable and reserved once; pinmm commits nothing, so only
				 * merging sees it */
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
	 * merging): 0 = none; an id unique in the machine (PM_ANON_VMA_ID steps), with
	 * PM_ANON_VMA_FORKED when fork gave it (the anon_vma_chain is not singular); or, with
	 * PM_ANON_VMA_PENDING, the time of the first fault that needed one, whose choice between
	 * a neighbour's anon_vma and a new one (find_mergeable_anon_vma) is made later, by the
	 * first reader (vma.c, "anon_vma identity"). A private VMA needs one at its first
	 * anonymous page (anon_vma_prepare: a write or COW fault, a THP fault even for the huge
	 * zero page, a private hugetlb page), never for a 4 KiB zero page or a page-cache page
	 * mapped read-only; split, move and merge keep it. Set from 0 by a cmpxchg under a fault
	 * lock, decided by a cmpxchg; otherwise changed under the VMA's write lock. A fault under
	 * a per-CPU read lock stamps its slot instead, so read it through pm__vma_anon_vma(),
	 * never directly.
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
#define PM_ANON_VMA_PENDING 2UL
#define PM_ANON_VMA_ID 4UL

__hidden void pm__vma_anon_prepare(struct pm_vma *vma); /* fault.h: vma_anon_prepare() */
__hidden unsigned long pm__vma_anon_vma(struct pm_vma *vma);
__hidden void pm__vma_anon_clear(struct pm_vma *vma);
__hidden void pm__vma_anon_new(struct pm_vma *vma, unsigned long flags);
__hidden void pm__vma_start_change(struct pm_mm *mm, struct pm_vma *vma);
__hidden void pm__vma_start_take_anon(struct pm_mm *mm, struct pm_vma *vma);
__hidden bool pm__vma_anon_mark_pcpu(struct pm_vma *vma);	/* vma_lock.c */
__hidden unsigned long pm__vma_anon_marked(struct pm_vma *vma, bool clear); /* vma_lock.c */
__hidden unsigned long pm__vma_anon_clock(void);		/* vma_lock.c */

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
	bool upper_cas;		/* PGD/PUD entries published by CAS, PUD tables kept until
				 * the teardown (pgtable/pgtable.c) */
	bool pte_cas;		/* PTE installs compare-and-swap, not under the PTL (fault/anon.c) */
	bool hot_folios;	/* pins may make a folio hot (mem/folio_hot.c) */
	bool lockless_miss;	/* a fault or slow pin where no VMA is answers without the
				 * range's lock (mm/vma_lock.c, pm__vma_absent) */
	bool eager_upper;	/* mmap fills the PGD entries of its span (pgtable.c,
				 * pm__upper_tables_prepare) */
	bool hugetlb_lists;	/* reserved hugetlb faults take pages from per-CPU lists
				 * (mem/hugetlb_pool.c, "Per-CPU lists") */
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
	union {
		struct pm_pgtables pgtables; /* what pgtable/ sees (pgtable/pgtable.h) */
		struct {
			struct pm_machine *m;
			pm_entry_t *pgd;
		};
	};
	_Atomic int xhas_pinned;	     /* MMF_HAS_PINNED: set before the first pin, never cleared */
	_Atomic unsigned xwrite_protect_seq; /* odd while fork write-protects; under mmap_lock (W) */
	const struct pm_mm_policy *policy;   /* the design; read-only */
	struct pm_mm_range *ranges;	     /* policy->nr_ranges: the VMAs, their locks; read-only */
	unsigned nr_ranges, range_shift;     /* the policy's, next to the pointer they index */
	_Atomic bool xgrowsdown;	     /* a VM_GROWSDOWN VMA was ever stored: set once (tested
					      * first), never cleared (pm__vma_absent) */
	_Atomic bool xhuge_zero;	     /* MMF_HUGE_ZERO_FOLIO: holds a use of the machine's huge
					      * zero folio (mem/machine.c); set once, cleared at teardown */
	bool dead;			     /* emptied by pm_machine_destroy (pm__mm_bad): every
					      * call reads it, only the destroy writes it */

	/* Where pgtable/pgtable.h's mm_page_table_lock() and mm_upper_cas() look. */
	struct pm_spinlock page_table_lock __cacheline_aligned; /* populating PGD/PUD entries */
	bool upper_cas;			    /* PGD/PUD entries published by CAS, not under
					     * page_table_lock; PUD tables kept until the
					     * teardown (policy->upper_cas; pgtable.c) */
	struct pm_mm_count *count;	    /* the range design: VMAs, counted per range */
	struct pm_vma_cache *vcache;
	unsigned long mmap_base;	    /* top of the top-down search area */
	struct pm_list link;		    /* on machine->mms, under machine->lock */
	struct pm_mm_notifier *notifiers;   /* told of the teardown; under machine->lock */
};
_Static_assert(offsetof(struct pm_mm, pgtables) == 0 &&
		       offsetof(struct pm_mm, pgd) == offsetof(struct pm_pgtables, pgd),
	       "pgtable/ reads struct pm_pgtables at the start of the mm");
_Static_assert(offsetof(struct pm_mm, page_table_lock) == PM_MM_PAGE_TABLE_LOCK_OFFSET &&
		       offsetof(struct pm_mm, upper_cas) == PM_MM_UPPER_CAS_OFFSET,
	       "pgtable/ finds page_table_lock and upper_cas at their offsets");

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

/* Does this thread hold, for read or write, every range of @mm that [@start, @end) meets? */
static inline bool pm__range_covers(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	return h && h->lo <= range_of(mm, start) && range_of(mm, end - 1) <= h->hi;
}

/* // mm/range.c */
__hidden int pm__range_init(struct pm_mm *mm, bool range_design);
__hidden void pm__range_fini(struct pm_mm *mm);
__hidden void pm__range_lock_change(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__range_lock_read(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__range_lock_all(struct pm_mm *mm);
__hidden void pm__range_lock_slots(struct pm_mm *mm, unsigned lo, unsigned hi, bool write);
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
__hidden bool pm__vma_absent(struct pm_mm *mm, unsigned long addr, bool fault);

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
__hidden void pm__vma_free_gap_tables(struct pm_mm *mm, unsigned long start, unsigned long end);
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
__hidden unsigned long pm__vma_copy_anon(struct pm_mm *mm, struct pm_vma *src,
					 unsigned long start, unsigned long end,
					 unsigned long pgoff);

/* // mm/mmap.c (for mremap.c) */
__hidden int pm__do_munmap(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__unmap_region(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			       unsigned long end);
__hidden void pm__vma_link_file(struct pm_vma *vma);
__hidden void pm__vma_unlink_file(struct pm_vma *vma);

/* // mm/access.c */
__hidden void pm__access_warm(struct pm_mm *mm, unsigned long addr);

/* // mm/populate.c */
__hidden void pm__mm_populate(struct pm_mm *mm, unsigned long start, unsigned long len,
			      unsigned long vm_flags);
__hidden void pm__mm_populate_locked(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden int pm__madvise_populate(struct pm_mm *mm, unsigned long start, unsigned long end,
				  bool write);

/* // mm/truncate.c */
__hidden void pm__shmem_punch_hole(struct pm_shmem *f, unsigned long first, unsigned long end);

/* // mm/lifecycle.c */
__hidden struct pm_mm *pm__mm_alloc(struct pm_machine *m);

/* // mm/migrate.c */
__hidden void pm__migration_entry_wait(struct pm_mm *mm, pm_entry_t *ptep, pte_t entry);
__hidden bool pm__split_anon_thp(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				 unsigned long haddr);
__hidden void pm__compact_for_fault(struct pm_machine *m);
/* Tests only: called by a migration between its unmap and its copy, nothing locked. */
extern void (*pm__migrate_hook)(struct pm_mm *mm, unsigned long addr) __hidden;
/* ... and of a page-cache folio, between its unmap and its freeze, under the i_mmap lock. */
extern void (*pm__shmem_migrate_hook)(struct pm_shmem *f, unsigned long index) __hidden;
/* ... and of a hugetlb folio, between its unmap and its freeze, under its fault mutex. */
extern void (*pm__hugetlb_migrate_hook)(struct pm_mm *mm, unsigned long haddr) __hidden;

/* ------------------------------------------------------------------------------------------
 * Zapping: removing mappings (mm/zap.c).
 */
__hidden void pm__zap_range(struct pm_mm *mm, unsigned long start, unsigned long end);
/* Tests only: called by a zap or an mprotect that read a PMD migration entry, before it takes
 * the PMD lock. */
extern void (*pm__pmd_migration_hook)(struct pm_mm *mm, unsigned long addr) __hidden;
__hidden void pm__zap_vma_range(struct pm_vma *vma, unsigned long start, unsigned long end);
__hidden void pm__zap_file_range(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__zap_hugetlb_resv(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
				   unsigned long end);

/* ------------------------------------------------------------------------------------------
 * Calls up, declared low and defined above (tests/scripts/layers.sh allows exactly these), and
 * GUP's flags (gup/), which they pass.
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
/* (1U << 23) is gup/'s FOLL_HOT (gup/gup.h). */
#define FOLL_PUBLIC_MASK (FOLL_WRITE | FOLL_FORCE | FOLL_NOFAULT | FOLL_LONGTERM)

/* // gup/gup.c (called by mm/populate.c only) */
__hidden long pm__populate(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			   unsigned flags, bool locked);


#endif /* PM_MM_MM_H */
