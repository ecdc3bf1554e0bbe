// SPDX-License-Identifier: MIT
/*
 * test_unpin_release.c - a double unpin in a release build (issue 13, defect 7): the misuse
 * stays the caller's bug, but the release is refused the same way for every folio size - one
 * warning, no count changed - so a folio that is still mapped is never freed and another
 * address space never gets its frames.
 *
 * Debug builds (every test build) stop at a double unpin, so this program compiles the GUP
 * code itself at PM_DEBUG=0, the kernel tools/testing way: gup/gup.c is included below and
 * its symbols replace the library's. Everything else is the library as built.
 */
#undef PM_DEBUG
#define PM_DEBUG 0
#include "gup/gup.c"

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PAGE PM_PAGE_SIZE
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static void double_unpin(bool thp)
{
	const char *what = thp ? "THP" : "4 KiB page";
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *other;
	unsigned long len = thp ? PM_PMD_SIZE : 4 * PAGE, a, b;
	struct pm_folio *folio;
	struct pm_page *p;
	int ref, map;

	ASSERT_TRUE(mm);
	a = pmt_map_anon(mm, len, RW, thp);
	ASSERT_EQ(pmt_put_tag(mm, a, len / PAGE, 7, 0), len / PAGE);
	ASSERT_EQ(pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE, &p), 1);
	folio = pm_page_folio(p);
	is_int(pm_folio_order(folio), thp ? 9 : 0, "%s: the page is what it claims", what);
	pm_unpin_user_page(p);
	ref = pm_folio_ref_count(folio);
	map = pm_folio_mapcount(folio);

	pm_unpin_user_page(p); /* the caller's bug */
	is_int(pm_folio_ref_count(folio), ref, "%s: a second unpin leaves the refcount", what);
	is_int(pm_folio_pincount(folio), 0, "%s: ... and the pincount", what);
	is_int(pm_folio_mapcount(folio), map, "%s: the folio is still mapped", what);
	ok(pmt_pins_balanced(m), "%s: the refused release is not counted", what);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check passes", what);

	/* Nobody else gets the frames: a second address space fills all it can. */
	other = pm_mm_create(m);
	ASSERT_TRUE(other);
	b = pmt_map_anon(other, 8 << 20, RW, false);
	pmt_put_tag(other, b, (8 << 20) / PAGE, 9, 0);
	is_int(pmt_bad_tag(mm, a, len / PAGE, 7, 0), 0, "%s: the owner's data is intact", what);
	pm_mm_destroy(other);

	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

int main(void)
{
	plan_no_plan();
	double_unpin(true);
	double_unpin(false);
	return done_testing();
}
