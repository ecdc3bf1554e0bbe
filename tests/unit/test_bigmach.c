// SPDX-License-Identifier: MIT
/*
 * test_bigmach.c - machines far larger than the host's memory (issue 13, defect 3).
 *
 * The contract (api.md, second round): pm_machine_create() costs O(1) time and host memory
 * per GiB of mem_bytes until frames are used, and so do pm_machine_free_pages() and
 * pm_machine_check(); a range the host cannot reserve is NULL with errno ENOMEM. So a 64 GiB
 * machine, and a 1 TiB one where the host has the address space, must come up without
 * growing the process by more than a few MiB, count every frame free, pass the check, and do
 * real work (faults, THPs, pins, fork with COW, shmem) with exact frame counts.
 *
 * Host memory is measured as the resident set (/proc/self/statm), with generous bounds: the
 * eagerly initialised descriptors cost 16 MiB per GiB (1 GiB for 64 GiB), the lazy ones a
 * few pages. Nothing here measures time.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define GiB (1UL << 30)
#define PG ((unsigned long)PM_PAGE_SIZE)
#define THP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

/* Host memory a machine of any size may cost before use (the eager one: 16 MiB per GiB). */
#define CREATE_RSS_MAX (64 * MiB)
/* Host memory the work below may cost on top (it uses about 20 MiB of frames). */
#define WORK_RSS_MAX (256 * MiB)

static bool lazy_ok = true; /* a 64 GiB machine came up lazily: a 1 TiB one is worth a try */

/* The resident set of this process, in bytes. */
static long rss(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * sysconf(_SC_PAGESIZE);
}

/* Run the calling thread on one CPU, so that fresh frames come from one per-CPU cache. */
static void run_on_this_cpu(void)
{
	cpu_set_t set;
	int cpu = sched_getcpu();

	CPU_ZERO(&set);
	CPU_SET(cpu > 0 ? cpu : 0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void run_anywhere(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * A fresh machine of @gib GiB: created, counted and checked within CREATE_RSS_MAX of host
 * memory. NULL (the test skipped) if the host cannot reserve the range, NULL (a failed test)
 * on any other error.
 */
static struct pm_machine *big_machine(size_t gib)
{
	struct pm_config c = { .mem_bytes = gib * GiB };
	unsigned long total = gib * GiB / PG;
	struct pm_machine *m;
	long r0 = rss(), grown;

	errno = 0;
	m = pm_machine_create(&c);
	if (!m && errno == ENOMEM) {
		diag("%zu GiB: the host cannot reserve the range (ENOMEM)", gib);
		skip(1, "cannot reserve the address range of the machine");
		return NULL;
	}
	if (!ok(m != NULL, "create a %zu GiB machine", gib)) {
		diag("errno %d", errno);
		return NULL;
	}
	grown = rss() - r0;
	if (!ok(grown < (long)CREATE_RSS_MAX, "%zu GiB: creation grew the process by %ld KiB",
		gib, grown / 1024))
		lazy_ok = false;
	is_int(pm_machine_total_pages(m), total, "%zu GiB: total pages", gib);
	is_int(pm_machine_free_pages(m), total - 1, "%zu GiB: every frame free but the zero page",
	       gib);
	is_int(pm_machine_check(m), 0, "%zu GiB: pm_machine_check of the fresh machine", gib);
	grown = rss() - r0;
	ok(grown < (long)CREATE_RSS_MAX, "%zu GiB: counting and checking grew it to %ld KiB", gib,
	   grown / 1024);
	return m;
}

/*
 * The descriptors of frames never used read as free (refcount 0, not pinned) and still
 * name their frame, at the very end of memory too.
 */
static void test_unused_descriptors(struct pm_machine *m, const char *what)
{
	unsigned long last = pm_machine_total_pages(m) - 1;
	struct pm_page *p = pm_pfn_to_page(m, last);

	if (!ok(p != NULL, "%s: the last frame has a descriptor", what)) {
		skip(3, "no descriptor");
		return;
	}
	is_int(pm_page_to_pfn(p), last, "%s: it names its frame", what);
	is_int(pm_folio_ref_count(pm_page_folio(p)), 0, "%s: refcount 0", what);
	ok(!pm_folio_maybe_dma_pinned(pm_page_folio(p)), "%s: not pinned", what);
	ok(pm_pfn_to_page(m, last + 1) == NULL, "%s: no descriptor beyond memory", what);
}

/* Faults, THPs, exact frame counts, pins, fork with COW and shmem on machine @m. */
static void test_work(struct pm_machine *m, const char *what)
{
	size_t free0 = pm_machine_free_pages(m);
	long r0 = rss();
	struct pm_mm *mm = pm_mm_create(m), *child;
	struct pm_shmem *f = pm_shmem_create(m, 1 * MiB, 0);
	struct pm_page *pins[512], *spins[256];
	unsigned long a, b, prev = 0;
	bool ascending = true;
	size_t x;
	long s;

	ASSERT_TRUE(mm && f);

	/* 4 KiB pages, faulted one by one on one CPU: fresh frames come in ascending order. */
	run_on_this_cpu();
	b = pmt_map_anon(mm, 3 * MiB, RW, false);
	for (unsigned long i = 0; i < 3 * MiB / PG; i++) {
		unsigned long pfn;

		pmt_touch(mm, b + i * PG, PG);
		pfn = pmt_pfn_at(mm, b + i * PG);
		ascending &= pfn > prev && pfn < pm_machine_total_pages(m);
		prev = pfn;
	}
	run_anywhere();
	ok(ascending, "%s: 768 fresh frames in ascending order, past a 2 MiB block", what);
	ok(pmt_fill(mm, b, 3 * MiB / PG, 1), "%s: fill 3 MiB of 4 KiB pages", what);

	/* Exact counts: DONTNEED gives back exactly its frames, refaulting takes them again. */
	pm_rcu_barrier();
	x = pm_machine_free_pages(m);
	is_int(pm_madvise(mm, b, 1 * MiB, PM_MADV_DONTNEED), 0, "%s: DONTNEED 1 MiB", what);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m) - x, 256, "%s: exactly 256 frames came back", what);
	ok(pmt_fill(mm, b, 256, 1), "%s: refault them", what);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), x, "%s: and exactly 256 went again", what);

	/* THPs, pinned long-term. */
	a = pmt_map_anon(mm, 8 * MiB, RW, true);
	ok(pmt_fill(mm, a, 8 * MiB / PG, 2), "%s: fill 8 MiB of THPs", what);
	is_int(pmt_order_at(mm, a), 9, "%s: a 2 MiB folio", what);
	s = pm_pin_user_pages_fast(mm, a, 512, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pins);
	is_int(s, 512, "%s: pin 512 pages of a THP", what);

	/* shmem, mapped shared and pinned. */
	s = pm_mmap(mm, 0, 1 * MiB, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(s > 0);
	is_int(pmt_put_tag(mm, s, 256, 0x77, 0), 256, "%s: fill a 1 MiB shmem object", what);
	is_int(pm_pin_user_pages(mm, s, 256, PM_FOLL_WRITE, spins), 256, "%s: pin it", what);

	/* fork: the pinned THP is copied for the child, the rest is shared until written. */
	child = pmt_fork(mm);
	ok(pmt_fill(child, b, 3 * MiB / PG, 3), "%s: the child writes its 4 KiB pages", what);
	ok(pmt_fill(child, a, 8 * MiB / PG, 4), "%s: the child writes its THPs", what);
	ok(pmt_check(mm, b, 3 * MiB / PG, 1), "%s: the parent's 4 KiB pages are intact", what);
	ok(pmt_check(mm, a, 8 * MiB / PG, 2), "%s: the parent's THPs are intact", what);
	is_int(pmt_bad_tag(child, s, 256, 0x77, 0), 0, "%s: the child shares the shmem pages", what);
	is_int(pmt_bad_pin(spins, 256, 0x77, 0), 0, "%s: the shmem pins see the data", what);
	{
		unsigned long bad = 0;

		for (unsigned i = 0; i < 512; i++)
			bad += ((uint64_t *)pm_page_address(pins[i]))[0] !=
			       pmt_pattern(a + i * PG, 2);
		is_int(bad, 0, "%s: the THP pins see the parent's data", what);
	}
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check with pins and a child", what);
	ok(rss() - r0 < (long)WORK_RSS_MAX, "%s: the work grew the process by %ld KiB", what,
	   (rss() - r0) / 1024);

	pm_unpin_user_pages(pins, 512);
	pm_unpin_user_pages(spins, 256);
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "%s: every frame returned", what);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check after the work", what);
}

static void test_64g(void)
{
	/* A host with vm.overcommit_memory=2 and little memory may refuse even 64 GiB. */
	struct pm_machine *m = big_machine(64);

	if (!m) {
		lazy_ok = false;
		return;
	}
	test_unused_descriptors(m, "64 GiB");
	test_work(m, "64 GiB");
	pmt_end(m, pm_machine_total_pages(m) - 1, &pmt_end_returned, "64 GiB");
}

static void test_1t(void)
{
	struct pm_machine *m;

	if (!lazy_ok) {
		/* The eager allocator would need 16 GiB of host memory: do not try. */
		skip(1, "64 GiB was not created lazily; not trying 1 TiB");
		return;
	}
	m = big_machine(1024);
	if (!m)
		return;
	test_unused_descriptors(m, "1 TiB");
	test_work(m, "1 TiB");
	pmt_end(m, pm_machine_total_pages(m) - 1, &pmt_end_returned, "1 TiB");
}

/* A range no host can reserve (4 PiB, the largest size accepted): NULL, ENOMEM. */
static void test_enomem(void)
{
	struct pm_config c = { .mem_bytes = 1UL << 52 };
	struct pm_machine *m;

	errno = 0;
	m = pm_machine_create(&c);
	ok(!m && errno == ENOMEM, "4 PiB: NULL with ENOMEM (errno %d)", errno);
	if (m)
		pm_machine_destroy(m);
}

/*
 * A small machine still runs out: the never-used memory is handed out to the last block,
 * then -ENOMEM; after a munmap every frame is reused and the counts are exact.
 */
static void test_small_oom(void)
{
	struct pm_machine *m = pmt_machine(8, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long x = 0x10000000UL;
	long n = 0, r = 0, n2 = 0;

	ASSERT_TRUE(mm);
	run_on_this_cpu();
	is_int(pmt_map_fixed(mm, x, 16 * MiB, RW), x, "8 MiB machine: map 16 MiB");
	while (n < 4096 && (r = pm_fault(mm, x + n * PG, PM_FAULT_WRITE)) == 0)
		n++;
	is_int(r, -ENOMEM, "faulting page after page ends in -ENOMEM");
	ok(n > 1900 && n < 2048, "after %ld pages", n);
	ok(pm_machine_free_pages(m) < 64, "%zu frames left free", pm_machine_free_pages(m));
	is_int(pm_machine_check(m), 0, "pm_machine_check of the full machine");
	is_int(pm_munmap(mm, x, 16 * MiB), 0, "munmap everything");
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0 - pmt_kept_tables(m),
	       "every frame is free again but the kept tables");
	is_int(pmt_map_fixed(mm, x, 16 * MiB, RW), x, "map 16 MiB again");
	while (n2 < 4096 && (r = pm_fault(mm, x + n2 * PG, PM_FAULT_WRITE)) == 0)
		n2++;
	run_anywhere();
	is_int(r, -ENOMEM, "the second fill ends in -ENOMEM too");
	is_int(n2, n, "after as many pages as the first");
	is_int(pm_machine_check(m), 0, "pm_machine_check of the refilled machine");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "small machine");
}

int main(void)
{
	plan_no_plan();
	test_enomem();
	test_small_oom();
	test_64g();
	test_1t();
	return done_testing();
}
