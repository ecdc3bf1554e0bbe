// SPDX-License-Identifier: MIT
/*
 * stress_migrate.c - migration and compaction (src/mm/migrate.c) raced against GUP-fast
 * pins, faults, MADV_DONTNEED, munmap and fork, on a machine with a movable zone.
 *
 *  - A migrator moves every page of five areas back and forth between the movable zone and
 *    the rest of memory (PM_MIGRATE_TO_MOVABLE, AWAY_MOVABLE), and now and then to anywhere.
 *  - Pinners pin a random page of area P with pin_user_pages_fast(FOLL_WRITE), write a
 *    value of their own through the pin, and read it back through the mapping, and check
 *    that pagemap shows the pinned frame there: a pin on a stale frame (one that a migration
 *    copied from) would read back something else. Then they unpin. Area P is never zapped.
 *    An eighth of the pins go to area S, a shared anonymous mapping (page-cache folios),
 *    which fork children map too, an eighth to area H, one THP that moves whole, an eighth
 *    to area HP, two private hugetlb pages, and an eighth to area HS, a shared hugetlb page
 *    that fork children map too (hugetlb pages move whole, to a free pool page).
 *  - A chaos thread zaps random pages of area Z (MADV_DONTNEED), writes them again, and
 *    now and then unmaps and maps Z again; every page of Z reads as zero or as its pattern.
 *  - A compactor runs pm_compact() over and over.
 *  - A forker forks the mm, checks in the child that area F holds its pattern (F is never
 *    written after the fill), writes a child page (COW), maps pages of S and HS, and
 *    destroys the child (whose zap may meet a migration entry of S or HS).
 * At the end, with every thread stopped: every pin released (nr_foll_pin_acquired ==
 * nr_foll_pin_released exactly), area F and the pinners' last values intact, every frame
 * back after destroy, pm_machine_check clean. Seeded (tap_seed); runs tap_seconds(2).
 */
#include <errno.h>
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
#define NPIN 64		/* pages of area P */
#define NZAP 64		/* of area Z */
#define NFORK 32	/* of area F */
#define PINNERS 2

static struct pm_machine *m;
static struct pm_mm *mm;
static unsigned long area_p, area_z, area_f, area_s, area_h, area_hp, area_hs;
#define NHP 1024	/* of area HP, two private hugetlb pages */
#define NHS 512		/* of area HS, one shared hugetlb page */
#define NTHP 512	/* of area H, one THP */
#define NSHM 32	/* of area S, a shared anonymous (shmem) mapping */
static atomic_long errors;
static atomic_int stop;
static uint64_t seed;
static atomic_long nr_migrated, nr_not_moved, nr_pins, nr_forks, nr_zaps, nr_compactions;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

static unsigned long map_area(unsigned long n)
{
	long a = pm_mmap(mm, 0, n * PG, RW, PRIV, NULL, 0);

	ASSERT_TRUE(a > 0);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)a, n * PG, PM_MADV_NOHUGEPAGE), 0);
	return (unsigned long)a;
}

static void *migrator_main(void *arg)
{
	uint64_t r = seed ^ 0x1111;
	int target = PM_MIGRATE_AWAY_MOVABLE;

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned long areas[7] = { area_p, area_z, area_f, area_s, area_h, area_hp, area_hs };
		unsigned long sizes[7] = { NPIN, NZAP, NFORK, NSHM, NTHP, NHP, NHS };
		unsigned i = tap_rand(&r) % 7;
		long ret;

		/* area_z may be unmapped for an instant: -ENOMEM then is the contract's answer. */
		ret = pm_migrate_range(mm, areas[i], sizes[i] * PG, target);
		if (ret < 0 && !(i == 1 && ret == -ENOMEM))
			fail("pm_migrate_range: %ld", ret);
		else if (ret >= 0)
			atomic_fetch_add(&nr_not_moved, ret);
		atomic_fetch_add(&nr_migrated, 1);
		target = tap_rand(&r) % 8 == 0 ? PM_MIGRATE_ANYWHERE :
			 target == PM_MIGRATE_AWAY_MOVABLE ? PM_MIGRATE_TO_MOVABLE :
							     PM_MIGRATE_AWAY_MOVABLE;
	}
	return NULL;
}

static uint64_t last_value[PINNERS][NPIN];

static void *pinner_main(void *arg)
{
	long id = (long)arg;
	uint64_t r = seed ^ (0x2222 + (uint64_t)id), n = 0;

	while (!atomic_load(&stop)) {
		unsigned k = tap_rand(&r) % 8;
		bool shm = k == 0, thp = k == 1, hp = k == 2, hs = k == 3;
		unsigned long i = tap_rand(&r) % (shm ? NSHM : thp ? NTHP : hp ? NHP : hs ? NHS : NPIN);
		unsigned long addr = (shm ? area_s : thp ? area_h : hp ? area_hp : hs ? area_hs :
			area_p) + i * PG;
		uint64_t v = ((uint64_t)id << 56) | ++n, back = 0;
		struct pm_page *page = NULL;
		struct pm_page_info pi;
		long ret = pm_pin_user_pages_fast(mm, addr, 1, PM_FOLL_WRITE, &page);

		if (ret != 1) {
			fail("pin of P[%lu]: %ld", i, ret);
			break;
		}
		/* A device's write through the pin, beside other threads' loads of the page (a
		 * forked child's peek): an atomic store, as the hardware's, not a race of pinmm. */
		__atomic_store_n((uint64_t *)(void *)((char *)pm_page_address(page) + 8 * id), v,
				 __ATOMIC_RELAXED);
		if (pm_access(mm, addr + 8 * (unsigned long)id, &back, 8, 0) != 8 || back != v)
			fail("P[%lu]: pinned write %#llx, mapping reads %#llx: a stale frame", i,
			     (unsigned long long)v, (unsigned long long)back);
		/*
		 * A pinned anonymous page is refused at unmap, under the PTL: never seen unmapped.
		 * A pinned cache page is unmapped in every mm before the freeze fails, then mapped
		 * again: pagemap may see it not present meanwhile, never another frame. So may a
		 * pinned hugetlb page: pagemap reads a PMD without its lock first.
		 */
		if (pm_pagemap(mm, addr, 1, &pi) != 1 ||
		    (pi.pfn != pm_page_to_pfn(page) &&
		     (!(shm || hp || hs) || (pi.flags & PM_PAGE_PRESENT))))
			fail("%s[%lu]: pinned pfn %lu, mapped pfn %llu",
			     shm ? "S" : thp ? "H" : hp ? "HP" : hs ? "HS" : "P", i,
			     pm_page_to_pfn(page), (unsigned long long)pi.pfn);
		if (!shm && !thp && !hp && !hs)
			last_value[id][i] = v;
		pm_unpin_user_page(page);
		atomic_fetch_add(&nr_pins, 1);
	}
	return NULL;
}

static void *chaos_main(void *arg)
{
	uint64_t r = seed ^ 0x3333;

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned long i = tap_rand(&r) % NZAP, addr = area_z + i * PG;

		if (tap_rand(&r) % 64 == 0) {
			/* munmap and map again at the same place. */
			if (pm_munmap(mm, area_z, NZAP * PG))
				fail("munmap Z");
			if (pmt_map_fixed(mm, area_z, NZAP * PG, RW) != (long)area_z)
				fail("map Z again");
			pm_madvise(mm, area_z, NZAP * PG, PM_MADV_NOHUGEPAGE);
			if (!pmt_reads_zero(mm, area_z, NZAP))
				fail("Z not zero after munmap");
			pmt_fill(mm, area_z, NZAP, seed + 3);
			continue;
		}
		if (pm_madvise(mm, addr, PG, PM_MADV_DONTNEED))
			fail("DONTNEED Z[%lu]", i);
		if (!pmt_reads_zero(mm, addr, 1))
			fail("Z[%lu] not zero after DONTNEED", i);
		pmt_fill(mm, addr, 1, seed + 3);
		if (!pmt_check(mm, addr, 1, seed + 3))
			fail("Z[%lu] lost its pattern", i);
		atomic_fetch_add(&nr_zaps, 1);
	}
	return NULL;
}

static void *compactor_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		long r = pm_compact(m);

		if (r < 0)
			fail("pm_compact: %ld", r);
		atomic_fetch_add(&nr_compactions, 1);
	}
	return NULL;
}

static void *forker_main(void *arg)
{
	uint64_t r = seed ^ 0x4444;

	(void)arg;
	while (!atomic_load(&stop)) {
		struct pm_mm *child = pm_mm_fork(mm);
		unsigned long i = tap_rand(&r) % NFORK;

		if (!child) {
			fail("fork: %d", errno);
			break;
		}
		if (!pmt_check(child, area_f, NFORK, seed + 4))
			fail("child: F lost its pattern");
		if (pmt_poke(child, area_f + i * PG, 'c') != 1 || pmt_peek(child, area_f + i * PG) != 'c')
			fail("child: COW write of F[%lu]", i);
		/* The child maps a few pages of S too: their migrations must move both mappings. */
		for (unsigned long k = 0; k < 4; k++)
			pmt_peek(child, area_s + ((i + k) % NSHM) * PG);
		pmt_peek(child, area_hs + i * PG); /* and HS's page */
		pm_mm_destroy(child);
		atomic_fetch_add(&nr_forks, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	/* 5 pool pages (in the movable zone, which the pool fills first): 3 mapped, 2 free for
	 * the hugetlb migrations. */
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .movable_bytes = 16 * MiB,
				 .nr_hugepages = 5 };
	double secs = tap_seconds(2);
	pthread_t mig, pin[PINNERS], chaos, fork_th, compactor;
	size_t free0;
	bool last_ok = true;
	struct pm_stats s;

	plan_no_plan();
	seed = tap_seed(argc, argv);
	m = pm_machine_create(&cfg);
	ASSERT_TRUE(m != NULL);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
	area_p = map_area(NPIN);
	area_z = map_area(NZAP);
	area_f = map_area(NFORK);
	{
		long sa = pm_mmap(mm, 0, NSHM * PG, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS, NULL, 0);

		ASSERT_TRUE(sa > 0);
		area_s = (unsigned long)sa;
		ASSERT_TRUE(pmt_fill(mm, area_s, NSHM, seed + 5));
		sa = pm_mmap(mm, 0, 4 * MiB, RW, PRIV, NULL, 0);
		ASSERT_TRUE(sa > 0);
		area_h = ((unsigned long)sa + 2 * MiB - 1) & ~(2 * MiB - 1);
		ASSERT_EQ(pm_madvise(mm, area_h, 2 * MiB, PM_MADV_HUGEPAGE), 0);
		/* Not in fork children: their COW would break it into 4 KiB pages. */
		ASSERT_EQ(pm_madvise(mm, area_h, 2 * MiB, PM_MADV_DONTFORK), 0);
		ASSERT_TRUE(pmt_fill(mm, area_h, NTHP, seed + 6));
		sa = pm_mmap(mm, 0, NHP * PG, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
		ASSERT_TRUE(sa > 0);
		area_hp = (unsigned long)sa;
		/* Not in fork children: a pinned page would be copied for each from the pool. */
		ASSERT_EQ(pm_madvise(mm, area_hp, NHP * PG, PM_MADV_DONTFORK), 0);
		ASSERT_TRUE(pmt_fill(mm, area_hp, NHP, seed + 7));
		sa = pm_mmap(mm, 0, NHS * PG, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB,
			     NULL, 0);
		ASSERT_TRUE(sa > 0);
		area_hs = (unsigned long)sa;
		ASSERT_TRUE(pmt_fill(mm, area_hs, NHS, seed + 8));
	}
	ASSERT_TRUE(pmt_fill(mm, area_p, NPIN, seed + 2));
	ASSERT_TRUE(pmt_fill(mm, area_z, NZAP, seed + 3));
	ASSERT_TRUE(pmt_fill(mm, area_f, NFORK, seed + 4));

	ASSERT_EQ(pthread_create(&mig, NULL, migrator_main, NULL), 0);
	for (long i = 0; i < PINNERS; i++)
		ASSERT_EQ(pthread_create(&pin[i], NULL, pinner_main, (void *)i), 0);
	ASSERT_EQ(pthread_create(&chaos, NULL, chaos_main, NULL), 0);
	ASSERT_EQ(pthread_create(&fork_th, NULL, forker_main, NULL), 0);
	ASSERT_EQ(pthread_create(&compactor, NULL, compactor_main, NULL), 0);
	pmt_wait_until(tap_now() + secs, &errors);
	atomic_store(&stop, 1);
	pthread_join(mig, NULL);
	for (int i = 0; i < PINNERS; i++)
		pthread_join(pin[i], NULL);
	pthread_join(chaos, NULL);
	pthread_join(fork_th, NULL);
	pthread_join(compactor, NULL);

	diag("%ld migration calls (%ld folios not moved), %ld compactions, %ld pins, %ld zaps, "
	     "%ld forks", atomic_load(&nr_migrated), atomic_load(&nr_not_moved),
	     atomic_load(&nr_compactions), atomic_load(&nr_pins), atomic_load(&nr_zaps),
	     atomic_load(&nr_forks));
	is_int(atomic_load(&errors), 0, "no error in any thread");
	ok(atomic_load(&nr_migrated) > 0 && atomic_load(&nr_pins) > 0 && atomic_load(&nr_forks) > 0 &&
	   atomic_load(&nr_compactions) > 0,
	   "every thread made progress");
	pm_machine_stats(m, &s);
	ok(s.pgmigrate_success > 0, "pages were migrated (%lu; %lu failed, %lu pinned)",
	   s.pgmigrate_success, s.pgmigrate_fail, s.migrate_pinned_skips);
	ok(pmt_pins_balanced(m), "every pin released, exactly");
	ok(pmt_check(mm, area_f, NFORK, seed + 4), "F intact in the parent");
	for (int id = 0; id < PINNERS; id++)
		for (int i = 0; i < NPIN; i++) {
			uint64_t back = 0;

			if (!last_value[id][i])
				continue;
			pm_access(mm, area_p + (unsigned long)i * PG + 8 * (unsigned long)id, &back, 8, 0);
			last_ok &= back == last_value[id][i];
		}
	ok(last_ok, "every pinner's last write is in its page");
	is_int(pm_migrate_range(mm, area_p, NPIN * PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "quiescent: P moves whole");
	{
		struct pm_page_info before, after;

		pm_pagemap(mm, area_h, 1, &before);
		is_int(pm_migrate_range(mm, area_h, NTHP * PG, PM_MIGRATE_ANYWHERE), 0,
		       "quiescent: the THP moves whole");
		pm_pagemap(mm, area_h, 1, &after);
		ok(before.pfn != after.pfn && (after.flags & PM_PAGE_THP), "to a new order-9 folio");
	}
	{
		struct pm_page_info before, after;

		pm_pagemap(mm, area_hp, 1, &before);
		is_int(pm_migrate_range(mm, area_hp, NHP * PG, PM_MIGRATE_ANYWHERE), 0,
		       "quiescent: the private hugetlb pages move");
		pm_pagemap(mm, area_hp, 1, &after);
		ok(before.pfn != after.pfn && (after.flags & PM_PAGE_HUGETLB), "to new pool pages");
		is_int(pm_migrate_range(mm, area_hs, NHS * PG, PM_MIGRATE_ANYWHERE), 0,
		       "quiescent: the shared hugetlb page moves");
	}
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 5, "after the run");
	return done_testing();
}
