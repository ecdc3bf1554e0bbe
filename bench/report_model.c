// SPDX-License-Identifier: MIT
/*
 * report_model.c - the report's scaling model: N-task throughput of a will-it-scale
 * experiment (every task does the same operation on its own data) predicted from what the
 * trace gives, beside the efficiency measured in the same run.
 *
 * Inputs, per experiment and configuration (a line of <out>/commuter/model.tsv:
 * "id cfg lines visits hot rmws cs_share units", tab-separated, '#' starts a comment;
 * make bench writes it with pinmm-commuter --model, which traces two tasks' unit operations
 * in the loop's steady state):
 *   lines     C64-conflicting lines per unit (lines that another task's unit also writes, or
 *             reads where this one writes);
 *   visits    the unit's visits to those lines (a line left for a while and come back to is
 *             a new visit: mmap_lock's reader count is visited at down_read and at up_read),
 *             each a transfer when another CPU wrote the line in between; hot: the visits
 *             of the most visited line;
 *   rmws      locked read-modify-writes per unit (reported, not used in the bound: their
 *             cost is already in the 1-CPU time);
 *   cs_share  the share of the unit's accesses made inside the critical section of a lock
 *             that both tasks take and one takes exclusively (0: none); accesses stand for
 *             time, so the section costs cs_share * t1;
 *   units     units per counted iteration (pin_fast's iteration is 1024 pins);
 * plus the 1-CPU cost t1 = 1 / ops(1) of an iteration, measured in this run, and x, the cost
 * of moving a line between CPUs, measured at run time (line_ns(): two threads pinned to CPUs
 * 0 and 1 each add to a line with a locked RMW and then work alone for a while, as tasks
 * that visit a line do; x is what an iteration costs more when the line is one they share
 * than when each has its own. Of batches of MODEL_BATCH iterations the fastest counts among
 * those in which the partner made about as many, so that both were running: on a shared VM
 * a batch that a vCPU's preemption hits measures the hypervisor, not the line).
 *
 * The model. With N >= 2 tasks and L = visits * units transfers per iteration:
 *   (a) line transfers: each visit finds its line on another CPU: t(N) = t1 + L * x, so
 *       X(N) <= N / t(N);
 *   (b) a hot line is owned by one CPU at a time: the machine moves it at most once per x,
 *       and each iteration moves it hot * units times: X(N) <= 1 / (hot * units * x);
 *   (c) a conflicting lock's critical section serialises (Amdahl; an M/D/1 queue at its
 *       saturation): X(N) <= 1 / (cs_share * t1 + L * x), the sections plus the transfers
 *       of the lines they touch (the lock's own among them), which are made while it is held.
 * X(N) is the smallest of the three, and the efficiency is X(N) / (N / t1). At 16, 64 and
 * 256 CPUs, x is a two-socket machine's cross-socket transfer (MODEL_BIG_LINE_NS): the
 * published figures for 2-socket Xeons are of the order of 100-200 ns (David, Guerraoui and
 * Trigonakis, "Everything you always wanted to know about synchronization", SOSP 2013,
 * measure cross-socket transfers of this order); the model takes 150 ns.
 * What it leaves out: queueing on locks below saturation, memory bandwidth, SMT, the
 * per-task working set outgrowing caches, other processes on the machine, and every
 * conflict the trace cannot see.
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
#define MODEL_BATCH 1000	/* iterations timed together; the fastest batch counts */
#define MODEL_WORK 64		/* steps of private work between two visits of the line */

static const unsigned model_cpus[] = { 16, 64, 256 };

struct model_in {
	bool have;
	double lines, visits, hot, rmws, cs_share, units;
};

/* What report_model_print() read, for the plots (report_model_ops()). */
static const struct report *model_rep;
static struct model_in (*model_saved)[NR_CFG];
static double model_x;

/* ---- the line transfer: a line that CPUs 0 and 1 both add to between other work ---- */

struct hotline {
	_Alignas(64) unsigned long shared;	/* the line both add to */
	_Alignas(64) unsigned long own[2][8];	/* one line each */
	_Alignas(64) unsigned long done1;	/* the partner's iterations */
	_Alignas(64) volatile int phase;	/* 0 own lines, 1 the shared one, 2 stop */
	volatile int go;
	int err;
};

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* One iteration: a locked add to @line, then MODEL_WORK steps of work of this CPU alone that
 * depend on the add's result (as an operation's next steps depend on what it read), so that
 * the other CPU takes the line in between and out-of-order execution cannot hide the wait. */
static inline unsigned long model_iter(unsigned long *line, unsigned long v)
{
	v += __atomic_fetch_add(line, 1, __ATOMIC_SEQ_CST) & 1;
	for (int i = 0; i < MODEL_WORK; i++)
		v = v * 6364136223846793005UL + 1442695040888963407UL;
	return v;
}

static void *partner(void *arg)
{
	struct hotline *h = arg;
	unsigned long v = 1;
	int ph;

	h->err = pin_to(1); /* read after the join */
	__atomic_store_n(&h->go, 1, __ATOMIC_RELEASE);
	while ((ph = __atomic_load_n(&h->phase, __ATOMIC_ACQUIRE)) != 2) {
		v = model_iter(ph ? &h->shared : &h->own[1][0], v);
		__atomic_store_n(&h->done1, h->done1 + 1, __ATOMIC_RELAXED);
	}
	return (void *)v;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The fastest batch's ns per iteration on CPU 0, of those in which the partner made between
 * half and twice as many iterations (both were running). */
static double model_batches(struct hotline *h, unsigned long *line, unsigned long *v)
{
	double best = NAN;

	for (unsigned long b = 0; b < MODEL_ROUNDS / MODEL_BATCH; b++) {
		unsigned long d0 = __atomic_load_n(&h->done1, __ATOMIC_RELAXED), other;
		double t0 = now_ns(), t1;

		for (unsigned long i = 0; i < MODEL_BATCH; i++)
			*v = model_iter(line, *v);
		t1 = now_ns();
		other = __atomic_load_n(&h->done1, __ATOMIC_RELAXED) - d0;
		if (other * 2 >= MODEL_BATCH && other <= 2 * MODEL_BATCH)
			best = fmin(isnan(best) ? HUGE_VAL : best, (t1 - t0) / MODEL_BATCH);
	}
	return best;
}

/*
 * Nanoseconds that a visit to a line the other CPU wrote since costs more than a visit to
 * one's own: CPUs 0 and 1 both run model_iter() on their own lines, then on one line; the
 * difference of the fastest batches is one transfer. NAN where there are not two CPUs to pin
 * to, or no batch had both running.
 */
static double line_ns(void)
{
	struct hotline *h = aligned_alloc(64, sizeof(*h));
	unsigned long v = 1;
	double own, shared, ns = NAN;
	cpu_set_t old;
	pthread_t t;

	if (!h)
		return NAN;
	memset(h, 0, sizeof(*h));
	if (bench_nproc() < 2 || pthread_getaffinity_np(pthread_self(), sizeof(old), &old) ||
	    pin_to(0) || pthread_create(&t, NULL, partner, h)) {
		free(h);
		return NAN;
	}
	while (!__atomic_load_n(&h->go, __ATOMIC_ACQUIRE))
		sched_yield();
	own = model_batches(h, &h->own[0][0], &v);
	__atomic_store_n(&h->phase, 1, __ATOMIC_RELEASE);
	shared = model_batches(h, &h->shared, &v);
	__atomic_store_n(&h->phase, 2, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	if (!h->err && !isnan(own) && !isnan(shared))
		ns = fmax(shared - own, 0);
	pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
	free(h);
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

		if (line[0] == '#' ||
		    sscanf(line, "%63s %31s %lf %lf %lf %lf %lf %lf", id, cfg, &m.lines, &m.visits,
			   &m.hot, &m.rmws, &m.cs_share, &m.units) != 8 ||
		    m.units < 1)
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
	double one = 1.0 / t1_ns, l = m->visits * m->units, xn;

	if (n < 2)
		return 1.0;
	xn = n / (t1_ns + l * x);
	if (m->hot > 0)
		xn = fmin(xn, 1.0 / (m->hot * m->units * x));
	if (m->cs_share > 0)
		xn = fmin(xn, 1.0 / (m->cs_share * t1_ns + l * x));
	return xn / (n * one);
}

struct model_count {
	unsigned held, checked;		/* undisturbed comparisons, and those within 0.1 */
	unsigned dheld, dchecked;	/* the same where a run stayed disturbed */
};

static void print_cfg(FILE *f, const struct report_experiment *e, enum report_cfg c,
		      const struct model_in *m, double x, struct model_count *cnt)
{
	unsigned top = report_top_point(e);
	double one, meas, pred;

	if (!m->have || !report_value(e, c, 0, METRIC_OPS, &one) || one <= 0)
		return;
	pred = model_eff(m, 1e9 / one, x, e->tasks[top]);
	fprintf(f, "model %-18s %-6s lines %2.0f visits %4.1f x%-4.0f rmw %4.1f cs %3.0f%% %5.0f ns"
		"  eff(%u) model %.2f", e->id, report_cfg_names[c], m->lines, m->visits, m->units,
		m->rmws,
		100 * m->cs_share, m->cs_share * 1e9 / one, e->tasks[top], pred);
	if (report_efficiency(e, c, &meas)) {
		bool ok = fabs(pred - meas) <= 0.1;
		bool dist = report_point_disturbed(e, c, 0) || report_point_disturbed(e, c, top);

		fprintf(f, " measured %.2f %s%s", meas, ok ? "ok" : "OFF",
			dist ? " (disturbed)" : "");
		if (dist) {
			cnt->dchecked++;
			cnt->dheld += ok;
		} else {
			cnt->checked++;
			cnt->held += ok;
		}
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
	/* The ratio scales with this machine's 1-CPU cost; the before's collapse does not: it
	 * is the hot line's bound, the same on any machine with the same transfer cost. */
	fprintf(f, "model pin_fast at 256 CPUs: before %.0f ops/s (seed 25,617), after %.0f "
		"(seed 1,194,790; this machine's 1-CPU cost x 256)\n", 256 * b * eb,
		256 * a * ea);
}

void report_model_print(FILE *f, const struct report *rep)
{
	struct model_in (*in)[NR_CFG] = calloc(rep->nr_exps ? rep->nr_exps : 1, sizeof(*in));
	struct model_count cnt = { 0 };
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
			print_cfg(f, e, c, &in[i][c], x, &cnt);
		print_pin_fast(f, e, in[i]);
	}
	fprintf(f, "model: %u of %u measured 2-CPU efficiencies within 0.1 of the model; of runs "
		"that other processes still disturbed after their repeats, %u of %u\n",
		cnt.held + cnt.dheld, cnt.checked + cnt.dchecked, cnt.dheld, cnt.dchecked);
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
