// SPDX-License-Identifier: MIT
/*
 * test_pte_lockless.c - the range design's lockless PTE installs and slow-GUP PTE steps
 * (src/fault/anon.c's top comment) against the PTL path (Linux's design, and the range design
 * under PM_KNOB_PTE_TABLE_LOCK).
 *
 *  1. Same results: one script of faults (read and write, the zero page and its COW), slow
 *     and fast pins (read, write, of the zero page), MADV_DONTNEED, mprotect, fork with COW in
 *     the child, munmap and pm_migrate_range, over pages of one PTE table, gives the same
 *     return values, data, pagemap flags and mapcounts, refcounts and pin counters in Linux's
 *     design and the range design, with and without the knob.
 *  2. Shares nothing: in the range design without the knob, with the PTE table's lock held by
 *     this thread, another thread read- and write-faults pages of that table, pins one
 *     present page slowly and another fast, and finishes. (With the PTL path it would wait
 *     for the lock: that side is not run, since waiting cannot be told from slowness.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define BASE 0x40000000UL /* 2 MiB aligned: one PTE table */
#define NP 32

/* ---- 1. same results ---- */

struct trace {
	long v[1024];
	unsigned n;
};

static void rec(struct trace *t, long v)
{
	if (t->n < sizeof(t->v) / sizeof(t->v[0]))
		t->v[t->n] = v;
	t->n++;
}

/* Pagemap flags, mapcounts and first words of the window. */
static void rec_state(struct trace *t, struct pm_mm *mm)
{
	struct pm_page_info info[NP];

	rec(t, pm_pagemap(mm, BASE, NP, info));
	for (unsigned i = 0; i < NP; i++) {
		uint64_t v = 0;

		rec(t, info[i].flags);
		rec(t, info[i].mapcount);
		rec(t, pm_access(mm, BASE + i * PG, &v, sizeof(v), 0));
		rec(t, (long)v);
	}
}

static long pin(struct pm_mm *mm, unsigned i, unsigned flags, bool fast, struct pm_page **p)
{
	return fast ? pm_pin_user_pages_fast(mm, BASE + i * PG, 1, flags, p) :
		      pm_pin_user_pages(mm, BASE + i * PG, 1, flags, p);
}

static void script(unsigned mflags, unsigned knobs, struct trace *t)
{
	struct pm_config cfg = { .mem_bytes = 32 << 20, .flags = mflags, .knobs = knobs };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_page *pages[8];
	struct pm_mm *mm, *child;
	size_t free0;
	uint64_t v;

	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
	rec(t, pmt_map_fixed(mm, BASE, NP * PG, RW) == (long)BASE);
	for (unsigned i = 0; i < NP; i += 2) /* even pages: written */
		rec(t, pmt_poke(mm, BASE + i * PG, (char)(i + 1)));
	for (unsigned i = 1; i < NP; i += 4) /* some odd pages: the zero page */
		rec(t, pm_fault(mm, BASE + i * PG, 0));
	rec_state(t, mm);

	/* Pins: slow and fast, read and write, a present page, the zero page, a missing one. */
	rec(t, pin(mm, 0, PM_FOLL_WRITE, false, &pages[0]));
	rec(t, pin(mm, 2, 0, false, &pages[1]));
	rec(t, pin(mm, 1, 0, false, &pages[2]));		/* the zero page */
	rec(t, pin(mm, 5, PM_FOLL_WRITE, false, &pages[3])); /* COW of the zero page */
	rec(t, pin(mm, 3, PM_FOLL_WRITE, true, &pages[4]));	/* missing: faulted */
	rec(t, pin(mm, 4, 0, true, &pages[5]));
	rec(t, pm_folio_ref_count(pm_page_folio(pages[0])));
	rec(t, pm_folio_ref_count(pm_page_folio(pages[1])));
	rec(t, pm_page_is_zero(pages[2]));
	rec(t, pm_folio_ref_count(pm_page_folio(pages[3])));
	rec(t, pm_folio_maybe_dma_pinned(pm_page_folio(pages[4])));
	rec_state(t, mm);

	/* fork with pins: pinned exclusive pages are copied; COW in the child. */
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	v = 0x77;
	for (unsigned i = 0; i < 8; i++)
		rec(t, pm_access(child, BASE + i * PG, &v, sizeof(v), 1));
	rec_state(t, child);
	rec_state(t, mm);
	pm_mm_destroy(child);
	pm_unpin_user_pages(pages, 6);

	/* DONTNEED, mprotect, munmap, migration. */
	rec(t, pm_madvise(mm, BASE + 6 * PG, 4 * PG, PM_MADV_DONTNEED));
	rec(t, pm_mprotect(mm, BASE + 10 * PG, 2 * PG, PM_PROT_READ));
	rec(t, pm_access(mm, BASE + 10 * PG, &v, sizeof(v), 1));
	rec(t, pm_fault(mm, BASE + 11 * PG, PM_FAULT_WRITE));
	rec(t, pm_munmap(mm, BASE + 12 * PG, 2 * PG));
	rec(t, pm_fault(mm, BASE + 12 * PG, 0));
	rec(t, pm_migrate_range(mm, BASE, 10 * PG, PM_MIGRATE_ANYWHERE));
	rec(t, pmt_map_fixed(mm, BASE + 12 * PG, 2 * PG, RW) == (long)(BASE + 12 * PG));
	for (unsigned i = 6; i < 16; i++)
		rec(t, pmt_poke(mm, BASE + i * PG, 'x'));
	rec_state(t, mm);

	rec(t, (long)PMT_STAT(m, nr_foll_pin_acquired));
	rec(t, (long)PMT_STAT(m, nr_foll_pin_released));
	rec(t, (long)PMT_STAT(m, pgmigrate_success));
	is_int(pm_machine_check(m), 0, "%s knobs %#x: pm_machine_check",
	       mflags == PM_MACHINE_RANGE_MM ? "range" : "linux", knobs);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, NULL);
}

static void test_same_results(void)
{
	static struct trace t[4];
	static const struct {
		unsigned flags, knobs;
		const char *name;
	} runs[4] = {
		{ PM_MACHINE_LINUX_MM, 0, "linux" },
		{ PM_MACHINE_LINUX_MM, PM_KNOB_PTE_TABLE_LOCK, "linux, PTE_TABLE_LOCK" },
		{ PM_MACHINE_RANGE_MM, 0, "range (lockless)" },
		{ PM_MACHINE_RANGE_MM, PM_KNOB_PTE_TABLE_LOCK, "range, PTE_TABLE_LOCK" },
	};

	for (unsigned r = 0; r < 4; r++)
		script(runs[r].flags, runs[r].knobs, &t[r]);
	ok(t[0].n > 100 && t[0].n <= sizeof(t[0].v) / sizeof(t[0].v[0]), "the script ran (%u)",
	   t[0].n);
	for (unsigned r = 1; r < 4; r++) {
		unsigned first = t[r].n == t[0].n ? t[0].n : 0;

		for (unsigned i = 0; i < t[0].n && first == t[0].n; i++)
			if (t[r].v[i] != t[0].v[i])
				first = i;
		ok(first == t[0].n, "%s gives Linux's results (first difference: step %u)",
		   runs[r].name, first);
	}
}

/* ---- 2. shares nothing ---- */

struct other {
	struct pm_mm *mm;
	long r[6];
	_Atomic bool done;
	_Atomic int step;
};

static void *other_main(void *arg)
{
	struct other *o = arg;
	struct pm_page *p;

	atomic_store(&o->step, 0);
	o->r[0] = pm_fault(o->mm, BASE + 2 * PG, PM_FAULT_WRITE);
	atomic_store(&o->step, 1);
	o->r[1] = pm_fault(o->mm, BASE + 3 * PG, 0);
	atomic_store(&o->step, 2);
	o->r[2] = pm_pin_user_pages(o->mm, BASE + PG, 1, PM_FOLL_WRITE, &p);
	if (o->r[2] == 1)
		pm_unpin_user_page(p);
	atomic_store(&o->step, 3);
	o->r[3] = pm_pin_user_pages_fast(o->mm, BASE + 2 * PG, 1, PM_FOLL_WRITE, &p);
	if (o->r[3] == 1)
		pm_unpin_user_page(p);
	atomic_store(&o->step, 4);
	o->r[4] = pm_pin_user_pages(o->mm, BASE + 4 * PG, 1, 0, &p); /* missing: fault, then follow */
	if (o->r[4] == 1)
		pm_unpin_user_page(p);
	atomic_store(&o->done, true);
	return NULL;
}

static void test_no_shared_lock(void)
{
	struct pm_config cfg = { .mem_bytes = 32 << 20, .flags = PM_MACHINE_RANGE_MM };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct other o = { 0 };
	struct pm_spinlock *ptl;
	pm_entry_t *pmdp;
	pthread_t th;
	size_t free0;
	int waited = 0;

	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
	o.mm = pm_mm_create(m);
	ASSERT_TRUE(o.mm != NULL);
	ASSERT_TRUE(pmt_map_fixed(o.mm, BASE, NP * PG, RW) == (long)BASE);
	ASSERT_TRUE(pmt_poke(o.mm, BASE, 1) == 1);
	ASSERT_TRUE(pmt_poke(o.mm, BASE + PG, 2) == 1);
	pm_rcu_read_lock();
	pmdp = pm__pmd_lookup(o.mm, BASE);
	ASSERT_TRUE(pmdp && pmd_table(pmdp_get(pmdp)));
	ptl = &table_page(m, entry_table(m, pmdp_get(pmdp).val))->ptl;
	pm_rcu_read_unlock();

	pm_spin_lock(ptl);
	pthread_create(&th, NULL, other_main, &o);
	/* Not a timing test: a wait for a lock we hold would never end; give up after 60 s. */
	while (!atomic_load(&o.done) && waited++ < 60000)
		usleep(1000);
	ok(atomic_load(&o.done), "faults and pins in a PTE table finish while its PTL is held (step %d)",
	   atomic_load(&o.step));
	pm_spin_unlock(ptl);
	pthread_join(th, NULL);
	ok(o.r[0] == 0 && o.r[1] == 0 && o.r[2] == 1 && o.r[3] == 1 && o.r[4] == 1,
	   "their results: %ld %ld %ld %ld %ld", o.r[0], o.r[1], o.r[2], o.r[3], o.r[4]);
	ok(pmt_peek(o.mm, BASE + PG) == 2 && pmt_peek(o.mm, BASE + 2 * PG) == 0,
	   "the data is as written");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(o.mm);
	pmt_end(m, free0, &pmt_end_after_run, "no shared lock");
}

int main(int argc, char **argv)
{
	plan_no_plan();
	test_same_results();
	test_no_shared_lock();
	return done_testing();
}
