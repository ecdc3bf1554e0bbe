// SPDX-License-Identifier: MIT
/*
 * migrate_gup.c - migration against GUP-fast (issue 30): one thread migrates a 2 MiB range of
 * 4 KiB pages over and over (pm_migrate_range, any zone) while every task pins pages of it
 * through the fast path, one at a time, checks the frame and unpins. One iteration is one
 * pin+check+unpin; the migrator's calls, the folios moved and the folios left in place
 * because they were pinned are the run's metrics (migrations_per_sec, folios_moved_per_sec,
 * refused_pinned_per_sec, gup_fast_fallbacks_per_sec).
 *
 * The check: no pin ever holds a stale frame. Every page holds its own address in its first
 * word; a task that holds a pin writes a fresh value into its own word of the frame and reads
 * it back through the address space (pm_access). A frame that migration copied from, or one
 * that no PTE maps any more, fails one of the two: the loop returns -EIO and the run fails.
 * Threads mode only: the pins must race the migrator's address space.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"

#define MG_LEN (2 * BENCH_MIB)
#define MG_PAGES (MG_LEN / PM_PAGE_SIZE)
#define MG_SLOT(nr) (64 + 8 * ((nr) % 64)) /* a task's word in each page */

struct mg_run {
	struct pm_mm *mm;
	unsigned long addr;
	pthread_t migrator;
	bool started;
	_Atomic bool stop;
	_Atomic unsigned long calls; /* migrator calls in the measurement window */
	_Atomic long err;
};

static void *mg_migrator(void *arg)
{
	struct bench_run *run = arg;
	struct mg_run *r = run->priv;

	while (!atomic_load(&r->stop) && !bench_stopping(run)) {
		long n = pm_migrate_range(r->mm, r->addr, MG_LEN, PM_MIGRATE_ANYWHERE);

		if (n < 0) {
			atomic_store(&r->err, n);
			break;
		}
		if (bench_phase(run) == BENCH_PHASE_MEASURE)
			atomic_fetch_add_explicit(&r->calls, 1, memory_order_relaxed);
	}
	return NULL;
}

static int mg_prepare(struct bench_run *run)
{
	struct mg_run *r = calloc(1, sizeof(*r));
	long addr;
	int err;

	if (!r)
		return -ENOMEM;
	run->priv = r;
	if (run->mode != BENCH_THREADS)
		return bench_unavailable(run, "migrate_gup races one address space: threads only");
	err = bench_pm_setup(run, 64 * BENCH_MIB);
	if (err)
		return err;
	r->mm = run->pm.mms[0];
	addr = bench_pm_map_aligned(r->mm, MG_LEN);
	if (addr < 0)
		return (int)addr;
	r->addr = (unsigned long)addr;
	err = pm_madvise(r->mm, r->addr, MG_LEN, PM_MADV_NOHUGEPAGE);
	for (unsigned long i = 0; !err && i < MG_PAGES; i++) {
		unsigned long a = r->addr + i * PM_PAGE_SIZE;

		err = pm_access(r->mm, a, &a, sizeof(a), 1) == sizeof(a) ? 0 : -EFAULT;
	}
	if (err)
		return err;
	if (pthread_create(&r->migrator, NULL, mg_migrator, run))
		return -EAGAIN;
	r->started = true;
	return 0;
}

static int mg_loop(struct bench_task *t)
{
	struct mg_run *r = t->run->priv;
	unsigned long i = (*t->iterations * 7 + t->nr * 131) % MG_PAGES;
	unsigned long a = r->addr + i * PM_PAGE_SIZE, v = (*t->iterations << 8) | t->nr, back = 0;
	struct pm_page *page;
	unsigned long *frame;
	int stale = 0;

	if (pm_pin_user_pages_fast(t->mm, a, 1, PM_FOLL_WRITE, &page) != 1)
		return -EIO;
	frame = pm_page_address(page);
	if (__atomic_load_n(&frame[0], __ATOMIC_RELAXED) != a)
		stale = 1;
	__atomic_store_n(&frame[MG_SLOT(t->nr) / 8], v, __ATOMIC_RELAXED);
	if (pm_access(t->mm, a + MG_SLOT(t->nr), &back, sizeof(back), 0) != sizeof(back) ||
	    back != v)
		stale = 1;
	pm_unpin_user_page(page);
	if (stale) {
		bench_note(t->run, "task %u: a pin of %#lx held a stale frame", t->nr, a);
		return -EIO;
	}
	bench_count(t, 1);
	return 0;
}

static void mg_stop(struct mg_run *r)
{
	if (r && r->started) {
		atomic_store(&r->stop, true);
		pthread_join(r->migrator, NULL);
		r->started = false;
	}
}

static void mg_summary(struct bench_run *run)
{
	struct mg_run *r = run->priv;
	double s = (double)run->measured_ns / 1e9;

	mg_stop(r);
	if (s <= 0)
		return;
	bench_metric(run, "migrations_per_sec", "%.1f", (double)atomic_load(&r->calls) / s);
	bench_metric(run, "folios_moved_per_sec", "%.1f",
		     (double)bench_pm_window(run, pgmigrate_success) / s);
	bench_metric(run, "refused_pinned_per_sec", "%.1f",
		     (double)bench_pm_window(run, migrate_pinned_skips) / s);
	bench_metric(run, "gup_fast_fallbacks_per_sec", "%.1f",
		     (double)bench_pm_window(run, gup_fast_fallbacks) / s);
	bench_metric(run, "stale_pins", "0");
	bench_note(run, "%.0f migrations/s of %lu pages, %.0f folios moved/s, %.0f refused/s "
		   "(pinned), %.0f pins/s, no stale frame", (double)atomic_load(&r->calls) / s,
		   (unsigned long)MG_PAGES, (double)bench_pm_window(run, pgmigrate_success) / s,
		   (double)bench_pm_window(run, migrate_pinned_skips) / s,
		   (double)run->measured_iterations / s);
}

static void mg_cleanup(struct bench_run *run)
{
	struct mg_run *r = run->priv;

	mg_stop(r);
	if (r && atomic_load(&r->err))
		bench_note(run, "the migrator failed: %ld", atomic_load(&r->err));
	free(r);
	run->priv = NULL;
}

const struct bench_case bench_case_migrate_gup = {
	.name = "migrate_gup",
	.description = "GUP-fast pins of a range that another thread migrates",
	.seed = "issue 30: migration that respects pins",
	.prepare = mg_prepare,
	.loop = mg_loop,
	.phase = bench_pm_phase,
	.summary = mg_summary,
	.cleanup = mg_cleanup,
};
