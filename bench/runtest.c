// SPDX-License-Identifier: MIT
/*
 * runtest.c - `pinmm-bench runtest`: will-it-scale's runtest.py, in LKP's argument form.
 *
 *   pinmm-bench runtest [-n] [-m] [--mm linux|range] [--knobs K] [--variant V] [--size B]
 *			 [--warmup N] [--interval-ms MS] CASE [DURATION]
 *			 [threads|processes|both] [TASKS...]
 *
 * The options are the case form's, with its meanings, passed to every child. They are read
 * strictly before anything runs: a bad number or --mm, an unknown mode or case prints usage
 * and exits 1; a --size larger than the host's MemAvailable exits 1 too.
 *
 * DURATION (default 5) is passed as -s; the mode also accepts LKP's "thread" and "process";
 * TASKS default to every count from 1 to the number of CPUs this process may run on. For
 * every task count it runs the processes build, then the threads build (each a child
 * pinmm-bench, ASLR off as under `setarch -R`), and prints:
 *
 *	tasks,processes,processes_idle,threads,threads_idle,linear
 *	0,0,100,0,100,0
 *	<tasks>,<processes>,<idle %.2f>,<threads>,<idle %.2f>,<linear>
 *
 * A mode that was not selected prints 0 and 0.00 (LKP); a run that failed or could not run
 * prints -1 (upstream), says why on stderr, and a failure makes the exit status 1. linear is
 * tasks x max(processes, threads) at 1 task, 0 until the list has reached 1. The processes
 * run's description goes to CASE.title in the current directory, as runtest.py writes it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define RUNTEST_MAX_ARGS 24

struct runtest {
	const char *name;
	unsigned duration;
	bool processes, threads;
	char *fwd[RUNTEST_MAX_ARGS];	/* options forwarded to every child */
	int nr_fwd;
	long long linear_base;
	bool failed;
	bool title_written;
};

static const struct option runtest_options[] = {
	{ "mm", required_argument, NULL, 'M' },
	{ "knobs", required_argument, NULL, 'K' },
	{ "variant", required_argument, NULL, 'V' },
	{ "size", required_argument, NULL, 'S' },
	{ "warmup", required_argument, NULL, 'W' },
	{ "interval-ms", required_argument, NULL, 'I' },
	{ NULL, 0, NULL, 0 },
};

static void runtest_usage(void)
{
	fprintf(stderr, "Usage: pinmm-bench runtest [-n] [-m] [--mm linux|range] [--knobs K] "
		"[--variant V] [--size B] [--warmup N] [--interval-ms MS] <testcase> [duration] "
		"[threads|processes|both] [tasks...]\n");
}

static int forward(struct runtest *rt, const char *opt, const char *arg)
{
	if (rt->nr_fwd + 2 > RUNTEST_MAX_ARGS)
		return -E2BIG;
	rt->fwd[rt->nr_fwd++] = (char *)opt;
	if (arg)
		rt->fwd[rt->nr_fwd++] = (char *)arg;
	return 0;
}

/* The options are the children's, but a wrong one is said once, here, before any runs. */
static int check_option(int c, const char *arg)
{
	unsigned u;
	size_t size;
	bool range_mm;

	switch (c) {
	case 'M':
		return bench_arg_mm(arg, &range_mm);
	case 'S':
		return bench_arg_size("--size", arg, &size) ?: bench_arg_working_set("--size", size);
	case 'W':
		return bench_arg_uint("--warmup", arg, 0, BENCH_MAX_SAMPLES, &u);
	case 'I':
		return bench_arg_uint("--interval-ms", arg, 1, BENCH_MAX_INTERVAL_MS, &u);
	}
	return 0;
}

static int parse_options(struct runtest *rt, int argc, char **argv)
{
	static const char *const longs[] = { ['M'] = "--mm", ['K'] = "--knobs",
					     ['V'] = "--variant", ['S'] = "--size",
					     ['W'] = "--warmup", ['I'] = "--interval-ms" };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "nm", runtest_options, NULL)) != -1) {
		int err;

		if (c == 'n')
			err = forward(rt, "-n", NULL);
		else if (c == 'm')
			err = forward(rt, "-m", NULL);
		else if (c == 'M' || c == 'K' || c == 'V' || c == 'S' || c == 'W' || c == 'I')
			err = check_option(c, optarg) ?: forward(rt, longs[c], optarg);
		else
			err = -EINVAL;
		if (err)
			return err;
	}
	return 0;
}

static int parse_mode_word(struct runtest *rt, const char *w)
{
	if (!strcmp(w, "both")) {
		rt->processes = rt->threads = true;
	} else if (!strcmp(w, "threads") || !strcmp(w, "thread")) {
		rt->threads = true;
	} else if (!strcmp(w, "processes") || !strcmp(w, "process")) {
		rt->processes = true;
	} else {
		return -EINVAL;
	}
	return 0;
}

static int parse_positionals(struct runtest *rt, int argc, char **argv, unsigned **tasks,
			     unsigned *nr_tasks)
{
	int i = optind;

	if (i >= argc)
		return -EINVAL;
	rt->name = argv[i++];
	rt->duration = 5;
	rt->processes = rt->threads = true;
	if (i < argc) {
		if (bench_arg_uint("duration", argv[i], 1, BENCH_MAX_SAMPLES, &rt->duration))
			return -EINVAL;
		i++;
	}
	if (i < argc) {
		rt->processes = rt->threads = false;
		if (parse_mode_word(rt, argv[i])) {
			fprintf(stderr, "pinmm-bench: runtest: mode '%s': threads, processes or "
				"both\n", argv[i]);
			return -EINVAL;
		}
		i++;
	}
	*nr_tasks = i < argc ? (unsigned)(argc - i) : bench_nproc();
	*tasks = calloc(*nr_tasks, sizeof(**tasks));
	if (!*tasks)
		return -ENOMEM;
	for (unsigned k = 0; k < *nr_tasks; k++) {
		if (i >= argc) {
			(*tasks)[k] = k + 1;
			continue;
		}
		if (bench_arg_uint("tasks", argv[i], 1, BENCH_MAX_TASKS, &(*tasks)[k]))
			return -EINVAL;
		i++;
	}
	return 0;
}

static void write_title(struct runtest *rt, const struct bench_result *r)
{
	char path[256];
	FILE *f;

	if (rt->title_written || !r->title[0])
		return;
	snprintf(path, sizeof(path), "%s.title", rt->name);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "pinmm-bench: runtest: cannot write %s\n", path);
		return;
	}
	fprintf(f, "%s\n", r->title);
	fclose(f);
	rt->title_written = true;
}

/* One child run; its average, or -1 (and why on stderr) when there is none. */
static long long run_one(struct runtest *rt, unsigned tasks, const char *mode, double *idle)
{
	char tbuf[16], sbuf[16];
	char *argv[RUNTEST_MAX_ARGS + 10];
	struct bench_result r;
	int n = 0;

	snprintf(tbuf, sizeof(tbuf), "%u", tasks);
	snprintf(sbuf, sizeof(sbuf), "%u", rt->duration);
	argv[n++] = "pinmm-bench";
	argv[n++] = (char *)rt->name;
	argv[n++] = "-t";
	argv[n++] = tbuf;
	argv[n++] = "-s";
	argv[n++] = sbuf;
	argv[n++] = "--mode";
	argv[n++] = (char *)mode;
	for (int i = 0; i < rt->nr_fwd; i++)
		argv[n++] = rt->fwd[i];
	argv[n] = NULL;
	if (bench_child_run(argv, &r, -1) || r.status < 0) {
		fprintf(stderr, "pinmm-bench: runtest: %s -t %u --mode %s failed\n", rt->name,
			tasks, mode);
		rt->failed = true;
	}
	*idle = r.idle;
	if (mode[0] == 'p' || !rt->processes)
		write_title(rt, &r);
	return r.status ? -1 : r.average;
}

static void run_row(struct runtest *rt, unsigned tasks)
{
	long long p = 0, t = 0;
	double p_idle = 0, t_idle = 0;

	if (rt->processes)
		p = run_one(rt, tasks, "processes", &p_idle);
	if (rt->threads)
		t = run_one(rt, tasks, "threads", &t_idle);
	if (tasks == 1)
		rt->linear_base = p > t ? p : t;
	printf("%u,%lld,%0.2f,%lld,%0.2f,%lld\n", tasks, p, p_idle, t, t_idle,
	       rt->linear_base > 0 ? rt->linear_base * tasks : 0);
	fflush(stdout);
}

int bench_cmd_runtest(int argc, char **argv)
{
	struct runtest rt = { 0 };
	unsigned *tasks = NULL, nr_tasks = 0;
	int err;

	err = parse_options(&rt, argc, argv);
	if (!err)
		err = parse_positionals(&rt, argc, argv, &tasks, &nr_tasks);
	if (err) {
		runtest_usage();
		free(tasks);
		return 1;
	}
	if (!bench_find_case(rt.name)) {
		fprintf(stderr, "pinmm-bench: unknown case '%s'\n", rt.name);
		runtest_usage();
		free(tasks);
		return 1;
	}
	bench_disable_aslr(true);
	printf("tasks,processes,processes_idle,threads,threads_idle,linear\n");
	printf("0,0,100,0,100,0\n");
	fflush(stdout);
	for (unsigned k = 0; k < nr_tasks; k++)
		run_row(&rt, tasks[k]);
	free(tasks);
	return rt.failed ? 1 : 0;
}
