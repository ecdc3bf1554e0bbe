// SPDX-License-Identifier: MIT
/*
 * test_regress_madv_free_split.c - MADV_FREE of part of a THP splits the folio, as Linux 6.18
 * does (madvise_free_huge_pmd() and madvise_free_pte_range() call split_folio()), and the
 * split maps the pages that hold only zeros to the zero page (__folio_split's
 * RMP_USE_SHARED_ZEROPAGE, try_to_map_unused_to_zeropage(), Linux 6.12+). pinmm used to leave
 * such a THP whole.
 *
 * Found by make oracle (seed 9, and seed 0x6b141052): a THP of a PROT_NONE MADV_HUGEPAGE
 * region, one byte written through FOLL_FORCE, MADV_FREE of nine pages in its middle; smaps
 * then read Rss 1 kB x 4, AnonHugePages 0 on Linux, and pinmm's 512 pages all THP.
 * A THP this mm shares with a fork child, or a pinned one, cannot be split and stays whole;
 * one the range covers whole is not split either. The whole program runs in each design
 * (PINMM_RANGE_MM=1 for the range design).
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

static struct pm_machine *m;
static struct pm_mm *mm;

static struct pm_map_info vma_at(struct pm_mm *where, unsigned long a)
{
	struct pm_map_info mi;

	ASSERT_EQ(pm_mm_maps(where, a, &mi, 1), 1);
	return mi;
}

/* A THP at a 2 MiB boundary of a new MADV_HUGEPAGE region, @written's pages written. */
static unsigned long thp(int prot, const unsigned *written, int n)
{
	unsigned long a = pmt_map_anon(mm, 2 * HP, RW, true);
	unsigned long h = (a + HP - 1) & ~(HP - 1);

	for (int i = 0; i < n; i++)
		ASSERT_EQ(pmt_poke(mm, h + written[i] * PG + 0x1c, (char)(0x40 + i)), 1);
	ASSERT_EQ(pmt_page_kind(mm, h), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP);
	ASSERT_EQ(vma_at(mm, h).anon_huge_pages, 512);
	if (prot != RW)
		ASSERT_EQ(pm_mprotect(mm, a, 2 * HP, prot), 0);
	return h;
}

/* The oracle's sequence: the THP of a PROT_NONE region, written through FOLL_FORCE. */
static void oracle_seq9(void)
{
	unsigned long a = pmt_map_anon(mm, 2 * HP, PM_PROT_NONE, true);
	unsigned long h = (a + HP - 1) & ~(HP - 1);
	struct pm_page *pg;
	struct pm_map_info mi;

	ASSERT_EQ(pm_get_user_pages(mm, h, 1, PM_FOLL_FORCE | PM_FOLL_WRITE, &pg), 1);
	((unsigned char *)pm_page_address(pg))[0x1c] = 0x8d;
	pm_put_page(pg);
	ASSERT_EQ(pmt_page_kind(mm, h), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP);
	is_int(pm_madvise(mm, h + 0x97 * PG, 9 * PG, PM_MADV_FREE), 0, "MADV_FREE of 9 pages");
	mi = vma_at(mm, a);
	is_int((long)mi.rss_pages, 1, "seq 9: Rss is the one written page (Linux)");
	is_int((long)mi.anon_pages, 1, "seq 9: Anonymous too");
	is_int((long)mi.anon_huge_pages, 0, "seq 9: AnonHugePages 0: the folio is split");
	is_int(pmt_page_kind(mm, h), PM_PAGE_PRESENT | PM_PAGE_ANON, "seq 9: the written page: 4 KiB");
	is_int(pmt_page_kind(mm, h + 0x98 * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "seq 9: a page of the range: the zero page");
	is_int(pmt_page_kind(mm, h + 0x1ff * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "seq 9: one outside it too");
	ASSERT_EQ(pm_get_user_pages(mm, h, 1, PM_FOLL_FORCE, &pg), 1);
	is_int(((unsigned char *)pm_page_address(pg))[0x1c], 0x8d, "seq 9: the write kept");
	pm_put_page(pg);
	ASSERT_EQ(pm_munmap(mm, a, 2 * HP), 0);
}

/* A PMD-mapped THP, a range in its middle; then a write to a zero page copies it. */
static void pmd_mapped(void)
{
	static const unsigned written[] = { 0, 0x20, 0x21, 0x1ff };
	unsigned long h = thp(RW, written, 4);

	is_int(pm_madvise(mm, h + 0x1f * PG, 8 * PG, PM_MADV_FREE), 0, "MADV_FREE of 8 pages");
	is_int((long)vma_at(mm, h).rss_pages, 4, "PMD: four written pages stay in Rss");
	is_int((long)vma_at(mm, h).anon_huge_pages, 0, "PMD: no AnonHugePages");
	is_int(pmt_page_kind(mm, h + 0x20 * PG), PM_PAGE_PRESENT | PM_PAGE_ANON,
	       "PMD: a written page of the range: 4 KiB");
	is_int(pmt_page_kind(mm, h + 0x1f * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "PMD: an unwritten page of the range: the zero page");
	is_int(pmt_page_kind(mm, h + 0x100 * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "PMD: an unwritten page outside it: the zero page");
	is_int(pmt_peek(mm, h + 0x21 * PG + 0x1c), 0x42, "PMD: contents kept");
	is_int(pmt_peek(mm, h + 0x100 * PG + 5), 0, "PMD: a zero page reads 0");
	is_int(pmt_poke(mm, h + 0x100 * PG + 5, 7), 1, "PMD: a write to a zero page");
	is_int(pmt_page_kind(mm, h + 0x100 * PG), PM_PAGE_PRESENT | PM_PAGE_ANON,
	       "PMD: ... gets a page of its own");
	is_int(pmt_peek(mm, h + 0x100 * PG + 5), 7, "PMD: ... that reads the write");
	is_int((long)vma_at(mm, h).rss_pages, 5, "PMD: Rss 5");
	ASSERT_EQ(pm_munmap(mm, h - HP, 3 * HP), 0);
}

/* A PTE-mapped THP (an mprotect split its PMD), and one mapped only in part (munmap). */
static void pte_mapped(void)
{
	static const unsigned written[] = { 3, 0x180 };
	unsigned long h = thp(RW, written, 2);

	ASSERT_EQ(pm_mprotect(mm, h + 0x100 * PG, 0x100 * PG, PM_PROT_READ), 0);
	ASSERT_EQ(pmt_page_kind(mm, h), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP);
	is_int(pm_madvise(mm, h, 0x10 * PG, PM_MADV_FREE), 0, "PTE: MADV_FREE of 16 pages");
	is_int(pmt_page_kind(mm, h + 3 * PG), PM_PAGE_PRESENT | PM_PAGE_ANON, "PTE: the written page");
	is_int(pmt_page_kind(mm, h + 0x1fe * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "PTE: the read-only part's zero pages too");
	is_int(pmt_peek(mm, h + 0x180 * PG + 0x1c), 0x41, "PTE: read-only part's contents kept");
	ASSERT_EQ(pm_munmap(mm, h - HP, 3 * HP), 0);

	h = thp(RW, written, 2);
	ASSERT_EQ(pm_munmap(mm, h + 0x100 * PG, 0x100 * PG), 0);
	ASSERT_EQ(pmt_page_kind(mm, h), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP);
	is_int(pm_madvise(mm, h, 0x100 * PG, PM_MADV_FREE), 0,
	       "part-mapped: MADV_FREE of all it maps");
	is_int((long)vma_at(mm, h).rss_pages, 1, "part-mapped: split, Rss 1");
	is_int(pmt_page_kind(mm, h + 0xff * PG), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "part-mapped: the zero page");
	ASSERT_EQ(pm_munmap(mm, h - HP, 3 * HP), 0);
}

/* What is not split: the whole THP, one shared with a fork child, a pinned one. */
static void not_split(void)
{
	static const unsigned written[] = { 0 };
	unsigned long h = thp(RW, written, 1);
	struct pm_page *pin;
	struct pm_mm *c;

	is_int(pm_madvise(mm, h, HP, PM_MADV_FREE), 0, "whole: MADV_FREE");
	is_int(pmt_page_kind(mm, h + PG), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP,
	       "whole: still the THP");
	c = pmt_fork(mm);
	is_int(pm_madvise(mm, h + PG, PG, PM_MADV_FREE), 0, "shared: MADV_FREE of one page");
	is_int(pmt_page_kind(mm, h + PG), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP,
	       "shared with a child: not split");
	is_int(pmt_page_kind(c, h + PG), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP,
	       "... nor in the child");
	pm_mm_destroy(c);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, h + 2 * PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin),
		  1);
	is_int(pm_madvise(mm, h + PG, PG, PM_MADV_FREE), 0, "pinned: MADV_FREE of one page");
	is_int((long)vma_at(mm, h).anon_huge_pages, 512, "pinned: not split");
	pm_unpin_user_page(pin);
	is_int(pm_madvise(mm, h + PG, PG, PM_MADV_FREE), 0, "unpinned: MADV_FREE again");
	is_int((long)vma_at(mm, h).rss_pages, 1, "unpinned: split now");
	ASSERT_EQ(pm_munmap(mm, h - HP, 3 * HP), 0);
}

/*
 * Shared, the parent's leaf split by its COW: the child's leaf maps a folio whose pages the
 * parent's PTEs map too, and stays, as Linux's folio_maybe_mapped_shared() test leaves it
 * (seed 0x7e57, sequence 10111: pinmm split the child's leaf, then refused the folio).
 */
static void shared_parent_split(void)
{
	static const unsigned written[] = { 0 };
	unsigned long h = thp(RW, written, 1);
	struct pm_mm *c = pmt_fork(mm);

	ASSERT_EQ(pmt_poke(mm, h + 0x71 * PG, 0x3c), 1);
	is_int((long)vma_at(mm, h).anon_huge_pages, 0, "the parent's COW split its leaf");
	is_int(pm_madvise(c, h + 0x1fc * PG, 4 * PG, PM_MADV_FREE), 0,
	       "the child: MADV_FREE of 4 pages");
	is_int((long)vma_at(c, h).anon_huge_pages, 512, "... its leaf stays (Linux)");
	is_int(pmt_page_kind(mm, h + 0x72 * PG), PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP,
	       "... and the parent's PTEs still map the THP");
	pm_mm_destroy(c);
	ASSERT_EQ(pm_munmap(mm, h - HP, 3 * HP), 0);
}

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);

	plan_no_plan();
	oracle_seq9();
	pmd_mapped();
	pte_mapped();
	not_split();
	shared_parent_split();
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "madv free split");
	return done_testing();
}
