/* SPDX-License-Identifier: MIT */
/*
 * gup/gup_pte.h - the speculative references of GUP-fast (gup_fast.c, whose top comment
 * argues them) and of slow GUP's lockless PTE step in the range design (gup.c; fault/anon.c's
 * top comment): inline here, so that both walks take them the same way and neither file
 * calls into the other for them.
 */
#ifndef PM_GUP_GUP_PTE_H
#define PM_GUP_GUP_PTE_H

/*
 * grab_refs() - add @amount references to @folio unless its count is zero: the speculative
 * reference. One compare-and-swap when the count looks plausible; pm__folio_try_get() does
 * everything else (a lost race, a zero count, the limit and its warning). Ordering: a full
 * barrier on success, as pm__folio_try_get().
 */
static __always_inline bool grab_refs(struct pm_folio *folio, int amount)
{
	int old = atomic_load_relaxed(&folio->page.xrefcount);

	if (likely(old > 0 && old <= PM_GUP_REF_LIMIT - amount) &&
	    likely(atomic_cas_mb(&folio->page.xrefcount, &old, old + amount)))
		return true;
	return pm__folio_try_get(folio, amount, PM_GUP_REF_LIMIT);
}

/* Give back references taken on the shared counts. */
static inline void ungrab_shared(struct pm_folio *folio, int refs, unsigned flags)
{
	if (!(flags & FOLL_PIN)) {
		folio_put_refs(folio, refs);
	} else if (folio_test_large(folio)) {
		atomic_sub_mb(&folio->page.xpincount, refs);
		folio_put_refs(folio, refs);
	} else {
		folio_put_refs(folio, refs * GUP_PIN_COUNTING_BIAS);
	}
}

/*
 * After a shared pin of @refs pages: is another pin outstanding on @folio? Then several
 * threads may pin it at once, and FOLL_HOT makes it hot (mem/folio_hot.c) unless the last
 * such pin was this thread's (pm__folio_pin_contended). The line was just written by our pin,
 * so these loads hit.
 */
static __always_inline bool pinned_by_another(struct pm_folio *folio, int refs)
{
	if (folio_test_large(folio))
		return atomic_load_relaxed(&folio->page.xpincount) > refs;
	return atomic_load_relaxed(&folio->page.xrefcount) >= 2 * GUP_PIN_COUNTING_BIAS;
}

/*
 * try_grab_folio_fast() - a speculative reference of kind @flags, @refs pages, on the folio of
 * @page. @in_rcu: the caller is in an RCU read section (GUP-fast), so a hot pin needs none of
 * its own; a constant at every call. Return: the folio, or NULL (free, being freed, at its
 * limit, or no longer this page's).
 *
 * A pin of a small folio is one compare-and-swap of refs * 1024. But which kind of folio it is
 * can only be trusted once we hold a reference: the frame may have been freed and reallocated
 * with another order between our look and the CAS. So the order is read again afterwards and,
 * in the rare case it changed, the count is corrected - as Linux takes plain references first
 * and converts them to a pin only once it holds the folio. Nothing is counted here: the walk
 * counts the pins it keeps, once (pm__gup_fast_walk).
 */
static __always_inline struct pm_folio *try_grab_folio_fast(struct pm_machine *m,
							    struct pm_page *page, int refs,
							    unsigned flags, bool in_rcu)
{
	struct pm_folio *folio = page_folio(page);
	unsigned long f = atomic_load_relaxed(&folio->page.xflags);
	bool pin = flags & FOLL_PIN, large = folio_test_large(folio);
	int amount = pin && !large ? refs * GUP_PIN_COUNTING_BIAS : refs;

	if (unlikely(f & (PGF(PG_zero) | PGF(PG_hot)))) {
		if (f & PGF(PG_zero))
			return NULL;
		/* Hot (mem/folio_hot.c): this CPU's slot; the bias keeps the folio alive. */
		if (pin && (in_rcu ? folio_hot_op_rcu(m, folio, refs)
				   : pm__folio_hot_grab(m, folio, refs))) {
			if (unlikely(page_folio(page) != folio)) {
				if (!pm__folio_hot_put(m, folio, refs))
					ungrab_shared(folio, refs, flags);
				return NULL;
			}
			return folio;
		}
	}
	if (!grab_refs(folio, amount))
		return NULL;
	if (unlikely(page_folio(page) != folio)) {
		folio_put_refs(folio, amount);
		return NULL;
	}
	if (!pin)
		return folio;
	if (unlikely(folio_test_large(folio) != large)) {
		if (large) {
			/* Was large, is small: a pin needs the bias. */
			if (!pm__folio_ref_add(folio, refs * (GUP_PIN_COUNTING_BIAS - 1),
					       PM_GUP_REF_LIMIT)) {
				folio_put_refs(folio, refs);
				return NULL;
			}
		} else {
			/* Was small, is large: one reference per page, and the pincount. We hold
			 * refs references more than before, so this cannot reach zero. */
			atomic_sub_mb(&folio->page.xrefcount, refs * (GUP_PIN_COUNTING_BIAS - 1));
		}
	}
	if (unlikely(folio_test_large(folio)))
		atomic_add_mb(&folio->page.xpincount, refs);
	if ((flags & FOLL_HOT) && unlikely(pinned_by_another(folio, refs)) &&
	    pm__folio_pin_contended(folio))
		pm__folio_hot_enter(folio);
	return folio;
}

/*
 * Give back what try_grab_folio_fast() took, for a page the walk does not keep. Uncounted,
 * as the grab was. We hold the references, so the folio's size cannot change meanwhile.
 */
static inline void ungrab_folio(struct pm_machine *m, struct pm_folio *folio, int refs,
				unsigned flags)
{
	if ((flags & FOLL_PIN) && unlikely(folio_hot(folio)) && pm__folio_hot_put(m, folio, refs))
		return;
	ungrab_shared(folio, refs, flags);
}

/*
 * A speculative reference of kind @flags (FOLL_GET or FOLL_PIN, uncounted) on @page, which
 * @pte - read from *@ptep in the table *@pmdp = @pmd points to - maps; then both entries are
 * read again after a full barrier. Return: true with the reference held and both entries
 * unchanged, or false with nothing held (the caller decides under the PTL).
 */
static inline bool pm__gup_pte_grab(struct pm_machine *m, pm_entry_t *pmdp, pmd_t pmd,
				    pm_entry_t *ptep, pte_t pte, struct pm_page *page,
				    unsigned flags)
{
	struct pm_folio *folio = try_grab_folio_fast(m, page, 1, flags, false);

	if (!folio)
		return false;
	if (unlikely(!pmd_same(pmdp_get_mb(pmdp), pmd) || !pte_same(ptep_get_mb(ptep), pte))) {
		ungrab_folio(m, folio, 1, flags);
		return false;
	}
	return true;
}

/* Give back what pm__gup_pte_grab() took. */
static inline void pm__gup_pte_ungrab(struct pm_machine *m, struct pm_page *page, unsigned flags)
{
	ungrab_folio(m, page_folio(page), 1, flags);
}

#endif /* PM_GUP_GUP_PTE_H */
