// SPDX-License-Identifier: MIT
/*
 * test_regress_mremap_merge_anon.c - mremap's move merges the new VMA before it splits the
 * source (Linux's copy_vma, then unmap_source_vma), so a new range that borders its source
 * VMA joins it whole, and the VMA on its other side too; when that one has an anon_vma and
 * the source has none, what is left of the source keeps that anon_vma - and fork copies the
 * PTEs there, a read's zero page included (vma_needs_copy). pinmm split the source first, so
 * the remnant beyond the moved range had no anon_vma, and the fork child saw nothing mapped.
 *
 * Found by make oracle (seed 0x2929, sequence 2858, fork/child-page-flags(L0x9,P0)). When the
 * VMA on the other side has no anon_vma either, nothing takes one and the child sees nothing,
 * as in Linux. The whole program runs in each design (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define WIN 0x200000000000UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED_NOREPLACE)

static struct pm_machine *m;
static struct pm_mm *mm;

/*
 * A = [WIN, WIN + 4 MiB), S = [WIN + 4 MiB + 64 KiB, WIN + 8 MiB): a read maps the zero page
 * at @zero in S (no anon_vma), A written first if @a_anon. Then [WIN + 0x62e000, + 0x7000)
 * of S moves, growing to 64 KiB, into the gap between them. Return: what a fork child sees
 * at @zero.
 */
static unsigned run(bool a_anon, const char *what)
{
	unsigned long s = WIN + 0x410000, zero = WIN + 0x68d000, kind;
	struct pm_mm *c;

	ASSERT_EQ(pm_mmap(mm, WIN, 0x400000, RW, ANON, NULL, 0), (long)WIN);
	ASSERT_EQ(pm_mmap(mm, s, WIN + 0x800000 - s, RW, ANON, NULL, 0), (long)s);
	if (a_anon)
		is_int(pmt_poke(mm, WIN + 0x105000, 'a'), 1, "%s: A written (an anon_vma)", what);
	is_int(pmt_peek(mm, zero + 7), 0, "%s: a read in S maps the zero page", what);
	is_int(pm_mremap(mm, WIN + 0x62e000, 0x7000, 0x10000,
			 PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, WIN + 0x400000),
	       (long)(WIN + 0x400000), "%s: part of S moves between A and S", what);
	is_int(pmt_nr_maps(mm, WIN, WIN + 0x800000), 2,
	       "%s: A, the moved range and S's head are one VMA, S's tail another", what);
	c = pmt_fork(mm);
	kind = pmt_page_kind(c, zero);
	is_int(pmt_peek(c, zero + 7), 0, "%s: the child reads zero there", what);
	pm_mm_destroy(c);
	ASSERT_EQ(pm_munmap(mm, WIN, 0x800000), 0);
	return kind;
}

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);

	plan_no_plan();
	is_int(run(true, "A has an anon_vma"), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "A has an anon_vma: S's tail took it, the child has the zero page (Linux)");
	is_int(run(false, "A has none"), 0,
	       "A has none: nothing took one, the child has nothing there (Linux)");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "mremap merge anon");
	return done_testing();
}
