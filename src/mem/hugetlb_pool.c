// SPDX-License-Identifier: MIT
/*
 * hugetlb_pool.c - the machine's hugetlb pool (Linux's vm.nr_hugepages for the 2 MiB hstate),
 * its count of reservations, and the reservations of private hugetlb mappings (Linux's
 * hugetlb_reserve_pages with a private resv_map).
 *
 * The pool. pm_config.nr_hugepages order-9 blocks are taken from the buddy allocator when the
 * machine is made and never go back to it. A pool page is a folio of order 9 with PG_hugetlb
 * on its head all its life: in use it has references like any folio; free it has refcount 0
 * (so a speculative try_get - GUP-fast, a page-cache lookup - fails on it, as on any free
 * frame) and sits on m->hugetlb_free, linked through the head's lru. The last folio_put of a
 * hugetlb folio brings it back here (folio.c), never to the buddy lists.
 *
 * Reservations. hugetlb_resv is Linux's resv_huge_pages (HugePages_Rsvd): free pages promised
 * to mappings. A mapping reserves its pages at mmap time, and the faults of that mapping take
 * reserved pages. Pages not promised (free - resv) go to whoever asks without a reservation: a
 * fork child's COW, or a fault after truncate grew an object. Invariant, under hugetlb_lock:
 *	hugetlb_resv <= hugetlb_nr_free <= hugetlb_total
 * hugetlb_resv is signed: Linux's count can dip below zero (below).
 *
 * A private mapping's reservations are a map over its 2 MiB pages (struct pm_hugetlb_resv), a
 * byte a page, each changed by one atomic exchange or compare-and-swap, so that the faults of
 * different pages of one mapping write different bytes (no lock):
 * bit set = a pool page is reserved for that page of the mapping and not yet consumed. mmap
 * sets every bit; the fault that first maps an anonymous page there consumes its bit (a read
 * fault that maps the object's cached page read-only consumes nothing until its COW); munmap
 * and the end of the mapping take the bits of the range off the count (hugetlb_vm_op_close).
 * The VMAs split from one mapping share its map (a reference each); a fork child gets none.
 * Shared mappings keep their reservations on the object instead (shmem/hugetlbfs.c), until
 * truncation.
 *
 * Restore (Linux 6.9+). A zap of the owner's anonymous page - munmap, exit, truncation, a
 * MAP_FIXED mapping over it, MADV_DONTNEED - sets the page's bit again and marks the page
 * PG_hugetlb_restore (pm__hugetlb_zap_restore, __unmap_hugepage_range); whichever put frees
 * the marked page gives its reservation back to hugetlb_resv, with the page, in one hugetlb_lock
 * section (pm__hugetlb_free_folio, free_huge_folio's restore_reserve). So a page nobody else
 * holds comes back as a reservation at once; a page a pin, a fork child or a GUP-fast walker
 * still holds comes back when that holder lets go, and if the mapping closes in between, the
 * close has taken the bit off the count before the free adds it: HugePages_Rsvd is one lower
 * meanwhile, and reads below zero where nothing else was reserved, exactly as Linux's
 * (pm_hugetlb_reserved reads it as Linux's unsigned long does). A reserved fault takes any
 * free page, so while such a page is held a reserved fault can find the pool empty and get
 * SIGBUS, as in Linux; it then consumes nothing.
 *
 * MADV_DONTNEED against the owner's refault (issue 26). The page a DONTNEED unmaps must come
 * back to the owner as its page or as its reservation, with no moment in between where its
 * fault finds neither: the entry empty and the bit clear. Two things close that window:
 *  (a) the hugetlb fault mutex (Linux's hugetlb_fault_mutex_table, hashed by object and 2 MiB
 *      index): a private mapping's fault on an empty entry (fault/hugetlb_fault.c, hugetlb_no_page)
 *      holds it from its look at the entry to the installed page, and DONTNEED of a mapping
 *      with a reservation map holds it from clearing the leaf to the set bit (mm/zap.c).
 *      So a fault of the mapping comes wholly before the DONTNEED, and finds the entry
 *      present, or wholly after it, and finds the bit; and of two faults on one empty entry
 *      - two threads of the owner - the second finds the first's page installed, never the
 *      first's page held and nothing left for itself;
 *  (b) the free of a marked page: it puts the page on the free list and raises hugetlb_resv
 *      in one section under hugetlb_lock, so no allocation without a reservation (a fork
 *      child's COW, another mapping's fault) can take the page as unpromised in between.
 * The bit is set whether or not the page comes back now: the owner's refault before it does
 * consumes the bit and takes any free page (hugetlb_resv drops below its promises meanwhile,
 * as Linux's). Other zaps (munmap, exit, truncation) set the bit without the fault mutex: the
 * mapping is gone, or the page is past the object's end; a fault that raced a truncation and
 * found the bit clear maps a page anyway, and the zap that finds the bit set later restores
 * nothing (one reservation per bit, where Linux would count one more).
 *
 * Per-CPU lists (the range design). A reserved allocation - the faults of a mapping that
 * reserved its pages - takes its page from a short list on its CPU's page cache (struct
 * pm_pcp's hugetlb list, under that cache's lock), so that the faults of different CPUs write
 * no byte in common once each list holds a page. A list holds pairs: a free page and a
 * reservation, moved together off hugetlb_nr_free and hugetlb_resv under hugetlb_lock by a
 * reserved allocation that found its list empty (HUGETLB_PCP_BATCH - 1 of them, besides its
 * own page, while some reservation is left there). The pool's counts are then sums:
 *	free = hugetlb_nr_free + the pages on the lists
 *	resv = hugetlb_resv + the pages on the lists
 * and their difference, the pages nobody was promised, is hugetlb_nr_free - hugetlb_resv
 * alone: a reservation at mmap, an allocation without one, and the restore of a freed page
 * compare and write the globals under hugetlb_lock as before and never touch a list. Taking a
 * pair is consuming a reservation: both sums drop by one. What needs the sums themselves or
 * every free page on one list (the meminfo reads, pm_machine_check, a migration's target,
 * and an allocation that finds the free list empty) takes every CPU's cache lock, then
 * hugetlb_lock, and folds the lists back first (pm__hugetlb_lock_exact): then the counts and
 * the free list are what they would be without lists, so a page on another CPU's list never
 * fails a fault that Linux would serve. The range design's policy turns the lists on
 * (pm__hugetlb_lists_enable); PM_KNOB_HUGETLB_POOL_LOCK, and Linux's design, leave them off:
 * every allocation under hugetlb_lock, as Linux's.
 *
 * Locks: hugetlb_lock is innermost (the pool never calls the allocator after creation); the
 * CPUs' cache locks nest outside it, the lower index first, and are never taken under it; a
 * fault mutex outside both (and inside mmap_lock or the VMA lock), and never two fault
 * mutexes at once. The maps' bytes take no lock.
 */
#include "mem/mem.h"

struct pm_hugetlb_resv {
	struct pm_machine *m;
	_Atomic long xrefs;	/* one per VMA that uses the map */
	unsigned long base;	/* address of the first 2 MiB page; set before publication */
	unsigned long nr;	/* 2 MiB pages covered */
	_Atomic uint8_t xbits[]; /* xbits[i] == 1: page i holds a reservation (its "bit") */
};

static bool test_bit(struct pm_hugetlb_resv *resv, unsigned long i)
{
	return atomic_load_relaxed(&resv->xbits[i]);
}

/* Set page i's bit. Return: whether it was clear (this call set it). */
static bool set_bit(struct pm_hugetlb_resv *resv, unsigned long i)
{
	return !atomic_xchg_mb(&resv->xbits[i], 1);
}

/* Clear page i's bit. Return: whether it was set (this call took the reservation). */
static bool clear_bit(struct pm_hugetlb_resv *resv, unsigned long i)
{
	return atomic_xchg_mb(&resv->xbits[i], 0);
}

/* ---- the pool ---- */

/* Pages an empty per-CPU list takes at once: the fault's and one for the next. */
#define HUGETLB_PCP_BATCH 2

static bool pool_lists(struct pm_machine *m)
{
	return atomic_load_relaxed(&m->xhugetlb_lists);
}

/**
 * pm__hugetlb_lists_enable() - the machine's mms take their reserved pages from per-CPU lists
 * (the policy's hugetlb_lists, at each mm's creation): set once, under hugetlb_lock, so that a
 * holder of hugetlb_lock that reads it clear knows that no list holds a page.
 */
void pm__hugetlb_lists_enable(struct pm_machine *m)
{
	if (atomic_load_relaxed(&m->xhugetlb_lists))
		return;
	pm_spin_lock(&m->hugetlb_lock);
	atomic_store_relaxed(&m->xhugetlb_lists, true);
	pm_spin_unlock(&m->hugetlb_lock);
}

static struct pm_folio *list_pop(struct pm_list *list)
{
	struct pm_folio *folio = pm_list_entry(list->next, struct pm_folio, page.lru);

	pm_list_del(&folio->page.lru);
	return folio;
}

/* @pcp's pairs back on the pool's counts. Context: @pcp's lock, hugetlb_lock. */
static void pcp_fold(struct pm_machine *m, struct pm_pcp *pcp)
{
	pm_assert_locked(&pcp->lock);
	pm_assert_locked(&m->hugetlb_lock);
	while (pcp->nr_hugetlb) {
		pm_list_add(&list_pop(&pcp->hugetlb)->page.lru, &m->hugetlb_free);
		m->hugetlb_nr_free++;
		m->hugetlb_resv++;
		pcp->nr_hugetlb--;
	}
}

/**
 * pm__hugetlb_lock_exact() - take hugetlb_lock with the pool's counts exact and every free page
 * on its free list: with per-CPU lists, every CPU's cache lock first, and the lists folded
 * back ("Per-CPU lists" above). Called without any of those locks held.
 */
void pm__hugetlb_lock_exact(struct pm_machine *m)
{
	bool lists = pool_lists(m);

	for (unsigned c = 0; lists && c < m->nr_cpus; c++)
		pm_spin_lock(&m->pcp[c].lock);
	pm_spin_lock(&m->hugetlb_lock);
	if (!lists && pool_lists(m)) {
		/* Enabled meanwhile: take the CPUs' locks in their order after all. */
		pm_spin_unlock(&m->hugetlb_lock);
		pm__hugetlb_lock_exact(m);
		return;
	}
	for (unsigned c = 0; lists && c < m->nr_cpus; c++)
		pcp_fold(m, &m->pcp[c]);
}

void pm__hugetlb_unlock_exact(struct pm_machine *m)
{
	bool lists = pool_lists(m); /* as pm__hugetlb_lock_exact() read it: set only under the lock */

	pm_spin_unlock(&m->hugetlb_lock);
	for (unsigned c = m->nr_cpus; lists && c--;)
		pm_spin_unlock(&m->pcp[c].lock);
}

/*
 * A free page off the free list, for a caller with a reservation (which it consumes) or for
 * one without (only a page nobody was promised; a count below zero lets it past free pages
 * that are not there). Context: hugetlb_lock. Return: NULL if none is there for the caller.
 */
static struct pm_folio *pool_take_locked(struct pm_machine *m, bool reserved)
{
	struct pm_folio *folio;

	pm_assert_locked(&m->hugetlb_lock);
	if (!m->hugetlb_nr_free || (!reserved && (long)m->hugetlb_nr_free <= m->hugetlb_resv))
		return NULL;
	folio = list_pop(&m->hugetlb_free);
	m->hugetlb_nr_free--;
	if (reserved)
		m->hugetlb_resv--;
	return folio;
}

/* A reserved allocation's page: a pair from this CPU's list, or, if that is empty, a page off
 * the free list, and pairs for the list while reservations are left. Return: NULL when both
 * lists are empty. */
static struct pm_folio *pcp_take_reserved(struct pm_machine *m)
{
	struct pm_pcp *pcp = &m->pcp[pm__this_cpu(m)];
	struct pm_folio *folio;

	pm_spin_lock(&pcp->lock);
	if (pcp->nr_hugetlb) {
		folio = list_pop(&pcp->hugetlb);
		pcp->nr_hugetlb--;
		pm_spin_unlock(&pcp->lock);
		return folio;
	}
	pm_spin_lock(&m->hugetlb_lock);
	folio = pool_take_locked(m, true);
	for (int i = 1; folio && i < HUGETLB_PCP_BATCH && m->hugetlb_nr_free && m->hugetlb_resv > 0;
	     i++) {
		pm_list_add(&list_pop(&m->hugetlb_free)->page.lru, &pcp->hugetlb);
		m->hugetlb_nr_free--;
		m->hugetlb_resv--;
		pcp->nr_hugetlb++;
	}
	pm_spin_unlock(&m->hugetlb_lock);
	pm_spin_unlock(&pcp->lock);
	return folio;
}

/* Context: hugetlb_lock. */
static void pool_add_locked(struct pm_machine *m, struct pm_folio *folio)
{
	pm_assert_locked(&m->hugetlb_lock);
	pm_list_add(&folio->page.lru, &m->hugetlb_free);
	m->hugetlb_nr_free++;
}

/**
 * pm__hugetlb_pool_init() - set @nr 2 MiB pages aside for the pool. Called once, at machine
 * creation. Return: 0, or -ENOMEM if the allocator cannot give them (what it gave stays with
 * the machine, which the caller destroys).
 */
int pm__hugetlb_pool_init(struct pm_machine *m, size_t nr)
{
	pm_spin_init(&m->hugetlb_lock);
	pm_list_init(&m->hugetlb_free);
	for (unsigned i = 0; i < PM_HUGETLB_FAULT_MUTEXES; i++)
		pthread_mutex_init(&m->hugetlb_fault_mutex[i], NULL);
	for (size_t i = 0; i < nr; i++) {
		struct pm_page *page = pm__alloc_frames(m, HPAGE_PMD_ORDER, 0);
		struct pm_folio *folio;

		if (!page)
			return -ENOMEM;
		folio = pm__folio_prep(page, HPAGE_PMD_ORDER);
		page_set(&folio->page, PG_hugetlb);
		atomic_store_relaxed(&folio->page.xrefcount, 0); /* free: try_get fails on it */
		pm_spin_lock(&m->hugetlb_lock);
		pool_add_locked(m, folio);
		m->hugetlb_total++;
		pm_spin_unlock(&m->hugetlb_lock);
	}
	return 0;
}

/* The machine is going away (after pm__hugetlb_pool_init). */
void pm__hugetlb_pool_exit(struct pm_machine *m)
{
	for (unsigned i = 0; i < PM_HUGETLB_FAULT_MUTEXES; i++)
		pthread_mutex_destroy(&m->hugetlb_fault_mutex[i]);
}

/**
 * pm__hugetlb_fault_mutex() - the fault mutex of the 2 MiB page @idx of the object @mapping
 * (Linux's hugetlb_fault_mutex_hash): see the top of the file for what it orders.
 */
pthread_mutex_t *pm__hugetlb_fault_mutex(struct pm_machine *m, const void *mapping,
					 unsigned long idx)
{
	uint64_t h = ((uint64_t)(uintptr_t)mapping ^ (uint64_t)idx * 0x9e3779b97f4a7c15ULL) *
		     0xff51afd7ed558ccdULL;

	return &m->hugetlb_fault_mutex[(h >> 32) % PM_HUGETLB_FAULT_MUTEXES];
}

/* Promise @nr free pages to a mapping. Return: false (nothing reserved) if they are not there. */
/*
 * pm__hugetlb_reserve_credit() - reserve @nr free pages, counting as room already the @credit
 * the caller's unmap makes next: a MAP_FIXED mapping over private mappings, which Linux zaps
 * and closes (vms_clean_up_area) before the new mapping reserves - the owners' reservations
 * closed, the pages only they held freed (mm/mmap.c, hugetlb_resv_credit). The caller holds
 * what it counted (the old VMAs write-locked under the mm's write hold), so it does come;
 * until then resv may pass nr_free by up to @credit, which every test below is written to
 * allow. Linux's second test, @nr against the free pages alone (allowed_mems_nr), matters
 * only while the count is below zero and is not made.
 */
bool pm__hugetlb_reserve_credit(struct pm_machine *m, unsigned long nr, unsigned long credit)
{
	bool ok;

	pm_spin_lock(&m->hugetlb_lock);
	/* Not nr_free - resv: resv may pass nr_free a moment (pm__hugetlb_resv_undo), and
	 * be below zero (the top of the file): signed, as Linux's unsigned sums wrap. The
	 * per-CPU lists' pairs count on both sides: left out of both here. */
	ok = (long)(m->hugetlb_nr_free + credit) >= m->hugetlb_resv + (long)nr;
	if (ok)
		m->hugetlb_resv += nr;
	pm_spin_unlock(&m->hugetlb_lock);
	return ok;
}

bool pm__hugetlb_reserve(struct pm_machine *m, unsigned long nr)
{
	return pm__hugetlb_reserve_credit(m, nr, 0);
}

void pm__hugetlb_unreserve(struct pm_machine *m, unsigned long nr)
{
	pm_spin_lock(&m->hugetlb_lock);
	m->hugetlb_resv -= nr; /* below zero while a restored page lives (top of the file) */
	pm_spin_unlock(&m->hugetlb_lock);
}

static struct pm_folio *hugetlb_prep(struct pm_machine *m, struct pm_folio *folio, bool zero);

/**
 * pm__hugetlb_alloc() - a zeroed 2 MiB folio from the pool, with one reference.
 * @reserved: the caller consumes one of the reservations: any free page will do, and the
 *	count of reservations drops with it (alloc_hugetlb_folio); otherwise only a page nobody
 *	was promised is taken. A reserved caller finds none only while a restored page is
 *	still held (the top of the file); then nothing is consumed.
 * Return: the folio, or NULL when no page is free for the caller.
 */
struct pm_folio *pm__hugetlb_alloc(struct pm_machine *m, bool reserved)
{
	struct pm_folio *folio;
	bool none_free;

	if (reserved && pool_lists(m)) {
		folio = pcp_take_reserved(m);
		none_free = !folio;
	} else {
		pm_spin_lock(&m->hugetlb_lock);
		folio = pool_take_locked(m, reserved);
		none_free = !m->hugetlb_nr_free;
		pm_spin_unlock(&m->hugetlb_lock);
	}
	/* The free list was empty: the per-CPU lists may hold the pages. */
	if (!folio && none_free && pool_lists(m)) {
		pm__hugetlb_lock_exact(m);
		folio = pool_take_locked(m, reserved);
		pm__hugetlb_unlock_exact(m);
	}
	if (!folio) {
		count_event(m, ALLOC_FAILURES, 1);
		return NULL;
	}
	return hugetlb_prep(m, folio, true);
}

/**
 * pm__hugetlb_alloc_migrate() - the new page of a hugetlb migration (Linux's
 * alloc_hugetlb_folio_nodemask via alloc_migration_target): a free pool page nobody was
 * promised (free > resv, as dequeue_hugetlb_folio_nodemask asks), in the zones @alloc_flags
 * allow (PM_ALLOC_MOVABLE_ZONE, PM_ALLOC_NO_MOVABLE_ZONE or neither), not zeroed: the migration
 * copies all of it. pinmm's pool has no surplus pages (nr_overcommit_hugepages is 0), so
 * where Linux would allocate one from the buddy allocator this fails and the caller counts the
 * folio as not moved (-ENOMEM). The free count drops by one until the old page comes back to
 * the pool, so hugetlb_resv <= hugetlb_nr_free holds throughout.
 * Return: the folio with one reference, or NULL.
 */
struct pm_folio *pm__hugetlb_alloc_migrate(struct pm_machine *m, unsigned alloc_flags)
{
	struct pm_folio *folio = NULL;
	struct pm_list *pos;

	if (pm__should_fail(m))
		return NULL;
	pm__hugetlb_lock_exact(m);
	if ((long)m->hugetlb_nr_free > m->hugetlb_resv) {
		pm_list_for_each(pos, &m->hugetlb_free) {
			struct pm_folio *f = pm_list_entry(pos, struct pm_folio, page.lru);
			bool movable = pfn_in_movable_zone(m, page_to_pfn(m, &f->page));

			if (((alloc_flags & PM_ALLOC_MOVABLE_ZONE) && !movable) ||
			    ((alloc_flags & PM_ALLOC_NO_MOVABLE_ZONE) && movable))
				continue;
			folio = f;
			pm_list_del(&folio->page.lru);
			m->hugetlb_nr_free--;
			break;
		}
	}
	pm__hugetlb_unlock_exact(m);
	if (!folio) {
		count_event(m, ALLOC_FAILURES, 1);
		return NULL;
	}
	return hugetlb_prep(m, folio, false);
}

/* Does the pool hold a free page in the zones @alloc_flags allow (pm_migrate_range's -ENOSPC:
 * a hugetlb page's target frame is a pool page)? A racy snapshot, as the buddy's count. */
bool pm__hugetlb_free_in(struct pm_machine *m, unsigned alloc_flags)
{
	struct pm_list *pos;
	bool found = false;

	pm__hugetlb_lock_exact(m);
	pm_list_for_each(pos, &m->hugetlb_free) {
		struct pm_folio *f = pm_list_entry(pos, struct pm_folio, page.lru);
		bool movable = pfn_in_movable_zone(m, page_to_pfn(m, &f->page));

		if (!((alloc_flags & PM_ALLOC_MOVABLE_ZONE) && !movable) &&
		    !((alloc_flags & PM_ALLOC_NO_MOVABLE_ZONE) && movable)) {
			found = true;
			break;
		}
	}
	pm__hugetlb_unlock_exact(m);
	return found;
}

/* A page just taken off the free list, made a fresh folio with one reference. */
static struct pm_folio *hugetlb_prep(struct pm_machine *m, struct pm_folio *folio, bool zero)
{
	struct pm_page *page = &folio->page;

	page->mapping = NULL;
	page->index = 0;
	atomic_store_relaxed(&page->xpincount, 0);
	atomic_store_relaxed(&page->xentire_mapcount, 0);
	atomic_store_relaxed(&page->xflags, PGF(PG_head) | PGF(PG_hugetlb));
	for (unsigned i = 0; i < HPAGE_PMD_NR; i++) {
		atomic_store_relaxed(&page[i].xmapcount, 0);
		if (i)
			atomic_store_relaxed(&page[i].xflags, 0);
	}
	if (zero)
		memset(page_address(m, page), 0, PMD_SIZE); /* clear_huge_page */
	/* Publishes the folio: a speculative try_get can succeed from here on. */
	atomic_store_release(&page->xrefcount, 1);
	return folio;
}

/* A hugetlb folio whose last reference went, made ready for the free list. */
static void hugetlb_free_prepare(struct pm_machine *m, struct pm_folio *folio)
{
	pm_assert(folio_test_hugetlb(folio));
	pm_assert_cmp(folio_order(folio), ==, HPAGE_PMD_ORDER);
	if (PM_DEBUG >= 1) {
		memset(page_address(m, &folio->page), PM_POISON_FREE, PMD_SIZE);
		atomic_add_relaxed(&folio->page.xgen, 1);
	}
	atomic_store_relaxed(&folio->page.xflags, PGF(PG_head) | PGF(PG_hugetlb));
}

/*
 * The last reference of a hugetlb folio went (folio.c): back to the pool, never split; a
 * page marked PG_hugetlb_restore brings its reservation back with it, in the same section
 * (free_huge_folio's restore_reserve; the top of the file, (b)).
 */
void pm__hugetlb_free_folio(struct pm_folio *folio)
{
	struct pm_machine *m = page_machine(&folio->page);
	bool restore = folio_test(folio, PG_hugetlb_restore);

	hugetlb_free_prepare(m, folio);
	pm_spin_lock(&m->hugetlb_lock);
	pool_add_locked(m, folio);
	if (restore)
		m->hugetlb_resv++;
	pm_spin_unlock(&m->hugetlb_lock);
}

int pm_hugetlb_pool(struct pm_machine *m, size_t *total, size_t *free)
{
	if (unlikely(!m))
		return -EINVAL;
	pm__hugetlb_lock_exact(m);
	if (total)
		*total = m->hugetlb_total;
	if (free)
		*free = m->hugetlb_nr_free;
	pm__hugetlb_unlock_exact(m);
	return 0;
}

/* ---- private mappings' reservation maps ---- */

/**
 * pm__hugetlb_resv_create() - reserve @nr pages for a new private mapping.
 * Return: the map (one reference, every bit set), or NULL when the pool cannot cover the
 * mapping or memory ran out (mmap's -ENOMEM).
 */
struct pm_hugetlb_resv *pm__hugetlb_resv_create(struct pm_machine *m, unsigned long nr,
						 unsigned long credit)
{
	struct pm_hugetlb_resv *resv;

	resv = pm__kzalloc(m, sizeof(*resv) + nr);
	if (!resv)
		return NULL;
	if (!pm__hugetlb_reserve_credit(m, nr, credit)) {
		free(resv);
		return NULL;
	}
	resv->m = m;
	atomic_store_relaxed(&resv->xrefs, 1);
	resv->nr = nr;
	for (unsigned long i = 0; i < nr; i++)
		atomic_store_relaxed(&resv->xbits[i], 1);
	pm__trace_object(resv, sizeof(*resv) + nr, "pm_hugetlb_resv");
	return resv;
}

static bool resv_range(struct pm_hugetlb_resv *resv, unsigned long start, unsigned long end,
		       unsigned long *first, unsigned long *last);

/**
 * pm__hugetlb_resv_alloc_moved() - an empty map of @nr pages starting at @base, for the VMA a
 * private mapping's pages move to (mremap): it reserves nothing; pm__hugetlb_resv_move() hands
 * it the moved range's bits. Return: the map (one reference), or NULL without memory.
 */
struct pm_hugetlb_resv *pm__hugetlb_resv_alloc_moved(struct pm_machine *m, unsigned long nr,
						     unsigned long base)
{
	struct pm_hugetlb_resv *resv;

	resv = pm__kzalloc(m, sizeof(*resv) + nr);
	if (!resv)
		return NULL;
	resv->m = m;
	atomic_store_relaxed(&resv->xrefs, 1);
	resv->nr = nr;
	resv->base = base;
	return resv;
}

/*
 * pm__hugetlb_resv_move() - the reservations of [@start, @start + @to->nr pages) of @from go
 * to @to, bit for bit: the pool's count does not change (Linux keeps the resv_map with the
 * moved VMA, indexed by pgoff, which a move keeps). Called by mremap with both VMAs
 * write-locked, so no fault consumes a bit meanwhile.
 */
void pm__hugetlb_resv_move(struct pm_hugetlb_resv *from, unsigned long start,
			   struct pm_hugetlb_resv *to)
{
	unsigned long first, last;

	if (!from || !resv_range(from, start, start + to->nr * PMD_SIZE, &first, &last))
		return;
	for (unsigned long i = first; i < last; i++) {
		unsigned long j = i - first + ((from->base + first * PMD_SIZE - start) >> PMD_SHIFT);

		if (j < to->nr && clear_bit(from, i))
			set_bit(to, j);
	}
}

/* The address the map starts at, known once mmap has placed the mapping. */
void pm__hugetlb_resv_set_base(struct pm_hugetlb_resv *resv, unsigned long base)
{
	resv->base = base;
}

void pm__hugetlb_resv_get(struct pm_hugetlb_resv *resv)
{
	atomic_add_relaxed(&resv->xrefs, 1);
}

/* Drop a reference; the last gives back whatever is still reserved and frees the map. */
void pm__hugetlb_resv_put(struct pm_hugetlb_resv *resv)
{
	if (!resv || atomic_sub_mb(&resv->xrefs, 1) != 1)
		return;
	pm__hugetlb_resv_release(resv, resv->base, resv->base + resv->nr * PMD_SIZE);
	pm__trace_object_gone(resv);
	free(resv);
}

/* The map's pages [first, last) for the addresses [start, end), clamped to the map. */
static bool resv_range(struct pm_hugetlb_resv *resv, unsigned long start, unsigned long end,
		       unsigned long *first, unsigned long *last)
{
	unsigned long lo = max(start, resv->base), hi = min(end, resv->base + resv->nr * PMD_SIZE);

	if (lo >= hi)
		return false;
	*first = (lo - resv->base) >> PMD_SHIFT;
	*last = (hi - resv->base + PMD_SIZE - 1) >> PMD_SHIFT;
	return true;
}

/* The reservations [start, end) still holds: what pm__hugetlb_resv_release would give back. */
unsigned long pm__hugetlb_resv_count(struct pm_hugetlb_resv *resv, unsigned long start,
				     unsigned long end)
{
	unsigned long first, last, n = 0;

	if (!resv || !resv_range(resv, start, end, &first, &last))
		return 0;
	for (unsigned long i = first; i < last; i++)
		n += test_bit(resv, i);
	return n;
}

/* munmap, or the end of the mapping: give back the reservations of [start, end). */
void pm__hugetlb_resv_release(struct pm_hugetlb_resv *resv, unsigned long start,
			      unsigned long end)
{
	unsigned long first, last, n = 0;

	if (!resv || !resv_range(resv, start, end, &first, &last))
		return;
	for (unsigned long i = first; i < last; i++)
		n += clear_bit(resv, i);
	if (n)
		pm__hugetlb_unreserve(resv->m, n);
}

/**
 * pm__hugetlb_zap_restore() - a zap has just cleared the leaf at @addr that mapped @folio in
 * a private mapping with the reservation map @resv (its owner: munmap, exit, MADV_DONTNEED,
 * truncation, a MAP_FIXED mapping over it), and still holds the leaf's reference. An
 * anonymous page gets its reservation back in the map (Linux 6.9+'s __unmap_hugepage_range:
 * vma_add_reservation) and is marked PG_hugetlb_restore, so that the put that frees it -
 * this zap's, or a pin's, a fork child's, a GUP-fast walker's later - gives the reservation
 * back to the pool's count (pm__hugetlb_free_folio). Where the bit is set already (a fault
 * that raced a truncation), nothing is restored: one reservation per bit.
 */
void pm__hugetlb_zap_restore(struct pm_hugetlb_resv *resv, unsigned long addr,
			     struct pm_folio *folio)
{
	unsigned long i = 0, end;

	if (!resv || !folio_test_anon(folio) || !resv_range(resv, addr, addr + 1, &i, &end))
		return;
	if (set_bit(resv, i))
		page_set(&folio->page, PG_hugetlb_restore);
}

/**
 * pm__hugetlb_alloc_resv() - a page for the 2 MiB page at @addr of a private mapping: its
 * reservation if it still holds one (@resv may be NULL: a fork child), else a page nobody was
 * promised. *@consumed says which, for pm__hugetlb_resv_undo().
 * Return: the zeroed folio with one reference, or NULL (the pool has nothing for us).
 */
struct pm_folio *pm__hugetlb_alloc_resv(struct pm_machine *m, struct pm_hugetlb_resv *resv,
					unsigned long addr, bool *consumed)
{
	unsigned long i = 0, last;

	struct pm_folio *folio;

	*consumed = false;
	/* Tested before it is cleared: a fault of a page whose reservation went writes
	 * nothing here. */
	if (resv && resv_range(resv, addr, addr + 1, &i, &last) && test_bit(resv, i))
		*consumed = clear_bit(resv, i);
	folio = pm__hugetlb_alloc(m, *consumed);
	if (!folio && *consumed) {
		/* Nothing consumed (the pool is empty while a restored page is held): the
		 * mapping keeps its reservation, as alloc_hugetlb_folio's failure leaves it. */
		set_bit(resv, i);
		*consumed = false;
	}
	return folio;
}

/*
 * The page taken with the reservation of @addr was not used (a racing fault won) and has gone
 * back to the pool: reserve it again (Linux's restore_reserve_on_error).
 */
void pm__hugetlb_resv_undo(struct pm_hugetlb_resv *resv, unsigned long addr)
{
	unsigned long i, last;

	if (!resv_range(resv, addr, addr + 1, &i, &last))
		return;
	pm_spin_lock(&resv->m->hugetlb_lock);
	/* Not asserted against nr_free: a GUP-fast walker's speculative reference (taken and
	 * dropped after its re-check failed) may hold the page out of the pool a moment longer. */
	resv->m->hugetlb_resv++;
	pm_spin_unlock(&resv->m->hugetlb_lock);
	set_bit(resv, i); /* counted first: a set bit is always on the count */
}
