// SPDX-License-Identifier: MIT
/*
 * mem.c - what mem/mem.h's inline helpers call, below every other file of mem/: the registry of
 * live machines by slot, per-thread event counters, failure injection.
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
 * Registry. A machine takes a free slot of pm__machines[] when it is made and gives it back
 * when it goes (pm__machine_register(), pm__machine_unregister(), both under machines_lock).
 * pm_put_page() and the unpin family get a bare page; the page's descriptor carries the
 * machine's slot, so the lookup is one load (page_machine()).
 *
 * fork(). machines_lock is process-global, and a child's pm_machine_create() takes it, so it
 * is held across fork(): machine.c's fork handlers take and drop it (pm__machines_lock(),
 * pm__machines_unlock()), and the top of machine.c says why and in which order.
 */
#include "mem/mem.h"

struct pm_machine *_Atomic pm__machines[PM_MAX_MACHINES];
static pthread_mutex_t machines_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t machines_next_id = 1; /* under machines_lock */

__thread struct pm_stat_tls pm__stat_tls[4];
__thread unsigned pm__pin_tag;
static _Atomic unsigned pin_tag_next;
static pthread_key_t stat_key;
static pthread_once_t stat_key_once = PTHREAD_ONCE_INIT;

/* Threads take the pin tags 1..255 in turn: two threads that share one are rare, and then
 * only miss hot mode between themselves. */
unsigned pm__pin_tag_slow(void)
{
	pm__pin_tag = atomic_add_relaxed(&pin_tag_next, 1) % 255 + 1;
	return pm__pin_tag;
}

/* ---- the registry ---- */

/* machines_lock for machine.c's fork handlers, which hold it across fork(). */
void pm__machines_lock(void)
{
	pthread_mutex_lock(&machines_lock);
}

void pm__machines_unlock(void)
{
	pthread_mutex_unlock(&machines_lock);
}

/* Give @m a slot and an id. Return: 0, or EMFILE when every slot is taken. */
int pm__machine_register(struct pm_machine *m)
{
	int err = EMFILE;

	pthread_mutex_lock(&machines_lock);
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
	return err;
}

/*
 * pm__machine_unregister() - @m leaves its slot, and its counter blocks go with it, under
 * machines_lock so that an exiting thread's release (stat_block_release) never finds them.
 */
void pm__machine_unregister(struct pm_machine *m)
{
	struct pm_list *pos, *n;

	pthread_mutex_lock(&machines_lock);
	atomic_store_relaxed(&pm__machines[m->slot], NULL);
	pthread_mutex_lock(&m->lock);
	pm_list_for_each_safe(pos, n, &m->stat_blocks) {
		pm__trace_object_gone(pm_list_entry(pos, struct pm_stat_block, link));
		free(pm_list_entry(pos, struct pm_stat_block, link));
	}
	pm_list_init(&m->stat_blocks);
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&machines_lock);

	/* Stale thread-local entries of this thread must not be released again later. */
	for (unsigned i = 0; i < ARRAY_SIZE(pm__stat_tls); i++)
		if (pm__stat_tls[i].id == m->id)
			pm__stat_tls[i] = (struct pm_stat_tls){ 0 };
}

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
