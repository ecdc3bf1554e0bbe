// SPDX-License-Identifier: MIT
/*
 * host_mmap1.c - will-it-scale's mmap1 on the running kernel: mmap and munmap 128 MiB of
 * anonymous memory, untouched; +1 per pair.
 */
#include <errno.h>
#include <sys/mman.h>

#include "../bench.h"

static int host_mmap1_loop(struct bench_task *t)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	void *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	if (munmap(p, mem))
		return -errno;
	bench_count(t, 1);
	return 0;
}

const struct bench_case bench_case_host_mmap1 = {
	.name = "host_mmap1",
	.description = "Anonymous memory mmap/munmap of 128MB",
	.seed = "will-it-scale mmap1, on the host kernel",
	.flags = BENCH_F_HOST,
	.loop = host_mmap1_loop,
};
