// SPDX-License-Identifier: MIT
/*
 * test_shmem_nodes.c - the shmem page cache's node cache (mem/objcache.c): a torn-down
 * object's tree nodes go to the freeing CPU's cache and on to the machine's depot, within
 * their bounds; the next object's nodes come from there, on either CPU, before malloc. And the
 * insert's locks: a leaf that exists takes only its own lock, every insert takes tree_lock
 * under PM_KNOB_SHMEM_TREE_LOCK.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;

static int fault_at(long base, unsigned long page)
{
	return pm_fault(mm, (unsigned long)base + page * PG, PM_FAULT_WRITE);
}

static unsigned cached(unsigned i)
{
	struct pm_obj_cache *c = &m->shmem_nodes[i];
	unsigned n;

	pm_spin_lock(&c->lock);
	n = atomic_load_relaxed(&c->xcount);
	pm_spin_unlock(&c->lock);
	return n;
}

static unsigned cached_total(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i <= m->nr_cpus; i++)
		n += cached(i);
	return n;
}

/* An object mapped shared in an mm, and how to make, fault and tear it down. */
struct obj {
	struct pm_shmem *f;
	long addr;
	unsigned long pages;
};

static bool obj_map(struct obj *o, unsigned long pages)
{
	o->pages = pages;
	o->f = pm_shmem_create(m, pages * PG, 0);
	if (!o->f)
		return false;
	o->addr = pm_mmap(mm, 0, pages * PG, RW, PM_MAP_SHARED, o->f, 0);
	if (o->addr >= 0)
		return true;
	pm_shmem_put(o->f);
	return false;
}

/* Fault one page in each of the first @leaves 64-page leaves. Return: false if one failed. */
static bool obj_fault_leaves(struct obj *o, unsigned long leaves)
{
	bool ok_all = true;

	for (unsigned long i = 0; i < leaves; i++)
		ok_all &= fault_at(o->addr, i * 64) == 0;
	return ok_all;
}

/* Unmap and put the object: its tree is torn down on this CPU (and RCU has run). */
static void obj_tear_down(struct obj *o)
{
	pm_munmap(mm, (unsigned long)o->addr, o->pages * PG);
	pm_shmem_put(o->f);
	pm_rcu_barrier();
}

static bool fill_and_tear_down(unsigned long pages, unsigned long leaves)
{
	struct obj o;
	bool ok_all;

	if (!obj_map(&o, pages))
		return false;
	ok_all = obj_fault_leaves(&o, leaves);
	obj_tear_down(&o);
	return ok_all;
}

/* 1024 pages: 16 leaves under one root, 17 nodes. */
static void test_reuse(bool two_cpus)
{
	unsigned before;
	struct obj o;

	free0 = pmt_setup(&m, &mm, 64, 0);
	ASSERT_TRUE(pmt_run_on(0));
	is_int(cached_total(), 0, "a new machine caches no node");
	ok(fill_and_tear_down(1024, 16), "16 leaves faulted");
	is_int(cached(0), 17, "the 17 nodes of the torn-down tree are on CPU 0's cache");
	is_int(cached(m->nr_cpus), 0, "below the high mark, none went to the depot");
	if (two_cpus)
		ASSERT_TRUE(pmt_run_on(1));
	before = cached_total();
	ASSERT_TRUE(obj_map(&o, 1024));
	ASSERT_TRUE(obj_fault_leaves(&o, 16));
	if (two_cpus)
		is_int(cached_total(), before,
		       "CPU 1's cache and the depot are empty: CPU 1 takes from malloc");
	else
		is_int(cached_total(), before - 17, "a new tree takes its 17 nodes from the cache");
	obj_tear_down(&o);
	pmt_teardown(&m, &mm, free0, two_cpus ? "reuse on CPU 1" : "reuse");
}

/*
 * A tree bigger than a CPU's cache: the rest goes to the depot, up to its bound, and the
 * other CPU's faults take from the depot before they call malloc.
 */
static void test_depot(void)
{
	const unsigned long leaves = OBJ_DEPOT_MAX + 300;
	unsigned c0, depot, total;
	struct obj o;

	free0 = pmt_setup(&m, &mm, 64, 0);
	ASSERT_TRUE(pmt_run_on(0));
	ok(fill_and_tear_down(leaves * 64, leaves), "one page in each of 4396 leaves");
	c0 = cached(0);
	depot = cached(m->nr_cpus);
	ok(c0 > OBJ_CACHE_HIGH - OBJ_CACHE_BATCH && c0 <= OBJ_CACHE_HIGH,
	   "CPU 0's cache ends within a batch of its high mark (%u)", c0);
	is_int(depot, OBJ_DEPOT_MAX, "the depot is full; what was beyond it went to malloc");

	/* CPU 1: 1024 pages, 17 nodes, from the depot in batches. */
	ASSERT_TRUE(pmt_run_on(1));
	total = cached_total();
	ASSERT_TRUE(obj_map(&o, 1024));
	ASSERT_TRUE(obj_fault_leaves(&o, 16));
	is_int(cached_total(), total - 17, "CPU 1's 17 nodes came from the depot");
	is_int(cached(m->nr_cpus), OBJ_DEPOT_MAX - OBJ_CACHE_BATCH, "in one batch");
	obj_tear_down(&o);
	pmt_teardown(&m, &mm, free0, "depot"); /* LeakSanitizer: every cached node is freed */
}

/*
 * An injected failure fails a node allocation even when the caches have nodes. A fault in a
 * new leaf under a PTE table that exists allocates the folio first, then the nodes.
 */
static void test_injected_failure(void)
{
	unsigned before;
	struct obj o;

	free0 = pmt_setup(&m, &mm, 64, 0);
	ASSERT_TRUE(pmt_run_on(0));
	ok(fill_and_tear_down(1024, 16), "16 leaves faulted");
	ASSERT_TRUE(obj_map(&o, 1024));
	/* 1024 pages: the leaves' parent, the root, is made ahead with the object
	 * (shmem/cache.c); index 64 then needs only its leaf. */
	ASSERT_EQ(fault_at(o.addr, 0), 0);
	before = cached_total();
	pm_fail_nth(m, 2);
	is_int(fault_at(o.addr, 64), -ENOMEM,
	       "the first node's allocation fails as injected: -ENOMEM");
	is_int(cached_total(), before, "and took no node from the cache");
	pm_fail_nth(m, 0);
	is_int(fault_at(o.addr, 64), 0, "the retry succeeds");
	is_int(cached_total(), before - 1, "with one cached node, the leaf");
	obj_tear_down(&o);
	pmt_teardown(&m, &mm, free0, "injected failure");
}

struct insert_arg {
	struct obj *o;
	unsigned long index;
	atomic_int ret; /* 1 while the fault runs */
};

static void *insert_thread(void *p)
{
	struct insert_arg *a = p;

	atomic_store(&a->ret, fault_at(a->o->addr, a->index));
	return NULL;
}

/*
 * A fault that inserts @index - 1, into the leaf that index 0 made, or 64, into a new leaf
 * under the root made ahead with the 1024-page object - while this thread holds the object's
 * tree_lock: it finishes without the knob, and waits for the lock with it. (A fault that
 * finishes while the lock is held is what fails; the 100 ms only give it time to.)
 */
static void test_tree_lock_knob(unsigned knobs, unsigned long index)
{
	struct insert_arg a = { .index = index, .ret = 1 };
	const char *what = knobs ? "PM_KNOB_SHMEM_TREE_LOCK" : "no knob";
	const char *leaf = index < 64 ? "a leaf that exists" : "a new leaf under a node made ahead";
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	pthread_t t;
	struct obj o;

	free0 = pmt_setup(&m, &mm, 64, knobs);
	ASSERT_TRUE(obj_map(&o, 1024));
	ASSERT_EQ(fault_at(o.addr, 0), 0);
	a.o = &o;
	pm_spin_lock(&o.f->tree_lock);
	ASSERT_EQ(pthread_create(&t, NULL, insert_thread, &a), 0);
	if (!knobs) {
		while (atomic_load(&a.ret) == 1)
			sched_yield();
		is_int(atomic_load(&a.ret), 0, "%s: an insert into %s takes no tree_lock", what,
		       leaf);
	} else {
		nanosleep(&ts, NULL);
		is_int(atomic_load(&a.ret), 1, "%s: an insert into %s waits for tree_lock", what,
		       leaf);
	}
	pm_spin_unlock(&o.f->tree_lock);
	pthread_join(t, NULL);
	is_int(atomic_load(&a.ret), 0, "%s: the fault succeeds", what);
	obj_tear_down(&o);
	pmt_teardown(&m, &mm, free0, what);
}

int main(void)
{
	cpu_set_t saved;

	plan(28 + 4 * 4);
	ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
	if (CPU_COUNT(&saved) < 2 || !CPU_ISSET(0, &saved) || !CPU_ISSET(1, &saved) ||
	    !pmt_run_on(1) || !pmt_run_on(0)) {
		skip(28 + 4 * 4, "needs CPUs 0 and 1");
		return done_testing();
	}
	test_reuse(false);
	test_reuse(true);
	test_depot();
	test_injected_failure();
	sched_setaffinity(0, sizeof(saved), &saved);
	test_tree_lock_knob(0, 1);
	test_tree_lock_knob(PM_KNOB_SHMEM_TREE_LOCK, 1);
	test_tree_lock_knob(0, 64);
	test_tree_lock_knob(PM_KNOB_SHMEM_TREE_LOCK, 64);
	sched_setaffinity(0, sizeof(saved), &saved);
	return done_testing();
}
