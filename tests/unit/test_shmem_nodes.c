// SPDX-License-Identifier: MIT
/*
 * test_shmem_nodes.c - the shmem page cache's node caches (shmem/cache.c): a torn-down
 * object's tree nodes go to the freeing CPU's cache and on to the machine's depot, within
 * their bounds; the next object's nodes come from there, on either CPU, before malloc.
 */
#include <errno.h>
#include <sched.h>

#include "internal.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static bool run_on(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return false;
	sched_yield();
	return sched_getcpu() == cpu;
}

static int fault_at(struct pm_mm *mm, long base, unsigned long page)
{
	return pm_fault(mm, (unsigned long)base + page * PG, PM_FAULT_WRITE);
}

static unsigned cached(struct pm_machine *m, unsigned i)
{
	struct pm_node_cache *c = &m->node_caches[i];
	unsigned n;

	pm_spin_lock(&c->lock);
	n = c->count;
	pm_spin_unlock(&c->lock);
	return n;
}

static unsigned cached_total(struct pm_machine *m)
{
	unsigned n = 0;

	for (unsigned i = 0; i <= m->nr_cpus; i++)
		n += cached(m, i);
	return n;
}

/*
 * Fault one page in each of @leaves 64-page leaves of a new object of @pages pages on the
 * current CPU, then tear it down (munmap, last put). Return: false if a fault failed.
 */
static bool fill_and_tear_down(struct pm_machine *m, struct pm_mm *mm, unsigned long pages,
			       unsigned long leaves)
{
	struct pm_shmem *f = pm_shmem_create(m, pages * PG, 0);
	bool ok_all = true;
	long addr;

	if (!f)
		return false;
	addr = pm_mmap(mm, 0, pages * PG, RW, PM_MAP_SHARED, f, 0);
	if (addr < 0) {
		pm_shmem_put(f);
		return false;
	}
	for (unsigned long i = 0; i < leaves; i++)
		ok_all &= pm_fault(mm, (unsigned long)addr + i * 64 * PG, PM_FAULT_WRITE) == 0;
	pm_munmap(mm, (unsigned long)addr, pages * PG);
	pm_shmem_put(f);
	pm_rcu_barrier();
	return ok_all;
}

/* 1024 pages: 16 leaves under one root, 17 nodes. */
static void test_reuse(bool two_cpus)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm;
	unsigned before;

	ASSERT_TRUE(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_TRUE(run_on(0));
	is_int(cached_total(m), 0, "a new machine caches no node");
	ok(fill_and_tear_down(m, mm, 1024, 16), "16 leaves faulted");
	is_int(cached(m, 0), 17, "the 17 nodes of the torn-down tree are on CPU 0's cache");
	is_int(cached(m, m->nr_cpus), 0, "below the high mark, none went to the depot");
	if (two_cpus)
		ASSERT_TRUE(run_on(1));
	before = cached_total(m);
	{
		struct pm_shmem *f = pm_shmem_create(m, 1024 * PG, 0);
		long addr = pm_mmap(mm, 0, 1024 * PG, RW, PM_MAP_SHARED, f, 0);

		ASSERT_TRUE(f && addr >= 0);
		for (unsigned long i = 0; i < 16; i++)
			ASSERT_EQ(fault_at(mm, addr, i * 64), 0);
		if (two_cpus)
			is_int(cached_total(m), before,
			       "CPU 1's cache and the depot are empty: CPU 1 takes from malloc");
		else
			is_int(cached_total(m), before - 17,
			       "a new tree takes its 17 nodes from the cache");
		pm_munmap(mm, (unsigned long)addr, 1024 * PG);
		pm_shmem_put(f);
		pm_rcu_barrier();
	}
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
}

/*
 * A tree bigger than a CPU's cache: the rest goes to the depot, up to its bound, and the
 * other CPU's faults take from the depot before they call malloc.
 */
static void test_depot(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	const unsigned long leaves = NODE_DEPOT_MAX + 300;
	unsigned c0, depot, total;
	struct pm_mm *mm;

	ASSERT_TRUE(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_TRUE(run_on(0));
	ok(fill_and_tear_down(m, mm, leaves * 64, leaves), "one page in each of 4396 leaves");
	c0 = cached(m, 0);
	depot = cached(m, m->nr_cpus);
	ok(c0 > NODE_CACHE_HIGH - NODE_CACHE_BATCH && c0 <= NODE_CACHE_HIGH,
	   "CPU 0's cache ends within a batch of its high mark (%u)", c0);
	is_int(depot, NODE_DEPOT_MAX, "the depot is full; what was beyond it went to malloc");

	/* CPU 1: 1024 pages, 17 nodes, from the depot in batches. */
	ASSERT_TRUE(run_on(1));
	total = cached_total(m);
	{
		struct pm_shmem *f = pm_shmem_create(m, 1024 * PG, 0);
		long addr = pm_mmap(mm, 0, 1024 * PG, RW, PM_MAP_SHARED, f, 0);

		ASSERT_TRUE(f && addr >= 0);
		for (unsigned long i = 0; i < 16; i++)
			ASSERT_EQ(fault_at(mm, addr, i * 64), 0);
		is_int(cached_total(m), total - 17, "CPU 1's 17 nodes came from the depot");
		is_int(cached(m, m->nr_cpus), NODE_DEPOT_MAX - NODE_CACHE_BATCH,
		       "in one batch");
		pm_munmap(mm, (unsigned long)addr, 1024 * PG);
		pm_shmem_put(f);
		pm_rcu_barrier();
	}
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pm_machine_destroy(m); /* LeakSanitizer: every cached node is freed */
}

/*
 * An injected failure fails a node allocation even when the caches have nodes. A fault in a
 * new leaf under a PTE table that exists allocates the folio first, then the nodes.
 */
static void test_injected_failure(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_shmem *f;
	struct pm_mm *mm;
	unsigned before;
	long addr;

	ASSERT_TRUE(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_TRUE(run_on(0));
	ok(fill_and_tear_down(m, mm, 1024, 16), "16 leaves faulted");
	f = pm_shmem_create(m, 1024 * PG, 0);
	addr = pm_mmap(mm, 0, 1024 * PG, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(f && addr >= 0);
	/* Index 0: a leaf that is the root. Index 64 then needs a new root and a leaf. */
	ASSERT_EQ(pm_fault(mm, (unsigned long)addr, PM_FAULT_WRITE), 0);
	before = cached_total(m);
	pm_fail_nth(m, 2);
	is_int(pm_fault(mm, (unsigned long)addr + 64 * PG, PM_FAULT_WRITE), -ENOMEM,
	       "the first node's allocation fails as injected: -ENOMEM");
	is_int(cached_total(m), before, "and took no node from the cache");
	pm_fail_nth(m, 0);
	is_int(pm_fault(mm, (unsigned long)addr + 64 * PG, PM_FAULT_WRITE), 0,
	       "the retry succeeds");
	is_int(cached_total(m), before - 2, "with two cached nodes, the new root and the leaf");
	pm_munmap(mm, (unsigned long)addr, 1024 * PG);
	pm_shmem_put(f);
	pm_rcu_barrier();
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
}

int main(void)
{
	cpu_set_t saved;

	plan(24);
	ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
	if (CPU_COUNT(&saved) < 2 || !CPU_ISSET(0, &saved) || !CPU_ISSET(1, &saved) ||
	    !run_on(1) || !run_on(0)) {
		skip(24, "needs CPUs 0 and 1");
		return done_testing();
	}
	test_reuse(false);
	test_reuse(true);
	test_depot();
	test_injected_failure();
	sched_setaffinity(0, sizeof(saved), &saved);
	return done_testing();
}
