// SPDX-License-Identifier: MIT
/*
 * stress_folio_hot.c - hot folios (src/mem/folio_hot.c) raced against munmap, MADV_DONTNEED,
 * fork with COW, and migration.
 *
 * A 2 MiB THP window and four small pages. NWORKERS threads pin and unpin, fast and slow,
 * read and write: page 0 of the THP (all of them: "same"), their own page of it ("spread"),
 * and small page 0 (all of them), holding up to HOLD pins at a time, so that the folios go
 * hot and leave hot mode over and over. Every pinned page must hold its index's tag or zero
 * (a page just refaulted, or the zero page), and now and then the public counts of a held
 * folio must count its pin (pm_folio_ref_count(), pm_folio_pincount()). Meanwhile a mutator thread drops pages (DONTNEED), unmaps and
 * remaps the window, forks (the child must see the tags; the parent then writes every page,
 * which COW-breaks the shared ones) and migrates the window. Each pin taken is counted by its
 * thread: at the end nr_foll_pin_acquired has grown by exactly that many, every pin is
 * released, pm_machine_check passes (it knows that an unmapped folio is never hot, so a
 * leaked bias fails it) and every frame comes back.
 *
 * Runs with no knob and with PM_KNOB_FOLIO_SHARED_PINS, half of PM_STRESS_SECONDS (default 2)
 * each, in the design PINMM_RANGE_MM selects; in the range design without the knob the
 * workers must have seen their folio hot. Replay: -s SEED or PM_TEST_SEED (the choices, not
 * the interleaving).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define THP_BASE 0x40000000UL
#define SMALL_BASE 0x40400000UL
#define THP_LEN (2UL << 20)
#define SMALL_PAGES 4

enum { NWORKERS = 3, HOLD = 4 };

static struct pm_machine *m;
static struct pm_mm *mm;
static atomic_bool stop;
static atomic_long errors, saw_hot;
static unsigned seed;

static uint64_t tag(unsigned long addr)
{
	return 0x7a6700000000ULL | (addr >> 12);
}

/* Write every page's tag (the THP window's first word per page, the small pages'). */
static void fill(void)
{
	for (unsigned long a = THP_BASE; a < THP_BASE + THP_LEN; a += PG) {
		uint64_t v = tag(a);

		pm_access(mm, a, &v, sizeof(v), 1);
	}
	for (unsigned long i = 0; i < SMALL_PAGES; i++) {
		uint64_t v = tag(SMALL_BASE + i * PG);

		pm_access(mm, SMALL_BASE + i * PG, &v, sizeof(v), 1);
	}
}

static void map_all(void)
{
	pm_mmap(mm, THP_BASE, THP_LEN, RW, ANON, NULL, 0);
	pm_madvise(mm, THP_BASE, THP_LEN, PM_MADV_HUGEPAGE);
	pm_mmap(mm, SMALL_BASE, SMALL_PAGES * PG, RW, ANON, NULL, 0);
	fill();
}

struct worker {
	pthread_t thread;
	unsigned id;
	long pins;
	unsigned rng;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct pm_page *held[HOLD];
	unsigned nheld = 0;

	pmt_run_on((int)(w->id % 2));
	while (!atomic_load(&stop)) {
		unsigned r = rand_r(&w->rng);
		unsigned long addr;
		struct pm_page *page;
		long got;

		switch (r % 3) {
		case 0:
			addr = THP_BASE;
			break;
		case 1:
			addr = THP_BASE + (1 + w->id) * PG;
			break;
		default:
			addr = SMALL_BASE;
			break;
		}
		if ((r >> 4) & 1)
			got = pm_pin_user_pages_fast(mm, addr, 1, (r >> 5) & 1 ? PM_FOLL_WRITE : 0,
						     &page);
		else
			got = pm_pin_user_pages(mm, addr, 1, (r >> 5) & 1 ? PM_FOLL_WRITE : 0, &page);
		if (got == 1) {
			const uint64_t *data = pm_page_address(page);

			/* The zero page's pins are not counted (Linux's try_grab_folio). */
			if (!folio_is_zero(pm_page_folio(page)))
				w->pins++;
			/* A device's read through the pin: atomic, as the hardware's, beside
			 * the mutator's copies through the mapping. */
			uint64_t d = __atomic_load_n(&data[0], __ATOMIC_RELAXED);

			if (d != tag(addr) && d != 0) {
				diag("worker %u: page at %#lx holds %#llx", w->id, addr,
				     (unsigned long long)d);
				atomic_fetch_add(&errors, 1);
			}
			if (folio_hot(pm_page_folio(page)))
				atomic_fetch_add_explicit(&saw_hot, 1, memory_order_relaxed);
			held[nheld++] = page;
		}
		if (nheld && ((r >> 16) & 7) == 0) {
			/* The public counts of a folio held pinned: never less than that pin,
			 * however the folio enters and leaves hot mode meanwhile. */
			struct pm_page *p = held[(r >> 19) % nheld];
			struct pm_folio *f = pm_page_folio(p);
			bool large = pm_folio_order(f) > 0;
			int refs = pm_folio_ref_count(f), pins = pm_folio_pincount(f);

			/* Not the zero pages, whose pins are not counted. */
			if (!pm_page_is_zero(p) && (refs < (large ? 1 : 1024) || (large && pins < 1))) {
				diag("worker %u: a held pin reads refcount %d, pincount %d", w->id,
				     refs, pins);
				atomic_fetch_add(&errors, 1);
			}
		}
		if (nheld == HOLD || (nheld && ((r >> 8) & 3) == 0)) {
			unsigned i = (r >> 12) % nheld;

			if ((r >> 14) & 1)
				pm_unpin_user_page(held[i]);
			else
				pm_unpin_user_page_range_dirty_lock(held[i], 1, (r >> 15) & 1);
			held[i] = held[--nheld];
		}
	}
	pm_unpin_user_pages(held, nheld);
	return NULL;
}

static void mutate(unsigned *rng)
{
	unsigned r = rand_r(rng);

	switch (r % 6) {
	case 0:
		pm_madvise(mm, THP_BASE + ((r >> 4) % 8) * PG, PG, PM_MADV_DONTNEED);
		break;
	case 1:
		pm_madvise(mm, SMALL_BASE, PG, PM_MADV_DONTNEED);
		break;
	case 2:
		pm_munmap(mm, THP_BASE, THP_LEN);
		pm_munmap(mm, SMALL_BASE, SMALL_PAGES * PG);
		map_all();
		return;
	case 3: {
		struct pm_mm *child = pm_mm_fork(mm);

		if (child) {
			for (unsigned long a = THP_BASE; a < THP_BASE + 16 * PG; a += PG) {
				uint64_t v = 0;

				pm_access(child, a, &v, sizeof(v), 0);
				if (v != tag(a) && v != 0) {
					diag("child: %#lx holds %#llx", a, (unsigned long long)v);
					atomic_fetch_add(&errors, 1);
				}
			}
			fill(); /* COW-breaks every page the child shares */
			pm_mm_destroy(child);
		}
		return;
	}
	case 4:
		pm_migrate_range(mm, SMALL_BASE, SMALL_PAGES * PG, PM_MIGRATE_ANYWHERE);
		pm_migrate_range(mm, THP_BASE, THP_LEN, PM_MIGRATE_ANYWHERE);
		break;
	default:
		break;
	}
	fill();
}

static void run(unsigned knobs, double seconds)
{
	struct pm_config c = { .mem_bytes = 128UL << 20, .knobs = knobs };
	struct worker w[NWORKERS];
	unsigned rng = seed;
	long pins = 0, acquired0;
	size_t free0;

	m = pm_machine_create(&c);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	map_all();
	acquired0 = (long)PMT_STAT(m, nr_foll_pin_acquired);
	atomic_store(&stop, false);
	atomic_store(&errors, 0);
	atomic_store(&saw_hot, 0);
	for (unsigned i = 0; i < NWORKERS; i++) {
		w[i] = (struct worker){ .id = i, .rng = seed * 31 + i };
		pthread_create(&w[i].thread, NULL, worker, &w[i]);
	}
	for (double end = tap_now() + seconds; tap_now() < end && !atomic_load(&errors);)
		mutate(&rng);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NWORKERS; i++) {
		pthread_join(w[i].thread, NULL);
		pins += w[i].pins;
	}
	is_int(atomic_load(&errors), 0, "knobs %#x: every pinned page and child page held its tag",
	       knobs);
	is_int((long)PMT_STAT(m, nr_foll_pin_acquired) - acquired0, pins,
	       "knobs %#x: nr_foll_pin_acquired grew by the %ld pins taken", knobs, pins);
	ok(pmt_pins_balanced(m), "knobs %#x: every pin released", knobs);
	is_int(pm_machine_check(m), 0, "knobs %#x: pm_machine_check after the run", knobs);
	if (m->range_mm && !knobs)
		ok(atomic_load(&saw_hot) > 0, "knobs %#x: folios went hot (%ld pins saw it)", knobs,
		   atomic_load(&saw_hot));
	else
		is_int(atomic_load(&saw_hot), 0, "knobs %#x: no folio went hot", knobs);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, NULL);
}

int main(int argc, char **argv)
{
	double seconds = tap_seconds(2);

	seed = tap_seed(argc, argv);
	plan_no_plan();
	run(0, seconds / 2);
	run(PM_KNOB_FOLIO_SHARED_PINS, seconds / 2);
	return done_testing();
}
