// SPDX-License-Identifier: MIT
/*
 * huge_memory.c - the page-table side of a PMD-mapped THP: the deposited PTE table every 2 MiB
 * leaf carries, and splitting a PMD mapping into PTEs (Linux's mm/huge_memory.c role).
 *
 * Deposit (Linux's pgtable_trans_huge_deposit). Every 2 MiB leaf keeps a spare PTE table,
 * allocated with the THP and parked on a list in its PMD table's descriptor, so that splitting
 * the PMD mapping never needs memory: an mprotect, munmap or MADV_DONTNEED that cuts a THP, a
 * COW fault on a shared THP, fork of a pinned THP - none can fail for want of a page. The
 * tables on a PMD table's list are interchangeable; there is one per leaf in that table.
 *
 * Deposit in the range design. The list is the PMD table's, guarded by its PMD lock, so two
 * THP faults in different 2 MiB blocks of one PMD table would share that lock word only to
 * park their deposits. There, a THP's own fault installs its leaf by a compare-and-swap from
 * the none entry without the PMD lock (fault/anon.c), and parks the deposit on the folio
 * instead (tail page 1's thp_deposit), before that CAS publishes the folio. Invariant: a
 * folio's thp_deposit is set only while exactly one leaf maps the folio - the one its fault
 * installed, wherever mremap has moved it since - and is that leaf's deposit. Hence:
 *  - a withdrawer (PMD lock held, the leaf read by an acquire load or cleared by an exchange,
 *    both ordered after the publishing CAS, so the parked pointer is visible) takes the
 *    folio's deposit when there is one, else one from the table's list;
 *  - whatever would give the folio a second leaf (fork's share) first moves the parked
 *    deposit to the list (pm__pgtable_deposit_unfold), under the PMD lock;
 *  - a THP leaf of another origin (fork's child, the huge zero leaf's COW, mremap to another
 *    PMD table) deposits on the list, and the folio's pointer is NULL from pm__folio_prep.
 * Linux's design, and the range design under PM_KNOB_PTE_TABLE_LOCK, use the list alone.
 *
 * Split. The leaf is replaced by its deposited table filled with 512 PTEs mapping the same
 * order-9 folio page by page, with the same protection. The folio itself is never split. A
 * leaf of the huge zero folio (special) becomes 512 PTEs of the 4 KiB zero page instead.
 *
 * This file sits with the page tables: it is called by the address-space layer (mprotect,
 * munmap, VMA splits, zap) and by the fault layer (COW of a shared THP, fork), and calls only
 * down (pgtable.c, folios).
 */
#include "pgtable/pgtable.h"

/* Context: the PMD lock of the table holding @pmdp. */
void pm__pgtable_deposit(struct pm_mm *mm, pm_entry_t *pmdp, pm_entry_t *table)
{
	struct pm_page *pmd_page = table_page(mm_pgtables(mm)->m, pmdp), *pte_page = table_page(mm_pgtables(mm)->m, table);

	pm_assert_locked(&pmd_page->ptl);
	pte_page->deposit_next = pmd_page->huge_ptes;
	pmd_page->huge_ptes = pte_page;
}

/*
 * pm__pgtable_deposit_folio() - park @table on @folio, a THP that its fault has not published
 * yet (it is about to map it by a CAS from the none entry); NULL @table takes it back after a
 * lost CAS. The folio is private to that fault: nothing else reads the pointer meanwhile.
 */
void pm__pgtable_deposit_folio(struct pm_machine *m, struct pm_folio *folio, pm_entry_t *table)
{
	folio_page(folio, 1)->thp_deposit = table ? table_page(m, table) : NULL;
}

/*
 * pm__pgtable_deposit_unfold() - move the deposit parked on @folio, if any, to the list of the
 * PMD table holding @pmdp, its leaf's, before the folio gets a second leaf.
 * Context: the PMD lock of that table.
 */
void pm__pgtable_deposit_unfold(struct pm_mm *mm, pm_entry_t *pmdp, struct pm_folio *folio)
{
	struct pm_machine *m = mm_pgtables(mm)->m;
	struct pm_page *pte_page = folio_page(folio, 1)->thp_deposit;

	pm_assert_locked(&table_page(m, pmdp)->ptl);
	if (pte_page) {
		folio_page(folio, 1)->thp_deposit = NULL;
		pm__pgtable_deposit(mm, pmdp, page_address(m, pte_page));
	}
}

/*
 * pm__pgtable_withdraw() - the deposit of the leaf of @folio that *@pmdp holds, or held until
 * the caller cleared it. Context: the PMD lock of the table holding @pmdp.
 */
pm_entry_t *pm__pgtable_withdraw(struct pm_mm *mm, pm_entry_t *pmdp, struct pm_folio *folio)
{
	struct pm_machine *m = mm_pgtables(mm)->m;
	struct pm_page *pmd_page = table_page(m, pmdp), *pte_page = folio_page(folio, 1)->thp_deposit;

	pm_assert_locked(&pmd_page->ptl);
	if (pte_page) {
		folio_page(folio, 1)->thp_deposit = NULL;
		return page_address(m, pte_page);
	}
	pte_page = pmd_page->huge_ptes;
	pm_bug_on(!pte_page); /* a leaf without its deposit */
	pmd_page->huge_ptes = pte_page->deposit_next;
	pte_page->deposit_next = NULL;
	return page_address(m, pte_page);
}

/*
 * The huge zero folio's leaf becomes 512 read-only PTEs of the 4 KiB zero page, special, as
 * Linux's __split_huge_zero_page_pmd: no reference or mapcount moves, since the leaf held none.
 * Context: the PMD lock held; *@pmdp is a special leaf.
 */
static void split_huge_zero_pmd_locked(struct pm_mm *mm, pm_entry_t *pmdp, pmd_t pmd)
{
	struct pm_machine *m = mm_pgtables(mm)->m;
	uint64_t bits = pmd.val & (_PAGE_PRESENT | _PAGE_USER | _PAGE_ACCESSED | _PAGE_SPECIAL);
	pte_t zero = pfn_pte(page_to_pfn(m, m->zero_page), bits);
	pm_entry_t *table;

	pm_assert_locked(pm__pmd_lockptr(mm, pmdp));
	pm_assert(pmd_special(pmd) && !pmd_write(pmd));
	table = pm__pgtable_withdraw(mm, pmdp, page_folio(pfn_to_page(m, pmd_pfn(pmd))));
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
		atomic_store_relaxed(&table[i], zero.val);
	set_pmd(pmdp, (pmd_t){ (virt_to_pfn(m, table) << PAGE_SHIFT) | _PAGE_TABLE });
	count_event(m, THP_SPLITS, 1); /* thp_split_pmd counts these too */
}

/**
 * split_huge_pmd_locked() - replace the 2 MiB leaf at *@pmdp by its deposited PTE table,
 * mapping the same folio page by page, with the same protection.
 *
 * Each subpage inherits the head's AnonExclusive state (a PMD mapping keeps it on the head).
 * The folio gains one reference and one mapcount per PTE and loses its PMD mapping. The table
 * is filled while private and published with a release store; a GUP-fast walker that read the
 * old leaf re-checks the PMD after taking its reference and backs off.
 * Context: the PMD lock held; *@pmdp is a leaf.
 */
static void split_huge_pmd_locked(struct pm_mm *mm, pm_entry_t *pmdp)
{
	struct pm_machine *m = mm_pgtables(mm)->m;
	pmd_t pmd = pmdp_get(pmdp);
	struct pm_page *head = pfn_to_page(m, pmd_pfn(pmd));
	struct pm_folio *folio = page_folio(head);
	uint64_t bits = pmd.val & (_PAGE_PRESENT | _PAGE_RW | _PAGE_USER | _PAGE_ACCESSED |
				   _PAGE_DIRTY | _PAGE_SPECIAL);
	bool anon = folio_test_anon(folio);
	bool excl = anon && page_anon_exclusive(head);
	pm_entry_t *table;

	pm_assert_locked(pm__pmd_lockptr(mm, pmdp));
	pm_assert(pmd_leaf(pmd));
	if (pmd_special(pmd)) {
		split_huge_zero_pmd_locked(mm, pmdp, pmd);
		return;
	}
	pm_bug_on(folio_test_hugetlb(folio)); /* never split: the VMA layer refuses the cut */
	table = pm__pgtable_withdraw(mm, pmdp, folio);
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
 * leaf's deposited table, so it never fails.
 * Context: mmap_lock held, a VMA's read lock (a COW fault), or an i_mmap lock (truncation's
 * zap, see mm/zap.c).
 */
void pm__split_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp)
{
	split_assert_held(mm);
	pm__split_huge_pmd_folio(mm, pmdp, NULL);
}

/**
 * pm__split_huge_pmd_folio() - pm__split_huge_pmd(), only if the leaf still maps @folio (any
 * leaf when NULL), as split_huge_pmd_address() takes one: a caller that decided on a folio
 * read without the lock splits nothing else.
 * Context: as pm__split_huge_pmd().
 */
void pm__split_huge_pmd_folio(struct pm_mm *mm, pm_entry_t *pmdp, const struct pm_folio *folio)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	pmd_t pmd;

	split_assert_held(mm);
	pm__ptl_lock(pml);
	pmd = pmdp_get(pmdp);
	if (pmd_leaf(pmd) &&
	    (!folio || page_folio(pfn_to_page(mm_pgtables(mm)->m, pmd_pfn(pmd))) == folio))
		split_huge_pmd_locked(mm, pmdp);
	pm_spin_unlock(pml);
}

/* Split the PMD leaf that straddles @addr, if there is one. Context: mmap_lock held. */
void pm__split_huge_pmd_at(struct pm_mm *mm, unsigned long addr)
{
	pm_entry_t *pmdp;

	mmap_assert_locked(mm);
	if (!(addr & ~PMD_MASK))
		return;
	pmdp = pm__pmd_lookup(mm, addr);
	if (pmdp && pmd_leaf(pmdp_get(pmdp)))
		pm__split_huge_pmd(mm, pmdp);
}
