// SPDX-License-Identifier: MIT
/*
 * child.c - runs `pinmm-bench CASE ...` as a child process, as runtest.py runs a will-it-scale
 * binary, and reads back what it printed: the testcase: title and the average: line from its
 * stdout, the system's idle share over the child's whole life from /proc/stat, and the
 * key=value lines it wrote with --metrics (into a memfd the child reopens through /proc).
 *
 * Interference: the CPU time the whole system was busy over the child's life, minus what the
 * child itself used (wait4's rusage), as a share of all CPUs, is how much other processes
 * took meanwhile (r->others): the report reruns a point that others disturbed.
 *
 * ASLR: runtest.py runs its binaries under `setarch linux64 -R`; bench_disable_aslr() sets the
 * same personality bit on the calling process, which children inherit through exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

struct cpu_times {
	unsigned long long idle, total;	/* in USER_HZ ticks */
};

/* The aggregate cpu line: idle+iowait over user..guest_nice (guest counted twice, as upstream). */
static void read_cpu_times(struct cpu_times *t)
{
	unsigned long long v[10] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	t->idle = t->total = 0;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 4) {
		t->idle = v[3] + v[4];
		for (int i = 0; i < 10; i++)
			t->total += v[i];
	}
	fclose(f);
}

static double others_share(const struct cpu_times *before, const struct cpu_times *after,
			   const struct rusage *ru, double wall_s)
{
	double hz = (double)sysconf(_SC_CLK_TCK);
	double busy = (double)((after->total - after->idle) - (before->total - before->idle)) / hz;
	double mine = (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 +
		      (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
	double share = wall_s > 0 ? (busy - mine) / (wall_s * bench_nproc()) : 0;

	return share < 0 ? 0 : share > 1 ? 1 : share;
}

void bench_disable_aslr(bool warn)
{
	int cur = personality(0xffffffff);

	if (cur < 0 || personality((unsigned long)cur | ADDR_NO_RANDOMIZE) < 0) {
		if (warn)
			fprintf(stderr, "WARNING: setarch -R failed, address space randomization "
				"may cause variability\n");
	}
}

/* Copy as much of @src as fits, always terminated. */
static void copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void parse_stdout(FILE *f, struct bench_result *r)
{
	char line[512];

	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "testcase:", 9)) {
			copy_str(r->title, sizeof(r->title), line + 9);
			r->title[strcspn(r->title, "\n")] = 0;
		} else if (!strncmp(line, "average:", 8)) {
			r->average = strtoll(line + 8, NULL, 10);
		}
	}
}

static void parse_metrics(int fd, struct bench_result *r)
{
	FILE *f;
	char line[256];

	lseek(fd, 0, SEEK_SET);
	f = fdopen(dup(fd), "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && r->nr_metrics < BENCH_MAX_METRICS) {
		char *eq = strchr(line, '=');

		if (!eq)
			continue;
		*eq = 0;
		eq[1 + strcspn(eq + 1, "\n")] = 0;
		if (!strcmp(line, "unavailable"))
			copy_str(r->unavailable, sizeof(r->unavailable), eq + 1);
		copy_str(r->metrics[r->nr_metrics].key, sizeof(r->metrics[0].key), line);
		copy_str(r->metrics[r->nr_metrics].value, sizeof(r->metrics[0].value), eq + 1);
		r->nr_metrics++;
	}
	fclose(f);
}

const char *bench_result_metric(const struct bench_result *r, const char *key)
{
	for (unsigned i = 0; i < r->nr_metrics; i++)
		if (!strcmp(r->metrics[i].key, key))
			return r->metrics[i].value;
	return NULL;
}

double bench_result_metric_d(const struct bench_result *r, const char *key)
{
	const char *v = bench_result_metric(r, key);

	return v ? strtod(v, NULL) : -1;
}

/* In the child: stdout to the pipe, stderr where asked, --metrics appended, exec self. */
static void exec_child(char *const argv[], int out_fd, int metrics_fd, int stderr_fd)
{
	char metrics_path[64];
	char **args;
	int n = 0;

	while (argv[n])
		n++;
	args = calloc((size_t)n + 4, sizeof(*args));
	if (!args)
		_exit(127);
	snprintf(metrics_path, sizeof(metrics_path), "/proc/self/fd/%d", metrics_fd);
	args[0] = "pinmm-bench";
	for (int i = 1; i < n; i++)
		args[i] = argv[i];
	args[n] = "--metrics";
	args[n + 1] = metrics_path;
	dup2(out_fd, STDOUT_FILENO);
	if (stderr_fd >= 0)
		dup2(stderr_fd, STDERR_FILENO);
	execv("/proc/self/exe", args);
	perror("pinmm-bench: exec");
	_exit(127);
}

int bench_child_run(char *const argv[], struct bench_result *r, int stderr_fd)
{
	struct cpu_times before, after;
	int pipefd[2], metrics_fd, status = 0;
	uint64_t t0 = bench_now_ns();
	struct rusage ru = { 0 };
	pid_t pid;
	FILE *out;

	memset(r, 0, sizeof(*r));
	r->average = -1;
	r->status = -1;
	metrics_fd = memfd_create("pinmm-bench-metrics", 0);
	if (metrics_fd < 0)
		return -errno;
	if (pipe(pipefd)) {
		close(metrics_fd);
		return -errno;
	}
	fflush(NULL);
	read_cpu_times(&before);
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		close(metrics_fd);
		return -errno;
	}
	if (pid == 0) {
		close(pipefd[0]);
		exec_child(argv, pipefd[1], metrics_fd, stderr_fd);
	}
	close(pipefd[1]);
	out = fdopen(pipefd[0], "r");
	if (out) {
		parse_stdout(out, r);
		fclose(out);
	} else {
		close(pipefd[0]);
	}
	while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
		;
	read_cpu_times(&after);
	r->wall_s = (double)(bench_now_ns() - t0) / 1e9;
	if (after.total > before.total)
		r->idle = 100.0 * (double)(after.idle - before.idle) /
			  (double)(after.total - before.total);
	r->others = others_share(&before, &after, &ru, r->wall_s);
	parse_metrics(metrics_fd, r);
	close(metrics_fd);
	if (r->unavailable[0] && WIFEXITED(status) && !WEXITSTATUS(status))
		r->status = 1;
	else if (r->average >= 0 && WIFEXITED(status) && !WEXITSTATUS(status))
		r->status = 0;
	return 0;
}
