// SPDX-License-Identifier: MIT
/*
 * gup_fast.c - the 2008 fast_gup experiment, in the shape of its OLTP/direct-I/O workload.
 *
 * Every task repeatedly pins 64 pages of its own buffer for write with
 * pm_pin_user_pages_fast() and releases them dirty, as a direct-I/O read does (64 pages is
 * the batch direct I/O used); one iteration is one such 64-page I/O. Variant "churn" (the
 * default) adds, per address space, a thread that keeps mmapping and munmapping an unrelated
 * range: the mmap_lock writer the readers contend with. Before (PM_KNOB_NO_GUP_FAST) the
 * fast call takes mmap_lock and walks the slow way.
 *
 * The summary gives the machine's gup_fast_fallbacks over the window: the "fast_gup_slow"
 * counter of the seed, zero when every call stayed lockless.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define GUP_FAST_PAGES 64
#define GUP_FAST_LEN ((size_t)GUP_FAST_PAGES * PM_PAGE_SIZE)

struct gup_fast_task {
	unsigned long addr;
	struct bench_churn *churn;
	struct pm_page *pages[GUP_FAST_PAGES];
};

struct gup_fast_run {
	unsigned long long churn_pairs;
};

static int gup_fast_prepare(struct bench_run *run)
{
	run->priv = calloc(1, sizeof(struct gup_fast_run));
	if (!run->priv)
		return -ENOMEM;
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * 2 * GUP_FAST_LEN);
}

static int gup_fast_task_init(struct bench_task *t)
{
	struct gup_fast_task *g = calloc(1, sizeof(*g));
	long addr;
	int err;

	if (!g)
		return -ENOMEM;
	addr = bench_pm_map_anon(t->mm, GUP_FAST_LEN);
	err = addr < 0 ? (int)addr : bench_pm_touch_range(t->mm, (unsigned long)addr, GUP_FAST_LEN);
	if (!err && bench_task_owns_mm(t) && !strcmp(t->run->variant, "churn")) {
		g->churn = bench_churn_start(t->run, t->mm);
		if (!g->churn)
			err = -errno;
	}
	if (err) {
		if (addr >= 0)
			pm_munmap(t->mm, (unsigned long)addr, GUP_FAST_LEN);
		free(g);
		return err;
	}
	g->addr = (unsigned long)addr;
	t->priv = g;
	return 0;
}

static int gup_fast_loop(struct bench_task *t)
{
	struct gup_fast_task *g = t->priv;
	long n = pm_pin_user_pages_fast(t->mm, g->addr, GUP_FAST_PAGES, PM_FOLL_WRITE, g->pages);

	if (n < 0)
		return (int)n;
	pm_unpin_user_pages_dirty_lock(g->pages, (unsigned long)n, true);
	if (n != GUP_FAST_PAGES)
		return -EIO; /* the buffer is mapped and touched: a short pin is a bug */
	bench_count(t, 1);
	return 0;
}

static void gup_fast_task_exit(struct bench_task *t)
{
	struct gup_fast_task *g = t->priv;
	struct gup_fast_run *r = t->run->priv;

	__atomic_add_fetch(&r->churn_pairs, bench_churn_stop(g->churn), __ATOMIC_RELAXED);
	pm_munmap(t->mm, g->addr, GUP_FAST_LEN);
	free(g);
}

static void gup_fast_summary(struct bench_run *run)
{
	struct gup_fast_run *r = run->priv;
	unsigned long fallbacks = bench_pm_window(run, gup_fast_fallbacks);
	unsigned long fast = bench_pm_window(run, gup_fast_pages);
	unsigned long slow = bench_pm_window(run, gup_slow_pages);

	bench_note(run, "gup_fast: in the window %lu pages by the lockless walk, %lu under "
		   "mmap_lock, %lu fallbacks (fast_gup_slow); churn: %llu mmap+munmap pairs",
		   fast, slow, fallbacks, r->churn_pairs);
	bench_metric(run, "gup_fast_fallbacks", "%lu", fallbacks);
	bench_metric(run, "gup_fast_pages", "%lu", fast);
	bench_metric(run, "gup_slow_pages", "%lu", slow);
	bench_metric(run, "churn_pairs", "%llu", r->churn_pairs);
}

static void gup_fast_cleanup(struct bench_run *run)
{
	free(run->priv);
}

const struct bench_case bench_case_gup_fast = {
	.name = "gup_fast",
	.description = "pin_user_pages_fast of 64 pages per I/O with an mmap/munmap writer",
	.variants = "churn|nochurn",
	.seed = "2008 fast_gup (lockless get_user_pages for direct I/O)",
	.before_knobs = PM_KNOB_NO_GUP_FAST,
	.prepare = gup_fast_prepare,
	.task_init = gup_fast_task_init,
	.loop = gup_fast_loop,
	.task_exit = gup_fast_task_exit,
	.phase = bench_pm_phase,
	.summary = gup_fast_summary,
	.cleanup = gup_fast_cleanup,
};
