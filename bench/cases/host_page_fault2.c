// SPDX-License-Identifier: MIT
/*
 * host_page_fault2.c - will-it-scale's page_fault2 on the running kernel: every task has its
 * own 128 MiB file (see bench_host_tmpfile()), maps it MAP_PRIVATE, writes one byte per page
 * (a COW copy of the page-cache page, +1 each), and unmaps.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../bench.h"

static int host_page_fault2_task_init(struct bench_task *t)
{
	int fd = bench_host_tmpfile(bench_size(t->run, BENCH_MEM));

	if (fd < 0)
		return fd;
	t->priv = (void *)(intptr_t)fd;
	return 0;
}

static int host_page_fault2_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	char *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_PRIVATE, (int)(intptr_t)t->priv, 0);

	if (p == MAP_FAILED)
		return -errno;
	for (size_t off = 0; off < mem && !bench_stopping(t->run); off += PM_PAGE_SIZE) {
		p[off] = 0;
		bench_count(t, 1);
	}
	return munmap(p, mem) ? -errno : 0;
}

static void host_page_fault2_task_exit(struct bench_task *t)
{
	close((int)(intptr_t)t->priv);
}

const struct bench_case bench_case_host_page_fault2 = {
	.name = "host_page_fault2",
	.description = "Separate file private mapping page fault",
	.seed = "will-it-scale page_fault2, on the host kernel",
	.flags = BENCH_F_HOST,
	.task_init = host_page_fault2_task_init,
	.loop = host_page_fault2_loop,
	.task_exit = host_page_fault2_task_exit,
};
