// SPDX-License-Identifier: MIT
/*
 * host_page_fault1.c - will-it-scale's page_fault1 on the running kernel: mmap 128 MiB of
 * anonymous memory, write one byte per page (+1 each), munmap.
 */
#include <errno.h>
#include <sys/mman.h>

#include "../bench.h"

static int host_page_fault1_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	char *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	for (size_t off = 0; off < mem && !bench_stopping(t->run); off += PM_PAGE_SIZE) {
		p[off] = 0;
		bench_count(t, 1);
	}
	return munmap(p, mem) ? -errno : 0;
}

const struct bench_case bench_case_host_page_fault1 = {
	.name = "host_page_fault1",
	.description = "Anonymous memory page fault",
	.seed = "will-it-scale page_fault1, on the host kernel",
	.flags = BENCH_F_HOST,
	.loop = host_page_fault1_loop,
};
