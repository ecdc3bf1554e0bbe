// SPDX-License-Identifier: MIT
/*
 * longterm_frag.c - what long-term pins in the movable zone cost (issue 30; Linux 5.13's
 * check_and_migrate_movable_folios): on a machine whose upper half is a movable zone
 * (pm_config.movable_bytes, Linux's movablecore=), a task fills the movable zone with 4 KiB
 * pages, takes long-term pins (PM_FOLL_LONGTERM, as an RDMA registration does) of D pages
 * scattered in every 2 MiB block of it, frees the rest, and asks compaction (pm_compact) for
 * free 2 MiB blocks. Before (PM_KNOB_LONGTERM_PIN_IN_PLACE) the pins stay where they are and
 * every movable block keeps one; after, each pin first moves its page out of the movable zone,
 * and the zone's blocks come free.
 *
 * One iteration is the whole scenario for every density D in frag_densities[], then every
 * pin is dropped. The metrics: free_block_pct_dN, the free 2 MiB blocks after compaction as a
 * share of the machine's blocks, for each D, and free_block_pct, the one for D = 1 (the
 * report's figure). One task: the scenario is the machine's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define FRAG_MEM (96 * BENCH_MIB)
#define FRAG_MOVABLE (32 * BENCH_MIB)
#define FRAG_BLOCKS (FRAG_MOVABLE / PM_PMD_SIZE)
#define FRAG_PAGES_PER_BLOCK (PM_PMD_SIZE / PM_PAGE_SIZE)

static const unsigned frag_densities[] = { 1, 4, 16, 64 };
#define FRAG_ND (sizeof(frag_densities) / sizeof(frag_densities[0]))

struct frag_run {
	struct pm_machine *m;
	struct pm_mm *mm;
	struct pm_page **pins;
	double pct[FRAG_ND]; /* of the last iteration: the scenario is deterministic */
	bool have;
};

static int frag_prepare(struct bench_run *run)
{
	struct pm_config cfg = { .mem_bytes = FRAG_MEM, .knobs = run->knobs,
				 .flags = run->mm_flags, .movable_bytes = FRAG_MOVABLE };
	struct frag_run *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	run->priv = r;
	if (run->nr_tasks != 1)
		return bench_unavailable(run, "longterm_frag fragments one machine: 1 task");
	r->pins = calloc(FRAG_BLOCKS * frag_densities[FRAG_ND - 1], sizeof(*r->pins));
	r->m = pm_machine_create(&cfg);
	if (!r->pins || !r->m)
		return -ENOMEM;
	r->mm = pm_mm_create(r->m);
	return r->mm ? 0 : -ENOMEM;
}

/* One density: the share of the machine's 2 MiB blocks free after compaction, or -errno. */
static long frag_one(struct frag_run *r, unsigned d, double *pct)
{
	long addr = pm_mmap(r->mm, 0, FRAG_MOVABLE, PM_PROT_READ | PM_PROT_WRITE,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_POPULATE, NULL, 0);
	unsigned long n = 0, step = FRAG_PAGES_PER_BLOCK / d;
	long free_blocks, err = 0;

	if (addr < 0)
		return addr;
	for (unsigned long b = 0; !err && b < FRAG_BLOCKS; b++)
		for (unsigned i = 0; !err && i < d; i++) {
			unsigned long a = (unsigned long)addr + b * PM_PMD_SIZE +
					  (i * step + step / 2) * PM_PAGE_SIZE;

			if (pm_pin_user_pages(r->mm, a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM,
					      &r->pins[n]) == 1)
				n++;
			else
				err = -ENOMEM;
		}
	if (!err)
		err = pm_munmap(r->mm, (unsigned long)addr, FRAG_MOVABLE);
	pm_rcu_barrier();
	free_blocks = err ? err : pm_compact(r->m);
	if (free_blocks >= 0)
		*pct = 100.0 * (double)free_blocks / (double)(FRAG_MEM / PM_PMD_SIZE);
	pm_unpin_user_pages(r->pins, n);
	if (err)
		pm_munmap(r->mm, (unsigned long)addr, FRAG_MOVABLE);
	pm_rcu_barrier();
	return free_blocks < 0 ? free_blocks : 0;
}

static int frag_loop(struct bench_task *t)
{
	struct frag_run *r = t->run->priv;
	double pct[FRAG_ND];

	for (unsigned i = 0; i < FRAG_ND; i++) {
		long err = frag_one(r, frag_densities[i], &pct[i]);

		if (err)
			return (int)err;
		if (bench_stopping(t->run) && i + 1 < FRAG_ND)
			return 0;
	}
	memcpy(r->pct, pct, sizeof(pct));
	r->have = true;
	bench_count(t, 1);
	return 0;
}

static void frag_summary(struct bench_run *run)
{
	struct frag_run *r = run->priv;
	char key[32];

	if (!r->have)
		return;
	for (unsigned i = 0; i < FRAG_ND; i++) {
		snprintf(key, sizeof(key), "free_block_pct_d%u", frag_densities[i]);
		bench_metric(run, key, "%.1f", r->pct[i]);
	}
	bench_metric(run, "free_block_pct", "%.1f", r->pct[0]);
	bench_note(run, "%s: free 2 MiB blocks after compaction, %% of %lu: %.0f%% (1 pinned page "
		   "per movable block), %.0f%% (4), %.0f%% (16), %.0f%% (64)",
		   run->knobs & PM_KNOB_LONGTERM_PIN_IN_PLACE ? "pinned in place" :
		   "moved out first", FRAG_MEM / PM_PMD_SIZE, r->pct[0], r->pct[1], r->pct[2],
		   r->pct[3]);
}

static void frag_cleanup(struct bench_run *run)
{
	struct frag_run *r = run->priv;

	if (!r)
		return;
	if (r->mm)
		pm_mm_destroy(r->mm);
	if (r->m) {
		pm_rcu_barrier();
		pm_machine_destroy(r->m);
	}
	free(r->pins);
	free(r);
	run->priv = NULL;
}

const struct bench_case bench_case_longterm_frag = {
	.name = "longterm_frag",
	.description = "Long-term pins scattered over the movable zone, then compaction",
	.seed = "issue 30: FOLL_LONGTERM leaves the movable zone (Linux 5.13)",
	.before_knobs = PM_KNOB_LONGTERM_PIN_IN_PLACE,
	.prepare = frag_prepare,
	.loop = frag_loop,
	.summary = frag_summary,
	.cleanup = frag_cleanup,
};
