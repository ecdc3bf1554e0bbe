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
__hidden void pm__folio_hot_put_wait(struct pm_folio *folio);
__hidden void pm__folio_hot_enter(struct pm_folio *folio);
__hidden void pm__folio_leave_hot(struct pm_folio *folio);
__hidden void pm__folio_hot_unmapped(struct pm_folio *folio);
__hidden int pm__folio_hot_ref_count(const struct pm_folio *folio);
__hidden int pm__folio_hot_pincount(const struct pm_folio *folio);
__hidden int pm__folio_counts_exact(struct pm_folio *folio, int *pincount);
__hidden void pm__machine_hot_exit(struct pm_machine *m);

/*
 * The table entry of @folio, a folio of machine @m, in the table of hot states; NULL while no
 * folio of @m was ever hot (no table). The table pointer is loaded explicitly: GCC reads an
 * _Atomic pointer that is subscripted with a plain load.
 */
static __always_inline struct pm_folio_hot *_Atomic *folio_hot_entry(struct pm_machine *m,
								      const struct pm_folio *folio)
{
	struct pm_folio_hot *_Atomic *table = atomic_load_acquire(&m->xhot);

	return table ? &table[page_to_pfn(m, &folio->page)] : NULL;
}

/*
 * One hot operation, inline in GUP and the unpins: @pins pins (negative: unpins) of @folio, a
 * folio of machine @m, on this CPU's slot of its state, if it is hot ((H1)). A pin that would
 * take the slot past its share of PM_HOT_REF_LIMIT references is not taken here: the shared
 * counts, with their own limit, take it or refuse it, so however the slots are folded the
 * refcount stays below PM_GUP_REF_LIMIT + PM_HOT_REF_LIMIT, far from INT_MAX. The caller has
 * @m at hand: looking it up from the folio would add two dependent loads. Inline, with the
 * CPU read from the rseq area (lib/cpu.h), so that a hot pin is the locked add and a few
 * loads, with no call. Context: an RCU read section, the one in which the state
 * is loaded and used ((H5)). Return: counted here; false: not hot (use the shared counts).
 */
static __always_inline bool folio_hot_op_rcu(struct pm_machine *m, struct pm_folio *folio,
					     long pins)
{
	struct pm_folio_hot *_Atomic *entry = folio_hot_entry(m, folio);
	struct pm_folio_hot *h;
	struct pm_hot_slot *s;

	rcu_assert_held();
	if (!entry)
		return false;
	h = atomic_load_acquire(entry);
	if (!h)
		return false;
	s = &h->slot[pm__this_cpu(m)];
	if (pins > 0) {
		long limit = folio_test_large(folio) ? m->hot_slot_limit
						     : m->hot_slot_limit / GUP_PIN_COUNTING_BIAS;

		if (unlikely(atomic_load_relaxed(&s->xv) + pins > limit))
			return false;
	}
	/* (H4): sequentially consistent, as a shared pin's */
	return !hot_folded(atomic_add_mb(&s->xv, pins));
}

/*
 * pm__folio_hot_grab() - take @refs pins (FOLL_PIN) of @folio in this CPU's slot if it is hot.
 * The folio must be alive (the caller holds a reference or a mapping of it), or, for
 * GUP-fast, PG_hot was seen: while PG_hot is set the bias keeps it alive ((H1) checks it).
 * Return: true if taken; false if not hot (take them on the shared counts).
 */
static __always_inline bool pm__folio_hot_grab(struct pm_machine *m, struct pm_folio *folio,
					       int refs)
{
	bool done;

	pm_rcu_read_lock(); /* (H5) */
	done = folio_hot_op_rcu(m, folio, refs);
	pm_rcu_read_unlock();
	return done;
}

/*
 * pm__folio_hot_put() - release @refs pins of @folio in this CPU's slot if it is hot; if not,
 * wait for a fold in progress first ((H2)). Return: true if released here; false if the caller
 * releases them on the shared counts. Context: the caller holds the pins.
 */
static __always_inline bool pm__folio_hot_put(struct pm_machine *m, struct pm_folio *folio,
					      int refs)
{
	bool done;

	pm_rcu_read_lock(); /* (H5) */
	done = folio_hot_op_rcu(m, folio, -(long)refs);
	pm_rcu_read_unlock();
	if (unlikely(!done))
		pm__folio_hot_put_wait(folio);
	return done;
}

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
