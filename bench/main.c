// SPDX-License-Identifier: MIT
/*
 * main.c - pinmm-bench's command line.
 *
 *   pinmm-bench CASE [-t N] [-s S] [-m] [-n] [-v] [--mode threads|processes]
 *		      [--knobs before|after|KNOB,...] [--variant V] [--size BYTES]
 *		      [--warmup N] [--interval-ms MS] [--metrics FILE]
 *   pinmm-bench runtest [options] CASE [DURATION] [threads|processes|both] [TASKS...]
 *   pinmm-bench report [--quick] [...]
 *   pinmm-bench list
 *
 * The per-case form takes will-it-scale's flags (getopt "mt:s:hvn") with the same meaning and
 * the same usage error (usage on stdout, exit 1); everything pinmm adds is a long option.
 * Numbers are read strictly (args.c): a number that is not one, or is out of range, is a
 * usage error too, with a line on stderr that names it. A --size larger than the host's
 * available memory (MemAvailable) is refused with exit 1 before anything is allocated.
 * CASE may also be spelled like a will-it-scale binary, CASE_threads or CASE_processes, and
 * pinmm-bench may be invoked through a link of that name.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum {
	OPT_MODE = 256,
	OPT_KNOBS,
	OPT_VARIANT,
	OPT_SIZE,
	OPT_WARMUP,
	OPT_INTERVAL,
	OPT_METRICS,
	OPT_MM,
};

static const struct option case_options[] = {
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "knobs", required_argument, NULL, OPT_KNOBS },
	{ "variant", required_argument, NULL, OPT_VARIANT },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "mm", required_argument, NULL, OPT_MM },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void usage(const char *prog)
{
	printf("Usage: %s CASE [options]\n"
	       "\t-t\t number of tasks (default 1)\n"
	       "\t-s\t number of samples to average after warmup (default 0: run forever)\n"
	       "\t-m\t affinitize tasks on SMT threads (default cores)\n"
	       "\t-n\t do not affinitize tasks\n"
	       "\t-v\t print every task's iterations per sample\n"
	       "\t--mode threads|processes   tasks share one address space, or have one each\n"
	       "\t--mm linux|range   the address-space design of pinmm's machine (default linux)\n"
	       "\t--knobs before|after|KNOB,...   pinmm's historical behaviours (see list)\n"
	       "\t--variant V\t the case's variant (see list)\n"
	       "\t--size BYTES\t override the case's working-set size (K, M, G, T suffixes)\n"
	       "\t--warmup N\t samples discarded first (default %d)\n"
	       "\t--interval-ms MS   sample length (default 1000; values are per second)\n"
	       "\t--metrics FILE\t write key=value results of the run to FILE\n"
	       "   or: %s runtest [options] CASE [DURATION] [threads|processes|both] [TASKS...]\n"
	       "   or: %s report [--quick] [--tasks N,...] [--out DIR] [--only EXP,...] "
	       "[--no-host]\n"
	       "   or: %s list\n",
	       prog, BENCH_DEFAULT_WARMUP, prog, prog, prog);
}

static int parse_mode(const char *s, enum bench_mode *mode)
{
	if (!strcmp(s, "threads") || !strcmp(s, "thread"))
		*mode = BENCH_THREADS;
	else if (!strcmp(s, "processes") || !strcmp(s, "process"))
		*mode = BENCH_PROCESSES;
	else
		return -EINVAL;
	return 0;
}

/* "pin_fast", "pin_fast_threads", "pin_fast_processes". */
static const struct bench_case *lookup_case(const char *name, enum bench_mode *mode)
{
	static const struct {
		const char *suffix;
		enum bench_mode mode;
	} suffixes[] = { { "_threads", BENCH_THREADS }, { "_processes", BENCH_PROCESSES } };
	const struct bench_case *bc = bench_find_case(name);
	char buf[128];

	for (size_t i = 0; !bc && i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t n = strlen(name), k = strlen(suffixes[i].suffix);

		if (n <= k || n - k >= sizeof(buf) || strcmp(name + n - k, suffixes[i].suffix))
			continue;
		snprintf(buf, sizeof(buf), "%.*s", (int)(n - k), name);
		bc = bench_find_case(buf);
		if (bc)
			*mode = suffixes[i].mode;
	}
	return bc;
}

static int parse_long_option(struct bench_opts *o, int c, const char *arg)
{
	switch (c) {
	case OPT_MODE:
		if (parse_mode(arg, &o->mode)) {
			fprintf(stderr, "pinmm-bench: --mode '%s': threads or processes\n", arg);
			return -EINVAL;
		}
		return 0;
	case OPT_KNOBS:
		o->knobs = arg;
		return 0;
	case OPT_VARIANT:
		o->variant = arg;
		return 0;
	case OPT_SIZE:
		return bench_arg_size("--size", arg, &o->size);
	case OPT_WARMUP:
		return bench_arg_uint("--warmup", arg, 0, BENCH_MAX_SAMPLES, &o->warmup);
	case OPT_INTERVAL:
		return bench_arg_uint("--interval-ms", arg, 1, BENCH_MAX_INTERVAL_MS,
				      &o->interval_ms);
	case OPT_METRICS:
		o->metrics = arg;
		return 0;
	case OPT_MM:
		return bench_arg_mm(arg, &o->range_mm);
	}
	return -EINVAL;
}

/* Returns 0, or 1 after printing usage (will-it-scale's exit status for a usage error). */
static int parse_case_args(int argc, char **argv, struct bench_opts *o, const char *prog)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "mt:s:hvn", case_options, NULL)) != -1) {
		int err = 0;

		switch (c) {
		case 'm': o->smt = true; break;
		case 'n': o->no_affinity = true; break;
		case 'v': o->verbose = true; break;
		case 't': err = bench_arg_uint("-t", optarg, 0, UINT_MAX, &o->nr_tasks); break;
		case 's': err = bench_arg_uint("-s", optarg, 0, BENCH_MAX_SAMPLES, &o->samples); break;
		case 'h': usage(prog); return 1;
		case '?': usage(prog); return 1;
		default: err = parse_long_option(o, c, optarg); break;
		}
		if (err) {
			usage(prog);
			return 1;
		}
	}
	if (optind < argc || (o->smt && o->no_affinity) || !o->nr_tasks) {
		usage(prog);
		return 1;
	}
	if (o->nr_tasks > BENCH_MAX_TASKS) {
		printf("tasks cannot exceed %d\n", BENCH_MAX_TASKS);
		return 1;
	}
	if (bench_check_case_opts(o)) {
		usage(prog);
		return 1;
	}
	/* Not usage: the number is fine, the host is too small for it. */
	if (o->size && bench_arg_working_set("--size", o->size))
		return 1;
	return 0;
}

static int run_case(const struct bench_case *bc, enum bench_mode mode, int argc, char **argv,
		    const char *prog)
{
	struct bench_opts o = {
		.bc = bc,
		.nr_tasks = 1,
		.warmup = BENCH_DEFAULT_WARMUP,
		.interval_ms = 1000,
		.mode = mode,
	};

	if (parse_case_args(argc, argv, &o, prog))
		return 1;
	return bench_run_case(&o);
}

int bench_cmd_list(void)
{
	char knobs[160];

	for (const struct bench_case *const *c = bench_cases; *c; c++) {
		const struct bench_case *bc = *c;

		printf("%-18s %s\n", bc->name, bc->description);
		printf("%-18s   reproduces: %s\n", "", bc->seed);
		if (bc->variants)
			printf("%-18s   variants: %s (first is the default)\n", "", bc->variants);
		if (bc->flags & BENCH_F_HOST)
			printf("%-18s   host kernel case: processes mode forks\n", "");
		else
			printf("%-18s   --knobs before = %s\n", "",
			       bench_knob_names(bc->before_knobs, knobs, sizeof(knobs)));
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog = basename(argv[0]);
	enum bench_mode mode = BENCH_THREADS;
	const struct bench_case *bc;

	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	bc = lookup_case(prog, &mode);
	if (bc)
		return run_case(bc, mode, argc, argv, prog);
	if (argc < 2) {
		usage(prog);
		return 1;
	}
	if (!strcmp(argv[1], "list"))
		return bench_cmd_list();
	if (!strcmp(argv[1], "runtest"))
		return bench_cmd_runtest(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return bench_cmd_report(argc - 1, argv + 1);
	bc = lookup_case(argv[1], &mode);
	if (!bc) {
		if (argv[1][0] != '-')
			fprintf(stderr, "pinmm-bench: unknown case '%s' (see: %s list)\n", argv[1],
				prog);
		usage(prog);
		return 1;
	}
	return run_case(bc, mode, argc - 1, argv + 1, prog);
}
