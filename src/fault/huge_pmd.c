// SPDX-License-Identifier: MIT
/*
 * huge_pmd.c - what the two kinds of 2 MiB PMD leaf share: a THP's (cow.c, fork.c) and a
 * hugetlb page's (hugetlb_fault.c).
 *
 * A write or unshare fault on a read-only leaf starts the same way for both, and reuses the
 * leaf in place the same way (do_huge_pmd_wp_page, hugetlb_wp); fork shares a leaf that need
 * not be copied the same way (copy_huge_pmd, copy_hugetlb_page_range). What differs stays with
 * the kind: when a leaf counts as this mapping's only one (a THP: refcount 1; hugetlb:
 * mapcount 1), and what happens when it is not (a THP is split, a hugetlb page copied whole).
 *
 * The helpers are here, below both users, so that the files of fault/ call each other in one
 * direction only: dispatch.c -> the handlers -> huge_pmd.c, and fork.c -> hugetlb_fault.c for
 * the page tables of a hugetlb VMA; fault.h, the layer's header, is below them all. The leaves'
 * encoding is pgtable/pgtable.h's (mk_huge_pmd).
 */
#include "fault/fault.h"

/**
 * pm__wp_huge_pmd_lock() - the start of a write or unshare fault on a PMD leaf, THP or hugetlb
 * (do_huge_pmd_wp_page, hugetlb_wp): take the PMD lock and read the entry again.
 * Return: the folio of the read-only leaf, now *@pmd, with the PMD lock held; or NULL with the
 * lock dropped and *@ret the fault's answer: VM_FAULT_AGAIN (no longer a leaf: look again) or
 * 0 (writable already: nothing to do).
 * Context: mmap_lock or the VMA's lock held (fault path).
 */
struct pm_folio *pm__wp_huge_pmd_lock(struct pm_mm *mm, pm_entry_t *pmdp, pmd_t *pmd,
				      vm_fault_t *ret)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);

	fault_assert_held(mm);
	pm__ptl_lock(pml);
	*pmd = pmdp_get(pmdp);
	if (!pmd_leaf(*pmd) || pmd_write(*pmd)) {
		pm_spin_unlock(pml);
		*ret = pmd_leaf(*pmd) ? 0 : VM_FAULT_AGAIN;
		return NULL;
	}
	return page_folio(pfn_to_page(mm->m, pmd_pfn(*pmd)));
}

/**
 * pm__wp_huge_pmd_can_reuse_locked() - may the leaf's @folio be reused in place? If it is
 * anonymous and exclusive, or @sole (the caller's test that this mapping is its only user:
 * refcount 1 for a THP, mapcount 1 for hugetlb); then it becomes exclusive.
 * Context: the PMD lock @pml (pm__wp_huge_pmd_lock()).
 */
bool pm__wp_huge_pmd_can_reuse_locked(struct pm_spinlock *pml, struct pm_folio *folio, bool sole)
{
	pm_assert_locked(pml);
	if (!folio_test_anon(folio))
		return false;
	if (page_anon_exclusive(&folio->page))
		return true;
	if (!sole)
		return false;
	page_set(&folio->page, PG_anon_exclusive);
	return true;
}

/**
 * pm__wp_huge_pmd_reuse_locked() - reuse the read-only leaf @pmd at *@pmdp in place: writable
 * for a write on a writable VMA (an unshare leaves it read-only); drop the PMD lock.
 * Context: the PMD lock (pm__wp_huge_pmd_lock()). Return: 0.
 */
vm_fault_t pm__wp_huge_pmd_reuse_locked(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
					pmd_t pmd, bool unshare)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);

	pm_assert_locked(pml);
	if (!unshare && (vma->flags & VM_WRITE))
		set_pmd(pmdp, pmd_mkwrite(pmd));
	pm_spin_unlock(pml);
	count_event(mm->m, COW_REUSES, 1);
	return 0;
}

/**
 * pm__fork_share_huge_pmd_locked() - map the leaf @pmd of the parent's *@src_pmdp (its folio
 * @folio) at the child's *@dst_pmdp too, write-protected in both, once the caller has found
 * that the folio need not be copied (may not be pinned): an anonymous folio stops being
 * exclusive and the parent's leaf loses write; the folio gains a reference and a PMD mapping
 * (the huge zero folio's special leaf: neither).
 * @deposit, if not NULL, becomes the child leaf's deposited table (a THP; hugetlb leaves have
 * none). Shared by THP (copy_huge_pmd) and hugetlb (fault/hugetlb_fault.c).
 * Context: fork, the parent's PMD lock held; the child's nests inside it (only fork does this).
 */
void pm__fork_share_huge_pmd_locked(struct pm_mm *dst, struct pm_mm *src, pm_entry_t *dst_pmdp,
				    pm_entry_t *src_pmdp, pmd_t pmd, struct pm_folio *folio,
				    pm_entry_t *deposit)
{
	struct pm_spinlock *dst_pml = pm__pmd_lockptr(dst, dst_pmdp);

	pm_assert_locked(pm__pmd_lockptr(src, src_pmdp));
	mmap_assert_write_locked(src);
	/* One leaf per parked deposit (pgtable/huge_memory.c, "Deposit"): the parent's goes to
	 * its list before the child's leaf maps the folio too. */
	if (deposit)
		pm__pgtable_deposit_unfold(src, src_pmdp, folio);
	if (folio_test_anon(folio)) {
		share_anon_page(&folio->page);
		if (pmd_write(pmd)) {
			pmd = pmd_wrprotect(pmd);
			set_pmd(src_pmdp, pmd);
		}
	}
	/* The huge zero folio's leaf (special, read-only) is copied as is: no reference, no
	 * mapcount, the folio shared by every mm of the machine (copy_huge_pmd). */
	if (!pmd_special(pmd)) {
		folio_get_refs(folio, 1);
		atomic_add_relaxed(&folio->page.xentire_mapcount, 1);
	}
	pm__ptl_lock(dst_pml);
	if (deposit)
		pm__pgtable_deposit(dst, dst_pmdp, deposit);
	set_pmd(dst_pmdp, pmd_wrprotect(pmd));
	pm_spin_unlock(dst_pml);
}
