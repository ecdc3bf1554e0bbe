// SPDX-License-Identifier: MIT
/*
 * shmem.c - the fault path of shmem mappings (the 2010 seed, "shmem: reduce one time of
 * locking in pagefault"), and its interleavings with truncation, whose other side is
 * mm/truncate.c. The object, its page cache and its exact limit are below the address
 * spaces, in src/shmem/.
 *
 * Fault (modern): look up without a lock; on a hole, allocate and zero a page with no lock
 * held, insert it under the lock of its 64-page leaf of the page cache (src/shmem/cache.c) -
 * if another thread inserted first, free ours and use theirs (shmem_alloc_races) - charging
 * the limit only once the insert cannot fail. So a new page takes no object-wide lock at all
 * (the 2010 seed took one, info_lock, once per page; Linux's xarray still takes its one lock
 * per mapping); a present page takes none. PM_KNOB_SHMEM_LOCK_TWICE is the pre-2010 path:
 * take info_lock, find the hole, drop it to allocate, take it again to insert - twice per new
 * page, and the insert and the charge happen inside it.
 *
 * Linux instead inserts the new folio locked and zeroes it in the cache, so that a second
 * fault of the same page waits for it rather than zeroing a duplicate. pinmm zeroes before it
 * inserts: where CPUs are shared the waiter spins while the zeroing thread may be preempted,
 * and a duplicate costs only a 4 KiB memset on the other CPU and one free (the locked insert
 * was tried and reverted: docs/perf-log.md, 2026-12-02).
 *
 * What the folio lock does give Linux is the sleep. Two threads that touch the same pages in
 * the same order (the reviewer's 2010 variant, "shmem_fault whole") meet at one page; Linux's
 * loser sleeps on the winner's locked folio, wakes up pages behind it, and from then on finds
 * every page mapped - one thread faults, the other only touches. Without a sleep the two stay
 * in step: both zero every page, one drops its copy, and the PTE table's, the leaf's and the
 * descriptors' lines cross between the CPUs on every page. So the loser of an insert race
 * here sleeps a moment before it looks again (shmem_race_backoff()); no lock is held then but
 * the VMA's (or mmap_lock) for read, as when Linux's fault sleeps on a folio. After one such
 * sleep two threads in step are out of step and stay so, and the dropped allocations
 * (shmem_alloc_races) become rare (docs/perf-log.md, 2026-12-03, "the loser sleeps"). A race
 * between faults that do not go on meeting costs its loser one sleep.
 *
 * Truncate vs fault. Truncate sets the size, removes the pages beyond it from the cache
 * (clearing PG_shmem under tree_lock), then zaps every mapping of that range in every VMA on
 * i_mmap. A fault installs a page-cache page (or a private copy of one) only under the PTE
 * lock and only while the cache page still has PG_shmem. Three interleavings matter:
 *
 * (a) The zap reaches the PTE table. Both sides take its PTL:
 *
 *	truncate				fault (shmem_map)
 *	--------				-----------------
 *	clear PG_shmem (tree_lock)		lock PTL
 *	pm_smp_mb()				pm_smp_mb()
 *	zap: lock PTL				PG_shmem set? install the PTE
 *	     clear the PTE			unlock PTL
 *	     unlock PTL
 *
 *     If the fault holds the PTL first, the zap, which comes after, removes what it installed.
 *     If the zap holds it first, the fault's later acquire of the PTL is ordered after the
 *     zap's release, which is after the clear: the fault sees PG_shmem clear and retries.
 *
 * (b) The zap finds no PTE table: the fault published it after the zap looked. The PTL orders
 *     nothing then, so the barriers do (store-buffering):
 *
 *	truncate				fault
 *	--------				-----
 *	store: PG_shmem clear			store: publish the PTE table (pm__pte_alloc)
 *	pm_smp_mb()				lock PTL; pm_smp_mb()
 *	load: the PMD (zap) -> none		load: PG_shmem -> must be clear
 *
 *     With both full barriers, at least one load sees the other side's store: either the zap
 *     sees the table (case a), or the fault sees PG_shmem clear and does not install.
 *
 * (c) The fault inserted a new page while truncate shrank the object: truncate's batch may
 *     have run before the insert, so the fault re-reads the size after inserting and, if its
 *     index is now beyond it, takes the page out again (pm__shmem_delete) and reports SIGBUS.
 *     Truncate stores the size with a full barrier before removing pages, and reads a leaf's
 *     slots under the leaf's lock, which the fault's insert holds, so one of them sees the
 *     other.
 *
 * (d) Another fault finds that page in the cache before (c) takes it out, and maps it after
 *     truncate's zap went by: PG_shmem is still set, so (a) and (b) do not stop it. So
 *     shmem_map() also reads the size, under the PTL and after its barrier, as it reads
 *     PG_shmem: truncate's size store comes before its clear, so the pairings of (a) and (b)
 *     make the fault see the new size wherever they make it see the clear, and it looks again
 *     (then SIGBUS).
 *
 * To summarize:
 *  1) A page-cache page is mapped only under a PTL, and only while PG_shmem is set.
 *  2) Truncate clears PG_shmem before it zaps, with a full barrier between, and the fault
 *     takes the PTL and a full barrier before it tests PG_shmem: so the zap removes every PTE
 *     a racing fault installed, or the fault installs none (a, b).
 *  3) A page inserted at an index the new size excludes is taken out by the fault itself (c),
 *     and mapped by no other fault meanwhile (d).
 *  4) Pinned pages live on until their last unpin: truncation drops only the cache's and the
 *     mappings' references.
 *
 * Locks, outermost first: truncate_lock > i_mmap_lock > PTL > tree_lock > a leaf's lock >
 * limit.lock (LOCK_TWICE: info_lock > tree_lock, never with a PTL held).
 */
#include <time.h>

#include "fault/fault.h"

/* ---- lookup and fault ---- */

/*
 * How long the loser of an insert race sleeps (see the top of the file). The request is
 * short; the kernel's timer slack (50 us by default) and the wake-up make the sleep tens of
 * microseconds, which is what puts the loser pages behind the winner.
 */
#define SHMEM_RACE_SLEEP_NS 10000

static void shmem_race_backoff(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = SHMEM_RACE_SLEEP_NS };

	nanosleep(&ts, NULL);
}

/**
 * shmem_get_folio() - the folio at @index, allocating it on a hole; returned with a reference.
 * Return: the folio, or ERR as -EFAULT (beyond the size or over the limit: SIGBUS) / -ENOMEM
 * through @err.
 */
static struct pm_folio *shmem_get_folio(struct pm_shmem *f, unsigned long index, int *err)
{
	struct pm_machine *m = f->m;
	bool twice = knob(m, PM_KNOB_SHMEM_LOCK_TWICE);
	struct pm_folio *folio, *new;
	int ret;

retry:
	if (index >= shmem_size_pages(f)) {
		*err = -EFAULT;
		return NULL;
	}
	folio = pm__shmem_lookup(f, index);
	if (folio)
		return folio;

	if (twice) {
		/* 2010: the hole is found under info->lock, which is dropped to allocate. */
		pm_spin_lock(&f->info_lock);
		count_event(m, SHMEM_LOCK_ACQUISITIONS, 1);
		pm_rcu_read_lock(); /* info_lock does not keep tree nodes alive */
		folio = pm__shmem_peek(f, index);
		pm_rcu_read_unlock();
		pm_spin_unlock(&f->info_lock);
		if (folio)
			goto retry;
	}
	new = pm__folio_alloc(m, 0, PM_ALLOC_ZERO);
	if (!new) {
		*err = -ENOMEM;
		return NULL;
	}
	folio_set_flags_new(new, PGF(PG_dirty));
	new->page.mapping = f;
	new->page.index = index;
	folio_get_refs(new, 1); /* one for the cache, one for the caller */

	if (twice) {
		pm_spin_lock(&f->info_lock);
		count_event(m, SHMEM_LOCK_ACQUISITIONS, 1);
	}
	ret = pm__shmem_add(f, index, new); /* charges the limit only if it inserts */
	if (ret == -ENOSPC)
		ret = -EFAULT; /* over the limit: a fault turns ENOSPC into SIGBUS */
	if (ret) {
		if (twice)
			pm_spin_unlock(&f->info_lock);
		new->page.mapping = NULL;
		folio_put_refs(new, 2);
		if (ret == -EEXIST) {
			count_event(m, SHMEM_ALLOC_RACES, 1);
			shmem_race_backoff();
			goto retry;
		}
		*err = ret;
		return NULL;
	}
	if (twice)
		pm_spin_unlock(&f->info_lock);
	count_event(m, SHMEM_ALLOCS, 1);

	/* A truncation may have passed this index while we inserted: take the page out again. */
	if (unlikely(index >= shmem_size_pages(f))) {
		if (pm__shmem_delete(f, index, new) && f->max_pages)
			pm__shmem_limit_uncharge(f, 1);
		folio_put(new);
		goto retry; /* reports -EFAULT, as the size says */
	}
	return new;
}

/*
 * Install @folio (a referenced page-cache page, or a private copy of one) at @addr, provided
 * @cache - the page-cache page it is, or was copied from - is still in the cache: the PTL
 * orders this test against truncation's zap (see the top of the file).
 */
static vm_fault_t shmem_map(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
			    struct pm_folio *folio, pte_t entry, struct pm_folio *cache,
			    struct pm_shmem *f, unsigned long index)
{
	struct pm_spinlock *ptl;
	pm_entry_t *ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);

	if (!ptep) {
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	pm_smp_mb(); /* pairs with truncate's barrier before its zap */
	if (!pte_none(ptep_get(ptep)) || !page_test(&cache->page, PG_shmem) ||
	    index >= shmem_size_pages(f)) {
		/* Someone mapped it, or truncation took the page out or is taking it: look again. */
		pm_spin_unlock(ptl);
		folio_put(folio);
		return VM_FAULT_AGAIN;
	}
	atomic_add_relaxed(&folio->page.xmapcount, 1);
	set_pte(ptep, entry); /* our reference now belongs to the mapping */
	pm_spin_unlock(ptl);
	return 0;
}

/**
 * pm__shmem_fault() - fault on an empty PTE of a VMA mapping a shmem object.
 *
 * Shared mappings map the page-cache page (writable when VM_WRITE: shmem needs no dirty
 * tracking). Private mappings map it read-only on a read fault and, on a write fault, map an
 * exclusive anonymous copy instead (do_cow_fault) - installed only if the page it was copied
 * from is still in the cache, so truncation cannot miss it.
 * Context: mmap_lock or the VMA's lock held (fault path).
 * Return: 0, VM_FAULT_AGAIN (look again), VM_FAULT_SIGBUS, VM_FAULT_OOM.
 */
vm_fault_t pm__shmem_fault(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp,
			   unsigned long addr, unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	bool write = fault_flags & FAULT_FLAG_WRITE;
	bool shared = vma->flags & VM_SHARED;
	unsigned long index = vma_pgoff(vma, addr);
	struct pm_folio *folio, *copy;
	vm_fault_t ret;
	int err = 0;

	assert_fault_locked(vma);
	/* do_cow_fault prepares the anon_vma before it looks up the page: even a write fault
	 * past the end (SIGBUS) leaves the VMA with one */
	if (!shared && write)
		vma_anon_prepare(vma);
	folio = shmem_get_folio(vma->file, index, &err);
	if (!folio)
		return vmf_error(err);
	if (shared || !write)
		return shmem_map(mm, pmdp, addr, folio,
				 mk_pte(page_to_pfn(m, &folio->page), vma_is_accessible(vma),
					shared && (vma->flags & VM_WRITE), write),
				 folio, vma->file, index);

	copy = pm__folio_alloc(m, 0, 0);
	if (!copy) {
		folio_put(folio);
		return VM_FAULT_OOM;
	}
	memcpy(page_address(m, &copy->page), page_address(m, &folio->page), PAGE_SIZE);
	folio_set_flags_new(copy, PGF(PG_anon) | PGF(PG_anon_exclusive));
	ret = shmem_map(mm, pmdp, addr, copy,
			mk_pte(page_to_pfn(m, &copy->page), vma_is_accessible(vma),
			       vma->flags & VM_WRITE, true),
			folio, vma->file, index);
	folio_put(folio);
	if (!ret)
		count_event(m, COW_COPIES, 1);
	return ret;
}
