// SPDX-License-Identifier: MIT
/*
 * fork.c - pm_mm_fork(): a child address space with Linux's fork semantics.
 *
 * Shared mappings (VM_SHARED) are duplicated as VMAs only: the child faults their pages in
 * from the object's page cache. So are private mappings that never held an anonymous page
 * (no anon_vma: only zero pages and page-cache pages mapped read-only, which a fault maps
 * again - Linux's vma_needs_copy; pinmm has no PFNMAP, MIXEDMAP or uffd-wp VMAs, and 6.18
 * copies hugetlb VMAs by the same rule). PM_MADV_DONTFORK ranges are left out. Private
 * mappings with an anon_vma have their page tables copied (copy_page_range):
 *  - the zero page is copied as is;
 *  - page-cache pages of private file mappings are mapped read-only in both;
 *  - an anonymous page that may be DMA-pinned (the parent has pinned at some point, the folio
 *    looks pinned, and the page is AnonExclusive) is copied into a new page for the child at
 *    once; the parent keeps its mapping untouched, still writable and exclusive, so the pin
 *    keeps seeing the parent's writes (fork_pinned_copies);
 *  - every other anonymous page loses AnonExclusive and is write-protected in both: the first
 *    write on either side copies or reuses it (cow.c).
 * A PMD-mapped THP that may be pinned is split first and copied at PTE level; one that may not
 * be is shared at PMD level, write-protected (huge_pmd.c). A leaf of the huge zero folio is
 * copied as is, read-only, and the child becomes one of the folio's users (mem/machine.c). Private hugetlb VMAs are copied by
 * fault/hugetlb_fault.c the same way, a 2 MiB page at a time (copied whole, never split); the child
 * gets no reservation.
 *
 * Concurrency. Fork holds the parent's mmap_lock for write and write-locks each of its VMAs,
 * so no fault (under mmap_lock or a VMA lock), slow GUP or VMA change runs meanwhile; GUP-fast, pm_access and truncation still do. pm_access and
 * truncation take the same PTLs we take. GUP-fast does not: it could pin a page between our
 * "may it be pinned?" test and our write-protect, leaving a pinned page shared with the
 * child. So the copy runs with mm->write_protect_seq odd, and a full barrier separates making
 * it odd from the first refcount we read; GUP-fast samples the count before its walk and
 * re-checks it after a full barrier, so either we see its pin or it sees our count move and
 * releases what it pinned (gup_fast.c).
 *
 * Child VMAs of file mappings are put on the object's i_mmap list right after the parent's, so
 * a truncation walking the list meets the parent before the child: a page-cache PTE we copy
 * from the parent before the truncation zapped it is zapped in the child afterwards.
 *
 * Failure. Copying allocates (tables, VMAs, copies of pinned pages); on -ENOMEM the child is
 * torn down and the parent is left as it was, up to pages that are now write-protected and no
 * longer exclusive, which only costs it a reuse fault.
 */
#include "fault/fault.h"

/* Copy one PTE table's worth of [addr, end). Return: 0 or -ENOMEM. */
static int copy_pte_range(struct pm_mm *dst, struct pm_mm *src, struct pm_vma *vma,
			  pm_entry_t *dst_pmdp, pm_entry_t *src_pmdp, unsigned long addr,
			  unsigned long end)
{
	struct pm_machine *m = src->m;
	bool src_pinned = mm_has_pinned(src);
	struct pm_folio *prealloc = NULL;
	struct pm_spinlock *src_ptl, *dst_ptl;
	pm_entry_t *src_ptep, *dst_ptep;

again:
	src_ptep = pm__pte_offset_map_lock(src, src_pmdp, addr, &src_ptl);
	if (!src_ptep)
		goto out;
	dst_ptep = pm__pte_offset_map_lock(dst, dst_pmdp, addr, &dst_ptl);
	pm_bug_on(!dst_ptep);
	for (; addr < end; addr += PAGE_SIZE, src_ptep++, dst_ptep++) {
		pte_t pte = ptep_get(src_ptep);
		struct pm_folio *folio;
		struct pm_page *page;

		if (!pte_present(pte))
			continue;
		if (pte_special(pte)) {
			set_pte(dst_ptep, pte);
			continue;
		}
		page = pfn_to_page(m, pte_pfn(pte));
		folio = page_folio(page);
		if (src_pinned)
			pm__folio_cool(folio); /* an exact answer (mem/folio_hot.c) */
		if (folio_test_anon(folio) && src_pinned && folio_maybe_dma_pinned(folio) &&
		    page_anon_exclusive(page)) {
			struct pm_folio *copy = prealloc;

			if (!copy) {
				pm_spin_unlock(dst_ptl);
				pm_spin_unlock(src_ptl);
				prealloc = pm__folio_alloc(m, 0, 0);
				if (!prealloc)
					return -ENOMEM;
				goto again;
			}
			prealloc = NULL;
			memcpy(page_address(m, &copy->page), page_address(m, page), PAGE_SIZE);
			folio_set_flags_new(copy, PGF(PG_anon) | PGF(PG_anon_exclusive));
			atomic_store_relaxed(&copy->page.xmapcount, 1);
			set_pte(dst_ptep, mk_pte(page_to_pfn(m, &copy->page), vma_is_accessible(vma),
						 vma->flags & VM_WRITE, true));
			count_event(m, FORK_PINNED_COPIES, 1);
			continue;
		}
		if (folio_test_anon(folio)) {
			share_anon_page(page);
			if (pte_write(pte)) {
				pte = pte_wrprotect(pte);
				set_pte(src_ptep, pte);
			}
		}
		folio_get_refs(folio, 1);
		atomic_add_relaxed(&page->xmapcount, 1);
		set_pte(dst_ptep, pte_wrprotect(pte));
	}
	pm_spin_unlock(dst_ptl);
	pm_spin_unlock(src_ptl);
out:
	if (prealloc)
		folio_put(prealloc);
	return 0;
}

/*
 * Share a PMD-mapped THP with the child, write-protected in both; @deposit becomes the child
 * leaf's deposited table (used only when PM_FORK_LEAF_SHARED is returned).
 * Return: PM_FORK_LEAF_SHARED, PM_FORK_LEAF_COPY if the THP may be pinned (the caller splits it
 * and copies at PTE level), or -EAGAIN if the PMD changed.
 */
static int copy_huge_pmd(struct pm_mm *dst, struct pm_mm *src, pm_entry_t *dst_pmdp,
			 pm_entry_t *src_pmdp, pm_entry_t *deposit)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(src, src_pmdp);
	struct pm_folio *folio;
	pmd_t pmd;

	pm__ptl_lock(pml);
	pmd = pmdp_get(src_pmdp);
	if (!pmd_leaf(pmd)) {
		pm_spin_unlock(pml);
		return -EAGAIN;
	}
	folio = page_folio(pfn_to_page(src->m, pmd_pfn(pmd)));
	if (fork_leaf_needs_copy(src, folio)) {
		pm_spin_unlock(pml);
		return PM_FORK_LEAF_COPY;
	}
	pm__fork_share_huge_pmd_locked(dst, src, dst_pmdp, src_pmdp, pmd, folio, deposit);
	pm_spin_unlock(pml);
	return PM_FORK_LEAF_SHARED;
}

static int copy_page_range(struct pm_mm *dst, struct pm_mm *src, struct pm_vma *vma)
{
	unsigned long next;

	for (unsigned long addr = vma->start; addr < vma->end; addr = next) {
		pm_entry_t *src_pmdp = pm__pmd_span(src, addr, vma->end, &next), *dst_pmdp;
		pmd_t pmd;
		int ret;

		if (!src_pmdp)
			continue;
		if (!pm__pmd_table_used(src, src_pmdp)) {
			next = span_end(addr, vma->end, PUD_SIZE); /* as good as missing */
			continue;
		}
		/* Where the parent has a PMD table, the child gets one, entries or not, as
		 * Linux's copy_pmd_range allocates it before its loop: mincore() of a hugetlb
		 * mapping in the child reads a none entry there, the page cache elsewhere. */
		dst_pmdp = pm__pmd_alloc(dst, addr);
		if (!dst_pmdp)
			return -ENOMEM;
		pmd = pmdp_get(src_pmdp);
		if (pmd_none(pmd))
			continue;
		if (pmd_leaf(pmd)) {
			pm_entry_t *deposit;

			/* The huge zero folio's leaf: the child becomes one of its users first
			 * (the parent is one, so this only counts; copy_huge_pmd's
			 * mm_get_huge_zero_folio). */
			if (pmd_special(pmd) && !pm__huge_zero_folio_get(dst->m, &dst->xhuge_zero))
				return -ENOMEM;
			deposit = pm__pte_alloc_one(dst->m);
			if (!deposit)
				return -ENOMEM;
			ret = copy_huge_pmd(dst, src, dst_pmdp, src_pmdp, deposit);
			if (ret != PM_FORK_LEAF_SHARED)
				pm__pte_free_now(dst->m, deposit);
			if (ret == -EAGAIN) {
				next = addr;
				continue;
			}
			if (ret == PM_FORK_LEAF_SHARED)
				continue;
			/* PM_FORK_LEAF_COPY: split it, and copy at PTE level below. */
			pm__split_huge_pmd(src, src_pmdp);
		}
		if (pm__pte_alloc(dst, dst_pmdp, false)) /* the child has no other user */
			return -ENOMEM;
		ret = copy_pte_range(dst, src, vma, dst_pmdp, src_pmdp, addr, next);
		if (ret)
			return ret;
	}
	return 0;
}

/* A copy of @vma for @child, linked after it on its object's i_mmap list. */
static struct pm_vma *dup_vma(struct pm_mm *child, struct pm_vma *vma)
{
	struct pm_vma *new = pm__vma_alloc(child);

	if (!new)
		return NULL;
	new->start = vma->start;
	new->end = vma->end;
	new->flags = vma->flags & ~VM_LOCKED; /* mlock is not inherited (dup_mmap) */
	new->pgoff = vma->pgoff;
	new->file = vma->file;
	/* anon_vma_fork: an anon_vma of the child's own, its chain linked to the parent's; a
	 * WIPEONFORK range starts without one */
	if (pm__vma_anon_vma(vma) && !(vma->flags & VM_WIPEONFORK))
		pm__vma_anon_new(new, PM_ANON_VMA_FORKED);
	if (pm__vma_insert(child, new)) {
		free(new);
		return NULL;
	}
	pm__vma_settle(child, new); /* fork merges nothing: a copy let in uncharged is charged */
	if (new->file) {
		pm__shmem_get(new->file);
		pm__shmem_map_lock(new->file);
		pm_list_add(&new->shared, &vma->shared);
		pm__shmem_map_unlock(new->file);
	}
	return new;
}

struct pm_mm *pm_mm_fork(struct pm_mm *parent)
{
	struct pm_mm *child;
	unsigned seq;
	int err = 0;

	if (pm__mm_bad(parent)) {
		errno = EINVAL;
		return NULL;
	}
	child = pm__mm_alloc(parent->m);
	if (!child)
		return NULL;
	child->mmap_base = parent->mmap_base;
	mmap_write_lock_all(parent);
	mmap_write_lock_all(child);
	seq = atomic_load_relaxed(&parent->xwrite_protect_seq);
	atomic_store_relaxed(&parent->xwrite_protect_seq, seq + 1);
	pm_smp_mb(); /* pairs with GUP-fast's barrier before it re-reads the sequence */

	for (struct pm_vma *vma = pm__find_vma(parent, 0); vma && !err;
	     vma = pm__vma_next(parent, vma)) {
		/* No fault under a VMA lock may run while its page tables are copied. */
		pm__vma_start_write(vma);
		if (vma->flags & VM_DONTCOPY)
			continue;
		if (!dup_vma(child, vma)) {
			err = -ENOMEM;
			break;
		}
		/* Shared pages are the object's; a WIPEONFORK range starts empty in the child,
		 * whose VMA keeps the flag (dup_mmap). A VMA without an anon_vma holds no
		 * anonymous page: the child faults its pages in again (vma_needs_copy). */
		if ((vma->flags & (VM_SHARED | VM_WIPEONFORK)) ||
		    !pm__vma_anon_vma(vma))
			continue;
		if (is_vm_hugetlb_page(vma))
			err = pm__copy_hugetlb_page_range(child, parent, vma);
		else
			err = copy_page_range(child, parent, vma);
	}

	atomic_store_release(&parent->xwrite_protect_seq, seq + 2);
	mmap_write_unlock(child);
	mmap_write_unlock(parent);
	if (err) {
		pm_mm_destroy(child);
		errno = -err;
		return NULL;
	}
	return child;
}
