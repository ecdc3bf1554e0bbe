/* SPDX-License-Identifier: MIT */
/*
 * pgtable/pte_cas.h - the range design's lockless PTE installs and PTE reads (the protocol and
 * its argument: the top comment of fault/anon.c). Included after the layer headers by the
 * files that install or follow PTEs without the table's PTL.
 */
#ifndef PM_PGTABLE_PTE_CAS_H
#define PM_PGTABLE_PTE_CAS_H

/*
 * Do @mm's installs into empty PTEs, slow GUP's PTE steps and pm_access's copies go without
 * the PTL (the copies as its lockless readers, pgtable.c)? The range design's way; Linux's
 * design, and the range design under PM_KNOB_PTE_TABLE_LOCK, lock the table as Linux does.
 */
static inline bool pte_lockless(const struct pm_mm *mm)
{
	return mm->policy->pte_cas && !knob(mm->m, PM_KNOB_PTE_TABLE_LOCK);
}

/*
 * The slot of @addr in the PTE table under *@pmdp, without its lock, and the PMD value read in
 * *@pmdval. For walkers under mmap_lock or @addr's VMA read lock (they assert it): a table a
 * live VMA reaches into is neither freed nor unlinked (pgtable/pgtable.c).
 * Return: NULL if *@pmdp is no PTE table.
 */
static inline pm_entry_t *pte_offset_nolock(struct pm_mm *mm, pm_entry_t *pmdp,
					    unsigned long addr, pmd_t *pmdval)
{
	pmd_t pmd = pmdp_get(pmdp);

	*pmdval = pmd;
	if (!pmd_table(pmd))
		return NULL;
	return &entry_table(mm->m, pmd.val)[pte_index(addr)];
}

/*
 * Install @v into the PTE at @p if it is empty: one compare-and-swap none -> @v, a full
 * barrier (it publishes the page's contents and flags, as set_pte's release does).
 * Return: false if the entry was not empty (nothing written).
 */
static inline bool pte_install_cas(pm_entry_t *p, pte_t v)
{
	uint64_t none = 0;

	return atomic_cas_mb(p, &none, v.val);
}

#endif /* PM_PGTABLE_PTE_CAS_H */
