// SPDX-License-Identifier: MIT
/*
 * host_page_fault3.c - will-it-scale's page_fault3 on the running kernel: every task has its
 * own 128 MiB file (see bench_host_tmpfile()), maps it MAP_SHARED, writes one byte per page
 * (a shared write fault, +1 each), and unmaps.
 */
#include <sys/mman.h>

#include "../bench.h"

static int host_page_fault3_loop(struct bench_task *t)
{
	return bench_host_file_fault_loop(t, MAP_SHARED);
}

const struct bench_case bench_case_host_page_fault3 = {
	.name = "host_page_fault3",
	.description = "Separate file shared mapping page fault",
	.seed = "will-it-scale page_fault3, on the host kernel",
	.flags = BENCH_F_HOST,
	.task_init = bench_host_file_task_init,
	.loop = host_page_fault3_loop,
	.task_exit = bench_host_file_task_exit,
};
