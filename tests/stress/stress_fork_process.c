// SPDX-License-Identifier: MIT
/*
 * stress_fork_process.c - process fork() of a program whose other threads use pinmm.
 *
 * Threads of the parent run long-term pin sessions (gup_test) on address spaces they create
 * and destroy, and create and destroy whole machines, while the main thread forks children
 * one after the other. Each child makes a new machine and an address space, runs a session
 * and destroys the machine, which waits for an RCU grace period. The invariant: every child
 * finishes; a child that hangs on a lock another parent thread held at the fork (no such
 * thread exists in the child), or on that thread's RCU read section, is killed by its alarm
 * and counted as hung. The library's pthread_atfork handlers must leave every process-global
 * lock free in the child, and liburcu's registry without the parent's other threads. A child stuck in the sanitizer's allocator instead (pmtest.h,
 * pmt_fork_watchdog) is the toolchain's hang: it is counted and reported, not failed.
 *
 * Duration: PM_STRESS_SECONDS (default 2). PM_STRESS_HANG_SECONDS: a child's alarm (10).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define W PM_PIN_LONGTERM_TEST_FLAG_USE_WRITE
#define FAST PM_PIN_LONGTERM_TEST_FLAG_USE_FAST

enum { NSESSION = 2, NMACHINE = 1 };

/* ThreadSanitizer: the fork child starts threads (RCU's helper); allow it. */
__attribute__((visibility("default"))) const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}

struct churn {
	pthread_t tid;
	struct pm_machine *m; /* NULL: a machine churner */
	atomic_int *stop;
	long rounds, errors;
};

/* One session round on @m: what test_gup_longterm's churn thread does. */
static int session_round(struct pm_machine *m)
{
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long x;
	int bad = 0;

	if (!mm)
		return 1;
	x = pmt_map_anon(mm, 16 * PG, RW, false);
	for (int i = 0; i < 4; i++)
		bad |= pmt_longterm_start(mm, x, 8 * PG, i & 1 ? FAST : W) || pmt_longterm_read(mm,
					  x + 8 * PG) ||
		       pmt_longterm_stop(mm);
	bad |= pmt_longterm_start(mm, x, 8 * PG, 0) != 0;
	pm_mm_destroy(mm); /* with the session alive */
	return bad;
}

static void *churn_fn(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(c->stop)) {
		if (c->m) {
			c->errors += session_round(c->m);
		} else {
			/* A machine's life: machines_lock, at creation and destruction. */
			struct pm_machine *m = pm_machine_create(&(struct pm_config){
				.mem_bytes = 8 << 20 });

			if (!m || session_round(m))
				c->errors++;
			pm_machine_destroy(m);
		}
		c->rounds++;
	}
	return NULL;
}

static void child(void *arg)
{
	unsigned hang_s = *(unsigned *)arg;
	struct pm_machine *m;
	struct pm_mm *mm;
	unsigned long x;
	int bad = 0;

	pmt_fork_watchdog(hang_s);
	m = pm_machine_create(&(struct pm_config){ .mem_bytes = 16 << 20 });
	if (!m)
		_exit(2);
	mm = pm_mm_create(m);
	if (!mm)
		_exit(2);
	x = pmt_map_anon(mm, 8 * PG, RW, false);
	bad |= pmt_put_tag(mm, x, 4, 0x91, 0) != 4;
	bad |= pmt_longterm_start(mm, x, 4 * PG, FAST) != 0;
	bad |= pmt_longterm_read(mm, x + 4 * PG) != 0;
	bad |= pmt_bad_tag(mm, x + 4 * PG, 4, 0x91, 0) != 0;
	bad |= pmt_longterm_stop(mm) != 0;
	bad |= pmt_longterm_start(mm, x, 4 * PG, W) != 0;
	pm_mm_destroy(mm);
	/* A grace period: the parent's threads were in read sections at the fork. */
	pm_machine_destroy(m);
	_exit(bad);
}

int main(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	double end = tap_now() + tap_seconds(2);
	const char *hs = getenv("PM_STRESS_HANG_SECONDS");
	unsigned hang_s = hs ? (unsigned)atoi(hs) : 10;
	struct churn c[NSESSION + NMACHINE] = { 0 };
	atomic_int stop_all = 0;
	long forks = 0, good = 0, hung = 0, runtime_hung = 0, other = 0, rounds = 0, errors = 0;

	plan_no_plan();
	pmt_fork_watchdog_init();
	for (int i = 0; i < NSESSION + NMACHINE; i++) {
		c[i].m = i < NSESSION ? m : NULL;
		c[i].stop = &stop_all;
		ASSERT_EQ(pthread_create(&c[i].tid, NULL, churn_fn, &c[i]), 0);
	}
	while (tap_now() < end || forks < 3) {
		/* No retry: a hang in the runtime is counted, the run is time-bound. */
		long no_retries = 0;
		int status = pmt_fork_wait(child, &hang_s, &no_retries, 0);

		forks++;
		if (pmt_fork_good(status))
			good++;
		else if (pmt_fork_hung(status))
			hung++;
		else if (pmt_fork_runtime_hung(status))
			runtime_hung++;
		else
			other++;
	}
	atomic_store(&stop_all, 1);
	for (int i = 0; i < NSESSION + NMACHINE; i++) {
		pthread_join(c[i].tid, NULL);
		rounds += c[i].rounds;
		errors += c[i].errors;
	}
	is_int(hung, 0, "%ld children of %ld hung", hung, forks);
	is_int(other, 0, "%ld children failed otherwise", other);
	if (runtime_hung)
		diag("%ld children hung in the sanitizer's allocator", runtime_hung);
	ok(good + runtime_hung == forks, "%ld children ran a session", good);
	is_int(errors, 0, "the parent's threads: %ld rounds, no error", rounds);
	pm_machine_destroy(m);
	return done_testing();
}
