// SPDX-License-Identifier: MIT
/*
 * machine.c - a machine's life (memory, descriptors, zero page), its registry of address spaces
 * and shmem objects, per-thread event counters, failure injection.
 *
 * Counters. Each thread that counts an event on a machine gets its own struct pm_stat_block
 * (a cache-line-aligned array of counters) on the machine's list; only that thread writes it,
 * with plain relaxed stores, and pm_machine_stats() sums every block. A thread finds its block
 * through a four-entry thread-local cache keyed by the machine's id, which is never reused,
 * so a stale entry for a destroyed machine can never match a new one. When a thread exits its
 * blocks are marked free (their counts stay, they are sums) and a later thread reuses them.
 * A few private counters each stand for an event that two public counters count (a fast pin:
 * a pin acquired and a page taken by the lockless walk); the hot path adds to the one slot,
 * and pm_machine_stats() adds it to both, so GUP-fast's pin+unpin of one page writes two
 * counters instead of four.
 *
 * Machine lookup from a page. pm_put_page() and the unpin family get a bare page; the page's
 * descriptor carries the machine's slot in pm__machines[], so the lookup is one load.
 *
 * fork(). machines_lock is process-global, and a child's pm_machine_create() takes it, so it is
 * held across fork() (machines_atfork_init): a child never inherits it locked by a thread it
 * does not have. Order: after lib/rcu.c's prepare, which pauses liburcu's callback workers
 * (a callback reaches the lock through pm__page_machine_search()), and before the trace
 * registry's lock, which is taken under it. Prepare handlers run in the reverse order of
 * registration, so this one registers between the two (constructor priorities 101 < 102 <
 * rcu.c's default).
 *
 * Size. The frames and the descriptor array are reserved with MAP_NORESERVE and nothing is
 * written to them at creation: the allocator initialises descriptors one 2 MiB block at a
 * time when it first hands the block out (page_alloc.c). Until frames are used a machine
 * costs a few pages of host memory and O(1) time whatever its size, so a 1 TiB machine can
 * be simulated on a small host as long as the work touches little of it. A range the host
 * cannot reserve (address space, vm.overcommit_memory=2) makes pm_machine_create() fail
 * with ENOMEM.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "mem/mem.h"

struct pm_machine *_Atomic pm__machines[PM_MAX_MACHINES];
static pthread_mutex_t machines_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t machines_next_id = 1; /* under machines_lock */

__thread struct pm_stat_tls pm__stat_tls[4];
static pthread_key_t stat_key;
static pthread_once_t stat_key_once = PTHREAD_ONCE_INIT;

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

static void machines_atfork_prepare(void)
{
	pthread_mutex_lock(&machines_lock);
}

static void machines_atfork_release(void)
{
	pthread_mutex_unlock(&machines_lock);
}

__attribute__((constructor(102))) static void machines_atfork_init(void)
{
	if (pthread_atfork(machines_atfork_prepare, machines_atfork_release,
			   machines_atfork_release))
		abort();
}

/* ---- failure injection and metadata allocation ---- */

bool pm__should_fail(struct pm_machine *m)
{
	long n = atomic_load_relaxed(&m->xfail_nth);

	if (likely(n <= 0))
		return false;
	n = atomic_sub_mb(&m->xfail_nth, 1);
	if (n == 1) {
		count_event(m, ALLOC_FAILURES, 1);
		return true;
	}
	return false;
}

void pm_fail_nth(struct pm_machine *m, long n)
{
	if (unlikely(!m))
		return;
	atomic_store_mb(&m->xfail_nth, n > 0 ? n : 0);
}

void *pm__kzalloc(struct pm_machine *m, size_t size)
{
	if (pm__should_fail(m))
		return NULL;
	return calloc(1, size);
}

/* ---- per-thread counters ---- */

/* Mark @block free for reuse if machine @id still exists. */
static void stat_block_release(uint64_t id, struct pm_stat_block *block)
{
	pthread_mutex_lock(&machines_lock);
	for (unsigned i = 0; i < PM_MAX_MACHINES; i++) {
		struct pm_machine *m = atomic_load_relaxed(&pm__machines[i]);

		if (m && m->id == id) {
			pthread_mutex_lock(&m->lock);
			block->in_use = false;
			pthread_mutex_unlock(&m->lock);
			break;
		}
	}
	pthread_mutex_unlock(&machines_lock);
}

static void stat_thread_exit(void *arg)
{
	for (unsigned i = 0; i < ARRAY_SIZE(pm__stat_tls); i++) {
		if (pm__stat_tls[i].id && pm__stat_tls[i].block)
			stat_block_release(pm__stat_tls[i].id, pm__stat_tls[i].block);
		pm__stat_tls[i].id = 0;
		pm__stat_tls[i].block = NULL;
	}
}

static void stat_key_init(void)
{
	if (pthread_key_create(&stat_key, stat_thread_exit))
		pm_die("pthread_key_create");
}

struct pm_stat_block *pm__stat_block_slow(struct pm_machine *m)
{
	struct pm_stat_tls hit = { 0 };
	unsigned i, last = ARRAY_SIZE(pm__stat_tls) - 1;

	for (i = 1; i < ARRAY_SIZE(pm__stat_tls); i++) {
		if (pm__stat_tls[i].id == m->id) {
			hit = pm__stat_tls[i];
			last = i;
			break;
		}
	}

	if (!hit.id) {
		struct pm_stat_block *b = NULL;
		struct pm_list *pos;

		pthread_once(&stat_key_once, stat_key_init);
		pthread_mutex_lock(&m->lock);
		pm_list_for_each(pos, &m->stat_blocks) {
			struct pm_stat_block *c = pm_list_entry(pos, struct pm_stat_block, link);

			if (!c->in_use) {
				b = c;
				break;
			}
		}
		if (!b && !posix_memalign((void **)&b, PM_CACHELINE, sizeof(*b))) {
			memset(b, 0, sizeof(*b));
			pm_list_add_tail(&b->link, &m->stat_blocks);
			pm__trace_object(b, sizeof(*b), "pm_stat_block");
		}
		if (b)
			b->in_use = true;
		pthread_mutex_unlock(&m->lock);
		if (!b)
			return &m->shared_stats;
		pthread_setspecific(stat_key, (void *)1);
		hit.id = m->id;
		hit.block = b;
		/* Evict the least recently used entry. */
		if (pm__stat_tls[last].id && pm__stat_tls[last].block)
			stat_block_release(pm__stat_tls[last].id, pm__stat_tls[last].block);
	}
	/* Move to the front. */
	memmove(&pm__stat_tls[1], &pm__stat_tls[0], last * sizeof(pm__stat_tls[0]));
	pm__stat_tls[0] = hit;
	return hit.block;
}

void pm_machine_stats(struct pm_machine *m, struct pm_stats *out)
{
	unsigned long sum[PM_NR_STAT_ITEMS];
	struct pm_list *pos;

	if (unlikely(!m || !out)) {
		if (out)
			memset(out, 0, sizeof(*out));
		return;
	}
	for (unsigned i = 0; i < PM_NR_STAT_ITEMS; i++)
		sum[i] = atomic_load_relaxed(&m->shared_stats.v[i]);
	pthread_mutex_lock(&m->lock);
	pm_list_for_each(pos, &m->stat_blocks) {
		struct pm_stat_block *b = pm_list_entry(pos, struct pm_stat_block, link);

		for (unsigned i = 0; i < PM_NR_STAT_ITEMS; i++)
			sum[i] += atomic_load_relaxed(&b->v[i]);
	}
	pthread_mutex_unlock(&m->lock);
	/* The private items, into each public counter that counts their event. */
	sum[NR_FOLL_PIN_ACQUIRED] += sum[GUP_FAST_PINS];
	sum[GUP_FAST_PAGES] += sum[GUP_FAST_PINS];
	sum[NR_FOLL_PIN_RELEASED] += sum[UNPIN_SMALL_ONE];
	sum[UNPIN_FOLIO_UPDATES] += sum[UNPIN_SMALL_ONE];
	memcpy(out, sum, sizeof(*out));
}

/* ---- machine life ---- */

/*
 * A descriptor above the frontier was never written, so its slot is 0 (no machine): such a
 * one, which only pm_pfn_to_page() hands out, is found by the range it lies in.
 */
struct pm_machine *pm__page_machine_search(const struct pm_page *page)
{
	struct pm_machine *m;

	pthread_mutex_lock(&machines_lock); /* no machine goes away under the search */
	for (unsigned i = 1; i < PM_MAX_MACHINES; i++) {
		m = atomic_load_relaxed(&pm__machines[i]);
		if (m && page >= m->pages && page < m->pages + m->nr_pages)
			break;
		m = NULL;
	}
	pthread_mutex_unlock(&machines_lock);
	if (!m)
		pm_die("a page descriptor of no machine");
	return m;
}

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

	pthread_mutex_lock(&machines_lock);
	err = EMFILE;
	for (unsigned i = 1; i < PM_MAX_MACHINES; i++) {
		if (!atomic_load_relaxed(&pm__machines[i])) {
			m->slot = (uint16_t)i;
			m->id = machines_next_id++;
			atomic_store_release(&pm__machines[i], m);
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&machines_lock);
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
	pthread_mutex_lock(&machines_lock);
	atomic_store_relaxed(&pm__machines[m->slot], NULL);
	pthread_mutex_unlock(&machines_lock);
	/* Setting the pool aside may have counted events: this thread's block goes too. */
	while (!pm_list_empty(&m->stat_blocks)) {
		struct pm_list *pos = m->stat_blocks.next;

		pm_list_del(pos);
		pm__trace_object_gone(pm_list_entry(pos, struct pm_stat_block, link));
		free(pm_list_entry(pos, struct pm_stat_block, link));
	}
	for (unsigned i = 0; i < ARRAY_SIZE(pm__stat_tls); i++)
		if (pm__stat_tls[i].id == m->id)
			pm__stat_tls[i] = (struct pm_stat_tls){ 0 };
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
	struct pm_list *pos, *n;

	pm_assert(pm_list_empty(&m->mms) && pm_list_empty(&m->shmems));

	pthread_mutex_lock(&machines_lock);
	atomic_store_relaxed(&pm__machines[m->slot], NULL);
	pthread_mutex_lock(&m->lock);
	pm_list_for_each_safe(pos, n, &m->stat_blocks) {
		pm__trace_object_gone(pm_list_entry(pos, struct pm_stat_block, link));
		free(pm_list_entry(pos, struct pm_stat_block, link));
	}
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&machines_lock);

	/* Stale thread-local entries of this thread must not be released again later. */
	for (unsigned i = 0; i < ARRAY_SIZE(pm__stat_tls); i++)
		if (pm__stat_tls[i].id == m->id)
			pm__stat_tls[i] = (struct pm_stat_tls){ 0 };

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
