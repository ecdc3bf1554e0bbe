/* SPDX-License-Identifier: MIT */
/*
 * tap.h - a small TAP producer for pinmm's tests (one binary per test file).
 *
 *   plan(n) or plan_no_plan(); ok(cond, fmt, ...); is_int(got, want, name); diag(fmt, ...);
 *   skip(n, why); done_testing() -> exit status (0 only if every test passed).
 *   ASSERT_EQ(a, b) / ASSERT_TRUE(c): a failing check that prints both values and the
 *   expression, then stops the test program (use in helpers where going on makes no sense).
 *
 * Scale: tests read PM_TEST_SCALE (default 1; run.sh sets a smaller value under TSan) through
 * tap_scale(n), so loop counts shrink without changing what is tested. Randomised tests take a
 * seed from PM_TEST_SEED or argv ("-s SEED") via tap_seed() and print it.
 */
#ifndef PM_TESTS_TAP_H
#define PM_TESTS_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "xorshift.h"

static int tap_n, tap_failed, tap_planned = -1;

static inline void plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

static inline void plan_no_plan(void)
{
	tap_planned = -1;
}

static inline __attribute__((format(printf, 1, 2))) void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("# ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	fflush(stdout);
}

static inline __attribute__((format(printf, 4, 5))) bool ok_at(bool cond, const char *file,
								 int line, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}
#define ok(cond, ...) ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...) \
	({ \
		long long g__ = (long long)(got), w__ = (long long)(want); \
		bool r__ = ok_at(g__ == w__, __FILE__, __LINE__, __VA_ARGS__); \
		if (!r__) \
			printf("#   got: %lld, expected: %lld (%s)\n", g__, w__, #got); \
		r__; \
	})

static inline void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++) {
		tap_n++;
		printf("ok %d # skip %s\n", tap_n, why);
	}
	fflush(stdout);
}

static inline int done_testing(void)
{
	if (tap_planned < 0)
		printf("1..%d\n", tap_n);
	else if (tap_planned != tap_n) {
		printf("# planned %d tests but ran %d\n", tap_planned, tap_n);
		tap_failed++;
	}
	if (tap_failed)
		printf("# failed %d of %d tests\n", tap_failed, tap_n);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#define ASSERT_EQ(a, b) \
	do { \
		long long a__ = (long long)(a), b__ = (long long)(b); \
		if (a__ != b__) { \
			printf("Bail out! %s:%d: ASSERT_EQ(%s, %s): %lld != %lld\n", __FILE__, __LINE__, \
			       #a, #b, a__, b__); \
			fflush(stdout); \
			exit(1); \
		} \
	} while (0)

#define ASSERT_TRUE(c) \
	do { \
		if (!(c)) { \
			printf("Bail out! %s:%d: ASSERT_TRUE(%s)\n", __FILE__, __LINE__, #c); \
			fflush(stdout); \
			exit(1); \
		} \
	} while (0)

/* Loop counts scaled for slow configurations (TSan). */
static inline long tap_scale(long n)
{
	const char *s = getenv("PM_TEST_SCALE");
	double f = s ? atof(s) : 1.0;
	long r = (long)(n * (f > 0 ? f : 1.0));

	return r > 0 ? r : 1;
}

/* Seed: -s SEED on the command line, else PM_TEST_SEED, else the clock. Printed for replay. */
static inline uint64_t tap_seed(int argc, char **argv)
{
	uint64_t seed = 0;
	const char *e = getenv("PM_TEST_SEED");

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-s"))
			seed = strtoull(argv[i + 1], NULL, 0);
	if (!seed && e)
		seed = strtoull(e, NULL, 0);
	if (!seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
		       ((uint64_t)getpid() << 32);
	}
	diag("seed %" PRIu64 " (replay: -s %" PRIu64 " or PM_TEST_SEED=%" PRIu64 ")", seed, seed,
	     seed);
	return seed;
}

/* xorshift64*: a per-thread deterministic PRNG for tests. */
static inline uint64_t tap_rand(uint64_t *state)
{
	return xorshift64s(state);
}

/* Seconds a stress test runs: PM_STRESS_SECONDS, else @dflt. */
static inline double tap_seconds(double dflt)
{
	const char *s = getenv("PM_STRESS_SECONDS");

	return s ? atof(s) : dflt;
}

static inline double tap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif /* PM_TESTS_TAP_H */
