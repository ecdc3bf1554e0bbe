/* SPDX-License-Identifier: MIT */
/*
 * migrate_race.h - what test_migrate.c and test_migrate_hugetlb.c share (migrate_race.c):
 * machines with a movable zone and a hugetlb pool, the frame pm_pagemap() shows, and a racer
 * thread that one of migration's test hooks starts from inside a migration - after the unmap,
 * before the copy (pm__migrate_hook) or the freeze (pm__hugetlb_migrate_hook) - so that a
 * test can see what waits for the migration entry and what the racer finds afterwards:
 *
 *	pm__migrate_hook = pmt_race_hook_at;	(or pm__hugetlb_migrate_hook = pmt_race_hook)
 *	r = (struct pmt_racer){ .mm = mm, .addr = a, .what = PMT_RACE_WRITE_FAULT };
 *	pmt_race_arm(m, &r);
 *	pm_migrate_range(...);			(the hook starts the racer, once)
 *	pmt_race_join();
 *	pmt_race.done_early, pmt_race.check, r.ret ...
 */
#ifndef PM_TESTS_MIGRATE_RACE_H
#define PM_TESTS_MIGRATE_RACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <pinmm/pinmm.h>

/* A machine of @mib MiB, the top @movable_mib of it a movable zone, a pool of @nr_huge 2 MiB
 * pages, @knobs; bails out if it cannot be created. */
struct pm_machine *pmt_movable_machine(size_t mib, size_t movable_mib, size_t nr_huge,
				       unsigned knobs);

/* The frame pm_pagemap() shows at @addr (no reference taken, nothing faulted); ULONG_MAX if
 * none. Bails out if pm_pagemap() fails. */
unsigned long pmt_pagemap_pfn(struct pm_mm *mm, unsigned long addr);

/* What the racer does. */
enum pmt_race_what {
	PMT_RACE_WRITE_FAULT, /* a store of 'F' at addr: ret 1 */
	PMT_RACE_PIN_FAST,    /* pm_pin_user_pages_fast(addr, 1, FOLL_WRITE): ret, pinned */
	PMT_RACE_DONTNEED,    /* MADV_DONTNEED of the page at addr: the hook joins it at once */
	PMT_RACE_FORK,	      /* pm_mm_fork(mm): ret 1 and child, or 0 */
	PMT_RACE_TRUNCATE,    /* pm_shmem_truncate(f, 0): ret */
	PMT_RACE_MUNMAP,      /* pm_munmap() of the 2 MiB at addr: ret */
	PMT_RACE_MPROTECT,    /* pm_mprotect(PM_PROT_READ) of the 2 MiB at addr: ret */
	PMT_RACE_MREMAP,      /* pm_mremap() of the 2 MiB at addr to @to (FIXED): ret */
	PMT_RACE_MIGRATE,     /* pm_migrate_range(PM_MIGRATE_ANYWHERE) of the 2 MiB at addr */
	PMT_RACE_PUNCH,       /* MADV_REMOVE of the page at addr: the hook joins it at once */
};

struct pmt_racer {
	struct pm_mm *mm;
	unsigned long addr;
	enum pmt_race_what what;
	struct pm_shmem *f;
	unsigned long to;
	_Atomic int done;
	struct pm_page *pinned;
	struct pm_mm *child;
	long ret;
};

/* The race armed or run (one at a time, set up and read by the test's main thread). */
struct pmt_race {
	struct pmt_racer *racer; /* armed: the next hook call that matches starts it */
	struct pm_machine *m;
	pthread_t thread;
	bool started, joined;
	int check;	/* pm_machine_check() from inside the migration */
	int done_early; /* the racer had finished 30 ms after it started (-1: never started) */
};
extern struct pmt_race pmt_race;

/* Arm @r on machine @m: the next migration hook call (at r->addr, for pmt_race_hook_at)
 * starts it. */
void pmt_race_arm(struct pm_machine *m, struct pmt_racer *r);
/* The hooks: start the armed racer, then give it 30 ms to reach the migration entry
 * (PMT_RACE_DONTNEED, PMT_RACE_PUNCH: join it, a zap waits for no migration). pmt_race_hook_at starts it only
 * for the migration of the page at the racer's addr. */
void pmt_race_hook(struct pm_mm *mm, unsigned long addr);
void pmt_race_hook_at(struct pm_mm *mm, unsigned long addr);
/* Wait for the racer started (if it was not joined yet). */
void pmt_race_join(void);

#endif /* PM_TESTS_MIGRATE_RACE_H */
