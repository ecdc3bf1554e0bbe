// SPDX-License-Identifier: MIT
/*
 * page_fault2.c - will-it-scale's page_fault2 on pinmm: every task has its own 128 MiB file
 * (a shmem object, pinmm's only file), maps it MAP_PRIVATE, writes every page (a COW copy of
 * the page-cache page, +1 per page) and unmaps. The file keeps its page cache between
 * iterations, as a tmpfile does.
 */
#include "../bench.h"

static int page_fault2_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	/* Page cache and private copies: two pages per page of every task's file. */
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (2 * mem + mem / 64));
}

static int page_fault2_loop(struct bench_task *t)
{
	return bench_pm_file_fault_loop(t, PM_MAP_PRIVATE);
}

const struct bench_case bench_case_page_fault2 = {
	.name = "page_fault2",
	.description = "Separate file private mapping page fault",
	.seed = "will-it-scale page_fault2",
	.before_knobs = PM_KNOB_NO_PER_VMA_LOCK,
	.summary = bench_pm_fault_summary,
	.prepare = page_fault2_prepare,
	.task_init = bench_pm_file_task_init,
	.loop = page_fault2_loop,
	.task_exit = bench_pm_file_task_exit,
	.phase = bench_pm_phase,
};
