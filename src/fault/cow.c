// SPDX-License-Identifier: MIT
/*
 * cow.c - write-protect faults (copy-on-write), unshare faults, and splitting a PMD mapping.
 *
 * Reuse or copy. A write (or unshare) fault on a read-only mapped anonymous page reuses it in
 * place when it is AnonExclusive, or when it is a small folio whose only reference is this
 * mapping (refcount == 1: no other mapping, no get reference, no pin) - then it becomes
 * exclusive. Everything else is copied into a new exclusive anonymous page: pages shared with
 * a fork child, page-cache pages of private mappings, the zero page, large folios. Linux has
 * used exactly this rule since 2022; the refcount test is what stops a child's read-only GUP
 * reference from seeing the parent's later writes (CVE-2020-29374): that reference raises the
 * refcount, so the parent copies instead of reusing.
 *
 * An unshare fault (FAULT_FLAG_UNSHARE) is what a read-only FOLL_PIN asks for when the page is
 * not exclusive: the same decision, but the result stays read-only.
 *
 * Ordering of a copy: allocate and copy with no lock held (holding a reference on the source),
 * re-take the PTL, check the PTE is unchanged, exchange it for the new one, and only then drop
 * the old page's mapping reference - so whoever maps the old page and tests "refcount == 1"
 * sees this mapping gone only once the new one is in place.
 *
 * PMD leaves: an exclusive (or sole-reference) THP is reused whole; otherwise the PMD mapping
 * is split into a PTE table and the fault is retried at 4 KiB, as do_huge_pmd_wp_page does.
 * A split never splits the folio: the 512 PTEs map the same order-9 folio, from the PTE table
 * deposited with the leaf when it was mapped, so a split never needs memory.
 */
#include "internal.h"

int pm__do_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp, unsigned long addr,
		   unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	bool unshare = fault_flags & FAULT_FLAG_UNSHARE;
	struct pm_folio *src = NULL, *new;
	struct pm_page *page = NULL;
	struct pm_spinlock *ptl;
	pm_entry_t *ptep;
	pte_t pte;

	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep)
		return -EAGAIN;
	pte = ptep_get(ptep);
	if (!pte_present(pte)) {
		pm_spin_unlock(ptl);
		return -EAGAIN;
	}
	if (pte_write(pte)) {
		pm_spin_unlock(ptl);
		return 0;
	}
	if (!pte_special(pte)) {
		page = pfn_to_page(m, pte_pfn(pte));
		src = page_folio(page);
		if (folio_test_anon(src)) {
			if (page_anon_exclusive(page))
				goto reuse;
			if (!folio_test_large(src) && folio_ref_count(src) == 1) {
				page_set(page, PG_anon_exclusive);
				goto reuse;
			}
		}
		folio_get_refs(src, 1); /* keeps the source alive while we copy unlocked */
	}
	pm_spin_unlock(ptl);

	new = pm__folio_alloc(m, 0, src ? 0 : PM_ALLOC_ZERO);
	if (!new) {
		if (src)
			folio_put(src);
		return -ENOMEM;
	}
	if (src)
		memcpy(page_address(m, &new->page), page_address(m, page), PAGE_SIZE);
	page_set(&new->page, PG_anon);
	page_set(&new->page, PG_anon_exclusive);

	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep || !pte_same(ptep_get(ptep), pte)) {
		if (ptep)
			pm_spin_unlock(ptl);
		folio_put(new);
		if (src)
			folio_put(src);
		return -EAGAIN;
	}
	atomic_store_relaxed(&new->page.xmapcount, 1);
	atomic_xchg_mb(ptep, pm__mk_pte(vma, page_to_pfn(m, &new->page),
					!unshare && (vma->flags & VM_WRITE), !unshare).val);
	if (src) {
		atomic_sub_relaxed(&page->xmapcount, 1);
		folio_put(src); /* the old mapping's reference */
	}
	pm_spin_unlock(ptl);
	if (src)
		folio_put(src); /* ours */
	count_event(m, COW_COPIES, 1);
	return 0;

reuse:
	if (!unshare && (vma->flags & VM_WRITE))
		set_pte(ptep, pte_mkwrite(pte));
	pm_spin_unlock(ptl);
	count_event(m, COW_REUSES, 1);
	return 0;
}

int pm__do_huge_pmd_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			    unsigned long addr, unsigned fault_flags)
{
	bool unshare = fault_flags & FAULT_FLAG_UNSHARE;
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	struct pm_folio *folio;
	pmd_t pmd;

	pm_spin_lock(pml);
	pmd = pmdp_get(pmdp);
	if (!pmd_leaf(pmd)) {
		pm_spin_unlock(pml);
		return -EAGAIN;
	}
	if (pmd_write(pmd)) {
		pm_spin_unlock(pml);
		return 0;
	}
	folio = page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)));
	if (folio_test_anon(folio)) {
		if (page_anon_exclusive(&folio->page))
			goto reuse;
		if (folio_ref_count(folio) == 1) {
			page_set(&folio->page, PG_anon_exclusive);
			goto reuse;
		}
	}
	pm_spin_unlock(pml);
	pm__split_huge_pmd(mm, pmdp);
	return -EAGAIN;

reuse:
	if (!unshare && (vma->flags & VM_WRITE))
		set_pmd(pmdp, pmd_mkwrite(pmd));
	pm_spin_unlock(pml);
	count_event(mm->m, COW_REUSES, 1);
	return 0;
}

/**
 * pm__split_huge_pmd_locked() - replace the 2 MiB leaf at *@pmdp by its deposited PTE table,
 * mapping the same folio page by page, with the same protection.
 *
 * Each subpage inherits the head's AnonExclusive state (a PMD mapping keeps it on the head).
 * The folio gains one reference and one mapcount per PTE and loses its PMD mapping. The table
 * is filled while private and published with a release store; a GUP-fast walker that read the
 * old leaf re-checks the PMD after taking its reference and backs off.
 * Context: the PMD lock held; *@pmdp is a leaf.
 */
void pm__split_huge_pmd_locked(struct pm_mm *mm, pm_entry_t *pmdp)
{
	struct pm_machine *m = mm->m;
	pmd_t pmd = pmdp_get(pmdp);
	struct pm_page *head = pfn_to_page(m, pmd_pfn(pmd));
	struct pm_folio *folio = page_folio(head);
	uint64_t bits = pmd.val & (_PAGE_PRESENT | _PAGE_RW | _PAGE_USER | _PAGE_ACCESSED |
				   _PAGE_DIRTY | _PAGE_SPECIAL);
	bool anon = folio_test_anon(folio);
	bool excl = anon && page_anon_exclusive(head);
	pm_entry_t *table = pm__pgtable_withdraw(mm, pmdp);

	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		struct pm_page *p = head + i;

		if (anon) {
			if (excl)
				page_set(p, PG_anon_exclusive);
			else
				page_clear(p, PG_anon_exclusive);
		}
		atomic_add_relaxed(&p->xmapcount, 1);
		atomic_store_relaxed(&table[i], pfn_pte(pmd_pfn(pmd) + i, bits).val);
	}
	folio_get_refs(folio, HPAGE_PMD_NR - 1);
	atomic_sub_relaxed(&folio->page.xentire_mapcount, 1);
	set_pmd(pmdp, (pmd_t){ (virt_to_pfn(m, table) << PAGE_SHIFT) | _PAGE_TABLE });
	count_event(m, THP_SPLITS, 1);
}

/**
 * pm__split_huge_pmd() - split the PMD mapping at *@pmdp if it is still a leaf. Uses the
 * leaf's deposited table, so it never fails. Context: mmap_lock held (or i_mmap, see zap.c).
 */
void pm__split_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);

	pm_spin_lock(pml);
	if (pmd_leaf(pmdp_get(pmdp)))
		pm__split_huge_pmd_locked(mm, pmdp);
	pm_spin_unlock(pml);
}
