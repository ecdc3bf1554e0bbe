// SPDX-License-Identifier: MIT
/*
 * anon.c - anonymous faults: the zero page, fresh 4 KiB pages, and 2 MiB THPs at PMD level.
 *
 * A read fault maps the machine's zero page (a special, never refcounted, read-only PTE); a
 * write fault allocates and zeroes a page with no lock held, then installs it if the PTE is
 * still empty: under the PTL in Linux's design, by compare-and-swap in the range design (below).
 * New anonymous pages are AnonExclusive: this address space is their only user.
 *
 * Lockless PTE installs (the range design; PM_KNOB_PTE_TABLE_LOCK restores the PTL). Faults on
 * different pages of one PTE table share no lock: an install into an empty PTE is one CAS
 * none -> entry (pgtable/pte_cas.h), made after the page is allocated, zeroed, flagged and
 * given its mapcount, all while it is private; a lost CAS frees the page and returns
 * VM_FAULT_AGAIN, as the PTL path does on a non-empty entry. Slow GUP's PTE step (gup/gup.c)
 * reads a present entry without the PTL and takes its reference as GUP-fast does: a
 * speculative try-grab, a full barrier, both entries read again, undone and retried under the
 * PTL on a mismatch (the zero page and refcount-limit cases go to the PTL path as well); its
 * step for a 2 MiB leaf does the same without the PMD lock (the huge zero folio takes the
 * lock), which is GUP-fast's leaf against the PMD writers: split, zap, migration, COW. The
 * table stays: the walker holds the VMA's read lock or mmap_lock, and tables a live VMA
 * reaches are only freed by munmap after the VMA is gone (pgtable/pgtable.c). The invariant
 * every other writer relies on:
 *
 *	A lockless writer only ever turns an EMPTY PTE into a present one. Nobody writes a PTE
 *	without its PTL but such a CAS; every PTL holder that writes an entry first reads it
 *	under the PTL and writes only where it read a non-empty one, or holds a lock that
 *	excludes faults in that VMA.
 *
 * So a PTL holder's read-then-store of a non-empty entry (zap's plain store, COW's exchange,
 * mprotect, MADV_FREE, migration's unmap and its restore, which write only over a present or
 * migration entry they read under the PTL) never overwrites a lockless install: the CAS cannot
 * succeed on a non-empty entry, and its own write can only change an entry it read non-empty.
 * Each writer:
 *  - zap (munmap, MADV_DONTNEED; mmap read lock or the VMA read lock): skips empty entries;
 *    clears a present one it read. A fault that installs after zap passed its entry is a fault
 *    after the DONTNEED, as with the PTL. munmap and teardown zap after the VMA is detached
 *    under the write lock, so no fault can install behind them.
 *  - mprotect, mremap's moves, fork's copy and write-protect: hold the VMA write lock or
 *    mmap_lock for write, which excludes every fault in the VMA (and mremap's and fork's
 *    destinations have no other user); faults in other VMAs touch other entries.
 *  - COW, do_wp_page's reuse, unshare: replace a present entry they re-read under the PTL.
 *  - migration (mm/migrate.c): unmap exchanges a present entry for a migration entry under the
 *    PTL; a lockless install needs an empty entry, so it never overwrites a migration entry,
 *    and the fault on one waits for it (dispatch.c). The restore writes only where it re-reads
 *    its own migration entry; if a zap emptied it and a fault filled it meanwhile, the restore
 *    leaves it alone, as before. A speculative slow-GUP grab racing the unmap is GUP-fast's
 *    race: the unmap's exchange and its pin check against our grab, barrier and re-read -
 *    one of us sees the other (gup/gup_fast.c, (B)); a transient reference fails the
 *    migration as any would.
 *  - rmap and mapcount: an anonymous page's mapcount is 1 before the CAS publishes it, so a
 *    zap or migration that finds the entry finds its count; pm_machine_check runs quiescent.
 *  - shmem (fault/shmem.c) keeps the PTL: its re-check of truncation and of the cache
 *    (commit 0ee05f0's ordering against truncate's zap) is made under it, and only shmem
 *    faults install into a shmem VMA's entries, so the two protocols never meet on an entry.
 *
 *	fault A (page a)			fault B (page b, same table)
 *	----------------			----------------------------
 *	allocate, zero, flags, mapcount 1	allocate, zero, flags, mapcount 1
 *	CAS pte[a]: none -> A (full barrier)	CAS pte[b]: none -> B   (no shared write)
 *
 *	fault (page a)				MADV_DONTNEED (PTL, mmap read lock)
 *	--------------				-----------------------------------
 *	allocate ...				read pte[a]: none -> skip
 *	CAS pte[a]: none -> A			  (the fault follows the DONTNEED)
 *	   -- or, A installed first --
 *						read pte[a]: A; clear it; put A
 *						  (the DONTNEED follows the fault)
 *
 *	slow pin (page a, no PTL)		migration of page a (PTL)
 *	-------------------------		-------------------------
 *	read pte[a] = A				xchg pte[a]: A -> migration entry (mb)
 *	try-grab A's folio			read pins: none? migrate : restore A
 *	full barrier; re-read pte[a]: still A?
 *	  yes: keep it (migration saw the pin,	  (it saw the pin: restored A, failed)
 *	  or has not exchanged yet)
 *	  no: ungrab, retry under the PTL
 *
 * THP policy is Linux's "madvise" mode: only VMAs marked PM_MADV_HUGEPAGE, and only where the
 * 2 MiB-aligned window around the fault lies inside the VMA. A write fault there allocates a
 * THP; a read fault maps the machine's huge zero folio (mem/machine.c) with a read-only special
 * PMD leaf, as Linux with transparent_hugepage/use_zero_page=1 (do_huge_pmd_anonymous_page):
 * no reference, no mapcount, not a thp_fault, not in Rss. PM_KNOB_NO_HUGE_ZERO_PAGE
 * (use_zero_page=0) makes the read fault allocate a THP as a write does. When no 2 MiB block
 * can be had - for the THP, or for the huge zero folio before it exists - the fault falls back
 * to 4 KiB pages (thp_fallbacks).
 *
 * A huge zero leaf carries a deposited PTE table like any THP leaf, so that the write fault
 * that later splits it (cow.c, pgtable/huge_memory.c: every PTE then maps the 4 KiB zero
 * page, and do_wp_page gives the written one a page of its own) never needs memory.
 *
 * Installing a leaf races with other faults on the same PMD (under another VMA read lock or
 * mmap_lock held for read), with GUP-fast (no lock at all) and with MADV_DONTNEED (mmap_lock
 * for read). Everything is decided by a compare-and-swap from the none entry
 * (pmd_install_none()), under the PMD lock in Linux's design. In the range design a fault
 * that needs a PTE table publishes it by that CAS without the PMD lock (pm__pte_alloc), and
 * so does a THP write fault, whose deposit rides on its folio instead of the PMD table's
 * list (pgtable/huge_memory.c, "Deposit"): the first faults of two 2 MiB blocks of one PMD
 * table share no lock word. Only the huge zero leaf, whose folio every leaf shares, still
 * parks its deposit on the list under the lock. Whichever
 * CAS comes first wins; the other finds the entry taken, backs out (a leaf: its folio or the
 * huge zero folio's use, its deposit; a table: freed unpublished) and the dispatcher looks
 * again, as after a lost race under the lock:
 *
 *	THP write fault				fault falling back to PTEs (no PMD lock)
 *	---------------				----------------------------------------
 *	PMD none: allocate THP, deposit		PMD none: allocate a zeroed PTE table
 *	mapcount 1; Linux's design: PMD lock;
 *	  range design: deposit on the folio
 *	CAS pmd: none -> leaf			CAS pmd: none -> table
 *	  won: Linux's design: deposit on	  won: the THP's CAS fails: it puts its
 *	    the list, unlock			  folio and its table, and finds the table
 *	  lost: (unlock,) take the deposit	  lost: frees its table, finds the leaf
 *	    back, put THP, AGAIN
 *	   (finds the table: 4 KiB pages)
 *
 * Linux's design puts the deposit on the PMD table's list after the CAS, under the same hold
 * of the lock; the range design's is on the folio before the CAS publishes it. Either way
 * everyone who withdraws one (split, zap, move) takes the lock and reads the leaf first, and
 * finds it. Otherwise:
 *
 *	read fault (huge zero)			racing fault / GUP-fast / DONTNEED
 *	----------------------			----------------------------------
 *	PMD empty (unlocked read)		write fault: PMD empty, allocates a THP
 *	huge zero folio (this mm's use of it,
 *	  mem/machine.c), deposit table
 *	PMD lock				  PMD lock (waits)
 *	CAS none -> leaf? deposit		  not empty: frees its THP, VM_FAULT_AGAIN,
 *	  (full barrier)			  finds the leaf: COW of the huge zero page
 *	  else: free the table, AGAIN		GUP-fast: acquire load of the PMD; empty or
 *	PMD unlock				  special leaf: stops, the slow path decides
 *						  under the PMD lock (gup/gup.c)
 *						DONTNEED: PMD lock, clears the leaf, frees
 *						  the deposit; drops no reference
 *
 * To summarize: 1) only an empty PMD becomes a leaf, by a CAS, so two faults
 * never both install one, a THP is never installed over the huge zero leaf, and no leaf over
 * a lockless PTE table nor a table over a leaf; 2) the leaf is published by that CAS after the
 * folio's zeroing (published by a release store under huge_zero_lock), so whoever reads it
 * sees zeros, and its deposit is in place before anyone who withdraws it gets the lock;
 * 3) no walker ever takes a reference through the leaf without the PMD lock (GUP-fast leaves
 * special leaves to the slow path, as Linux 6.18 does), and the folio lives while this mm
 * does (its use of it ends at teardown, after every leaf is gone), so a zap or split racing a
 * reader frees nothing that reader can hold.
 */
#include "fault/fault.h"
#include "pgtable/pte_cas.h"

bool pm__thp_vma_suitable(struct pm_vma *vma, unsigned long addr)
{
	unsigned long haddr = addr & PMD_MASK;

	return vma_is_anonymous(vma) && (vma->flags & VM_HUGEPAGE) &&
	       !(vma->flags & VM_NOHUGEPAGE) && haddr >= vma->start && haddr + PMD_SIZE <= vma->end;
}

/* A fault on an empty PTE of an anonymous VMA. Context: mmap_lock or the VMA's lock held (fault path). */
vm_fault_t pm__do_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
				 unsigned long addr, unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	bool lockless = pte_lockless(mm);
	struct pm_spinlock *ptl = NULL;
	struct pm_folio *folio;
	pm_entry_t *ptep;
	pmd_t pmd;
	pte_t entry;

	assert_fault_locked(vma);
	if (!(fault_flags & FAULT_FLAG_WRITE)) {
		entry = mk_pte(page_to_pfn(m, m->zero_page), vma_is_accessible(vma), false, false);
		entry.val |= _PAGE_SPECIAL;
		if (lockless) {
			/* Lost to another install: that one stands, as under the PTL. */
			ptep = pte_offset_nolock(mm, pmdp, addr, &pmd);
			if (!ptep)
				return VM_FAULT_AGAIN;
			pte_install_cas(ptep, entry);
			return 0;
		}
		ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
		if (!ptep)
			return VM_FAULT_AGAIN;
		if (pte_none(ptep_get(ptep)))
			set_pte(ptep, entry);
		pm_spin_unlock(ptl);
		return 0;
	}

	vma_anon_prepare(vma); /* not for the zero page: fork leaves that to a fault */
	folio = pm__folio_alloc(m, 0, PM_ALLOC_ZERO);
	if (!folio)
		return VM_FAULT_OOM;
	folio_set_flags_new(folio, PGF(PG_anon) | PGF(PG_anon_exclusive));
	entry = mk_pte(page_to_pfn(m, &folio->page), vma_is_accessible(vma), vma->flags & VM_WRITE,
		       true);

	if (lockless)
		ptep = pte_offset_nolock(mm, pmdp, addr, &pmd);
	else
		ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep) {
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	if (lockless) {
		/* The folio is private until the CAS publishes it with its mapcount. */
		atomic_store_relaxed(&folio->page.xmapcount, 1);
		if (!pte_install_cas(ptep, entry)) {
			/* Someone mapped it meanwhile (maybe the zero page): look again. */
			atomic_store_relaxed(&folio->page.xmapcount, 0);
			folio_put(folio);
			return VM_FAULT_AGAIN;
		}
		return 0; /* the folio's reference now belongs to this mapping */
	}
	if (!pte_none(ptep_get(ptep))) {
		/* Someone mapped it meanwhile (maybe the zero page): look again. */
		pm_spin_unlock(ptl);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_store_relaxed(&folio->page.xmapcount, 1);
	set_pte(ptep, entry); /* the folio's reference now belongs to this mapping */
	pm_spin_unlock(ptl);
	return 0;
}

/*
 * A read fault on an empty PMD: map the huge zero folio (set_huge_zero_folio). Its leaf takes no
 * reference and no mapcount, and counts as no thp_fault. Return: as below.
 * Context: mmap_lock or the VMA's lock held (fault path).
 */
static vm_fault_t do_huge_zero_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp)
{
	struct pm_machine *m = mm->m;
	struct pm_folio *zero = pm__huge_zero_folio_get(m, &mm->xhuge_zero);
	struct pm_spinlock *pml;
	pm_entry_t *deposit;

	assert_fault_locked(vma);
	deposit = zero ? pm__pte_alloc_one(m) : NULL;
	if (!deposit) {
		count_event(m, THP_FALLBACKS, 1);
		return VM_FAULT_FALLBACK;
	}
	pml = pm__pmd_lockptr(mm, pmdp);
	pm__ptl_lock(pml);
	if (!pmd_install_none(pmdp, mk_huge_zero_pmd(page_to_pfn(m, &zero->page),
						     vma_is_accessible(vma)))) {
		pm_spin_unlock(pml);
		pm__pte_free_now(m, deposit);
		return VM_FAULT_AGAIN;
	}
	pm__pgtable_deposit(mm, pmdp, deposit);
	pm_spin_unlock(pml);
	return 0;
}

/*
 * A fault on an empty PMD of a THP-suitable VMA: a read maps the huge zero folio (unless
 * PM_KNOB_NO_HUGE_ZERO_PAGE), a write - or a read under the knob - a new THP.
 * Context: mmap_lock or the VMA's lock held (fault path).
 * Return: 0 (mapped), VM_FAULT_AGAIN (the PMD changed meanwhile: look again),
 * VM_FAULT_FALLBACK (no 2 MiB block: use 4 KiB pages).
 */
vm_fault_t pm__do_huge_pmd_anonymous_page(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
					  unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *pml;
	struct pm_folio *folio;
	pm_entry_t *deposit;
	pmd_t entry;

	assert_fault_locked(vma);
	vma_anon_prepare(vma); /* for the huge zero page too (do_huge_pmd_anonymous_page) */
	if (!(fault_flags & FAULT_FLAG_WRITE) && !knob(m, PM_KNOB_NO_HUGE_ZERO_PAGE))
		return do_huge_zero_page(mm, vma, pmdp);
	/*
	 * The folio first, then the table deposited for a later split (pgtable/huge_memory.c),
	 * as Linux does: when the block must first be put together from frames the per-CPU
	 * caches hold, that drain also gives back the table frame a zapped THP left on a cache's
	 * page-table list, and the deposit then takes that frame instead of a piece of a block.
	 */
	folio = pm__folio_alloc(m, HPAGE_PMD_ORDER, PM_ALLOC_ZERO);
	deposit = folio ? pm__pte_alloc_one(m) : NULL;
	if (!deposit) {
		if (folio)
			folio_put(folio);
		count_event(m, THP_FALLBACKS, 1);
		return VM_FAULT_FALLBACK;
	}
	/* AnonExclusive on the head covers the PMD mapping. */
	folio_set_flags_new(folio, PGF(PG_anon) | PGF(PG_anon_exclusive));
	entry = mk_huge_pmd(page_to_pfn(m, &folio->page), vma_is_accessible(vma),
			    vma->flags & VM_WRITE);

	atomic_store_relaxed(&folio->page.xentire_mapcount, 1); /* private until the CAS */
	if (pte_lockless(mm)) {
		/* The deposit rides on the folio: no PMD lock (pgtable/huge_memory.c). */
		pm__pgtable_deposit_folio(m, folio, deposit);
		if (!pmd_install_none(pmdp, entry)) {
			pm__pgtable_deposit_folio(m, folio, NULL);
			atomic_store_relaxed(&folio->page.xentire_mapcount, 0);
			folio_put(folio);
			pm__pte_free_now(m, deposit);
			return VM_FAULT_AGAIN;
		}
		count_event(m, THP_FAULTS, 1);
		return 0;
	}
	pml = pm__pmd_lockptr(mm, pmdp);
	pm__ptl_lock(pml);
	if (!pmd_install_none(pmdp, entry)) {
		pm_spin_unlock(pml);
		atomic_store_relaxed(&folio->page.xentire_mapcount, 0);
		folio_put(folio);
		pm__pte_free_now(m, deposit);
		return VM_FAULT_AGAIN;
	}
	pm__pgtable_deposit(mm, pmdp, deposit);
	pm_spin_unlock(pml);
	count_event(m, THP_FAULTS, 1);
	return 0;
}
