// SPDX-License-Identifier: MIT
/*
 * stress_shmem_leaf.c - first inserts into the page-cache leaves of a shmem object whose
 * interior nodes were made ahead race each other and the unlinking of emptied leaves.
 *
 * An object made by pm_shmem_create() has its leaves' parents made with it, and a first
 * insert links its new leaf into one by compare-and-swap from the empty slot, without
 * tree_lock (shmem/cache.c, "Interior nodes made ahead"). Each round, two threads write
 * interleaved pages of the same fresh leaf (both make the leaf: one CAS wins, the loser gives
 * its leaf back and inserts into the winner's), while a third faults a page of the next leaf
 * and punches it out again (MADV_REMOVE), so that the leaf empties, is marked dead and
 * unlinked under tree_lock, while the first two may be linking theirs into the neighbouring
 * slot or into that one. After the round every written byte reads back, the punched page
 * reads zero, the cache holds exactly the pages written, and every eighth round
 * pm_machine_check() passes; a truncation to 0 and back ends each pass over the object.
 * Both designs, and with PM_KNOB_SHMEM_TREE_LOCK (no nodes ahead, every insert under
 * tree_lock), each for a third of tap_seconds(2).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define LEAF 64			/* pages per page-cache leaf */
#define NLEAVES 32
#define PAGES (NLEAVES * LEAF)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static struct pm_mm *mm;
static struct pm_shmem *obj;
static unsigned long base;
static pthread_barrier_t start, done;
static _Atomic bool stop;
static _Atomic long bad;
static _Atomic long leaf_now; /* the round's leaf */

static void *writer(void *arg)
{
	unsigned long me = (unsigned long)(uintptr_t)arg;

	for (;;) {
		unsigned long leaf;

		pthread_barrier_wait(&start);
		if (atomic_load(&stop))
			return NULL;
		leaf = (unsigned long)atomic_load(&leaf_now);
		for (unsigned long i = me; i < LEAF; i += 2)
			if (pmt_poke(mm, base + (leaf * LEAF + i) * PG, (char)(1 + i)) != 1)
				atomic_fetch_add(&bad, 1);
		pthread_barrier_wait(&done);
	}
}

/* A page of the next leaf, faulted and punched out: that leaf empties and is unlinked. */
static void *puncher(void *arg)
{
	(void)arg;
	for (;;) {
		unsigned long leaf, addr;

		pthread_barrier_wait(&start);
		if (atomic_load(&stop))
			return NULL;
		leaf = (unsigned long)atomic_load(&leaf_now) + 1;
		addr = base + leaf * LEAF * PG;
		for (int k = 0; k < 4; k++)
			if (pmt_poke(mm, addr, 'p') != 1 ||
			    pm_madvise(mm, addr, PG, PM_MADV_REMOVE))
				atomic_fetch_add(&bad, 1);
		pthread_barrier_wait(&done);
	}
}

static void run(unsigned flags, unsigned knobs, const char *name)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .flags = flags, .knobs = knobs };
	struct pm_machine *m = pm_machine_create(&cfg);
	long rounds = 0, checks = 0;
	pthread_t t[3];
	size_t free0;
	double end;

	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
	mm = pm_mm_create(m);
	obj = pm_shmem_create(m, PAGES * PG, 0);
	ASSERT_TRUE(mm && obj);
	base = (unsigned long)pm_mmap(mm, 0, PAGES * PG, RW, PM_MAP_SHARED, obj, 0);
	ASSERT_TRUE((long)base > 0);
	atomic_store(&stop, false);
	atomic_store(&bad, 0);
	ASSERT_EQ(pthread_barrier_init(&start, NULL, 4), 0);
	ASSERT_EQ(pthread_barrier_init(&done, NULL, 4), 0);
	ASSERT_EQ(pthread_create(&t[0], NULL, writer, (void *)(uintptr_t)0), 0);
	ASSERT_EQ(pthread_create(&t[1], NULL, writer, (void *)(uintptr_t)1), 0);
	ASSERT_EQ(pthread_create(&t[2], NULL, puncher, NULL), 0);
	end = tap_now() + tap_seconds(2) / 3;
	do {
		long leaf = rounds % (NLEAVES - 1);

		atomic_store(&leaf_now, leaf);
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		for (unsigned long i = 0; i < LEAF; i++)
			if (pmt_peek(mm, base + ((unsigned long)leaf * LEAF + i) * PG) != 1 + (int)i)
				atomic_fetch_add(&bad, 1);
		if (pmt_peek(mm, base + (unsigned long)(leaf + 1) * LEAF * PG) != 0 ||
		    pm_madvise(mm, base + (unsigned long)(leaf + 1) * LEAF * PG, PG, PM_MADV_REMOVE))
			atomic_fetch_add(&bad, 1);
		if (pm_shmem_nr_pages(obj) != (unsigned long)(leaf + 1) * LEAF)
			atomic_fetch_add(&bad, 1);
		if (rounds % 8 == 0) {
			checks++;
			if (!pmt_quiescent_check(m))
				atomic_fetch_add(&bad, 1);
		}
		/* A pass over the object ends with it emptied and grown again. */
		if (leaf == NLEAVES - 2 &&
		    (pm_shmem_truncate(obj, 0) || pm_shmem_truncate(obj, PAGES * PG)))
			atomic_fetch_add(&bad, 1);
		rounds++;
	} while (tap_now() < end);
	atomic_store(&stop, true);
	pthread_barrier_wait(&start);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
	is_int(atomic_load(&bad), 0, "%s: %ld rounds of first inserts into one leaf by two threads "
	       "beside a neighbouring leaf emptied and unlinked, %ld machine checks: every byte "
	       "read back, every count exact", name, rounds, checks);
	pm_munmap(mm, base, PAGES * PG);
	pm_shmem_put(obj);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, name);
}

int main(void)
{
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, 0, "linux");
	run(PM_MACHINE_RANGE_MM, 0, "range");
	run(PM_MACHINE_RANGE_MM, PM_KNOB_SHMEM_TREE_LOCK, "range, PM_KNOB_SHMEM_TREE_LOCK");
	return done_testing();
}
