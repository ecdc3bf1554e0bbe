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

/* Make the 2^@order frames just allocated at @page a folio with one reference. */
struct pm_folio *pm__folio_prep(struct pm_page *page, unsigned order)
{
	struct pm_folio *folio = (struct pm_folio *)page;

	atomic_store_relaxed(&page->xorder, (uint8_t)order);
	page->mapping = NULL;
	page->index = 0;
	atomic_store_relaxed(&page->xpincount, 0);
	atomic_store_relaxed(&page->xentire_mapcount, 0);
	atomic_store_relaxed(&page->xmapcount, 0);
	for (unsigned long i = 1; i < (1UL << order); i++) {
		atomic_store_relaxed(&page[i].xmapcount, 0);
		atomic_store_relaxed(&page[i].xflags, 0);
		atomic_store_relaxed(&page[i].xcompound_head, (uintptr_t)page | 1);
	}
	atomic_store_relaxed(&page->xflags, order ? PGF(PG_head) : 0);
	/* Publishes the folio: a speculative try_get can succeed from here on. */
	atomic_store_release(&page->xrefcount, 1);
	return folio;
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
	folio->page.mapping = NULL;
	if (folio_test_hugetlb(folio)) {
		pm__hugetlb_free_folio(folio);
		return;
	}
	pm__free_frames(m, &folio->page, folio_order(folio), 0);
}

/* A small folio whose last reference is gone, made a frame to free (pm__free_frames_batch). */
static struct pm_page *small_folio_freeable(struct pm_folio *folio)
{
	pm_assert(!folio_is_zero(folio));
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xpincount), ==, 0);
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xentire_mapcount), ==, 0);
	pm_assert(!folio_test(folio, PG_locked));
	folio->page.mapping = NULL;
	return &folio->page;
}

/*
 * Drop one reference on each of @n folios of @m. The small folios whose reference was the
 * last go back to this CPU's cache together, under one lock (pm__free_frames_batch); any
 * other goes through pm__folio_free(). With @clear (a page flag's mask), each folio loses
 * those flags before its reference, unless that reference is its last: then a compare-and-
 * swap from 1 to 0 takes it, in one atomic instead of two, since a zero count refuses every
 * new reference (pm__folio_try_get) and the free clears every flag.
 */
static void folios_put_clear(struct pm_machine *m, struct pm_folio **folios, unsigned n,
			     unsigned long clear)
{
	struct pm_page *frames[64];
	unsigned nr = 0;

	for (unsigned i = 0; i < n; i++) {
		struct pm_folio *folio = folios[i];
		bool small = !folio_test_large(folio) && !folio_test_hugetlb(folio);
		int old = 1;

		if (!clear || !small || atomic_load_relaxed(&folio->page.xrefcount) != 1 ||
		    !atomic_cas_mb(&folio->page.xrefcount, &old, 0)) {
			if (clear)
				atomic_and_relaxed(&folio->page.xflags, ~clear);
			old = atomic_sub_mb(&folio->page.xrefcount, 1);
		}
		pm_assert_cmp(old, >=, 1);
		if (old != 1) {
			if (unlikely(folio_hot(folio)))
				pm__folio_hot_unmapped(folio); /* folio_hot.c, (H3) */
			continue;
		}
		if (!small) {
			pm__folio_free(folio);
			continue;
		}
		frames[nr++] = small_folio_freeable(folio);
		if (nr == ARRAY_SIZE(frames)) {
			pm__free_frames_batch(m, frames, nr);
			nr = 0;
		}
	}
	if (nr)
		pm__free_frames_batch(m, frames, nr);
}

/* pm__folios_put() - drop one reference on each of @n folios of @m: Linux's folios_put. */
void pm__folios_put(struct pm_machine *m, struct pm_folio **folios, unsigned n)
{
	folios_put_clear(m, folios, n, 0);
}

/**
 * pm__folio_unmap_put() - a small folio loses one PTE mapping: its mapcount and the reference
 * that mapping held, in one locked instruction instead of two. The two counts lie side by
 * side in one aligned 8-byte word (struct pm_page, xref_map), and neither can borrow from the
 * other: the caller's mapping is one of each, so both are at least 1. It is Linux's lockref
 * idea (a lock and a count changed by one cmpxchg) applied to the zap, whose cost per page is
 * its locked instructions, wherever their lines are, far more than its cache misses
 * (docs/perf-log.md, 2026-12-03, "count the locked instructions").
 * The mapcount is read elsewhere with plain atomic loads of its own half; nothing else
 * writes both halves at once.
 *
 * Ordering: a full barrier, as the gathered put it replaces (zap.c; GUP-fast's (B)).
 * Return: if that reference was the last, the folio's frame, ready for the caller to free
 * with pm__free_frames_batch() as a put would have; otherwise NULL.
 */
struct pm_page *pm__folio_unmap_put(struct pm_folio *folio)
{
	union {
		uint64_t word;
		struct {
			int refs, maps; /* the layout of xrefcount and xmapcount */
		};
	} old, one = { .refs = 1, .maps = 1 };

	pm_assert(!folio_test_large(folio) && !folio_test_hugetlb(folio));
	old.word = atomic_sub_mb(&folio->page.xref_map, one.word);
	pm_assert_cmp(old.refs, >=, 1);
	pm_assert_cmp(old.maps, >=, 1);
	if (old.refs == 1)
		return small_folio_freeable(folio);
	if (unlikely(folio_hot(folio)))
		pm__folio_hot_unmapped(folio); /* folio_hot.c, (H3) */
	return NULL;
}

/*
 * pm__folios_put_cache() - drop the page cache's reference on each of @n folios that left a
 * shmem cache nobody can look up any more (its teardown), with their PG_shmem.
 */
void pm__folios_put_cache(struct pm_machine *m, struct pm_folio **folios, unsigned n)
{
	folios_put_clear(m, folios, n, PGF(PG_shmem));
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

/**
 * pm__huge_zero_folio_get() - the machine's huge zero folio, for an address space whose use of
 * it is the flag *@used (Linux's mm_get_huge_zero_folio and MMF_HUGE_ZERO_FOLIO).
 *
 * One per machine, made when a first address space wants it and given back when the last one
 * that used it is torn down (pm__huge_zero_folio_put): Linux counts the users the same way
 * (huge_zero_refcount, one per mm) so that its shrinker may free the folio once none is left;
 * pinmm has no reclaim, so the last put frees it at once. That keeps a machine whose address
 * spaces are all gone exactly as it started (the same free pages), which a folio kept for the
 * machine's life (Linux 6.18's CONFIG_PERSISTENT_HUGE_ZERO_FOLIO) would not; and a machine
 * that never read-faults a THP-eligible VMA never pays its 2 MiB.
 *
 * The folio holds one reference for all its users; GUP references and pins add theirs, so a
 * pin may outlive the last user, and then the folio goes at the last unpin (a later first
 * user makes a new one meanwhile). After its first call an address space finds its flag set
 * and the pointer stable (it is a user: nobody frees the folio under it): one acquire load
 * each, no shared write. The first call takes huge_zero_lock; the 2 MiB are allocated and
 * zeroed outside it, and a folio that lost the race to be the machine's is freed unseen.
 * Context: the caller's address space is alive (a fault, or fork for its child).
 * Return: the folio, or NULL when no 2 MiB block can be had (the fault falls back).
 */
struct pm_folio *pm__huge_zero_folio_get(struct pm_machine *m, _Atomic bool *used)
{
	struct pm_folio *folio = NULL, *spare = NULL;

	if (likely(atomic_load_acquire(used)))
		return atomic_load_acquire(&m->xhuge_zero_folio);
	for (;;) {
		pm_spin_lock(&m->huge_zero_lock);
		folio = atomic_load_relaxed(&m->xhuge_zero_folio);
		if (!folio && spare) {
			folio = spare;
			spare = NULL;
			atomic_store_release(&m->xhuge_zero_folio, folio);
		}
		if (folio && !atomic_load_relaxed(used)) {
			m->huge_zero_users++;
			atomic_store_release(used, true);
		}
		pm_spin_unlock(&m->huge_zero_lock);
		if (folio)
			break;
		spare = pm__folio_alloc(m, HPAGE_PMD_ORDER, PM_ALLOC_ZERO);
		if (!spare)
			return NULL;
		folio_set_flags_new(spare, PGF(PG_huge_zero));
	}
	if (spare)
		folio_put(spare); /* another thread made it first: nobody saw ours */
	return folio;
}

/**
 * pm__huge_zero_folio_put() - the address space whose flag is *@used gives up its use of the
 * huge zero folio (Linux's mm_put_huge_zero_folio at __mmput); the last user's put drops the
 * folio's reference, which frees it unless GUP still holds some.
 * Context: teardown, the address space's mappings gone.
 */
void pm__huge_zero_folio_put(struct pm_machine *m, _Atomic bool *used)
{
	struct pm_folio *folio = NULL;

	if (!atomic_load_relaxed(used))
		return;
	pm_spin_lock(&m->huge_zero_lock);
	atomic_store_relaxed(used, false);
	pm_assert(m->huge_zero_users > 0);
	if (!--m->huge_zero_users) {
		folio = atomic_load_relaxed(&m->xhuge_zero_folio);
		atomic_store_relaxed(&m->xhuge_zero_folio, NULL);
	}
	pm_spin_unlock(&m->huge_zero_lock);
	if (folio)
		folio_put(folio);
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

bool pm_folio_maybe_dma_pinned(struct pm_folio *folio)
{
	return folio_maybe_dma_pinned(folio);
}

int pm_folio_ref_count(struct pm_folio *folio)
{
	int pins;

	if (folio_is_zero(folio))
		return folio_ref_count(folio);
	return pm__folio_counts_exact(folio, &pins);
}

int pm_folio_pincount(struct pm_folio *folio)
{
	int pins;

	if (!folio_test_large(folio))
		return 0;
	pm__folio_counts_exact(folio, &pins);
	return pins;
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
