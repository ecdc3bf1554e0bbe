// SPDX-License-Identifier: MIT
/*
 * churn.c - the mmap_lock writer of the 2008 fast_gup experiment: a helper thread that maps
 * and unmaps an unrelated 1 MiB range as fast as it can, in a pinmm address space (@mm) or in
 * the calling process (@mm == NULL). Its work is not counted; how much it did is returned.
 *
 * It is started by the task that owns the address space (bench_task_owns_mm()), so it runs in
 * that task's process and inherits its CPU binding, as will-it-scale's helper tasks do.
 *
 * bench_churn_start_apart() keeps its mappings apart from everyone else's: read-only (so they
 * never merge with the tasks' read-write regions), 64 KiB at fixed addresses 2 MiB apart, low
 * in the address space, far below the top-down area where the tasks map: the writer of the
 * per-VMA-lock experiment, which changes no VMA a task faults in.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bench.h"

#define CHURN_LEN (1UL << 20)
#define APART_BASE (1UL << 32)
#define APART_LEN (64UL << 10)
#define APART_STRIDE (2UL << 20)
#define APART_SLOTS 16

struct bench_churn {
	struct bench_run *run;
	struct pm_mm *mm;
	bool apart;
	unsigned long slot;
	pthread_t thread;
	int stop;
	unsigned long long pairs;
	int err;
};

static int churn_once(struct bench_churn *c)
{
	if (c->apart) {
		unsigned long a = APART_BASE + (c->slot++ % APART_SLOTS) * APART_STRIDE;
		long r = pm_mmap(c->mm, a, APART_LEN, PM_PROT_READ,
				 PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED_NOREPLACE, NULL, 0);

		if (r < 0)
			return (int)r;
		return pm_munmap(c->mm, a, APART_LEN);
	} else if (c->mm) {
		long addr = bench_pm_map_anon(c->mm, CHURN_LEN);

		if (addr < 0)
			return (int)addr;
		return pm_munmap(c->mm, (unsigned long)addr, CHURN_LEN);
	} else {
		void *p = mmap(NULL, CHURN_LEN, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		return munmap(p, CHURN_LEN) ? -errno : 0;
	}
}

static void *churn_thread(void *arg)
{
	struct bench_churn *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) && !bench_stopping(c->run)) {
		c->err = churn_once(c);
		if (c->err)
			break;
		c->pairs++;
	}
	return NULL;
}

static struct bench_churn *churn_start(struct bench_run *run, struct pm_mm *mm, bool apart)
{
	struct bench_churn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return NULL;
	c->run = run;
	c->mm = mm;
	c->apart = apart;
	err = pthread_create(&c->thread, NULL, churn_thread, c);
	if (err) {
		free(c);
		errno = err;
		return NULL;
	}
	return c;
}

struct bench_churn *bench_churn_start(struct bench_run *run, struct pm_mm *mm)
{
	return churn_start(run, mm, false);
}

struct bench_churn *bench_churn_start_apart(struct bench_run *run, struct pm_mm *mm)
{
	return churn_start(run, mm, true);
}

unsigned long long bench_churn_stop(struct bench_churn *c)
{
	unsigned long long pairs;

	if (!c)
		return 0;
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(c->thread, NULL);
	pairs = c->pairs;
	free(c);
	return pairs;
}
