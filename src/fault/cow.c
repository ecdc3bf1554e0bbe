// SPDX-License-Identifier: MIT
/*
 * cow.c - write-protect faults (copy-on-write) and unshare faults, at PTE and PMD level.
 *
 * Reuse or copy. A write (or unshare) fault on a read-only mapped anonymous page reuses it in
 * place when it is AnonExclusive, or when it is a small folio whose only reference is this
 * mapping (refcount == 1: no other mapping, no get reference, no pin), or a large folio whose
 * references are all mappings of this mm (can_reuse_large_anon_locked) - then it becomes
 * exclusive. Everything else is copied into a new exclusive anonymous page: pages shared with
 * a fork child, page-cache pages of private mappings, the zero page. Linux has
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
 * is split into a PTE table (pgtable/huge_memory.c: from the deposited table, so it needs no
 * memory and never splits the folio) and the fault is retried at 4 KiB, as
 * do_huge_pmd_wp_page does. The leaf's lock-and-recheck and its reuse are hugetlb's too
 * (huge_pmd.c). A write or unshare fault on a leaf of the huge zero folio replaces it with a
 * new zeroed THP, mapped as a write fault maps one, writable where the VMA is (Linux 6.13+'s
 * do_huge_zero_wp_pmd; an unshare too, as map_anon_folio_pmd does); the table deposited for
 * the zero leaf stays for the THP. Only when no 2 MiB block can be had is the leaf split into
 * 512 PTEs of the 4 KiB zero page (__split_huge_zero_page_pmd), and the retry copies the one
 * page written - or unshared for a read-only long-term pin - into a fresh zeroed page.
 * The new leaf is stored under the PMD lock, after the folio is complete; a lockless reader
 * (GUP-fast) that took the zero leaf re-reads the PMD and sees it changed, as after a split.
 */
#include "fault/fault.h"

/*
 * May a write fault reuse @page of the large anonymous @folio, PTE-mapped read-only at *@ptep
 * (@addr), although the page is not AnonExclusive? Linux 6.18 reuses a large folio that this
 * mm alone maps and nothing else references (__wp_can_reuse_large_anon_folio, which tells by
 * the folio's per-mm mapcounts, CONFIG_MM_ID): after a fork whose other side has gone, the
 * parent keeps writing into its THP's pages instead of copying each. pinmm tells the same by
 * counting: more than one mapping (a folio mapped by one page is copied, so it can be freed),
 * every reference a mapping (refcount == mapcount: no pin, no GUP reference), and every
 * mapping an entry of this PTE table, the one that maps the folio where it was faulted.
 * A folio that mremap spread over two tables is copied, where Linux might reuse it.
 * The counts are read under this table's PTL: this mm's entries cannot change, no other mm
 * can newly map a folio that only this mm maps (fork of this mm waits for our lock), and a
 * racing GUP-fast reference of this mm is either counted or fails its PTE recheck once the
 * entry turns writable - the small folio's refcount argument.
 * Context: the PTE table's lock @ptl held.
 */
static bool can_reuse_large_anon_locked(struct pm_machine *m, struct pm_spinlock *ptl,
					struct pm_folio *folio, pm_entry_t *ptep, unsigned long addr)
{
	unsigned long nr = folio_nr_pages(folio), pfn0 = page_to_pfn(m, &folio->page);
	pm_entry_t *table = ptep - pte_index(addr);
	long total = atomic_load_relaxed(&folio->page.xentire_mapcount), here = 0;

	pm_assert_locked(ptl);
	for (unsigned long i = 0; i < nr; i++)
		total += atomic_load_relaxed(&pfn_to_page(m, pfn0 + i)->xmapcount);
	if (total <= 1 || folio_ref_count(folio) != total)
		return false;
	for (unsigned i = 0; i < 512; i++) {
		pte_t pte = ptep_get(table + i);

		if (pte_present(pte) && !pte_special(pte) && pte_pfn(pte) - pfn0 < nr)
			here++;
	}
	return here == total;
}

/* A write or unshare fault on a read-only PTE. Context: mmap_lock or the VMA's lock held (fault path). */
vm_fault_t pm__do_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			  unsigned long addr, unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	bool unshare = fault_flags & FAULT_FLAG_UNSHARE;
	struct pm_folio *src = NULL, *new;
	struct pm_page *page = NULL;
	struct pm_spinlock *ptl;
	pm_entry_t *ptep;
	pte_t pte;

	assert_fault_locked(vma);
	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep)
		return VM_FAULT_AGAIN;
	pte = ptep_get(ptep);
	if (!pte_present(pte)) {
		pm_spin_unlock(ptl);
		return VM_FAULT_AGAIN;
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
			pm__folio_cool(src); /* an exact count (mem/folio_hot.c) */
			if (!folio_test_large(src) ? folio_ref_count(src) == 1 :
			    can_reuse_large_anon_locked(m, ptl, src, ptep, addr)) {
				page_set(page, PG_anon_exclusive);
				goto reuse;
			}
		}
		folio_get_refs(src, 1); /* keeps the source alive while we copy unlocked */
	}
	pm_spin_unlock(ptl);

	vma_anon_prepare(vma); /* wp_page_copy */
	new = pm__folio_alloc(m, 0, src ? 0 : PM_ALLOC_ZERO);
	if (!new) {
		if (src)
			folio_put(src);
		return VM_FAULT_OOM;
	}
	if (src)
		memcpy(page_address(m, &new->page), page_address(m, page), PAGE_SIZE);
	folio_set_flags_new(new, PGF(PG_anon) | PGF(PG_anon_exclusive));

	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep || !pte_same(ptep_get(ptep), pte)) {
		if (ptep)
			pm_spin_unlock(ptl);
		folio_put(new);
		if (src)
			folio_put(src);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&new->page.xmapcount, 1);
	atomic_xchg_mb(ptep, mk_pte(page_to_pfn(m, &new->page), vma_is_accessible(vma),
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

/*
 * A write or unshare fault on the huge zero folio's leaf @zero_pmd at *@pmdp: a new zeroed THP
 * in its place (do_huge_zero_wp_pmd), or, without a 2 MiB block, a split and a 4 KiB retry.
 * Context: mmap_lock or the VMA's lock held (fault path), the PMD lock not held.
 * Return: 0, or VM_FAULT_AGAIN (the leaf changed meanwhile, or was split: look again).
 */
static vm_fault_t do_huge_zero_wp_pmd(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				      pmd_t zero_pmd)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	struct pm_folio *folio = pm__folio_alloc(m, HPAGE_PMD_ORDER, PM_ALLOC_ZERO);
	pmd_t entry;

	assert_fault_locked(vma);
	if (!folio) {
		count_event(m, THP_FALLBACKS, 1); /* vma_alloc_anon_folio_pmd */
		pm__split_huge_pmd(mm, pmdp);
		return VM_FAULT_AGAIN;
	}
	/* AnonExclusive on the head covers the PMD mapping. */
	folio_set_flags_new(folio, PGF(PG_anon) | PGF(PG_anon_exclusive));
	entry = mk_huge_pmd(page_to_pfn(m, &folio->page), vma_is_accessible(vma),
			    vma->flags & VM_WRITE);
	pm__ptl_lock(pml);
	if (!pmd_same(pmdp_get(pmdp), zero_pmd)) {
		pm_spin_unlock(pml);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&folio->page.xentire_mapcount, 1);
	set_pmd(pmdp, entry); /* the zero leaf held no reference, no mapcount */
	pm_spin_unlock(pml);
	count_event(m, THP_FAULTS, 1);
	return 0;
}

/* The same for a read-only PMD leaf. Context: mmap_lock or the VMA's lock held (fault path). */
vm_fault_t pm__do_huge_pmd_wp_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				   unsigned long addr, unsigned fault_flags)
{
	struct pm_folio *folio;
	vm_fault_t ret;
	pmd_t pmd;

	assert_fault_locked(vma);
	folio = pm__wp_huge_pmd_lock(mm, pmdp, &pmd, &ret);
	if (!folio)
		return ret;
	if (pmd_special(pmd)) {
		pm_spin_unlock(pm__pmd_lockptr(mm, pmdp));
		return do_huge_zero_wp_pmd(mm, vma, pmdp, pmd);
	}
	pm__folio_cool(folio); /* an exact count (mem/folio_hot.c) */
	if (pm__wp_huge_pmd_can_reuse_locked(pm__pmd_lockptr(mm, pmdp), folio,
					     folio_ref_count(folio) == 1))
		return pm__wp_huge_pmd_reuse_locked(mm, vma, pmdp, pmd,
						    fault_flags & FAULT_FLAG_UNSHARE);
	pm_spin_unlock(pm__pmd_lockptr(mm, pmdp));
	pm__split_huge_pmd(mm, pmdp);
	return VM_FAULT_AGAIN;
}
