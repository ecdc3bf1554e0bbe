// SPDX-License-Identifier: MIT
/*
 * fault.c - the fault entry points: pm_fault(), and the dispatcher every fault and every
 * slow GUP goes through, pm__handle_mm_fault().
 *
 * The pattern everywhere below: read the entry without a lock; allocate, zero or copy with no
 * lock held; take the narrowest lock (the PTE table's PTL, or the PMD lock for a 2 MiB leaf);
 * re-check that the entry is what we based the decision on; commit, or back out and let the
 * dispatcher look again (-EAGAIN).
 *
 * Context: mmap_lock held for read (or write), so VMAs and page tables are stable; entries are
 * not - GUP-fast, pm_access, other faults, MADV_DONTNEED and truncation change them under
 * their locks concurrently.
 */
#include "internal.h"

pte_t pm__mk_pte(struct pm_vma *vma, unsigned long pfn, bool writable, bool dirty)
{
	uint64_t bits = _PAGE_PRESENT | _PAGE_ACCESSED;

	if (vma->flags & (VM_READ | VM_WRITE))
		bits |= _PAGE_USER;
	if (writable)
		bits |= _PAGE_RW;
	if (dirty)
		bits |= _PAGE_DIRTY;
	return pfn_pte(pfn, bits);
}

/* Would an unshare fault change anything for this read-only mapped page? */
static bool needs_unshare(struct pm_page *page, bool special)
{
	if (special)
		return true; /* the zero page: a R/O long-term pin gets its own copy */
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
 * Return: 0, -EFAULT (SIGBUS), -ENOMEM.
 */
int pm__handle_mm_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			unsigned fault_flags)
{
	pm_entry_t *pmdp;

	count_event(mm->m, FAULTS, 1);
	pmdp = pm__pmd_alloc(mm, addr);
	if (!pmdp)
		return -ENOMEM;
	for (;;) {
		pmd_t pmd = pmdp_get(pmdp);
		pm_entry_t *ptep;
		pte_t pte;
		int ret;

		if (pmd_none(pmd)) {
			if (pm__thp_vma_suitable(vma, addr)) {
				ret = pm__do_huge_pmd_anonymous_page(mm, vma, pmdp, addr);
				if (ret == -EAGAIN)
					continue;
				if (ret <= 0)
					return ret;
				/* VM_FAULT_FALLBACK: go on at PTE level. */
			}
			if (pm__pte_alloc(mm, pmdp))
				return -ENOMEM;
			continue;
		}
		if (pmd_leaf(pmd)) {
			if (((fault_flags & FAULT_FLAG_WRITE) && !pmd_write(pmd)) ||
			    ((fault_flags & FAULT_FLAG_UNSHARE) && !pmd_write(pmd) &&
			     needs_unshare(pfn_to_page(mm->m, pmd_pfn(pmd)), false))) {
				ret = pm__do_huge_pmd_wp_page(mm, vma, pmdp, addr, fault_flags);
				if (ret == -EAGAIN)
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
		if (ret == -EAGAIN)
			continue;
		return ret;
	}
}

int pm_fault(struct pm_mm *mm, unsigned long addr, unsigned flags)
{
	bool write = flags & PM_FAULT_WRITE;
	struct pm_vma *vma;
	int ret;

	if (unlikely(!mm) || (flags & ~PM_FAULT_WRITE))
		return -EINVAL;
	if (addr < PM_USER_MIN || addr >= PM_TASK_SIZE)
		return -EFAULT;
	mmap_read_lock(mm);
	vma = pm__find_vma(mm, addr);
	if (!vma || vma->start > addr)
		ret = -EFAULT;
	else if (write ? !(vma->flags & VM_WRITE) : !(vma->flags & (VM_READ | VM_WRITE)))
		ret = -EFAULT;
	else
		ret = pm__handle_mm_fault(mm, vma, addr & PAGE_MASK, write ? FAULT_FLAG_WRITE : 0);
	mmap_read_unlock(mm);
	return ret;
}
