/* SPDX-License-Identifier: MIT */
/*
 * mem/folio_hot.h - the folio helpers that must know hot mode (mem/folio_hot.c): a put that
 * may end it ((H3)), and the count questions that end it first. Included by the files of mem/
 * above folio_hot.c and, through their layers' headers, by the layers above mem/.
 */
#ifndef PM_MEM_FOLIO_HOT_H
#define PM_MEM_FOLIO_HOT_H

#include "mem/mem.h"

/* // mem/folio_hot.c */
__hidden bool pm__folio_hot_grab(struct pm_machine *m, struct pm_folio *folio, int refs);
__hidden bool pm__folio_hot_put(struct pm_machine *m, struct pm_folio *folio, int refs);
__hidden void pm__folio_hot_enter(struct pm_folio *folio);
__hidden void pm__folio_leave_hot(struct pm_folio *folio);
__hidden void pm__folio_hot_unmapped(struct pm_folio *folio);
__hidden int pm__folio_hot_ref_count(const struct pm_folio *folio);
__hidden int pm__folio_hot_pincount(const struct pm_folio *folio);
__hidden int pm__folio_counts_exact(struct pm_folio *folio, int *pincount);
__hidden void pm__machine_hot_exit(struct pm_machine *m);

/*
 * pm__folio_pin_contended() - a pin found another pin outstanding on @folio: should it go
 * hot? Not when the last such pin was this thread's too: one thread holding many pins of a
 * folio (a registration of a whole THP, pin_fast) shares no line with anyone, and per-CPU
 * counts would only double its atomic operations. Each contended pin leaves its thread's tag
 * in the head's top flag byte, tested before set, so that thread writes it once; a first
 * contended pin (no tag yet) or another thread's makes the folio hot. The tag is a hint: a
 * lost or stale one (a split, a migration's copy) costs one decision, never a count.
 */
static inline bool pm__folio_pin_contended(struct pm_folio *folio)
{
	unsigned long tag = (unsigned long)pm__this_pin_tag() << PG_PIN_TAG_SHIFT;
	unsigned long f = atomic_load_relaxed(&folio->page.xflags);

	while ((f & PG_PIN_TAG_MASK) != tag)
		if (atomic_cas_relaxed(&folio->page.xflags, &f, (f & ~PG_PIN_TAG_MASK) | tag))
			return true;
	return false;
}

/* Before a decision on @folio's counts: out of hot mode (mem/folio_hot.c). */
static inline void pm__folio_cool(struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		pm__folio_leave_hot(folio);
}

/* refcount: exact at quiescence, hot or not (the bias aside). */
static inline int folio_ref_count(const struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		return pm__folio_hot_ref_count(folio);
	return atomic_load_relaxed(&((struct pm_folio *)folio)->page.xrefcount);
}

/* folio_maybe_dma_pinned(): exact for large folios, no false negatives for small ones. */
static inline bool folio_maybe_dma_pinned(const struct pm_folio *folio)
{
	if (unlikely(folio_hot(folio)))
		pm__folio_leave_hot((struct pm_folio *)folio); /* an exact answer (folio_hot.c) */
	if (folio_test_large(folio))
		return atomic_load_mb(&((struct pm_folio *)folio)->page.xpincount) > 0;
	return (unsigned)atomic_load_mb(&((struct pm_folio *)folio)->page.xrefcount) >=
	       GUP_PIN_COUNTING_BIAS;
}

/* Drop @refs references; the last one frees the folio. */
static inline void folio_put_refs(struct pm_folio *folio, int refs)
{
	int old = atomic_sub_mb(&folio->page.xrefcount, refs);

	pm_assert_cmp(old, >=, refs);
	if (old == refs)
		pm__folio_free(folio);
	else if (unlikely(folio_hot(folio)))
		pm__folio_hot_unmapped(folio); /* (H3) */
}

static inline void folio_put(struct pm_folio *folio)
{
	folio_put_refs(folio, 1);
}

#endif /* PM_MEM_FOLIO_HOT_H */
