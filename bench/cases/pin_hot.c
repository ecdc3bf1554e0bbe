// SPDX-License-Identifier: MIT
/*
 * pin_hot.c - pins of one hot folio (issue 28): every task pins and unpins pages of ONE THP
 * that the run maps, THP-advised and touched, in one address space. Variant "same": every
 * task pins the folio's first page; "spread": task i pins page i of the folio (mod 512).
 * One iteration is one pm_pin_user_pages_fast() of one page and its pm_unpin_user_page().
 *
 * Linux's way (PM_KNOB_FOLIO_SHARED_PINS, "before"), every pin and unpin of a large folio
 * writes its refcount and pincount, so the folio's line moves between CPUs whichever page
 * each task pins: what a direct-I/O or RDMA workload pays for pins of one huge page. The
 * range design without the knob ("after") makes the folio hot once several tasks pin it, and
 * each CPU then counts in its own line (src/mem/folio_hot.c). Threads only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

struct pin_hot_run {
	unsigned long addr;
	bool spread;
};

static int pin_hot_prepare(struct bench_run *run)
{
	struct pin_hot_run *r = calloc(1, sizeof(*r));
	struct pm_mm *mm;
	long addr;
	int err;

	if (!r)
		return -ENOMEM;
	run->priv = r;
	r->spread = !strcmp(run->variant, "spread");
	if (run->mode != BENCH_THREADS)
		return bench_unavailable(run, "pin_hot pins one folio of one address space: threads only");
	err = bench_pm_setup(run, 64 * BENCH_MIB);
	if (err)
		return err;
	mm = run->pm.mms[0];
	addr = bench_pm_map_aligned(mm, PM_PMD_SIZE);
	if (addr < 0)
		return (int)addr;
	r->addr = (unsigned long)addr;
	err = pm_madvise(mm, r->addr, PM_PMD_SIZE, PM_MADV_HUGEPAGE);
	if (!err)
		err = bench_pm_touch(mm, r->addr);
	return err;
}

static int pin_hot_loop(struct bench_task *t)
{
	struct pin_hot_run *r = t->run->priv;
	unsigned long a = r->addr + (r->spread ? (t->nr % 512) * PM_PAGE_SIZE : 0);
	struct pm_page *page;
	long n = pm_pin_user_pages_fast(t->mm, a, 1, PM_FOLL_WRITE, &page);

	if (n != 1)
		return n < 0 ? (int)n : -EFAULT;
	pm_unpin_user_page(page);
	bench_count(t, 1);
	return 0;
}

static void pin_hot_summary(struct bench_run *run)
{
	double s = (double)run->measured_ns / 1e9;

	if (s > 0)
		bench_metric(run, "gup_fast_pages_per_sec", "%.0f",
			     (double)bench_pm_window(run, gup_fast_pages) / s);
}

static void pin_hot_cleanup(struct bench_run *run)
{
	free(run->priv);
	run->priv = NULL;
}

const struct bench_case bench_case_pin_hot = {
	.name = "pin_hot",
	.description = "pin and unpin pages of one shared THP",
	.variants = "same|spread",
	.seed = "issue 28: hot folios",
	.before_knobs = PM_KNOB_FOLIO_SHARED_PINS,
	.prepare = pin_hot_prepare,
	.loop = pin_hot_loop,
	.phase = bench_pm_phase,
	.summary = pin_hot_summary,
	.cleanup = pin_hot_cleanup,
};
