// SPDX-License-Identifier: MIT
/*
 * stress_huge_zero.c - one THP-eligible 2 MiB region, mapped by the huge zero page again and
 * again, under every path that meets its PMD leaf at once:
 *
 *  readers   pm_access reads of random words: read faults that install the huge zero leaf
 *            (fault/anon.c: under the PMD lock, on an empty PMD only), and reads through it
 *  writers   pm_access writes of words of their own: write faults on the leaf, which split it
 *            into 4 KiB zero pages and copy the page written (fault/cow.c), or on an empty
 *            PMD, which allocate a THP
 *  pinner    pm_pin_user_pages_fast / pm_get_user_pages_fast of random runs, read-only,
 *            long-term or not: GUP-fast meets the special leaf and leaves it to the slow path,
 *            which pins the huge zero folio, or unshares for a long-term pin
 *  zapper    MADV_DONTNEED of the region (the leaf goes, the next read installs it again) or
 *            of 4 KiB (a split), munmap + mmap of it (an empty PMD again), and now and then a
 *            fork whose child reads the region and goes
 *
 * What must hold: every word reads 0 or a value its writer wrote there (the writers tag each
 * value with its offset); every page a GUP call returns holds only such words; a page of a zero
 * page reads all zero for as long as it is held (nothing ever writes through the huge zero
 * page); no call fails other than with -EFAULT while the region is unmapped. Every 100 ms the
 * threads pause and pm_machine_check() runs on the quiescent machine (huge zero users counted,
 * no mapcount on its leaves). After the run every frame is back and every pin released.
 *
 * Replay: -s SEED or PM_TEST_SEED (the choices; not the interleaving).
 * Duration: PM_STRESS_SECONDS (default 2).
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

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define NR 512UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV_FIXED (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define BASE 0x40000000UL /* the region: alone under its PUD entry */

enum { NREADER = 2, NWRITER = 2, NTHREADS = NREADER + NWRITER + 2 };

struct ctx {
	struct pm_machine *m;
	struct pm_mm *mm;
	struct pmt_gate gate;
	atomic_long errors;
	atomic_long unmapped; /* accesses that found the region unmapped (munmap + mmap) */
	uint64_t seed;
};

struct worker {
	struct ctx *c;
	int id;
	uint64_t rng;
	long ops, pages, zero_pages, huge_zero_pages;
};

/* A writer's value for the word at byte offset @off: its offset above, a count below. */
static uint64_t tagged(unsigned long off, uint64_t n)
{
	return (uint64_t)(off >> 3) << 32 | ((n & 0xffffffffu) | 1);
}

static bool word_ok(unsigned long off, uint64_t v)
{
	return !v || v >> 32 == off >> 3;
}

/* Access failed: only -EFAULT, while the zapper has the region unmapped. */
static void access_error(struct worker *w, const char *what, unsigned long off, long r)
{
	if (r == -EFAULT) {
		atomic_fetch_add(&w->c->unmapped, 1);
		return;
	}
	pmt_error(&w->c->errors, "%s at +%#lx: %ld", what, off, r);
}

static void *reader_fn(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;

	while (pmt_gate_point(&c->gate)) {
		unsigned long off = (tap_rand(&w->rng) % (HP / 8)) * 8;
		uint64_t v;
		long r = pm_access(c->mm, BASE + off, &v, sizeof(v), 0);

		w->ops++;
		if (r != (long)sizeof(v))
			access_error(w, "read", off, r);
		else if (!word_ok(off, v))
			pmt_error(&c->errors, "reader %d: word at +%#lx is %#lx", w->id, off,
				  (unsigned long)v);
	}
	return NULL;
}

static void *writer_fn(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;
	uint64_t n = 0;

	while (pmt_gate_point(&c->gate)) {
		/* Words of its own: writer i owns the words whose index is i modulo NWRITER, so a
		 * write never overwrites another writer's value with a wrong tag. */
		unsigned long word = tap_rand(&w->rng) % (HP / 8 / NWRITER) * NWRITER + (unsigned)w->id;
		unsigned long off = word * 8;
		uint64_t v = tagged(off, ++n);
		long r = pm_access(c->mm, BASE + off, &v, sizeof(v), 1);

		w->ops++;
		if (r != (long)sizeof(v))
			access_error(w, "write", off, r);
	}
	return NULL;
}

/* Every word of a held page is well-formed; a zero page's are all zero. */
static void check_page(struct worker *w, struct pm_page *p, unsigned long off)
{
	const uint64_t *q = pm_page_address(p);
	bool zero = pm_page_is_zero(p);

	for (unsigned i = 0; i < PG / 8; i++) {
		/* A device's read through the pin, beside the writers' copies: atomic. */
		uint64_t v = __atomic_load_n(&q[i], __ATOMIC_RELAXED);

		if (zero ? v != 0 : !word_ok(off + i * 8, v)) {
			pmt_error(&w->c->errors, "pinner: %s page at +%#lx word %u is %#lx",
				  zero ? "zero" : "held", off, i, (unsigned long)v);
			return;
		}
	}
}

static void *pinner_fn(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;
	struct pm_page *pages[64];

	while (pmt_gate_point(&c->gate)) {
		unsigned long first = tap_rand(&w->rng) % NR, n = 1 + tap_rand(&w->rng) % 64;
		unsigned kind = (unsigned)(tap_rand(&w->rng) % 3);
		long r;

		if (first + n > NR)
			n = NR - first;
		if (kind == 0)
			r = pm_pin_user_pages_fast(c->mm, BASE + first * PG, n, 0, pages);
		else if (kind == 1)
			r = pm_pin_user_pages_fast(c->mm, BASE + first * PG, n, PM_FOLL_LONGTERM,
						   pages);
		else
			r = pm_get_user_pages_fast(c->mm, BASE + first * PG, n, 0, pages);
		w->ops++;
		if (r <= 0) {
			access_error(w, "gup", first * PG, r);
			continue;
		}
		for (long i = 0; i < r; i++) {
			check_page(w, pages[i], (first + (unsigned long)i) * PG);
			w->zero_pages += pm_page_is_zero(pages[i]);
			w->huge_zero_pages += pm_page_is_zero(pages[i]) &&
					      pm_folio_order(pm_page_folio(pages[i])) == 9;
			/* A long-term R/O pin in a private mapping never keeps a zero page. */
			if (kind == 1 && pm_page_is_zero(pages[i]))
				pmt_error(&c->errors, "a long-term pin kept a zero page at +%#lx",
					  (first + (unsigned long)i) * PG);
		}
		w->pages += r;
		sched_yield(); /* held a while: writes and zaps run meanwhile */
		for (long i = 0; i < r; i++)
			check_page(w, pages[i], (first + (unsigned long)i) * PG);
		if (kind == 2)
			for (long i = 0; i < r; i++)
				pm_put_page(pages[i]);
		else
			pm_unpin_user_pages(pages, (unsigned long)r);
	}
	return NULL;
}

static void map_region(struct ctx *c)
{
	ASSERT_EQ(pm_mmap(c->mm, BASE, HP, RW, PRIV_FIXED, NULL, 0), (long)BASE);
	ASSERT_EQ(pm_madvise(c->mm, BASE, HP, PM_MADV_HUGEPAGE), 0);
}

static void *zapper_fn(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->c;

	while (pmt_gate_point(&c->gate)) {
		unsigned what = (unsigned)(tap_rand(&w->rng) % 16);
		unsigned long page = tap_rand(&w->rng) % NR;
		int r = 0;

		w->ops++;
		if (what < 9) {
			r = pm_madvise(c->mm, BASE, HP, PM_MADV_DONTNEED);
		} else if (what < 12) {
			r = pm_madvise(c->mm, BASE + page * PG, PG, PM_MADV_DONTNEED);
		} else if (what < 15) {
			/* An empty PMD again: the next read installs the huge zero leaf. */
			r = pm_munmap(c->mm, BASE, HP);
			if (!r)
				map_region(c);
		} else {
			struct pm_mm *child = pm_mm_fork(c->mm);
			uint64_t v;
			long a;

			if (!child) {
				pmt_error(&c->errors, "fork: errno %d", errno);
				continue;
			}
			a = pm_access(child, BASE + page * PG, &v, sizeof(v), 0);
			if (a != (long)sizeof(v) || !word_ok(page * PG, v))
				pmt_error(&c->errors, "the child reads %ld / %#lx at +%#lx", a,
					  (unsigned long)v, page * PG);
			pm_mm_destroy(child);
		}
		if (r)
			pmt_error(&c->errors, "zapper: %d (case %u)", r, what);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);
	double secs = tap_seconds(2), end;
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct ctx c = { .seed = seed };
	long checks = 0, bad_checks = 0, ops[4] = { 0 }, pages = 0, zero_pages = 0, hz = 0;
	struct pm_stats st;
	size_t free0;

	plan_no_plan();
	free0 = pmt_setup(&c.m, &c.mm, 64, 0);
	map_region(&c);
	pmt_gate_init(&c.gate, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		void *(*fn)(void *) = i < NREADER ? reader_fn :
				      i < NREADER + NWRITER ? writer_fn :
				      i == NREADER + NWRITER ? pinner_fn : zapper_fn;

		w[i] = (struct worker){ .c = &c, .id = i < NREADER ? i : i - NREADER,
					.rng = pmt_mix(seed, (uint64_t)i + 1) };
		ASSERT_EQ(pthread_create(&t[i], NULL, fn, &w[i]), 0);
	}
	end = tap_now() + secs;
	for (;;) {
		pmt_wait_until(tap_now() + 0.1 < end ? tap_now() + 0.1 : end, &c.errors);
		pmt_gate_pause(&c.gate);
		checks++;
		if (pm_machine_check(c.m))
			bad_checks++;
		if (tap_now() >= end || atomic_load(&c.errors)) {
			pmt_gate_resume(&c.gate, true);
			break;
		}
		pmt_gate_resume(&c.gate, false);
	}
	for (int i = 0; i < NTHREADS; i++) {
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
		ops[i < NREADER ? 0 : i < NREADER + NWRITER ? 1 : i == NREADER + NWRITER ? 2 : 3] +=
			w[i].ops;
		pages += w[i].pages;
		zero_pages += w[i].zero_pages;
		hz += w[i].huge_zero_pages;
	}
	pmt_gate_destroy(&c.gate);
	pm_machine_stats(c.m, &st);
	diag("%.1f s: %ld reads, %ld writes, %ld GUP calls (%ld pages, %ld of zero pages, %ld of the huge one), %ld "
	     "zaps; %ld accesses found it unmapped; thp_faults %lu, thp_splits %lu, cow_copies "
	     "%lu; %ld checks",
	     secs, ops[0], ops[1], ops[2], pages, zero_pages, hz, ops[3], atomic_load(&c.unmapped),
	     st.thp_faults, st.thp_splits, st.cow_copies, checks);
	ok(ops[0] && ops[1] && ops[2] && ops[3], "every thread ran");
	ok(hz > 0, "GUP took pages of the huge zero folio");
	ok(st.thp_splits > 0, "PMD leaves were split by writes or partial zaps");
	is_int(atomic_load(&c.errors), 0, "every word, page and call as it must be");
	is_int(bad_checks, 0, "pm_machine_check on every pause (%ld)", checks);
	pm_mm_destroy(c.mm);
	pmt_end(c.m, free0, &pmt_end_free_again, "after the run");
	return done_testing();
}
