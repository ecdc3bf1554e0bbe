// SPDX-License-Identifier: MIT
/*
 * run.c - the run as a case sees it: the stop flag and the phase the tasks read, the messages
 * and metrics a case gives, and the cleanup hooks that helpers register and the driver runs
 * last (bench_at_cleanup()).
 *
 * The lowest layer of pinmm-bench: it uses no other bench file. The driver (driver.c) writes
 * the flags this file reads; the helpers of bench.h (util.c, pm.c, host.c, churn.c) and the
 * cases read them through this file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "harness.h"

bool bench_stopping(const struct bench_run *run)
{
	return __atomic_load_n(&run->shared->stop, __ATOMIC_ACQUIRE);
}

enum bench_phase bench_phase(const struct bench_run *run)
{
	return (enum bench_phase)__atomic_load_n(&run->shared->phase, __ATOMIC_ACQUIRE);
}

int bench_unavailable(struct bench_run *run, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(run->unavailable, sizeof(run->unavailable), fmt, ap);
	va_end(ap);
	return BENCH_UNAVAILABLE;
}

void bench_note(const struct bench_run *run, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void bench_metric(const struct bench_run *run, const char *key, const char *fmt, ...)
{
	va_list ap;

	if (!run->metrics)
		return;
	fprintf(run->metrics, "%s=", key);
	va_start(ap, fmt);
	vfprintf(run->metrics, fmt, ap);
	va_end(ap);
	fputc('\n', run->metrics);
	fflush(run->metrics);
}

int bench_at_cleanup(struct bench_run *run, void (*fn)(struct bench_run *run))
{
	if (run->nr_cleanups == BENCH_MAX_CLEANUPS)
		return -ENOSPC;
	run->cleanups[run->nr_cleanups++] = fn;
	return 0;
}

void bench_run_cleanups(struct bench_run *run)
{
	while (run->nr_cleanups)
		run->cleanups[--run->nr_cleanups](run);
}
