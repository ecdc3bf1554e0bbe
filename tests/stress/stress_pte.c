// SPDX-License-Identifier: MIT
/*
 * stress_pte.c - faults of neighbouring pages of one PTE table, from several threads, against
 * MADV_DONTNEED, munmap + mmap, mprotect, fork + COW, GUP-fast and slow pins, and migration:
 * the range design's lockless PTE installs and slow-GUP PTE steps (fault/anon.c's top
 * comment), and the PTL path of PM_KNOB_PTE_TABLE_LOCK and of Linux's design.
 *
 * NPAGES pages of one PTE table (a 2 MiB-aligned window); worker t owns the pages i with
 * i % NWORKERS == t and is the only one to write them, so it knows what each must hold: the
 * word (index << 32 | sequence) it wrote last, or 0 after DONTNEED or munmap. It writes and
 * reads through pm_access, through slow and fast pins (writing through the pinned page, then
 * reading it back through pm_access), read-faults and read-pins other owners' pages (racing
 * their installs), drops the page, unmaps and remaps it, and mprotects it
 * read-only (a write must then fail with -EFAULT) and back. Meanwhile another thread forks
 * (the child sees, for every page, 0 or a word with that page's index) and migrates the
 * window. Every pin taken is counted by its thread: at the end nr_foll_pin_acquired has grown
 * by exactly that many, every pin is released, every page holds its owner's last word,
 * pm_machine_check passes and every frame comes back.
 *
 * Runs with no knob and with PM_KNOB_PTE_TABLE_LOCK, half of PM_STRESS_SECONDS (default 2)
 * each, in the design PINMM_RANGE_MM selects. Replay: -s SEED or PM_TEST_SEED (the
 * choices, not the interleaving).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define BASE 0x40000000UL /* 2 MiB aligned: the window lies in one PTE table */

enum { NPAGES = 64, NOWNED = 60, NWORKERS = 4 }; /* [NOWNED, NPAGES): nobody's */

static uint64_t seed;

struct ctx {
	struct pm_machine *m;
	struct pm_mm *mm;
	uint64_t last[NPAGES]; /* owner-written */
	_Atomic bool stop;
	_Atomic unsigned long errors;
	unsigned long migrations, forks; /* the disturber's */
	uint64_t seed;
};

struct worker {
	struct ctx *c;
	pthread_t th;
	unsigned id;
	unsigned long pins, ops;
};

static void fail(struct ctx *c, const char *what, unsigned long idx, uint64_t got, uint64_t want)
{
	if (atomic_fetch_add(&c->errors, 1) < 10)
		diag("%s: page %lu holds %#llx, expected %#llx", what, idx, (unsigned long long)got,
		     (unsigned long long)want);
}

static unsigned long addr_of(unsigned long idx)
{
	return BASE + idx * PG;
}

static void check_word(struct ctx *c, unsigned long idx, const char *what)
{
	uint64_t v = ~0ULL;
	long r = pm_access(c->mm, addr_of(idx), &v, sizeof(v), 0);

	if (r != sizeof(v) || v != c->last[idx])
		fail(c, what, idx, r < 0 ? (uint64_t)r : v, c->last[idx]);
}

/* Pin @idx for write, slow or fast; write @v through the pin; check; unpin. */
static void pin_write(struct worker *w, unsigned long idx, uint64_t v, bool fast)
{
	struct ctx *c = w->c;
	struct pm_page *page = NULL;
	long r = fast ? pm_pin_user_pages_fast(c->mm, addr_of(idx), 1, PM_FOLL_WRITE, &page) :
			pm_pin_user_pages(c->mm, addr_of(idx), 1, PM_FOLL_WRITE, &page);
	uint64_t *p;

	if (r != 1) {
		fail(c, fast ? "pin_fast failed" : "pin failed", idx, (uint64_t)r, 1);
		return;
	}
	w->pins++;
	p = pm_page_address(page);
	if (p[0] != c->last[idx])
		fail(c, fast ? "data under a fast pin" : "data under a pin", idx, p[0], c->last[idx]);
	/* A small folio pinned: at least the pin's bias and the mapping's reference. */
	if (pm_folio_ref_count(pm_page_folio(page)) < PM_GUP_PIN_COUNTING_BIAS + 1)
		fail(c, "refcount under a pin", idx,
		     (uint64_t)pm_folio_ref_count(pm_page_folio(page)),
		     PM_GUP_PIN_COUNTING_BIAS + 1);
	/* Relaxed: another worker may read it through a read pin meanwhile (as DMA would). */
	__atomic_store_n(&p[0], v, __ATOMIC_RELAXED);
	c->last[idx] = v;
	pm_unpin_user_pages_dirty_lock(&page, 1, true);
	check_word(c, idx, "read after a pinned write");
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;
	uint64_t rnd = c->seed ^ (0x9e3779b97f4a7c15ULL * (w->id + 1));
	uint64_t seq = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		unsigned long idx = w->id + NWORKERS * (tap_rand(&rnd) % (NOWNED / NWORKERS));
		uint64_t v = (uint64_t)idx << 32 | ++seq;
		unsigned op = (unsigned)(tap_rand(&rnd) % 16);
		long r;

		w->ops++;
		if (tap_rand(&rnd) % 4 == 0) {
			/*
			 * Nobody's pages: every worker write-faults and drops them, so that two
			 * installs into one empty entry race often; one landing over the other
			 * would leak a page (the frame count at the end). Their data is not checked.
			 */
			unsigned long j = NOWNED + tap_rand(&rnd) % (NPAGES - NOWNED);

			if (tap_rand(&rnd) % 3)
				pm_fault(c->mm, addr_of(j), tap_rand(&rnd) % 4 ? PM_FAULT_WRITE : 0);
			else
				pm_madvise(c->mm, addr_of(j), PG, PM_MADV_DONTNEED);
			continue;
		}
		switch (op) {
		case 0 ... 4: /* write fault or write */
			if (pm_access(c->mm, addr_of(idx), &v, sizeof(v), 1) < 0) {
				fail(c, "write", idx, 0, v);
				break;
			}
			c->last[idx] = v;
			check_word(c, idx, "read after a write");
			break;
		case 5 ... 6: /* read fault (the zero page) or read */
			check_word(c, idx, "read");
			break;
		case 7:
			if (pm_madvise(c->mm, addr_of(idx), PG, PM_MADV_DONTNEED))
				fail(c, "MADV_DONTNEED failed", idx, 0, 0);
			c->last[idx] = 0;
			check_word(c, idx, "read after DONTNEED");
			break;
		case 8:
			if (pm_munmap(c->mm, addr_of(idx), PG) ||
			    pmt_map_fixed(c->mm, addr_of(idx), PG, RW) != (long)addr_of(idx))
				fail(c, "munmap + mmap failed", idx, 0, 0);
			c->last[idx] = 0;
			check_word(c, idx, "read after munmap + mmap");
			break;
		case 9:
			if (pm_mprotect(c->mm, addr_of(idx), PG, PM_PROT_READ)) {
				fail(c, "mprotect(READ) failed", idx, 0, 0);
				break;
			}
			r = pm_access(c->mm, addr_of(idx), &v, sizeof(v), 1);
			if (r != -EFAULT)
				fail(c, "write to a read-only page", idx, (uint64_t)r, (uint64_t)-EFAULT);
			check_word(c, idx, "read of a read-only page");
			if (pm_mprotect(c->mm, addr_of(idx), PG, RW))
				fail(c, "mprotect(RW) failed", idx, 0, 0);
			break;
		case 10 ... 11:
			pin_write(w, idx, v, false);
			break;
		case 12: {
			/*
			 * Another owner's page: a read or write fault racing its owner's install.
			 * Neither changes what the page reads (a fresh page is zeroed, a COW copies),
			 * but two installs into one empty entry must not both land.
			 */
			unsigned long j = tap_rand(&rnd) % NOWNED;

			pm_fault(c->mm, addr_of(j), tap_rand(&rnd) % 2 ? PM_FAULT_WRITE : 0);
			break;
		}
		case 13: { /* another owner's page: a read-only slow pin, then its word */
			unsigned long j = tap_rand(&rnd) % NOWNED;
			struct pm_page *page;
			uint64_t got;

			if (pm_pin_user_pages(c->mm, addr_of(j), 1, 0, &page) != 1)
				break; /* unmapped or read-only meanwhile */
			if (!pm_page_is_zero(page))
				w->pins++; /* the 4 KiB zero page is never counted */
			got = __atomic_load_n((uint64_t *)pm_page_address(page), __ATOMIC_RELAXED);
			if (got != 0 && got >> 32 != j)
				fail(c, "a foreign read pin", j, got, (uint64_t)j << 32);
			if (!pm_page_is_zero(page) && !pm_folio_maybe_dma_pinned(pm_page_folio(page)))
				fail(c, "a foreign read pin: not pinned", j, 0, 1);
			pm_unpin_user_page(page);
			break;
		}
		default:
			pin_write(w, idx, v, true);
			break;
		}
	}
	return NULL;
}

/* Fork and check the child's view; migrate the window. */
static void *disturber_main(void *arg)
{
	struct ctx *c = arg;
	unsigned long n = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (n++ % 2 == 0) {
			struct pm_mm *child = pm_mm_fork(c->mm);

			if (!child) {
				fail(c, "fork failed", 0, (uint64_t)errno, 0);
				continue;
			}
			for (unsigned long i = 0; i < NOWNED; i++) {
				uint64_t v = ~0ULL;
				long r = pm_access(child, addr_of(i), &v, sizeof(v), 0);

				/* -EFAULT: forked while the owner had the page unmapped. */
				if (r == -EFAULT)
					continue;
				if (r != sizeof(v) || (v != 0 && v >> 32 != i))
					fail(c, "the child's copy", i, r < 0 ? (uint64_t)r : v, i << 32);
				/* COW in the child: the parent's page must not change. */
				v = 0xc0ffee;
				/* -EFAULT: forked while the owner had it read-only. */
				r = i % 8 ? 0 : pm_access(child, addr_of(i), &v, sizeof(v), 1);
				if (r < 0 && r != -EFAULT)
					fail(c, "the child's write", i, 0, 0);
			}
			pm_mm_destroy(child);
			c->forks++;
		} else {
			long r = pm_migrate_range(c->mm, BASE, NPAGES * PG, PM_MIGRATE_ANYWHERE);

			/* -ENOMEM: a page of the window was unmapped at the time. */
			if (r < 0 && r != -ENOMEM)
				fail(c, "pm_migrate_range", 0, (uint64_t)r, 0);
			else if (r >= 0)
				c->migrations++;
		}
	}
	return NULL;
}

static void run(unsigned knobs, double seconds)
{
	struct ctx c = { .seed = seed ^ knobs };
	struct worker w[NWORKERS];
	pthread_t dist;
	unsigned long pins = 0, ops = 0;
	uint64_t acquired0;
	size_t free0;
	const char *k = knobs ? "PTE_TABLE_LOCK" : "no knob";

	c.m = pmt_machine(64, knobs);
	free0 = pmt_free_pages(c.m);
	c.mm = pm_mm_create(c.m);
	if (!c.mm || pmt_map_fixed(c.mm, BASE, NPAGES * PG, RW) != (long)BASE) {
		ok(0, "%s: set up", k);
		return;
	}
	acquired0 = PMT_STAT(c.m, nr_foll_pin_acquired);
	for (unsigned t = 0; t < NWORKERS; t++) {
		w[t] = (struct worker){ .c = &c, .id = t };
		pthread_create(&w[t].th, NULL, worker_main, &w[t]);
	}
	pthread_create(&dist, NULL, disturber_main, &c);
	for (double end = tap_now() + seconds; tap_now() < end;)
		usleep(10000);
	atomic_store(&c.stop, true);
	for (unsigned t = 0; t < NWORKERS; t++) {
		pthread_join(w[t].th, NULL);
		pins += w[t].pins;
		ops += w[t].ops;
	}
	pthread_join(dist, NULL);
	diag("%s: %lu operations, %lu pins, %lu forks, %lu migrations (%lu pages moved)", k, ops,
	     pins, c.forks, c.migrations, (unsigned long)PMT_STAT(c.m, pgmigrate_success));
	ok(c.forks > 0 && c.migrations > 0 && pins > 0, "%s: the races ran", k);

	ok(atomic_load(&c.errors) == 0, "%s: every read saw the owner's last word (%lu errors)", k,
	   atomic_load(&c.errors));
	is_int((long)(PMT_STAT(c.m, nr_foll_pin_acquired) - acquired0), (long)pins,
	       "%s: nr_foll_pin_acquired grew by exactly the pins taken", k);
	ok(pmt_pins_balanced(c.m), "%s: every pin released", k);
	{
		unsigned long bad = 0;

		for (unsigned long i = 0; i < NOWNED; i++) {
			uint64_t v = ~0ULL;

			if (pm_access(c.mm, addr_of(i), &v, sizeof(v), 0) < 0 || v != c.last[i])
				bad++;
		}
		is_int((long)bad, 0, "%s: every page holds its last word at the end", k);
	}
	is_int(pm_machine_check(c.m), 0, "%s: pm_machine_check with the mm alive", k);
	pm_mm_destroy(c.mm);
	pmt_end(c.m, free0, &pmt_end_after_run, k);
}

int main(int argc, char **argv)
{
	double seconds = tap_seconds(2);

	seed = tap_seed(argc, argv);
	plan_no_plan();
	run(0, seconds / 2);
	run(PM_KNOB_PTE_TABLE_LOCK, seconds / 2);
	return done_testing();
}
