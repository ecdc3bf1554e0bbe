// SPDX-License-Identifier: MIT
/*
 * stress_madv_vma_lock.c - MADV_DONTNEED and MADV_FREE under a VMA's read lock alone
 * (mm/madvise.c, madvise_dontneed_free_lock(): Linux 6.16+'s MADVISE_VMA_READ_LOCK) raced
 * against everything that no longer waits for them: changes of the VMAs next door that share
 * their page tables, faults, pins, and fork, which write-locks every VMA.
 *
 * The region is 8 MiB, 2 MiB aligned. VMA A, [1 MiB, 7 MiB) of it, is MADV_HUGEPAGE: its two
 * whole 2 MiB blocks fault in as THPs, and the PTE tables of its edges are shared with the
 * neighbours L, [0, 1 MiB), and H, [7 MiB, 8 MiB).
 *  - Two zappers call MADV_DONTNEED or MADV_FREE on random parts of A (most inside A, so
 *    under A's lock alone; now and then one across A's edge, which takes the mm's lock).
 *  - Writers own every WRITERS-th page of A: each reads its page, which must hold the last
 *    value it wrote or zero (a zap), never an older value; writes the next; reads it back. The
 *    last writer writes through a pin (pin_user_pages_fast, FOLL_WRITE) every other time.
 *  - A churner changes L and H: maps a piece afresh (MAP_FIXED), unmaps one, mprotects one
 *    read-only and back, and writes and checks the pages it owns there, which nothing else
 *    zaps; now and then it forks and destroys the child, or maps one of A's whole blocks
 *    afresh, a THP again (a change of A itself, which waits for the zappers).
 * At the end: the writers' and the churner's values in place, every pin released,
 * pm_machine_check clean, every frame back after destroy. Seeded (tap_seed); runs
 * tap_seconds(2). Both designs (PINMM_RANGE_MM).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define REGION (8 * MiB)
#define A_OFF (1 * MiB)
#define A_LEN (6 * MiB)
#define A_NPG (A_LEN / PG)
#define EDGE_NPG (MiB / PG) /* pages of L, and of H */
#define WRITERS 3	    /* the last one pins */
#define ZAPPERS 2

static struct pm_machine *m;
static struct pm_mm *mm;
static unsigned long region;
static uint64_t want[A_NPG];	     /* page i of A: its writer's last value */
static uint64_t edge_want[2][EDGE_NPG]; /* L's and H's pages: the churner's, 0 unmapped */
static atomic_long errors;
static atomic_int stop;
static uint64_t seed;
static atomic_long nr_zaps, nr_frees, nr_wide, nr_writes, nr_pins, nr_changes, nr_forks,
	nr_remaps;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

static unsigned long a_start(void)
{
	return region + A_OFF;
}

static unsigned long edge_start(int e)
{
	return e ? region + A_OFF + A_LEN : region;
}

static void *zapper_main(void *arg)
{
	uint64_t r = seed ^ (0x1000 + (uint64_t)(long)arg);

	while (!atomic_load(&stop)) {
		unsigned long first = tap_rand(&r) % A_NPG, n = 1 + tap_rand(&r) % 700;
		int advice = tap_rand(&r) % 3 ? PM_MADV_DONTNEED : PM_MADV_FREE;
		unsigned long start = a_start() + first * PG;

		if (first + n > A_NPG)
			n = A_NPG - first;
		if (tap_rand(&r) % 32 == 0) {
			/* Across A's lower edge into L: the walk under the mm's lock. L's pages
			 * are the churner's, so only a FREE, which keeps their data. */
			start = a_start() - PG;
			n = 2;
			advice = PM_MADV_FREE;
			atomic_fetch_add(&nr_wide, 1);
		}
		/* -ENOMEM only where the churner left a hole in L. */
		if (pm_madvise(mm, start, n * PG, advice) && start >= a_start())
			fail("madvise %d of %lu pages at page %lu failed", advice, n, first);
		atomic_fetch_add(advice == PM_MADV_FREE ? &nr_frees : &nr_zaps, 1);
	}
	return NULL;
}

static void *writer_main(void *arg)
{
	long id = (long)arg;
	uint64_t r = seed ^ (0x2000 + (uint64_t)id), n = 0;

	while (!atomic_load(&stop)) {
		unsigned long i = (tap_rand(&r) % (A_NPG / WRITERS)) * WRITERS + (unsigned long)id;
		unsigned long a = a_start() + i * PG + 64;
		uint64_t v = ((uint64_t)(id + 1) << 56) | ++n, back = ~0ULL;
		struct pm_page *page = NULL;

		if (pm_access(mm, a, &back, 8, 0) != 8 || (back && back != want[i]))
			fail("page %lu: reads %#llx, last written %#llx", i,
			     (unsigned long long)back, (unsigned long long)want[i]);
		if (id == WRITERS - 1 && (n & 1)) {
			if (pm_pin_user_pages_fast(mm, a & ~(PG - 1), 1, PM_FOLL_WRITE, &page) != 1) {
				fail("pin of page %lu failed", i);
				continue;
			}
			/* A device's write through the pin: atomic, as the hardware's. */
			__atomic_store_n((uint64_t *)(void *)((char *)pm_page_address(page) + 64),
					 v, __ATOMIC_RELAXED);
			want[i] = v;
			pm_unpin_user_page(page);
			atomic_fetch_add(&nr_pins, 1);
		} else if (pm_access(mm, a, &v, 8, 1) != 8) {
			fail("write of page %lu failed", i);
			continue;
		} else {
			want[i] = v;
		}
		back = ~0ULL;
		if (pm_access(mm, a, &back, 8, 0) != 8 || (back && back != v))
			fail("page %lu: wrote %#llx, reads %#llx", i, (unsigned long long)v,
			     (unsigned long long)back);
		atomic_fetch_add(&nr_writes, 1);
	}
	return NULL;
}

/* Check, then write, the churner's pages [@first, @first + @n) of edge @e. */
static void edge_touch(int e, unsigned long first, unsigned long n, uint64_t *gen)
{
	for (unsigned long p = first; p < first + n; p++) {
		unsigned long a = edge_start(e) + p * PG + 128;
		uint64_t back = ~0ULL, v = ++*gen;

		if (!edge_want[e][p])
			continue;
		if (pm_access(mm, a, &back, 8, 0) != 8 || back != edge_want[e][p])
			fail("edge %d page %lu: reads %#llx, wrote %#llx", e, p,
			     (unsigned long long)back, (unsigned long long)edge_want[e][p]);
		if (pm_access(mm, a, &v, 8, 1) != 8)
			fail("edge %d page %lu: write failed", e, p);
		else
			edge_want[e][p] = v;
	}
}

static void *churner_main(void *arg)
{
	uint64_t r = seed ^ 0x3000, gen = 1;

	(void)arg;
	while (!atomic_load(&stop)) {
		int e = (int)(tap_rand(&r) & 1);
		unsigned long first = tap_rand(&r) % EDGE_NPG, n = 1 + tap_rand(&r) % 64;
		unsigned long a = edge_start(e) + first * PG;
		unsigned op = (unsigned)(tap_rand(&r) % 16);

		if (first + n > EDGE_NPG)
			n = EDGE_NPG - first;
		if (op < 5) {
			if (pm_mmap(mm, a, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0) != (long)a)
				fail("edge %d: mmap of %lu pages at %lu failed", e, n, first);
			for (unsigned long p = first; p < first + n; p++) {
				uint64_t v = ++gen;

				if (pm_access(mm, edge_start(e) + p * PG + 128, &v, 8, 1) != 8)
					fail("edge %d page %lu: first write failed", e, p);
				edge_want[e][p] = v;
			}
		} else if (op < 8) {
			if (pm_munmap(mm, a, n * PG))
				fail("edge %d: munmap failed", e);
			for (unsigned long p = first; p < first + n; p++)
				edge_want[e][p] = 0;
		} else if (op < 10) {
			bool mapped = true;

			for (unsigned long p = first; p < first + n; p++)
				mapped &= edge_want[e][p] != 0;
			if (mapped && (pm_mprotect(mm, a, n * PG, PM_PROT_READ) ||
				       pm_mprotect(mm, a, n * PG, RW)))
				fail("edge %d: mprotect failed", e);
		} else if (op == 10 && tap_rand(&r) % 8 == 0) {
			struct pm_mm *child = pm_mm_fork(mm);

			if (!child)
				fail("fork failed");
			else
				pm_mm_destroy(child);
			atomic_fetch_add(&nr_forks, 1);
		} else if (op == 11 && tap_rand(&r) % 4 == 0) {
			/* One of A's whole blocks mapped afresh: a THP again for FREE to split. */
			unsigned long b = region + (2 + 2 * (tap_rand(&r) & 1)) * MiB;

			if (pm_mmap(mm, b, 2 * MiB, RW, PRIV | PM_MAP_FIXED, NULL, 0) != (long)b ||
			    pm_madvise(mm, b, 2 * MiB, PM_MADV_HUGEPAGE) || pmt_poke(mm, b, 0) != 1)
				fail("block at %#lx: could not map it again", b);
			atomic_fetch_add(&nr_remaps, 1);
		} else {
			edge_touch(e, first, n, &gen);
		}
		atomic_fetch_add(&nr_changes, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = tap_seconds(2);
	pthread_t zap[ZAPPERS], wr[WRITERS], churner;
	bool last_ok = true;
	struct pm_stats s;
	size_t free0;
	uint64_t gen = 1;
	long a;

	plan_no_plan();
	seed = tap_seed(argc, argv);
	free0 = pmt_setup(&m, &mm, 96, 0);
	a = pm_mmap(mm, 0, REGION + 2 * MiB, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	region = ((unsigned long)a + 2 * MiB - 1) & ~(2 * MiB - 1);
	ASSERT_EQ(pm_mmap(mm, region, REGION, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)region);
	ASSERT_EQ(pm_madvise(mm, a_start(), A_LEN, PM_MADV_HUGEPAGE), 0);
	for (unsigned long off = 2 * MiB; off + 2 * MiB <= A_OFF + A_LEN; off += 2 * MiB)
		ASSERT_EQ(pmt_poke(mm, region + off, 0), 1); /* A's whole blocks */
	for (int e = 0; e < 2; e++)
		for (unsigned long p = 0; p < EDGE_NPG; p++) {
			uint64_t v = ++gen;

			ASSERT_EQ(pm_access(mm, edge_start(e) + p * PG + 128, &v, 8, 1), 8);
			edge_want[e][p] = v;
		}
	s = pmt_stats(m);
	ok(s.thp_faults == (A_LEN / (2 * MiB)) - 1, "A's whole blocks start as THPs");

	for (long i = 0; i < ZAPPERS; i++)
		ASSERT_EQ(pthread_create(&zap[i], NULL, zapper_main, (void *)i), 0);
	for (long i = 0; i < WRITERS; i++)
		ASSERT_EQ(pthread_create(&wr[i], NULL, writer_main, (void *)i), 0);
	ASSERT_EQ(pthread_create(&churner, NULL, churner_main, NULL), 0);
	pmt_wait_until(tap_now() + secs, &errors);
	atomic_store(&stop, 1);
	for (int i = 0; i < ZAPPERS; i++)
		pthread_join(zap[i], NULL);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(wr[i], NULL);
	pthread_join(churner, NULL);

	pm_machine_stats(m, &s);
	diag("%ld DONTNEED, %ld FREE (%ld across A's edge), %ld writes (%ld through pins), "
	     "%ld changes (%ld forks, %ld blocks of A mapped again), %lu THP splits",
	     atomic_load(&nr_zaps), atomic_load(&nr_frees), atomic_load(&nr_wide),
	     atomic_load(&nr_writes), atomic_load(&nr_pins), atomic_load(&nr_changes),
	     atomic_load(&nr_forks), atomic_load(&nr_remaps), (unsigned long)s.thp_split_page);
	is_int(atomic_load(&errors), 0, "no error in any thread");
	ok(atomic_load(&nr_zaps) > 0 && atomic_load(&nr_frees) > 0 &&
	   atomic_load(&nr_writes) > 0 && atomic_load(&nr_pins) > 0 &&
	   atomic_load(&nr_changes) > 0, "every thread made progress");
	for (unsigned long i = 0; i < A_NPG; i++) {
		uint64_t back = ~0ULL;

		pm_access(mm, a_start() + i * PG + 64, &back, 8, 0);
		last_ok &= back == want[i] || back == 0;
	}
	ok(last_ok, "every page of A holds its last write, or zero");
	last_ok = true;
	for (int e = 0; e < 2; e++)
		for (unsigned long p = 0; p < EDGE_NPG; p++) {
			uint64_t back = 0;

			if (!edge_want[e][p])
				continue;
			pm_access(mm, edge_start(e) + p * PG + 128, &back, 8, 0);
			last_ok &= back == edge_want[e][p];
		}
	ok(last_ok, "every mapped page next door holds its last write");
	ok(pmt_pins_balanced(m), "every pin released, exactly");
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive");
	pmt_teardown(&m, &mm, free0, "after the run");
	return done_testing();
}
