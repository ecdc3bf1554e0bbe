// SPDX-License-Identifier: MIT
/*
 * host_gup_fast.c - the kernel's GUP-fast path under an mmap_lock writer: each iteration is
 * one shared (not FUTEX_PRIVATE) FUTEX_WAKE on a word of the task's own anonymous page with no
 * waiter, which makes get_futex_key() take the page with get_user_pages_fast() once per call
 * (will-it-scale's futex1 loop). Variant "churn" (the default) adds a thread per process that
 * keeps mmapping and munmapping an unrelated range, as gup_fast does on pinmm; "nochurn" has
 * none.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../bench.h"

struct host_gup_task {
	uint32_t *word;
	struct bench_churn *churn;
};

static int host_gup_fast_prepare(struct bench_run *run)
{
	/* Shared with forked tasks: the pairs every churn thread did. */
	run->priv = bench_shared_alloc(sizeof(unsigned long long));
	return run->priv ? 0 : -errno;
}

static int host_gup_fast_task_init(struct bench_task *t)
{
	struct host_gup_task *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->word = mmap(NULL, PM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (g->word == MAP_FAILED) {
		free(g);
		return -errno;
	}
	*g->word = 0;
	if (bench_task_owns_mm(t) && !strcmp(t->run->variant, "churn")) {
		g->churn = bench_churn_start(t->run, NULL);
		if (!g->churn) {
			int err = -errno;

			munmap(g->word, PM_PAGE_SIZE);
			free(g);
			return err;
		}
	}
	t->priv = g;
	return 0;
}

static int host_gup_fast_loop(struct bench_task *t)
{
	struct host_gup_task *g = t->priv;

	if (syscall(SYS_futex, g->word, FUTEX_WAKE, 1, NULL, NULL, 0) < 0)
		return -errno;
	bench_count(t, 1);
	return 0;
}

static void host_gup_fast_task_exit(struct bench_task *t)
{
	struct host_gup_task *g = t->priv;

	__atomic_add_fetch((unsigned long long *)t->run->priv, bench_churn_stop(g->churn),
			   __ATOMIC_RELAXED);
	munmap(g->word, PM_PAGE_SIZE);
	free(g);
}

static void host_gup_fast_summary(struct bench_run *run)
{
	unsigned long long pairs = *(unsigned long long *)run->priv;

	bench_note(run, "host_gup_fast: churn: %llu mmap+munmap pairs", pairs);
	bench_metric(run, "churn_pairs", "%llu", pairs);
}

static void host_gup_fast_cleanup(struct bench_run *run)
{
	bench_shared_free(run->priv, sizeof(unsigned long long));
}

const struct bench_case bench_case_host_gup_fast = {
	.name = "host_gup_fast",
	.description = "futex(FUTEX_WAKE) shared, one get_user_pages_fast per call",
	.variants = "churn|nochurn",
	.seed = "2008 fast_gup, on the host kernel",
	.flags = BENCH_F_HOST,
	.prepare = host_gup_fast_prepare,
	.task_init = host_gup_fast_task_init,
	.loop = host_gup_fast_loop,
	.task_exit = host_gup_fast_task_exit,
	.summary = host_gup_fast_summary,
	.cleanup = host_gup_fast_cleanup,
};
