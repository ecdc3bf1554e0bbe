/* SPDX-License-Identifier: MIT */
/*
 * vma_tree.h - the VMA set of an address space: a copy-on-write B+tree of address ranges whose
 * lookups run under RCU with no lock and no shared write (see vma_tree.c for the argument).
 *
 * An entry is a range [start, end) and the VMA that covers it; entries never overlap. The tree
 * keeps its own copy of every range, so a lockless reader never reads a VMA's bounds before it
 * has locked the VMA. Writers hold the owner's writer lock (mmap_lock for write); each change is
 * O(log n) and publishes new nodes with release stores; unlinked nodes wait on the tree's
 * retire list until pm__vt_retire_flush() hands them to RCU, which frees them after a grace
 * period.
 */
#ifndef PM_MM_VMA_TREE_H
#define PM_MM_VMA_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/compiler.h"
#include "lib/rcu.h"

struct pm_machine;
struct pm_vma;
struct pm_vt_node;

struct pm_vma_tree {
	struct pm_vt_node *_Atomic xroot; /* RCU-published; NULL when empty */
	unsigned height;		  /* levels above the leaves; writer */
	unsigned long count;		  /* entries; writer */
	struct pm_machine *m;		  /* for allocation-failure injection */
	struct pm_vt_node *spare;	  /* preallocated nodes; writer */
	unsigned nr_spare;
	struct pm_vt_node *retired;	  /* unlinked, not yet handed to RCU; writer */
	unsigned nr_retired;
	bool spanned;			  /* the root's summary, kept by pm__vt_store for */
	unsigned long first, last;	  /* pm__vt_span(): the entries' span; writer */
};

__hidden void pm__vt_init(struct pm_vma_tree *t, struct pm_machine *m);
/* Free every node at once. Context: no reader can reach the tree any more. */
__hidden void pm__vt_destroy(struct pm_vma_tree *t);

/*
 * pm__vt_store() - make [@start, @end) map to @vma (NULL erases), trimming or removing the
 * entries it overlaps. Context: writer. Return: 0, or -ENOMEM with the tree unchanged.
 */
__hidden int pm__vt_store(struct pm_vma_tree *t, unsigned long start, unsigned long end,
			  struct pm_vma *vma);
/* Fill the node pool so that the next pm__vt_store() cannot fail. Context: writer.
 * Return: 0 or -ENOMEM. */
__hidden int pm__vt_prepare(struct pm_vma_tree *t);
/* Hand the nodes unlinked since the last flush to a grace period. Called by the writer. */
__hidden void pm__vt_retire_flush(struct pm_vma_tree *t);
/* Free them now: for an owner that is going away, whom no reader can reach any more. */
__hidden void pm__vt_retire_free_now(struct pm_vma_tree *t);

/*
 * pm__vt_lookup() - the VMA whose range contains @addr, or NULL. Context: writer or reader
 * (any lock that excludes writers), or pm_rcu_read_lock(): then the answer may be stale - an
 * entry removed or replaced a moment ago - and the caller must validate it (lock_vma_under_rcu).
 */
__hidden struct pm_vma *pm__vt_lookup(struct pm_vma_tree *t, unsigned long addr);

/* The first entry that ends above @addr, or NULL; its range in @start and @end if non-NULL.
 * For the writer, or a reader that writers exclude. */
__hidden struct pm_vma *pm__vt_find(struct pm_vma_tree *t, unsigned long addr,
				    unsigned long *start, unsigned long *end);
/* The last entry that starts below @addr, or NULL. Context: as pm__vt_find(). */
__hidden struct pm_vma *pm__vt_prev(struct pm_vma_tree *t, unsigned long addr,
				    unsigned long *start, unsigned long *end);

/*
 * pm__vt_gap_topdown() - the highest @align-aligned address a with [a, a + @len) free and
 * inside [@lo, @hi), or -ENOMEM; pm__vt_gap_bottomup() - the lowest. Free means: no entry
 * intersects it. Context: as pm__vt_find(). O(log n) but for gaps that are long enough and
 * fail only on alignment.
 */
__hidden long pm__vt_gap_topdown(struct pm_vma_tree *t, unsigned long lo, unsigned long hi,
				 unsigned long len, unsigned long align);
__hidden long pm__vt_gap_bottomup(struct pm_vma_tree *t, unsigned long lo, unsigned long hi,
				  unsigned long len, unsigned long align);

/* The start of the first entry and the end of the last, from the root's summary: O(1).
 * Context: as pm__vt_find(). Return: false when the tree is empty. */
/*
 * pm__vt_span() - where @t's entries begin and end: false when it has none. A copy of the
 * root's summary that the writer keeps beside the root, so that a range-design writer checks
 * the edges of its run (range.c) without loading the root. Context: @t's writer.
 */
static inline bool pm__vt_span(const struct pm_vma_tree *t, unsigned long *first,
			       unsigned long *last)
{
	*first = t->first;
	*last = t->last;
	return t->spanned;
}

static inline unsigned long pm__vt_count(const struct pm_vma_tree *t)
{
	return t->count;
}

/* Check every structural invariant; print the first violation. Return: 0 or -EUCLEAN.
 * Context: as pm__vt_find(). */
__hidden int pm__vt_check(struct pm_vma_tree *t);

#endif /* PM_MM_VMA_TREE_H */
