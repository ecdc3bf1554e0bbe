// SPDX-License-Identifier: MIT
/*
 * util.c - what the cases share that is neither pinmm nor host specific: memory shared with
 * forked tasks, an abortable cross-process barrier, a clock, and per-task duration samples.
 *
 * Everything here works across fork(): it lives in MAP_SHARED anonymous memory and the
 * barrier sleeps on a shared (not FUTEX_PRIVATE) futex.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static size_t page_round(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (size + page - 1) / page * page;
}

void *bench_shared_alloc(size_t size)
{
	void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* Counters and flags: keep them in small pages, one line per owner. */
	madvise(p, page_round(size), MADV_NOHUGEPAGE);
	return p;
}

void bench_shared_free(void *p, size_t size)
{
	if (p)
		munmap(p, page_round(size));
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- barrier ---- */

void bench_barrier_init(struct bench_barrier *b, unsigned n)
{
	b->arrived = 0;
	b->generation = 0;
	b->n = n;
}

static void futex_wait_shared(uint32_t *word, uint32_t val, long timeout_ns)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = timeout_ns };

	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_shared(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * A generation barrier. The generation is read before arriving: a task that left the previous
 * round saw the new generation (acquire), and the last arriver reset the count before
 * publishing it (release), so the next round starts from a clean count. When the run stops
 * the waiters leave with false and the count is left as it is: nobody waits on it again.
 */
bool bench_barrier_wait(const struct bench_run *run, struct bench_barrier *b)
{
	uint32_t gen = __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE);

	if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_ACQ_REL) == b->n) {
		__atomic_store_n(&b->arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&b->generation, gen + 1, __ATOMIC_RELEASE);
		futex_wake_shared(&b->generation);
		return true;
	}
	while (__atomic_load_n(&b->generation, __ATOMIC_ACQUIRE) == gen) {
		if (bench_stopping(run))
			return false;
		futex_wait_shared(&b->generation, gen, 10 * 1000 * 1000);
	}
	return true;
}

/* ---- duration samples ---- */

struct bench_samples {
	size_t bytes;
	unsigned nr_tasks;
	unsigned cap;
	/* then per task: a count (padded to 256 bytes) and cap samples */
};

static unsigned long long *samples_count(const struct bench_samples *s, unsigned task)
{
	size_t per = BENCH_COUNTER_STRIDE + (size_t)s->cap * sizeof(uint64_t);

	return (unsigned long long *)((char *)s + BENCH_COUNTER_STRIDE + per * task);
}

static uint64_t *samples_data(const struct bench_samples *s, unsigned task)
{
	return (uint64_t *)((char *)samples_count(s, task) + BENCH_COUNTER_STRIDE);
}

struct bench_samples *bench_samples_create(unsigned nr_tasks, unsigned cap)
{
	size_t per = BENCH_COUNTER_STRIDE + (size_t)cap * sizeof(uint64_t);
	size_t bytes = BENCH_COUNTER_STRIDE + per * nr_tasks;
	struct bench_samples *s = bench_shared_alloc(bytes);

	if (!s)
		return NULL;
	s->bytes = bytes;
	s->nr_tasks = nr_tasks;
	s->cap = cap;
	return s;
}

void bench_samples_add(struct bench_samples *s, unsigned task, uint64_t ns)
{
	unsigned long long *count = samples_count(s, task);

	if (*count < s->cap)
		samples_data(s, task)[*count] = ns;
	/* Counted even when full, so count() tells how many there were. */
	(*count)++;
}

unsigned long bench_samples_count(const struct bench_samples *s)
{
	unsigned long n = 0;

	for (unsigned i = 0; i < s->nr_tasks; i++)
		n += *samples_count(s, i);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every kept sample, sorted; the caller frees it. */
static uint64_t *samples_sorted(const struct bench_samples *s, size_t *n)
{
	uint64_t *all;
	size_t k = 0;

	*n = 0;
	for (unsigned i = 0; i < s->nr_tasks; i++) {
		unsigned long long c = *samples_count(s, i);

		*n += c < s->cap ? c : s->cap;
	}
	all = malloc((*n ? *n : 1) * sizeof(*all));
	if (!all) {
		*n = 0;
		return NULL;
	}
	for (unsigned i = 0; i < s->nr_tasks; i++) {
		unsigned long long c = *samples_count(s, i);

		c = c < s->cap ? c : s->cap;
		memcpy(all + k, samples_data(s, i), c * sizeof(*all));
		k += c;
	}
	qsort(all, *n, sizeof(*all), cmp_u64);
	return all;
}

double bench_samples_median(const struct bench_samples *s)
{
	size_t n;
	uint64_t *all = samples_sorted(s, &n);
	double m = 0;

	if (n)
		m = n % 2 ? (double)all[n / 2] : ((double)all[n / 2 - 1] + (double)all[n / 2]) / 2;
	free(all);
	return m;
}

double bench_samples_mean(const struct bench_samples *s)
{
	size_t n;
	uint64_t *all = samples_sorted(s, &n);
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (double)all[i];
	free(all);
	return n ? sum / (double)n : 0;
}

void bench_samples_destroy(struct bench_samples *s)
{
	if (s)
		bench_shared_free(s, s->bytes);
}

/* ---- the summaries two cases share with their host twins ---- */

void bench_rounds_summary(struct bench_run *run, const char *what,
			  struct bench_samples *reg, struct bench_samples *unreg)
{
	unsigned long rounds = bench_samples_count(reg);
	double sec = (double)run->measured_ns / 1e9;
	double reg_us = bench_samples_median(reg) / 1e3;
	double unreg_us = bench_samples_median(unreg) / 1e3;

	if (!rounds) {
		bench_note(run, "%s: no round completed in the measurement window", run->bc->name);
		return;
	}
	/* The seed's line: per task, so that N tasks print a per-round latency too. */
	bench_note(run, "%lu rounds in %.3f sec: %.3f usec / round (%s)", rounds, sec,
		   sec * 1e6 * run->nr_tasks / (double)rounds, what);
	bench_note(run, "median: register %.1f usec, deregister %.1f usec, round %.1f usec",
		   reg_us, unreg_us, reg_us + unreg_us);
	bench_metric(run, "rounds", "%lu", rounds);
	bench_metric(run, "round_usec_mean", "%.3f", sec * 1e6 * run->nr_tasks / (double)rounds);
	bench_metric(run, "round_usec_median", "%.3f", reg_us + unreg_us);
	bench_metric(run, "reg_usec_median", "%.3f", reg_us);
	bench_metric(run, "unreg_usec_median", "%.3f", unreg_us);
}

void bench_area_summary(struct bench_run *run, struct bench_samples *area,
			unsigned long touches_per_area)
{
	unsigned long n = bench_samples_count(area);
	double rate = run->measured_ns ? (double)run->measured_iterations * 1e9 /
					 (double)run->measured_ns : 0;
	double median = bench_samples_median(area) / 1e9;

	if (!rate)
		return;
	/* The steady-state time per area at the rate measured over the whole window. */
	bench_metric(run, "area_sec", "%.6f", (double)touches_per_area / rate);
	if (n) {
		bench_metric(run, "areas", "%lu", n);
		bench_metric(run, "area_sec_median", "%.6f", median);
	}
	bench_note(run, "%s: %.0f pages touched/s: the area in %.4f s at that rate; "
		   "wall-clock median %.4f s over %lu complete areas", run->bc->name, rate,
		   (double)touches_per_area / rate, median, n);
}
