// SPDX-License-Identifier: MIT
/*
 * test_pcp.c - the per-CPU caches of free frames (src/mem/page_alloc.c) when threads move
 * between CPUs: frames faulted on one CPU and freed on another go to the freeing CPU's cache,
 * the free count stays exact after pm_rcu_barrier(), every frame cached on another CPU still
 * counts before an allocation fails, and the self-tuning high marks stay within their bounds
 * and fall back to the minimum when an allocation had to drain them. Machines of two homes
 * or more (page_alloc.c, "Homes"): each CPU's 4 KiB frames come from its own zone, a CPU
 * whose home is full takes the other zones' frames before anything fails, a frame freed on
 * another CPU goes to that CPU's cache of the frame's zone, huge pages come
 * from the lowest zone whichever CPU asks, and the checker counts the never-used frames
 * between zones as free. Page tables have cache lists of their own, so a CPU that maps and
 * unmaps the same area again and again gets its pages back as runs of adjacent frames. A
 * freed THP's block waits in the freeing CPU's cache for that CPU's next THP.
 *
 * Which cache a thread uses comes from pm_cpu_now() (src/lib/cpu.h), which reads the CPU
 * from the rseq area: on each CPU it must say what sched_getcpu() says.
 *
 * Migration is forced with sched_setaffinity(); on a host with one CPU those checks skip.
 */
#include <errno.h>
#include <sched.h>

#include "gup/gup.h"
#include "lib/cpu.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

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

		ASSERT_TRUE(pmt_run_on(from));
		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		faulted &= fault_pages(mm, addr, n) == n;
		ASSERT_TRUE(pmt_run_on(to));
		cached = atomic_load_relaxed(&m->pcp[to].xcount);
		ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
		pm_rcu_barrier();
		/* The freeing CPU's cache took them (up to its high mark, the rest drained). */
		local &= atomic_load_relaxed(&m->pcp[to].xcount) > cached ||
			 atomic_load_relaxed(&m->pcp[to].xcount) + PCP_BATCH > m->pcp[to].high;
		if (pm_machine_free_pages(m) != free0 - pmt_kept_tables(m)) {
			diag("round %d: %zu free, want %zu", round, pm_machine_free_pages(m),
			     free0 - pmt_kept_tables(m));
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
		ASSERT_TRUE(pmt_run_on(0));
		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		got[round] = fault_pages(mm, addr, n);
		ASSERT_EQ(pm_fault(mm, addr + got[round] * PG, PM_FAULT_WRITE), -ENOMEM);
		/* The failing allocation drained every cache and set the marks back. */
		for (unsigned c = 0; c < m->nr_cpus; c++)
			minimal &= m->pcp[c].high == m->pcp_high_min;
		ASSERT_TRUE(pmt_run_on(1));
		ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
		pm_rcu_barrier();
		ok(atomic_load_relaxed(&m->pcp[1].xcount) > 0,
		   "round %d: CPU 1 keeps frames cached after the munmap", round);
		is_int(pm_machine_free_pages(m), free0 - pmt_kept_tables(m),
		       "round %d: free count exact (the kept tables apart)", round);
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

/* The pfn of the page mapped at @addr (a reference taken and dropped). */
static unsigned long pfn_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *page;
	unsigned long pfn;

	if (pm_get_user_pages(mm, addr, 1, 0, &page) != 1)
		return ~0UL;
	pfn = pm_page_to_pfn(page);
	pm_put_page(page);
	return pfn;
}

/* Every page of [addr, addr + n pages) in zone @zone? */
static bool all_in_zone(struct pm_machine *m, struct pm_mm *mm, unsigned long addr,
			unsigned long n, unsigned zone)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long pfn = pfn_at(mm, addr + i * PG);

		if (pfn == ~0UL || min(pfn / m->zone_pages, (unsigned long)m->nr_zones - 1) != zone) {
			diag("page %lu: pfn %lu, not in zone %u", i, pfn, zone);
			return false;
		}
	}
	return true;
}

/*
 * Page tables have cache lists of their own, as Linux's pcp lists are per migratetype. Map,
 * fault and unmap the same 2048 pages ten times on one CPU. A mapping's page tables are
 * allocated between its pages and freed after a grace period; on one list they would leave a
 * hole in the cached run where each was taken and another where its frame came back, round
 * after round, until the pages of a mapping lay scattered over the cache (zeroing scattered
 * frames costs a quarter more than zeroing adjacent ones on the development VMs). On lists
 * of their own, the pages come back as runs of adjacent frames every round.
 */
/* An mm on machine @m for a test that runs on CPU 0; *@free0 gets the free count before it. */
static struct pm_mm *mm_on_cpu0(struct pm_machine *m, size_t *free0)
{
	struct pm_mm *mm;

	ASSERT_TRUE(m);
	ASSERT_TRUE(pmt_run_on(0));
	*free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	return mm;
}

static void test_kinds(void)
{
	struct pm_config cfg = { .mem_bytes = 256 * MiB }; /* caches of up to 4096 frames */
	struct pm_machine *m = pm_machine_create(&cfg);
	unsigned long addr = 0x10000000UL, n = 2048, breaks = 0, prev = 0;
	bool tables_apart = true;
	struct pm_mm *mm;
	size_t free0;

	mm = mm_on_cpu0(m, &free0);
	for (int round = 0; round < 10; round++) {
		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		ASSERT_EQ(fault_pages(mm, addr, n), n);
		ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
		pm_rcu_barrier();
		/* The four PTE tables and the PMD table went back to their own list. */
		tables_apart &= m->pcp[0].nr[PCP_UNMOVABLE] >= 5 &&
				m->pcp[0].nr[PCP_MOVABLE] >= (int)n;
	}
	ok(tables_apart, "each round's page tables go back to the unmovable list (%d frames; "
	   "%d movable)", m->pcp[0].nr[PCP_UNMOVABLE], m->pcp[0].nr[PCP_MOVABLE]);
	ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
	ASSERT_EQ(fault_pages(mm, addr, n), n);
	for (unsigned long i = 0; i < n; i++) {
		unsigned long pfn = pfn_at(mm, addr + i * PG);

		breaks += i && pfn != prev + 1 && pfn + 1 != prev;
		prev = pfn;
	}
	ok(breaks <= 2, "after ten rounds the pages are still runs of adjacent frames (%lu breaks "
	   "in %lu pages)", breaks, n);
	ok(highs_in_bounds(m), "the cache stays within its high mark");
	ASSERT_EQ(pm_munmap(mm, addr, n * PG), 0);
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

/*
 * A drain gives an aligned run of ascending frames back as one block, and anything else
 * frame by frame (pcp_drain). Three orders of freeing, with the cache's high mark at its
 * minimum so that every free past it drains: address order (whole runs), address order with
 * a hole in every run (the page at 5 of each 64 freed last), and 64-page chunks from the top
 * down with each chunk in reverse (no run at all). After each, every frame is counted once and
 * the checker passes, which it would not if a run took in a frame that was still in use or
 * a block of the wrong order.
 */
static void test_drain_runs(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB }; /* one zone */
	struct pm_machine *m = pm_machine_create(&cfg);
	unsigned long addr = 0x10000000UL, n = 2048;
	static const char *const what[] = { "address order", "a hole in every run",
					    "reverse chunks" };
	struct pm_mm *mm;
	size_t free0;

	mm = mm_on_cpu0(m, &free0);
	for (int pattern = 0; pattern < 3; pattern++) {
		unsigned long zone_locks;
		struct pm_stats st;
		int bad = 0;

		ASSERT_EQ(pm_mmap(mm, addr, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
		ASSERT_EQ(fault_pages(mm, addr, n), n);
		pm_spin_lock(&m->pcp[0].lock);
		m->pcp[0].high = m->pcp_high_min;
		pm_spin_unlock(&m->pcp[0].lock);
		pm_machine_stats(m, &st);
		zone_locks = st.zone_lock_acquisitions;
		if (pattern == 0) {
			bad |= pm_munmap(mm, addr, n * PG);
		} else if (pattern == 1) {
			for (unsigned long i = 0; i < n; i += 64) {
				bad |= pm_munmap(mm, addr + i * PG, 5 * PG);
				bad |= pm_munmap(mm, addr + (i + 6) * PG, 58 * PG);
			}
			bad |= pm_munmap(mm, addr, n * PG);
		} else {
			for (unsigned long i = n; i; i -= 64)
				for (unsigned long j = i; j > i - 64; j--)
					bad |= pm_munmap(mm, addr + (j - 1) * PG, PG);
		}
		pm_rcu_barrier();
		pm_machine_stats(m, &st);
		is_int(bad, 0, "drain, %s: every munmap succeeds", what[pattern]);
		ok(st.zone_lock_acquisitions > zone_locks, "drain, %s: the frames went past the "
		   "high mark into the buddy lists (%lu zone_lock acquisitions)", what[pattern],
		   st.zone_lock_acquisitions - zone_locks);
		ok(highs_in_bounds(m), "drain, %s: the cache stays within its high mark",
		   what[pattern]);
		is_int(pm_machine_check(m), 0, "drain, %s: pm_machine_check", what[pattern]);
	}
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "drain: free count exact after destroy");
	is_int(pm_machine_check(m), 0, "drain: pm_machine_check after destroy");
	pm_machine_destroy(m);
}

static void test_homes(void)
{
	struct pm_config cfg = { .mem_bytes = 128 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	unsigned long a0 = 0x10000000UL, a1 = 0x20000000UL, n = 3000, all, got;
	struct pm_mm *mm;
	size_t free0;

	ASSERT_TRUE(m);
	is_int(m->nr_zones, 2, "128 MiB on 2+ CPUs: two homes of 64 MiB");
	is_int(m->pcp[0].home != m->pcp[1].home, 1, "CPUs 0 and 1 have different homes");
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_TRUE(pmt_run_on(0));
	ASSERT_EQ(pm_mmap(mm, a0, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a0);
	ASSERT_EQ(fault_pages(mm, a0, n), n);
	ASSERT_TRUE(pmt_run_on(1));
	ASSERT_EQ(pm_mmap(mm, a1, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a1);
	ASSERT_EQ(fault_pages(mm, a1, n), n);
	ok(all_in_zone(m, mm, a0, n, m->pcp[0].home), "CPU 0's faults took frames of its home");
	ok(all_in_zone(m, mm, a1, n, m->pcp[1].home), "CPU 1's faults took frames of its home");
	is_int(pm_machine_check(m), 0, "pm_machine_check with never-used frames between homes");
	/* CPU 0 frees what CPU 1 faulted: to its cache of zone 1, not to its home cache. */
	ASSERT_TRUE(pmt_run_on(0));
	{
		int home_before = atomic_load_relaxed(&m->pcp[0].xcount);
		struct pm_pcp *away = &m->pcp_away[0 * m->nr_zones + m->pcp[1].home];

		ASSERT_EQ(pm_munmap(mm, a1, n * PG), 0);
		ok(atomic_load_relaxed(&m->pcp[0].xcount) <= home_before + 8 &&
		   atomic_load_relaxed(&away->xcount) > 0,
		   "frames of CPU 1's home freed on CPU 0 go to CPU 0's cache of that zone "
		   "(home %d -> %d, away %d)", home_before,
		   atomic_load_relaxed(&m->pcp[0].xcount), atomic_load_relaxed(&away->xcount));
		ASSERT_EQ(pm_mmap(mm, a1, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a1);
		ASSERT_EQ(fault_pages(mm, a1, n), n);
		ok(all_in_zone(m, mm, a1, n, m->pcp[0].home),
		   "and CPU 0's next faults still take frames of its own home");
		ASSERT_EQ(pm_munmap(mm, a1, n * PG), 0);
	}
	ASSERT_EQ(pm_munmap(mm, a0, n * PG), 0);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0 - pmt_kept_tables(m),
	       "free count exact (the kept tables apart)");

	/* A huge page from the lowest zone, whichever CPU asks. */
	ASSERT_TRUE(pmt_run_on(1));
	ASSERT_EQ(pm_mmap(mm, a1, 2 * MiB, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a1);
	ASSERT_EQ(pm_madvise(mm, a1, 2 * MiB, PM_MADV_HUGEPAGE), 0);
	ASSERT_EQ(pm_fault(mm, a1, PM_FAULT_WRITE), 0);
	ok(pfn_at(mm, a1) < m->zone_pages, "a THP faulted on CPU 1 comes from zone 0");
	ASSERT_EQ(pm_munmap(mm, a1, 2 * MiB), 0);
	ASSERT_TRUE(pmt_run_on(0));
	pm_rcu_barrier();

	/* One CPU fills the whole machine: its home first, then the other zone. */
	all = 128 * MiB / PG;
	ASSERT_EQ(pm_mmap(mm, a0, all * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a0);
	got = fault_pages(mm, a0, all);
	ok(got > m->zone_pages + m->zone_pages / 2,
	   "a CPU whose home is full takes the other zone's frames (%lu pages of %lu)", got, all);
	is_int(pm_fault(mm, a0 + got * PG, PM_FAULT_WRITE), -ENOMEM, "then -ENOMEM");
	is_int(pm_machine_check(m), 0, "pm_machine_check on a full machine");
	ASSERT_EQ(pm_munmap(mm, a0, all * PG), 0);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0 - pmt_kept_tables(m),
	       "free count exact after the fill");

	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

/* Max-order blocks in CPU @cpu's caches, over all zones (their published counts). */
static int cpu_thp_blocks(struct pm_machine *m, unsigned cpu)
{
	int n = atomic_load_relaxed(&m->pcp[cpu].xnr_thp);

	for (unsigned z = 0; m->pcp_away && z < m->nr_zones; z++)
		if (z != m->pcp[cpu].home)
			n += atomic_load_relaxed(&m->pcp_away[cpu * m->nr_zones + z].xnr_thp);
	return n;
}

/* Map @n 2 MiB THP-eligible blocks at @addr and fault each; the THPs that were mapped. */
static unsigned long fault_thps(struct pm_machine *m, struct pm_mm *mm, unsigned long addr,
				unsigned long n)
{
	struct pm_stats s0, s1;

	ASSERT_EQ(pm_mmap(mm, addr, n * 2 * MiB, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
	ASSERT_EQ(pm_madvise(mm, addr, n * 2 * MiB, PM_MADV_HUGEPAGE), 0);
	pm_machine_stats(m, &s0);
	for (unsigned long i = 0; i < n; i++)
		if (pm_fault(mm, addr + i * 2 * MiB, PM_FAULT_WRITE))
			break;
	pm_machine_stats(m, &s1);
	return s1.thp_faults - s0.thp_faults;
}

/*
 * THP-sized blocks (page_alloc.c): a THP freed on a CPU waits in that CPU's cache, the next
 * THP fault there takes the same block back with no zone lock for it, the free count and the
 * checker count it, a machine whose per-CPU share is below a block caches none, and a block
 * cached on one CPU still counts before another CPU's THP fault falls back.
 */
static void test_thp_blocks(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	/* Each cache's share is an eighth of memory over the CPUs: at least one block. */
	struct pm_config cfg = { .mem_bytes = max(32 * MiB, (unsigned long)ncpu * 16 * MiB) };
	struct pm_config tiny = { .mem_bytes = 4 * MiB };
	struct pm_machine *m = pm_machine_create(&cfg);
	unsigned long addr = 0x40000000UL, pfn, nblocks = cfg.mem_bytes / (2 * MiB), got[2];
	struct pm_stats s0, s1;
	struct pm_mm *mm;
	size_t free0, before;

	mm = mm_on_cpu0(m, &free0);
	ok(m->pcp_thp_high >= 1, "each cache may keep a 2 MiB block (%d)", m->pcp_thp_high);
	is_int(fault_thps(m, mm, addr, 1), 1, "a THP fault maps a THP");
	pfn = pfn_at(mm, addr);
	before = pm_machine_free_pages(m);
	ASSERT_EQ(pm_munmap(mm, addr, 2 * MiB), 0);
	is_int(cpu_thp_blocks(m, 0), 1, "its block waits in the freeing CPU's cache");
	pm_rcu_barrier();
	ok(pm_machine_free_pages(m) >= before + 512, "the free count counts the cached block");
	is_int(pm_machine_check(m), 0, "pm_machine_check knows a cached block");
	pm_machine_stats(m, &s0);
	ASSERT_EQ(pm_mmap(mm, addr, 2 * MiB, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)addr);
	ASSERT_EQ(pm_madvise(mm, addr, 2 * MiB, PM_MADV_HUGEPAGE), 0);
	ASSERT_EQ(pm_fault(mm, addr, PM_FAULT_WRITE), 0);
	pm_machine_stats(m, &s1);
	is_int(pfn_at(mm, addr), pfn, "the next THP fault on that CPU takes the block back");
	is_int(cpu_thp_blocks(m, 0), 0, "and the cache is empty again");
	is_int(s1.thp_faults - s0.thp_faults, 1, "as a THP");
	ASSERT_EQ(pm_munmap(mm, addr, 2 * MiB), 0);

	/* Fill the machine with THPs on CPU 1 while CPU 0 keeps one block cached, then again
	 * with nothing cached anywhere: the same count, so the cached block was drained before
	 * a fault fell back. */
	for (int round = 0; round < 2; round++) {
		ASSERT_TRUE(pmt_run_on(1));
		if (round == 0)
			ok(cpu_thp_blocks(m, 0) == 1, "round 0: CPU 0 keeps a block");
		got[round] = fault_thps(m, mm, addr, nblocks);
		ASSERT_EQ(pm_munmap(mm, addr, nblocks * 2 * MiB), 0);
		pm_rcu_barrier();
		ASSERT_TRUE(pmt_run_on(0));
		pm_compact(m); /* gives every cached block back */
		is_int(cpu_thp_blocks(m, 1), 0, "round %d: compaction drained the caches", round);
	}
	ok(got[0] > 1, "THPs fill the machine (%lu)", got[0]);
	is_int(got[0], got[1], "a block cached on another CPU counts before a THP fault falls back");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);

	m = pm_machine_create(&tiny);
	mm = mm_on_cpu0(m, &free0);
	is_int(m->pcp_thp_high, 0, "a machine whose per-CPU share is below a block caches none");
	is_int(fault_thps(m, mm, addr, 1), 1, "a THP fault there maps a THP");
	ASSERT_EQ(pm_munmap(mm, addr, 2 * MiB), 0);
	is_int(cpu_thp_blocks(m, 0), 0, "and its block goes straight back to the zone");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free count exact after destroy");
	pm_machine_destroy(m);
}

/* pm_cpu_now() and pm_cpu_index() on CPUs 0 and 1: the CPU the kernel says, folded below nr. */
static void test_cpu_now(void)
{
	for (int cpu = 0; cpu < 2; cpu++) {
		ASSERT_TRUE(pmt_run_on(cpu));
		is_int(pm_cpu_now(), sched_getcpu(), "CPU %d: pm_cpu_now() is sched_getcpu()", cpu);
		is_int(pm_cpu_now(), cpu, "CPU %d: pm_cpu_now() is the CPU the thread is bound to",
		       cpu);
		is_int(pm_cpu_index(2), cpu, "CPU %d: pm_cpu_index(2) is the CPU", cpu);
		is_int(pm_cpu_index(1), 0, "CPU %d: pm_cpu_index(1) folds onto index 0", cpu);
	}
	diag("rseq area %s", __rseq_size ? "registered: one load" : "absent: sched_getcpu()");
}

int main(void)
{
	cpu_set_t saved;

	plan(76);
	ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
	if (CPU_COUNT(&saved) < 2 || !CPU_ISSET(0, &saved) || !CPU_ISSET(1, &saved) ||
	    !pmt_run_on(1) || !pmt_run_on(0)) {
		skip(76, "needs CPUs 0 and 1");
		run_anywhere(&saved);
		return done_testing();
	}
	test_cpu_now();
	test_migrate();
	test_oom_drains_other_cpu();
	test_homes();
	test_kinds();
	test_drain_runs();
	test_thp_blocks();
	run_anywhere(&saved);
	return done_testing();
}
