// SPDX-License-Identifier: MIT
/*
 * host_shmem_fault.c - the shmem_fault experiment on the running kernel: a memfd of the same
 * size (256 MiB, --size) mapped MAP_SHARED by every task (threads: one mapping in the shared
 * mm; processes: the mapping made before fork, so each process faults in its own page
 * tables). Variant "disjoint": each task writes one byte per page of its own slice; "whole":
 * every task writes every page, all from the first. One iteration faults the whole area once:
 *
 *	task 0: ftruncate to 0 and back (drops every page)	-> barrier, clock starts
 *	every task touches its pages (+1 per page)		-> barrier, clock stops
 *
 * Truncating instead of re-creating the object (what shmem_fault does on pinmm) is what lets
 * forked tasks share one object without passing descriptors; either way every page of the
 * next iteration is a new allocation in the page cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../bench.h"

#define HOST_SHMEM_AREA (256 * BENCH_MIB)
#define HOST_SHMEM_SAMPLES 4096

struct host_shmem_run {		/* shared with forked tasks */
	size_t len;
	bool whole;
	int fd;
	char *area;
	int err;
	uint64_t start_ns;
	struct bench_barrier barrier;
	struct bench_samples *times;
};

static int host_shmem_prepare(struct bench_run *run)
{
	struct host_shmem_run *r = bench_shared_alloc(sizeof(*r));

	if (!r)
		return -errno;
	run->priv = r;
	r->fd = -1;
	r->len = (bench_size(run, HOST_SHMEM_AREA) + PM_PAGE_SIZE - 1) & ~(size_t)(PM_PAGE_SIZE - 1);
	r->whole = !strcmp(run->variant, "whole");
	bench_barrier_init(&r->barrier, run->nr_tasks);
	r->times = bench_samples_create(1, HOST_SHMEM_SAMPLES);
	if (!r->times)
		return -ENOMEM;
	r->fd = memfd_create("pinmm-bench-shmem", MFD_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	if (ftruncate(r->fd, (off_t)r->len))
		return -errno;
	r->area = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->area == MAP_FAILED) {
		r->area = NULL;
		return -errno;
	}
	return 0;
}

static void drop_pages(struct host_shmem_run *r)
{
	r->err = 0;
	if (ftruncate(r->fd, 0) || ftruncate(r->fd, (off_t)r->len))
		r->err = -errno;
}

static int host_shmem_loop(struct bench_task *t)
{
	struct host_shmem_run *r = t->run->priv;
	size_t npages = r->len / PM_PAGE_SIZE;
	size_t first = 0, last = npages;

	if (t->nr == 0)
		drop_pages(r);
	if (!bench_barrier_wait(t->run, &r->barrier))
		return 0;
	if (r->err)
		return r->err;
	if (t->nr == 0)
		r->start_ns = bench_now_ns();
	if (!r->whole) {
		first = npages * t->nr / t->run->nr_tasks;
		last = npages * (t->nr + 1) / t->run->nr_tasks;
	}
	for (size_t i = first; i < last && !bench_stopping(t->run); i++) {
		((volatile char *)r->area)[i * PM_PAGE_SIZE] = 0;
		bench_count(t, 1);
	}
	if (!bench_barrier_wait(t->run, &r->barrier))
		return 0;
	if (t->nr == 0 && bench_phase(t->run) == BENCH_PHASE_MEASURE)
		bench_samples_add(r->times, 0, bench_now_ns() - r->start_ns);
	return 0;
}

static void host_shmem_summary(struct bench_run *run)
{
	struct host_shmem_run *r = run->priv;
	unsigned long touches = r->len / PM_PAGE_SIZE * (r->whole ? run->nr_tasks : 1);

	bench_area_summary(run, r->times, touches);
}

static void host_shmem_cleanup(struct bench_run *run)
{
	struct host_shmem_run *r = run->priv;

	if (!r)
		return;
	if (r->area)
		munmap(r->area, r->len);
	if (r->fd >= 0)
		close(r->fd);
	bench_samples_destroy(r->times);
	bench_shared_free(r, sizeof(*r));
}

const struct bench_case bench_case_host_shmem_fault = {
	.name = "host_shmem_fault",
	.description = "shmem page fault of a shared object",
	.variants = "disjoint|whole",
	.seed = "2010 shmem: reduce one time of locking in pagefault, on the host kernel",
	.flags = BENCH_F_HOST,
	.prepare = host_shmem_prepare,
	.loop = host_shmem_loop,
	.summary = host_shmem_summary,
	.cleanup = host_shmem_cleanup,
};
