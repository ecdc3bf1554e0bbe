// SPDX-License-Identifier: MIT
/*
 * gup.c - get_user_pages and pin_user_pages: the slow path under mmap_lock and its entry
 * points, and the unpin family with its folio batching. The argument checks and the
 * has-pinned flag are inlines in gup/gup.h; the fast entry points and their lockless walk
 * are gup_fast.c.
 *
 * References. A get adds 1 to the folio's refcount per page. A pin (FOLL_PIN) adds
 * GUP_PIN_COUNTING_BIAS (1024) to a small folio's refcount, and 1 to a large folio's refcount
 * plus 1 to its pincount, per page: so folio_maybe_dma_pinned() is exact for large folios and
 * has no false negatives for small ones. The 4 KiB zero page is never referenced nor pinned;
 * the huge zero folio is, as any large folio (Linux 6.18's try_grab_folio and gup_put_folio
 * exempt is_zero_folio() only, the 4 KiB one): its pins show in nr_foll_pin_acquired and in
 * its pincount, and the machine's own reference keeps it whatever is released.
 *
 * The slow path (follow_page under the page-table locks, faulting what is missing) holds
 * mmap_lock for read for the whole call, as get_user_pages_unlocked does. The range design
 * first walks the VMA at the start under that VMA's own read lock (gup_vma_locked), as its
 * faults do, and takes the range's lock only for what lies beyond it or needs a retry. A request that must
 * write (FOLL_WRITE) faults with FAULT_FLAG_WRITE, which breaks COW; a read-only pin of an
 * anonymous page that is not exclusive faults with FAULT_FLAG_UNSHARE first (gup_must_unshare).
 * So does a read-only long-term pin of a zero page, 4 KiB or huge, in a COW mapping: the huge
 * zero leaf is split and the page pinned gets a zeroed copy of its own (fault/cow.c).
 *
 * The has-pinned flag (MMF_HAS_PINNED): set on the mm before its first pin, read by fork. It
 * is tested before it is set, so after the first pin no pin writes the mm's hot cache line
 * (2021, "mm: gup: allow FOLL_PIN to scale in SMP"); PM_KNOB_HAS_PINNED_ALWAYS_WRITE restores
 * the unconditional store of the code before that patch.
 */
#include "gup/gup.h"
#include "gup/gup_pte.h"
#include "pgtable/pte_cas.h"

/* ---- taking and dropping references ---- */

/**
 * try_grab_folio() - take @refs references of kind @flags (FOLL_GET or FOLL_PIN) on a
 * folio the caller holds stable (under a page-table lock, or with a reference).
 * Return: false if the refcount would overflow (the caller answers -ENOMEM).
 */
static bool try_grab_folio(struct pm_folio *folio, int refs, unsigned flags)
{
	if (folio_is_zero(folio))
		return true;
	if (flags & FOLL_PIN) {
		struct pm_machine *m = page_machine(&folio->page);

		if (unlikely(folio_hot(folio)) && pm__folio_hot_grab(m, folio, refs)) {
			/* mem/folio_hot.c: this CPU's slot */
		} else if (folio_test_large(folio)) {
			if (!pm__folio_ref_add(folio, refs, PM_GUP_REF_LIMIT))
				return false;
			atomic_add_mb(&folio->page.xpincount, refs);
		} else if (!pm__folio_ref_add(folio, refs * GUP_PIN_COUNTING_BIAS,
					      PM_GUP_REF_LIMIT)) {
			return false;
		}
		if ((flags & FOLL_HOT) && unlikely(pinned_by_another(folio, refs)) &&
		    !folio_hot(folio) && pm__folio_pin_contended(folio))
			pm__folio_hot_enter(folio);
		count_event(m, NR_FOLL_PIN_ACQUIRED, (unsigned)refs);
		return true;
	}
	if (flags & FOLL_GET)
		return pm__folio_ref_add(folio, refs, PM_GUP_REF_LIMIT);
	return true;
}

/*
 * A release of more than a folio holds: the caller's bug (a double unpin or put). The count
 * was left as it was, so a folio that is still mapped is never freed. Debug builds stop here
 * with the counts; release builds warn once and go on.
 */
static __cold void bad_put(struct pm_folio *folio, const char *what, int old, int amount)
{
#if PM_DEBUG >= 1
	fprintf(stderr, "pinmm: double unpin or put: releasing %d from a folio whose %s is %d "
			"(refcount %d, pincount %d, order %u, pfn %lu)\n",
		amount, what, old, folio_ref_count(folio),
		atomic_load_relaxed(&folio->page.xpincount), folio_order(folio),
		pm_page_to_pfn(&folio->page));
	pm_die("reference released twice");
#else
	pm_warn_once(1, "releasing more references than a folio holds (double unpin?); "
			"the release is refused");
	(void)folio, (void)what, (void)old, (void)amount;
#endif
}

/* Subtract @amount from *@v unless it holds less; *@old gets the value seen. */
static __always_inline bool sub_unless_below(_Atomic int *v, int amount, int *old)
{
	*old = atomic_load_relaxed(v);
	do {
		if (unlikely(*old < amount))
			return false;
	} while (!atomic_cas_mb(v, old, *old - amount));
	return true;
}

/* Drop @amount references; the folio is freed when they were the last. False: refused. */
static __always_inline bool put_refs_checked(struct pm_folio *folio, int amount)
{
	int old;

	if (unlikely(!sub_unless_below(&folio->page.xrefcount, amount, &old))) {
		bad_put(folio, "refcount", old, amount);
		return false;
	}
	if (old == amount)
		pm__folio_free(folio);
	else if (unlikely(folio_hot(folio)))
		pm__folio_hot_unmapped(folio); /* mem/folio_hot.c, (H3) */
	return true;
}

/* A hot folio's unpin (mem/folio_hot.c), out of line: the unpin loops stay small. */
static __noinline bool gup_put_hot(struct pm_machine *m, struct pm_folio *folio, int refs)
{
	return pm__folio_hot_put(m, folio, refs);
}

/* Release @refs pins of @folio, not the zero page, on its shared counts. False: refused. */
static bool unpin_shared(struct pm_folio *folio, int refs)
{
	int old;

	if (!folio_test_large(folio))
		return put_refs_checked(folio, refs * GUP_PIN_COUNTING_BIAS);
	/* Every folio size refuses an underflow the same way: nothing changes. */
	if (unlikely(!sub_unless_below(&folio->page.xpincount, refs, &old))) {
		bad_put(folio, "pincount", old, refs);
		return false;
	}
	put_refs_checked(folio, refs);
	return true;
}

/* Release @refs references of kind @flags taken by try_grab_folio (or the fast path). */
void pm__gup_put_folio(struct pm_folio *folio, int refs, unsigned flags)
{
	if (folio_is_zero(folio))
		return;
	if (flags & FOLL_PIN) {
		struct pm_machine *m = page_machine(&folio->page);

		/* A hot folio's pins go to this CPU's slot (an underflow shows at the fold). */
		if ((unlikely(folio_hot(folio)) && gup_put_hot(m, folio, refs)) ||
		    unpin_shared(folio, refs))
			count_event(m, NR_FOLL_PIN_RELEASED, (unsigned)refs);
	} else {
		put_refs_checked(folio, refs);
	}
}

/**
 * pm__gup_must_unshare() - must a read-only pin of @page first make it exclusive?
 * @vma: the mapping, or NULL from the fast path (which then assumes a COW mapping).
 * Only FOLL_PIN without FOLL_WRITE asks. Anonymous pages: unless AnonExclusive (for a PMD
 * mapping, the head's flag). Other pages (the zero page, page-cache pages): only long-term
 * pins in COW (private) mappings, which must not keep seeing the file after the process
 * writes - the R/O long-term pin tests of Linux's cow.c.
 */
bool pm__gup_must_unshare(struct pm_vma *vma, unsigned flags, struct pm_page *page)
{
	struct pm_folio *folio = page_folio(page);

	if ((flags & (FOLL_PIN | FOLL_WRITE)) != FOLL_PIN)
		return false;
	if (!folio_is_zero(folio) && folio_test_anon(folio)) {
		pm_smp_rmb(); /* pairs with fork's barrier before it clears AnonExclusive */
		return !page_anon_exclusive(page);
	}
	if (!(flags & FOLL_LONGTERM))
		return false;
	return !vma || is_cow_mapping(vma->flags);
}

/* ---- the slow path ---- */

static int check_vma_flags(struct pm_vma *vma, unsigned flags)
{
	if (flags & FOLL_WRITE) {
		if (!(vma->flags & VM_WRITE)) {
			if (!(flags & FOLL_FORCE) || !is_cow_mapping(vma->flags))
				return -EFAULT;
		}
	} else if (!(vma->flags & VM_READ)) {
		if (!(flags & FOLL_FORCE) || !(vma->flags & VM_MAYREAD))
			return -EFAULT;
	}
	return 0;
}

/*
 * May FOLL_FORCE write through this read-only PTE? Only into an exclusive anonymous page of a
 * private mapping that is not writable: COW has already been broken, so no page-cache page
 * and no page shared with another process is ever written (no Dirty COW).
 */
static bool can_follow_write(struct pm_vma *vma, unsigned flags, struct pm_page *page)
{
	struct pm_folio *folio = page_folio(page);

	if (!(flags & FOLL_FORCE) || (vma->flags & (VM_MAYSHARE | VM_WRITE)) ||
	    !(vma->flags & VM_MAYWRITE))
		return false;
	return !folio_is_zero(folio) && folio_test_anon(folio) && page_anon_exclusive(page);
}

/* follow_page()'s answers besides a page count and -ENOMEM: below every -errno (Linux's
 * MAX_ERRNO bounds them), so that neither is ever taken for an error or an error for one. */
#define MAX_ERRNO 4095
#define FOLLOW_FAULT (-MAX_ERRNO - 1)	/* nothing usable mapped: fault it in */
#define FOLLOW_UNSHARE (-MAX_ERRNO - 2) /* mapped, but a R/O pin needs an exclusive page first */

/*
 * Take up to @nr references on the pages mapped from @addr in one leaf (a PTE, or the rest of
 * a 2 MiB PMD mapping), under the leaf's lock. @pages may be NULL (populate: no references).
 * Return: pages taken (> 0), FOLLOW_FAULT, FOLLOW_UNSHARE, or -ENOMEM.
 */
static long follow_page(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			unsigned long nr, unsigned flags, struct pm_page **pages)
{
	struct pm_machine *m = mm->m;
	bool write = flags & FOLL_WRITE;
	bool grab = flags & (FOLL_GET | FOLL_PIN);
	pm_entry_t *pmdp = pm__pmd_lookup(mm, addr);
	struct pm_spinlock *ptl;
	struct pm_page *page;
	pm_entry_t *ptep;
	pmd_t pmd;
	pte_t pte;

	if (!pmdp)
		return FOLLOW_FAULT;
	pmd = pmdp_get(pmdp);
	if (pmd_none(pmd) || is_pmd_migration_entry(pmd))
		return FOLLOW_FAULT; /* a hugetlb migration entry: the fault waits for it */
	if (pmd_leaf(pmd)) {
		struct pm_folio *folio;
		unsigned long idx = (addr & ~PMD_MASK) >> PAGE_SHIFT;
		long n = (long)min(nr, (unsigned long)HPAGE_PMD_NR - idx);

		if (grab && pte_lockless(mm) && !pmd_special(pmd)) {
			/* The range design: no PMD lock for a leaf either. Its references are
			 * taken as GUP-fast takes them, the entry read again after a full
			 * barrier; on a change, the lock decides (gup_fast.c, (B)). */
			page = pfn_to_page(m, pmd_pfn(pmd));
			folio = try_grab_folio_fast(m, page, (int)n, flags, false);
			if (folio && !pmd_same(pmdp_get_mb(pmdp), pmd)) {
				ungrab_folio(m, folio, (int)n, flags);
				folio = NULL;
			}
			if (folio) {
				long ret = n;

				if (write && !pmd_write(pmd) && !can_follow_write(vma, flags, page))
					ret = FOLLOW_FAULT;
				else if (!pmd_write(pmd) && pm__gup_must_unshare(vma, flags, page))
					ret = FOLLOW_UNSHARE;
				if (ret != n) {
					ungrab_folio(m, folio, (int)n, flags);
					return ret;
				}
				if (flags & FOLL_PIN)
					count_event(m, NR_FOLL_PIN_ACQUIRED, (unsigned long)n);
				if (write)
					pm__folio_mark_dirty(folio);
				goto leaf_taken;
			}
		}
		ptl = pm__pmd_lockptr(mm, pmdp);
		pm__ptl_lock(ptl);
		pmd = pmdp_get(pmdp);
		if (!pmd_leaf(pmd)) {
			pm_spin_unlock(ptl);
			return follow_page(mm, vma, addr, nr, flags, pages);
		}
		page = pfn_to_page(m, pmd_pfn(pmd));
		folio = page_folio(page);
		if (write && !pmd_write(pmd) && !can_follow_write(vma, flags, page)) {
			pm_spin_unlock(ptl);
			return FOLLOW_FAULT;
		}
		if (!pmd_write(pmd) && pm__gup_must_unshare(vma, flags, page)) {
			pm_spin_unlock(ptl);
			return FOLLOW_UNSHARE;
		}
		if (grab && !try_grab_folio(folio, (int)n, flags)) {
			pm_spin_unlock(ptl);
			return -ENOMEM;
		}
		if (write)
			pm__folio_mark_dirty(folio);
		pm_spin_unlock(ptl);
leaf_taken:
		if (pages)
			for (long i = 0; i < n; i++)
				pages[i] = page + idx + i;
		return n;
	}

	if (grab && pte_lockless(mm)) {
		/* The range design: no PTL for a present entry (fault/anon.c's top comment). */
		ptep = pte_offset_nolock(mm, pmdp, addr, &pmd);
		if (!ptep)
			return follow_page(mm, vma, addr, nr, flags, pages);
		pte = ptep_get(ptep);
		if (!pte_present(pte))
			return FOLLOW_FAULT;
		page = pfn_to_page(m, pte_pfn(pte));
		if (pte_special(pte)) {
			/* The 4 KiB zero page: never freed, never counted (try_grab_folio). */
			if (write && !can_follow_write(vma, flags, page))
				return FOLLOW_FAULT;
			if (pm__gup_must_unshare(vma, flags, page))
				return FOLLOW_UNSHARE;
			if (pages)
				pages[0] = page;
			return 1;
		}
		if (pm__gup_pte_grab(m, pmdp, pmd, ptep, pte, page, flags)) {
			if (write && !pte_write(pte) && !can_follow_write(vma, flags, page)) {
				pm__gup_pte_ungrab(m, page, flags);
				return FOLLOW_FAULT;
			}
			if (!pte_write(pte) && pm__gup_must_unshare(vma, flags, page)) {
				pm__gup_pte_ungrab(m, page, flags);
				return FOLLOW_UNSHARE;
			}
			if (flags & FOLL_PIN)
				count_event(m, NR_FOLL_PIN_ACQUIRED, 1);
			if (write)
				pm__folio_mark_dirty(page_folio(page));
			if (pages)
				pages[0] = page;
			return 1;
		}
		/* A folio being freed or at its limit, or a changed entry: the PTL decides. */
	}
	ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);
	if (!ptep)
		return follow_page(mm, vma, addr, nr, flags, pages);
	pte = ptep_get(ptep);
	if (!pte_present(pte)) {
		pm_spin_unlock(ptl);
		return FOLLOW_FAULT;
	}
	page = pfn_to_page(m, pte_pfn(pte));
	if (write && !pte_write(pte) && !can_follow_write(vma, flags, page)) {
		pm_spin_unlock(ptl);
		return FOLLOW_FAULT;
	}
	if (!pte_write(pte) && pm__gup_must_unshare(vma, flags, page)) {
		pm_spin_unlock(ptl);
		return FOLLOW_UNSHARE;
	}
	if (grab && !try_grab_folio(page_folio(page), 1, flags)) {
		pm_spin_unlock(ptl);
		return -ENOMEM;
	}
	if (write && !pte_special(pte))
		pm__folio_mark_dirty(page_folio(page));
	pm_spin_unlock(ptl);
	if (pages)
		pages[0] = page;
	return 1;
}

/*
 * The walk of __get_user_pages over [start, start + nr_pages), faulting as it goes. With
 * @locked_vma (held by its read lock, FAULT_FLAG_VMA_LOCK for faults), the walk stays in that
 * VMA: a page past its end, or a fault that asks for a retry, ends it with *@retry set and
 * the pages taken so far; the caller goes on under the mm's lock.
 */
static long gup_walk(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
		     unsigned flags, struct pm_page **pages, struct pm_vma *locked_vma,
		     bool *retry)
{
	struct pm_vma *vma = locked_vma;
	unsigned long i = 0;
	long err = 0;

	while (i < nr_pages) {
		unsigned long addr = start + (i << PAGE_SHIFT);
		long ret;

		if (locked_vma && addr >= vma->end) {
			*retry = true;
			break;
		}
		if (!vma || addr >= vma->end) {
			vma = pm__find_vma(mm, addr);
			if (!vma || vma->start > addr) {
				err = (flags & FOLL_MADV_POPULATE) ? -ENOMEM : -EFAULT;
				break;
			}
		}
		if (vma != locked_vma || i == 0) {
			err = check_vma_flags(vma, flags);
			if (err && (flags & FOLL_MADV_POPULATE))
				err = -EINVAL; /* madvise's answer for a mapping it cannot populate */
			if (err)
				break;
		}
		ret = follow_page(mm, vma, addr, nr_pages - i, flags, pages ? pages + i : NULL);
		if (ret > 0) {
			i += (unsigned long)ret;
			continue;
		}
		if (ret == FOLLOW_FAULT || ret == FOLLOW_UNSHARE) {
			unsigned fflags;
			vm_fault_t fault;

			if (flags & FOLL_NOFAULT) {
				err = -EFAULT;
				break;
			}
			if (ret == FOLLOW_UNSHARE)
				fflags = FAULT_FLAG_UNSHARE;
			else
				fflags = (flags & FOLL_WRITE) ? FAULT_FLAG_WRITE : 0;
			if (locked_vma)
				fflags |= FAULT_FLAG_VMA_LOCK;
			fault = pm__handle_mm_fault(mm, vma, addr, fflags);
			if (locked_vma && (fault & VM_FAULT_RETRY)) {
				*retry = true;
				break;
			}
			if (fault) {
				err = vm_fault_to_errno(fault);
				break;
			}
			continue;
		}
		err = ret;
		break;
	}
	return i ? (long)i : err;
}

/**
 * pm__gup_locked() - __get_user_pages: the slow walk, faulting as it goes.
 * @flags: FOLL_* including FOLL_GET or FOLL_PIN when @pages is given.
 *
 * Context: the mm's lock held over the span, any mode (mmap_lock; in the range design its
 * ranges). Return: pages taken (or faulted in, without @pages), or -errno when none was.
 */
long pm__gup_locked(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
		    unsigned flags, struct pm_page **pages)
{
	bool retry = false;

	mmap_assert_locked(mm);
	return gup_walk(mm, start, nr_pages, flags, pages, NULL, &retry);
}

/*
 * The range design's first try (policy->gup_vma_lock): the VMA covering @start under its own
 * read lock, found without the range's lock, as a fault finds it (pm_fault). Two slow pins of
 * different VMAs of one range then write nothing in common: the range lock's reader count is
 * one word. Return: pages taken, or -errno (the walk's answer, as under the mm's lock: the
 * VMA cannot change while its lock is held, and a fault that needs more asks for a retry);
 * *@rest is set when the walk left the VMA or a fault asked for a retry, and the caller goes
 * on from the page after those taken, under the mm's lock.
 */
static long gup_vma_locked(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			   unsigned flags, struct pm_page **pages, bool *rest)
{
	struct pm_vma *vma;
	long ret;

	*rest = true;
	if (knob(mm->m, PM_KNOB_NO_PER_VMA_LOCK))
		return 0;
	vma = pm__lock_vma_under_rcu(mm, start);
	if (!vma) {
		if (!pm__vma_absent(mm, start, false))
			return 0;
		*rest = false; /* no VMA at the first page: the walk's answer (gup_walk) */
		return (flags & FOLL_MADV_POPULATE) ? -ENOMEM : -EFAULT;
	}
	*rest = false;
	ret = gup_walk(mm, start, nr_pages, flags, pages, vma, rest);
	pm__vma_end_read(vma);
	return ret;
}

/**
 * pm__gup_slow() - pm__gup_locked() under the mm's lock for read (taken and dropped here),
 * after the VMA lock's try where the policy has one. The answer is the same either way.
 * Return: pages taken, or -errno when none was.
 */
long pm__gup_slow(struct pm_mm *mm, unsigned long start, unsigned long nr_pages, unsigned flags,
		  struct pm_page **pages)
{
	bool rest = true;
	long done = 0, ret;

	if (!nr_pages)
		return 0;
	if (mm->policy->gup_vma_lock) {
		done = gup_vma_locked(mm, start, nr_pages, flags, pages, &rest);
		if (done < 0 || (unsigned long)done == nr_pages)
			rest = false;
	}
	if (rest) {
		unsigned long s = start + ((unsigned long)done << PAGE_SHIFT);
		unsigned long n = nr_pages - (unsigned long)done;

		mmap_read_lock_range(mm, s, n > (PM_TASK_SIZE - s) >> PAGE_SHIFT ?
					    PM_TASK_SIZE : s + (n << PAGE_SHIFT));
		ret = pm__gup_locked(mm, s, n, flags, pages ? pages + done : NULL);
		mmap_read_unlock(mm);
		if (ret > 0)
			done += ret;
		else if (!done)
			done = ret;
	}
	if (done > 0 && pages)
		count_event(mm->m, GUP_SLOW_PAGES, (unsigned long)done);
	return done;
}

/**
 * pm__populate() - fault @nr_pages pages from @start in, taking no reference: the one call
 * the address-space layer makes into this one (mm/populate.c), as Linux's mmap, mprotect,
 * mremap and madvise reach gup.c only through populate_vma_page_range, __mm_populate and
 * faultin_page_range. @locked: the caller holds the mm's lock over the span (mprotect holds
 * it for write); otherwise it is taken here, as pm__gup_slow() takes it.
 * Return: pages faulted in, or -errno when none was.
 */
long pm__populate(struct pm_mm *mm, unsigned long start, unsigned long nr_pages, unsigned flags,
		  bool locked)
{
	return locked ? pm__gup_locked(mm, start, nr_pages, flags, NULL) :
			pm__gup_slow(mm, start, nr_pages, flags, NULL);
}

/*
 * pm__gup_longterm() - a FOLL_LONGTERM pin on a machine with a movable zone (Linux 5.13's
 * __gup_longterm_locked and check_and_migrate_movable_folios): pin, and if any page lies in
 * the movable zone, release every pin, migrate the range out of the zone
 * (PM_MIGRATE_AWAY_MOVABLE) and pin again, so that the movable zone stays movable. A page that
 * cannot be moved (pinned by someone else, shared with another mm, a kind pinmm does not
 * migrate) makes the call fail with -ENOMEM, as Linux's does. PM_KNOB_LONGTERM_PIN_IN_PLACE
 * pins in place, as before 5.13. Context: any, as the pin calls; both steps take the mm's lock themselves.
 * Return: as pm__gup_slow().
 */
long pm__gup_longterm(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
		      unsigned flags, struct pm_page **pages)
{
	struct pm_machine *m = mm->m;

	for (int pass = 0;; pass++) {
		long got = pm__gup_slow(mm, start, nr_pages, flags, pages);
		unsigned long first = ULONG_MAX, last = 0;
		long rc;

		if (got <= 0)
			return got;
		for (long i = 0; i < got; i++) {
			if (pfn_in_movable_zone(m, page_to_pfn(m, pages[i]))) {
				first = min(first, (unsigned long)i);
				last = (unsigned long)i;
			}
		}
		if (first == ULONG_MAX)
			return got;
		for (long i = 0; i < got; i++)
			pm__gup_put_folio(page_folio(pages[i]), 1, flags);
		if (pass == 2)
			return -ENOMEM; /* migrated, and back in the movable zone again: give up */
		rc = pm_migrate_range(mm, start + (first << PAGE_SHIFT), (last - first + 1) << PAGE_SHIFT,
				      PM_MIGRATE_AWAY_MOVABLE);
		if (rc)
			return rc < 0 && rc != -ENOSPC ? rc : -ENOMEM;
	}
}

/* ---- argument checks and entry points ---- */

long pm_get_user_pages(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
		       unsigned gup_flags, struct pm_page **pages)
{
	long err = pm__gup_check_args(mm, start, nr_pages, gup_flags, pages, false, false);

	if (err)
		return err;
	return pm__gup_slow(mm, start & PAGE_MASK, nr_pages, gup_flags | (pages ? FOLL_GET : 0),
			    pages);
}

long pm_pin_user_pages(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
		       unsigned gup_flags, struct pm_page **pages)
{
	long err = pm__gup_check_args(mm, start, nr_pages, gup_flags, pages, true, false);

	if (err)
		return err;
	if (!nr_pages)
		return 0;
	mm_set_has_pinned(mm);
	if (pm__gup_longterm_migrates(mm->m, gup_flags))
		return pm__gup_longterm(mm, start & PAGE_MASK, nr_pages, gup_pin_flags(mm, gup_flags),
					pages);
	return pm__gup_slow(mm, start & PAGE_MASK, nr_pages, gup_pin_flags(mm, gup_flags), pages);
}

/* ---- release ---- */

void pm_put_page(struct pm_page *page)
{
	if (page)
		pm__gup_put_folio(page_folio(page), 1, FOLL_GET);
}

void pm_unpin_user_page(struct pm_page *page)
{
	struct pm_folio *folio;
	struct pm_machine *m;

	if (!page)
		return;
	folio = page_folio(page);
	m = page_machine(&folio->page);
	if (unlikely(folio_test_large(folio) || folio_is_zero(folio) || folio_hot(folio))) {
		struct pm_stat_block *b = pm__stat_block(m);

		/* A hot folio's unpin inline (pin_hot's loop); a hot unpin that found the folio
		 * leaving hot mode goes to the shared counts, as the rest do. */
		if (!folio_is_zero(folio) &&
		    ((folio_hot(folio) && pm__folio_hot_put(m, folio, 1)) || unpin_shared(folio, 1)))
			count_event_in(m, b, NR_FOLL_PIN_RELEASED, 1);
		count_event_in(m, b, UNPIN_FOLIO_UPDATES, 1);
		return;
	}
	/* The common case: pm__gup_put_folio() for a small folio, without its calls. */
	if (!put_refs_checked(folio, GUP_PIN_COUNTING_BIAS)) {
		count_event(m, UNPIN_FOLIO_UPDATES, 1);
		return;
	}
	count_event(m, UNPIN_SMALL_ONE, 1); /* one pin released in one folio update */
}

/* Dirty @folio for an unpin with make_dirty: under the folio lock, only if it is clean. A zero
 * page, 4 KiB or huge, has no contents to write back and stays clean. */
static void unpin_dirty(struct pm_folio *folio)
{
	if (folio_is_zero(folio) || is_huge_zero_folio(folio) || folio_test(folio, PG_dirty))
		return;
	pm__folio_lock(folio);
	pm__folio_mark_dirty(folio);
	pm__folio_unlock(folio);
}

/*
 * Release @npages pins of @pages: runs of consecutive entries of one folio go in one atomic
 * update (Linux's gup_folio_next); NULL entries are skipped and end a run.
 */
static void unpin_pages(struct pm_page **pages, unsigned long npages, bool make_dirty)
{
	struct pm_machine *m = NULL;
	unsigned long updates = 0;
	bool per_page;

	if (npages >= (unsigned long)-4095) { /* an errno passed as a count */
		pm_warn_once(1, "unpin_user_pages: npages looks like an errno");
		return;
	}
	for (unsigned long i = 0; i < npages; i++) {
		if (pages[i]) {
			m = page_machine(pages[i]);
			break;
		}
	}
	if (!m)
		return;
	per_page = knob(m, PM_KNOB_UNPIN_PER_PAGE);
	for (unsigned long i = 0; i < npages;) {
		struct pm_folio *folio;
		unsigned long n = 1;

		if (!pages[i]) {
			i++;
			continue;
		}
		if (unlikely(page_machine(pages[i]) != m)) {
			/* Pages of another machine: count there, with its knobs. */
			count_event(m, UNPIN_FOLIO_UPDATES, updates);
			updates = 0;
			m = page_machine(pages[i]);
			per_page = knob(m, PM_KNOB_UNPIN_PER_PAGE);
		}
		folio = page_folio(pages[i]);
		if (!per_page)
			while (i + n < npages && pages[i + n] && page_folio(pages[i + n]) == folio)
				n++;
		if (make_dirty)
			unpin_dirty(folio);
		pm__gup_put_folio(folio, (int)n, FOLL_PIN);
		updates++;
		i += n;
	}
	count_event(m, UNPIN_FOLIO_UPDATES, updates);
}

void pm_unpin_user_pages(struct pm_page **pages, unsigned long npages)
{
	if (pages)
		unpin_pages(pages, npages, false);
}

void pm_unpin_user_pages_dirty_lock(struct pm_page **pages, unsigned long npages,
				    bool make_dirty)
{
	if (pages)
		unpin_pages(pages, npages, make_dirty);
}

/*
 * Release one pin on each of @npages physically contiguous pages: the range is cut into
 * (folio, count) pieces by arithmetic on the descriptors, one atomic update per piece.
 */
void pm_unpin_user_page_range_dirty_lock(struct pm_page *page, unsigned long npages,
					 bool make_dirty)
{
	struct pm_machine *m;
	unsigned long updates = 0;
	bool per_page;

	if (!page || !npages)
		return;
	m = page_machine(page);
	if (unlikely(npages > m->nr_pages - page_to_pfn(m, page))) {
		/* Past the machine's last frame: descriptors of nothing, or of another machine. */
		pm_warn_once(1, "unpin_user_page_range: the range runs past the machine's memory; "
				"nothing released");
		return;
	}
	per_page = knob(m, PM_KNOB_UNPIN_PER_PAGE);
	for (unsigned long i = 0; i < npages;) {
		struct pm_page *p = page + i;
		struct pm_folio *folio = page_folio(p);
		unsigned long n = 1;

		if (folio_test_large(folio) && !per_page)
			n = min(npages - i,
				folio_nr_pages(folio) - (unsigned long)(p - &folio->page));
		if (make_dirty)
			unpin_dirty(folio);
		pm__gup_put_folio(folio, (int)n, FOLL_PIN);
		updates++;
		i += n;
	}
	count_event(m, UNPIN_FOLIO_UPDATES, updates);
}

bool pm_mm_has_pinned(struct pm_mm *mm)
{
	return !pm__mm_bad(mm) && mm_has_pinned(mm);
}
