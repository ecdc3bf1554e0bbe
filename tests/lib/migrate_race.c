// SPDX-License-Identifier: MIT
/*
 * migrate_race.c - the set-up and the race of test_migrate.c and test_migrate_hugetlb.c
 * (migrate_race.h). The racer's fields are written by its thread and read by the main thread
 * after pthread_join(), or through the atomic done flag.
 */
#include <limits.h>
#include <time.h>

#include "migrate_race.h"
#include "tap.h"

#define MiB (1UL << 20)

struct pmt_race pmt_race = { .done_early = -1 };

struct pm_machine *pmt_movable_machine(size_t mib, size_t movable_mib, size_t nr_huge,
				       unsigned knobs)
{
	struct pm_config cfg = { .mem_bytes = mib * MiB, .movable_bytes = movable_mib * MiB,
				 .nr_hugepages = nr_huge, .knobs = knobs };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

unsigned long pmt_pagemap_pfn(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(mm, addr, 1, &pi), 1);
	return pi.flags & PM_PAGE_PRESENT ? pi.pfn : ULONG_MAX;
}

static void *racer_fn(void *arg)
{
	struct pmt_racer *r = arg;
	char c = 'F';

	switch (r->what) {
	case PMT_RACE_WRITE_FAULT:
		r->ret = pm_access(r->mm, r->addr, &c, 1, 1);
		break;
	case PMT_RACE_PIN_FAST:
		r->ret = pm_pin_user_pages_fast(r->mm, r->addr, 1, PM_FOLL_WRITE, &r->pinned);
		break;
	case PMT_RACE_DONTNEED:
		r->ret = pm_madvise(r->mm, r->addr, PM_PAGE_SIZE, PM_MADV_DONTNEED);
		break;
	case PMT_RACE_FORK:
		r->ret = (r->child = pm_mm_fork(r->mm)) != NULL;
		break;
	case PMT_RACE_TRUNCATE:
		r->ret = pm_shmem_truncate(r->f, 0);
		break;
	case PMT_RACE_MUNMAP:
		r->ret = pm_munmap(r->mm, r->addr, PM_PMD_SIZE);
		break;
	case PMT_RACE_MPROTECT:
		r->ret = pm_mprotect(r->mm, r->addr, PM_PMD_SIZE, PM_PROT_READ);
		break;
	case PMT_RACE_MREMAP:
		r->ret = pm_mremap(r->mm, r->addr, PM_PMD_SIZE, PM_PMD_SIZE,
				   PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, r->to);
		break;
	case PMT_RACE_MIGRATE:
		r->ret = pm_migrate_range(r->mm, r->addr, PM_PMD_SIZE, PM_MIGRATE_ANYWHERE);
		break;
	case PMT_RACE_PUNCH:
		r->ret = pm_madvise(r->mm, r->addr, PM_PAGE_SIZE, PM_MADV_REMOVE);
		break;
	}
	atomic_store(&r->done, 1);
	return NULL;
}

void pmt_race_arm(struct pm_machine *m, struct pmt_racer *r)
{
	pmt_race.racer = r;
	pmt_race.m = m;
	pmt_race.started = false;
	pmt_race.joined = false;
	pmt_race.check = 0;
	pmt_race.done_early = -1;
}

static void race_start(struct pmt_racer *r)
{
	struct timespec ts = { 0, 30 * 1000000L };

	pmt_race.racer = NULL;
	pmt_race.check = pm_machine_check(pmt_race.m);
	ASSERT_EQ(pthread_create(&pmt_race.thread, NULL, racer_fn, r), 0);
	pmt_race.started = true;
	if (r->what == PMT_RACE_DONTNEED || r->what == PMT_RACE_PUNCH) {
		pmt_race_join(); /* a zap waits for no migration */
		pmt_race.done_early = 1;
		return;
	}
	nanosleep(&ts, NULL);
	pmt_race.done_early = atomic_load(&r->done);
}

void pmt_race_hook(struct pm_mm *mm, unsigned long addr)
{
	(void)mm, (void)addr;
	if (pmt_race.racer)
		race_start(pmt_race.racer);
}

void pmt_race_hook_at(struct pm_mm *mm, unsigned long addr)
{
	(void)mm;
	if (pmt_race.racer && addr == pmt_race.racer->addr)
		race_start(pmt_race.racer);
}

void pmt_race_join(void)
{
	if (pmt_race.started && !pmt_race.joined) {
		pthread_join(pmt_race.thread, NULL);
		pmt_race.joined = true;
	}
}
