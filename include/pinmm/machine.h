/* SPDX-License-Identifier: MIT */
/*
 * pinmm/machine.h - a machine: physical memory, its allocator, counters and knobs.
 *
 * A machine owns one region of real memory cut into 4 KiB frames, a struct pm_page for every
 * frame (type-stable: never freed while the machine lives), a buddy allocator with per-CPU
 * caches, and per-thread event counters. Several machines may live in one process; they share
 * nothing but the RCU implementation.
 *
 * Host memory is reserved, not used, at creation: a machine costs the host in proportion to
 * the frames it has handed out (their contents and their descriptors), not to its size, so a
 * machine far larger than the host's memory works as long as the work touches little of it.
 */
#ifndef PINMM_MACHINE_H
#define PINMM_MACHINE_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Knobs select the historical behaviour each seed patch replaced, so that "before" and "after"
 * run in one binary, side by side. They combine freely. Return values and data never depend on
 * them; only the path taken (and so the counters and the speed) does.
 */
#define PM_KNOB_HAS_PINNED_ALWAYS_WRITE 0x01 /* every FOLL_PIN call stores the has-pinned flag */
#define PM_KNOB_NO_GUP_FAST 0x02	     /* *_fast take mmap_lock and go the slow way */
#define PM_KNOB_GUP_FAST_RESTART 0x04	     /* a short fast walk is dropped and redone slowly */
#define PM_KNOB_UNPIN_PER_PAGE 0x08	     /* unpin one page at a time, no folio batching */
#define PM_KNOB_SHMEM_LOCK_TWICE 0x10	     /* shmem fault takes info->lock twice (pre-2010) */
#define PM_KNOB_NO_PER_VMA_LOCK 0x20	     /* every fault takes mmap_lock (before Linux 6.4) */
#define PM_KNOB_PTE_TABLE_LOCK 0x40	     /* range design: PTE installs and pm_access's
					      * copies take the table's lock (Linux); without
					      * it installs compare-and-swap, and copies go as
					      * the lock's lockless readers */
#define PM_KNOB_FOLIO_SHARED_PINS 0x80	     /* range design: every pin writes the folio's
					      * counts (Linux); without it, a folio several
					      * CPUs pin counts them per CPU (hot folios) */
#define PM_KNOB_LONGTERM_PIN_IN_PLACE 0x100 /* FOLL_LONGTERM pins movable pages in place
					     * (before Linux 5.13) */
#define PM_KNOB_NO_HUGE_ZERO_PAGE 0x200    /* THP read faults allocate a THP, as writes do
					     * (use_zero_page=0); without it they map the huge
					     * zero page (use_zero_page=1, Linux's default) */
#define PM_KNOB_VMA_LOCK_SHARED_COUNT 0x400 /* the VMA read lock is one shared count, as Linux's */
#define PM_KNOB_SHMEM_TREE_LOCK 0x800	     /* every page-cache insert takes the object's tree
					      * lock (Linux's xa_lock), not only its leaf's */
#define PM_KNOB_HUGETLB_POOL_LOCK 0x1000  /* range design: every hugetlb allocation takes
					      * the pool's lock (Linux's hugetlb_lock); without
					      * it reserved faults take pages from per-CPU lists */
#define PM_KNOB_ALL                                                                    \
	(0xff | PM_KNOB_LONGTERM_PIN_IN_PLACE | PM_KNOB_NO_HUGE_ZERO_PAGE |            \
	 PM_KNOB_VMA_LOCK_SHARED_COUNT | PM_KNOB_SHMEM_TREE_LOCK | PM_KNOB_HUGETLB_POOL_LOCK)

/* At most this many machines are alive at once in a process (each frame's descriptor names
 * its machine in a 16-bit slot); one more pm_machine_create() fails with EMFILE. */
#define PM_MACHINES_MAX 4095

struct pm_config {
	size_t mem_bytes;    /* physical memory, a multiple of 2 MiB; 0 = default (1 GiB) */
	unsigned knobs;	     /* PM_KNOB_* above; 0 = modern behaviour */
	unsigned flags;	     /* PM_MACHINE_* below; 0 = the default design */
	size_t nr_hugepages; /* 2 MiB hugetlb pages set aside at creation (vm.nr_hugepages) */
	size_t movable_bytes; /* the top of memory as a movable zone (Linux's movablecore=), a
			       * multiple of 2 MiB below mem_bytes; 0: none */
};

/*
 * The address-space design of every mm of the machine. PM_MACHINE_LINUX_MM: Linux's (one
 * mmap_lock per mm, per-VMA locks for faults). PM_MACHINE_RANGE_MM: the range design, where
 * mmap, munmap, mprotect, madvise and faults on different 512 GiB ranges of an mm share no
 * lock, and threads' non-fixed mappings go to ranges of their own (docs/architecture.md).
 * Every call keeps Linux's semantics in both; only the address a non-fixed pm_mmap() picks
 * may differ. Flags 0: the range design if PINMM_RANGE_MM=1 is in the environment, else
 * Linux's. Both flags together, or unknown bits: EINVAL.
 */
#define PM_MACHINE_RANGE_MM 0x1 /* the range-scalable address space (beyond Linux) */
#define PM_MACHINE_LINUX_MM 0x2 /* Linux's design, whatever the environment says */

/** pm_machine_flags() - the design in force: PM_MACHINE_LINUX_MM or PM_MACHINE_RANGE_MM (0 for
 * a NULL machine). */
PM_API unsigned pm_machine_flags(struct pm_machine *m);

/**
 * pm_hugetlb_pool() - the machine's hugetlb pool, in 2 MiB pages: @total (nr_hugepages) and
 * @free, the pages not in use, reserved ones included (HugePages_Free). Either may be NULL.
 * Return: 0, or -EINVAL for a NULL machine.
 */
PM_API int pm_hugetlb_pool(struct pm_machine *m, size_t *total, size_t *free);

/**
 * pm_hugetlb_reserved() - @resv gets the pool's pages promised to hugetlb mappings and not yet
 * faulted in (HugePages_Rsvd): they are among the free pages of pm_hugetlb_pool(). @resv may be
 * NULL. Linux 6.9+'s count, which is lower while a private mapping's page outlives the mapping
 * (pinned, or kept by a fork child) and can go below zero then: it reads as Linux's does, an
 * unsigned count that wrapped ((size_t)-1 for -1), until the page is freed.
 * Return: 0, or -EINVAL for a NULL machine.
 */
PM_API int pm_hugetlb_reserved(struct pm_machine *m, size_t *resv);

/*
 * Event counters, in pages unless the comment says calls. Each thread counts into its own slot;
 * pm_machine_stats() sums the slots, so no counter is a cache line that every CPU writes.
 */
struct pm_stats {
	unsigned long nr_foll_pin_acquired; /* pins taken (logical, per page) */
	unsigned long nr_foll_pin_released; /* pins released */
	unsigned long gup_fast_pages;	    /* pages taken by the lockless walk */
	unsigned long gup_slow_pages;	    /* pages taken under mmap_lock */
	unsigned long gup_fast_fallbacks;   /* fast calls that left the lockless walk (calls) */
	unsigned long faults;		    /* faults handled (calls into the fault handler) */
	unsigned long thp_faults;	    /* faults that mapped a new 2 MiB folio at PMD level
					     * (not the huge zero page: thp_fault_alloc) */
	unsigned long thp_fallbacks;	    /* THP-eligible faults that fell back to 4 KiB */
	unsigned long thp_splits;	    /* PMD mappings split into PTE tables (the huge
					     * zero page's too: thp_split_pmd) */
	unsigned long cow_copies;	    /* write/unshare faults that copied a page */
	unsigned long cow_reuses;	    /* write/unshare faults that reused a page in place */
	unsigned long fork_pinned_copies;   /* pages copied at fork because they may be pinned */
	unsigned long shmem_allocs;	    /* pages added to shmem page caches */
	unsigned long shmem_alloc_races;    /* pages allocated then dropped: another thread won */
	unsigned long shmem_lock_acquisitions; /* times a shmem fault took info->lock (calls) */
	unsigned long has_pinned_writes;    /* stores to an mm's has-pinned flag (calls) */
	unsigned long unpin_folio_updates;  /* atomic folio updates made by the unpin family */
	unsigned long pgtable_allocs;	    /* page-table pages allocated */
	unsigned long pgtable_frees;	    /* page-table pages handed to RCU for freeing */
	unsigned long alloc_failures;	    /* allocations that failed (out of memory or injected) */
	/* Faults under per-VMA locks (calls), Linux's vmstat VMA_LOCK_* with their meanings: */
	unsigned long vma_lock_success;	    /* completed under the VMA's lock, no mmap_lock */
	unsigned long vma_lock_abort;	    /* no VMA lock could be used (no VMA, VMA being
					     * changed): the fault went to mmap_lock */
	unsigned long vma_lock_retry;	    /* asked under the VMA lock to be retried; retried
					     * under mmap_lock */
	unsigned long vma_lock_miss;	    /* the VMA found was detached once locked; looked up
					     * again */
	unsigned long hugetlb_faults;	    /* faults that mapped a hugetlb page (new, or a COW
					     * copy) at PMD level */
	/* The frame allocator's sharing between CPUs (docs/benchmarks.md, "shared lines"): */
	unsigned long zone_lock_acquisitions; /* times the buddy lists' lock was taken */
	unsigned long remote_frames;	    /* 4 KiB frames allocated on a CPU other than the
					     * one whose cache took them when they were freed */
	/* Migration and compaction, vmstat's meanings (folios, runs): */
	unsigned long pgmigrate_success;    /* folios moved */
	unsigned long pgmigrate_fail;	    /* folios tried and not moved */
	unsigned long compact_success;	    /* compaction runs that freed a 2 MiB block */
	unsigned long compact_fail;	    /* compaction runs that freed none */
	unsigned long migrate_pinned_skips; /* folios left in place: pinned or another extra
					     * reference */
	unsigned long thp_split_page;	    /* THPs split into 4 KiB folios (a migration with no
					     * 2 MiB block in its target) */
	unsigned long thp_split_page_failed; /* splits refused: a pin or another reference */
};

/**
 * pm_machine_create() - make a machine.
 * @cfg: memory size, knobs and design (flags); NULL means defaults.
 *
 * O(1) time and host memory whatever @cfg->mem_bytes: the address range is reserved and frames
 * are set up when first used.
 *
 * Return: the machine, or NULL with errno EINVAL (mem_bytes not a multiple of 2 MiB or above
 * 2^52, unknown knob bits, flags other than 0, PM_MACHINE_LINUX_MM or PM_MACHINE_RANGE_MM:
 * unknown bits, or both designs at once), ENOMEM (out of memory, the host cannot reserve the
 * address range: address space, RLIMIT_AS, vm.overcommit_memory=2, or nr_hugepages 2 MiB
 * pages cannot be set aside) or EMFILE (PM_MACHINES_MAX machines are alive already;
 * destroying one makes room).
 */
PM_API struct pm_machine *pm_machine_create(const struct pm_config *cfg);

/**
 * pm_machine_destroy() - free a machine. Every mm and shmem object must be gone already.
 * Waits for deferred (RCU) frees first. Destroying it under live ones is a misuse that warns:
 * each is emptied (its notifiers told, its pages freed) and dead - every call on it fails
 * with -EINVAL (NULL with errno EINVAL, or 0), and pm_mm_destroy() or the last
 * pm_shmem_put() frees what is left of it. No other thread may be using them.
 */
PM_API void pm_machine_destroy(struct pm_machine *m);

/** pm_machine_free_pages() - free 4 KiB frames, per-CPU caches and never-used frames
 * included. Exact after pm_rcu_barrier() when nothing runs concurrently. O(1) in the
 * machine's size. */
PM_API size_t pm_machine_free_pages(struct pm_machine *m);
PM_API size_t pm_machine_total_pages(struct pm_machine *m);
PM_API unsigned pm_machine_knobs(struct pm_machine *m);
PM_API void pm_machine_stats(struct pm_machine *m, struct pm_stats *out);

/*
 * fork(): a process that uses pinmm may fork, and the child may use pinmm (the machines it
 * inherited and new ones). The library registers pthread_atfork handlers that follow
 * liburcu's call_rcu discipline (call_rcu_before_fork/_after_fork_parent/_after_fork_child);
 * an application that uses liburcu-memb's call_rcu itself must not call those again. As for
 * any multithreaded fork, a machine another thread was changing at the fork is not usable in
 * the child.
 */

/** pm_rcu_barrier() - wait until every deferred free (page tables, tree nodes) has run. */
PM_API void pm_rcu_barrier(void);

/**
 * pm_machine_check() - walk a quiescent machine and check its invariants: every frame is free,
 * a page table, or part of a folio whose refcount covers its mappings, references and pins;
 * free lists and counts add up; no AnonExclusive page is mapped by two address spaces; each
 * address space counts exactly the VMAs it holds.
 *
 * Costs time and host memory in proportion to the frames ever used and the VMAs, not to the
 * machine's size.
 *
 * Context: nothing may run concurrently on @m.
 * Return: 0, or -EUCLEAN after printing what is wrong to stderr.
 */
PM_API int pm_machine_check(struct pm_machine *m);

/*
 * pm_compact() - compaction (Linux's /proc/sys/vm/compact_memory): in each zone, the sparsest
 * 2 MiB blocks whose pages all can move are emptied into the free frames of the other partly
 * used blocks, so that they become free 2 MiB blocks (for THP, hugetlb). Pages that look
 * pinned by Linux's racy test at isolation (isolate_migratepages_block: refcount - 1 >
 * mapcount) are skipped, counted in migrate_pinned_skips, and keep their block; so do the
 * folios pm_migrate_range() cannot move (include/pinmm/migrate.h). Counts compact_success
 * when the run freed a 2 MiB block, else compact_fail; pages moved count in pgmigrate_success.
 * Context: takes each address space's lock for read in turn; may sleep.
 * Return: the free 2 MiB blocks afterwards, or -EINVAL (m NULL), -ENOMEM.
 */
PM_API long pm_compact(struct pm_machine *m);

/**
 * pm_fail_nth() - make the @n-th allocation from now (frames or metadata) fail with -ENOMEM.
 * 0 turns injection off. One-shot: after the failure, allocations succeed again.
 */
PM_API void pm_fail_nth(struct pm_machine *m, long n);

/**
 * pm_strerror() - a short text for a negative errno returned by a pm_ call. Any long is
 * accepted: a value that is not a negative errno gets "unknown error".
 */
PM_API const char *pm_strerror(long err);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_MACHINE_H */
