// SPDX-License-Identifier: MIT
/*
 * zap.c - removing mappings: the zap of munmap, MADV_DONTNEED, shmem truncation and teardown.
 *
 * Each PTE is cleared under its table's PTL, with a plain store (every PTE writer holds the
 * PTL; nothing sets bits in a PTE behind it, as a CPU's page walker would), and the page's
 * mapcount drops with it. A small folio's mapcount and the reference its mapping held drop
 * together, in one locked instruction (pm__folio_unmap_put: the two counts share an 8-byte
 * word); a page of a large folio drops its mapcount, and its folio's reference is gathered,
 * as Linux's mmu_gather gathers them, and dropped ZAP_GATHER at a time (pm__folios_put).
 * Either way the folios whose last reference that was go back to the per-CPU cache together,
 * under one lock instead of one each, the last of a table's after its PTL is released: a
 * teardown costs about its locked instructions, so it does as few as it can (what the batches
 * and the single instruction were worth: docs/perf-log.md, 2026-12-03). There
 * is no TLB to shoot down: pm_access copies under the PTL, so it finishes before the PTE is
 * cleared or sees it gone, and GUP-fast holds a real reference on anything it returns, taken
 * with add-unless-zero and re-validated against the entry (gup_fast.c). A pinned page thus
 * outlives its mappings until its last unpin.
 *
 * A 2 MiB leaf that the range covers entirely is cleared under the PMD lock, its mapcount
 * dropped under that lock too, and its deposited PTE table freed; one it covers partly is
 * split into its deposited PTE table first. A leaf of the huge zero folio (special) has a
 * deposit but no mapcount and no reference: clearing it frees only the table. Neither needs memory, so a zap never fails.
 * A zap of a private hugetlb mapping's owner (pm__zap_vma_range) gives each anonymous page's
 * reservation back to its map, and marks the page to give it back to the pool's count when
 * freed (mem/hugetlb_pool.c); MADV_DONTNEED does so under each page's fault mutex
 * (pm__zap_hugetlb_resv).
 *
 * Locking: the mm's mmap_lock (any mode), or - for truncation, which zaps other mms'
 * mappings - the object's i_mmap lock, which keeps the VMA and so its page tables alive
 * (pm__zap_range asserts one of the two).
 */
#include "mm/mm.h"

#define ZAP_GATHER 64 /* folios gathered, and frames freed, per batch */

static void zap_pte_range(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long start,
			  unsigned long end, bool even_cows)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *ptl;
	pm_entry_t *ptep = pm__pte_offset_map_lock(mm, pmdp, start, &ptl);
	struct pm_folio *gather[ZAP_GATHER];
	struct pm_page *freed[ZAP_GATHER];
	unsigned nr = 0, nfreed = 0;

	if (!ptep)
		return;
	for (unsigned long a = start; a < end; a += PAGE_SIZE, ptep++) {
		pte_t pte = ptep_get(ptep);
		struct pm_folio *folio;
		struct pm_page *page;

		if (pte_none(pte))
			continue;
		/* A hole punched keeps private copies (should_zap_folio), one being migrated
		 * too: while its migration entry is there under the PTL, the migration holds the
		 * folio it names, so its flags can be read. */
		if (!even_cows &&
		    (is_migration_entry(pte) || (pte_present(pte) && !pte_special(pte))) &&
		    folio_test_anon(page_folio(pfn_to_page(m, pte_pfn(pte)))))
			continue;
		/*
		 * A plain store: a non-empty PTE changes only under its PTL, which we hold (the
		 * range design's lockless installs only fill empty ones: fault/anon.c), so the
		 * value just read is the one we clear. GUP-fast pairs with the put that follows, a sequentially
		 * consistent RMW sequenced after this store (gup_fast.c, (B)).
		 */
		pte_clear(ptep);
		if (!pte_present(pte) || pte_special(pte))
			continue;
		page = pfn_to_page(m, pte_pfn(pte));
		folio = page_folio(page);
		if (pte_dirty(pte))
			pm__folio_mark_dirty(folio);
		if (!folio_test_large(folio) && !folio_test_hugetlb(folio)) {
			/* Mapcount and reference together, the folio freed if that was the last. */
			freed[nfreed] = pm__folio_unmap_put(folio);
			if (freed[nfreed] && ++nfreed == ZAP_GATHER) {
				pm__free_frames_batch(m, freed, nfreed);
				nfreed = 0;
			}
			continue;
		}
		atomic_sub_relaxed(&page->xmapcount, 1);
		gather[nr++] = folio;
		if (nr == ZAP_GATHER) {
			pm__folios_put(m, gather, nr);
			nr = 0;
		}
	}
	pm_spin_unlock(ptl);
	if (nfreed)
		pm__free_frames_batch(m, freed, nfreed);
	if (nr)
		pm__folios_put(m, gather, nr);
}

/*
 * Clear a whole 2 MiB leaf, and its mapcount with it under the PMD lock: the owner of a
 * private hugetlb mapping counts on that when it takes a page back from its fork children
 * (fault/hugetlb_fault.c, unmap_ref_private). Return: the leaf's folio, with the reference the
 * mapping held (the huge zero folio: none, its leaf held none), or NULL if *@pmdp is no longer
 * a leaf.
 */
static struct pm_folio *clear_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	struct pm_folio *folio;
	pm_entry_t *deposit;
	pmd_t pmd;

	pm__ptl_lock(pml);
	pmd = pmdp_get(pmdp);
	if (!pmd_leaf(pmd)) {
		pm_spin_unlock(pml);
		return NULL;
	}
	pmdp_get_and_clear(pmdp);
	folio = page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)));
	/* A hugetlb leaf carries no deposited table (fault/hugetlb_fault.c). */
	deposit = folio_test_hugetlb(folio) ? NULL : pm__pgtable_withdraw(mm, pmdp, folio);
	/* The huge zero folio's leaf is special: it held no mapcount (nor reference). */
	if (!pmd_special(pmd))
		atomic_sub_relaxed(&folio->page.xentire_mapcount, 1);
	pm_spin_unlock(pml);
	if (deposit)
		pm__pte_free_now(mm->m, deposit); /* never published: no walker can hold it */
	return folio;
}

/* Clear a whole 2 MiB leaf at @addr; the owner's map @resv (or NULL) gets an anonymous
 * page's reservation back (pm__hugetlb_zap_restore). Return false if *@pmdp is no longer a
 * leaf. */
static bool zap_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
			 struct pm_hugetlb_resv *resv)
{
	struct pm_folio *folio = clear_huge_pmd(mm, pmdp);

	if (!folio)
		return false;
	if (resv && folio_test_hugetlb(folio))
		pm__hugetlb_zap_restore(resv, addr, folio);
	if (!is_huge_zero_folio(folio))
		folio_put(folio);
	return true;
}

void (*pm__pmd_migration_hook)(struct pm_mm *mm, unsigned long addr);

/*
 * A hugetlb leaf being migrated (mm/migrate.c): the entry holds no mapcount and no reference,
 * so it is only cleared; the migration, finding it gone under the same PMD lock, maps nothing
 * there. The entry was read without the lock: if it changed meanwhile (the migration put a
 * leaf back), return false, and the caller looks again - or the leaf would outlive its VMA,
 * and its table would be freed with it. Without @even_cows (truncation, which holds no lock
 * of this mm) a private COW page's entry stays, as its leaf would: while the entry is there
 * under the PMD lock, the old folio it names is held by the migration, so its flags can be
 * read. A private page's migration
 * holds this mm's lock and the page's fault mutex, so munmap and a reservation owner's
 * MADV_DONTNEED never meet its entry; a hugetlbfs page's is met by anyone (another mm's
 * unmap, a truncation), and a child's MADV_DONTNEED may meet its own page's.
 */
static bool zap_pmd_migration_entry(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
				    pmd_t pmd, bool even_cows)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	bool same;

	if (unlikely(pm__pmd_migration_hook))
		pm__pmd_migration_hook(mm, addr);
	pm__ptl_lock(pml);
	same = pmd_same(pmdp_get(pmdp), pmd);
	if (same &&
	    (even_cows || !folio_test_anon(page_folio(pfn_to_page(mm->m, pmd_pfn(pmd))))))
		pmdp_get_and_clear(pmdp);
	pm_spin_unlock(pml);
	return same;
}

static void zap_range(struct pm_mm *mm, unsigned long start, unsigned long end, bool even_cows,
		      struct pm_hugetlb_resv *resv)
{
	pm_entry_t *pmdp;

	zap_assert_held(mm);
	for_each_pmd_span(mm, a, next, start, end, pmdp) {
		pmd_t pmd = pmdp_get(pmdp);

		if (pmd_leaf(pmd)) {
			if (!even_cows &&
			    folio_test_anon(page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)))))
				continue;
			if (!(a & ~PMD_MASK) && next - a == PMD_SIZE) {
				if (!zap_huge_pmd(mm, pmdp, a, resv))
					next = a; /* changed under us: look again */
			} else {
				pm__split_huge_pmd(mm, pmdp);
				next = a; /* now a PTE table */
			}
		} else if (pmd_table(pmd)) {
			zap_pte_range(mm, pmdp, a, next, even_cows);
		} else if (is_pmd_migration_entry(pmd)) {
			/* The migration may have put its leaf back meanwhile: zap that. */
			if (!zap_pmd_migration_entry(mm, pmdp, a, pmd, even_cows))
				next = a;
		}
	}
}

/**
 * pm__zap_range() - remove every mapping in [@start, @end) of @mm. A 2 MiB leaf the range
 * covers in part is split first (with its deposited table: this never fails).
 * Context: mmap_lock held (any mode), the read lock of the VMA that holds the range, or the
 * i_mmap lock of the object @mm maps there.
 */
void pm__zap_range(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	zap_assert_held(mm);
	zap_range(mm, start, end, true, NULL);
}

/**
 * pm__zap_vma_range() - pm__zap_range() of [@start, @end) within @vma: where @vma owns a
 * private hugetlb reservation map, each anonymous page it unmaps gets its reservation back
 * (pm__hugetlb_zap_restore), as Linux 6.9+'s zap of a private owner's page does - munmap,
 * exit, truncation, a MAP_FIXED mapping over it. Context: as pm__zap_range().
 */
void pm__zap_vma_range(struct pm_vma *vma, unsigned long start, unsigned long end)
{
	zap_assert_held(vma->mm);
	zap_range(vma->mm, start, end, true, vma->hresv);
}

/**
 * pm__zap_file_range() - pm__zap_range() that keeps anonymous folios: the mappings of an
 * object's own pages go, private COW copies stay (Linux's zap_details without even_cows: a
 * hole punched in shmem). A leaf read without its lock can only change from an object's
 * (never split here: shmem has no 2 MiB leaves) to none. Context: as pm__zap_range().
 */
void pm__zap_file_range(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	zap_assert_held(mm);
	zap_range(mm, start, end, false, NULL);
}

/**
 * pm__zap_hugetlb_resv() - MADV_DONTNEED of [@start, @end), 2 MiB aligned, in @vma, a private
 * hugetlb VMA with a reservation map: each anonymous page's reservation comes back to the
 * map, and to the pool's count when the page is freed (Linux 6.9+), a 2 MiB page at a time
 * under that page's fault mutex, so that the mapping's own fault on it comes wholly before or
 * wholly after (mem/hugetlb_pool.c, (a) and (b)). Context: mmap_lock held (any mode), or
 * @vma's read lock.
 */
void pm__zap_hugetlb_resv(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			  unsigned long end)
{
	zap_assert_held(mm);
	pm_assert(vma->hresv && !(start & ~PMD_MASK) && !(end & ~PMD_MASK));
	for (unsigned long a = start; a < end; a += PMD_SIZE) {
		pthread_mutex_t *fm = pm__hugetlb_fault_mutex(mm->m, vma->file,
							      vma_pgoff(vma, a) >> HPAGE_PMD_ORDER);
		struct pm_folio *folio = NULL;
		pm_entry_t *pmdp;

		pthread_mutex_lock(fm);
		pmdp = pm__pmd_lookup(mm, a);
		while (pmdp) {
			pmd_t pmd = pmdp_get(pmdp);

			if (pmd_leaf(pmd)) {
				/* NULL: no longer a leaf (another mm's migration of a cache page
				 * took it meanwhile): look again, or it would come back mapped. */
				folio = clear_huge_pmd(mm, pmdp);
				if (!folio)
					continue;
			} else if (!pmd_none(pmd)) {
				pm__zap_range(mm, a, a + PMD_SIZE); /* not a leaf: what it maps goes */
			}
			break;
		}
		if (folio) {
			pm__hugetlb_zap_restore(vma->hresv, a, folio);
			folio_put(folio); /* frees it, with its reservation, if it was the last */
		}
		pthread_mutex_unlock(fm);
	}
}
