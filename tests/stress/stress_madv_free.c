// SPDX-License-Identifier: MIT
/*
 * stress_madv_free.c - MADV_FREE's split of a THP it covers in part (mm/madvise.c,
 * pm__split_anon_thp in mm/migrate.c: the folio unmapped behind migration entries, frozen,
 * split, each page mapped again or, holding only zeros, replaced by the zero page) raced
 * against faults, GUP-fast pins, introspection and other MADV_FREE calls.
 *
 *  - A freer calls MADV_FREE on random parts of area A (NBLK THPs), from several pages to
 *    most of a block, which splits the THPs there. Now and then, alone (the others wait on
 *    a lock they hold for read), it maps a block afresh and writes a zero into it, so that
 *    it is a THP again, every page reading zero.
 *  - Writers own every WRITERS-th page of A (a pinner's pages are its own too): each reads
 *    its page, checks it holds the last value it wrote there (or zero), writes the next
 *    value and reads it back. A write to a page just replaced by the zero page must fault
 *    and copy it; a page that lost its data would read zero, one that kept a stale frame
 *    would read an old value.
 *  - A pinner pins one of its own pages (pin_user_pages_fast, FOLL_WRITE | FOLL_LONGTERM),
 *    writes through the pin, reads through the mapping, and checks pagemap names the pinned
 *    frame where it shows one (a split the pin refuses hides it behind a migration entry
 *    for a moment): a pinned THP is never split.
 *  - A scanner reads pm_pagemap and pm_mm_maps over A.
 * At the end: every writer's values in place, every pin released, every frame back after
 * destroy, pm_machine_check clean. Seeded (tap_seed); runs tap_seconds(2).
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
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define NBLK 4
#define NPG (NBLK * 512)
#define WRITERS 3 /* the last one pins */

static struct pm_machine *m;
static struct pm_mm *mm;
static unsigned long area;
static uint64_t want[NPG]; /* page i: its owner's (i % WRITERS) last value, 0 = none */
static pthread_rwlock_t remap_lock; /* writer-preferring: the freer's remap is not starved */
static atomic_long errors;
static atomic_int stop;
static uint64_t seed;
static atomic_long nr_frees, nr_remaps, nr_writes, nr_pins, nr_scans;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

/* Block @b mapped afresh, MADV_HUGEPAGE, and written (a zero): a THP of zeros again. */
static void remap_block(unsigned b)
{
	unsigned long a = area + b * HP;
	char z = 0;

	if (pm_mmap(mm, a, HP, RW, PRIV | PM_MAP_FIXED, NULL, 0) != (long)a ||
	    pm_madvise(mm, a, HP, PM_MADV_HUGEPAGE) || pm_access(mm, a, &z, 1, 1) != 1)
		fail("block %u: could not map it again", b);
	for (unsigned i = 0; i < 512; i++)
		want[b * 512 + i] = 0;
}

static void *freer_main(void *arg)
{
	uint64_t r = seed ^ 0x1111;

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned long first = tap_rand(&r) % NPG, n = 1 + tap_rand(&r) % 400;

		if (tap_rand(&r) % 16 == 0) {
			pthread_rwlock_wrlock(&remap_lock);
			remap_block((unsigned)(tap_rand(&r) % NBLK));
			pthread_rwlock_unlock(&remap_lock);
			atomic_fetch_add(&nr_remaps, 1);
			continue;
		}
		if (first + n > NPG)
			n = NPG - first;
		if (pm_madvise(mm, area + first * PG, n * PG, PM_MADV_FREE))
			fail("MADV_FREE of %lu pages at %lu failed", n, first);
		atomic_fetch_add(&nr_frees, 1);
	}
	return NULL;
}

static void *writer_main(void *arg)
{
	long id = (long)arg;
	uint64_t r = seed ^ (0x2222 + (uint64_t)id), n = 0;

	while (!atomic_load(&stop)) {
		unsigned long i = (tap_rand(&r) % (NPG / WRITERS)) * WRITERS + (unsigned long)id;
		unsigned long a = area + i * PG + 64;
		uint64_t v = ((uint64_t)(id + 1) << 56) | ++n, back = 0;
		struct pm_page *page = NULL;
		struct pm_page_info pi;

		pthread_rwlock_rdlock(&remap_lock);
		if (pm_access(mm, a, &back, 8, 0) != 8 || back != want[i])
			fail("page %lu: reads %#llx, last written %#llx", i, (unsigned long long)back,
			     (unsigned long long)want[i]);
		if (id == WRITERS - 1 && (n & 1)) {
			/* The pinner: write through a long-term pin. */
			if (pm_pin_user_pages_fast(mm, a & ~(PG - 1), 1,
						   PM_FOLL_WRITE | PM_FOLL_LONGTERM, &page) != 1) {
				fail("pin of page %lu failed", i);
			} else {
				/* A device's write through the pin: atomic, as the hardware's. */
				__atomic_store_n((uint64_t *)(void *)((char *)pm_page_address(page) + 64),
						 v, __ATOMIC_RELAXED);
				/* Never another frame; not present while a split that the pin
				 * refuses has it behind a migration entry (unmap_thp()). */
				if (pm_pagemap(mm, a & ~(PG - 1), 1, &pi) != 1 ||
				    pi.pfn != pm_page_to_pfn(page))
					fail("page %lu: pinned pfn %lu, mapped %llu", i,
					     pm_page_to_pfn(page), (unsigned long long)pi.pfn);
				want[i] = v;
				pm_unpin_user_page(page);
				atomic_fetch_add(&nr_pins, 1);
			}
		} else if (pm_access(mm, a, &v, 8, 1) != 8) {
			fail("write of page %lu failed", i);
		} else {
			want[i] = v;
		}
		back = 0;
		if (pm_access(mm, a, &back, 8, 0) != 8 || back != want[i])
			fail("page %lu: wrote %#llx, reads %#llx", i, (unsigned long long)want[i],
			     (unsigned long long)back);
		pthread_rwlock_unlock(&remap_lock);
		atomic_fetch_add(&nr_writes, 1);
	}
	return NULL;
}

static void *scanner_main(void *arg)
{
	static struct pm_page_info pi[NPG];
	struct pm_map_info mi[8];

	(void)arg;
	while (!atomic_load(&stop)) {
		pthread_rwlock_rdlock(&remap_lock);
		if (pm_pagemap(mm, area, NPG, pi) != NPG)
			fail("pm_pagemap over the area failed");
		for (unsigned i = 0; i < NPG; i++)
			if ((pi[i].flags & PM_PAGE_ZERO) && (pi[i].flags & PM_PAGE_ANON))
				fail("page %u: the zero page, anonymous", i);
		if (pm_mm_maps(mm, area, mi, 8) < 1)
			fail("pm_mm_maps over the area failed");
		pthread_rwlock_unlock(&remap_lock);
		atomic_fetch_add(&nr_scans, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = tap_seconds(2);
	pthread_t freer, wr[WRITERS], scanner;
	size_t free0;
	bool last_ok = true;
	struct pm_stats s;
	long a;

	plan_no_plan();
	seed = tap_seed(argc, argv);
	{
		pthread_rwlockattr_t at;

		pthread_rwlockattr_init(&at);
		pthread_rwlockattr_setkind_np(&at, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		ASSERT_EQ(pthread_rwlock_init(&remap_lock, &at), 0);
		pthread_rwlockattr_destroy(&at);
	}
	free0 = pmt_setup(&m, &mm, 64, 0);
	a = pm_mmap(mm, 0, (NBLK + 1) * HP, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	area = ((unsigned long)a + HP - 1) & ~(HP - 1);
	for (unsigned b = 0; b < NBLK; b++)
		remap_block(b);
	ASSERT_EQ(atomic_load(&errors), 0);

	ASSERT_EQ(pthread_create(&freer, NULL, freer_main, NULL), 0);
	for (long i = 0; i < WRITERS; i++)
		ASSERT_EQ(pthread_create(&wr[i], NULL, writer_main, (void *)i), 0);
	ASSERT_EQ(pthread_create(&scanner, NULL, scanner_main, NULL), 0);
	pmt_wait_until(tap_now() + secs, &errors);
	atomic_store(&stop, 1);
	pthread_join(freer, NULL);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(wr[i], NULL);
	pthread_join(scanner, NULL);

	pm_machine_stats(m, &s);
	diag("%ld MADV_FREE calls, %ld blocks mapped again, %ld writes (%ld through pins), "
	     "%ld scans, %lu THP splits", atomic_load(&nr_frees), atomic_load(&nr_remaps),
	     atomic_load(&nr_writes), atomic_load(&nr_pins), atomic_load(&nr_scans),
	     (unsigned long)s.thp_split_page);
	is_int(atomic_load(&errors), 0, "no error in any thread");
	ok(atomic_load(&nr_frees) > 0 && atomic_load(&nr_writes) > 0 && atomic_load(&nr_pins) > 0 &&
	   atomic_load(&nr_scans) > 0, "every thread made progress");
	ok(s.thp_split_page > 0, "THPs were split");
	for (unsigned long i = 0; i < NPG; i++) {
		uint64_t back = ~0ULL;

		pm_access(mm, area + i * PG + 64, &back, 8, 0);
		last_ok &= back == want[i];
	}
	ok(last_ok, "every page holds its last write, or zero");
	ok(pmt_pins_balanced(m), "every pin released, exactly");
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive");
	pmt_teardown(&m, &mm, free0, "after the run");
	return done_testing();
}
