/* SPDX-License-Identifier: MIT */
/*
 * bench.h - the contract between pinmm-bench's driver and its test cases, and the helpers
 * the cases share.
 *
 * The shape is will-it-scale's (one file per case, a loop that counts iterations, a parent
 * that samples every task's counter once per interval), with the contract typed:
 *
 *   prepare(run)	in the parent, once, before any task exists. Sizes and creates what
 *			the tasks share: a pinmm machine (bench_pm_setup()), a memfd, a
 *			barrier. May answer bench_unavailable() (host feature missing).
 *   task_init(t)	in the task (thread, or forked process for host cases in processes
 *			mode), before the start signal: per-task buffers, files, rings.
 *   loop(t)		the loop body. The driver calls it until the run stops; each call
 *			does some work and counts it with bench_count(). Returns 0 or -errno.
 *   task_exit(t)	in the task, after its last loop() call.
 *   phase(run, p)	in the parent, when the measurement window opens and closes.
 *   summary(run)	in the parent after the tasks are gone: extra figures, printed with
 *			bench_note() (stderr) and bench_metric() (the --metrics file).
 *   cleanup(run)	in the parent, last. Then the driver runs the hooks registered with
 *			bench_at_cleanup(): a pinmm machine made by bench_pm_setup() is
 *			destroyed by one, after cleanup().
 *
 * Counters: task i's counter lives at offset i * BENCH_COUNTER_STRIDE (256 bytes) in a
 * MAP_SHARED anonymous area, so no two tasks' counters share a cache line, and forked tasks
 * share them with the parent. Only the owning task writes its counter; the parent reads.
 *
 * Stopping: a task never gets cancelled. The driver checks bench_stopping() between loop()
 * calls; a long loop body may check it too and return early (0). A loop body that waits (a
 * barrier) must use bench_barrier_wait(), which gives up when the run stops, so no task can
 * be left waiting for one that has already left. cleanup() runs even when prepare() failed
 * half way: it frees what is there.
 *
 * Modes: for pinmm cases, "threads" means every task shares one pm_mm and "processes" means
 * every task has its own pm_mm on the same machine (tasks are threads either way). For host
 * cases (BENCH_F_HOST), "processes" means real fork()ed processes, as in will-it-scale.
 */
#ifndef PINMM_BENCH_H
#define PINMM_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pinmm/pinmm.h>

#define BENCH_MAX_TASKS 2048		/* will-it-scale's MAX_TASKS */
#define BENCH_COUNTER_STRIDE 256	/* will-it-scale's MAX_CACHELINE_SIZE */
#define BENCH_UNAVAILABLE 1		/* prepare(): the host lacks what the case needs */
#define BENCH_MAX_CLEANUPS 4		/* bench_at_cleanup() hooks per run */

#define BENCH_MIB (1UL << 20)
#define BENCH_GIB (1UL << 30)
#define BENCH_MEM (128UL << 20)		/* will-it-scale's MEMSIZE for the mm classics */

enum bench_mode {
	BENCH_THREADS,
	BENCH_PROCESSES,
};

enum bench_phase {
	BENCH_PHASE_WARMUP,
	BENCH_PHASE_MEASURE,
	BENCH_PHASE_DONE,
};

/* Case flags. */
#define BENCH_F_HOST 0x1	/* runs on the host kernel: processes mode forks */

struct bench_case;
struct bench_shared;

/* The pinmm environment of a run: one machine, one mm (threads) or one per task. */
struct bench_pm {
	struct pm_machine *machine;
	struct pm_mm **mms;
	unsigned nr_mms;
	size_t free_at_start;	/* pm_machine_free_pages() right after creation */
	struct pm_stats begin;	/* counters when the measurement window opened */
	struct pm_stats end;	/* and when it closed */
};

/* One invocation of a case. Read-only for the tasks once prepare() has returned. */
struct bench_run {
	const struct bench_case *bc;
	unsigned nr_tasks;
	enum bench_mode mode;
	unsigned knobs;		/* PM_KNOB_* (pinmm cases) */
	unsigned mm_flags;	/* PM_MACHINE_LINUX_MM or _RANGE_MM (--mm) */
	const char *variant;	/* the selected variant; never NULL when the case has any */
	size_t size;		/* --size: the working set override in bytes, 0 = the case's */
	struct bench_shared *shared; /* counters, stop flag, phase: MAP_SHARED */
	struct bench_pm pm;
	void *priv;		/* the case's run-wide state */
	FILE *metrics;		/* --metrics FILE, or NULL */
	uint64_t measured_ns;	/* for summary(): the measurement window's length */
	unsigned long long measured_iterations; /* and the iterations counted in it */
	char unavailable[256];	/* why the case cannot run here (BENCH_UNAVAILABLE) */
	void (*cleanups[BENCH_MAX_CLEANUPS])(struct bench_run *run); /* bench_at_cleanup() */
	unsigned nr_cleanups;
};

/* One task. Lives in the task's own memory (threads: the driver's array). */
struct bench_task {
	struct bench_run *run;
	unsigned nr;			/* 0 .. nr_tasks - 1 */
	unsigned long long *iterations;	/* this task's counter slot */
	struct pm_mm *mm;		/* pinmm cases: this task's address space */
	void *priv;			/* the case's per-task state */
};

struct bench_case {
	const char *name;
	const char *description;	/* printed after "testcase:"; must not contain ':' */
	const char *variants;		/* "a|b|c": the first is the default; NULL: none */
	const char *seed;		/* the experiment it reproduces, for `list` */
	unsigned flags;			/* BENCH_F_* */
	unsigned before_knobs;		/* what `--knobs before` selects (pinmm cases) */
	int (*prepare)(struct bench_run *run);
	int (*task_init)(struct bench_task *t);
	int (*loop)(struct bench_task *t);
	void (*task_exit)(struct bench_task *t);
	void (*phase)(struct bench_run *run, enum bench_phase phase);
	void (*summary)(struct bench_run *run);
	void (*cleanup)(struct bench_run *run);
};

/* ---- the case table (bench/cases.c): one bench/cases/<name>.c per entry ---- */

#define BENCH_CASE_LIST(X) \
	X(pin_fast) X(gup_fast) X(mr_reg) X(shmem_fault) \
	X(page_fault1) X(page_fault2) X(page_fault3) X(mmap1) X(mmap2) X(fault_churn) \
	X(migrate_gup) X(longterm_frag) X(pin_hot) \
	X(host_pin_fast) X(host_gup_fast) X(host_mr_reg) X(host_shmem_fault) \
	X(host_page_fault1) X(host_page_fault2) X(host_page_fault3) X(host_mmap1) X(host_mmap2)

#define BENCH_DECLARE_CASE(n) extern const struct bench_case bench_case_##n;
BENCH_CASE_LIST(BENCH_DECLARE_CASE)
#undef BENCH_DECLARE_CASE

/* ---- the run (bench/run.c) ---- */

/** bench_count() - add @n iterations to the calling task's counter. */
static inline void bench_count(struct bench_task *t, unsigned long long n)
{
	/* Single writer: a relaxed load and store, never a locked add. */
	__atomic_store_n(t->iterations, __atomic_load_n(t->iterations, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

bool bench_stopping(const struct bench_run *run);
enum bench_phase bench_phase(const struct bench_run *run);

/** bench_unavailable() - record why the case cannot run here; returns BENCH_UNAVAILABLE. */
int bench_unavailable(struct bench_run *run, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bench_note(const struct bench_run *run, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bench_metric(const struct bench_run *run, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * bench_at_cleanup() - run @fn(run) in the parent after cleanup(), last registered first; for
 * helpers that own something of the run (bench_pm_setup() registers the machine's teardown).
 * Return: 0, or -ENOSPC after BENCH_MAX_CLEANUPS hooks.
 */
int bench_at_cleanup(struct bench_run *run, void (*fn)(struct bench_run *run));

/** bench_task_owns_mm() - true for the one task of each address space that starts helpers. */
static inline bool bench_task_owns_mm(const struct bench_task *t)
{
	return t->run->mode == BENCH_PROCESSES || t->nr == 0;
}

/** bench_size() - the working-set size: --size when given, else @dflt. */
static inline size_t bench_size(const struct bench_run *run, size_t dflt)
{
	return run->size ? run->size : dflt;
}

/* ---- shared memory, barriers, timing (bench/util.c) ---- */

/* Memory shared with forked tasks (MAP_SHARED | MAP_ANONYMOUS), zeroed; NULL on failure. */
void *bench_shared_alloc(size_t size);
void bench_shared_free(void *p, size_t size);

/* A barrier for @n tasks that works across fork and gives up when the run stops. */
struct bench_barrier {
	uint32_t arrived;
	uint32_t generation;
	uint32_t n;
};
void bench_barrier_init(struct bench_barrier *b, unsigned n);
/** bench_barrier_wait() - true when all @n arrived; false when the run is stopping. */
bool bench_barrier_wait(const struct bench_run *run, struct bench_barrier *b);

uint64_t bench_now_ns(void);

/*
 * Per-task samples of a duration (nanoseconds), in shared memory: filled by the tasks during
 * the measurement window, read by summary(). At most @cap samples per task are kept.
 */
struct bench_samples;
struct bench_samples *bench_samples_create(unsigned nr_tasks, unsigned cap);
void bench_samples_add(struct bench_samples *s, unsigned task, uint64_t ns);
unsigned long bench_samples_count(const struct bench_samples *s);
/** bench_samples_median() - the median over every task's samples, in ns (0 if none). */
double bench_samples_median(const struct bench_samples *s);
double bench_samples_mean(const struct bench_samples *s);
void bench_samples_destroy(struct bench_samples *s);

/*
 * The register/deregister experiment's report, as the seed printed it
 * ("N rounds in S sec: X usec / round") plus the medians of each half; metrics
 * round_usec_median, reg_usec_median, unreg_usec_median, rounds.
 */
void bench_rounds_summary(struct bench_run *run, const char *what,
			  struct bench_samples *reg, struct bench_samples *unreg);
/*
 * The shmem experiment's report: the seconds to fault the whole area, as the seed gave them,
 * both from the rate over the window (area_sec: @touches_per_area / touches per second) and
 * as the wall-clock median of the complete areas (area_sec_median; none when an area takes
 * longer than the window).
 */
void bench_area_summary(struct bench_run *run, struct bench_samples *area,
			unsigned long touches_per_area);

/* ---- pinmm helpers (bench/pm.c) ---- */

/**
 * bench_pm_setup() - create a machine of at least @mem_bytes (rounded up to 2 MiB) with the
 * run's knobs, and its address spaces: one in threads mode, one per task in processes mode.
 * Registers their teardown with bench_at_cleanup(): the driver destroys them after cleanup()
 * (and says so when frames leaked), whether or not the setup got that far.
 * Return: 0 or -errno.
 */
int bench_pm_setup(struct bench_run *run, size_t mem_bytes);
/** bench_pm_setup_hugetlb() - bench_pm_setup() with a hugetlb pool of @nr_hugepages 2 MiB
 * pages set aside out of @mem_bytes. */
int bench_pm_setup_hugetlb(struct bench_run *run, size_t mem_bytes, size_t nr_hugepages);
/** bench_pm_map_anon() - a private anonymous read/write mapping; address or -errno. */
long bench_pm_map_anon(struct pm_mm *mm, size_t len);
/** bench_pm_map_aligned() - as bench_pm_map_anon(), starting on a 2 MiB boundary. */
long bench_pm_map_aligned(struct pm_mm *mm, size_t len);
/** bench_pm_touch() - a one-byte user write at @addr, as `*p = 0` would do. */
int bench_pm_touch(struct pm_mm *mm, unsigned long addr);
/** bench_pm_touch_range() - touch every page of [@addr, @addr + @len). 0 or -errno. */
int bench_pm_touch_range(struct pm_mm *mm, unsigned long addr, size_t len);
/**
 * bench_pm_fault_unmap() - the will-it-scale page-fault loop body: write one byte in every
 * page of the mapping at @addr (+1 each), then unmap it. @addr may be an -errno from the map.
 */
int bench_pm_fault_unmap(struct bench_task *t, long addr, size_t len);
/*
 * The per-task file of page_fault2/3: a task_init() that gives each task a shmem object of the
 * run's size, a loop body that maps it with @flags (PM_MAP_PRIVATE or PM_MAP_SHARED), writes
 * every page (+1 each) and unmaps, and the task_exit() that drops the object.
 */
int bench_pm_file_task_init(struct bench_task *t);
int bench_pm_file_fault_loop(struct bench_task *t, int flags);
void bench_pm_file_task_exit(struct bench_task *t);
/** bench_pm_phase() - a phase() hook that snapshots the machine's counters into run->pm. */
void bench_pm_phase(struct bench_run *run, enum bench_phase phase);
/* summary() of the fault cases: how many faults ran under a per-VMA lock. */
void bench_pm_fault_summary(struct bench_run *run);

/** bench_pm_window() - a counter's growth over the measurement window. */
#define bench_pm_window(run, field) ((run)->pm.end.field - (run)->pm.begin.field)

/* ---- host helpers (bench/host.c) ---- */

/** bench_host_tmpfile() - an unlinked temporary file of @size bytes; fd or -errno. */
int bench_host_tmpfile(size_t size);
/* The host twins of the bench_pm_file_* helpers: a temporary file per task, mapped with @flags
 * (MAP_PRIVATE or MAP_SHARED), one byte written per page (+1 each), unmapped. */
int bench_host_file_task_init(struct bench_task *t);
int bench_host_file_fault_loop(struct bench_task *t, int flags);
void bench_host_file_task_exit(struct bench_task *t);
/** bench_host_touch() - write one byte in every page of [@p, @p + @len). */
void bench_host_touch(void *p, size_t len);
/** bench_host_map_aligned() - anonymous memory of @len aligned to @align; NULL on failure. */
void *bench_host_map_aligned(size_t len, size_t align);
void bench_host_unmap_aligned(void *p, size_t len, size_t align);
/** bench_host_anon_huge_kb() - AnonHugePages of this process, in KiB (-1 if unknown). */
long bench_host_anon_huge_kb(void);

/* A thread that mmaps and munmaps unrelated ranges until stopped (the writer of mmap_lock). */
struct bench_churn;
struct bench_churn *bench_churn_start(struct bench_run *run, struct pm_mm *mm);
/* The same, on pinmm only, with mappings that never touch, merge with or split a task's VMA. */
struct bench_churn *bench_churn_start_apart(struct bench_run *run, struct pm_mm *mm);
/** bench_churn_stop() - stop and free it; returns how many mmap+munmap pairs it did. */
unsigned long long bench_churn_stop(struct bench_churn *c);

#endif /* PINMM_BENCH_H */
