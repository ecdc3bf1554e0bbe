// SPDX-License-Identifier: MIT
/*
 * test_pcp.c - the per-CPU caches of free frames (src/mem/page_alloc.c) when threads move
 * between CPUs: frames faulted on one CPU and freed on another go to the freeing CPU's cache,
 * the free count stays exact after pm_rcu_barrier(), every frame cached on another CPU still
 * counts before an allocation fails, and the self-tuning high marks stay within their bounds
 * and fall back to the minimum when an allocation had to drain them.
 *
 * Migration is forced with sched_setaffinity(); on a host with one CPU those checks skip.
 */
#include <errno.h>
#include <sched.h>

#include "internal.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

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

static void run_anywhere(cpu_set_t *saved)
{
	sched_setaffinity(0, sizeof(*saved), saved);
}

/* Fault @n pages of a fresh mapping at @addr for write; the count that succeeded. */
static unsigned long fault_pages(struct pm_mm *mm, unsigned long addr, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		if (pm_fault(mm, addr + i * PG, PM_FAULT_WRITE))
			break;
	return i;
}

static bool highs_in_bounds(struct pm_machine *m)
{
	for (unsigned c = 0; c < m->nr_cpus; c++) {
		struct pm_pcp *pcp = &m->pcp[c];

		if (pcp->high < m->pcp_high_min || pcp->high > m->pcp_high_max ||
		    atomic_load_relaxed(&pcp->xcount) > pcp->high) {
			diag("cpu %u: count %d high %d, bounds %d..%d", c,
			     atomic_load_relaxed(&pcp->xcount), pcp->high, m->pcp_high_min,
			     m->pcp_high_max);
			return false;
		}
	}
	return true;
}

/* Fault on CPU 0, free on CPU 1, and back: the count is exact after every round. */
static void test_migrate(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	const unsigned long n = 3000; /* well past a batch and the minimum high mark */
	unsigned long addr = 0x10000000UL;
	struct pm_mm *mm;
	bool exact = true, local = true, faulted = true;
	size_t free0;

	ASSERT_TRUE(m);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	for (int round = 0; round < 6; round++) {
		int from = round & 1, to = !from;
		int cached;

		ASSERT_TRUE(run_on(from));
		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		faulted &= fault_pages(mm, addr, n) == n;
		ASSERT_TRUE(run_on(to));
		cached = atomic_load_relaxed(&m->pcp[to].xcount);
		ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
		pm_rcu_barrier();
		/* The freeing CPU's cache took them (up to its high mark, the rest drained). */
		local &= atomic_load_relaxed(&m->pcp[to].xcount) > cached ||
			 atomic_load_relaxed(&m->pcp[to].xcount) + PCP_BATCH > m->pcp[to].high;
		if (pm_machine_free_pages(m) != free0 - 1) { /* the PGD */
			diag("round %d: %zu free, want %zu", round, pm_machine_free_pages(m),
			     free0 - 1);
			exact = false;
		}
	}
	ok(faulted, "3000 pages fault on either CPU, six rounds");
	ok(local, "frames freed on a CPU go to that CPU's cache");
	ok(exact, "free count exact after each round (faulted on one CPU, freed on the other)");
	ok(highs_in_bounds(m), "high marks within [pcp_high_min, pcp_high_max], counts below");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

/*
 * Fill a small machine on CPU 0, free everything on CPU 1, fill it again on CPU 0: the second
 * fill reaches the same count, so the frames CPU 1 keeps cached were drained before -ENOMEM.
 */
static void test_oom_drains_other_cpu(void)
{
	struct pm_config cfg = { .mem_bytes = 8 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	unsigned long addr = 0x10000000UL, n = 4096, got[2];
	struct pm_mm *mm;
	size_t free0;
	bool minimal = true;

	ASSERT_TRUE(m);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	for (int round = 0; round < 2; round++) {
		ASSERT_TRUE(run_on(0));
		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		got[round] = fault_pages(mm, addr, n);
		ASSERT_EQ(pm_fault(mm, addr + got[round] * PG, PM_FAULT_WRITE), -ENOMEM);
		/* The failing allocation drained every cache and set the marks back. */
		for (unsigned c = 0; c < m->nr_cpus; c++)
			minimal &= m->pcp[c].high == m->pcp_high_min;
		ASSERT_TRUE(run_on(1));
		ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
		pm_rcu_barrier();
		ok(atomic_load_relaxed(&m->pcp[1].xcount) > 0,
		   "round %d: CPU 1 keeps frames cached after the munmap", round);
		is_int(pm_machine_free_pages(m), free0 - 1, "round %d: free count exact (the PGD apart)",
		       round);
	}
	ok(got[0] > 1500, "the first fill takes most of the machine (%lu pages)", got[0]);
	is_int(got[1], got[0], "the second fill, on the other CPU, reaches the same count");
	ok(minimal, "an allocation that failed left every high mark at the minimum");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

int main(void)
{
	cpu_set_t saved;

	plan(15);
	ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
	if (CPU_COUNT(&saved) < 2 || !CPU_ISSET(0, &saved) || !CPU_ISSET(1, &saved) ||
	    !run_on(1) || !run_on(0)) {
		skip(15, "needs CPUs 0 and 1");
		run_anywhere(&saved);
		return done_testing();
	}
	test_migrate();
	test_oom_drains_other_cpu();
	run_anywhere(&saved);
	return done_testing();
}
