// SPDX-License-Identifier: MIT
/*
 * test_regress_mremap_dontunmap_locked.c - MREMAP_DONTUNMAP clears VM_LOCKED from the VMA that
 * holds the source after copy_vma merged the new range, not before. A locked source with no
 * anon_vma gives the new VMA its new address as pgoff, so a move into the same mapping (its
 * destination unmapped first by MREMAP_FIXED) merges the pieces back into one VMA, and that
 * whole VMA loses "lo". pinmm cleared the source's lock first, so the new range merged only
 * with the locked piece after it: three VMAs where Linux has one.
 *
 * Found by make oracle (seed 0x4141, sequence 9626, mremap/maps-count). A faulted source keeps
 * its pgoff, merges with nothing, and the new VMA stays locked. Each case's VMAs and VmFlags
 * were read from the 6.18 host's smaps. The whole program runs in each design
 * (PINMM_RANGE_MM=1 for the range design).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define WIN 0x200000000000UL
#define MiB (1UL << 20)
#define FIX (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define MOVE (PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP)

static struct pm_machine *m;
static struct pm_mm *mm;

static unsigned locked(unsigned long addr)
{
	struct pm_map_info mi;

	if (pm_mm_maps(mm, addr, &mi, 1) != 1 || mi.start > addr)
		return ~0u;
	return mi.vmflags & PM_VMF_LOCKED;
}

/* PROT_NONE below, 4 MiB locked above it; its first 8 KiB move 2 MiB up, into itself. */
static void setup(int prot)
{
	ASSERT_EQ(pm_mmap(mm, WIN, 8 * MiB, PM_PROT_NONE, FIX | PM_MAP_NORESERVE, NULL, 0),
		  (long)WIN);
	ASSERT_EQ(pm_mmap(mm, WIN + 4 * MiB, 4 * MiB, prot, FIX | PM_MAP_LOCKED | PM_MAP_POPULATE,
			  NULL, 0),
		  (long)(WIN + 4 * MiB));
	is_int(locked(WIN + 4 * MiB), PM_VMF_LOCKED, "the mapping is locked");
}

static void test_unfaulted(void)
{
	setup(PM_PROT_READ | PM_PROT_EXEC);
	is_int(pm_mremap(mm, WIN + 4 * MiB, 0x2000, 0x2000, MOVE, WIN + 6 * MiB),
	       (long)(WIN + 6 * MiB), "unfaulted: DONTUNMAP into the same mapping");
	is_int(pmt_nr_maps(mm, WIN, WIN + 8 * MiB), 2,
	       "unfaulted: the new range merged back: one VMA above PROT_NONE (Linux)");
	is_int(locked(WIN + 4 * MiB) | locked(WIN + 6 * MiB) | locked(WIN + 7 * MiB), 0,
	       "unfaulted: ... and none of it is locked (Linux)");
	ASSERT_EQ(pm_munmap(mm, WIN, 8 * MiB), 0);
}

static void test_faulted(void)
{
	setup(PM_PROT_READ | PM_PROT_WRITE);
	is_int(pmt_poke(mm, WIN + 4 * MiB, 7), 1, "faulted: the source written (an anon_vma)");
	is_int(pm_mremap(mm, WIN + 4 * MiB, 0x2000, 0x2000, MOVE, WIN + 6 * MiB),
	       (long)(WIN + 6 * MiB), "faulted: DONTUNMAP into the same mapping");
	is_int(pmt_nr_maps(mm, WIN, WIN + 8 * MiB), 4,
	       "faulted: source, new range and the rest apart (Linux)");
	is_int(locked(WIN + 4 * MiB), 0, "faulted: the source is unlocked");
	ok(locked(WIN + 6 * MiB) && locked(WIN + 7 * MiB), "faulted: the rest stays locked");
	is_int(pmt_peek(mm, WIN + 6 * MiB), 7, "faulted: the page moved");
	is_int(pmt_peek(mm, WIN + 4 * MiB), 0, "faulted: the source reads empty");
	ASSERT_EQ(pm_munmap(mm, WIN, 8 * MiB), 0);
}

int main(void)
{
	size_t free0 = pmt_setup(&m, &mm, 64, 0);

	plan_no_plan();
	test_unfaulted();
	test_faulted();
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pmt_teardown(&m, &mm, free0, "mremap dontunmap locked");
	return done_testing();
}
