// SPDX-License-Identifier: MIT
/*
 * test_regress_truncate_private_cow.c - a private (COW) write fault on a shmem mapping that
 * races with a shrinking pm_shmem_truncate() must not leave an anonymous copy of a truncated
 * page mapped beyond the new end of the object.
 *
 * The contract (pinmm/shmem.h, api.md): shrinking "drops the pages beyond the new size from the
 * cache and from every mapping, private COW copies included, as Linux's truncate does". So once
 * pm_shmem_truncate(f, 0) has returned and the faulting access has finished, an access to the
 * private mapping must fail with -EFAULT (SIGBUS).
 *
 * The bug (src/fault/shmem.c, pm__shmem_fault): on a private write fault the page-cache folio is
 * looked up (shmem_get_folio), a copy is allocated and filled with no lock held, and the copy is
 * installed by shmem_map(..., cache_page=false), which - unlike the shared/read case - does not
 * re-check PG_shmem of the source under the PTL. Interleaving:
 *
 *   fault (thread A)                          truncate (thread B)
 *   shmem_get_folio(): index < size, found
 *   pm__folio_alloc(copy); memcpy
 *                                             xsize = 0; page out of the cache, PG_shmem cleared
 *                                             unmap_mapping_range(): PTE is none, nothing to zap
 *   shmem_map(copy, cache_page=false):
 *     PTE none -> installed                   (returns)
 *
 * Linux closes this with the folio lock held across finish_fault() in do_cow_fault() plus the
 * second unmap_mapping_range() of truncate_pagecache(). The race is retried many times; each
 * try takes microseconds, and on a 2-CPU machine a stale copy shows up within a few thousand.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define HINT 0x200000000UL

static struct pm_mm *mm;
static struct pm_shmem *f;
static unsigned long addr;
static _Atomic unsigned go, done_a;
static _Atomic int stop;
static _Atomic unsigned long delay_a;

static void spin(unsigned long n)
{
	for (volatile unsigned long i = 0; i < n; i++)
		;
}

static void *fault_thread(void *arg)
{
	unsigned iter = 0;
	uint64_t v = 0x5a5a5a5a5a5a5a5aULL;

	(void)arg;
	for (;;) {
		while (atomic_load(&go) == iter && !atomic_load(&stop))
			;
		if (atomic_load(&stop))
			break;
		iter++;
		spin(atomic_load(&delay_a));
		pm_access(mm, addr, &v, sizeof(v), 1); /* may succeed or see -EFAULT */
		atomic_store(&done_a, iter);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20 };
	struct pm_machine *m = pm_machine_create(&cfg);
	uint64_t seed = tap_seed(argc, argv), rs;
	double deadline = tap_now() + tap_seconds(4.0);
	long tries = 0, stale = 0, x;
	pthread_t ta;
	size_t free0;

	plan(3);
	ASSERT_TRUE(m);
	rs = seed;
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	f = pm_shmem_create(m, PG, 0);
	ASSERT_TRUE(mm && f);
	x = pm_mmap(mm, HINT, PG, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(x == (long)HINT);
	addr = (unsigned long)x;
	ASSERT_EQ(pthread_create(&ta, NULL, fault_thread, NULL), 0);

	while (tap_now() < deadline && !stale) {
		char c;
		unsigned it;
		unsigned long delay_b;

		/* Reset: object one page long, its page in the cache, nothing mapped. */
		ASSERT_EQ(pm_shmem_truncate(f, PG), 0);
		ASSERT_EQ(pm_madvise(mm, addr, PG, PM_MADV_DONTNEED), 0);
		{
			/* Populate the cache through a throw-away shared mapping. */
			long s = pm_mmap(mm, 0, PG, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED, f, 0);
			uint64_t v = 0x1111;

			ASSERT_TRUE(s > 0);
			ASSERT_EQ(pm_access(mm, (unsigned long)s, &v, sizeof(v), 1), (long)sizeof(v));
			ASSERT_EQ(pm_munmap(mm, (unsigned long)s, PG), 0);
		}
		atomic_store(&delay_a, tap_rand(&rs) % 400);
		delay_b = tap_rand(&rs) % 400;
		it = atomic_load(&go) + 1;
		atomic_store(&go, it);
		spin(delay_b);
		ASSERT_EQ(pm_shmem_truncate(f, 0), 0); /* this thread is B */
		while (atomic_load(&done_a) != it)
			;
		tries++;
		/* The object is now empty: any access to the private mapping is SIGBUS. */
		if (pm_access(mm, addr, &c, 1, 0) != -EFAULT)
			stale++;
	}
	atomic_store(&stop, 1);
	pthread_join(ta, NULL);
	diag("%ld tries, %ld left a private copy mapped beyond the end of the object", tries, stale);
	is_int(stale, 0, "no private COW copy survives a racing truncate to 0");

	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "every frame returned");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
	return done_testing();
}
