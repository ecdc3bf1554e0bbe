// SPDX-License-Identifier: MIT
/*
 * test_range_mm.c - the range design (src/mm/range.c): an address space whose operations on
 * non-overlapping ranges share no lock.
 *
 *  1. Choosing the design: PM_MACHINE_RANGE_MM, PM_MACHINE_LINUX_MM, both (EINVAL), and the
 *     PINMM_RANGE_MM=1 environment default that PM_MACHINE_LINUX_MM overrides.
 *  2. Arenas: threads that mmap without MAP_FIXED get addresses in ranges of their own.
 *  3. VMAs across a range boundary behave as anywhere else: one VMA, faults on both sides,
 *     splits and merges across it (the VMA count says so), pins across it, fork, munmap.
 *  4. Independence: with one range held for write by another thread, an mmap and munmap in
 *     this thread's arena and a fault elsewhere complete, while a fixed mmap into the held
 *     range waits for it (no timing is asserted: an operation that must wait cannot finish).
 *  5. max_map_count stays exact when two threads in two ranges race to the limit.
 *  6. A mapping larger than an arena falls back to a search of the whole address space.
 *  7. Races: per-thread workers map, split, merge and unmap VMAs that straddle their own range
 *     boundary and fault and pin through them, while faulters hammer a VMA next door; and two
 *     threads change one VMA over three ranges from either end (every change widens to all
 *     three). The data is checked and pm_machine_check() passes at the end.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RANGE (1UL << PM_RANGE_SHIFT)
#define MiB (1UL << 20)
#define HUGE (2 * MiB)

static struct pm_machine *range_machine(size_t mib)
{
	struct pm_config cfg = { .mem_bytes = mib << 20, .flags = PM_MACHINE_RANGE_MM };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

/* ---- 1. choosing the design ---- */

static void test_choose(void)
{
	struct pm_config cfg = { .mem_bytes = 16 << 20 };
	struct pm_machine *m;

	setenv("PINMM_RANGE_MM", "1", 1);
	m = pm_machine_create(&cfg);
	is_int(pm_machine_flags(m), PM_MACHINE_RANGE_MM, "PINMM_RANGE_MM=1: the range design");
	pm_machine_destroy(m);
	cfg.flags = PM_MACHINE_LINUX_MM;
	m = pm_machine_create(&cfg);
	is_int(pm_machine_flags(m), PM_MACHINE_LINUX_MM, "PM_MACHINE_LINUX_MM overrides it");
	pm_machine_destroy(m);
	setenv("PINMM_RANGE_MM", "0", 1);
	cfg.flags = 0;
	m = pm_machine_create(&cfg);
	is_int(pm_machine_flags(m), PM_MACHINE_LINUX_MM, "PINMM_RANGE_MM=0: Linux's design");
	pm_machine_destroy(m);
	cfg.flags = PM_MACHINE_RANGE_MM;
	m = pm_machine_create(&cfg);
	is_int(pm_machine_flags(m), PM_MACHINE_RANGE_MM, "PM_MACHINE_RANGE_MM whatever the env");
	pm_machine_destroy(m);
	unsetenv("PINMM_RANGE_MM");
	cfg.flags = PM_MACHINE_RANGE_MM | PM_MACHINE_LINUX_MM;
	errno = 0;
	ok(!pm_machine_create(&cfg) && errno == EINVAL, "both flags: EINVAL");
	cfg.flags = 0x4;
	errno = 0;
	ok(!pm_machine_create(&cfg) && errno == EINVAL, "an unknown flag: EINVAL");
}

/* ---- 2. arenas ---- */

struct mapper {
	struct pm_mm *mm;
	long addr;
};

static void *map_thread(void *arg)
{
	struct mapper *p = arg;

	p->addr = pm_mmap(p->mm, 0, 64 * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	return NULL;
}

static void test_arenas(void)
{
	struct pm_machine *m = range_machine(16);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct mapper p[3] = { { mm, 0 }, { mm, 0 }, { mm, 0 } };
	pthread_t th[3];
	long mine;

	mine = pm_mmap(mm, 0, 64 * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ok(mine > 0, "a non-fixed mmap");
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, map_thread, &p[i]);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ok(p[0].addr > 0 && p[1].addr > 0 && p[2].addr > 0, "three threads map");
	ok(range_of(mm, p[0].addr) != range_of(mm, p[1].addr) &&
	   range_of(mm, p[1].addr) != range_of(mm, p[2].addr) &&
	   range_of(mm, p[0].addr) != range_of(mm, p[2].addr) &&
	   range_of(mm, mine) != range_of(mm, p[0].addr) &&
	   range_of(mm, mine) != range_of(mm, p[1].addr) &&
	   range_of(mm, mine) != range_of(mm, p[2].addr),
	   "each thread maps in a range of its own");
	for (int i = 0; i < 3; i++) {
		is_int(pmt_put_tag(mm, p[i].addr, 64, 10 + i, 0), 64, "thread %d's mapping works", i);
		is_int(pmt_bad_tag(mm, p[i].addr, 64, 10 + i, 0), 0, "and keeps its data");
	}
	is_int(mm_map_count(mm), 4, "four VMAs");
	is_int(pm_mmap(mm, 0, 64 * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0),
	       mine - 64 * PG, "the next mapping goes right below the last, top-down");
	is_int(mm_map_count(mm), 4, "... and merges with it, as in Linux");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "arenas");
}

/* ---- 3. a boundary ---- */

static void test_boundary(void)
{
	struct pm_machine *m = range_machine(64);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	unsigned long b = 3 * RANGE, a = b - 8 * PG;
	struct pm_page *pages[16];

	is_int(pmt_map_fixed(mm, a, 16 * PG, RW), a, "a mapping across a range boundary");
	is_int(mm_map_count(mm), 1, "is one VMA");
	is_int(pmt_put_tag(mm, a, 16, 1, 0), 16, "faults on both sides");
	is_int(pm_pin_user_pages_fast(mm, a, 16, PM_FOLL_WRITE, pages), 16, "pins across it (fast)");
	is_int(pmt_bad_pin(pages, 16, 1, 0), 0, "the right pages");
	pm_unpin_user_pages(pages, 16);
	is_int(pm_mprotect(mm, b - PG, 2 * PG, PM_PROT_READ), 0, "mprotect of the two pages at it");
	is_int(mm_map_count(mm), 3, "splits into three");
	is_int(pm_fault(mm, b, PM_FAULT_WRITE), -EFAULT, "read-only on the far side");
	is_int(pm_fault(mm, b - PG, PM_FAULT_WRITE), -EFAULT, "and the near side");
	is_int(pm_mprotect(mm, b - PG, 2 * PG, RW), 0, "mprotect back");
	is_int(mm_map_count(mm), 1, "merges back into one");
	child = pmt_fork(mm);
	is_int(mm_map_count(child), 1, "the child has it as one VMA");
	is_int(pmt_bad_tag(child, a, 16, 1, 0), 0, "with the data");
	is_int(pmt_put_tag(child, a, 16, 2, 0), 16, "COW in the child");
	is_int(pmt_bad_tag(mm, a, 16, 1, 0), 0, "the parent keeps its data");
	pm_mm_destroy(child);
	is_int(pm_munmap(mm, b - 2 * PG, 4 * PG), 0, "munmap of a hole across it");
	is_int(mm_map_count(mm), 2, "two VMAs left");
	is_int(pm_fault(mm, b, 0), -EFAULT, "the hole is empty");
	is_int(pmt_bad_tag(mm, a, 6, 1, 0), 0, "the rest keeps its data");
	is_int(pmt_bad_tag(mm, b + 2 * PG, 6, 1, 10), 0, "on both sides");
	is_int(pmt_map_fixed(mm, b - 2 * PG, 2 * PG, RW), b - 2 * PG, "fill the near half");
	is_int(pmt_map_fixed(mm, b, 2 * PG, RW), b, "and the far half");
	is_int(mm_map_count(mm), 1, "everything merged into one VMA again");
	is_int(pm_munmap(mm, a, 16 * PG), 0, "munmap it all");
	is_int(mm_map_count(mm), 0, "no VMA");
	/* A VMA over three ranges, changed in the middle one and at its far end. */
	is_int(pmt_map_fixed(mm, b - PG, RANGE + 2 * PG, RW), b - PG, "a VMA over three ranges");
	is_int(pm_munmap(mm, b + RANGE / 2, PG), 0, "a hole in the middle");
	is_int(pmt_map_fixed(mm, b + RANGE + PG, PG, RW), b + RANGE + PG, "a neighbour at its end");
	is_int(mm_map_count(mm), 2, "two VMAs: the hole split it, the neighbour merged");
	is_int(pmt_put_tag(mm, b + RANGE + PG, 1, 3, 0), 1, "the merged page works");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "boundary");
}

/* ---- 4. independence ---- */

struct op {
	struct pm_mm *mm;
	unsigned long addr;
	int what; /* 0: mmap + munmap in the arena; 1: fixed mmap at addr; 2: fault at addr */
	atomic_int done;
	long ret;
};

static void *op_thread(void *arg)
{
	struct op *o = arg;

	if (o->what == 0) {
		long a = pm_mmap(o->mm, 0, 32 * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

		o->ret = a < 0 ? a : pm_munmap(o->mm, (unsigned long)a, 32 * PG);
	} else if (o->what == 1) {
		o->ret = pmt_map_fixed(o->mm, o->addr, PG, PM_PROT_READ);
	} else {
		o->ret = pm_fault(o->mm, o->addr, PM_FAULT_WRITE);
	}
	atomic_store(&o->done, 1);
	return NULL;
}

static bool wait_done(struct op *o, int ms)
{
	for (int i = 0; i < ms && !atomic_load(&o->done); i++)
		usleep(1000);
	return atomic_load(&o->done);
}

static void test_independent(void)
{
	struct pm_machine *m = range_machine(16);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long held = 5 * RANGE, other = 9 * RANGE;
	struct op o[3] = { { .mm = mm, .what = 0 },
			   { .mm = mm, .what = 1, .addr = held + 16 * PG },
			   { .mm = mm, .what = 2, .addr = other } };
	pthread_t th[3];
	bool done[3];

	is_int(pmt_map_fixed(mm, other, 4 * PG, RW), other, "a VMA in another range");
	pm__range_lock_slots(mm, range_of(mm, held), range_of(mm, held), true);
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, op_thread, &o[i]);
	done[0] = wait_done(&o[0], 5000);
	done[2] = wait_done(&o[2], 5000);
	done[1] = wait_done(&o[1], 50);
	pm__range_unlock(mm);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ok(done[0] && o[0].ret == 0, "mmap + munmap in the arena while a range is held");
	ok(done[2] && o[2].ret == 0, "a fault in another range while a range is held");
	ok(!done[1], "a fixed mmap into the held range waits for it");
	is_int(o[1].ret, (long)(held + 16 * PG), "and then completes");
	is_int(mm_map_count(mm), 2, "two VMAs");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "independence");
}

/* ---- 5. max_map_count ---- */

struct filler {
	struct pm_mm *mm;
	unsigned long base;
	long made;
};

static void *fill_thread(void *arg)
{
	struct filler *f = arg;

	/* One-page VMAs with a page between them: none merges. */
	for (unsigned long a = f->base;; a += 2 * PG) {
		long r = pmt_map_fixed(f->mm, a, PG, PM_PROT_READ);

		if (r < 0) {
			if (r != -ENOMEM)
				f->made = r;
			return NULL;
		}
		f->made++;
	}
}

static void test_map_count(void)
{
	struct pm_machine *m = range_machine(64);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct filler f[2] = { { mm, 20 * RANGE, 0 }, { mm, 40 * RANGE, 0 } };
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, fill_thread, &f[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ok(f[0].made > 0 && f[1].made > 0, "both threads made VMAs (%ld, %ld)", f[0].made, f[1].made);
	is_int(f[0].made + f[1].made, PM_MAX_MAP_COUNT, "exactly max_map_count between them");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT, "the count says so");
	is_int(pmt_map_fixed(mm, 60 * RANGE, PG, RW), -ENOMEM, "one more: -ENOMEM");
	is_int(pmt_map_fixed(mm, 20 * RANGE + PG, PG, PM_PROT_READ), 20 * RANGE + PG,
	       "one that merges two into one still comes in");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT - 1, "one fewer");
	is_int(pm_mprotect(mm, 40 * RANGE, PG / 2, RW), 0, "a change of a whole VMA needs no split");
	is_int(pm_munmap(mm, 40 * RANGE + 2 * PG, PG), 0, "munmap one");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT - 2, "two below the limit");
	is_int(pmt_map_fixed(mm, 60 * RANGE, PG, RW), 60 * RANGE, "now one comes in");
	is_int(pmt_map_fixed(mm, 61 * RANGE, PG, RW), 61 * RANGE, "and another");
	is_int(pmt_map_fixed(mm, 62 * RANGE, PG, RW), -ENOMEM, "and then no more");
	/* A split's charge when the only free unit waits in another range's credit: the change
	 * starts again holding every range, and takes it. */
	is_int(pm_munmap(mm, 40 * RANGE + 4 * PG, PG), 0, "munmap one in range 40");
	is_int(pm_mprotect(mm, 20 * RANGE, PG, RW), 0, "a split in range 20 takes its unit");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT, "at the limit again");
	is_int(pm_mprotect(mm, 20 * RANGE + PG, PG, RW), 0,
	       "a change of a head that the VMA before takes over needs no split (Linux)");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT, "still at the limit");
	is_int(pm_mprotect(mm, 20 * RANGE, PG, PM_PROT_READ), -ENOMEM,
	       "one that no neighbour takes must split: -ENOMEM");
	is_int(pm_munmap(mm, 40 * RANGE + 6 * PG, PG), 0, "munmap another in range 40");
	is_int(pm_madvise(mm, 20 * RANGE + PG, PG, PM_MADV_HUGEPAGE), 0,
	       "madvise's split takes the unit the same way");
	is_int(mm_map_count(mm), PM_MAX_MAP_COUNT, "at the limit");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "max_map_count");
}

/* ---- 6. fallback ---- */

static void test_fallback(void)
{
	struct pm_machine *m = range_machine(16);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a, b;

	a = pm_mmap(mm, 0, 2 * RANGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ok(a > 0, "a mapping larger than an arena (%#lx)", a);
	b = pm_mmap(mm, 0, 2 * RANGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ok(b > 0 && (b + 2 * (long)RANGE <= a || b >= a + 2 * (long)RANGE), "another, apart");
	is_int(pmt_put_tag(mm, a + RANGE - PG, 2, 4, 0), 2, "usable across its boundary");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "fallback");
}

/* ---- 7. races ---- */

#define WORKERS 2
static atomic_int stop;

struct worker {
	struct pm_mm *mm;
	unsigned long b; /* a range boundary of its own */
	unsigned seed;
	long errors;
};

static void *race_worker(void *arg)
{
	struct worker *w = arg;
	struct pm_page *pages[8];
	unsigned long a = w->b - 4 * PG;
	uint32_t tag = 1;

	while (!atomic_load(&stop)) {
		unsigned r = (unsigned)rand_r(&w->seed);

		if (pmt_map_fixed(w->mm, a, 8 * PG, RW) != (long)a) {
			w->errors++;
			continue;
		}
		if (pmt_put_tag(w->mm, a, 8, tag, 0) != 8)
			w->errors++;
		if (r & 1) {
			pm_mprotect(w->mm, w->b - PG, 2 * PG, PM_PROT_READ);
			pm_mprotect(w->mm, w->b - PG, 2 * PG, RW);
		}
		if (r & 2) {
			long n = pm_pin_user_pages(w->mm, a, 8, PM_FOLL_WRITE, pages);

			if (n != 8 || pmt_bad_pin(pages, 8, tag, 0))
				w->errors++;
			if (n > 0)
				pm_unpin_user_pages(pages, (unsigned long)n);
		}
		if (pmt_bad_tag(w->mm, a, 8, tag, 0))
			w->errors++;
		if (pm_munmap(w->mm, a, 8 * PG))
			w->errors++;
		tag++;
	}
	return NULL;
}

struct faulter {
	struct pm_mm *mm;
	unsigned long addr;
	long errors;
};

static void *race_faulter(void *arg)
{
	struct faulter *f = arg;

	while (!atomic_load(&stop)) {
		for (unsigned long i = 0; i < 16; i++)
			if (pm_fault(f->mm, f->addr + i * PG, PM_FAULT_WRITE))
				f->errors++;
		pm_madvise(f->mm, f->addr, 16 * PG, PM_MADV_DONTNEED);
		long a = pm_mmap(f->mm, 0, 8 * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

		if (a < 0 || pm_munmap(f->mm, (unsigned long)a, 8 * PG))
			f->errors++;
	}
	return NULL;
}

/* Two threads change one VMA that spans three ranges, each from its own end: every change
 * widens to all three ranges, so they take turns, in address order, and never deadlock. */
struct spanner {
	struct pm_mm *mm;
	unsigned long base; /* its own 8 pages, inside the shared VMA */
	long errors;
};

static void *span_worker(void *arg)
{
	struct spanner *w = arg;
	uint32_t tag = 1;

	while (!atomic_load(&stop)) {
		unsigned long a = w->base + (tag % 8) * PG;

		if (pm_mprotect(w->mm, a, PG, PM_PROT_READ) ||
		    pm_fault(w->mm, a, PM_FAULT_WRITE) != -EFAULT ||
		    pm_mprotect(w->mm, a, PG, RW) || pmt_put_tag(w->mm, a, 1, tag, 0) != 1 ||
		    pmt_bad_tag(w->mm, a, 1, tag, 0))
			w->errors++;
		if (!(tag % 16) && (pm_munmap(w->mm, a, PG) || pmt_map_fixed(w->mm, a, PG, RW) != (long)a))
			w->errors++;
		tag++;
	}
	return NULL;
}

static void test_span_races(void)
{
	struct pm_machine *m = range_machine(64);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long start = 11 * RANGE - 16 * PG, len = 2 * RANGE + 32 * PG;
	struct spanner w[2] = { { mm, start, 0 }, { mm, start + len - 8 * PG, 0 } };
	pthread_t th[2];

	is_int(pmt_map_fixed(mm, start, len, RW), start, "a VMA over three ranges");
	atomic_store(&stop, 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, span_worker, &w[i]);
	usleep((useconds_t)(tap_seconds(1) * 1e6));
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	is_int(w[0].errors + w[1].errors, 0, "both ends changed it without a wrong answer");
	is_int(mm_map_count(mm), 1, "it is one VMA again");
	is_int(pm_machine_check(m), 0, "the machine checks out");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "spanning races");
}

static void test_races(void)
{
	struct pm_machine *m = range_machine(64);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct worker w[WORKERS];
	struct faulter f = { .mm = mm, .addr = 7 * RANGE + 8 * PG };
	pthread_t th[WORKERS + 1];
	double secs = tap_seconds(1);

	/* The faulter's VMA lies four pages above worker 0's, in the same range. */
	is_int(pmt_map_fixed(mm, f.addr, 16 * PG, RW), f.addr, "the faulter's VMA");
	atomic_store(&stop, 0);
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){ .mm = mm, .b = (7 + 2 * (unsigned long)i) * RANGE,
					.seed = 1u + (unsigned)i };
		pthread_create(&th[i], NULL, race_worker, &w[i]);
	}
	pthread_create(&th[WORKERS], NULL, race_faulter, &f);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	for (int i = 0; i <= WORKERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < WORKERS; i++)
		is_int(w[i].errors, 0, "worker %d: every step did what it should", i);
	is_int(f.errors, 0, "the faulter's faults all succeeded");
	is_int(mm_map_count(mm), 1, "only the faulter's VMA is left");
	is_int(pm_machine_check(m), 0, "the machine checks out");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "races");
}

/* ---- 6. a range's PUD table lives as long as the mm ---- */

/*
 * mmap fills the range's PGD entry and the span's PUD entry (policy eager_upper); munmap
 * keeps the PUD and PMD tables, so a map/unmap loop allocates no table after its first turn,
 * and the teardown frees them.
 */
static void test_pud_kept(void)
{
	struct pm_machine *m = range_machine(16);
	size_t free0 = pm_machine_free_pages(m), created, once;
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long a = 7 * RANGE;
	int bad = 0;

	ASSERT_TRUE(mm);
	pm_rcu_barrier();
	created = pm_machine_free_pages(m);
	is_int(pmt_map_fixed(mm, a, 128 * MiB, RW), a, "map 128 MiB in a fresh range");
	is_int(pm_munmap(mm, a, 128 * MiB), 0, "and unmap it");
	pm_rcu_barrier();
	once = pm_machine_free_pages(m);
	is_int(once, created - 2, "two frames stay: the range's PUD table, the span's PMD table");
	for (int i = 0; i < 100; i++) {
		bad += pmt_map_fixed(mm, a + (i % 4) * HUGE, 128 * MiB, RW) !=
		       (long)(a + (i % 4) * HUGE);
		bad += pm_fault(mm, a + (i % 4) * HUGE + i * PG, PM_FAULT_WRITE) != 0;
		bad += pm_munmap(mm, a + (i % 4) * HUGE, 128 * MiB) != 0;
	}
	pm_rcu_barrier();
	is_int(bad, 0, "100 turns of mmap, a fault and munmap");
	is_int(pm_machine_free_pages(m), once,
	       "the PTE tables went, the PUD and PMD tables are the same ones");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "the teardown frees them");
}

int main(void)
{
	test_choose();
	test_arenas();
	test_boundary();
	test_independent();
	test_map_count();
	test_fallback();
	test_races();
	test_span_races();
	test_pud_kept();
	return done_testing();
}
