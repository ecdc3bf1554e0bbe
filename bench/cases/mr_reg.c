// SPDX-License-Identifier: MIT
/*
 * mr_reg.c - the 2020/2021 batched-unpin experiment (RDMA/umem: batch page unpin in
 * __ib_umem_release): register and deregister a 1 GiB region, as the seed's test program
 * did, and report "N rounds in S sec: X usec / round".
 *
 * One iteration is one round: pm_umem_get() of the whole region (FOLL_LONGTERM | FOLL_WRITE
 * pins and the scatter-gather table) then pm_umem_release(). Variants pick the backing:
 * "thp" (aligned, PM_MADV_HUGEPAGE; the compound-page case the seed measured with hugetlbfs
 * and device-dax), "hugetlb" (PM_MAP_HUGETLB from a machine pool covering every task's
 * region: the seed's own backing) or "4k" (PM_MADV_NOHUGEPAGE). The release follows the knobs:
 *	--knobs before (PM_KNOB_UNPIN_PER_PAGE)	one unpin per page		(before)
 *	variant thp-batch / 4k-batch / hugetlb-batch
 *						rebuilt page array, batched	(the RFC, v1)
 *	--knobs after				one range unpin per SG entry	(v2, final)
 * The register and deregister halves are timed separately; their medians go to the metrics.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define MR_REG_SAMPLES 32768

struct mr_reg_run {
	size_t len;
	bool thp, hugetlb;
	enum pm_unpin_mode mode;
	struct bench_samples *reg, *unreg;
};

static const char *const mode_names[] = {
	[PM_UNPIN_RANGE] = "range release",
	[PM_UNPIN_BATCH] = "batched release",
	[PM_UNPIN_PER_PAGE] = "per-page release",
};

static int mr_reg_prepare(struct bench_run *run)
{
	struct mr_reg_run *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	run->priv = r;
	r->len = (bench_size(run, BENCH_GIB) + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);
	r->thp = !strncmp(run->variant, "thp", 3);
	r->hugetlb = !strncmp(run->variant, "hugetlb", 7);
	if (strstr(run->variant, "batch"))
		r->mode = PM_UNPIN_BATCH;
	else if (run->knobs & PM_KNOB_UNPIN_PER_PAGE)
		r->mode = PM_UNPIN_PER_PAGE;
	else
		r->mode = PM_UNPIN_RANGE;
	r->reg = bench_samples_create(run->nr_tasks, MR_REG_SAMPLES);
	r->unreg = bench_samples_create(run->nr_tasks, MR_REG_SAMPLES);
	if (!r->reg || !r->unreg)
		return -ENOMEM;
	/* The region, its page tables (and THP deposits), and room for the rest; hugetlb: a
	 * pool that covers every task's region, out of the same memory. */
	return bench_pm_setup_hugetlb(run,
				      64 * BENCH_MIB + (size_t)run->nr_tasks * (r->len + r->len / 8),
				      r->hugetlb ? run->nr_tasks * (r->len / PM_PMD_SIZE) : 0);
}

static int mr_reg_task_init(struct bench_task *t)
{
	struct mr_reg_run *r = t->run->priv;
	long addr = r->hugetlb ? pm_mmap(t->mm, 0, r->len, PM_PROT_READ | PM_PROT_WRITE,
					 PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB, NULL, 0) :
				 bench_pm_map_aligned(t->mm, r->len);
	int err = 0;

	if (addr < 0)
		return (int)addr;
	if (!r->hugetlb)
		err = pm_madvise(t->mm, (unsigned long)addr, r->len,
				 r->thp ? PM_MADV_HUGEPAGE : PM_MADV_NOHUGEPAGE);
	if (!err)
		err = bench_pm_touch_range(t->mm, (unsigned long)addr, r->len);
	if (err) {
		pm_munmap(t->mm, (unsigned long)addr, r->len);
		return err;
	}
	t->priv = (void *)addr;
	return 0;
}

static int mr_reg_loop(struct bench_task *t)
{
	struct mr_reg_run *r = t->run->priv;
	uint64_t t0, t1, t2;
	struct pm_umem *umem;

	t0 = bench_now_ns();
	umem = pm_umem_get(t->mm, (unsigned long)t->priv, r->len, PM_UMEM_WRITE);
	if (!umem)
		return -errno;
	t1 = bench_now_ns();
	pm_umem_release(umem, r->mode);
	t2 = bench_now_ns();
	if (bench_phase(t->run) == BENCH_PHASE_MEASURE) {
		bench_samples_add(r->reg, t->nr, t1 - t0);
		bench_samples_add(r->unreg, t->nr, t2 - t1);
	}
	bench_count(t, 1);
	return 0;
}

static void mr_reg_task_exit(struct bench_task *t)
{
	struct mr_reg_run *r = t->run->priv;

	pm_munmap(t->mm, (unsigned long)t->priv, r->len);
}

static void mr_reg_summary(struct bench_run *run)
{
	struct mr_reg_run *r = run->priv;
	unsigned long rounds = bench_samples_count(r->reg);
	unsigned long updates = bench_pm_window(run, unpin_folio_updates);
	char what[96];

	snprintf(what, sizeof(what), "pinmm, %lu MiB %s, %s", (unsigned long)(r->len >> 20),
		 r->hugetlb ? "hugetlb 2 MiB" : r->thp ? "THP" : "4 KiB pages", mode_names[r->mode]);
	bench_rounds_summary(run, what, r->reg, r->unreg);
	if (rounds) {
		bench_note(run, "mr_reg: %.0f atomic folio updates per release; %lu THP faults, "
			   "%lu hugetlb faults in the run", (double)updates / (double)rounds,
			   run->pm.end.thp_faults, run->pm.end.hugetlb_faults);
		bench_metric(run, "unpin_folio_updates_per_round", "%.1f",
			     (double)updates / (double)rounds);
	}
}

static void mr_reg_cleanup(struct bench_run *run)
{
	struct mr_reg_run *r = run->priv;

	if (!r)
		return;
	bench_samples_destroy(r->reg);
	bench_samples_destroy(r->unreg);
	free(r);
}

const struct bench_case bench_case_mr_reg = {
	.name = "mr_reg",
	.description = "umem register and deregister of 1 GiB",
	.variants = "thp|4k|thp-batch|4k-batch|hugetlb|hugetlb-batch",
	.seed = "2020 RDMA/umem batch page unpin in __ib_umem_release (and the range unpin)",
	.before_knobs = PM_KNOB_UNPIN_PER_PAGE,
	.prepare = mr_reg_prepare,
	.task_init = mr_reg_task_init,
	.loop = mr_reg_loop,
	.task_exit = mr_reg_task_exit,
	.phase = bench_pm_phase,
	.summary = mr_reg_summary,
	.cleanup = mr_reg_cleanup,
};
