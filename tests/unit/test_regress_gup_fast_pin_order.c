// SPDX-License-Identifier: MIT
/*
 * test_regress_gup_fast_pin_order.c - GUP-fast must decide how to count a pin (1024 on the
 * refcount of a small folio, or +1 refcount and +1 pincount on a large one) from the folio it
 * actually holds a reference on, not from a look at the frame taken before the reference.
 *
 * The bug (src/gup/gup_fast.c, try_grab_folio_fast):
 *
 *	folio = page_folio(page);
 *	if ((flags & FOLL_PIN) && !folio_test_large(folio))   <- order read here, no reference
 *		amount = refs * GUP_PIN_COUNTING_BIAS;
 *	if (!pm__folio_try_get(folio, amount))                  <- the frame may be another folio now
 *	...
 *	if (folio_test_large(folio)) pincount += refs;           <- order read again
 *
 * Between the first order test and the add-unless-zero the frame can be freed and reallocated
 * with another order (a 2 MiB-aligned frame alternates between a 4 KiB anonymous page and the
 * head of a THP). page_folio(page) == folio still holds (the frame is a head either way), the
 * PTE/PMD re-check then fails and pm__gup_put_folio() releases according to the *new* order:
 *  - small when tested, THP when grabbed: +1024 refcount +1 pincount taken, -1 -1 released:
 *    1023 references leak and the THP is never freed;
 *  - THP when tested, small when grabbed: +1 taken, -1024 released: "reference released
 *    twice" (debug builds abort in bad_put), a negative refcount in release builds.
 * Linux's try_grab_folio_fast takes plain references first and converts them to a pin only
 * once it holds the folio (folio_has_pincount() ? pincount += refs : ref_add(refs * 1023)).
 *
 * Set-up, on a 4 MiB machine (two 2 MiB blocks): all of the first block is used up by a filler
 * mapping, so the second block B alternates, under a mutator thread, between a 4 KiB page
 * mapped at X (B's first frame: the pcp refill splits B and hands out its lowest frame) and a
 * THP mapped at Y (drain_all_pcp merges B back). A THP also takes one frame for its deposited
 * page table; zapping the THP frees that frame to a per-CPU cache's page-table list, where
 * X's page (user memory, the other list) never takes it, and the next THP, allocated before its
 * deposit as in Linux, drains it back with B's frames, so the deposit takes it again and B
 * itself goes whole to X's page or to the THP. Walker threads pin X and Y with the lockless
 * walk (pm__gup_fast_walk, FOLL_PIN) and unpin at once. The mutator sleeps between steps, so
 * its wake-ups preempt walkers at random points - sometimes inside the window above. At the end
 * every frame must come back.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gup/gup.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define X 0x100000000UL	     /* one 4 KiB page (its own PTE table) */
#define FILL 0x100200000UL   /* 512 pages that use up the first block */
#define Y 0x100400000UL	     /* one THP */

static struct pm_mm *mm;
static _Atomic int stop;
static _Atomic unsigned long walks, pins;

static void *walker(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct pm_page *page;

		if (pm__gup_fast_walk(mm, X, X + PG, FOLL_PIN | FOLL_WRITE, &page) == 1) {
			pm_unpin_user_page(page);
			atomic_fetch_add_explicit(&pins, 1, memory_order_relaxed);
		}
		if (pm__gup_fast_walk(mm, Y, Y + PG, FOLL_PIN | FOLL_WRITE, &page) == 1) {
			pm_unpin_user_page(page);
			atomic_fetch_add_explicit(&pins, 1, memory_order_relaxed);
		}
		atomic_fetch_add_explicit(&walks, 1, memory_order_relaxed);
	}
	return NULL;
}

static bool y_is_thp(void)
{
	pm_entry_t *pmdp;
	bool thp;

	pm_rcu_read_lock(); /* a lockless walk, as pm__pmd_lookup() asks */
	pmdp = pm__pmd_lookup(mm, Y);
	thp = pmdp && pmd_leaf(pmdp_get(pmdp));
	pm_rcu_read_unlock();
	return thp;
}

static void map_y(void)
{
	ASSERT_EQ(pm_mmap(mm, Y, PMD_SIZE, PM_PROT_READ | PM_PROT_WRITE,
			  PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0),
		  (long)Y);
	ASSERT_EQ(pm_madvise(mm, Y, PMD_SIZE, PM_MADV_HUGEPAGE), 0);
}

/* Fault @addr for write; memory a walker pins for a moment comes back soon, so retry -ENOMEM
 * for up to a second. Return: false if it never came back (frames leaked). */
static bool fault_retry(unsigned long addr)
{
	double until = tap_now() + 1.0;
	int err;

	while ((err = pm_fault(mm, addr, PM_FAULT_WRITE)) == -ENOMEM && tap_now() < until)
		sched_yield();
	if (err && err != -ENOMEM)
		ASSERT_EQ(err, 0);
	return err == 0;
}

static void nap(void)
{
	struct timespec ts = { 0, 20 * 1000 };

	nanosleep(&ts, NULL);
}

int main(void)
{
	struct pm_config cfg = { .mem_bytes = 4UL << 20 };
	struct pm_machine *m = pm_machine_create(&cfg);
	double deadline = tap_now() + tap_seconds(4.0);
	unsigned long cycles = 0, aligned = 0, remaps = 0;
	bool stuck = false;
	pthread_t w[3];
	size_t free0;
	int err;

	plan(5);
	ASSERT_TRUE(m);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_EQ(pm_mmap(mm, X, PG, PM_PROT_READ | PM_PROT_WRITE,
			  PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0), (long)X);
	ASSERT_EQ(pm_mmap(mm, FILL, PMD_SIZE, PM_PROT_READ | PM_PROT_WRITE,
			  PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0), (long)FILL);
	map_y();

	/* The THP takes the untouched second block; X gets its PTE table; the filler the rest. */
	ASSERT_EQ(pm_fault(mm, Y, PM_FAULT_WRITE), 0);
	ASSERT_TRUE(y_is_thp());
	ASSERT_EQ(pm_fault(mm, X, PM_FAULT_WRITE), 0);
	ASSERT_EQ(pm_madvise(mm, X, PG, PM_MADV_DONTNEED), 0);
	for (unsigned long a = FILL; a < FILL + PMD_SIZE; a += PG)
		if ((err = pm_fault(mm, a, PM_FAULT_WRITE)) != 0)
			break;
	ASSERT_EQ(err, -ENOMEM);
	ASSERT_EQ(pm_madvise(mm, Y, PMD_SIZE, PM_MADV_DONTNEED), 0);
	diag("free frames after the set-up: %zu (one 2 MiB block)", pm_machine_free_pages(m));

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(pthread_create(&w[i], NULL, walker, NULL), 0);

	while (tap_now() < deadline) {
		struct pm_page *page;

		/* Step A: the block becomes a 4 KiB page at X (Y's THP may still be pinned). */
		ASSERT_EQ(pm_madvise(mm, Y, PMD_SIZE, PM_MADV_DONTNEED), 0);
		if (!fault_retry(X)) {
			stuck = true;
			break;
		}
		if (pm_get_user_pages(mm, X, 1, 0, &page) == 1) {
			aligned += !(pm_page_to_pfn(page) & (HPAGE_PMD_NR - 1));
			pm_put_page(page);
		}
		nap();

		/* Step B: the block becomes a THP at Y (unless X's page is pinned right now). */
		ASSERT_EQ(pm_madvise(mm, X, PG, PM_MADV_DONTNEED), 0);
		if (!fault_retry(Y)) {
			stuck = true;
			break;
		}
		if (!y_is_thp()) {
			/* Fell back to 4 KiB: start Y afresh so that it can be a THP again. */
			ASSERT_EQ(pm_munmap(mm, Y, PMD_SIZE), 0);
			map_y();
			remaps++;
		}
		nap();
		cycles++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(w[i], NULL);
	diag("%lu cycles (%lu with X's page 2 MiB-aligned, %lu re-maps of Y), %lu walks, %lu pins",
	     cycles, aligned, remaps, atomic_load(&walks), atomic_load(&pins));
	ok(!stuck, "memory never stays out: an unpinned, unmapped THP is freed");
	/* The frame a walker looks at must change order often (about half of the cycles here;
	 * it only has to happen a good number of times for the window to be hit). */
	ok(aligned >= 8 && aligned * 4 >= cycles,
	   "the set-up makes one frame alternate between orders");

	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "every frame returned (no pin leaked references)");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	{
		struct pm_stats s;

		pm_machine_stats(m, &s);
		is_int(s.nr_foll_pin_acquired - s.nr_foll_pin_released, 0, "pins balanced");
	}
	pm_machine_destroy(m);
	return done_testing();
}
