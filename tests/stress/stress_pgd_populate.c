// SPDX-License-Identifier: MIT
/*
 * stress_pgd_populate.c - the upper page tables (PUD and PMD tables, from PGD and PUD
 * entries) appear and go while other threads fault next to them.
 *
 * The range design publishes a PGD or PUD entry by compare-and-swap from empty, with no lock
 * (pgtable.c, populate_upper); Linux's design under mm->page_table_lock. In Linux's design
 * a munmap that empties a 512 GiB range, or a 1 GiB span, frees the table again
 * (free_upper); the range design fills them at mmap (pm__upper_tables_prepare) and keeps
 * them, a PMD table wiped of its marks (_PAGE_TABLE_USED) when Linux would free it. Here
 *   pairs of threads share a 512 GiB range each (one PGD entry): each maps its own 1 GiB
 *   span (its own PUD entry; the first fault in the range races the other thread's for the
 *   PGD entry), writes a page and reads it back, then unmaps, so the tables go and come
 *   again; one thread of each pair maps in a second PUD span as well, so that a PMD-table
 *   populate races the free of the other span's;
 *   one thread faults and checks, all along, a page of a range no one unmaps, whose PGD entry
 *   sits in the same line of the PGD page as the others'.
 * Every read must return what its thread wrote; at the end every frame comes back and
 * pm_machine_check() passes. Both designs, whatever the environment says, each for half of
 * tap_seconds(2).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define GiB (1UL << 30)
#define RANGE (512 * GiB)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define FIXED (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define NPAIRS 2
#define BASE_RANGE 2 /* ranges 2 and 3 churn; range 4 holds the steady page */

static struct pm_mm *mm;
static _Atomic bool stop;
static _Atomic long bad, rounds;

struct worker {
	unsigned long span; /* its 1 GiB span */
	unsigned long extra; /* a second span in the same range, or 0 */
	char tag;
};

static bool map_write_check(unsigned long addr, char tag)
{
	if (pm_mmap(mm, addr, 2 * PG, RW, FIXED, NULL, 0) != (long)addr)
		return false;
	if (pmt_poke(mm, addr + PG, tag) != 1)
		return false;
	return pmt_peek(mm, addr + PG) == tag;
}

static void *churn(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&stop)) {
		if (!map_write_check(w->span, w->tag))
			atomic_fetch_add(&bad, 1);
		if (w->extra && !map_write_check(w->extra, (char)(w->tag + 1)))
			atomic_fetch_add(&bad, 1);
		if (pm_munmap(mm, w->span, 2 * PG))
			atomic_fetch_add(&bad, 1);
		if (w->extra && pm_munmap(mm, w->extra, 2 * PG))
			atomic_fetch_add(&bad, 1);
		atomic_fetch_add(&rounds, 1);
	}
	return NULL;
}

static void *steady(void *arg)
{
	unsigned long addr = (unsigned long)(uintptr_t)arg;
	char c = 0;

	while (!atomic_load(&stop)) {
		c = (char)(c % 100 + 1); /* 1..100: pmt_peek reads the byte unsigned */
		if (pmt_poke(mm, addr, c) != 1 || pmt_peek(mm, addr) != c)
			atomic_fetch_add(&bad, 1);
	}
	return NULL;
}

static void run(unsigned flags, const char *name)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .flags = flags };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct worker w[2 * NPAIRS];
	pthread_t t[2 * NPAIRS + 1];
	unsigned long steady_addr = 4 * RANGE + GiB;
	double secs = tap_seconds(2);
	size_t free0;

	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
	atomic_store(&stop, false);
	atomic_store(&bad, 0);
	atomic_store(&rounds, 0);
	ASSERT_EQ(pm_mmap(mm, steady_addr, PG, RW, FIXED, NULL, 0), (long)steady_addr);
	for (int p = 0; p < NPAIRS; p++)
		for (int k = 0; k < 2; k++) {
			struct worker *x = &w[2 * p + k];
			unsigned long r = (unsigned long)(BASE_RANGE + p) * RANGE;

			x->span = r + (unsigned long)(1 + k) * GiB;
			x->extra = k ? r + 8 * GiB : 0;
			x->tag = (char)('A' + 2 * (2 * p + k));
		}
	for (int i = 0; i < 2 * NPAIRS; i++)
		ASSERT_EQ(pthread_create(&t[i], NULL, churn, &w[i]), 0);
	ASSERT_EQ(pthread_create(&t[2 * NPAIRS], NULL, steady, (void *)(uintptr_t)steady_addr), 0);
	for (double end = tap_now() + secs / 2; tap_now() < end;)
		usleep(10000);
	atomic_store(&stop, true);
	for (int i = 0; i <= 2 * NPAIRS; i++)
		pthread_join(t[i], NULL);
	is_int(atomic_load(&bad), 0, "%s: %ld rounds of tables populated and freed beside faults: "
	       "every access saw its own data", name, atomic_load(&rounds));
	ok(atomic_load(&rounds) > 0, "%s: ... the churn ran", name);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, name);
}

int main(void)
{
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, "linux");
	run(PM_MACHINE_RANGE_MM, "range");
	return done_testing();
}
