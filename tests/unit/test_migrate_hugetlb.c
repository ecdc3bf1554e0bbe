// SPDX-License-Identifier: MIT
/*
 * test_migrate_hugetlb.c - the migrations test_migrate.c leaves out (src/mm/migrate.c):
 *
 *  - hugetlb pages move whole, to a free pool page of the target zone: a private mapping's
 *    own page, and a hugetlbfs page with every mapping of it (shared in two mms, private
 *    read-only); data, protections and the pool's counts intact; no free pool page (or none
 *    in the target zone): counted as not moved, data kept;
 *  - a pinned hugetlb page is refused, with the pin's data intact, and moves once unpinned;
 *  - during a hugetlb migration (the test hook between the unmap and the freeze): a write
 *    fault waits and writes to the new page; a GUP-fast pin falls back, waits and pins the new
 *    page; pm_machine_check reports the PMD migration entry; a fork of an mm that maps the
 *    hugetlbfs page waits and the child maps the new page; a munmap or mprotect that read
 *    the migration entry and locks after the leaf is back zaps the leaf or changes it; a
 *    second migration waits; an mremap moves the leaf put back whole;
 *  - a THP whose target has no free 2 MiB block is split and its pages moved one by one
 *    (PMD-mapped and PTE-mapped), counted per page; a pinned one is neither split nor moved.
 * The design comes from the environment (PINMM_RANGE_MM=1: the range design).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "lib/migrate_race.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

/* The @npages pages at @addr of @mm hold the pattern pmt_fill(@seed) wrote at @base. */
static bool check_at(struct pm_mm *mm, unsigned long addr, unsigned long npages,
		     unsigned long base, uint64_t seed)
{
	static uint64_t want[PG / 8], got[PG / 8];

	for (unsigned long i = 0; i < npages; i++) {
		pmt_pattern_page(want, base + i * PG, seed);
		if (pm_access(mm, addr + i * PG, got, PG, 0) != (long)PG ||
		    memcmp(want, got, PG)) {
			diag("page %#lx does not hold the pattern of %#lx", addr + i * PG,
			     base + i * PG);
			return false;
		}
	}
	return true;
}

static size_t pool_free(struct pm_machine *m)
{
	size_t free = 0;

	pm_hugetlb_pool(m, NULL, &free);
	return free;
}

/* The target that moves the page at @addr to the other side of the movable line. */
static int other_side(struct pm_machine *m, struct pm_mm *mm, unsigned long addr)
{
	return pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, addr)) ? PM_MIGRATE_AWAY_MOVABLE :
							   PM_MIGRATE_TO_MOVABLE;
}

/* ---- private hugetlb ---- */

static void test_private(void)
{
	/* 4 pool pages, 2 in a 4 MiB movable zone (the pool fills it first), 2 outside. */
	struct pm_machine *m = pmt_movable_machine(64, 4, 4, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a, old;
	struct pm_stats s0, s1;
	struct pm_page_info pi;
	struct pm_page *pin;
	int target;
	long r;

	r = pm_mmap(mm, 0, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(r > 0);
	a = (unsigned long)r;
	ok(pmt_fill(mm, a, 1024, 21), "two private hugetlb pages filled");
	is_int(pool_free(m), 2, "two pool pages left");
	old = pmt_pagemap_pfn(mm, a);
	target = other_side(m, mm, a);
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a, HP, target), 0, "private hugetlb page: moved");
	pm_machine_stats(m, &s1);
	ok(pmt_pagemap_pfn(mm, a) != old, "a new frame");
	ok(pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, a)) == (target == PM_MIGRATE_TO_MOVABLE),
	   "in the target zone");
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 1, "pgmigrate_success 1 (a folio)");
	ok(pmt_check(mm, a, 1024, 21), "data intact");
	ASSERT_EQ(pm_pagemap(mm, a + 5 * PG, 1, &pi), 1);
	ok((pi.flags & (PM_PAGE_HUGETLB | PM_PAGE_ANON | PM_PAGE_WRITABLE)) ==
		   (PM_PAGE_HUGETLB | PM_PAGE_ANON | PM_PAGE_WRITABLE) &&
		   pi.pfn == pmt_pagemap_pfn(mm, a) + 5,
	   "still a writable anonymous hugetlb page (flags %#x)", pi.flags);
	is_int(pool_free(m), 2, "the old page went back to the pool");
	is_int(pmt_poke(mm, a + 7, 'w'), 1, "written after the move");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	is_int(pm_migrate_range(mm, a, 2 * HP, PM_MIGRATE_ANYWHERE), 0, "ANYWHERE: both moved");
	ok(pmt_check(mm, a + HP, 512, 21), "second page's data intact");
	is_int(pmt_peek(mm, a + 7), 'w', "first page's write intact");

	/* Pinned: refused, the pin's data intact; unpinned, it moves with it. */
	old = pmt_pagemap_pfn(mm, a + HP);
	is_int(pm_pin_user_pages_fast(mm, a + HP + 3 * PG, 1, PM_FOLL_WRITE, &pin), 1, "pinned");
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a + HP, HP, PM_MIGRATE_ANYWHERE), 1, "pinned: not moved");
	pm_machine_stats(m, &s1);
	is_int(s1.migrate_pinned_skips - s0.migrate_pinned_skips, 1, "migrate_pinned_skips 1");
	is_int(s1.pgmigrate_fail - s0.pgmigrate_fail, 1, "pgmigrate_fail 1");
	is_int(pmt_pagemap_pfn(mm, a + HP), old, "mapping restored");
	memset(pm_page_address(pin), 'D', 8);
	is_int(pmt_peek(mm, a + HP + 3 * PG), 'D', "the process sees the pin's write");
	pm_unpin_user_page(pin);
	is_int(pm_migrate_range(mm, a + HP, HP, PM_MIGRATE_ANYWHERE), 0, "unpinned: moved");
	is_int(pmt_peek(mm, a + HP + 3 * PG), 'D', "with the pin's data");

	/* Shared with a fork child: no anon rmap, refused; the child's COW makes it movable. */
	{
		struct pm_mm *child = pmt_fork(mm);

		is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 1,
		       "COW-shared with a child: not moved");
		is_int(pmt_poke(child, a + 9, 'c'), 1, "the child's COW");
		is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 0, "then moved");
		is_int(pm_migrate_range(child, a, HP, PM_MIGRATE_ANYWHERE), 0, "the child's too");
		is_int(pmt_peek(child, a + 9), 'c', "child's data");
		is_int(pmt_peek(mm, a + 7), 'w', "parent's data");
		pm_mm_destroy(child);
	}

	/* The pool has no free page: -ENOMEM for that folio, counted, data kept. */
	{
		long h = pm_mmap(mm, 0, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);

		ASSERT_TRUE(h > 0);
		ok(pmt_fill(mm, (unsigned long)h, 1024, 22), "the pool's last two pages used");
		is_int(pool_free(m), 0, "pool empty");
		pm_machine_stats(m, &s0);
		is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 1,
		       "no free pool page: not moved");
		pm_machine_stats(m, &s1);
		is_int(s1.pgmigrate_fail - s0.pgmigrate_fail, 1, "counted in pgmigrate_fail");
		ok(pmt_check(mm, (unsigned long)h, 1024, 22) && pmt_peek(mm, a + 7) == 'w',
		   "data intact");
		/* A reservation is not a free page: one mapped page gone, one reserved. */
		is_int(pm_madvise(mm, (unsigned long)h, HP, PM_MADV_DONTNEED), 0, "DONTNEED one");
		is_int(pool_free(m), 1, "one free page, reserved again for the mapping");
		is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 1,
		       "a reserved page is not taken: not moved");
		is_int(pm_munmap(mm, (unsigned long)h, 2 * HP), 0, "unmapped");
		is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 0, "pool has pages: moved");
	}
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "private hugetlb");
}

/* ---- FOLL_LONGTERM of a hugetlb page in the movable zone ---- */

static void test_longterm(void)
{
	/* 4 pool pages: 2 in the 4 MiB movable zone, 2 outside, which faults take first. */
	struct pm_machine *m = pmt_movable_machine(64, 4, 4, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a, mv = ULONG_MAX;
	struct pm_page *pin = NULL;
	long r = pm_mmap(mm, 0, 4 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);

	ASSERT_TRUE(r > 0);
	a = (unsigned long)r;
	ok(pmt_fill(mm, a, 2048, 61), "the whole pool mapped and filled");
	for (unsigned long i = 0; i < 4; i++)
		if (pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, a + i * HP)))
			mv = a + i * HP;
	ASSERT_TRUE(mv != ULONG_MAX);
	is_int(pm_pin_user_pages(mm, mv + PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin), -ENOMEM,
	       "long-term pin in the movable zone, no pool page outside: -ENOMEM");
	for (unsigned long i = 0; i < 4; i++)
		if (a + i * HP != mv && !pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, a + i * HP))) {
			ASSERT_EQ(pm_munmap(mm, a + i * HP, HP), 0);
			break;
		}
	is_int(pm_pin_user_pages(mm, mv + PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin), 1,
	       "a pool page outside freed: pinned");
	ok(!pfn_in_movable_zone(m, pm_page_to_pfn(pin)), "the page left the movable zone first");
	is_int(pm_page_to_pfn(pin), pmt_pagemap_pfn(mm, mv + PG), "the pin is of the mapped page");
	ok(pmt_check(mm, mv, 512, 61), "data intact");
	pm_unpin_user_page(pin);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "longterm hugetlb");
}

/* ---- hugetlbfs: the object's page, every mapping follows ---- */

static void test_shared(void)
{
	/* 6 pool pages: 2 for the object, 2 reserved for mm2's private mapping (its COWs), 2
	 * free for the migrations; 2 of them in the 4 MiB movable zone. */
	struct pm_machine *m = pmt_movable_machine(64, 4, 6, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *mm2 = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	unsigned long sh, sh2, pr, old;
	struct pm_page_info pi;
	struct pm_page *pin;
	int target;
	long r;

	ASSERT_TRUE(f != NULL);
	r = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(r > 0);
	sh = (unsigned long)r;
	r = pm_mmap(mm2, 0, 2 * HP, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(r > 0);
	sh2 = (unsigned long)r;
	r = pm_mmap(mm2, 0, 2 * HP, PM_PROT_READ, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(r > 0);
	pr = (unsigned long)r;
	ok(pmt_fill(mm, sh, 1024, 31), "hugetlbfs object filled through mm's mapping");
	ok(check_at(mm2, sh2, 1024, sh, 31), "mm2 reads it through its shared mapping");
	ok(check_at(mm2, pr, 1024, sh, 31), "and its private read-only one");
	old = pmt_pagemap_pfn(mm, sh);
	is_int(pmt_pagemap_pfn(mm2, pr), old, "the private mapping maps the cache's page");
	target = other_side(m, mm, sh);
	is_int(pm_migrate_range(mm, sh, HP, target), 0, "hugetlbfs page: moved");
	ok(pmt_pagemap_pfn(mm, sh) != old, "a new frame");
	is_int(pmt_pagemap_pfn(mm2, sh2), pmt_pagemap_pfn(mm, sh), "mm2's shared mapping followed");
	is_int(pmt_pagemap_pfn(mm2, pr), pmt_pagemap_pfn(mm, sh),
	       "mm2's private read-only mapping followed");
	ASSERT_EQ(pm_pagemap(mm, sh, 1, &pi), 1);
	is_int(pi.mapcount, 3, "mapped three times, as before");
	ok(pmt_check(mm, sh, 1024, 31) && check_at(mm2, sh2, 1024, sh, 31) &&
		   check_at(mm2, pr, 1024, sh, 31), "data intact in every mapping");
	is_int(pool_free(m), 4, "pool: the old page came back (2 in the cache)");
	is_int(pmt_poke(mm2, sh2 + PG, 's'), 1, "mm2 writes the object");
	is_int(pmt_peek(mm, sh + PG), 's', "mm sees it: one page");

	/* Pinned by mm2: the freeze fails, every mapping is put back. */
	is_int(pm_pin_user_pages(mm2, sh2 + HP + 2 * PG, 1, PM_FOLL_WRITE, &pin), 1, "mm2 pins");
	old = pmt_pagemap_pfn(mm, sh + HP);
	is_int(pm_migrate_range(mm, sh + HP, HP, PM_MIGRATE_ANYWHERE), 1, "pinned: not moved");
	is_int(pmt_pagemap_pfn(mm, sh + HP), old, "mapping restored here");
	is_int(pmt_pagemap_pfn(mm2, sh2 + HP), old, "and in mm2");
	memset(pm_page_address(pin), 'q', 4);
	is_int(pmt_peek(mm, sh + HP + 2 * PG), 'q', "the pin's write shows");
	pm_unpin_user_page(pin);
	is_int(pm_migrate_range(mm, sh + HP, HP, PM_MIGRATE_ANYWHERE), 0, "unpinned: moved");
	is_int(pmt_peek(mm2, sh2 + HP + 2 * PG), 'q', "with the pin's data, seen from mm2");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm2);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pmt_hend(m, free0, 6, "hugetlbfs");
}

/* ---- during a hugetlb migration ---- */

/* The hook of the munmap and mprotect races: the walker that read a PMD migration entry
 * waits, before it takes the PMD lock, until the migration has put its leaves back. */
static atomic_int migration_over;

static void zap_waits_for_migration(struct pm_mm *mm, unsigned long addr)
{
	double end = tap_now() + 10;

	(void)mm, (void)addr;
	while (!atomic_load(&migration_over) && tap_now() < end)
		pmt_wait_until(tap_now() + 0.001, NULL);
}

/*
 * Migrate the page of @mm at @sh while @r's walker of another mm is held between its read of
 * the migration entry and its PMD lock, until the migration is over. Return: the migration's
 * result; @r->ret is the walker's.
 */
static int migrate_with_walker_held(struct pm_machine *m, struct pm_mm *mm, unsigned long sh,
				    struct pmt_racer *r)
{
	int ret;

	atomic_store(&migration_over, 0);
	pm__pmd_migration_hook = zap_waits_for_migration;
	pmt_race_arm(m, r);
	ret = pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE);
	atomic_store(&migration_over, 1);
	pmt_race_join();
	pm__pmd_migration_hook = NULL;
	return ret;
}

static void test_during(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 4, 6, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *mm2 = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, HP);
	struct pmt_racer r = { .mm = mm };
	struct pm_stats s0, s1;
	unsigned long a, sh, pr;
	long v;

	pm__hugetlb_migrate_hook = pmt_race_hook;
	v = pm_mmap(mm, 0, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(v > 0);
	a = (unsigned long)v;
	ok(pmt_fill(mm, a, 1024, 41), "filled");

	/* A write fault on the PMD migration entry sleeps, then writes to the new page. */
	r = (struct pmt_racer){ .mm = mm, .addr = a + 5, .what = PMT_RACE_WRITE_FAULT };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 0, "fault race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "the fault waited for the migration");
	ok(pmt_race.check != 0, "pm_machine_check reports the PMD migration entry");
	is_int(r.ret, 1, "the fault then wrote");
	is_int(pmt_peek(mm, a + 5), 'F', "the write is in the new page");
	ok(pmt_check(mm, a + PG, 511, 41), "the rest intact");

	/* A GUP-fast pin falls back, waits and pins the new page. */
	r = (struct pmt_racer){ .mm = mm, .addr = a + HP + 3 * PG, .what = PMT_RACE_PIN_FAST };
	pmt_race_arm(m, &r);
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a + HP, HP, PM_MIGRATE_ANYWHERE), 0, "GUP-fast race: moved");
	pmt_race_join();
	pm_machine_stats(m, &s1);
	is_int(pmt_race.done_early, 0, "the pin waited");
	is_int(r.ret, 1, "then pinned");
	ok(s1.gup_fast_fallbacks > s0.gup_fast_fallbacks, "by the slow path");
	is_int(pm_page_to_pfn(r.pinned), pmt_pagemap_pfn(mm, a + HP + 3 * PG),
	       "the new page, not the old");
	ok(pmt_check(mm, a + HP + 3 * PG, 1, 41), "with the data");
	pm_unpin_user_page(r.pinned);

	/* A fork of the migrating mm waits for the migration (it needs the mm's lock for write);
	 * then the child shares the new page, COW. */
	r = (struct pmt_racer){ .mm = mm, .what = PMT_RACE_FORK };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, a, HP, PM_MIGRATE_ANYWHERE), 0, "fork race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "the fork waited");
	ASSERT_TRUE(r.child != NULL);
	is_int(pmt_pagemap_pfn(r.child, a), pmt_pagemap_pfn(mm, a), "the child maps the new page");
	is_int(pmt_peek(r.child, a + 5), 'F', "with the data");
	is_int(pmt_poke(r.child, a + 6, 'C'), 1, "the child's write COWs");
	ok(pmt_pagemap_pfn(r.child, a) != pmt_pagemap_pfn(mm, a), "the child has its own copy");
	pm_mm_destroy(r.child);

	/* A fork of another mm that maps the hugetlbfs page read-only, privately: its copy of
	 * the leaf waits for the migration entry; the child maps the new page. */
	v = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(v > 0);
	sh = (unsigned long)v;
	ok(pmt_fill(mm, sh, 512, 42), "hugetlbfs page filled");
	v = pm_mmap(mm2, 0, HP, PM_PROT_READ, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(v > 0);
	pr = (unsigned long)v;
	ok(check_at(mm2, pr, 512, sh, 42), "mm2 maps it read-only, privately");
	r = (struct pmt_racer){ .mm = mm2, .what = PMT_RACE_FORK };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE), 0, "fork of mm2 race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "mm2's fork waited");
	ASSERT_TRUE(r.child != NULL);
	is_int(pmt_pagemap_pfn(mm2, pr), pmt_pagemap_pfn(mm, sh), "mm2 maps the new page");
	ok(pmt_pagemap_pfn(r.child, pr) == ULONG_MAX ||
		   pmt_pagemap_pfn(r.child, pr) == pmt_pagemap_pfn(mm, sh),
	   "its child maps the new page or nothing");
	ok(check_at(r.child, pr, 512, sh, 42), "the child reads the data");
	pm_mm_destroy(r.child);

	/* A fault from mm2 on the shared migration entry: waits, reads the new page. */
	r = (struct pmt_racer){ .mm = mm, .addr = sh + 9, .what = PMT_RACE_WRITE_FAULT };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE), 0, "shared fault race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "the fault waited");
	is_int(pmt_peek(mm2, pr + 9), 'F', "mm2 sees the write");

	/* A second migration of the page, from a third mm that maps it too, meets the migration
	 * entry: it waits and looks again (it used to walk the entry as a PTE table, the
	 * page's first bytes read as PTEs: made here to name a frame far past the machine). */
	{
		struct pm_mm *mm3 = pm_mm_create(m);
		unsigned long sh3, to;
		uint64_t bad = 0x00000fffffff0067ULL, keep;

		v = pm_mmap(mm3, 0, HP, RW, PM_MAP_SHARED, f, 0);
		ASSERT_TRUE(v > 0);
		sh3 = (unsigned long)v;
		ok(check_at(mm3, sh3 + PG, 511, sh + PG, 42), "mm3 maps the hugetlbfs page");
		ASSERT_EQ(pm_access(mm, sh, &keep, sizeof(keep), 0), (long)sizeof(keep));
		ASSERT_EQ(pm_access(mm, sh, &bad, sizeof(bad), 1), (long)sizeof(bad));
		r = (struct pmt_racer){ .mm = mm3, .addr = sh3, .what = PMT_RACE_MIGRATE };
		pmt_race_arm(m, &r);
		is_int(pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE), 0,
		       "second-migration race: moved");
		pmt_race_join();
		is_int(pmt_race.done_early, 0, "the second migration met the entry and waited");
		is_int(r.ret, 0, "then moved the page again");
		is_int(pmt_pagemap_pfn(mm3, sh3), pmt_pagemap_pfn(mm, sh), "one frame in both mms");
		ASSERT_EQ(pm_access(mm, sh, &keep, sizeof(keep), 1), (long)sizeof(keep));
		ok(check_at(mm3, sh3 + PG, 511, sh + PG, 42), "data intact");

		/* An mremap of mm3's mapping reads the entry before it takes the i_mmap lock
		 * (prepare_tables) and moves the leaf once the migration let go of that lock: it
		 * used to take the entry for a PTE table and allocate one at the target. */
		v = pm_mmap(mm3, 0, 3 * HP, PM_PROT_NONE, PRIV, NULL, 0);
		ASSERT_TRUE(v > 0);
		to = ((unsigned long)v + HP - 1) & ~(HP - 1);
		r = (struct pmt_racer){ .mm = mm3, .addr = sh3, .to = to, .what = PMT_RACE_MREMAP };
		pmt_race_arm(m, &r);
		is_int(pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE), 0, "mremap race: moved");
		pmt_race_join();
		is_int(pmt_race.done_early, 0, "the mremap waited for the i_mmap lock");
		is_int(r.ret, (long)to, "then moved the mapping");
		is_int(pmt_pagemap_pfn(mm3, to), pmt_pagemap_pfn(mm, sh), "the leaf moved whole");
		ok(check_at(mm3, to + PG, 511, sh + PG, 42), "data intact at the new address");
		is_int(pm_machine_check(m), 0, "pm_machine_check after the mremap race");
		pm_mm_destroy(mm3);
	}

	/* A munmap in a third mm reads its entry while it is a migration entry, and takes the
	 * PMD lock only after the migration put a leaf there: it zaps that leaf (it used to leave
	 * it, mapped, behind its VMA, and the table that held it was freed with it). */
	{
		struct pm_mm *mm3 = pm_mm_create(m);
		struct pm_page_info pi;
		unsigned long sh3;

		v = pm_mmap(mm3, 0, HP, RW, PM_MAP_SHARED, f, 0);
		ASSERT_TRUE(v > 0);
		sh3 = (unsigned long)v;
		ok(check_at(mm3, sh3 + PG, 511, sh + PG, 42), "mm3 maps the hugetlbfs page too");
		r = (struct pmt_racer){ .mm = mm3, .addr = sh3, .what = PMT_RACE_MUNMAP };
		is_int(migrate_with_walker_held(m, mm, sh, &r), 0, "munmap race: moved");
		is_int(pmt_race.done_early, 0, "the munmap's zap met the migration entry and waited");
		is_int(r.ret, 0, "then unmapped");
		ASSERT_EQ(pm_pagemap(mm, sh, 1, &pi), 1);
		is_int(pi.mapcount, 2, "the leaf the migration put back in mm3 went with the munmap "
		       "(mapped by mm and mm2 only)");
		is_int(pm_machine_check(m), 0, "pm_machine_check after the munmap race");

		/* The same race with mprotect: the leaf put back takes the new protection. */
		v = pm_mmap(mm3, 0, HP, RW, PM_MAP_SHARED, f, 0);
		ASSERT_TRUE(v > 0);
		sh3 = (unsigned long)v;
		ok(check_at(mm3, sh3 + PG, 511, sh + PG, 42), "mm3 maps the page again");
		ASSERT_EQ(pm_pagemap(mm3, sh3, 1, &pi), 1);
		ok(pi.flags & PM_PAGE_WRITABLE, "writable");
		r = (struct pmt_racer){ .mm = mm3, .addr = sh3, .what = PMT_RACE_MPROTECT };
		is_int(migrate_with_walker_held(m, mm, sh, &r), 0, "mprotect race: moved");
		is_int(pmt_race.done_early, 0, "the mprotect met the migration entry and waited");
		is_int(r.ret, 0, "then made the mapping read-only");
		ASSERT_EQ(pm_pagemap(mm3, sh3, 1, &pi), 1);
		ok((pi.flags & PM_PAGE_PRESENT) && !(pi.flags & PM_PAGE_WRITABLE),
		   "the leaf the migration put back is read-only (flags %#x)", pi.flags);
		is_int(pm_access(mm3, sh3 + PG, "w", 1, 1), -EFAULT, "a write through it fails");
		is_int(pm_machine_check(m), 0, "pm_machine_check after the mprotect race");
		pm_mm_destroy(mm3);
	}

	/* A truncation waits for the object's i_mmap lock, then zaps the new page everywhere. */
	r = (struct pmt_racer){ .mm = mm, .what = PMT_RACE_TRUNCATE, .f = f };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, sh, HP, PM_MIGRATE_ANYWHERE), 0, "truncate race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "the truncation waited");
	is_int(r.ret, 0, "then truncated");
	is_int(pmt_pagemap_pfn(mm, sh), (long)ULONG_MAX, "the page is gone from mm");
	is_int(pmt_pagemap_pfn(mm2, pr), (long)ULONG_MAX, "and from mm2");

	pm__hugetlb_migrate_hook = NULL;
	is_int(pm_machine_check(m), 0, "pm_machine_check after");
	pm_mm_destroy(mm2);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pmt_hend(m, free0, 6, "during");
}

/* ---- THP: split when the target has no free 2 MiB block ---- */

static unsigned long map_thp(struct pm_mm *mm)
{
	long a = pm_mmap(mm, 0, 4 * MiB, RW, PRIV, NULL, 0);

	ASSERT_TRUE(a > 0);
	a = (a + (long)HP - 1) & ~((long)HP - 1);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)a, HP, PM_MADV_HUGEPAGE), 0);
	return (unsigned long)a;
}

static void test_thp_split(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long t1 = map_thp(mm), t2 = map_thp(mm), t3 = map_thp(mm), t4 = map_thp(mm);
	unsigned long fill, n;
	struct pm_stats s0, s1;
	struct pm_page *pin;
	bool all = true;
	long v;

	ok(pmt_fill(mm, t1, 512, 51) && pmt_fill(mm, t2, 512, 52) && pmt_fill(mm, t3, 512, 53) &&
		   pmt_fill(mm, t4, 512, 54), "four THPs filled");
	ok(pmt_order_at(mm, t1) == 9 && pmt_order_at(mm, t2) == 9 && pmt_order_at(mm, t3) == 9,
	   "order 9");
	ok(pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, t1)) &&
		   pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, t2)),
	   "in the movable zone");
	/* t2 PTE-mapped: moved once whole (within the movable zone, blocks still free). */
	is_int(pm_migrate_range(mm, t2, HP, PM_MIGRATE_TO_MOVABLE), 0, "t2 moved whole");
	is_int(pmt_order_at(mm, t2), 9, "t2 still a THP (PTE-mapped now)");
	is_int(pm_migrate_range(mm, t4, HP, PM_MIGRATE_TO_MOVABLE), 0, "t4 moved whole");
	/* Fill the rest of memory with 4 KiB pages, then free every other one: free frames, but
	 * no free 2 MiB block anywhere. */
	pm_rcu_barrier();
	n = pm_machine_free_pages(m) - 128;
	v = pm_mmap(mm, 0, n * PG, RW, PRIV, NULL, 0);
	ASSERT_TRUE(v > 0);
	fill = (unsigned long)v;
	ASSERT_EQ(pm_madvise(mm, fill, n * PG, PM_MADV_NOHUGEPAGE), 0);
	pmt_touch(mm, fill, n * PG);
	for (unsigned long i = 0; i < n; i += 2)
		ASSERT_EQ(pm_madvise(mm, fill + i * PG, PG, PM_MADV_DONTNEED), 0);
	pm_rcu_barrier();
	is_int(pm__free_pmd_blocks(m, PM_ALLOC_NO_MOVABLE_ZONE), 0,
	       "no free 2 MiB block outside the movable zone");

	/* Pinned: neither split nor moved. */
	ASSERT_EQ(pm_pin_user_pages(mm, t3 + 4 * PG, 1, PM_FOLL_WRITE, &pin), 1);
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, t3, HP, PM_MIGRATE_AWAY_MOVABLE), 1, "pinned THP: not moved");
	pm_machine_stats(m, &s1);
	is_int(pmt_order_at(mm, t3), 9, "and not split");
	is_int(s1.thp_split_page_failed - s0.thp_split_page_failed, 1,
	       "thp_split_page_failed 1, thp_split_page 0 (%lu)",
	       s1.thp_split_page - s0.thp_split_page);
	is_int(s1.thp_split_page - s0.thp_split_page, 0, "no split counted");
	memset(pm_page_address(pin), 'P', 2);
	is_int(pmt_peek(mm, t3 + 4 * PG), 'P', "the pin's write shows");
	pm_unpin_user_page(pin);

	/* First (a split frees its old block, in the movable zone), ANYWHERE: no page is
	 * ever "already there", so none may be moved twice. */
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, t4 + 100 * PG, 8 * PG, PM_MIGRATE_ANYWHERE), 0,
	       "PTE-mapped THP, part of it asked, ANYWHERE: split, moved");
	pm_machine_stats(m, &s1);
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 512,
	       "all 512 pages moved once (the folio was isolated whole)");
	ok(pmt_check(mm, t4, 512, 54), "data intact");
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, t1, HP, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "PMD-mapped THP, no block: split, every page moved");
	pm_machine_stats(m, &s1);
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 512, "pgmigrate_success 512 (pages)");
	is_int(s1.thp_split_page - s0.thp_split_page, 1, "thp_split_page 1");
	is_int(s1.thp_split_page_failed - s0.thp_split_page_failed, 0, "thp_split_page_failed 0");
	for (unsigned long i = 0; i < 512; i++)
		all &= !pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, t1 + i * PG));
	ok(all, "every page out of the movable zone");
	is_int(pmt_order_at(mm, t1), 0, "small folios now");
	ok(pmt_check(mm, t1, 512, 51), "data intact");
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, t2, HP, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "PTE-mapped THP, no block: split, every page moved");
	pm_machine_stats(m, &s1);
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 512, "each page once");
	is_int(pmt_order_at(mm, t2 + 77 * PG), 0, "small folios");
	ok(pmt_check(mm, t2, 512, 52), "data intact");
	is_int(pmt_poke(mm, t2 + 3 * PG, 'w'), 1, "still writable");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "THP split");
}

int main(int argc, char **argv)
{
	static const struct pmt_group groups[] = {
		{ "private", test_private },
		{ "longterm", test_longterm },
		{ "shared", test_shared },
		{ "during", test_during },
		{ "thp_split", test_thp_split },
	};

	return pmt_run_groups(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 120);
}
