// SPDX-License-Identifier: MIT
/*
 * stress_mremap.c - mremap moves racing GUP-fast pins, pm_access and faults on the same pages.
 *
 *   mover (1 thread)      moves one region of NPAGES pages (two THPs) between three slots with
 *                         MREMAP_FIXED:
 *                         two 2 MiB aligned (a THP leaf moves whole), one 4 KiB off (the THP
 *                         is split); now and then it shrinks and regrows its tail in place
 *                         (the tail refaults as zero, the second THP's PMD empty again, so
 *                         faults race the move into empty tables); it publishes where the
 *                         region is after each call.
 *   pinners (NP threads)  pin a random page of the region at the published slot with
 *                         pm_pin_user_pages_fast (FOLL_WRITE), check that the pinned page holds
 *                         its own tag (page i of the region: tag i; the tail: tag i or zero),
 *                         unpin; each keeps one long-lived pin too, renewed now and then, whose
 *                         page must stay the one mapped at the region's page (checked at the
 *                         end).
 *   toucher (1 thread)    reads pages with pm_access (a page is its tag, or zero in the tail)
 *                         and writes the tag into tail pages, which faults them in.
 *
 * A pin at a stale slot finds nothing there (-EFAULT, the region left) or the region itself
 * (it came back): either way any page it gets must hold its tag. At the end, quiescent: the
 * data, every long-lived pin's frame against the page now mapped, pin counts balanced after the
 * unpins, and pm_machine_check(), with the mm alive and after its destruction.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define FIXED (PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED)

#define NP 3
#define NPAGES 1024 /* two THPs */
#define TAIL 448   /* pages from here on are shrunk away and refault as zero */
#define TAG 0x5a

static const unsigned long slots[3] = { 0x300000000000UL, 0x308000000000UL, /* two ranges */
					0x300080000000UL + PG };
static struct pm_machine *m;
static struct pm_mm *mm;
static atomic_int stop;
static atomic_long errors, moves, pins, accesses;
static _Atomic unsigned long where;
static uint64_t seed;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

/* Page @i holds its tag, or (tail) zero. A pin holder reads a tail page without a lock while
 * the toucher may be writing its tag into it: each word is then the tag's or zero. The reads
 * are a device's, word by word and atomic, as the hardware's. */
static bool page_good(const void *p, unsigned long i)
{
	const uint64_t *w = p, t = pmt_tag_word(TAG, i);

	if (i < TAIL)
		return pmt_page_is(p, TAG, i);
	for (unsigned long k = 0; k < PG / 8; k++) {
		uint64_t v = __atomic_load_n(&w[k], __ATOMIC_RELAXED);

		if (v != t && v != 0)
			return false;
	}
	return true;
}

struct pinner {
	uint64_t rng;
	struct pm_page *held;
	unsigned long held_i;
	pthread_t th;
};

static struct pinner pinners[NP];

static void *pinner_main(void *arg)
{
	struct pinner *p = arg;

	while (!atomic_load(&stop)) {
		unsigned long i = tap_rand(&p->rng) % NPAGES, at = atomic_load(&where);
		struct pm_page *page;
		long r = pm_pin_user_pages_fast(mm, at + i * PG, 1, PM_FOLL_WRITE, &page);

		if (r == 1) {
			if (!page_good(pm_page_address(page), i)) /* racy read: see above */
				fail("pin of page %lu at %#lx: wrong data", i, at);
			if (!p->held && i < TAIL && !(tap_rand(&p->rng) % 8)) {
				p->held = page; /* keep it across moves */
				p->held_i = i;
			} else {
				pm_unpin_user_page(page);
			}
			atomic_fetch_add(&pins, 1);
		} else if (r != -EFAULT && r != 0) {
			fail("pin at %#lx -> %ld", at + i * PG, r);
		}
		if (p->held && !(tap_rand(&p->rng) % 64)) {
			if (!pmt_page_is(pm_page_address(p->held), TAG, p->held_i))
				fail("a long-lived pin of page %lu lost its data", p->held_i);
			pm_unpin_user_page(p->held);
			p->held = NULL;
		}
	}
	return NULL;
}

static void *toucher_main(void *arg)
{
	uint64_t rng = pmt_mix(seed, 99);
	static uint64_t buf[PG / 8];

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned long i = tap_rand(&rng) % NPAGES, at = atomic_load(&where);
		long r;

		if (i >= TAIL && (tap_rand(&rng) & 1)) {
			pmt_fill_tag(buf, TAG, i);
			r = pm_access(mm, at + i * PG, buf, PG, 1);
		} else {
			r = pm_access(mm, at + i * PG, buf, PG, 0);
			if (r == (long)PG && !page_good(buf, i))
				fail("read of page %lu at %#lx: wrong data", i, at);
		}
		if (r != (long)PG && r != -EFAULT)
			fail("access at %#lx -> %ld", at + i * PG, r);
		atomic_fetch_add(&accesses, 1);
	}
	return NULL;
}

static void *mover_main(void *arg)
{
	uint64_t rng = pmt_mix(seed, 7);
	unsigned cur = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned next = (cur + 1 + tap_rand(&rng) % 2) % 3;
		unsigned long from = slots[cur], to = slots[next];
		long r;

		if (!(tap_rand(&rng) % 8)) {
			/* shrink the tail away, grow it back in place: it refaults as zero */
			r = pm_mremap(mm, from, NPAGES * PG, TAIL * PG, 0, 0);
			if (r != (long)from)
				fail("shrink -> %ld", r);
			r = pm_mremap(mm, from, TAIL * PG, NPAGES * PG, 0, 0);
			if (r != (long)from)
				fail("grow in place -> %ld", r);
		}
		r = pm_mremap(mm, from, NPAGES * PG, NPAGES * PG, FIXED, to);
		if (r != (long)to) {
			fail("move %#lx -> %#lx: %ld", from, to, r);
			break;
		}
		atomic_store(&where, to);
		cur = next;
		atomic_fetch_add(&moves, 1);
	}
	return NULL;
}

static void run(double seconds)
{
	size_t free0;
	pthread_t mover, toucher;
	unsigned long at;
	long r;

	m = pmt_machine(256, 0);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
	ASSERT_EQ(pm_mmap(mm, slots[0], NPAGES * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0),
		  (long)slots[0]);
	ASSERT_EQ(pm_madvise(mm, slots[0], NPAGES * PG, PM_MADV_HUGEPAGE), 0);
	ASSERT_EQ(pmt_put_tag(mm, slots[0], TAIL, TAG, 0), TAIL);
	atomic_store(&where, slots[0]);
	for (int i = 0; i < NP; i++) {
		pinners[i].rng = pmt_mix(seed, (uint64_t)i + 1);
		ASSERT_EQ(pthread_create(&pinners[i].th, NULL, pinner_main, &pinners[i]), 0);
	}
	ASSERT_EQ(pthread_create(&toucher, NULL, toucher_main, NULL), 0);
	ASSERT_EQ(pthread_create(&mover, NULL, mover_main, NULL), 0);
	pmt_wait_until(tap_now() + seconds, &errors);
	atomic_store(&stop, 1);
	pthread_join(mover, NULL);
	pthread_join(toucher, NULL);
	for (int i = 0; i < NP; i++)
		pthread_join(pinners[i].th, NULL);
	diag("%ld moves, %ld pins, %ld accesses", atomic_load(&moves), atomic_load(&pins),
	     atomic_load(&accesses));
	is_int(atomic_load(&errors), 0, "no thread saw wrong data or a wrong answer");
	ok(atomic_load(&moves) > 0 && atomic_load(&pins) > 0 && atomic_load(&accesses) > 0,
	   "every thread made progress");

	/* Quiescent: the data, and each long-lived pin is the page mapped at its index. */
	at = atomic_load(&where);
	r = pmt_bad_tag(mm, at, TAIL, TAG, 0);
	is_int(r, 0, "the region holds its data after the run");
	for (int i = 0; i < NP; i++) {
		struct pinner *p = &pinners[i];

		if (!p->held)
			continue;
		ok(pmt_pfn_at(mm, at + p->held_i * PG) == pm_page_to_pfn(p->held) &&
			   pm_folio_maybe_dma_pinned(pm_page_folio(p->held)),
		   "pinner %d: its long-lived pin is the page mapped at page %lu, still pinned", i,
		   p->held_i);
	}
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive and pins held");
	for (int i = 0; i < NP; i++)
		if (pinners[i].held)
			pm_unpin_user_page(pinners[i].held);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, NULL);
}

int main(int argc, char **argv)
{
	seed = tap_seed(argc, argv);
	plan_no_plan();
	run(tap_seconds(2));
	return done_testing();
}
