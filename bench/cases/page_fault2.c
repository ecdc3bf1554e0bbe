// SPDX-License-Identifier: MIT
/*
 * page_fault2.c - will-it-scale's page_fault2 on pinmm: every task has its own 128 MiB file
 * (a shmem object, pinmm's only file), maps it MAP_PRIVATE, writes every page (a COW copy of
 * the page-cache page, +1 per page) and unmaps. The file keeps its page cache between
 * iterations, as a tmpfile does.
 */
#include <errno.h>

#include "../bench.h"

static int page_fault2_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	/* Page cache and private copies: two pages per page of every task's file. */
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (2 * mem + mem / 64));
}

static int page_fault2_task_init(struct bench_task *t)
{
	t->priv = pm_shmem_create(pm_mm_machine(t->mm), bench_size(t->run, BENCH_MEM), 0);
	return t->priv ? 0 : -errno;
}

static int page_fault2_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	long addr = pm_mmap(t->mm, 0, mem, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_PRIVATE,
			    t->priv, 0);

	if (addr < 0)
		return (int)addr;
	for (size_t off = 0; off < mem && !bench_stopping(t->run); off += PM_PAGE_SIZE) {
		int err = bench_pm_touch(t->mm, (unsigned long)addr + off);

		if (err) {
			pm_munmap(t->mm, (unsigned long)addr, mem);
			return err;
		}
		bench_count(t, 1);
	}
	return pm_munmap(t->mm, (unsigned long)addr, mem);
}

static void page_fault2_task_exit(struct bench_task *t)
{
	pm_shmem_put(t->priv);
}

const struct bench_case bench_case_page_fault2 = {
	.name = "page_fault2",
	.description = "Separate file private mapping page fault",
	.seed = "will-it-scale page_fault2",
	.prepare = page_fault2_prepare,
	.task_init = page_fault2_task_init,
	.loop = page_fault2_loop,
	.task_exit = page_fault2_task_exit,
	.phase = bench_pm_phase,
};
