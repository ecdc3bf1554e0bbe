// SPDX-License-Identifier: MIT
/*
 * stress_gup.c - pinning and unpinning, fast and slow, while other threads unmap, remap,
 * write-protect and discard the same ranges (THP ranges too, so PMD splits race with
 * GUP-fast).
 *
 * Invariant: a page returned by a pin (or a get) is never freed or reused until it is
 * released. Each pinner checks it three ways on every page it holds, just before releasing:
 *  - generation: the frame's generation count (white box; bumped on every free in debug
 *    builds) is what it was right after the pin;
 *  - stamp: the pinner wrote a stamp into its own 64-byte slot of the frame (slot = thread
 *    number, at the start of the frame) right after the pin, and the stamp is still there. Only
 *    pinners write slots, each its own; the mutators write only the second half of pages. A
 *    frame freed and reused would have been poisoned (debug), zeroed (a new page or page
 *    table) or overwritten, so its stamp would be gone;
 *  - accounting: a pinned folio reads maybe-DMA-pinned, a referenced one has a refcount.
 * The zero page is skipped (it may be returned to read-only pins and is never written).
 * When every thread is done, with the mm still alive: no folio of the machine is left pinned,
 * every anonymous folio's refcount is its mapcount (no reference left behind), pins balanced,
 * pm_machine_check(); then every frame free after destroy.
 *
 * Seeded (tap_seed); runs tap_seconds(2), split between no knobs, no knobs on a machine too
 * small for the regions (so -ENOMEM paths race too), and a mix of the knobs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define THP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

#define NPIN 2
#define NMUT 2
#define NREG 6
#define REG_LEN (2 * THP)
#define REG_PAGES (REG_LEN / PG)
#define BASE 0x200000000UL
#define HOLD 8	    /* batches a pinner holds at once */
#define MAXN 64	    /* pages per call */
#define SLOT_BYTES 64
#define MUT_OFF (PG / 2) /* mutators write only [2048, 4096) of a page */

static struct pm_machine *m;
static struct pm_mm *mm;
static atomic_int stop;
static atomic_long errors;
static uint64_t seed;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

static uint32_t frame_gen(struct pm_page *p)
{
	return atomic_load_explicit(&p->xgen, memory_order_relaxed);
}

/* ------------------------------------------------------------------------------------------
 * Pinners.
 */
struct batch {
	bool pin;
	long n;
	struct pm_page *pages[MAXN];
	uint32_t gen[MAXN];
};

struct pinner {
	int id;
	uint64_t rng;
	pthread_t th;
	struct batch hold[HOLD];
	int nhold;
	uint64_t *stamp;  /* per frame: the stamp this thread wrote (while it holds the frame) */
	uint16_t *holds;  /* per frame: how many of this thread's entries hold it */
	uint64_t serial;
	long calls, pages, fast_calls, refused, enomem, released;
};

static struct pinner pinners[NPIN];

static uint64_t *slot_of(struct pinner *p, struct pm_page *page)
{
	return (uint64_t *)((char *)pm_page_address(page) + p->id * SLOT_BYTES);
}

static void take(struct pinner *p, struct batch *b)
{
	for (long i = 0; i < b->n; i++) {
		struct pm_page *page = b->pages[i];
		struct pm_folio *f;
		unsigned long pfn;

		if (!page) {
			fail("pinner %d: NULL entry %ld of %ld", p->id, i, b->n);
			b->n = i;
			return;
		}
		b->gen[i] = frame_gen(page);
		if (pm_page_is_zero(page))
			continue;
		f = pm_page_folio(page);
		if (pm_folio_order(f) != 0 && pm_folio_order(f) != 9)
			fail("pinner %d: folio of order %u", p->id, pm_folio_order(f));
		pfn = pm_page_to_pfn(page);
		if (p->holds[pfn]++ == 0) {
			uint64_t *s = slot_of(p, page);

			p->stamp[pfn] = pmt_mix(pfn, ++p->serial);
			s[0] = p->stamp[pfn];
			s[1] = ~p->stamp[pfn];
		}
	}
}

/* Check every page of @b while it is still held, then release it in a random way. */
static void give_back(struct pinner *p, struct batch *b)
{
	for (long i = 0; i < b->n; i++) {
		struct pm_page *page = b->pages[i];
		unsigned long pfn;
		uint64_t *s;

		if (frame_gen(page) != b->gen[i])
			fail("pinner %d: held frame %lu was freed (generation %u -> %u)", p->id,
			     pm_page_to_pfn(page), b->gen[i], frame_gen(page));
		if (pm_page_is_zero(page))
			continue;
		pfn = pm_page_to_pfn(page);
		s = slot_of(p, page);
		if (s[0] != p->stamp[pfn] || s[1] != ~p->stamp[pfn])
			fail("pinner %d: held frame %lu lost its stamp (%#lx, want %#lx)", p->id,
			     pfn, (unsigned long)s[0], (unsigned long)p->stamp[pfn]);
		if (b->pin && !pm_folio_maybe_dma_pinned(pm_page_folio(page)))
			fail("pinner %d: pinned frame %lu is not maybe-DMA-pinned", p->id, pfn);
		if (!b->pin && pm_folio_ref_count(pm_page_folio(page)) < 1)
			fail("pinner %d: referenced frame %lu has refcount %d", p->id, pfn,
			     pm_folio_ref_count(pm_page_folio(page)));
		p->holds[pfn]--;
	}
	p->released += b->n;
	if (!b->pin) {
		for (long i = 0; i < b->n; i++)
			pm_put_page(b->pages[i]);
		b->n = 0;
		return;
	}
	switch (tap_rand(&p->rng) % 5) {
	case 0:
		pm_unpin_user_pages(b->pages, b->n);
		break;
	case 1:
		pm_unpin_user_pages_dirty_lock(b->pages, b->n, tap_rand(&p->rng) & 1);
		break;
	case 2:
		for (long i = 0; i < b->n; i++)
			pm_unpin_user_page(b->pages[i]);
		break;
	case 3: { /* runs of physically contiguous frames by range */
		long i = 0;

		while (i < b->n) {
			long j = i + 1;

			while (j < b->n && !pm_page_is_zero(b->pages[i]) &&
			       pm_page_to_pfn(b->pages[j]) == pm_page_to_pfn(b->pages[i]) + (j - i))
				j++;
			pm_unpin_user_page_range_dirty_lock(b->pages[i], j - i,
							    tap_rand(&p->rng) & 1);
			i = j;
		}
		break;
	}
	default: /* with NULL holes, which end batches */
		for (long i = 0; i < b->n; i += 3) {
			struct pm_page *keep = b->pages[i];

			b->pages[i] = NULL;
			pm_unpin_user_page(keep);
		}
		pm_unpin_user_pages(b->pages, b->n);
		break;
	}
	b->n = 0;
}

static void pin_once(struct pinner *p)
{
	struct batch *b = &p->hold[p->nhold];
	int reg = tap_rand(&p->rng) % NREG;
	unsigned long first = tap_rand(&p->rng) % REG_PAGES;
	unsigned long n = 1 + tap_rand(&p->rng) % (tap_rand(&p->rng) % 4 ? 8 : MAXN);
	unsigned long start = BASE + reg * REG_LEN + first * PG;
	uint64_t r = tap_rand(&p->rng);
	unsigned flags = 0;
	long ret;

	if (r % 10 < 7)
		flags |= PM_FOLL_WRITE;
	if (r % 23 == 0)
		flags |= PM_FOLL_FORCE;
	b->pin = (r >> 8) % 10 < 7;
	if (b->pin && (r >> 16) % 5 == 0)
		flags |= PM_FOLL_LONGTERM;
	if ((r >> 24) % 3) {
		p->fast_calls++;
		ret = b->pin ? pm_pin_user_pages_fast(mm, start, n, flags, b->pages) :
			       pm_get_user_pages_fast(mm, start, n, flags, b->pages);
	} else {
		ret = b->pin ? pm_pin_user_pages(mm, start, n, flags, b->pages) :
			       pm_get_user_pages(mm, start, n, flags, b->pages);
	}
	p->calls++;
	if (ret == 0 || ret > (long)n || (ret < 0 && ret != -EFAULT && ret != -ENOMEM)) {
		fail("pinner %d: %s(%#lx, %lu, %#x) -> %ld", p->id, b->pin ? "pin" : "get", start,
		     n, flags, ret);
		return;
	}
	if (ret < 0) {
		p->refused++;
		p->enomem += ret == -ENOMEM;
		return;
	}
	b->n = ret;
	p->pages += ret;
	take(p, b);
	p->nhold++;
}

static void *pinner_main(void *arg)
{
	struct pinner *p = arg;

	while (!atomic_load(&stop)) {
		if (p->nhold == HOLD || (p->nhold && tap_rand(&p->rng) % 3 == 0)) {
			/* Release a random held batch; keep the array dense. */
			int k = tap_rand(&p->rng) % p->nhold;
			struct batch tmp;

			give_back(p, &p->hold[k]);
			tmp = p->hold[k];
			p->hold[k] = p->hold[p->nhold - 1];
			p->hold[p->nhold - 1] = tmp;
			p->nhold--;
			continue;
		}
		pin_once(p);
	}
	while (p->nhold)
		give_back(p, &p->hold[--p->nhold]);
	return NULL;
}

/* ------------------------------------------------------------------------------------------
 * Mutators: change the regions under the pinners' feet.
 */
struct mutator {
	int id;
	uint64_t rng;
	pthread_t th;
	long ops, maps, unmaps, protects, discards, writes, faults;
};

static struct mutator mutators[NMUT];

static void mutate(struct mutator *mu)
{
	int reg = tap_rand(&mu->rng) % NREG;
	unsigned long rbase = BASE + reg * REG_LEN;
	unsigned long first = tap_rand(&mu->rng) % REG_PAGES;
	unsigned long n = 1 + tap_rand(&mu->rng) % (tap_rand(&mu->rng) % 2 ? 4 : REG_PAGES);
	unsigned long a = rbase + first * PG;
	uint64_t r = tap_rand(&mu->rng);
	long ret;

	if (first + n > REG_PAGES)
		n = REG_PAGES - first;
	switch (r % 12) {
	case 0: /* remap the whole region, THP-advised or not, and populate part of it */
		ret = pm_mmap(mm, rbase, REG_LEN, RW, PRIV | PM_MAP_FIXED, NULL, 0);
		if (ret != (long)rbase && ret != -ENOMEM)
			fail("mutator %d: mmap FIXED -> %ld", mu->id, ret);
		if (r & 0x100) {
			ret = pm_madvise(mm, rbase, REG_LEN, PM_MADV_HUGEPAGE);
			if (ret && ret != -ENOMEM)
				fail("mutator %d: MADV_HUGEPAGE -> %ld", mu->id, ret);
		}
		mu->maps++;
		break;
	case 1: /* map a subrange */
		ret = pm_mmap(mm, a, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
		if (ret != (long)a && ret != -ENOMEM)
			fail("mutator %d: mmap FIXED %#lx+%lu -> %ld", mu->id, a, n, ret);
		mu->maps++;
		break;
	case 2: /* unmap a subrange (often inside a THP) */
		ret = pm_munmap(mm, a, n * PG);
		if (ret && ret != -ENOMEM)
			fail("mutator %d: munmap -> %ld", mu->id, ret);
		mu->unmaps++;
		break;
	case 3: { /* change protection */
		static const int prots[] = { PM_PROT_NONE, PM_PROT_READ, RW, RW };

		ret = pm_mprotect(mm, a, n * PG, prots[(r >> 8) % 4]);
		if (ret && ret != -ENOMEM)
			fail("mutator %d: mprotect -> %ld", mu->id, ret);
		mu->protects++;
		break;
	}
	case 4: /* discard */
		ret = pm_madvise(mm, a, n * PG, PM_MADV_DONTNEED);
		if (ret && ret != -ENOMEM)
			fail("mutator %d: DONTNEED -> %ld", mu->id, ret);
		mu->discards++;
		break;
	case 5 ... 9: { /* write the second half of some pages (faults, THP faults) */
		unsigned char buf[PG / 2];

		memset(buf, (int)r, sizeof(buf));
		for (unsigned long i = 0; i < n && i < 16; i++) {
			ret = pm_access(mm, a + i * PG + MUT_OFF, buf, PG - MUT_OFF, 1);
			if (ret != (long)(PG - MUT_OFF) && ret != -EFAULT && ret != -ENOMEM)
				fail("mutator %d: write -> %ld", mu->id, ret);
			mu->writes++;
		}
		break;
	}
	default: /* faults, read and write */
		for (unsigned long i = 0; i < n && i < 16; i++) {
			ret = pm_fault(mm, a + i * PG, (r >> (8 + i)) & 1 ? PM_FAULT_WRITE : 0);
			if (ret && ret != -EFAULT && ret != -ENOMEM)
				fail("mutator %d: pm_fault -> %ld", mu->id, ret);
			mu->faults++;
		}
		break;
	}
	mu->ops++;
}

static void *mutator_main(void *arg)
{
	struct mutator *mu = arg;

	while (!atomic_load(&stop))
		mutate(mu);
	return NULL;
}

/*
 * The machine's own state once every thread is done, the mm still alive: what the pinners
 * took must have been given back to the folios themselves, not only in their bookkeeping.
 */

/* Folios that still have a pin: a pincount (large) or maybe-DMA-pinned (the refcount bias). */
static long folios_pinned(void)
{
	unsigned long nframes = pm_machine_total_pages(m);
	struct pm_folio *last = NULL;
	long bad = 0;

	for (unsigned long pfn = 0; pfn < nframes; pfn++) {
		struct pm_page *page = pm_pfn_to_page(m, pfn);
		struct pm_folio *f;

		if (!page || pm_page_is_zero(page) || (f = pm_page_folio(page)) == last)
			continue;
		last = f;
		if (pm_folio_pincount(f) || pm_folio_maybe_dma_pinned(f)) {
			if (!bad++)
				diag("frame %lu: folio of order %u still pinned (pincount %d, "
				     "refcount %d)", pfn, pm_folio_order(f), pm_folio_pincount(f),
				     pm_folio_ref_count(f));
		}
	}
	return bad;
}

/*
 * Anonymous folios with a reference beyond their mappings: in this test nothing but the page
 * tables may hold one (no page cache, no swap), so refcount == mapcount, one per PTE or PMD.
 */
static long folios_referenced(void)
{
	unsigned long nframes = pm_machine_total_pages(m);
	struct pm_folio *last = NULL;
	long bad = 0;

	for (unsigned long pfn = 0; pfn < nframes; pfn++) {
		struct pm_page *page = pm_pfn_to_page(m, pfn);
		struct pm_folio *f;

		if (!page || pm_page_is_zero(page) || (f = pm_page_folio(page)) == last)
			continue;
		last = f;
		if (!pm_folio_test_anon(f) || pm_folio_ref_count(f) == pm_folio_mapcount(f))
			continue;
		if (!bad++)
			diag("frame %lu: anonymous folio of order %u has refcount %d, mapcount %d",
			     pfn, pm_folio_order(f), pm_folio_ref_count(f), pm_folio_mapcount(f));
	}
	return bad;
}

static void run(size_t mem, unsigned knobs, double seconds, uint64_t s)
{
	struct pm_stats st;
	size_t free0, nframes;
	char what[32];

	diag("%zu MiB, knobs %#x, for %.1f s", mem / MiB, knobs, seconds);
	snprintf(what, sizeof(what), "knobs %#x", knobs);
	free0 = pmt_setup(&m, &mm, mem / MiB, knobs);
	nframes = pm_machine_total_pages(m);
	for (int r = 0; r < NREG; r++) {
		unsigned long a = BASE + r * REG_LEN;

		ASSERT_EQ(pm_mmap(mm, a, REG_LEN, RW, PRIV | PM_MAP_FIXED, NULL, 0), a);
		if (r % 2 == 0)
			ASSERT_EQ(pm_madvise(mm, a, REG_LEN, PM_MADV_HUGEPAGE), 0);
	}
	atomic_store(&stop, 0);
	atomic_store(&errors, 0);
	for (int i = 0; i < NPIN; i++) {
		struct pinner *p = &pinners[i];

		memset(p, 0, sizeof(*p));
		p->id = i;
		p->rng = pmt_mix(s, 10 + i);
		p->stamp = calloc(nframes, sizeof(*p->stamp));
		p->holds = calloc(nframes, sizeof(*p->holds));
		ASSERT_TRUE(p->stamp && p->holds);
		ASSERT_EQ(pthread_create(&p->th, NULL, pinner_main, p), 0);
	}
	for (int i = 0; i < NMUT; i++) {
		struct mutator *mu = &mutators[i];

		memset(mu, 0, sizeof(*mu));
		mu->id = i;
		mu->rng = pmt_mix(s, 20 + i);
		ASSERT_EQ(pthread_create(&mu->th, NULL, mutator_main, mu), 0);
	}
	double end = tap_now() + seconds;

	pmt_wait_until(end, &errors);
	atomic_store(&stop, 1);
	for (int i = 0; i < NPIN; i++)
		pthread_join(pinners[i].th, NULL);
	for (int i = 0; i < NMUT; i++)
		pthread_join(mutators[i].th, NULL);

	long calls = 0, pages = 0, released = 0, refused = 0, enomem = 0, fast = 0, mops = 0;
	bool held = false;

	for (int i = 0; i < NPIN; i++) {
		calls += pinners[i].calls;
		pages += pinners[i].pages;
		released += pinners[i].released;
		refused += pinners[i].refused;
		enomem += pinners[i].enomem;
		fast += pinners[i].fast_calls;
		for (size_t f = 0; f < nframes; f++)
			held |= pinners[i].holds[f] != 0;
	}
	for (int i = 0; i < NMUT; i++)
		mops += mutators[i].ops;
	pm_machine_stats(m, &st);
	diag("%ld calls (%ld fast) took %ld pages, %ld refused (%ld -ENOMEM); mutators %ld ops",
	     calls, fast, pages, refused, enomem, mops);
	diag("gup_fast_pages %lu, gup_slow_pages %lu, fallbacks %lu, thp_faults %lu, "
	     "thp_splits %lu, pins %lu/%lu",
	     st.gup_fast_pages, st.gup_slow_pages, st.gup_fast_fallbacks, st.thp_faults,
	     st.thp_splits, st.nr_foll_pin_acquired, st.nr_foll_pin_released);
	is_int(atomic_load(&errors), 0, "knobs %#x: no held page was freed or lost its stamp",
	       knobs);
	ok(pages > 0 && mops > 0, "knobs %#x: pinners and mutators made progress", knobs);
	if (released != pages || held)
		diag("the pinners' own count: %ld pages taken, %ld given back%s", pages, released,
		     held ? ", frames still held" : "");
	pm_rcu_barrier();
	is_int(folios_pinned(), 0, "knobs %#x: no folio is left pinned", knobs);
	is_int(folios_referenced(), 0,
		"knobs %#x: no folio is left referenced (refcount = mapcount)", knobs);
	is_int(st.nr_foll_pin_acquired, st.nr_foll_pin_released, "knobs %#x: pins balanced", knobs);
	is_int(pm_machine_check(m), 0, "knobs %#x: pm_machine_check with the mm alive", knobs);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, what);
	for (int i = 0; i < NPIN; i++) {
		free(pinners[i].stamp);
		free(pinners[i].holds);
	}
}

int main(int argc, char **argv)
{
	double secs;

	seed = tap_seed(argc, argv);
	secs = tap_seconds(2);
	plan_no_plan();
	run(128 * MiB, 0, secs / 2, seed);
	/* Memory pressure: faults, THP faults and pins fail with -ENOMEM while others race. */
	run(24 * MiB, 0, secs / 4, seed ^ 0x3333);
	run(128 * MiB,
	    PM_KNOB_HAS_PINNED_ALWAYS_WRITE | PM_KNOB_GUP_FAST_RESTART | PM_KNOB_UNPIN_PER_PAGE,
	    secs / 4, seed ^ 0x5555);
	return done_testing();
}
