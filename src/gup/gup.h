/* SPDX-License-Identifier: MIT */
/*
 * gup/gup.h - get_user_pages: what crosses the files of gup/ (the flags mm/ passes too and
 * pm__populate(), the one entry point mm/ calls, are in mm/mm.h).
 */
#ifndef PM_GUP_GUP_H
#define PM_GUP_GUP_H

#include "fault/fault.h"

/* ------------------------------------------------------------------------------------------
 * GUP (gup/).
 */
/* A pin that may make its folio hot (mem/folio_hot.c): the range design, unless
 * PM_KNOB_FOLIO_SHARED_PINS. Never with FOLL_GET. */
#define FOLL_HOT (1U << 23)

/* // gup/gup.c */
__hidden long pm__gup_slow(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			   unsigned flags, struct pm_page **pages);
__hidden long pm__gup_locked(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			     unsigned flags, struct pm_page **pages);
/* FOLL_HOT where pins may make a folio hot: the policy's, unless PM_KNOB_FOLIO_SHARED_PINS. */
static __always_inline unsigned gup_hot_flag(const struct pm_mm *mm)
{
	return mm->policy->hot_folios && !knob(mm->m, PM_KNOB_FOLIO_SHARED_PINS) ? FOLL_HOT : 0;
}

static __always_inline unsigned gup_pin_flags(const struct pm_mm *mm, unsigned gup_flags)
{
	return gup_flags | FOLL_PIN | gup_hot_flag(mm);
}

/*
 * The has-pinned flag, tested before it is set (gup.c's top comment). Both GUP entry files use
 * it.
 */
static __always_inline void mm_set_has_pinned(struct pm_mm *mm)
{
	if (knob(mm->m, PM_KNOB_HAS_PINNED_ALWAYS_WRITE)) {
		/* Before 2021: atomic_set(&mm->has_pinned, 1) on every pin call. */
		atomic_store_relaxed(&mm->xhas_pinned, 1);
		count_event(mm->m, HAS_PINNED_WRITES, 1);
		return;
	}
	if (likely(atomic_load_relaxed(&mm->xhas_pinned)))
		return;
	atomic_store_mb(&mm->xhas_pinned, 1);
	count_event(mm->m, HAS_PINNED_WRITES, 1);
}


/* Linux's is_valid_gup_args plus the range checks. Return: 0 or -errno. */
static __always_inline long pm__gup_check_args(struct pm_mm *mm, unsigned long start,
					   unsigned long nr_pages, unsigned flags,
					   struct pm_page **pages, bool pin, bool fast)
{
	unsigned long len, end;

	if (pm__mm_bad(mm) || (flags & ~FOLL_PUBLIC_MASK))
		return -EINVAL;
	if ((flags & FOLL_LONGTERM) && !pin)
		return -EINVAL;
	if ((pin || fast) && !pages)
		return -EINVAL;
	if (fast && nr_pages > INT_MAX)
		return -EINVAL;
	start &= PAGE_MASK;
	if (nr_pages > (ULONG_MAX >> PAGE_SHIFT))
		return -EOVERFLOW;
	len = nr_pages << PAGE_SHIFT;
	if (start + len < start)
		return -EOVERFLOW;
	end = start + len;
	if (end > PM_TASK_SIZE)
		return -EFAULT;
	return 0;
}


__hidden void pm__gup_put_folio(struct pm_folio *folio, int refs, unsigned flags);
__hidden long pm__gup_longterm(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			       unsigned flags, struct pm_page **pages);

/* Must a pin with @flags leave the movable zone first (FOLL_LONGTERM, Linux 5.13)? */
static inline bool pm__gup_longterm_migrates(const struct pm_machine *m, unsigned flags)
{
	return (flags & FOLL_LONGTERM) && m->movable_base < m->nr_pages &&
	       !knob(m, PM_KNOB_LONGTERM_PIN_IN_PLACE);
}
__hidden bool pm__gup_must_unshare(struct pm_vma *vma, unsigned flags, struct pm_page *page);

/* // gup/gup_fast.c */
__hidden unsigned long pm__gup_fast_walk(struct pm_mm *mm, unsigned long start,
					 unsigned long end, unsigned flags,
					 struct pm_page **pages);

/* // debug/check.c is the public pm_machine_check(). */

#endif /* PM_GUP_GUP_H */
