// SPDX-License-Identifier: MIT
/*
 * host_page_fault2.c - will-it-scale's page_fault2 on the running kernel: every task has its
 * own 128 MiB file (see bench_host_tmpfile()), maps it MAP_PRIVATE, writes one byte per page
 * (a COW copy of the page-cache page, +1 each), and unmaps.
 */
#include <sys/mman.h>

#include "../bench.h"

static int host_page_fault2_loop(struct bench_task *t)
{
	return bench_host_file_fault_loop(t, MAP_PRIVATE);
}

const struct bench_case bench_case_host_page_fault2 = {
	.name = "host_page_fault2",
	.description = "Separate file private mapping page fault",
	.seed = "will-it-scale page_fault2, on the host kernel",
	.flags = BENCH_F_HOST,
	.task_init = bench_host_file_task_init,
	.loop = host_page_fault2_loop,
	.task_exit = bench_host_file_task_exit,
};
