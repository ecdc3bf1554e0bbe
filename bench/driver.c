// SPDX-License-Identifier: MIT
/*
 * driver.c - runs one case the way a will-it-scale binary does, and prints its output: the
 * tasks and the sampling. It uses the layers below it (run.c, util.c, knobs.c, topology.c)
 * and none above; main.c calls it. What a case may call is in bench.h, not here.
 *
 * Order of a run: counters in shared memory; prepare(); "testcase:"; tasks created one by
 * one, each bound with hwloc before it starts (the parent binds itself to the target, creates
 * the task, and restores its own binding, so the task's first touches are local); each task
 * runs task_init() and reports ready; the parent releases them together by writing one byte
 * to a pipe they poll; then the parent samples every interval:
 *
 *	testcase:<description>
 *	warmup
 *	min:<u64> max:<u64> total:<u64>		(--warmup lines, 6 by default)
 *	measurement
 *	min:<u64> max:<u64> total:<u64>		(-s lines)
 *	average:<u64>				(sum of the measured totals / -s)
 *
 * min and max are over the tasks' per-sample diffs, total is their sum. Unlike will-it-scale,
 * each diff is normalised to one second by the sample's measured length (the format is the
 * same; with 1 s samples the difference is a few parts in 10^5).
 *
 * After the tasks are gone: summary(), cleanup(), then the hooks registered with
 * bench_at_cleanup() (the pinmm machine of bench_pm_setup() is one), last registered first.
 *
 * Tasks are never cancelled: the parent raises the shared stop flag and joins (threads) or
 * waits (processes), so a case always gets to clean up, and a hung task is reported, not
 * silently dropped. A failing task stops the run: the error goes to stderr, no average: line
 * is printed, and the exit status is 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { TASK_STARTING, TASK_READY, TASK_DONE };

struct bench_slot {
	unsigned long long iterations;	/* first: bench_task.iterations points here */
	int err;			/* -errno from task_init() or loop() */
	int state;			/* TASK_* */
};

struct task_handle {
	struct bench_task t;
	pthread_t thread;
	pid_t pid;
	struct bench_cpuset *cpuset;	/* NULL when tasks run unbound */
	bool created;
};

struct driver {
	const struct bench_opts *o;
	const struct bench_case *bc;
	struct bench_run run;
	struct task_handle *tasks;
	size_t shared_bytes;
	struct bench_topo *topo;	/* NULL: tasks run unbound (-n) */
	int start_pipe[2];
	bool forks;
};

#define JOIN_TIMEOUT_S 120

static volatile sig_atomic_t interrupted;

static struct bench_slot *slot_of(const struct bench_run *run, unsigned i)
{
	return (struct bench_slot *)((char *)run->shared + (size_t)BENCH_COUNTER_STRIDE * (i + 1));
}

static void set_phase(struct driver *d, enum bench_phase p)
{
	__atomic_store_n(&d->run.shared->phase, p, __ATOMIC_RELEASE);
	if (d->bc->phase)
		d->bc->phase(&d->run, p);
}

/* ---- the tasks ---- */

static void wait_for_start(struct driver *d)
{
	struct pollfd pfd = { .fd = d->start_pipe[0], .events = POLLIN };

	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
}

static int task_body(struct driver *d, struct task_handle *h)
{
	struct bench_task *t = &h->t;
	struct bench_slot *slot = slot_of(&d->run, t->nr);
	int err = 0;

	if (h->cpuset)
		bench_topo_bind(d->topo, h->cpuset);
	if (d->bc->task_init)
		err = d->bc->task_init(t);
	if (err) {
		__atomic_store_n(&slot->err, err, __ATOMIC_RELAXED);
		__atomic_store_n(&slot->state, TASK_READY, __ATOMIC_RELEASE);
		return err;
	}
	__atomic_store_n(&slot->state, TASK_READY, __ATOMIC_RELEASE);
	wait_for_start(d);
	while (!bench_stopping(&d->run)) {
		err = d->bc->loop(t);
		if (err) {
			__atomic_store_n(&slot->err, err, __ATOMIC_RELEASE);
			break;
		}
	}
	if (d->bc->task_exit)
		d->bc->task_exit(t);
	__atomic_store_n(&slot->state, TASK_DONE, __ATOMIC_RELEASE);
	return err;
}

struct thread_arg {
	struct driver *d;
	struct task_handle *h;
};

static void *task_thread(void *p)
{
	struct thread_arg *a = p;
	struct driver *d = a->d;
	struct task_handle *h = a->h;

	free(a);
	task_body(d, h);
	return NULL;
}

static int spawn_thread(struct driver *d, struct task_handle *h)
{
	struct thread_arg *a = malloc(sizeof(*a));
	int err;

	if (!a)
		return -ENOMEM;
	a->d = d;
	a->h = h;
	err = pthread_create(&h->thread, NULL, task_thread, a);
	if (err) {
		free(a);
		return -err;
	}
	return 0;
}

static int spawn_process(struct driver *d, struct task_handle *h)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Die with the parent; let it stop us on ^C. Never return into main(). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		signal(SIGINT, SIG_IGN);
		close(d->start_pipe[1]);
		_exit(task_body(d, h) ? 1 : 0);
	}
	h->pid = pid;
	return 0;
}

static int create_task(struct driver *d, unsigned i)
{
	struct task_handle *h = &d->tasks[i];
	struct bench_cpuset *saved = NULL;
	int err;

	h->t.run = &d->run;
	h->t.nr = i;
	h->t.iterations = &slot_of(&d->run, i)->iterations;
	if (d->run.pm.nr_mms)
		h->t.mm = d->run.pm.mms[d->run.pm.nr_mms == 1 ? 0 : i];
	if (d->topo) {
		h->cpuset = bench_topo_cpuset(d->topo, i);
		saved = bench_topo_binding(d->topo);
		bench_topo_bind(d->topo, h->cpuset);
	}
	err = d->forks ? spawn_process(d, h) : spawn_thread(d, h);
	if (saved) {
		bench_topo_bind(d->topo, saved);
		bench_cpuset_free(saved);
	}
	h->created = !err;
	return err;
}

/* A forked task that died before reporting counts as failed. */
static bool process_died(struct driver *d, unsigned i)
{
	struct task_handle *h = &d->tasks[i];
	int status;

	if (!d->forks || !h->pid)
		return false;
	if (waitpid(h->pid, &status, WNOHANG) != h->pid)
		return false;
	h->pid = 0;
	if (!__atomic_load_n(&slot_of(&d->run, i)->err, __ATOMIC_ACQUIRE))
		__atomic_store_n(&slot_of(&d->run, i)->err, -ECHILD, __ATOMIC_RELEASE);
	return true;
}

/* Wait until every created task is ready or failed; returns the first task error. */
static int wait_ready(struct driver *d, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++) {
		struct bench_slot *s = slot_of(&d->run, i);

		while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == TASK_STARTING &&
		       !process_died(d, i) && !interrupted)
			usleep(1000);
	}
	for (unsigned i = 0; i < nr; i++) {
		int err = __atomic_load_n(&slot_of(&d->run, i)->err, __ATOMIC_ACQUIRE);

		if (err)
			return err;
	}
	return interrupted ? -EINTR : 0;
}

static void join_thread(struct driver *d, struct task_handle *h)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += JOIN_TIMEOUT_S;
	if (pthread_timedjoin_np(h->thread, NULL, &ts)) {
		fprintf(stderr, "pinmm-bench: %s: task %u did not stop within %d s\n",
			d->bc->name, h->t.nr, JOIN_TIMEOUT_S);
		fflush(NULL);
		_exit(1);
	}
}

static void wait_process(struct driver *d, struct task_handle *h)
{
	uint64_t deadline = bench_now_ns() + JOIN_TIMEOUT_S * 1000000000ull;
	int status;

	while (h->pid) {
		pid_t r = waitpid(h->pid, &status, WNOHANG);

		if (r == h->pid || (r < 0 && errno != EINTR)) {
			h->pid = 0;
			break;
		}
		if (bench_now_ns() > deadline) {
			fprintf(stderr, "pinmm-bench: %s: task %u did not stop within %d s, killed\n",
				d->bc->name, h->t.nr, JOIN_TIMEOUT_S);
			kill(h->pid, SIGKILL);
			deadline = UINT64_MAX;
		}
		usleep(1000);
	}
}

/* Raise the stop flag, release tasks still waiting for the start, and wait for all. */
static void stop_tasks(struct driver *d)
{
	__atomic_store_n(&d->run.shared->stop, 1, __ATOMIC_RELEASE);
	if (write(d->start_pipe[1], "x", 1) < 0)
		perror("pinmm-bench: start pipe");
	for (unsigned i = 0; i < d->run.nr_tasks; i++) {
		struct task_handle *h = &d->tasks[i];

		if (!h->created)
			continue;
		if (d->forks)
			wait_process(d, h);
		else
			join_thread(d, h);
		h->created = false;
	}
}

static void report_task_error(struct driver *d)
{
	for (unsigned i = 0; i < d->run.nr_tasks; i++) {
		int err = __atomic_load_n(&slot_of(&d->run, i)->err, __ATOMIC_ACQUIRE);

		if (err) {
			fprintf(stderr, "pinmm-bench: %s: task %u failed: %s\n", d->bc->name, i,
				strerror(-err));
			return;
		}
	}
}

static bool any_task_error(struct driver *d)
{
	for (unsigned i = 0; i < d->run.nr_tasks; i++) {
		if (__atomic_load_n(&slot_of(&d->run, i)->err, __ATOMIC_ACQUIRE) ||
		    process_died(d, i))
			return true;
	}
	return false;
}

/* ---- sampling ---- */

struct sampler {
	unsigned long long *prev;
	unsigned long long *totals;	/* every measured total, for the median */
	uint64_t last_ns;
	unsigned long long sum;		/* of measured totals */
	unsigned long long raw;		/* measured iterations, not normalised */
	uint64_t measured_ns;
	unsigned measured;
};

static void on_interrupt(int sig)
{
	interrupted = 1;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static bool sleep_until(uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ull),
		.tv_nsec = (long)(deadline_ns % 1000000000ull),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		if (interrupted)
			return false;
	return !interrupted;
}

/* One sample: every task's diff normalised to one second; prints the line. */
static unsigned long long take_sample(struct driver *d, struct sampler *s, bool measuring)
{
	unsigned long long min = ~0ull, max = 0, total = 0;
	uint64_t now = bench_now_ns();
	uint64_t elapsed = now - s->last_ns ? now - s->last_ns : 1;

	for (unsigned i = 0; i < d->run.nr_tasks; i++) {
		unsigned long long cur = __atomic_load_n(&slot_of(&d->run, i)->iterations,
							 __ATOMIC_RELAXED);
		unsigned long long diff = cur - s->prev[i];
		unsigned __int128 scaled = (unsigned __int128)diff * 1000000000u + elapsed / 2;
		unsigned long long norm = (unsigned long long)(scaled / elapsed);

		s->prev[i] = cur;
		if (measuring)
			s->raw += diff;
		if (d->o->verbose)
			printf("%4d -> %llu\n", (int)i, norm);
		min = norm < min ? norm : min;
		max = norm > max ? norm : max;
		total += norm;
	}
	if (measuring)
		s->measured_ns += elapsed;
	s->last_ns = now;
	printf("min:%llu max:%llu total:%llu\n", min, max, total);
	fflush(stdout);
	return total;
}

static void begin_measurement(struct driver *d)
{
	printf("measurement\n");
	fflush(stdout);
	set_phase(d, BENCH_PHASE_MEASURE);
}

/* Returns 0 after -s samples, 1 when interrupted, -1 when a task failed. */
static int sample_loop(struct driver *d, struct sampler *s)
{
	const struct bench_opts *o = d->o;
	uint64_t interval = (uint64_t)o->interval_ms * 1000000ull;
	uint64_t deadline = s->last_ns;

	printf("warmup\n");
	fflush(stdout);
	if (!o->warmup)
		begin_measurement(d);
	for (unsigned k = 0;; k++) {
		bool measuring = k >= o->warmup;
		unsigned long long total;

		deadline += interval;
		if (!sleep_until(deadline))
			return 1;
		total = take_sample(d, s, measuring);
		if (any_task_error(d))
			return -1;
		if (!measuring) {
			if (k + 1 == o->warmup)
				begin_measurement(d);
			continue;
		}
		s->sum += total;
		if (s->totals)
			s->totals[s->measured] = total;
		s->measured++;
		if (o->samples && s->measured == o->samples)
			return 0;
	}
}

static int cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

/* The median sample: what the report uses, so one disturbed second does not decide. */
static unsigned long long median_total(const struct sampler *s)
{
	unsigned n = s->measured;

	qsort(s->totals, n, sizeof(*s->totals), cmp_ull);
	return n % 2 ? s->totals[n / 2] : (s->totals[n / 2 - 1] + s->totals[n / 2]) / 2;
}

static void write_run_metrics(struct driver *d, const struct sampler *s)
{
	char knobs[160];

	bench_metric(&d->run, "case", "%s", d->bc->name);
	bench_metric(&d->run, "tasks", "%u", d->run.nr_tasks);
	bench_metric(&d->run, "mode", "%s", d->run.mode == BENCH_THREADS ? "threads" : "processes");
	bench_metric(&d->run, "knobs", "%s", bench_knob_names(d->run.knobs, knobs, sizeof(knobs)));
	bench_metric(&d->run, "mm", "%s", d->run.mm_flags == PM_MACHINE_RANGE_MM ? "range" : "linux");
	if (d->run.variant)
		bench_metric(&d->run, "variant", "%s", d->run.variant);
	bench_metric(&d->run, "samples", "%u", s->measured);
	bench_metric(&d->run, "measured_iterations", "%llu", s->raw);
	bench_metric(&d->run, "measured_sec", "%.6f", (double)s->measured_ns / 1e9);
	if (s->measured)
		bench_metric(&d->run, "average", "%llu", s->sum / s->measured);
	if (s->measured && s->totals)
		bench_metric(&d->run, "median", "%llu", median_total(s));
	/* After median_total()'s sort: the fastest sample, which the report's model check takes
	 * (others can only slow a sample down). */
	if (s->measured && s->totals)
		bench_metric(&d->run, "best", "%llu", s->totals[s->measured - 1]);
}

/* ---- the run ---- */

static int setup_shared(struct driver *d)
{
	d->shared_bytes = (size_t)BENCH_COUNTER_STRIDE * (d->run.nr_tasks + 1);
	d->run.shared = bench_shared_alloc(d->shared_bytes);
	if (!d->run.shared)
		return -errno;
	d->tasks = calloc(d->run.nr_tasks, sizeof(*d->tasks));
	if (!d->tasks)
		return -ENOMEM;
	if (pipe(d->start_pipe))
		return -errno;
	return 0;
}

static void teardown(struct driver *d)
{
	if (d->bc->cleanup)
		d->bc->cleanup(&d->run);
	bench_run_cleanups(&d->run);
	bench_topo_close(d->topo);
	for (unsigned i = 0; d->tasks && i < d->run.nr_tasks; i++)
		bench_cpuset_free(d->tasks[i].cpuset);
	free(d->tasks);
	if (d->start_pipe[0] >= 0) {
		close(d->start_pipe[0]);
		close(d->start_pipe[1]);
	}
	bench_shared_free(d->run.shared, d->shared_bytes);
	if (d->run.metrics)
		fclose(d->run.metrics);
}

static int init_run(struct driver *d, const struct bench_opts *o, char *variant, size_t vlen)
{
	struct bench_run *run = &d->run;

	d->o = o;
	d->bc = o->bc;
	d->start_pipe[0] = d->start_pipe[1] = -1;
	run->bc = o->bc;
	run->nr_tasks = o->nr_tasks;
	run->mode = o->mode;
	run->mm_flags = o->range_mm ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM;
	run->size = o->size;
	run->variant = o->variant ? o->variant : bench_default_variant(o->bc, variant, vlen);
	d->forks = (o->bc->flags & BENCH_F_HOST) && o->mode == BENCH_PROCESSES;
	if (bench_check_case_opts(o) || bench_parse_knobs(o->bc, o->knobs, &run->knobs))
		return -EINVAL;
	if (o->metrics) {
		run->metrics = fopen(o->metrics, "w");
		if (!run->metrics) {
			perror(o->metrics);
			return -errno;
		}
	}
	return setup_shared(d);
}

static int prepare(struct driver *d)
{
	int err = d->bc->prepare ? d->bc->prepare(&d->run) : 0;

	if (err == BENCH_UNAVAILABLE) {
		fprintf(stderr, "pinmm-bench: %s: not available%s: %s\n", d->bc->name,
			d->bc->flags & BENCH_F_HOST ? " on this kernel" : "", d->run.unavailable);
		bench_metric(&d->run, "unavailable", "%s", d->run.unavailable);
	} else if (err) {
		fprintf(stderr, "pinmm-bench: %s: prepare failed: %s\n", d->bc->name,
			strerror(-err));
	}
	return err;
}

static int start_tasks(struct driver *d)
{
	unsigned i;
	int err = 0;

	for (i = 0; i < d->run.nr_tasks && !err; i++)
		err = create_task(d, i);
	if (err) {
		fprintf(stderr, "pinmm-bench: %s: cannot create task %u: %s\n", d->bc->name,
			i - 1, strerror(-err));
		return err;
	}
	err = wait_ready(d, d->run.nr_tasks);
	if (err) {
		if (err != -EINTR)
			report_task_error(d);
		return err;
	}
	set_phase(d, BENCH_PHASE_WARMUP);
	if (write(d->start_pipe[1], "x", 1) != 1)
		return -errno;
	return 0;
}

int bench_run_case(const struct bench_opts *o)
{
	struct driver d = { 0 };
	struct sampler s = { 0 };
	char variant[64];
	int err, rc = 1;

	interrupted = 0;
	install_signals();
	err = init_run(&d, o, variant, sizeof(variant));
	if (err)
		goto out;
	err = prepare(&d);
	if (err) {
		rc = err == BENCH_UNAVAILABLE ? 0 : 1;
		goto out;
	}
	printf("testcase:%s\n", d.bc->description);
	fflush(stdout);
	s.prev = calloc(o->nr_tasks, sizeof(*s.prev));
	/* -s 0 runs until interrupted: no median then. */
	s.totals = o->samples ? calloc(o->samples, sizeof(*s.totals)) : NULL;
	if (!s.prev || (o->samples && !s.totals) ||
	    (!o->no_affinity && bench_topo_open(&d.topo, o->smt)))
		goto out_stop;
	err = start_tasks(&d);
	if (err)
		goto out_stop;
	s.last_ns = bench_now_ns();
	err = sample_loop(&d, &s);
	if (err < 0) {
		report_task_error(&d);
		goto out_stop;
	}
	set_phase(&d, BENCH_PHASE_DONE);
	if (!err && s.measured)
		printf("average:%llu\n", s.sum / s.measured);
	fflush(stdout);
	rc = 0;
out_stop:
	stop_tasks(&d);
	d.run.measured_ns = s.measured_ns;
	d.run.measured_iterations = s.raw;
	write_run_metrics(&d, &s);
	if (!rc && d.bc->summary)
		d.bc->summary(&d.run);
out:
	if (d.run.shared)
		teardown(&d);
	else if (d.run.metrics)
		fclose(d.run.metrics);
	free(s.prev);
	free(s.totals);
	return rc;
}
