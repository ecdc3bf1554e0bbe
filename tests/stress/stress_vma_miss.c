// SPDX-License-Identifier: MIT
/*
 * stress_vma_miss.c - faults and slow pins where no VMA is, and next door, while the VMA tree
 * around them is rewritten.
 *
 * The range design answers a fault or a slow pin at an address with no VMA without taking the
 * range's lock: it reads the range's lock word and lock sequence around a lockless lookup
 * (mm/vma_lock.c, pm__vma_absent). The danger is a miss read in the middle of a change that
 * replaces a VMA (a split, a merge), where for a moment the tree holds no entry for an address
 * that is mapped before and after. Here, in one 512 GiB range:
 *   a mutator splits and merges the VMA of region A (mprotect of random pieces to read-only
 *   and back: A stays mapped throughout), maps new VMAs over pieces of region R with
 *   MAP_FIXED (which unmaps the old ones first, in the same write section: R stays mapped as
 *   Linux's callers see it), and maps and unmaps region F next to them;
 *   NR_READERS threads fault (read) and pin (slow, read) random pages of A, R, F and of H, a
 *   hole nobody maps, on CPUs of their own.
 * A and R must never miss (-EFAULT); H must always miss; F may do either. At the end every pin is
 * released, every frame comes back, pm_machine_check() passes. Both designs, whatever the
 * environment says, half of tap_seconds(2) each (Linux's design takes mmap_lock on every miss:
 * the same answers are expected). Replay: -s SEED (the choices, not the interleaving).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define FIXED (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define NPAGES 64
#define A_BASE 0x40000000UL			/* mapped throughout */
#define R_BASE (A_BASE + (NPAGES + 1) * PG)	/* mapped over, never unmapped */
#define F_BASE (R_BASE + (NPAGES + 1) * PG)	/* mapped and unmapped */
#define H_BASE (F_BASE + (NPAGES + 1) * PG)	/* never mapped */
#define NR_READERS 2

static struct pm_mm *mm;
static _Atomic bool stop;
static _Atomic long errors, a_ops, h_ops, f_hits, f_misses;
static uint64_t seed;

struct reader {
	int id;
	unsigned rng;
	pthread_t th;
};

/* A fault or a slow pin of @addr: 0 (mapped), -EFAULT (no VMA), or another error. */
static long touch(unsigned long addr, unsigned r)
{
	struct pm_page *page;
	long got;

	if (r & 1)
		return pm_fault(mm, addr, 0);
	got = pm_pin_user_pages(mm, addr, 1, 0, &page);
	if (got == 1) {
		pm_unpin_user_page(page);
		return 0;
	}
	return got ? got : -EIO;
}

static void *reader(void *arg)
{
	struct reader *rd = arg;

	pmt_run_on(rd->id % 2);
	while (!atomic_load(&stop)) {
		unsigned r = (unsigned)rand_r(&rd->rng);
		unsigned long page = ((r >> 3) % NPAGES) * PG;
		long ret;

		switch ((r >> 1) % 4) {
		case 0:
		case 3: {
			unsigned long base = (r >> 1) % 4 ? R_BASE : A_BASE;

			ret = touch(base + page, r);
			if (ret) {
				diag("reader %d: %c + %#lx answered %ld", rd->id,
				     base == A_BASE ? 'A' : 'R', page, ret);
				atomic_fetch_add(&errors, 1);
			}
			atomic_fetch_add_explicit(&a_ops, 1, memory_order_relaxed);
			break;
		}
		case 1:
			ret = touch(H_BASE + page, r);
			if (ret != -EFAULT) {
				diag("reader %d: the hole at H + %#lx answered %ld", rd->id, page, ret);
				atomic_fetch_add(&errors, 1);
			}
			atomic_fetch_add_explicit(&h_ops, 1, memory_order_relaxed);
			break;
		default:
			ret = touch(F_BASE + page, r);
			if (ret && ret != -EFAULT) {
				diag("reader %d: F + %#lx answered %ld", rd->id, page, ret);
				atomic_fetch_add(&errors, 1);
			}
			atomic_fetch_add_explicit(ret ? &f_misses : &f_hits, 1, memory_order_relaxed);
			break;
		}
	}
	return NULL;
}

static void mutate(unsigned *rng)
{
	unsigned r = (unsigned)rand_r(rng);
	unsigned long first = (r >> 4) % NPAGES, n = 1 + (r >> 12) % (NPAGES - first);

	switch (r % 5) {
	case 0: /* split A */
		if (pm_mprotect(mm, A_BASE + first * PG, n * PG, PM_PROT_READ))
			atomic_fetch_add(&errors, 1);
		break;
	case 1: /* merge it back, piece by piece */
		if (pm_mprotect(mm, A_BASE + first * PG, n * PG, RW))
			atomic_fetch_add(&errors, 1);
		break;
	case 3: /* replace a piece of R */
		if (pm_mmap(mm, R_BASE + first * PG, n * PG, RW, FIXED, NULL, 0) !=
		    (long)(R_BASE + first * PG))
			atomic_fetch_add(&errors, 1);
		break;
	case 2:
		if (pm_mmap(mm, F_BASE, NPAGES * PG, RW, FIXED, NULL, 0) != (long)F_BASE)
			atomic_fetch_add(&errors, 1);
		break;
	default:
		if (pm_munmap(mm, F_BASE + first * PG, n * PG))
			atomic_fetch_add(&errors, 1);
		break;
	}
}

static void run(unsigned flags, const char *design, double seconds)
{
	struct pm_config c = { .mem_bytes = 64UL << 20, .flags = flags };
	struct pm_machine *m = pm_machine_create(&c);
	struct reader rd[NR_READERS];
	unsigned rng = (unsigned)seed;
	size_t free0;

	ASSERT_TRUE(m);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	atomic_store(&stop, false);
	atomic_store(&errors, 0);
	atomic_store(&a_ops, 0);
	atomic_store(&h_ops, 0);
	atomic_store(&f_hits, 0);
	atomic_store(&f_misses, 0);
	is_int(pm_mmap(mm, A_BASE, NPAGES * PG, RW, FIXED, NULL, 0), (long)A_BASE, "%s: map A",
	       design);
	is_int(pm_mmap(mm, R_BASE, NPAGES * PG, RW, FIXED, NULL, 0), (long)R_BASE, "%s: map R",
	       design);
	for (int i = 0; i < NR_READERS; i++) {
		rd[i] = (struct reader){ .id = i, .rng = (unsigned)seed * 7 + (unsigned)i };
		pthread_create(&rd[i].th, NULL, reader, &rd[i]);
	}
	for (double end = tap_now() + seconds; tap_now() < end && !atomic_load(&errors);)
		mutate(&rng);
	atomic_store(&stop, true);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(rd[i].th, NULL);
	is_int(atomic_load(&errors), 0, "%s: A and R never missed, H always did, F did either",
	       design);
	ok(atomic_load(&a_ops) > 0 && atomic_load(&h_ops) > 0,
	   "%s: the readers ran (%ld in A and R, %ld in the hole, %ld hits and %ld misses in F)",
	   design, atomic_load(&a_ops), atomic_load(&h_ops), atomic_load(&f_hits),
	   atomic_load(&f_misses));
	ok(pmt_pins_balanced(m), "%s: every pin released", design);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, design);
}

int main(int argc, char **argv)
{
	double seconds = tap_seconds(2);

	seed = tap_seed(argc, argv);
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, "linux", seconds / 2);
	run(PM_MACHINE_RANGE_MM, "range", seconds / 2);
	return done_testing();
}
