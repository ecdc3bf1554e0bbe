// SPDX-License-Identifier: MIT
/*
 * page_alloc.c - the buddy allocator for orders 0..9 and its per-CPU caches of free frames.
 *
 * Ownership. A free frame is either the head of a free block on free_area[order] (PG_buddy,
 * order in page->xorder, linked through page->lru) under zone_lock, or a single frame in a
 * per-CPU cache (PG_pcp) under that cache's lock. Nothing else touches a free frame's list
 * link. Speculative readers (GUP-fast) may still load xflags, xcompound_head and xrefcount of
 * a free frame: xrefcount is 0, so their add-unless-zero fails, which is why frees reset the
 * refcount before the frame is published as free.
 *
 * Per-CPU caches. Order-0 allocations and frees, by far the most common (every 4 KiB fault),
 * go to the cache of the CPU the thread runs on (sched_getcpu), as Linux's pcp lists do: a free
 * goes back to the freeing CPU's cache, an allocation takes the hottest frame of its own. Each
 * cache has its own lock, so threads on different CPUs never share a lock or a line in the
 * common case; a thread that migrates mid-operation merely takes another CPU's lock, which
 * stays correct. zone_lock is taken only to refill an empty cache (at least PCP_BATCH frames,
 * usually one block: one list operation, split outside the lock) and to drain PCP_BATCH frames
 * when a cache passes its high mark. The high mark tunes itself as Linux 6.7's does: each
 * refill raises it by a batch, up to pcp_high_max (an eighth of memory over all CPUs), so a
 * CPU that allocates and frees a working set in turn (munmap, then faults) soon keeps all of
 * it, and its frames stay its own: no zone_lock, no buddy merging, no line written by another
 * CPU. An allocation that finds nothing drains every CPU's cache into the buddy lists, sets
 * the high marks back to pcp_high_min, and tries once more (drain_all_pcp), so frames cached
 * on another CPU never cause an out-of-memory. If that is not enough either
 * and page tables are waiting for an RCU grace period to be freed (munmap, teardown), it waits
 * for them (pm_rcu_barrier) and tries again: frames freed "soon" count too. Allocations never
 * happen inside an RCU read section or under a spinlock, so waiting here is allowed.
 *
 * Lazy descriptors. A machine may be far larger than the host's memory as long as the work
 * touches little of it: the arena and the descriptor array are reserved, not written, at
 * creation (machine.c), and the frames above the frontier (m->xfrontier, a multiple of 2 MiB)
 * have never been handed out. Their descriptors are untouched, zero-filled host memory, which
 * reads as "no flags, refcount 0", so a speculative reader's add-unless-zero fails on them as
 * on any free frame. When the buddy lists cannot serve an allocation, rmqueue() takes the
 * next max-order block at the frontier, initialises its 512 descriptors (their machine slot;
 * everything else is already zero) and moves the frontier up. The frontier never moves down:
 * a block freed later goes to the buddy lists like any other. Fresh blocks come in ascending
 * order, after every freed block, which is what the eager allocator did with its order-9
 * list in pfn order. Creation, pm__nr_free_frames() and the checker's walk therefore cost
 * in proportion to the memory used, never to the machine's size.
 *
 * Invariant (F): pm__nr_free_frames() = sum(nr_free[o] << o) + sum(pcp[c].count)
 *                                       + (nr_pages - frontier).
 */
#include <sched.h>

#include "internal.h"

#define PCP_HIGH_FRACTION 8 /* per-CPU caches hold at most this share of memory, together */

/* zone_lock, counted: pm_stats.zone_lock_acquisitions says how often CPUs share it. */
static void zone_lock(struct pm_machine *m)
{
	pm_spin_lock(&m->zone_lock);
	count_event(m, ZONE_LOCK_ACQUISITIONS, 1);
}

static void set_free_block(struct pm_page *page, unsigned order)
{
	atomic_store_relaxed(&page->xorder, (uint8_t)order);
	atomic_store_relaxed(&page->xflags, PGF(PG_buddy));
}

/* Caller holds zone_lock. */
static void add_to_free_area(struct pm_machine *m, struct pm_page *page, unsigned order)
{
	pm_assert_locked(&m->zone_lock);
	set_free_block(page, order);
	pm_list_add(&page->lru, &m->free_area[order]);
	atomic_store_relaxed(&m->xnr_free[order], atomic_load_relaxed(&m->xnr_free[order]) + 1);
}

/* Caller holds zone_lock. */
static void del_from_free_area(struct pm_machine *m, struct pm_page *page, unsigned order)
{
	pm_assert_locked(&m->zone_lock);
	pm_list_del(&page->lru);
	atomic_store_relaxed(&page->xflags, 0);
	atomic_store_relaxed(&m->xnr_free[order], atomic_load_relaxed(&m->xnr_free[order]) - 1);
}

/*
 * The next never-used max-order block, its descriptors made this machine's; NULL when the
 * frontier has reached the end of memory. Caller holds zone_lock.
 */
static struct pm_page *frontier_take(struct pm_machine *m)
{
	unsigned long pfn = atomic_load_relaxed(&m->xfrontier);
	struct pm_page *page;

	pm_assert_locked(&m->zone_lock);
	if (pfn >= m->nr_pages)
		return NULL;
	page = pfn_to_page(m, pfn);
	for (unsigned long i = 0; i < (1UL << PM_MAX_ORDER); i++)
		page[i].mslot = m->slot;
	atomic_store_relaxed(&m->xfrontier, pfn + (1UL << PM_MAX_ORDER));
	return page;
}

/*
 * Take a block of @order, splitting a larger one if needed; the buddy lists first, then the
 * never-used memory at the frontier. Caller holds zone_lock.
 */
static struct pm_page *rmqueue(struct pm_machine *m, unsigned order)
{
	struct pm_page *page = NULL;
	unsigned o;

	pm_assert_locked(&m->zone_lock);

	for (o = order; o <= PM_MAX_ORDER; o++) {
		if (pm_list_empty(&m->free_area[o]))
			continue;
		page = pm_list_first_entry(&m->free_area[o], struct pm_page, lru);
		del_from_free_area(m, page, o);
		break;
	}
	if (!page) {
		page = frontier_take(m);
		if (!page)
			return NULL;
		o = PM_MAX_ORDER;
	}
	while (o > order) {
		o--;
		add_to_free_area(m, page + (1UL << o), o);
	}
	atomic_store_relaxed(&page->xorder, 0);
	return page;
}

/* Give a block back, merging with its buddies. Caller holds zone_lock. */
static void free_one(struct pm_machine *m, struct pm_page *page, unsigned order)
{
	unsigned long pfn = page_to_pfn(m, page);

	pm_assert_locked(&m->zone_lock);
	while (order < PM_MAX_ORDER) {
		unsigned long buddy_pfn = pfn ^ (1UL << order);
		struct pm_page *buddy;

		if (buddy_pfn >= m->nr_pages)
			break;
		buddy = pfn_to_page(m, buddy_pfn);
		if (!page_test(buddy, PG_buddy) || atomic_load_relaxed(&buddy->xorder) != order)
			break;
		del_from_free_area(m, buddy, order);
		pfn &= ~(1UL << order);
		order++;
	}
	add_to_free_area(m, pfn_to_page(m, pfn), order);
}

int pm__page_alloc_init(struct pm_machine *m)
{
	for (unsigned o = 0; o <= PM_MAX_ORDER; o++) {
		pm_list_init(&m->free_area[o]);
		atomic_store_relaxed(&m->xnr_free[o], 0);
	}
	/*
	 * Linux's pcp bounds: high_min four batches, high_max an eighth of memory split among
	 * the CPUs (MIN_PERCPU_PAGELIST_HIGH_FRACTION), never below high_min.
	 */
	m->pcp_high_min = 4 * PCP_BATCH;
	m->pcp_high_max = (int)min(m->nr_pages / (PCP_HIGH_FRACTION * m->nr_cpus),
				   (unsigned long)INT_MAX / 2);
	m->pcp_high_max = max(m->pcp_high_max, m->pcp_high_min);
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		pm_spin_init(&m->pcp[c].lock);
		atomic_store_relaxed(&m->pcp[c].xcount, 0);
		m->pcp[c].high = m->pcp_high_min;
		pm_list_init(&m->pcp[c].list);
	}
	/*
	 * Every frame starts above the frontier: nothing is written per frame now. Fresh memory
	 * is handed out lowest pfns first, so consecutive allocations on a fresh machine get
	 * ascending, adjacent frames (a split hands out the lower half and keeps the upper one at
	 * the head of its list), and THP-backed ranges form long physically contiguous runs, as
	 * they tend to on a freshly booted kernel.
	 */
	atomic_store_relaxed(&m->xfrontier, 0);
	return 0;
}

static struct pm_pcp *this_cpu_pcp(struct pm_machine *m)
{
	int cpu = sched_getcpu();

	return &m->pcp[cpu > 0 ? (unsigned)cpu % m->nr_cpus : 0];
}

/* The tag page->free_cpu keeps for this cache: 1..255. */
static uint8_t pcp_tag(struct pm_machine *m, struct pm_pcp *pcp)
{
	return (uint8_t)((unsigned long)(pcp - m->pcp) % 255 + 1);
}

static void pcp_add_tail(struct pm_pcp *pcp, struct pm_page *page)
{
	atomic_store_relaxed(&page->xorder, 0);
	atomic_store_relaxed(&page->xflags, PGF(PG_pcp));
	pm_list_add_tail(&page->lru, &pcp->list);
}

/*
 * Refill an empty cache (Linux's rmqueue_bulk): at least PCP_BATCH frames, smallest blocks
 * first, as __rmqueue_smallest takes them, so that fragments are used before a large block is
 * split. Each block is one list operation under zone_lock and is split into frames here,
 * outside it, in ascending pfn order; on an unfragmented machine a refill is one block. Caller
 * holds pcp->lock. Return: the number of frames added.
 */
static int pcp_refill(struct pm_machine *m, struct pm_pcp *pcp)
{
	struct pm_page *block[PCP_BATCH];
	unsigned order[PCP_BATCH];
	int nblocks = 0, n = 0;

	pm_assert_locked(&pcp->lock);
	zone_lock(m);
	for (unsigned o = 0; o < PCP_BATCH_ORDER && n < PCP_BATCH; o++) {
		while (n < PCP_BATCH && !pm_list_empty(&m->free_area[o])) {
			block[nblocks] = pm_list_first_entry(&m->free_area[o], struct pm_page, lru);
			del_from_free_area(m, block[nblocks], o);
			order[nblocks++] = o;
			n += 1 << o;
		}
	}
	if (n < PCP_BATCH && (block[nblocks] = rmqueue(m, PCP_BATCH_ORDER))) {
		order[nblocks++] = PCP_BATCH_ORDER;
		n += PCP_BATCH;
	}
	pm_spin_unlock(&m->zone_lock);
	for (int b = 0; b < nblocks; b++)
		for (unsigned long i = 0; i < (1UL << order[b]); i++)
			pcp_add_tail(pcp, block[b] + i);
	return n;
}

/* Give the @n coldest frames back to the buddy lists. Caller holds pcp->lock. */
static void pcp_drain(struct pm_machine *m, struct pm_pcp *pcp, int n)
{
	pm_assert_locked(&pcp->lock);
	zone_lock(m);
	for (int i = 0; i < n; i++) {
		struct pm_page *p = pm_list_entry(pcp->list.prev, struct pm_page, lru);

		pm_list_del(&p->lru);
		free_one(m, p, 0);
	}
	pm_spin_unlock(&m->zone_lock);
}

static struct pm_page *pcp_alloc(struct pm_machine *m)
{
	struct pm_pcp *pcp = this_cpu_pcp(m);
	struct pm_page *page = NULL;
	int count;

	pm_spin_lock(&pcp->lock);
	count = atomic_load_relaxed(&pcp->xcount);
	if (!count) {
		count = pcp_refill(m, pcp);
		/*
		 * This CPU allocates faster than it frees: let it keep more of what it frees
		 * next time, up to the machine's bound (Linux 6.7's nr_pcp_alloc).
		 */
		pcp->high = min(pcp->high + PCP_BATCH, m->pcp_high_max);
	}
	if (count) {
		page = pm_list_first_entry(&pcp->list, struct pm_page, lru);
		pm_list_del(&page->lru);
		atomic_store_relaxed(&page->xflags, 0);
		count--;
		/* Its descriptor and data were last written on another CPU. */
		if (page->free_cpu && page->free_cpu != pcp_tag(m, pcp))
			count_event(m, REMOTE_FRAMES, 1);
	}
	atomic_store_relaxed(&pcp->xcount, count);
	pm_spin_unlock(&pcp->lock);
	return page;
}

/* Free @n order-0 frames into this CPU's cache, under one lock. */
static void pcp_free(struct pm_machine *m, struct pm_page **pages, unsigned n)
{
	struct pm_pcp *pcp = this_cpu_pcp(m);
	uint8_t tag = pcp_tag(m, pcp);
	int count;

	pm_spin_lock(&pcp->lock);
	count = atomic_load_relaxed(&pcp->xcount);
	for (unsigned i = 0; i < n; i++) {
		atomic_store_relaxed(&pages[i]->xflags, PGF(PG_pcp));
		pages[i]->free_cpu = tag;
		pm_list_add(&pages[i]->lru, &pcp->list);
		if (unlikely(++count > pcp->high)) {
			/* high >= pcp_high_min > PCP_BATCH: there is a batch to give. */
			pcp_drain(m, pcp, PCP_BATCH);
			count -= PCP_BATCH;
		}
	}
	atomic_store_relaxed(&pcp->xcount, count);
	pm_spin_unlock(&pcp->lock);
}

/*
 * Give every per-CPU cache back to the buddy lists: before an allocation fails for good, the
 * frames another CPU keeps cached (or that stop a larger block from merging) must count. The
 * caches start small again, as Linux shrinks pcp->high under memory pressure.
 */
static void drain_all_pcp(struct pm_machine *m)
{
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		struct pm_pcp *pcp = &m->pcp[c];

		pm_spin_lock(&pcp->lock);
		pcp->high = m->pcp_high_min;
		if (atomic_load_relaxed(&pcp->xcount)) {
			pcp_drain(m, pcp, atomic_load_relaxed(&pcp->xcount));
			atomic_store_relaxed(&pcp->xcount, 0);
		}
		pm_spin_unlock(&pcp->lock);
	}
}

static struct pm_page *alloc_frames(struct pm_machine *m, unsigned order)
{
	struct pm_page *page;

	if (order == 0)
		return pcp_alloc(m);
	zone_lock(m);
	page = rmqueue(m, order);
	pm_spin_unlock(&m->zone_lock);
	return page;
}

/**
 * pm__alloc_frames() - allocate 2^@order contiguous, naturally aligned frames.
 * @flags: PM_ALLOC_ZERO to zero them.
 *
 * The descriptors come back with refcount 0, no flags, order 0; the caller makes them a folio
 * or a page table. Context: any; takes the per-CPU cache lock and/or zone_lock.
 * Return: the first frame, or NULL (out of memory or injected failure).
 */
struct pm_page *pm__alloc_frames(struct pm_machine *m, unsigned order, unsigned flags)
{
	struct pm_page *page;

	if (pm__should_fail(m))
		return NULL;
	page = alloc_frames(m, order);
	if (unlikely(!page)) {
		drain_all_pcp(m);
		page = alloc_frames(m, order);
	}
	if (unlikely(!page) && atomic_load_relaxed(&m->xrcu_pending) > 0 &&
	    !pm_rcu_read_ongoing()) {
		/* Page tables freed by munmap are still waiting for their grace period. */
		pm_rcu_barrier();
		drain_all_pcp(m);
		page = alloc_frames(m, order);
	}
	if (unlikely(!page)) {
		count_event(m, ALLOC_FAILURES, 1);
		return NULL;
	}
	if (flags & PM_ALLOC_ZERO)
		memset(page_address(m, page), 0, PAGE_SIZE << order);
	return page;
}

/**
 * pm__alloc_boot_frame() - the first frame of a fresh machine, for its zero page: straight
 * from the frontier, through no per-CPU cache, and counted nowhere, so that a new machine's
 * counters all read zero. Context: pm_machine_create(), before anyone else can use @m.
 */
struct pm_page *pm__alloc_boot_frame(struct pm_machine *m)
{
	struct pm_page *page;

	pm_spin_lock(&m->zone_lock);
	page = rmqueue(m, 0);
	pm_spin_unlock(&m->zone_lock);
	return page;
}

/**
 * pm__free_frames() - give back frames that nobody references any more.
 *
 * In debug builds the frames are poisoned and their generation counts bumped, so that a
 * stale user (a pin released twice, a walker that kept a pointer) reads garbage it can detect.
 */
/* A freed block's descriptors as a free frame's: no folio, no flags, refcount already 0. */
static void free_frames_prepare(struct pm_machine *m, struct pm_page *page, unsigned order)
{
	for (unsigned long i = 0; i < (1UL << order); i++) {
		pm_assert_cmp(atomic_load_relaxed(&page[i].xrefcount), ==, 0);
		pm_assert_cmp(atomic_load_relaxed(&page[i].xmapcount), ==, 0);
		atomic_store_relaxed(&page[i].xcompound_head, 0);
		atomic_store_relaxed(&page[i].xflags, 0);
#if PM_DEBUG >= 1
		atomic_add_relaxed(&page[i].xgen, 1);
#endif
	}
#if PM_DEBUG >= 1
	memset(page_address(m, page), PM_POISON_FREE, PAGE_SIZE << order);
#endif
}

void pm__free_frames(struct pm_machine *m, struct pm_page *page, unsigned order)
{
	free_frames_prepare(m, page, order);
	if (order == 0) {
		pcp_free(m, &page, 1);
	} else {
		zone_lock(m);
		free_one(m, page, order);
		pm_spin_unlock(&m->zone_lock);
	}
}

/*
 * pm__free_frames_batch() - free @n single frames, as many pm__free_frames(order 0) calls
 * would, taking this CPU's cache lock once (Linux's free_unref_folios).
 */
void pm__free_frames_batch(struct pm_machine *m, struct pm_page **pages, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free_frames_prepare(m, pages[i], 0);
	pcp_free(m, pages, n);
}

size_t pm__nr_free_frames(struct pm_machine *m)
{
	size_t n = 0;

	for (unsigned o = 0; o <= PM_MAX_ORDER; o++)
		n += atomic_load_relaxed(&m->xnr_free[o]) << o;
	for (unsigned c = 0; c < m->nr_cpus; c++)
		n += (size_t)atomic_load_relaxed(&m->pcp[c].xcount);
	return n + (m->nr_pages - atomic_load_relaxed(&m->xfrontier));
}

/*
 * The frontier: frames at and above it have never been allocated (their descriptors are
 * untouched and they count as free); a quiescent machine's frames in use all lie below it.
 */
unsigned long pm__frames_touched(struct pm_machine *m)
{
	return atomic_load_relaxed(&m->xfrontier);
}

/* For the checker: is @page the head of a free block (and of which order)? */
bool pm__frame_is_free(struct pm_page *page, unsigned *order)
{
	unsigned long f = atomic_load_relaxed(&page->xflags);

	if (f & PGF(PG_buddy)) {
		*order = atomic_load_relaxed(&page->xorder);
		return true;
	}
	if (f & PGF(PG_pcp)) {
		*order = 0;
		return true;
	}
	return false;
}
