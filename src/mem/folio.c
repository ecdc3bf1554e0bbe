// SPDX-License-Identifier: MIT
/*
 * folio.c - folios: allocation, the last put, speculative references, the folio lock.
 *
 * A folio of order n is 2^n frames whose head descriptor holds the folio's fields: refcount,
 * pincount and entire_mapcount (large folios), order, flags, mapping/index. Tail descriptors
 * point to the head through xcompound_head (head | 1). pinmm splits a folio only for a
 * migration with no 2 MiB block in its target (mm/migrate.c, split_thp), and only with its
 * count frozen at 0 and every mapping a migration entry; otherwise a 2 MiB folio whose PMD
 * mapping was split into PTEs stays one folio until its last reference goes (Linux would
 * queue it for a deferred split; here its frames simply come back together). So
 * page_folio() of an allocated page is stable while anyone holds a reference to it, and a
 * speculative walker that took a reference re-checks page_folio() in case the frame was freed
 * and reused in between.
 *
 * Refcount overflow is refused, never wrapped: GUP's references stop at PM_GUP_REF_LIMIT (GUP
 * then answers -ENOMEM, as Linux's try_grab_folio does), which leaves 2^30 of headroom for the
 * references that cannot be refused (mappings, transient references).
 */
#include <sched.h>

#include "mem/mem.h"

struct pm_folio *pm__folio_alloc(struct pm_machine *m, unsigned order, unsigned flags)
{
	struct pm_page *page = pm__alloc_frames(m, order, flags);

	return page ? pm__folio_prep(page, order) : NULL;
}

/* Called by the put that dropped the refcount to zero. */
void pm__folio_free(struct pm_folio *folio)
{
	struct pm_machine *m = page_machine(&folio->page);

	pm_assert(!folio_is_zero(folio));
	/* The huge zero folio goes only once no address space uses it (pm__huge_zero_folio_put). */
	pm_assert(folio != atomic_load_relaxed(&m->xhuge_zero_folio));
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xpincount), ==, 0);
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xentire_mapcount), ==, 0);
	pm_assert(!folio_test(folio, PG_locked));
	/* a parked deposit goes with its leaf: one left here would be a leaked PTE table */
	pm_assert(folio_order(folio) < 1 || !folio_page(folio, 1)->thp_deposit);
	folio->page.mapping = NULL;
	if (folio_test_hugetlb(folio)) {
		pm__hugetlb_free_folio(folio);
		return;
	}
	pm__free_frames(m, &folio->page, folio_order(folio), 0);
}

/**
 * pm__folio_try_get() - add @refs references unless the refcount is zero (free, or a frame
 * that is not a folio head) or the result would pass @limit. The speculative reference of
 * GUP-fast and of lockless page-cache lookups.
 *
 * Ordering: a full barrier on success (the re-checks that follow must not move before it).
 */
bool pm__folio_try_get(struct pm_folio *folio, int refs, int limit)
{
	int old = atomic_load_relaxed(&folio->page.xrefcount);

	do {
		if (unlikely(old <= 0))
			return false;
		if (unlikely(old > limit - refs)) {
			pm_warn_once(1, "folio refcount at its limit; reference refused");
			return false;
		}
	} while (!atomic_cas_mb(&folio->page.xrefcount, &old, old + refs));
	return true;
}

/* Add @refs references to a folio the caller holds stable, unless that would pass @limit. */
bool pm__folio_ref_add(struct pm_folio *folio, int refs, int limit)
{
	int old = atomic_load_relaxed(&folio->page.xrefcount);

	do {
		if (unlikely(old > limit - refs)) {
			pm_warn_once(1, "folio refcount at its limit; reference refused");
			return false;
		}
	} while (!atomic_cas_mb(&folio->page.xrefcount, &old, old + refs));
	return true;
}

/* The folio lock: a bit spinlock in the head's flags. Never held across a blocking call. */
void pm__folio_lock(struct pm_folio *folio)
{
	while (atomic_or_acquire(&folio->page.xflags, PGF(PG_locked)) & PGF(PG_locked)) {
		unsigned spins = 0;

		while (folio_test(folio, PG_locked)) {
			if (++spins < PM_SPIN_BEFORE_YIELD)
				cpu_relax();
			else
				sched_yield();
		}
	}
}

void pm__folio_unlock(struct pm_folio *folio)
{
	pm_assert(folio_test(folio, PG_locked));
	atomic_and_release(&folio->page.xflags, ~PGF(PG_locked));
}

void pm__folio_mark_dirty(struct pm_folio *folio)
{
	if (!folio_test(folio, PG_dirty))
		atomic_or_relaxed(&folio->page.xflags, PGF(PG_dirty));
}

/* ---- public accessors ---- */

struct pm_folio *pm_page_folio(struct pm_page *page)
{
	return page_folio(page);
}

void *pm_page_address(struct pm_page *page)
{
	return page_address(pm__page_machine_any(page), page);
}

unsigned long pm_page_to_pfn(struct pm_page *page)
{
	return page_to_pfn(pm__page_machine_any(page), page);
}

struct pm_page *pm_pfn_to_page(struct pm_machine *m, unsigned long pfn)
{
	return m && pfn < m->nr_pages ? pfn_to_page(m, pfn) : NULL;
}

int pm_folio_mapcount(struct pm_folio *folio)
{
	int n = 0;

	if (folio_is_zero(folio))
		return 0;
	for (unsigned long i = 0; i < folio_nr_pages(folio); i++)
		n += atomic_load_relaxed(&folio_page(folio, i)->xmapcount);
	if (folio_test_large(folio))
		n += atomic_load_relaxed(&folio->page.xentire_mapcount);
	return n;
}

unsigned pm_folio_order(struct pm_folio *folio)
{
	return folio_order(folio);
}

bool pm_folio_test_dirty(struct pm_folio *folio)
{
	return folio_test(folio, PG_dirty);
}

bool pm_folio_test_anon(struct pm_folio *folio)
{
	return folio_test_anon(folio);
}

bool pm_page_anon_exclusive(struct pm_page *page)
{
	return page_anon_exclusive(page);
}

bool pm_page_is_zero(struct pm_page *page)
{
	return page_test(page, PG_zero) || is_huge_zero_folio(page_folio(page));
}
