// SPDX-License-Identifier: MIT
/*
 * mmap1.c - will-it-scale's mmap1 on pinmm: map and unmap 128 MiB of anonymous memory,
 * untouched; +1 per pair.
 */
#include "../bench.h"

static int mmap1_prepare(struct bench_run *run)
{
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * BENCH_MIB);
}

static int mmap1_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	long addr = bench_pm_map_anon(t->mm, mem);
	int err;

	if (addr < 0)
		return (int)addr;
	err = pm_munmap(t->mm, (unsigned long)addr, mem);
	if (!err)
		bench_count(t, 1);
	return err;
}

const struct bench_case bench_case_mmap1 = {
	.name = "mmap1",
	.description = "Anonymous memory mmap/munmap of 128MB",
	.seed = "will-it-scale mmap1",
	.prepare = mmap1_prepare,
	.loop = mmap1_loop,
	.phase = bench_pm_phase,
};
