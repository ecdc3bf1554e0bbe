// SPDX-License-Identifier: MIT
/*
 * cache.c - a shmem object's page cache: a radix tree from page index to folio, with lockless
 * lookups.
 *
 * A radix tree of 64-way nodes maps a page index to a folio. Readers take no lock: under RCU
 * they walk from the root with acquire loads, take a reference only if the folio's count is
 * not zero (pm__folio_try_get), and re-load the slot; if it changed they drop the reference
 * and retry (Nick Piggin's lockless page cache, 2008). Nodes that empty out are unlinked and
 * freed through RCU, so a reader's stale node pointer is always valid memory. A folio in the
 * cache holds one reference for the cache and carries PG_shmem; removal empties the slot under
 * tree_lock and the leaf's lock, clears PG_shmem and drops that reference.
 *
 * Writers lock as little as they can. Each leaf (64 pages) has its own lock, which guards its
 * slots, its count and its dead flag; tree_lock guards the shape - creating nodes, growing the
 * root, unlinking empty nodes - and is taken inside-out: tree_lock, then a leaf lock. An insert
 * into a leaf that exists takes only that leaf's lock, found under RCU: threads filling
 * different parts of one object share nothing (Linux's xarray takes one lock per mapping for
 * every insert; PM_KNOB_SHMEM_TREE_LOCK restores that: every insert takes tree_lock, then the
 * leaf's lock). Only an insert that needs a new leaf takes tree_lock. A leaf that empties is
 * marked dead under its lock before tree_lock unlinks it, so an insert that found it a moment
 * earlier sees the mark once it has the lock, and goes the tree_lock way instead. The number of
 * pages is the sum of the leaves' counts (pm__shmem_nr_pages), so no insert writes an
 * object-wide counter either.
 *
 * Interior nodes made ahead. An object made by pm_shmem_create() gets, when its size is set -
 * at creation and when a truncate grows it (pm__shmem_cache_grow) - a root that covers the
 * whole size, and the interior nodes down to the leaves' parents for its first
 * SHMEM_AHEAD_PAGES pages (1 GiB: 65 nodes, about 40 KiB; beyond, they are made on first use),
 * marked kept: never unlinked for being empty, they stay until the object goes, and keep no
 * count of their children. A first insert into a leaf under a kept parent makes
 * the leaf and links it by compare-and-swap from the empty slot, without tree_lock (and
 * tree_leaf_create links its leaves there by the same CAS), so that the first inserts of two
 * leaves write two slots and share nothing: Linux's xarray takes the mapping's lock for both,
 * as PM_KNOB_SHMEM_TREE_LOCK does (no nodes ahead then). The loser of the CAS gives its leaf
 * back unpublished and uses the winner's. Unlinking is unchanged: a leaf that empties is
 * marked dead and its slot cleared under tree_lock and its lock, and an insert that finds it
 * dead takes tree_lock, where it finds the slot empty or a live leaf. The object behind a
 * MAP_SHARED|MAP_ANONYMOUS mapping, made and freed by each mmap and munmap, gets none: mmap
 * stays as cheap as Linux's. Since a leaf may be linked without tree_lock, every walk reads
 * a child pointer with acquire, under tree_lock too, pairing with the linking CAS.
 *
 * Nodes come from the machine's cache of free nodes (m->shmem_nodes, mem/objcache.c), as
 * Linux's come from a slab cache, and go back to it: malloc only when it is empty, free only
 * past its bounds. So an object's teardown does not hand its nodes back to malloc for the
 * next object to take again, with malloc trimming and growing its heaps in between (madvise,
 * page faults, the TLB-shootdown IPIs of both, mostly under tree_lock; docs/perf-log.md,
 * 2026-12-03, "shmem tree nodes").
 *
 * Locks: tree_lock is taken inside a PTL and inside info_lock (knob LOCK_TWICE); a leaf lock
 * inside tree_lock or alone; limit.lock innermost (an insert charges the exact limit under the
 * leaf lock, limit.c). tree_lock is held while tree nodes are allocated; unlinked nodes go to
 * RCU only after it is dropped. The node cache's locks are taken inside tree_lock or alone.
 *
 * This file, limit.c and object.c sit below the address-space layer (a file sits below the
 * VMA that maps it): they use folios and RCU only. The fault path that uses the cache is in
 * fault/shmem.c, truncation in mm/truncate.c.
 */
#include "shmem/shmem.h"

#define SHMEM_TREE_SHIFT 6
#define SHMEM_TREE_SLOTS (1U << SHMEM_TREE_SHIFT)
#define SHMEM_TREE_MASK (SHMEM_TREE_SLOTS - 1)
#define SHMEM_AHEAD_PAGES (1UL << 18) /* interior nodes made ahead for this many pages */

/* Tree readers: tree_lock held by this thread, or an RCU read section. */
#define tree_assert_held(f) pm_assert(pm_spin_held(&(f)->tree_lock) || pm_rcu_read_ongoing())

struct pm_shmem_node {
	struct pm_machine *m;		/* whose node cache it goes back to */
	unsigned shift;			/* index bits below this node; 0 for a leaf */
	unsigned count;			/* non-empty slots; a leaf's under its lock, others' under
					 * tree_lock; none kept for a kept node */
	_Atomic bool xkept;		/* an interior node made ahead: never unlinked; set under
					 * tree_lock, never cleared */
	struct pm_shmem_node *parent;	/* under tree_lock */
	unsigned offset;		/* slot in the parent */
	struct pm_spinlock lock;	/* a leaf's slots, count and dead flag */
	bool dead;			/* a leaf unlinked (or about to be); under lock */
	void *_Atomic slots[SHMEM_TREE_SLOTS]; /* child nodes, or folios in a leaf */
	struct pm_rcu_head rcu;
};

/* Indices a node of @shift covers: 64^(levels) - saturating at 2^64. */
static bool node_covers(const struct pm_shmem_node *n, unsigned long index)
{
	unsigned bits = n->shift + SHMEM_TREE_SHIFT;

	return bits >= 64 || (index >> bits) == 0;
}

/* Load the folio at @index. Context: RCU read side or tree_lock. */
static struct pm_folio *tree_load(struct pm_shmem *f, unsigned long index,
				  void *_Atomic **slotp)
{
	struct pm_shmem_node *n = atomic_load_acquire(&f->xroot);

	tree_assert_held(f);

	if (!n || !node_covers(n, index))
		return NULL;
	for (;;) {
		void *_Atomic *slot = &n->slots[(index >> n->shift) & SHMEM_TREE_MASK];
		void *p = atomic_load_acquire(slot);

		if (n->shift == 0) {
			if (slotp)
				*slotp = slot;
			return p;
		}
		if (!p)
			return NULL;
		n = p;
	}
}

/*
 * A zeroed node: from the node cache, or malloc. Failure-injectable, as every allocation of
 * the machine is.
 */
static struct pm_shmem_node *node_alloc(struct pm_shmem *f, unsigned shift)
{
	struct pm_shmem_node *n;

	if (pm__should_fail(f->m))
		return NULL;
	n = pm__obj_cache_get(f->m, f->m->shmem_nodes);
	if (n)
		memset(n, 0, sizeof(*n));
	else
		n = calloc(1, sizeof(*n));
	if (n) {
		n->m = f->m;
		n->shift = shift;
		pm_spin_init(&n->lock);
		pm__trace_object(n, sizeof(*n), "pm_shmem_node");
	}
	return n;
}

/*
 * Link @child, made for slot @off of @n, unless the slot is taken: by a plain store and the
 * count, or by a CAS from empty where lockless inserts link leaves too (a kept @n). Return:
 * what the slot holds afterwards (@child, or the node that won: @child is then given back).
 * Context: tree_lock.
 */
static struct pm_shmem_node *node_link(struct pm_shmem *f, struct pm_shmem_node *n, unsigned off,
				       struct pm_shmem_node *child)
{
	void *old = NULL;

	pm_assert_locked(&f->tree_lock);
	child->parent = n;
	child->offset = off;
	if (!atomic_load_relaxed(&n->xkept)) {
		atomic_store_release(&n->slots[off], child);
		n->count++;
		return child;
	}
	if (atomic_cas_strong_mb(&n->slots[off], &old, child))
		return child;
	pm__obj_cache_put(f->m, f->m->shmem_nodes, child); /* never published */
	/* The winner's node, read with acquire as its publication pairs (the failed CAS read
	 * it relaxed); only tree_lock, held, empties the slot. */
	return atomic_load_acquire(&n->slots[off]);
}

/*
 * The root, made (of shift @shift) if there is none and grown until it covers @index; with
 * @keep, the nodes made are kept. Context: tree_lock. Return: the root, or NULL when a node
 * could not be allocated.
 */
static struct pm_shmem_node *tree_grow(struct pm_shmem *f, unsigned long index, unsigned shift,
				       bool keep)
{
	struct pm_shmem_node *n = atomic_load_relaxed(&f->xroot);

	pm_assert_locked(&f->tree_lock);

	if (!n) {
		n = node_alloc(f, shift);
		if (!n)
			return NULL;
		atomic_store_relaxed(&n->xkept, keep && n->shift);
		atomic_store_release(&f->xroot, n);
	}
	while (!node_covers(n, index)) {
		struct pm_shmem_node *top = node_alloc(f, n->shift + SHMEM_TREE_SHIFT);

		if (!top)
			return NULL;
		atomic_store_relaxed(&top->slots[0], n);
		top->count = 1;
		atomic_store_relaxed(&top->xkept, keep);
		n->parent = top;
		n->offset = 0;
		atomic_store_release(&f->xroot, top);
		n = top;
	}
	return n;
}

/*
 * The node of shift @stop on @index's path, growing the tree and creating nodes on the way;
 * with @keep, every interior node on the way is (made) kept. Context: tree_lock.
 * Return: the node, or NULL when a node could not be allocated.
 */
static struct pm_shmem_node *tree_node_create(struct pm_shmem *f, unsigned long index,
					      unsigned stop, bool keep)
{
	struct pm_shmem_node *n;

	pm_assert_locked(&f->tree_lock);
	n = tree_grow(f, index, stop, keep);
	if (!n)
		return NULL;
	while (n->shift > stop) {
		unsigned off = (index >> n->shift) & SHMEM_TREE_MASK;
		struct pm_shmem_node *child = atomic_load_acquire(&n->slots[off]);

		if (keep)
			atomic_store_relaxed(&n->xkept, true);
		if (!child) {
			child = node_alloc(f, n->shift - SHMEM_TREE_SHIFT);
			if (!child)
				return NULL;
			child = node_link(f, n, off, child);
		}
		n = child;
	}
	if (keep && n->shift)
		atomic_store_relaxed(&n->xkept, true);
	return n;
}

/* The leaf node that holds @index's slot (tree_node_create). Context: tree_lock. */
static struct pm_shmem_node *tree_leaf_create(struct pm_shmem *f, unsigned long index)
{
	pm_assert_locked(&f->tree_lock);
	return tree_node_create(f, index, 0, false);
}

/**
 * pm__shmem_cache_grow() - @f, made by pm_shmem_create(), now has @pages pages: make its root
 * cover them all, and its interior nodes ahead for the first SHMEM_AHEAD_PAGES of them (see
 * the top of this file).
 * Best effort: a node that cannot be had is left to the first insert under it. Nothing under
 * PM_KNOB_SHMEM_TREE_LOCK, nor for a hugetlbfs object (one index per 2 MiB: its leaves'
 * parents cover 8 GiB each). Callers: pm_shmem_create(), before the object is published,
 * and a truncate that grows it, which holds truncate_lock; this takes tree_lock itself.
 */
void pm__shmem_cache_grow(struct pm_shmem *f, unsigned long pages)
{
	unsigned long span = 1UL << (2 * SHMEM_TREE_SHIFT); /* pages under a leaves' parent */

	if (f->hugetlb || knob(f->m, PM_KNOB_SHMEM_TREE_LOCK) || pages <= SHMEM_TREE_SLOTS)
		return;
	pm_spin_lock(&f->tree_lock);
	if (tree_grow(f, pages - 1, SHMEM_TREE_SHIFT, true)) /* no root to grow in the object */
		for (unsigned long index = 0; index < min(pages, SHMEM_AHEAD_PAGES); index += span)
			if (!tree_node_create(f, index, SHMEM_TREE_SHIFT, true))
				break;
	pm_spin_unlock(&f->tree_lock);
}

static void node_free_rcu(struct pm_rcu_head *head)
{
	struct pm_shmem_node *n = container_of(head, struct pm_shmem_node, rcu);

	if (unlikely(n->m->fork_busy))
		return; /* queued by a fork parent, for a copy the child cannot use (mem/mem.c) */
	pm__obj_cache_put(n->m, n->m->shmem_nodes, n);
}

/*
 * Empty the slot of @index in leaf @leaf; unlink nodes that became empty (a leaf marked dead
 * first, so that an insert that found it without tree_lock backs off) and chain them on
 * *@dead (through their parent pointer, which nobody needs once they are unlinked), for
 * free_dead_nodes() to hand to RCU once tree_lock is dropped.
 * Context: tree_lock and the leaf's lock.
 */
static void tree_clear_slot(struct pm_shmem *f, struct pm_shmem_node *leaf,
			    unsigned long index, struct pm_shmem_node **dead)
{
	struct pm_shmem_node *n = leaf;

	pm_assert_locked(&f->tree_lock);
	pm_assert_locked(&leaf->lock);

	atomic_store_release(&n->slots[index & SHMEM_TREE_MASK], NULL);
	n->count--;
	if (!n->count && n->parent)
		n->dead = true;
	while (n->count == 0 && n->parent) {
		struct pm_shmem_node *parent = n->parent;

		atomic_store_release(&parent->slots[n->offset], NULL);
		n->parent = *dead;
		*dead = n;
		if (atomic_load_relaxed(&parent->xkept))
			break; /* kept: no count, never unlinked */
		parent->count--;
		n = parent;
	}
}

/* Free unlinked nodes after a grace period. Context: no spinlock held (pm_call_rcu may block). */
static void free_dead_nodes(struct pm_shmem_node *dead)
{
	while (dead) {
		struct pm_shmem_node *next = dead->parent;

		pm_call_rcu(&dead->rcu, node_free_rcu);
		dead = next;
	}
}

static struct pm_shmem_node *leaf_of(struct pm_shmem *f, unsigned long index)
{
	struct pm_shmem_node *n = atomic_load_relaxed(&f->xroot);

	if (!n || !node_covers(n, index))
		return NULL;
	while (n && n->shift)
		n = atomic_load_acquire(&n->slots[(index >> n->shift) & SHMEM_TREE_MASK]);
	return n;
}

/* Remove @folio from index @index if it is still there. Context: tree_lock. */
static bool tree_delete(struct pm_shmem *f, unsigned long index, struct pm_folio *folio,
			struct pm_shmem_node **dead)
{
	struct pm_shmem_node *leaf = leaf_of(f, index);
	bool found;

	pm_assert_locked(&f->tree_lock);

	if (!leaf)
		return false;
	pm_spin_lock(&leaf->lock);
	found = atomic_load_relaxed(&leaf->slots[index & SHMEM_TREE_MASK]) == folio;
	if (found)
		tree_clear_slot(f, leaf, index, dead);
	pm_spin_unlock(&leaf->lock);
	return found;
}

/*
 * Find up to @max folios at indices >= @start, in index order. Context: tree_lock.
 * Return: how many were stored in @out (their indices in @idx).
 */
static unsigned tree_gang(struct pm_shmem *f, struct pm_shmem_node *n, unsigned long base,
			  unsigned long start, unsigned long end, struct pm_folio **out,
			  unsigned long *idx, unsigned max)
{
	unsigned found = 0;

	pm_assert_locked(&f->tree_lock);

	if (!n->shift)
		pm_spin_lock(&n->lock); /* inserts into a leaf take only its lock */
	for (unsigned i = 0; i < SHMEM_TREE_SLOTS && found < max; i++) {
		unsigned long lo = base + ((unsigned long)i << n->shift);
		unsigned long span = n->shift >= 64 ? ~0UL : (1UL << n->shift) - 1;
		void *p = atomic_load_acquire(&n->slots[i]);

		if (lo >= end)
			break;
		if (!p || lo + span < start)
			continue;
		if (n->shift == 0) {
			out[found] = p;
			idx[found++] = lo;
		} else {
			found += tree_gang(f, p, lo, start, end, out + found, idx + found,
					   max - found);
		}
	}
	if (!n->shift)
		pm_spin_unlock(&n->lock);
	return found;
}

/* ---- the interface ---- */

/* The folio at @index, without a reference. Context: tree_lock or RCU (for the checker). */
struct pm_folio *pm__shmem_peek(struct pm_shmem *f, unsigned long index)
{
	tree_assert_held(f);
	return tree_load(f, index, NULL);
}

/* The lockless lookup: a referenced folio at @index, or NULL for a hole. */
struct pm_folio *pm__shmem_lookup(struct pm_shmem *f, unsigned long index)
{
	struct pm_folio *folio;
	void *_Atomic *slot;

	pm_rcu_read_lock();
	for (;;) {
		folio = tree_load(f, index, &slot);
		if (!folio)
			break;
		/* A failure means it is being freed, so the slot is changing too (GUP never takes
		 * a count near INT_MAX: see PM_GUP_REF_LIMIT). */
		if (!pm__folio_try_get(folio, 1, INT_MAX))
			continue;
		if (likely(atomic_load_mb(slot) == folio))
			break;
		folio_put(folio);
	}
	pm_rcu_read_unlock();
	return folio;
}

/* Insert into @leaf, whose lock we hold and which is alive. Return: as pm__shmem_add(). */
static int leaf_insert(struct pm_shmem *f, struct pm_shmem_node *leaf, unsigned long index,
		       struct pm_folio *folio)
{
	void *_Atomic *slot = &leaf->slots[index & SHMEM_TREE_MASK];

	pm_assert_locked(&leaf->lock);
	if (atomic_load_relaxed(slot))
		return -EEXIST;
	if (f->max_pages && !pm__shmem_limit_charge(f))
		return -ENOSPC;
	page_set(&folio->page, PG_shmem);
	atomic_store_release(slot, folio);
	leaf->count++;
	return 0;
}

/* The leaf for @index if it exists now, found under RCU. Context: pm_rcu_read_lock(). */
static struct pm_shmem_node *leaf_of_rcu(struct pm_shmem *f, unsigned long index)
{
	struct pm_shmem_node *n = atomic_load_acquire(&f->xroot);

	rcu_assert_held();
	if (!n || !node_covers(n, index))
		return NULL;
	while (n && n->shift)
		n = atomic_load_acquire(&n->slots[(index >> n->shift) & SHMEM_TREE_MASK]);
	return n;
}

/*
 * Make the leaf for @index under its kept parent and link it by CAS, without tree_lock.
 * Return: 0 with *@leafp the leaf linked there (ours or another's, maybe dead), or NULL where
 * the parent is missing or not kept (take tree_lock); -ENOMEM.
 * Context: pm_rcu_read_lock().
 */
static int leaf_create_lockless(struct pm_shmem *f, unsigned long index,
				struct pm_shmem_node **leafp)
{
	struct pm_shmem_node *n = atomic_load_acquire(&f->xroot), *leaf;
	void *_Atomic *slot;
	void *old;

	rcu_assert_held();
	*leafp = NULL;
	if (!n || !node_covers(n, index))
		return 0;
	while (n && n->shift > SHMEM_TREE_SHIFT)
		n = atomic_load_acquire(&n->slots[(index >> n->shift) & SHMEM_TREE_MASK]);
	if (!n || n->shift != SHMEM_TREE_SHIFT || !atomic_load_relaxed(&n->xkept))
		return 0;
	slot = &n->slots[(index >> SHMEM_TREE_SHIFT) & SHMEM_TREE_MASK];
	old = atomic_load_acquire(slot);
	if (!old) {
		leaf = node_alloc(f, 0);
		if (!leaf)
			return -ENOMEM;
		leaf->parent = n;
		leaf->offset = (index >> SHMEM_TREE_SHIFT) & SHMEM_TREE_MASK;
		if (atomic_cas_strong_mb(slot, &old, leaf)) {
			old = leaf;
		} else {
			pm__obj_cache_put(f->m, f->m->shmem_nodes, leaf); /* never published */
			/* The winner's leaf, read with acquire (the failed CAS read it relaxed); or
			 * NULL if it has gone again meanwhile: tree_lock then. */
			old = atomic_load_acquire(slot);
		}
	}
	*leafp = old;
	return 0;
}

/**
 * pm__shmem_add() - insert @folio (PG_shmem not yet set, the cache's reference already taken)
 * at @index, charging the exact limit once the insert can no longer fail, so that a loser of
 * an insert race never takes quota (Linux 6.7's order). Takes only the leaf's lock when the
 * leaf exists or its parent is kept; tree_lock too when it must be made otherwise, or always
 * with PM_KNOB_SHMEM_TREE_LOCK.
 * Return: 0, -EEXIST (another folio is there), -ENOSPC (over the limit), -ENOMEM.
 */
int pm__shmem_add(struct pm_shmem *f, unsigned long index, struct pm_folio *folio)
{
	struct pm_shmem_node *leaf;
	int ret = -EAGAIN;

	if (knob(f->m, PM_KNOB_SHMEM_TREE_LOCK))
		goto locked;
	pm_rcu_read_lock();
	leaf = leaf_of_rcu(f, index);
	if (!leaf && leaf_create_lockless(f, index, &leaf)) {
		pm_rcu_read_unlock();
		return -ENOMEM;
	}
	if (leaf) {
		pm_spin_lock(&leaf->lock);
		if (!leaf->dead)
			ret = leaf_insert(f, leaf, index, folio);
		pm_spin_unlock(&leaf->lock);
	}
	pm_rcu_read_unlock();
	if (ret != -EAGAIN)
		return ret;

	/* No leaf yet (or it is being unlinked): make one under tree_lock. A leaf found under
	 * tree_lock is never dead: leaves are unlinked under it. */
locked:
	pm_spin_lock(&f->tree_lock);
	leaf = tree_leaf_create(f, index);
	if (!leaf) {
		ret = -ENOMEM;
	} else {
		pm_spin_lock(&leaf->lock);
		ret = leaf_insert(f, leaf, index, folio);
		pm_spin_unlock(&leaf->lock);
	}
	pm_spin_unlock(&f->tree_lock);
	return ret;
}

static unsigned long count_pages(struct pm_shmem_node *n)
{
	unsigned long sum = 0;

	if (!n->shift) {
		pm_spin_lock(&n->lock);
		sum = n->count;
		pm_spin_unlock(&n->lock);
		return sum;
	}
	for (unsigned i = 0; i < SHMEM_TREE_SLOTS; i++) {
		struct pm_shmem_node *c = atomic_load_acquire(&n->slots[i]);

		if (c)
			sum += count_pages(c);
	}
	return sum;
}

/* Pages in the cache: the sum of the leaves' counts (a walk of the nodes, under tree_lock). */
unsigned long pm__shmem_nr_pages(struct pm_shmem *f)
{
	struct pm_shmem_node *root;
	unsigned long n = 0;

	pm_spin_lock(&f->tree_lock);
	root = atomic_load_relaxed(&f->xroot);
	if (root)
		n = count_pages(root);
	pm_spin_unlock(&f->tree_lock);
	return n;
}

/**
 * pm__shmem_migrate_folio() - page migration's step in the cache (Linux's
 * __folio_migrate_mapping with folio_ref_freeze): if @old is still at @index and its count is
 * exactly @expected, freeze it at 0 - lockless lookups and GUP-fast can take no reference from
 * then on - copy its data into @new and put @new in its slot, with the cache's reference
 * (added to the caller's), PG_shmem, the dirty flag and old's mapping and index. All under
 * the leaf's lock, which every remover of the slot takes: a truncation that comes first takes
 * @old away and the freeze is never tried; one that comes after finds @new. A hugetlbfs page
 * (@old and @new pool pages, @index its 2 MiB index) is copied whole.
 * Return: true if replaced (@old is then frozen at 0 and out of the cache, PG_shmem cleared:
 * the caller frees it), false if not (nothing changed).
 */
bool pm__shmem_migrate_folio(struct pm_shmem *f, unsigned long index, struct pm_folio *old,
			     struct pm_folio *new, int expected)
{
	struct pm_machine *m = f->m;
	struct pm_shmem_node *leaf;
	bool done = false;

	pm_rcu_read_lock();
	leaf = leaf_of_rcu(f, index);
	if (leaf) {
		void *_Atomic *slot = &leaf->slots[index & SHMEM_TREE_MASK];
		int ref = expected;

		pm_spin_lock(&leaf->lock);
		if (!leaf->dead && atomic_load_relaxed(slot) == old &&
		    atomic_cas_mb(&old->page.xrefcount, &ref, 0)) {
			/* A hugetlbfs page moves whole (its new folio keeps PG_hugetlb). */
			memcpy(page_address(m, &new->page), page_address(m, &old->page),
			       folio_test_hugetlb(old) ? PMD_SIZE : PAGE_SIZE);
			new->page.mapping = old->page.mapping;
			new->page.index = old->page.index;
			folio_set_flags_new(new, PGF(PG_shmem) |
						 (folio_test(old, PG_dirty) ? PGF(PG_dirty) : 0));
			folio_get_refs(new, 1); /* the cache's */
			atomic_store_release(slot, new);
			page_clear(&old->page, PG_shmem);
			done = true;
		}
		pm_spin_unlock(&leaf->lock);
	}
	pm_rcu_read_unlock();
	return done;
}

/* Take the cache's reference and flag off a folio that left the tree. */
static void cache_folio_removed(struct pm_folio *folio)
{
	page_clear(&folio->page, PG_shmem);
	folio_put(folio);
}

/* Remove @folio from @index if it is still there, dropping the cache's reference. */
bool pm__shmem_delete(struct pm_shmem *f, unsigned long index, struct pm_folio *folio)
{
	struct pm_shmem_node *dead = NULL;
	bool removed;

	pm_spin_lock(&f->tree_lock);
	removed = tree_delete(f, index, folio, &dead);
	pm_spin_unlock(&f->tree_lock);
	free_dead_nodes(dead);
	if (removed)
		cache_folio_removed(folio);
	return removed;
}

/**
 * pm__shmem_remove_from() - take up to @max folios at indices in [@start, @end) out of the cache,
 * clearing PG_shmem under tree_lock. Their cache references pass to the caller, in @batch.
 * Return: how many were removed (fewer than @max: none is left).
 */
unsigned pm__shmem_remove_from(struct pm_shmem *f, unsigned long start, unsigned long end,
			       struct pm_folio **batch, unsigned max)
{
	struct pm_shmem_node *dead = NULL;
	unsigned long idx[64];
	unsigned n;

	pm_assert(max <= ARRAY_SIZE(idx));
	pm_spin_lock(&f->tree_lock);
	n = atomic_load_relaxed(&f->xroot) ?
		    tree_gang(f, atomic_load_relaxed(&f->xroot), 0, start, end, batch, idx, max) : 0;
	for (unsigned i = 0; i < n; i++) {
		/* Only the tree's writers change a slot that holds a folio: it is still there. */
		if (!tree_delete(f, idx[i], batch[i], &dead))
			pm_bug_on(1);
		page_clear(&batch[i]->page, PG_shmem);
	}
	pm_spin_unlock(&f->tree_lock);
	free_dead_nodes(dead);
	return n;
}

/*
 * Empty the cache and free the tree, in one pass: each folio loses PG_shmem and the cache's
 * reference (a leaf's folios together: pm__folios_put_cache, which takes a last reference and
 * the flag in one atomic), each node is freed after its slots. No locks, no RCU: nobody maps
 * or references the object any more, so nobody can look it up (the last munmap's zap has
 * run, and a fault holds a reference to the object through its VMA). What is pinned lives on
 * until its unpin.
 * Context: the object's last reference is gone.
 */
static void tree_destroy(struct pm_machine *m, struct pm_shmem_node *n)
{
	struct pm_folio *batch[SHMEM_TREE_SLOTS];
	unsigned nr = 0;

	for (unsigned i = 0; i < SHMEM_TREE_SLOTS; i++) {
		void *p = atomic_load_relaxed(&n->slots[i]);

		if (!p)
			continue;
		if (n->shift)
			tree_destroy(m, p);
		else
			batch[nr++] = p;
	}
	if (nr)
		pm__folios_put_cache(m, batch, nr); /* a leaf's folios, and their PG_shmem */
	pm__obj_cache_put(m, m->shmem_nodes, n);
}

void pm__shmem_cache_fini(struct pm_shmem *f)
{
	struct pm_shmem_node *root = atomic_load_relaxed(&f->xroot);

	atomic_store_relaxed(&f->xroot, NULL);
	if (root)
		tree_destroy(f->m, root);
}
