// SPDX-License-Identifier: MIT
/*
 * madvise.c - pm_madvise, mm/madvise.c's rules.
 *
 * Arguments are checked first, in Linux's order (include/pinmm/mm.h). Then, as Linux's
 * madvise_walk_vmas: each VMA of the range in turn, a hole remembered as -ENOMEM and the walk
 * going on, an error of a VMA ending it at once with what came before it done.
 *  - Advice that changes VMA flags (HUGEPAGE, NOHUGEPAGE, DONTFORK, DOFORK, WIPEONFORK,
 *    KEEPONFORK) works under mmap_lock for write, merging before it splits, as mprotect does
 *    (mmap.c).
 *  - DONTNEED and FREE: DONTNEED zaps; FREE only clears the dirty flag of the exclusive
 *    anonymous folios it covers (below). A range inside one VMA runs under that VMA's read
 *    lock alone, as Linux 6.16+'s madvise_lock() (MADVISE_VMA_READ_LOCK) does, so two of them,
 *    or one and a change of another VMA, share no lock word; any other range falls back to
 *    mmap_lock for read (madvise_dontneed_free_lock()). Splitting a PMD mapping needs no
 *    memory (the leaf carries a deposited PTE table), so neither fails for lack of memory.
 *  - REMOVE checks each VMA under mmap_lock for read, then drops it to punch the hole in the
 *    object (truncate.c), holding a reference to the object, as Linux's madvise_remove
 *    drops mmap_lock around vfs_fallocate; the walk goes on from the VMA's end.
 *  - POPULATE_READ/WRITE fault the range in as GUP does, without taking references
 *    (faultin_page_range: the slow GUP with FOLL_MADV_POPULATE, under mmap_lock for read;
 *    populate.c).
 *
 * MADV_FREE: pinmm has no reclaim, so a lazily freed page is never dropped and keeps its
 * contents until it is written or zapped, which Linux allows. What stays visible is Linux's
 * folio_clear_dirty(): pm_pagemap's PM_PAGE_DIRTY reads 0 for such a page afterwards, until
 * a GUP write (FOLL_WRITE marks the folio dirty, as Linux's follow_page does) or an unpin
 * with dirty sets it again; a user write (pm_access), like a CPU's store, dirties only the
 * PTE, never the folio. As Linux, a folio mapped by more than one mm (shared with a fork
 * child) is left as it is. A THP the range covers only in part is split first, as Linux's
 * madvise_free_huge_pmd() and madvise_free_pte_range() call split_folio(): by
 * pm__split_anon_thp() (mm/migrate.c, the migration's split; its safety argument is there),
 * which maps the pages that hold only zeros to the zero page, as Linux 6.12+'s split does.
 * pinmm has no anonymous rmap: the split needs the THP mapped by one PTE table only, each
 * page at its own slot (always so unless mremap moved part of it elsewhere); a THP it
 * cannot split (mapped elsewhere too, pinned, or with a reference taken meanwhile) stays as
 * it is, which is Linux's answer when its split fails.
 */
#include "mm/range.h"

/*
 * madvise_walk_vmas() - @visit each VMA's part [s, e) of [@start, @end) in address order, as
 * Linux's madvise_walk_vmas(): the first error ends the walk; a hole anywhere in the range is
 * -ENOMEM once every VMA after it was visited too. @visit may change the VMA tree: the next
 * VMA is looked up from the end of the part just visited. Context: the mm's lock held.
 */
static int madvise_walk_vmas(struct pm_mm *mm, unsigned long start, unsigned long end, int advice,
			     int (*visit)(struct pm_mm *mm, struct pm_vma *vma, unsigned long s,
					  unsigned long e, int advice))
{
	unsigned long tmp = start;
	bool hole = false;

	mmap_assert_locked(mm);
	while (tmp < end) {
		struct pm_vma *vma = pm__find_vma(mm, tmp);
		unsigned long e;
		int err;

		if (!vma || vma->start >= end)
			return -ENOMEM;
		if (vma->start > tmp)
			hole = true;
		e = min(vma->end, end);
		err = visit(mm, vma, max(vma->start, tmp), e, advice);
		if (err)
			return err;
		tmp = e;
	}
	return hole ? -ENOMEM : 0;
}

/* The advice that only changes VMA flags, for [@s, @e) of @vma. */
static int madvise_vma_flags(struct pm_mm *mm, struct pm_vma *vma, unsigned long s,
			     unsigned long e, int advice)
{
	unsigned long newflags = vma->flags;

	switch (advice) {
	case PM_MADV_HUGEPAGE:
		newflags = (newflags & ~VM_NOHUGEPAGE) | VM_HUGEPAGE;
		break;
	case PM_MADV_NOHUGEPAGE:
		newflags = (newflags & ~VM_HUGEPAGE) | VM_NOHUGEPAGE;
		break;
	case PM_MADV_DONTFORK:
		newflags |= VM_DONTCOPY;
		break;
	case PM_MADV_DOFORK:
		newflags &= ~VM_DONTCOPY;
		break;
	case PM_MADV_WIPEONFORK:
		/* Private anonymous memory only: a hugetlb mapping has an object. */
		if (vma->file || (vma->flags & VM_SHARED))
			return -EINVAL;
		newflags |= VM_WIPEONFORK;
		break;
	case PM_MADV_KEEPONFORK:
		newflags &= ~VM_WIPEONFORK;
		break;
	}
	/* As mprotect: merge first, split only what must (Linux's madvise_update_vma). */
	return newflags != vma->flags ? pm__vma_modify(mm, vma, s, e, newflags) : 0;
}

/* Linux's madvise_dontneed_free_valid_vma(): no VM_LOCKED (pinmm has no
 * MADV_DONTNEED_LOCKED, and VM_PFNMAP never); hugetlb for DONTNEED only. */
static bool dontneed_free_valid_vma(struct pm_vma *vma, int advice)
{
	if (!is_vm_hugetlb_page(vma))
		return !(vma->flags & VM_LOCKED);
	return advice == PM_MADV_DONTNEED;
}

/* Clear the dirty flag of a folio this mm alone maps (folio_clear_dirty under its lock). */
static void folio_lazyfree(struct pm_folio *folio)
{
	if (!folio_test(folio, PG_dirty))
		return;
	pm__folio_lock(folio);
	page_clear(&folio->page, PG_dirty);
	pm__folio_unlock(folio);
}

/*
 * folio_pte_batch() for MADV_FREE: how many PTEs from @ptep (at @addr, before @end) map the
 * pages of @folio that follow @page, one after another. Context: the mm's lock held for
 * read or the VMA's read lock, and the table's PTL.
 */
static unsigned long free_pte_batch(struct pm_mm *mm, pm_entry_t *ptep, unsigned long addr,
				    unsigned long end, struct pm_folio *folio, struct pm_page *page)
{
	unsigned long pfn = page_to_pfn(mm->m, page);
	unsigned long last = page_to_pfn(mm->m, &folio->page) + folio_nr_pages(folio);
	unsigned long nr = 1;

	fault_assert_held(mm);
	while (addr + nr * PAGE_SIZE < end && pfn + nr < last) {
		pte_t pte = ptep_get(ptep + nr);

		if (!pte_present(pte) || pte_special(pte) || pte_pfn(pte) != pfn + nr)
			break;
		nr++;
	}
	return nr;
}

/*
 * madvise_free_pte_range() for [@start, @end) of one PTE table: small anonymous folios mapped
 * once lose their dirty flag; so does a THP the range covers whole, mapped once. A THP the
 * range covers in part is split first, if this table alone maps it (pm__split_anon_thp(), as
 * Linux's split_folio() here: its pages that hold only zeros become the zero page), and its
 * pages then go as small folios; one that cannot be split is left as it is.
 * Context: the mm's lock held for read, or @vma's read lock.
 */
static void free_pte_range(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			   unsigned long start, unsigned long end)
{
	unsigned long a = start, unsplit = ULONG_MAX;
	struct pm_spinlock *ptl;
	pm_entry_t *ptep;

	fault_assert_held(mm);
again:
	ptep = pm__pte_offset_map_lock(mm, pmdp, a, &ptl);
	if (!ptep)
		return;
	for (unsigned long nr; a < end; a += nr * PAGE_SIZE, ptep += nr) {
		pte_t pte = ptep_get(ptep);
		struct pm_page *page;
		struct pm_folio *folio;

		nr = 1;
		if (!pte_present(pte) || pte_special(pte))
			continue;
		page = pfn_to_page(mm->m, pte_pfn(pte));
		folio = page_folio(page);
		if (folio_is_zero(folio) || !folio_test_anon(folio))
			continue;
		if (folio_test_large(folio)) {
			bool once = true;

			nr = free_pte_batch(mm, ptep, a, end, folio, page);
			if (nr < folio_nr_pages(folio)) {
				if (a == unsplit)
					continue; /* split refused: its pages stay as they are */
				pm_spin_unlock(ptl);
				if (!pm__split_anon_thp(mm, vma, pmdp, a & PMD_MASK))
					unsplit = a;
				goto again;
			}
			for (unsigned long i = 0; i < nr; i++)
				once &= atomic_load_relaxed(&folio_page(folio, i)->xmapcount) == 1;
			if (once && !atomic_load_relaxed(&folio->page.xentire_mapcount))
				folio_lazyfree(folio);
			continue;
		}
		if (atomic_load_relaxed(&page->xmapcount) == 1)
			folio_lazyfree(folio);
	}
	pm_spin_unlock(ptl);
}

/* madvise_free_single_vma() for [@start, @end) of @vma, private and anonymous. Context: the
 * mm's lock held for read, or @vma's read lock. */
static void madvise_free_range(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			       unsigned long end)
{
	pm_entry_t *pmdp;

	fault_assert_held(mm);
	for_each_pmd_span(mm, a, next, start, end, pmdp) {
		pmd_t pmd = pmdp_get(pmdp);

		if (pmd_leaf(pmd)) {
			struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
			struct pm_folio *folio;

			if ((a & ~PMD_MASK) || next - a != PMD_SIZE) {
				/* madvise_free_huge_pmd() on part of a THP: split_folio(), then the
				 * PTEs (nothing, if it was not split: shared, pinned, huge zero). */
				pm__split_anon_thp(mm, vma, pmdp, a & PMD_MASK);
				if (pmd_table(pmdp_get(pmdp)))
					free_pte_range(mm, vma, pmdp, a, next);
				continue;
			}
			/* madvise_free_huge_pmd(): a whole leaf of a folio this mm alone maps. */
			pm__ptl_lock(pml);
			pmd = pmdp_get(pmdp);
			if (pmd_leaf(pmd)) {
				folio = page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)));
				if (!folio_is_zero(folio) && folio_test_anon(folio) &&
				    atomic_load_relaxed(&folio->page.xentire_mapcount) == 1)
					folio_lazyfree(folio);
				pm_spin_unlock(pml);
				continue;
			}
			pm_spin_unlock(pml);
			next = a; /* split or zapped meanwhile: look again */
		} else if (pmd_table(pmd)) {
			free_pte_range(mm, vma, pmdp, a, next);
		}
	}
}

/* MADV_DONTNEED and MADV_FREE, for [@s, @e) of @vma. Context: the mm's lock held for read, or
 * @vma's read lock. */
static int madvise_dontneed_free(struct pm_mm *mm, struct pm_vma *vma, unsigned long s,
				 unsigned long e, int advice)
{
	fault_assert_held(mm);
	if (!dontneed_free_valid_vma(vma, advice))
		return -EINVAL;
	if (advice == PM_MADV_FREE) {
		/* MADV_FREE works only on private anonymous memory. */
		if (!vma_is_anonymous(vma))
			return -EINVAL;
		madvise_free_range(mm, vma, s, e);
		return 0;
	}
	if (is_vm_hugetlb_page(vma)) {
		/* Linux: an aligned start, and the end rounded down to a 2 MiB page. */
		if (s & ~PMD_MASK)
			return -EINVAL;
		e &= PMD_MASK;
		/* The owner's pages go back to the pool with their reservations (6.9+), each
		 * under its fault mutex (mm/zap.c). */
		if (s < e && vma->hresv)
			pm__zap_hugetlb_resv(mm, vma, s, e);
		else if (s < e)
			pm__zap_range(mm, s, e);
		return 0;
	}
	pm__zap_range(mm, s, e);
	return 0;
}

/*
 * madvise_remove(): punch the VMAs' parts of [@start, @end) out of their objects, one VMA at a
 * time, with the mm's lock dropped around each punch (the object held by a reference). A
 * locked VMA, or one without an object (private anonymous), is -EINVAL, a private mapping of one -EACCES (Linux
 * asks VM_SHARED and VM_MAYWRITE, which every shared mapping of pinmm's has).
 */
static int madvise_remove(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	unsigned long tmp = start;
	bool hole = false;

	while (tmp < end) {
		struct pm_vma *vma;
		struct pm_shmem *f;
		unsigned long s, e, first;
		int err = 0;

		mmap_read_lock_range(mm, tmp, end);
		vma = pm__find_vma(mm, tmp);
		if (!vma || vma->start >= end) {
			mmap_read_unlock(mm);
			hole = true;
			break;
		}
		if (vma->start > tmp)
			hole = true;
		s = max(vma->start, tmp);
		e = min(vma->end, end);
		f = vma->file;
		if ((vma->flags & VM_LOCKED) || !f)
			err = -EINVAL;
		else if ((vma->flags & (VM_SHARED | VM_MAYWRITE)) != (VM_SHARED | VM_MAYWRITE))
			err = -EACCES;
		if (err) {
			mmap_read_unlock(mm);
			return err;
		}
		first = vma_pgoff(vma, s);
		pm__shmem_get(f);
		mmap_read_unlock(mm);
		pm__shmem_punch_hole(f, first, first + ((e - s) >> PAGE_SHIFT));
		pm_shmem_put(f);
		tmp = e;
	}
	return hole ? -ENOMEM : 0;
}

/*
 * madvise_dontneed_free_lock() - MADV_DONTNEED or MADV_FREE of [@start, @end), under the lock
 * Linux 6.16+ takes (madvise_lock(), try_vma_read_lock()): the read lock of the VMA that holds
 * the whole range, else mmap_lock for read over the walk of every VMA. What a VMA read lock
 * gives the zap is what it gives a fault (vma_lock.c): the VMA cannot change or go, nor can
 * the tables under it; every change of another VMA that reaches into the same tables does so
 * under their PTLs, as it would beside a fault. MADV_FREE's split of a THP it covers in part
 * maps that THP's all-zero pages to the zero page with their VMA's protection, and finds that
 * VMA here without a lookup only if the 2 MiB spans it touches lie in the VMA held: otherwise
 * it takes mmap_lock (Linux's split finds each page's VMA by its rmap instead).
 */
static int madvise_dontneed_free_lock(struct pm_mm *mm, unsigned long start, unsigned long end,
				      int advice)
{
	struct pm_vma *vma = pm__lock_vma_under_rcu(mm, start);
	int err;

	if (vma) {
		if (end <= vma->end &&
		    (advice == PM_MADV_DONTNEED || ((start & PMD_MASK) >= vma->start &&
						    ALIGN_UP(end, PMD_SIZE) <= vma->end))) {
			err = madvise_dontneed_free(mm, vma, start, end, advice);
			pm__vma_end_read(vma);
			return err;
		}
		pm__vma_end_read(vma);
	}
	mmap_read_lock_range(mm, start, end);
	err = madvise_walk_vmas(mm, start, end, advice, madvise_dontneed_free);
	mmap_read_unlock(mm);
	return err;
}

int pm_madvise(struct pm_mm *mm, unsigned long start, size_t len, int advice)
{
	unsigned long end;
	int err;

	if (pm__mm_bad(mm) || (start & ~PAGE_MASK))
		return -EINVAL;
	switch (advice) {
	case PM_MADV_DONTNEED:
	case PM_MADV_HUGEPAGE:
	case PM_MADV_NOHUGEPAGE:
	case PM_MADV_DONTFORK:
	case PM_MADV_DOFORK:
	case PM_MADV_FREE:
	case PM_MADV_REMOVE:
	case PM_MADV_WIPEONFORK:
	case PM_MADV_KEEPONFORK:
	case PM_MADV_POPULATE_READ:
	case PM_MADV_POPULATE_WRITE:
		break;
	default:
		return -EINVAL;
	}
	if (!len)
		return 0;
	len = ALIGN_UP(len, PAGE_SIZE);
	end = start + len;
	if (!len || end < start)
		return -EINVAL;
	if (end > PM_TASK_SIZE)
		return -ENOMEM;

	switch (advice) {
	case PM_MADV_POPULATE_READ:
	case PM_MADV_POPULATE_WRITE:
		return pm__madvise_populate(mm, start, end, advice == PM_MADV_POPULATE_WRITE);
	case PM_MADV_REMOVE:
		return madvise_remove(mm, start, end);
	case PM_MADV_DONTNEED:
	case PM_MADV_FREE:
		return madvise_dontneed_free_lock(mm, start, end, advice);
	}
	for (bool all = false;; all = true) {
		mmap_write_lock_range_or_all(mm, start, end, all);
		err = madvise_walk_vmas(mm, start, end, advice, madvise_vma_flags);
		mmap_write_unlock(mm);
		/* -EAGAIN: the VMA count asks for every range (range.c). */
		if (err != -EAGAIN || all)
			break;
	}
	return err;
}
