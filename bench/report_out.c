// SPDX-License-Identifier: MIT
/*
 * report_out.c - writes what `pinmm-bench report` measured into results/:
 *
 *   <id>-<config>.csv	each configuration's points in runtest's CSV format (threads column)
 *   summary.csv	the table, one line per view, machine-readable
 *   report.txt		the table as printed
 *   report.md		the table, then per experiment every run's figures, metrics and notes
 *   <id>.png		ops/s against tasks (before, after, linear, host) for the scaling
 *			experiments; free blocks against pin density (longterm_frag); register/
 *			deregister medians per configuration otherwise
 *   <id>.gp, <id>.dat	the gnuplot script and data behind each plot
 *   logs/		every run's stderr
 *
 * Plots use gnuplot's pngcairo terminal when it has one, else png (gnuplot-nox builds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static FILE *open_out(const struct report *rep, const char *name, const char *ext)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s%s", rep->out_dir, name, ext);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "pinmm-bench: report: %s: %s\n", path, strerror(errno));
	return f;
}

static bool have_file(const struct report *rep, const char *name, const char *ext)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s%s", rep->out_dir, name, ext);
	return !access(path, F_OK);
}

/* ---- runtest-format CSV per configuration ---- */

static void write_config_csv(const struct report *rep, const struct report_experiment *e,
			     enum report_cfg c)
{
	char name[128];
	long long base = -1;
	FILE *f;

	snprintf(name, sizeof(name), "%s-%s", e->id, report_cfg_names[c]);
	f = open_out(rep, name, ".csv");
	if (!f)
		return;
	fprintf(f, "tasks,processes,processes_idle,threads,threads_idle,linear\n");
	fprintf(f, "0,0,100,0,100,0\n");
	for (unsigned p = 0; p < e->nr_points; p++) {
		const struct bench_result *r = &e->res[c][p];
		long long avg = r->status ? -1 : r->average;

		if (e->tasks[p] == 1)
			base = avg;
		fprintf(f, "%u,0,0.00,%lld,%0.2f,%lld\n", e->tasks[p], avg, r->idle,
			base > 0 ? base * e->tasks[p] : 0);
	}
	fclose(f);
}

/* ---- summary.csv ---- */

static void csv_value(FILE *f, const struct report_experiment *e, enum report_cfg c,
		      enum report_metric m)
{
	double v;

	if (e->cfg[c].bench_case && report_value(e, c, report_top_point(e), m, &v))
		fprintf(f, ",%.6g", v);
	else
		fprintf(f, ",");
}

static void csv_eff(FILE *f, const struct report_experiment *e, enum report_cfg c)
{
	double x;

	if (e->cfg[c].bench_case && report_efficiency(e, c, &x))
		fprintf(f, ",%.4f", x);
	else
		fprintf(f, ",");
}

static void write_summary_csv(const struct report *rep)
{
	FILE *f = open_out(rep, "summary", ".csv");

	if (!f)
		return;
	fprintf(f, "experiment,view,unit,tasks,claim,before,v1,after,after_over_before,"
		"scaling_eff_before,scaling_eff_after,host,scaling_eff_host,scaling_eff_processes,"
		"expect,verdict,range,scaling_eff_range\n");
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		for (unsigned k = 0; k < REPORT_MAX_VIEWS && e->views[k].name; k++) {
			const struct report_view *v = &e->views[k];
			double r;

			fprintf(f, "%s,%s,%s,%u,\"%s\"", e->id, v->name,
				report_metric_unit(v->metric), e->tasks[report_top_point(e)],
				v->claim);
			csv_value(f, e, CFG_BEFORE, v->metric);
			csv_value(f, e, CFG_V1, v->metric);
			csv_value(f, e, report_after(v), v->metric);
			if (report_ratio(e, v, &r))
				fprintf(f, ",%.4f", r);
			else
				fprintf(f, ",");
			csv_eff(f, e, CFG_BEFORE);
			csv_eff(f, e, report_after(v));
			csv_value(f, e, CFG_HOST, v->metric);
			csv_eff(f, e, CFG_HOST);
			csv_eff(f, e, CFG_PROC);
			fprintf(f, ",%g,%s", v->expect, report_verdict(e, v));
			csv_value(f, e, CFG_RANGE, v->metric);
			csv_eff(f, e, CFG_RANGE);
			fputc('\n', f);
		}
	}
	fclose(f);
}

/* ---- report.md ---- */

static void md_cell(FILE *f, const struct report_experiment *e, enum report_cfg c,
		    enum report_metric m)
{
	unsigned p = report_top_point(e);
	char buf[32];
	double v;

	if (!e->cfg[c].bench_case)
		fprintf(f, " - |");
	else if (!e->ran[c][p])
		fprintf(f, " skipped |");
	else if (e->res[c][p].status == 1)
		fprintf(f, " n/a |");
	else if (!report_value(e, c, p, m, &v))
		fprintf(f, " **FAIL** |");
	else
		fprintf(f, " %s |", report_format(m, v, buf, sizeof(buf)));
}

static void md_table(FILE *f, const struct report *rep)
{
	fprintf(f, "| Experiment | Tasks | Seed's claim | Before | After | After/before | "
		"Scaling eff. (after) | Scaling eff. (processes) | Range design | "
		"Scaling eff. (range) | Host kernel | Scaling eff. (host) | Expectation |\n");
	fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		for (unsigned k = 0; k < REPORT_MAX_VIEWS && e->views[k].name; k++) {
			const struct report_view *v = &e->views[k];
			double r, x;

			fprintf(f, "| %s | %u | %s |", v->name, e->tasks[report_top_point(e)],
				v->claim);
			md_cell(f, e, CFG_BEFORE, v->metric);
			md_cell(f, e, report_after(v), v->metric);
			if (report_ratio(e, v, &r))
				fprintf(f, " %.2fx |", r);
			else
				fprintf(f, " - |");
			if (report_efficiency(e, report_after(v), &x))
				fprintf(f, " %.2f |", x);
			else
				fprintf(f, " - |");
			if (v->metric == METRIC_OPS && report_efficiency(e, CFG_PROC, &x))
				fprintf(f, " %.2f |", x);
			else
				fprintf(f, " - |");
			md_cell(f, e, CFG_RANGE, v->metric);
			if (v->metric == METRIC_OPS && report_efficiency(e, CFG_RANGE, &x))
				fprintf(f, " %.2f |", x);
			else
				fprintf(f, " - |");
			md_cell(f, e, CFG_HOST, v->metric);
			if (report_efficiency(e, CFG_HOST, &x))
				fprintf(f, " %.2f |", x);
			else
				fprintf(f, " - |");
			if (v->expect)
				fprintf(f, " %s %gx: %s |\n", v->strictly ? ">" : ">=", v->expect,
					report_verdict(e, v));
			else
				fprintf(f, " |\n");
		}
	}
}

static void md_log(FILE *f, const struct report *rep, const struct report_experiment *e,
		   enum report_cfg c, unsigned tasks)
{
	char path[512], line[512];
	FILE *log;
	bool any = false;

	snprintf(path, sizeof(path), "%s/logs/%s-%s-t%u.log", rep->out_dir, e->id,
		 report_cfg_names[c], tasks);
	log = fopen(path, "r");
	if (!log)
		return;
	while (fgets(line, sizeof(line), log)) {
		if (!any)
			fprintf(f, "\n```\n");
		any = true;
		fputs(line, f);
	}
	if (any)
		fprintf(f, "```\n");
	fclose(log);
}

static void md_runs(FILE *f, const struct report *rep, const struct report_experiment *e)
{
	for (int c = 0; c < NR_CFG; c++) {
		const struct report_config *cfg = &e->cfg[c];

		if (!cfg->bench_case)
			continue;
		for (unsigned p = 0; p < e->nr_points; p++) {
			const struct bench_result *r = &e->res[c][p];

			if (!e->ran[c][p])
				continue;
			fprintf(f, "\n**%s**: `pinmm-bench %s -t %u%s%s%s%s%s%s` ",
				report_cfg_names[c], cfg->bench_case, e->tasks[p],
				cfg->variant ? " --variant " : "", cfg->variant ? cfg->variant : "",
				cfg->knobs ? " --knobs " : "", cfg->knobs ? cfg->knobs : "",
				cfg->mode ? " --mode " : "", cfg->mode ? cfg->mode : "");
			if (r->status == 1)
				fprintf(f, "not available: %s\n", r->unavailable);
			else if (r->status < 0)
				fprintf(f, "**failed** (log: logs/%s-%s-t%u.log)\n", e->id,
					report_cfg_names[c], e->tasks[p]);
			else
				fprintf(f, "average %lld ops/s, median sample %s ops/s, idle %.2f%%, "
					"other processes %.0f%%, %.1f s\n", r->average,
					bench_result_metric(r, "median") ?: "-", r->idle,
					100 * r->others, r->wall_s);
			md_log(f, rep, e, c, e->tasks[p]);
		}
	}
}

static void write_markdown(const struct report *rep)
{
	FILE *f = open_out(rep, "report", ".md");
	struct utsname u;
	char date[64];
	time_t now = time(NULL);

	if (!f)
		return;
	uname(&u);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	fprintf(f, "# pinmm seed report\n\n");
	fprintf(f, "%s; host kernel %s %s; %u CPUs available; %s run: %u warm-up + %u "
		"measured samples of %u ms per point; %.0f s in all.\n\n", date, u.sysname,
		u.release, bench_nproc(), rep->quick ? "quick" : "full", rep->warmup,
		rep->samples, rep->interval_ms, rep->wall_s);
	fprintf(f, "Runs that other processes disturbed (they took more than the CPUs the run "
		"left free, plus 10%% of the machine) were repeated, keeping the least disturbed: "
		"%u repeats.\n\n", rep->retries);
	if (rep->quick_size)
		fprintf(f, "Quick run: the register/deregister experiments use %s regions, not the "
			"seed's 1 GiB; their times are not comparable with the claims.\n\n",
			rep->quick_size);
	fprintf(f, "Before: the knob or release mode that the seed replaced; after: pinmm as "
		"it is; host: the running kernel, same shape. Values are at the largest task "
		"count (threads mode); ops/s is the median of the measured samples (the CSVs "
		"keep will-it-scale's average). After/before is a throughput ratio (for times, "
		"before/after). Scaling efficiency is ops(N) / (N x ops(1)).\n\n");
	md_table(f, rep);
	fprintf(f, "\nThe counters behind the mechanisms, and what the host lacks:\n\n");
	report_print_notes(f, rep, "- ");
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];

		fprintf(f, "\n## %s: %s\n", e->id, e->title);
		if (rep->plots && have_file(rep, e->id, ".png"))
			fprintf(f, "\n![%s](%s.png)\n", e->id, e->id);
		md_runs(f, rep, e);
	}
	fclose(f);
}

/* ---- plots ---- */

static const char *png_terminal(void)
{
	static const char *term;
	FILE *p;
	char line[256];

	if (term)
		return term;
	term = "";
	p = popen("gnuplot -e 'set terminal' 2>&1", "r");
	if (!p)
		return term;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "pngcairo"))
			term = "pngcairo";
		else if (!*term && strstr(line, " png "))
			term = "png";
	}
	if (pclose(p))
		term = "";
	return term;
}

static void dat_value(FILE *dat, const struct report_experiment *e, enum report_cfg c,
		      unsigned p)
{
	double v;

	if (e->cfg[c].bench_case && report_value(e, c, p, METRIC_OPS, &v))
		fprintf(dat, " %.0f", v);
	else
		fprintf(dat, " NaN");
}

static bool cfg_has_ops(const struct report_experiment *e, enum report_cfg c)
{
	double v;

	for (unsigned p = 0; p < e->nr_points; p++)
		if (e->cfg[c].bench_case && report_value(e, c, p, METRIC_OPS, &v))
			return true;
	return false;
}

/* Only the curves that have points: gnuplot refuses a plot of nothing. */
static void plot_columns(FILE *gp, const struct report_experiment *e, bool linear)
{
	static const struct {
		enum report_cfg cfg;
		int column;
		const char *title;
	} curves[] = {
		{ CFG_BEFORE, 2, "pinmm before" },
		{ CFG_AFTER, 3, "pinmm after" },
		{ CFG_HOST, 5, "host kernel" },
		{ CFG_PROC, 6, "pinmm after, processes" },
		{ CFG_RANGE, 7, "pinmm range design, threads" },
	};
	const char *sep = "plot ";

	for (size_t i = 0; i < sizeof(curves) / sizeof(curves[0]); i++) {
		if (!cfg_has_ops(e, curves[i].cfg))
			continue;
		fprintf(gp, "%s\"%s.dat\" using 1:%d with linespoints title \"%s\"", sep, e->id,
			curves[i].column, curves[i].title);
		sep = ", ";
	}
	if (linear)
		fprintf(gp, "%s\"%s.dat\" using 1:4 with lines dashtype 2 title "
			"\"linear (after at 1 task)\"", sep, e->id);
	if (report_model_ops(e, 1, &(double){ 0 }))
		fprintf(gp, ", \"%s.dat\" using 1:8 with lines dashtype 3 title \"model\"", e->id);
	fputc('\n', gp);
}

static void write_scaling_plot(const struct report *rep, const struct report_experiment *e,
			       FILE *gp)
{
	FILE *dat = open_out(rep, e->id, ".dat");
	double one = -1, one_model;

	if (!dat)
		return;
	if (e->tasks[0] != 1 || !report_value(e, CFG_AFTER, 0, METRIC_OPS, &one))
		one = -1;
	fprintf(dat, "# tasks before after linear host processes range model\n");
	for (unsigned p = 0; p < e->nr_points; p++) {
		fprintf(dat, "%u", e->tasks[p]);
		dat_value(dat, e, CFG_BEFORE, p);
		dat_value(dat, e, CFG_AFTER, p);
		if (one > 0)
			fprintf(dat, " %.0f", one * e->tasks[p]);
		else
			fprintf(dat, " NaN");
		dat_value(dat, e, CFG_HOST, p);
		dat_value(dat, e, CFG_PROC, p);
		dat_value(dat, e, CFG_RANGE, p);
		if (report_model_ops(e, e->tasks[p], &one_model))
			fprintf(dat, " %.0f", one_model);
		else
			fprintf(dat, " NaN");
		fputc('\n', dat);
	}
	fclose(dat);
	fprintf(gp, "set xlabel 'tasks (threads)'\nset ylabel 'ops/s'\nset key left top\n"
		"set yrange [0:*]\nset xtics 1\n");
	plot_columns(gp, e, one > 0);
}

/* Returns false when there is nothing to plot. */
static bool write_rounds_plot(const struct report *rep, const struct report_experiment *e,
			      FILE *gp)
{
	static const char *const labels[NR_CFG] = {
		[CFG_BEFORE] = "per page", [CFG_V1] = "batched (v1)",
		[CFG_AFTER] = "range (v2)", [CFG_HOST] = "host io_uring", [CFG_PROC] = "processes",
		[CFG_RANGE] = "range design",
	};
	FILE *dat = open_out(rep, e->id, ".dat");
	double reg, unreg;
	unsigned rows = 0;

	if (!dat)
		return false;
	fprintf(dat, "# config register_usec deregister_usec\n");
	for (int c = 0; c < NR_CFG; c++) {
		const struct bench_result *r = &e->res[c][0];

		if (!e->cfg[c].bench_case || !e->ran[c][0] || r->status)
			continue;
		reg = bench_result_metric_d(r, "reg_usec_median");
		unreg = bench_result_metric_d(r, "unreg_usec_median");
		if (reg < 0 || unreg < 0)
			continue;
		fprintf(dat, "\"%s\" %.1f %.1f\n", labels[c], reg, unreg);
		rows++;
	}
	fclose(dat);
	fprintf(gp, "set style data histograms\nset style histogram rowstacked\n"
		"set style fill solid 0.8 border -1\nset boxwidth 0.6\n"
		"set ylabel 'usec (median)'\nset yrange [0:*]\nset key outside right top\n");
	fprintf(gp, "plot \"%s.dat\" using 2:xtic(1) title \"register\", \"\" using 3 "
		"title \"deregister\"\n", e->id);
	return rows > 0;
}

/* An experiment whose runs report free_block_pct_dN for several N (longterm_frag): the share
 * of free 2 MiB blocks against the pinned pages per movable block, before and after. Returns
 * false when there is nothing to plot. */
static bool write_density_plot(const struct report *rep, const struct report_experiment *e,
			       FILE *gp)
{
	static const unsigned dens[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };
	FILE *dat = open_out(rep, e->id, ".dat");
	unsigned rows = 0;

	if (!dat)
		return false;
	fprintf(dat, "# pinned_pages_per_block before_pct after_pct\n");
	for (size_t i = 0; i < sizeof(dens) / sizeof(dens[0]); i++) {
		char key[32];
		double v[2] = { -1, -1 };

		snprintf(key, sizeof(key), "free_block_pct_d%u", dens[i]);
		for (int k = 0; k < 2; k++) {
			int c = k ? CFG_AFTER : CFG_BEFORE;

			if (e->ran[c][0] && !e->res[c][0].status)
				v[k] = bench_result_metric_d(&e->res[c][0], key);
		}
		if (v[0] < 0 && v[1] < 0)
			continue;
		fprintf(dat, "%u ", dens[i]);
		for (int k = 0; k < 2; k++)
			fprintf(dat, v[k] < 0 ? "NaN " : "%.1f ", v[k]);
		fprintf(dat, "\n");
		rows++;
	}
	fclose(dat);
	fprintf(gp, "set logscale x 2\nset xlabel 'long-term pinned pages per movable 2 MiB block'\n"
		"set ylabel '2 MiB blocks free after compaction (%% of all)'\nset yrange [0:100]\n"
		"set key bottom left\n");
	fprintf(gp, "plot \"%s.dat\" using 1:2 with linespoints title \"before: pinned in place\", "
		"\"\" using 1:3 with linespoints title \"after: moved out first\"\n", e->id);
	return rows > 0;
}

static bool has_density(const struct report_experiment *e)
{
	for (int c = 0; c < NR_CFG; c++)
		if (e->ran[c][0] && !e->res[c][0].status &&
		    bench_result_metric(&e->res[c][0], "free_block_pct_d1"))
			return true;
	return false;
}

static int run_gnuplot(const struct report *rep, const char *script)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (chdir(rep->out_dir))
			_exit(127);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -EIO;
}

static void write_plots(const struct report *rep)
{
	const char *term = png_terminal();
	char script[160];

	if (!*term) {
		fprintf(stderr, "report: no gnuplot with a png terminal: no plots\n");
		return;
	}
	for (unsigned i = 0; i < rep->nr_exps; i++) {
		const struct report_experiment *e = &rep->exps[i];
		FILE *gp = open_out(rep, e->id, ".gp");
		bool any;

		if (!gp)
			continue;
		fprintf(gp, "set terminal %s noenhanced size 800,500\nset output \"%s.png\"\n"
			"set title \"%s\"\nset grid\nset datafile missing \"NaN\"\n", term, e->id,
			e->title);
		if (e->scale) {
			write_scaling_plot(rep, e, gp);
			any = cfg_has_ops(e, CFG_BEFORE) || cfg_has_ops(e, CFG_AFTER) ||
			      cfg_has_ops(e, CFG_HOST);
		} else if (has_density(e)) {
			any = write_density_plot(rep, e, gp);
		} else {
			any = write_rounds_plot(rep, e, gp);
		}
		fclose(gp);
		snprintf(script, sizeof(script), "%s.gp", e->id);
		if (any && run_gnuplot(rep, script))
			fprintf(stderr, "report: gnuplot failed on %s/%s\n", rep->out_dir, script);
	}
}

int report_write_results(struct report *rep, const char *table_text)
{
	FILE *f = open_out(rep, "report", ".txt");

	if (!f)
		return -EIO;
	fputs(table_text, f);
	fclose(f);
	for (unsigned i = 0; i < rep->nr_exps; i++)
		for (int c = 0; c < NR_CFG; c++)
			if (rep->exps[i].cfg[c].bench_case && rep->exps[i].ran[c][0])
				write_config_csv(rep, &rep->exps[i], c);
	write_summary_csv(rep);
	if (rep->plots)
		write_plots(rep);
	write_markdown(rep);
	return 0;
}
