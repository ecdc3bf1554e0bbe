// SPDX-License-Identifier: MIT
/*
 * test_fork.c - pm_mm_fork(): copy-on-write isolation in both directions, pages pinned before
 * fork (copied for the child at once, the parent's pin keeps working), mprotect round trips,
 * MADV_DONTFORK/DOFORK, shared mappings, has-pinned not inherited, write_protect_seq, and
 * fork failing at every allocation it makes (issue 5's acceptance tests, with cow.c's anon
 * layouts: 4 KiB pages, a PMD-mapped THP, a PTE-mapped THP after a partial mprotect, a single
 * PTE of a THP, a partially shared THP).
 *
 * Page contents are 64-bit words (tag << 32 | page index), so data from the wrong page, or
 * from the other side of a fork, is told apart from the right data.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h" /* white-box: mm->xwrite_protect_seq */
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

/* ---- after fork, neither side sees the other's later writes ---- */

static void test_basic(enum pmt_layout l, bool parent_first)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pmt_area ar;
	unsigned long copies0, reuses0;
	char what[80];

	snprintf(what, sizeof(what), "basic COW, %s writes first, %s",
		 parent_first ? "parent" : "child", pmt_layout_name[l]);
	ASSERT_TRUE(p);
	pmt_area_setup(m, p, l, 0xa1, true, &ar);
	c = pmt_fork(p);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xa1, 0), 0, "%s: the child reads the parent's data",
	       what);
	copies0 = PMT_STAT(m, cow_copies);
	reuses0 = PMT_STAT(m, cow_reuses);
	if (parent_first) {
		is_int(pmt_put_tag(p, ar.addr, ar.n, 0xa2, 0), ar.n, "%s: parent writes", what);
		is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xa1, 0), 0,
		       "%s: the child still reads old data", what);
		is_int(pmt_put_tag(c, ar.addr, ar.n, 0xa3, 0), ar.n, "%s: child writes", what);
		is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xa2, 0), 0,
		       "%s: the parent reads its own data", what);
		is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xa3, 0), 0,
		       "%s: the child reads its own data", what);
	} else {
		is_int(pmt_put_tag(c, ar.addr, ar.n, 0xa3, 0), ar.n, "%s: child writes", what);
		is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xa1, 0), 0,
		       "%s: the parent still reads old data", what);
		is_int(pmt_put_tag(p, ar.addr, ar.n, 0xa2, 0), ar.n, "%s: parent writes", what);
		is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xa3, 0), 0,
		       "%s: the child reads its own data", what);
		is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xa2, 0), 0,
		       "%s: the parent reads its own data", what);
	}
	if (l == PMT_L_BASE) {
		/* The first writer copies (the page is shared); the second is then the only
		 * user of the old page and reuses it in place. */
		is_int(PMT_STAT(m, cow_copies) - copies0, ar.n, "%s: one copy per page", what);
		is_int(PMT_STAT(m, cow_reuses) - reuses0, ar.n, "%s: then one reuse per page",
		       what);
	}
	is_int(pm_machine_check(m), 0, "%s: invariants hold with the child alive", what);
	pm_mm_destroy(c);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xa2, 0), 0,
	       "%s: the parent's data survives the child", what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0xa4, 0), ar.n, "%s: the parent writes again", what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xa4, 0), 0, "%s: and reads it", what);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* Three generations: each keeps its own view. */
static void test_grandchild(enum pmt_layout l)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c, *g;
	struct pmt_area ar;
	char what[64];

	snprintf(what, sizeof(what), "grandchild, %s", pmt_layout_name[l]);
	ASSERT_TRUE(p);
	pmt_area_setup(m, p, l, 0xb1, true, &ar);
	c = pmt_fork(p);
	g = pmt_fork(c);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0xb2, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_put_tag(c, ar.addr, ar.n, 0xb3, 0), ar.n, "%s: child writes", what);
	is_int(pmt_bad_tag(g, ar.addr, ar.n, 0xb1, 0), 0, "%s: the grandchild reads the original",
	       what);
	pm_mm_destroy(c);
	is_int(pmt_put_tag(g, ar.addr, ar.n, 0xb4, 0), ar.n, "%s: grandchild writes", what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xb2, 0), 0, "%s: the parent reads its own", what);
	is_int(pmt_bad_tag(g, ar.addr, ar.n, 0xb4, 0), 0, "%s: the grandchild reads its own", what);
	pm_mm_destroy(p);
	pm_mm_destroy(g);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* mprotect R then RW must not make a page shared with a child writable (cow.c #2). */
static void test_mprotect_roundtrip(enum pmt_layout l)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pmt_area ar;
	unsigned long copies0;
	char what[64];

	snprintf(what, sizeof(what), "mprotect round trip, %s", pmt_layout_name[l]);
	ASSERT_TRUE(p);
	pmt_area_setup(m, p, l, 0xc1, true, &ar);
	c = pmt_fork(p);
	is_int(pm_mprotect(p, ar.addr, ar.n * PG, PM_PROT_READ), 0, "%s: parent R", what);
	is_int(pm_mprotect(p, ar.addr, ar.n * PG, RW), 0, "%s: parent RW", what);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0xc2, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xc1, 0), 0, "%s: the child still reads old data",
	       what);
	if (l == PMT_L_BASE)
		is_int(PMT_STAT(m, cow_copies) - copies0, ar.n, "%s: every write copied", what);
	is_int(pm_mprotect(c, ar.addr, ar.n * PG, PM_PROT_READ), 0, "%s: child R", what);
	is_int(pm_mprotect(c, ar.addr, ar.n * PG, RW), 0, "%s: child RW", what);
	is_int(pmt_put_tag(c, ar.addr, ar.n, 0xc3, 0), ar.n, "%s: child writes", what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xc2, 0), 0, "%s: the parent keeps its data", what);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* A page pinned R/W (or R/O) before fork: the child gets a copy at fork; the pin keeps
 * receiving the parent's writes (cow.c #8, "fork() with an iouring fixed buffer"). */
static void test_pinned_before_fork(enum pmt_layout l, bool write, bool fast)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **pins = calloc(512, sizeof(*pins));
	unsigned flags = PM_FOLL_LONGTERM | (write ? PM_FOLL_WRITE : 0);
	unsigned long fc0, split0, copies0, samepfn = 0, diffpfn = 0;
	unsigned seq0;
	struct pmt_area ar;
	char what[80];

	snprintf(what, sizeof(what), "%s %s pin before fork, %s", fast ? "fast" : "slow",
		 write ? "R/W" : "R/O", pmt_layout_name[l]);
	ASSERT_TRUE(p && pins);
	pmt_area_setup(m, p, l, 0xd1, true, &ar);
	is_int(fast ? pm_pin_user_pages_fast(p, ar.addr, ar.n, flags, pins)
		    : pm_pin_user_pages(p, ar.addr, ar.n, flags, pins),
	       ar.n, "%s: pin the area", what);
	ok(pm_mm_has_pinned(p), "%s: the parent has pinned", what);
	fc0 = PMT_STAT(m, fork_pinned_copies);
	split0 = PMT_STAT(m, thp_splits);
	seq0 = atomic_load(&p->xwrite_protect_seq);
	c = pmt_fork(p);
	{
		unsigned seq1 = atomic_load(&p->xwrite_protect_seq);

		ok(!(seq1 & 1) && seq1 != seq0,
		   "%s: write_protect_seq advanced and even (%u -> %u)", what, seq0, seq1);
	}
	is_int(PMT_STAT(m, fork_pinned_copies) - fc0, ar.n,
	       "%s: the child got a copy of every page", what);
	if (l == PMT_L_THP_PMD)
		is_int(PMT_STAT(m, thp_splits) - split0, 1, "%s: the pinned PMD was split", what);
	ok(!pm_mm_has_pinned(c), "%s: the child does not inherit has-pinned", what);
	for (unsigned long i = 0; i < ar.n; i++) {
		samepfn += pmt_pfn_at(p, ar.addr + i * PG) == pm_page_to_pfn(pins[i]);
		diffpfn += pmt_pfn_at(c, ar.addr + i * PG) != pm_page_to_pfn(pins[i]);
	}
	is_int(samepfn, ar.n, "%s: the parent still maps the pinned pages", what);
	is_int(diffpfn, ar.n, "%s: the child maps other frames", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xd1, 0), 0, "%s: the child's copy holds the data",
	       what);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0xd2, 0), ar.n, "%s: parent writes", what);
	is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: the pinned pages are written in place",
	       what);
	is_int(pmt_bad_pin(pins, ar.n, 0xd2, 0), 0, "%s: the pin sees the parent's writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xd1, 0), 0, "%s: the child does not", what);
	is_int(pmt_put_tag(c, ar.addr, ar.n, 0xd3, 0), ar.n, "%s: child writes", what);
	is_int(pmt_bad_pin(pins, ar.n, 0xd2, 0), 0, "%s: the pin never sees the child's writes",
	       what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xd2, 0), 0, "%s: neither does the parent", what);
	is_int(pm_machine_check(m), 0, "%s: invariants hold", what);
	pm_unpin_user_pages(pins, ar.n);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(pins);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* One pinned subpage makes the whole THP "maybe pinned": every subpage is copied at fork. */
static void test_thp_one_subpage_pinned(void)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page *pin = NULL;
	unsigned long fc0, copies0;
	struct pmt_area ar;
	const char *what = "one pinned subpage of a PMD THP";

	ASSERT_TRUE(p);
	pmt_area_setup(m, p, PMT_L_THP_PMD, 0xe1, true, &ar);
	is_int(pm_pin_user_pages_fast(p, ar.addr + 100 * PG, 1, PM_FOLL_WRITE, &pin), 1,
	       "%s: pin subpage 100", what);
	fc0 = PMT_STAT(m, fork_pinned_copies);
	c = pmt_fork(p);
	is_int(PMT_STAT(m, fork_pinned_copies) - fc0, 512, "%s: all 512 subpages copied", what);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0xe2, 0), ar.n, "%s: parent writes", what);
	is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: the parent's pages stayed exclusive",
	       what);
	ok(pmt_page_is(pm_page_address(pin), 0xe2, 100), "%s: the pin sees the write", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xe1, 0), 0, "%s: the child reads old data", what);
	pm_unpin_user_page(pin);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* has-pinned belongs to the mm that pinned; fork does not pass it on. */
static void test_has_pinned(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c, *g;
	struct pm_page *pg = NULL;
	struct pmt_area ar;

	ASSERT_TRUE(p);
	pmt_area_setup(m, p, PMT_L_BASE, 0xf1, true, &ar);
	ok(!pm_mm_has_pinned(p), "has-pinned: a new mm has not pinned");
	is_int(pm_get_user_pages_fast(p, ar.addr, 1, 0, &pg), 1, "has-pinned: get a page");
	ok(!pm_mm_has_pinned(p), "has-pinned: a get is not a pin");
	pm_put_page(pg);
	is_int(pm_pin_user_pages_fast(p, ar.addr, 1, 0, &pg), 1, "has-pinned: pin a page");
	pm_unpin_user_page(pg);
	ok(pm_mm_has_pinned(p), "has-pinned: set by the pin, kept after the unpin");
	c = pmt_fork(p);
	ok(!pm_mm_has_pinned(c), "has-pinned: the child has not pinned");
	g = pmt_fork(c);
	ok(!pm_mm_has_pinned(g), "has-pinned: nor the grandchild");
	is_int(pm_pin_user_pages(c, ar.addr, 1, PM_FOLL_WRITE, &pg), 1,
	       "has-pinned: the child pins");
	ok(pm_mm_has_pinned(c), "has-pinned: now the child has");
	pm_unpin_user_page(pg);
	pm_mm_destroy(g);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, "has-pinned");
}

/* ---- MADV_DONTFORK / MADV_DOFORK ---- */

static void test_dontfork(enum pmt_layout l)
{
	static const unsigned long copies_first[PMT_NR_LAYOUTS] = { 0, 256, 256, 0, 255 };
	static const unsigned long copies_second[PMT_NR_LAYOUTS] = { 1, 512, 512, 1, 511 };
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page *pin = NULL;
	static char buf[PM_PAGE_SIZE];
	unsigned long lo, hi, fc0, absent = 0;
	struct pmt_area ar;
	char what[64];

	snprintf(what, sizeof(what), "DONTFORK, %s", pmt_layout_name[l]);
	ASSERT_TRUE(p);
	pmt_area_setup(m, p, l, 0x11, true, &ar);
	/* DONTFORK the middle half; pin a page inside it (no copy for the child then). */
	lo = ar.addr + ar.n / 4 * PG;
	hi = ar.addr + ar.n / 4 * 3 * PG;
	if (ar.n == 1) {
		lo = ar.addr;
		hi = ar.addr + ar.len;
	}
	is_int(pm_madvise(p, lo, hi - lo, PM_MADV_DONTFORK), 0, "%s: madvise", what);
	is_int(pm_pin_user_pages(p, lo, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin), 1,
	       "%s: pin a page in the range", what);
	fc0 = PMT_STAT(m, fork_pinned_copies);
	c = pmt_fork(p);
	/* Only the pinned folio's exclusive pages that the child inherits are copied: for a
	 * THP, the pages outside the range (page 0 of the partially shared THP is not
	 * exclusive); for 4 KiB pages, none. */
	is_int(PMT_STAT(m, fork_pinned_copies) - fc0, copies_first[l],
	       "%s: copies for the child outside the range only", what);
	for (unsigned long a = lo; a < hi; a += PG)
		absent += pm_access(c, a, buf, PG, 0) == -EFAULT && pm_fault(c, a, 0) == -EFAULT &&
			  pm_fault(c, a, PM_FAULT_WRITE) == -EFAULT;
	is_int(absent, (hi - lo) / PG, "%s: the range is absent in the child (-EFAULT)", what);
	is_int(pmt_bad_tag(c, ar.addr, (lo - ar.addr) / PG, 0x11, 0), 0, "%s: below it is copied",
	       what);
	{
		/* Pages above the range, by their index in the area. */
		long bad = 0;

		for (unsigned long a = hi; a < ar.addr + ar.n * PG; a += PG) {
			bad += pm_access(c, a, buf, PG, 0) != (long)PG ||
			       !pmt_page_is(buf, 0x11, (a - ar.addr) / PG);
		}
		is_int(bad, 0, "%s: above it is copied", what);
	}
	is_int(pm_access(p, lo, buf, PG, 0), PG, "%s: the parent keeps the range", what);
	pm_mm_destroy(c);
	is_int(pm_madvise(p, lo, hi - lo, PM_MADV_DOFORK), 0, "%s: DOFORK", what);
	fc0 = PMT_STAT(m, fork_pinned_copies);
	c = pmt_fork(p);
	is_int(PMT_STAT(m, fork_pinned_copies) - fc0, copies_second[l],
	       "%s: now the pinned page (and its folio's exclusive pages) are copied", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x11, 0), 0, "%s: the child sees the whole area",
	       what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x12, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x11, 0), 0, "%s: the child keeps old data", what);
	ok(pmt_page_is(pm_page_address(pin), 0x12, (lo - ar.addr) / PG),
	   "%s: the pin sees the write", what);
	pm_unpin_user_page(pin);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- shared mappings are shared across fork; private file mappings are COW ---- */

static void test_fork_shmem(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *p = pm_mm_create(m), *o = pm_mm_create(m), *c;
	unsigned long copies0, bad_pfn = 0;
	long xs, xp, xo, xa;

	ASSERT_TRUE(f && p && o);
	xs = pm_mmap(p, 0, 4 * PG, RW, PM_MAP_SHARED, f, 0);
	xp = pm_mmap(p, 0, 4 * PG, RW, PM_MAP_PRIVATE, f, 0);
	xo = pm_mmap(o, 0, 4 * PG, PM_PROT_READ, PM_MAP_SHARED, f, 0);
	xa = pm_mmap(p, 0, 4 * PG, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(xs > 0 && xp > 0 && xo > 0 && xa > 0);
	is_int(pmt_put_tag(p, xs, 4, 0x21, 0), 4, "fork shmem: fill the object");
	is_int(pmt_put_tag(p, xa, 4, 0x25, 0), 4, "fork shmem: fill the shared anonymous area");
	is_int(pmt_bad_tag(p, xp, 4, 0x21, 0), 0,
	       "fork shmem: the private mapping reads the object");
	is_int(pmt_put_tag(p, xp, 1, 0x22, 0), 1, "fork shmem: a private copy of page 0");
	c = pmt_fork(p);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(pmt_bad_tag(c, xs, 4, 0x21, 0), 0, "fork shmem: the child reads the object");
	is_int(pmt_put_tag(c, xs, 4, 0x23, 0), 4,
	       "fork shmem: the child writes the shared mapping");
	is_int(pmt_bad_tag(p, xs, 4, 0x23, 0), 0, "fork shmem: the parent sees it");
	is_int(pmt_bad_tag(o, xo, 4, 0x23, 0), 0, "fork shmem: another address space sees it");
	is_int(pmt_put_tag(p, xa, 4, 0x26, 0), 4,
	       "fork shmem: the parent writes the anonymous shared area");
	is_int(pmt_bad_tag(c, xa, 4, 0x26, 0), 0, "fork shmem: the child sees it");
	is_int(PMT_STAT(m, cow_copies) - copies0, 0, "fork shmem: shared mappings never copy");
	for (unsigned long i = 0; i < 4; i++) {
		bad_pfn += pmt_pfn_at(p, xs + i * PG) != pmt_pfn_at(c, xs + i * PG);
		bad_pfn += pmt_pfn_at(p, xa + i * PG) != pmt_pfn_at(c, xa + i * PG);
	}
	is_int(bad_pfn, 0, "fork shmem: shared mappings map the same frames in both");
	is_int(pmt_bad_tag(c, xp, 1, 0x22, 0), 0,
	       "fork shmem: the child inherits the private copy");
	{
		long bad = 0;
		static uint64_t buf[PM_PAGE_SIZE / 8];

		for (unsigned long i = 1; i < 4; i++)
			bad += pm_access(c, xp + i * PG, buf, PG, 0) != (long)PG ||
			       !pmt_page_is(buf, 0x23, i);
		is_int(bad, 0, "fork shmem: unwritten private pages follow the object");
	}
	is_int(pmt_put_tag(p, xp, 1, 0x24, 0), 1,
	       "fork shmem: the parent rewrites its private copy");
	is_int(pmt_bad_tag(c, xp, 1, 0x22, 0), 0,
	       "fork shmem: the child keeps the old private data");
	is_int(pmt_bad_tag(o, xo, 1, 0x23, 0), 0, "fork shmem: the object never sees private data");
	pm_shmem_put(f);
	pm_mm_destroy(c);
	pm_mm_destroy(o);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, "fork shmem");
}

/* The zero page after fork: the child's write stays the child's. */
static void test_fork_zero_page(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	long x = pm_mmap(p, 0, 8 * PG, RW, ANON, NULL, 0);

	ASSERT_TRUE(x > 0);
	is_int(pmt_bad_tag(p, x, 8, 0, 0), 0, "zero page: read faults read zero");
	c = pmt_fork(p);
	is_int(pmt_put_tag(c, x, 8, 0x31, 0), 8, "zero page: the child writes");
	is_int(pmt_bad_tag(p, x, 8, 0, 0), 0, "zero page: the parent still reads zero");
	is_int(pmt_put_tag(p, x, 4, 0x32, 0), 4, "zero page: the parent writes half");
	is_int(pmt_bad_tag(c, x, 8, 0x31, 0), 0, "zero page: the child keeps its data");
	pm_mm_destroy(p);
	pm_mm_destroy(c);
	pmt_end(m, free0, &pmt_end_returned, "zero page");
}

/* ---- fork failing at each allocation it makes ---- */

struct parent_state {
	struct pm_mm *mm;
	struct pm_shmem *f;
	long base, thp, shm, sanon, dontfork, zero;
	struct pm_page *pins[2];
	unsigned long thp_pin_n;
	struct pm_page *thp_pin;
};

static void parent_build(struct pm_machine *m, struct parent_state *s, bool pin_thp)
{
	struct pmt_area ar;

	memset(s, 0, sizeof(*s));
	s->mm = pm_mm_create(m);
	s->f = pm_shmem_create(m, 4 * PG, 0);
	ASSERT_TRUE(s->mm && s->f);
	pmt_area_setup(m, s->mm, PMT_L_BASE, 0x41, true, &ar);
	s->base = ar.addr;
	pmt_area_setup(m, s->mm, PMT_L_THP_PMD, 0x42, true, &ar);
	s->thp = ar.addr;
	s->shm = pm_mmap(s->mm, 0, 4 * PG, RW, PM_MAP_SHARED, s->f, 0);
	s->sanon = pm_mmap(s->mm, 0, 4 * PG, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS, NULL, 0);
	s->dontfork = pm_mmap(s->mm, 0, 4 * PG, RW, ANON, NULL, 0);
	s->zero = pm_mmap(s->mm, 0, 4 * PG, RW, ANON, NULL, 0);
	ASSERT_TRUE(s->shm > 0 && s->sanon > 0 && s->dontfork > 0 && s->zero > 0);
	ASSERT_EQ(pmt_put_tag(s->mm, s->shm, 4, 0x43, 0), 4);
	ASSERT_EQ(pmt_put_tag(s->mm, s->sanon, 4, 0x44, 0), 4);
	ASSERT_EQ(pmt_put_tag(s->mm, s->dontfork, 4, 0x45, 0), 4);
	ASSERT_EQ(pmt_bad_tag(s->mm, s->zero, 4, 0, 0), 0);
	ASSERT_EQ(pm_madvise(s->mm, s->dontfork, 4 * PG, PM_MADV_DONTFORK), 0);
	ASSERT_EQ(pm_pin_user_pages(s->mm, s->base, 2, PM_FOLL_WRITE | PM_FOLL_LONGTERM, s->pins),
		  2);
	if (pin_thp) {
		unsigned long a = s->thp + 7 * PG;

		ASSERT_EQ(pm_pin_user_pages_fast(s->mm, a, 1, PM_FOLL_WRITE, &s->thp_pin), 1);
	}
}

/* Everything a fork must leave as it was, checked after each failed (or successful) fork;
 * @iter varies what is written through the pins. Returns the number of problems. */
static long parent_verify(struct parent_state *s, uint32_t iter)
{
	static uint64_t buf[PM_PAGE_SIZE / 8];
	long bad = 0, part[8] = { 0 };

	pmt_fill_tag(pm_page_address(s->pins[0]), 0x4600 + (iter & 0xff), 0);
	pmt_fill_tag(pm_page_address(s->pins[1]), 0x4600 + (iter & 0xff), 1);
	part[0] = pmt_bad_tag(s->mm, s->base, 2, 0x4600 + (iter & 0xff), 0); /* pins still mapped */
	for (unsigned long i = 2; i < 16; i++)
		part[1] += pm_access(s->mm, s->base + i * PG, buf, PG, 0) != (long)PG ||
			   !pmt_page_is(buf, 0x41, i);
	part[2] = pmt_bad_tag(s->mm, s->thp, 512, 0x42, 0);
	part[3] = pmt_bad_tag(s->mm, s->shm, 4, 0x43, 0);
	part[4] = pmt_bad_tag(s->mm, s->sanon, 4, 0x44, 0);
	part[5] = pmt_bad_tag(s->mm, s->dontfork, 4, 0x45, 0);
	part[6] = pmt_bad_tag(s->mm, s->zero, 4, 0, 0);
	/* Still writable where it was: rewrite page 5 with the same data. */
	pmt_fill_tag(buf, 0x41, 5);
	part[7] = pm_access(s->mm, s->base + 5 * PG, buf, PG, 1) != (long)PG;
	for (int i = 0; i < 8; i++)
		bad += part[i];
	if (bad)
		diag("parent: pins %ld, base %ld, thp %ld, shmem %ld, shared anon %ld, dontfork "
		     "%ld, zero %ld, write %ld", part[0], part[1], part[2], part[3], part[4],
		     part[5], part[6], part[7]);
	return bad;
}

/* The child of a successful fork. */
static long child_verify(struct parent_state *s, struct pm_mm *c, uint32_t iter)
{
	static char buf[PM_PAGE_SIZE];
	long bad = 0;

	bad += pmt_bad_tag(c, s->base, 2, 0x4600 + (iter & 0xff), 0);
	bad += pmt_bad_tag(c, s->thp, 512, 0x42, 0);
	bad += pmt_bad_tag(c, s->shm, 4, 0x43, 0);
	bad += pmt_bad_tag(c, s->sanon, 4, 0x44, 0);
	bad += pm_access(c, s->dontfork, buf, PG, 0) != -EFAULT;
	bad += pmt_bad_tag(c, s->zero, 4, 0, 0);
	return bad;
}

static void parent_free(struct parent_state *s)
{
	pm_unpin_user_pages(s->pins, 2);
	if (s->thp_pin)
		pm_unpin_user_page(s->thp_pin);
	pm_shmem_put(s->f);
	pm_mm_destroy(s->mm);
}

/*
 * Make the @n-th allocation fail for every n in @ns (or every n from 1 when @ns is NULL) until
 * a fork makes fewer allocations than n. A failed fork returns NULL/ENOMEM and leaves the
 * parent exactly as it was, leaking nothing.
 */
static void test_fork_failure(bool pin_thp, const long *ns, int nns)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m), base_free;
	struct parent_state s;
	long fails = 0, bad_errno = 0, bad_parent = 0, bad_leak = 0, bad_check = 0,
	     injected_ok = 0, bad_child = 0, last_n = 0;
	bool done = false;
	struct pm_mm *c;
	const char *what = pin_thp ? "fork failure, pinned THP (sampled)" : "fork failure";

	parent_build(m, &s, pin_thp);
	is_int(parent_verify(&s, 0), 0, "%s: the parent is set up", what);
	/* A first fork puts the parent in its after-fork state (write-protected, THP split). */
	c = pmt_fork(s.mm);
	is_int(child_verify(&s, c, 0), 0, "%s: a fork that succeeds", what);
	pm_mm_destroy(c);
	is_int(parent_verify(&s, 1), 0, "%s: the parent after it", what);
	base_free = pmt_free_pages(m);
	for (long k = 0; !done && k < (ns ? nns : 100000); k++) {
		long n = ns ? ns[k] : k + 1;
		unsigned long f0 = PMT_STAT(m, alloc_failures), injected;
		uint32_t cur = (uint32_t)k + 1; /* the tag parent_verify() last wrote */
		int err;

		last_n = n;
		pm_fail_nth(m, n);
		errno = 0;
		c = pm_mm_fork(s.mm);
		err = errno;
		pm_fail_nth(m, 0);
		injected = PMT_STAT(m, alloc_failures) - f0;
		if (c) {
			if (!injected) {
				done = true;
				bad_child += child_verify(&s, c, cur) != 0;
			} else {
				injected_ok++;
				diag("%s: allocation %ld failed, yet the fork succeeded", what, n);
			}
			pm_mm_destroy(c);
		} else {
			fails++;
			if (err != ENOMEM) {
				bad_errno++;
				diag("%s: allocation %ld: errno %d", what, n, err);
			}
		}
		if (parent_verify(&s, cur + 1)) {
			if (!bad_parent)
				diag("%s: parent damaged after failing allocation %ld", what, n);
			bad_parent++;
		}
		if (pmt_free_pages(m) != base_free) {
			if (!bad_leak)
				diag("%s: allocation %ld: %zu free frames, %zu before", what, n,
				     pm_machine_free_pages(m), base_free);
			bad_leak++;
			base_free = pm_machine_free_pages(m);
		}
		if (pm_machine_check(m)) {
			if (!bad_check)
				diag("%s: allocation %ld: pm_machine_check failed", what, n);
			bad_check++;
		}
	}
	ok(done, "%s: a fork eventually made fewer allocations than the failure point (%ld)", what,
	   last_n);
	ok(fails > 0, "%s: %ld failure points exercised", what, fails);
	is_int(bad_errno, 0, "%s: every failed fork set ENOMEM", what);
	is_int(injected_ok, 0, "%s: a failed allocation always failed the fork", what);
	is_int(bad_parent, 0, "%s: the parent's data, mappings and pins stay intact", what);
	is_int(bad_leak, 0, "%s: a failed fork leaks nothing", what);
	is_int(bad_check, 0, "%s: invariants hold after each failure", what);
	is_int(bad_child, 0, "%s: the final fork's child is right", what);
	parent_free(&s);
	pmt_end(m, free0, &pmt_end_returned, what);
}

int main(void)
{
	static const long sampled[] = { 1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 21, 34, 55, 89, 144, 233,
					300, 377, 450, 500, 510, 515, 520, 525, 530, 540, 560, 600,
					700, 800, 1000, 1500, 2000, 4000, 8000 };

	plan_no_plan();
	for (int l = 0; l < PMT_NR_LAYOUTS; l++) {
		test_basic(l, true);
		test_basic(l, false);
		test_grandchild(l);
		test_mprotect_roundtrip(l);
		test_pinned_before_fork(l, true, false);
		test_pinned_before_fork(l, true, true);
		test_pinned_before_fork(l, false, true);
		test_dontfork(l);
	}
	test_thp_one_subpage_pinned();
	test_has_pinned();
	test_fork_shmem();
	test_fork_zero_page();
	test_fork_failure(false, NULL, 0);
	test_fork_failure(true, sampled, (int)(sizeof(sampled) / sizeof(sampled[0])));
	return done_testing();
}
