/* SPDX-License-Identifier: MIT */
/*
 * report.h - the seed report's data: experiments, their configurations (before, v1, after,
 * host), the views the table shows, and the results of every run. report_experiments.c lists
 * the experiments, report.c runs them, report_fmt.c computes the figures, report_out.c writes
 * results/.
 */
#ifndef PINMM_BENCH_REPORT_H
#define PINMM_BENCH_REPORT_H

#include <stdio.h>

#include "harness.h"

#define REPORT_MAX_POINTS 8	/* task counts per experiment */
#define REPORT_MAX_ROUNDS 9	/* --rounds */

/* CFG_PROC: the after configuration in --mode processes (one mm per task): what sharing
 * nothing costs, beside which threads of one mm are judged. CFG_RANGE: the after
 * configuration on a machine of the range design (--mm range), threads of one mm. */
enum report_cfg { CFG_BEFORE, CFG_V1, CFG_AFTER, CFG_HOST, CFG_PROC, CFG_RANGE, NR_CFG };

enum report_metric {
	METRIC_OPS,		/* ops/s, the median sample; higher is better */
	METRIC_ROUND_USEC,	/* round_usec_median; lower is better */
	METRIC_RELEASE_USEC,	/* unreg_usec_median; lower is better */
	METRIC_AREA_SEC,	/* area_sec_median; lower is better */
	METRIC_FREE_BLOCKS,	/* free_block_pct: free 2 MiB blocks, % of all; higher is better */
};

struct report_config {
	const char *bench_case;	/* NULL: the experiment has no such configuration */
	const char *variant;
	const char *knobs;
	const char *mode;	/* NULL: threads */
	const char *mm;		/* --mm; NULL: linux */
};

struct report_view {
	const char *name;	/* the table's experiment column */
	const char *claim;	/* what the seed says, with its numbers */
	enum report_metric metric;
	double expect;		/* after/before must reach this (0: no expectation) */
	bool strictly;		/* > rather than >= */
	enum report_cfg after;	/* what "after" is; 0 (CFG_BEFORE) means CFG_AFTER */
};

#define REPORT_MAX_VIEWS 3

/*
 * The model's check of one configuration (report_model.c): its own series of child runs,
 * 1 task and N tasks in turn, and the line cost and ceiling measured just after it.
 */
#define REPORT_CHECK_PAIRS 3	/* 1-task and N-task runs, each, of a series */

struct report_check {
	unsigned runs;		/* child runs that gave a best sample, both task counts */
	double best[2];		/* the fastest sample's ops/s at 1 and at N tasks */
	double best_one_cpu;	/* ... at N tasks that share CPU 0: the N-task path's own cost */
	double others_sum;	/* of the runs' shares of the machine that others took */
	double others_max;
	double line_ns;		/* x: a shared visit's extra cost at this row's gap */
	double line_rw_ns;	/* ... of a visit that reads the line, then CASes it */
	double clear_ns;	/* c: clearing a frame that comes from DRAM, alone */
	double stream_ns;	/* s: ... beside the other CPU doing the same, the extra ns */
	double gap_ns;		/* the private work between two visits, t1 / visits */
	double ceiling;		/* 2-CPU efficiency of private work, measured */
};

struct report_experiment {
	const char *id;		/* file stem in results/ */
	const char *title;
	bool scale;		/* run at every task count, not only at 1 */
	bool shrinks;		/* --quick passes --size quick_size (the 1 GiB registrations) */
	struct report_config cfg[NR_CFG];
	struct report_view views[REPORT_MAX_VIEWS];
	const char *evidence;	/* metric keys (comma list) that show the mechanism at work */
	/* results, filled by the run */
	unsigned nr_points;
	unsigned tasks[REPORT_MAX_POINTS];
	struct bench_result res[NR_CFG][REPORT_MAX_POINTS];
	bool ran[NR_CFG][REPORT_MAX_POINTS];
	struct bench_result *rounds_res; /* --rounds > 1: [cfg][point][round], then the medians */
	struct report_check check[NR_CFG];
};

struct report {
	struct report_experiment *exps;
	unsigned nr_exps;
	unsigned tasks[REPORT_MAX_POINTS];
	unsigned nr_tasks;
	const char *out_dir;
	bool quick;
	const char *quick_size;	/* --size for the experiments that shrink in quick mode */
	bool host;
	bool plots;
	unsigned samples, warmup, interval_ms;
	unsigned rounds, round;	/* --rounds: passes over every point; the one running */
	unsigned retries;	/* runs repeated because other processes disturbed them */
	unsigned max_retries;
	double wall_s;
};

/* report_experiments.c: every experiment, in the table's order; a static assertion there
 * keeps the count right. */
#define REPORT_NR_EXPERIMENTS 18
extern struct report_experiment report_experiments[];

/* report_fmt.c: figures out of the results */
extern const char *const report_cfg_names[NR_CFG];
bool report_value(const struct report_experiment *e, enum report_cfg c, unsigned point,
		  enum report_metric m, double *v);
bool report_ratio(const struct report_experiment *e, const struct report_view *v, double *r);
bool report_efficiency(const struct report_experiment *e, enum report_cfg c, double *eff);
/* Other processes took more of the machine during run @r of @tasks than it left free. */
bool report_disturbed(const struct bench_result *r, unsigned tasks);
/* The point's kept run was still disturbed by other processes after its repeats. */
bool report_point_disturbed(const struct report_experiment *e, enum report_cfg c, unsigned p);
const char *report_format(enum report_metric m, double v, char *buf, size_t len);
const char *report_verdict(const struct report_experiment *e, const struct report_view *v);
const char *report_metric_unit(enum report_metric m);
unsigned report_top_point(const struct report_experiment *e);
enum report_cfg report_after(const struct report_view *v);

void report_print_notes(FILE *f, const struct report *rep, const char *prefix);

/* report_model.c: the scaling model beside the measured efficiencies. report.c loads the
 * trace's figures, runs each modelled configuration's series (report_model_has()) and has
 * report_model_calibrate() measure the line cost and the ceiling right after it. */
int report_model_load(const struct report *rep);
bool report_model_has(const struct report *rep, unsigned exp, enum report_cfg c);
void report_model_calibrate(const struct report *rep, unsigned exp, enum report_cfg c);
void report_model_print(FILE *f, const struct report *rep);
bool report_model_ops(const struct report_experiment *e, unsigned tasks, double *ops);

/* report_out.c */
int report_write_results(struct report *rep, const char *table_text);

#endif /* PINMM_BENCH_REPORT_H */
