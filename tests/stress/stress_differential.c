// SPDX-License-Identifier: MIT
/*
 * stress_differential.c - pinmm against the reference model (issue 9) for a while: random
 * sequences of 200 operations on the four knob machines until PM_STRESS_SECONDS (default 10;
 * `make stress` sets 60, `make check` 2) have passed. Every sequence's sub-seed derives from
 * the printed seed, so `-s SEED` replays the run; the first divergence is shrunk and printed
 * (regression lines for test_differential.c's known[], a trace, and -x bytes), and stops the
 * run.
 *
 * Options: -s SEED, -l OPS per sequence, -v (trace every operation).
 */
#include <getopt.h>

#include "lib/tap.h"
#include "lib/interp.h"

static uint64_t mix(uint64_t seed, uint64_t k)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (k + 1);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	struct interp_stats st = { 0 };
	struct interp_opts opts = { 0 };
	struct interp_op *ops;
	double secs = tap_seconds(10), t0 = tap_now();
	long nops = 200, failed = 0;
	uint64_t seed, i;
	int opt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "s:l:v")) != -1) {
		if (opt == 'l')
			nops = atol(optarg);
		else if (opt == 'v')
			opts.trace = stdout;
	}
	if (nops < 1 || nops > INTERP_MAX_OPS)
		nops = 200;
	ops = calloc((size_t)nops, sizeof(*ops));
	ASSERT_TRUE(ops != NULL);
	seed = tap_seed(argc, argv);
	for (i = 0; tap_now() - t0 < secs; i++) {
		uint64_t sub = mix(seed, i);
		unsigned knobs = interp_generate_knobs(sub);
		struct interp_result res;

		interp_generate(sub, ops, (size_t)nops);
		if (interp_run(interp_machine_get(knobs), ops, (size_t)nops, &opts, &res, &st)) {
			diag("sequence %" PRIu64 " (seed %" PRIu64 ", sub-seed %" PRIu64 ") failed",
			     i, seed, sub);
			interp_report(stdout, knobs, ops, (size_t)nops, &res, 2000);
			failed++;
			i++;
			break;
		}
	}
	ok(failed == 0, "%" PRIu64 " random sequences of %ld operations agree with the model in "
	   "%.0f s (seed %" PRIu64 ")", i, nops, tap_now() - t0, seed);
	interp_print_stats(stdout, "stress", &st);
	interp_machines_release(stdout);
	free(ops);
	return done_testing();
}
