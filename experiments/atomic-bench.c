// SPDX-License-Identifier: MIT
/*
 * atomic-bench.c - what one locked read-modify-write costs on this host, against a plain one,
 * wherever its line was: the measurement behind the zap's single instruction per page
 * (pm__folio_unmap_put, src/mem/folio.c) and behind counting locked instructions, not cache
 * misses, on pinmm's teardown paths.
 *
 *   pinmm-atomic-bench [-r ROUNDS]
 *
 * The working set is 32768 descriptors of 64 bytes (2 MiB: a 128 MiB mapping's worth of
 * frames), visited in address order as a zap visits them. Before each pass the lines are
 * made hot on this CPU, evicted by writing 64 MiB elsewhere, or last written by a thread on
 * another CPU; then one pass does, per descriptor, one locked subtract ("locked"), the same
 * with all lines of a group of 16 prefetched for writing first ("locked, prefetched"), two
 * locked subtracts on two 4-byte counts ("two locked", the zap before), one locked 8-byte
 * subtract over both ("one locked for two", the zap now), or a plain load and store
 * ("plain"). The figure is nanoseconds per descriptor, the best of ROUNDS passes. Nothing is
 * shared while a pass runs.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define NR_DESCS 32768UL
#define EVICT_BYTES (64UL << 20)

struct desc {
	union {
		struct {
			_Atomic int ref, map;
		};
		_Atomic uint64_t both;
	};
	char pad[56];
};
_Static_assert(sizeof(struct desc) == 64, "one descriptor per line");

enum where { HOT, EVICTED, REMOTE, NR_WHERE };
enum op { LOCKED, LOCKED_PREFETCHED, TWO_LOCKED, ONE_FOR_TWO, PLAIN, NR_OPS };

static const char *const where_name[NR_WHERE] = { "hot here", "evicted", "another CPU's" };
static const char *const op_name[NR_OPS] = {
	"locked", "locked, prefetched", "two locked", "one locked for two", "plain",
};

static struct desc *descs;
static char *evict;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pin_to(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void write_all(void)
{
	for (unsigned long i = 0; i < NR_DESCS; i++) {
		atomic_store_explicit(&descs[i].ref, 1 << 20, memory_order_relaxed);
		atomic_store_explicit(&descs[i].map, 1 << 20, memory_order_relaxed);
	}
}

static void *remote_writer(void *arg)
{
	pin_to(*(unsigned *)arg);
	write_all();
	return NULL;
}

static int prepare(enum where w, unsigned other_cpu)
{
	pthread_t th;

	if (w != REMOTE) {
		write_all();
		if (w == EVICTED)
			memset(evict, 1, EVICT_BYTES);
		return 0;
	}
	if (pthread_create(&th, NULL, remote_writer, &other_cpu))
		return -1;
	pthread_join(th, NULL);
	return 0;
}

static double pass(enum op op)
{
	double t0 = now_ns();

	for (unsigned long i = 0; i < NR_DESCS; i++) {
		struct desc *d = &descs[i];

		switch (op) {
		case LOCKED:
			atomic_fetch_sub(&d->ref, 1);
			break;
		case LOCKED_PREFETCHED:
			if (!(i % 16))
				for (unsigned long j = i; j < i + 16 && j < NR_DESCS; j++)
					__builtin_prefetch(&descs[j], 1);
			atomic_fetch_sub(&d->ref, 1);
			break;
		case TWO_LOCKED:
			atomic_fetch_sub(&d->map, 1);
			atomic_fetch_sub(&d->ref, 1);
			break;
		case ONE_FOR_TWO:
			atomic_fetch_sub(&d->both, (uint64_t)1 << 32 | 1);
			break;
		case PLAIN:
			atomic_store_explicit(&d->ref,
					      atomic_load_explicit(&d->ref, memory_order_relaxed) - 1,
					      memory_order_relaxed);
			break;
		default:
			break;
		}
	}
	return (now_ns() - t0) / (double)NR_DESCS;
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout, "usage: pinmm-atomic-bench [-r ROUNDS]\n"
		"  -r passes per figure, the best kept (5, 1..1000)\n");
	exit(rc);
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned rounds = 5, other = ncpu > 1 ? 1 : 0;
	int opt, err;

	while ((opt = getopt(argc, argv, "hr:")) != -1) {
		if (opt == 'h')
			usage(0);
		if (opt != 'r')
			usage(1);
		err = cli_parse_uint(optarg, 1, 1000, &rounds);
		if (err) {
			cli_complain("pinmm-atomic-bench", "-r", optarg, err);
			usage(1);
		}
	}
	if (optind != argc)
		usage(1);
	if (cli_check_working_set("pinmm-atomic-bench", "lines",
				  EVICT_BYTES + NR_DESCS * sizeof(struct desc)))
		return 1;
	descs = mmap(NULL, NR_DESCS * sizeof(struct desc), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	evict = mmap(NULL, EVICT_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (descs == MAP_FAILED || evict == MAP_FAILED) {
		fprintf(stderr, "pinmm-atomic-bench: out of memory\n");
		return 1;
	}
	pin_to(0);
	printf("ns per 64-byte descriptor, %lu in address order, best of %u passes%s\n", NR_DESCS,
	       rounds, ncpu > 1 ? "" : " (one CPU: \"another CPU's\" is this one's)");
	printf("  %-20s", "");
	for (int w = 0; w < NR_WHERE; w++)
		printf(" %14s", where_name[w]);
	printf("\n");
	for (int op = 0; op < NR_OPS; op++) {
		printf("  %-20s", op_name[op]);
		for (int w = 0; w < NR_WHERE; w++) {
			double best = 0;

			for (unsigned r = 0; r < rounds; r++) {
				double ns;

				if (prepare((enum where)w, other)) {
					fprintf(stderr, "pinmm-atomic-bench: pthread_create failed\n");
					return 1;
				}
				ns = pass((enum op)op);
				if (!r || ns < best)
					best = ns;
			}
			printf(" %14.2f", best);
		}
		printf("\n");
	}
	return 0;
}
