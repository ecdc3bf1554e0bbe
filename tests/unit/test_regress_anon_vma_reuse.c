// SPDX-License-Identifier: MIT
/*
 * test_regress_anon_vma_reuse.c - anon_vma identity. At a VMA's first anonymous fault Linux
 * reuses the anon_vma of the VMA after it, else of the one before, when that one borders it,
 * has the same flags but for VM_READ|WRITE|EXEC and a contiguous pgoff, and has an anon_vma
 * not from fork (find_mergeable_anon_vma); otherwise the VMA gets a new one. VMAs with two
 * different anon_vmas never merge later, and where a VMA could join both its neighbours but
 * their anon_vmas differ, it joins the one before (can_vma_merge_right). pinmm took any two
 * anon_vmas not from fork as one, and merged what Linux keeps apart.
 *
 * Found by make oracle (maps-count(linux-kept-apart), listed as open since issue 29's first
 * runs). Each case's VMA count was read from the 6.18 host's /proc/self/maps. The whole
 * program runs in each design (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define WIN 0x200000000000UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RWX (RW | PM_PROT_EXEC)
#define FIX (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)

static struct pm_machine *m;
static struct pm_mm *mm;

/* Map @n pages at page @pg of the window. */
static void map(unsigned long pg, unsigned long n, int prot)
{
	ASSERT_EQ(pm_mmap(mm, WIN + pg * PG, n * PG, prot, FIX, NULL, 0), (long)(WIN + pg * PG));
}

/* Write page @pg: its VMA's first anonymous fault. */
static void touch(unsigned long pg)
{
	ASSERT_EQ(pmt_poke(mm, WIN + pg * PG, 1), 1);
}

/* Where the window's first VMA ends. */
static long first_end(void)
{
	struct pm_map_info mi;

	return pm_mm_maps(mm, WIN, &mi, 1) == 1 ? (long)mi.end : -1;
}

static void check(long want, const char *what)
{
	is_int(pmt_nr_maps(mm, WIN, WIN + 64 * PG), want, "%s", what);
	ASSERT_EQ(pm_munmap(mm, WIN, 64 * PG), 0);
}

/*
 * A chain: CHAIN VMAs side by side, R|W and R|W|X in turn, first-faulted from the last to the
 * first: each takes the anon_vma of the one after it, so all share the last one's, and made
 * R|W they are one VMA. Every choice is still pending when the mprotect asks for the first,
 * which waits on the next, and so on to the end: decided without recursion, on a thread with
 * a small stack.
 */
#define CHAIN 6000UL
#define CHAIN_BASE (WIN + 64 * PG)

static void *chain_mprotect(void *arg)
{
	(void)arg;
	return (void *)(long)pm_mprotect(mm, CHAIN_BASE, CHAIN * PG, RW);
}

static void test_chain(void)
{
	pthread_attr_t attr;
	pthread_t t;
	void *ret;

	for (unsigned long i = 0; i < CHAIN; i++)
		ASSERT_EQ(pm_mmap(mm, CHAIN_BASE + i * PG, PG, i % 2 ? RWX : RW, FIX, NULL, 0),
			  (long)(CHAIN_BASE + i * PG));
	for (unsigned long i = CHAIN; i-- > 0;)
		ASSERT_EQ(pmt_poke(mm, CHAIN_BASE + i * PG, 1), 1);
	ASSERT_EQ(pthread_attr_init(&attr), 0);
	ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 << 10), 0);
	ASSERT_EQ(pthread_create(&t, &attr, chain_mprotect, NULL), 0);
	ASSERT_EQ(pthread_join(t, &ret), 0);
	pthread_attr_destroy(&attr);
	is_int((long)ret, 0, "a chain of %lu pending choices: mprotect", CHAIN);
	is_int(pmt_nr_maps(mm, CHAIN_BASE, CHAIN_BASE + CHAIN * PG), 1,
	       "... all took the last one's anon_vma: one VMA (Linux)");
	ASSERT_EQ(pm_munmap(mm, CHAIN_BASE, CHAIN * PG), 0);
}

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);

	plan_no_plan();
	map(0, 4, RW), touch(0), map(4, 4, PM_PROT_READ);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 4 * PG, RW), 0);
	check(1, "a faulted VMA and an unfaulted one beside it merge");

	map(0, 4, RW), touch(0), map(8, 4, RW), touch(8), map(4, 4, RW);
	is_int(first_end(), (long)(WIN + 8 * PG), "two faulted apart: the VMA mapped between "
						  "joins the one before (Linux)");
	check(2, "... and only that one");

	map(0, 4, RW), touch(0), map(8, 4, RW), touch(8), map(4, 4, PM_PROT_READ);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 4 * PG, RW), 0);
	is_int(first_end(), (long)(WIN + 8 * PG), "... made R|W between them: the same (Linux)");
	check(2, "... two VMAs");

	map(0, 4, RW), touch(0), map(4, 4, RWX), touch(4);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 4 * PG, RW), 0);
	check(1, "a VMA faulted beside a faulted one, flags but for access equal: "
		 "reused, merges");

	map(4, 4, RWX), touch(4), map(0, 4, RW), touch(0);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 4 * PG, RW), 0);
	check(1, "... the VMA after it faulted first: reused, merges");

	map(0, 4, RW), map(4, 4, RWX), touch(4), touch(0);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 4 * PG, RW), 0);
	check(1, "... both mapped, the second faulted first: reused, merges");

	map(0, 4, RW), touch(0), map(8, 4, RWX), touch(8), map(4, 4, RWX);
	ASSERT_EQ(pm_mprotect(mm, WIN, 12 * PG, RW), 0);
	check(2, "faulted while apart, joined later: two anon_vmas, two VMAs (Linux)");

	map(0, 8, RW);
	ASSERT_EQ(pm_madvise(mm, WIN + 4 * PG, 4 * PG, PM_MADV_DONTFORK), 0);
	touch(0), touch(4);
	ASSERT_EQ(pm_madvise(mm, WIN + 4 * PG, 4 * PG, PM_MADV_DOFORK), 0);
	check(2, "a neighbour with another flag (DONTFORK) is not reused: two VMAs (Linux)");

	map(0, 8, RW);
	ASSERT_EQ(pm_madvise(mm, WIN + 4 * PG, 4 * PG, PM_MADV_DONTFORK), 0);
	touch(4), touch(0);
	ASSERT_EQ(pm_madvise(mm, WIN + 4 * PG, 4 * PG, PM_MADV_DOFORK), 0);
	check(2, "... in the other order too (Linux)");

	/* A fork child's VMA grown in place by mremap up to a VMA without an anon_vma joins it:
	 * vma_merge_extend merges a new range, whose anon_vma no chain holds (seed 0x4141,
	 * sequence 10318). */
	map(0, 12, RW);
	ASSERT_EQ(pm_munmap(mm, WIN + 4 * PG, 2 * PG), 0);
	touch(0);
	{
		struct pm_mm *c = pmt_fork(mm);

		is_int(pm_mremap(c, WIN + 2 * PG, 2 * PG, 4 * PG, PM_MREMAP_MAYMOVE, 0),
		       (long)(WIN + 2 * PG), "a fork child's VMA grows in place");
		is_int(pmt_nr_maps(c, WIN, WIN + 64 * PG), 1,
		       "... and joins the VMA after it, which has no anon_vma (Linux)");
		pm_mm_destroy(c);
	}
	is_int(pm_mremap(mm, WIN + 2 * PG, 2 * PG, 4 * PG, PM_MREMAP_MAYMOVE, 0),
	       (long)(WIN + 2 * PG), "the parent's grows the same way");
	check(1, "... and joins it too");

	/* A choice made late reads a neighbour as it was at the fault: the VMA after the first
	 * one got its anon_vma (the third's) only after the first's fault, so the first has one
	 * of its own, whichever of the two is decided first - here the middle one, by the mmap
	 * that splits it (seed 0x7e57, sequence 9103). */
	map(0, 4, RW), map(4, 4, RWX), map(8, 4, RW);
	touch(0), touch(8), touch(5);
	map(6, 1, PM_PROT_READ);
	ASSERT_EQ(pm_mprotect(mm, WIN, 6 * PG, PM_PROT_READ), 0);
	is_int(first_end(), (long)(WIN + 4 * PG), "the middle VMA faulted after the first, "
						  "decided before it: apart (Linux)");
	check(5, "... five VMAs");

	/* The same, the later VMA decided first as the one that changes, its earlier
	 * neighbour then as a border (seed 0x7e57, sequence 24513, range design): the middle
	 * one, faulted last, takes the third's anon_vma; the first, faulted before it, has its
	 * own. */
	map(0, 4, RW), map(4, 4, RWX), map(8, 4, RW);
	touch(8), touch(0), touch(4);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * PG, 6 * PG, RW), 0);
	is_int(first_end(), (long)(WIN + 4 * PG), "the first VMA, faulted before the middle "
						  "one took the third's anon_vma: apart (Linux)");
	check(2, "... the middle one joins the third: two VMAs (Linux)");

	test_chain();

	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "anon_vma reuse");
	return done_testing();
}
