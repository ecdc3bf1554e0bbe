// SPDX-License-Identifier: MIT
/*
 * pm.c - the pinmm side of the cases: a machine sized for the case with the run's knobs, the
 * address spaces of a run (one shared in threads mode, one per task in processes mode), user
 * touches, the counter window, and the leak check at teardown (a bench_at_cleanup() hook).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static size_t round_up_2m(size_t bytes)
{
	return (bytes + PM_PMD_SIZE - 1) & ~(size_t)(PM_PMD_SIZE - 1);
}

/* Destroys what bench_pm_setup() made; says so when frames did not come back. */
static void pm_teardown(struct bench_run *run)
{
	struct bench_pm *pm = &run->pm;
	size_t free_now;

	for (unsigned i = 0; i < pm->nr_mms; i++)
		pm_mm_destroy(pm->mms[i]);
	free(pm->mms);
	pm->mms = NULL;
	if (!pm->machine)
		return;
	pm_rcu_barrier();
	free_now = pm_machine_free_pages(pm->machine);
	/* The mms held page-table roots at the start; now everything must be back. */
	if (free_now < pm->free_at_start)
		fprintf(stderr, "pinmm-bench: %s: warning: %zu frames leaked\n", run->bc->name,
			pm->free_at_start - free_now);
	pm_machine_destroy(pm->machine);
	pm->machine = NULL;
	pm->nr_mms = 0;
}

/*
 * Room around the work, as on a real machine: Linux lets the per-CPU caches hold up to an
 * eighth of memory (pinmm too, src/mem/page_alloc.c), and a host running will-it-scale has
 * many times its working set, so each CPU keeps the frames its task frees. A machine sized to
 * the work alone would push every iteration's frames through the shared buddy lists. Frames
 * are initialised when first used, so the room costs reserved address space, not memory.
 */
#define BENCH_PM_ROOM 16
#define BENCH_PM_ROOM_MAX (32UL << 30)

int bench_pm_setup(struct bench_run *run, size_t mem_bytes)
{
	return bench_pm_setup_hugetlb(run, mem_bytes, 0);
}

int bench_pm_setup_hugetlb(struct bench_run *run, size_t mem_bytes, size_t nr_hugepages)
{
	struct bench_pm *pm = &run->pm;
	struct pm_config cfg = {
		.mem_bytes = round_up_2m(mem_bytes <= BENCH_PM_ROOM_MAX / BENCH_PM_ROOM ?
					 mem_bytes * BENCH_PM_ROOM :
					 (mem_bytes > BENCH_PM_ROOM_MAX ? mem_bytes : BENCH_PM_ROOM_MAX)),
		.knobs = run->knobs,
		.flags = run->mm_flags,
		.nr_hugepages = nr_hugepages,
	};
	unsigned n = run->mode == BENCH_THREADS ? 1 : run->nr_tasks;
	int err = bench_at_cleanup(run, pm_teardown);

	if (err)
		return err;
	pm->machine = pm_machine_create(&cfg);
	if (!pm->machine)
		return -errno;
	pm->mms = calloc(n, sizeof(*pm->mms));
	if (!pm->mms)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		pm->mms[i] = pm_mm_create(pm->machine);
		if (!pm->mms[i])
			return -errno;
		pm->nr_mms = i + 1;
	}
	pm_rcu_barrier();
	pm->free_at_start = pm_machine_free_pages(pm->machine);
	return 0;
}

long bench_pm_map_anon(struct pm_mm *mm, size_t len)
{
	return pm_mmap(mm, 0, len, PM_PROT_READ | PM_PROT_WRITE,
		       PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
}

/* Anonymous mappings of 2 MiB multiples are placed aligned; if not, over-map and trim. */
long bench_pm_map_aligned(struct pm_mm *mm, size_t len)
{
	long addr = bench_pm_map_anon(mm, len);
	unsigned long start;

	if (addr < 0 || !((unsigned long)addr & (PM_PMD_SIZE - 1)))
		return addr;
	pm_munmap(mm, (unsigned long)addr, len);
	addr = bench_pm_map_anon(mm, len + PM_PMD_SIZE);
	if (addr < 0)
		return addr;
	start = ((unsigned long)addr + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);
	if (start > (unsigned long)addr)
		pm_munmap(mm, (unsigned long)addr, start - (unsigned long)addr);
	if ((unsigned long)addr + len + PM_PMD_SIZE > start + len)
		pm_munmap(mm, start + len, (unsigned long)addr + PM_PMD_SIZE - start);
	return (long)start;
}

int bench_pm_touch(struct pm_mm *mm, unsigned long addr)
{
	char zero = 0;
	long r = pm_access(mm, addr, &zero, 1, 1);

	return r < 0 ? (int)r : 0;
}

int bench_pm_touch_range(struct pm_mm *mm, unsigned long addr, size_t len)
{
	for (size_t off = 0; off < len; off += PM_PAGE_SIZE) {
		int err = bench_pm_touch(mm, addr + off);

		if (err)
			return err;
	}
	return 0;
}

int bench_pm_file_task_init(struct bench_task *t)
{
	t->priv = pm_shmem_create(pm_mm_machine(t->mm), bench_size(t->run, BENCH_MEM), 0);
	return t->priv ? 0 : -errno;
}

int bench_pm_fault_unmap(struct bench_task *t, long addr, size_t len)
{
	if (addr < 0)
		return (int)addr;
	for (size_t off = 0; off < len && !bench_stopping(t->run); off += PM_PAGE_SIZE) {
		int err = bench_pm_touch(t->mm, (unsigned long)addr + off);

		if (err) {
			pm_munmap(t->mm, (unsigned long)addr, len);
			return err;
		}
		bench_count(t, 1);
	}
	return pm_munmap(t->mm, (unsigned long)addr, len);
}

int bench_pm_file_fault_loop(struct bench_task *t, int flags)
{
	size_t mem = bench_size(t->run, BENCH_MEM);

	return bench_pm_fault_unmap(t, pm_mmap(t->mm, 0, mem, PM_PROT_READ | PM_PROT_WRITE, flags,
					       t->priv, 0), mem);
}

void bench_pm_file_task_exit(struct bench_task *t)
{
	pm_shmem_put(t->priv);
}

void bench_pm_phase(struct bench_run *run, enum bench_phase phase)
{
	if (!run->pm.machine)
		return;
	if (phase == BENCH_PHASE_MEASURE)
		pm_machine_stats(run->pm.machine, &run->pm.begin);
	else if (phase == BENCH_PHASE_DONE)
		pm_machine_stats(run->pm.machine, &run->pm.end);
}

/* The share of the window's faults that ran under a per-VMA lock (Linux 6.4), as a note and
 * as the metrics vma_lock_share, vma_lock_success and vma_lock_abort. */
void bench_pm_fault_summary(struct bench_run *run)
{
	unsigned long ok = bench_pm_window(run, vma_lock_success);
	unsigned long abort = bench_pm_window(run, vma_lock_abort);
	unsigned long faults = bench_pm_window(run, faults);
	unsigned long zone = bench_pm_window(run, zone_lock_acquisitions);
	unsigned long remote = bench_pm_window(run, remote_frames);

	if (!run->pm.machine)
		return;
	bench_note(run, "%s: in the window %lu faults, %lu under a VMA lock, %lu went to mmap_lock",
		   run->bc->name, faults, ok, abort);
	bench_note(run, "%s: per 1000 faults, %.2f zone_lock acquisitions, %.2f remote frames",
		   run->bc->name, faults ? 1000.0 * (double)zone / (double)faults : 0.0,
		   faults ? 1000.0 * (double)remote / (double)faults : 0.0);
	bench_metric(run, "zone_lock_per_kfault", "%.3f",
		     faults ? 1000.0 * (double)zone / (double)faults : 0.0);
	bench_metric(run, "remote_frames_per_kfault", "%.3f",
		     faults ? 1000.0 * (double)remote / (double)faults : 0.0);
	bench_metric(run, "vma_lock_success", "%lu", ok);
	bench_metric(run, "vma_lock_abort", "%lu", abort);
	bench_metric(run, "vma_lock_share", "%.4f", faults ? (double)ok / (double)faults : 0.0);
}
