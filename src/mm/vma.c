// SPDX-License-Identifier: MIT
/*
 * vma.c - the VMAs of an address space: lookup, insertion, splitting, merging, detaching.
 *
 * The set is an RCU-readable B+tree of ranges (vma_tree.c), one entry per VMA; each operation
 * here is O(log n). At most PM_MAX_MAP_COUNT VMAs live in one mm (Linux's vm.max_map_count):
 * an insertion or split that would leave more once its change is done fails with -ENOMEM. A
 * change that adds no VMA in the end is never refused: a mapping that merges, a split whose
 * piece the same change unmaps (PM_SPLIT_*_GOES), a change of a VMA's head or tail that the
 * neighbour there takes over (pm__vma_modify).
 *
 * Locking. Everything here runs under mmap_lock for write, except the lookups, which also run
 * under mmap_lock for read. A VMA is write-locked (vma_lock.c) before any field a fault reads
 * changes or before it leaves the tree, and a new VMA is write-locked before it enters it, so
 * a fault under a per-VMA lock never sees a VMA change under it. A file VMA is also on its
 * object's i_mmap list, which truncation walks without mmap_lock; its start, end and pgoff
 * therefore change only under the object's i_mmap lock too, and it leaves the list
 * (pm__vma_unlink_file) after its mappings are zapped and before its page tables can be
 * freed. A VMA that left the tree is freed a grace period after mmap_lock is released
 * (pm__vma_retire), since a lockless lookup may still hold it; retired VMAs and tree nodes go
 * to RCU in batches (pm__vma_set_flush).
 */
#include "mm/mm.h"

/*
 * The ranges (range.c): a tree per range - one in Linux's design, under mmap_lock - and a VMA
 * has an entry, clipped to the range, in every range it spans; a lookup starts in the range
 * of its address. Lookups that may cross ranges stop at the last range this thread holds (a
 * thread that holds none is pm_machine_check() on a quiescent mm: it may look everywhere).
 */
static unsigned ranges_end(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	return h ? h->hi : mm->nr_ranges - 1;
}

static unsigned ranges_start(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	return h ? h->lo : 0;
}

/*
 * The first VMA that ends above @addr, from the range of @addr up to the end of the run held.
 * Range 0 needs no hold record (it is at or below the run's end), nor does a miss in the last
 * range.
 */
static __noinline struct pm_vma *find_vma_run(struct pm_mm *mm, unsigned long addr, unsigned r)
{
	struct pm_vma *vma = NULL;
	unsigned hi;

	if (!r) {
		vma = pm__vt_find(&mm->ranges[0].set.vmt, addr, NULL, NULL);
		if (vma || r == mm->nr_ranges - 1)
			return vma;
		r++;
	}
	for (hi = ranges_end(mm); !vma && r <= hi; r++)
		vma = pm__vt_find(&mm->ranges[r].set.vmt, addr, NULL, NULL);
	return vma;
}

/* The range design's lookup: an address in the last range of the run held (most lookups of
 * a change) has its answer in that range's tree; the walk across ranges stays out of line.
 * Out of line itself, so that pm__find_vma() stays small enough to inline for one range. */
static __noinline struct pm_vma *find_vma_ranges(struct pm_mm *mm, unsigned long addr)
{
	unsigned r = range_of(mm, addr);

	if (r == ranges_end(mm))
		return pm__vt_find(&mm->ranges[r].set.vmt, addr, NULL, NULL);
	return find_vma_run(mm, addr, r);
}

/* The first VMA that ends above @addr (it may start above @addr too), or NULL. One range:
 * its tree is the whole answer. */
struct pm_vma *pm__find_vma(struct pm_mm *mm, unsigned long addr)
{
	if (addr >= PM_TASK_SIZE)
		return NULL;
	if (mm_one_range(mm))
		return pm__vt_find(&mm->ranges[0].set.vmt, addr, NULL, NULL);
	return find_vma_ranges(mm, addr);
}

struct pm_vma *pm__find_vma_intersection(struct pm_mm *mm, unsigned long start,
					 unsigned long end)
{
	struct pm_vma *vma = pm__find_vma(mm, start);

	return vma && vma->start < end ? vma : NULL;
}

struct pm_vma *pm__vma_next(struct pm_mm *mm, struct pm_vma *vma)
{
	return pm__find_vma(mm, vma->end);
}

/* The last VMA that starts below @addr, from the range of @addr - 1 (@r) down to the start
 * of the run held. The last range is never below the run's start, so that lookup needs no
 * hold record, nor a miss in range 0. */
static __noinline struct pm_vma *find_vma_prev_run(struct pm_mm *mm, unsigned long addr,
						   unsigned r)
{
	struct pm_vma *vma = NULL;
	unsigned lo;

	if (r == mm->nr_ranges - 1) {
		vma = pm__vt_prev(&mm->ranges[r].set.vmt, addr, NULL, NULL);
		if (vma || !r)
			return vma;
		r--;
	}
	for (lo = ranges_start(mm); !vma && r + 1 > lo; r--) {
		vma = pm__vt_prev(&mm->ranges[r].set.vmt, addr, NULL, NULL);
		if (!r)
			break;
	}
	return vma;
}

/* As find_vma_ranges(): @addr - 1 in the first range of the run held needs only its tree. */
static __noinline struct pm_vma *find_vma_prev_ranges(struct pm_mm *mm, unsigned long addr)
{
	unsigned r = range_of(mm, addr - 1);

	if (r == ranges_start(mm))
		return pm__vt_prev(&mm->ranges[r].set.vmt, addr, NULL, NULL);
	return find_vma_prev_run(mm, addr, r);
}

/* The last VMA that starts below @addr, or NULL. One range: its tree is the whole answer. */
static struct pm_vma *find_vma_prev(struct pm_mm *mm, unsigned long addr)
{
	if (!addr)
		return NULL;
	if (mm_one_range(mm))
		return pm__vt_prev(&mm->ranges[0].set.vmt, addr, NULL, NULL);
	return find_vma_prev_ranges(mm, addr);
}

struct pm_vma *pm__vma_prev(struct pm_mm *mm, struct pm_vma *vma)
{
	return find_vma_prev(mm, vma->start);
}

/*
 * pm__vma_free_gap_tables() - free the page tables of the gap [@start, @end) leaves once its
 * VMAs are gone: those whose span lies between the end of the VMA below and the start of the
 * VMA above (Linux's floor and ceiling). The range design never looks past the ranges it holds:
 * their bounds are the limit. Where no table that could go is reached, the bounds are not
 * looked up (pm__pgd_range_has_tables).
 * Context: mmap_lock or the ranges of [@start, @end) held, no VMA left in [@start, @end).
 */
void pm__vma_free_gap_tables(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	const struct pm_rwsem_run *h = pm__range_hold(mm);
	struct pm_vma *prev, *next;
	unsigned long lo, hi;

	mmap_assert_locked(mm);
	if (!pm__pgd_range_has_tables(mm, start, end))
		return;
	prev = find_vma_prev(mm, start);
	next = pm__find_vma(mm, end);
	lo = range_start(mm, h->lo);
	hi = range_end(mm, h->hi);
	pm__free_pgd_range(mm, start, end, max(prev ? prev->end : 0, lo),
			   next && next->start < hi ? next->start : hi);
}

/* vmas_store() across ranges: every tree's node pool is filled first, so that either all of
 * them change or - on -ENOMEM - none; then a clipped entry goes into each. */
static __noinline int vmas_store_ranges(struct pm_mm *mm, unsigned long start,
					unsigned long end, struct pm_vma *vma)
{
	unsigned lo = range_of(mm, start), hi = range_of(mm, end - 1);

	for (unsigned r = lo; r <= hi; r++)
		if (pm__vt_prepare(&mm->ranges[r].set.vmt))
			return -ENOMEM;
	for (unsigned r = lo; r <= hi; r++) {
		unsigned long s = max(start, range_start(mm, r));
		unsigned long e = min(end, range_end(mm, r));

		pm_bug_on(pm__vt_store(&mm->ranges[r].set.vmt, s, e, vma)); /* prepared */
	}
	return 0;
}

/*
 * Make [@start, @end) map to @vma (NULL: to nothing) in the VMA trees: an entry, clipped to the
 * range, in each range the span meets - most spans meet one.
 */
static int vmas_store(struct pm_mm *mm, unsigned long start, unsigned long end,
		      struct pm_vma *vma)
{
	unsigned r = range_of(mm, start);

	pm_assert(pm__range_covers(mm, start, end));
	/* Before the entry is published, under the range's write hold (pm__vma_absent). */
	if (vma && (vma->flags & VM_GROWSDOWN) && !atomic_load_relaxed(&mm->xgrowsdown))
		atomic_store_release(&mm->xgrowsdown, true);
	if (likely(r == range_of(mm, end - 1)))
		return pm__vt_store(&mm->ranges[r].set.vmt, start, end, vma);
	return vmas_store_ranges(mm, start, end, vma);
}

/*
 * max_map_count, kept as the mm's policy says (range.c): Linux's design counts the tree's
 * entries; the range design charges per-range credits, exact at the limit. A VMA in the tree
 * uncharged
 * (vma->uncounted: it came in at the limit because it merges, or is the piece of a split that
 * its munmap takes out again) is not uncharged when it merges or goes. None is left when the
 * change ends: one that stays after all is charged then (pm__vma_settle).
 */
static int vma_count_charge(struct pm_mm *mm)
{
	return mm->policy->count_charge(mm);
}

static void vma_count_uncharge(struct pm_mm *mm, long n)
{
	if (n)
		mm->policy->count_uncharge(mm, n);
}

/*
 * pm__vma_settle() - @vma stays in the tree after all (its change failed half-way, or its merge
 * found no memory): charge it if it came in uncharged, past max_map_count if need be - Linux's
 * map_count too may end above the limit then. Context: mmap_lock (W).
 */
void pm__vma_settle(struct pm_mm *mm, struct pm_vma *vma)
{
	mmap_assert_write_locked(mm);
	if (!vma->uncounted)
		return;
	vma->uncounted = false;
	mm->policy->count_force(mm);
}

static bool can_merge(struct pm_vma *a, struct pm_vma *b);
static void anon_settle_gap(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			    unsigned long end);

/* Will @vma, not yet in the tree, merge with a neighbour (pm__vma_try_merge)? */
static bool vma_would_merge(struct pm_mm *mm, struct pm_vma *vma)
{
	struct pm_vma *next = pm__find_vma(mm, vma->end - 1);
	struct pm_vma *prev = find_vma_prev(mm, vma->start);

	return (next && can_merge(vma, next)) || (prev && can_merge(prev, vma));
}

/*
 * pm__vma_insert() - add @vma, which overlaps no VMA, write-locked until the section ends.
 * At the limit, only a VMA that will merge into a neighbour may come in (the caller merges).
 * Context: mmap_lock (W). Return: 0, -ENOMEM (no memory, or max_map_count reached), or
 * -EAGAIN (range design: start again holding every range, see range.c's VMA count).
 */
int pm__vma_insert(struct pm_mm *mm, struct pm_vma *vma)
{
	int err;

	mmap_assert_write_locked(mm);
	pm_assert(!(vma->flags & VM_HUGETLB) ||
		  (!((vma->start | vma->end) & ~PMD_MASK) && !(vma->pgoff & (HPAGE_PMD_NR - 1))));
	err = vma_count_charge(mm);
	if (err == -EAGAIN)
		return err;
	vma->uncounted = err != 0;
	if (vma->uncounted && !vma_would_merge(mm, vma))
		return -ENOMEM;
	anon_settle_gap(mm, vma, vma->start, vma->end);
	vma_mark_new(vma);
	if (vmas_store(mm, vma->start, vma->end, vma)) {
		vma_count_uncharge(mm, !vma->uncounted);
		return -ENOMEM;
	}
	return 0;
}

/*
 * pm__vma_detach_range() - take every VMA inside [@start, @end) out of the tree in one change,
 * write-locked and marked detached. They stay on their objects' i_mmap lists until the caller
 * has zapped them (pm__vma_unlink_file, then pm__vma_retire), as Linux's free_pgtables unlinks
 * a VMA only after unmap_vmas: whoever walks an i_mmap list sees every mapping of the object's
 * pages that is not yet zapped - the owner of a private hugetlb mapping taking a page back
 * from its fork children counts on it (fault/hugetlb_fault.c, unmap_ref_private). The range must not
 * cut a VMA (split first). Return: the detached VMAs chained through retire_next in address
 * order, NULL if there were none; *@err is 0, or -ENOMEM with nothing changed.
 * Context: mmap_lock (W).
 */
struct pm_vma *pm__vma_detach_range(struct pm_mm *mm, unsigned long start, unsigned long end,
				    int *err)
{
	struct pm_vma *first = NULL, **tail = &first, *vma;
	long counted = 0;

	mmap_assert_write_locked(mm);
	*err = 0;
	for (vma = pm__find_vma_intersection(mm, start, end); vma && vma->start < end;
	     vma = vma->end < end ? pm__vma_next(mm, vma) : NULL) {
		pm_assert(vma->start >= start && vma->end <= end);
		pm__vma_start_change(mm, vma);
		*tail = vma;
		tail = &vma->retire_next;
		counted += !vma->uncounted;
	}
	*tail = NULL;
	if (!first)
		return NULL;
	*err = vmas_store(mm, start, end, NULL);
	if (*err)
		return NULL;
	vma_count_uncharge(mm, counted);
	for (vma = first; vma; vma = vma->retire_next)
		atomic_store_relaxed(&vma->xdetached, true);
	return first;
}

/* Queue a detached VMA to be freed a grace period after mmap_lock is released. */
void pm__vma_retire(struct pm_mm *mm, struct pm_vma *vma)
{
	struct pm_vma_set *set = pm__vma_set_here(mm);

	if (vma->hresv) {
		pm__hugetlb_resv_release(vma->hresv, vma->start, vma->end);
		pm__hugetlb_resv_put(vma->hresv);
		vma->hresv = NULL;
	}
	if (vma->file) {
		pm_shmem_put(vma->file);
		vma->file = NULL;
	}
	if (!set->retired_vmas)
		set->retired_tail = vma;
	vma->retire_next = set->retired_vmas;
	set->retired_vmas = vma;
	set->nr_retired_vmas++;
}

/* A zeroed VMA of @mm, reused if one is ready. Context: mmap_lock (W). */
struct pm_vma *pm__vma_alloc(struct pm_mm *mm)
{
	struct pm_vma *vma;

	mmap_assert_write_locked(mm);
	if (pm__should_fail(mm->m))
		return NULL;
	vma = pm__vma_cache_get(mm);
	if (vma) {
		pm__vma_free_pcpu(vma);
		*vma = (struct pm_vma){ 0 }; /* plain stores: rep stos starts slowly */
	}
	else if (!(vma = calloc(1, sizeof(*vma))))
		return NULL;
	vma->mm = mm;
	pm_list_init(&vma->shared);
	pm__trace_object(vma, sizeof(*vma), "pm_vma");
	return vma;
}

/* Free a VMA no lockless lookup can reach (never in the tree, or the mm is going away); drops
 * its file reference. */
void pm__vma_free(struct pm_vma *vma)
{
	if (vma->hresv) {
		pm__hugetlb_resv_release(vma->hresv, vma->start, vma->end);
		pm__hugetlb_resv_put(vma->hresv);
	}
	if (vma->file)
		pm_shmem_put(vma->file);
	pm__vma_free_pcpu(vma);
	pm__trace_object_gone(vma);
	free(vma);
}

void pm__vma_link_file(struct pm_vma *vma)
{
	if (!vma->file)
		return;
	pm__shmem_map_lock(vma->file);
	pm_list_add_tail(&vma->shared, pm__shmem_i_mmap(vma->file));
	pm__shmem_map_unlock(vma->file);
}

void pm__vma_unlink_file(struct pm_vma *vma)
{
	if (!vma->file)
		return;
	pm__shmem_map_lock(vma->file);
	pm_list_del(&vma->shared);
	pm__shmem_map_unlock(vma->file);
}

/**
 * pm__split_vma() - split @vma at @addr (page aligned, strictly inside it) into two VMAs.
 * @how: PM_SPLIT_CHARGE, the split adds a VMA (charged: refused at max_map_count); or
 * PM_SPLIT_LOWER_GOES / PM_SPLIT_UPPER_GOES, the caller takes that piece out of the tree in
 * the same change (munmap), so the split adds none: the piece is marked uncounted, never
 * charged, and never refused (Linux's vms_gather_munmap_vmas checks only a split that leaves
 * two pieces). Context: mmap_lock held for write. Return: 0, or -ENOMEM with nothing changed,
 * or -EINVAL when @addr would cut a 2 MiB page of a hugetlb VMA, or -EAGAIN as
 * pm__vma_insert().
 */
int pm__split_vma(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr, enum pm_split how)
{
	unsigned long end = vma->end;
	bool charged = how == PM_SPLIT_CHARGE;
	struct pm_vma *new;
	int err;

	mmap_assert_write_locked(mm);
	pm_assert(addr > vma->start && addr < vma->end && !(addr & ~PAGE_MASK));
	if (is_vm_hugetlb_page(vma) && (addr & ~PMD_MASK))
		return -EINVAL; /* it would cut a 2 MiB page (hugetlb_vm_op_split) */
	if (charged) {
		err = vma_count_charge(mm);
		if (err)
			return err;
	}
	new = pm__vma_alloc(mm);
	if (!new) {
		vma_count_uncharge(mm, charged);
		return -ENOMEM;
	}
	new->flags = vma->flags;
	new->start = addr;
	new->end = end;
	new->pgoff = vma_pgoff(vma, addr);
	pm__vma_start_change(mm, vma);
	vma_mark_new(new);
	/* The tree entry of @vma shrinks to [start, addr) and @new takes the rest. */
	if (vmas_store(mm, addr, end, new)) {
		pm__trace_object_gone(new);
		free(new);
		vma_count_uncharge(mm, charged);
		return -ENOMEM;
	}
	/* The piece that goes holds no unit; the one that stays keeps @vma's. */
	if (how == PM_SPLIT_UPPER_GOES) {
		new->uncounted = true;
	} else if (how == PM_SPLIT_LOWER_GOES) {
		new->uncounted = vma->uncounted;
		vma->uncounted = true;
	}
	/* A PMD leaf never straddles two VMAs: split it (from its deposit; this cannot fail). */
	pm__split_huge_pmd_at(mm, addr);
	new->file = vma->file;
	atomic_store_relaxed(&new->xanon_vma, pm__vma_anon_vma(vma));
	new->hresv = vma->hresv;
	if (new->hresv)
		pm__hugetlb_resv_get(new->hresv);
	if (new->file) {
		pm__shmem_get(new->file);
		pm__shmem_map_lock(new->file);
		atomic_store_relaxed(&new->xhugetlb_unmapped,
				     atomic_load_relaxed(&vma->xhugetlb_unmapped));
		vma->end = addr;
		pm_list_add(&new->shared, &vma->shared);
		pm__shmem_map_unlock(new->file);
	} else {
		vma->end = addr;
	}
	return 0;
}

/*
 * anon_vma identity. Linux gives a VMA its anon_vma at the first fault that needs one
 * (__anon_vma_prepare): the neighbour's - the VMA after it, then the one before - when that
 * one borders it, maps the same object, has the same flags but for VM_READ|WRITE|EXEC and a
 * contiguous pgoff, and has an anon_vma of its own (a singular chain: not from fork)
 * (find_mergeable_anon_vma); a new one otherwise. Two VMAs merge later only with the same
 * anon_vma, or where one has none (is_mergeable_anon_vma).
 *
 * A fault here does not look at the neighbours: it holds only its VMA's read lock, and it
 * writes no shared word where it can help it. It records when it came - a stamp from
 * pm__vma_anon_clock(), in its per-CPU slot (vma_lock.c) or, without one, by a cmpxchg of
 * PM_ANON_VMA_PENDING into the VMA's word from 0 - and the choice is made by the first reader
 * of the id, pm__vma_anon_vma(), from the neighbours as they are then. That is the choice
 * the fault would have made, because of one rule:
 *
 *	Before a VMA that has an anon_vma (or a pending one) changes - bounds, flags, anon_vma,
 *	or leaving the tree - and before one comes to border another, every choice that could
 *	read it is made: its own, and those of the VMAs that border it
 *	(pm__vma_start_change(), anon_settle_gap()).
 *
 * So a pending VMA's neighbours are still the ones of its first fault. A neighbour that had
 * an anon_vma then has one now (an id), or is pending with an earlier stamp (then its own
 * choice is made first: stamps only decrease along that chain, so it ends); a neighbour whose
 * stamp is later got its anon_vma after this one. Readers hold the VMA's write lock, or the
 * mmap_lock for write and ask about a neighbour, whose ranges they hold (range.c: holding a
 * range a VMA spans freezes it; the lookups here never leave the ranges held, so a neighbour
 * across the edge of the ranges held counts as none). Faults on a neighbour may stamp it
 * meanwhile; such stamps are later than any choice being made, and ignored by it. Two first
 * faults in bordering VMAs at the same moment may both get a new anon_vma (a stamp taken
 * before a slow store), which Linux's mmap_lock would have ordered: concurrency only, and only
 * a difference in what merges.
 */

/* A new anon_vma for @vma, with @flags (PM_ANON_VMA_FORKED from fork). Caller holds its
 * write lock, or @vma is not in the tree yet. */
void pm__vma_anon_new(struct pm_vma *vma, unsigned long flags)
{
	atomic_store_relaxed(&vma->xanon_vma, pm__machine_id(vma->mm->m) * PM_ANON_VMA_ID | flags);
}

/*
 * The VMA is about to hold an anonymous page: stamp it (see "anon_vma identity"), unless a
 * racing fault did. Lockless among the faults (each holds the mmap_lock for read or the
 * VMA's read lock): the word goes from 0 to one stamp by this compare-and-swap, or the
 * reader's own slot is stamped; either way the VMA has an anon_vma, for every reader that
 * asks, before any anonymous page of the fault is mapped. stress_fault's threads race first
 * faults on fresh VMAs.
 */
void pm__vma_anon_prepare(struct pm_vma *vma)
{
	unsigned long old = 0;

	if (pm__vma_anon_mark_pcpu(vma))
		return;
	atomic_cas_strong_mb(&vma->xanon_vma, &old,
			     pm__vma_anon_clock() << 2 | PM_ANON_VMA_PENDING);
}

/* When @vma's first fault came, @word being its word: 0 if none came (or it is decided). */
static unsigned long anon_stamp(struct pm_vma *vma, unsigned long word)
{
	unsigned long t = word & PM_ANON_VMA_PENDING ? word >> 2 : 0, m;

	if (word && !t)
		return 0;
	m = pm__vma_anon_marked(vma, false);
	return !t || (m && m < t) ? m : t;
}

/* find_mergeable_anon_vma's anon_vma_compatible(): could @a and @b, @a first, share one? */
static bool anon_neighbours(struct pm_vma *a, struct pm_vma *b)
{
	return a->end == b->start && a->file == b->file &&
	       !((a->flags ^ b->flags) & ~(VM_READ | VM_WRITE | VM_EXEC)) &&
	       b->pgoff == a->pgoff + ((b->start - a->start) >> PAGE_SHIFT);
}

/* Is @vma's first fault's choice still to be made? Its stamp in *@stamp if so. */
static bool anon_pending(struct pm_vma *vma, unsigned long *stamp)
{
	unsigned long word = atomic_load_relaxed(&vma->xanon_vma);

	if (word && !(word & PM_ANON_VMA_PENDING))
		return false;
	*stamp = anon_stamp(vma, word);
	return *stamp != 0;
}

/* reusable_anon_vma(): had @nb an anon_vma of its own (not from fork) before @stamp? */
static bool anon_had(struct pm_vma *nb, unsigned long stamp)
{
	unsigned long word = atomic_load_relaxed(&nb->xanon_vma), t;

	if (word && !(word & PM_ANON_VMA_PENDING))
		return !(word & PM_ANON_VMA_FORKED);
	t = anon_stamp(nb, word);
	return t && t < stamp;
}

/* find_mergeable_anon_vma() for a first fault of @vma at @stamp: the neighbour whose anon_vma
 * it takes, or NULL for a new one. */
static struct pm_vma *anon_source(struct pm_vma *vma, unsigned long stamp)
{
	struct pm_vma *nb = pm__vma_next(vma->mm, vma);

	if (nb && anon_neighbours(vma, nb) && anon_had(nb, stamp))
		return nb;
	nb = pm__vma_prev(vma->mm, vma);
	if (nb && anon_neighbours(nb, vma) && anon_had(nb, stamp))
		return nb;
	return NULL;
}

/* Make @vma's choice, its source's being made already. Return: its id, 0 if none. */
static unsigned long anon_decide(struct pm_vma *vma)
{
	unsigned long word = atomic_load_relaxed(&vma->xanon_vma);

	for (;;) {
		unsigned long stamp, id = 0;
		struct pm_vma *src;

		if (word && !(word & PM_ANON_VMA_PENDING))
			return word;
		stamp = anon_stamp(vma, word);
		if (!stamp)
			return 0;
		src = anon_source(vma, stamp);
		if (src)
			id = atomic_load_relaxed(&src->xanon_vma);
		if (!id || (id & PM_ANON_VMA_PENDING)) /* the latter: never, see the caller */
			id = pm__machine_id(vma->mm->m) * PM_ANON_VMA_ID;
		if (atomic_cas_strong_mb(&vma->xanon_vma, &word, id))
			return id;
	}
}

/*
 * The VMA bordering @v on its side @up (after it if true) if that one's first fault came
 * before @stamp and its choice is still to be made; its stamp in *@s.
 */
static struct pm_vma *anon_earlier(struct pm_vma *v, unsigned long stamp, bool up,
				   unsigned long *s)
{
	struct pm_vma *nb = up ? pm__vma_next(v->mm, v) : pm__vma_prev(v->mm, v);

	if (nb && (up ? nb->start == v->end : nb->end == v->start) && anon_pending(nb, s) &&
	    *s < stamp)
		return nb;
	return NULL;
}

/*
 * pm__vma_anon_vma() - @vma's anon_vma id, 0 if none; a pending first fault's choice is made
 * here (see "anon_vma identity"), and kept by a compare-and-swap: concurrent readers of one
 * pending VMA choose alike, from the same frozen neighbours.
 *
 * A choice reads a neighbour's id as "had one at my fault", so a pending VMA is decided only
 * after each bordering VMA whose first fault came earlier and is still pending: deciding a
 * VMA changes what the later choices of its neighbours read, and an earlier one would read a
 * neighbour that got its anon_vma after it as one that had it. On each side, those earlier neighbours form a
 * run of stamps that fall away from @vma - each one's other border is @vma's side - so the run
 * is followed to its end and decided back from there, without recursion however long it is.
 * Every reader that decides by it (fork, split, merge, mremap) holds the VMA's write lock,
 * which waits for the faults that stamped it, or holds the mmap_lock for write and asks about
 * a neighbour before it write-locks it, a check that is racy in the same way as Linux's own
 * (the write lock then comes before anything is changed).
 */
unsigned long pm__vma_anon_vma(struct pm_vma *vma)
{
	unsigned long stamp, s;

	if (!anon_pending(vma, &stamp))
		return anon_decide(vma);
	for (int up = 0; up < 2; up++) {
		struct pm_vma *cur = vma, *nb;
		unsigned long t = stamp;

		while ((nb = anon_earlier(cur, t, up, &s))) {
			cur = nb;
			t = s;
		}
		while (cur != vma) {
			anon_decide(cur);
			cur = up ? pm__vma_prev(cur->mm, cur) : pm__vma_next(cur->mm, cur);
			if (!cur || (up ? cur->end <= vma->start : cur->start >= vma->end))
				break; /* never: the run is frozen (see above) */
		}
	}
	return anon_decide(vma);
}

/* @vma loses its anon_vma (mremap DONTUNMAP of all of it). Caller holds its write lock. */
void pm__vma_anon_clear(struct pm_vma *vma)
{
	mmap_assert_write_locked(vma->mm); /* under which it was write-locked */
	pm__vma_anon_marked(vma, true);
	atomic_store_relaxed(&vma->xanon_vma, 0);
}

/* Has @vma an anon_vma, or a first fault that will choose one? */
static bool anon_any(struct pm_vma *vma)
{
	return atomic_load_relaxed(&vma->xanon_vma) || pm__vma_anon_marked(vma, false);
}

/* Decide the anon_vma choices of the VMAs that border [@start, @end). */
static void anon_settle_borders(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_vma *nb = find_vma_prev(mm, start);

	if (nb && nb->end == start)
		pm__vma_anon_vma(nb);
	nb = pm__find_vma(mm, end);
	if (nb && nb->start == end)
		pm__vma_anon_vma(nb);
}

/*
 * Make the choices that could read @vma (see "anon_vma identity"). A VMA without an anon_vma
 * is read by none: a choice reads a neighbour only for the anon_vma it had, and one it gets
 * later is stamped later than every choice pending now. So mmap and munmap of memory never
 * faulted look nothing up here. Context: mmap_lock (W).
 */
static void anon_settle(struct pm_mm *mm, struct pm_vma *vma, bool force)
{
	mmap_assert_write_locked(mm);
	if (!force && !anon_any(vma))
		return;
	pm__vma_anon_vma(vma);
	anon_settle_borders(mm, vma->start, vma->end);
}

/* ... and those of the VMAs that will border @vma when it comes to (or grows to) [@start,
 * @end), for the same reason only if it has an anon_vma. */
static void anon_settle_gap(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			    unsigned long end)
{
	if (anon_any(vma))
		anon_settle_borders(mm, start, end);
}

/*
 * pm__vma_start_change() - write-lock @vma before changing it (pm__vma_start_write), its own
 * and its neighbours' anon_vma choices made first. Context: mmap_lock (W).
 */
void pm__vma_start_change(struct pm_mm *mm, struct pm_vma *vma)
{
	mmap_assert_write_locked(mm);
	anon_settle(mm, vma, false);
	pm__vma_start_write(vma);
}

/*
 * pm__vma_start_change() of two bordering VMAs whose boundary moves or goes: one may take the
 * other's anon_vma, or its place beside a third VMA, so if either has one, the choices that
 * could read either are made. Context: mmap_lock (W).
 */
static void vma_start_change_pair(struct pm_mm *mm, struct pm_vma *a, struct pm_vma *b)
{
	bool any = anon_any(a) || anon_any(b);

	mmap_assert_write_locked(mm);
	anon_settle(mm, a, any);
	anon_settle(mm, b, any);
	pm__vma_start_write(a);
	pm__vma_start_write(b);
}

/* @vma, which has no anon_vma, is to take one: the choices that could read it are made
 * first, then it is write-locked. Context: mmap_lock (W). */
void pm__vma_start_take_anon(struct pm_mm *mm, struct pm_vma *vma)
{
	mmap_assert_write_locked(mm);
	anon_settle(mm, vma, true);
	pm__vma_start_write(vma);
}

/* The same anon_vma? PM_ANON_VMA_FORKED says how a VMA got it, not which one it is. */
static bool anon_same(unsigned long a, unsigned long b)
{
	return !((a ^ b) & ~PM_ANON_VMA_FORKED);
}

/*
 * Linux's is_mergeable_anon_vma(): a VMA that got its anon_vma from fork (chain not singular)
 * merges only with one of the same anon_vma; otherwise one without an anon_vma merges with
 * one that has it, and two with anon_vmas only if it is the same one.
 */
static bool anon_vma_compatible(unsigned long a, unsigned long b)
{
	if (!a || !b)
		return !((a | b) & PM_ANON_VMA_FORKED);
	return anon_same(a, b);
}

static bool can_merge(struct pm_vma *a, struct pm_vma *b)
{
	/* Hugetlb VMAs never merge (Linux: vm_ops->close). */
	return a->end == b->start && a->flags == b->flags && a->file == b->file &&
	       !(a->flags & VM_HUGETLB) &&
	       /* anonymous memory too: its pgoff is where it was first mapped (vma.c's
		* can_vma_merge_before/after compare vm_pgoff for every VMA) */
	       a->pgoff + ((a->end - a->start) >> PAGE_SHIFT) == b->pgoff &&
	       anon_vma_compatible(pm__vma_anon_vma(a), pm__vma_anon_vma(b));
}

/* Absorb @gone into its neighbour @keep. Return false (nothing changed) without memory. */
static bool merge_into(struct pm_mm *mm, struct pm_vma *keep, struct pm_vma *gone)
{
	unsigned long start = min(keep->start, gone->start), end = max(keep->end, gone->end);
	unsigned long pgoff = keep->start < gone->start ? keep->pgoff : gone->pgoff;

	vma_start_change_pair(mm, keep, gone);
	if (vmas_store(mm, start, end, keep))
		return false;
	atomic_store_relaxed(&gone->xdetached, true);
	/* One VMA fewer - unless one of the two came in uncharged at the limit. */
	if (keep->uncounted || gone->uncounted)
		keep->uncounted = false;
	else
		vma_count_uncharge(mm, 1);
	if (keep->file) {
		pm__shmem_map_lock(keep->file);
		pm_list_del(&gone->shared);
	}
	keep->start = start;
	keep->end = end;
	keep->pgoff = pgoff;
	if (!pm__vma_anon_vma(keep)) /* the merged VMA keeps an anon_vma */
		atomic_store_relaxed(&keep->xanon_vma, pm__vma_anon_vma(gone));
	if (keep->file)
		pm__shmem_map_unlock(keep->file);
	pm__vma_retire(mm, gone);
	return true;
}

/*
 * Move the boundary between the neighbours @lo and @hi to @addr, inside one of them: the pages
 * between change VMA, and no VMA comes or goes (what Linux's vma_merge_existing_range() does
 * when a change covers one end of a VMA and the neighbour there takes it). Both are
 * write-locked first; start, end and pgoff change under the object's i_mmap lock too.
 * Return false (nothing changed) without memory.
 */
static bool vma_shift(struct pm_mm *mm, struct pm_vma *lo, struct pm_vma *hi, unsigned long addr)
{
	unsigned long b = lo->end;
	int err;

	pm_assert(b == hi->start && lo->start < addr && addr < hi->end && addr != b);
	vma_start_change_pair(mm, lo, hi);
	/* One entry per VMA: the one that grows is stored whole (the tree does not join). */
	err = addr > b ? vmas_store(mm, lo->start, addr, lo) : vmas_store(mm, addr, hi->end, hi);
	if (err)
		return false;
	/* A PMD leaf never straddles two VMAs (from its deposit; this cannot fail). */
	pm__split_huge_pmd_at(mm, addr);
	if (lo->file)
		pm__shmem_map_lock(lo->file);
	lo->end = addr;
	hi->start = addr;
	if (addr > b)
		hi->pgoff += (addr - b) >> PAGE_SHIFT;
	else
		hi->pgoff -= (b - addr) >> PAGE_SHIFT;
	/* The VMA that grows takes the other's anon_vma if it has none (dup_anon_vma). */
	{
		struct pm_vma *grows = addr > b ? lo : hi, *shrinks = addr > b ? hi : lo;

		if (!pm__vma_anon_vma(grows))
			atomic_store_relaxed(&grows->xanon_vma, pm__vma_anon_vma(shrinks));
	}
	if (lo->file)
		pm__shmem_map_unlock(lo->file);
	return true;
}

/* Could [@s, @e) of @vma, given @flags, merge with @nb, the VMA before or after it? */
static bool piece_can_merge(struct pm_vma *vma, unsigned long s, unsigned long e,
			    unsigned long flags, struct pm_vma *nb)
{
	struct pm_vma piece = { .mm = vma->mm, .start = s, .end = e, .flags = flags,
				.file = vma->file, .pgoff = vma_pgoff(vma, s),
				.xanon_vma = pm__vma_anon_vma(vma) };

	return nb->start < s ? can_merge(nb, &piece) : can_merge(&piece, nb);
}

/*
 * pm__vma_modify() - give [@start, @end), which lies inside @vma, the flags @flags (they
 * differ from @vma's), as Linux's vma_modify(): merge first, split only if no merge can take
 * it. A head whose new flags match the VMA before, or a tail whose new flags match the VMA
 * after, moves to that neighbour (vma_shift): no VMA more, so this is never refused at
 * max_map_count. Otherwise @vma is split at the edges (each split charged), takes @flags and
 * merges with whatever now matches. Context: mmap_lock (W). Return: 0, or an error of
 * pm__split_vma() (a first split stays, which changes nothing observable).
 */
int pm__vma_modify(struct pm_mm *mm, struct pm_vma *vma, unsigned long start, unsigned long end,
		   unsigned long flags)
{
	struct pm_vma *nb;
	int err;

	mmap_assert_write_locked(mm);
	pm_assert(vma->start <= start && start < end && end <= vma->end && flags != vma->flags);
	if (start == vma->start && end < vma->end) {
		nb = pm__vma_prev(mm, vma);
		if (nb && piece_can_merge(vma, start, end, flags, nb) && vma_shift(mm, nb, vma, end))
			return 0;
	} else if (start > vma->start && end == vma->end) {
		nb = pm__vma_next(mm, vma);
		if (nb && piece_can_merge(vma, start, end, flags, nb) && vma_shift(mm, vma, nb, start))
			return 0;
	}
	if (vma->start < start) {
		err = pm__split_vma(mm, vma, start, PM_SPLIT_CHARGE);
		if (err)
			return err;
		vma = pm__vma_next(mm, vma);
	}
	if (vma->end > end) {
		err = pm__split_vma(mm, vma, end, PM_SPLIT_CHARGE);
		if (err)
			return err;
	}
	pm__vma_start_change(mm, vma);
	vma->flags = flags;
	pm__vma_try_merge(mm, vma);
	return 0;
}

/*
 * pm__expand_downwards() - grow @vma, a VM_GROWSDOWN VMA, down to @addr (page aligned, below
 * it), as Linux's expand_downwards: -EPERM below PM_USER_MIN; -ENOMEM when the VMA below is
 * closer than STACK_GUARD_GAP (unless it grows down too or is PROT_NONE), when @vma would pass
 * STACK_RLIMIT, or without memory for the tree. The VMA is write-locked first, so no fault
 * under its lock sees it change, and stored whole over its new span, as vma_shift stores the
 * VMA that grows; it merges with nothing. A VMA that grows gets an anon_vma first, whatever
 * the fault then maps (expand_downwards' anon_vma_prepare): so fork copies its PTEs, the zero
 * page's of a read too (vma_needs_copy). Context: mmap_lock (W): in the range design the
 * ranges of [@addr - STACK_GUARD_GAP, @vma->end), so the VMA below is found if it is close.
 */
int pm__expand_downwards(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr)
{
	struct pm_vma *prev;
	int err;

	mmap_assert_write_locked(mm);
	pm_assert((vma->flags & VM_GROWSDOWN) && !vma->file && addr < vma->start &&
		  !(addr & ~PAGE_MASK));
	if (addr < PM_USER_MIN)
		return -EPERM;
	prev = find_vma_prev(mm, vma->start);
	if (prev && !(prev->flags & VM_GROWSDOWN) && vma_is_accessible(prev) &&
	    addr - prev->end < STACK_GUARD_GAP)
		return -ENOMEM;
	if (vma->end - addr > STACK_RLIMIT)
		return -ENOMEM;
	/* anon_vma_prepare comes first, among the neighbours it has before it grows */
	pm__vma_start_change(mm, vma);
	if (!pm__vma_anon_vma(vma)) {
		pm__vma_anon_prepare(vma);
		pm__vma_anon_vma(vma);
	}
	anon_settle_gap(mm, vma, addr, vma->start);
	err = vmas_store(mm, addr, vma->end, vma);
	if (err)
		return err;
	vma->pgoff -= (vma->start - addr) >> PAGE_SHIFT;
	vma->start = addr;
	return 0;
}

/*
 * pm__vma_copy_anon() - the anon_vma that @src, a VMA without one, takes when mremap moves a
 * range of it to [@start, @end), free, as a new VMA with pgoff @pgoff: Linux's copy_vma()
 * merges that new VMA before the move splits @src (unmap_source_vma comes after), so when
 * the new range borders @src it may join @src whole and the VMA on its other side - and if
 * that one has an anon_vma, the merged VMA takes it, and so do @src's remnants once the moved
 * range is unmapped from it (fork then copies their PTEs: vma_needs_copy). Return: that
 * anon_vma, or 0 (no merge with @src, or nothing to take). Context: mmap_lock (W).
 */
unsigned long pm__vma_copy_anon(struct pm_mm *mm, struct pm_vma *src, unsigned long start,
				unsigned long end, unsigned long pgoff)
{
	struct pm_vma piece = { .mm = mm, .start = start, .end = end, .flags = src->flags,
				.file = src->file, .pgoff = pgoff };
	struct pm_vma *prev = find_vma_prev(mm, start), *next = pm__find_vma(mm, end);

	mmap_assert_write_locked(mm);
	if (pm__vma_anon_vma(src) || !prev || !next || prev->end != start || next->start != end)
		return 0;
	if (prev == src && can_merge(src, &piece) && can_merge(&piece, next))
		return pm__vma_anon_vma(next);
	if (next == src && can_merge(&piece, src) && can_merge(prev, &piece))
		return pm__vma_anon_vma(prev);
	return 0;
}

/*
 * pm__vma_try_merge() - merge @vma with its neighbours where they are compatible (without
 * memory it stays as it is, which changes nothing observable). Where both could take it but
 * their anon_vmas differ, the one before does (Linux's can_vma_merge_right() refuses the
 * right side then). Return: the VMA that now covers @vma's range. Context: mmap_lock (W).
 */
struct pm_vma *pm__vma_try_merge(struct pm_mm *mm, struct pm_vma *vma)
{
	struct pm_vma *next, *prev;
	bool left, right;

	mmap_assert_write_locked(mm);
	next = pm__vma_next(mm, vma);
	prev = pm__vma_prev(mm, vma);
	left = prev && can_merge(prev, vma);
	right = next && can_merge(vma, next);
	if (left && right) {
		unsigned long a = pm__vma_anon_vma(prev), b = pm__vma_anon_vma(next);

		right = !a || !b || anon_same(a, b);
	}
	if (right)
		merge_into(mm, vma, next);
	if (left && merge_into(mm, prev, vma))
		return prev;
	return vma;
}
