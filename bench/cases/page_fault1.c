// SPDX-License-Identifier: MIT
/*
 * page_fault1.c - will-it-scale's page_fault1 on pinmm: map 128 MiB of anonymous memory,
 * write one byte in every page (+1 per page), unmap. No THP: the mapping is not advised, and
 * pinmm's THP policy is Linux's "madvise" mode.
 */
#include "../bench.h"

static int page_fault1_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (mem + mem / 64));
}

static int page_fault1_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);

	return bench_pm_fault_unmap(t, bench_pm_map_anon(t->mm, mem), mem);
}

const struct bench_case bench_case_page_fault1 = {
	.name = "page_fault1",
	.description = "Anonymous memory page fault",
	.seed = "will-it-scale page_fault1",
	.before_knobs = PM_KNOB_NO_PER_VMA_LOCK,
	.summary = bench_pm_fault_summary,
	.prepare = page_fault1_prepare,
	.loop = page_fault1_loop,
	.phase = bench_pm_phase,
};
