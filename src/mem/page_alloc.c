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
 * go to the cache of the CPU the thread runs on (sched_getcpu), refilled from and drained to
 * the buddy lists PCP_BATCH frames at a time. Each cache has its own lock, so threads on
 * different CPUs never share a lock in the common case; a thread that migrates mid-operation
 * merely takes another CPU's lock, which stays correct. An allocation that finds nothing
 * drains every CPU's cache into the buddy lists and tries once more (drain_all_pages), so
 * frames cached on another CPU never cause an out-of-memory. If that is not enough either
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
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		pm_spin_init(&m->pcp[c].lock);
		atomic_store_relaxed(&m->pcp[c].xcount, 0);
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

static struct pm_page *pcp_alloc(struct pm_machine *m)
{
	struct pm_pcp *pcp = this_cpu_pcp(m);
	struct pm_page *page = NULL;

	pm_spin_lock(&pcp->lock);
	if (pm_list_empty(&pcp->list)) {
		int n = 0;

		pm_spin_lock(&m->zone_lock);
		while (n < PCP_BATCH) {
			struct pm_page *p = rmqueue(m, 0);

			if (!p)
				break;
			atomic_store_relaxed(&p->xflags, PGF(PG_pcp));
			pm_list_add_tail(&p->lru, &pcp->list);
			n++;
		}
		pm_spin_unlock(&m->zone_lock);
		atomic_store_relaxed(&pcp->xcount, atomic_load_relaxed(&pcp->xcount) + n);
	}
	if (!pm_list_empty(&pcp->list)) {
		page = pm_list_first_entry(&pcp->list, struct pm_page, lru);
		pm_list_del(&page->lru);
		atomic_store_relaxed(&page->xflags, 0);
		atomic_store_relaxed(&pcp->xcount, atomic_load_relaxed(&pcp->xcount) - 1);
	}
	pm_spin_unlock(&pcp->lock);
	return page;
}

static void pcp_free(struct pm_machine *m, struct pm_page *page)
{
	struct pm_pcp *pcp = this_cpu_pcp(m);

	pm_spin_lock(&pcp->lock);
	atomic_store_relaxed(&page->xflags, PGF(PG_pcp));
	pm_list_add(&page->lru, &pcp->list);
	if (atomic_load_relaxed(&pcp->xcount) + 1 > PCP_HIGH) {
		/* Drain the coldest batch back to the buddy lists. */
		pm_spin_lock(&m->zone_lock);
		for (int i = 0; i < PCP_BATCH; i++) {
			struct pm_page *p = pm_list_entry(pcp->list.prev, struct pm_page, lru);

			pm_list_del(&p->lru);
			free_one(m, p, 0);
		}
		pm_spin_unlock(&m->zone_lock);
		atomic_store_relaxed(&pcp->xcount, atomic_load_relaxed(&pcp->xcount) + 1 - PCP_BATCH);
	} else {
		atomic_store_relaxed(&pcp->xcount, atomic_load_relaxed(&pcp->xcount) + 1);
	}
	pm_spin_unlock(&pcp->lock);
}

/*
 * Give every per-CPU cache back to the buddy lists: before an allocation fails for good, the
 * frames another CPU keeps cached (or that stop a larger block from merging) must count.
 */
static void drain_all_pcp(struct pm_machine *m)
{
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		struct pm_pcp *pcp = &m->pcp[c];

		pm_spin_lock(&pcp->lock);
		if (!pm_list_empty(&pcp->list)) {
			pm_spin_lock(&m->zone_lock);
			while (!pm_list_empty(&pcp->list)) {
				struct pm_page *p = pm_list_first_entry(&pcp->list, struct pm_page, lru);

				pm_list_del(&p->lru);
				free_one(m, p, 0);
			}
			pm_spin_unlock(&m->zone_lock);
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
	pm_spin_lock(&m->zone_lock);
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
 * pm__free_frames() - give back frames that nobody references any more.
 *
 * In debug builds the frames are poisoned and their generation counts bumped, so that a
 * stale user (a pin released twice, a walker that kept a pointer) reads garbage it can detect.
 */
void pm__free_frames(struct pm_machine *m, struct pm_page *page, unsigned order)
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
	if (order == 0) {
		pcp_free(m, page);
	} else {
		pm_spin_lock(&m->zone_lock);
		free_one(m, page, order);
		pm_spin_unlock(&m->zone_lock);
	}
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
