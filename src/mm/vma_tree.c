// SPDX-License-Identifier: MIT
/*
 * vma_tree.c - the VMA set: a copy-on-write B+tree of ranges, readable under RCU.
 *
 * Shape. Leaves hold up to VT_CAP entries [start, end) -> VMA, sorted and disjoint. An internal
 * node holds up to VT_CAP children and the pivots between them: child i covers the addresses
 * [pivot[i-1], pivot[i]) (the node's own bounds at the ends), and every entry lies wholly inside
 * the range of each node on its path. Pivots are free to sit anywhere in the gap between two
 * children's entries. Every node but the root has at least VT_MIN items, so the height is
 * O(log n) (65530 entries: at most 8 levels).
 *
 * Writers (one at a time: the caller's lock, mmap_lock for write) never change an internal node
 * that a reader may see but for one thing: a child slot may be swapped for a new child that
 * covers exactly the same range. A leaf whose change keeps it between VT_MIN and VT_CAP entries
 * (most changes: an insertion, a removal, a split or merge of neighbours) is rewritten in place
 * under its sequence count, a seqlock that readers check and retry. Every other change is
 * copy-on-write: it builds
 * new nodes for the leaf it touches and for each ancestor whose pivots or child count change,
 * fills them while they are private, and publishes the topmost new node with one release store
 * (a child slot, or the root). The nodes that drop out go on the retire list; the caller hands
 * it to RCU (pm__vt_retire_flush()), one call_rcu per flush, as rarely as it likes.
 *
 * Why a lockless reader is safe (pm__vt_lookup() under pm_rcu_read_lock()):
 *  1. Memory. A reader reaches a node only through a pointer it loaded (acquire) from the root
 *     or a slot. A node is retired only after it was unlinked, and freed only a grace period
 *     after that, so every node a reader reached stays valid memory until it leaves its read
 *     section - including nodes of versions that are already replaced.
 *  2. Consistency. A published internal node's pivots and count never change; its child slots
 *     change only to a node with the same range. So a reader's descent always follows a chain
 *     of ranges, each inside the last, and ends in a leaf whose range contains the address.
 *     It reads the leaf between two loads of its sequence count and keeps the result only if
 *     the count was even and did not move, so the entries it used are one version of the leaf:
 *     it finds the entry covering the address in that version, or none.
 *  3. Staleness. Versions mix (a reader may hold an old parent and load a new child from a slot
 *     the writer has since swapped), but each node it reads is a consistent snapshot of its
 *     range, so the answer is some entry that covered the address at some moment of the read,
 *     or NULL if at some moment none did. Callers treat it as a hint: lock_vma_under_rcu() locks
 *     the VMA and re-checks that it is still attached and still covers the address.
 *  4. No shared write. A lookup only loads; it terminates because each step goes one level
 *     down, a node's count is at most VT_CAP, and a leaf is retried only while its writer,
 *     which holds no lock a reader waits for, is rewriting it.
 *
 * Memory. A change needs at most a handful of nodes per level. They are taken from a spare pool
 * that pm__vt_store() fills first (VT_SPARE_PER_LEVEL per level), so an allocation failure
 * returns -ENOMEM before anything changes. Writer-only summaries in every node (first start,
 * last end, longest inner gap) make the gap searches of mmap O(log n).
 */
#include "mm/mm.h"
#include "mm/vma_tree.h"

#define VT_CAP 16
#define VT_MIN 4
#define VT_MAX_HEIGHT 16
#define VT_SPARE_PER_LEVEL 10

struct pm_vt_node {
	/* Read by lockless readers. Written before the node is published and never after, but
	 * for the child slots of an internal node (see the top of this file). */
	uint8_t leaf;
	_Atomic uint8_t xnr;
	_Atomic unsigned xseq;	      /* leaf: odd while the writer changes it in place */
	_Atomic unsigned long xpivot[VT_CAP]; /* leaf: end of entry i; internal: upper bound
					       * of child i */
	_Atomic unsigned long xstart[VT_CAP]; /* leaf: start of entry i */
	void *_Atomic slot[VT_CAP];  /* leaf: the VMA of entry i; internal: child i */

	/* Writer only. */
	unsigned long first, last;  /* first start and last end in this subtree */
	unsigned long gap;	    /* longest free range between two entries of this subtree */
	struct pm_vt_node *next;    /* on the spare or the retired list */
	struct pm_rcu_head rcu;
};

/* Reads of fields that a writer may change in place (leaves) or that readers share. */
#define NR(n) ((unsigned)atomic_load_relaxed(&(n)->xnr))
#define PIV(n, i) atomic_load_relaxed(&(n)->xpivot[i])
#define STA(n, i) atomic_load_relaxed(&(n)->xstart[i])

struct vt_entry {
	unsigned long start, end;
	void *vma;
};

/* What rebuilding a subtree gave: the same node (maybe with a child swapped in place), or
 * 0..2 new nodes with the pivot between them. */
struct vt_res {
	bool same;
	unsigned nr;
	struct pm_vt_node *node[2];
	unsigned long sep;
};

struct vt_op {
	unsigned long s, e;
	void *vma;
};

static inline struct pm_vt_node *child_at(struct pm_vt_node *n, unsigned i)
{
	return atomic_load_acquire(&n->slot[i]);
}

/* ---- node pool, retire list ---- */

static int vt_reserve(struct pm_vma_tree *t, unsigned need)
{
	while (t->nr_spare < need) {
		struct pm_vt_node *n;

		if (t->m && pm__should_fail(t->m))
			return -ENOMEM;
		n = malloc(sizeof(*n));
		if (!n)
			return -ENOMEM;
		pm__trace_object(n, sizeof(*n), "pm_vt_node");
		n->next = t->spare;
		t->spare = n;
		t->nr_spare++;
	}
	return 0;
}

static struct pm_vt_node *node_new(struct pm_vma_tree *t, bool leaf)
{
	struct pm_vt_node *n = t->spare;

	pm_bug_on(!n); /* vt_reserve() promised enough */
	t->spare = n->next;
	t->nr_spare--;
	n->leaf = leaf;
	atomic_store_relaxed(&n->xnr, 0);
	atomic_store_relaxed(&n->xseq, 0);
	n->next = NULL;
	return n;
}

/* A node built in this change and never published: back to the pool. */
static void node_recycle(struct pm_vma_tree *t, struct pm_vt_node *n)
{
	n->next = t->spare;
	t->spare = n;
	t->nr_spare++;
}

static void node_retire(struct pm_vma_tree *t, struct pm_vt_node *n)
{
	n->next = t->retired;
	t->retired = n;
	t->nr_retired++;
}

/* Retire a subtree that a change drops whole; its entries leave the count. */
static void subtree_retire(struct pm_vma_tree *t, struct pm_vt_node *n)
{
	if (!n->leaf)
		for (unsigned i = 0; i < NR(n); i++)
			subtree_retire(t, child_at(n, i));
	else
		t->count -= NR(n);
	node_retire(t, n);
}

static void retired_free_cb(struct pm_rcu_head *head)
{
	struct pm_vt_node *n = container_of(head, struct pm_vt_node, rcu);

	while (n) {
		struct pm_vt_node *next = n->next;

		pm__trace_object_gone(n);
		free(n);
		n = next;
	}
}

void pm__vt_retire_flush(struct pm_vma_tree *t)
{
	if (t->retired) {
		pm_call_rcu(&t->retired->rcu, retired_free_cb);
		t->retired = NULL;
		t->nr_retired = 0;
	}
}

void pm__vt_retire_free_now(struct pm_vma_tree *t)
{
	if (t->retired)
		retired_free_cb(&t->retired->rcu);
	t->retired = NULL;
	t->nr_retired = 0;
}

/* ---- summaries (writer only) ---- */

static void summarize(struct pm_vt_node *n)
{
	unsigned long gap = 0;

	if (n->leaf && !NR(n)) {
		n->first = ULONG_MAX; /* an empty root */
		n->last = 0;
	} else if (n->leaf) {
		n->first = STA(n, 0);
		n->last = PIV(n, NR(n) - 1);
		for (unsigned i = 1; i < NR(n); i++)
			gap = max(gap, STA(n, i) - PIV(n, i - 1));
	} else {
		struct pm_vt_node *prev = NULL;

		for (unsigned i = 0; i < NR(n); i++) {
			struct pm_vt_node *c = child_at(n, i);

			gap = max(gap, c->gap);
			if (prev)
				gap = max(gap, c->first - prev->last);
			prev = c;
		}
		n->first = child_at(n, 0)->first;
		n->last = prev->last;
	}
	n->gap = gap;
}

/* ---- building nodes ---- */

static struct pm_vt_node *build_leaf(struct pm_vma_tree *t, const struct vt_entry *e, unsigned n)
{
	struct pm_vt_node *node = node_new(t, true);

	pm_assert(n >= 1 && n <= VT_CAP);
	for (unsigned i = 0; i < n; i++) {
		atomic_store_relaxed(&node->xstart[i], e[i].start);
		atomic_store_relaxed(&node->xpivot[i], e[i].end);
		atomic_store_relaxed(&node->slot[i], e[i].vma);
	}
	atomic_store_relaxed(&node->xnr, (uint8_t)n);
	summarize(node);
	return node;
}

/* @seps[i] lies between @kids[i] and @kids[i + 1]. */
static struct pm_vt_node *build_internal(struct pm_vma_tree *t, struct pm_vt_node **kids,
					 const unsigned long *seps, unsigned n)
{
	struct pm_vt_node *node = node_new(t, false);

	pm_assert(n >= 1 && n <= VT_CAP);
	for (unsigned i = 0; i < n; i++) {
		atomic_store_relaxed(&node->slot[i], kids[i]);
		if (i + 1 < n)
			atomic_store_relaxed(&node->xpivot[i], seps[i]);
	}
	atomic_store_relaxed(&node->xnr, (uint8_t)n);
	summarize(node);
	return node;
}

/* How many nodes @n items make: none, one, or two halves. */
static unsigned chunk_count(struct vt_res *res, unsigned n)
{
	pm_assert(n <= 2 * VT_CAP);
	res->same = false;
	res->nr = !n ? 0 : n <= VT_CAP ? 1 : 2;
	return res->nr == 2 ? n / 2 : n;
}

/* Cut @n leaf entries into one node, or two halves. */
static void leaf_chunks(struct pm_vma_tree *t, const struct vt_entry *e, unsigned n,
			struct vt_res *res)
{
	unsigned h = chunk_count(res, n);

	if (res->nr)
		res->node[0] = build_leaf(t, e, h);
	if (res->nr == 2) {
		res->node[1] = build_leaf(t, e + h, n - h);
		res->sep = e[h].start;
	}
}

/* The same for @n children and the @n - 1 pivots between them. */
static void internal_chunks(struct pm_vma_tree *t, struct pm_vt_node **kids,
			    const unsigned long *seps, unsigned n, struct vt_res *res)
{
	unsigned h = chunk_count(res, n);

	if (res->nr)
		res->node[0] = build_internal(t, kids, seps, h);
	if (res->nr == 2) {
		res->node[1] = build_internal(t, kids + h, seps + h, n - h);
		res->sep = seps[h - 1];
	}
}

/* ---- the change itself ---- */

static void rebuild(struct pm_vma_tree *t, struct pm_vt_node *n, const struct vt_op *op,
		    struct vt_res *res);

/*
 * Rewrite a published leaf in place, under its sequence count: readers that overlap the
 * rewrite see the count odd or changed and read the leaf again (pm__vt_lookup()).
 */
static void leaf_rewrite(struct pm_vt_node *n, const struct vt_entry *e, unsigned k)
{
	unsigned seq = atomic_load_relaxed(&n->xseq);

	atomic_store_relaxed(&n->xseq, seq + 1);
	pm_smp_wmb(); /* the odd count before any entry changes; pairs with the reader's rmb */
	for (unsigned i = 0; i < k; i++) {
		atomic_store_relaxed(&n->xstart[i], e[i].start);
		atomic_store_relaxed(&n->xpivot[i], e[i].end);
		atomic_store_relaxed(&n->slot[i], e[i].vma);
	}
	atomic_store_relaxed(&n->xnr, (uint8_t)k);
	atomic_store_release(&n->xseq, seq + 2);
	summarize(n);
}

static void rebuild_leaf(struct pm_vma_tree *t, struct pm_vt_node *n, const struct vt_op *op,
			 struct vt_res *res)
{
	struct vt_entry e[VT_CAP + 2];
	unsigned k = 0, i;

	for (i = 0; i < NR(n) && PIV(n, i) <= op->s; i++)
		e[k++] = (struct vt_entry){ STA(n, i), PIV(n, i), atomic_load_relaxed(&n->slot[i]) };
	/* Entries that overlap [s, e): keep what sticks out on either side. */
	if (i < NR(n) && STA(n, i) < op->s)
		e[k++] = (struct vt_entry){ STA(n, i), op->s, atomic_load_relaxed(&n->slot[i]) };
	if (op->vma)
		e[k++] = (struct vt_entry){ op->s, op->e, op->vma };
	for (; i < NR(n) && STA(n, i) < op->e; i++)
		if (PIV(n, i) > op->e)
			e[k++] = (struct vt_entry){ op->e, PIV(n, i),
						    atomic_load_relaxed(&n->slot[i]) };
	for (; i < NR(n); i++)
		e[k++] = (struct vt_entry){ STA(n, i), PIV(n, i), atomic_load_relaxed(&n->slot[i]) };
	t->count += k;
	t->count -= NR(n);
	if (k <= VT_CAP && (k >= VT_MIN || n == atomic_load_relaxed(&t->xroot))) {
		/* (a root leaf may be empty: the next insertion then needs no node) */
		leaf_rewrite(n, e, k);
		*res = (struct vt_res){ .same = true };
		return;
	}
	leaf_chunks(t, e, k, res);
	node_retire(t, n);
}

/* Append one item to the list of children being built, or note that it vanished. */
struct kidlist {
	struct pm_vt_node *kid[VT_CAP + 4];
	bool fresh[VT_CAP + 4];
	unsigned long sep[VT_CAP + 4];
	unsigned n;
	bool pending;	    /* a child vanished: its left pivot goes before the next one */
	unsigned long pend;
};

static void kids_add(struct kidlist *l, struct pm_vt_node *kid, bool fresh, unsigned long before)
{
	if (l->n) {
		l->sep[l->n - 1] = l->pending ? l->pend : before;
		pm_assert(l->n < ARRAY_SIZE(l->kid));
	}
	l->pending = false;
	l->kid[l->n] = kid;
	l->fresh[l->n] = fresh;
	l->n++;
}

static void kids_add_res(struct kidlist *l, const struct vt_res *r, unsigned long before,
			 struct pm_vt_node *old)
{
	if (r->same) {
		kids_add(l, old, false, before);
	} else if (!r->nr) {
		if (!l->pending) {
			l->pending = true;
			l->pend = before;
		}
	} else {
		kids_add(l, r->node[0], true, before);
		if (r->nr == 2)
			kids_add(l, r->node[1], true, r->sep);
	}
}

static unsigned node_items(struct pm_vt_node *n)
{
	return NR(n);
}

/* Merge the underfull fresh child at @k with a neighbour; both are replaced. */
static void kids_fix_underflow(struct pm_vma_tree *t, struct kidlist *l, unsigned k)
{
	unsigned a = k + 1 < l->n ? k : k - 1, b = a + 1; /* merge kid[a] and kid[b] */
	struct pm_vt_node *x = l->kid[a], *y = l->kid[b];
	struct vt_res r;

	if (x->leaf) {
		struct vt_entry e[2 * VT_CAP];
		unsigned m = 0;

		for (unsigned i = 0; i < NR(x); i++)
			e[m++] = (struct vt_entry){ STA(x, i), PIV(x, i),
						    atomic_load_relaxed(&x->slot[i]) };
		for (unsigned i = 0; i < NR(y); i++)
			e[m++] = (struct vt_entry){ STA(y, i), PIV(y, i),
						    atomic_load_relaxed(&y->slot[i]) };
		leaf_chunks(t, e, m, &r);
	} else {
		struct pm_vt_node *kids[2 * VT_CAP];
		unsigned long seps[2 * VT_CAP];
		unsigned m = 0;

		for (unsigned i = 0; i < NR(x); i++) {
			kids[m] = child_at(x, i);
			seps[m++] = i + 1 < NR(x) ? PIV(x, i) : l->sep[a];
		}
		for (unsigned i = 0; i < NR(y); i++) {
			kids[m] = child_at(y, i);
			if (i + 1 < NR(y))
				seps[m] = PIV(y, i);
			m++;
		}
		internal_chunks(t, kids, seps, m, &r);
	}
	for (unsigned i = a; i <= b; i++) {
		if (l->fresh[i])
			node_recycle(t, l->kid[i]);
		else
			node_retire(t, l->kid[i]);
	}
	/* Replace kid[a], kid[b] (and the pivot between them) by r's one or two nodes. */
	l->kid[a] = r.node[0];
	l->fresh[a] = true;
	if (r.nr == 2) {
		l->kid[b] = r.node[1];
		l->fresh[b] = true;
		l->sep[a] = r.sep;
	} else {
		memmove(&l->kid[b], &l->kid[b + 1], (l->n - b - 1) * sizeof(l->kid[0]));
		memmove(&l->fresh[b], &l->fresh[b + 1], (l->n - b - 1) * sizeof(l->fresh[0]));
		memmove(&l->sep[a], &l->sep[b], (l->n - b - 1) * sizeof(l->sep[0]));
		l->n--;
	}
}

/* Index of the child of @n whose range contains @addr. */
static unsigned child_index(const struct pm_vt_node *n, unsigned long addr)
{
	unsigned i = 0;

	while (i + 1 < NR(n) && addr >= PIV(n, i))
		i++;
	return i;
}

static bool subtree_untouched(struct pm_vt_node *c, const struct vt_op *op)
{
	return !op->vma && (c->last <= op->s || c->first >= op->e);
}

static void rebuild_internal(struct pm_vma_tree *t, struct pm_vt_node *n, const struct vt_op *op,
			     struct vt_res *res)
{
	unsigned i0 = child_index(n, op->s), i1 = child_index(n, op->e - 1);
	struct vt_op erase = { op->s, op->e, NULL };
	struct pm_vt_node *c0 = child_at(n, i0);
	struct kidlist l;
	struct vt_res r0, r1;

	if (subtree_untouched(c0, op))
		r0 = (struct vt_res){ .same = true };
	else
		rebuild(t, c0, op, &r0);

	/* The common case: one child changed and still fits where it was. */
	if (i0 == i1 && (r0.same || (r0.nr == 1 && node_items(r0.node[0]) >= VT_MIN))) {
		if (!r0.same)
			atomic_store_release(&n->slot[i0], r0.node[0]);
		summarize(n);
		*res = (struct vt_res){ .same = true };
		return;
	}

	l.n = 0;
	l.pending = false;
	l.pend = 0;
	for (unsigned i = 0; i < i0; i++)
		kids_add(&l, child_at(n, i), false, i ? PIV(n, i - 1) : 0);
	kids_add_res(&l, &r0, i0 ? PIV(n, i0 - 1) : 0, c0);
	if (i1 != i0) {
		struct pm_vt_node *c1 = child_at(n, i1);

		for (unsigned i = i0 + 1; i < i1; i++)
			subtree_retire(t, child_at(n, i)); /* wholly inside [s, e) */
		if (subtree_untouched(c1, &erase))
			r1 = (struct vt_res){ .same = true };
		else
			rebuild(t, c1, &erase, &r1);
		/* The inserted entry ends at e; what is left of c1 starts at e or above. */
		kids_add_res(&l, &r1, op->vma ? op->e : PIV(n, i1 - 1), c1);
	}
	for (unsigned i = i1 + 1; i < NR(n); i++)
		kids_add(&l, child_at(n, i), false, PIV(n, i - 1));

	/* At most the two children on the edges of [s, e) are new and may be underfull. A merge
	 * moves indices, so look again from the start after each. */
	for (bool again = true; again && l.n > 1;) {
		again = false;
		for (unsigned k = 0; k < l.n; k++)
			if (l.fresh[k] && node_items(l.kid[k]) < VT_MIN) {
				kids_fix_underflow(t, &l, k);
				again = true;
				break;
			}
	}
	internal_chunks(t, l.kid, l.sep, l.n, res);
	node_retire(t, n);
}

static void rebuild(struct pm_vma_tree *t, struct pm_vt_node *n, const struct vt_op *op,
		    struct vt_res *res)
{
	if (n->leaf)
		rebuild_leaf(t, n, op, res);
	else
		rebuild_internal(t, n, op, res);
}

/* Copy the root's summary for pm__vt_span(), after the root changed. */
static void vt_note_span(struct pm_vma_tree *t)
{
	struct pm_vt_node *root = atomic_load_relaxed(&t->xroot);

	t->spanned = root && NR(root);
	t->first = t->spanned ? root->first : 0;
	t->last = t->spanned ? root->last : 0;
}
int pm__vt_prepare(struct pm_vma_tree *t)
{
	return vt_reserve(t, VT_SPARE_PER_LEVEL * (t->height + 2));
}

int pm__vt_store(struct pm_vma_tree *t, unsigned long start, unsigned long end,
		 struct pm_vma *vma)
{
	struct vt_op op = { start, end, vma };
	struct pm_vt_node *root = atomic_load_relaxed(&t->xroot);
	struct vt_res res;

	pm_assert(start < end);
	if (pm__vt_prepare(t))
		return -ENOMEM;
	if (!root) {
		struct vt_entry e = { start, end, vma };

		if (vma) {
			atomic_store_release(&t->xroot, build_leaf(t, &e, 1));
			t->count = 1;
			vt_note_span(t);
		}
		return 0;
	}
	rebuild(t, root, &op, &res);
	if (res.same) {
		vt_note_span(t); /* the root may have changed in place */
		return 0;
	}
	if (!res.nr) {
		atomic_store_release(&t->xroot, NULL);
		t->height = 0;
	} else if (res.nr == 1) {
		struct pm_vt_node *r = res.node[0];

		/* A root with one child gives way to the child (fresh nodes only: an old
		 * non-root node has at least VT_MIN children). */
		while (!r->leaf && NR(r) == 1) {
			struct pm_vt_node *c = child_at(r, 0);

			node_recycle(t, r);
			r = c;
			t->height--;
		}
		atomic_store_release(&t->xroot, r);
	} else {
		struct pm_vt_node *kids[2] = { res.node[0], res.node[1] };

		pm_bug_on(t->height >= VT_MAX_HEIGHT);
		atomic_store_release(&t->xroot, build_internal(t, kids, &res.sep, 2));
		t->height++;
	}
	vt_note_span(t);
	return 0;
}

/* ---- lookups ---- */

struct pm_vma *pm__vt_lookup(struct pm_vma_tree *t, unsigned long addr)
{
	struct pm_vt_node *n = atomic_load_acquire(&t->xroot);

	if (!n)
		return NULL;
	while (!n->leaf)
		n = child_at(n, child_index(n, addr));
	for (;;) {
		unsigned seq = atomic_load_acquire(&n->xseq), nr = NR(n), i;
		struct pm_vma *found = NULL;

		if (unlikely(seq & 1)) {
			cpu_relax(); /* the writer is rewriting this leaf */
			continue;
		}
		for (i = 0; i < nr && addr >= PIV(n, i); i++)
			;
		if (i < nr && STA(n, i) <= addr)
			found = atomic_load_relaxed(&n->slot[i]);
		pm_smp_rmb(); /* what we read before the re-check; pairs with leaf_rewrite() */
		if (likely(atomic_load_relaxed(&n->xseq) == seq))
			return found;
	}
}

static struct pm_vma *entry_out(struct pm_vt_node *n, unsigned i, unsigned long *start,
				unsigned long *end)
{
	if (start)
		*start = STA(n, i);
	if (end)
		*end = PIV(n, i);
	return atomic_load_relaxed(&n->slot[i]);
}

struct pm_vma *pm__vt_find(struct pm_vma_tree *t, unsigned long addr, unsigned long *start,
			   unsigned long *end)
{
	struct pm_vt_node *path[VT_MAX_HEIGHT], *n = atomic_load_acquire(&t->xroot);
	unsigned idx[VT_MAX_HEIGHT], d = 0;

	if (!n)
		return NULL;
	while (!n->leaf) {
		path[d] = n;
		idx[d] = child_index(n, addr);
		n = child_at(n, idx[d++]);
	}
	for (unsigned i = 0; i < NR(n); i++)
		if (PIV(n, i) > addr)
			return entry_out(n, i, start, end);
	/* Nothing ends above @addr here: the answer opens the next subtree to the right. */
	while (d--) {
		if (idx[d] + 1 < NR(path[d])) {
			n = child_at(path[d], idx[d] + 1);
			while (!n->leaf)
				n = child_at(n, 0);
			return entry_out(n, 0, start, end);
		}
	}
	return NULL;
}

struct pm_vma *pm__vt_prev(struct pm_vma_tree *t, unsigned long addr, unsigned long *start,
			   unsigned long *end)
{
	struct pm_vt_node *path[VT_MAX_HEIGHT], *n = atomic_load_acquire(&t->xroot);
	unsigned idx[VT_MAX_HEIGHT], d = 0;

	if (!n || !addr)
		return NULL;
	while (!n->leaf) {
		path[d] = n;
		idx[d] = child_index(n, addr - 1);
		n = child_at(n, idx[d++]);
	}
	for (unsigned i = NR(n); i-- > 0;)
		if (STA(n, i) < addr)
			return entry_out(n, i, start, end);
	while (d--) {
		if (idx[d] > 0) {
			n = child_at(path[d], idx[d] - 1);
			while (!n->leaf)
				n = child_at(n, NR(n) - 1U);
			return entry_out(n, NR(n) - 1U, start, end);
		}
	}
	return NULL;
}

/* ---- gap searches (writer, or a lock that excludes writers) ---- */

struct gap_req {
	unsigned long lo, hi, len, align;
};

/* The highest (@top) or lowest @q->align-aligned place for @q->len bytes in [lo, hi) within
 * the search area, or -1. */
static long fit(const struct gap_req *q, unsigned long lo, unsigned long hi, bool top)
{
	unsigned long a;

	lo = max(lo, q->lo);
	hi = min(hi, q->hi);
	if (hi <= lo || hi - lo < q->len)
		return -1;
	a = top ? ALIGN_DOWN(hi - q->len, q->align) : ALIGN_UP(lo, q->align);
	return a >= lo && a <= hi - q->len ? (long)a : -1;
}

/* Walk @n's entries from the right; *@upper is the start of the entry right of them. */
static long gap_rev(struct pm_vt_node *n, unsigned long *upper, const struct gap_req *q)
{
	for (unsigned i = NR(n); i-- > 0;) {
		long r;

		if (n->leaf) {
			r = fit(q, PIV(n, i), *upper, true);
			*upper = STA(n, i);
		} else {
			struct pm_vt_node *c = child_at(n, i);

			r = -1;
			if (c->first >= q->hi)
				*upper = c->first; /* all of it lies above the search area */
			else if (fit(q, c->last, *upper, true) >= 0 || c->gap >= q->len)
				r = gap_rev(c, upper, q);
			else
				*upper = c->first;
		}
		if (r >= 0)
			return r;
		if (*upper <= q->lo)
			break; /* whatever lies further left is below the search area */
	}
	return -1;
}

static long gap_fwd(struct pm_vt_node *n, unsigned long *lower, const struct gap_req *q)
{
	for (unsigned i = 0; i < NR(n); i++) {
		long r;

		if (n->leaf) {
			r = fit(q, *lower, STA(n, i), false);
			*lower = PIV(n, i);
		} else {
			struct pm_vt_node *c = child_at(n, i);

			r = -1;
			if (c->last <= q->lo)
				*lower = c->last;
			else if (fit(q, *lower, c->first, false) >= 0 || c->gap >= q->len)
				r = gap_fwd(c, lower, q);
			else
				*lower = c->last;
		}
		if (r >= 0)
			return r;
		if (*lower >= q->hi)
			break;
	}
	return -1;
}

/* The whole search: the tree's gaps in one direction, then the one beyond its last entry. */
static long gap_search(struct pm_vma_tree *t, const struct gap_req *q, bool top)
{
	struct pm_vt_node *root = atomic_load_relaxed(&t->xroot);
	unsigned long edge = top ? q->hi : q->lo;
	long r = -1;

	if (root)
		r = top ? gap_rev(root, &edge, q) : gap_fwd(root, &edge, q);
	if (r < 0)
		r = top ? fit(q, q->lo, edge, true) : fit(q, edge, q->hi, false);
	return r < 0 ? -ENOMEM : r;
}

long pm__vt_gap_topdown(struct pm_vma_tree *t, unsigned long lo, unsigned long hi,
			unsigned long len, unsigned long align)
{
	struct gap_req q = { lo, hi, len, align };

	return gap_search(t, &q, true);
}

long pm__vt_gap_bottomup(struct pm_vma_tree *t, unsigned long lo, unsigned long hi,
			 unsigned long len, unsigned long align)
{
	struct gap_req q = { lo, hi, len, align };

	return gap_search(t, &q, false);
}

/* ---- life ---- */

void pm__vt_init(struct pm_vma_tree *t, struct pm_machine *m)
{
	memset(t, 0, sizeof(*t));
	t->m = m;
}

static void subtree_free(struct pm_vt_node *n)
{
	if (!n->leaf)
		for (unsigned i = 0; i < NR(n); i++)
			subtree_free(child_at(n, i));
	pm__trace_object_gone(n);
	free(n);
}

void pm__vt_destroy(struct pm_vma_tree *t)
{
	struct pm_vt_node *root = atomic_load_relaxed(&t->xroot);

	if (root)
		subtree_free(root);
	pm__vt_retire_free_now(t);
	for (struct pm_vt_node *n = t->spare, *next; n; n = next) {
		next = n->next;
		pm__trace_object_gone(n);
		free(n);
	}
	pm__vt_init(t, t->m);
}

/* ---- checking ---- */

static int check_fail(const char *what, unsigned long a, unsigned long b)
{
	fprintf(stderr, "pinmm: vma tree: %s (%#lx, %#lx)\n", what, a, b);
	return -EUCLEAN;
}

static int check_node(struct pm_vt_node *n, unsigned long lo, unsigned long hi, unsigned depth,
		      unsigned height, unsigned long *count)
{
	unsigned long first, last, gap;
	int err;

	if (!NR(n) || NR(n) > VT_CAP)
		return check_fail("bad node size", NR(n), depth);
	if (n->leaf != (depth == height))
		return check_fail("leaf at the wrong depth", depth, height);
	first = n->first, last = n->last, gap = n->gap;
	if (n->leaf) {
		for (unsigned i = 0; i < NR(n); i++) {
			if (STA(n, i) >= PIV(n, i) || STA(n, i) < lo || PIV(n, i) > hi)
				return check_fail("entry out of its range", STA(n, i), PIV(n, i));
			if (i && STA(n, i) < PIV(n, i - 1))
				return check_fail("entries overlap", STA(n, i), PIV(n, i - 1));
			if (!atomic_load_relaxed(&n->slot[i]))
				return check_fail("entry without a VMA", STA(n, i), PIV(n, i));
		}
		*count += NR(n);
	} else {
		for (unsigned i = 0; i < NR(n); i++) {
			unsigned long clo = i ? PIV(n, i - 1) : lo, chi = i + 1 < NR(n) ? PIV(n, i) : hi;

			if (clo >= chi || clo < lo || chi > hi)
				return check_fail("pivots out of order", clo, chi);
			err = check_node(child_at(n, i), clo, chi, depth + 1, height, count);
			if (err)
				return err;
		}
	}
	summarize(n);
	if (first != n->first || last != n->last || gap != n->gap)
		return check_fail("stale summary", first, n->first);
	return 0;
}

int pm__vt_check(struct pm_vma_tree *t)
{
	struct pm_vt_node *root = atomic_load_relaxed(&t->xroot);
	unsigned long count = 0;
	int err;

	if (!root || (root->leaf && !NR(root))) {
		if (t->spanned)
			return check_fail("empty tree with a span", t->first, t->last);
		return t->count ? check_fail("empty tree with a count", t->count, 0) : 0;
	}
	err = check_node(root, 0, ULONG_MAX, 0, t->height, &count);
	if (!err && count != t->count)
		err = check_fail("count differs", count, t->count);
	if (!err && (!t->spanned || t->first != root->first))
		err = check_fail("stale span (first)", t->first, root->first);
	if (!err && t->last != root->last)
		err = check_fail("stale span (last)", t->last, root->last);
	return err;
}
