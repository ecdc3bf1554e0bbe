// SPDX-License-Identifier: MIT
/*
 * report_model.c - the report's scaling model: N-task throughput of a will-it-scale
 * experiment (every task does the same operation on its own data) predicted from what the
 * trace gives, beside the efficiency measured in the same run.
 *
 * Inputs, per experiment and configuration (a line of <out>/commuter/model.tsv:
 * "id cfg lines rmws cs_ns", tab-separated, '#' starts a comment):
 *   lines  C64-conflicting lines per operation (lines that another task's operation also
 *          writes, or reads where this one writes);
 *   rmws   locked read-modify-writes per operation (reported, not used in the bound: their
 *          cost is already in the 1-CPU time);
 *   cs_ns  the critical section of a lock that every task's operation takes (0: none);
 * plus the 1-CPU cost t1 = 1 / ops(1) measured in this run, and x, the cost of moving a line
 * between CPUs, measured at run time (line_ns(): two threads pinned to CPUs 0 and 1 hand one
 * line to each other; half a round trip is one transfer; of batches of MODEL_BATCH round
 * trips the fastest counts, since on a shared VM a batch that a vCPU's preemption hits
 * measures the hypervisor, not the line).
 *
 * The model. With N >= 2 tasks:
 *   (a) line transfers: each conflicting line is found on another CPU once per operation
 *       of each task: t(N) = t1 + lines * x, so X(N) <= N / t(N);
 *   (b) a hot line is owned by one CPU at a time: the machine moves it at most once per x,
 *       so X(N) <= 1 / x when lines > 0;
 *   (c) a conflicting lock's critical section serialises (Amdahl; an M/D/1 queue at its
 *       saturation): X(N) <= 1 / (cs_ns + x), the section plus the lock line's transfer.
 * X(N) is the smallest of the three, and the efficiency is X(N) / (N / t1). At 16, 64 and
 * 256 CPUs, x is a two-socket machine's cross-socket transfer (MODEL_BIG_LINE_NS): the
 * published figures for 2-socket Xeons are of the order of 100-200 ns (David, Guerraoui and
 * Trigonakis, "Everything you always wanted to know about synchronization", SOSP 2013,
 * measure cross-socket transfers of this order); the model takes 150 ns.
 * What it leaves out: queueing on locks below saturation, memory bandwidth, SMT, the
 * per-task working set outgrowing caches, and every conflict the trace cannot see.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

#define MODEL_BIG_LINE_NS 150.0
#define MODEL_ROUNDS 200000
#define MODEL_BATCH 500		/* round trips timed together; the fastest batch counts */

static const unsigned model_cpus[] = { 16, 64, 256 };

struct model_in {
	bool have;
	double lines, rmws, cs_ns;
};

/* What report_model_print() read, for the plots (report_model_ops()). */
static const struct report *model_rep;
static struct model_in (*model_saved)[NR_CFG];
static double model_x;

/* ---- the line transfer: a line handed between CPUs 0 and 1 ---- */

struct pingpong {
	_Alignas(64) volatile unsigned long turn;
	int cpu;
	int err;
};

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The partner: waits for an odd turn, makes it even. */
static void *partner(void *arg)
{
	struct pingpong *pp = arg;

	pp->err = pin_to(1);
	for (unsigned long i = 0; i < MODEL_ROUNDS; i++) {
		while (__atomic_load_n(&pp->turn, __ATOMIC_ACQUIRE) != 2 * i + 1)
			;
		__atomic_store_n(&pp->turn, 2 * i + 2, __ATOMIC_RELEASE);
	}
	return NULL;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Nanoseconds per transfer, or NAN where there are not two CPUs to pin to. */
static double line_ns(void)
{
	struct pingpong *pp = aligned_alloc(64, sizeof(*pp));
	cpu_set_t old;
	pthread_t t;
	double t0, ns = NAN;

	if (!pp)
		return NAN;
	memset(pp, 0, sizeof(*pp));
	if (bench_nproc() < 2 || pthread_getaffinity_np(pthread_self(), sizeof(old), &old) ||
	    pin_to(0) || pthread_create(&t, NULL, partner, pp)) {
		free(pp);
		return NAN;
	}
	t0 = now_ns();
	for (unsigned long i = 0; i < MODEL_ROUNDS; i++) {
		__atomic_store_n(&pp->turn, 2 * i + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&pp->turn, __ATOMIC_ACQUIRE) != 2 * i + 2)
			;
		if ((i + 1) % MODEL_BATCH == 0) {
			double t_end = now_ns();

			ns = fmin(isnan(ns) ? HUGE_VAL : ns, (t_end - t0) / (2.0 * MODEL_BATCH));
			t0 = t_end;
		}
	}
	pthread_join(t, NULL);
	if (pp->err)
		ns = NAN;
	pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
	free(pp);
	return ns;
}

/* ---- the trace's figures ---- */

static enum report_cfg cfg_by_name(const char *s)
{
	for (int c = 0; c < NR_CFG; c++)
		if (!strcmp(report_cfg_names[c], s))
			return c;
	return NR_CFG;
}

/* Returns the number of lines read, -errno when there is no file. */
static int read_inputs(const struct report *rep, struct model_in in[][NR_CFG])
{
	char path[512], line[256], id[64], cfg[32];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/commuter/model.tsv", rep->out_dir);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct model_in m = { .have = true };
		enum report_cfg c;

		if (line[0] == '#' || sscanf(line, "%63s %31s %lf %lf %lf", id, cfg, &m.lines,
					     &m.rmws, &m.cs_ns) != 5)
			continue;
		c = cfg_by_name(cfg);
		for (unsigned i = 0; c < NR_CFG && i < rep->nr_exps; i++) {
			if (!strcmp(rep->exps[i].id, id)) {
				in[i][c] = m;
				n++;
			}
		}
	}
	fclose(f);
	return n;
}

/* ---- the model ---- */

static double model_eff(const struct model_in *m, double t1_ns, double x, unsigned n)
{
	double one = 1.0 / t1_ns, xn;

	if (n < 2)
		return 1.0;
	xn = n / (t1_ns + m->lines * x);
	if (m->lines > 0)
		xn = fmin(xn, 1.0 / x);
	if (m->cs_ns > 0)
		xn = fmin(xn, 1.0 / (m->cs_ns + x));
	return xn / (n * one);
}

static void print_cfg(FILE *f, const struct report_experiment *e, enum report_cfg c,
		      const struct model_in *m, double x, unsigned *held, unsigned *checked)
{
	unsigned top = report_top_point(e);
	double one, meas, pred;

	if (!m->have || !report_value(e, c, 0, METRIC_OPS, &one) || one <= 0)
		return;
	pred = model_eff(m, 1e9 / one, x, e->tasks[top]);
	fprintf(f, "model %-18s %-6s lines %5.2f rmw %6.1f cs %6.0f ns  eff(%u) model %.2f",
		e->id, report_cfg_names[c], m->lines, m->rmws, m->cs_ns, e->tasks[top], pred);
	if (report_efficiency(e, c, &meas)) {
		bool ok = fabs(pred - meas) <= 0.1;

		fprintf(f, " measured %.2f %s", meas, ok ? "ok" : "OFF");
		(*checked)++;
		*held += ok;
	}
	for (size_t k = 0; k < sizeof(model_cpus) / sizeof(model_cpus[0]); k++)
		fprintf(f, "  eff(%u) %.3f", model_cpus[k],
			model_eff(m, 1e9 / one, MODEL_BIG_LINE_NS, model_cpus[k]));
	fputc('\n', f);
}

/* pin_fast: predicted after/before at 256 CPUs beside the seed's x46.6. */
static void print_pin_fast(FILE *f, const struct report_experiment *e,
			   const struct model_in in[NR_CFG])
{
	double b, a, eb, ea;

	if (strcmp(e->id, "pin_fast") || !in[CFG_BEFORE].have || !in[CFG_AFTER].have ||
	    !report_value(e, CFG_BEFORE, 0, METRIC_OPS, &b) ||
	    !report_value(e, CFG_AFTER, 0, METRIC_OPS, &a) || b <= 0 || a <= 0)
		return;
	eb = model_eff(&in[CFG_BEFORE], 1e9 / b, MODEL_BIG_LINE_NS, 256);
	ea = model_eff(&in[CFG_AFTER], 1e9 / a, MODEL_BIG_LINE_NS, 256);
	fprintf(f, "model pin_fast after/before at 256 CPUs: %.1fx (seed 2021: 25,617 -> "
		"1,194,790 ops/s, x46.6)\n", (a * ea) / (b * eb));
}

void report_model_print(FILE *f, const struct report *rep)
{
	struct model_in (*in)[NR_CFG] = calloc(rep->nr_exps ? rep->nr_exps : 1, sizeof(*in));
	unsigned held = 0, checked = 0;
	double x = line_ns();
	int n;

	if (!in)
		return;
	fprintf(f, "\nmodel: line transfer between CPUs 0 and 1 measured %.0f ns; %.0f ns "
		"(cross-socket, cited) at 16/64/256 CPUs\n", x, MODEL_BIG_LINE_NS);
	n = read_inputs(rep, in);
	if (isnan(x) || n <= 0) {
		fprintf(f, "model: skipped (%s)\n", isnan(x) ? "fewer than two CPUs to pin to" :
			"no trace figures in <out>/commuter/model.tsv; they need the clang "
			"trace build");
		free(in);
		return;
	}
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		if (!e->scale)
			continue;
		for (int c = 0; c < NR_CFG; c++)
			print_cfg(f, e, c, &in[i][c], x, &held, &checked);
		print_pin_fast(f, e, in[i]);
	}
	fprintf(f, "model: %u of %u measured 2-CPU efficiencies within 0.1 of the model\n", held,
		checked);
	free(model_saved);
	model_saved = in;
	model_rep = rep;
	model_x = x;
}

/* The after configuration's predicted ops/s at @tasks (the measured line cost: the plots'
 * task counts are this machine's), for the plots' dashed "model" line. */
bool report_model_ops(const struct report_experiment *e, unsigned tasks, double *ops)
{
	double one;

	for (unsigned i = 0; model_saved && i < model_rep->nr_exps; i++) {
		const struct model_in *m = &model_saved[i][CFG_AFTER];

		if (strcmp(model_rep->exps[i].id, e->id) || !m->have ||
		    !report_value(e, CFG_AFTER, 0, METRIC_OPS, &one) || one <= 0)
			continue;
		*ops = tasks * one * model_eff(m, 1e9 / one, model_x, tasks);
		return true;
	}
	return false;
}
