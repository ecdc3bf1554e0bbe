// SPDX-License-Identifier: MIT
/*
 * page_fault3.c - will-it-scale's page_fault3 on pinmm: as page_fault2 with MAP_SHARED, so
 * every write is a shared write fault on the task's own file's page cache.
 */
#include "../bench.h"

static int page_fault3_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (mem + mem / 64));
}

static int page_fault3_loop(struct bench_task *t)
{
	return bench_pm_file_fault_loop(t, PM_MAP_SHARED);
}

const struct bench_case bench_case_page_fault3 = {
	.name = "page_fault3",
	.description = "Separate file shared mapping page fault",
	.seed = "will-it-scale page_fault3",
	.before_knobs = PM_KNOB_NO_PER_VMA_LOCK,
	.summary = bench_pm_fault_summary,
	.prepare = page_fault3_prepare,
	.task_init = bench_pm_file_task_init,
	.loop = page_fault3_loop,
	.task_exit = bench_pm_file_task_exit,
	.phase = bench_pm_phase,
};
