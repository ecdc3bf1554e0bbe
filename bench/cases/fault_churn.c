// SPDX-License-Identifier: MIT
/*
 * fault_churn.c - faults next to an mmap/munmap writer: the 2008 seed's DB2-style mix, for
 * faults, and Linux 6.4's per-VMA locks.
 *
 * Every task runs page_fault1's loop (map 128 MiB, write one byte in every page, unmap; +1 per
 * page) while, per address space, a helper thread maps and unmaps small read-only ranges far
 * away from every task's region, never next to one and never mergeable with one: it changes no
 * VMA a task faults in. Before (PM_KNOB_NO_PER_VMA_LOCK) every fault takes mmap_lock for read
 * and queues behind the writer; after, a fault takes only its own VMA's lock and the writer
 * does not stop it. The summary gives the share of faults that completed under a VMA lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "../bench.h"

struct fault_churn_run {
	unsigned long long churn_pairs;
};

static int fault_churn_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	run->priv = calloc(1, sizeof(struct fault_churn_run));
	if (!run->priv)
		return -ENOMEM;
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (mem + mem / 64));
}

static int fault_churn_task_init(struct bench_task *t)
{
	t->priv = NULL;
	if (!bench_task_owns_mm(t))
		return 0;
	t->priv = bench_churn_start_apart(t->run, t->mm);
	return t->priv ? 0 : -errno;
}

static int fault_churn_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);

	return bench_pm_fault_unmap(t, bench_pm_map_anon(t->mm, mem), mem);
}

static void fault_churn_task_exit(struct bench_task *t)
{
	struct fault_churn_run *r = t->run->priv;

	if (t->priv)
		__atomic_add_fetch(&r->churn_pairs, bench_churn_stop(t->priv), __ATOMIC_RELAXED);
}

static void fault_churn_summary(struct bench_run *run)
{
	struct fault_churn_run *r = run->priv;

	bench_pm_fault_summary(run);
	bench_note(run, "fault_churn: churn: %llu mmap+munmap pairs", r->churn_pairs);
	bench_metric(run, "churn_pairs", "%llu", r->churn_pairs);
}

static void fault_churn_cleanup(struct bench_run *run)
{
	free(run->priv);
}

const struct bench_case bench_case_fault_churn = {
	.name = "fault_churn",
	.description = "Anonymous page faults beside an mmap/munmap writer in the same mm",
	.seed = "Linux 6.4 per-VMA locks (faults without mmap_lock)",
	.before_knobs = PM_KNOB_NO_PER_VMA_LOCK,
	.prepare = fault_churn_prepare,
	.task_init = fault_churn_task_init,
	.loop = fault_churn_loop,
	.task_exit = fault_churn_task_exit,
	.phase = bench_pm_phase,
	.summary = fault_churn_summary,
	.cleanup = fault_churn_cleanup,
};
