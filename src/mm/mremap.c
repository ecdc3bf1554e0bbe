// SPDX-License-Identifier: MIT
/*
 * mremap.c - pm_mremap: shrink, grow in place, or move a mapping (Linux's mm/mremap.c, 6.18).
 *
 * The checks are Linux's, in Linux's order (check_mremap_params before the lock, then the VMA's
 * own checks under it, as check_prep_vma). Then one of:
 *  - shrink: the tail is unmapped, as munmap would;
 *  - grow in place: when [addr, addr + old_len) ends the VMA and the space after it is free, a
 *    VMA for the extension goes in and merges with it;
 *  - move: a new VMA at the target, the page-table entries moved there, the old VMA unmapped
 *    (or, with MREMAP_DONTUNMAP, kept, empty). With MREMAP_FIXED and old_len == new_len the
 *    range may span several VMAs and the gaps between them (Linux 6.17): each is moved in turn,
 *    the gaps kept.
 *
 * A move changes nothing before it can no longer fail for lack of memory, so that a failed
 * call leaves the old mapping whole: the old VMA is split at the range's edges (that changes
 * nothing observable), a THP leaf that cannot move whole is split (from its deposit, never
 * failing), every page table the target needs is allocated, and the new VMA enters the tree;
 * only then do entries move, which needs no memory. What can still fail after - taking the old
 * VMA out of the tree, whose nodes may need memory - is undone by moving the entries back.
 *
 * Moving entries. A PTE moves entry by entry under the old and the new table's PTLs: the old
 * one is cleared, then the new one set to the same value. A PMD leaf (THP or hugetlb) moves
 * whole under both PMD locks when the source and target are both 2 MiB aligned there, its
 * deposited PTE table going to the new PMD table's list; a THP that is not is split first, as
 * Linux's move_page_tables splits it. Nothing else changes: the folio, its references, its
 * mapcounts, its pin count, AnonExclusive (so folio_maybe_dma_pinned too) stay as they are; a
 * pin holder's page is the page now mapped at the new address.
 *
 * Who else is there, and why each is safe:
 *  - Faults under a per-VMA lock: both VMAs are write-locked (the old by vma_start_write, the
 *    new from birth by vma_mark_new) before any entry moves, until the section ends; a fault
 *    that finds either one goes to mmap_lock, which we hold, so it sees both VMAs whole.
 *  - Slow GUP, MADV_DONTNEED: under mmap_lock (or the ranges) for read: excluded.
 *  - Truncation and hugetlb's unmap_ref_private walk the object's i_mmap list without
 *    mmap_lock: the new VMA is on the list before entries move, and they move under the
 *    object's i_mmap lock, so such a walk sees every entry at the old place or every one at the
 *    new (Linux's take_rmap_locks).
 *  - pm_access copies under the PTL it found the entry with: before the clear, or it sees none.
 *  - GUP-fast: no lock at all. The interleaving relied on, per PTE (a PMD leaf the same, with
 *    the exchange under the PMD lock):
 *
 *	mremap (old and new PTL held)		GUP-fast at the old address
 *	-----------------------------		---------------------------
 *	v = load(old PTE)			v' = load(old PTE)
 *	store(old PTE, 0)			try_get: CAS refcount + n unless 0
 *	store-release(new PTE, v)		re-read PMD and old PTE (seq_cst)
 *						  changed: put, stop (the slow path
 *						  waits for mmap_lock, then finds the
 *						  page at its new place or nothing)
 *
 *    The move never drops a reference: the mapping's reference and mapcount pass from the old
 *    entry to the new one, so the folio's count is never zero while either entry maps it and
 *    the try_get cannot meet a freed frame because of the move. Coherence on the old PTE's
 *    location alone orders the walker's re-read against the clear: the re-read reads v (the
 *    pin was taken while the page was mapped at the old address, which is a pin older than
 *    the move - legal, as a pin older than munmap is) or something newer, and the walker
 *    backs off. A walker at the new address reads the entry published with a release store
 *    after the old one was cleared, so no walker sees the page mapped at both places. PTE and
 *    PMD tables are only allocated here, never freed before the section that emptied them
 *    frees them through RCU (munmap's way), so a walk never reaches freed memory.
 *
 * Locks: the call holds for write, as one run, the ranges from the lowest to the highest
 * address it can touch (old and target ranges both, widened to their edge VMAs:
 * mmap_write_lock_range(); mmap_lock (W) in Linux's design, which has one range). A target the
 * call must choose needs a search, and so every range (pm__get_unmapped_area(); the range
 * design's freedom in a non-fixed address covers mremap's: its arena first), and a VMA count
 * that asks for every range does too: both answer -EAGAIN, and the call starts again holding
 * them all, resuming where it was (what is done stays done: a shrunk tail, a moved VMA).
 *
 * pinmm has no mmu notifier that hears of invalidations (pm_mm_notifier has only ->release):
 * munmap tells none either, so a move tells none.
 */
#include "mm/range.h"

#define MREMAP_KNOWN (PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP)

enum mremap_type { MREMAP_NO_RESIZE, MREMAP_SHRINK, MREMAP_EXPAND };

/* One call's state, threaded through it (Linux's vma_remap_struct), kept across a restart. */
struct vrm {
	unsigned long addr, old_len, new_len, new_addr;
	unsigned flags;
	enum mremap_type type;
	bool all;		/* every range held (asked for by -EAGAIN) */
	unsigned long vm_flags;	/* the VMA's: VM_LOCKED's growth is populated after */
	/* the several-VMA move: where it is */
	unsigned long cursor, target, last_end, first;
	bool seen;
};

static bool implies_new_addr(const struct vrm *v)
{
	return v->flags & (PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP);
}

/* The lowest and highest address the call may touch. */
static void vrm_span(const struct vrm *v, unsigned long *lo, unsigned long *hi)
{
	unsigned long e = v->addr + max(v->old_len, v->new_len);

	*lo = v->addr;
	*hi = e < v->addr ? PM_TASK_SIZE : e;
	if (implies_new_addr(v)) {
		*lo = min(*lo, v->new_addr);
		*hi = max(*hi, v->new_addr + v->new_len);
	}
	/* hugetlb lengths grow to whole 2 MiB pages under the lock */
	*hi = min(ALIGN_UP(*hi, PMD_SIZE), PM_TASK_SIZE);
	if (*lo >= *hi)
		*lo = *hi - PAGE_SIZE;
}

/* A target the call chooses: Linux's get_unmapped_area, with the range design's freedom. */
static long mremap_area(struct pm_mm *mm, struct vrm *v, struct pm_vma *vma, unsigned long hint)
{
	unsigned long len = v->new_len, align = PAGE_SIZE;

	if (is_vm_hugetlb_page(vma))
		align = PMD_SIZE;
	else if (!vma->file && !hint && !(len & ~PMD_MASK))
		align = PMD_SIZE; /* anonymous lengths of whole 2 MiB: THP alignment */
	return pm__get_unmapped_area(mm, hint, len, align); /* -EAGAIN: hold every range */
}

/* ---- moving page-table entries ---- */

/* How far the move of [@old, @end) can go from @old in one step: within one PMD span at both
 * the old and the new address. */
static unsigned long move_extent(unsigned long old, unsigned long new, unsigned long end)
{
	unsigned long e = min(end - old, ((old + PMD_SIZE) & PMD_MASK) - old);

	return min(e, ((new + PMD_SIZE) & PMD_MASK) - new);
}

/* Move the present PTEs of [@old, @old + @len) (one PTE table) to @new (one PTE table, every
 * entry empty). Return: whether one of them mapped an anonymous page (not the zero page). */
static bool move_ptes(struct pm_mm *mm, pm_entry_t *old_pmdp, unsigned long old,
		      pm_entry_t *new_pmdp, unsigned long new, unsigned long len)
{
	struct pm_spinlock *old_ptl, *new_ptl;
	pm_entry_t *src, *dst;
	bool anon = false;

	src = pm__pte_offset_map_lock(mm, old_pmdp, old, &old_ptl);
	if (!src)
		return false;
	/* The new table is ours alone (mmap_lock (W), no VMA there a fault could use). */
	pm_bug_on(!pmd_table(pmdp_get(new_pmdp)));
	dst = entry_table(mm->m, pmdp_get(new_pmdp).val) + pte_index(new);
	new_ptl = &table_page(mm->m, dst)->ptl;
	if (new_ptl != old_ptl)
		pm__ptl_lock(new_ptl); /* two PTLs of one mm: only a writer of the mm nests them */
	for (unsigned long n = len >> PAGE_SHIFT; n; n--, src++, dst++) {
		pte_t pte = ptep_get(src);

		if (pte_none(pte))
			continue;
		pm_assert(pte_none(ptep_get(dst)));
		if (pte_present(pte) && !pte_special(pte) &&
		    folio_test_anon(page_folio(pfn_to_page(mm->m, pte_pfn(pte)))))
			anon = true;
		pte_clear(src);		/* first the old entry goes (see the top comment) */
		set_pte(dst, pte);	/* then the new one appears */
	}
	if (new_ptl != old_ptl)
		pm_spin_unlock(new_ptl);
	pm_spin_unlock(old_ptl);
	return anon;
}

/* Move the PMD leaf at @old_pmdp to the empty @new_pmdp, with its deposit (THP). */
static bool move_huge_pmd(struct pm_mm *mm, pm_entry_t *old_pmdp, pm_entry_t *new_pmdp)
{
	struct pm_spinlock *old_pml = pm__pmd_lockptr(mm, old_pmdp);
	struct pm_spinlock *new_pml = pm__pmd_lockptr(mm, new_pmdp);
	struct pm_folio *folio;
	pmd_t pmd;

	pm__ptl_lock(old_pml);
	if (new_pml != old_pml)
		pm__ptl_lock(new_pml);
	pm_assert(pmd_none(pmdp_get(new_pmdp)));
	pm_bug_on(!pmd_leaf(pmdp_get(old_pmdp)));
	pmd = pmdp_get_and_clear(old_pmdp);
	folio = page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)));
	if (!folio_test_hugetlb(folio) && new_pml != old_pml)
		pm__pgtable_deposit(mm, new_pmdp, pm__pgtable_withdraw(mm, old_pmdp, folio));
	set_pmd(new_pmdp, pmd);
	if (new_pml != old_pml)
		pm_spin_unlock(new_pml);
	pm_spin_unlock(old_pml);
	return folio_test_anon(folio) && !folio_is_zero(folio);
}

/*
 * move_page_tables() - move the entries of [@old, @old + @len) to @new, whose tables
 * prepare_tables() made. Needs no memory, never fails. Context: mmap_lock (W), both VMAs
 * write-locked, the object's i_mmap lock if there is one. Return: whether an anonymous page
 * moved (the VMA was faulted: its pgoff is kept, as Linux keeps it once there is an anon_vma).
 */
static bool move_page_tables(struct pm_mm *mm, unsigned long old, unsigned long new,
			     unsigned long len)
{
	unsigned long end = old + len, ext;
	bool anon = false;

	mmap_assert_write_locked(mm);
	for (; old < end; old += ext, new += ext) {
		pm_entry_t *old_pmdp = pm__pmd_lookup(mm, old), *new_pmdp;
		pmd_t pmd;

		ext = move_extent(old, new, end);
		if (!old_pmdp)
			continue;
		pmd = pmdp_get(old_pmdp);
		if (pmd_none(pmd))
			continue;
		new_pmdp = pm__pmd_lookup(mm, new);
		pm_bug_on(!new_pmdp); /* prepare_tables() made it */
		/* A hugetlbfs page's migration holds the i_mmap lock we hold: none now. */
		pm_bug_on(is_pmd_migration_entry(pmd));
		if (pmd_leaf(pmd)) {
			pm_bug_on(ext != PMD_SIZE); /* prepare_tables() split the others */
			anon |= move_huge_pmd(mm, old_pmdp, new_pmdp);
		} else {
			anon |= move_ptes(mm, old_pmdp, old, new_pmdp, new, ext);
		}
	}
	return anon;
}

/*
 * prepare_tables() - everything the move of [@old, @old + @len) to @new needs before it: a THP
 * leaf that cannot move whole is split; the PMD slot of every leaf that can, and the PTE table
 * of every piece that moves at PTE level, are allocated. Return: 0, or -ENOMEM (what was
 * allocated lies in the target's gap and is freed with it).
 */
static int prepare_tables(struct pm_mm *mm, unsigned long old, unsigned long new,
			  unsigned long len)
{
	unsigned long end = old + len, ext;

	for (; old < end; old += ext, new += ext) {
		pm_entry_t *old_pmdp = pm__pmd_lookup(mm, old), *new_pmdp;
		pmd_t pmd;

		ext = move_extent(old, new, end);
		if (!old_pmdp)
			continue;
		pmd = pmdp_get(old_pmdp);
		if (pmd_leaf(pmd) && ext != PMD_SIZE) {
			pm__split_huge_pmd(mm, old_pmdp); /* its deposit: never fails */
			pmd = pmdp_get(old_pmdp);
		}
		if (pmd_none(pmd))
			continue;
		new_pmdp = pm__pmd_alloc(mm, new);
		if (!new_pmdp)
			return -ENOMEM;
		/* Only a PTE table moves at PTE level. Read without the i_mmap lock, a hugetlbfs
		 * page's entry may be another mm's migration entry: a leaf or none again by the
		 * time move_page_tables() holds that lock, never a table. */
		if (pmd_table(pmd) && pm__pte_alloc(mm, new_pmdp, false))
			return -ENOMEM;
	}
	return 0;
}

/* ---- one VMA ---- */

/* The VMA that holds @addr, or NULL (Linux's vma_lookup). */
static struct pm_vma *vma_lookup(struct pm_mm *mm, unsigned long addr)
{
	struct pm_vma *vma = pm__find_vma(mm, addr);

	return vma && vma->start <= addr ? vma : NULL;
}

/* Linux's align_hugetlb(): whole 2 MiB pages, aligned addresses, no growth. */
static bool align_hugetlb(struct vrm *v)
{
	v->old_len = ALIGN_UP(v->old_len, PMD_SIZE);
	v->new_len = ALIGN_UP(v->new_len, PMD_SIZE);
	return !(v->addr & ~PMD_MASK) && !(v->new_addr & ~PMD_MASK) && v->new_len <= v->old_len;
}

/* Linux's check_prep_vma(): the checks that need the VMA. Return: 0 or -errno. */
static long check_prep_vma(struct vrm *v, struct pm_vma *vma)
{
	unsigned long pgoff;

	if (!vma)
		return -EFAULT;
	if (is_vm_hugetlb_page(vma) && !align_hugetlb(v))
		return -EINVAL;
	v->type = v->old_len == v->new_len ? MREMAP_NO_RESIZE :
		  v->old_len > v->new_len ? MREMAP_SHRINK : MREMAP_EXPAND;
	if (!implies_new_addr(v))
		v->new_addr = v->addr;
	if (v->type != MREMAP_EXPAND && !implies_new_addr(v))
		return 0;
	/* A zero old_len duplicates a shared mapping; a private one it cannot. */
	if (!v->old_len && !(vma->flags & (VM_SHARED | VM_MAYSHARE)))
		return -EINVAL;
	/* hugetlbfs sets VM_DONTEXPAND: no DONTUNMAP there */
	if ((v->flags & PM_MREMAP_DONTUNMAP) && is_vm_hugetlb_page(vma))
		return -EINVAL;
	/* A move that shrinks first unmaps the tail (mremap_to's shrink_vma), so only what
	 * moves must lie in the VMA: the tail may span others (remap_is_valid runs after). */
	if ((v->type == MREMAP_SHRINK ? v->new_len : v->old_len) > vma->end - v->addr)
		return -EFAULT;
	if (v->new_len == v->old_len)
		return 0;
	pgoff = vma_pgoff(vma, v->addr);
	if (pgoff + (v->new_len >> PAGE_SHIFT) < pgoff)
		return -EINVAL;
	if (is_vm_hugetlb_page(vma))
		return -EFAULT; /* VM_DONTEXPAND */
	return 0;
}

/* Take the VMAs of [@start, @end) out of the tree; with memory short, try again (an undo must
 * not fail: the tree's spare nodes were just given back by the store it undoes). */
static struct pm_vma *detach_must(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_vma *vma;
	int err;

	while (!(vma = pm__vma_detach_range(mm, start, end, &err)) && err)
		pm_warn_once(true, "mremap: retrying an undo without memory");
	return vma;
}

/* The remnants of the moved range's source VMA, [@s, @addr) and [@old_end, @e), take @anon
 * (pm__vma_copy_anon), each write-locked first. */
static void remnants_take_anon(struct pm_mm *mm, unsigned long s, unsigned long addr,
			       unsigned long old_end, unsigned long e, unsigned long anon)
{
	struct pm_vma *r[2] = { s < addr ? vma_lookup(mm, s) : NULL,
				old_end < e ? vma_lookup(mm, old_end) : NULL };

	for (int i = 0; i < 2; i++) {
		if (!r[i])
			continue;
		pm__vma_start_take_anon(mm, r[i]);
		if (!pm__vma_anon_vma(r[i]))
			atomic_store_relaxed(&r[i]->xanon_vma, anon);
	}
}

/*
 * move_vma() - move [v->addr, v->addr + v->old_len) of @vma to v->new_addr (free, or made so
 * by the caller), v->new_len long (old_len == new_len, or a duplicate: old_len 0). Return: the
 * new address, or -errno with the old mapping whole (a split VMA or THP at most).
 */
static long move_vma(struct pm_mm *mm, struct vrm *v, struct pm_vma *vma)
{
	unsigned long addr = v->addr, old_end = addr + v->old_len;
	unsigned long new_addr = v->new_addr, new_end = new_addr + v->new_len;
	bool dontunmap = v->flags & PM_MREMAP_DONTUNMAP;
	unsigned long src_start = vma->start, src_end = vma->end, src_anon = 0;
	struct pm_hugetlb_resv *hresv = NULL;
	struct pm_vma *new, *gone;
	long err;

	mmap_assert_write_locked(mm);
	if (mm_map_count(mm) >= PM_MAX_MAP_COUNT - 3)
		return -ENOMEM; /* prep_move_vma */
	if (v->old_len && !dontunmap)
		src_anon = pm__vma_copy_anon(mm, vma, new_addr, new_end,
					     vma->file ? vma_pgoff(vma, addr) : new_addr >> PAGE_SHIFT);
	/* The range that moves becomes a VMA of its own; with DONTUNMAP the source VMA stays
	 * whole (move_vma splits only to unmap: unmap_source_vma). */
	if (v->old_len && !dontunmap) {
		if (vma->start < addr) {
			err = pm__split_vma(mm, vma, addr, PM_SPLIT_CHARGE);
			if (err)
				return err;
			vma = pm__vma_next(mm, vma);
		}
		if (vma->end > old_end) {
			err = pm__split_vma(mm, vma, old_end, PM_SPLIT_CHARGE);
			if (err)
				return err;
		}
	}
	/* No fault under the VMA's own lock from here on: none may fill an entry that
	 * prepare_tables() found empty (Linux's move_vma write-locks it first too). */
	pm__vma_start_change(mm, vma);
	if (vma->hresv && v->old_len) {
		hresv = pm__hugetlb_resv_alloc_moved(mm->m, v->new_len >> PMD_SHIFT, new_addr);
		if (!hresv)
			return -ENOMEM;
	}
	new = pm__vma_alloc(mm);
	if (!new) {
		err = -ENOMEM;
		goto fail;
	}
	new->start = new_addr;
	new->end = new_end;
	new->flags = vma->flags;
	new->pgoff = vma_pgoff(vma, addr);
	new->file = vma->file;
	atomic_store_relaxed(&new->xanon_vma, pm__vma_anon_vma(vma)); /* copy_vma */
	if (new->file)
		pm__shmem_get(new->file);
	err = prepare_tables(mm, addr, new_addr, v->old_len);
	if (!err)
		err = pm__vma_insert(mm, new);
	if (err) {
		pm__vma_free_gap_tables(mm, new_addr, new_end);
		pm__vma_free(new); /* never in the tree: drops the file reference */
		goto fail;
	}
	/* A fork child's VMA that lost a page to its parent stays one (HPAGE_RESV_UNMAPPED). */
	atomic_store_relaxed(&new->xhugetlb_unmapped, atomic_load_relaxed(&vma->xhugetlb_unmapped));
	pm__vma_link_file(new);

	if (vma->file)
		pm__shmem_map_lock(vma->file);
	move_page_tables(mm, addr, new_addr, v->old_len);
	if (vma->file)
		pm__shmem_map_unlock(vma->file);
	/* copy_vma: an anonymous VMA without an anon_vma takes the new address as its pgoff,
	 * so that it may merge there; one with an anon_vma keeps its own. */
	if (!vma->file && !pm__vma_anon_vma(vma))
		new->pgoff = new_addr >> PAGE_SHIFT;

	if (!dontunmap && v->old_len) {
		int derr;

		gone = pm__vma_detach_range(mm, addr, old_end, &derr);
		if (!gone) {
			/* No memory for the tree: everything goes back, the new VMA goes. */
			if (vma->file)
				pm__shmem_map_lock(vma->file);
			move_page_tables(mm, new_addr, addr, v->old_len);
			if (vma->file)
				pm__shmem_map_unlock(vma->file);
			gone = detach_must(mm, new_addr, new_end);
			pm__unmap_region(mm, gone, new_addr, new_end);
			err = -ENOMEM;
			goto fail;
		}
		pm__hugetlb_resv_move(vma->hresv, addr, hresv);
		pm__unmap_region(mm, gone, addr, old_end);
		if (src_anon)
			remnants_take_anon(mm, src_start, addr, old_end, src_end, src_anon);
	} else if (v->old_len) {
		pm__hugetlb_resv_move(vma->hresv, addr, hresv);
	}
	new->hresv = hresv;
	pm__vma_settle(mm, pm__vma_try_merge(mm, new));
	if (dontunmap && v->old_len) {
		/* dontunmap_complete, after copy_vma merged: VM_LOCKED goes from the whole VMA
		 * that now holds the source - the new one too where an unfaulted source took it
		 * in - and its anon_vma when exactly the source moved. */
		vma = pm__find_vma(mm, addr);
		pm__vma_start_change(mm, vma);
		vma->flags &= ~VM_LOCKED;
		if (vma->start == addr && vma->end == old_end)
			pm__vma_anon_clear(vma);
	}
	return (long)new_addr;
fail:
	pm__hugetlb_resv_put(hresv);
	return err;
}

/* Linux's mremap_to(): a move to v->new_addr (fixed, or a DONTUNMAP hint). */
static long mremap_to(struct pm_mm *mm, struct vrm *v, struct pm_vma *vma)
{
	long err;

	if (v->flags & PM_MREMAP_FIXED) {
		if (v->new_addr < PM_USER_MIN)
			return -EPERM;
		err = pm__do_munmap(mm, v->new_addr, v->new_addr + v->new_len);
		if (err)
			return err;
		vma = vma_lookup(mm, v->addr);
		if (!vma)
			return -EFAULT;
	}
	if (v->type == MREMAP_SHRINK) {
		err = pm__do_munmap(mm, v->addr + v->new_len, v->addr + v->old_len);
		if (err)
			return err;
		v->old_len = v->new_len; /* kept if the call starts again */
		v->type = MREMAP_NO_RESIZE;
		vma = vma_lookup(mm, v->addr);
		if (!vma)
			return -EFAULT;
	}
	if (!(v->flags & PM_MREMAP_FIXED)) {
		long a = mremap_area(mm, v, vma, v->new_addr);

		if (a < 0)
			return a;
		v->new_addr = (unsigned long)a;
	}
	return move_vma(mm, v, vma);
}

/* Grow @vma's end by @delta: a VMA for the extension, merged into it (vma_merge_extend). */
static long expand_in_place(struct pm_mm *mm, struct pm_vma *vma, unsigned long delta)
{
	struct pm_vma *ext = pm__vma_alloc(mm);
	long err;

	if (!ext)
		return -ENOMEM;
	ext->start = vma->end;
	ext->end = vma->end + delta;
	ext->flags = vma->flags;
	/* vma_merge_extend merges a new range with vma's own anon_vma, which no VMA's chain
	 * holds yet: so it joins the VMA after it too, if that one has none, even where fork
	 * gave vma its anon_vma (is_mergeable_anon_vma's first case, without a source). */
	atomic_store_relaxed(&ext->xanon_vma, pm__vma_anon_vma(vma) & ~PM_ANON_VMA_FORKED);
	ext->pgoff = vma_pgoff(vma, vma->end);
	ext->file = vma->file;
	if (ext->file)
		pm__shmem_get(ext->file);
	err = pm__vma_insert(mm, ext);
	if (err) {
		pm__vma_free(ext);
		return err;
	}
	pm__vma_link_file(ext);
	pm__vma_settle(mm, pm__vma_try_merge(mm, ext));
	return 0;
}

/* Linux's mremap_at(): resize where it is, or move anywhere (MREMAP_MAYMOVE). */
static long mremap_at(struct pm_mm *mm, struct vrm *v, struct pm_vma *vma)
{
	unsigned long delta = v->new_len - v->old_len, end;
	long err;

	switch (v->type) {
	case MREMAP_NO_RESIZE:
		return (long)v->addr;
	case MREMAP_SHRINK:
		err = pm__do_munmap(mm, v->addr + v->new_len, v->addr + v->old_len);
		return err ? err : (long)v->addr;
	case MREMAP_EXPAND:
		break;
	}
	end = vma->end + delta;
	if (vma->end - v->addr == v->old_len && end > vma->end && end <= PM_TASK_SIZE &&
	    !pm__find_vma_intersection(mm, vma->end, end)) {
		err = expand_in_place(mm, vma, delta);
		return err ? err : (long)v->addr;
	}
	if (!(v->flags & PM_MREMAP_MAYMOVE))
		return -ENOMEM;
	err = mremap_area(mm, v, vma, 0);
	if (err < 0)
		return err;
	v->new_addr = (unsigned long)err;
	return move_vma(mm, v, vma);
}

/*
 * remap_move() - Linux 6.17's move of every VMA in [addr, addr + len) by one MREMAP_FIXED call
 * of equal lengths: the first must hold addr; each is moved in turn (split at the range's
 * edges), the gaps between them kept. Resumable: a restart continues where it stopped.
 */
static long remap_move(struct pm_mm *mm, struct vrm *v)
{
	unsigned long start = v->addr, end = v->addr + v->old_len;
	struct pm_vma *vma;

	if (!v->seen) {
		v->cursor = start;
		v->target = v->new_addr;
	}
	while (v->cursor < end && (vma = pm__find_vma(mm, v->cursor)) && vma->start < end) {
		unsigned long s = max(vma->start, v->cursor), e = min(end, vma->end);
		unsigned long off = v->seen ? vma->start - v->last_end : 0;
		struct vrm piece = { .addr = s, .old_len = e - s, .new_len = e - s,
				     .new_addr = v->target + off, .flags = v->flags, .all = v->all };
		long res;

		if (!v->seen && start < vma->start)
			return -EFAULT;
		res = check_prep_vma(&piece, vma);
		if (!res)
			res = mremap_to(mm, &piece, vma);
		if (res < 0)
			return res;
		if (!v->seen)
			v->first = (unsigned long)res;
		v->seen = true;
		v->last_end = e;
		v->cursor = e;
		v->target = (unsigned long)res + piece.new_len;
	}
	return v->seen ? (long)v->first : -EFAULT;
}

static long do_mremap_locked(struct pm_mm *mm, struct vrm *v)
{
	struct pm_vma *vma;
	long res;

	/* check_mremap_params' VMA-count check (it reads the count without the lock) */
	if (implies_new_addr(v) && !v->seen && mm_map_count(mm) + 2 >= PM_MAX_MAP_COUNT - 3)
		return -ENOMEM;
	if ((v->flags & PM_MREMAP_FIXED) && v->old_len == v->new_len)
		return remap_move(mm, v);
	vma = vma_lookup(mm, v->addr);
	res = check_prep_vma(v, vma);
	if (res)
		return res;
	v->vm_flags = vma->flags;
	return implies_new_addr(v) ? mremap_to(mm, v, vma) : mremap_at(mm, v, vma);
}

long pm_mremap(struct pm_mm *mm, unsigned long addr, unsigned long old_len,
	       unsigned long new_len, unsigned flags, unsigned long new_addr)
{
	struct vrm v = { .addr = addr, .flags = flags, .new_addr = new_addr };
	unsigned long lo, hi;
	long res;

	/* check_mremap_params, in its order */
	if (pm__mm_bad(mm) || (flags & ~MREMAP_KNOWN) || (addr & ~PAGE_MASK))
		return -EINVAL;
	v.old_len = ALIGN_UP(old_len, PAGE_SIZE);
	v.new_len = ALIGN_UP(new_len, PAGE_SIZE);
	if (!v.new_len || v.new_len > PM_TASK_SIZE)
		return -EINVAL;
	if (implies_new_addr(&v)) {
		if (new_addr > PM_TASK_SIZE - v.new_len || (new_addr & ~PAGE_MASK))
			return -EINVAL;
		if (!(flags & PM_MREMAP_MAYMOVE))
			return -EINVAL;
		if ((flags & PM_MREMAP_DONTUNMAP) && v.old_len != v.new_len)
			return -EINVAL;
		if (addr + v.old_len > new_addr && new_addr + v.new_len > addr)
			return -EINVAL; /* the ranges overlap */
	}
	if (addr >= PM_TASK_SIZE)
		return -EFAULT; /* no VMA there */
	for (;;) {
		vrm_span(&v, &lo, &hi);
		mmap_write_lock_range_or_all(mm, lo, hi, v.all);
		res = do_mremap_locked(mm, &v);
		mmap_write_unlock(mm);
		if (res != -EAGAIN || v.all)
			break;
		v.all = true; /* a search or the VMA count asks for every range */
	}
	/* A locked VMA's new part is faulted in, as Linux's mm_populate after the call; its
	 * failures are not mremap's. (The several-VMA move keeps lengths: nothing new.) */
	if (res >= 0 && (v.vm_flags & VM_LOCKED) && v.new_len > v.old_len)
		pm__mm_populate(mm, (unsigned long)res + v.old_len, v.new_len - v.old_len,
				v.vm_flags);
	return res;
}
