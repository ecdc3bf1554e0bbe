// SPDX-License-Identifier: MIT
/*
 * report.c - `pinmm-bench report` (what `make bench` runs): every seed experiment, before and
 * after, on pinmm and on the host kernel, in one run, side by side.
 *
 * Every experiment runs its configurations (before = the knob or release mode the seed
 * replaced, v1 where the seed had an intermediate version, after = modern pinmm, host = the
 * running kernel's twin case) in threads mode at 1 task and at nproc tasks (or only at 1 task
 * for the register/deregister experiment, which the seed measured single-threaded). Each run
 * is a child pinmm-bench with a short warm-up; its metrics are collected, ops/s being the
 * median of its measured samples (one disturbed second on a shared machine does not decide;
 * the runtest-format CSVs keep will-it-scale's average).
 * The table gives, per view of an experiment, the seed's claim, before, after, after/before
 * (as a throughput ratio: for times it is before/after), the scaling efficiency
 * ops(N) / (N x ops(1)) of the after configuration, the host figure, and whether the
 * expectation of issue 6 is met. report_experiments.c holds the table of experiments,
 * report_fmt.c computes the figures, report_out.c writes results/.
 *
 *   pinmm-bench report [--quick] [--tasks N,...] [--out DIR] [--only ID,...] [--no-host]
 *		       [--no-plots] [-s S] [--warmup N] [--interval-ms MS] [--rounds R]
 *
 * With --rounds R, the whole list of runs is made R times over, and each configuration keeps
 * one round whole: the one whose scaling efficiency (or, for an experiment run at one task
 * count, whose figure) is the median of its R. A round runs every point, so a point at 1 task
 * and the same point at N tasks run minutes apart at most, and each scaling figure is a ratio
 * of two runs of one round: a host that slows down or speeds up for minutes at a time (the
 * development VMs do, by up to 2x; docs/benchmarks.md, section 5) then either moves both or
 * spoils one round of R, which the median leaves out.
 *
 * Then each configuration that the scaling model has trace figures for gets a series of its
 * own for the model's check (run_check(): 1 and N tasks in turn, the fastest sample of each;
 * logs/ID-CFG-check.log), and report_model.c prints the model beside it under the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

/* ---- the table ---- */

static const char *cell(const struct report_experiment *e, enum report_cfg c,
			enum report_metric m, char *buf, size_t len)
{
	unsigned p = report_top_point(e);
	double v;

	if (!e->cfg[c].bench_case)
		return "-";
	if (!e->ran[c][p])
		return "skipped";
	if (e->res[c][p].status == 1)
		return "n/a";
	if (!report_value(e, c, p, m, &v))
		return "FAIL";
	return report_format(m, v, buf, len);
}

static void print_view(FILE *f, const struct report_experiment *e, const struct report_view *v)
{
	char b[32], a[32], h[32], ratio[32] = "-", eff[32] = "-", peff[32] = "-", name[40];
	char reff[32] = "-";
	char expect[32] = "";
	double r, x;

	snprintf(name, sizeof(name), "%s", v->name);
	if (e->scale)
		snprintf(name, sizeof(name), "%s (%u thr)", v->name, e->tasks[report_top_point(e)]);
	if (report_ratio(e, v, &r))
		snprintf(ratio, sizeof(ratio), "%.2fx", r);
	if ((v->metric == METRIC_OPS || v->metric == METRIC_AREA_SEC) &&
	    report_efficiency(e, report_after(v), &x))
		snprintf(eff, sizeof(eff), "%.2f", x);
	if (v->metric == METRIC_OPS && report_efficiency(e, CFG_PROC, &x))
		snprintf(peff, sizeof(peff), "%.2f", x);
	if (v->metric == METRIC_OPS && report_efficiency(e, CFG_RANGE, &x))
		snprintf(reff, sizeof(reff), "%.2f", x);
	if (v->expect)
		snprintf(expect, sizeof(expect), "%s%gx %s", v->strictly ? ">" : ">=", v->expect,
			 report_verdict(e, v));
	fprintf(f, "%-28s %-40s %10s %10s %8s %6s %6s %6s %10s %s\n", name, v->claim,
		cell(e, CFG_BEFORE, v->metric, b, sizeof(b)),
		cell(e, report_after(v), v->metric, a, sizeof(a)), ratio, eff, peff, reff,
		cell(e, CFG_HOST, v->metric, h, sizeof(h)), expect);
}

static void print_table(FILE *f, struct report *rep)
{
	fprintf(f, "%-28s %-40s %10s %10s %8s %6s %6s %6s %10s %s\n", "Experiment", "Seed's claim",
		"Before", "After", "Aft/Bef", "Scal.", "P.scal", "R.scal", "Host", "Expect");
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		for (unsigned k = 0; k < REPORT_MAX_VIEWS && e->views[k].name; k++)
			print_view(f, e, &e->views[k]);
	}
	fprintf(f, "\nAft/Bef is a throughput ratio (for times: before/after). Scal. is the\n"
		"after configuration's ops(N) / (N x ops(1)) with N threads of one mm; P.scal the\n"
		"same with N processes, one mm each (what sharing nothing costs). R.scal the same\n"
		"with N threads of one mm of the range design (PM_MACHINE_RANGE_MM: ranges of the\n"
		"address space with locks of their own, beyond Linux). Host: the running kernel's "
		"twin case.\n");
	if (rep->quick_size)
		fprintf(f, "Quick run: the mr_reg experiments register %s, not the seed's 1 GiB.\n",
			rep->quick_size);
	if (rep->rounds > 1)
		fprintf(f, "Each configuration's figures are those of its median round of %u (by scaling "
			"efficiency, or by the figure where there is one task count).\n", rep->rounds);
	report_print_notes(f, rep, "");
}

/* ---- running ---- */

/* The run's stderr; a repeated run, or a later round's, appends after a line that says so. */
static int open_log(struct report *rep, const struct report_experiment *e, enum report_cfg c,
		    unsigned tasks, unsigned tries, double others)
{
	bool append = tries || rep->round;
	char path[512], line[96];
	int fd, n = 0;

	snprintf(path, sizeof(path), "%s/logs/%s-%s-t%u.log", rep->out_dir, e->id,
		 report_cfg_names[c], tasks);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
	if (fd >= 0 && tries)
		n = snprintf(line, sizeof(line), "(other processes took %.0f%% of the machine: "
			     "run again)\n", 100 * others);
	else if (fd >= 0 && rep->round)
		n = snprintf(line, sizeof(line), "(round %u of %u)\n", rep->round + 1, rep->rounds);
	if (n > 0 && write(fd, line, (size_t)n) < 0)
		perror("pinmm-bench: report log");
	return fd;
}

#define MAX_RETRIES_PER_POINT 2
#define MAX_RETRIES 24	/* in all, so that a busy machine cannot make the report endless */

/* A child's command line; the numbers are written into @num. */
struct child_args {
	char num[4][16];
	char *argv[24];
};

static char *const *child_argv(struct child_args *a, const struct report *rep,
			       const struct report_experiment *e, enum report_cfg c, unsigned tasks,
			       unsigned samples, unsigned interval_ms)
{
	const struct report_config *cfg = &e->cfg[c];
	char **argv = a->argv;
	int n = 0;

	snprintf(a->num[0], sizeof(a->num[0]), "%u", tasks);
	snprintf(a->num[1], sizeof(a->num[1]), "%u", samples);
	snprintf(a->num[2], sizeof(a->num[2]), "%u", rep->warmup);
	snprintf(a->num[3], sizeof(a->num[3]), "%u", interval_ms);
	argv[n++] = "pinmm-bench";
	argv[n++] = (char *)cfg->bench_case;
	argv[n++] = "-t", argv[n++] = a->num[0];
	argv[n++] = "-s", argv[n++] = a->num[1];
	argv[n++] = "--warmup", argv[n++] = a->num[2];
	argv[n++] = "--interval-ms", argv[n++] = a->num[3];
	if (cfg->variant)
		argv[n++] = "--variant", argv[n++] = (char *)cfg->variant;
	if (cfg->knobs)
		argv[n++] = "--knobs", argv[n++] = (char *)cfg->knobs;
	if (cfg->mode)
		argv[n++] = "--mode", argv[n++] = (char *)cfg->mode;
	if (cfg->mm)
		argv[n++] = "--mm", argv[n++] = (char *)cfg->mm;
	if (e->shrinks && rep->quick_size)
		argv[n++] = "--size", argv[n++] = (char *)rep->quick_size;
	argv[n] = NULL;
	return argv;
}

static void run_point(struct report *rep, struct report_experiment *e, enum report_cfg c,
		      unsigned p, unsigned nr, unsigned total)
{
	const struct report_config *cfg = &e->cfg[c];
	struct child_args args;
	char *const *argv = child_argv(&args, rep, e, c, e->tasks[p], rep->samples,
				       rep->interval_ms);
	char fig[32];
	struct bench_result *r = &e->res[c][p];
	int log;
	double v;

	fprintf(stderr, "[%2u/%u] %-18s %-6s %-9s %u task%s ... ", nr, total, e->id,
		report_cfg_names[c], cfg->variant ? cfg->variant : "", e->tasks[p],
		e->tasks[p] > 1 ? "s" : " ");
	for (unsigned tries = 0;; tries++) {
		struct bench_result again;

		log = open_log(rep, e, c, e->tasks[p], tries, r->others);
		if (bench_child_run(argv, &again, log) < 0)
			again.status = -1;
		if (log >= 0)
			close(log);
		if (!tries || (again.status == 0 && again.others < r->others))
			*r = again;
		if (r->status || !report_disturbed(r, e->tasks[p]) || tries == MAX_RETRIES_PER_POINT ||
		    rep->retries >= rep->max_retries)
			break;
		rep->retries++;
		fprintf(stderr, "others took %.0f%%, again ... ", 100 * r->others);
	}
	e->ran[c][p] = true;
	if (r->status == 1)
		fprintf(stderr, "not available: %s\n", r->unavailable);
	else if (r->status < 0)
		fprintf(stderr, "FAILED (see %s/logs)\n", rep->out_dir);
	else if (report_value(e, c, p, e->views[0].metric, &v))
		fprintf(stderr, "%s (%.1f s, others %.0f%%)\n", report_format(e->views[0].metric,
			v, fig, sizeof(fig)), r->wall_s, 100 * r->others);
	else
		fprintf(stderr, "%lld ops/s (%.1f s)\n", r->average, r->wall_s);
}

static bool cfg_runs(const struct report *rep, const struct report_experiment *e,
		     enum report_cfg c)
{
	return e->cfg[c].bench_case && (c != CFG_HOST || rep->host);
}

static void plan_points(struct report *rep, struct report_experiment *e)
{
	e->nr_points = 0;
	for (unsigned k = 0; k < rep->nr_tasks; k++) {
		if (!e->scale && rep->tasks[k] != 1 && rep->nr_tasks > 1)
			continue;
		e->tasks[e->nr_points++] = rep->tasks[k];
		if (!e->scale)
			break;
	}
}

static unsigned count_runs(struct report *rep)
{
	unsigned total = 0;

	for (unsigned i = 0; i < rep->nr_exps; i++) {
		plan_points(rep, &rep->exps[i]);
		for (int c = 0; c < NR_CFG; c++)
			if (cfg_runs(rep, &rep->exps[i], c))
				total += rep->exps[i].nr_points;
	}
	return total;
}

/* A host case that is not available stays so at every task count: run it once. */
static bool host_known_unavailable(const struct report_experiment *e, enum report_cfg c,
				   unsigned p)
{
	return c == CFG_HOST && p > 0 && e->res[c][0].status == 1;
}

/* Where round @r of point @p of configuration @c keeps its run (--rounds > 1). */
static struct bench_result *round_res(const struct report *rep, struct report_experiment *e,
				      enum report_cfg c, unsigned p, unsigned r)
{
	return &e->rounds_res[((size_t)c * REPORT_MAX_POINTS + p) * rep->rounds + r];
}

/*
 * The figure that decides which round a configuration keeps: its scaling efficiency when the
 * experiment scales (the top point against 1 task, both of round @r), else its figure at its
 * one point. A failed or unavailable run counts as the lowest. Leaves round @r in e->res[c].
 */
static double round_figure(struct report *rep, struct report_experiment *e, enum report_cfg c,
			   unsigned r)
{
	double v;

	for (unsigned p = 0; p < e->nr_points; p++)
		e->res[c][p] = *round_res(rep, e, c, p, r);
	if (e->nr_points > 1 && e->scale)
		return report_efficiency(e, c, &v) ? v : -HUGE_VAL;
	if (e->res[c][0].status || !report_value(e, c, 0, e->views[0].metric, &v))
		return -HUGE_VAL;
	return v;
}

/*
 * Each configuration keeps one round whole, all its points: the round whose figure
 * (round_figure) is the median of its rounds, the lower middle one for an even count. So a
 * scaling figure is always a ratio of two runs of one round, minutes apart at most, never of
 * a fast round's 1 task and a slow round's N tasks.
 */
static void keep_medians(struct report *rep, struct report_experiment *e)
{
	for (int c = 0; c < NR_CFG; c++) {
		unsigned order[REPORT_MAX_ROUNDS], n = rep->rounds;
		double v[REPORT_MAX_ROUNDS];

		if (!e->ran[c][0])
			continue;
		for (unsigned r = 0; r < n; r++) {
			v[r] = round_figure(rep, e, c, r);
			order[r] = r;
		}
		for (unsigned i = 1; i < n; i++) /* insertion sort by figure */
			for (unsigned j = i; j > 0 && v[order[j]] < v[order[j - 1]]; j--) {
				unsigned t = order[j];

				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		for (unsigned p = 0; p < e->nr_points; p++)
			e->res[c][p] = *round_res(rep, e, c, p, order[(n - 1) / 2]);
	}
}

static void run_all(struct report *rep)
{
	unsigned total = count_runs(rep) * rep->rounds, nr = 0;
	uint64_t t0 = bench_now_ns();

	fprintf(stderr, "report: %u runs of %u+%u samples of %u ms; results in %s/\n", total,
		rep->warmup, rep->samples, rep->interval_ms, rep->out_dir);
	for (unsigned i = 0; rep->rounds > 1 && i < rep->nr_exps; i++) {
		rep->exps[i].rounds_res = calloc((size_t)NR_CFG * REPORT_MAX_POINTS * rep->rounds,
						 sizeof(struct bench_result));
		if (rep->exps[i].rounds_res)
			continue;
		fprintf(stderr, "pinmm-bench: report: out of memory; one round only\n");
		for (unsigned j = 0; j < i; j++) {
			free(rep->exps[j].rounds_res);
			rep->exps[j].rounds_res = NULL;
		}
		rep->rounds = 1;
		total = count_runs(rep);
	}
	/* Per point, every configuration back to back: load changes hit before and after alike. */
	for (rep->round = 0; rep->round < rep->rounds; rep->round++) {
		for (unsigned i = 0; i < rep->nr_exps; i++) {
			struct report_experiment *e = &rep->exps[i];

			for (unsigned p = 0; p < e->nr_points; p++) {
				for (int c = 0; c < NR_CFG; c++) {
					if (!cfg_runs(rep, e, c))
						continue;
					nr++;
					if (host_known_unavailable(e, c, p)) {
						e->res[c][p] = e->res[c][0];
						e->ran[c][p] = true;
					} else {
						run_point(rep, e, c, p, nr, total);
					}
					if (rep->rounds > 1)
						*round_res(rep, e, c, p, rep->round) = e->res[c][p];
				}
			}
		}
	}
	for (unsigned i = 0; rep->rounds > 1 && i < rep->nr_exps; i++) {
		keep_medians(rep, &rep->exps[i]);
		free(rep->exps[i].rounds_res);
		rep->exps[i].rounds_res = NULL;
	}
	rep->round = 0;
	rep->wall_s = (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- the model's check: a series per modelled configuration ---- */

#define CHECK_MAX_SAMPLES 5
#define CHECK_MAX_INTERVAL_MS 250

/*
 * The N-task configuration's own 1-CPU cost: REPORT_CHECK_PAIRS runs of its N tasks unbound
 * (-n) in a child confined to CPU 0, the fastest sample of all. Time-sliced on one CPU, the
 * tasks make every operation the N-task run makes (a folio several tasks pin goes hot, and
 * so on) while no line moves between CPUs, so the model can tell a dearer path from a
 * conflict (report_model.c). Nothing is kept where CPU 0 cannot be had alone.
 */
static void one_cpu_series(struct report *rep, struct report_experiment *e, enum report_cfg c,
			   unsigned n, unsigned samples, unsigned iv, int log)
{
	struct report_check *k = &e->check[c];
	cpu_set_t old, one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (n < 2 || sched_getaffinity(0, sizeof(old), &old) || !CPU_ISSET(0, &old) ||
	    sched_setaffinity(0, sizeof(one), &one))
		return;
	for (unsigned r = 0; r < REPORT_CHECK_PAIRS; r++) {
		struct child_args args;
		struct bench_result res;
		char *const *argv = child_argv(&args, rep, e, c, n, samples, iv);
		unsigned end = 0;
		double best;

		while (argv[end])
			end++;
		args.argv[end] = "-n"; /* the tasks inherit the child's one CPU */
		args.argv[end + 1] = NULL;
		if (bench_child_run(args.argv, &res, log) < 0 || res.status)
			continue;
		best = bench_result_metric_d(&res, "best");
		if (best > 0)
			k->best_one_cpu = fmax(k->best_one_cpu, best);
	}
	sched_setaffinity(0, sizeof(old), &old);
}

/*
 * The model's check needs an efficiency that other processes do not decide. Each modelled
 * configuration gets its own series after the table's runs: REPORT_CHECK_PAIRS child runs at
 * 1 task and as many at N tasks, in turn (1, N, N, 1, 1, N: a slow minute hits both), and
 * each task count keeps its fastest sample of all: others only ever slow a sample down, so
 * the fastest is the one they disturbed least. The line cost and the ceiling the model uses
 * are measured right after the series (report_model_calibrate()), not at the report's start.
 */
static void run_check(struct report *rep, unsigned i, enum report_cfg c)
{
	struct report_experiment *e = &rep->exps[i];
	struct report_check *k = &e->check[c];
	unsigned top = report_top_point(e), n = e->tasks[top];
	unsigned samples = rep->samples < CHECK_MAX_SAMPLES ? rep->samples : CHECK_MAX_SAMPLES;
	unsigned iv = rep->interval_ms < CHECK_MAX_INTERVAL_MS ? rep->interval_ms :
							     CHECK_MAX_INTERVAL_MS;
	char path[512];
	int log;

	memset(k, 0, sizeof(*k));
	snprintf(path, sizeof(path), "%s/logs/%s-%s-check.log", rep->out_dir, e->id,
		 report_cfg_names[c]);
	log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	fprintf(stderr, "[check] %-18s %-6s 1 and %u tasks, %u runs each ... ", e->id,
		report_cfg_names[c], n, REPORT_CHECK_PAIRS);
	for (unsigned r = 0; r < 2 * REPORT_CHECK_PAIRS; r++) {
		unsigned at = (r + r / 2) % 2; /* 0 1 1 0 0 1: the task count's index */
		struct child_args args;
		struct bench_result res;
		double best;

		if (bench_child_run(child_argv(&args, rep, e, c, at ? n : 1, samples, iv), &res,
				    log) < 0 || res.status)
			continue;
		best = bench_result_metric_d(&res, "best");
		if (best <= 0)
			continue;
		k->best[at] = fmax(k->best[at], best);
		k->others_sum += res.others;
		k->others_max = fmax(k->others_max, res.others);
		k->runs++;
	}
	one_cpu_series(rep, e, c, n, samples, iv, log);
	if (log >= 0)
		close(log);
	report_model_calibrate(rep, i, c);
	if (k->best[0] > 0 && k->best[1] > 0)
		fprintf(stderr, "eff(%u) %.2f (others %.0f%%, at most %.0f%%)\n", n,
			k->best[1] / (n * k->best[0]), 100 * k->others_sum / k->runs,
			100 * k->others_max);
	else
		fprintf(stderr, "FAILED (see %s)\n", path);
}

static void run_checks(struct report *rep)
{
	uint64_t t0 = bench_now_ns();

	if (report_model_load(rep) <= 0)
		return;
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		if (!e->scale || e->nr_points < 2 || e->tasks[0] != 1)
			continue;
		for (int c = 0; c < NR_CFG; c++)
			if (cfg_runs(rep, e, c) && report_model_has(rep, i, c))
				run_check(rep, i, c);
	}
	rep->wall_s += (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- options ---- */

static int task_item(const char *w, void *ctx, uint64_t *key)
{
	unsigned v;
	int err = bench_arg_uint("--tasks", w, 1, BENCH_MAX_TASKS, &v);

	if (!err)
		*key = v;
	return err;
}

/* --tasks N,...: in the list's order; the key of an item is its task count. */
static int parse_tasks(struct report *rep, const char *s)
{
	uint64_t keys[REPORT_MAX_POINTS];
	int n = bench_arg_list("--tasks", s, REPORT_MAX_POINTS, task_item, NULL, keys);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		rep->tasks[i] = (unsigned)keys[i];
	rep->nr_tasks = (unsigned)n;
	return 0;
}

static int experiment_item(const char *w, void *ctx, uint64_t *key)
{
	for (size_t i = 0; i < REPORT_NR_EXPERIMENTS; i++) {
		if (!strcmp(w, report_experiments[i].id)) {
			*key = i;
			return 0;
		}
	}
	fprintf(stderr, "pinmm-bench: --only '%s': unknown experiment\n", w);
	return -EINVAL;
}

/*
 * --only ID,...: the experiments named, in the table's order (not the list's), kept
 * in place at the table's front; rep->exps is the whole table until then.
 */
static int select_experiments(struct report *rep, const char *list)
{
	uint64_t keys[REPORT_NR_EXPERIMENTS];
	int nr = bench_arg_list("--only", list, REPORT_NR_EXPERIMENTS, experiment_item, NULL, keys);
	unsigned n = 0;

	if (nr < 0)
		return nr;
	for (size_t i = 0; i < REPORT_NR_EXPERIMENTS; i++) {
		for (int k = 0; k < nr; k++) {
			if (keys[k] == i) {
				rep->exps[n++] = report_experiments[i];
				break;
			}
		}
	}
	rep->nr_exps = n;
	return 0;
}

static void default_options(struct report *rep)
{
	unsigned nproc = bench_nproc();

	rep->exps = report_experiments;
	rep->nr_exps = REPORT_NR_EXPERIMENTS;
	rep->tasks[0] = 1;
	rep->nr_tasks = 1;
	if (nproc > 1)
		rep->tasks[rep->nr_tasks++] = nproc;
	rep->out_dir = "results";
	rep->host = true;
	rep->plots = true;
	rep->samples = 3;
	rep->warmup = 1;
	rep->interval_ms = 1000;
	rep->max_retries = MAX_RETRIES;
	rep->rounds = 1;
}

static int parse_report_args(struct report *rep, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "tasks", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ "only", required_argument, NULL, 'O' },
		{ "no-host", no_argument, NULL, 'H' },
		{ "no-plots", no_argument, NULL, 'P' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "rounds", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	const char *only = NULL;
	int c, err = 0;

	default_options(rep);
	optind = 1;
	while (!err && (c = getopt_long(argc, argv, "s:", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			rep->quick = true;
			rep->quick_size = "256M";
			rep->samples = 3;
			rep->warmup = 1;
			rep->interval_ms = 150;
			rep->max_retries = 0;	/* a smoke run: no second chances */
			break;
		case 't': err = parse_tasks(rep, optarg); break;
		case 'o': rep->out_dir = optarg; break;
		case 'O': only = optarg; break;
		case 'H': rep->host = false; break;
		case 'P': rep->plots = false; break;
		case 's':
			err = bench_arg_uint("-s", optarg, 1, BENCH_MAX_SAMPLES, &rep->samples);
			break;
		case 'w':
			err = bench_arg_uint("--warmup", optarg, 0, BENCH_MAX_SAMPLES, &rep->warmup);
			break;
		case 'i':
			err = bench_arg_uint("--interval-ms", optarg, 1, BENCH_MAX_INTERVAL_MS,
					     &rep->interval_ms);
			break;
		case 'r':
			err = bench_arg_uint("--rounds", optarg, 1, REPORT_MAX_ROUNDS, &rep->rounds);
			break;
		default: err = -EINVAL; break;
		}
	}
	if (!err && only)
		err = select_experiments(rep, only);
	if (!err && (optind < argc || !rep->samples || !rep->interval_ms))
		err = -EINVAL;
	return err;
}

static void report_usage(void)
{
	fprintf(stderr, "Usage: pinmm-bench report [--quick] [--tasks N,...] [--out DIR] "
		"[--only ID,...] [--no-host] [--no-plots] [-s S] [--warmup N] "
		"[--interval-ms MS] [--rounds R]\nexperiments:");
	for (size_t i = 0; i < REPORT_NR_EXPERIMENTS; i++)
		fprintf(stderr, " %s", report_experiments[i].id);
	fputc('\n', stderr);
}

static int make_dirs(const char *out)
{
	char logs[512];

	snprintf(logs, sizeof(logs), "%s/logs", out);
	if ((mkdir(out, 0755) && errno != EEXIST) || (mkdir(logs, 0755) && errno != EEXIST)) {
		fprintf(stderr, "pinmm-bench: report: cannot create %s: %s\n", logs,
			strerror(errno));
		return -errno;
	}
	return 0;
}

int bench_cmd_report(int argc, char **argv)
{
	struct report rep = { 0 };
	char *table = NULL;
	size_t len = 0;
	FILE *f;
	int err;

	if (parse_report_args(&rep, argc, argv)) {
		report_usage();
		return 1;
	}
	if (make_dirs(rep.out_dir))
		return 1;
	bench_disable_aslr(true);
	run_all(&rep);
	run_checks(&rep);
	f = open_memstream(&table, &len);
	if (!f)
		return 1;
	print_table(f, &rep);
	report_model_print(f, &rep);
	fclose(f);
	fputs("\n", stdout);
	fputs(table, stdout);
	fflush(stdout);
	err = report_write_results(&rep, table);
	free(table);
	fprintf(stderr, "report: %.0f s; %s/report.md, %s/summary.csv, plots and logs in %s/\n",
		rep.wall_s, rep.out_dir, rep.out_dir, rep.out_dir);
	return err ? 1 : 0;
}
