// SPDX-License-Identifier: MIT
/*
 * machine.c - a machine's life (memory, descriptors, zero page, the huge zero folio), its
 * registry of address spaces and shmem objects, its public queries. The top of mem/: it makes
 * and ends what every other file of mem/ keeps (the registry of machines, per-thread counters
 * and failure injection are mem.c's, below them all).
 *
 * Size. The frames and the descriptor array are reserved with MAP_NORESERVE and nothing is
 * written to them at creation: the allocator initialises descriptors one 2 MiB block at a
 * time when it first hands the block out (page_alloc.c). Until frames are used a machine
 * costs a few pages of host memory and O(1) time whatever its size, so a 1 TiB machine can
 * be simulated on a small host as long as the work touches little of it. A range the host
 * cannot reserve (address space, vm.overcommit_memory=2) makes pm_machine_create() fail
 * with ENOMEM.
 *
 * fork(). The registry's lock (mem.c's machines_lock) is process-global, and a child's
 * pm_machine_create() takes it, so it is held across fork() (machines_atfork_init): a child
 * never inherits it locked by a thread it does not have. Order: after lib/rcu.c's prepare,
 * which pauses liburcu's callback workers (a callback reaches the lock through
 * pm__page_machine_search()), and before the trace registry's lock, which is taken under it.
 * Prepare handlers run in the reverse order of registration, so this one registers between
 * the two (constructor priorities 101 < 102 < rcu.c's, at run time).
 *
 * A child also inherits the parent's machines, and the RCU callbacks the parent had queued for
 * them: liburcu hands those to the child's new worker (after this handler, which runs before
 * rcu.c's; the TSan stand-in runs them inline), and they free page tables and shmem
 * nodes into a machine's allocator, and hot folios' states onto its free list. A lock of that allocator that another thread of the parent
 * held at the fork stays held for ever in the child, and the callback would spin on it. So the
 * child's handler, single-threaded, looks at those locks: a machine with one held is
 * fork_busy, and its callbacks drop what they free (its copy is not the child's to use; the
 * frames stay counted as in use). A machine whose allocator no other thread was inside, as in
 * a single-threaded parent, is the child's to use as its own. The handlers live here, at the
 * top of mem/, because they ask the allocators (page_alloc.c, objcache.c) below.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "mem/folio_hot.h"

void pm__die(const char *file, int line, const char *func, const char *msg)
{
	fprintf(stderr, "pinmm: %s at %s:%d (%s)\n", msg, file, line, func);
	fflush(stderr);
	abort();
}

void pm__die_cmp(const char *file, int line, const char *func, const char *expr, long a, long b)
{
	fprintf(stderr, "pinmm: %s with %ld and %ld at %s:%d (%s)\n", expr, a, b, file, line,
		func);
	fflush(stderr);
	abort();
}

/* ---- machine life ---- */

/* The machine's own objects, named for the tracer (lib/trace.h); nothing in other builds. */
static void machine_trace_objects(struct pm_machine *m, bool gone)
{
#if PM_TRACE
	void *objs[] = { m, m->frames, m->pages, m->pcp, m->pcp_away, m->zones, m->shmem_nodes };

	if (gone) {
		for (unsigned i = 0; i < ARRAY_SIZE(objs); i++)
			if (objs[i])
				pm__trace_object_gone(objs[i]);
		return;
	}
	pm__trace_object(m, sizeof(*m), "pm_machine");
	pm__trace_object(m->frames, m->nr_pages << PAGE_SHIFT, "frame");
	pm__trace_object(m->pages, m->nr_pages * sizeof(*m->pages), "pm_page");
	pm__trace_object(m->pcp, m->nr_cpus * sizeof(*m->pcp), "pm_pcp");
	if (m->pcp_away)
		pm__trace_object(m->pcp_away, m->nr_cpus * m->nr_zones * sizeof(*m->pcp_away),
				 "pm_pcp_away");
	pm__trace_object(m->zones, m->nr_zones * sizeof(*m->zones), "pm_zone");
	pm__trace_object(m->shmem_nodes, (m->nr_cpus + 1) * sizeof(*m->shmem_nodes),
			 "pm_obj_cache");
#else
	(void)m;
	(void)gone;
#endif
}

struct pm_machine *pm_machine_create(const struct pm_config *cfg)
{
	struct pm_config c = cfg ? *cfg : (struct pm_config){ 0 };
	struct pm_machine *m;
	size_t desc_len;
	long ncpu;
	int err = ENOMEM;

	if (!c.mem_bytes)
		c.mem_bytes = 1UL << 30;
	/* The address-space design: a flag, else PINMM_RANGE_MM=1 makes the range design the
	 * default (mm/range.c); both flags at once are an error. */
	if (c.mem_bytes % PMD_SIZE || (c.knobs & ~PM_KNOB_ALL) ||
	    c.mem_bytes / PAGE_SIZE > (1UL << 40) ||
	    (c.flags & ~(PM_MACHINE_LINUX_MM | PM_MACHINE_RANGE_MM)) ||
	    (c.flags & PM_MACHINE_LINUX_MM && c.flags & PM_MACHINE_RANGE_MM) ||
	    c.movable_bytes % PMD_SIZE || c.movable_bytes >= c.mem_bytes) {
		errno = EINVAL;
		return NULL;
	}
	if (!(c.flags & (PM_MACHINE_LINUX_MM | PM_MACHINE_RANGE_MM))) {
		const char *env = getenv("PINMM_RANGE_MM");

		c.flags = env && !strcmp(env, "1") ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM;
	}
	if (posix_memalign((void **)&m, PM_CACHELINE, sizeof(*m))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(m, 0, sizeof(*m));
	m->knobs = c.knobs;
	m->range_mm = c.flags & PM_MACHINE_RANGE_MM;
	m->nr_pages = c.mem_bytes / PAGE_SIZE;
	m->movable_base = (c.mem_bytes - c.movable_bytes) / PAGE_SIZE;
	ncpu = sysconf(_SC_NPROCESSORS_CONF);
	m->nr_cpus = ncpu > 0 ? (unsigned)ncpu : 1;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->compact_lock, NULL);
	pm_spin_init(&m->hot_lock);
	m->hot_max = 64 + 8 * m->nr_cpus;
	m->hot_slot_limit = PM_HOT_REF_LIMIT / m->nr_cpus;
	m->table_reader_slots = min(m->nr_cpus, 15u);
	pm_list_init(&m->mms);
	pm_list_init(&m->shmems);
	pm_list_init(&m->stat_blocks);

	/* The machine's memory: 2 MiB aligned so that order-9 blocks are THP-aligned frames. */
	m->frames_map_len = c.mem_bytes + PMD_SIZE;
	m->frames_map = mmap(NULL, m->frames_map_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->frames_map == MAP_FAILED)
		goto fail_free;
	m->frames = (char *)ALIGN_UP((uintptr_t)m->frames_map, PMD_SIZE);
	madvise(m->frames, c.mem_bytes, MADV_HUGEPAGE); /* host THP, if it will */

	/* Zero-filled and untouched until a block is first allocated: see page_alloc.c. */
	desc_len = m->nr_pages * sizeof(struct pm_page);
	m->pages = mmap(NULL, desc_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->pages == MAP_FAILED)
		goto fail_frames;
	if (posix_memalign((void **)&m->pcp, PM_CACHELINE, m->nr_cpus * sizeof(*m->pcp)))
		goto fail_pages;

	err = pm__machine_register(m);
	if (err)
		goto fail_pcp;

	if (pm__page_alloc_init(m))
		goto fail_slot;
	m->shmem_nodes = pm__obj_cache_create(m);
	if (!m->shmem_nodes)
		goto fail_slot;

	/*
	 * The first frame of a fresh machine reads as zero already; not writing it keeps the host
	 * from backing it (with MADV_HUGEPAGE, 2 MiB of it) before the machine is used.
	 */
	m->zero_page = pm__alloc_boot_frame(m);
	if (!m->zero_page)
		goto fail_slot;
	atomic_store_relaxed(&m->zero_page->xflags, PGF(PG_zero));
	atomic_store_relaxed(&m->zero_page->xrefcount, 1);
	/* vm.nr_hugepages: set aside now, or no machine (the pages come out of its frames). */
	if (c.nr_hugepages > c.mem_bytes / PMD_SIZE ||
	    pm__hugetlb_pool_init(m, c.nr_hugepages))
		goto fail_slot;
	machine_trace_objects(m, false);
	return m;

fail_slot:
	err = ENOMEM;
	/* Setting the pool aside may have counted events: this thread's block goes too. */
	pm__machine_unregister(m);
fail_pcp:
	pm__obj_cache_destroy(m, m->shmem_nodes);
	pm__page_alloc_exit(m);
	free(m->pcp);
fail_pages:
	munmap(m->pages, desc_len);
fail_frames:
	munmap(m->frames_map, m->frames_map_len);
fail_free:
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->compact_lock);
	free(m);
	errno = err;
	return NULL;
}

/*
 * pm__machine_free() - the end of pm_machine_destroy() (mm/lifecycle.c, the layer that knows what
 * lives in a machine): nothing lives in @m any more and deferred frees are flushed.
 */
void pm__machine_free(struct pm_machine *m)
{
	pm_assert(pm_list_empty(&m->mms) && pm_list_empty(&m->shmems));

	pm__machine_unregister(m);

	machine_trace_objects(m, true);
	pm__obj_cache_destroy(m, m->shmem_nodes); /* after the RCU barrier: no node is pending */
	pm__page_alloc_exit(m);
	free(m->pcp);
	munmap(m->pages, m->nr_pages * sizeof(struct pm_page));
	munmap(m->frames_map, m->frames_map_len);
	pm__hugetlb_pool_exit(m);
	pm__machine_hot_exit(m);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->compact_lock);
	free(m);
}

/* ---- fork() ---- */

/*
 * Is a lock of @m's allocators held? The page-table and shmem-node frees take only these, and
 * a hot folio's state, at its retirement, only hot_lock (folio_hot.c). A machine that another
 * thread was still making has some of them missing: that one is busy.
 */
static bool allocator_held(struct pm_machine *m)
{
	if (!m->pcp || !m->zones || !m->shmem_nodes)
		return true;
	return pm__page_alloc_locked(m) || pm__obj_cache_locked(m, m->shmem_nodes) ||
	       pm_spin_is_locked(&m->hot_lock);
}

static void machines_atfork_child(void)
{
	for (unsigned i = 0; i < PM_MAX_MACHINES; i++) {
		struct pm_machine *m = atomic_load_relaxed(&pm__machines[i]);

		if (m)
			m->fork_busy = allocator_held(m);
	}
	pm__machines_unlock();
}

__attribute__((constructor(102))) static void machines_atfork_init(void)
{
	if (pthread_atfork(pm__machines_lock, pm__machines_unlock, machines_atfork_child))
		abort();
}

/* ---- the huge zero folio ---- */

/**
 * pm__huge_zero_folio_get() - the machine's huge zero folio, for an address space whose use of
 * it is the flag *@used (Linux's mm_get_huge_zero_folio and MMF_HUGE_ZERO_FOLIO).
 *
 * One per machine, made when a first address space wants it and given back when the last one
 * that used it is torn down (pm__huge_zero_folio_put): Linux counts the users the same way
 * (huge_zero_refcount, one per mm) so that its shrinker may free the folio once none is left;
 * pinmm has no reclaim, so the last put frees it at once. That keeps a machine whose address
 * spaces are all gone exactly as it started (the same free pages), which a folio kept for the
 * machine's life (Linux 6.18's CONFIG_PERSISTENT_HUGE_ZERO_FOLIO) would not; and a machine
 * that never read-faults a THP-eligible VMA never pays its 2 MiB.
 *
 * The folio holds one reference for all its users; GUP references and pins add theirs, so a
 * pin may outlive the last user, and then the folio goes at the last unpin (a later first
 * user makes a new one meanwhile). After its first call an address space finds its flag set
 * and the pointer stable (it is a user: nobody frees the folio under it): one acquire load
 * each, no shared write. The first call takes huge_zero_lock; the 2 MiB are allocated and
 * zeroed outside it, and a folio that lost the race to be the machine's is freed unseen.
 * Context: the caller's address space is alive (a fault, or fork for its child).
 * Return: the folio, or NULL when no 2 MiB block can be had (the fault falls back).
 */
struct pm_folio *pm__huge_zero_folio_get(struct pm_machine *m, _Atomic bool *used)
{
	struct pm_folio *folio = NULL, *spare = NULL;

	if (likely(atomic_load_acquire(used)))
		return atomic_load_acquire(&m->xhuge_zero_folio);
	for (;;) {
		pm_spin_lock(&m->huge_zero_lock);
		folio = atomic_load_relaxed(&m->xhuge_zero_folio);
		if (!folio && spare) {
			folio = spare;
			spare = NULL;
			atomic_store_release(&m->xhuge_zero_folio, folio);
		}
		if (folio && !atomic_load_relaxed(used)) {
			m->huge_zero_users++;
			atomic_store_release(used, true);
		}
		pm_spin_unlock(&m->huge_zero_lock);
		if (folio)
			break;
		spare = pm__folio_alloc(m, HPAGE_PMD_ORDER, PM_ALLOC_ZERO);
		if (!spare)
			return NULL;
		folio_set_flags_new(spare, PGF(PG_huge_zero));
	}
	if (spare)
		folio_put(spare); /* another thread made it first: nobody saw ours */
	return folio;
}

/**
 * pm__huge_zero_folio_put() - the address space whose flag is *@used gives up its use of the
 * huge zero folio (Linux's mm_put_huge_zero_folio at __mmput); the last user's put drops the
 * folio's reference, which frees it unless GUP still holds some.
 * Context: teardown, the address space's mappings gone.
 */
void pm__huge_zero_folio_put(struct pm_machine *m, _Atomic bool *used)
{
	struct pm_folio *folio = NULL;

	if (!atomic_load_relaxed(used))
		return;
	pm_spin_lock(&m->huge_zero_lock);
	atomic_store_relaxed(used, false);
	pm_assert(m->huge_zero_users > 0);
	if (!--m->huge_zero_users) {
		folio = atomic_load_relaxed(&m->xhuge_zero_folio);
		atomic_store_relaxed(&m->xhuge_zero_folio, NULL);
	}
	pm_spin_unlock(&m->huge_zero_lock);
	if (folio)
		folio_put(folio);
}

size_t pm_machine_free_pages(struct pm_machine *m)
{
	if (unlikely(!m))
		return 0;
	return pm__nr_free_frames(m);
}

size_t pm_machine_total_pages(struct pm_machine *m)
{
	if (unlikely(!m))
		return 0;
	return m->nr_pages;
}

unsigned pm_machine_flags(struct pm_machine *m)
{
	return !m ? 0 : m->range_mm ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM;
}

unsigned pm_machine_knobs(struct pm_machine *m)
{
	if (unlikely(!m))
		return 0;
	return m->knobs;
}

const char *pm_strerror(long err)
{
	/* Any long: values that are no negative int errno never reach the negation. */
	if (err > 0 || err < -INT_MAX)
		return "unknown error";
	switch (-err) {
	case 0: return "success";
	case EINVAL: return "invalid argument";
	case EFAULT: return "bad address (no mapping, no permission, or beyond the object)";
	case ENOMEM: return "out of memory";
	case EOVERFLOW: return "range overflows";
	case EPERM: return "operation not permitted";
	case EBADF: return "no file to map";
	case EEXIST: return "range already mapped";
	case EAGAIN: return "try again";
	case EBUSY: return "busy";
	case EUCLEAN: return "invariant violated";
	case ENOSPC: return "no space";
	case EMFILE: return "too many machines alive";
	default: return strerror((int)-err);
	}
}
