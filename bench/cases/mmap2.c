// SPDX-License-Identifier: MIT
/*
 * mmap2.c - will-it-scale's mmap2 on pinmm: map and unmap the task's own 128 MiB file (a
 * shmem object) MAP_PRIVATE, untouched; +1 per pair.
 */
#include <errno.h>

#include "../bench.h"

static int mmap2_prepare(struct bench_run *run)
{
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * BENCH_MIB);
}

static int mmap2_task_init(struct bench_task *t)
{
	t->priv = pm_shmem_create(pm_mm_machine(t->mm), bench_size(t->run, BENCH_MEM), 0);
	return t->priv ? 0 : -errno;
}

static int mmap2_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	long addr = pm_mmap(t->mm, 0, mem, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_PRIVATE,
			    t->priv, 0);
	int err;

	if (addr < 0)
		return (int)addr;
	err = pm_munmap(t->mm, (unsigned long)addr, mem);
	if (!err)
		bench_count(t, 1);
	return err;
}

static void mmap2_task_exit(struct bench_task *t)
{
	pm_shmem_put(t->priv);
}

const struct bench_case bench_case_mmap2 = {
	.name = "mmap2",
	.description = "Separate file mmap/munmap of 128MB",
	.seed = "will-it-scale mmap2",
	.prepare = mmap2_prepare,
	.task_init = mmap2_task_init,
	.loop = mmap2_loop,
	.task_exit = mmap2_task_exit,
	.phase = bench_pm_phase,
};
