// SPDX-License-Identifier: MIT
/*
 * test_migrate.c - the movable zone (pm_config.movable_bytes), pm_migrate_range() and the
 * long-term pins that leave the movable zone first (src/mm/migrate.c, src/gup/gup.c):
 *
 *  - pm_config's rules for movable_bytes; user pages come from the movable zone first, page
 *    tables never (pm_machine_check says so);
 *  - anonymous 4 KiB pages move to each target with their data, dirty and writable state,
 *    and the counters count them; the errors of the contract;
 *  - refusals with the pin's data intact: a pinned AnonExclusive page, a page with another
 *    reference; a page shared with a fork child (pinmm has no anonymous rmap), which moves
 *    once the child's COW made it the parent's alone;
 *  - shmem page-cache folios move with every mapping (shared, private, a fork child's);
 *    a pinned one is refused by the freeze, its mappings put back;
 *  - a THP moves whole (PMD-mapped: split to PTEs first; then PTE-mapped), refused when
 *    pinned or shared with a child; a hugetlb page moves whole (test_migrate_hugetlb.c);
 *  - during a migration (the test hook between unmap and copy): a fault waits and then
 *    writes to the new frame; a GUP-fast pin falls back, waits and pins the new frame;
 *    MADV_DONTNEED zaps the migration entry and nothing leaks; a hole punched in a shmem
 *    object keeps a private COW copy's entry; pm_machine_check reports the migration entry;
 *  - FOLL_LONGTERM pins out of the movable zone, in place with
 *    PM_KNOB_LONGTERM_PIN_IN_PLACE, and -ENOMEM when the page cannot move.
 * The design comes from the environment (PINMM_RANGE_MM=1: the range design).
 */
#include <errno.h>
#include <pthread.h>
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
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

static unsigned long map_anon(struct pm_mm *mm, size_t len)
{
	long a = pm_mmap(mm, 0, len, RW, PRIV, NULL, 0);

	ASSERT_TRUE(a > 0);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)a, len, PM_MADV_NOHUGEPAGE), 0);
	return (unsigned long)a;
}

/* Every page of [a, a + n pages) on the movable side (@movable) or off it. */
static bool all_in(struct pm_machine *m, struct pm_mm *mm, unsigned long a, unsigned long n,
		   bool movable)
{
	for (unsigned long i = 0; i < n; i++) {
		unsigned long pfn = pmt_pagemap_pfn(mm, a + i * PG);

		if (pfn == ULONG_MAX || pfn_in_movable_zone(m, pfn) != movable)
			return false;
	}
	return true;
}

/* ---- configuration and zones ---- */

static void test_config(void)
{
	struct pm_config bad1 = { .mem_bytes = 64 * MiB, .movable_bytes = 3 * MiB };
	struct pm_config bad2 = { .mem_bytes = 64 * MiB, .movable_bytes = 64 * MiB };
	struct pm_machine *m;
	struct pm_mm *mm;
	unsigned long a;
	size_t free0;

	errno = 0;
	ok(!pm_machine_create(&bad1) && errno == EINVAL, "movable_bytes not 2 MiB-aligned: EINVAL");
	errno = 0;
	ok(!pm_machine_create(&bad2) && errno == EINVAL, "movable_bytes == mem_bytes: EINVAL");

	m = pmt_movable_machine(64, 16, 0, 0);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	a = map_anon(mm, 64 * PG);
	ok(pmt_fill(mm, a, 64, 1), "filled");
	ok(all_in(m, mm, a, 64, true), "user pages come from the movable zone first");
	is_int(pm_machine_check(m), 0, "pm_machine_check: no page table in the movable zone");
	/* Fill the movable zone: user pages go on in the homes. */
	{
		unsigned long b = map_anon(mm, 20 * MiB);

		ok(pmt_fill(mm, b, 20 * MiB / PG, 2), "20 MiB filled past the 16 MiB zone");
		ok(all_in(m, mm, b + 19 * MiB, 4, false), "then from the other zones");
		ok(pmt_check(mm, b, 20 * MiB / PG, 2), "data intact");
	}
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "zones");
}

/* ---- anonymous pages ---- */

static void test_anon(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
	struct pm_machine *m0 = pmt_movable_machine(32, 0, 0, 0);
	size_t free0 = pm_machine_free_pages(m), free00 = pm_machine_free_pages(m0);
	struct pm_mm *mm = pm_mm_create(m), *mm0 = pm_mm_create(m0);
	unsigned long a = map_anon(mm, 32 * PG), a0 = map_anon(mm0, 4 * PG), old;
	struct pm_stats s0, s1;
	struct pm_page_info pi;

	ok(pmt_fill(mm, a, 32, 7), "32 pages filled");
	ok(pmt_fill(mm0, a0, 4, 8), "4 pages filled");
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a, 32 * PG, PM_MIGRATE_AWAY_MOVABLE), 0, "AWAY_MOVABLE: all moved");
	ok(all_in(m, mm, a, 32, false), "every page out of the movable zone");
	ok(pmt_check(mm, a, 32, 7), "data moved with them");
	pm_machine_stats(m, &s1);
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 32, "pgmigrate_success 32");
	is_int(s1.pgmigrate_fail - s0.pgmigrate_fail, 0, "pgmigrate_fail 0");
	ASSERT_EQ(pm_pagemap(mm, a, 1, &pi), 1);
	ok((pi.flags & (PM_PAGE_ANON_EXCLUSIVE | PM_PAGE_WRITABLE | PM_PAGE_DIRTY | PM_PAGE_ANON)) ==
		   (PM_PAGE_ANON_EXCLUSIVE | PM_PAGE_WRITABLE | PM_PAGE_DIRTY | PM_PAGE_ANON) &&
		   pi.mapcount == 1,
	   "still anonymous, exclusive, writable, dirty, mapped once (flags %#x)", pi.flags);
	is_int(pm_migrate_range(mm, a, 32 * PG, PM_MIGRATE_AWAY_MOVABLE), 0, "again: nothing to do");
	pm_machine_stats(m, &s0);
	is_int(s0.pgmigrate_success - s1.pgmigrate_success, 0, "pages in place are not counted");
	is_int(pm_migrate_range(mm, a, 32 * PG, PM_MIGRATE_TO_MOVABLE), 0, "TO_MOVABLE: all moved");
	ok(all_in(m, mm, a, 32, true), "every page in the movable zone");
	old = pmt_pagemap_pfn(mm, a);
	is_int(pm_migrate_range(mm, a + 1, PG, PM_MIGRATE_ANYWHERE), -EINVAL, "unaligned: -EINVAL");
	is_int(pm_migrate_range(mm, a, PG - 1, PM_MIGRATE_ANYWHERE), 0, "ANYWHERE, len rounded up");
	ok(pmt_pagemap_pfn(mm, a) != old, "a new frame");
	ok(pmt_check(mm, a, 32, 7), "data intact");
	is_int(pmt_poke(mm, a, 'w'), 1, "written after the move");
	is_int(pmt_peek(mm, a), 'w', "read back");

	is_int(pm_migrate_range(mm, a, PG, 3), -EINVAL, "unknown target: -EINVAL");
	is_int(pm_migrate_range(NULL, a, PG, 0), -EINVAL, "NULL mm: -EINVAL");
	is_int(pm_migrate_range(mm, a, 0, 0), 0, "len 0: 0");
	is_int(pm_migrate_range(mm, a, 64 * PG, 0), -ENOMEM, "a hole in the range: -ENOMEM");
	is_int(pm_migrate_range(mm0, a0, PG, PM_MIGRATE_TO_MOVABLE), -ENOSPC,
	       "no movable zone: TO_MOVABLE -ENOSPC");
	is_int(pm_migrate_range(mm0, a0, 4 * PG, PM_MIGRATE_ANYWHERE), 0, "one zone: ANYWHERE moves");
	ok(pmt_check(mm0, a0, 4, 8), "data intact");
	{
		unsigned long z = map_anon(mm, 4 * PG);

		is_int(pmt_peek(mm, z), 0, "zero page mapped");
		is_int(pm_migrate_range(mm, z, 4 * PG, PM_MIGRATE_AWAY_MOVABLE), 0,
		       "zero page and holes skipped");
	}
	pm_mm_destroy(mm);
	pm_mm_destroy(mm0);
	pmt_end(m, free0, &pmt_end_returned, "anon");
	pmt_end(m0, free00, &pmt_end_returned, "anon, one zone");
}

/* ---- refusals ---- */

static void test_refusals(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	unsigned long a = map_anon(mm, 8 * PG), pfn;
	struct pm_page *pin = NULL, *get = NULL;
	struct pm_stats s0, s1;

	ok(pmt_fill(mm, a, 8, 3), "filled");
	pfn = pmt_pagemap_pfn(mm, a);
	is_int(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, &pin), 1, "page 0 pinned");
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 1, "pinned page not moved");
	pm_machine_stats(m, &s1);
	is_int(pmt_pagemap_pfn(mm, a), pfn, "its mapping is where it was");
	is_int(s1.migrate_pinned_skips - s0.migrate_pinned_skips, 1, "migrate_pinned_skips 1");
	is_int(s1.pgmigrate_fail - s0.pgmigrate_fail, 1, "pgmigrate_fail 1");
	is_int(s1.pgmigrate_success - s0.pgmigrate_success, 7, "the other 7 moved");
	ok(pm_page_anon_exclusive(pin), "the pinned page is still AnonExclusive");
	memset(pm_page_address(pin), 'd', 16); /* DMA into the pinned page */
	is_int(pmt_peek(mm, a), 'd', "the process sees what the pin wrote");
	pm_unpin_user_page(pin);
	is_int(pm_migrate_range(mm, a, PG, PM_MIGRATE_AWAY_MOVABLE), 0, "unpinned: moved");
	is_int(pmt_peek(mm, a), 'd', "with the pin's data");

	/* Another reference (a get): refused after unmap, the mapping restored. */
	is_int(pm_migrate_range(mm, a, PG, PM_MIGRATE_TO_MOVABLE), 0, "back to the movable zone");
	pfn = pmt_pagemap_pfn(mm, a);
	is_int(pm_get_user_pages(mm, a, 1, 0, &get), 1, "a get of page 0");
	is_int(pm_migrate_range(mm, a, PG, PM_MIGRATE_AWAY_MOVABLE), 1, "extra reference: not moved");
	is_int(pmt_pagemap_pfn(mm, a), pfn, "mapping restored");
	is_int(pmt_poke(mm, a, 'e'), 1, "still writable");
	is_int(((char *)pm_page_address(get))[0], 'e', "the get sees the write");
	pm_put_page(get);

	/* Shared with a fork child: refused (no anon rmap); after the child's COW, moved. */
	is_int(pm_migrate_range(mm, a, 8 * PG, PM_MIGRATE_TO_MOVABLE), 0, "all to the movable zone");
	child = pmt_fork(mm);
	is_int(pm_migrate_range(mm, a, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 8,
	       "8 pages shared with the child: not moved");
	is_int(pm_migrate_range(child, a, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 8, "nor from the child");
	is_int(pmt_poke(child, a + PG, 'c'), 1, "child writes page 1 (COW)");
	is_int(pm_migrate_range(mm, a, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 7,
	       "the parent's page 1 is its alone now: moved, 7 not");
	ok(!pfn_in_movable_zone(m, pmt_pagemap_pfn(mm, a + PG)), "page 1 left the movable zone");
	is_int(pm_migrate_range(child, a + PG, PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "the child's copy moves too");
	ok(pmt_check(mm, a + PG, 7, 3), "parent's data intact");
	is_int(pmt_peek(child, a + PG), 'c', "child's page 1 is its own");
	ok(pmt_check(child, a + 2 * PG, 6, 3), "child's other pages intact");
	is_int(pmt_poke(mm, a + PG, 'p'), 1, "parent writes page 1: reuses the moved page");
	is_int(pmt_peek(child, a + PG), 'c', "child unaffected");
	pm_mm_destroy(child);
	is_int(pm_migrate_range(mm, a, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "child gone: the rest move");
	is_int(pmt_peek(mm, a + PG), 'p', "data intact");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "refusals");
}

/* ---- kinds not migrated: counted, data kept ---- */

static void test_other_kinds(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .movable_bytes = 32 * MiB,
				 .nr_hugepages = 2 };
	struct pm_machine *m = pm_machine_create(&cfg);
	size_t free0;
	struct pm_mm *mm;
	long thp, hu;

	ASSERT_TRUE(m != NULL);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	thp = pm_mmap(mm, 0, 4 * MiB, RW, PRIV, NULL, 0);
	ASSERT_TRUE(thp > 0);
	thp = (thp + 2 * MiB - 1) & ~(2 * MiB - 1);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)thp, 2 * MiB, PM_MADV_HUGEPAGE), 0);
	ok(pmt_fill(mm, (unsigned long)thp, 512, 4), "THP filled");
	is_int(pmt_order_at(mm, (unsigned long)thp), 9, "a THP");
	ok(all_in(m, mm, (unsigned long)thp, 512, true), "THP in the movable zone");
	{
		struct pm_page *pin;
		struct pm_stats s0, s1;
		struct pm_mm *child;

		/* Pinned: refused before anything changes, still PMD-mapped. */
		ASSERT_EQ(pm_pin_user_pages(mm, (unsigned long)thp + 5 * PG, 1, PM_FOLL_WRITE, &pin), 1);
		pm_machine_stats(m, &s0);
		is_int(pm_migrate_range(mm, (unsigned long)thp, 2 * MiB, PM_MIGRATE_AWAY_MOVABLE), 1,
		       "pinned THP: not moved");
		pm_machine_stats(m, &s1);
		is_int(s1.migrate_pinned_skips - s0.migrate_pinned_skips, 1, "counted as pinned");
		is_int(s1.thp_splits - s0.thp_splits, 0, "and not split");
		memset(pm_page_address(pin), 'T', 2);
		is_int(pmt_peek(mm, (unsigned long)thp + 5 * PG), 'T', "the pin's write shows");
		pm_unpin_user_page(pin);
		ok(pmt_fill(mm, (unsigned long)thp + 5 * PG, 1, 4), "page 5 filled again");
		/* Shared with a fork child: refused (no anon rmap). */
		child = pmt_fork(mm);
		is_int(pm_migrate_range(mm, (unsigned long)thp, 2 * MiB, PM_MIGRATE_AWAY_MOVABLE), 1,
		       "THP shared with a child: not moved");
		pm_mm_destroy(child);
		/* Alone and unpinned: moves whole. */
		is_int(pm_migrate_range(mm, (unsigned long)thp + 7 * PG, PG, PM_MIGRATE_AWAY_MOVABLE), 0,
		       "one page of it asked: the THP moves whole");
		ok(all_in(m, mm, (unsigned long)thp, 512, false), "all 512 pages out of the movable zone");
		{
			/* pagemap, not a pin: a R/O pin would unshare a page the fork left shared. */
			struct pm_page_info pi[512];
			bool thp_ok = true;

			ASSERT_EQ(pm_pagemap(mm, (unsigned long)thp, 512, pi), 512);
			for (int i = 0; i < 512; i++)
				thp_ok &= (pi[i].flags & PM_PAGE_THP) && pi[i].pfn == pi[0].pfn + (unsigned)i;
			ok(thp_ok, "still one order-9 folio, its pages in order");
		}
		ok(pmt_check(mm, (unsigned long)thp, 512, 4), "THP data intact");
		is_int(pm_migrate_range(mm, (unsigned long)thp, 2 * MiB, PM_MIGRATE_TO_MOVABLE), 0,
		       "PTE-mapped now: moves back whole");
		ok(all_in(m, mm, (unsigned long)thp, 512, true), "all in the movable zone");
		ok(pmt_check(mm, (unsigned long)thp, 512, 4), "data intact");
		is_int(pmt_poke(mm, (unsigned long)thp + 9 * PG, 'w'), 1, "still writable");
		is_int(pm_machine_check(m), 0, "pm_machine_check");
	}
	hu = pm_mmap(mm, 0, 2 * MiB, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(hu > 0);
	ok(pmt_fill(mm, (unsigned long)hu, 512, 6), "hugetlb filled");
	{
		unsigned long hpfn = pmt_pfn_at(mm, (unsigned long)hu);

		/* Moved whole to the pool's other page (test_migrate_hugetlb.c has the rest). */
		is_int(pm_migrate_range(mm, (unsigned long)hu, 2 * MiB, PM_MIGRATE_ANYWHERE), 0,
		       "hugetlb: moved whole");
		ok(pmt_pfn_at(mm, (unsigned long)hu) != hpfn, "to another pool page");
	}
	ok(pmt_check(mm, (unsigned long)hu, 512, 6), "hugetlb data intact");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	pmt_hend(m, free0, 2, "other kinds");
}

/* ---- shmem: page-cache folios, every mapping follows ---- */

static struct pm_mm *shm_child;
static unsigned long shm_child_addr;
static long shm_mprotect_ret = -1;

static void *shm_mprotect_fn(void *arg)
{
	(void)arg;
	shm_mprotect_ret = pm_mprotect(shm_child, shm_child_addr, 8 * PG, PM_PROT_READ);
	return NULL;
}

/* Under the object's i_mmap lock: an mprotect of the whole VMA takes none of it. */
static void shm_hook(struct pm_shmem *f, unsigned long index)
{
	pthread_t th;

	(void)f, (void)index;
	ASSERT_EQ(pthread_create(&th, NULL, shm_mprotect_fn, NULL), 0);
	pthread_join(th, NULL);
}

static void test_shmem(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	unsigned long sh, pr, old;
	struct pm_page *pin;
	struct pm_page_info pi;
	long r;

	ASSERT_TRUE(f != NULL);
	r = pm_mmap(mm, 0, 8 * PG, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(r > 0);
	sh = (unsigned long)r;
	r = pm_mmap(mm, 0, 8 * PG, PM_PROT_READ, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(r > 0);
	pr = (unsigned long)r;
	ok(pmt_fill(mm, sh, 8, 41), "shmem filled through a shared mapping");
	ok(all_in(m, mm, sh, 8, true), "page-cache pages in the movable zone");
	child = pmt_fork(mm);
	/* Fork copies no PTE of a shared mapping, and nothing read the private one yet. */
	ok(pmt_check(child, sh, 8, 41), "the child reads the object");
	for (unsigned long i = 0; i < 8; i++)
		pmt_peek(mm, pr + i * PG);
	old = pmt_pagemap_pfn(mm, sh);
	is_int(pmt_pagemap_pfn(mm, pr), old, "the private mapping maps the cache page");
	is_int(pm_migrate_range(mm, sh, 8 * PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "AWAY_MOVABLE: all 8 moved");
	ok(all_in(m, mm, sh, 8, false), "out of the movable zone");
	is_int(pmt_pagemap_pfn(child, sh), pmt_pagemap_pfn(mm, sh), "the child's shared mapping followed");
	is_int(pmt_pagemap_pfn(mm, pr), pmt_pagemap_pfn(mm, sh), "the private read-only mapping followed");
	ASSERT_EQ(pm_pagemap(mm, sh, 1, &pi), 1);
	is_int(pi.mapcount, 3, "mapped three times, as before");
	ok(pmt_check(mm, sh, 8, 41) && pmt_check(child, sh, 8, 41), "data intact in both mms");
	is_int(pmt_poke(child, sh + PG, 's'), 1, "the child writes page 1");
	is_int(pmt_peek(mm, sh + PG), 's', "the parent sees it: one page still");
	is_int(pmt_peek(mm, pr + PG), 's', "so does the private mapping");

	/* A pinned cache page: the freeze fails, every mapping is put back. */
	is_int(pm_pin_user_pages(child, sh + 2 * PG, 1, PM_FOLL_WRITE, &pin), 1, "child pins page 2");
	old = pmt_pagemap_pfn(mm, sh + 2 * PG);
	is_int(pm_migrate_range(mm, sh, 8 * PG, PM_MIGRATE_TO_MOVABLE), 1, "pinned page: not moved");
	is_int(pmt_pagemap_pfn(mm, sh + 2 * PG), old, "its mapping restored here");
	is_int(pmt_pagemap_pfn(child, sh + 2 * PG), old, "and in the child");
	memset(pm_page_address(pin), 'q', 4);
	is_int(pmt_peek(mm, sh + 2 * PG), 'q', "the pin's writes still show");
	pm_unpin_user_page(pin);
	ok(all_in(m, mm, sh + 3 * PG, 5, true), "the others moved");

	/* The child's mprotect while its mapping is a migration entry: the mapping it gets
	 * back is read-only. */
	shm_child = child;
	shm_child_addr = sh;
	pm__shmem_migrate_hook = shm_hook;
	is_int(pm_migrate_range(mm, sh + 4 * PG, PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "moved while the child's mprotect ran");
	pm__shmem_migrate_hook = NULL;
	is_int(shm_mprotect_ret, 0, "the child's mprotect(PROT_READ): 0");
	ASSERT_EQ(pm_pagemap(child, sh + 4 * PG, 1, &pi), 1);
	ok((pi.flags & PM_PAGE_PRESENT) && !(pi.flags & PM_PAGE_WRITABLE) &&
		   pi.pfn == pmt_pagemap_pfn(mm, sh + 4 * PG),
	   "the child maps the new frame read-only (flags %#x)", pi.flags);
	{
		char c = 'x';

		is_int(pm_access(child, sh + 4 * PG, &c, 1, 1), -EFAULT, "the child cannot write it");
	}
	is_int(pmt_poke(mm, sh + 4 * PG, 'W'), 1, "the parent still can");
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pmt_end(m, free0, &pmt_end_returned, "shmem");
}

/* ---- during a migration ---- */

static void test_during(void)
{
	struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = map_anon(mm, 4 * PG), pfn;
	struct pmt_racer r = { .mm = mm, .addr = a, .what = PMT_RACE_WRITE_FAULT };
	struct pm_stats s0, s1;

	pm__migrate_hook = pmt_race_hook_at;
	ok(pmt_fill(mm, a, 4, 9), "filled");

	/* A write fault on the migration entry sleeps, then writes to the new frame. */
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, a, PG, PM_MIGRATE_AWAY_MOVABLE), 0, "fault race: moved");
	pmt_race_join();
	is_int(pmt_race.done_early, 0, "the fault waited for the migration");
	ok(pmt_race.check != 0, "pm_machine_check reports the migration entry");
	is_int(r.ret, 1, "the fault then wrote");
	pfn = pmt_pagemap_pfn(mm, a);
	ok(!pfn_in_movable_zone(m, pfn), "to the new frame");
	is_int(pmt_peek(mm, a), 'F', "the write is there");
	ok(pmt_check(mm, a + PG, 3, 9), "the rest intact");

	/* A GUP-fast pin finds the entry, falls back and pins the new frame. */
	r = (struct pmt_racer){ .mm = mm, .addr = a + PG, .what = PMT_RACE_PIN_FAST };
	pmt_race_arm(m, &r);
	pm_machine_stats(m, &s0);
	is_int(pm_migrate_range(mm, a + PG, PG, PM_MIGRATE_AWAY_MOVABLE), 0, "GUP-fast race: moved");
	pmt_race_join();
	pm_machine_stats(m, &s1);
	is_int(pmt_race.done_early, 0, "the pin waited");
	is_int(r.ret, 1, "then pinned");
	ok(s1.gup_fast_fallbacks > s0.gup_fast_fallbacks, "by the slow path");
	is_int(pm_page_to_pfn(r.pinned), pmt_pagemap_pfn(mm, a + PG), "the new frame, not the old");
	ok(pmt_check(mm, a + PG, 1, 9), "with the data");
	pm_unpin_user_page(r.pinned);

	/* MADV_DONTNEED zaps the migration entry: the new frame is dropped, nothing leaks. */
	r = (struct pmt_racer){ .mm = mm, .addr = a + 2 * PG, .what = PMT_RACE_DONTNEED };
	pmt_race_arm(m, &r);
	is_int(pm_migrate_range(mm, a + 2 * PG, PG, PM_MIGRATE_AWAY_MOVABLE), 0,
	       "DONTNEED race: done");
	is_int(r.ret, 0, "MADV_DONTNEED 0");
	is_int(pmt_pagemap_pfn(mm, a + 2 * PG), (long)ULONG_MAX, "page gone");
	ok(pmt_reads_zero(mm, a + 2 * PG, 1), "reads zero");

	/* A hole punched in a shmem object keeps a private COW copy of its page, even while
	 * that copy is being migrated: the punch leaves its migration entry (it used to clear
	 * it, and the copy's data was lost: the page then read the hole). */
	{
		struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
		struct pm_mm *other = pm_mm_create(m);
		unsigned long b, s;
		long v;

		ASSERT_TRUE(f != NULL && other != NULL);
		v = pm_mmap(mm, 0, 4 * PG, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_PRIVATE, f, 0);
		ASSERT_TRUE(v > 0);
		b = (unsigned long)v;
		v = pm_mmap(other, 0, 4 * PG, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED, f, 0);
		ASSERT_TRUE(v > 0);
		s = (unsigned long)v;
		is_int(pmt_poke(other, s, 'S'), 1, "punch race: the object's page written");
		is_int(pmt_poke(mm, b, 'P'), 1, "a private COW copy of it");
		pm__migrate_hook = pmt_race_hook;
		r = (struct pmt_racer){ .mm = other, .addr = s, .what = PMT_RACE_PUNCH };
		pmt_race_arm(m, &r);
		pfn = pmt_pagemap_pfn(mm, b);
		pm_migrate_range(mm, b, PG, pfn_in_movable_zone(m, pfn) ? PM_MIGRATE_AWAY_MOVABLE :
									  PM_MIGRATE_TO_MOVABLE);
		pmt_race_join();
		ok(pmt_race.started, "the punch ran inside the migration");
		is_int(r.ret, 0, "MADV_REMOVE 0");
		is_int(pmt_peek(other, s), 0, "the object's page is a hole");
		is_int(pmt_peek(mm, b), 'P', "the private copy kept its data");
		pm__migrate_hook = pmt_race_hook_at;
		pm_mm_destroy(other);
		ASSERT_EQ(pm_munmap(mm, b, 4 * PG), 0);
		pm_shmem_put(f);
	}
	pm__migrate_hook = NULL;
	is_int(pm_machine_check(m), 0, "pm_machine_check after");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "during");
}

/* ---- FOLL_LONGTERM ---- */

static void test_longterm(void)
{
	for (int k = 0; k < 2; k++) {
		struct pm_machine *m =
			pmt_movable_machine(64, 16, 0, k ? PM_KNOB_LONGTERM_PIN_IN_PLACE : 0);
		size_t free0 = pm_machine_free_pages(m);
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long a = map_anon(mm, 8 * PG);
		struct pm_page *p[8];
		const char *n = k ? "in place" : "default";

		ok(pmt_fill(mm, a, 8, 11), "%s: filled", n);
		ok(all_in(m, mm, a, 8, true), "%s: in the movable zone", n);
		is_int(pm_pin_user_pages_fast(mm, a, 4, PM_FOLL_WRITE | PM_FOLL_LONGTERM, p), 4,
		       "%s: long-term pin, fast", n);
		is_int(pm_pin_user_pages(mm, a + 4 * PG, 4, PM_FOLL_LONGTERM, p + 4), 4,
		       "%s: long-term pin, slow, R/O", n);
		{
			bool out = true, same = true;

			for (int i = 0; i < 8; i++) {
				out &= !pfn_in_movable_zone(m, pm_page_to_pfn(p[i]));
				same &= pm_page_to_pfn(p[i]) == pmt_pagemap_pfn(mm, a + i * PG);
			}
			ok(k ? !out : out, "%s: pinned pages %s the movable zone", n,
			   k ? "stay in" : "left");
			ok(same, "%s: the pins hold the mapped pages", n);
		}
		ok(pmt_check(mm, a, 8, 11), "%s: data intact", n);
		memset(pm_page_address(p[0]), 'L', 8);
		is_int(pmt_peek(mm, a), 'L', "%s: the process sees the pin's write", n);
		pm_unpin_user_pages(p, 8);
		pm_mm_destroy(mm);
		pmt_end(m, free0, &pmt_end_returned, k ? "longterm in place" : "longterm");
	}
	{
		/* Pinned already by someone else: cannot move, so the long-term pin fails. */
		struct pm_machine *m = pmt_movable_machine(64, 16, 0, 0);
		size_t free0 = pm_machine_free_pages(m);
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long a = map_anon(mm, 2 * PG);
		struct pm_page *short_pin, *p[2];

		ok(pmt_fill(mm, a, 2, 12), "filled");
		is_int(pm_pin_user_pages(mm, a + PG, 1, PM_FOLL_WRITE, &short_pin), 1,
		       "a short-term pin of page 1");
		is_int(pm_pin_user_pages_fast(mm, a, 2, PM_FOLL_WRITE | PM_FOLL_LONGTERM, p), -ENOMEM,
		       "long-term pin of a page that cannot leave the movable zone: -ENOMEM");
		ok(pmt_pins_balanced(m) == false, "only the short pin is held");
		pm_unpin_user_page(short_pin);
		ok(pmt_pins_balanced(m), "no pin left behind");
		ok(pmt_check(mm, a, 2, 12), "data intact");
		pm_mm_destroy(mm);
		pmt_end(m, free0, &pmt_end_returned, "longterm -ENOMEM");
	}
}

/* ---- compaction ---- */

static void test_compact(void)
{
	struct pm_machine *m = pmt_movable_machine(32, 0, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long n = 16 * MiB / PG, a = map_anon(mm, 16 * MiB), pfn0;
	struct pm_page *pin;
	struct pm_stats s0, s1;
	long before, after, again;
	bool kept = true;

	ok(pmt_fill(mm, a, n, 21), "16 MiB filled");
	/* Keep one page in four: every block of it a quarter full. */
	for (unsigned long i = 0; i < n; i++)
		if (i % 4)
			ASSERT_EQ(pm_madvise(mm, a + i * PG, PG, PM_MADV_DONTNEED), 0);
	is_int(pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE, &pin), 1, "page 0 pinned");
	pfn0 = pmt_pagemap_pfn(mm, a);
	pm_machine_stats(m, &s0);
	before = pm_compact(NULL);
	is_int(before, -EINVAL, "pm_compact(NULL): -EINVAL");
	before = pm_compact(m);
	ok(before >= 0, "pm_compact: %ld free 2 MiB blocks", before);
	pm_machine_stats(m, &s1);
	ok(s1.compact_success == s0.compact_success + 1, "compact_success counted");
	ok(s1.pgmigrate_success > s0.pgmigrate_success, "pages were moved (%lu)",
	   s1.pgmigrate_success - s0.pgmigrate_success);
	ok(s1.migrate_pinned_skips > s0.migrate_pinned_skips, "the pinned page was skipped");
	is_int(pmt_pagemap_pfn(mm, a), pfn0, "and stayed where it is");
	for (unsigned long i = 0; i < n; i += 4)
		kept &= pmt_check(mm, a + i * PG, 1, 21);
	ok(kept, "every kept page has its data");
	ok(pmt_reads_zero(mm, a + PG, 3), "zapped pages still read zero");
	pm_machine_stats(m, &s0);
	again = pm_compact(m);
	pm_machine_stats(m, &s1);
	ok(again >= before, "a second run keeps the blocks (%ld)", again);
	is_int(s1.compact_success + s1.compact_fail - s0.compact_success - s0.compact_fail, 1,
	       "one run counted");
	pm_unpin_user_page(pin);
	pm_mm_destroy(mm);
	pm_rcu_barrier(); /* the page tables' frees too */
	after = pm_compact(m);
	is_int(after, (long)(pm_machine_free_pages(m) / 512), "empty machine: every block free");
	pmt_end(m, free0, &pmt_end_returned, "compact");
}

/* A THP fault with no free 2 MiB block: MADV_HUGEPAGE compacts first, others fall back. */
static void test_thp_fault_compacts(void)
{
	for (int madv = 0; madv < 2; madv++) {
		struct pm_machine *m = pmt_movable_machine(16, 0, 0, 0);
		size_t free0 = pm_machine_free_pages(m);
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long n = 15 * MiB / PG, a = map_anon(mm, 15 * MiB), t;
		const char *w = madv ? "MADV_HUGEPAGE" : "no advice";
		struct pm_stats s0, s1;
		long r;
		bool kept = true;

		ok(pmt_fill(mm, a, n, 31), "%s: 15 MiB of 4 KiB pages", w);
		for (unsigned long i = 0; i < n; i++)
			if (i % 4)
				ASSERT_EQ(pm_madvise(mm, a + i * PG, PG, PM_MADV_DONTNEED), 0);
		r = pm_mmap(mm, 0, 4 * MiB, RW, PRIV, NULL, 0);
		ASSERT_TRUE(r > 0);
		t = ((unsigned long)r + 2 * MiB - 1) & ~(2 * MiB - 1);
		if (madv)
			ASSERT_EQ(pm_madvise(mm, t, 2 * MiB, PM_MADV_HUGEPAGE), 0);
		pm_rcu_barrier();
		pm_machine_stats(m, &s0);
		is_int(pm_fault(mm, t, PM_FAULT_WRITE), 0, "%s: write fault", w);
		pm_machine_stats(m, &s1);
		if (madv) {
			is_int(s1.compact_success + s1.compact_fail - s0.compact_success -
				       s0.compact_fail, 1, "%s: compaction ran once", w);
			is_int(s1.thp_faults - s0.thp_faults, 1, "%s: and the fault got a THP", w);
		} else {
			is_int(s1.compact_success + s1.compact_fail - s0.compact_success -
				       s0.compact_fail, 0, "%s: no compaction", w);
			is_int(s1.thp_faults - s0.thp_faults, 0, "%s: no THP (pinmm's THP is madvise-only)", w);
		}
		for (unsigned long i = 0; i < n; i += 4)
			kept &= pmt_check(mm, a + i * PG, 1, 31);
		ok(kept, "%s: the fragmenting pages kept their data", w);
		pm_mm_destroy(mm);
		pmt_end(m, free0, &pmt_end_returned, madv ? "THP fault compacts" : "THP fault falls back");
	}
}

/* Compaction that frees nothing is deferred: the next THP fault does not compact again. */
static void test_compact_deferred(void)
{
	struct pm_machine *m = pmt_movable_machine(16, 0, 0, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long n = 15 * MiB / PG, a = map_anon(mm, 15 * MiB), t;
	struct pm_page **pins = calloc(n / 4 + 1, sizeof(*pins));
	unsigned long np = 0;
	unsigned long runs[3];
	long r;

	ASSERT_TRUE(pins != NULL);
	ok(pmt_fill(mm, a, n, 32), "15 MiB of 4 KiB pages");
	for (unsigned long i = 0; i < n; i++) {
		if (i % 4)
			ASSERT_EQ(pm_madvise(mm, a + i * PG, PG, PM_MADV_DONTNEED), 0);
		else
			ASSERT_EQ(pm_pin_user_pages(mm, a + i * PG, 1, PM_FOLL_WRITE, &pins[np++]), 1);
	}
	r = pm_mmap(mm, 0, 8 * MiB, RW, PRIV, NULL, 0);
	ASSERT_TRUE(r > 0);
	t = ((unsigned long)r + 2 * MiB - 1) & ~(2 * MiB - 1);
	ASSERT_EQ(pm_madvise(mm, t, 6 * MiB, PM_MADV_HUGEPAGE), 0);
	pm_rcu_barrier();
	for (int k = 0; k < 3; k++) {
		struct pm_stats s0, s1;

		pm_machine_stats(m, &s0);
		is_int(pm_fault(mm, t + (unsigned long)k * 2 * MiB, PM_FAULT_WRITE), 0, "fault %d", k);
		pm_machine_stats(m, &s1);
		runs[k] = s1.compact_fail + s1.compact_success - s0.compact_fail - s0.compact_success;
	}
	is_int(runs[0], 1, "every page pinned: the first fault compacts, in vain");
	is_int(runs[1], 0, "the next one is deferred");
	is_int(runs[2], 1, "the one after compacts again");
	pm_unpin_user_pages(pins, np);
	free(pins);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "compaction deferred");
}

/*
 * What long-term pins in the movable zone cost (the longterm_frag, as a test): one
 * long-term pin per 2 MiB block of a 32 MiB movable zone, the rest unmapped, then compaction.
 * In place (before 5.13) every block keeps its pinned page and none can be freed; migrated
 * out first (after), every block of the zone is free again. The page pinned in each block is
 * found by its frame: which frames back which addresses depends on the CPUs the filling
 * thread ran on (each CPU's page cache), and a pin per 2 MiB of addresses could leave a block
 * without one.
 */
static void test_longterm_frag(void)
{
	unsigned long freed[2];

	for (int k = 0; k < 2; k++) {
		struct pm_machine *m =
			pmt_movable_machine(96, 32, 0, k ? 0 : PM_KNOB_LONGTERM_PIN_IN_PLACE);
		size_t free0 = pm_machine_free_pages(m);
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long a = map_anon(mm, 32 * MiB), blocks = 32 * MiB / PM_PMD_SIZE;
		struct pm_page *pins[16];
		const char *w = k ? "after (migrated out)" : "before (in place)";
		long r;

		unsigned long first = (96 - 32) * MiB / PM_PMD_SIZE, np = 0;
		bool pinned[16] = { false };

		ok(pmt_fill(mm, a, 32 * MiB / PG, 61), "%s: the movable zone filled", w);
		for (unsigned long p = 77; p < 32 * MiB / PG && np < blocks; p++) {
			struct pm_page *pg;
			unsigned long blk;

			ASSERT_EQ(pm_get_user_pages_fast(mm, a + p * PG, 1, 0, &pg), 1);
			blk = pm_page_to_pfn(pg) * PG / PM_PMD_SIZE - first;
			pm_put_page(pg);
			if (blk >= blocks || pinned[blk])
				continue;
			ASSERT_EQ(pm_pin_user_pages(mm, a + p * PG, 1,
						    PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pins[np]), 1);
			pinned[blk] = true;
			np++;
		}
		is_int(np, blocks, "%s: a page of every movable block pinned", w);
		ASSERT_EQ(pm_munmap(mm, a, 32 * MiB), 0);
		pm_rcu_barrier();
		r = pm_compact(m);
		ok(r >= 0, "%s: compaction", w);
		freed[k] = pm__free_pmd_blocks(m, PM_ALLOC_MOVABLE_ZONE);
		diag("%s: %lu of %lu movable 2 MiB blocks free after compaction", w, freed[k],
		     blocks);
		for (unsigned long b = 0; b < blocks; b++)
			ok(pmt_page_all(pm_page_address(pins[b]), 0) == false, "%s: pin %lu kept its data",
			   w, b);
		pm_unpin_user_pages(pins, blocks);
		pm_mm_destroy(mm);
		pmt_end(m, free0, &pmt_end_returned, k ? "longterm_frag after" : "longterm_frag before");
	}
	is_int(freed[0], 0, "in place: no movable block can be freed");
	is_int(freed[1], 16, "migrated out: every movable block is free");
}

int main(void)
{
	plan_no_plan();
	test_config();
	test_anon();
	test_refusals();
	test_other_kinds();
	test_shmem();
	test_during();
	test_longterm();
	test_compact();
	test_thp_fault_compacts();
	test_compact_deferred();
	test_longterm_frag();
	return done_testing();
}
