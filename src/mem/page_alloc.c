// SPDX-License-Identifier: MIT
/*
 * page_alloc.c - the buddy allocator for orders 0..9 and its per-CPU caches of free frames.
 *
 * Ownership. A free frame is either the head of a free block on its zone's free_area[order]
 * (PG_buddy, order in page->xorder, linked through page->lru) under that zone's lock
 * (zone_lock below: each zone has its own, see "Homes"), or a single frame in a
 * per-CPU cache (PG_pcp) under that cache's lock. Nothing else touches a free frame's list
 * link. Speculative readers (GUP-fast) may still load xflags, xcompound_head and xrefcount of
 * a free frame: xrefcount is 0, so their add-unless-zero fails, which is why frees reset the
 * refcount before the frame is published as free.
 *
 * Per-CPU caches. Order-0 allocations and frees, by far the most common (every 4 KiB fault),
 * go to the cache of the CPU the thread runs on (pm__this_cpu), as Linux's pcp lists do: a free
 * goes back to the freeing CPU's cache, an allocation takes the hottest frame of its own. Each
 * cache has its own lock, so threads on different CPUs never share a lock or a line in the
 * common case; a thread that migrates mid-operation merely takes another CPU's lock, which
 * stays correct. zone_lock is taken only to refill an empty cache (at least PCP_BATCH frames,
 * usually one block: one list operation, split outside the lock) and to drain PCP_BATCH frames
 * when a cache passes its high mark. The high mark tunes itself as Linux 6.7's does: each
 * refill raises it by a batch, up to pcp_high_max (an eighth of memory over all CPUs), so a
 * CPU that allocates and frees a working set in turn (munmap, then faults) soon keeps all of
 * it, and its frames stay its own: no zone_lock, no buddy merging, no line written by another
 * CPU.
 *
 * Two kinds. Each cache keeps two lists, as Linux's pcp lists are per migratetype: user
 * memory (anonymous, shmem and COW pages: PCP_MOVABLE) and page tables (PM_ALLOC_UNMOVABLE:
 * PCP_UNMOVABLE), under one lock, one count and one high mark. A CPU that maps, faults and
 * unmaps the same area round after round (every will-it-scale fault case, and shmem_fault's
 * object) must get its user pages back as the run of adjacent frames it gave up, because
 * scattered frames are slower to zero. On one shared list a page table, taken from the hot
 * end between two user pages and freed a grace period later somewhere else in the run,
 * breaks that run a little more every round, and nothing ever mends it (docs/perf-log.md,
 * 2026-12-03, "one list for two kinds"). So an allocation of one kind refills its own list
 * only, and the user list keeps its order (tests/unit/test_pcp.c checks it); a drain gives
 * back the coldest frames of the longer list, so neither kind keeps the cache to itself.
 *
 * An allocation that finds nothing drains every CPU's cache into the buddy lists, sets
 * the high marks back to pcp_high_min, and tries once more (pm__drain_all_pcp), so frames cached
 * on another CPU never cause an out-of-memory. If that is not enough either
 * and page tables are waiting for an RCU grace period to be freed (munmap, teardown), it waits
 * for them (pm_rcu_barrier) and tries again: frames freed "soon" count too. Allocations never
 * happen inside an RCU read section or under a spinlock, so waiting here is allowed.
 *
 * THP-sized blocks. A freed max-order block of user memory (a THP's last put) goes to the
 * freeing CPU's cache of its zone, on a list of its own, up to pcp_thp_high blocks (within
 * the cache's share of memory, as for order 0: none on a small machine); an
 * allocation of that order takes from this CPU's caches first, the oldest block first, in the
 * zone order of any larger block (below), before any zone's lock. This is Linux's pcp list for
 * THP-sized pages (5.13): a CPU that unmaps and faults THPs in turn never takes a zone lock nor
 * writes a line another CPU's faults write. The oldest first keeps a mapping's run: a teardown
 * frees its THPs in address order, and the refaults take them back in the same order. A cached
 * block's head is PG_pcp with its order in xorder, so the checker and compaction's scanner
 * step over it as one free block; the drain before an allocation fails, and compaction's own,
 * give it back to the buddy lists.
 *
 * Lazy descriptors. A machine may be far larger than the host's memory as long as the work
 * touches little of it: its frames and the descriptor array are reserved, not written, at
 * creation (machine.c), and the frames above a zone's frontier (z->xfrontier, a multiple of 2 MiB)
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
 * Invariant (F): pm__nr_free_frames() = sum over zones z of (sum(z.nr_free[o] << o)
 *                                         + (z.end - z.frontier)) + sum(pcp[c].count).
 */
#include <sched.h>

#include "mem/mem.h"

#define PCP_HIGH_FRACTION 8 /* per-CPU caches hold at most this share of memory, together */
#define PCP_THP_HIGH 4	    /* max-order blocks per cache, at most (within that share) */

/*
 * Homes. Per-CPU caches alone keep a CPU's frames its own only while they fit its cache; past
 * that, frames drain to the buddy lists and come back in batches, and two CPUs that refill
 * from one set of lists at once end up with their frames interleaved a batch at a time
 * (PCP_BATCH frames, whose descriptors fill one 4 KiB page of the descriptor array). No line
 * is shared then, yet on some hosts two CPUs so placed lose as much as if lines were, and on
 * others nothing: it depends on where the host runs the CPUs (docs/perf-log.md, 2026-12-03,
 * "interleaved descriptors"), and a machine should not depend on that. So the frames are cut
 * into homes of at least ZONE_MIN_PAGES frames (runs of descriptors that long cost nothing
 * where interleaving costs most), at most one per CPU, each a buddy zone with its own
 * lock, lists and frontier, like the memory of a NUMA node. A CPU's cache refills from its
 * home first, and from the other zones, in turn, only when its home has nothing. As Linux
 * keeps a pcp list per zone, each CPU has a cache per zone: a frame freed on a CPU goes to
 * that CPU's cache of the frame's own zone, so a CPU that frees what another faulted (task 0
 * tearing down an object both filled) does not allocate the other home's frames next, and a
 * CPU that overflowed into another zone keeps those frames cached for its next overflow.
 * Larger blocks (THP, hugetlb, page-table-free orders) come from the lowest zone that has
 * one, whichever CPU asks, so that a mapping's huge pages stay one physically contiguous
 * run, as registrations fold them. A machine
 * smaller than two homes has a single zone, and the allocator is the one-zone buddy it was.
 */
#define ZONE_MIN_PAGES (64UL << (20 - PAGE_SHIFT))

/*
 * The movable zone. pm_config.movable_bytes sets the top of memory apart as Linux's
 * ZONE_MOVABLE (movablecore=): one more buddy zone, zones[nr_normal_zones], above the homes,
 * nobody's home. User memory (anonymous, shmem, THP: flags 0) is taken from it first, as
 * Linux's zonelists try ZONE_MOVABLE before ZONE_NORMAL, and from the homes once it is full;
 * page tables (PM_ALLOC_UNMOVABLE) and the zero page never go there. Every CPU keeps a
 * per-CPU cache of the movable zone's frames among its away caches, so the order-0 fast path
 * stays per-CPU: only refills and drains take the movable zone's lock. PM_ALLOC_NO_MOVABLE_ZONE
 * and PM_ALLOC_MOVABLE_ZONE restrict a user allocation to one side, for migration
 * (mm/migrate.c) and long-term pins (gup/gup.c). The hugetlb pool is allocated as user memory
 * and may lie anywhere, as on x86.
 */
static bool has_movable_zone(const struct pm_machine *m)
{
	return m->nr_normal_zones < m->nr_zones;
}

/* The zone that holds @pfn: homes are zone_pages long, the last home takes the rest up to the
 * movable zone. */
static struct pm_zone *pfn_zone(struct pm_machine *m, unsigned long pfn)
{
	unsigned long z;

	if (pfn >= m->movable_base)
		return &m->zones[m->nr_normal_zones];
	z = pfn / m->zone_pages;
	return &m->zones[z < m->nr_normal_zones ? z : m->nr_normal_zones - 1];
}

/* zone_lock, counted: pm_stats.zone_lock_acquisitions says how often CPUs share it. */
static void zone_lock(struct pm_machine *m, struct pm_zone *z)
{
	pm_spin_lock(&z->lock);
	count_event(m, ZONE_LOCK_ACQUISITIONS, 1);
}

static void zone_unlock(struct pm_zone *z)
{
	pm_spin_unlock(&z->lock);
}

static void set_free_block(struct pm_page *page, unsigned order)
{
	atomic_store_relaxed(&page->xorder, (uint8_t)order);
	atomic_store_relaxed(&page->xflags, PGF(PG_buddy));
}

/* Caller holds z's lock. */
static void add_to_free_area(struct pm_zone *z, struct pm_page *page, unsigned order)
{
	pm_assert_locked(&z->lock);
	set_free_block(page, order);
	pm_list_add(&page->lru, &z->free_area[order]);
	atomic_store_relaxed(&z->xnr_free[order], atomic_load_relaxed(&z->xnr_free[order]) + 1);
}

/* Caller holds z's lock. */
static void del_from_free_area(struct pm_zone *z, struct pm_page *page, unsigned order)
{
	pm_assert_locked(&z->lock);
	pm_list_del(&page->lru);
	atomic_store_relaxed(&page->xflags, 0);
	atomic_store_relaxed(&z->xnr_free[order], atomic_load_relaxed(&z->xnr_free[order]) - 1);
}

/*
 * The zone's next never-used max-order block, its descriptors made this machine's; NULL when
 * its frontier has reached its end. Caller holds z's lock.
 */
static struct pm_page *frontier_take(struct pm_machine *m, struct pm_zone *z)
{
	unsigned long pfn = atomic_load_relaxed(&z->xfrontier);
	struct pm_page *page;

	pm_assert_locked(&z->lock);
	if (pfn >= z->end)
		return NULL;
	page = pfn_to_page(m, pfn);
	for (unsigned long i = 0; i < (1UL << PM_MAX_ORDER); i++)
		page[i].mslot = m->slot;
	atomic_store_relaxed(&z->xfrontier, pfn + (1UL << PM_MAX_ORDER));
	return page;
}

/*
 * Take a block of @order from @z, splitting a larger one if needed; the buddy lists first,
 * then the never-used memory at the frontier. Caller holds z's lock.
 */
static struct pm_page *rmqueue(struct pm_machine *m, struct pm_zone *z, unsigned order)
{
	struct pm_page *page = NULL;
	unsigned o;

	pm_assert_locked(&z->lock);

	for (o = order; o <= PM_MAX_ORDER; o++) {
		if (pm_list_empty(&z->free_area[o]))
			continue;
		page = pm_list_first_entry(&z->free_area[o], struct pm_page, lru);
		del_from_free_area(z, page, o);
		break;
	}
	if (!page) {
		page = frontier_take(m, z);
		if (!page)
			return NULL;
		o = PM_MAX_ORDER;
	}
	while (o > order) {
		o--;
		add_to_free_area(z, page + (1UL << o), o);
	}
	atomic_store_relaxed(&page->xorder, 0);
	return page;
}

/*
 * Give a block back to its zone @z, merging with its buddies (a zone is max-order aligned,
 * so a buddy is always in the same zone). Caller holds z's lock.
 */
static void free_one(struct pm_machine *m, struct pm_zone *z, struct pm_page *page,
		     unsigned order)
{
	unsigned long pfn = page_to_pfn(m, page);

	pm_assert_locked(&z->lock);
	while (order < PM_MAX_ORDER) {
		unsigned long buddy_pfn = pfn ^ (1UL << order);
		struct pm_page *buddy;

		if (buddy_pfn >= z->end)
			break;
		buddy = pfn_to_page(m, buddy_pfn);
		if (!page_test(buddy, PG_buddy) || atomic_load_relaxed(&buddy->xorder) != order)
			break;
		del_from_free_area(z, buddy, order);
		pfn &= ~(1UL << order);
		order++;
	}
	add_to_free_area(z, pfn_to_page(m, pfn), order);
}

static void pcp_init(struct pm_machine *m, struct pm_pcp *pcp, unsigned zone)
{
	pm_spin_init(&pcp->lock);
	atomic_store_relaxed(&pcp->xcount, 0);
	pcp->high = m->pcp_high_min;
	pcp->home = zone;
	atomic_store_relaxed(&pcp->xids, 0);
	pcp->nr_thp = 0;
	atomic_store_relaxed(&pcp->xnr_thp, 0);
	pm_list_init(&pcp->thp);
	pcp->nr_hugetlb = 0;
	pm_list_init(&pcp->hugetlb);
	for (unsigned l = 0; l < PCP_NR_LISTS; l++) {
		pcp->nr[l] = 0;
		pm_list_init(&pcp->lists[l]);
	}
}

int pm__page_alloc_init(struct pm_machine *m)
{
	unsigned long normal = m->movable_base, nz;

	pm_assert(normal > 0 && normal <= m->nr_pages && !(normal & ((1UL << PM_MAX_ORDER) - 1)));
	nz = min(normal / ZONE_MIN_PAGES, (unsigned long)m->nr_cpus);
	m->nr_normal_zones = nz ? (unsigned)nz : 1;
	m->nr_zones = m->nr_normal_zones + (normal < m->nr_pages);
	m->zone_pages = ALIGN_DOWN(normal / m->nr_normal_zones, 1UL << PM_MAX_ORDER);
	if (posix_memalign((void **)&m->zones, PM_CACHELINE, m->nr_zones * sizeof(*m->zones)))
		return -ENOMEM;
	for (unsigned i = 0; i < m->nr_zones; i++) {
		struct pm_zone *z = &m->zones[i];

		memset(z, 0, sizeof(*z));
		pm_spin_init(&z->lock);
		if (i == m->nr_normal_zones) {
			z->base = normal;
			z->end = m->nr_pages;
		} else {
			z->base = i * m->zone_pages;
			z->end = i + 1 == m->nr_normal_zones ? normal : z->base + m->zone_pages;
		}
		/*
		 * Every frame starts above its zone's frontier: nothing is written per frame now.
		 * Fresh memory is handed out lowest pfns first, so consecutive allocations from a
		 * fresh zone get ascending, adjacent frames (a split hands out the lower half and
		 * keeps the upper one at the head of its list), and THP-backed ranges form long
		 * physically contiguous runs, as they tend to on a freshly booted kernel.
		 */
		atomic_store_relaxed(&z->xfrontier, z->base);
		for (unsigned o = 0; o <= PM_MAX_ORDER; o++)
			pm_list_init(&z->free_area[o]);
	}
	/*
	 * Linux's pcp bounds: high_min four batches, high_max an eighth of memory split among
	 * the CPUs (MIN_PERCPU_PAGELIST_HIGH_FRACTION), never below high_min.
	 */
	m->pcp_high_min = 4 * PCP_BATCH;
	m->pcp_high_max = (int)min(m->nr_pages / (PCP_HIGH_FRACTION * m->nr_cpus),
				   (unsigned long)INT_MAX / 2);
	m->pcp_high_max = max(m->pcp_high_max, m->pcp_high_min);
	/* Blocks count against the same share: a machine whose share is below a block caches
	 * none, as Linux's pcp high mark drains a THP at once. */
	m->pcp_thp_high = min(m->pcp_high_max >> PM_MAX_ORDER, PCP_THP_HIGH);
	if (m->nr_zones > 1 &&
	    posix_memalign((void **)&m->pcp_away, PM_CACHELINE,
			   (size_t)m->nr_cpus * m->nr_zones * sizeof(*m->pcp_away))) {
		free(m->zones);
		m->zones = NULL;
		return -ENOMEM;
	}
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		pcp_init(m, &m->pcp[c], c % m->nr_normal_zones);
		for (unsigned z = 0; m->pcp_away && z < m->nr_zones; z++)
			pcp_init(m, &m->pcp_away[c * m->nr_zones + z], z);
	}
	return 0;
}

void pm__page_alloc_exit(struct pm_machine *m)
{
	free(m->pcp_away);
	m->pcp_away = NULL;
	free(m->zones);
	m->zones = NULL;
}

/* CPU @cpu's cache of zone @zone's frames: its home cache, or one of its away caches. */
static struct pm_pcp *cpu_zone_pcp(struct pm_machine *m, unsigned cpu, unsigned zone)
{
	return zone == m->pcp[cpu].home ? &m->pcp[cpu] : &m->pcp_away[cpu * m->nr_zones + zone];
}

/* Is a lock of @m's page allocator - a CPU's cache, home or away, or a zone - held, by any
 * thread? For a fork child, which cannot take one that a thread it lacks held (mem.c). */
bool pm__page_alloc_locked(struct pm_machine *m)
{
	bool held = false;

	for (unsigned c = 0; c < m->nr_cpus; c++) {
		held |= pm_spin_is_locked(&m->pcp[c].lock);
		for (unsigned z = 0; m->pcp_away && z < m->nr_zones; z++)
			held |= pm_spin_is_locked(&m->pcp_away[c * m->nr_zones + z].lock);
	}
	for (unsigned z = 0; z < m->nr_zones; z++)
		held |= pm_spin_is_locked(&m->zones[z].lock);
	return held;
}

/* The tag page->free_cpu keeps for CPU @cpu's caches: 1..255. */
static uint8_t cpu_tag(unsigned cpu)
{
	return (uint8_t)(cpu % 255 + 1);
}

/* Frames on the order-0 lists of @pcp, which its high mark bounds. */
static int pcp_count(const struct pm_pcp *pcp)
{
	return pcp->nr[PCP_MOVABLE] + pcp->nr[PCP_UNMOVABLE];
}

/* Publish @pcp's counts for readers without its lock (pm__nr_free_frames and the like). */
static void pcp_publish(struct pm_pcp *pcp)
{
	atomic_store_relaxed(&pcp->xcount, pcp_count(pcp) + (pcp->nr_thp << PM_MAX_ORDER));
	atomic_store_relaxed(&pcp->xnr_thp, pcp->nr_thp);
}

static void pcp_add_tail(struct pm_pcp *pcp, struct pm_page *page, enum pcp_list l)
{
	atomic_store_relaxed(&page->xorder, 0);
	atomic_store_relaxed(&page->xflags, PGF(PG_pcp));
	pm_list_add_tail(&page->lru, &pcp->lists[l]);
}

/*
 * Refill an empty cache from zone @z (Linux's rmqueue_bulk): at least PCP_BATCH frames,
 * smallest blocks first, as __rmqueue_smallest takes them, so that fragments are used before a
 * large block is split. Each block is one list operation under the zone's lock and is split
 * into frames here, outside it, in ascending pfn order, onto list @l; on an unfragmented zone
 * a refill is one block. Caller holds pcp->lock. Return: the number of frames added.
 */
static int pcp_refill_zone(struct pm_machine *m, struct pm_zone *z, struct pm_pcp *pcp,
			   enum pcp_list l)
{
	struct pm_page *block[PCP_BATCH];
	unsigned order[PCP_BATCH];
	int nblocks = 0, n = 0;

	pm_assert_locked(&pcp->lock);
	zone_lock(m, z);
	for (unsigned o = 0; o < PCP_BATCH_ORDER && n < PCP_BATCH; o++) {
		while (n < PCP_BATCH && !pm_list_empty(&z->free_area[o])) {
			block[nblocks] = pm_list_first_entry(&z->free_area[o], struct pm_page, lru);
			del_from_free_area(z, block[nblocks], o);
			order[nblocks++] = o;
			n += 1 << o;
		}
	}
	if (n < PCP_BATCH && (block[nblocks] = rmqueue(m, z, PCP_BATCH_ORDER))) {
		order[nblocks++] = PCP_BATCH_ORDER;
		n += PCP_BATCH;
	}
	zone_unlock(z);
	for (int b = 0; b < nblocks; b++)
		for (unsigned long i = 0; i < (1UL << order[b]); i++)
			pcp_add_tail(pcp, block[b] + i, l);
	pcp->nr[l] += n;
	return n;
}

/*
 * Give @n frames back to the buddy lists, the coldest of the longer list each time, so that
 * neither kind of memory keeps the cache to itself. Every frame on a cache is of the zone it
 * caches (refills come from that zone, frees go to the cache of the frame's zone), so one zone
 * lock covers the batch. A batch's aligned runs of ascending frames go back as whole blocks,
 * one free_one() each instead of one per frame and a merge per pair: a cache gives back in
 * the order frames came to it, and a teardown frees a mapping's pages in the order they were
 * allocated, so that is the common case (a CPU tearing down what another CPU faulted frees
 * those frames into its cache of the other CPU's home and drains them as runs of PCP_BATCH;
 * docs/perf-log.md, 2026-12-03, "a drain gives back runs").
 * Caller holds pcp->lock and publishes xcount after.
 */
static void pcp_drain(struct pm_machine *m, struct pm_pcp *pcp, int n)
{
	struct pm_zone *z = &m->zones[pcp->home];

	pm_assert_locked(&pcp->lock);
	pm_assert_cmp(n, <=, pcp_count(pcp));
	zone_lock(m, z);
	while (n > 0) {
		struct pm_page *run[PCP_BATCH];
		int nr = 0;

		/* Up to a batch from the cold ends, as they come. */
		while (nr < n && nr < PCP_BATCH) {
			enum pcp_list l = pcp->nr[PCP_UNMOVABLE] > pcp->nr[PCP_MOVABLE] ?
					  PCP_UNMOVABLE : PCP_MOVABLE;
			struct pm_page *p = pm_list_entry(pcp->lists[l].prev, struct pm_page, lru);

			pm_assert(pfn_zone(m, page_to_pfn(m, p)) == z);
			pm_list_del(&p->lru);
			pcp->nr[l]--;
			run[nr++] = p;
		}
		n -= nr;
		/* The largest aligned run of ascending frames at i, up to a batch. */
		for (int i = 0; i < nr;) {
			unsigned long pfn = page_to_pfn(m, run[i]);
			unsigned order = 0;

			while (order < PCP_BATCH_ORDER && !(pfn & ((2UL << order) - 1)) &&
			       i + (2 << order) <= nr) {
				int j, len = 1 << order;

				for (j = 0; j < len; j++)
					if (run[i + len + j] != run[i] + len + j)
						break;
				if (j < len)
					break;
				order++;
			}
			free_one(m, z, run[i], order);
			i += 1 << order;
		}
	}
	zone_unlock(z);
}

/* A frame from list @l of @pcp, refilled from its zone if empty; NULL when both are. */
static struct pm_page *pcp_take(struct pm_machine *m, struct pm_pcp *pcp, enum pcp_list l,
				uint8_t tag)
{
	struct pm_page *page = NULL;

	pm_spin_lock(&pcp->lock);
	/*
	 * An empty list refills from the zone. This CPU allocates faster than it frees: let it
	 * keep more of what it frees next time, up to the machine's bound (Linux 6.7's
	 * nr_pcp_alloc).
	 */
	if (!pcp->nr[l] && pcp_refill_zone(m, &m->zones[pcp->home], pcp, l))
		pcp->high = min(pcp->high + PCP_BATCH, m->pcp_high_max);
	if (pcp->nr[l]) {
		page = pm_list_first_entry(&pcp->lists[l], struct pm_page, lru);
		pm_list_del(&page->lru);
		pcp->nr[l]--;
		atomic_store_relaxed(&page->xflags, 0);
		/* Its descriptor and data were last written on another CPU. */
		if (page->free_cpu && page->free_cpu != tag)
			count_event(m, REMOTE_FRAMES, 1);
	}
	/* A refill of one list while the other is full: the excess goes, as a free's would. */
	if (unlikely(pcp_count(pcp) > pcp->high))
		pcp_drain(m, pcp, pcp_count(pcp) - pcp->high);
	pcp_publish(pcp);
	pm_spin_unlock(&pcp->lock);
	return page;
}

/*
 * User memory: this CPU's cache of the movable zone first, when there is one (and @flags
 * allow it). Then this CPU's home cache and home zone; then, home by home, its cache of that
 * zone's frames and the zone itself (Linux's zonelist fallback, with its per-zone pcp lists).
 */
static struct pm_page *pcp_alloc(struct pm_machine *m, enum pcp_list l, unsigned flags)
{
	unsigned cpu = pm__this_cpu(m), home = m->pcp[cpu].home, nn = m->nr_normal_zones;
	struct pm_page *page = NULL;

	if (has_movable_zone(m) && l == PCP_MOVABLE && !(flags & PM_ALLOC_NO_MOVABLE_ZONE)) {
		page = pcp_take(m, cpu_zone_pcp(m, cpu, nn), l, cpu_tag(cpu));
		if (page || (flags & PM_ALLOC_MOVABLE_ZONE))
			return page;
	} else if (flags & PM_ALLOC_MOVABLE_ZONE) {
		return NULL;
	}
	page = pcp_take(m, &m->pcp[cpu], l, cpu_tag(cpu));
	for (unsigned i = 1; !page && i < nn; i++)
		page = pcp_take(m, cpu_zone_pcp(m, cpu, (home + i) % nn), l, cpu_tag(cpu));
	return page;
}

/* May an allocation with @flags take frames of zone @i? */
static bool zone_allowed(const struct pm_machine *m, unsigned i, unsigned flags)
{
	if (i == m->nr_normal_zones)
		return !(flags & (PM_ALLOC_UNMOVABLE | PM_ALLOC_NO_MOVABLE_ZONE));
	return !(flags & PM_ALLOC_MOVABLE_ZONE);
}

/*
 * Free @n order-0 frames into this CPU's caches: each to the cache of its own zone (its home
 * cache in the common case), so that a CPU never allocates another home's frames while its
 * own home has some. One lock for a run of frames of one zone.
 */
static void pcp_free(struct pm_machine *m, struct pm_page **pages, unsigned n,
		     enum pcp_list l)
{
	unsigned cpu = pm__this_cpu(m);
	struct pm_pcp *home = &m->pcp[cpu], *locked = NULL;
	struct pm_zone *hz = &m->zones[home->home];
	uint8_t tag = cpu_tag(cpu);

	for (unsigned i = 0; i < n; i++) {
		unsigned long pfn = page_to_pfn(m, pages[i]);
		struct pm_pcp *pcp = home;

		if (unlikely(pfn < hz->base || pfn >= hz->end))
			pcp = cpu_zone_pcp(m, cpu, (unsigned)(pfn_zone(m, pfn) - m->zones));
		if (pcp != locked) {
			if (locked) {
				pcp_publish(locked);
				pm_spin_unlock(&locked->lock);
			}
			pm_spin_lock(&pcp->lock);
			locked = pcp;
		}
		atomic_store_relaxed(&pages[i]->xflags, PGF(PG_pcp));
		pages[i]->free_cpu = tag;
		pm_list_add(&pages[i]->lru, &pcp->lists[l]);
		pcp->nr[l]++;
		/* high >= pcp_high_min > PCP_BATCH: there is a batch to give. */
		if (unlikely(pcp_count(pcp) > pcp->high))
			pcp_drain(m, pcp, PCP_BATCH);
	}
	if (locked) {
		pcp_publish(locked);
		pm_spin_unlock(&locked->lock);
	}
}

/*
 * THP-sized blocks (see the top comment): this CPU's caches, in the zone order of
 * alloc_frames(), before any zone's lock. Return: the block, or NULL.
 */
static struct pm_page *thp_take(struct pm_machine *m, unsigned flags)
{
	unsigned cpu = pm__this_cpu(m);

	for (unsigned n = 0; n < m->nr_zones; n++) {
		unsigned i = has_movable_zone(m) ? (n + m->nr_normal_zones) % m->nr_zones : n;
		struct pm_pcp *pcp = cpu_zone_pcp(m, cpu, i);
		struct pm_page *page = NULL;

		/* Tested before locked: a cache with no block is not written. */
		if (!zone_allowed(m, i, flags) || !atomic_load_relaxed(&pcp->xnr_thp))
			continue;
		pm_spin_lock(&pcp->lock);
		if (pcp->nr_thp) {
			page = pm_list_first_entry(&pcp->thp, struct pm_page, lru);
			pm_list_del(&page->lru);
			pcp->nr_thp--;
			atomic_store_relaxed(&page->xorder, 0);
			atomic_store_relaxed(&page->xflags, 0);
			pcp_publish(pcp);
		}
		pm_spin_unlock(&pcp->lock);
		if (page)
			return page;
	}
	return NULL;
}

/*
 * Keep a freed max-order block of user memory in this CPU's cache of its zone, oldest first,
 * unless the cache holds pcp_thp_high already. Return: whether it was kept.
 */
static bool thp_put(struct pm_machine *m, struct pm_page *page)
{
	unsigned cpu = pm__this_cpu(m);
	unsigned long pfn = page_to_pfn(m, page);
	struct pm_pcp *pcp = cpu_zone_pcp(m, cpu, (unsigned)(pfn_zone(m, pfn) - m->zones));
	bool kept = false;

	pm_spin_lock(&pcp->lock);
	if (pcp->nr_thp < m->pcp_thp_high) {
		atomic_store_relaxed(&page->xorder, PM_MAX_ORDER);
		atomic_store_relaxed(&page->xflags, PGF(PG_pcp));
		page->free_cpu = cpu_tag(cpu);
		pm_list_add_tail(&page->lru, &pcp->thp);
		pcp->nr_thp++;
		pcp_publish(pcp);
		kept = true;
	}
	pm_spin_unlock(&pcp->lock);
	return kept;
}

/* Give every cached max-order block of @pcp back to its zone. Caller holds pcp->lock. */
static void thp_drain(struct pm_machine *m, struct pm_pcp *pcp)
{
	struct pm_zone *z = &m->zones[pcp->home];

	pm_assert_locked(&pcp->lock);
	zone_lock(m, z);
	while (pcp->nr_thp) {
		struct pm_page *page = pm_list_first_entry(&pcp->thp, struct pm_page, lru);

		pm_assert(pfn_zone(m, page_to_pfn(m, page)) == z);
		pm_list_del(&page->lru);
		pcp->nr_thp--;
		free_one(m, z, page, PM_MAX_ORDER);
	}
	zone_unlock(z);
}

/*
 * Give every per-CPU cache back to the buddy lists: before an allocation fails for good, the
 * frames another CPU keeps cached (or that stop a larger block from merging) must count. The
 * caches start small again, as Linux shrinks pcp->high under memory pressure.
 */
void pm__drain_all_pcp(struct pm_machine *m)
{
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		for (unsigned z = 0; z < m->nr_zones; z++) {
			struct pm_pcp *pcp = cpu_zone_pcp(m, c, z);

			pm_spin_lock(&pcp->lock);
			pcp->high = m->pcp_high_min;
			if (pcp_count(pcp))
				pcp_drain(m, pcp, pcp_count(pcp));
			if (pcp->nr_thp)
				thp_drain(m, pcp);
			pcp_publish(pcp);
			pm_spin_unlock(&pcp->lock);
		}
	}
}

/*
 * Order 0 through this CPU's caches; larger blocks from the movable zone first (user memory),
 * then from the lowest home that has one.
 */
static struct pm_page *alloc_frames(struct pm_machine *m, unsigned order, unsigned flags)
{
	struct pm_page *page = NULL;

	if (order == 0)
		return pcp_alloc(m, flags & PM_ALLOC_UNMOVABLE ? PCP_UNMOVABLE : PCP_MOVABLE,
				 flags);
	if (order == PM_MAX_ORDER && !(flags & PM_ALLOC_UNMOVABLE) && (page = thp_take(m, flags)))
		return page;
	for (unsigned n = 0; n < m->nr_zones && !page; n++) {
		/* n = 0 is the movable zone when there is one, then the homes in order. */
		unsigned i = has_movable_zone(m) ? (n + m->nr_normal_zones) % m->nr_zones : n;

		if (!zone_allowed(m, i, flags))
			continue;
		zone_lock(m, &m->zones[i]);
		page = rmqueue(m, &m->zones[i], order);
		zone_unlock(&m->zones[i]);
	}
	return page;
}

/*
 * pm__zone_block_usage() - for compaction (mm/migrate.c): the frames in use in each 2 MiB
 * block of zone @zi, @used[(pfn - base) >> 9]; frames on buddy lists, in per-CPU caches and
 * above the frontier are free. A racy snapshot, as Linux's compaction scanners take theirs.
 */
void pm__zone_block_usage(struct pm_machine *m, unsigned zi, uint16_t *used)
{
	struct pm_zone *z = &m->zones[zi];
	unsigned long top = atomic_load_relaxed(&z->xfrontier);

	memset(used, 0, ((z->end - z->base) >> PM_MAX_ORDER) * sizeof(*used));
	for (unsigned long pfn = z->base; pfn < top;) {
		unsigned long f = atomic_load_relaxed(&pfn_to_page(m, pfn)->xflags);

		if (f & (PGF(PG_buddy) | PGF(PG_pcp))) {
			pfn += 1UL << min(atomic_load_relaxed(&pfn_to_page(m, pfn)->xorder),
					   (uint8_t)PM_MAX_ORDER);
			continue;
		}
		used[(pfn - z->base) >> PM_MAX_ORDER]++;
		pfn++;
	}
}

/*
 * pm__alloc_frame_in_blocks() - compaction's free scanner: one free frame of zone @zi that
 * lies in a 2 MiB block marked in @target (indexed as pm__zone_block_usage()'s), taken from
 * the buddy lists below order 9 (a free 2 MiB block is what compaction makes, not what it
 * spends). The rest of a split block goes back to the lists. Return: the frame (refcount 0,
 * no flags), or NULL (none, or an injected failure).
 */
struct pm_page *pm__alloc_frame_in_blocks(struct pm_machine *m, unsigned zi,
					  const uint8_t *target)
{
	struct pm_zone *z = &m->zones[zi];
	struct pm_page *page = NULL;
	unsigned o;

	if (pm__should_fail(m))
		return NULL;
	zone_lock(m, z);
	for (o = 0; o < PM_MAX_ORDER && !page; o++) {
		struct pm_list *pos;

		pm_list_for_each(pos, &z->free_area[o]) {
			struct pm_page *p = pm_list_entry(pos, struct pm_page, lru);

			if (target[(page_to_pfn(m, p) - z->base) >> PM_MAX_ORDER]) {
				page = p;
				break;
			}
		}
	}
	if (page) {
		o--;
		del_from_free_area(z, page, o);
		while (o > 0) {
			o--;
			add_to_free_area(z, page + (1UL << o), o);
		}
		atomic_store_relaxed(&page->xorder, 0);
	}
	zone_unlock(z);
	return page;
}

/* Free 2 MiB blocks of zone @z: order-9 buddy blocks and never-used blocks. */
static unsigned long zone_free_pmd_blocks(struct pm_zone *z)
{
	return atomic_load_relaxed(&z->xnr_free[PM_MAX_ORDER]) +
	       ((z->end - atomic_load_relaxed(&z->xfrontier)) >> PM_MAX_ORDER);
}

/*
 * pm__free_pmd_blocks() - free naturally aligned 2 MiB blocks in the zones an allocation with
 * @flags may use: order-9 buddy blocks, never-used blocks above the frontiers and blocks in
 * per-CPU caches (order-0 frames in caches are not counted: a drain may merge them). A racy
 * snapshot.
 */
unsigned long pm__free_pmd_blocks(struct pm_machine *m, unsigned flags)
{
	unsigned long n = 0;

	for (unsigned i = 0; i < m->nr_zones; i++) {
		if (!zone_allowed(m, i, flags))
			continue;
		n += zone_free_pmd_blocks(&m->zones[i]);
		for (unsigned c = 0; c < m->nr_cpus; c++)
			n += (unsigned long)atomic_load_relaxed(&cpu_zone_pcp(m, c, i)->xnr_thp);
	}
	return n;
}

/*
 * pm__pmd_block_available() - is there a free 2 MiB block of user memory (a THP fault's
 * question before it compacts)? This CPU's caches are asked first, then the zones, and only
 * then the other CPUs' caches, so that a fault that will take its block from its own cache
 * reads no line another CPU's faults write. A racy answer, as pm__free_pmd_blocks()'s.
 */
bool pm__pmd_block_available(struct pm_machine *m)
{
	unsigned cpu = pm__this_cpu(m);

	for (unsigned i = 0; i < m->nr_zones; i++)
		if (atomic_load_relaxed(&cpu_zone_pcp(m, cpu, i)->xnr_thp))
			return true;
	for (unsigned i = 0; i < m->nr_zones; i++)
		if (zone_free_pmd_blocks(&m->zones[i]))
			return true;
	return pm__free_pmd_blocks(m, 0) > 0;
}

/**
 * pm__alloc_frames() - allocate 2^@order contiguous, naturally aligned frames.
 * @flags: PM_ALLOC_ZERO to zero them; PM_ALLOC_UNMOVABLE for a page table (its own per-CPU
 * lists, "Two kinds" above).
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
	page = alloc_frames(m, order, flags);
	if (unlikely(!page)) {
		pm__drain_all_pcp(m);
		page = alloc_frames(m, order, flags);
	}
	if (unlikely(!page) && atomic_load_relaxed(&m->xrcu_pending) > 0 &&
	    !pm_rcu_read_ongoing()) {
		/* Page tables freed by munmap are still waiting for their grace period. */
		pm_rcu_barrier();
		pm__drain_all_pcp(m);
		page = alloc_frames(m, order, flags);
	}
	if (unlikely(!page)) {
		count_event(m, ALLOC_FAILURES, 1);
		return NULL;
	}
	if (flags & PM_ALLOC_ZERO)
		memset(page_address(m, page), 0, PAGE_SIZE << order);
	return page;
}

/*
 * Make the 2^@order frames just allocated at @page a folio with one reference (Linux's
 * prep_compound_page and set_page_refcounted): pm__folio_alloc() (folio.c), the hugetlb pool's
 * pages (hugetlb_pool.c), migration's targets.
 */
struct pm_folio *pm__folio_prep(struct pm_page *page, unsigned order)
{
	struct pm_folio *folio = (struct pm_folio *)page;

	atomic_store_relaxed(&page->xorder, (uint8_t)order);
	page->mapping = NULL;
	page->index = 0;
	atomic_store_relaxed(&page->xpincount, 0);
	atomic_store_relaxed(&page->xentire_mapcount, 0);
	atomic_store_relaxed(&page->xmapcount, 0);
	for (unsigned long i = 1; i < (1UL << order); i++) {
		atomic_store_relaxed(&page[i].xmapcount, 0);
		atomic_store_relaxed(&page[i].xflags, 0);
		atomic_store_relaxed(&page[i].xcompound_head, (uintptr_t)page | 1);
	}
	if (order)
		page[1].thp_deposit = NULL;
	atomic_store_relaxed(&page->xflags, order ? PGF(PG_head) : 0);
	/* Publishes the folio: a speculative try_get can succeed from here on. */
	atomic_store_release(&page->xrefcount, 1);
	return folio;
}

/**
 * pm__alloc_boot_frame() - the first frame of a fresh machine, for its zero page: straight
 * from the frontier, through no per-CPU cache, and counted nowhere, so that a new machine's
 * counters all read zero. Context: pm_machine_create(), before anyone else can use @m.
 */
struct pm_page *pm__alloc_boot_frame(struct pm_machine *m)
{
	struct pm_page *page;

	pm_spin_lock(&m->zones[0].lock);
	page = rmqueue(m, &m->zones[0], 0);
	pm_spin_unlock(&m->zones[0].lock);
	return page;
}

/**
 * pm__free_frames() - give back frames that nobody references any more.
 * @flags: PM_ALLOC_UNMOVABLE if they were allocated so (a page table), else 0.
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

void pm__free_frames(struct pm_machine *m, struct pm_page *page, unsigned order, unsigned flags)
{
	free_frames_prepare(m, page, order);
	if (order == 0) {
		pcp_free(m, &page, 1, flags & PM_ALLOC_UNMOVABLE ? PCP_UNMOVABLE : PCP_MOVABLE);
	} else if (order != PM_MAX_ORDER || (flags & PM_ALLOC_UNMOVABLE) || !thp_put(m, page)) {
		struct pm_zone *z = pfn_zone(m, page_to_pfn(m, page));

		zone_lock(m, z);
		free_one(m, z, page, order);
		zone_unlock(z);
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
	pcp_free(m, pages, n, PCP_MOVABLE);
}

size_t pm__nr_free_frames(struct pm_machine *m)
{
	size_t n = 0;

	for (unsigned i = 0; i < m->nr_zones; i++) {
		struct pm_zone *z = &m->zones[i];

		for (unsigned o = 0; o <= PM_MAX_ORDER; o++)
			n += atomic_load_relaxed(&z->xnr_free[o]) << o;
		n += z->end - atomic_load_relaxed(&z->xfrontier);
	}
	for (unsigned c = 0; c < m->nr_cpus; c++)
		for (unsigned z = 0; z < m->nr_zones; z++)
			n += (size_t)atomic_load_relaxed(&cpu_zone_pcp(m, c, z)->xcount);
	return n;
}

/* Free frames in the zones an allocation with @flags may use (a racy snapshot). */
size_t pm__nr_free_frames_in(struct pm_machine *m, unsigned flags)
{
	size_t n = 0;

	for (unsigned i = 0; i < m->nr_zones; i++) {
		struct pm_zone *z = &m->zones[i];

		if (!zone_allowed(m, i, flags))
			continue;
		for (unsigned o = 0; o <= PM_MAX_ORDER; o++)
			n += atomic_load_relaxed(&z->xnr_free[o]) << o;
		n += z->end - atomic_load_relaxed(&z->xfrontier);
		for (unsigned c = 0; c < m->nr_cpus; c++)
			n += (size_t)atomic_load_relaxed(&cpu_zone_pcp(m, c, i)->xcount);
	}
	return n;
}

/*
 * The highest frontier of a zone that has been used: every frame in use on a quiescent
 * machine lies below it; frames at and above it have never been allocated.
 */
unsigned long pm__frames_touched(struct pm_machine *m)
{
	unsigned long top = 0;

	for (unsigned i = 0; i < m->nr_zones; i++) {
		unsigned long f = atomic_load_relaxed(&m->zones[i].xfrontier);

		if (f > m->zones[i].base)
			top = max(top, f);
	}
	return top;
}

/*
 * For the checker: if @pfn lies above its zone's frontier (never allocated, a free frame with
 * an unwritten descriptor), the end of that never-used run; otherwise @pfn itself.
 */
unsigned long pm__frames_unused_end(struct pm_machine *m, unsigned long pfn)
{
	struct pm_zone *z = pfn_zone(m, pfn);

	return pfn >= atomic_load_relaxed(&z->xfrontier) ? z->end : pfn;
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
		*order = atomic_load_relaxed(&page->xorder);
		return true;
	}
	return false;
}
