// SPDX-License-Identifier: MIT
/*
 * host_mr_reg.c - the mr_reg experiment on the running kernel: io_uring fixed-buffer
 * registration of a 1 GiB region (io_uring_register_buffers: pin_user_pages() FOLL_LONGTERM
 * and a bio_vec table) and deregistration (folio-batched unpin), timed separately.
 *
 * Variants: "4k" (MADV_NOHUGEPAGE), "thp" (2 MiB aligned, MADV_HUGEPAGE), "hugetlb"
 * (MAP_HUGETLB; the pool is grown by what is missing for all tasks and set back at cleanup;
 * unavailable when it cannot grow). The pinned memory counts against RLIMIT_MEMLOCK unless the
 * process has CAP_IPC_LOCK: the limit is raised when it can be (root with CAP_SYS_RESOURCE,
 * or a hard limit high enough); otherwise, without CAP_IPC_LOCK, the case says why it
 * cannot run.
 */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../bench.h"

#define HOST_MR_SAMPLES 32768
#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

struct host_mr_run {
	size_t len;
	int kind;			/* MR_4K, MR_THP, MR_HUGETLB */
	long saved_nr_hugepages;	/* -1: untouched */
	struct bench_samples *reg, *unreg;
	long *huge_kb;			/* shared: AnonHugePages seen by each task (THP) */
};

enum { MR_4K, MR_THP, MR_HUGETLB };

struct host_mr_task {
	void *buf;
	struct io_uring ring;
};

static long read_long(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!key) {
			v = strtol(line, NULL, 10);
			break;
		}
		if (!strncmp(line, key, strlen(key))) {
			v = strtol(line + strlen(key), NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%ld\n", v) < 0)
		err = -EIO;
	if (fclose(f))
		err = -errno;
	return err;
}

/*
 * Set the pool to @target pages; when fragmentation leaves fewer than @need free, compact
 * memory once and try again. Returns the free huge pages.
 */
static long grow_pool(long target, long need)
{
	long free_now;

	write_long(NR_HUGEPAGES, target);
	free_now = read_long("/proc/meminfo", "HugePages_Free:");
	if (free_now < need) {
		write_long("/proc/sys/vm/compact_memory", 1);
		write_long(NR_HUGEPAGES, target);
		free_now = read_long("/proc/meminfo", "HugePages_Free:");
	}
	return free_now;
}

/* Grow the hugetlb pool by what is missing for @need free pages. */
static int reserve_hugepages(struct bench_run *run, struct host_mr_run *r)
{
	long need = (long)(run->nr_tasks * (r->len / PM_PMD_SIZE));
	long free_now = read_long("/proc/meminfo", "HugePages_Free:");
	long nr = read_long(NR_HUGEPAGES, NULL);

	if (free_now < 0 || nr < 0)
		return bench_unavailable(run, "no hugetlb support (%s)", NR_HUGEPAGES);
	if (free_now >= need)
		return 0;
	if (access(NR_HUGEPAGES, W_OK))
		return bench_unavailable(run, "%ld free huge pages, %ld needed, and %s is not "
					 "writable here", free_now, need, NR_HUGEPAGES);
	r->saved_nr_hugepages = nr;
	free_now = grow_pool(nr + need - free_now, need);
	if (free_now < need)
		return bench_unavailable(run, "only %ld of %ld 2 MiB huge pages could be reserved "
					 "(memory too fragmented even after compaction)",
					 free_now, need);
	return 0;
}

/* CAP_IPC_LOCK (bit 14 of CapEff) exempts io_uring's registration from RLIMIT_MEMLOCK. */
static bool has_cap_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long eff = 0;
	char line[256];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff & (1ull << 14);
}

static int raise_memlock(struct bench_run *run, size_t need)
{
	struct rlimit rl, want;

	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		return -errno;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return 0;
	want.rlim_cur = want.rlim_max = RLIM_INFINITY;
	if (geteuid() == 0 && !setrlimit(RLIMIT_MEMLOCK, &want))
		return 0;
	want.rlim_cur = need;
	want.rlim_max = rl.rlim_max;
	if ((rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) &&
	    !setrlimit(RLIMIT_MEMLOCK, &want))
		return 0;
	if (has_cap_ipc_lock())
		return 0;
	return bench_unavailable(run, "RLIMIT_MEMLOCK is %llu KiB and %zu KiB must be pinned; "
				 "run as root or raise it (ulimit -l)",
				 (unsigned long long)rl.rlim_cur / 1024, need / 1024);
}

static int probe_io_uring(struct bench_run *run)
{
	struct io_uring ring;
	int err = io_uring_queue_init(4, &ring, 0);

	if (err)
		return bench_unavailable(run, "io_uring_queue_init: %s", strerror(-err));
	io_uring_queue_exit(&ring);
	return 0;
}

static int host_mr_reg_prepare(struct bench_run *run)
{
	struct host_mr_run *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	run->priv = r;
	r->saved_nr_hugepages = -1;
	r->len = (bench_size(run, BENCH_GIB) + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);
	r->kind = !strcmp(run->variant, "hugetlb") ? MR_HUGETLB :
		  !strcmp(run->variant, "thp") ? MR_THP : MR_4K;
	r->reg = bench_samples_create(run->nr_tasks, HOST_MR_SAMPLES);
	r->unreg = bench_samples_create(run->nr_tasks, HOST_MR_SAMPLES);
	r->huge_kb = bench_shared_alloc(run->nr_tasks * sizeof(long));
	if (!r->reg || !r->unreg || !r->huge_kb)
		return -ENOMEM;
	err = probe_io_uring(run);
	if (!err)
		err = raise_memlock(run, run->nr_tasks * r->len);
	if (!err && r->kind == MR_HUGETLB)
		err = reserve_hugepages(run, r);
	return err;
}

static void *map_region(struct host_mr_run *r)
{
	void *p;

	if (r->kind == MR_HUGETLB) {
		p = mmap(NULL, r->len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	p = bench_host_map_aligned(r->len, PM_PMD_SIZE);
	if (p && madvise(p, r->len, r->kind == MR_THP ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) {
		bench_host_unmap_aligned(p, r->len, PM_PMD_SIZE);
		return NULL;
	}
	return p;
}

static int host_mr_reg_task_init(struct bench_task *t)
{
	struct host_mr_run *r = t->run->priv;
	struct host_mr_task *m = calloc(1, sizeof(*m));
	int err;

	if (!m)
		return -ENOMEM;
	m->buf = map_region(r);
	if (!m->buf) {
		err = -errno;
		free(m);
		return err;
	}
	bench_host_touch(m->buf, r->len);
	r->huge_kb[t->nr] = bench_host_anon_huge_kb();
	err = io_uring_queue_init(4, &m->ring, 0);
	if (err) {
		munmap(m->buf, r->len);
		free(m);
		return err;
	}
	t->priv = m;
	return 0;
}

static int host_mr_reg_loop(struct bench_task *t)
{
	struct host_mr_run *r = t->run->priv;
	struct host_mr_task *m = t->priv;
	struct iovec iov = { .iov_base = m->buf, .iov_len = r->len };
	uint64_t t0, t1, t2;
	int err;

	t0 = bench_now_ns();
	err = io_uring_register_buffers(&m->ring, &iov, 1);
	if (err)
		return err;
	t1 = bench_now_ns();
	err = io_uring_unregister_buffers(&m->ring);
	if (err)
		return err;
	t2 = bench_now_ns();
	if (bench_phase(t->run) == BENCH_PHASE_MEASURE) {
		bench_samples_add(r->reg, t->nr, t1 - t0);
		bench_samples_add(r->unreg, t->nr, t2 - t1);
	}
	bench_count(t, 1);
	return 0;
}

static void host_mr_reg_task_exit(struct bench_task *t)
{
	struct host_mr_run *r = t->run->priv;
	struct host_mr_task *m = t->priv;

	io_uring_queue_exit(&m->ring);
	munmap(m->buf, r->len);
	free(m);
}

static void host_mr_reg_summary(struct bench_run *run)
{
	static const char *const kinds[] = { "4 KiB pages", "THP", "hugetlb 2 MiB" };
	struct host_mr_run *r = run->priv;
	char what[96];

	snprintf(what, sizeof(what), "io_uring, %lu MiB %s", (unsigned long)(r->len >> 20),
		 kinds[r->kind]);
	bench_rounds_summary(run, what, r->reg, r->unreg);
	if (r->kind == MR_THP) {
		bench_note(run, "host_mr_reg: AnonHugePages after touching: %ld kB of %zu kB",
			   r->huge_kb[0], r->len / 1024);
		bench_metric(run, "anon_huge_kb", "%ld", r->huge_kb[0]);
	}
}

static void host_mr_reg_cleanup(struct bench_run *run)
{
	struct host_mr_run *r = run->priv;

	if (!r)
		return;
	if (r->saved_nr_hugepages >= 0 && write_long(NR_HUGEPAGES, r->saved_nr_hugepages))
		fprintf(stderr, "pinmm-bench: host_mr_reg: could not set %s back to %ld\n",
			NR_HUGEPAGES, r->saved_nr_hugepages);
	bench_samples_destroy(r->reg);
	bench_samples_destroy(r->unreg);
	bench_shared_free(r->huge_kb, run->nr_tasks * sizeof(long));
	free(r);
}

const struct bench_case bench_case_host_mr_reg = {
	.name = "host_mr_reg",
	.description = "io_uring fixed buffer register and unregister of 1 GiB",
	.variants = "thp|4k|hugetlb",
	.seed = "2020 RDMA/umem batch page unpin, on the host kernel (io_uring)",
	.flags = BENCH_F_HOST,
	.prepare = host_mr_reg_prepare,
	.task_init = host_mr_reg_task_init,
	.loop = host_mr_reg_loop,
	.task_exit = host_mr_reg_task_exit,
	.summary = host_mr_reg_summary,
	.cleanup = host_mr_reg_cleanup,
};
