// SPDX-License-Identifier: MIT
/*
 * shmem_fault.c - the 2010 "shmem: reduce one time of locking in pagefault" experiment.
 *
 * The tasks fault a shared shmem object of 256 MiB (--size): variant "disjoint" (the seed's
 * test) gives each task its own slice; variant "whole" (the reviewer's question) makes every
 * task touch every page, all starting from the first. One iteration faults the whole area
 * once, on a new object each time, in lock step:
 *
 *	task 0: create the object (threads: map it in the shared mm)	-> barrier
 *	processes mode: every task maps it in its own mm		-> barrier
 *	clock starts; every task touches its pages (+1 per page)	-> barrier, clock stops
 *	processes mode: every task unmaps it				-> barrier
 *	task 0: (threads: unmap it,) put the object			-> next iteration
 *
 * Threads mode has two barriers an iteration, as host_shmem_fault has: the processes-mode
 * ones would separate nothing, and each costs a wake-up (tens of microseconds on a VM).
 *
 * Before: PM_KNOB_SHMEM_LOCK_TWICE. The summary gives the seed's figure, the seconds to fault
 * the whole area (median over the window), beside the pages touched per second.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define SHMEM_AREA (256 * BENCH_MIB)
#define SHMEM_SAMPLES 4096

struct shmem_run {
	size_t len;
	bool whole;
	struct bench_barrier barrier;
	struct pm_shmem *f;		/* this iteration's object (task 0 writes) */
	unsigned long addr;		/* threads mode: its mapping in the shared mm */
	int err;			/* task 0's creation error for this iteration */
	uint64_t start_ns;
	struct bench_samples *area;
};

static int shmem_prepare(struct bench_run *run)
{
	struct shmem_run *r = calloc(1, sizeof(*r));
	size_t tables;

	if (!r)
		return -ENOMEM;
	run->priv = r;
	r->len = (bench_size(run, SHMEM_AREA) + PM_PAGE_SIZE - 1) & ~(size_t)(PM_PAGE_SIZE - 1);
	r->whole = !strcmp(run->variant, "whole");
	bench_barrier_init(&r->barrier, run->nr_tasks);
	r->area = bench_samples_create(1, SHMEM_SAMPLES);
	if (!r->area)
		return -ENOMEM;
	tables = (run->mode == BENCH_THREADS ? 1 : run->nr_tasks) * (r->len / 256 + 2 * BENCH_MIB);
	return bench_pm_setup(run, 64 * BENCH_MIB + 2 * r->len + tables);
}

static long map_object(struct pm_mm *mm, struct shmem_run *r)
{
	return pm_mmap(mm, 0, r->len, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED, r->f, 0);
}

/* Task 0, between iterations: a new object, mapped in the shared mm in threads mode. */
static void create_object(struct bench_task *t, struct shmem_run *r)
{
	long addr;

	r->err = 0;
	r->f = pm_shmem_create(pm_mm_machine(t->mm), r->len, 0);
	if (!r->f) {
		r->err = -errno;
		return;
	}
	if (t->run->mode == BENCH_THREADS) {
		addr = map_object(t->mm, r);
		if (addr < 0)
			r->err = (int)addr;
		else
			r->addr = (unsigned long)addr;
	}
}

static void destroy_object(struct bench_task *t, struct shmem_run *r)
{
	if (t->run->mode == BENCH_THREADS && r->addr)
		pm_munmap(t->mm, r->addr, r->len);
	r->addr = 0;
	if (r->f)
		pm_shmem_put(r->f);
	r->f = NULL;
}

static int touch_pages(struct bench_task *t, struct shmem_run *r, unsigned long addr)
{
	unsigned long npages = r->len / PM_PAGE_SIZE;
	unsigned long first = 0, last = npages;

	if (!r->whole) {
		first = npages * t->nr / t->run->nr_tasks;
		last = npages * (t->nr + 1) / t->run->nr_tasks;
	}
	for (unsigned long i = first; i < last && !bench_stopping(t->run); i++) {
		int err = bench_pm_touch(t->mm, addr + i * PM_PAGE_SIZE);

		if (err)
			return err;
		bench_count(t, 1);
	}
	return 0;
}

static int shmem_loop(struct bench_task *t)
{
	struct shmem_run *r = t->run->priv;
	unsigned long addr;
	long mapped = 0;
	int err;

	if (t->nr == 0)
		create_object(t, r);
	if (!bench_barrier_wait(t->run, &r->barrier))
		return 0;
	if (r->err)
		return r->err;
	addr = r->addr;
	if (t->run->mode == BENCH_PROCESSES) {
		mapped = map_object(t->mm, r);
		if (mapped < 0)
			return (int)mapped;
		addr = (unsigned long)mapped;
		if (!bench_barrier_wait(t->run, &r->barrier))
			return 0;	/* mappings go with the mms */
	}
	if (t->nr == 0)
		r->start_ns = bench_now_ns();
	err = touch_pages(t, r, addr);
	if (err)
		return err;
	if (!bench_barrier_wait(t->run, &r->barrier))
		return 0;
	if (t->nr == 0 && bench_phase(t->run) == BENCH_PHASE_MEASURE)
		bench_samples_add(r->area, 0, bench_now_ns() - r->start_ns);
	if (mapped) {
		pm_munmap(t->mm, addr, r->len);
		if (!bench_barrier_wait(t->run, &r->barrier))
			return 0;
	}
	if (t->nr == 0)
		destroy_object(t, r);
	return 0;
}

static void shmem_summary(struct bench_run *run)
{
	struct shmem_run *r = run->priv;
	unsigned long faults = bench_pm_window(run, faults);
	unsigned long races = bench_pm_window(run, shmem_alloc_races);
	unsigned long locks = bench_pm_window(run, shmem_lock_acquisitions);
	unsigned long allocs = bench_pm_window(run, shmem_allocs);
	unsigned long touches = r->len / PM_PAGE_SIZE * (r->whole ? run->nr_tasks : 1);

	bench_area_summary(run, r->area, touches);
	bench_note(run, "shmem_fault: in the window %lu faults, %lu pages allocated, %lu "
		   "dropped after a race, %.2f info-lock acquisitions per allocation",
		   faults, allocs, races, allocs ? (double)locks / (double)allocs : 0.0);
	bench_metric(run, "faults", "%lu", faults);
	bench_metric(run, "shmem_alloc_races", "%lu", races);
	bench_metric(run, "shmem_lock_acquisitions", "%lu", locks);
	if (allocs)
		bench_metric(run, "shmem_locks_per_alloc", "%.2f", (double)locks / (double)allocs);
}

/* After the tasks: the last object if an iteration was cut short (mms unmap the rest). */
static void shmem_cleanup(struct bench_run *run)
{
	struct shmem_run *r = run->priv;

	if (!r)
		return;
	if (r->f)
		pm_shmem_put(r->f);
	bench_samples_destroy(r->area);
	free(r);
}

const struct bench_case bench_case_shmem_fault = {
	.name = "shmem_fault",
	.description = "shmem page fault of a shared object",
	.variants = "disjoint|whole",
	.seed = "2010 shmem: reduce one time of locking in pagefault",
	.before_knobs = PM_KNOB_SHMEM_LOCK_TWICE,
	.prepare = shmem_prepare,
	.loop = shmem_loop,
	.phase = bench_pm_phase,
	.summary = shmem_summary,
	.cleanup = shmem_cleanup,
};
