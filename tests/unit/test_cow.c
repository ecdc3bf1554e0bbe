// SPDX-License-Identifier: MIT
/*
 * test_cow.c - copy-on-write against GUP: the properties of Linux's cow.c and gup_longterm.c
 * selftests that apply to pinmm (see ../shared/spec/linux-gup.md §7), each with cow.c's anon
 * layouts (4 KiB pages, a PMD-mapped THP, a PTE-mapped THP, a single PTE of a THP, a
 * partially shared THP):
 *  - a get reference taken by a fork child that then unmaps never exposes the parent's later
 *    writes (CVE-2020-29374, cow.c's vmsplice tests), nor one taken by the parent before or
 *    after fork the child's writes;
 *  - a R/W pin survives an mprotect R -> RW round trip (written in place, never copied);
 *  - a R/O pin of a page shared with a live child, previously shared, or exclusive but mapped
 *    R/O sees the process's later writes (the pin unshares first), fast and slow;
 *  - FOLL_FORCE writes into a read-only private mapping only into an exclusive anonymous copy
 *    (no Dirty COW);
 *  - R/O long-term pins of the zero page and of page cache pages in private mappings copy
 *    first; long-term pins of shmem work in shared and private mappings, R/O and R/W.
 * Pages hold 64-bit words (tag << 32 | page index).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define LT PM_FOLL_LONGTERM

/* ---- helpers ---- */

/* Pages whose pinned content differs from what the address space reads there. */
static long pin_differs(struct pm_mm *mm, unsigned long addr, struct pm_page **pages,
			unsigned long n)
{
	static char buf[PM_PAGE_SIZE];
	long bad = 0;

	for (unsigned long i = 0; i < n; i++)
		bad += pm_access(mm, addr + i * PG, buf, PG, 0) != (long)PG ||
		       memcmp(buf, pm_page_address(pages[i]), PG) != 0;
	return bad;
}

static long do_get(struct pm_mm *mm, unsigned long a, unsigned long n, unsigned fl,
		   struct pm_page **pages, bool fast)
{
	return fast ? pm_get_user_pages_fast(mm, a, n, fl, pages)
		    : pm_get_user_pages(mm, a, n, fl, pages);
}

static long do_pin(struct pm_mm *mm, unsigned long a, unsigned long n, unsigned fl,
		   struct pm_page **pages, bool fast)
{
	return fast ? pm_pin_user_pages_fast(mm, a, n, fl, pages)
		    : pm_pin_user_pages(mm, a, n, fl, pages);
}

static void put_pages(struct pm_page **pages, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		pm_put_page(pages[i]);
}

/* ---- get references across fork (CVE-2020-29374 and its mirror) ---- */

enum child_end { CHILD_MUNMAP, CHILD_DESTROY };

/*
 * cow.c #3/#4: the child takes a R/O get reference (vmsplice), then unmaps or exits; the
 * parent (optionally after an mprotect R -> RW round trip) writes. The reference must keep
 * showing the data of fork time.
 */
static void test_get_child_unmap(enum pmt_layout l, bool fast, enum child_end end, bool mprot)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **refs = calloc(512, sizeof(*refs));
	struct pmt_area ar;
	char what[112];

	snprintf(what, sizeof(what), "child %s get, child %s%s, %s", fast ? "fast" : "slow",
		 end == CHILD_MUNMAP ? "unmaps" : "exits", mprot ? ", parent mprotect" : "",
		 pmt_layout_name[l]);
	ASSERT_TRUE(p && refs);
	pmt_area_setup(m, p, l, 0x11, false, &ar);
	c = pmt_fork(p);
	is_int(do_get(c, ar.addr, ar.n, 0, refs, fast), ar.n, "%s: child takes references", what);
	if (end == CHILD_MUNMAP)
		is_int(pm_munmap(c, ar.addr, ar.len), 0, "%s: child unmaps", what);
	else
		pm_mm_destroy(c);
	if (mprot) {
		is_int(pm_mprotect(p, ar.addr, ar.len, PM_PROT_READ), 0, "%s: parent R", what);
		is_int(pm_mprotect(p, ar.addr, ar.len, RW), 0, "%s: parent RW", what);
	}
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x12, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_bad_pin(refs, ar.n, 0x11, 0), 0,
	       "%s: the child's references never see the parent's writes", what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0x12, 0), 0, "%s: the parent reads its writes", what);
	put_pages(refs, ar.n);
	if (end == CHILD_MUNMAP)
		pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(refs);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * cow.c #5/#6: the parent takes a R/O get reference before (or after) fork, then unmaps; the
 * child writes. The reference must keep the old data.
 */
static void test_get_parent_unmap(enum pmt_layout l, bool fast, bool before_fork)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **refs = calloc(512, sizeof(*refs));
	struct pmt_area ar;
	char what[112];

	snprintf(what, sizeof(what), "parent %s get %s fork, parent unmaps, %s",
		 fast ? "fast" : "slow", before_fork ? "before" : "after", pmt_layout_name[l]);
	ASSERT_TRUE(p && refs);
	pmt_area_setup(m, p, l, 0x21, false, &ar);
	if (before_fork)
		is_int(do_get(p, ar.addr, ar.n, 0, refs, fast), ar.n, "%s: parent gets", what);
	c = pmt_fork(p);
	if (!before_fork)
		is_int(do_get(p, ar.addr, ar.n, 0, refs, fast), ar.n, "%s: parent gets", what);
	is_int(pm_munmap(p, ar.addr, ar.len), 0, "%s: parent unmaps", what);
	is_int(pmt_put_tag(c, ar.addr, ar.n, 0x22, 0), ar.n, "%s: child writes", what);
	is_int(pmt_bad_pin(refs, ar.n, 0x21, 0), 0,
	       "%s: the parent's references never see the child's writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x22, 0), 0, "%s: the child reads its writes", what);
	put_pages(refs, ar.n);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(refs);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- pins ---- */

/* cow.c #7: a R/W long-term pin, then mprotect R -> RW, then a write: written in place. */
static void test_rw_pin_mprotect(enum pmt_layout l, bool fast)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m);
	struct pm_page **pins = calloc(512, sizeof(*pins));
	unsigned long copies0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "%s R/W pin, mprotect R/RW, %s", fast ? "fast" : "slow",
		 pmt_layout_name[l]);
	ASSERT_TRUE(p && pins);
	pmt_area_setup(m, p, l, 0x31, false, &ar);
	is_int(do_pin(p, ar.addr, ar.n, PM_FOLL_WRITE | LT, pins, fast), ar.n, "%s: pin", what);
	is_int(pm_mprotect(p, ar.addr, ar.len, PM_PROT_READ), 0, "%s: R", what);
	is_int(pm_mprotect(p, ar.addr, ar.len, RW), 0, "%s: RW", what);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x32, 0), ar.n, "%s: write", what);
	is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: a pinned exclusive page is never copied",
	       what);
	is_int(pmt_bad_pin(pins, ar.n, 0x32, 0), 0, "%s: the pin sees the write", what);
	is_int(pin_differs(p, ar.addr, pins, ar.n), 0, "%s: pin content == memory", what);
	pm_unpin_user_pages(pins, ar.n);
	pm_mm_destroy(p);
	free(pins);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * cow.c #9/#10: fork (the child stays), then a R/O pin (long-term or not) of the shared page,
 * then the parent writes: the pin must see the write (it unshared first), the child must not.
 */
static void test_ro_pin_shared(enum pmt_layout l, bool fast, bool longterm)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **pins = calloc(512, sizeof(*pins));
	unsigned long copies0, exclusive = 0, other = 0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "%s R/O%s pin of a shared page, %s", fast ? "fast" : "slow",
		 longterm ? " long-term" : "", pmt_layout_name[l]);
	ASSERT_TRUE(p && pins);
	pmt_area_setup(m, p, l, 0x41, false, &ar);
	c = pmt_fork(p);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(do_pin(p, ar.addr, ar.n, longterm ? LT : 0, pins, fast), ar.n, "%s: pin", what);
	for (unsigned long i = 0; i < ar.n; i++) {
		exclusive += pm_page_anon_exclusive(pins[i]);
		other += pmt_pfn_at(c, ar.addr + i * PG) != pm_page_to_pfn(pins[i]);
	}
	is_int(exclusive, ar.n, "%s: every pinned page is exclusive", what);
	is_int(other, ar.n, "%s: none of them is the child's", what);
	if (l == PMT_L_BASE)
		is_int(PMT_STAT(m, cow_copies) - copies0, ar.n, "%s: the pin unshared by copying",
		       what);
	is_int(pmt_bad_pin(pins, ar.n, 0x41, 0), 0, "%s: the pin reads the data", what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x42, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_bad_pin(pins, ar.n, 0x42, 0), 0, "%s: the pin sees the parent's writes", what);
	is_int(pin_differs(p, ar.addr, pins, ar.n), 0, "%s: pin content == memory", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x41, 0), 0, "%s: the child reads old data", what);
	is_int(pmt_put_tag(c, ar.addr, ar.n, 0x43, 0), ar.n, "%s: child writes", what);
	is_int(pmt_bad_pin(pins, ar.n, 0x42, 0), 0, "%s: the pin never sees the child's writes",
	       what);
	is_int(pm_machine_check(m), 0, "%s: invariants hold", what);
	pm_unpin_user_pages(pins, ar.n);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(pins);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* cow.c #11/#12: the child is gone; the page is R/O and not marked exclusive. */
static void test_ro_pin_prev_shared(enum pmt_layout l, bool fast)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **pins = calloc(512, sizeof(*pins));
	unsigned long copies0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "%s R/O pin of a previously shared page, %s",
		 fast ? "fast" : "slow", pmt_layout_name[l]);
	ASSERT_TRUE(p && pins);
	pmt_area_setup(m, p, l, 0x51, false, &ar);
	c = pmt_fork(p);
	pm_mm_destroy(c);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(do_pin(p, ar.addr, ar.n, LT, pins, fast), ar.n, "%s: pin", what);
	if (l == PMT_L_BASE)
		is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: the only user reuses in place",
		       what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x52, 0), ar.n, "%s: write", what);
	is_int(pmt_bad_pin(pins, ar.n, 0x52, 0), 0, "%s: the pin sees the write", what);
	is_int(pin_differs(p, ar.addr, pins, ar.n), 0, "%s: pin content == memory", what);
	pm_unpin_user_pages(pins, ar.n);
	pm_mm_destroy(p);
	free(pins);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* cow.c #13/#14: an exclusive page mapped R/O (mprotect R), pinned R/O, then RW and written. */
static void test_ro_pin_exclusive(enum pmt_layout l, bool fast)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m);
	struct pm_page **pins = calloc(512, sizeof(*pins));
	unsigned long copies0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "%s R/O pin of an exclusive R/O page, %s",
		 fast ? "fast" : "slow", pmt_layout_name[l]);
	ASSERT_TRUE(p && pins);
	pmt_area_setup(m, p, l, 0x61, false, &ar);
	is_int(pm_mprotect(p, ar.addr, ar.len, PM_PROT_READ), 0, "%s: R", what);
	copies0 = PMT_STAT(m, cow_copies);
	is_int(do_pin(p, ar.addr, ar.n, LT, pins, fast), ar.n, "%s: pin", what);
	is_int(pm_mprotect(p, ar.addr, ar.len, RW), 0, "%s: RW", what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x62, 0), ar.n, "%s: write", what);
	if (l != PMT_L_THP_PARTIAL)
		is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: nothing copied", what);
	is_int(pmt_bad_pin(pins, ar.n, 0x62, 0), 0, "%s: the pin sees the write", what);
	is_int(pin_differs(p, ar.addr, pins, ar.n), 0, "%s: pin content == memory", what);
	pm_unpin_user_pages(pins, ar.n);
	pm_mm_destroy(p);
	free(pins);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * After fork, a FOLL_WRITE reference (get or pin) taken by the parent breaks COW first: what
 * is written through it reaches the parent's memory and never the child.
 */
static void test_write_ref_after_fork(enum pmt_layout l, bool fast, bool pin)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **pages = calloc(512, sizeof(*pages));
	unsigned long exclusive = 0, other = 0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "%s R/W %s after fork, %s", fast ? "fast" : "slow",
		 pin ? "pin" : "get", pmt_layout_name[l]);
	ASSERT_TRUE(p && pages);
	pmt_area_setup(m, p, l, 0xd1, false, &ar);
	c = pmt_fork(p);
	is_int(pin ? do_pin(p, ar.addr, ar.n, PM_FOLL_WRITE, pages, fast)
		   : do_get(p, ar.addr, ar.n, PM_FOLL_WRITE, pages, fast),
	       ar.n, "%s: take the pages", what);
	for (unsigned long i = 0; i < ar.n; i++) {
		exclusive += pm_page_anon_exclusive(pages[i]);
		other += pmt_pfn_at(c, ar.addr + i * PG) != pm_page_to_pfn(pages[i]);
	}
	is_int(exclusive, ar.n, "%s: every page is exclusive", what);
	is_int(other, ar.n, "%s: none of them is the child's", what);
	for (unsigned long i = 0; i < ar.n; i++)
		pmt_fill_tag(pm_page_address(pages[i]), 0xd2, i);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0xd2, 0), 0, "%s: the parent reads the writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0xd1, 0), 0, "%s: the child never does", what);
	if (pin)
		pm_unpin_user_pages(pages, ar.n);
	else
		put_pages(pages, ar.n);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(pages);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- FOLL_FORCE: no Dirty COW ---- */

enum force_how { FORCE_PIN, FORCE_PIN_FAST, FORCE_GET, FORCE_GET_FAST, NR_FORCE };
static const char *const force_name[NR_FORCE] = { "pin", "fast pin", "get", "fast get" };

static long force_take(enum force_how how, struct pm_mm *mm, unsigned long a, unsigned long n,
		       unsigned fl, struct pm_page **pages)
{
	switch (how) {
	case FORCE_PIN:
		return pm_pin_user_pages(mm, a, n, fl, pages);
	case FORCE_PIN_FAST:
		return pm_pin_user_pages_fast(mm, a, n, fl, pages);
	case FORCE_GET:
		return pm_get_user_pages(mm, a, n, fl, pages);
	default:
		return pm_get_user_pages_fast(mm, a, n, fl, pages);
	}
}

static void force_release(enum force_how how, struct pm_page **pages, unsigned long n)
{
	if (how == FORCE_PIN || how == FORCE_PIN_FAST)
		pm_unpin_user_pages(pages, n);
	else
		put_pages(pages, n);
}

/*
 * After fork, the parent makes its mapping R/O and writes through it with FOLL_FORCE: the
 * write lands in an exclusive anonymous copy; the child never sees it.
 */
static void test_force_after_fork(enum pmt_layout l, enum force_how how)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c;
	struct pm_page **pages = calloc(512, sizeof(*pages));
	static char buf[PM_PAGE_SIZE];
	unsigned long exclusive = 0, other = 0;
	struct pmt_area ar;
	char what[96];

	snprintf(what, sizeof(what), "FOLL_FORCE %s after fork, %s", force_name[how],
		 pmt_layout_name[l]);
	ASSERT_TRUE(p && pages);
	pmt_area_setup(m, p, l, 0x71, false, &ar);
	c = pmt_fork(p);
	is_int(pm_mprotect(p, ar.addr, ar.len, PM_PROT_READ), 0, "%s: parent R", what);
	is_int(force_take(how, p, ar.addr, ar.n, PM_FOLL_WRITE, pages), -EFAULT,
	       "%s: a write without FOLL_FORCE: -EFAULT", what);
	is_int(pm_access(p, ar.addr, buf, PG, 1), -EFAULT, "%s: a user write: -EFAULT", what);
	is_int(force_take(how, p, ar.addr, ar.n, PM_FOLL_WRITE | PM_FOLL_FORCE, pages), ar.n,
	       "%s: a forced write takes the pages", what);
	for (unsigned long i = 0; i < ar.n; i++) {
		exclusive += pm_page_anon_exclusive(pages[i]) &&
			     pm_folio_test_anon(pm_page_folio(pages[i]));
		other += pmt_pfn_at(c, ar.addr + i * PG) != pm_page_to_pfn(pages[i]);
	}
	is_int(exclusive, ar.n, "%s: every page is an exclusive anonymous page", what);
	is_int(other, ar.n, "%s: none of them is the child's", what);
	for (unsigned long i = 0; i < ar.n; i++)
		pmt_fill_tag(pm_page_address(pages[i]), 0x72, i);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x71, 0), 0,
	       "%s: the child never sees the forced write", what);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0x72, 0), 0, "%s: the parent reads it", what);
	force_release(how, pages, ar.n);
	is_int(pm_mprotect(p, ar.addr, ar.len, RW), 0, "%s: parent RW", what);
	is_int(pmt_put_tag(p, ar.addr, ar.n, 0x73, 0), ar.n, "%s: parent writes", what);
	is_int(pmt_bad_tag(c, ar.addr, ar.n, 0x71, 0), 0, "%s: the child still reads old data",
	       what);
	pm_mm_destroy(c);
	pm_mm_destroy(p);
	free(pages);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* A forced write on an exclusive page writes it in place (COW is already broken). */
static void test_force_exclusive(enum pmt_layout l)
{
	struct pm_machine *m = pmt_machine(128, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m);
	struct pm_page **pages = calloc(512, sizeof(*pages));
	unsigned long copies0, same = 0;
	struct pmt_area ar;
	char what[64];

	snprintf(what, sizeof(what), "FOLL_FORCE on an exclusive page, %s", pmt_layout_name[l]);
	ASSERT_TRUE(p && pages);
	pmt_area_setup(m, p, l, 0x81, false, &ar);
	if (l == PMT_L_THP_PARTIAL)
		ASSERT_EQ(pmt_put_tag(p, ar.addr, 1, 0x81, 0), 1); /* make page 0 exclusive again */
	{
		unsigned long *pfn = calloc(ar.n, sizeof(*pfn));

		ASSERT_TRUE(pfn);
		for (unsigned long i = 0; i < ar.n; i++)
			pfn[i] = pmt_pfn_at(p, ar.addr + i * PG);
		is_int(pm_mprotect(p, ar.addr, ar.len, PM_PROT_READ), 0, "%s: R", what);
		copies0 = PMT_STAT(m, cow_copies);
		is_int(pm_pin_user_pages(p, ar.addr, ar.n, PM_FOLL_WRITE | PM_FOLL_FORCE, pages),
		       ar.n, "%s: forced write pin", what);
		for (unsigned long i = 0; i < ar.n; i++)
			same += pm_page_to_pfn(pages[i]) == pfn[i];
		free(pfn);
	}
	is_int(same, ar.n, "%s: the pages the mapping had", what);
	is_int(PMT_STAT(m, cow_copies) - copies0, 0, "%s: nothing copied", what);
	for (unsigned long i = 0; i < ar.n; i++)
		pmt_fill_tag(pm_page_address(pages[i]), 0x82, i);
	is_int(pmt_bad_tag(p, ar.addr, ar.n, 0x82, 0), 0, "%s: the mapping reads the forced write",
	       what);
	pm_unpin_user_pages(pages, ar.n);
	pm_mm_destroy(p);
	free(pages);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* Dirty COW proper: FOLL_FORCE on a R/O private mapping of a shmem object never writes the
 * object's page. */
static void test_force_shmem_private(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *w = pm_mm_create(m), *mm = pm_mm_create(m);
	struct pm_page *pages[4] = { 0 }, *cache = NULL;
	long xw, x;
	const char *what = "FOLL_FORCE on a R/O private shmem mapping";

	ASSERT_TRUE(f && w && mm);
	xw = pm_mmap(w, 0, 4 * PG, RW, PM_MAP_SHARED, f, 0);
	x = pm_mmap(mm, 0, 4 * PG, PM_PROT_READ, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(xw > 0 && x > 0);
	is_int(pmt_put_tag(w, xw, 4, 0x91, 0), 4, "%s: fill the object", what);
	is_int(pmt_bad_tag(mm, x, 2, 0x91, 0), 0, "%s: the private mapping reads pages 0..1", what);
	is_int(pm_get_user_pages(w, xw, 1, 0, &cache), 1, "%s: the object's page 0", what);
	is_int(pm_get_user_pages(mm, x, 4, PM_FOLL_WRITE, pages), -EFAULT,
	       "%s: no write without FOLL_FORCE", what);
	is_int(pm_get_user_pages(mm, x, 2, PM_FOLL_WRITE | PM_FOLL_FORCE, pages), 2,
	       "%s: forced get of pages 0..1 (mapped)", what);
	is_int(pm_pin_user_pages_fast(mm, x + 2 * PG, 2, PM_FOLL_WRITE | PM_FOLL_FORCE, pages + 2),
	       2, "%s: forced fast pin of pages 2..3 (not yet mapped)", what);
	ok(pages[0] && cache && pm_page_to_pfn(pages[0]) != pm_page_to_pfn(cache),
	   "%s: not the object's page", what);
	{
		unsigned long anon = 0;

		for (int i = 0; i < 4; i++)
			anon += pm_folio_test_anon(pm_page_folio(pages[i])) &&
				pm_page_anon_exclusive(pages[i]);
		is_int(anon, 4, "%s: exclusive anonymous copies", what);
	}
	for (unsigned long i = 0; i < 4; i++)
		pmt_fill_tag(pm_page_address(pages[i]), 0x92, i);
	is_int(pmt_bad_tag(w, xw, 4, 0x91, 0), 0, "%s: the object is unchanged", what);
	ok(pmt_page_is(pm_page_address(cache), 0x91, 0), "%s: its page too", what);
	is_int(pmt_bad_tag(mm, x, 4, 0x92, 0), 0, "%s: the private mapping reads its copies", what);
	pm_put_page(pages[0]);
	pm_put_page(pages[1]);
	pm_unpin_user_pages(pages + 2, 2);
	pm_put_page(cache);
	pm_shmem_put(f);
	pm_mm_destroy(w);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- non-anonymous pages in private mappings: R/O long-term pins copy first ---- */

/* The shared zero page: a R/O long-term pin gets a real page, which later writes reach. */
static void test_zero_page_longterm(bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m);
	struct pm_page *pins[8] = { 0 };
	long x = pm_mmap(p, 0, 8 * PG, RW, ANON, NULL, 0);
	unsigned long zero = 0;
	char what[64];

	snprintf(what, sizeof(what), "%s R/O long-term pin of the zero page",
		 fast ? "fast" : "slow");
	ASSERT_TRUE(p && x > 0);
	is_int(pmt_bad_tag(p, x, 8, 0, 0), 0, "%s: read faults map zeros", what);
	is_int(do_pin(p, x, 8, LT, pins, fast), 8, "%s: pin", what);
	for (int i = 0; i < 8; i++)
		zero += pm_page_is_zero(pins[i]);
	is_int(zero, 0, "%s: no pin is the shared zero page", what);
	is_int(pmt_bad_pin(pins, 8, 0, 0), 0, "%s: the pins read zero", what);
	is_int(pmt_put_tag(p, x, 8, 0xa1, 0), 8, "%s: write", what);
	is_int(pmt_bad_pin(pins, 8, 0xa1, 0), 0, "%s: the pins see the write", what);
	is_int(pin_differs(p, x, pins, 8), 0, "%s: pin content == memory", what);
	pm_unpin_user_pages(pins, 8);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* A page cache page in a private mapping: a R/O long-term pin gets a private copy. */
static void test_shmem_private_longterm(bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	struct pm_mm *w = pm_mm_create(m), *p = pm_mm_create(m);
	struct pm_page *pins[8] = { 0 };
	long xw, x;
	char what[80];

	snprintf(what, sizeof(what), "%s R/O long-term pin in a private shmem mapping",
		 fast ? "fast" : "slow");
	ASSERT_TRUE(f && w && p);
	xw = pm_mmap(w, 0, 8 * PG, RW, PM_MAP_SHARED, f, 0);
	x = pm_mmap(p, 0, 8 * PG, RW, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(xw > 0 && x > 0);
	is_int(pmt_put_tag(w, xw, 8, 0xb1, 0), 8, "%s: fill the object", what);
	is_int(pmt_bad_tag(p, x, 8, 0xb1, 0), 0, "%s: the private mapping reads it", what);
	is_int(do_pin(p, x, 8, LT, pins, fast), 8, "%s: pin", what);
	is_int(pmt_put_tag(p, x, 8, 0xb2, 0), 8, "%s: the process writes", what);
	is_int(pmt_bad_pin(pins, 8, 0xb2, 0), 0, "%s: the pins see the process's writes", what);
	is_int(pin_differs(p, x, pins, 8), 0, "%s: pin content == memory", what);
	is_int(pmt_bad_tag(w, xw, 8, 0xb1, 0), 0, "%s: the object is unchanged", what);
	pm_unpin_user_pages(pins, 8);
	pm_shmem_put(f);
	pm_mm_destroy(w);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * gup_longterm.c on tmpfs: long-term pins work in MAP_SHARED and MAP_PRIVATE mappings, R/W
 * (on a RW mapping) and R/O (on a mapping made R/O), fast and slow; the pin sees what the
 * mapping shows.
 */
static void test_gup_longterm(bool shared, bool rw, bool fast)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *w = pm_mm_create(m), *p = pm_mm_create(m);
	struct pm_page *pins[4] = { 0 };
	long xw, x;
	char what[96];

	snprintf(what, sizeof(what), "gup_longterm: %s %s pin in a MAP_%s shmem mapping",
		 fast ? "fast" : "slow", rw ? "R/W" : "R/O", shared ? "SHARED" : "PRIVATE");
	ASSERT_TRUE(f && w && p);
	xw = pm_mmap(w, 0, 4 * PG, RW, PM_MAP_SHARED, f, 0);
	x = pm_mmap(p, 0, 4 * PG, RW, shared ? PM_MAP_SHARED : PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(xw > 0 && x > 0);
	is_int(pmt_put_tag(w, xw, 4, 0xc1, 0), 4, "%s: fill", what);
	is_int(pmt_bad_tag(p, x, 4, 0xc1, 0), 0, "%s: the mapping reads the object", what);
	if (!rw)
		is_int(pm_mprotect(p, x, 4 * PG, PM_PROT_READ), 0, "%s: mapping R/O", what);
	is_int(do_pin(p, x, 4, LT | (rw ? PM_FOLL_WRITE : 0), pins, fast), 4, "%s: pin works",
	       what);
	is_int(pmt_bad_pin(pins, 4, 0xc1, 0), 0, "%s: the pin reads the data", what);
	if (rw) {
		for (unsigned long i = 0; i < 4; i++)
			pmt_fill_tag(pm_page_address(pins[i]), 0xc2, i);
		is_int(pmt_bad_tag(p, x, 4, 0xc2, 0), 0,
		       "%s: writes through the pin show in the mapping", what);
		is_int(pmt_bad_tag(w, xw, 4, shared ? 0xc2 : 0xc1, 0), 0,
		       shared ? "%s: and in the object" : "%s: but not in the object", what);
	} else {
		is_int(pmt_put_tag(w, xw, 4, 0xc3, 0), 4, "%s: the object changes", what);
		is_int(pin_differs(p, x, pins, 4), 0, "%s: pin content == memory", what);
		if (shared)
			is_int(pmt_bad_pin(pins, 4, 0xc3, 0), 0, "%s: the pin follows the object",
			       what);
		is_int(pm_mprotect(p, x, 4 * PG, RW), 0, "%s: mapping RW", what);
		is_int(pmt_put_tag(p, x, 4, 0xc4, 0), 4, "%s: the process writes", what);
		is_int(pmt_bad_pin(pins, 4, 0xc4, 0), 0, "%s: the pin sees the process's write",
		       what);
	}
	pm_unpin_user_pages(pins, 4);
	pm_shmem_put(f);
	pm_mm_destroy(w);
	pm_mm_destroy(p);
	pmt_end(m, free0, &pmt_end_returned, what);
}

int main(void)
{
	plan_no_plan();
	for (int l = 0; l < PMT_NR_LAYOUTS; l++) {
		for (int fast = 0; fast < 2; fast++) {
			test_get_child_unmap(l, fast, CHILD_MUNMAP, false);
			test_get_child_unmap(l, fast, CHILD_DESTROY, false);
			test_get_child_unmap(l, fast, CHILD_MUNMAP, true);
			test_get_parent_unmap(l, fast, true);
			test_get_parent_unmap(l, fast, false);
			test_rw_pin_mprotect(l, fast);
			test_ro_pin_shared(l, fast, true);
			test_ro_pin_shared(l, fast, false);
			test_ro_pin_prev_shared(l, fast);
			test_ro_pin_exclusive(l, fast);
			test_write_ref_after_fork(l, fast, false);
			test_write_ref_after_fork(l, fast, true);
		}
		for (int how = 0; how < NR_FORCE; how++)
			test_force_after_fork(l, how);
		test_force_exclusive(l);
	}
	test_force_shmem_private();
	for (int fast = 0; fast < 2; fast++) {
		test_zero_page_longterm(fast);
		test_shmem_private_longterm(fast);
		for (int shared = 0; shared < 2; shared++)
			for (int rw = 0; rw < 2; rw++)
				test_gup_longterm(shared, rw, fast);
	}
	return done_testing();
}
