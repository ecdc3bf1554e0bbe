// SPDX-License-Identifier: MIT
/*
 * pin_fast.c - the 2021 "mm: gup: allow FOLL_PIN to scale in SMP" experiment.
 *
 * As the seed's will-it-scale test: every task has a 4 MiB buffer aligned to 2 MiB, advised
 * PM_MADV_HUGEPAGE (so two THPs) and touched; one iteration is one gup_test
 * PIN_FAST_BENCHMARK call with one page per call, i.e. 1024 pm_pin_user_pages_fast() calls
 * and the unpins. In threads mode every task pins through the same mm, so before the fix
 * (PM_KNOB_HAS_PINNED_ALWAYS_WRITE) every call stores to the same has-pinned flag.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define PIN_FAST_PAGES 1024
#define PIN_FAST_LEN ((size_t)PIN_FAST_PAGES * PM_PAGE_SIZE)

struct pin_fast_task {
	unsigned long addr;
	struct pm_gup_test gup;	/* the template; the call may update its copy */
};

static int pin_fast_prepare(struct bench_run *run)
{
	return bench_pm_setup(run, 64 * BENCH_MIB + (size_t)run->nr_tasks * 2 * PIN_FAST_LEN);
}

static int pin_fast_task_init(struct bench_task *t)
{
	struct pin_fast_task *p = calloc(1, sizeof(*p));
	long addr;
	int err;

	if (!p)
		return -ENOMEM;
	addr = bench_pm_map_aligned(t->mm, PIN_FAST_LEN);
	if (addr < 0) {
		free(p);
		return (int)addr;
	}
	p->addr = (unsigned long)addr;
	err = pm_madvise(t->mm, p->addr, PIN_FAST_LEN, PM_MADV_HUGEPAGE);
	if (!err)
		err = bench_pm_touch_range(t->mm, p->addr, PIN_FAST_LEN);
	if (err) {
		pm_munmap(t->mm, p->addr, PIN_FAST_LEN);
		free(p);
		return err;
	}
	p->gup.addr = p->addr;
	p->gup.size = PIN_FAST_LEN;
	p->gup.nr_pages_per_call = 1;
	t->priv = p;
	return 0;
}

static int pin_fast_loop(struct bench_task *t)
{
	struct pin_fast_task *p = t->priv;
	struct pm_gup_test gup = p->gup;
	int err = pm_gup_test(t->mm, PM_PIN_FAST_BENCHMARK, &gup);

	if (err)
		return err;
	bench_count(t, 1);
	return 0;
}

static void pin_fast_task_exit(struct bench_task *t)
{
	struct pin_fast_task *p = t->priv;

	pm_munmap(t->mm, p->addr, PIN_FAST_LEN);
	free(p);
}

static void pin_fast_summary(struct bench_run *run)
{
	unsigned long pins = bench_pm_window(run, nr_foll_pin_acquired);
	unsigned long writes = bench_pm_window(run, has_pinned_writes);

	bench_note(run, "pin_fast: %lu pins, %lu has-pinned stores in the window; "
		   "%lu THP faults in the run (2 per task expected)",
		   pins, writes, run->pm.end.thp_faults);
	bench_metric(run, "pins", "%lu", pins);
	bench_metric(run, "has_pinned_writes", "%lu", writes);
	bench_metric(run, "thp_faults", "%lu", run->pm.end.thp_faults);
}

const struct bench_case bench_case_pin_fast = {
	.name = "pin_fast",
	.description = "pin_user_pages_fast SMP scalability benchmark",
	.seed = "2021 mm: gup: allow FOLL_PIN to scale in SMP (has_pinned written once)",
	.before_knobs = PM_KNOB_HAS_PINNED_ALWAYS_WRITE,
	.prepare = pin_fast_prepare,
	.task_init = pin_fast_task_init,
	.loop = pin_fast_loop,
	.task_exit = pin_fast_task_exit,
	.phase = bench_pm_phase,
	.summary = pin_fast_summary,
};
