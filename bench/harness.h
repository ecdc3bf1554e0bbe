/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what pinmm-bench's own files share (the command line, the driver, running a
 * child pinmm-bench and parsing its output). Test cases use bench.h only.
 */
#ifndef PINMM_BENCH_HARNESS_H
#define PINMM_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "bench.h"

/* The options of one per-case run: will-it-scale's flags plus pinmm's. */
struct bench_opts {
	const struct bench_case *bc;
	unsigned nr_tasks;	/* -t, default 1 */
	unsigned samples;	/* -s, 0 = run until interrupted */
	unsigned warmup;	/* --warmup, samples discarded first; default 6 like main.c */
	unsigned interval_ms;	/* --interval-ms, one sample; default 1000 */
	bool smt;		/* -m: one task per hardware thread */
	bool no_affinity;	/* -n */
	bool verbose;		/* -v: every task's diff before each sample line */
	enum bench_mode mode;	/* --mode, default threads */
	const char *knobs;	/* --knobs as given, NULL = after */
	const char *variant;	/* --variant, NULL = the case's default */
	size_t size;		/* --size, 0 = the case's */
	const char *metrics;	/* --metrics FILE */
};

#define BENCH_DEFAULT_WARMUP 6

/* driver.c */
int bench_run_case(const struct bench_opts *o);
unsigned bench_nproc(void);
int bench_parse_knobs(const struct bench_case *bc, const char *s, unsigned *knobs);
const char *bench_knob_names(unsigned knobs, char *buf, size_t len);
bool bench_variant_valid(const struct bench_case *bc, const char *v);
const char *bench_default_variant(const struct bench_case *bc, char *buf, size_t len);

/* child.c: run `pinmm-bench CASE ...` as a child and read what it printed */
#define BENCH_MAX_METRICS 32
struct bench_result {
	int status;		/* 0 ok, 1 unavailable, -1 failed */
	long long average;	/* the average: line; -1 when missing */
	double idle;		/* % idle over the child's life, from /proc/stat */
	double wall_s;		/* the child's wall time */
	double others;		/* share of the machine other processes used meanwhile (0..1) */
	char title[256];	/* what followed "testcase:" */
	char unavailable[256];
	unsigned nr_metrics;
	struct {
		char key[48];
		char value[80];
	} metrics[BENCH_MAX_METRICS];
};
/**
 * bench_child_run() - run `pinmm-bench argv[1..]` with --metrics, wait, and fill @r.
 * @stderr_fd: where the child's stderr goes; -1 = ours.
 * Return: 0 (then r->status says how the run went), or -errno if it could not be started.
 */
int bench_child_run(char *const argv[], struct bench_result *r, int stderr_fd);
const char *bench_result_metric(const struct bench_result *r, const char *key);
double bench_result_metric_d(const struct bench_result *r, const char *key);
void bench_disable_aslr(bool warn);

/* runtest.c, report.c, main.c */
int bench_cmd_runtest(int argc, char **argv);
int bench_cmd_report(int argc, char **argv);
int bench_cmd_list(void);

#endif /* PINMM_BENCH_HARNESS_H */
