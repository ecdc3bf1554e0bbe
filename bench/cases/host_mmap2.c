// SPDX-License-Identifier: MIT
/*
 * host_mmap2.c - will-it-scale's mmap2 on the running kernel: mmap and munmap the task's own
 * 128 MiB file (see bench_host_tmpfile()) MAP_PRIVATE, untouched; +1 per pair.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../bench.h"

static int host_mmap2_task_init(struct bench_task *t)
{
	int fd = bench_host_tmpfile(bench_size(t->run, BENCH_MEM));

	if (fd < 0)
		return fd;
	t->priv = (void *)(intptr_t)fd;
	return 0;
}

static int host_mmap2_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	void *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_PRIVATE, (int)(intptr_t)t->priv, 0);

	if (p == MAP_FAILED)
		return -errno;
	if (munmap(p, mem))
		return -errno;
	bench_count(t, 1);
	return 0;
}

static void host_mmap2_task_exit(struct bench_task *t)
{
	close((int)(intptr_t)t->priv);
}

const struct bench_case bench_case_host_mmap2 = {
	.name = "host_mmap2",
	.description = "Separate file mmap/munmap of 128MB",
	.seed = "will-it-scale mmap2, on the host kernel",
	.flags = BENCH_F_HOST,
	.task_init = host_mmap2_task_init,
	.loop = host_mmap2_loop,
	.task_exit = host_mmap2_task_exit,
};
