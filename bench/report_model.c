// SPDX-License-Identifier: MIT
/*
 * report_model.c - the report's scaling model: N-task throughput of a will-it-scale
 * experiment (every task does the same operation on its own data) predicted from what the
 * trace gives, beside the efficiency measured in the same run.
 *
 * Inputs, per experiment and configuration (a line of <out>/commuter/model.tsv:
 * "id cfg lines visits hot rmws cs_share units rw frames", tab-separated, '#' starts a comment;
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
 *   rw        of the visits, those that read their line before writing it (a count read,
 *             then its compare-and-swap; 0 where the file has no such column);
 *   frames    4 KiB frames the unit writes whole (a fault's cleared page; 0 where the file
 *             has no such column). The experiments that fault fresh memory every iteration
 *             (page_fault1, shmem_fault) stream them from DRAM, far past the caches, and two
 *             CPUs streaming share the memory's bandwidth: a cost no line shows;
 * and, from this run, each number the model uses at 2 CPUs, measured for each configuration
 * right after its own series of runs (report.c, run_check(): 1 and N tasks in turn, the
 * fastest sample of each task count):
 *   t1        the 1-CPU cost of an iteration, 1 / the series' fastest 1-task sample;
 *   tN        the 1-CPU cost of an iteration of the N-task configuration: its N tasks
 *             time-sliced on CPU 0 (report.c, one_cpu_series()), 1 / their fastest total.
 *             It differs from t1 where N tasks take a path one task does not (a folio that
 *             several tasks pin goes hot); never below t1, and t1 where a conflicting lock
 *             is in the unit (model_tn());
 *   gap       t1 / (visits * units): the private work between two visits of the lines;
 *   x         what a visit to a line that the other CPU also writes costs more than a visit
 *             to one's own, at that gap (probe(): CPUs 0 and 1 each make a locked add and
 *             then dependent private work that takes about the gap, first on lines of their
 *             own, then on one line). It is not a transfer's latency: at short gaps the CPU
 *             holding the line makes several visits before the other's request takes it,
 *             and the two CPUs' waits overlap; at long gaps a visit pays a whole transfer;
 *   c, s      what clearing a frame costs alone, and how much more while the other CPU
 *             clears frames all the time too (probe_stream(): CPU 0 clears the pages of a
 *             ring of MODEL_STREAM_MIB, far larger than the last-level cache, alone, then
 *             beside CPU 1 doing the same);
 *   x_rw      the same for a visit that reads the line and then compare-and-swaps it, as
 *             the rw visits do: the read may fetch the line shared and the CAS take it
 *             again, and a CAS that lost starts over, so it may cost more than a locked add;
 *   ceiling   the 2-CPU efficiency of work that shares nothing (probe(): CPU 0's locked
 *             add, dependent steps and a page cleared, alone and then beside CPU 1 doing the
 *             same): what a host that puts the vCPUs on one core, clocks down or has them
 *             preempted gives any experiment, which no line model sees.
 * Of each probe's batches the median counts, among those in which the partner made about as
 * many iterations (both were running: on a shared VM a batch that a vCPU's preemption hits
 * measures the hypervisor, not the line).
 *
 * The model. With N >= 2 tasks, L = visits * units visits per iteration, and their cost
 * V = units * ((visits - rw) * x + rw * x_rw), and the frames' S = F * s * min(1, F * c / t1)
 * with F = units * frames: a frame pays s in full only if the other CPU is clearing all the
 * time, and the other task clears for the share F * c / t1 of its iteration:
 *   (a) line visits and streaming: t(N) = tN + V + S, so X(N) <= N / t(N);
 *   (b) a hot line is owned by one CPU at a time: the machine moves it at most once per x,
 *       and each iteration moves it hot * units times: X(N) <= 1 / (hot * units * x);
 *   (c) a conflicting lock's critical section serialises (Amdahl; an M/D/1 queue at its
 *       saturation): X(N) <= 1 / (cs_share * tN + V), the sections plus the visits
 *       of the lines they touch (the lock's own among them), which are made while it is held.
 * X(N) is the smallest, times the ceiling, and the efficiency is X(N) / (N / t1): a path
 * dearer at N tasks (tN > t1) costs efficiency on any number of CPUs, as a conflict does. At 2 CPUs,
 * (b) is left out: x measured at the unit's own gap already is what two CPUs queueing on one
 * line pay a visit. At 16, 64 and 256 CPUs, the ceiling is 1 and x (x_rw too: no figure is
 * cited for a read and its upgrade, so one transfer) is a two-socket machine's
 * cross-socket transfer (MODEL_BIG_LINE_NS): the published figures for 2-socket Xeons are of
 * the order of 100-200 ns (David, Guerraoui and Trigonakis, "Everything you always wanted to
 * know about synchronization", SOSP 2013, measure cross-socket transfers of this order); the
 * model takes 150 ns. S is left out there: how a big machine's memory channels share out
 * among its sockets is no figure the model can cite.
 * What it leaves out: queueing on locks below saturation, memory bandwidth past two CPUs
 * (and at two, for work other than whole frames), the per-task
 * working set outgrowing caches, visits spaced unevenly (the gap is a mean), and every
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
#include <unistd.h>

#include "report.h"

#define MODEL_BIG_LINE_NS 150.0
#define MODEL_BATCHES 200	/* batches a probe phase times; the median one counts */
#define MODEL_BATCH_NS 50000	/* about what one batch takes */
#define MODEL_STEPS 16		/* the ceiling's private work: dependent steps ... */
#define MODEL_RING 64		/* ... and a 4 KiB page cleared of a ring of this many */
#define MODEL_MAX_STEPS 20000	/* the longest gap the line probe reproduces */
#define MODEL_PROBE_TRIES 5
#define MODEL_STREAM_MIB 64	/* each CPU's ring of frames to clear: larger than the LLC */
#define MODEL_STREAM_BATCH 256	/* frames a batch of the stream probe clears */

static const unsigned model_cpus[] = { 16, 64, 256 };

struct model_in {
	bool have;
	double lines, visits, hot, rmws, cs_share, units, rw, frames;
};

/* The trace's figures (report_model_load()), per experiment and configuration. */
static const struct report *model_rep;
static struct model_in (*model_saved)[NR_CFG];

/* ---- the probes: private work on CPUs 0 and 1, and a line both add to ---- */

enum probe_phase {
	PROBE_OWN, PROBE_SHARED, PROBE_OWN_RW, PROBE_SHARED_RW, PROBE_PAGES, PROBE_STOP
};

struct probe {
	_Alignas(64) unsigned long shared;	/* the line both add to */
	_Alignas(64) unsigned long own[2][8];	/* one line each */
	_Alignas(64) unsigned long done1;	/* the partner's iterations */
	_Alignas(64) volatile int phase;	/* enum probe_phase */
	volatile unsigned steps;
	volatile int go;
	int err;
	char *ring[2];				/* MODEL_RING pages each */
};

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * A probe runs on CPU 0 with a partner on CPU 1. probe_begin() saves the caller's affinity in
 * @old and pins it to CPU 0: false where there are not two CPUs to pin to. probe_partner()
 * starts @fn, which pins itself to CPU 1 and then sets *@go, and waits for that: false where
 * no thread started. probe_end() gives the caller its affinity back.
 */
static bool probe_begin(cpu_set_t *old)
{
	return bench_nproc() >= 2 && !pthread_getaffinity_np(pthread_self(), sizeof(*old), old) &&
	       !pin_to(0);
}

static bool probe_partner(pthread_t *t, void *(*fn)(void *), void *arg, volatile int *go)
{
	if (pthread_create(t, NULL, fn, arg))
		return false;
	while (!__atomic_load_n(go, __ATOMIC_ACQUIRE))
		sched_yield();
	return true;
}

static void probe_end(const cpu_set_t *old)
{
	pthread_setaffinity_np(pthread_self(), sizeof(*old), old);
}

/*
 * One iteration: a locked add to @line, or with @rw a read of it and then a compare-and-swap
 * that starts over when it loses (as a count is taken when it is not zero), then @steps steps
 * of work of this CPU alone that depend on the result (as an operation's next steps depend
 * on what it read), and, with a @ring, a 4 KiB page of it cleared (as a fault clears its
 * page).
 */
static inline unsigned long probe_iter(unsigned long *line, bool rw, unsigned steps,
				       char *ring, unsigned long *page, unsigned long v)
{
	if (rw) {
		unsigned long o = __atomic_load_n(line, __ATOMIC_RELAXED);

		while (!__atomic_compare_exchange_n(line, &o, o + 1, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_RELAXED))
			;
		v += o & 1;
	} else {
		v += __atomic_fetch_add(line, 1, __ATOMIC_SEQ_CST) & 1;
	}
	for (unsigned i = 0; i < steps; i++)
		v = v * 6364136223846793005UL + 1442695040888963407UL;
	if (ring) {
		memset(ring + (*page)++ % MODEL_RING * 4096, (int)v, 4096);
		__asm__ volatile("" : : "r"(ring) : "memory");
	}
	return v;
}

static void *partner(void *arg)
{
	struct probe *h = arg;
	unsigned long v = 1, page = 0;
	int ph;

	h->err = pin_to(1); /* read after the join */
	__atomic_store_n(&h->go, 1, __ATOMIC_RELEASE);
	while ((ph = __atomic_load_n(&h->phase, __ATOMIC_ACQUIRE)) != PROBE_STOP) {
		v = probe_iter(ph == PROBE_SHARED || ph == PROBE_SHARED_RW ? &h->shared
									     : &h->own[1][0],
			       ph == PROBE_OWN_RW || ph == PROBE_SHARED_RW, h->steps,
			       ph == PROBE_PAGES ? h->ring[1] : NULL, &page, v);
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * ns per iteration on CPU 0: the median of MODEL_BATCHES batches. With @both, only batches
 * in which the partner made between half and twice as many iterations count (both were
 * running: a batch that a vCPU's preemption hits measures the hypervisor, not the work).
 * The median, not the fastest: the experiments' samples are averages over many iterations,
 * and the fastest batch of a shared line is one where the two CPUs happened to keep out of
 * each other's way.
 */
static double probe_phase(struct probe *h, bool both, unsigned long *line, bool rw, char *ring)
{
	unsigned iters = MODEL_BATCH_NS / (20 + h->steps + (ring ? 200 : 0)), n = 0;
	double t[MODEL_BATCHES], med;
	unsigned long v = 1, page = 0;

	iters = iters < 16 ? 16 : iters > 1000 ? 1000 : iters;
	for (unsigned b = 0; b < MODEL_BATCHES; b++) {
		unsigned long d0 = __atomic_load_n(&h->done1, __ATOMIC_RELAXED), other;
		double t0 = now_ns(), t1;

		for (unsigned i = 0; i < iters; i++)
			v = probe_iter(line, rw, h->steps, ring, &page, v);
		t1 = now_ns();
		other = __atomic_load_n(&h->done1, __ATOMIC_RELAXED) - d0;
		if (!both || (other * 2 >= iters && other <= 2 * iters))
			t[n++] = (t1 - t0) / iters;
	}
	if (!n)
		return NAN;
	qsort(t, n, sizeof(t[0]), cmp_double);
	med = t[n / 2];
	h->own[0][1] += v; /* keep v */
	return med;
}

/*
 * Measures, on CPUs 0 and 1, in this order:
 *  - the ceiling: CPU 0's private work (a locked add to its own line, MODEL_STEPS dependent
 *    steps, a page cleared) alone, then with CPU 1 doing the same on its own data; alone /
 *    both is what two CPUs give of work that shares nothing: it catches a host that puts
 *    the vCPUs on one core's SMT threads, clocks down, or lets others take a CPU;
 *  - the line cost at a gap: both CPUs make a locked add and then private work that takes
 *    about @gap_ns, first each on its own line, then on one line; x is the difference per
 *    iteration. Long gaps pay about a whole transfer per visit; short ones less, since the
 *    CPU holding the line makes several visits before the other's request takes it;
 *  - with @x_rw, the same for visits that read the line and then compare-and-swap it.
 * NAN where there are not two CPUs to pin to, or no batch had both running.
 */
static void probe(double gap_ns, double *ceiling, double *x, double *x_rw)
{
	struct probe *h = aligned_alloc(64, sizeof(*h));
	double alone, both, t0, t64, own, shared, own_rw = NAN, shared_rw = NAN;
	cpu_set_t old;
	pthread_t t;

	*ceiling = *x = NAN;
	if (x_rw)
		*x_rw = NAN;
	if (!h)
		return;
	memset(h, 0, sizeof(*h));
	h->ring[0] = aligned_alloc(4096, 2 * MODEL_RING * 4096);
	if (!h->ring[0] || !probe_begin(&old)) {
		free(h->ring[0]);
		free(h);
		return;
	}
	h->ring[1] = h->ring[0] + MODEL_RING * 4096;
	memset(h->ring[0], 1, 2 * MODEL_RING * 4096);
	/* alone: before the partner exists */
	h->steps = MODEL_STEPS;
	alone = probe_phase(h, false, &h->own[0][0], false, h->ring[0]);
	h->steps = 0;
	t0 = probe_phase(h, false, &h->own[0][0], false, NULL);
	h->steps = 64;
	t64 = probe_phase(h, false, &h->own[0][0], false, NULL);
	h->phase = PROBE_PAGES;
	h->steps = MODEL_STEPS;
	if (!probe_partner(&t, partner, h, &h->go))
		goto out;
	both = probe_phase(h, true, &h->own[0][0], false, h->ring[0]);
	/* steps so that an iteration alone takes about the gap */
	h->steps = t64 > t0 && gap_ns > t0 ?
		(unsigned)fmin(MODEL_MAX_STEPS, round((gap_ns - t0) * 64 / (t64 - t0))) : 0;
	__atomic_store_n(&h->phase, PROBE_OWN, __ATOMIC_RELEASE);
	own = probe_phase(h, true, &h->own[0][0], false, NULL);
	__atomic_store_n(&h->phase, PROBE_SHARED, __ATOMIC_RELEASE);
	shared = probe_phase(h, true, &h->shared, false, NULL);
	if (x_rw) {
		__atomic_store_n(&h->phase, PROBE_OWN_RW, __ATOMIC_RELEASE);
		own_rw = probe_phase(h, true, &h->own[0][0], true, NULL);
		__atomic_store_n(&h->phase, PROBE_SHARED_RW, __ATOMIC_RELEASE);
		shared_rw = probe_phase(h, true, &h->shared, true, NULL);
	}
	__atomic_store_n(&h->phase, PROBE_STOP, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	if (!h->err && !isnan(alone) && !isnan(both))
		*ceiling = fmin(alone / both, 1.0);
	if (!h->err && !isnan(own) && !isnan(shared))
		*x = fmax(shared - own, 0);
	if (x_rw && !h->err && !isnan(own_rw) && !isnan(shared_rw))
		*x_rw = fmax(shared_rw - own_rw, 0);
out:
	probe_end(&old);
	free(h->ring[0]);
	free(h);
}

/*
 * probe_stream() - s: how much more CPU 0 takes to clear a 4 KiB frame while CPU 1 clears
 * frames too, each walking a ring of its own of MODEL_STREAM_MIB, so that every frame comes
 * from DRAM as a fault's fresh page does. The medians of MODEL_BATCHES batches alone and
 * then beside the partner (only batches in which the partner cleared between half and twice
 * as many frames). NAN where there are not two CPUs or no memory.
 */
struct stream {
	char *ring[2];
	size_t frames;
	volatile int stop;
	volatile int go;
	_Alignas(64) unsigned long done1;
	int err;
};

static void stream_clear(struct stream *st, int cpu, size_t *pos)
{
	size_t i = (*pos)++;

	memset(st->ring[cpu] + i % st->frames * 4096, (int)i, 4096);
	__asm__ volatile("" : : "r"(st->ring[cpu]) : "memory");
}

static void *stream_partner(void *arg)
{
	struct stream *st = arg;
	size_t pos = 0;

	st->err = pin_to(1);
	__atomic_store_n(&st->go, 1, __ATOMIC_RELEASE);
	while (!st->stop) {
		stream_clear(st, 1, &pos);
		__atomic_store_n(&st->done1, st->done1 + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static double stream_phase(struct stream *st, bool both, size_t *pos)
{
	double t[MODEL_BATCHES];
	unsigned n = 0;

	for (unsigned b = 0; b < MODEL_BATCHES; b++) {
		unsigned long d0 = __atomic_load_n(&st->done1, __ATOMIC_RELAXED), other;
		double t0 = now_ns(), t1;

		for (unsigned i = 0; i < MODEL_STREAM_BATCH; i++)
			stream_clear(st, 0, pos);
		t1 = now_ns();
		other = __atomic_load_n(&st->done1, __ATOMIC_RELAXED) - d0;
		if (!both || (other * 2 >= MODEL_STREAM_BATCH && other <= 2 * MODEL_STREAM_BATCH))
			t[n++] = (t1 - t0) / MODEL_STREAM_BATCH;
	}
	if (!n)
		return NAN;
	qsort(t, n, sizeof(t[0]), cmp_double);
	return t[n / 2];
}

static double probe_stream(double *alone_ns)
{
	size_t len = (size_t)MODEL_STREAM_MIB << 20, pos = 0;
	struct stream *st = aligned_alloc(64, sizeof(*st));
	double alone = NAN, both = NAN;
	cpu_set_t old;
	pthread_t t;
	int err;

	*alone_ns = NAN;
	if (!st)
		return NAN;
	memset(st, 0, sizeof(*st));
	st->frames = len / 4096;
	st->ring[0] = aligned_alloc(4096, 2 * len);
	if (!st->ring[0] || !probe_begin(&old)) {
		free(st->ring[0]);
		free(st);
		return NAN;
	}
	st->ring[1] = st->ring[0] + len;
	memset(st->ring[0], 1, 2 * len); /* every frame backed before the clock runs */
	alone = stream_phase(st, false, &pos);
	if (probe_partner(&t, stream_partner, st, &st->go)) {
		both = stream_phase(st, true, &pos);
		st->stop = 1;
		pthread_join(t, NULL);
	}
	err = st->err;
	probe_end(&old);
	free(st->ring[0]);
	free(st);
	*alone_ns = alone;
	return err || isnan(alone) || isnan(both) ? NAN : fmax(both - alone, 0);
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

		int got;

		if (line[0] == '#')
			continue;
		/* rw_visits and frames came last, later: a file without them has none */
		got = sscanf(line, "%63s %31s %lf %lf %lf %lf %lf %lf %lf %lf", id, cfg, &m.lines,
			     &m.visits, &m.hot, &m.rmws, &m.cs_share, &m.units, &m.rw, &m.frames);
		if (got < 8 || m.units < 1)
			continue;
		if (got == 8 || m.rw < 0 || m.rw > m.visits)
			m.rw = 0;
		if (got < 10 || !(m.frames >= 0))
			m.frames = 0;
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

/* The trace's figures for the experiments of @rep; the number of rows that name one. */
int report_model_load(const struct report *rep)
{
	struct model_in (*in)[NR_CFG] = calloc(rep->nr_exps ? rep->nr_exps : 1, sizeof(*in));
	int n;

	if (!in)
		return -ENOMEM;
	n = read_inputs(rep, in);
	free(model_saved);
	model_saved = in;
	model_rep = rep;
	return n;
}

bool report_model_has(const struct report *rep, unsigned exp, enum report_cfg c)
{
	return model_saved && model_rep == rep && exp < rep->nr_exps && model_saved[exp][c].have;
}

/* The 1-CPU cost of an iteration: the check's fastest 1-task sample, else the table's run. */
static bool model_t1(const struct report_experiment *e, enum report_cfg c, double *t1_ns)
{
	double one = e->check[c].best[0];

	if (one <= 0 && (!report_value(e, c, 0, METRIC_OPS, &one) || one <= 0))
		return false;
	*t1_ns = 1e9 / one;
	return true;
}

/* After run_check()'s series: the gap between two visits of this configuration's unit, and
 * the ceiling and the line cost at that gap, measured now. */
void report_model_calibrate(const struct report *rep, unsigned exp, enum report_cfg c)
{
	struct report_experiment *e = &rep->exps[exp];
	struct report_check *k = &e->check[c];
	const struct model_in *m;
	double t1, l;

	if (!report_model_has(rep, exp, c) || !model_t1(e, c, &t1))
		return;
	m = &model_saved[exp][c];
	l = m->visits * m->units;
	k->gap_ns = l > 0 ? t1 / l : 0;
	/* A probe in which no batch had both CPUs running (others took one) is made again. */
	for (int tries = 0; tries < MODEL_PROBE_TRIES; tries++) {
		probe(k->gap_ns, &k->ceiling, &k->line_ns, m->rw > 0 ? &k->line_rw_ns : NULL);
		k->stream_ns = m->frames > 0 ? probe_stream(&k->clear_ns) : 0;
		if (!isnan(k->ceiling) && !isnan(k->line_ns) &&
		    (m->rw <= 0 || !isnan(k->line_rw_ns)) && !isnan(k->stream_ns))
			break;
		usleep(20000);
	}
}

static bool report_model_has_any(const struct report *rep)
{
	for (unsigned i = 0; model_saved && model_rep == rep && i < rep->nr_exps; i++)
		for (int c = 0; c < NR_CFG; c++)
			if (model_saved[i][c].have)
				return true;
	return false;
}

/* ---- the model ---- */

/*
 * Efficiency at @n tasks with line cost @x and ceiling @ceil: (a) t(N) = t1 + L x each;
 * (b) the hot line moves at most once per x; (c) a conflicting lock's section and the
 * transfers made under it serialise. @hot_bound: (b) applies, which it does at the cited
 * cross-socket cost; at 2 CPUs, the line cost measured at the unit's own gap already is what
 * two CPUs queueing on one line pay per visit, so (b) would count the queue twice.
 */
static double model_eff(const struct model_in *m, double t1_ns, double tn_ns, double x,
			double x_rw, double c, double s, double ceil, unsigned n, bool hot_bound)
{
	double one = 1.0 / t1_ns, xn;
	/* the iteration's visits, those that read first at their own cost */
	double lx = m->units * ((m->visits - m->rw) * x + m->rw * x_rw);
	/* its frames, each paying s for the share of time the other task streams */
	double f = m->units * m->frames, sx = f > 0 ? f * s * fmin(1, f * c / t1_ns) : 0;

	if (n < 2)
		return 1.0;
	xn = n / (tn_ns + lx + sx);
	if (hot_bound && m->hot > 0)
		xn = fmin(xn, 1.0 / (m->hot * m->units * x));
	if (m->cs_share > 0)
		xn = fmin(xn, 1.0 / (m->cs_share * tn_ns + lx));
	return ceil * xn / (n * one);
}

/*
 * tN: what an iteration of the N-task configuration costs on one CPU (its N tasks time-sliced
 * on CPU 0, report.c's one_cpu_series()), where it differs from t1 by a path of its own: a
 * folio that several tasks pin is hot, and a hot pin is not the cold pin one task makes.
 * Where both tasks take a conflicting lock (cs_share > 0), time slices would measure a holder
 * preempted inside its section instead, so t1 stands; so it does without a measurement.
 */
static double model_tn(const struct model_in *m, const struct report_check *k, double t1_ns)
{
	if (m->cs_share > 0 || k->best_one_cpu <= 0)
		return t1_ns;
	/* More tasks on one CPU never make an iteration cheaper: a tN below t1 is the 1-task
	 * series' noise, and the model takes no efficiency above what the lines allow. */
	return fmax(t1_ns, 1e9 / k->best_one_cpu);
}

/* This machine's prediction at @n tasks: the check's measured line cost and ceiling. */
static bool model_eff_here(const struct model_in *m, const struct report_check *k,
			   double t1_ns, unsigned n, double *eff)
{
	double x = m->visits > 0 ? k->line_ns : 0, x_rw = m->rw > 0 ? k->line_rw_ns : 0;
	double s = m->frames > 0 ? k->stream_ns : 0, c = m->frames > 0 ? k->clear_ns : 0;

	if (isnan(x) || isnan(x_rw) || isnan(s) || isnan(c) || isnan(k->ceiling) ||
	    k->ceiling <= 0)
		return false;
	*eff = model_eff(m, t1_ns, model_tn(m, k, t1_ns), x, x_rw, c, s, k->ceiling, n, false);
	return true;
}

struct model_count {
	unsigned held, checked;
	double others_sum, others_max;
	unsigned runs;
};

static void print_cfg(FILE *f, const struct report_experiment *e, enum report_cfg c,
		      const struct model_in *m, struct model_count *cnt)
{
	const struct report_check *k = &e->check[c];
	unsigned n = e->tasks[report_top_point(e)];
	double t1, meas, pred = NAN;

	if (!m->have || !model_t1(e, c, &t1))
		return;
	fprintf(f, "model %-18s %-6s lines %2.0f visits %4.1f x%-4.0f rmw %4.1f cs %3.0f%% %5.0f ns"
		" gap %5.0f ns x %3.0f ns", e->id, report_cfg_names[c], m->lines, m->visits,
		m->units, m->rmws, 100 * m->cs_share, m->cs_share * t1, k->gap_ns, k->line_ns);
	if (m->rw > 0)
		fprintf(f, " (%.1f read before an RMW: %.0f ns)", m->rw, k->line_rw_ns);
	if (m->frames > 0)
		fprintf(f, " frames %.1f c %.0f ns s %.0f ns", m->frames, k->clear_ns,
			k->stream_ns);
	fprintf(f, " ceil %.2f path %.2f", k->ceiling, t1 / model_tn(m, k, t1));
	if (!model_eff_here(m, k, t1, n, &pred))
		fprintf(f, "  eff(%u) model -", n);
	else
		fprintf(f, "  eff(%u) model %.2f", n, pred);
	if (k->best[0] > 0 && k->best[1] > 0) {
		bool ok;

		/* A comparison without a prediction (no probe had both CPUs) counts as off. */
		meas = k->best[1] / (n * k->best[0]);
		ok = !isnan(pred) && fabs(pred - meas) <= 0.1;
		fprintf(f, " measured %.2f %s (others %.0f%%, at most %.0f%%)", meas,
			ok ? "ok" : "OFF", 100 * k->others_sum / k->runs, 100 * k->others_max);
		cnt->checked++;
		cnt->held += ok;
		cnt->others_sum += k->others_sum;
		cnt->runs += k->runs;
		cnt->others_max = fmax(cnt->others_max, k->others_max);
	}
	for (size_t j = 0; j < sizeof(model_cpus) / sizeof(model_cpus[0]); j++)
		fprintf(f, "  eff(%u) %.3f", model_cpus[j],
			model_eff(m, t1, model_tn(m, k, t1), MODEL_BIG_LINE_NS,
				  MODEL_BIG_LINE_NS, 0, 0, 1.0, model_cpus[j], true));
	fputc('\n', f);
}

/* pin_fast: predicted after/before at 256 CPUs beside the seed's x46.6. */
static void print_pin_fast(FILE *f, const struct report_experiment *e,
			   const struct model_in in[NR_CFG])
{
	double b, a, eb, ea;

	if (strcmp(e->id, "pin_fast") || !in[CFG_BEFORE].have || !in[CFG_AFTER].have ||
	    !model_t1(e, CFG_BEFORE, &b) || !model_t1(e, CFG_AFTER, &a))
		return;
	eb = model_eff(&in[CFG_BEFORE], b, model_tn(&in[CFG_BEFORE], &e->check[CFG_BEFORE], b),
		       MODEL_BIG_LINE_NS, MODEL_BIG_LINE_NS, 0, 0, 1.0, 256, true);
	ea = model_eff(&in[CFG_AFTER], a, model_tn(&in[CFG_AFTER], &e->check[CFG_AFTER], a),
		       MODEL_BIG_LINE_NS, MODEL_BIG_LINE_NS, 0, 0, 1.0, 256, true);
	fprintf(f, "model pin_fast after/before at 256 CPUs: %.1fx (seed 2021: 25,617 -> "
		"1,194,790 ops/s, x46.6)\n", (ea / a) / (eb / b));
	/* The ratio scales with this machine's 1-CPU cost; the before's collapse does not: it
	 * is the hot line's bound, the same on any machine with the same transfer cost. */
	fprintf(f, "model pin_fast at 256 CPUs: before %.0f ops/s (seed 25,617), after %.0f "
		"(seed 1,194,790; this machine's 1-CPU cost x 256)\n", 256e9 * eb / b,
		256e9 * ea / a);
}

void report_model_print(FILE *f, const struct report *rep)
{
	struct model_count cnt = { 0 };

	fprintf(f, "\nmodel: eff(2) from the trace, each configuration's own series of runs "
		"(1 and 2 tasks in turn, %u each, the fastest sample of each task count), then 2 "
		"tasks on one CPU (path: t1 / tN), the line cost and the ceiling; %.0f ns a "
		"transfer (cross-socket, cited) at 16/64/256 CPUs\n", REPORT_CHECK_PAIRS,
		MODEL_BIG_LINE_NS);
	if (!report_model_has_any(rep)) {
		fprintf(f, "model: skipped (%s)\n", bench_nproc() < 2 ? "fewer than two CPUs" :
			"no trace figures in <out>/commuter/model.tsv; they need the clang "
			"trace build");
		return;
	}
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		if (!e->scale)
			continue;
		for (int c = 0; c < NR_CFG; c++)
			print_cfg(f, e, c, &model_saved[i][c], &cnt);
		print_pin_fast(f, e, model_saved[i]);
	}
	fprintf(f, "model: %u of %u measured 2-CPU efficiencies within 0.1 of the model; other "
		"processes took %.0f%% of the machine on average over the checks' %u runs (at "
		"most %.0f%% in one)\n", cnt.held, cnt.checked,
		cnt.runs ? 100 * cnt.others_sum / cnt.runs : 0.0, cnt.runs, 100 * cnt.others_max);
}

/* The after configuration's predicted ops/s at @tasks on this machine, for the plots'
 * dashed "model" line. */
bool report_model_ops(const struct report_experiment *e, unsigned tasks, double *ops)
{
	double t1, eff;

	for (unsigned i = 0; model_saved && i < model_rep->nr_exps; i++) {
		const struct model_in *m = &model_saved[i][CFG_AFTER];

		if (strcmp(model_rep->exps[i].id, e->id) || !m->have ||
		    !model_t1(e, CFG_AFTER, &t1) ||
		    !model_eff_here(m, &e->check[CFG_AFTER], t1, tasks, &eff))
			continue;
		*ops = tasks * 1e9 / t1 * eff;
		return true;
	}
	return false;
}
