// SPDX-License-Identifier: MIT
/*
 * test_regress_stack_grow_fork.c - a VM_GROWSDOWN VMA that a fault grows gets an anon_vma
 * (Linux's expand_downwards calls anon_vma_prepare first), so fork copies its PTEs - the
 * zero page a read fault mapped there too (vma_needs_copy: src_vma->anon_vma). pinmm gave
 * the VMA none for a read, and the child saw nothing mapped.
 *
 * Found by make oracle (seed 0x6b141052, sequence 230, and seed 2's sequence 547 in the
 * range design; fork/child-page-flags(L0x9,P0)): a MAP_GROWSDOWN mapping, a read below it,
 * fork; Linux's child maps the zero page there (PRESENT | ZERO), pinmm's nothing. A read in
 * a VMA that did not grow still leaves no anon_vma, and the child nothing, as Linux's.
 * The whole program runs in each design (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define WIN 0x200000000000UL
#define STACK (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_GROWSDOWN | PM_MAP_FIXED_NOREPLACE)

static struct pm_machine *m;
static struct pm_mm *mm;

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);
	unsigned long s = WIN + 0x65b000;
	struct pm_map_info mi;
	struct pm_mm *c;

	plan_no_plan();
	/* The oracle's sequence. */
	ASSERT_EQ(pm_mmap(mm, s, 0x1a5000, PM_PROT_READ | PM_PROT_EXEC, STACK, NULL, 0), (long)s);
	is_int(pmt_peek(mm, s - 0x18000 + 4), 0, "a read 0x18000 below the stack: grows it");
	ASSERT_EQ(pm_mm_maps(mm, s - 0x18000, &mi, 1), 1);
	is_int((long)(s - mi.start), 0x18000, "... down to the page read");
	is_int(pmt_page_kind(mm, s - 0x18000), PM_PAGE_PRESENT | PM_PAGE_ZERO, "... the zero page");
	c = pmt_fork(mm);
	is_int(pmt_page_kind(c, s - 0x18000), PM_PAGE_PRESENT | PM_PAGE_ZERO,
	       "the fork child has the zero page too (Linux)");
	is_int(pmt_peek(c, s - 0x18000 + 4), 0, "... and reads zero");
	pm_mm_destroy(c);
	ASSERT_EQ(pm_munmap(mm, s - 0x18000, 0x1a5000 + 0x18000), 0);

	/* No growth, no anon_vma: the child gets nothing (fork leaves it to a fault). */
	ASSERT_EQ(pm_mmap(mm, s, 0x10000, PM_PROT_READ, STACK, NULL, 0), (long)s);
	is_int(pmt_peek(mm, s + PG), 0, "a read inside a stack that does not grow");
	c = pmt_fork(mm);
	is_int(pmt_page_kind(c, s + PG), 0, "the child has nothing there (Linux)");
	pm_mm_destroy(c);
	ASSERT_EQ(pm_munmap(mm, s, 0x10000), 0);

	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "stack grow fork");
	return done_testing();
}
