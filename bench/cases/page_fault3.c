// SPDX-License-Identifier: MIT
/*
 * page_fault3.c - will-it-scale's page_fault3 on pinmm: as page_fault2 with MAP_SHARED, so
 * every write is a shared write fault on the task's own file's page cache.
 */
#include <errno.h>

#include "../bench.h"

static int page_fault3_prepare(struct bench_run *run)
{
	size_t mem = bench_size(run, BENCH_MEM);

	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * (mem + mem / 64));
}

static int page_fault3_task_init(struct bench_task *t)
{
	t->priv = pm_shmem_create(pm_mm_machine(t->mm), bench_size(t->run, BENCH_MEM), 0);
	return t->priv ? 0 : -errno;
}

static int page_fault3_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	long addr = pm_mmap(t->mm, 0, mem, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED,
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

static void page_fault3_task_exit(struct bench_task *t)
{
	pm_shmem_put(t->priv);
}

const struct bench_case bench_case_page_fault3 = {
	.name = "page_fault3",
	.description = "Separate file shared mapping page fault",
	.seed = "will-it-scale page_fault3",
	.prepare = page_fault3_prepare,
	.task_init = page_fault3_task_init,
	.loop = page_fault3_loop,
	.task_exit = page_fault3_task_exit,
	.phase = bench_pm_phase,
};
