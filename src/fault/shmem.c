// SPDX-License-Identifier: MIT
/*
 * shmem.c - memfd-like objects: a page cache with lockless lookups, an exact size limit, the
 * fault path of the 2010 seed ("shmem: reduce one time of locking in pagefault"), and truncate.
 *
 * Page cache. A radix tree of 64-way nodes maps a page index to a folio. Readers take no lock:
 * under RCU they walk from the root with acquire loads, take a reference only if the folio's
 * count is not zero (pm__folio_try_get), and re-load the slot; if it changed they drop the
 * reference and retry (Nick Piggin's lockless page cache, 2008). Writers - insert, delete,
 * growing the tree - hold tree_lock. Nodes that empty out are unlinked and freed through RCU,
 * so a reader's stale node pointer is always valid memory. A folio in the cache holds one
 * reference for the cache and carries PG_shmem; removal clears PG_shmem under tree_lock and
 * drops that reference.
 *
 * Fault (modern): look up without a lock; on a hole, allocate and zero a page with no lock
 * held, insert it under tree_lock - if another thread inserted first, free ours and use
 * theirs (shmem_alloc_races) - then charge it against max_bytes (after the insert, so a loser
 * never consumes quota: Linux 6.7's order) and, under info_lock, count it in alloced. So each
 * new page takes tree_lock once and info_lock once; a present page takes neither.
 * PM_KNOB_SHMEM_LOCK_TWICE is the pre-2010 path: take info_lock, find the hole, drop it to
 * allocate, take it again to insert and account - twice per new page, and the insert and the
 * charge happen inside it.
 *
 * Exact limit. With max_bytes set, the object's quota of max_pages units is split between a
 * global pool (under limit.lock) and per-CPU reserves: a charge takes a unit from its CPU's
 * reserve with a compare-and-swap (no shared line in the common case), refilling it from the
 * pool a batch at a time; when the pool runs dry the charge reclaims every CPU's reserve
 * under the lock before it fails. Units are conserved - used + reserves + pool == max_pages -
 * so the object can never hold more than max_pages pages, and a charge fails only when all of
 * them are in use.
 *
 * Truncate vs fault. Truncate sets the size, removes the pages beyond it from the cache
 * (clearing PG_shmem), then zaps every mapping of that range in every VMA on i_mmap. A fault
 * installs a page-cache page only under the PTE lock and only while PG_shmem is still set: if
 * it runs before the zap took that PTL, the zap removes what it installed; if after, it sees
 * PG_shmem clear (the clear happened before the zap, and the PTL orders the two) and retries,
 * finding the size changed. When the zap finds no page table at all (the fault published it
 * after the zap looked), the two sides are ordered by a full barrier each: truncate's between
 * its clears and its zap, the fault's between taking the PTL and testing PG_shmem. A fault
 * that inserted a new page re-checks the size after the insert, so a page inserted past a
 * concurrent truncation is taken out again.
 *
 * Locks, outermost first: truncate_lock > i_mmap_lock > PTL > tree_lock > info_lock
 * (LOCK_TWICE: info_lock > tree_lock, never with a PTL held) > limit.lock. tree_lock is held
 * while tree nodes are allocated (malloc); unlinked nodes go to RCU only after it is dropped.
 */
#include "internal.h"

#define SHMEM_TREE_SHIFT 6
#define SHMEM_TREE_SLOTS (1U << SHMEM_TREE_SHIFT)
#define SHMEM_TREE_MASK (SHMEM_TREE_SLOTS - 1)
#define SHMEM_MAX_BYTES (1UL << 46)

struct pm_shmem_node {
	unsigned shift;			/* index bits below this node; 0 for a leaf */
	unsigned count;			/* non-empty slots; under tree_lock */
	struct pm_shmem_node *parent;	/* under tree_lock */
	unsigned offset;		/* slot in the parent */
	void *_Atomic slots[SHMEM_TREE_SLOTS]; /* child nodes, or folios in a leaf */
	struct pm_rcu_head rcu;
};

/* Pages the object's size covers: a partial last page counts. */
static unsigned long size_pages(struct pm_shmem *f)
{
	return (atomic_load_acquire(&f->xsize) + PAGE_SIZE - 1) >> PAGE_SHIFT;
}

/* ---- the radix tree ---- */

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

/* The folio at @index, without a reference. Context: tree_lock or RCU (for the checker). */
struct pm_folio *pm__shmem_peek(struct pm_shmem *f, unsigned long index)
{
	return tree_load(f, index, NULL);
}

static struct pm_shmem_node *node_alloc(struct pm_shmem *f, unsigned shift)
{
	struct pm_shmem_node *n = pm__kzalloc(f->m, sizeof(*n));

	if (n)
		n->shift = shift;
	return n;
}

/*
 * The leaf node that holds @index's slot, growing the tree and creating nodes on the way.
 * Context: tree_lock. Return: the leaf, or NULL when a node could not be allocated.
 */
static struct pm_shmem_node *tree_leaf_create(struct pm_shmem *f, unsigned long index)
{
	struct pm_shmem_node *n = atomic_load_relaxed(&f->xroot);

	if (!n) {
		n = node_alloc(f, 0);
		if (!n)
			return NULL;
		atomic_store_release(&f->xroot, n);
	}
	while (!node_covers(n, index)) {
		struct pm_shmem_node *top = node_alloc(f, n->shift + SHMEM_TREE_SHIFT);

		if (!top)
			return NULL;
		atomic_store_relaxed(&top->slots[0], n);
		top->count = 1;
		n->parent = top;
		n->offset = 0;
		atomic_store_release(&f->xroot, top);
		n = top;
	}
	while (n->shift) {
		unsigned off = (index >> n->shift) & SHMEM_TREE_MASK;
		struct pm_shmem_node *child = atomic_load_relaxed(&n->slots[off]);

		if (!child) {
			child = node_alloc(f, n->shift - SHMEM_TREE_SHIFT);
			if (!child)
				return NULL;
			child->parent = n;
			child->offset = off;
			atomic_store_release(&n->slots[off], child);
			n->count++;
		}
		n = child;
	}
	return n;
}

static void node_free_rcu(struct pm_rcu_head *head)
{
	free(container_of(head, struct pm_shmem_node, rcu));
}

/*
 * Empty the slot of @index in leaf @leaf; unlink nodes that became empty and chain them on
 * *@dead (through their parent pointer, which nobody needs once they are unlinked), for
 * free_dead_nodes() to hand to RCU once tree_lock is dropped. Context: tree_lock.
 */
static void tree_clear_slot(struct pm_shmem_node *leaf, unsigned long index,
			    struct pm_shmem_node **dead)
{
	struct pm_shmem_node *n = leaf;

	atomic_store_release(&n->slots[index & SHMEM_TREE_MASK], NULL);
	n->count--;
	while (n->count == 0 && n->parent) {
		struct pm_shmem_node *parent = n->parent;

		atomic_store_release(&parent->slots[n->offset], NULL);
		parent->count--;
		n->parent = *dead;
		*dead = n;
		n = parent;
	}
}

/* Free unlinked nodes after a grace period. Context: no spinlock held. */
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
		n = atomic_load_relaxed(&n->slots[(index >> n->shift) & SHMEM_TREE_MASK]);
	return n;
}

/* Remove @folio from index @index if it is still there. Context: tree_lock. */
static bool tree_delete(struct pm_shmem *f, unsigned long index, struct pm_folio *folio,
			struct pm_shmem_node **dead)
{
	struct pm_shmem_node *leaf = leaf_of(f, index);

	if (!leaf || atomic_load_relaxed(&leaf->slots[index & SHMEM_TREE_MASK]) != folio)
		return false;
	tree_clear_slot(leaf, index, dead);
	return true;
}

/*
 * Find up to @max folios at indices >= @start, in index order. Context: tree_lock.
 * Return: how many were stored in @out (their indices in @idx).
 */
static unsigned tree_gang(struct pm_shmem_node *n, unsigned long base, unsigned long start,
			  struct pm_folio **out, unsigned long *idx, unsigned max)
{
	unsigned found = 0;

	for (unsigned i = 0; i < SHMEM_TREE_SLOTS && found < max; i++) {
		unsigned long lo = base + ((unsigned long)i << n->shift);
		unsigned long span = n->shift >= 64 ? ~0UL : (1UL << n->shift) - 1;
		void *p = atomic_load_relaxed(&n->slots[i]);

		if (!p || lo + span < start)
			continue;
		if (n->shift == 0) {
			out[found] = p;
			idx[found++] = lo;
		} else {
			found += tree_gang(p, lo, start, out + found, idx + found, max - found);
		}
	}
	return found;
}

static void tree_free_all(struct pm_shmem_node *n)
{
	if (!n)
		return;
	if (n->shift)
		for (unsigned i = 0; i < SHMEM_TREE_SLOTS; i++)
			tree_free_all(atomic_load_relaxed(&n->slots[i]));
	free(n);
}

/* ---- the exact limit ---- */

#define LIMIT_STRIDE (PM_CACHELINE / sizeof(long))

static long limit_batch(struct pm_shmem *f)
{
	long b = (long)(f->max_pages / (4 * f->m->nr_cpus));

	return b < 1 ? 1 : b > 32 ? 32 : b;
}

static _Atomic long *limit_slot(struct pm_shmem *f)
{
	int cpu = sched_getcpu();

	return &f->limit.xpcpu[(cpu > 0 ? (unsigned)cpu % f->m->nr_cpus : 0) * LIMIT_STRIDE];
}

static bool limit_charge(struct pm_shmem *f)
{
	struct pm_shmem_limit *l = &f->limit;
	_Atomic long *slot = limit_slot(f);
	long v = atomic_load_relaxed(slot), batch;

	while (v > 0)
		if (atomic_cas_acquire(slot, &v, v - 1))
			return true;

	batch = limit_batch(f);
	pm_spin_lock(&l->lock);
	if (l->pool < 1) {
		/* Near the limit: take back every CPU's reserve before saying no. */
		for (unsigned c = 0; c < f->m->nr_cpus; c++)
			l->pool += atomic_xchg_mb(&l->xpcpu[c * LIMIT_STRIDE], 0);
	}
	if (l->pool < 1) {
		pm_spin_unlock(&l->lock);
		return false;
	}
	l->pool--;
	if (l->pool >= batch * (long)f->m->nr_cpus * 2) {
		l->pool -= batch;
		atomic_add_relaxed(slot, batch);
	}
	pm_spin_unlock(&l->lock);
	return true;
}

static void limit_uncharge(struct pm_shmem *f, long n)
{
	struct pm_shmem_limit *l = &f->limit;

	pm_spin_lock(&l->lock);
	l->pool += n;
	pm_spin_unlock(&l->lock);
}

/* ---- objects ---- */

static struct pm_shmem *shmem_alloc(struct pm_machine *m, size_t size, size_t max_bytes,
				    bool internal)
{
	struct pm_shmem *f;

	if (size > SHMEM_MAX_BYTES || max_bytes > SHMEM_MAX_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	if (pm__should_fail(m) || posix_memalign((void **)&f, PM_CACHELINE, sizeof(*f))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(f, 0, sizeof(*f));
	f->m = m;
	f->internal = internal;
	atomic_store_relaxed(&f->xrefs, 1);
	atomic_store_relaxed(&f->xsize, size);
	f->max_pages = ALIGN_UP(max_bytes, PAGE_SIZE) >> PAGE_SHIFT;
	pm_spin_init(&f->tree_lock);
	pm_spin_init(&f->info_lock);
	pm_spin_init(&f->limit.lock);
	if (f->max_pages) {
		f->limit.xpcpu = calloc(m->nr_cpus * LIMIT_STRIDE, sizeof(long));
		if (!f->limit.xpcpu) {
			free(f);
			errno = ENOMEM;
			return NULL;
		}
		f->limit.pool = (long)f->max_pages;
	}
	pthread_mutex_init(&f->i_mmap_lock, NULL);
	pthread_mutex_init(&f->truncate_lock, NULL);
	pm_list_init(&f->i_mmap);
	pthread_mutex_lock(&m->lock);
	pm_list_add_tail(&f->link, &m->shmems);
	pthread_mutex_unlock(&m->lock);
	return f;
}

struct pm_shmem *pm_shmem_create(struct pm_machine *m, size_t size, size_t max_bytes)
{
	if (unlikely(!m)) {
		errno = EINVAL;
		return NULL;
	}
	return shmem_alloc(m, size, max_bytes, false);
}

struct pm_shmem *pm__shmem_create_internal(struct pm_machine *m, size_t size)
{
	return shmem_alloc(m, size, 0, true);
}

void pm__shmem_get(struct pm_shmem *f)
{
	atomic_add_relaxed(&f->xrefs, 1);
}

/* Take the cache's reference and flag off a folio that left the tree. */
static void cache_folio_removed(struct pm_folio *folio)
{
	page_clear(&folio->page, PG_shmem);
	folio_put(folio);
}

static void shmem_destroy(struct pm_shmem *f)
{
	struct pm_machine *m = f->m;
	struct pm_shmem_node *dead = NULL;
	struct pm_folio *batch[64];
	unsigned long idx[64];
	unsigned n;

	pm_assert(pm_list_empty(&f->i_mmap));
	pthread_mutex_lock(&m->lock);
	pm_list_del(&f->link);
	pthread_mutex_unlock(&m->lock);

	/* Nobody maps or references the object: no lockless readers remain. */
	pm_spin_lock(&f->tree_lock);
	while (atomic_load_relaxed(&f->xroot) &&
	       (n = tree_gang(atomic_load_relaxed(&f->xroot), 0, 0, batch, idx, 64))) {
		for (unsigned i = 0; i < n; i++) {
			tree_delete(f, idx[i], batch[i], &dead);
			cache_folio_removed(batch[i]);
		}
	}
	tree_free_all(atomic_load_relaxed(&f->xroot));
	pm_spin_unlock(&f->tree_lock);
	free_dead_nodes(dead);
	free(f->limit.xpcpu);
	pthread_mutex_destroy(&f->i_mmap_lock);
	pthread_mutex_destroy(&f->truncate_lock);
	free(f);
}

void pm_shmem_put(struct pm_shmem *f)
{
	if (f && atomic_sub_mb(&f->xrefs, 1) == 1)
		shmem_destroy(f);
}

size_t pm_shmem_size(struct pm_shmem *f)
{
	return f ? atomic_load_acquire(&f->xsize) : 0;
}

unsigned long pm_shmem_nr_pages(struct pm_shmem *f)
{
	return f ? atomic_load_relaxed(&f->xnrpages) : 0;
}

/* ---- lookup and fault ---- */

/* The lockless lookup: a referenced folio at @index, or NULL for a hole. */
static struct pm_folio *shmem_lookup(struct pm_shmem *f, unsigned long index)
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

/* Undo the insert of a new page that may not stay (over the limit, or truncated meanwhile). */
static bool shmem_drop_new(struct pm_shmem *f, unsigned long index, struct pm_folio *folio)
{
	struct pm_shmem_node *dead = NULL;
	bool removed;

	pm_spin_lock(&f->tree_lock);
	removed = tree_delete(f, index, folio, &dead);
	if (removed)
		atomic_store_relaxed(&f->xnrpages, atomic_load_relaxed(&f->xnrpages) - 1);
	pm_spin_unlock(&f->tree_lock);
	free_dead_nodes(dead);
	if (removed)
		cache_folio_removed(folio);
	return removed;
}

/**
 * shmem_get_folio() - the folio at @index, allocating it on a hole; returned with a reference.
 * Return: the folio, or ERR as -EFAULT (beyond the size or over the limit: SIGBUS) / -ENOMEM
 * through @err.
 */
static struct pm_folio *shmem_get_folio(struct pm_shmem *f, unsigned long index, int *err)
{
	struct pm_machine *m = f->m;
	bool twice = knob(m, PM_KNOB_SHMEM_LOCK_TWICE);
	struct pm_shmem_node *leaf;
	struct pm_folio *folio, *new;
	int ret;

retry:
	if (index >= size_pages(f)) {
		*err = -EFAULT;
		return NULL;
	}
	folio = shmem_lookup(f, index);
	if (folio)
		return folio;

	if (twice) {
		/* 2010: the hole is found under info->lock, which is dropped to allocate. */
		pm_spin_lock(&f->info_lock);
		count_event(m, SHMEM_LOCK_ACQUISITIONS, 1);
		pm_rcu_read_lock(); /* info_lock does not keep tree nodes alive */
		folio = tree_load(f, index, NULL);
		pm_rcu_read_unlock();
		pm_spin_unlock(&f->info_lock);
		if (folio)
			goto retry;
	}
	new = pm__folio_alloc(m, 0, PM_ALLOC_ZERO);
	if (!new) {
		*err = -ENOMEM;
		return NULL;
	}
	page_set(&new->page, PG_dirty);
	new->page.mapping = f;
	new->page.index = index;
	folio_get_refs(new, 1); /* one for the cache, one for the caller */

	if (twice) {
		pm_spin_lock(&f->info_lock);
		count_event(m, SHMEM_LOCK_ACQUISITIONS, 1);
	}
	pm_spin_lock(&f->tree_lock);
	leaf = tree_leaf_create(f, index);
	if (!leaf) {
		ret = -ENOMEM;
	} else if (atomic_load_relaxed(&leaf->slots[index & SHMEM_TREE_MASK])) {
		ret = -EEXIST;
	} else if (f->max_pages && !limit_charge(f)) {
		ret = -EFAULT; /* over the limit: ENOSPC, which a fault turns into SIGBUS */
	} else {
		/* Charged only now that the insert cannot fail: a loser never takes quota. */
		page_set(&new->page, PG_shmem);
		atomic_store_release(&leaf->slots[index & SHMEM_TREE_MASK], new);
		leaf->count++;
		atomic_store_relaxed(&f->xnrpages, atomic_load_relaxed(&f->xnrpages) + 1);
		ret = 0;
	}
	pm_spin_unlock(&f->tree_lock);
	if (ret) {
		if (twice)
			pm_spin_unlock(&f->info_lock);
		new->page.mapping = NULL;
		folio_put_refs(new, 2);
		if (ret == -EEXIST) {
			count_event(m, SHMEM_ALLOC_RACES, 1);
			goto retry;
		}
		*err = ret;
		return NULL;
	}
	if (!twice) {
		pm_spin_lock(&f->info_lock);
		count_event(m, SHMEM_LOCK_ACQUISITIONS, 1);
	}
	f->alloced++;
	pm_spin_unlock(&f->info_lock);
	count_event(m, SHMEM_ALLOCS, 1);

	/* A truncation may have passed this index while we inserted: take the page out again. */
	if (unlikely(index >= size_pages(f))) {
		if (shmem_drop_new(f, index, new)) {
			pm_spin_lock(&f->info_lock);
			f->alloced--;
			pm_spin_unlock(&f->info_lock);
			if (f->max_pages)
				limit_uncharge(f, 1);
		}
		folio_put(new);
		goto retry; /* reports -EFAULT, as the size says */
	}
	return new;
}

/*
 * Install @folio (a referenced page-cache page, or a private copy of one) at @addr, provided
 * @cache - the page-cache page it is, or was copied from - is still in the cache: the PTL
 * orders this test against truncation's zap (see the top of the file).
 */
static int shmem_map(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
		     struct pm_folio *folio, pte_t entry, struct pm_folio *cache)
{
	struct pm_spinlock *ptl;
	pm_entry_t *ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &ptl);

	if (!ptep) {
		folio_put(folio);
		return -EAGAIN;
	}
	pm_smp_mb(); /* pairs with truncate's barrier before its zap */
	if (!pte_none(ptep_get(ptep)) || !page_test(&cache->page, PG_shmem)) {
		/* Someone mapped it, or truncation took the page out: look again. */
		pm_spin_unlock(ptl);
		folio_put(folio);
		return -EAGAIN;
	}
	atomic_add_relaxed(&folio->page.xmapcount, 1);
	set_pte(ptep, entry); /* our reference now belongs to the mapping */
	pm_spin_unlock(ptl);
	return 0;
}

/**
 * pm__shmem_fault() - fault on an empty PTE of a VMA mapping a shmem object.
 *
 * Shared mappings map the page-cache page (writable when VM_WRITE: shmem needs no dirty
 * tracking). Private mappings map it read-only on a read fault and, on a write fault, map an
 * exclusive anonymous copy instead (do_cow_fault) - installed only if the page it was copied
 * from is still in the cache, so truncation cannot miss it.
 * Return: 0, -EAGAIN (look again), -EFAULT (SIGBUS), -ENOMEM.
 */
int pm__shmem_fault(struct pm_mm *mm, struct pm_vma *vma, pm_entry_t *pmdp, unsigned long addr,
		    unsigned fault_flags)
{
	struct pm_machine *m = mm->m;
	bool write = fault_flags & FAULT_FLAG_WRITE;
	bool shared = vma->flags & VM_SHARED;
	struct pm_folio *folio, *copy;
	int err = 0;

	folio = shmem_get_folio(vma->file, vma_pgoff(vma, addr), &err);
	if (!folio)
		return err;
	if (shared || !write)
		return shmem_map(mm, pmdp, addr, folio,
				 pm__mk_pte(vma, page_to_pfn(m, &folio->page),
					    shared && (vma->flags & VM_WRITE), write),
				 folio);

	copy = pm__folio_alloc(m, 0, 0);
	if (!copy) {
		folio_put(folio);
		return -ENOMEM;
	}
	memcpy(page_address(m, &copy->page), page_address(m, &folio->page), PAGE_SIZE);
	page_set(&copy->page, PG_anon);
	page_set(&copy->page, PG_anon_exclusive);
	err = shmem_map(mm, pmdp, addr, copy,
			pm__mk_pte(vma, page_to_pfn(m, &copy->page), vma->flags & VM_WRITE, true),
			folio);
	folio_put(folio);
	if (!err)
		count_event(m, COW_COPIES, 1);
	return err;
}

/* ---- truncate ---- */

/* Zap [@first, end of file) from every mapping, private copies included. */
static void unmap_mapping_range(struct pm_shmem *f, unsigned long first)
{
	struct pm_list *pos;

	pm__shmem_map_lock(f);
	pm_list_for_each(pos, &f->i_mmap) {
		struct pm_vma *vma = pm_list_entry(pos, struct pm_vma, shared);
		unsigned long npages = (vma->end - vma->start) >> PAGE_SHIFT;
		unsigned long start;

		if (vma->pgoff + npages <= first)
			continue;
		start = vma->start + (first > vma->pgoff ? (first - vma->pgoff) << PAGE_SHIFT : 0);
		pm__zap_range(vma->mm, start, vma->end);
	}
	pm__shmem_map_unlock(f);
}

/*
 * Zero the bytes from @pos to the end of its page, if that page is in the cache: what lies
 * beyond the size must read as zeros when the object grows again (truncate_inode_partial_folio).
 */
static void zero_partial_page(struct pm_shmem *f, size_t pos)
{
	struct pm_folio *folio;
	size_t off = pos & ~PAGE_MASK;

	if (!off)
		return;
	folio = shmem_lookup(f, pos >> PAGE_SHIFT);
	if (folio) {
		memset((char *)page_address(f->m, &folio->page) + off, 0, PAGE_SIZE - off);
		folio_put(folio);
	}
}

int pm_shmem_truncate(struct pm_shmem *f, size_t size)
{
	unsigned long new_pages, old_pages;
	struct pm_folio *batch[64];
	unsigned long idx[64];
	size_t old_size;
	unsigned n;

	if (unlikely(!f) || size > SHMEM_MAX_BYTES)
		return -EINVAL;
	pthread_mutex_lock(&f->truncate_lock);
	old_size = atomic_load_relaxed(&f->xsize);
	old_pages = size_pages(f);
	new_pages = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	atomic_store_mb(&f->xsize, size);
	if (size != old_size)
		zero_partial_page(f, min(size, old_size));
	if (new_pages >= old_pages) {
		pthread_mutex_unlock(&f->truncate_lock);
		return 0;
	}
	/* 1. Out of the cache (PG_shmem cleared), in batches. */
	do {
		struct pm_shmem_node *dead = NULL;
		long removed = 0;

		pm_spin_lock(&f->tree_lock);
		n = atomic_load_relaxed(&f->xroot) ?
			    tree_gang(atomic_load_relaxed(&f->xroot), 0, new_pages, batch, idx, 64) :
			    0;
		for (unsigned i = 0; i < n; i++) {
			tree_delete(f, idx[i], batch[i], &dead);
			page_clear(&batch[i]->page, PG_shmem);
			removed++;
		}
		atomic_store_relaxed(&f->xnrpages, atomic_load_relaxed(&f->xnrpages) - removed);
		pm_spin_unlock(&f->tree_lock);
		free_dead_nodes(dead);
		if (removed) {
			pm_spin_lock(&f->info_lock);
			f->alloced -= removed;
			pm_spin_unlock(&f->info_lock);
			if (f->max_pages)
				limit_uncharge(f, removed);
		}
		for (unsigned i = 0; i < n; i++)
			folio_put(batch[i]);
	} while (n == 64);
	/*
	 * 2. Out of every mapping. Pinned pages live on until their last unpin. The barrier
	 * orders the PG_shmem clears before the zap's reads of the page tables; it pairs with
	 * the one in shmem_map() (a fault that published a table we do not see must see the
	 * clear: store-buffering, which the locks alone do not forbid in C11).
	 */
	pm_smp_mb();
	unmap_mapping_range(f, new_pages);
	pthread_mutex_unlock(&f->truncate_lock);
	return 0;
}
