// SPDX-License-Identifier: MIT
/*
 * report_fmt.c - the figures of `pinmm-bench report` out of its results: the value of a
 * metric at a point, after/before, the scaling efficiency, the verdict against an
 * expectation, how each is printed, and the notes (the counters behind each mechanism, why a
 * host figure is missing). Used by report.c (the table on stdout) and report_out.c (results/);
 * uses only child.c's accessors of a run's metrics.
 */
#include <stdio.h>
#include <string.h>

#include "report.h"

const char *const report_cfg_names[NR_CFG] = { "before", "v1", "after", "host", "proc",
						       "range" };

bool report_value(const struct report_experiment *e, enum report_cfg c, unsigned point,
		  enum report_metric m, double *v)
{
	static const char *const keys[] = {
		[METRIC_ROUND_USEC] = "round_usec_median",
		[METRIC_RELEASE_USEC] = "unreg_usec_median",
		[METRIC_AREA_SEC] = "area_sec_median",
		[METRIC_FREE_BLOCKS] = "free_block_pct",
	};
	const struct bench_result *r = &e->res[c][point];

	if (!e->ran[c][point] || r->status)
		return false;
	/* ops/s: the median sample (falls back to the average line). */
	*v = m == METRIC_OPS ? bench_result_metric_d(r, "median") : bench_result_metric_d(r, keys[m]);
	if (m == METRIC_OPS && *v < 0)
		*v = (double)r->average;
	/* An area slower than the window has no wall-clock median: use the rate's figure. */
	if (m == METRIC_AREA_SEC && *v < 0)
		*v = bench_result_metric_d(r, "area_sec");
	return *v >= 0;
}

/* The last point: nproc tasks for the scaling experiments, 1 task otherwise. */
unsigned report_top_point(const struct report_experiment *e)
{
	return e->nr_points ? e->nr_points - 1 : 0;
}

enum report_cfg report_after(const struct report_view *v)
{
	return v->after == CFG_BEFORE ? CFG_AFTER : v->after;
}

static bool lower_is_better(enum report_metric m)
{
	return m != METRIC_OPS && m != METRIC_FREE_BLOCKS;
}

bool report_ratio(const struct report_experiment *e, const struct report_view *v, double *r)
{
	unsigned p = report_top_point(e);
	double before, after;

	if (!report_value(e, CFG_BEFORE, p, v->metric, &before) ||
	    !report_value(e, report_after(v), p, v->metric, &after) || before <= 0 || after <= 0)
		return false;
	*r = lower_is_better(v->metric) ? before / after : after / before;
	return true;
}

bool report_efficiency(const struct report_experiment *e, enum report_cfg c, double *eff)
{
	unsigned top = report_top_point(e);
	double one, n;

	if (!e->scale || top == 0 || e->tasks[0] != 1)
		return false;
	if (!report_value(e, c, 0, METRIC_OPS, &one) || !report_value(e, c, top, METRIC_OPS, &n) ||
	    one <= 0)
		return false;
	*eff = n / (e->tasks[top] * one);
	return true;
}

/*
 * A run is disturbed when other processes took more than the CPUs it left free, plus 10% of
 * the machine: 2 tasks on 2 CPUs tolerate 0.2 CPU of others, 1 task tolerates 1.2.
 */
bool report_disturbed(const struct bench_result *r, unsigned tasks)
{
	unsigned nproc = bench_nproc();
	double free_cpus = tasks < nproc ? (double)(nproc - tasks) : 0;

	return r->others * nproc > free_cpus + 0.10 * nproc;
}

bool report_point_disturbed(const struct report_experiment *e, enum report_cfg c, unsigned p)
{
	const struct bench_result *r = &e->res[c][p];

	return e->ran[c][p] && r->status == 0 && report_disturbed(r, e->tasks[p]);
}

const char *report_metric_unit(enum report_metric m)
{
	switch (m) {
	case METRIC_OPS: return "ops/s";
	case METRIC_ROUND_USEC: return "usec/round";
	case METRIC_RELEASE_USEC: return "usec/release";
	case METRIC_AREA_SEC: return "s/area";
	case METRIC_FREE_BLOCKS: return "% blocks free";
	}
	return "";
}

const char *report_format(enum report_metric m, double v, char *buf, size_t len)
{
	if (m == METRIC_OPS) {
		if (v >= 1e9)
			snprintf(buf, len, "%.2fG/s", v / 1e9);
		else if (v >= 1e6)
			snprintf(buf, len, "%.2fM/s", v / 1e6);
		else if (v >= 1e3)
			snprintf(buf, len, "%.1fk/s", v / 1e3);
		else
			snprintf(buf, len, "%.0f/s", v);
	} else if (m == METRIC_FREE_BLOCKS) {
		snprintf(buf, len, "%.0f%%", v);
	} else if (m == METRIC_AREA_SEC) {
		snprintf(buf, len, v < 1 ? "%.1f ms" : "%.2f s", v < 1 ? v * 1e3 : v);
	} else if (v >= 1000) {
		snprintf(buf, len, "%.2f ms", v / 1e3);
	} else {
		snprintf(buf, len, "%.1f us", v);
	}
	return buf;
}

const char *report_verdict(const struct report_experiment *e, const struct report_view *v)
{
	double r;

	if (!v->expect)
		return "";
	/* The expectations of the scaling experiments are about 2 tasks or more. */
	if (e->scale && e->tasks[report_top_point(e)] < 2)
		return "n/a (1 task)";
	if (!report_ratio(e, v, &r))
		return "n/a";
	if (v->strictly)
		return r > v->expect ? "ok" : "MISS";
	return r >= v->expect ? "ok" : "MISS";
}

/* ---- notes ---- */

/* "pin_fast: has_pinned_writes in the window at 2 tasks: before 36516965, after 0" */
static void print_one_evidence(FILE *f, const struct report_experiment *e, const char *key)
{
	unsigned p = report_top_point(e);
	const char *sep = ": ";

	fprintf(f, "%s: %s in the window at %u task%s", e->id, key, e->tasks[p],
		e->tasks[p] > 1 ? "s" : "");
	for (int c = 0; c < CFG_HOST; c++) {
		const char *v = e->ran[c][p] && !e->res[c][p].status ?
				bench_result_metric(&e->res[c][p], key) : NULL;

		if (!e->cfg[c].bench_case)
			continue;
		fprintf(f, "%s%s %s", sep, report_cfg_names[c], v ? v : "-");
		sep = ", ";
	}
	fputc('\n', f);
}

/* One line per key; lines after the first get @prefix (the caller printed the first's). */
static void print_evidence(FILE *f, const struct report_experiment *e, const char *prefix)
{
	char keys[128], *k, *save = NULL;
	bool first = true;

	snprintf(keys, sizeof(keys), "%s", e->evidence);
	for (k = strtok_r(keys, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		if (!first)
			fputs(prefix, f);
		first = false;
		print_one_evidence(f, e, k);
	}
}

/* The counters that show each mechanism, and why host figures are missing. */
void report_print_notes(FILE *f, const struct report *rep, const char *prefix)
{
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];
		const struct bench_result *h = &e->res[CFG_HOST][0];

		if (e->evidence) {
			fputs(prefix, f);
			print_evidence(f, e, prefix);
		}
		if (e->ran[CFG_HOST][0] && h->status == 1)
			fprintf(f, "%shost n/a for %s: %s\n", prefix, e->id, h->unavailable);
	}
}
