// SPDX-License-Identifier: MIT
/*
 * test_regress_large_anon_reuse.c - a write fault on a read-only PTE of a large anonymous folio
 * that this address space alone maps reuses the page in place, as Linux 6.18 does
 * (__wp_can_reuse_large_anon_folio); it used to be copied into a 4 KiB page.
 *
 * Found by make oracle: a THP, fork, the child's mprotect splits its PMD, the parent's write
 * splits the parent's and copies one page, the child exits; the parent's next write found
 * Linux's page still part of the THP (kpageflags THP) and pinmm's a new 4 KiB page.
 * Linux's rule, and pinmm's: more than one mapping, every reference a mapping (no pin, no GUP
 * reference), every mapping this mm's. A page the folio's other mapper still maps is copied,
 * and so is one the folio maps alone (Linux copies it to let the folio go).
 * The whole program runs in each design (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define HP (2UL << 20)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define THP_RW (PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_ANON | PM_PAGE_THP | \
		PM_PAGE_ANON_EXCLUSIVE | PM_PAGE_WRITABLE)

static struct pm_machine *m;
static struct pm_mm *mm;

static struct pm_page_info info(struct pm_mm *where, unsigned long a)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(where, a, 1, &pi), 1);
	pi.flags &= ~PM_PAGE_DIRTY;
	return pi;
}

/* A THP at @h, shared with a fork child whose PMD mprotect split; the parent's split too. */
static struct pm_mm *setup_shared(unsigned long *h, uint64_t *pfn0)
{
	struct pm_mm *c;
	unsigned long a = pmt_map_anon(mm, 2 * HP, RW, true);

	*h = (a + HP - 1) & ~(HP - 1);
	ASSERT_EQ(pmt_poke(mm, *h + 0x3c, 11), 1);
	*pfn0 = info(mm, *h).pfn;
	ASSERT_TRUE(info(mm, *h).flags & PM_PAGE_THP);
	c = pmt_fork(mm);
	ASSERT_TRUE(c != NULL);
	ASSERT_EQ(pm_mprotect(c, *h + 0x173 * PG, 0x8d * PG, PM_PROT_READ | PM_PROT_EXEC), 0);
	ASSERT_EQ(pmt_poke(mm, *h + 0xfb * PG, 91), 1); /* the parent's PMD splits; one copy */
	ASSERT_TRUE(!(info(mm, *h + 0xfb * PG).flags & PM_PAGE_THP));
	return c;
}

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);
	struct pm_mm *c;
	struct pm_page *pin;
	unsigned long h, copies, reuses;
	uint64_t pfn0;

	plan_no_plan();
	c = setup_shared(&h, &pfn0);
	copies = PMT_STAT(m, cow_copies);
	ASSERT_EQ(pmt_poke(mm, h + 0x1ad * PG, 1), 1);
	ok(PMT_STAT(m, cow_copies) == copies + 1 && !(info(mm, h + 0x1ad * PG).flags & PM_PAGE_THP),
	   "the child still maps the folio: the parent's write copies");
	pm_mm_destroy(c);
	copies = PMT_STAT(m, cow_copies);
	reuses = PMT_STAT(m, cow_reuses);
	ASSERT_EQ(pmt_poke(mm, h + 0x1ae * PG + 0x33, 21), 1);
	ok(PMT_STAT(m, cow_copies) == copies && PMT_STAT(m, cow_reuses) == reuses + 1,
	   "the child gone: the parent's write reuses the page");
	is_int(info(mm, h + 0x1ae * PG).flags, THP_RW,
	       "... still the THP's page: PRESENT EXCL ANON THP AEXCL WRITABLE");
	is_int((long)(info(mm, h + 0x1ae * PG).pfn - pfn0), 0x1ae, "... at its pfn in the folio");
	is_int(pmt_peek(mm, h + 0x1ae * PG + 0x33), 21, "... and reads the write");
	is_int(pmt_peek(mm, h + 0x3c), 11, "... the first write is still there");

	/* A pin is a reference that is no mapping: copy. */
	ASSERT_EQ(pm_pin_user_pages_fast(mm, h + 0x10 * PG, 1, 0, &pin), 1);
	copies = PMT_STAT(m, cow_copies);
	ASSERT_EQ(pmt_poke(mm, h + 0x1b0 * PG, 3), 1);
	ok(PMT_STAT(m, cow_copies) == copies + 1 && !(info(mm, h + 0x1b0 * PG).flags & PM_PAGE_THP),
	   "a R/O pin on another page of the folio: the write copies");
	pm_unpin_user_page(pin);

	/*
	 * Decision 7 of docs/linux-differences.md: a folio that mremap spread over two PTE
	 * tables is copied, where Linux reuses it (make oracle, seed 0x3838, sequence 3640).
	 */
	{
		unsigned long a = pmt_map_anon(mm, 3 * HP, RW, true), t, to;

		t = (a + HP - 1) & ~(HP - 1);
		to = t + HP;
		ASSERT_EQ(pmt_poke(mm, t + 0x185 * PG, 60), 1);
		ASSERT_TRUE(info(mm, t).flags & PM_PAGE_THP);
		is_int(pm_mremap(mm, t + 0x16a * PG, 7 * PG, 5 * PG,
				 PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, to), (long)to,
		       "spread: five of its pages moved to the next table");
		c = pmt_fork(mm);
		pm_mm_destroy(c);
		copies = PMT_STAT(m, cow_copies);
		ASSERT_EQ(pmt_poke(mm, t + 0x1b, 21), 1);
		ok(PMT_STAT(m, cow_copies) == copies + 1 && !(info(mm, t).flags & PM_PAGE_THP),
		   "spread: the fork child gone, the write copies (Linux reuses: decision 7)");
		is_int(pmt_peek(mm, t + 0x1b), 21, "spread: ... and reads the write");
		is_int(pmt_peek(mm, t + 0x185 * PG), 60, "spread: the first write is still there");
	}
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "large anon reuse");
	return done_testing();
}
