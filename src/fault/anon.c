// SPDX-License-Identifier: MIT
/*
 * anon.c - anonymous faults: the zero page, fresh 4 KiB pages, and 2 MiB THPs at PMD level.
 *
 * A read fault maps the machine's zero page (a special, never refcounted, read-only PTE); a
 * write fault allocates and zeroes a page with no lock held, then installs it under the PTL if
 * the PTE is still empty. New anonymous pages are AnonExclusive: this address space is their
 * only user.
 *
 * THP policy is Linux's "madvise" mode: only VMAs marked PM_MADV_HUGEPAGE, and only where the
 * 2 MiB-aligned window around the fault lies inside the VMA. pinmm has no huge zero page, so a
 * read fault in such a VMA also allocates the THP (Linux with transparent_hugepage/
 * use_zero_page = 0). When the order-9 allocation fails the fault falls back to 4 KiB pages.
 */
#include "internal.h"

bool pm__thp_vma_suitable(struct pm_vma *vma, unsigned long addr)
{
	unsigned long haddr = addr & PMD_MASK;

	return vma_is_anonymous(vma) && (vma->flags & VM_HUGEPAGE) &&
	       !(vma->flags & VM_NOHUGEPAGE) && haddr >= vma->start && haddr + PMD_SIZE <= vma->end;
}

/* A fault on an empty PTE of an anonymous VMA. Context: mmap_lock or the VMA's lock held (fault path). */
vm_fault_t pm__do_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				 unsigned long addr, unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *ptl;
	struct pm_folio *folio;
	pm_entry_t *ptep;
	pte_t entry;

	assert_fault_locked(vma);
	if (!(fault_flags & FAULT_FLAG_WRITE)) {
		entry = mk_pte(page_to_pfn(m, m->zero_page), vma_is_accessible(vma), false, false);
		entry.val |= _PAGE_SPECIAL;
		ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
		if (!ptep)
			return VM_FAULT_AGAIN;
		if (pte_none(ptep_get(ptep)))
			set_pte(ptep, entry);
		pm_spin_unlock(ptl);
		return 0;
	}

	folio = pm__folio_alloc(m, 0, PM_ALLOC_ZERO);
	if (!folio)
		return VM_FAULT_OOM;
	folio_set_flags_new(folio, PGF(PG_anon) | PGF(PG_anon_exclusive));
	entry = mk_pte(page_to_pfn(m, &folio->page), vma_is_accessible(vma), vma->flags & VM_WRITE,
		       true);

	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep) {
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	if (!pte_none(ptep_get(ptep))) {
		/* Someone mapped it meanwhile (maybe the zero page): look again. */
		pm_spin_unlock(ptl);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&folio->page.xmapcount, 1);
	set_pte(ptep, entry); /* the folio's reference now belongs to this mapping */
	pm_spin_unlock(ptl);
	return 0;
}

/*
 * A fault on an empty PMD of a THP-suitable VMA. Context: mmap_lock or the VMA's lock held (fault path).
 * Return: 0 (mapped), VM_FAULT_AGAIN (the PMD changed meanwhile: look again),
 * VM_FAULT_FALLBACK (no 2 MiB block: use 4 KiB pages).
 */
vm_fault_t pm__do_huge_pmd_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *pml;
	struct pm_folio *folio;
	pm_entry_t *deposit;
	pmd_t entry;

	assert_fault_locked(vma);
	/*
	 * The folio first, then the table deposited for a later split (pgtable/huge_memory.c),
	 * as Linux does: when the block must first be put together from frames the per-CPU
	 * caches hold, that drain also gives back the table frame a zapped THP left on a cache's
	 * page-table list, and the deposit then takes that frame instead of a piece of a block.
	 */
	folio = pm__folio_alloc(m, HPAGE_PMD_ORDER, PM_ALLOC_ZERO);
	deposit = folio ? pm__pte_alloc_one(m) : NULL;
	if (!deposit) {
		if (folio)
			folio_put(folio);
		count_event(m, THP_FALLBACKS, 1);
		return VM_FAULT_FALLBACK;
	}
	/* AnonExclusive on the head covers the PMD mapping. */
	folio_set_flags_new(folio, PGF(PG_anon) | PGF(PG_anon_exclusive));
	entry = mk_huge_pmd(page_to_pfn(m, &folio->page), vma_is_accessible(vma),
			    vma->flags & VM_WRITE);

	pml = pm__pmd_lockptr(mm, pmdp);
	pm_spin_lock(pml);
	if (!pmd_none(pmdp_get(pmdp))) {
		pm_spin_unlock(pml);
		folio_put(folio);
		pm__pte_free_now(m, deposit);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&folio->page.xentire_mapcount, 1);
	pm__pgtable_deposit(mm, pmdp, deposit);
	set_pmd(pmdp, entry);
	pm_spin_unlock(pml);
	count_event(m, THP_FAULTS, 1);
	return 0;
}
