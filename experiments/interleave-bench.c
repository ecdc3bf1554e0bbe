// SPDX-License-Identifier: MIT
/*
 * interleave-bench.c - what it costs two CPUs to work on frames whose descriptors interleave,
 * with no line shared: the measurement behind the allocator's homes (src/mem/page_alloc.c).
 *
 *   pinmm-interleave-bench [-t SECONDS] [-j THREADS]
 *
 * Each thread replays page_fault3's memory traffic on 32768 frames of its own, without pinmm:
 * for every frame, two atomic adds on its 64-byte descriptor, a PTE store and a byte written
 * into its 4 KiB page; then the zap: the PTE exchanged for zero and three atomics on the
 * descriptor. Only the placement of the descriptors changes between rows: one array per
 * thread ("separate"), or one array in which the threads' descriptors alternate in runs of
 * N (a per-CPU cache refilling N frames at a time from shared buddy lists gives that).
 * Nothing is shared in any row: every line is written by one thread only. The figure is the
 * per-thread efficiency, rate(J threads) / (J x rate(1 thread)); a row far below "separate"
 * means the placement itself costs, whatever the code that runs on it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define NR_FRAMES 32768UL
#define FRAME 4096UL
#define MAX_THREADS 64

struct desc {
	_Atomic unsigned long flags;
	_Atomic int ref, map;
	char pad[48];
};
_Static_assert(sizeof(struct desc) == 64, "one descriptor per line");

struct worker {
	unsigned id, nthreads, run;	/* run = 0: separate arrays */
	struct desc *descs;		/* every thread's, NR_FRAMES * nthreads */
	char *frames;			/* likewise, NR_FRAMES * nthreads * FRAME */
	_Atomic unsigned long *ptes;	/* this thread's */
	_Atomic int *stop;
	unsigned long done;
	pthread_t th;
} __attribute__((aligned(128)));

/* Index of frame @i of thread @w in the shared arrays. */
static unsigned long slot(const struct worker *w, unsigned long i)
{
	if (!w->run)
		return w->id * NR_FRAMES + i;
	return (i / w->run) * w->run * w->nthreads + w->id * w->run + i % w->run;
}

static void *loop(void *arg)
{
	struct worker *w = arg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(ncpu > 0 ? (int)(w->id % (unsigned long)ncpu) : 0, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	/* At least one round, so that a point shorter than a round (-t 0.01 on a loaded
	 * machine) still measures something rather than 0 frames. */
	do {
		for (unsigned long i = 0; i < NR_FRAMES; i++) {
			unsigned long s = slot(w, i);
			struct desc *d = &w->descs[s];

			atomic_fetch_add(&d->ref, 1);
			atomic_fetch_add(&d->map, 1);
			atomic_store_explicit(&w->ptes[i], s << 12 | 0x67, memory_order_release);
			w->frames[s * FRAME] = 1;
		}
		for (unsigned long i = 0; i < NR_FRAMES; i++) {
			struct desc *d = &w->descs[slot(w, i)];

			if (atomic_exchange(&w->ptes[i], 0)) {
				atomic_fetch_sub(&d->map, 1);
				atomic_fetch_or(&d->flags, 8);
				atomic_fetch_sub(&d->ref, 1);
			}
		}
		w->done += NR_FRAMES;
	} while (!atomic_load_explicit(w->stop, memory_order_relaxed));
	return NULL;
}

/* Frames per second, all threads together, for one placement. */
static double point(unsigned nthreads, unsigned run, double secs, struct desc *descs,
		    char *frames, _Atomic unsigned long *ptes)
{
	static struct worker w[MAX_THREADS];
	_Atomic int stop = 0;
	unsigned long total = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ .id = i, .nthreads = nthreads, .run = run, .descs = descs,
					.frames = frames, .ptes = ptes + i * NR_FRAMES,
					.stop = &stop };
		if (pthread_create(&w[i].th, NULL, loop, &w[i])) {
			fprintf(stderr, "pinmm-interleave-bench: pthread_create failed\n");
			exit(1);
		}
	}
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(w[i].th, NULL);
		total += w[i].done;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)total / ((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout, "usage: pinmm-interleave-bench [-t SECONDS] [-j THREADS]\n"
		"  -t seconds per point (1), -j threads (2, 2..%d)\n", MAX_THREADS);
	exit(rc);
}

int main(int argc, char **argv)
{
	static const unsigned runs[] = { 0, 1, 64, 512, 4096, 16384 };
	unsigned nthreads = 2;
	double secs = 1.0, one;
	size_t frames_len, descs_len;
	_Atomic unsigned long *ptes;
	struct desc *descs;
	char *frames;
	int opt, err;

	while ((opt = getopt(argc, argv, "ht:j:")) != -1) {
		if (opt == 'h')
			usage(0);
		if (opt == 't')
			err = cli_parse_double(optarg, 0.01, 3600, &secs);
		else if (opt == 'j')
			err = cli_parse_uint(optarg, 2, MAX_THREADS, &nthreads);
		else
			usage(1);
		if (err) {
			cli_complain("pinmm-interleave-bench", opt == 't' ? "-t" : "-j", optarg, err);
			usage(1);
		}
	}
	if (optind != argc)
		usage(1);
	frames_len = NR_FRAMES * nthreads * FRAME;
	descs_len = NR_FRAMES * nthreads * sizeof(struct desc);
	if (cli_check_working_set("pinmm-interleave-bench", "frames", frames_len + descs_len))
		return 1;
	frames = mmap(NULL, frames_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	descs = mmap(NULL, descs_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ptes = calloc(NR_FRAMES * nthreads, sizeof(*ptes));
	if (frames == MAP_FAILED || descs == MAP_FAILED || !ptes) {
		fprintf(stderr, "pinmm-interleave-bench: out of memory\n");
		return 1;
	}
	madvise(frames, frames_len, MADV_HUGEPAGE); /* as the machine's memory */
	memset(frames, 0, frames_len);
	memset(descs, 0, descs_len);

	printf("page_fault3's memory traffic, %lu frames per thread, %.2f s per point\n",
	       NR_FRAMES, secs);
	one = point(1, 0, secs, descs, frames, ptes);
	printf("  1 thread                        %7.2f M frames/s\n", one / 1e6);
	printf("  %u threads, descriptors          %7s             efficiency\n", nthreads, "");
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		double r = point(nthreads, runs[i], secs, descs, frames, ptes);
		char what[32];

		if (runs[i])
			snprintf(what, sizeof(what), "interleaved by %u", runs[i]);
		else
			snprintf(what, sizeof(what), "separate");
		printf("    %-28s %7.2f M frames/s   %.2f\n", what, r / 1e6, r / (nthreads * one));
	}
	return 0;
}
