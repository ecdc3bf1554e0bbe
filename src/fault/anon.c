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
 * 2 MiB-aligned window around the fault lies inside the VMA. A write fault there allocates a
 * THP; a read fault maps the machine's huge zero folio (mem/folio.c) with a read-only special
 * PMD leaf, as Linux with transparent_hugepage/use_zero_page=1 (do_huge_pmd_anonymous_page):
 * no reference, no mapcount, not a thp_fault, not in Rss. PM_KNOB_NO_HUGE_ZERO_PAGE
 * (use_zero_page=0) makes the read fault allocate a THP as a write does. When no 2 MiB block
 * can be had - for the THP, or for the huge zero folio before it exists - the fault falls back
 * to 4 KiB pages (thp_fallbacks).
 *
 * A huge zero leaf carries a deposited PTE table like any THP leaf, so that the write fault
 * that later splits it (cow.c, pgtable/huge_memory.c: every PTE then maps the 4 KiB zero
 * page, and do_wp_page gives the written one a page of its own) never needs memory.
 *
 * Installing a leaf races with other faults on the same PMD (under another VMA read lock or
 * mmap_lock held for read), with GUP-fast (no lock at all) and with MADV_DONTNEED (mmap_lock
 * for read). Everything is decided under the PMD lock on a re-read of the entry:
 *
 *	read fault (huge zero)			racing fault / GUP-fast / DONTNEED
 *	----------------------			----------------------------------
 *	PMD empty (unlocked read)		write fault: PMD empty, allocates a THP
 *	huge zero folio (this mm's use of it,
 *	  mem/folio.c), deposit table
 *	PMD lock				  PMD lock (waits)
 *	still empty? deposit, set_pmd		  not empty: frees its THP, VM_FAULT_AGAIN,
 *	  (release)				  finds the leaf: COW of the huge zero page
 *	  else: free the table, AGAIN		GUP-fast: acquire load of the PMD; empty or
 *	PMD unlock				  special leaf: stops, the slow path decides
 *						  under the PMD lock (gup/gup.c)
 *						DONTNEED: PMD lock, clears the leaf, frees
 *						  the deposit; drops no reference
 *
 * To summarize: 1) only an empty PMD becomes a leaf, under its lock, so two faults never both
 * install one and a THP is never installed over the huge zero leaf; 2) the leaf is published
 * with a release store after its deposit and after the folio's zeroing (published by a release
 * store under huge_zero_lock), so whoever reads it sees zeros; 3) no walker ever takes a
 * reference through the leaf without the PMD lock (GUP-fast leaves special leaves to the slow
 * path, as Linux 6.18 does), and the folio lives while this mm does (its use of it ends at
 * teardown, after every leaf is gone), so a zap or split racing a reader frees nothing that
 * reader can hold.
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

	vma_anon_prepare(vma); /* not for the zero page: fork leaves that to a fault */
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
 * A read fault on an empty PMD: map the huge zero folio (set_huge_zero_folio). Its leaf takes no
 * reference and no mapcount, and counts as no thp_fault. Return: as below.
 * Context: mmap_lock or the VMA's lock held (fault path).
 */
static vm_fault_t do_huge_zero_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp)
{
	struct pm_machine *m = mm->m;
	struct pm_folio *zero = pm__huge_zero_folio_get(m, &mm->xhuge_zero);
	struct pm_spinlock *pml;
	pm_entry_t *deposit;

	assert_fault_locked(vma);
	deposit = zero ? pm__pte_alloc_one(m) : NULL;
	if (!deposit) {
		count_event(m, THP_FALLBACKS, 1);
		return VM_FAULT_FALLBACK;
	}
	pml = pm__pmd_lockptr(mm, pmdp);
	pm_spin_lock(pml);
	if (!pmd_none(pmdp_get(pmdp))) {
		pm_spin_unlock(pml);
		pm__pte_free_now(m, deposit);
		return VM_FAULT_AGAIN;
	}
	pm__pgtable_deposit(mm, pmdp, deposit);
	set_pmd(pmdp, mk_huge_zero_pmd(page_to_pfn(m, &zero->page), vma_is_accessible(vma)));
	pm_spin_unlock(pml);
	return 0;
}

/*
 * A fault on an empty PMD of a THP-suitable VMA: a read maps the huge zero folio (unless
 * PM_KNOB_NO_HUGE_ZERO_PAGE), a write - or a read under the knob - a new THP.
 * Context: mmap_lock or the VMA's lock held (fault path).
 * Return: 0 (mapped), VM_FAULT_AGAIN (the PMD changed meanwhile: look again),
 * VM_FAULT_FALLBACK (no 2 MiB block: use 4 KiB pages).
 */
vm_fault_t pm__do_huge_pmd_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
					  unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *pml;
	struct pm_folio *folio;
	pm_entry_t *deposit;
	pmd_t entry;

	assert_fault_locked(vma);
	vma_anon_prepare(vma); /* for the huge zero page too (do_huge_pmd_anonymous_page) */
	if (!(fault_flags & FAULT_FLAG_WRITE) && !knob(m, PM_KNOB_NO_HUGE_ZERO_PAGE))
		return do_huge_zero_page(mm, vma, pmdp);
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
