// SPDX-License-Identifier: MIT
/*
 * test_folio_hot.c - hot folios (src/mem/folio_hot.c): a folio that several threads pin at
 * once counts its pins per CPU in the range design, and every count and decision stays
 * Linux's.
 *
 *  1. Who goes hot: two outstanding pins of one page, or of one THP, make the folio hot in
 *     the range design; never in Linux's design, nor with PM_KNOB_FOLIO_SHARED_PINS. The
 *     counts read exact (pm_folio_ref_count, pm_folio_pincount), both before and after the
 *     pins go, for small and large folios, through fast, slow and range unpins.
 *  2. munmap with pins outstanding: the pins live only in the per-CPU slots; the folio stays,
 *     with its data; the last unpin frees it, and the frame count comes back.
 *  3. DONTNEED of a hot pinned page, then the unpins: the same.
 *  4. fork: a hot pinned anonymous page is copied for the child, and an unpinned hot one is
 *     shared (the exact decision after leaving hot mode), data intact both sides.
 *  5. migration: a hot folio with pins is refused, one whose pins are gone moves.
 *  6. One thread's many pins of a THP go hot once; after the folio leaves hot mode, only
 *     another thread's contended pin makes it hot again.
 *  7. A state serves one hot period: after each leave and its grace period the next period
 *     reuses it; without the grace periods the states run out, and the pins stay exact on
 *     the shared counts.
 *  Every case ends with pm_machine_check (which knows hot folios: the bias, the state, and
 *  that an unmapped folio is never hot) and every frame back.
 */
#include <pthread.h>
#include <string.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define BASE 0x40000000UL /* 2 MiB aligned */

enum design { RANGE, RANGE_KNOB, LINUX };
static const char *const design_name[] = { "range", "range+FOLIO_SHARED_PINS", "linux" };

static struct pm_machine *machine(enum design d)
{
	struct pm_config c = {
		.mem_bytes = 64UL << 20,
		.flags = d == LINUX ? PM_MACHINE_LINUX_MM : PM_MACHINE_RANGE_MM,
		.knobs = d == RANGE_KNOB ? PM_KNOB_FOLIO_SHARED_PINS : 0,
	};

	return pm_machine_create(&c);
}

static struct pm_folio *folio_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *page;
	struct pm_folio *folio;

	if (pm_get_user_pages_fast(mm, addr, 1, 0, &page) != 1)
		return NULL;
	folio = pm_page_folio(page);
	pm_put_page(page);
	return folio;
}

/* 1: two pins of one page (small) or of two pages of one THP (large). */
static void test_who(enum design d, bool thp)
{
	struct pm_machine *m = machine(d);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long len = thp ? 2UL << 20 : PG;
	struct pm_page *p1, *p2, *p3;
	struct pm_folio *folio;
	int ref0, pin0;
	const char *dn = design_name[d];
	const char *kind = thp ? "THP" : "page";

	ok(pm_mmap(mm, BASE, len, RW, ANON | PM_MAP_FIXED, NULL, 0) == (long)BASE, "%s %s: mmap",
	   dn, kind);
	if (thp)
		pm_madvise(mm, BASE, len, PM_MADV_HUGEPAGE);
	pmt_poke(mm, BASE, 'a');
	folio = folio_at(mm, BASE);
	ok(folio && folio_test_large(folio) == thp, "%s %s: the folio is %s", dn, kind, kind);
	ref0 = pm_folio_ref_count(folio);
	pin0 = pm_folio_pincount(folio);
	ok(pm_pin_user_pages_fast(mm, BASE, 1, PM_FOLL_WRITE, &p1) == 1, "%s %s: pin 1", dn, kind);
	ok(!folio_hot(folio), "%s %s: one pin: not hot", dn, kind);
	ok(pm_pin_user_pages(mm, BASE + (thp ? PG : 0), 1, PM_FOLL_WRITE, &p2) == 1,
	   "%s %s: pin 2 (slow)", dn, kind);
	ok(folio_hot(folio) == (d == RANGE), "%s %s: two pins: hot only in the range design "
	   "without the knob (%d)", dn, kind, folio_hot(folio));
	ok(pm_pin_user_pages_fast(mm, BASE + (thp ? 2 * PG : 0), 1, 0, &p3) == 1,
	   "%s %s: pin 3 (fast, read)", dn, kind);
	is_int(pm_folio_ref_count(folio), ref0 + (thp ? 3 : 3 * 1024), "%s %s: refcount exact",
	       dn, kind);
	is_int(pm_folio_pincount(folio), pin0 + (thp ? 3 : 0), "%s %s: pincount exact", dn, kind);
	ok(pm_folio_maybe_dma_pinned(folio), "%s %s: maybe pinned", dn, kind);
	is_int(pm_machine_check(m), 0, "%s %s: pm_machine_check while pinned", dn, kind);
	pm_unpin_user_page(p1);
	pm_unpin_user_pages(&p2, 1);
	pm_unpin_user_page_range_dirty_lock(p3, 1, false);
	is_int(pm_folio_ref_count(folio), ref0, "%s %s: refcount back", dn, kind);
	is_int(pm_folio_pincount(folio), pin0, "%s %s: pincount back", dn, kind);
	if (thp)
		ok(!pm_folio_maybe_dma_pinned(folio) || folio_hot(folio),
		   "%s %s: a cold THP without pins is not maybe-pinned", dn, kind);
	ok(pmt_peek(mm, BASE) == 'a', "%s %s: data", dn, kind);
	is_int(pm_machine_check(m), 0, "%s %s: pm_machine_check after the unpins", dn, kind);
	ok(pm_munmap(mm, BASE, len) == 0, "%s %s: munmap", dn, kind);
	ok(!folio_hot(folio), "%s %s: unmapped: not hot", dn, kind);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, design_name[d]);
}

/* Two pins on the page at @addr (a small folio): the folio is hot in the range design. */
static void two_pins(struct pm_mm *mm, unsigned long addr, struct pm_page **p)
{
	pm_pin_user_pages_fast(mm, addr, 1, PM_FOLL_WRITE, &p[0]);
	pm_pin_user_pages_fast(mm, addr, 1, PM_FOLL_WRITE, &p[1]);
}

/* 2 and 3: the pins outlive the mapping (munmap or DONTNEED). */
static void test_unmapped(bool dontneed)
{
	struct pm_machine *m = machine(RANGE);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const char *what = dontneed ? "dontneed" : "munmap";
	struct pm_page *p[2];
	struct pm_folio *folio;
	char *data;

	pm_mmap(mm, BASE, PG, RW, ANON | PM_MAP_FIXED, NULL, 0);
	pmt_poke(mm, BASE, 'z');
	two_pins(mm, BASE, p);
	folio = pm_page_folio(p[0]);
	ok(folio_hot(folio), "%s: hot", what);
	if (dontneed)
		ok(pm_madvise(mm, BASE, PG, PM_MADV_DONTNEED) == 0, "%s: DONTNEED", what);
	else
		ok(pm_munmap(mm, BASE, PG) == 0, "%s: munmap", what);
	ok(!folio_hot(folio), "%s: left hot mode at the last unmap", what);
	is_int(pm_folio_ref_count(folio), 2 * 1024, "%s: the two pins hold it", what);
	data = pm_page_address(p[0]);
	ok(data && data[0] == 'z', "%s: the pinned page keeps its data", what);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", what);
	pm_unpin_user_page(p[0]);
	pm_unpin_user_page(p[1]);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* 4: fork's copy decision is exact. */
static void test_fork(void)
{
	struct pm_machine *m = machine(RANGE);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	struct pm_page *p[2], *q[2];
	struct pm_folio *pinned, *unpinned;

	pm_mmap(mm, BASE, 2 * PG, RW, ANON | PM_MAP_FIXED, NULL, 0);
	pmt_poke(mm, BASE, 'p');
	pmt_poke(mm, BASE + PG, 'u');
	two_pins(mm, BASE, p);
	two_pins(mm, BASE + PG, q);
	pinned = pm_page_folio(p[0]);
	unpinned = pm_page_folio(q[0]);
	ok(folio_hot(pinned) && folio_hot(unpinned), "fork: both hot");
	pm_unpin_user_page(q[0]);
	pm_unpin_user_page(q[1]);
	child = pm_mm_fork(mm);
	ok(child, "fork: child");
	ok(folio_at(child, BASE) != pinned, "fork: the pinned page is copied for the child");
	ok(folio_at(child, BASE + PG) == unpinned, "fork: the page whose pins are gone is shared");
	ok(pmt_peek(child, BASE) == 'p' && pmt_peek(child, BASE + PG) == 'u', "fork: child data");
	pmt_poke(mm, BASE + PG, 'U');
	ok(pmt_peek(child, BASE + PG) == 'u' && pmt_peek(mm, BASE + PG) == 'U', "fork: COW");
	is_int(pm_machine_check(m), 0, "fork: pm_machine_check");
	pm_unpin_user_page(p[0]);
	pm_unpin_user_page(p[1]);
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "fork");
}

/* 5: migration refuses a hot pinned folio, and moves it once the pins are gone. */
static void test_migrate(void)
{
	struct pm_machine *m = machine(RANGE);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_page *p[2];
	struct pm_folio *folio;

	pm_mmap(mm, BASE, PG, RW, ANON | PM_MAP_FIXED, NULL, 0);
	pmt_poke(mm, BASE, 'm');
	two_pins(mm, BASE, p);
	folio = pm_page_folio(p[0]);
	ok(folio_hot(folio), "migrate: hot");
	is_int(pm_migrate_range(mm, BASE, PG, PM_MIGRATE_ANYWHERE), 1, "migrate: pinned: refused");
	ok(folio_at(mm, BASE) == folio, "migrate: still mapped where it was");
	pm_unpin_user_page(p[0]);
	pm_unpin_user_page(p[1]);
	is_int(pm_migrate_range(mm, BASE, PG, PM_MIGRATE_ANYWHERE), 0, "migrate: unpinned: moved");
	ok(folio_at(mm, BASE) != folio && pmt_peek(mm, BASE) == 'm', "migrate: new frame, data");
	is_int(pm_machine_check(m), 0, "migrate: pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "migrate");
}

struct pinner {
	struct pm_mm *mm;
	unsigned long addr;
	struct pm_page *page;
	long ret;
};

static void *pin_thread(void *arg)
{
	struct pinner *p = arg;

	p->ret = pm_pin_user_pages_fast(p->mm, p->addr, 1, PM_FOLL_WRITE, &p->page);
	return NULL;
}

/*
 * 6. Only another thread's contended pin makes a folio hot again: one thread that holds many
 * pins of a THP (pin_fast) goes hot at its first contended pin, and once the folio has left
 * hot mode, its next ones stay on the shared counts.
 */
static void test_one_thread(void)
{
	struct pm_machine *m = machine(RANGE);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pinner other = { .mm = mm, .addr = BASE + 3 * PG };
	struct pm_page *p[3];
	struct pm_folio *folio;
	pthread_t th;
	int ref0;

	pm_mmap(mm, BASE, 2UL << 20, RW, ANON | PM_MAP_FIXED, NULL, 0);
	pm_madvise(mm, BASE, 2UL << 20, PM_MADV_HUGEPAGE);
	pmt_poke(mm, BASE, 'o');
	folio = folio_at(mm, BASE);
	ok(folio && folio_test_large(folio), "one thread: a THP");
	ref0 = pm_folio_ref_count(folio);
	for (int i = 0; i < 2; i++)
		pm_pin_user_pages_fast(mm, BASE + (unsigned long)i * PG, 1, PM_FOLL_WRITE, &p[i]);
	ok(folio_hot(folio), "one thread: its first contended pin makes the folio hot");
	ok(pm_folio_maybe_dma_pinned(folio) && !folio_hot(folio),
	   "one thread: the exact question leaves hot mode");
	is_int(pm_pin_user_pages_fast(mm, BASE + 2 * PG, 1, PM_FOLL_WRITE, &p[2]), 1,
	       "one thread: a third pin");
	ok(!folio_hot(folio), "one thread: its own next contended pin stays on the shared counts");
	ok(!pthread_create(&th, NULL, pin_thread, &other) && !pthread_join(th, NULL) &&
	   other.ret == 1, "one thread: another thread pins a fourth page");
	ok(folio_hot(folio), "one thread: the other thread's contended pin makes it hot");
	is_int(pm_folio_pincount(folio), 4, "one thread: pincount exact");
	for (int i = 0; i < 3; i++)
		pm_unpin_user_page(p[i]);
	pm_unpin_user_page(other.page);
	is_int(pm_folio_ref_count(folio), ref0, "one thread: refcount back");
	is_int(pm_machine_check(m), 0, "one thread: pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "one thread");
}

/* 7. A leave retires the state; after a grace period it serves the next period. */
static void test_recycle(void)
{
	struct pm_machine *m = machine(RANGE);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_page *held, *q;
	struct pm_folio *folio;
	unsigned entered = 0, rounds = 2 * m->hot_max, exact = 0;

	pm_mmap(mm, BASE, 2UL << 20, RW, ANON | PM_MAP_FIXED, NULL, 0);
	pm_madvise(mm, BASE, 2UL << 20, PM_MADV_HUGEPAGE);
	pmt_poke(mm, BASE, 'r');
	folio = folio_at(mm, BASE);
	ok(folio && folio_test_large(folio) &&
	   pm_pin_user_pages_fast(mm, BASE, 1, PM_FOLL_WRITE, &held) == 1, "recycle: a pinned THP");
	for (unsigned i = 0; i < rounds; i++) {
		pm__folio_hot_enter(folio);
		entered += folio_hot(folio);
		if (pm_pin_user_pages_fast(mm, BASE + PG, 1, PM_FOLL_WRITE, &q) == 1)
			pm_unpin_user_page(q);
		pm__folio_leave_hot(folio);
		pm_rcu_barrier();
	}
	is_int(entered, rounds, "recycle: %u hot periods, each after the last one's grace period",
	       rounds);
	is_int(m->hot_nr, 1, "recycle: one state served them all");
	entered = 0;
	for (unsigned i = 0; i < rounds; i++) {
		pm__folio_hot_enter(folio);
		entered += folio_hot(folio);
		if (pm_pin_user_pages_fast(mm, BASE + PG, 1, PM_FOLL_WRITE, &q) == 1) {
			pm_unpin_user_page(q);
			exact += pm_folio_pincount(folio) == 1; /* leaves hot mode, if hot */
		}
	}
	pm_rcu_barrier();
	ok(entered >= 1 && m->hot_nr <= m->hot_max, "recycle: without grace periods %u of %u "
	   "periods found a state (%u made, at most %u)", entered, rounds, m->hot_nr, m->hot_max);
	is_int(exact, rounds, "recycle: the pincount exact in every round");
	pm_unpin_user_page(held);
	is_int(pm_folio_pincount(folio), 0, "recycle: no pin left");
	is_int(pm_machine_check(m), 0, "recycle: pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "recycle");
}

int main(void)
{
	plan_no_plan();
	for (enum design d = RANGE; d <= LINUX; d++) {
		test_who(d, false);
		test_who(d, true);
	}
	test_unmapped(false);
	test_unmapped(true);
	test_fork();
	test_migrate();
	test_one_thread();
	test_recycle();
	return done_testing();
}
