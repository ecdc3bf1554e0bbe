// SPDX-License-Identifier: MIT
/*
 * range.c - the ranges of an address space, and the two policies (struct pm_mm_policy) that
 * make them Linux's design - one range, whose lock is mmap_lock, downgraded for munmap's zap,
 * a top-down search, the tree's entries as the VMA count - or the range design: an address
 * space whose operations on non-overlapping ranges share nothing (RadixVM's goal, Clements et
 * al., EuroSys 2013). Everything below holds for both; with one range, every change holds
 * all of it, which is Linux's mmap_lock. Nothing outside this file and the mm's creation asks
 * which design is in force (tests/scripts/layers.sh). The lock verbs that every caller uses
 * (mmap_write_lock_range() and the rest) are in range.h, inline for a run of one range; longer
 * runs and widening are here.
 *
 * Linux serialises every mmap, munmap, mprotect and madvise of an mm on mmap_lock, even with
 * per-VMA locks. Here the address space is cut into NR_RANGES ranges of 512 GiB, one PGD
 * entry each (so one PUD table each), and each range has its own lock (a pm_rwsem), its own
 * VMA tree (vma_tree.c, RCU-readable as in Linux's design), its own lists of retired and
 * reusable VMAs, and its own lock sequence for the per-VMA locks (vma_lock.c). A VMA that
 * spans several ranges has one entry, clipped to the range, in the tree of each.
 *
 * The rule everything rests on:
 *
 *	A VMA - its bounds, flags, file, its entries in the trees - changes only while its
 *	changer holds, for write, the lock of every range the VMA spans.
 *
 * So holding any one range that a VMA spans, for read or write, freezes that VMA; and a
 * thread that holds the ranges [lo, hi] may read every VMA with an entry there, and change
 * every VMA that lies wholly inside them.
 *
 * Who takes what:
 *  - mmap (fixed), munmap, mprotect, madvise that changes flags: pm__range_lock_change() holds
 *    the ranges of [start - 1, end] - the VMAs a change may split, remove or merge with are
 *    the ones inside, the one that holds start - 1 and the one that holds end - and then
 *    widens to every range those two span, dropping and retaking in address order when it
 *    must: a change of 4 KiB in the middle of one range takes that one lock.
 *  - mmap without MAP_FIXED: this thread's arena - one range of the top half, chosen once per
 *    thread - searched top-down with only that range held (arena_area()). Threads
 *    mapping at once write disjoint ranges, disjoint trees, disjoint page tables down from the
 *    PGD entry. A full arena (or a length beyond one) falls back to a search of the whole
 *    address space, every range held, that finds any gap big enough (pm__range_gap_scan()).
 *  - A fault: no range lock at all. Its VMA comes from the tree of the range of its address,
 *    under RCU, and is read-locked as in Linux's design; only the lock sequence it is compared
 *    with is the range's (the range the VMA started in when it was write-locked) instead of
 *    the mm's. Where no VMA is, the miss is confirmed by reading the range's lock word and
 *    sequence around the lookup (vma_lock.c, pm__vma_absent), not by holding the lock. The
 *    fallback and slow GUP hold the ranges of their span for read.
 *  - fork and teardown hold every range, in order (pm__range_lock_all()).
 *  - MADV_DONTNEED and MADV_FREE inside one VMA: that VMA's read lock alone (madvise.c); across
 *    VMAs, their ranges for read, as Linux's design holds mmap_lock for read.
 *
 * Lock order: ranges in ascending address order, a parent's before its child's (fork); then
 * the per-VMA write locks, then everything Linux's design takes under mmap_lock (i_mmap_lock,
 * PTLs, page_table_lock, ...). A thread holds one contiguous run of ranges of an mm at a time
 * (pm__range_hold(): at most two mms, for fork); widening drops the run and takes a longer
 * one from its start, so no thread ever waits for a lower range while holding a higher one.
 *
 * Why a fault under a VMA lock is safe here, by the argument of vma_lock.c: a writer
 * write-locks a VMA (vma_start_write, with its reader drain) under the range that holds the
 * VMA's start, records that range's sequence in the VMA, and unlocks every VMA of its section
 * by bumping the sequences of the ranges it held when it lets them go. A reader compares the
 * VMA's recorded sequence with the current value of the range it was recorded from; both
 * stores happen inside the writer's drain, so the pairing is the one vma_lock.c argues for.
 *
 *	fault on B (range 2)			munmap of A (range 1)
 *	--------------------			---------------------
 *	vma = lookup(ranges[2].tree, addr)	down_write(ranges[1].lock)
 *	vma_start_read(B): B's seq vs		vma_start_write(A): A's seq = ranges[1].seq
 *	  ranges[2].seq - no writer there	remove A from ranges[1].tree
 *	... fault, nothing shared ...		ranges[1].seq++; zap A; up_write
 *
 * Page tables. A range is one PGD entry, so the PUD, PMD and PTE tables under it belong to
 * that range alone; a munmap frees tables only inside the ranges it holds
 * (pm__vma_free_gap_tables clips the gap), so it never frees a table that a change elsewhere is
 * filling. The PGD page itself is shared, but each range writes only its own entry, once in
 * the mm's life (the PUD table stays until the teardown): by compare-and-swap from empty
 * (policy upper_cas), where Linux's design takes the mm's page_table_lock. mmap fills the
 * PGD entries of a new mapping under its write hold (policy eager_upper, pgtable.c), so that
 * its first faults only read them.
 *
 * To summarize:
 *  1. A VMA changes only under the write locks of every range it spans; holding one of them,
 *     for read or write, freezes it.
 *  2. A change holds the ranges of [start - 1, end], widened to the spans of the two VMAs at
 *     its edges; a run is taken in address order, and widening starts the run again.
 *  3. Faults and GUP-fast take no range lock: RCU and the per-VMA lock, whose sequence is the
 *     range's, as Linux's design uses the mm's.
 *  4. Page tables are freed only inside the ranges held, so never under another change.
 *  5. The VMA count is exact: free units are in the pool or in a range's credit, and a charge
 *     that cannot reach a credit starts the change again holding every range. A split whose
 *     piece the same change unmaps, or a merge that moves a boundary, charges nothing.
 *  6. Whole-mm operations hold every range.
 *
 * What is still shared, and when: populating a PGD entry (above); the grace-period thread,
 * which hands each range's retired VMAs back to that range's own cache (vma_lock.c,
 * set_cache(); the mm's only when the range's could not be allocated) once per
 * PM_RETIRE_BATCH retired objects; and the VMA count (max_map_count), kept as credits of
 * each range that refill from a pool COUNT_BATCH units at a time, exact at the limit (see
 * "the VMA count" below).
 */
#include "mm/range.h"

/* The range design: 512 GiB ranges, one PGD entry each. Linux's design is one range, the
 * whole user address space. */
#define RANGE_SHIFT PM_RANGE_SHIFT
#define LINUX_RANGE_SHIFT 47
_Static_assert(PM_TASK_SIZE <= 1UL << LINUX_RANGE_SHIFT, "one range covers the user space");
#define NR_RANGES ((PM_TASK_SIZE + PGDIR_SIZE - 1) >> RANGE_SHIFT)
/* Arenas: the top half of the ranges, one per thread, counted down from the top. */
#define NR_ARENAS (NR_RANGES / 2)

struct pm_mm_count {
	struct pm_spinlock lock;
	long pool;	/* units neither used nor credited to a range: under lock; below zero
			 * by the VMAs past the limit */
	/* pool < 0, for the charges that take a credit without the lock: none may then. Read
	 * by every charge, written only when it changes: a line of its own. */
	_Atomic bool xdebt __cacheline_aligned;
};

static __thread int arena = -1;
static _Atomic unsigned next_arena;

/* ---- creation ---- */

static const struct pm_mm_policy linux_policy, range_policy;

/* The ranges of a new @mm, by its design's policy. Return: 0 or -ENOMEM (nothing kept). */
int pm__range_init(struct pm_mm *mm, bool range_design)
{
	struct pm_machine *m = mm->m;
	struct pm_mm_count *c;

	mm->policy = range_design ? &range_policy : &linux_policy;
	mm->upper_cas = mm->policy->upper_cas;
	mm->nr_ranges = mm->policy->nr_ranges;
	mm->range_shift = mm->policy->range_shift;
	if (posix_memalign((void **)&mm->ranges, PM_CACHELINE,
			   mm->nr_ranges * sizeof(*mm->ranges))) {
		mm->ranges = NULL;
		return -ENOMEM;
	}
	memset(mm->ranges, 0, mm->nr_ranges * sizeof(*mm->ranges));
	pm__trace_object(mm->ranges, mm->nr_ranges * sizeof(*mm->ranges), "pm_mm_range");
	for (unsigned r = 0; r < mm->nr_ranges; r++) {
		pm_rwsem_init(&mm->ranges[r].lock);
		pm__vt_init(&mm->ranges[r].set.vmt, m);
		atomic_store_relaxed(&mm->ranges[r].xlock_seq, 1);
	}
	if (!range_design)
		return 0;
	if (posix_memalign((void **)&c, PM_CACHELINE, sizeof(*c))) {
		pm__trace_object_gone(mm->ranges);
		free(mm->ranges);
		mm->ranges = NULL;
		return -ENOMEM;
	}
	pm_spin_init(&c->lock);
	c->pool = PM_MAX_MAP_COUNT;
	atomic_store_relaxed(&c->xdebt, false);
	mm->count = c;
	pm__trace_object(c, sizeof(*c), "pm_mm_count");
	return 0;
}

/* Context: nobody can reach @mm any more; its VMAs are gone. */
void pm__range_fini(struct pm_mm *mm)
{
	if (!mm->ranges)
		return;
	for (unsigned r = 0; r < mm->nr_ranges; r++)
		pm__vt_destroy(&mm->ranges[r].set.vmt);
	pm__trace_object_gone(mm->ranges);
	if (mm->count)
		pm__trace_object_gone(mm->count);
	free(mm->ranges);
	free(mm->count);
	mm->ranges = NULL;
	mm->count = NULL;
}

/* ---- holding ranges ---- */

/* Take ranges [@lo, @hi] of @mm in address order. Context: this thread holds none of @mm. */
void pm__range_lock_slots(struct pm_mm *mm, unsigned lo, unsigned hi, bool write)
{
	struct pm_rwsem_run *runs = pm__rwsem_runs, *h = runs[0].owner ? &runs[1] : &runs[0];
	struct pm_mm_range *rg = mm->ranges;

	/* One run of ranges per mm at a time (no recursion), in a free record. */
	pm_bug_on(runs[0].owner == mm || runs[1].owner == mm || h->owner || lo > hi ||
		  hi >= mm->nr_ranges);
	if (write) {
		for (unsigned r = lo; r <= hi; r++)
			pm_down_write(&rg[r].lock);
	} else {
		for (unsigned r = lo; r <= hi; r++)
			pm_down_read(&rg[r].lock);
	}
	h->owner = mm;
	h->lo = lo;
	h->hi = hi;
	h->write = write;
	h->downgraded = false;
}

/*
 * pm__range_unlock() - let go of what this thread holds of @mm. A write hold ends the VMA
 * write locks taken under it (each range's sequence moves on) and hands what left the range's
 * tree to RCU once a batch is full; a downgraded hold ended its VMA write locks already.
 */
void pm__range_unlock(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_mm_range *rg = mm->ranges;
	unsigned lo, hi;

	pm_bug_on(!h);
	lo = h->lo;
	hi = h->hi;
	if (!h->write) {
		for (unsigned r = lo; r <= hi; r++)
			pm_up_read(&rg[r].lock);
		h->owner = NULL;
		return;
	}
	for (unsigned r = lo; r <= hi; r++)
		if (rg[r].set.nr_retired_vmas + rg[r].set.vmt.nr_retired >= PM_RETIRE_BATCH)
			pm__vma_set_flush(mm, &rg[r].set, false);
	if (h->downgraded && mm->policy->downgrade) {
		for (unsigned r = lo; r <= hi; r++)
			pm_up_read(&rg[r].lock);
	} else {
		for (unsigned r = lo; r <= hi; r++) {
			if (!h->downgraded)
				atomic_store_release(&rg[r].xlock_seq,
						     atomic_load_relaxed(&rg[r].xlock_seq) + 1);
			pm_up_write(&rg[r].lock);
		}
	}
	h->owner = NULL;
}

/*
 * mmap_write_downgrade(): every VMA write lock ends, so faults on the VMAs next door go on
 * during the zap. Linux's design then holds mmap_lock for read (its slow GUP and fault
 * fallbacks come in too); the range design keeps its ranges for write: there faults never
 * take them, and a downgrade would cost two more atomics for the benefit of a slow GUP in the
 * same range only.
 */
void pm__range_downgrade(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	pm_bug_on(!h || !h->write || h->downgraded);
	for (unsigned r = h->lo; r <= h->hi; r++) {
		struct pm_mm_range *rg = &mm->ranges[r];

		atomic_store_release(&rg->xlock_seq, atomic_load_relaxed(&rg->xlock_seq) + 1);
		if (mm->policy->downgrade)
			pm_downgrade_write(&rg->lock);
	}
	h->downgraded = true;
}

/* The VMA that holds @addr, from the tree of its range. Context: that range held. */
static struct pm_vma *vma_at(struct pm_mm *mm, unsigned long addr)
{
	mmap_assert_locked(mm);
	return pm__vt_lookup(&mm->ranges[range_of(mm, addr)].set.vmt, addr);
}

/*
 * Does the run [@lo, @hi] held now cover every VMA that a change of [@start, @end) may touch?
 * Those are the VMAs inside (held, since the run covers [start - 1, end]) and the two at its
 * edges, whose own spans may reach further; *@nlo and *@nhi widen to cover those. Inline in
 * both callers: it runs twice in every mmap-munmap pair of the range design.
 */
static __always_inline bool change_covered(struct pm_mm *mm, unsigned lo, unsigned hi,
					   unsigned long start, unsigned long end,
					   unsigned *nlo, unsigned *nhi)
{
	struct pm_vma *vma;
	unsigned long first, last;

	*nlo = lo;
	*nhi = hi;
	/* Only an entry at the run's outer edge can belong to a VMA from outside: the summaries
	 * at the trees' roots say whether there is one, without a search (arenas never map
	 * there). */
	if (start && pm__vt_span(&mm->ranges[lo].set.vmt, &first, &last) &&
	    first == range_start(mm, lo) && (vma = vma_at(mm, start - 1)))
		*nlo = min(lo, range_of(mm, vma->start));
	if (end < PM_TASK_SIZE && pm__vt_span(&mm->ranges[hi].set.vmt, &first, &last) &&
	    last == range_end(mm, hi) && (vma = vma_at(mm, end)))
		*nhi = max(hi, range_of(mm, vma->end - 1));
	return *nlo == lo && *nhi == hi;
}

/* Take the run [@lo, @hi] for write; a run of one range inline, as range.h's verbs do. */
static __always_inline void lock_run_write(struct pm_mm *mm, unsigned lo, unsigned hi)
{
	if (lo == hi)
		range_hold_one(mm, lo, true);
	else
		pm__range_lock_slots(mm, lo, hi, true);
}

/*
 * pm__range_lock_change() - hold for write every range a change of [@start, @end) may touch:
 * the ranges of [start - 1, end], widened to the whole span of the VMAs at either edge (they
 * may be split, or merged with). Widening drops the run and retakes a longer one, then looks
 * again: the edge VMAs may have changed meanwhile. Each round only grows the run, so it ends.
 */
void pm__range_lock_change(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	unsigned lo = range_of(mm, start ? start - 1 : 0), hi = range_of(mm, end), nlo, nhi;

	for (;;) {
		lock_run_write(mm, lo, hi);
		if ((!lo && hi == mm->nr_ranges - 1) ||
		    change_covered(mm, lo, hi, start, end, &nlo, &nhi))
			return; /* every range held (Linux's design, or a change across all) */
		pm__range_unlock(mm);
		lo = nlo;
		hi = nhi;
	}
}

/* Hold for read the ranges of [@start, @end): the VMAs with an entry there stay as they are. */
void pm__range_lock_read(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	pm__range_lock_slots(mm, range_of(mm, start), range_of(mm, end > start ? end - 1 : start),
			     false);
}

void pm__range_lock_all(struct pm_mm *mm)
{
	pm__range_lock_slots(mm, 0, mm->nr_ranges - 1, true);
}

/* ---- choosing an address ---- */

static unsigned this_arena(void)
{
	if (unlikely(arena < 0))
		arena = (int)(atomic_add_relaxed(&next_arena, 1) % NR_ARENAS);
	return NR_RANGES - 1 - (unsigned)arena;
}

/* Is [@addr, @addr + @len) inside the user address space and free? Context: its ranges held. */
static bool area_free(struct pm_mm *mm, unsigned long addr, unsigned long len)
{
	mmap_assert_locked(mm);
	return addr >= PM_USER_MIN && addr <= PM_TASK_SIZE - len &&
	       !pm__find_vma_intersection(mm, addr, addr + len);
}

/*
 * arena_area() - a free, @align-aligned range of @len bytes in this thread's arena, top-down,
 * with the ranges a mapping there changes held for write (as pm__range_lock_change()).
 * Return: the address, or -ENOMEM with nothing held: the arena is full, or another thread
 * took the place while the run was widened.
 */
static long arena_area(struct pm_mm *mm, unsigned long len, unsigned long align)
{
	unsigned r = this_arena(), lo, hi;
	unsigned long start = range_start(mm, r) + PAGE_SIZE;
	unsigned long end = min(range_end(mm, r) - PAGE_SIZE, mm->mmap_base); /* Linux's stack gap */
	long a;

	if (len > end - start)
		return -ENOMEM;
	range_hold_one(mm, r, true);
	a = pm__vt_gap_topdown(&mm->ranges[r].set.vmt, start, end, len, align);
	if (a < 0) {
		pm__range_unlock(mm);
		return a;
	}
	if (change_covered(mm, r, r, (unsigned long)a, (unsigned long)a + len, &lo, &hi))
		return a;
	/* A neighbour spans other ranges (a fixed mapping across the boundary): take them all. */
	pm__range_unlock(mm);
	pm__range_lock_change(mm, (unsigned long)a, (unsigned long)a + len);
	if (!pm__find_vma_intersection(mm, (unsigned long)a, (unsigned long)a + len))
		return a;
	pm__range_unlock(mm);
	return -ENOMEM;
}

/*
 * area_all() - arena_area() for a change that holds every range already: a free hint (page
 * aligned, or 0) as is, else this thread's arena, else the whole address space.
 */
static long area_all(struct pm_mm *mm, unsigned long hint, unsigned long len,
			unsigned long align)
{
	unsigned r = this_arena();
	unsigned long start = range_start(mm, r) + PAGE_SIZE;
	unsigned long end = min(range_end(mm, r) - PAGE_SIZE, mm->mmap_base);
	long a = -ENOMEM;

	mmap_assert_write_locked(mm);
	if (area_free(mm, hint, len))
		return (long)hint;
	if (len <= end - start)
		a = pm__vt_gap_topdown(&mm->ranges[r].set.vmt, start, end, len, align);
	return a >= 0 ? a : pm__range_gap_scan(mm, len, align);
}

/* The highest (@top) or lowest @align-aligned place for @len bytes in [@lo, @hi), or -ENOMEM. */
static long gap_fit(unsigned long lo, unsigned long hi, unsigned long len, unsigned long align,
		    bool top)
{
	unsigned long a;

	if (hi <= lo || hi - lo < len)
		return -ENOMEM;
	a = top ? ALIGN_DOWN(hi - len, align) : ALIGN_UP(lo, align);
	return a >= lo && a <= hi - len ? (long)a : -ENOMEM;
}

/*
 * pm__range_gap_scan() - a search of the whole address space, for a mapping no arena takes:
 * the highest free place below the arenas (no thread's own), else the lowest free place
 * anywhere - among the arenas, handed out from the top so that the lowest are the least used,
 * or above mmap_base. Each gap is tried whole, so a gap across the arenas' start or across
 * range boundaries counts in full: whatever free gap is big enough, this finds one, as
 * Linux's design does; only the address picked differs. O(n) in the VMAs, walking them in
 * order across ranges; it runs only when an arena cannot take a mapping. Context: every range
 * held.
 */
long pm__range_gap_scan(struct pm_mm *mm, unsigned long len, unsigned long align)
{
	unsigned long arenas = range_start(mm, NR_RANGES - NR_ARENAS), lo = PM_USER_MIN;
	long below = -ENOMEM, lowest = -ENOMEM;
	struct pm_vma *vma;

	mmap_assert_write_locked(mm);
	for (vma = pm__find_vma(mm, 0);; vma = pm__vma_next(mm, vma)) {
		/* The gap [lo, hi) below @vma, or below the end of the address space. */
		unsigned long hi = vma ? vma->start : PM_TASK_SIZE;
		long a = gap_fit(lo, min(hi, arenas), len, align, true);

		if (a >= 0)
			below = a;
		if (lowest < 0)
			lowest = gap_fit(lo, hi, len, align, false);
		/* Past the arenas' start only the lowest counts, and it is found. */
		if (!vma || (lowest >= 0 && vma->end >= arenas))
			break;
		lo = vma->end;
	}
	return below >= 0 ? below : lowest;
}

/* ---- the VMA count ---- */

/*
 * max_map_count without a shared write. Units are conserved:
 *
 *	used + pool + sum over ranges of credit == PM_MAX_MAP_COUNT
 *
 * A credit is never negative; the pool is, by as many VMAs as live past the limit (a change
 * that failed half-way keeps a piece it meant to unmap: range_count_force()). Then the
 * credits are not free units, only the sum is: xdebt sends every charge to the pool's lock,
 * where the credits it can reach pay the debt first, and the rest is as at the limit below.
 *
 * A range's credit is written only by the thread that holds the range for write (the lowest
 * range of its run), with plain loads and stores: a change that frees VMAs credits them there,
 * and the next change that makes one takes it back - mmap1's munmap and mmap touch nothing
 * but their own range. A range with no credit takes a batch from the pool, under the pool's
 * lock; a credit past a few batches goes back there.
 *
 * Exact at the limit: with the pool empty, a charge first takes the credits of the ranges its
 * thread holds. If other ranges still hold credit (read without their locks: a racy look is
 * enough to know whether to ask), the charge cannot take them without their locks, which it
 * may not wait for out of order; it answers -EAGAIN, and the operation starts again holding
 * every range (pm__range_lock_all()), where every credit can be taken. A charge that fails
 * then, or fails with no credit anywhere, fails because every unit is in use.
 */
#define COUNT_BATCH 32

/* After the pool changed, under its lock: tell the lockless charges whether it is in debt. */
static void pool_note(struct pm_mm_count *c)
{
	if (atomic_load_relaxed(&c->xdebt) != (c->pool < 0))
		atomic_store_relaxed(&c->xdebt, c->pool < 0);
}

static _Atomic long *credit_here(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	pm_bug_on(!h || !h->write);
	return &mm->ranges[h->lo].xcredit;
}

/* One more VMA. Return: 0, -ENOMEM (max_map_count reached), or -EAGAIN (start again holding
 * every range: free units wait in ranges this thread does not hold). */
static int range_count_charge(struct pm_mm *mm)
{
	struct pm_mm_count *c = mm->count;
	_Atomic long *credit = credit_here(mm);
	long v = atomic_load_relaxed(credit);
	struct pm_rwsem_run *h;
	bool elsewhere = false, took;

	/* A debt seen late (set by a thread in other ranges) orders this charge before it. */
	if (likely(v > 0) && likely(!atomic_load_relaxed(&c->xdebt))) {
		atomic_store_relaxed(credit, v - 1);
		return 0;
	}
	pm_spin_lock(&c->lock);
	if (c->pool > 0) {
		long take = min(c->pool, (long)COUNT_BATCH);

		c->pool -= take;
		pm_spin_unlock(&c->lock);
		atomic_store_relaxed(credit, take - 1);
		return 0;
	}
	/* Near the limit, or in debt: the credits of the ranges we hold, then the others'. */
	h = pm__range_hold(mm);
	for (unsigned r = 0; r < mm->nr_ranges; r++) {
		_Atomic long *x = &mm->ranges[r].xcredit;

		if (r >= h->lo && r <= h->hi) {
			c->pool += atomic_load_relaxed(x);
			atomic_store_relaxed(x, 0);
		} else if (atomic_load_relaxed(x)) {
			elsewhere = true;
		}
	}
	took = c->pool > 0;
	if (took)
		c->pool--;
	pool_note(c);
	pm_spin_unlock(&c->lock);
	if (took)
		return 0;
	return elsewhere ? -EAGAIN : -ENOMEM;
}

/*
 * One more VMA even past max_map_count, for a VMA that came in uncharged and stays
 * (pm__vma_settle()): this range's credit, else the pool, which may go below zero. It never
 * waits for another range's credit: the count stays exact, only the limit is passed.
 */
static void range_count_force(struct pm_mm *mm)
{
	struct pm_mm_count *c = mm->count;
	_Atomic long *credit = credit_here(mm);
	long v = atomic_load_relaxed(credit);

	if (v > 0) {
		atomic_store_relaxed(credit, v - 1);
		return;
	}
	pm_spin_lock(&c->lock);
	c->pool--;
	pool_note(c);
	pm_spin_unlock(&c->lock);
}

/* @n VMAs fewer: credited to the range held, and past a few batches back to the pool. */
static void range_count_uncharge(struct pm_mm *mm, long n)
{
	struct pm_mm_count *c = mm->count;
	_Atomic long *credit = credit_here(mm);
	long v = atomic_load_relaxed(credit) + n;

	if (likely(v <= 4 * COUNT_BATCH)) {
		atomic_store_relaxed(credit, v);
		return;
	}
	atomic_store_relaxed(credit, COUNT_BATCH);
	pm_spin_lock(&c->lock);
	c->pool += v - COUNT_BATCH;
	pool_note(c);
	pm_spin_unlock(&c->lock);
}

/* The exact count when every range is held or the mm is quiescent; otherwise a snapshot. */
static unsigned long range_count_read(struct pm_mm *mm)
{
	struct pm_mm_count *c = mm->count;
	long free;

	pm_spin_lock(&c->lock);
	free = c->pool;
	pm_spin_unlock(&c->lock);
	for (unsigned r = 0; r < mm->nr_ranges; r++)
		free += atomic_load_relaxed(&mm->ranges[r].xcredit);
	return (unsigned long)(PM_MAX_MAP_COUNT - free);
}

/* ---- the two policies ---- */

/*
 * Linux's get_unmapped_area with mmap_lock held: a free hint (page aligned: pm_mmap masked it)
 * as is, else the top-down search below mmap_base, then bottom-up above it. O(log n) in the
 * VMAs (vma_tree.c). Inline in linux_lock_area(), every non-fixed mmap's path; mremap's search
 * calls it through the policy table.
 */
static __always_inline long linux_area(struct pm_mm *mm, unsigned long hint,
				       unsigned long len, unsigned long align)
{
	struct pm_vma_tree *vmt = &mm->ranges[0].set.vmt;
	long a;

	if (hint && area_free(mm, hint, len))
		return (long)hint;
	a = pm__vt_gap_topdown(vmt, PM_USER_MIN, mm->mmap_base, len, align);
	if (a < 0)
		a = pm__vt_gap_bottomup(vmt, mm->mmap_base, PM_TASK_SIZE, len, align);
	return a;
}

static long linux_lock_area(struct pm_mm *mm, unsigned long hint, unsigned long len,
			    unsigned long align, bool all)
{
	long a;

	mmap_write_lock_all(mm);
	a = linux_area(mm, hint, len, align);
	if (a < 0)
		mmap_write_unlock(mm);
	return a;
}

/*
 * The range design: a free hint holding only its ranges, else this thread's arena, else the
 * whole address space with every range held; with @all (a change that must start again
 * holding every range) the same with every range held from the start.
 */
static long range_lock_area(struct pm_mm *mm, unsigned long hint, unsigned long len,
			    unsigned long align, bool all)
{
	long a;

	if (all) {
		pm__range_lock_all(mm);
		a = area_all(mm, hint, len, align);
		goto out;
	}
	if (hint >= PM_USER_MIN && hint <= PM_TASK_SIZE - len) {
		pm__range_lock_change(mm, hint, hint + len);
		if (area_free(mm, hint, len))
			return (long)hint;
		pm__range_unlock(mm);
	}
	a = arena_area(mm, len, align);
	if (a >= 0)
		return a;
	pm__range_lock_all(mm);
	a = pm__range_gap_scan(mm, len, align);
out:
	if (a < 0)
		pm__range_unlock(mm);
	return a;
}

/*
 * pm__get_unmapped_area() - a place for @len bytes, chosen as the mm's policy chooses with
 * every range held (a free page-aligned @hint as is, else the search: Linux's get_unmapped_area
 * under mmap_lock). Context: ranges held for write. Return: the address, -ENOMEM, or -EAGAIN
 * when this thread holds fewer than every range (start again holding them all).
 */
long pm__get_unmapped_area(struct pm_mm *mm, unsigned long hint, unsigned long len,
			   unsigned long align)
{
	const struct pm_rwsem_run *h = pm__range_hold(mm);

	mmap_assert_write_locked(mm);
	if (h->lo || h->hi != mm->nr_ranges - 1)
		return -EAGAIN;
	return mm->policy->area(mm, hint, len, align);
}

/* Linux's max_map_count: the tree's entries, one per VMA; nothing to charge ahead. */
static unsigned long linux_count_read(struct pm_mm *mm)
{
	return pm__vt_count(&mm->ranges[0].set.vmt);
}

static int linux_count_charge(struct pm_mm *mm)
{
	return linux_count_read(mm) < PM_MAX_MAP_COUNT ? 0 : -ENOMEM;
}

static void linux_count_force(struct pm_mm *mm)
{
}

static void linux_count_uncharge(struct pm_mm *mm, long n)
{
}

static const struct pm_mm_policy linux_policy = {
	.name = "linux",
	.nr_ranges = 1,
	.range_shift = LINUX_RANGE_SHIFT,
	.downgrade = true,
	.lock_area = linux_lock_area,
	.area = linux_area,
	.count_charge = linux_count_charge,
	.count_force = linux_count_force,
	.count_uncharge = linux_count_uncharge,
	.count_read = linux_count_read,
};

static const struct pm_mm_policy range_policy = {
	.name = "range",
	.nr_ranges = NR_RANGES,
	.range_shift = RANGE_SHIFT,
	.downgrade = false,
	.gup_vma_lock = true,
	.upper_cas = true,
	.pte_cas = true,
	.hot_folios = true,
	.lockless_miss = true,
	.eager_upper = true,
	.hugetlb_lists = true,
	.lock_area = range_lock_area,
	.area = area_all,
	.count_charge = range_count_charge,
	.count_force = range_count_force,
	.count_uncharge = range_count_uncharge,
	.count_read = range_count_read,
};
