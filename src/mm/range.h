/* SPDX-License-Identifier: MIT */
/*
 * mm/range.h - the locks of an address space: the verbs every caller of mm/ and the layers
 * above take and let go of, over range.c's ranges (mmap_lock in Linux's design).
 *
 * The verbs are inline for the common run of one range and call range.c for longer runs and
 * widening, so this header is range.c's own: the files range.c calls (vma.c, vma_lock.c,
 * zap.c) include only mm/mm.h, and the calls of mm/ run one way. The prototypes stay in
 * mm/mm.h, under range.c's name.
 */
#ifndef PM_MM_RANGE_H
#define PM_MM_RANGE_H

#include "mm/mm.h"

/*
 * The locks of an address space, in pairs: a lock call and the unlock that ends it.
 *	mmap_write_lock_range(mm, start, end)	a change of [start, end): the ranges it may
 *						touch, for write (all of it in Linux's design)
 *	mmap_write_lock_all(mm)			a whole-mm operation (fork, teardown)
 *	  ... mmap_write_downgrade(mm)		(optional) the VMA write locks end
 *	mmap_write_unlock(mm)
 *	mmap_read_lock_range(mm, start, end)	a read of [start, end) (slow GUP, a fault's
 *						fallback, MADV_DONTNEED)
 *	mmap_read_unlock(mm)
 * Each range's VMA write locks end when its write hold does (its lock sequence moves on: the
 * range design's and Linux's vma_end_write_all); what left its tree goes to RCU once a batch
 * is full. See mm/range.c.
 */
/*
 * Most holds are a run of one range - every hold of Linux's design, and the range design's
 * changes inside one range - so taking, downgrading and letting go of one range is inline;
 * longer runs and widening are range.c's.
 */
static inline struct pm_rwsem_run *range_hold_one(struct pm_mm *mm, unsigned r, bool write)
{
	struct pm_rwsem_run *runs = pm__rwsem_runs, *h = runs[0].owner ? &runs[1] : &runs[0];

	pm_bug_on(h->owner || runs[0].owner == mm || runs[1].owner == mm);
	if (write)
		pm_down_write(&mm->ranges[r].lock);
	else
		pm_down_read(&mm->ranges[r].lock);
	h->owner = mm;
	h->lo = h->hi = r;
	h->write = write;
	h->downgraded = false;
	return h;
}

static inline void mmap_write_lock_range(struct pm_mm *mm, unsigned long start,
					 unsigned long end)
{
	if (mm_one_range(mm))
		range_hold_one(mm, 0, true); /* the only range: nothing can widen it */
	else
		pm__range_lock_change(mm, start, end);
}

static inline void mmap_write_lock_all(struct pm_mm *mm)
{
	if (mm_one_range(mm))
		range_hold_one(mm, 0, true);
	else
		pm__range_lock_all(mm);
}

/* A change that must start again with every range held (-EAGAIN from the range design's VMA
 * count) asks for @all. */
static inline void mmap_write_lock_range_or_all(struct pm_mm *mm, unsigned long start,
						unsigned long end, bool all)
{
	if (all)
		mmap_write_lock_all(mm);
	else
		mmap_write_lock_range(mm, start, end);
}

static inline void mmap_read_lock_range(struct pm_mm *mm, unsigned long start,
					unsigned long end)
{
	unsigned lo, hi;

	if (mm_one_range(mm)) {
		range_hold_one(mm, 0, false);
		return;
	}
	lo = range_of(mm, start);
	hi = range_of(mm, end > start ? end - 1 : start);
	if (lo == hi)
		range_hold_one(mm, lo, false);
	else
		pm__range_lock_read(mm, start, end);
}

/*
 * mmap_write_downgrade() - end every VMA write lock of the section, and - where the policy
 * says so (Linux's mmap_write_downgrade) - keep the ranges for read only. The caller may still
 * retire VMAs until it unlocks: no other thread touches those lists before the next writer,
 * which cannot come in before then.
 */
static inline void mmap_write_downgrade(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_mm_range *rg;

	mmap_assert_write_locked(mm);
	pm_bug_on(!h || !h->write || h->downgraded);
	if (h->lo != h->hi) {
		pm__range_downgrade(mm);
		return;
	}
	rg = &mm->ranges[h->lo];
	atomic_store_release(&rg->xlock_seq, atomic_load_relaxed(&rg->xlock_seq) + 1);
	if (mm->policy->downgrade)
		pm_downgrade_write(&rg->lock);
	h->downgraded = true;
}

/* Let go of a run of one range; a longer one is range.c's. */
static inline void mmap_unlock(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_mm_range *rg;

	pm_bug_on(!h);
	if (h->lo != h->hi) {
		pm__range_unlock(mm);
		return;
	}
	rg = &mm->ranges[h->lo];
	if (!h->write) {
		h->owner = NULL;
		pm_up_read(&rg->lock);
		return;
	}
	if (unlikely(rg->set.nr_retired_vmas + rg->set.vmt.nr_retired >= PM_RETIRE_BATCH))
		pm__vma_set_flush(mm, &rg->set, false);
	h->owner = NULL;
	if (h->downgraded && mm->policy->downgrade) {
		pm_up_read(&rg->lock);
		return;
	}
	if (!h->downgraded)
		atomic_store_release(&rg->xlock_seq, atomic_load_relaxed(&rg->xlock_seq) + 1);
	pm_up_write(&rg->lock);
}

static inline void mmap_write_unlock(struct pm_mm *mm)
{
	mmap_unlock(mm);
}

static inline void mmap_read_unlock(struct pm_mm *mm)
{
	mmap_unlock(mm);
}

#endif /* PM_MM_RANGE_H */
