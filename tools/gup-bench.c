// SPDX-License-Identifier: MIT
/*
 * gup-bench.c - a micro-benchmark of pinning (not a test; make check does not run it).
 *
 * Prints, in one run:
 *  1. CPU ns per pin+unpin of one page (pm_pin_user_pages*_fast or slow, then
 *     pm_unpin_user_page), per thread, for: the fast path, the slow path, and the fast path
 *     with PM_KNOB_HAS_PINNED_ALWAYS_WRITE; at 1 thread and at -j threads (default: the
 *     number of CPUs), each thread pinning its own page of one shared address space.
 *     Each thread's own CPU time is used, so waiting for a CPU on a busy machine does not
 *     count, cache-line transfers do. A baseline row (private atomics, no pinmm call) shows
 *     how the machine itself scales. A "limit" row runs the least a lockless pin can do, on
 *     the same page: an RCU read section, the 4-level walk, add-unless-zero on the folio's
 *     count, the re-read of the PTE, and the subtraction that unpins - so the fast path's
 *     cost is shown against its floor, measured in the same run; and, as the figure to
 *     quote, the median ratio of five fast/limit pairs each run back to back.
 *  2. ns per page to unpin a -m MiB (default 1024) pin array, THP-backed and 4 KiB-backed:
 *     one pm_unpin_user_page() per page, one pm_unpin_user_pages() over the array, and one
 *     pm_unpin_user_page_range_dirty_lock() per physically contiguous run.
 *
 * Expected shape (the 2021 seed): with the knob, N threads are several times slower per pin
 * than 1; without it, N threads each run about as fast as 1.
 *
 * Usage: pinmm-gup-bench [-t SECONDS per point] [-j THREADS] [-m MIB] [-r REPEATS]
 * Numbers are read strictly (tools/lib/cli.c); a bad one prints usage and exits 1, and so
 * does a -m larger than the host's available memory (MemAvailable).
 * Build without sanitizers (make, not make SAN=...) for meaningful numbers; turn ASLR off
 * (setarch -R) for steadier ones.
 */
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "cli.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define THP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define MAX_THREADS 256

enum path { FAST, SLOW, BASELINE, LIMIT };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * The calling thread's CPU time: time spent waiting for a CPU (a loaded machine, more
 * threads than CPUs) does not count, cache-line transfers do.
 */
static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, long err)
{
	fprintf(stderr, "pinmm-gup-bench: %s: %s\n", what, pm_strerror(err));
	exit(1);
}

struct worker {
	struct pm_mm *mm;
	unsigned long addr;
	enum path path;
	int cpu;
	pthread_barrier_t *start;
	atomic_int *stop;
	unsigned long iters;
	double secs;
	long err;
	_Atomic unsigned long private_counter;
	pthread_t th;
} __attribute__((aligned(256)));

/*
 * The floor of a lockless pin+unpin of the page at @addr: what GUP-fast cannot skip. Uses
 * pinmm's internals (tools are built against them); returns false if the page is not there.
 */
static bool limit_once(struct pm_mm *mm, unsigned long addr)
{
	struct pm_machine *m = mm->m;
	pm_entry_t *e = &mm->pgd[pgd_index(addr)];
	struct pm_folio *folio;
	uint64_t v;
	pte_t pte;
	bool ok = false;

	pm_rcu_read_lock();
	v = atomic_load_acquire(e);
	if (v) {
		e = &entry_table(m, v)[pud_index(addr)];
		v = atomic_load_acquire(e);
	}
	if (v) {
		e = &entry_table(m, v)[pmd_index(addr)];
		v = atomic_load_acquire(e);
	}
	if (v && !(v & _PAGE_PSE)) {
		e = &entry_table(m, v)[pte_index(addr)];
		pte = ptep_get(e);
		folio = page_folio(pfn_to_page(m, pte_pfn(pte)));
		if (pte_present(pte) && pm__folio_try_get(folio, GUP_PIN_COUNTING_BIAS, INT_MAX)) {
			ok = pte_same(ptep_get_mb(e), pte);
			atomic_sub_release(&folio->page.xrefcount, GUP_PIN_COUNTING_BIAS);
		}
	}
	pm_rcu_read_unlock();
	return ok;
}

static void *pin_loop(void *arg)
{
	struct worker *w = arg;
	unsigned long n = 0;
	struct pm_page *page;
	double t0;

	if (w->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	pthread_barrier_wait(w->start);
	t0 = thread_cpu();
	while (w->path == BASELINE && !atomic_load_explicit(w->stop, memory_order_relaxed)) {
		/* About a fast pin's worth of private atomics: the machine's own scaling. */
		for (int i = 0; i < 64 * 6; i++)
			atomic_fetch_add_explicit(&w->private_counter, 1, memory_order_relaxed);
		n += 64;
	}
	while (w->path == LIMIT && !atomic_load_explicit(w->stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++)
			if (!limit_once(w->mm, w->addr)) {
				w->err = -EFAULT;
				atomic_store(w->stop, 1);
				break;
			}
		n += 64;
	}
	while (w->path != BASELINE && w->path != LIMIT &&
	       !atomic_load_explicit(w->stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++) {
			long r;

			if (w->path == FAST)
				r = pm_pin_user_pages_fast(w->mm, w->addr, 1, PM_FOLL_WRITE, &page);
			else
				r = pm_pin_user_pages(w->mm, w->addr, 1, PM_FOLL_WRITE, &page);

			if (r != 1) {
				w->err = r;
				atomic_store(w->stop, 1);
				break;
			}
			pm_unpin_user_page(page);
		}
		n += 64;
	}
	w->secs = thread_cpu() - t0;
	w->iters = n;
	return NULL;
}

/* Mean over threads of each thread's ns per pin+unpin. */
static double pin_point(unsigned knobs, enum path path, int nthreads, double secs)
{
	struct pm_config c = { .mem_bytes = 64 * MiB + nthreads * THP, .knobs = knobs };
	static struct worker w[MAX_THREADS];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_barrier_t start;
	atomic_int stop = 0;
	struct pm_machine *m;
	struct pm_mm *mm;
	double sum = 0;
	long base;

	m = pm_machine_create(&c);
	if (!m)
		die("pm_machine_create", -errno);
	mm = pm_mm_create(m);
	if (!mm)
		die("pm_mm_create", -errno);
	/* One page per thread, 2 MiB apart: each its own page table, its own cache lines. */
	base = pm_mmap(mm, 0, nthreads * THP, RW, PRIV, NULL, 0);
	if (base < 0)
		die("pm_mmap", base);
	pthread_barrier_init(&start, NULL, nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		char one = 1;

		w[i] = (struct worker){ .mm = mm, .addr = base + i * THP, .path = path,
					.cpu = ncpu > 0 ? i % ncpu : -1, .start = &start,
					.stop = &stop };
		if (pm_access(mm, w[i].addr, &one, 1, 1) != 1)
			die("pm_access", -EFAULT);
		pthread_create(&w[i].th, NULL, pin_loop, &w[i]);
	}
	pthread_barrier_wait(&start);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].err)
			die("pin", w[i].err);
		sum += w[i].secs * 1e9 / (double)w[i].iters;
	}
	pthread_barrier_destroy(&start);
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
	return sum / nthreads;
}

/*
 * The fast path over its limit, as the median of LIMIT_PAIRS ratios, each of a fast point and
 * a limit point run back to back (a quarter of @secs each). The rows above measure the two
 * seconds apart; a host that changes speed for seconds at a time (the development VMs do)
 * can move one and not the other. A pair sees the same host, and the median drops a pair
 * that a change fell into.
 */
#define LIMIT_PAIRS 5

static double paired_limit_ratio(int nthreads, double secs)
{
	double r[LIMIT_PAIRS];

	for (int i = 0; i < LIMIT_PAIRS; i++) {
		double fast = pin_point(0, FAST, nthreads, secs / 4);

		r[i] = fast / pin_point(0, LIMIT, nthreads, secs / 4);
		for (int j = i; j > 0 && r[j] < r[j - 1]; j--) { /* insertion sort */
			double t = r[j];

			r[j] = r[j - 1];
			r[j - 1] = t;
		}
	}
	return r[LIMIT_PAIRS / 2];
}

enum unpin_way { PER_PAGE, BATCHED, RANGE };

/* ns per page to unpin @len bytes pinned in @mm at @addr, best of @repeats. */
static double unpin_point(struct pm_mm *mm, unsigned long addr, size_t len, enum unpin_way way,
			  int repeats, struct pm_page **pages, unsigned long *runs)
{
	unsigned long n = len / PG, nruns;
	double best = 1e30;

	for (int rep = 0; rep < repeats; rep++) {
		long r = pm_pin_user_pages(mm, addr, n, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pages);
		double t0, t;

		if (r != (long)n)
			die("pin array", r < 0 ? r : -ENOMEM);
		/* Physically contiguous runs, as a registration's SG table would hold them. */
		nruns = 0;
		for (unsigned long i = 0; i < n;) {
			unsigned long j = i + 1;

			while (j < n &&
			       pm_page_to_pfn(pages[j]) == pm_page_to_pfn(pages[i]) + (j - i))
				j++;
			runs[nruns++] = i;
			i = j;
		}
		runs[nruns] = n;
		t0 = now();
		switch (way) {
		case PER_PAGE:
			for (unsigned long i = 0; i < n; i++)
				pm_unpin_user_page(pages[i]);
			break;
		case BATCHED:
			pm_unpin_user_pages(pages, n);
			break;
		case RANGE:
			for (unsigned long k = 0; k < nruns; k++)
				pm_unpin_user_page_range_dirty_lock(pages[runs[k]],
								    runs[k + 1] - runs[k], false);
			break;
		}
		t = (now() - t0) * 1e9 / (double)n;
		if (t < best)
			best = t;
	}
	return best;
}

static void unpin_table(size_t len, int repeats)
{
	struct pm_config c = { .mem_bytes = len + 64 * MiB };
	static const char *const ways[] = { "per page", "batched", "range" };
	struct pm_page **pages = malloc(len / PG * sizeof(*pages));
	unsigned long *runs = malloc((len / PG + 1) * sizeof(*runs));
	struct pm_machine *m = pm_machine_create(&c);
	struct pm_mm *mm;

	if (!pages || !runs || !m)
		die("setup", -ENOMEM);
	mm = pm_mm_create(m);
	if (!mm)
		die("pm_mm_create", -ENOMEM);
	printf("\nunpin a %zu MiB pin array, ns per page (best of %d):\n", len / MiB, repeats);
	printf("  %-14s %10s %10s %10s\n", "", ways[0], ways[1], ways[2]);
	for (int thp = 1; thp >= 0; thp--) {
		long addr = pm_mmap(mm, 0, len, RW, PRIV, NULL, 0);
		double ns[3];

		if (addr < 0)
			die("pm_mmap", addr);
		if (thp && pm_madvise(mm, addr, len, PM_MADV_HUGEPAGE))
			die("madvise", -EINVAL);
		for (int k = 0; k < 3; k++)
			ns[k] = unpin_point(mm, addr, len, k, repeats, pages, runs);
		printf("  %-14s %10.2f %10.2f %10.2f\n", thp ? "THP-backed" : "4 KiB-backed", ns[0],
		       ns[1], ns[2]);
		fflush(stdout);
		if (pm_munmap(mm, addr, len))
			die("pm_munmap", -EINVAL);
	}
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
	free(pages);
	free(runs);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pinmm-gup-bench [-t SECONDS] [-j THREADS] [-m MIB] [-r REPEATS]\n"
		"  -t seconds per point (0.5), -j threads (the CPUs, 1..%d), -m MiB of the pin\n"
		"  array (1024, a multiple of 2; K/M/G/T suffixes), -r repeats (3, 1..1000)\n",
		MAX_THREADS);
}

/* A bad number: what is wrong, usage, exit 1. */
static void check(int err, const char *opt, const char *arg)
{
	if (!err)
		return;
	cli_complain("pinmm-gup-bench", opt, arg, err);
	usage(stderr);
	exit(1);
}

int main(int argc, char **argv)
{
	double secs = 0.5;
	long nthreads = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t bytes = 1024 * MiB;
	unsigned u;
	int repeats = 3, opt;

	while ((opt = getopt(argc, argv, "t:j:m:r:h")) != -1) {
		switch (opt) {
		case 't':
			check(cli_parse_double(optarg, 0.001, 3600, &secs), "-t", optarg);
			break;
		case 'j':
			check(cli_parse_uint(optarg, 1, MAX_THREADS, &u), "-j", optarg);
			nthreads = u;
			break;
		case 'm':
			check(cli_parse_size(optarg, MiB, 2 * MiB, 1ULL << 40, &bytes), "-m", optarg);
			if (bytes % (2 * MiB)) {
				fprintf(stderr, "pinmm-gup-bench: -m '%s': not a multiple of 2 MiB\n",
					optarg);
				usage(stderr);
				return 1;
			}
			break;
		case 'r':
			check(cli_parse_uint(optarg, 1, 1000, &u), "-r", optarg);
			repeats = (int)u;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pinmm-gup-bench: unexpected '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	/* The pin array is touched whole, and so is its machine: refuse what cannot fit. */
	if (cli_check_working_set("pinmm-gup-bench", "-m", bytes))
		return 1;

	static const struct {
		const char *name;
		unsigned knobs;
		enum path path;
	} rows[] = {
		{ "fast", 0, FAST },
		{ "slow", 0, SLOW },
		{ "fast+ALWAYS_WRITE", PM_KNOB_HAS_PINNED_ALWAYS_WRITE, FAST },
		{ "baseline (no pin)", 0, BASELINE },
		{ "limit (walk+get+put)", 0, LIMIT },
	};
	double ns[5][2];

	printf("pin+unpin of one page, CPU ns per operation per thread (%.2f s per point):\n",
	       secs);
	printf("  %-20s %12s %8ld thr %10s\n", "", "1 thread", nthreads, "ratio N/1");
	for (int i = 0; i < 5; i++) {
		ns[i][0] = pin_point(rows[i].knobs, rows[i].path, 1, secs);
		ns[i][1] = pin_point(rows[i].knobs, rows[i].path, (int)nthreads, secs);
		printf("  %-20s %12.1f %12.1f %10.2f\n", rows[i].name, ns[i][0], ns[i][1],
		       ns[i][1] / ns[i][0]);
		fflush(stdout);
	}
	printf("  at %ld threads, ALWAYS_WRITE costs %.2fx the fast path per pin\n", nthreads,
	       ns[2][1] / ns[0][1]);
	printf("  (baseline: 6 private atomic adds per operation, no pinmm call; its N/1 ratio is\n"
	       "   what this machine gives perfectly scalable work; compare the others with it)\n");
	printf("  fast path against its limit (RCU section, 4-level walk, add-unless-zero, re-read,\n"
	       "  put): %.2fx at 1 thread, %.2fx at %ld threads (the rows above)\n",
	       ns[0][0] / ns[4][0], ns[0][1] / ns[4][1], nthreads);
	printf("  paired, the median of %d fast/limit pairs run back to back: %.2fx at 1 thread, "
	       "%.2fx at %ld threads\n", LIMIT_PAIRS, paired_limit_ratio(1, secs),
	       paired_limit_ratio((int)nthreads, secs), nthreads);
	unpin_table(bytes, repeats);
	return 0;
}
