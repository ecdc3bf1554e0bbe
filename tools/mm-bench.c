// SPDX-License-Identifier: MIT
/*
 * mm-bench.c - micro-benchmarks of pinmm's fault and fork paths (not tests).
 *
 *   pinmm-mm-bench [fault|shmem|fork|all] [-r REPS] [-m MIB]
 *
 * fault  ns per 4 KiB anonymous write fault, per 2 MiB THP fault, per read fault (zero page)
 * shmem  ns per shmem read and write fault (first touch allocates), modern vs the pre-2010
 *        PM_KNOB_SHMEM_LOCK_TWICE, at 1 and 2 threads, disjoint slices and every thread
 *        touching every page (the reviewer's variant)
 * fork   ms to fork an address space of MIB (default 1024) populated with 4 KiB pages or
 *        THPs, with no pin and with every page pinned (the child gets copies)
 *
 * Numbers are read strictly (tools/lib/cli.c); a bad one or an unknown benchmark prints usage
 * and exits 1, and so does a fork of more than the host's available memory (MemAvailable).
 *
 * Every figure is the median of REPS runs (default 5), run side by side in one process, after
 * a warm-up run: the first touch of a machine's memory costs the host a page fault, which is
 * not pinmm's cost (and in a virtual machine can be many microseconds per page).
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pinmm/pinmm.h>

#include "cli.h"

static int reps = 5;
static unsigned long mib = 1024;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct pm_machine *machine(size_t bytes, unsigned knobs)
{
	struct pm_config cfg = { .mem_bytes = bytes, .knobs = knobs };
	struct pm_machine *m = pm_machine_create(&cfg);

	if (!m) {
		perror("pm_machine_create");
		exit(1);
	}
	return m;
}

static void die_if(int cond, const char *what, long err)
{
	if (cond) {
		fprintf(stderr, "pinmm-mm-bench: %s: %s\n", what, pm_strerror(err));
		exit(1);
	}
}

/* ---- anonymous faults ---- */

/* ns per fault: touch one byte in each @step of a fresh mapping of @len bytes. */
static double touch_ns(struct pm_mm *mm, size_t len, size_t step, bool thp, int write)
{
	long a = pm_mmap(mm, 0, len, PM_PROT_READ | PM_PROT_WRITE,
			 PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	char c = 1;
	double t;

	die_if(a < 0, "mmap", a);
	if (thp)
		pm_madvise(mm, (unsigned long)a, len, PM_MADV_HUGEPAGE);
	t = now();
	for (size_t off = 0; off < len; off += step) {
		long r = pm_access(mm, (unsigned long)a + off, &c, 1, write);

		die_if(r != 1, "access", r);
	}
	t = now() - t;
	pm_munmap(mm, (unsigned long)a, len);
	return t * 1e9 / (len / step);
}

static void bench_fault(void)
{
	struct pm_machine *m = machine(1280UL << 20, 0);
	struct pm_mm *mm = pm_mm_create(m);
	double w4[64], th[64], rd[64];

	touch_ns(mm, 1024UL << 20, 4096, false, 1); /* warm the machine's memory */
	for (int i = 0; i < reps; i++) {
		w4[i] = touch_ns(mm, 256UL << 20, 4096, false, 1);
		th[i] = touch_ns(mm, 512UL << 20, 2UL << 20, true, 1);
		rd[i] = touch_ns(mm, 256UL << 20, 4096, false, 0);
	}
	printf("fault: 4 KiB anonymous write fault   %8.0f ns (median of %d)\n", median(w4, reps),
	       reps);
	printf("fault: 2 MiB THP write fault         %8.0f ns (%.1f ns per 4 KiB)\n",
	       median(th, reps), median(th, reps) / 512);
	printf("fault: read fault (zero page)        %8.0f ns\n", median(rd, reps));
	pm_mm_destroy(mm);
	pm_machine_destroy(m);
}

/* ---- shmem faults ---- */

struct shmem_job {
	struct pm_mm *mm;
	unsigned long base, len;
	int write;
	pthread_barrier_t *start;
};

static void *shmem_worker(void *arg)
{
	struct shmem_job *j = arg;
	char c = 1;

	pthread_barrier_wait(j->start);
	for (unsigned long off = 0; off < j->len; off += 4096)
		pm_access(j->mm, j->base + off, &c, 1, j->write);
	return NULL;
}

/*
 * Seconds for @threads threads to fault a fresh object of @len bytes (one shared mm) on
 * machine @m, which is reused across runs so that its memory is warm.
 */
static double shmem_run(struct pm_machine *m, int threads, bool every, int write, size_t len)
{
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, len, 0);
	long a = pm_mmap(mm, 0, len, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED, f, 0);
	struct shmem_job jobs[8];
	pthread_t tid[8];
	pthread_barrier_t bar;
	double t;

	die_if(a < 0, "mmap shmem", a);
	pthread_barrier_init(&bar, NULL, threads + 1);
	for (int i = 0; i < threads; i++) {
		unsigned long slice = len / threads;

		jobs[i] = (struct shmem_job){ mm, (unsigned long)a + (every ? 0 : i * slice),
					      every ? len : slice, write, &bar };
		pthread_create(&tid[i], NULL, shmem_worker, &jobs[i]);
	}
	pthread_barrier_wait(&bar);
	t = now();
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t = now() - t;
	pthread_barrier_destroy(&bar);
	pm_munmap(mm, (unsigned long)a, len);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	return t;
}

static void bench_shmem(void)
{
	size_t len = 256UL << 20;
	struct pm_machine *modern = machine(len + (64UL << 20), 0);
	struct pm_machine *twice = machine(len + (64UL << 20), PM_KNOB_SHMEM_LOCK_TWICE);
	const char *mode[2] = { "disjoint", "every page" };

	/* Warm both machines' memory: the host's first touch is not what we measure. */
	shmem_run(modern, 1, false, 1, len);
	shmem_run(twice, 1, false, 1, len);
	for (int write = 0; write <= 1; write++) {
		double s[64];

		for (int i = 0; i < reps; i++)
			s[i] = shmem_run(modern, 1, false, write, len) * 1e9 / (len / 4096);
		printf("shmem: %s fault, 1 thread            %8.0f ns per page\n",
		       write ? "write" : "read ", median(s, reps));
	}
	for (int every = 0; every <= 1; every++) {
		for (int threads = 1; threads <= 2; threads++) {
			double mod[64], old[64], ratio[64];

			for (int i = 0; i < reps; i++) {
				mod[i] = shmem_run(modern, threads, every, 0, len);
				old[i] = shmem_run(twice, threads, every, 0, len);
				ratio[i] = old[i] / mod[i];
			}
			printf("shmem: %-10s %d thread%s: modern %.3f s, lock-twice %.3f s, "
			       "lock-twice/modern %.2f\n",
			       mode[every], threads, threads > 1 ? "s" : " ", median(mod, reps),
			       median(old, reps), median(ratio, reps));
		}
	}
	pm_machine_destroy(modern);
	pm_machine_destroy(twice);
}

/* ---- fork ---- */

static double fork_ms(struct pm_machine *m, bool thp, bool pin)
{
	size_t len = mib << 20;
	struct pm_mm *mm = pm_mm_create(m), *child;
	unsigned long npages = len >> 12;
	struct pm_page **pages = NULL;
	long a = pm_mmap(mm, 0, len, PM_PROT_READ | PM_PROT_WRITE,
			 PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_POPULATE, NULL, 0);
	double t;

	die_if(a < 0, "mmap", a);
	pm_madvise(mm, (unsigned long)a, len, thp ? PM_MADV_HUGEPAGE : PM_MADV_NOHUGEPAGE);
	if (thp) { /* POPULATE ran before the advice: refault as THPs */
		pm_madvise(mm, (unsigned long)a, len, PM_MADV_DONTNEED);
		for (size_t off = 0; off < len; off += 2UL << 20)
			pm_fault(mm, (unsigned long)a + off, PM_FAULT_WRITE);
	}
	if (pin) {
		pages = malloc(npages * sizeof(*pages));
		long n = pm_pin_user_pages_fast(mm, (unsigned long)a, npages,
						PM_FOLL_WRITE | PM_FOLL_LONGTERM, pages);
		die_if(n != (long)npages, "pin", n);
	}
	t = now();
	child = pm_mm_fork(mm);
	t = now() - t;
	die_if(!child, "fork", -errno);
	pm_mm_destroy(child);
	if (pin) {
		pm_unpin_user_pages(pages, npages);
		free(pages);
	}
	pm_mm_destroy(mm);
	return t * 1e3;
}

static void bench_fork(void)
{
	struct pm_machine *m = machine(2 * (mib << 20) + (256UL << 20), 0);

	fork_ms(m, false, true); /* warm the machine's memory */
	for (int thp = 0; thp <= 1; thp++) {
		double plain[64], pinned[64];

		for (int i = 0; i < reps; i++) {
			plain[i] = fork_ms(m, thp, false);
			pinned[i] = fork_ms(m, thp, true);
		}
		printf("fork: %lu MiB of %s: %8.2f ms unpinned, %8.2f ms all pinned (copied)\n",
		       mib, thp ? "THP      " : "4 KiB pages", median(plain, reps),
		       median(pinned, reps));
	}
	pm_machine_destroy(m);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pinmm-mm-bench [fault|shmem|fork|all] [-r REPS] [-m MIB]\n"
		"  -r runs per figure (5, 1..64), -m MiB forked (1024; K/M/G/T suffixes)\n");
}

/* A bad argument: what is wrong, usage, exit 1. */
static void check(int err, const char *opt, const char *arg)
{
	if (!err)
		return;
	cli_complain("pinmm-mm-bench", opt, arg, err);
	usage(stderr);
	exit(1);
}

int main(int argc, char **argv)
{
	static const char *const whats[] = { "all", "fault", "shmem", "fork" };
	const char *what = "all";
	uint64_t bytes;
	unsigned u;
	int opt;

	while ((opt = getopt(argc, argv, "r:m:h")) != -1) {
		switch (opt) {
		case 'r':
			check(cli_parse_uint(optarg, 1, 64, &u), "-r", optarg);
			reps = (int)u;
			break;
		case 'm':
			check(cli_parse_size(optarg, 1UL << 20, 1UL << 20, 1ULL << 40, &bytes), "-m",
			      optarg);
			mib = bytes >> 20;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc)
		what = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "pinmm-mm-bench: one benchmark at a time, not '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	for (u = 0; u < sizeof(whats) / sizeof(whats[0]) && strcmp(what, whats[u]); u++)
		;
	if (u == sizeof(whats) / sizeof(whats[0])) {
		fprintf(stderr, "pinmm-mm-bench: unknown benchmark '%s'\n", what);
		usage(stderr);
		return 1;
	}
	/* fork populates -m MiB, and its child gets a copy of every pinned page. */
	if ((!strcmp(what, "fork") || !strcmp(what, "all")) &&
	    cli_check_working_set("pinmm-mm-bench", "-m", 2 * (mib << 20)))
		return 1;
	if (!strcmp(what, "fault") || !strcmp(what, "all"))
		bench_fault();
	if (!strcmp(what, "shmem") || !strcmp(what, "all"))
		bench_shmem();
	if (!strcmp(what, "fork") || !strcmp(what, "all"))
		bench_fork();
	return 0;
}
