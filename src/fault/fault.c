// SPDX-License-Identifier: MIT
/*
 * fault.c - the fault entry points: pm_fault(), and the dispatcher every fault and every
 * slow GUP goes through, pm__handle_mm_fault().
 *
 * The pattern everywhere below: read the entry without a lock; allocate, zero or copy with no
 * lock held; take the narrowest lock (the PTE table's PTL, or the PMD lock for a 2 MiB leaf);
 * re-check that the entry is what we based the decision on; commit, or back out and let the
 * dispatcher look again (VM_FAULT_AGAIN).
 *
 * Locking: every handler runs with mmap_lock held for read (or write), or with the VMA's own
 * lock (FAULT_FLAG_VMA_LOCK; see mm/vma_lock.c), and asserts it (assert_fault_locked), so the
 * VMA and the page tables it covers are stable; entries are not - GUP-fast, pm_access, other
 * faults, MADV_DONTNEED and truncation change them under their locks concurrently.
 */
#include "internal.h"

/* Would an unshare fault change anything for this read-only mapped page? */
static bool needs_unshare(struct pm_page *page, bool special)
{
	if (special)
		return true; /* a zero page, 4 KiB or huge: a R/O long-term pin gets its own copy */
	if (folio_test_anon(page_folio(page)))
		return !page_anon_exclusive(page);
	return true; /* page cache page in a private mapping */
}

/**
 * pm__handle_mm_fault() - resolve a fault at @addr (page aligned) in @vma.
 * @fault_flags: FAULT_FLAG_WRITE (break COW, map writable when VM_WRITE allows), or
 *	FAULT_FLAG_UNSHARE (make a read-only mapped page exclusive, keep it read-only).
 *
 * The caller checked permissions (FOLL_FORCE may write through a read-only private mapping:
 * the result is then an exclusive page mapped read-only).
 * Context: mmap_lock held, or @vma's read lock (FAULT_FLAG_VMA_LOCK); assert_fault_locked,
 * as the handlers below.
 * Return: 0, VM_FAULT_SIGBUS or VM_FAULT_OOM (VM_FAULT_AGAIN and VM_FAULT_FALLBACK end here).
 */
vm_fault_t pm__handle_mm_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			       unsigned fault_flags)
{
	pm_entry_t *pmdp;

	assert_fault_locked(vma);
	count_event(mm->m, FAULTS, 1);
	if (is_vm_hugetlb_page(vma))
		return pm__hugetlb_fault(mm, vma, addr, fault_flags); /* fault/hugetlb_fault.c */
	pmdp = pm__pmd_alloc(mm, addr);
	if (!pmdp)
		return VM_FAULT_OOM;
	for (;;) {
		pmd_t pmd = pmdp_get(pmdp);
		pm_entry_t *ptep;
		vm_fault_t ret;
		pte_t pte;

		if (pmd_none(pmd)) {
			if (pm__thp_vma_suitable(vma, addr)) {
				ret = pm__do_huge_pmd_anonymous_page(mm, vma, pmdp, fault_flags);
				if (ret & VM_FAULT_AGAIN)
					continue;
				if (!(ret & VM_FAULT_FALLBACK))
					return ret;
				/* No 2 MiB block: go on at PTE level. */
			}
			if (pm__pte_alloc(mm, pmdp))
				return VM_FAULT_OOM;
			continue;
		}
		if (pmd_leaf(pmd)) {
			if (((fault_flags & FAULT_FLAG_WRITE) && !pmd_write(pmd)) ||
			    ((fault_flags & FAULT_FLAG_UNSHARE) && !pmd_write(pmd) &&
			     needs_unshare(pfn_to_page(mm->m, pmd_pfn(pmd)), pmd_special(pmd)))) {
				ret = pm__do_huge_pmd_wp_page(mm, vma, pmdp, addr, fault_flags);
				if (ret & VM_FAULT_AGAIN)
					continue;
				return ret;
			}
			return 0;
		}
		ptep = &entry_table(mm->m, pmd.val)[pte_index(addr)];
		pte = ptep_get(ptep);
		if (pte_none(pte)) {
			if (vma_is_anonymous(vma))
				ret = pm__do_anonymous_page(mm, vma, pmdp, addr, fault_flags);
			else
				ret = pm__shmem_fault(mm, vma, pmdp, addr, fault_flags);
		} else if (((fault_flags & FAULT_FLAG_WRITE) && !pte_write(pte)) ||
			   ((fault_flags & FAULT_FLAG_UNSHARE) && !pte_write(pte) &&
			    needs_unshare(pfn_to_page(mm->m, pte_pfn(pte)), pte_special(pte)))) {
			ret = pm__do_wp_page(mm, vma, pmdp, addr, fault_flags);
		} else {
			ret = 0;
		}
		if (ret & VM_FAULT_AGAIN)
			continue;
		return ret;
	}
}

static bool access_error(struct pm_vma *vma, bool write)
{
	return write ? !(vma->flags & VM_WRITE) : !vma_is_accessible(vma);
}

/*
 * pm_fault() - a user-mode fault, as the architecture's handler takes it: first under the
 * VMA's own lock, found without mmap_lock (Linux 6.4); if no VMA lock can be had (no VMA, or
 * one being changed) or the fault asks for a retry, under mmap_lock for read.
 * PM_KNOB_NO_PER_VMA_LOCK goes to mmap_lock at once, as before 6.4.
 */
int pm_fault(struct pm_mm *mm, unsigned long addr, unsigned flags)
{
	bool write = flags & PM_FAULT_WRITE;
	unsigned fault_flags = write ? FAULT_FLAG_WRITE : 0;
	struct pm_vma *vma;
	vm_fault_t fault;

	if (pm__mm_bad(mm) || (flags & ~PM_FAULT_WRITE))
		return -EINVAL;
	if (addr < PM_USER_MIN || addr >= PM_TASK_SIZE)
		return -EFAULT;
	if (knob(mm->m, PM_KNOB_NO_PER_VMA_LOCK))
		goto lock_mmap;
	vma = pm__lock_vma_under_rcu(mm, addr);
	if (!vma)
		goto lock_mmap;
	if (unlikely(access_error(vma, write)))
		fault = VM_FAULT_SIGSEGV;
	else
		fault = pm__handle_mm_fault(mm, vma, addr & PAGE_MASK,
					    fault_flags | FAULT_FLAG_VMA_LOCK);
	pm__vma_end_read(vma);
	if (!(fault & VM_FAULT_RETRY)) {
		count_event(mm->m, VMA_LOCK_SUCCESS, 1);
		return vm_fault_to_errno(fault);
	}
	count_event(mm->m, VMA_LOCK_RETRY, 1);

lock_mmap:
	mmap_read_lock_range(mm, addr, addr + 1);
	vma = pm__find_vma(mm, addr);
	if (!vma || vma->start > addr || access_error(vma, write))
		fault = VM_FAULT_SIGSEGV;
	else
		fault = pm__handle_mm_fault(mm, vma, addr & PAGE_MASK, fault_flags);
	mmap_read_unlock(mm);
	return vm_fault_to_errno(fault);
}
