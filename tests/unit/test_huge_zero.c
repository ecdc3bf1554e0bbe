// SPDX-License-Identifier: MIT
/*
 * test_huge_zero.c - the huge zero page (issue 29, divergence 3): a read fault in a
 * THP-eligible private anonymous VMA maps Linux's huge zero folio, as Linux with
 * transparent_hugepage/use_zero_page=1; PM_KNOB_NO_HUGE_ZERO_PAGE (use_zero_page=0) allocates a
 * THP instead. The cases follow Linux's behaviour and the huge-zero cases of the kernel's
 * selftests (mm/cow.c, mm/khugepaged.c's read faults):
 *
 *	after				PMD		pagemap of its 512 pages
 *	read fault			huge zero	PRESENT ZERO THP, mapcount 0, pfns of one folio
 *	  then write page 5		THP		a new zeroed THP in its place (Linux 6.13+'s
 *							do_huge_zero_wp_pmd): EXCL ANON THP AEXCL
 *	  ... no 2 MiB block		PTE table	page 5: anon exclusive; the rest: 4 KiB zero
 *	  R/O long-term pin of page 3	THP		unshared the same way: a THP, pinned
 *	  R/O pin (not long-term)	huge zero	pinned: the folio's pincount, nr_foll_pin_*
 *	  fork				huge zero	in both; a write in one makes a THP there only
 *	  MADV_DONTNEED	all / 4 KiB	none / PTEs	not present / the rest 4 KiB zero
 *	  mprotect R, RW		huge zero	stays read-only: a write makes a THP
 *	read fault, knob set		THP		PRESENT EXCL ANON THP AEXCL, mapcount 1
 *
 * and the figures: Rss, Anonymous and AnonHugePages 0 for the huge zero page, thp_faults not
 * counted, a second region's read costing no 2 MiB, the same folio in every address space; a
 * pin that outlives every user of the folio. Each case runs in a machine of its own, which
 * must give every frame back and pass pm_machine_check(); the whole program runs in each design
 * (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define NR 512UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define HZ_FLAGS (PM_PAGE_PRESENT | PM_PAGE_ZERO | PM_PAGE_THP)
#define ZERO_FLAGS (PM_PAGE_PRESENT | PM_PAGE_ZERO)
#define ANON_RO (PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_ANON | PM_PAGE_ANON_EXCLUSIVE)
#define ANON_RW (ANON_RO | PM_PAGE_WRITABLE)

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;
static struct pm_page_info pi[NR];

/* A 2 MiB aligned, THP-eligible window of a fresh 4 MiB private mapping. */
static unsigned long thp_window(struct pm_mm *where)
{
	unsigned long a = pmt_map_anon(where, 2 * HP, RW, true);

	return (a + HP - 1) & ~(HP - 1);
}

static void setup(unsigned knobs)
{
	free0 = pmt_setup(&m, &mm, 64, knobs);
}

static void teardown(const char *what)
{
	pmt_teardown(&m, &mm, free0, what);
}

/* pm_pagemap of the window into pi[]. */
static void pagemap(struct pm_mm *where, unsigned long h)
{
	ASSERT_EQ(pm_pagemap(where, h, NR, pi), (long)NR);
}

/* Every page of pi[] from @from to @to has exactly @flags; pages of the huge zero folio
 * (@zero_base != 0) at consecutive pfns from it; 4 KiB zero pages at one pfn. */
static bool all_flags(unsigned long from, unsigned long to, unsigned flags, uint64_t zero_base)
{
	for (unsigned long i = from; i < to; i++) {
		if (pi[i].flags != flags || pi[i].mapcount != 0)
			return false;
		if (zero_base && pi[i].pfn != zero_base + i)
			return false;
		if (!zero_base && flags == ZERO_FLAGS && pi[i].pfn != pi[from].pfn)
			return false;
	}
	return true;
}

/* Every page of pi[] from @from to @to has exactly @flags, mapcount 1, in one THP's pfns. */
static bool thp_flags(unsigned long from, unsigned long to, unsigned flags)
{
	for (unsigned long i = from; i < to; i++)
		if (pi[i].flags != flags || pi[i].mapcount != 1 || pi[i].pfn != pi[0].pfn + i)
			return false;
	return true;
}

static struct pm_map_info map_of(struct pm_mm *where, unsigned long h)
{
	struct pm_map_info mi;

	ASSERT_EQ(pm_mm_maps(where, h, &mi, 1), 1);
	return mi;
}

/* ---- the read fault ---- */

static void read_fault(void)
{
	unsigned long h, h2, faults0, thp0, fb0;
	struct pm_map_info mi;
	unsigned char vec[NR];
	size_t before;
	bool ones = true;

	setup(0);
	h = thp_window(mm);
	faults0 = PMT_STAT(m, faults);
	thp0 = PMT_STAT(m, thp_faults);
	fb0 = PMT_STAT(m, thp_fallbacks);
	is_int(pmt_peek(mm, h + 77 * PG + 5), 0, "read fault: reads 0");
	ok(PMT_STAT(m, faults) == faults0 + 1 && PMT_STAT(m, thp_faults) == thp0 &&
		   PMT_STAT(m, thp_fallbacks) == fb0,
	   "read fault: one fault, no thp_fault, no fallback");
	pagemap(mm, h);
	ok(all_flags(0, NR, HZ_FLAGS, pi[0].pfn) && !(pi[0].pfn & (NR - 1)),
	   "read fault: 512 pages PRESENT|ZERO|THP, mapcount 0, one aligned 2 MiB folio");
	is_int(pmt_order_at(mm, h), 9, "read fault: a pin finds a folio of order 9");
	mi = map_of(mm, h);
	ok(mi.rss_pages == 0 && mi.anon_pages == 0 && mi.anon_huge_pages == 0,
	   "read fault: Rss %lu, Anonymous %lu, AnonHugePages %lu: all 0", mi.rss_pages,
	   mi.anon_pages, mi.anon_huge_pages);
	ASSERT_EQ(pm_mincore(mm, h, HP, vec), 0);
	for (unsigned long i = 0; i < NR; i++)
		ones &= vec[i] == 1;
	ok(ones, "read fault: mincore says resident");
	ok(pmt_reads_zero(mm, h, NR), "read fault: all 2 MiB read zero");
	is_int(pm_machine_check(m), 0, "read fault: pm_machine_check");

	/* A second region: the same folio, and no 2 MiB spent. */
	h2 = thp_window(mm);
	before = pmt_free_pages(m);
	is_int(pmt_peek(mm, h2 + 3), 0, "second region: reads 0");
	ok(before - pmt_free_pages(m) < 8, "second region: costs %zu frames (tables), not 512",
	   before - pmt_free_pages(m));
	{
		struct pm_page_info p2;

		ASSERT_EQ(pm_pagemap(mm, h2, 1, &p2), 1);
		ok(p2.pfn == pi[0].pfn && p2.flags == HZ_FLAGS,
		   "second region: maps the same huge zero folio");
	}
	teardown("read fault");
}

/* use_zero_page=0: today's allocation, every figure of a THP. */
static void knob(void)
{
	unsigned long h, thp0;
	struct pm_map_info mi;
	size_t before;

	setup(PM_KNOB_NO_HUGE_ZERO_PAGE);
	h = thp_window(mm);
	thp0 = PMT_STAT(m, thp_faults);
	before = pmt_free_pages(m);
	is_int(pmt_peek(mm, h + 9), 0, "knob: read fault reads 0");
	ok(PMT_STAT(m, thp_faults) == thp0 + 1, "knob: the read fault is a thp_fault");
	ok(before - pmt_free_pages(m) >= NR, "knob: it allocated 2 MiB");
	pagemap(mm, h);
	ok(pi[0].flags == (ANON_RW | PM_PAGE_THP) && pi[0].mapcount == 1 &&
		   pi[NR - 1].pfn == pi[0].pfn + NR - 1,
	   "knob: PRESENT|EXCL|ANON|THP|AEXCL|WRITABLE, mapcount 1");
	mi = map_of(mm, h);
	ok(mi.rss_pages == NR && mi.anon_pages == NR && mi.anon_huge_pages == NR,
	   "knob: Rss, Anonymous, AnonHugePages 512 pages each");
	is_int(pmt_poke(mm, h + 5 * PG, 'x'), 1, "knob: a write");
	pagemap(mm, h);
	ok(pi[5].flags == (ANON_RW | PM_PAGE_THP) && pi[5].pfn == pi[0].pfn + 5,
	   "knob: the write lands in the same THP (no copy)");
	teardown("knob");

	/* Without the knob the same sequence is the huge zero page and a 4 KiB copy. */
	setup(0);
	h = thp_window(mm);
	thp0 = PMT_STAT(m, thp_faults);
	is_int(pmt_peek(mm, h + 9), 0, "no knob: read fault reads 0");
	ok(PMT_STAT(m, thp_faults) == thp0, "no knob: not a thp_fault");
	pagemap(mm, h);
	ok(pi[0].flags == HZ_FLAGS, "no knob: the huge zero page");
	teardown("no knob");
}

/* ---- write: a THP in its place; without a 2 MiB block, a split and one 4 KiB copy ---- */

/*
 * A new machine and a THP window read-faulted (the huge zero page, checked), then the counters
 * a write into it moves: THP faults, splits and COW copies.
 */
static unsigned long read_faulted_window(const char *what, unsigned long *thp0,
					 unsigned long *splits0, unsigned long *cow0)
{
	unsigned long h;

	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "%s: read fault first", what);
	*thp0 = PMT_STAT(m, thp_faults);
	*splits0 = PMT_STAT(m, thp_splits);
	*cow0 = PMT_STAT(m, cow_copies);
	return h;
}

static void write_after_read(void)
{
	unsigned long h, thp0, splits0, cow0;
	struct pm_map_info mi;
	size_t before;

	h = read_faulted_window("write", &thp0, &splits0, &cow0);
	before = pmt_free_pages(m);
	is_int(pmt_poke(mm, h + 5 * PG + 1, 'x'), 1, "write: a store to page 5");
	ok(PMT_STAT(m, thp_faults) == thp0 + 1 && PMT_STAT(m, thp_splits) == splits0 &&
		   PMT_STAT(m, cow_copies) == cow0,
	   "write: a THP allocated in the leaf's place, no split, no 4 KiB copy");
	ok(before - pmt_free_pages(m) >= NR, "write: it cost %zu frames (a 2 MiB block)",
	   before - pmt_free_pages(m));
	pagemap(mm, h);
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP),
	   "write: all 512 pages: one THP, EXCL ANON THP AEXCL WRITABLE, mapcount 1");
	is_int(pmt_peek(mm, h + 5 * PG + 1), 'x', "write: page 5 reads what was written");
	ok(pmt_reads_zero(mm, h, 5) && pmt_reads_zero(mm, h + 6 * PG, NR - 6) &&
		   pmt_peek(mm, h + 5 * PG) == 0,
	   "write: everything else still reads zero");
	mi = map_of(mm, h);
	ok(mi.rss_pages == NR && mi.anon_pages == NR && mi.anon_huge_pages == NR,
	   "write: Rss, Anonymous and AnonHugePages 512");
	cow0 = PMT_STAT(m, cow_copies);
	is_int(pmt_poke(mm, h + 300 * PG, 'y'), 1, "write: a second page");
	pagemap(mm, h);
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP) && PMT_STAT(m, cow_copies) == cow0,
	   "write: page 300 is the THP's, written in place");
	is_int(pm_machine_check(m), 0, "write: pm_machine_check");
	teardown("write");

	/* No 2 MiB block for the THP: the leaf is split and page 5 alone copied. */
	h = read_faulted_window("write, no block", &thp0, &splits0, &cow0);
	pm_fail_nth(m, 1);
	is_int(pmt_poke(mm, h + 5 * PG + 1, 'x'), 1, "write, no block: a store to page 5");
	pm_fail_nth(m, 0);
	ok(PMT_STAT(m, thp_faults) == thp0 && PMT_STAT(m, thp_splits) == splits0 + 1 &&
		   PMT_STAT(m, cow_copies) == cow0 + 1,
	   "write, no block: no THP, the PMD split once, one page copied");
	pagemap(mm, h);
	ok(pi[5].flags == ANON_RW && pi[5].mapcount == 1,
	   "write, no block: page 5 is anonymous, exclusive");
	ok(all_flags(0, 5, ZERO_FLAGS, 0) && all_flags(6, NR, ZERO_FLAGS, 0) &&
		   pi[0].pfn == pi[NR - 1].pfn,
	   "write, no block: the other 511 pages map the 4 KiB zero page");
	is_int(pmt_peek(mm, h + 5 * PG + 1), 'x', "write, no block: page 5 reads what was written");
	mi = map_of(mm, h);
	ok(mi.rss_pages == 1 && mi.anon_pages == 1 && mi.anon_huge_pages == 0,
	   "write, no block: Rss 1 page, AnonHugePages 0");
	is_int(pm_machine_check(m), 0, "write, no block: pm_machine_check");
	teardown("write, no block");

	/* A write fault on an empty PMD still allocates a THP. */
	setup(0);
	h = thp_window(mm);
	thp0 = PMT_STAT(m, thp_faults);
	is_int(pmt_poke(mm, h + 7, 'z'), 1, "write first: a store");
	ok(PMT_STAT(m, thp_faults) == thp0 + 1, "write first: a THP, as before");
	teardown("write first");
}

/* ---- GUP ---- */

static void gup(void)
{
	struct pm_page *pages[NR], *p = NULL;
	unsigned long h, pins0, splits0;
	struct pm_folio *hz;

	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "gup: read fault first");
	pagemap(mm, h);
	pins0 = PMT_STAT(m, nr_foll_pin_acquired);
	splits0 = PMT_STAT(m, thp_splits);
	is_int(pm_pin_user_pages_fast(mm, h, NR, 0, pages), (long)NR,
	       "gup: R/O pin of the 2 MiB (fast entry)");
	hz = pm_page_folio(pages[0]);
	ok(pm_page_to_pfn(pages[0]) == pi[0].pfn && pm_page_to_pfn(pages[NR - 1]) == pi[0].pfn +
		   NR - 1 && pm_page_folio(pages[NR - 1]) == hz && pm_folio_order(hz) == 9,
	   "gup: the pages of the huge zero folio");
	ok(pm_page_is_zero(pages[0]) && pm_page_is_zero(pages[NR - 1]) && !pm_folio_test_anon(hz),
	   "gup: zero pages (kpageflags ZERO), not anonymous");
	ok(pm_folio_pincount(hz) == (int)NR && pm_folio_maybe_dma_pinned(hz) &&
		   PMT_STAT(m, nr_foll_pin_acquired) == pins0 + NR,
	   "gup: pinned and counted like any large folio (pincount %d)", pm_folio_pincount(hz));
	ok(PMT_STAT(m, thp_splits) == splits0, "gup: no split for a short-term R/O pin");
	pagemap(mm, h);
	ok(pi[0].flags == HZ_FLAGS, "gup: still the huge zero page");
	is_int(pm_machine_check(m), 0, "gup: pm_machine_check with the pins");
	pm_unpin_user_pages_dirty_lock(pages, NR, true);
	ok(pm_folio_pincount(hz) == 0 && pmt_pins_balanced(m) && !pm_folio_test_dirty(hz),
	   "gup: unpinned (dirty_lock), and the huge zero folio stays clean");

	is_int(pm_get_user_pages_fast(mm, h + 4 * PG, 1, 0, &p), 1, "gup: GET fast");
	ok(p && pm_page_folio(p) == hz && pm_folio_ref_count(hz) >= 2, "gup: a reference on it");
	pm_put_page(p);
	is_int(pm_get_user_pages(mm, h + 8 * PG, 1, 0, &p), 1, "gup: GET slow");
	ok(p && pm_page_folio(p) == hz, "gup: the same folio");
	pm_put_page(p);

	/*
	 * FOLL_LONGTERM R/O in a COW mapping: unshare, which replaces the leaf as a write does:
	 * a THP of its own, mapped writable since the VMA is (map_anon_folio_pmd).
	 */
	is_int(pm_pin_user_pages_fast(mm, h + 3 * PG, 1, PM_FOLL_LONGTERM, &p), 1,
	       "gup: R/O long-term pin of page 3");
	pagemap(mm, h);
	ok(pm_page_folio(p) != hz && pi[3].pfn == pm_page_to_pfn(p) &&
		   thp_flags(0, NR, ANON_RW | PM_PAGE_THP | PM_PAGE_MAYBE_PINNED),
	   "gup: it unshared the 2 MiB into a THP (anonymous, exclusive), page 3 pinned");
	is_int(pmt_poke(mm, h + 3 * PG + 9, 'q'), 1, "gup: the process writes page 3");
	is_int(((char *)pm_page_address(p))[9], 'q', "gup: the pin sees the write");
	pm_unpin_user_page(p);

	/* FOLL_WRITE: a fresh page, and only one. */
	teardown("gup");
	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "gup write: read fault first");
	is_int(pm_pin_user_pages_fast(mm, h + 10 * PG, 2, PM_FOLL_WRITE, pages), 2,
	       "gup write: a W pin of 2 pages");
	pagemap(mm, h);
	for (unsigned long i = 0; i < NR; i++)
		pi[i].flags &= ~PM_PAGE_DIRTY;
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP | PM_PAGE_MAYBE_PINNED) &&
		   pm_page_to_pfn(pages[0]) == pi[10].pfn,
	   "gup write: a fresh THP in the leaf's place, pinned");
	pm_unpin_user_pages(pages, 2);
	teardown("gup write");
}

/* A pin outlives the address spaces that used the folio: it keeps the frames, a new user gets
 * another folio, and the last unpin frees the old one. */
static void pin_outlives(void)
{
	struct pm_page *p = NULL;
	struct pm_mm *mm2;
	unsigned long h;
	uint64_t pfn;

	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "outlive: read fault");
	is_int(pm_pin_user_pages(mm, h, 1, 0, &p), 1, "outlive: R/O pin");
	pfn = pm_page_to_pfn(p);
	pm_mm_destroy(mm);
	mm = NULL;
	is_int(pm_machine_check(m), 0, "outlive: pm_machine_check with no user left");
	is_int(((char *)pm_page_address(p))[100], 0, "outlive: the pinned page still reads 0");
	mm2 = pm_mm_create(m);
	ASSERT_TRUE(mm2);
	h = thp_window(mm2);
	is_int(pmt_peek(mm2, h), 0, "outlive: a new user's read fault");
	pagemap(mm2, h);
	ok(pi[0].flags == HZ_FLAGS && pi[0].pfn != pfn, "outlive: a new huge zero folio");
	pm_unpin_user_page(p);
	is_int(pm_machine_check(m), 0, "outlive: pm_machine_check after the unpin");
	pm_mm_destroy(mm2);
	teardown("outlive");
}

/* ---- fork ---- */

static void fork_case(void)
{
	struct pm_mm *child;
	unsigned long h;
	uint64_t pfn;

	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "fork: read fault");
	pagemap(mm, h);
	pfn = pi[0].pfn;
	child = pmt_fork(mm);
	pagemap(child, h);
	ok(all_flags(0, NR, HZ_FLAGS, pfn), "fork: the child maps the same huge zero folio");
	is_int(pm_machine_check(m), 0, "fork: pm_machine_check");
	is_int(pmt_poke(child, h + 7 * PG, 'c'), 1, "fork: the child writes page 7");
	pagemap(child, h);
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP), "fork: the child got a THP of its own");
	pagemap(mm, h);
	ok(all_flags(0, NR, HZ_FLAGS, pfn), "fork: the parent still maps the huge zero page");
	is_int(pmt_peek(mm, h + 7 * PG), 0, "fork: the parent reads 0 there");
	is_int(pmt_poke(mm, h + 9 * PG, 'p'), 1, "fork: the parent writes page 9");
	is_int(pmt_peek(child, h + 9 * PG), 0, "fork: the child reads 0 there");
	is_int(pmt_peek(child, h + 7 * PG), 'c', "fork: the child reads its write");
	pm_mm_destroy(child);
	is_int(pm_machine_check(m), 0, "fork: pm_machine_check after the child");
	teardown("fork");

	/* The child is the last user. */
	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "fork 2: read fault");
	child = pmt_fork(mm);
	pm_mm_destroy(mm);
	mm = child;
	pagemap(mm, h);
	ok(pi[0].flags == HZ_FLAGS, "fork 2: the child keeps it after the parent goes");
	is_int(pm_machine_check(m), 0, "fork 2: pm_machine_check");
	teardown("fork 2");
}

/* ---- DONTNEED, munmap, mprotect ---- */

static void zap_and_protect(void)
{
	unsigned long h, splits0;
	size_t before;

	setup(0);
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "dontneed: read fault");
	before = pmt_free_pages(m);
	is_int(pm_madvise(mm, h, HP, PM_MADV_DONTNEED), 0, "dontneed: all 2 MiB");
	pagemap(mm, h);
	ok(all_flags(0, NR, 0, 0), "dontneed: nothing present");
	ok(pmt_free_pages(m) == before + 1, "dontneed: only the deposited table comes back");
	is_int(pmt_peek(mm, h + PG), 0, "dontneed: read again");
	pagemap(mm, h);
	ok(pi[0].flags == HZ_FLAGS, "dontneed: the huge zero page again");
	splits0 = PMT_STAT(m, thp_splits);
	is_int(pm_madvise(mm, h, PG, PM_MADV_DONTNEED), 0, "dontneed: the first 4 KiB");
	pagemap(mm, h);
	ok(pi[0].flags == 0 && all_flags(1, NR, ZERO_FLAGS, 0) &&
		   PMT_STAT(m, thp_splits) == splits0 + 1,
	   "dontneed: split; page 0 gone, the rest 4 KiB zero pages");
	is_int(pm_machine_check(m), 0, "dontneed: pm_machine_check");

	/* A zapped PTE table stays: a fresh window for what needs an empty PMD. */
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "mprotect: read fault");
	is_int(pm_mprotect(mm, h, HP, PM_PROT_READ), 0, "mprotect: R");
	is_int(pm_mprotect(mm, h, HP, RW), 0, "mprotect: RW again");
	pagemap(mm, h);
	ok(pi[0].flags == HZ_FLAGS, "mprotect: still the huge zero page, read-only");
	is_int(pmt_poke(mm, h + 2 * PG, 'w'), 1, "mprotect: a write");
	pagemap(mm, h);
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP), "mprotect: a THP in its place");
	h = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "mprotect: read fault again");
	is_int(pm_mprotect(mm, h + 4 * PG, PG, PM_PROT_READ), 0, "mprotect: one page R");
	pagemap(mm, h);
	ok(all_flags(0, NR, ZERO_FLAGS, 0), "mprotect: the cut split it into 4 KiB zero pages");
	is_int(pmt_poke(mm, h + 4 * PG, 'n'), -EFAULT, "mprotect: the R page refuses a write");
	is_int(pm_mprotect(mm, h, HP, PM_PROT_NONE), 0, "mprotect: PROT_NONE");
	is_int(pmt_peek(mm, h), -EFAULT, "mprotect: PROT_NONE refuses a read");
	is_int(pm_machine_check(m), 0, "mprotect: pm_machine_check");
	is_int(pm_munmap(mm, h, HP), 0, "munmap");
	is_int(pm_machine_check(m), 0, "munmap: pm_machine_check");
	teardown("zap");
}

/* ---- mremap: the leaf moves whole with its deposit when aligned, else is split first ---- */

static void mremap_case(void)
{
	unsigned long h, to;
	size_t before;
	long r;

	setup(0);
	h = thp_window(mm);
	to = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "mremap: read fault");
	before = pmt_free_pages(m);
	r = pm_mremap(mm, h, HP, HP, PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, to);
	is_int(r, (long)to, "mremap: an aligned move");
	pagemap(mm, to);
	ok(pi[0].flags == HZ_FLAGS && pi[NR - 1].flags == HZ_FLAGS,
	   "mremap: the huge zero page, moved whole");
	ok(pmt_free_pages(m) <= before, "mremap: the move frees no frame");
	is_int(pmt_poke(mm, to + 7 * PG, 'm'), 1, "mremap: a write at the new address");
	pagemap(mm, to);
	ok(thp_flags(0, NR, ANON_RW | PM_PAGE_THP), "mremap: a THP there");
	is_int(pm_machine_check(m), 0, "mremap: pm_machine_check");

	h = thp_window(mm);
	to = thp_window(mm);
	is_int(pmt_peek(mm, h), 0, "mremap: read fault again");
	r = pm_mremap(mm, h + PG, HP - PG, HP - PG, PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, to);
	is_int(r, (long)to, "mremap: an unaligned move of 2 MiB less 4 KiB");
	pagemap(mm, h);
	ok(pi[0].flags == ZERO_FLAGS && pi[1].flags == 0, "mremap: split; page 0 stays, zero");
	ASSERT_EQ(pm_pagemap(mm, to, NR - 1, pi), (long)(NR - 1));
	ok(all_flags(0, NR - 1, ZERO_FLAGS, 0), "mremap: the rest moved as 4 KiB zero pages");
	is_int(pmt_peek(mm, to + 3 * PG), 0, "mremap: and reads zero");
	is_int(pm_machine_check(m), 0, "mremap: pm_machine_check after the split move");
	teardown("mremap");
}

/* ---- edges: FOLL_FORCE, read-only and shared mappings, a window that does not fit ---- */

static void edges(void)
{
	struct pm_page *p = NULL;
	unsigned long h;
	long a;

	setup(0);
	/* A read-only private mapping: the huge zero page; FOLL_FORCE writes through a THP. */
	a = pm_mmap(mm, 0, 2 * HP, PM_PROT_READ, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(a > 0);
	h = ((unsigned long)a + HP - 1) & ~(HP - 1);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)a, 2 * HP, PM_MADV_HUGEPAGE), 0);
	is_int(pmt_peek(mm, h + 6 * PG), 0, "read-only: read fault");
	pagemap(mm, h);
	ok(pi[6].flags == HZ_FLAGS, "read-only: the huge zero page");
	is_int(pm_pin_user_pages(mm, h + 6 * PG, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, &p), 1,
	       "read-only: FOLL_FORCE|FOLL_WRITE pin");
	pagemap(mm, h);
	for (unsigned long i = 0; i < NR; i++)
		pi[i].flags &= ~PM_PAGE_DIRTY;
	ok(p && !pm_page_is_zero(p) && pi[6].pfn == pm_page_to_pfn(p) &&
		   thp_flags(0, NR, ANON_RO | PM_PAGE_THP | PM_PAGE_MAYBE_PINNED),
	   "read-only: a private THP in the leaf's place, mapped read-only");
	((char *)pm_page_address(p))[1] = 'f';
	is_int(pmt_peek(mm, h + 6 * PG + 1), 'f', "read-only: the process sees the forced write");
	pm_unpin_user_page(p);

	/* Shared anonymous memory is never THP-eligible: page-cache pages, no huge zero. */
	a = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(a > 0);
	h = ((unsigned long)a + HP - 1) & ~(HP - 1);
	ASSERT_EQ(pm_madvise(mm, (unsigned long)a, 2 * HP, PM_MADV_HUGEPAGE), 0);
	is_int(pmt_peek(mm, h), 0, "shared: read fault");
	pagemap(mm, h);
	ok(!(pi[0].flags & PM_PAGE_ZERO) && !(pi[0].flags & PM_PAGE_THP),
	   "shared: not a zero page (flags %#x)", pi[0].flags);

	/* Without MADV_HUGEPAGE, or where the 2 MiB window sticks out: the 4 KiB zero page. */
	h = thp_window(mm);
	ASSERT_EQ(pm_madvise(mm, h, HP, PM_MADV_NOHUGEPAGE), 0);
	is_int(pmt_peek(mm, h), 0, "nohugepage: read fault");
	pagemap(mm, h);
	ok(pi[0].flags == ZERO_FLAGS && pi[1].flags == 0, "nohugepage: one 4 KiB zero page");
	h = 0x200000000000UL + PG; /* [h, h + 2 MiB) holds no aligned 2 MiB window */
	ASSERT_EQ(pm_mmap(mm, h, HP, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0),
		  (long)h);
	ASSERT_EQ(pm_madvise(mm, h, HP, PM_MADV_HUGEPAGE), 0);
	is_int(pmt_peek(mm, h), 0, "misfit: read fault where no window fits");
	pagemap(mm, h & ~(HP - 1));
	ok(pi[(h & (HP - 1)) / PG].flags == ZERO_FLAGS, "misfit: the 4 KiB zero page");
	is_int(pm_machine_check(m), 0, "edges: pm_machine_check");
	teardown("edges");
}

static const struct pmt_group groups[] = {
	{ "read fault", read_fault },
	{ "knob", knob },
	{ "write after read", write_after_read },
	{ "gup", gup },
	{ "pin outlives its users", pin_outlives },
	{ "fork", fork_case },
	{ "dontneed, mprotect, munmap", zap_and_protect },
	{ "mremap", mremap_case },
	{ "edges", edges },
};

int main(int argc, char **argv)
{
	return pmt_run_groups(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 120);
}
