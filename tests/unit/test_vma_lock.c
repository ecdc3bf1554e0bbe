// SPDX-License-Identifier: MIT
/*
 * test_vma_lock.c - faults under per-VMA locks (src/mm/vma_lock.c), and the limit on VMAs.
 *
 *  1. The counters: a fault on a quiet VMA completes under its own lock (vma_lock_success);
 *     PM_KNOB_NO_PER_VMA_LOCK sends every fault to mmap_lock (no success, no abort).
 *  2. A writer holding mmap_lock for write does not stop a fault on another VMA; with the knob
 *     it does, until the writer leaves.
 *  3. A writer that write-locks the faulting VMA does stop it: the fault gives up on the VMA
 *     lock (vma_lock_abort), waits for mmap_lock, and completes after the writer.
 *  4. Faults on one VMA race mprotect, splits, merges and MAP_FIXED replacements of it: a
 *     thread never reads a page of an earlier mapping, never loses a write made while the
 *     mapping stayed put, and the machine checks out afterwards.
 *  5. max_map_count: the 65531st VMA, by mmap or by a split, is -ENOMEM, and nothing changes.
 */
#include <pthread.h>
#include <sched.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"
#include "lib/vma_hold.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define FIX (PM_MAP_FIXED | PRIV)

static void test_counters(unsigned knobs)
{
	struct pm_machine *m = pmt_machine(16, knobs);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, 64 * PG, RW, false);
	struct pm_stats s0 = pmt_stats(m), s1;
	bool knob = knobs & PM_KNOB_NO_PER_VMA_LOCK;

	for (unsigned long i = 0; i < 64; i++)
		is_int(pm_fault(mm, a + i * PG, i & 1 ? PM_FAULT_WRITE : 0), 0, "fault %lu", i);
	s1 = pmt_stats(m);
	is_int(s1.vma_lock_success - s0.vma_lock_success, knob ? 0 : 64,
	       "%s: every fault completed under the VMA lock", knob ? "knob" : "default");
	is_int(s1.vma_lock_abort - s0.vma_lock_abort, 0, "no abort");
	is_int(pm_fault(mm, a + 64 * PG, 0), -EFAULT, "no VMA: -EFAULT");
	s0 = pmt_stats(m);
	is_int(s0.vma_lock_abort - s1.vma_lock_abort, knob ? 0 : 1,
	       "a fault with no VMA goes to mmap_lock (vma_lock_abort)");
	ok(!pm_mprotect(mm, a, PG, PM_PROT_READ) && pm_fault(mm, a, PM_FAULT_WRITE) == -EFAULT,
	   "a write to a read-only VMA is -EFAULT under either lock");
	pm_mm_destroy(mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

/* ---- a fault while a writer holds mmap_lock ---- */

struct faulter {
	struct pm_mm *mm;
	unsigned long addr;
	atomic_int done;
	int ret;
};

static void *fault_thread(void *arg)
{
	struct faulter *f = arg;

	f->ret = pm_fault(f->mm, f->addr, PM_FAULT_WRITE);
	atomic_store(&f->done, 1);
	return NULL;
}

/* Give the faulting thread time to get as far as it can (no timing is asserted: a fault that
 * must wait cannot finish however long we give it; one that need not, finishes). */
static bool wait_done(struct faulter *f, int ms)
{
	for (int i = 0; i < ms && !atomic_load(&f->done); i++)
		usleep(1000);
	return atomic_load(&f->done);
}

static void test_writer_elsewhere(unsigned knobs, bool lock_that_vma)
{
	struct pm_machine *m = pmt_machine(16, knobs);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, 16 * PG, RW, false);
	unsigned long b = pmt_map_anon(mm, 16 * PG, PM_PROT_READ, false); /* not mergeable */
	struct faulter f = { .mm = mm, .addr = a + 3 * PG };
	struct pm_stats s0 = pmt_stats(m), s1;
	bool knob = knobs & PM_KNOB_NO_PER_VMA_LOCK;
	pthread_t th;
	bool during;

	mmap_write_lock_all(mm); /* mmap_lock (W), or every range */
	if (lock_that_vma)
		pm__vma_start_write(pm__find_vma(mm, a));
	pthread_create(&th, NULL, fault_thread, &f);
	during = wait_done(&f, knob || lock_that_vma ? 50 : 5000);
	mmap_write_unlock(mm);
	pthread_join(th, NULL);
	s1 = pmt_stats(m);
	if (knob)
		ok(!during, "knob: the fault waits for the writer (mmap_lock)");
	else if (lock_that_vma)
		ok(!during && s1.vma_lock_abort > s0.vma_lock_abort,
		   "the writer locked that VMA: the fault gave up on it and waited for mmap_lock");
	else
		ok(during && s1.vma_lock_success > s0.vma_lock_success,
		   "a writer on another VMA does not stop the fault (per-VMA lock)");
	is_int(f.ret, 0, "the fault completes");
	pm_munmap(mm, b, 16 * PG);
	pm_mm_destroy(mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

/* ---- faults racing changes of their VMA ---- */

#define NR 3
#define RPAGES 64
#define RBASE 0x200000000UL
#define H 4096
static struct pm_mm *race_mm;
static atomic_ulong race_gen; /* odd while the churn thread replaces pages of the mapping */
static atomic_ulong remap_gen[RPAGES]; /* the even generation that last replaced the page */
static atomic_ulong conf_ctr[NR][H], conf_gen[NR][H]; /* writes known to be done, and when */
static atomic_int race_stop;
static atomic_long race_stale, race_lost, race_checked, race_iters;

/*
 * Each worker stores unique values (counter << 8 | worker) into its own word of random pages
 * and reads the page back. A store is "confirmed" when no replacement ran around it (the
 * generation did not move): it certainly landed before any later replacement of that page. A
 * page read in a quiet window must then never show a confirmed store older than the page's
 * last replacement - that would be a page of an earlier mapping, reached through a stale VMA
 * or a page table that a fault filled after munmap had zapped it.
 */
static void *race_worker(void *arg)
{
	unsigned wid = (unsigned)(uintptr_t)arg;
	uint64_t rs = wid + 1, ctr = 0;

	while (!atomic_load(&race_stop)) {
		unsigned long g0 = atomic_load(&race_gen), g1, rg;
		unsigned long p = tap_rand(&rs) % RPAGES, addr = RBASE + p * PG;
		uint64_t mine = (++ctr << 8) | (wid + 1), page[PG / 8];

		atomic_fetch_add(&race_iters, 1);
		if (g0 & 1)
			continue;
		if (pm_access(race_mm, addr + wid * 8, &mine, 8, 1) != 8)
			continue; /* read-only or unmapped just now */
		if (pm_access(race_mm, addr, page, PG, 0) != PG)
			continue;
		rg = atomic_load(&remap_gen[p]); /* before g1: then it belongs to the window */
		g1 = atomic_load(&race_gen);
		if (g1 != g0)
			continue; /* replaced meanwhile: anything may be there */
		atomic_store(&conf_gen[wid][ctr % H], g0);
		atomic_store(&conf_ctr[wid][ctr % H], ctr);
		atomic_fetch_add(&race_checked, 1);
		if (page[wid] != mine)
			atomic_fetch_add(&race_lost, 1);
		for (unsigned i = 0; i < NR; i++) {
			uint64_t c = page[i] >> 8;

			if (i == wid || !page[i])
				continue;
			if (atomic_load(&conf_ctr[i][c % H]) == c &&
			    atomic_load(&conf_gen[i][c % H]) < rg) {
				if (!atomic_fetch_add(&race_stale, 1))
					diag("page %lu word %u: %#lx, stored in generation %lu, "
					     "replaced in %lu, read in %lu", p, i, (unsigned long)page[i],
					     atomic_load(&conf_gen[i][c % H]),
					     rg, g0);
			}
		}
	}
	return NULL;
}

static bool replace(unsigned long first, unsigned long n, bool unmap_first)
{
	unsigned long a = RBASE + first * PG;
	bool good = true;

	atomic_fetch_add(&race_gen, 1);
	if (unmap_first)
		good &= !pm_munmap(race_mm, a, n * PG);
	good &= pm_mmap(race_mm, a, n * PG, RW, FIX, NULL, 0) == (long)a;
	for (unsigned long p = first; p < first + n; p++)
		atomic_store(&remap_gen[p], atomic_load(&race_gen) + 1);
	atomic_fetch_add(&race_gen, 1);
	return good;
}

static void test_race(unsigned knobs)
{
	struct pm_machine *m = pmt_machine(64, knobs);
	long rounds = tap_scale(3000);
	uint64_t rs = 99;
	pthread_t th[NR];
	bool maps_ok = true;

	race_mm = pm_mm_create(m);
	atomic_store(&race_stop, 0);
	atomic_store(&race_stale, 0);
	atomic_store(&race_lost, 0);
	atomic_store(&race_checked, 0);
	atomic_store(&race_iters, 0);
	memset(conf_ctr, 0, sizeof(conf_ctr)); /* counters start again at 1 */
	maps_ok &= pm_mmap(race_mm, RBASE, RPAGES * PG, RW, FIX, NULL, 0) == (long)RBASE;
	for (unsigned i = 0; i < NR; i++)
		pthread_create(&th[i], NULL, race_worker, (void *)(uintptr_t)i);
	/* At least @rounds rounds, and on until the workers have run as many iterations: on a
	 * loaded machine they may not get a CPU at first (bounded, so the test always ends). */
	for (long r = 0; maps_ok && r < 100 * rounds &&
			 (r < rounds || atomic_load(&race_iters) < rounds);
	     r++) {
		unsigned long off = (tap_rand(&rs) % (RPAGES / 2)) * PG;

		if (r % 16 == 0)
			sched_yield();

		switch (tap_rand(&rs) % 4) {
		case 0: /* a new mapping over all of it */
			maps_ok &= replace(0, RPAGES, false);
			break;
		case 1: /* unmap a piece and map it again: a split, then a merge */
			maps_ok &= replace(off / PG, 8, true);
			break;
		case 2: /* read-only and back: splits and merges with the data kept */
			maps_ok &= !pm_mprotect(race_mm, RBASE + off, 5 * PG, PM_PROT_READ);
			maps_ok &= !pm_mprotect(race_mm, RBASE + off, 5 * PG, RW);
			break;
		default: /* THP advice flips: flag changes under the VMA's write lock */
			maps_ok &= !pm_madvise(race_mm, RBASE + off, 3 * PG,
					       r & 1 ? PM_MADV_HUGEPAGE : PM_MADV_NOHUGEPAGE);
			break;
		}
	}
	atomic_store(&race_stop, 1);
	for (unsigned i = 0; i < NR; i++)
		pthread_join(th[i], NULL);
	ok(maps_ok, "at least %ld rounds of mmap/munmap/mprotect/madvise of the faulted VMA", rounds);
	ok(atomic_load(&race_stale) == 0, "no page of an earlier mapping ever seen (%ld checks)",
	   atomic_load(&race_checked));
	ok(atomic_load(&race_lost) == 0, "no write lost while the mapping stayed put");
	ok(knobs || PMT_STAT(m, vma_lock_success) > 0,
	   "faults ran under VMA locks (%lu, %lu aborted; %ld worker iterations)",
	   PMT_STAT(m, vma_lock_success), PMT_STAT(m, vma_lock_abort), atomic_load(&race_iters));
	pm_mm_destroy(race_mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

/* ---- per-CPU reader counts of a contended VMA ---- */

struct protector {
	struct pm_mm *mm;
	unsigned long addr;
	atomic_int done;
	int ret;
};

static void *mprotect_thread(void *arg)
{
	struct protector *p = arg;

	p->ret = pm_mprotect(p->mm, p->addr, 64 * PG, PM_PROT_READ);
	atomic_store(&p->done, 1);
	return NULL;
}

static void test_pcpu(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, 64 * PG, RW, false);
	struct pm_vma *vma = pm__find_vma(mm, a);
	struct pmt_vma_holder h;
	struct protector pr = { .mm = mm, .addr = a };
	pthread_t tp;
	bool faults_ok = true, during;

	/* Another thread holds the VMA while this one faults in it: contention, then per-CPU
	 * counts. */
	pmt_vma_hold(&h, vma);
	for (unsigned long i = 0; i < 200; i++)
		faults_ok &= pm_fault(mm, a + (i % 64) * PG, PM_FAULT_WRITE) == 0;
	ok(atomic_load(&h.ok) && faults_ok && atomic_load_relaxed(&vma->xpcpu),
	   "a VMA read-locked by two threads at once gets per-CPU reader counts");
	pmt_vma_release(&h);

	/* A reader counted per CPU still holds a writer off until it leaves. */
	pmt_vma_hold(&h, vma);
	ok(atomic_load(&h.ok), "read-locked through a per-CPU slot");
	pthread_create(&tp, NULL, mprotect_thread, &pr);
	during = false;
	for (int i = 0; i < 50 && !during; i++) {
		usleep(1000);
		during = atomic_load(&pr.done);
	}
	ok(!during, "mprotect of the VMA waits for the per-CPU reader");
	pmt_vma_release(&h);
	pthread_join(tp, NULL);
	is_int(pr.ret, 0, "and completes once it left");
	is_int(pm_fault(mm, a, PM_FAULT_WRITE), -EFAULT, "the new protection holds");
	is_int(pm_fault(mm, a, 0), 0, "reads fault fine");
	pm_mm_destroy(mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

/* ---- max_map_count ---- */

static void test_map_count(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long base = 0x100000000UL, far = base + 1024 * MiB, n = PM_MAX_MAP_COUNT;
	bool good = true;

	/* Alternate protections so that neighbours never merge: VMA i is page i. */
	for (unsigned long i = 0; i < n && good; i++)
		good = pm_mmap(mm, base + i * PG, PG, i & 1 ? PM_PROT_READ : RW, FIX, NULL, 0) ==
		       (long)(base + i * PG);
	ok(good && mm_map_count(mm) == n, "65530 VMAs");
	is_int(pm_mmap(mm, 0, PG, RW, PRIV, NULL, 0), -ENOMEM, "the 65531st mmap: -ENOMEM");
	is_int(pm_mmap(mm, far, PG, RW, FIX, NULL, 0), -ENOMEM, "a fixed one too");
	is_int(pm_mmap(mm, base + n * PG, PG, PM_PROT_READ, FIX, NULL, 0), (long)(base + n * PG),
	       "a mapping that merges into its neighbour makes no VMA: allowed at the limit");
	is_int(mm_map_count(mm), n, "still 65530");
	is_int(pm_munmap(mm, base + n * PG, PG), 0,
	       "unmapping its tail half leaves no VMA more: allowed at the limit, as Linux");
	is_int(mm_map_count(mm), n, "still 65530");
	is_int(pm_munmap(mm, base + 3 * PG, PG), 0, "a whole VMA goes");
	is_int(pm_mmap(mm, far, 3 * PG, RW, FIX, NULL, 0), (long)far,
	       "a three-page VMA in its place");
	is_int(pm_mprotect(mm, far, PG, PM_PROT_READ), -ENOMEM,
	       "an mprotect that would split past the limit: -ENOMEM");
	is_int(pm_munmap(mm, far + PG, PG), -ENOMEM, "so is a munmap that would leave two pieces");
	is_int(pm_mprotect(mm, base + 5 * PG, PG, RW), 0,
	       "an mprotect that merges three VMAs into one is fine");
	is_int(mm_map_count(mm), n - 2, "three became one");
	is_int(pm_mprotect(mm, far, PG, PM_PROT_READ), 0, "now the split is allowed");
	pm_mm_destroy(mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

/* PM_KNOB_VMA_LOCK_SHARED_COUNT: the same contention leaves the VMA on its one shared count. */
static void test_shared_count(void)
{
	struct pm_machine *m = pmt_machine(16, PM_KNOB_VMA_LOCK_SHARED_COUNT);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, 64 * PG, RW, false);
	struct pm_vma *vma = pm__find_vma(mm, a);
	struct pmt_vma_holder h;
	bool faults_ok = true;

	pmt_vma_hold(&h, vma);
	for (unsigned long i = 0; i < 200; i++)
		faults_ok &= pm_fault(mm, a + (i % 64) * PG, PM_FAULT_WRITE) == 0;
	ok(atomic_load(&h.ok) && faults_ok && !atomic_load_relaxed(&vma->xpcpu),
	   "shared-count knob: a contended VMA keeps its one reader count");
	pmt_vma_release(&h);
	is_int(pm_mprotect(mm, a, 64 * PG, PM_PROT_READ), 0, "shared-count knob: writer proceeds");
	pm_mm_destroy(mm);
	ok(!pm_machine_check(m), "machine checks out");
	pm_machine_destroy(m);
}

int main(int argc, char **argv)
{
	tap_seed(argc, argv);
	test_counters(0);
	test_counters(PM_KNOB_NO_PER_VMA_LOCK);
	test_writer_elsewhere(0, false);
	test_writer_elsewhere(0, true);
	test_writer_elsewhere(PM_KNOB_NO_PER_VMA_LOCK, false);
	test_pcpu();
	test_shared_count();
	test_race(0);
	test_race(PM_KNOB_NO_PER_VMA_LOCK);
	test_map_count();
	return done_testing();
}
