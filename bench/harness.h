/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what pinmm-bench's own files share (the command line, the driver, running a
 * child pinmm-bench and parsing its output). Test cases use bench.h only.
 *
 * The files form layers; each uses only files below it, never one beside or above it
 * (tests/scripts/bench_layers.sh checks the objects):
 *
 *   main.c			the command line: driver.c, runtest.c, report.c, cases.c,
 *				knobs.c, args.c
 *   runtest.c			`runtest`: child.c, cases.c, topology.c, args.c
 *   report.c			`report`: report_experiments.c, report_out.c, report_fmt.c,
 *				child.c, topology.c, util.c, args.c
 *   report_experiments.c	the table of experiments the report runs (data only)
 *   report_out.c		results/: report_fmt.c, child.c, topology.c
 *   report_fmt.c		figures and their formats: child.c
 *   child.c			a child pinmm-bench and what it printed: topology.c, util.c
 *   driver.c			one case, tasks and sampling: knobs.c, topology.c, util.c, run.c
 *   cases.c, cases/NAME.c	the case table; the cases use bench.h's API only
 *   churn.c			a writer of mmap_lock: pm.c, run.c
 *   pm.c, host.c, util.c	the helpers of bench.h: run.c
 *   run.c, knobs.c, topology.c	the run as cases see it; --knobs, --variant; the CPUs
 *   args.c			the numbers on the command lines (tools/lib/cli.c)
 */
#ifndef PINMM_BENCH_HARNESS_H
#define PINMM_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	bool range_mm;		/* --mm range: PM_MACHINE_RANGE_MM (default linux) */
};

#define BENCH_DEFAULT_WARMUP 6

/* Offset 0 of the shared area: the control line. Task i's slot is at (i + 1) * 256. */
struct bench_shared {
	uint32_t stop;		/* written by the driver, read through bench_stopping() */
	uint32_t phase;		/* enum bench_phase, read through bench_phase() */
};

/* cases.c: the table of BENCH_CASE_LIST */
extern const struct bench_case *const bench_cases[];
const struct bench_case *bench_find_case(const char *name);

/* run.c: the driver's side of what the cases see */
/** bench_run_cleanups() - run the bench_at_cleanup() hooks, last registered first. */
void bench_run_cleanups(struct bench_run *run);

/* knobs.c */
int bench_parse_knobs(const struct bench_case *bc, const char *s, unsigned *knobs);
const char *bench_knob_names(unsigned knobs, char *buf, size_t len);
bool bench_variant_valid(const struct bench_case *bc, const char *v);
const char *bench_default_variant(const struct bench_case *bc, char *buf, size_t len);
/** bench_check_case_opts() - 0, or -EINVAL after saying what --knobs or --variant got wrong. */
int bench_check_case_opts(const struct bench_opts *o);

/* topology.c: CPUs, and hwloc's cores or hardware threads to bind tasks to */
struct bench_topo;
struct bench_cpuset;
unsigned bench_nproc(void);
/** bench_topo_open() - 0 (*@out NULL when hwloc cannot help: tasks run unbound) or -1. */
int bench_topo_open(struct bench_topo **out, bool smt);
void bench_topo_close(struct bench_topo *t);
/** bench_topo_cpuset() - the CPUs of core (or hardware thread, @smt) @i modulo their number. */
struct bench_cpuset *bench_topo_cpuset(struct bench_topo *t, unsigned i);
/** bench_topo_binding() - where the calling thread may run now. */
struct bench_cpuset *bench_topo_binding(struct bench_topo *t);
/** bench_topo_bind() - bind the calling thread to @set (nothing when @set is NULL). */
void bench_topo_bind(struct bench_topo *t, const struct bench_cpuset *set);
void bench_cpuset_free(struct bench_cpuset *set);

/* driver.c */
int bench_run_case(const struct bench_opts *o);

/*
 * args.c: numbers, lists and words on the command lines. Each returns 0 (bench_arg_list: the
 * number of items), or a negative errno after saying on stderr which argument is wrong (the
 * caller prints usage and exits 1).
 */
#define BENCH_MAX_SAMPLES 1000000	/* -s, --warmup */
#define BENCH_MAX_INTERVAL_MS 3600000	/* --interval-ms: an hour */
int bench_arg_uint(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *out);
/* A size in bytes with an optional K, M, G or T suffix, at least 1. */
int bench_arg_size(const char *opt, const char *arg, size_t *out);
/* 0, or -ENOMEM after saying that @size is more than the host's MemAvailable. */
int bench_arg_working_set(const char *opt, size_t size);
/* cli_parse_list() as pinmm-bench: a comma list, no item empty or given twice. */
int bench_arg_list(const char *opt, const char *arg, unsigned max,
		   int (*item)(const char *word, void *ctx, uint64_t *key), void *ctx,
		   uint64_t *keys);
/* --mm linux|range, of the case form and runtest. */
int bench_arg_mm(const char *arg, bool *range_mm);

/* child.c: run `pinmm-bench CASE ...` as a child and read what it printed */
#define BENCH_MAX_METRICS 40
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
