/* SPDX-License-Identifier: MIT */
/*
 * fault/fault.h - the fault handlers' flags and results, and what crosses the files of fault/.
 */
#ifndef PM_FAULT_FAULT_H
#define PM_FAULT_FAULT_H

#include "mm/range.h"
#include "mm/vma_lock.h"

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

/*
 * The VMA is about to hold an anonymous page: it needs an anon_vma (Linux's
 * vmf_anon_prepare). Tested before set: a fault in a VMA that has one writes nothing, and
 * nor does one whose per-CPU read lock's slot is marked already (pm__vma_anon_mark_pcpu), the
 * common case of a contended VMA, which then makes no call either.
 */
static inline void vma_anon_prepare(struct pm_vma *vma)
{
	struct pm_vma_pcpu_slot *slot;

	if (atomic_load_relaxed(&vma->xanon_vma))
		return;
	slot = pm__vma_read_slot_of(vma);
	if (slot && atomic_load_relaxed(&slot->xanon))
		return;
	pm__vma_anon_prepare(vma);
}

/* Linux's vmf_error(): the fault's result for an -errno from below (-ENOMEM, or -EFAULT). */
static inline vm_fault_t vmf_error(int err)
{
	return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

/* // fault/dispatch.c */
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

/* // fault/shmem.c */
__hidden vm_fault_t pm__shmem_fault(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				    unsigned long addr, unsigned fault_flags);

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

#endif /* PM_FAULT_FAULT_H */
