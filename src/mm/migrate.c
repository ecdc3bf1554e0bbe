// SPDX-License-Identifier: MIT
/*
 * migrate.c - page migration (Linux's mm/migrate.c, for mbind(MPOL_MF_MOVE_ALL) and
 * move_pages()), the migration entries it leaves in the page tables meanwhile, and the wait
 * of a fault that finds one.
 *
 * What moves. A small anonymous folio mapped by one PTE of the mm being migrated (its
 * mapcount is 1); an anonymous THP of this mm alone, whole (migrate_one_thp: a PMD mapping
 * is split into PTEs first, since pinmm has no PMD migration entry, and the same steps run
 * over its 512 PTEs under one PTL); and a small page-cache folio of a shmem object with all
 * its mappings, which the object's i_mmap list finds (migrate_shmem_folio). pinmm keeps no
 * anonymous rmap (Linux's anon_vma), so an anonymous folio that fork shares with another mm
 * cannot have its other mappings found, and is refused as "could not be moved". A THP
 * without a free 2 MiB block in the target is split and its pages moved one by one
 * (split_thp, migrate_pages' split on -ENOMEM; MADV_FREE of part of a THP splits it with
 * the same steps, pm__split_anon_thp(), mapping its all-zero pages to the zero page as
 * Linux's split does; migration's split keeps them, a difference no result depends on:
 * the pages still read zeros). A hugetlb folio moves whole to a free pool
 * page (migrate_hugetlb_private, migrate_hugetlb_shared), behind a PMD migration entry; their
 * comments and docs/architecture.md ("The path of a migration") have the safety argument: a
 * pin refuses, the count is frozen before the copy, the PMD walkers that can meet the entry
 * wait, fall back, clear it or change its bits. Each refusal is in pgmigrate_fail; pinned
 * ones in migrate_pinned_skips too.
 *
 * A page-cache folio goes the Linux way of file folios: every mapping becomes a migration
 * entry (under each PTL, found under the object's i_mmap lock, which keeps those VMAs and
 * their tables), then the cache freezes the folio at its expected count - its own reference
 * and the migration's - with a compare-and-swap to 0 under the leaf's lock
 * (folio_ref_freeze), copies it and puts the copy in the slot (pm__shmem_migrate_folio). A
 * frozen folio refuses every new reference: the lockless lookup retries until the slot
 * changes, GUP-fast fails its add-unless-zero. A pin, or any reference a fault or lookup
 * took before the freeze, makes the CAS fail, and every mapping is put back. Truncation
 * takes the slot under the same leaf lock: before the freeze (the freeze then finds the slot
 * changed) or after (it removes the copy); its zaps of the mappings wait for the i_mmap lock.
 *
 * The steps for one folio, as migrate_pages() takes them:
 *  1. A new frame in the target (allocated first, with nothing held: an allocation may wait
 *     for an RCU grace period, and no migration entry waits with it).
 *  2. Unmap (try_to_migrate_one): under the PTL, the PTE is exchanged for a migration entry
 *     (a sequentially consistent RMW: the TLB flush of Linux). If the page is AnonExclusive,
 *     folio_try_share_anon_rmap_pte's test follows: a page that may be pinned puts the PTE
 *     back as it was and is refused, nothing else changed. Otherwise the page stops being
 *     exclusive (the entry remembers it was), and the mapping's mapcount and reference go.
 *  3. The count after unmap (folio_migrate_mapping's expected count): a small anonymous
 *     folio outside any cache is held only by the migration's own reference now; any other
 *     (a pin of a page that was not exclusive, a get, a transient GUP-fast reference) and
 *     the migration entry is turned back into the old mapping: -EAGAIN.
 *  4. The data is copied, the new folio takes the old one's flags, and the entry is replaced
 *     by a PTE of the new frame with the old bits (remove_migration_pte); waiters are woken.
 * -EAGAIN is retried, NR_MAX_MIGRATE_PAGES_RETRY (10) times in all, as Linux retries it;
 * then the folio counts as not moved.
 *
 * Why it is safe. Migration holds the mm's lock for read over the range (mmap_read_lock_range()):
 * munmap, mprotect, mremap and fork, which hold it for write (or every range), never run
 * beside it in this mm, so they never see a migration entry. What does run beside it:
 *  - GUP-fast. Its speculative reference (pm__folio_try_get, an SC RMW) and its re-read of
 *    the PTE (SC) pair with our exchange of the PTE (SC) and our reads of the pin and
 *    reference counts (SC), a store-buffering pattern: either GUP-fast re-reads the entry
 *    we wrote and drops its reference (Linux's try_grab_folio_fast re-check), or we see its
 *    reference or pin - at step 2 (pinned AnonExclusive page: refused) or at step 3 (the
 *    extra reference: restored, retried). So a pin never lands on a frame that is being
 *    copied from, and no pin is ever of a stale frame: the old frame is freed only when its
 *    last reference goes, after every PTE names the new one. A GUP-fast walker that loads
 *    the migration entry finds it not present and falls back to the slow path, whose fault
 *    waits.
 *  - Faults, under the VMA's read lock or mmap_lock for read. The dispatcher (fault/dispatch.c)
 *    sees the entry, sleeps in pm__migration_entry_wait() until the PTE changes, and looks
 *    again: a real sleep on a condition variable (Linux sleeps on the folio lock in
 *    migration_entry_wait), woken after step 4 or after a restore. The check of the PTE is
 *    made under the wait queue's mutex, which the waker takes after it changed the PTE, so
 *    no wake-up is lost. Handlers that take the PTL (COW) see a non-present entry and return
 *    VM_FAULT_AGAIN to the dispatcher, which then waits.
 *  - MADV_DONTNEED (mmap_lock for read, zap.c) may clear the migration entry: the entry
 *    holds nothing, so the zap drops nothing; step 4 and the restore re-check the PTE under
 *    the PTL and, finding it changed, map nothing: the new folio (or, on a failure, the old
 *    one) goes with the migration's last reference.
 *  - pm_pagemap, pm_mm_maps and pm_mincore (the lock for read) see the entry as a page not
 *    present. pm_machine_check, on a quiescent machine, finds no migration entry, and says
 *    so when it does: every migration ends before the call that began it returns.
 *  - Another migration or compaction of the same folio: the first holds the PTL while it
 *    exchanges the entry; the second then finds a migration entry, not a page, and skips it.
 *
 * Compaction (pm_compact, at the end of the file) has no rmap to go from a frame to its
 * mappings, so it goes the other way: it walks every mm of the machine, each under its lock
 * for read in turn, and migrates the pages it chose by address, each re-checked under the PTL
 * to still map the frame it chose. The mms it walks cannot go away meanwhile: it holds the
 * machine's compact_lock, under which alone an mm leaves the machine's list (lifecycle.c), and
 * which nobody takes while holding an mm's lock. A THP fault that wants compaction (defrag=madvise)
 * asks pm_fault() to run it after the fault dropped its locks (VM_FAULT_COMPACT), never from
 * inside the fault.
 */
#include "mm/range.h"

#define NR_MAX_MIGRATE_PAGES_RETRY 10

/* The sleepers on migration entries, hashed by the old frame (Linux's folio wait table). */
#define MIGRATION_WAIT_TABLE 64
static struct migration_wq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
} migration_wq[MIGRATION_WAIT_TABLE];
static pthread_once_t migration_wq_once = PTHREAD_ONCE_INIT;

static void migration_wq_init(void)
{
	for (unsigned i = 0; i < MIGRATION_WAIT_TABLE; i++) {
		pthread_mutex_init(&migration_wq[i].lock, NULL);
		pthread_cond_init(&migration_wq[i].cond, NULL);
	}
}

static struct migration_wq *wq_of(unsigned long pfn)
{
	pthread_once(&migration_wq_once, migration_wq_init);
	return &migration_wq[(pfn * 0x9e3779b97f4a7c15UL) >> 58];
}

/* Wake whoever waits on the migration entry of @pfn: after the PTE changed. */
static void migration_wake(unsigned long pfn)
{
	struct migration_wq *q = wq_of(pfn);

	pthread_mutex_lock(&q->lock);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

/**
 * pm__migration_entry_wait() - sleep until *@ptep is no longer the migration entry @entry.
 *
 * Context: the fault path (mmap_lock or the VMA's read lock, which keep the table); no
 * spinlock held.
 */
void pm__migration_entry_wait(struct pm_mm *mm, pm_entry_t *ptep, pte_t entry)
{
	struct migration_wq *q = wq_of(pte_pfn(entry));

	fault_assert_held(mm);
	pthread_mutex_lock(&q->lock);
	while (pte_same(ptep_get(ptep), entry))
		pthread_cond_wait(&q->cond, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

/* Tests only: called between unmap and copy of a small anonymous folio, nothing locked. */
void (*pm__migrate_hook)(struct pm_mm *mm, unsigned long addr);
/* Tests only: called between the unmap of a page-cache folio and its freeze, under the
 * object's i_mmap lock. */
void (*pm__shmem_migrate_hook)(struct pm_shmem *f, unsigned long index);

static unsigned target_alloc_flags(int target)
{
	switch (target) {
	case PM_MIGRATE_AWAY_MOVABLE:
		return PM_ALLOC_NO_MOVABLE_ZONE;
	case PM_MIGRATE_TO_MOVABLE:
		return PM_ALLOC_MOVABLE_ZONE;
	default:
		return 0;
	}
}

/* Is a folio at @pfn already where @target wants it (move_pages: already on the node)? */
static bool already_there(struct pm_machine *m, unsigned long pfn, int target)
{
	if (target == PM_MIGRATE_AWAY_MOVABLE)
		return !pfn_in_movable_zone(m, pfn);
	if (target == PM_MIGRATE_TO_MOVABLE)
		return pfn_in_movable_zone(m, pfn);
	return false;
}

enum migrate_result {
	MIGRATE_DONE,		/* moved */
	MIGRATE_SKIP,		/* nothing to move: no page, the zero page, already in place */
	MIGRATE_AGAIN,		/* transient: retried */
	MIGRATE_PINNED,		/* pinned or another extra reference: retried, then counted */
	MIGRATE_REFUSED,	/* a kind pinmm cannot move: counted at once */
	MIGRATE_NOMEM,		/* no frame in the target: counted */
};

/*
 * Put migration entry @entry at @addr back as a mapping of @page of @folio, if it is still
 * there (MADV_DONTNEED may have zapped it), with the bits the entry has now (an mprotect of
 * another mm may have changed them: a shmem migration holds no lock of that mm). Only one
 * migration of a frame runs at a time, so a migration entry naming the same frame is ours.
 * The mapping's mapcount and reference come back with it. Return: whether it was mapped.
 */
static bool remove_migration_pte_page(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
				      pte_t entry, struct pm_folio *folio, struct pm_page *page)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *ptl;
	pm_entry_t *ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	bool mapped = false;

	if (ptep) {
		pte_t cur = ptep_get(ptep);

		/* Ours, maybe with the protection an mprotect of another mm gave it since. */
		if (is_migration_entry(cur) && pte_pfn(cur) == pte_pfn(entry)) {
			folio_get_refs(folio, 1);
			atomic_add_relaxed(&page->xmapcount, 1);
			if (is_migration_entry_exclusive(cur))
				page_set(page, PG_anon_exclusive);
			set_pte(ptep, migration_entry_to_pte(cur, page_to_pfn(m, page)));
			mapped = true;
		}
		pm_spin_unlock(ptl);
	}
	migration_wake(pte_pfn(entry));
	return mapped;
}

/* The same for a small folio. */
static bool remove_migration_pte(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
				 pte_t entry, struct pm_folio *folio)
{
	return remove_migration_pte_page(mm, pmdp, addr, entry, folio, &folio->page);
}

/*
 * Does a page table map a page of @folio, which a PMD leaf maps whole? Then another mm maps it
 * too (a fork's parent whose COW split its leaf): Linux's folio_maybe_mapped_shared(). Such a
 * leaf is left as it is: the PTE step below would refuse the folio after the leaf had been
 * split for nothing. A racy look, as Linux's.
 */
static bool thp_pte_mapped(struct pm_folio *folio)
{
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
		if (atomic_load_relaxed(&folio_page(folio, i)->xmapcount))
			return true;
	return false;
}

/*
 * The unmap both moves of a THP start with (an anonymous order-9 folio of this mm alone,
 * mapped whole at @haddr: by a PMD leaf, or by the 512 PTEs of one table). A PMD leaf is split
 * into PTEs first (its deposited table: no allocation) - pinmm has no PMD migration entry
 * (Linux's keeps the PMD mapping). Then, under the PTL, the migration takes its reference,
 * every PTE becomes a migration entry (so GUP-fast and faults keep off), and a pin (pincount,
 * exact for large folios once the folio is out of hot mode) puts everything back. Otherwise
 * each page drops its mapcount and the folio its mappings' references.
 * With @partial, the table may map only some of the folio's pages, each at its own slot
 * (haddr + i pages), so long as no page is mapped anywhere else (a mapped page's mapcount is
 * 1, an unmapped one's 0: the folio is this table's alone); the slots of unmapped pages get
 * no entry (@entry[i].val == 0) and are left alone.
 * Return: MIGRATE_DONE with *@foliop held by the migration's reference alone (besides any
 * transient one) and @old, @entry the 512 entries before and now; or why not, with nothing
 * changed (MIGRATE_PINNED: the PTEs are back, the waiters woken).
 * Context: the mm's lock held for read over @haddr, or the read lock of a VMA that holds the
 * whole span (split_thp()).
 */
static enum migrate_result unmap_thp(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long haddr,
				     struct pm_folio **foliop, pte_t *old, pte_t *entry,
				     bool partial)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *ptl;
	struct pm_folio *folio;
	unsigned long pfn;
	unsigned first, nmapped = 0;
	pm_entry_t *ptep;
	pmd_t pmd;

	fault_assert_held(mm);
	pmd = pmdp_get(pmdp);
	if (pmd_leaf(pmd)) {
		folio = page_folio(pfn_to_page(m, pmd_pfn(pmd)));
		if ((pmd.val & _PAGE_SPECIAL) || !folio_test_anon(folio) ||
		    folio_test_hugetlb(folio) || folio_order(folio) != HPAGE_PMD_ORDER ||
		    atomic_load_relaxed(&folio->page.xentire_mapcount) != 1 ||
		    thp_pte_mapped(folio))
			return MIGRATE_REFUSED;
		if (folio_maybe_dma_pinned(folio)) /* exact: it leaves hot mode to answer */
			return MIGRATE_PINNED; /* refused before anything changes */
		pm__split_huge_pmd_folio(mm, pmdp, folio); /* the folio checked, no other */
		pmd = pmdp_get(pmdp);
	}
	if (!pmd_table(pmd))
		return MIGRATE_SKIP;
	ptep = pm__pte_offset_map_lock(mm, pmdp, haddr, &ptl);
	if (!ptep)
		return MIGRATE_SKIP;
	/* The folio: the first slot's page, or with @partial the first page mapped at all. */
	for (first = 0; first < HPAGE_PMD_NR; first++) {
		old[first] = ptep_get(ptep + first);
		if (!partial || (pte_present(old[first]) && !pte_special(old[first])))
			break;
	}
	if (first == HPAGE_PMD_NR || !pte_present(old[first]) || pte_special(old[first])) {
		pm_spin_unlock(ptl);
		return MIGRATE_SKIP;
	}
	pfn = pte_pfn(old[first]) - first;
	folio = page_folio(pfn_to_page(m, pte_pfn(old[first])));
	if (!folio_test_anon(folio) || folio_order(folio) != HPAGE_PMD_ORDER ||
	    page_to_pfn(m, &folio->page) != pfn ||
	    atomic_load_relaxed(&folio->page.xentire_mapcount) != 0)
		goto refused;
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		int mc = atomic_load_relaxed(&folio_page(folio, i)->xmapcount);

		old[i] = ptep_get(ptep + i);
		entry[i].val = 0;
		if (pte_present(old[i]) && pte_pfn(old[i]) == pfn + i) {
			if (mc != 1)
				goto refused; /* mapped by another mm too */
			entry[i] = make_migration_entry(old[i],
							page_anon_exclusive(folio_page(folio, i)));
			nmapped++;
		} else if (!partial || mc != 0) {
			goto refused; /* partly mapped, or mapped elsewhere too */
		}
	}

	folio_get_refs(folio, 1);
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
		if (entry[i].val)
			atomic_xchg_mb(ptep + i, entry[i].val);
	pm__folio_cool(folio); /* no new pin can come: exact from here (mem/folio_hot.c) */
	if (folio_maybe_dma_pinned(folio)) {
		for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
			if (entry[i].val)
				set_pte(ptep + i, old[i]);
		pm_spin_unlock(ptl);
		folio_put(folio);
		for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
			if (entry[i].val)
				migration_wake(pfn + i);
		return MIGRATE_PINNED;
	}
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		struct pm_page *page = folio_page(folio, i);

		if (!entry[i].val)
			continue;
		if (is_migration_entry_exclusive(entry[i]))
			page_clear(page, PG_anon_exclusive);
		if (pte_dirty(old[i]))
			pm__folio_mark_dirty(folio);
		atomic_sub_relaxed(&page->xmapcount, 1);
	}
	atomic_sub_mb(&folio->page.xrefcount, (int)nmapped);
	pm_spin_unlock(ptl);
	*foliop = folio;
	return MIGRATE_DONE;

refused:
	pm_spin_unlock(ptl);
	return MIGRATE_REFUSED;
}

/* Put the 512 entries of an unmap_thp() back, as mappings of @folio's pages. */
static void remap_thp(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long haddr,
		      const pte_t *entry, struct pm_folio *folio)
{
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
		if (entry[i].val)
			remove_migration_pte_page(mm, pmdp, haddr + i * PAGE_SIZE, entry[i], folio,
						  folio_page(folio, i));
}

/*
 * A THP moves whole to @new, an order-9 folio of the target, and comes back PTE-mapped
 * (unmap_thp()). The refusals are the small folio's, on the whole folio: a pin after the PTEs
 * became migration entries, or any other reference in the count after unmap.
 * Context: the mm's lock held for read over @haddr.
 */
static enum migrate_result migrate_one_thp(struct pm_mm *mm, pm_entry_t *pmdp,
					   unsigned long haddr, struct pm_folio *new)
{
	struct pm_machine *m = mm->m;
	pte_t old[HPAGE_PMD_NR], entry[HPAGE_PMD_NR];
	struct pm_folio *folio;
	enum migrate_result r;

	mmap_assert_locked(mm);
	r = unmap_thp(mm, pmdp, haddr, &folio, old, entry, false);
	if (r != MIGRATE_DONE)
		return r;
	if (atomic_load_mb(&folio->page.xrefcount) != 1) {
		remap_thp(mm, pmdp, haddr, entry, folio);
		folio_put(folio);
		return MIGRATE_PINNED;
	}
	memcpy(page_address(m, &new->page), page_address(m, &folio->page), PMD_SIZE);
	folio_set_flags_new(new, PGF(PG_anon) | (folio_test(folio, PG_dirty) ? PGF(PG_dirty) : 0));
	remap_thp(mm, pmdp, haddr, entry, new);
	folio_put(new);
	folio_put(folio);
	return MIGRATE_DONE;
}

/*
 * A page of a THP being split that try_to_map_unused_to_zeropage() maps to the zero page
 * instead: all zeros, and its VMA not VM_LOCKED. @entry is its migration entry, still at
 * @addr: it becomes the zero page's special PTE with the VMA's protection; the page keeps no
 * mapping (nor its mapcount, nor the mapping's reference), so it is freed with the split's
 * last reference to it. Return: whether it was mapped so.
 */
static bool map_unused_to_zero(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			       unsigned long addr, pte_t entry, struct pm_page *page)
{
	struct pm_machine *m = mm->m;
	const unsigned long *w = page_address(m, page);
	struct pm_spinlock *ptl;
	pm_entry_t *ptep;
	bool done = false;

	if (!vma || addr < vma->start || addr >= vma->end) {
		/* A page outside the VMA the caller holds: only under the mm's lock (a caller
		 * under a VMA lock alone splits only THPs inside its VMA). */
		mmap_assert_locked(mm);
		vma = pm__find_vma(mm, addr);
	}
	if (!vma || vma->start > addr || (vma->flags & VM_LOCKED))
		return false;
	for (unsigned i = 0; i < PAGE_SIZE / sizeof(*w); i++)
		if (w[i])
			return false;
	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (ptep) {
		pte_t cur = ptep_get(ptep);

		/* Ours still: MADV_DONTNEED may have cleared it (then nothing is mapped). */
		if (is_migration_entry(cur) && pte_pfn(cur) == pte_pfn(entry)) {
			pte_t z = mk_pte(page_to_pfn(m, m->zero_page), vma_is_accessible(vma), false,
					 false);

			z.val |= _PAGE_SPECIAL;
			set_pte(ptep, z);
			done = true;
		}
		pm_spin_unlock(ptl);
	}
	migration_wake(pte_pfn(entry));
	return done;
}

/*
 * split_folio() of an anonymous THP this table alone maps (unmap_thp(); with @partial, it may
 * map only some of its pages): try_split_folio for a THP whose migration found no free 2 MiB
 * block in the target (migrate_pages_batch splits it on -ENOMEM and retries its pages as small
 * folios), and MADV_FREE's split of a THP it covers in part (pm__split_anon_thp()). The folio
 * is unmapped as migrate_one_thp's is (unmap_thp(): a pin refuses the split, as
 * can_split_folio's "no extra references"); the count is frozen at the one reference we hold
 * (folio_ref_freeze: a GUP-fast try_get taken before makes the freeze fail and everything is
 * put back); then the 512 pages become small folios, each with our reference (the tails' head
 * pointers cleared before the release store that publishes each count, so a GUP-fast walker
 * that grabs one re-checks page_folio() and the order, try_grab_folio_fast), and each entry is
 * put back as a mapping of its page with the exclusivity it had - or, with @zero_unused, as
 * the zero page where the page holds only zeros (Linux 6.12+'s __folio_split remaps an
 * anonymous folio's pages with RMP_USE_SHARED_ZEROPAGE: try_to_map_unused_to_zeropage). A
 * page left unmapped is freed with our reference. Counted as vmstat counts thp_split_page and
 * thp_split_page_failed. @vma: a VMA the caller holds over the span, whose pages need no
 * lookup to map the zero page, or NULL. Return: MIGRATE_DONE (split), or why not.
 * Context: the mm's lock held for read over @haddr, or the read lock of @vma, which then
 * holds the whole span.
 */
static enum migrate_result split_thp(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				     unsigned long haddr, bool partial, bool zero_unused)
{
	struct pm_machine *m = mm->m;
	pte_t old[HPAGE_PMD_NR], entry[HPAGE_PMD_NR];
	struct pm_folio *folio;
	enum migrate_result r;
	unsigned long flags;
	int ref = 1;

	fault_assert_held(mm);
	r = unmap_thp(mm, pmdp, haddr, &folio, old, entry, partial);
	if (r == MIGRATE_PINNED)
		count_event(m, THP_SPLIT_PAGE_FAILED, 1);
	if (r != MIGRATE_DONE)
		return r;
	/* Freeze at our reference alone; anything else (a transient GUP-fast grab) refuses. */
	if (!atomic_cas_mb(&folio->page.xrefcount, &ref, 0)) {
		remap_thp(mm, pmdp, haddr, entry, folio);
		folio_put(folio);
		count_event(m, THP_SPLIT_PAGE_FAILED, 1);
		return MIGRATE_PINNED;
	}
	/* __split_huge_page: nobody can take a reference now; make 512 small folios. Its leaf
	 * is gone, and a deposit parked on it with it (page 1's word is cleared below). */
	pm_assert(!folio_page(folio, 1)->thp_deposit);
	flags = atomic_load_relaxed(&folio->page.xflags) &
		~(PGF(PG_head) | PGF(PG_anon_exclusive) | PGF(PG_hot) | PGF(PG_hot_leave));
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		struct pm_page *page = folio_page(folio, i);

		page->mapping = NULL;
		page->index = 0;
		atomic_store_relaxed(&page->xorder, 0);
		atomic_store_relaxed(&page->xpincount, 0);
		atomic_store_relaxed(&page->xentire_mapcount, 0);
		atomic_store_relaxed(&page->xflags, flags);
		atomic_store_relaxed(&page->xcompound_head, 0);
	}
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++)
		atomic_store_release(&folio_page(folio, i)->xrefcount, 1); /* ours, per page */
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		struct pm_page *page = folio_page(folio, i);
		unsigned long a = haddr + i * PAGE_SIZE;

		if (entry[i].val &&
		    !(zero_unused && map_unused_to_zero(mm, vma, pmdp, a, entry[i], page)))
			remove_migration_pte_page(mm, pmdp, a, entry[i], page_folio(page), page);
		folio_put(page_folio(page)); /* a page zapped meanwhile is freed here */
	}
	count_event(m, THP_SPLIT_PAGE, 1);
	return MIGRATE_DONE;
}

/**
 * pm__split_anon_thp() - split_folio() of the anonymous THP that the PTE table at *@pmdp
 * (or its PMD leaf) maps at @haddr, for MADV_FREE of part of it: see split_thp(). The folio
 * must be this table's alone (an mm's, mapped nowhere else: Linux's !folio_maybe_mapped_shared)
 * and not pinned; its pages that hold only zeros are mapped to the zero page. @vma: the VMA
 * of the MADV_FREE; under its read lock alone it must hold the whole 2 MiB span.
 * Return: whether it was split. Context: the mm's lock held for read over @haddr, or @vma's
 * read lock.
 */
bool pm__split_anon_thp(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			unsigned long haddr)
{
	fault_assert_held(mm);
	pm_assert(mm_locked(mm) || (haddr >= vma->start && haddr + PMD_SIZE <= vma->end));
	return split_thp(mm, vma, pmdp, haddr, true, true) == MIGRATE_DONE;
}

/*
 * Put PMD migration entry @entry back at *@pmdp as a leaf of the hugetlb @folio, if it is still
 * there (zap may have cleared it), with the bits it has now (an mprotect of another mm may have
 * changed them). The mapping's entire mapcount and reference come back with it.
 */
static void remove_migration_pmd(struct pm_mm *mm, pm_entry_t *pmdp, pmd_t entry,
				 struct pm_folio *folio)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	pmd_t cur;

	pm__ptl_lock(pml);
	cur = pmdp_get(pmdp);
	if (is_pmd_migration_entry(cur) && pmd_pfn(cur) == pmd_pfn(entry)) {
		folio_get_refs(folio, 1);
		atomic_add_relaxed(&folio->page.xentire_mapcount, 1);
		if (is_migration_entry_exclusive((pte_t){ cur.val }))
			page_set(&folio->page, PG_anon_exclusive); /* on the head: the whole leaf */
		set_pmd(pmdp, pmd_migration_entry_to_pmd(cur, page_to_pfn(mm->m, &folio->page)));
	}
	pm_spin_unlock(pml);
	migration_wake(pmd_pfn(entry));
}

/* Tests only: called between the unmap of a hugetlb folio and its freeze, nothing but the
 * fault mutex (and for a shared one the i_mmap lock) held. */
void (*pm__hugetlb_migrate_hook)(struct pm_mm *mm, unsigned long haddr);

/*
 * A private hugetlb folio: an anonymous pool page this mapping alone maps (its entire
 * mapcount 1 - a page fork shares with a child is refused, there being no anon rmap), at the
 * leaf *@pmdp of @haddr, moves whole to @new (unmap_and_move_huge_page). Under the page's fault
 * mutex throughout - so MADV_DONTNEED's reservation restore and the mapping's fault on an
 * empty entry never meet the migration entry - and the PMD lock for the unmap: the leaf
 * becomes a migration entry, then folio_try_share_anon_rmap_pmd's test (a pinned page puts
 * the leaf back and is refused); the count is frozen at the migration's reference
 * (folio_ref_freeze), the data copied, the entry replaced by a leaf of @new, and the old page,
 * unfrozen, put back in the pool. The reservation was consumed when the page was first mapped
 * and stays so (move_hugetlb_state has no restore flag to move: @new was not promised to
 * anyone, and the old page comes back as a free, unpromised page).
 * Context: the mm's lock held for read over @haddr.
 */
static enum migrate_result migrate_hugetlb_private(struct pm_mm *mm, struct pm_vma *vma,
						   pm_entry_t *pmdp, unsigned long haddr,
						   int target, struct pm_folio *new)
{
	struct pm_machine *m = mm->m;
	pthread_mutex_t *fm = pm__hugetlb_fault_mutex(m, vma->file,
						       vma_pgoff(vma, haddr) >> HPAGE_PMD_ORDER);
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	enum migrate_result r = MIGRATE_SKIP;
	struct pm_folio *folio;
	pmd_t pmd, entry;
	int ref = 1;
	bool excl;

	mmap_assert_locked(mm);
	pthread_mutex_lock(fm);
	pm__ptl_lock(pml);
	pmd = pmdp_get(pmdp);
	if (!pmd_leaf(pmd))
		goto unlock;
	folio = page_folio(pfn_to_page(m, pmd_pfn(pmd)));
	if (already_there(m, pmd_pfn(pmd), target))
		goto unlock;
	r = MIGRATE_REFUSED;
	if (!folio_test_hugetlb(folio) || !folio_test_anon(folio) ||
	    atomic_load_relaxed(&folio->page.xentire_mapcount) != 1)
		goto unlock;
	folio_get_refs(folio, 1);
	excl = page_anon_exclusive(&folio->page);
	entry = make_pmd_migration_entry(pmd, excl);
	atomic_xchg_mb(pmdp, entry.val);
	pm__folio_cool(folio); /* no new pin can come: exact from here (mem/folio_hot.c) */
	/* The exchange is ordered before this read: GUP-fast's grab pairs with it. */
	if (folio_maybe_dma_pinned(folio)) {
		set_pmd(pmdp, pmd);
		pm_spin_unlock(pml);
		folio_put(folio);
		migration_wake(pmd_pfn(pmd));
		pthread_mutex_unlock(fm);
		return MIGRATE_PINNED;
	}
	if (excl)
		page_clear(&folio->page, PG_anon_exclusive);
	atomic_sub_relaxed(&folio->page.xentire_mapcount, 1);
	atomic_sub_mb(&folio->page.xrefcount, 1); /* the mapping's; ours keeps it */
	pm_spin_unlock(pml);

	if (unlikely(pm__hugetlb_migrate_hook))
		pm__hugetlb_migrate_hook(mm, haddr);

	if (!atomic_cas_mb(&folio->page.xrefcount, &ref, 0)) {
		remove_migration_pmd(mm, pmdp, entry, folio);
		folio_put(folio);
		pthread_mutex_unlock(fm);
		return MIGRATE_PINNED;
	}
	memcpy(page_address(m, &new->page), page_address(m, &folio->page), PMD_SIZE);
	new->page.mapping = folio->page.mapping;
	new->page.index = folio->page.index;
	folio_set_flags_new(new, PGF(PG_anon) | (folio_test(folio, PG_dirty) ? PGF(PG_dirty) : 0));
	remove_migration_pmd(mm, pmdp, entry, new);
	folio_put(new);		/* the allocation's: the mapping holds its own, if it stands */
	atomic_store_release(&folio->page.xrefcount, 1);
	folio_put(folio);	/* back to the pool */
	pthread_mutex_unlock(fm);
	return MIGRATE_DONE;

unlock:
	pm_spin_unlock(pml);
	pthread_mutex_unlock(fm);
	return r;
}

/* A hugetlb mapping that migration replaced by a PMD migration entry. */
struct migration_pmd_map {
	struct pm_mm *mm;
	pm_entry_t *pmdp;
	pmd_t entry;
};

/*
 * A hugetlbfs page (a page-cache folio of hugetlb object @f, at 2 MiB index @hidx) moves whole
 * to @new with every mapping of it - shared ones, and private ones that still map the cache's
 * page read-only - as migrate_shmem_folio moves a small one: under the page's fault mutex and
 * the object's i_mmap lock throughout (which keep the VMAs and their tables, and order us
 * against truncation's zaps and mremap's moves of this object's entries), each leaf that maps
 * it becomes a PMD migration entry under its PMD lock; the cache freezes the folio at its
 * expected count (its own and our lookup's), copies it whole and puts @new in the slot
 * (pm__shmem_migrate_folio, Linux's migrate_huge_page_move_mapping); the object's
 * reservations (bits of pages not in the cache) do not change, the page stays in the cache.
 * A pin makes the freeze fail and every mapping is put back.
 * Context: any (takes the fault mutex, the i_mmap lock, then PMD locks).
 */
static enum migrate_result migrate_hugetlb_shared(struct pm_machine *m, struct pm_shmem *f,
						  unsigned long hidx, int target,
						  struct pm_folio *new)
{
	pthread_mutex_t *fm = pm__hugetlb_fault_mutex(m, f, hidx);
	unsigned long pgoff = hidx << HPAGE_PMD_ORDER, pfn;
	struct migration_pmd_map *maps = NULL;
	enum migrate_result r;
	struct pm_folio *folio;
	struct pm_list *pos;
	unsigned n = 0, max = 0;

	pthread_mutex_lock(fm);
	pm__shmem_map_lock(f);
	folio = pm__shmem_lookup(f, hidx);
	if (!folio) {
		pm__shmem_map_unlock(f);
		pthread_mutex_unlock(fm);
		return MIGRATE_SKIP;
	}
	pfn = page_to_pfn(m, &folio->page);
	if (!folio_test_hugetlb(folio) || already_there(m, pfn, target)) {
		r = folio_test_hugetlb(folio) ? MIGRATE_SKIP : MIGRATE_REFUSED;
		goto out_put;
	}
	if (folio_maybe_dma_pinned(folio)) {
		r = MIGRATE_PINNED;
		goto out_put;
	}
	pm_list_for_each(pos, pm__shmem_i_mmap(f))
		max++;
	if (max && (!(maps = malloc(max * sizeof(*maps))) || pm__should_fail(m))) {
		r = MIGRATE_NOMEM;
		goto out_put;
	}
	pm_list_for_each(pos, pm__shmem_i_mmap(f)) {
		struct pm_vma *v = pm_list_entry(pos, struct pm_vma, shared);
		struct pm_spinlock *pml;
		pm_entry_t *pmdp;
		pmd_t pmd;

		if (pgoff < v->pgoff || pgoff - v->pgoff >= (v->end - v->start) >> PAGE_SHIFT)
			continue;
		pmdp = pm__pmd_lookup(v->mm, v->start + ((pgoff - v->pgoff) << PAGE_SHIFT));
		if (!pmdp)
			continue;
		pml = pm__pmd_lockptr(v->mm, pmdp);
		pm__ptl_lock(pml);
		pmd = pmdp_get(pmdp);
		if (pmd_leaf(pmd) && pmd_pfn(pmd) == pfn) {
			pmd_t e = make_pmd_migration_entry(pmd, false);

			atomic_xchg_mb(pmdp, e.val);
			atomic_sub_relaxed(&folio->page.xentire_mapcount, 1);
			atomic_sub_mb(&folio->page.xrefcount, 1);
			maps[n++] = (struct migration_pmd_map){ v->mm, pmdp, e };
		}
		pm_spin_unlock(pml);
	}
	if (unlikely(pm__hugetlb_migrate_hook) && n)
		pm__hugetlb_migrate_hook(maps[0].mm, hidx << PMD_SHIFT);
	pm__folio_cool(folio); /* mem/folio_hot.c */
	if (pm__shmem_migrate_folio(f, hidx, folio, new, 2)) {
		for (unsigned i = 0; i < n; i++)
			remove_migration_pmd(maps[i].mm, maps[i].pmdp, maps[i].entry, new);
		/* Frozen at 0 and out of the cache: the last reference is ours. */
		atomic_store_release(&folio->page.xrefcount, 1);
		folio_put(folio);	/* back to the pool */
		folio_put(new);		/* the allocation's */
		pm__shmem_map_unlock(f);
		pthread_mutex_unlock(fm);
		free(maps);
		return MIGRATE_DONE;
	}
	for (unsigned i = 0; i < n; i++)
		remove_migration_pmd(maps[i].mm, maps[i].pmdp, maps[i].entry, folio);
	r = MIGRATE_PINNED;
out_put:
	folio_put(folio);
	pm__shmem_map_unlock(f);
	pthread_mutex_unlock(fm);
	free(maps);
	return r;
}

/*
 * Migrate the small anonymous folio mapped at @addr, with @new as its target frame (which
 * this call consumes on MIGRATE_DONE). Context: the mm's lock held for read over @addr.
 */
static enum migrate_result migrate_one_pte(struct pm_mm *mm, pm_entry_t *pmdp,
					   unsigned long addr, int target, unsigned long want_pfn,
					   struct pm_folio *new)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *ptl;
	struct pm_folio *folio;
	struct pm_page *page;
	pm_entry_t *ptep;
	pte_t pte, entry;
	bool excl;

	mmap_assert_locked(mm);
	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep)
		return MIGRATE_SKIP;
	pte = ptep_get(ptep);
	if (!pte_present(pte) || pte_special(pte)) {
		pm_spin_unlock(ptl);
		return MIGRATE_SKIP;
	}
	page = pfn_to_page(m, pte_pfn(pte));
	folio = page_folio(page);
	if (already_there(m, pte_pfn(pte), target) ||
	    (want_pfn != ULONG_MAX && pte_pfn(pte) != want_pfn)) {
		pm_spin_unlock(ptl);
		return MIGRATE_SKIP;
	}
	if (!folio_test_anon(folio) || folio_test_large(folio) || folio_test_hugetlb(folio) ||
	    atomic_load_relaxed(&page->xmapcount) != 1) {
		/* Large, page cache, or mapped by other mms too (no anon rmap to find them). */
		pm_spin_unlock(ptl);
		return MIGRATE_REFUSED;
	}

	/* 2. Unmap: the migration's own reference first, then the entry. */
	folio_get_refs(folio, 1);
	excl = page_anon_exclusive(page);
	entry = make_migration_entry(pte, excl);
	atomic_xchg_mb(ptep, entry.val);
	pm__folio_cool(folio); /* no new pin can come: exact from here (mem/folio_hot.c) */
	if (excl) {
		/* folio_try_share_anon_rmap_pte: the exchange above is ordered before this read. */
		if (folio_maybe_dma_pinned(folio)) {
			set_pte(ptep, pte);
			pm_spin_unlock(ptl);
			folio_put(folio);
			migration_wake(pte_pfn(pte));
			return MIGRATE_PINNED;
		}
		page_clear(page, PG_anon_exclusive);
	}
	if (pte_dirty(pte))
		pm__folio_mark_dirty(folio);
	atomic_sub_relaxed(&page->xmapcount, 1);
	atomic_sub_mb(&folio->page.xrefcount, 1); /* the mapping's; ours keeps it */
	pm_spin_unlock(ptl);

	if (unlikely(pm__migrate_hook))
		pm__migrate_hook(mm, addr);

	/* 3. Only the migration's reference may remain. */
	if (atomic_load_mb(&folio->page.xrefcount) != 1) {
		remove_migration_pte(mm, pmdp, addr, entry, folio);
		folio_put(folio);
		return MIGRATE_PINNED;
	}

	/* 4. Copy, and map the new frame where the entry is. */
	memcpy(page_address(m, &new->page), page_address(m, page), PAGE_SIZE);
	folio_set_flags_new(new, PGF(PG_anon) |
				 (folio_test(folio, PG_dirty) ? PGF(PG_dirty) : 0));
	remove_migration_pte(mm, pmdp, addr, entry, new);
	folio_put(new);		/* the allocation's: the mapping holds its own, if it stands */
	folio_put(folio);	/* the last reference: the old frame is free */
	return MIGRATE_DONE;
}

/* Where the new frames come from: a target zone, or compaction's free scanner. */
struct migrate_target {
	int target;			/* PM_MIGRATE_* */
	unsigned long want_pfn;		/* only if the PTE still maps this frame; ULONG_MAX: any */
	unsigned zone;			/* compaction: the zone, and its blocks to fill */
	const uint8_t *blocks;		/* NULL: pm__folio_alloc() from target's zones */
	struct pm_shmem *file;		/* a page-cache folio: its object and index */
	unsigned long index;
	bool thp;			/* an anonymous THP at addr (2 MiB aligned) */
	struct pm_vma *hugetlb;		/* a hugetlb leaf at addr of this VMA */
	unsigned long start, end;	/* thp: the range asked for (a split counts only in it) */
};

static struct pm_folio *target_alloc(struct pm_machine *m, const struct migrate_target *t)
{
	struct pm_page *page;

	if (t->hugetlb)
		return pm__hugetlb_alloc_migrate(m, target_alloc_flags(t->target));
	if (t->thp)
		return pm__folio_alloc(m, HPAGE_PMD_ORDER, target_alloc_flags(t->target));
	if (!t->blocks)
		return pm__folio_alloc(m, 0, target_alloc_flags(t->target));
	page = pm__alloc_frame_in_blocks(m, t->zone, t->blocks);
	return page ? pm__folio_prep(page, 0) : NULL;
}

/* A mapping of a page-cache folio that migration replaced by a migration entry. */
struct migration_map {
	struct pm_mm *mm;
	pm_entry_t *pmdp;
	unsigned long addr;
	pte_t entry;
};

/*
 * Migrate the page-cache folio at @index of shmem object @f, with @new as its target frame
 * (consumed on MIGRATE_DONE). Every mapping is found through the object's i_mmap list (the
 * rmap of file pages), whose lock keeps the VMAs and their tables: each PTE that maps the
 * folio becomes a migration entry. Then the cache freezes the folio at its expected count -
 * the cache's reference and ours - and swaps in the copy (pm__shmem_migrate_folio); a pin or
 * any other reference makes the freeze fail and every mapping is put back.
 * Context: any (takes the object's i_mmap lock, then PTLs).
 */
static enum migrate_result migrate_shmem_folio(struct pm_machine *m, struct pm_shmem *f,
					       unsigned long index, int target,
					       struct pm_folio *new)
{
	struct migration_map *maps = NULL;
	enum migrate_result r;
	struct pm_folio *folio;
	struct pm_list *pos;
	unsigned n = 0, max = 0;
	unsigned long pfn;

	pm__shmem_map_lock(f);
	folio = pm__shmem_lookup(f, index);
	if (!folio) {
		pm__shmem_map_unlock(f);
		return MIGRATE_SKIP;
	}
	pfn = page_to_pfn(m, &folio->page);
	if (folio_test_large(folio) || folio_test_hugetlb(folio) || already_there(m, pfn, target)) {
		r = folio_test_large(folio) ? MIGRATE_REFUSED : MIGRATE_SKIP;
		goto out_put;
	}
	pm_list_for_each(pos, pm__shmem_i_mmap(f))
		max++;
	if (max && (!(maps = malloc(max * sizeof(*maps))) || pm__should_fail(m))) {
		r = MIGRATE_NOMEM;
		goto out_put;
	}
	pm_list_for_each(pos, pm__shmem_i_mmap(f)) {
		struct pm_vma *v = pm_list_entry(pos, struct pm_vma, shared);
		struct pm_spinlock *ptl;
		unsigned long addr;
		pm_entry_t *pmdp, *ptep;
		pte_t pte;

		if (index < v->pgoff || index - v->pgoff >= (v->end - v->start) >> PAGE_SHIFT)
			continue;
		addr = v->start + ((index - v->pgoff) << PAGE_SHIFT);
		pmdp = pm__pmd_lookup(v->mm, addr);
		if (!pmdp || !pmd_table(pmdp_get(pmdp)))
			continue;
		ptep = pm__pte_offset_map_lock(v->mm, pmdp, addr, &ptl);
		if (!ptep)
			continue;
		pte = ptep_get(ptep);
		if (pte_present(pte) && !pte_special(pte) && pte_pfn(pte) == pfn) {
			pte_t e = make_migration_entry(pte, false);

			atomic_xchg_mb(ptep, e.val);
			if (pte_dirty(pte))
				pm__folio_mark_dirty(folio);
			atomic_sub_relaxed(&folio->page.xmapcount, 1);
			atomic_sub_mb(&folio->page.xrefcount, 1);
			maps[n++] = (struct migration_map){ v->mm, pmdp, addr, e };
		}
		pm_spin_unlock(ptl);
	}
	if (unlikely(pm__shmem_migrate_hook) && n)
		pm__shmem_migrate_hook(f, index);
	/* Expected: the cache's reference and the lookup's. */
	pm__folio_cool(folio); /* mem/folio_hot.c */
	if (pm__shmem_migrate_folio(f, index, folio, new, 2)) {
		for (unsigned i = 0; i < n; i++)
			remove_migration_pte(maps[i].mm, maps[i].pmdp, maps[i].addr, maps[i].entry,
					     new);
		/* Frozen at 0 and out of the cache: the last reference is ours. */
		atomic_store_release(&folio->page.xrefcount, 1);
		folio_put(folio);
		folio_put(new); /* the allocation's */
		pm__shmem_map_unlock(f);
		free(maps);
		return MIGRATE_DONE;
	}
	for (unsigned i = 0; i < n; i++)
		remove_migration_pte(maps[i].mm, maps[i].pmdp, maps[i].addr, maps[i].entry, folio);
	r = MIGRATE_PINNED;
out_put:
	folio_put(folio);
	pm__shmem_map_unlock(f);
	free(maps);
	return r;
}

/*
 * Migrate whatever the PTE at @addr maps (t->file: the page-cache folio at t->index),
 * retrying transient failures. Return: 1 if it counts as not moved, else 0.
 */
static int migrate_pte(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
		       const struct migrate_target *t)
{
	struct pm_machine *m = mm->m;
	enum migrate_result r = MIGRATE_AGAIN;

	for (int pass = 0; pass < NR_MAX_MIGRATE_PAGES_RETRY; pass++) {
		struct pm_folio *new = target_alloc(m, t);

		if (!new) {
			r = MIGRATE_NOMEM;
			break;
		}
		if (t->hugetlb)
			r = t->file ? migrate_hugetlb_shared(m, t->file, t->index, t->target, new) :
				      migrate_hugetlb_private(mm, t->hugetlb, pmdp, addr, t->target,
							      new);
		else if (t->thp)
			r = migrate_one_thp(mm, pmdp, addr, new);
		else if (t->file)
			r = migrate_shmem_folio(m, t->file, t->index, t->target, new);
		else
			r = migrate_one_pte(mm, pmdp, addr, t->target, t->want_pfn, new);
		if (r != MIGRATE_DONE)
			folio_put(new);
		if (r != MIGRATE_AGAIN && r != MIGRATE_PINNED)
			break;
	}
	if (r == MIGRATE_NOMEM && t->thp && split_thp(mm, NULL, pmdp, addr, false, false) == MIGRATE_DONE) {
		/* No 2 MiB block in the target: split, and move its 512 pages one by one, each
		 * counted as Linux counts the pages of a split THP - all of them move, as the
		 * whole folio was isolated, but only those of the range asked for are in our
		 * answer (the folios of the range not moved). */
		struct migrate_target small = { t->target, ULONG_MAX, 0, NULL };
		int failed = 0;

		for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
			unsigned long a = addr + i * PAGE_SIZE;
			int f = migrate_pte(mm, pmdp, a, &small);

			if (a >= t->start && a < t->end)
				failed += f;
		}
		return failed;
	}
	switch (r) {
	case MIGRATE_DONE:
		count_event(m, PGMIGRATE_SUCCESS, 1);
		return 0;
	case MIGRATE_SKIP:
		return 0;
	case MIGRATE_PINNED:
		count_event(m, MIGRATE_PINNED_SKIPS, 1);
		/* fall through */
	default:
		count_event(m, PGMIGRATE_FAIL, 1);
		return 1;
	}
}

/*
 * Migrate the present pages of [@start, @end), inside @vma. Return: folios not moved.
 * Context: the mm's lock held for read over the range.
 */
static long migrate_vma_range(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			      unsigned long end, int target)
{
	struct pm_machine *m = mm->m;
	struct pm_folio *last = NULL;
	pm_entry_t *pmdp;
	long failed = 0;

	mmap_assert_locked(mm);
	for_each_pmd_span(mm, addr, next, start, end, pmdp) {
		pmd_t pmd = pmdp_get(pmdp);

		if (pmd_none(pmd))
			continue;
		if (is_pmd_migration_entry(pmd)) {
			/* A hugetlb page another migration is moving (a hugetlbfs page's, from any
			 * mm): wait for it, then look again. It needs nothing we hold. */
			pm__migration_entry_wait(mm, pmdp, (pte_t){ pmd.val });
			next = addr;
			continue;
		}
		if (pmd_leaf(pmd)) {
			struct pm_folio *folio = page_folio(pfn_to_page(m, pmd_pfn(pmd)));

			if ((pmd.val & _PAGE_SPECIAL) || folio_is_zero(folio) || folio == last ||
			    already_there(m, pmd_pfn(pmd), target))
				continue;
			last = folio;
			if (folio_test_anon(folio) && !folio_test_hugetlb(folio)) {
				/* A THP: whole, as 512 PTEs afterwards. */
				failed += migrate_pte(mm, pmdp, addr & PMD_MASK,
						      &(struct migrate_target){
							      .target = target, .want_pfn = ULONG_MAX,
							      .thp = true, .start = start, .end = end });
				continue;
			}
			/* hugetlb: whole, a private mapping's own page or the object's. */
			failed += migrate_pte(mm, pmdp, addr & PMD_MASK,
					      &(struct migrate_target){
						      .target = target, .want_pfn = ULONG_MAX,
						      .hugetlb = vma,
						      .file = folio_test_anon(folio) ? NULL : vma->file,
						      .index = vma_pgoff(vma, addr & PMD_MASK) >>
							       HPAGE_PMD_ORDER });
			continue;
		}
		if (!pmd_table(pmd))
			continue;
		for (unsigned long a = addr; a < next; a += PAGE_SIZE) {
			pte_t pte = ptep_get(&entry_table(m, pmd.val)[pte_index(a)]);
			struct pm_folio *folio;

			if (!pte_present(pte) || pte_special(pte))
				continue;
			folio = page_folio(pfn_to_page(m, pte_pfn(pte)));
			if (!folio_test_anon(folio) && !folio_test_large(folio) && vma->file &&
			    !vma->file->hugetlb) {
				/* A page-cache folio: found again, and all its mappings, by index. */
				failed += migrate_pte(mm, pmdp, a,
						      &(struct migrate_target){
							      target, ULONG_MAX, 0, NULL, vma->file,
							      vma_pgoff(vma, a) });
				continue;
			}
			if (folio_test_large(folio) && folio_test_anon(folio) && folio != last &&
			    folio_order(folio) == HPAGE_PMD_ORDER &&
			    !already_there(m, pte_pfn(pte), target)) {
				/* A PTE-mapped THP: whole, if this table maps all of it. */
				failed += migrate_pte(mm, pmdp, a & PMD_MASK,
						      &(struct migrate_target){
							      .target = target, .want_pfn = ULONG_MAX,
							      .thp = true, .start = start, .end = end });
				/* Its other pages, moved or not, are not tried again: split and moved
				 * page by page (split_thp), every page of its block was tried. */
				pte = ptep_get(&entry_table(m, pmd.val)[pte_index(a)]);
				if (pte_present(pte) && !pte_special(pte) &&
				    !folio_test_large(page_folio(pfn_to_page(m, pte_pfn(pte))))) {
					a = (a & PMD_MASK) + PMD_SIZE - PAGE_SIZE;
					continue;
				}
				last = pte_present(pte) && !pte_special(pte) ?
					       page_folio(pfn_to_page(m, pte_pfn(pte))) : folio;
				continue;
			}
			if (folio_test_large(folio) || !folio_test_anon(folio)) {
				/* A PTE-mapped large folio or a page-cache folio: once each. */
				if (folio != last && !already_there(m, pte_pfn(pte), target)) {
					count_event(m, PGMIGRATE_FAIL, 1);
					failed++;
				}
				last = folio;
				continue;
			}
			failed += migrate_pte(mm, pmdp, a,
					      &(struct migrate_target){ target, ULONG_MAX, 0, NULL });
		}
	}
	return failed;
}

/**
 * pm_migrate_range() - move the folios mapped in [@addr, @addr + @len) of @mm to @target.
 *
 * See include/pinmm/migrate.h for the contract, and the top of this file for how and why.
 * Context: any; takes the mm's lock for read over the range.
 */
long pm_migrate_range(struct pm_mm *mm, unsigned long addr, unsigned long len, int target)
{
	unsigned long end;
	struct pm_vma *vma;
	long failed = 0;

	if (pm__mm_bad(mm) || (addr & ~PAGE_MASK) || target < PM_MIGRATE_ANYWHERE ||
	    target > PM_MIGRATE_TO_MOVABLE)
		return -EINVAL;
	len = (len + PAGE_SIZE - 1) & PAGE_MASK;
	if (addr + len < addr)
		return -ENOMEM;
	if (!len)
		return 0;
	end = addr + len;
	if (end > PM_TASK_SIZE)
		return -ENOMEM;
	/* No free frame at all in the target: neither the buddy's nor a free pool page's. */
	if (!pm__nr_free_frames_in(mm->m, target_alloc_flags(target)) &&
	    !pm__hugetlb_free_in(mm->m, target_alloc_flags(target)))
		return -ENOSPC;
	mmap_read_lock_range(mm, addr, end);
	/* Every byte of the range must be mapped (mbind's -ENOMEM / -EFAULT for holes). */
	for (unsigned long a = addr; a < end; a = vma->end) {
		vma = pm__find_vma(mm, a);
		if (!vma || vma->start > a) {
			mmap_read_unlock(mm);
			return -ENOMEM;
		}
	}
	for (vma = pm__find_vma(mm, addr); vma && vma->start < end; vma = pm__vma_next(mm, vma))
		failed += migrate_vma_range(mm, vma, max(vma->start, addr), min(vma->end, end),
					    target);
	mmap_read_unlock(mm);
	return failed;
}

/* ---- compaction ---- */

/* A small anonymous page compaction may move: where it is mapped, and its frame. */
struct compact_page {
	unsigned mm;		/* index in the run's snapshot of the machine's mms */
	unsigned long addr, pfn;
};

struct compact_run {
	struct pm_machine *m;
	unsigned zone;
	struct pm_mm **mms;
	unsigned nr_mms;
	uint16_t *used, *movable;	/* per 2 MiB block of the zone */
	uint8_t *unmovable;		/* per block: 1 a pinned page in it, 2 a source */
	struct compact_page *pages;
	size_t nr_pages, max_pages;
};

/*
 * The migrate scanner's look at one mm (isolate_migratepages_block): every small anonymous
 * page of the zone mapped once is a candidate, except those that look pinned by Linux's racy
 * test - more references than mappings (refcount - 1 > mapcount with the isolation
 * reference Linux holds then) - which are skipped and counted. Context: @mm's lock for read.
 */
static int compact_scan_mm(struct compact_run *c, unsigned idx)
{
	struct pm_mm *mm = c->mms[idx];
	struct pm_machine *m = c->m;
	struct pm_zone *z = &m->zones[c->zone];
	pm_entry_t *pmdp;

	mmap_assert_locked(mm);
	for (struct pm_vma *vma = pm__find_vma(mm, 0); vma; vma = pm__vma_next(mm, vma)) {
		if (is_vm_hugetlb_page(vma))
			continue;
		for_each_pmd_span(mm, addr, next, vma->start, vma->end, pmdp) {
			pmd_t pmd = pmdp_get(pmdp);

			if (!pmd_table(pmd))
				continue;
			for (unsigned long a = addr; a < next; a += PAGE_SIZE) {
				pte_t pte = ptep_get(&entry_table(m, pmd.val)[pte_index(a)]);
				unsigned long pfn = pte_pfn(pte), b;
				struct pm_folio *folio;

				if (!pte_present(pte) || pte_special(pte) || pfn < z->base ||
				    pfn >= z->end)
					continue;
				folio = page_folio(pfn_to_page(m, pfn));
				if (!folio_test_anon(folio) || folio_test_large(folio) ||
				    atomic_load_relaxed(&folio->page.xmapcount) != 1)
					continue;
				b = (pfn - z->base) >> PM_MAX_ORDER;
				if (folio_ref_count(folio) > atomic_load_relaxed(&folio->page.xmapcount)) {
					count_event(m, MIGRATE_PINNED_SKIPS, 1);
					c->unmovable[b] = 1;
					continue;
				}
				if (c->nr_pages == c->max_pages) {
					size_t n = c->max_pages ? 2 * c->max_pages : 1024;
					void *p = realloc(c->pages, n * sizeof(*c->pages));

					if (!p || pm__should_fail(m)) {
						if (p)
							c->pages = p;
						return -ENOMEM;
					}
					c->pages = p;
					c->max_pages = n;
				}
				c->pages[c->nr_pages++] = (struct compact_page){ idx, a, pfn };
				c->movable[b]++;
			}
		}
	}
	return 0;
}

/*
 * Compact one zone: the sparsest blocks whose every page is movable are emptied into the free
 * frames of the other partly used blocks (never into a free 2 MiB block: that is what
 * compaction makes), as Linux's migrate scanner feeds its free scanner. Return: 0 or -ENOMEM.
 */
static int compact_zone(struct compact_run *c)
{
	struct pm_machine *m = c->m;
	struct pm_zone *z = &m->zones[c->zone];
	unsigned long nb = (z->end - z->base) >> PM_MAX_ORDER, avail = 0;
	uint8_t *target;
	uint32_t *order;
	size_t nr = 0;
	int err = 0;

	c->used = calloc(nb, sizeof(*c->used));
	c->movable = calloc(nb, sizeof(*c->movable));
	c->unmovable = calloc(nb, 1);
	target = calloc(nb, 1);
	order = calloc(nb, sizeof(*order));
	c->nr_pages = 0;
	if (!c->used || !c->movable || !c->unmovable || !target || !order || pm__should_fail(m)) {
		err = -ENOMEM;
		goto out;
	}
	pm__zone_block_usage(m, c->zone, c->used);
	for (unsigned i = 0; i < c->nr_mms && !err; i++) {
		mmap_read_lock_range(c->mms[i], 0, PM_TASK_SIZE);
		err = compact_scan_mm(c, i);
		mmap_read_unlock(c->mms[i]);
	}
	if (err)
		goto out;

	/* Sources: fully movable partial blocks, sparsest first, while the rest can hold them. */
	for (unsigned long b = 0; b < nb; b++) {
		if (c->used[b] == 0 || c->used[b] >= HPAGE_PMD_NR)
			continue;
		target[b] = 1;
		avail += HPAGE_PMD_NR - c->used[b];
		if (!c->unmovable[b] && c->movable[b] == c->used[b])
			order[nr++] = (uint32_t)b;
	}
	for (size_t i = 1; i < nr; i++) /* insertion sort by use: nr is small */
		for (size_t j = i; j > 0 && c->used[order[j]] < c->used[order[j - 1]]; j--) {
			uint32_t t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (size_t i = 0; i < nr; i++) {
		/* Emptying block b takes its free frames out of the pool and spends its used ones. */
		if (avail < HPAGE_PMD_NR)
			break;
		avail -= HPAGE_PMD_NR;
		target[order[i]] = 0;
		c->unmovable[order[i]] = 2; /* a source */
	}

	for (unsigned i = 0; i < c->nr_mms; i++) {
		struct pm_mm *mm = c->mms[i];

		mmap_read_lock_range(mm, 0, PM_TASK_SIZE);
		for (size_t k = 0; k < c->nr_pages; k++) {
			struct compact_page *p = &c->pages[k];
			unsigned long b = (p->pfn - z->base) >> PM_MAX_ORDER;
			pm_entry_t *pmdp;

			if (p->mm != i || c->unmovable[b] != 2)
				continue;
			pmdp = pm__pmd_lookup(mm, p->addr);
			if (!pmdp || !pmd_table(pmdp_get(pmdp)))
				continue;
			migrate_pte(mm, pmdp, p->addr,
				    &(struct migrate_target){ PM_MIGRATE_ANYWHERE, p->pfn, c->zone,
							      target });
		}
		mmap_read_unlock(mm);
	}
out:
	free(c->used);
	free(c->movable);
	free(c->unmovable);
	free(target);
	free(order);
	return err;
}

/**
 * pm_compact() - move movable pages to form free 2 MiB blocks (Linux's compact_zone over
 * every zone, as a write to /proc/sys/vm/compact_memory does).
 *
 * Context: any; takes the machine's compaction lock, then each mm's lock for read in turn; no
 * lock held by the caller. Return: free 2 MiB blocks afterwards, or -errno.
 */
long pm_compact(struct pm_machine *m)
{
	struct compact_run c = { .m = m };
	unsigned long before, after;
	struct pm_list *pos;
	int err = 0;

	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->compact_lock);
	pm__drain_all_pcp(m);
	before = pm__free_pmd_blocks(m, 0);
	pthread_mutex_lock(&m->lock);
	pm_list_for_each(pos, &m->mms)
		c.nr_mms++;
	c.mms = malloc((c.nr_mms + 1) * sizeof(*c.mms));
	if (c.mms) {
		unsigned i = 0;

		pm_list_for_each(pos, &m->mms)
			c.mms[i++] = pm_list_entry(pos, struct pm_mm, link);
	}
	pthread_mutex_unlock(&m->lock);
	if (!c.mms || pm__should_fail(m))
		err = -ENOMEM;
	for (unsigned zi = 0; zi < m->nr_zones && !err; zi++) {
		c.zone = zi;
		err = compact_zone(&c);
	}
	free(c.mms);
	free(c.pages);
	pm__drain_all_pcp(m);
	after = pm__free_pmd_blocks(m, 0);
	count_event(m, after > before ? COMPACT_SUCCESS : COMPACT_FAIL, 1);
	pthread_mutex_unlock(&m->compact_lock);
	return err ? err : (long)after;
}

/*
 * pm__compact_for_fault() - a THP fault's compaction (defrag=madvise), deferred as Linux
 * defers it (defer_compaction, compaction_deferred): after a run that freed no 2 MiB block,
 * the next 2^shift requests are skipped, shift growing to COMPACT_MAX_DEFER_SHIFT; a run that
 * freed one resets it. So a machine that cannot be compacted does not compact on every THP
 * fault. The counts are written only here, on a path that already failed an allocation.
 * Context: no lock held (pm_fault, after the fault dropped its own).
 */
#define COMPACT_MAX_DEFER_SHIFT 6
void pm__compact_for_fault(struct pm_machine *m)
{
	unsigned shift = atomic_load_relaxed(&m->xcompact_defer_shift);
	long r;

	if (atomic_add_relaxed(&m->xcompact_considered, 1) + 1 < (1U << shift))
		return;
	r = pm_compact(m);
	atomic_store_relaxed(&m->xcompact_considered, 0);
	if (r > 0)
		atomic_store_relaxed(&m->xcompact_defer_shift, 0);
	else if (shift < COMPACT_MAX_DEFER_SHIFT)
		atomic_store_relaxed(&m->xcompact_defer_shift, shift + 1);
}
