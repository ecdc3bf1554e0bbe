// SPDX-License-Identifier: MIT
/*
 * folio_put.c - puts that several folios, or a mapping's two counts, share: Linux's folios_put
 * (one cache lock for the small folios whose reference was the last) and the zap's unmap of a
 * small folio (its mapcount and its reference in one locked instruction).
 *
 * Above folio.c (the last put, pm__folio_free) and folio_hot.c (a put that leaves a hot folio
 * mapped nowhere ends its hot mode, (H3)), as folio_put() in mem/folio_hot.h is.
 */
#include "mem/folio_hot.h"

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
