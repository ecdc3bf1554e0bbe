// SPDX-License-Identifier: MIT
/*
 * hugetlb_fault.c - faults in hugetlb mappings (Linux's hugetlb_fault, hugetlb_no_page, hugetlb_wp)
 * and fork's copy of their page tables (copy_hugetlb_page_range).
 *
 * A hugetlb VMA is mapped only by 2 MiB PMD leaves, each a whole pool page; its PMDs never
 * point to PTE tables, its leaves carry no deposited table (nothing ever splits them: the VMA
 * layer refuses every cut inside a 2 MiB page, mm/vma.c), and its folios are never split.
 *
 *  - Shared mappings map the object's page-cache page (shmem/hugetlbfs.c fills a hole from the
 *    pool, with the reservation the mmap made), writable when VM_WRITE allows.
 *  - Private mappings map an exclusive anonymous page of their own, taken with the mapping's
 *    reservation (mem/hugetlb_pool.c) - or, for a private mapping of an object, the page-cache page
 *    read-only until a write copies it. A read fault maps the new page read-only, a write
 *    makes it writable (Linux maps it so and lets hugetlb_wp reuse it).
 *  - hugetlb_wp: an anonymous page that is exclusive, or mapped only here, is reused (Linux
 *    tests the mapcount, not the refcount: a FOLL_GET reference does not force a copy, which
 *    could fail for want of a pool page); anything else is copied whole into a new page: with
 *    the mapping's reservation for the first write to a page-cache page, otherwise from the
 *    pages nobody was promised. A fork child has no reservation, so its copy fails with
 *    -EFAULT (SIGBUS) when the pool is empty, as in Linux.
 *  - unmap_ref_private: the mapping's owner (the mmap that reserved it: vma->hresv, Linux's
 *    HPAGE_RESV_OWNER) must not fail where it holds a reservation. When it writes to an
 *    anonymous page it shares with fork children and the pool has nothing unpromised, the
 *    page is taken from the children instead: unmapped from every private VMA without a
 *    reservation that maps it at the same file offset, each such VMA marked
 *    xhugetlb_unmapped (HPAGE_RESV_UNMAPPED), and the owner retries - now the page's only
 *    mapper, it reuses it. A marked VMA's later faults on empty entries get -EFAULT (Linux
 *    kills the child with SIGBUS, "inadequate hugepage pool") rather than a zeroed page
 *    where the data was. Pinned pages never meet this: a pin needs an exclusive page, a page
 *    that may be pinned is copied at fork (copy_hugetlb_pmd), and a child's pin of the shared
 *    page would unshare (copy) it first - so the page taken away is mapped, not pinned, by
 *    the children (a FOLL_GET reference keeps the page alive and sees the owner's writes, as
 *    in Linux).
 *
 * The children are found the way Linux finds them: every hugetlb VMA has an object (anonymous
 * private mappings too, the internal one of mm/mmap.c, as hugetlb_file_setup gives them), and
 * fork links the child's VMA on the object's i_mmap list beside the parent's; the walk covers
 * every VMA over the page's offset under the object's i_mmap lock.
 *
 * Locking is the THP leaf's: decide without a lock, allocate and copy with none held, take the
 * PMD lock, re-check the entry, install or back out (VM_FAULT_AGAIN, and the reservation comes
 * back). The range design installs the owner's new anonymous pages by the compare-and-swap
 * alone (hugetlb_install), as its THP leaves.
 * A fault holds mmap_lock or the VMA's read lock (assert_fault_locked); fork holds the
 * parent's mmap_lock for write with every VMA write-locked (fork.c). A fault on an empty
 * entry of a private mapping also holds the page's fault mutex from its look at the entry to
 * the installed page (mem/hugetlb_pool.c, (a)): MADV_DONTNEED holds it from clearing the leaf to
 * the restored reservation, so the owner's refault finds its page or its reservation, never
 * the moment between; and a second fault of the owner on the same empty entry waits for the
 * first and finds its page, rather than the pool empty while the first holds the page.
 *
 * unmap_ref_private runs in the owner's fault with its mmap_lock or VMA lock held and no PMD
 * lock, and takes the object's i_mmap lock, then each child's PMD lock in turn: the order of
 * truncation (mmap_lock/VMA lock > i_mmap lock > PMD lock; nobody holding an i_mmap lock waits
 * for a VMA lock or mmap_lock, mm/vma.c). The i_mmap lock keeps each child VMA and its page
 * tables (a VMA leaves the list before its tables are freed), and its range and offset
 * (changed only under that lock). Races, each ordered by the child's PMD lock:
 *  - a child's own COW of the page: it copies unlocked, then re-checks its entry under the
 *    PMD lock, finds it gone and retries as a fault on an empty entry (below);
 *  - a child's fault on the now empty entry: xhugetlb_unmapped is set under the child's PMD
 *    lock before the entry is cleared, and hugetlb_install tests it under the same lock, so
 *    the child cannot map a new page there;
 *  - a fork of a child: its new VMA is linked after the child's before any entry is copied,
 *    so the walk meets the child first; the copy takes the child's PMD lock, so it copies the
 *    page before the walk clears it (and the walk, coming to the grandchild next, clears that
 *    copy too) or finds the entry already empty;
 *  - a split of a child's VMA copies the mark and moves the range under the i_mmap lock, so
 *    the walk sees the old VMA or both halves, each with its mark;
 *  - a child's teardown or munmap: (M) a VMA leaves the i_mmap list only after it is zapped
 *    (mm/vma.c, pm__vma_detach_range), and a leaf's mapcount drops with the entry, under its
 *    PMD lock (mm/zap.c, and unmap_ref_page here). So each other mapper of the page is, at
 *    the walk, either on the list - the walk takes its PMD lock, and clears the leaf or finds
 *    it cleared with its count already dropped - or off it, zapped before it left, which the
 *    i_mmap lock orders before the walk. New mappers cannot appear: a fork of the owner needs
 *    the VMA write lock our fault excludes, a fork of a child is ordered above. Once the walk
 *    is done the mapcount is the owner's 1, and its retry reuses the page: one walk is
 *    enough, and a failure after it would be a bug, not a race. (Issue 26: the VMA used to
 *    leave the list before its zap, and the count to drop after the PMD lock; a walk then
 *    missed a child being destroyed, the retry found the count at 2, and the owner of the
 *    page got -EFAULT.)
 * The owner keeps a reference on the page throughout, so the page a child maps is compared
 * with the very page the owner maps, never with a page reused from the pool meanwhile.
 */
#include "fault/fault.h"
#include "pgtable/pte_cas.h"

/*
 * Map @folio (our reference passes to the mapping), @writable or not, at the empty *@pmdp, if
 * it is still empty, @vma has not lost a page to its parent (unmap_ref_private marks it under
 * this lock), and - for a page-cache page, @cache - the page is still in the cache: the
 * barrier pairs with the one truncation takes between clearing PG_shmem and zapping
 * (fault/shmem.c, (a) and (b)).
 * Return: 0 or VM_FAULT_AGAIN (our reference dropped).
 */
static vm_fault_t hugetlb_install(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				  struct pm_folio *folio, bool writable, struct pm_folio *cache)
{
	pmd_t entry = mk_huge_pmd(page_to_pfn(mm->m, &folio->page), vma_is_accessible(vma),
				  writable);
	struct pm_spinlock *pml;

	/*
	 * The range design: a new anonymous page of the mapping's owner goes in by the
	 * compare-and-swap from none alone, as a THP leaf does (fault/anon.c), so that the first
	 * faults of two 2 MiB pages of one PMD table share no lock word. Neither check the lock
	 * orders applies: no truncation barrier for a page outside any cache, and
	 * unmap_ref_private marks only VMAs without a reservation (fork children), never the
	 * owner's. The page is private until the CAS publishes it.
	 */
	if (!cache && vma->hresv && pte_lockless(mm)) {
		atomic_store_relaxed(&folio->page.xentire_mapcount, 1);
		if (!pmd_install_none(pmdp, entry)) {
			atomic_store_relaxed(&folio->page.xentire_mapcount, 0);
			folio_put(folio);
			return VM_FAULT_AGAIN;
		}
		count_event(mm->m, HUGETLB_FAULTS, 1);
		return 0;
	}
	pml = pm__pmd_lockptr(mm, pmdp);
	pm__ptl_lock(pml);
	pm_smp_mb();
	if (!pmd_none(pmdp_get(pmdp)) || (cache && !page_test(&cache->page, PG_shmem)) ||
	    atomic_load_relaxed(&vma->xhugetlb_unmapped)) {
		pm_spin_unlock(pml);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_add_relaxed(&folio->page.xentire_mapcount, 1);
	set_pmd(pmdp, entry);
	pm_spin_unlock(pml);
	count_event(mm->m, HUGETLB_FAULTS, 1);
	return 0;
}

/* A new exclusive anonymous page for @haddr of a private mapping, its data from @src or zero:
 * with @resv's reservation for @haddr if it holds one, else a page nobody was promised. */
static struct pm_folio *hugetlb_new_anon(struct pm_mm *mm, struct pm_hugetlb_resv *resv,
					 unsigned long haddr, struct pm_folio *src,
					 bool *consumed)
{
	struct pm_machine *m = mm->m;
	struct pm_folio *new = pm__hugetlb_alloc_resv(m, resv, haddr, consumed);

	if (!new)
		return NULL;
	if (src)
		memcpy(page_address(m, &new->page), page_address(m, &src->page), PMD_SIZE);
	page_set(&new->page, PG_anon);
	page_set(&new->page, PG_anon_exclusive); /* on the head: covers the PMD mapping */
	return new;
}

/* Back out a new page that was not installed: it went back to the pool with our put. */
static void hugetlb_new_undo(struct pm_vma *vma, unsigned long haddr, bool consumed)
{
	if (consumed)
		pm__hugetlb_resv_undo(vma->hresv, haddr);
}

/*
 * An empty PMD in a private hugetlb VMA. Context: as hugetlb_no_page, and the page's fault
 * mutex, so the entry is still empty if it looks so here, and nothing else of the mapping
 * takes its page or its reservation until we are done.
 */
static vm_fault_t hugetlb_no_page_private(struct pm_mm *mm, struct pm_vma *vma,
					  pm_entry_t *pmdp, unsigned long haddr, unsigned long hidx,
					  bool write)
{
	struct pm_folio *folio = NULL, *new;
	vm_fault_t ret;
	bool consumed;

	/* Another fault of the mapping installed a page while we waited: use it. */
	if (!pmd_none(pmdp_get(pmdp)))
		return VM_FAULT_AGAIN;
	if (vma->file) {
		if (hidx >= pm_shmem_size(vma->file) >> PMD_SHIFT)
			return VM_FAULT_SIGBUS;
		folio = pm__shmem_lookup(vma->file, hidx);
		if (folio && !write) /* the cache's page, read-only: a write copies it */
			return hugetlb_install(mm, vma, pmdp, folio, false, folio);
	}
	vma_anon_prepare(vma); /* hugetlb_no_page's vmf_anon_prepare */
	new = hugetlb_new_anon(mm, vma->hresv, haddr, folio, &consumed);
	if (!new) {
		/* No reservation and nothing unpromised; or a reservation and an empty pool, while
		 * a restored page is still held (mem/hugetlb_pool.c): SIGBUS, as Linux. Linux maps
		 * a cache page read-only before its copy fails (hugetlb_no_page, then hugetlb_wp),
		 * and the mapping stays: so here. */
		if (folio)
			return hugetlb_install(mm, vma, pmdp, folio, false, folio) ?: VM_FAULT_SIGBUS;
		return VM_FAULT_SIGBUS;
	}
	ret = hugetlb_install(mm, vma, pmdp, new, write && (vma->flags & VM_WRITE), folio);
	if (ret)
		hugetlb_new_undo(vma, haddr, consumed);
	if (folio)
		folio_put(folio);
	return ret;
}

/* An empty PMD in a hugetlb VMA. Context: mmap_lock or the VMA's lock held (fault path). */
static vm_fault_t hugetlb_no_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				  unsigned long haddr, unsigned fault_flags)
{
	unsigned long hidx = (vma->pgoff >> HPAGE_PMD_ORDER) + ((haddr - vma->start) >> PMD_SHIFT);
	struct pm_folio *folio;
	pthread_mutex_t *fm;
	vm_fault_t ret;
	int err = 0;

	assert_fault_locked(vma);
	/* A page of this VMA went to the parent (unmap_ref_private): SIGBUS, as Linux. */
	if (atomic_load_relaxed(&vma->xhugetlb_unmapped))
		return VM_FAULT_SIGBUS;
	if (vma->flags & VM_SHARED) {
		/* The object's hugetlb_mutex orders the faults on a hole (shmem/hugetlbfs.c). */
		folio = pm__shmem_hugetlb_get_folio(vma->file, hidx, &err);
		if (!folio)
			return err == -EAGAIN ? VM_FAULT_AGAIN : vmf_error(err);
		return hugetlb_install(mm, vma, pmdp, folio, vma->flags & VM_WRITE, folio);
	}
	fm = pm__hugetlb_fault_mutex(mm->m, vma->file, hidx);
	pthread_mutex_lock(fm);
	ret = hugetlb_no_page_private(mm, vma, pmdp, haddr, hidx, fault_flags & FAULT_FLAG_WRITE);
	pthread_mutex_unlock(fm);
	return ret;
}

/*
 * Clear @vma's leaf at @addr if it maps @folio, marking @vma (HPAGE_RESV_UNMAPPED) under the
 * PMD lock first, so that no fault maps another page there (hugetlb_install).
 * Context: the i_mmap lock of @vma's object (which keeps @vma and its page tables).
 */
static void unmap_ref_page(struct pm_vma *vma, unsigned long addr, struct pm_folio *folio)
{
	struct pm_mm *mm = vma->mm;
	pm_entry_t *pmdp = pm__pmd_lookup(mm, addr);
	struct pm_spinlock *pml;
	pmd_t pmd;

	i_mmap_assert_held();
	if (!pmdp)
		return;
	pml = pm__pmd_lockptr(mm, pmdp);
	pm__ptl_lock(pml);
	pmd = pmdp_get(pmdp);
	if (!pmd_leaf(pmd) || page_folio(pfn_to_page(mm->m, pmd_pfn(pmd))) != folio) {
		pm_spin_unlock(pml);
		return;
	}
	atomic_store_relaxed(&vma->xhugetlb_unmapped, true);
	pmdp_get_and_clear(pmdp);
	atomic_sub_relaxed(&folio->page.xentire_mapcount, 1); /* with the entry (top, (M)) */
	pm_spin_unlock(pml);
	folio_put(folio); /* never the last: the owner maps it and holds a reference */
}

/*
 * Linux's unmap_ref_private: the owner of a private mapping (@vma) could not copy @folio at
 * @haddr, so take it from the other private VMAs that map it and have no reservation of their
 * own - fork children. Context: @vma's fault (mmap_lock or its VMA lock), no PMD lock; see the
 * top of the file for the lock order and the races.
 */
static void unmap_ref_private(struct pm_vma *vma, struct pm_folio *folio, unsigned long haddr)
{
	struct pm_shmem *f = vma->file;
	unsigned long pgoff = vma_pgoff(vma, haddr);
	struct pm_list *pos;

	assert_fault_locked(vma);
	pm__shmem_map_lock(f);
	pm_list_for_each(pos, &f->i_mmap) {
		struct pm_vma *iter = pm_list_entry(pos, struct pm_vma, shared);
		unsigned long npages = (iter->end - iter->start) >> PAGE_SHIFT;

		/* Shared VMAs and the other owners have reservations of their own. */
		if (iter == vma || (iter->flags & VM_MAYSHARE) || iter->hresv)
			continue;
		if (pgoff < iter->pgoff || pgoff >= iter->pgoff + npages)
			continue;
		unmap_ref_page(iter, iter->start + ((pgoff - iter->pgoff) << PAGE_SHIFT), folio);
	}
	pm__shmem_map_unlock(f);
}

/*
 * A write or unshare fault on a read-only hugetlb leaf: the THP leaf's start and reuse
 * (fault/huge_pmd.c), but reuse when this is the only mapping, as Linux's hugetlb_wp, and a
 * copy of the whole page otherwise. Context: as hugetlb_no_page.
 */
static vm_fault_t hugetlb_wp(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			     unsigned long haddr, unsigned fault_flags)
{
	bool unshare = fault_flags & FAULT_FLAG_UNSHARE;
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	struct pm_folio *folio, *new;
	bool consumed, cow_from_owner, unmapped = false;
	vm_fault_t ret;
	pmd_t pmd;

	assert_fault_locked(vma);
	folio = pm__wp_huge_pmd_lock(mm, pmdp, &pmd, &ret);
	if (!folio)
		return ret;
	if (vma->flags & VM_SHARED) {
		/* Shared: nothing to copy; mprotect made it read-only or VM_WRITE is off. */
		if (!unshare && (vma->flags & VM_WRITE))
			set_pmd(pmdp, pmd_mkwrite(pmd));
		pm_spin_unlock(pml);
		return 0;
	}
retry:
	/* Mapped here only: ours (the other mappers change the count under their own locks,
	 * and none can add one - a fork of another mapper would need a mapping). */
	if (pm__wp_huge_pmd_can_reuse_locked(pml, folio,
					     atomic_load_relaxed(&folio->page.xentire_mapcount) == 1))
		return pm__wp_huge_pmd_reuse_locked(mm, vma, pmdp, pmd, unshare);
	folio_get_refs(folio, 1); /* keeps the source alive while we copy unlocked */
	pm_spin_unlock(pml);

	/*
	 * The owner's COW of an anonymous page (its reservation for it was consumed when the page
	 * was first mapped) takes only what nobody was promised: its other reservations stay for
	 * its other pages. The first write to a page-cache page uses the reservation.
	 */
	cow_from_owner = vma->hresv && folio_test_anon(folio);
	vma_anon_prepare(vma); /* hugetlb_wp's vmf_anon_prepare */
	new = hugetlb_new_anon(mm, cow_from_owner ? NULL : vma->hresv, haddr, folio, &consumed);
	if (!new && cow_from_owner && !unmapped) {
		unmap_ref_private(vma, folio, haddr);
		unmapped = true;
		pm__ptl_lock(pml);
		if (pmd_same(pmdp_get(pmdp), pmd)) {
			folio_put(folio); /* not the last: our mapping holds one */
			goto retry;
		}
		pm_spin_unlock(pml); /* changed meanwhile: that fault's result stands */
		folio_put(folio);
		return 0;
	}
	if (!new) {
		folio_put(folio);
		return VM_FAULT_SIGBUS; /* a fork child's COW with the pool empty, as Linux */
	}
	pm__ptl_lock(pml);
	if (!pmd_same(pmdp_get(pmdp), pmd)) {
		pm_spin_unlock(pml);
		folio_put(new);
		hugetlb_new_undo(vma, haddr, consumed);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&new->page.xentire_mapcount, 1);
	atomic_xchg_mb(pmdp, mk_huge_pmd(page_to_pfn(mm->m, &new->page), vma_is_accessible(vma),
					 !unshare && (vma->flags & VM_WRITE)).val);
	atomic_sub_relaxed(&folio->page.xentire_mapcount, 1);
	folio_put(folio); /* the old mapping's reference */
	pm_spin_unlock(pml);
	folio_put(folio); /* ours */
	count_event(mm->m, COW_COPIES, 1);
	count_event(mm->m, HUGETLB_FAULTS, 1);
	return 0;
}

/* Would an unshare fault change anything for this read-only hugetlb leaf? */
static bool needs_unshare(struct pm_vma *vma, struct pm_folio *folio)
{
	if (vma->flags & VM_SHARED)
		return false;
	return !folio_test_anon(folio) || !page_anon_exclusive(&folio->page);
}

/**
 * pm__hugetlb_fault() - a fault at @addr in the hugetlb VMA @vma: the 2 MiB page around it.
 * Context: mmap_lock held, or @vma's read lock (fault path).
 * Return: 0, VM_FAULT_SIGBUS (beyond the object, or no pool page for a fork child),
 * VM_FAULT_OOM.
 */
vm_fault_t pm__hugetlb_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			     unsigned fault_flags)
{
	unsigned long haddr = addr & PMD_MASK;
	pm_entry_t *pmdp;

	assert_fault_locked(vma);
	pmdp = pm__pmd_alloc(mm, haddr);
	if (!pmdp)
		return VM_FAULT_OOM;
	for (;;) {
		pmd_t pmd = pmdp_get(pmdp);
		vm_fault_t ret = 0;

		if (pmd_none(pmd)) {
			ret = hugetlb_no_page(mm, vma, pmdp, haddr, fault_flags);
		} else if (unlikely(is_pmd_migration_entry(pmd))) {
			/* Being migrated (mm/migrate.c): sleep until it is mapped again, with no
			 * fault mutex held (the migration holds it), as migration_entry_wait_huge. */
			pm__migration_entry_wait(mm, pmdp, (pte_t){ pmd.val });
			continue;
		} else if (pm_warn_once(!pmd_leaf(pmd), "a PTE table under a hugetlb VMA")) {
			/* Only a VMA that breaks (V) of pm_machine_check can have one, and no fault
			 * makes progress there: fail rather than retry forever. */
			ret = VM_FAULT_SIGBUS;
		} else if (!pmd_write(pmd) &&
			   ((fault_flags & FAULT_FLAG_WRITE) ||
			    ((fault_flags & FAULT_FLAG_UNSHARE) &&
			     needs_unshare(vma, page_folio(pfn_to_page(mm->m, pmd_pfn(pmd))))))) {
			ret = hugetlb_wp(mm, vma, pmdp, haddr, fault_flags);
		}
		if (!(ret & VM_FAULT_AGAIN))
			return ret;
	}
}

/* ---- fork ---- */

/* Share one leaf with the child, or copy it there (may be pinned) if the caller passed @copy.
 * Return: an enum pm_fork_leaf, or -EFAULT (a PTE table under the VMA: nothing to share, and
 * retrying would not change that). */
static int copy_hugetlb_pmd(struct pm_mm *dst, struct pm_mm *src, struct pm_vma *vma,
			    pm_entry_t *dst_pmdp, pm_entry_t *src_pmdp, struct pm_folio *copy)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(src, src_pmdp);
	struct pm_spinlock *dst_pml = pm__pmd_lockptr(dst, dst_pmdp);
	struct pm_folio *folio;
	pmd_t pmd;

	pm__ptl_lock(pml);
	pmd = pmdp_get(src_pmdp);
	if (!pmd_leaf(pmd)) {
		pm_spin_unlock(pml);
		if (is_pmd_migration_entry(pmd))
			return -EAGAIN; /* the caller waits for the migration */
		return pmd_none(pmd) ? PM_FORK_LEAF_SHARED : -EFAULT;
	}
	folio = page_folio(pfn_to_page(src->m, pmd_pfn(pmd)));
	if (fork_leaf_needs_copy(src, folio)) {
		if (!copy) {
			pm_spin_unlock(pml);
			return PM_FORK_LEAF_COPY;
		}
		memcpy(page_address(src->m, &copy->page), page_address(src->m, &folio->page),
		       PMD_SIZE);
		page_set(&copy->page, PG_anon);
		page_set(&copy->page, PG_anon_exclusive);
		atomic_store_relaxed(&copy->page.xentire_mapcount, 1);
		pm__ptl_lock(dst_pml);
		set_pmd(dst_pmdp, mk_huge_pmd(page_to_pfn(src->m, &copy->page),
					      vma_is_accessible(vma), vma->flags & VM_WRITE));
		pm_spin_unlock(dst_pml);
		pm_spin_unlock(pml);
		count_event(src->m, FORK_PINNED_COPIES, HPAGE_PMD_NR);
		return PM_FORK_LEAF_COPIED;
	}
	pm__fork_share_huge_pmd_locked(dst, src, dst_pmdp, src_pmdp, pmd, folio, NULL);
	pm_spin_unlock(pml);
	return PM_FORK_LEAF_SHARED;
}

/**
 * pm__copy_hugetlb_page_range() - fork's copy of a private hugetlb VMA: each page is shared
 * write-protected (COW), or - when it may be pinned - copied whole for the child at once, from
 * the pool's unpromised pages (none left: -ENOMEM, and the fork fails, as Linux).
 * Context: mmap_lock (W) of both, @vma write-locked (fork.c).
 */
int pm__copy_hugetlb_page_range(struct pm_mm *dst, struct pm_mm *src, struct pm_vma *vma)
{
	struct pm_folio *copy = NULL;
	uintptr_t used_table = 0;
	unsigned long next;

	mmap_assert_write_locked(src);
	for (unsigned long addr = vma->start; addr < vma->end; addr = next) {
		pm_entry_t *src_pmdp = pm__pmd_span(src, addr, vma->end, &next), *dst_pmdp;
		int ret;

		if (!src_pmdp)
			continue;
		if ((uintptr_t)src_pmdp >> PAGE_SHIFT != used_table) {
			if (!pm__pmd_table_used(src, src_pmdp)) {
				next = span_end(addr, vma->end, PUD_SIZE); /* as good as missing */
				continue;
			}
			used_table = (uintptr_t)src_pmdp >> PAGE_SHIFT; /* asked once a table */
		}
		/* Where the parent has a PMD table the child gets one before the entry is looked
		 * at, as copy_hugetlb_page_range allocates it: mincore() reads none there. */
		dst_pmdp = pm__pmd_alloc(dst, addr);
		if (!dst_pmdp)
			goto nomem;
		if (pmd_none(pmdp_get(src_pmdp)))
			continue;
		ret = copy_hugetlb_pmd(dst, src, vma, dst_pmdp, src_pmdp, copy);
		if (ret == -EAGAIN) {
			/*
			 * Another mm migrates the object's page this leaf maps read-only (mm/migrate.c,
			 * under the object's i_mmap lock and our PMD lock, never our mmap_lock): wait
			 * for the leaf to come back (copy_hugetlb_page_range's migration entry case
			 * copies the entry; pinmm waits, so a child never holds one).
			 */
			pmd_t pmd = pmdp_get(src_pmdp);

			if (is_pmd_migration_entry(pmd))
				pm__migration_entry_wait(src, src_pmdp, (pte_t){ pmd.val });
			next = addr;
			continue;
		}
		if (ret < 0) {
			if (copy)
				folio_put(copy);
			return ret;
		}
		if (ret == PM_FORK_LEAF_COPIED)
			copy = NULL; /* now the child's */
		if (ret == PM_FORK_LEAF_COPY) {
			copy = pm__hugetlb_alloc(src->m, false);
			if (!copy)
				goto nomem;
			next = addr; /* and again, with the copy */
		}
	}
	if (copy)
		folio_put(copy);
	return 0;
nomem:
	if (copy)
		folio_put(copy);
	return -ENOMEM;
}
