// SPDX-License-Identifier: MIT
/*
 * test_regress_vm_account.c - VM_ACCOUNT ("ac" in smaps' VmFlags), which keeps VMAs apart in
 * Linux where pinmm merged them. Linux charges a private writable mapping that is not
 * NORESERVE (accountable_mapping) and keeps the charge when it stops being writable - unless
 * it is anonymous and has no anon_vma yet, which mprotect uncharges (mprotect_fixup); a
 * private mapping made writable is charged then. pinmm commits nothing, but merging compares
 * every flag, so a VMA that kept its charge does not merge with one that never had it.
 *
 * Found by make oracle (seed 0x3737, maps-count(linux-kept-apart), Linux's design and the
 * range design alike). Each case's VmFlags were read from the 6.18 host's smaps. In both
 * designs.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define MiB (1UL << 20)
#define WIN 0x200000000000UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RX (PM_PROT_READ | PM_PROT_EXEC)
#define FIX PM_MAP_FIXED_NOREPLACE
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | FIX)
#define AC PM_VMF_ACCOUNT

static const char *dn;

static unsigned vmf(struct pm_mm *mm, unsigned long addr)
{
	struct pm_map_info mi;

	if (pm_mm_maps(mm, addr, &mi, 1) != 1 || mi.start > addr)
		return ~0u;
	return mi.vmflags & (PM_VMF_ACCOUNT | PM_VMF_NORESERVE);
}

/* Where each mapping gets ac, and which mprotect keeps it (the host's smaps). */
static void test_flags(struct pm_machine *m, struct pm_mm *mm)
{
	struct pm_shmem *f = pm_shmem_create(m, MiB, 0);

	ASSERT_TRUE(f != NULL);
	ASSERT_EQ(pm_mmap(mm, WIN, MiB, RW, ANON, NULL, 0), (long)WIN);
	is_int(vmf(mm, WIN), AC, "%s: anonymous RW: ac", dn);
	ASSERT_EQ(pm_mmap(mm, WIN + 2 * MiB, MiB, RW, ANON | PM_MAP_NORESERVE, NULL, 0),
		  (long)(WIN + 2 * MiB));
	is_int(vmf(mm, WIN + 2 * MiB), PM_VMF_NORESERVE, "%s: ... NORESERVE: nr, not ac", dn);
	ASSERT_EQ(pm_mmap(mm, WIN + 4 * MiB, MiB, PM_PROT_NONE, ANON, NULL, 0),
		  (long)(WIN + 4 * MiB));
	is_int(vmf(mm, WIN + 4 * MiB), 0, "%s: ... PROT_NONE: none", dn);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * MiB, MiB, RW), 0);
	is_int(vmf(mm, WIN + 4 * MiB), AC, "%s: ... made writable: ac", dn);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * MiB, MiB, PM_PROT_READ), 0);
	is_int(vmf(mm, WIN + 4 * MiB), 0, "%s: ... read-only again, never faulted: uncharged", dn);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * MiB, MiB, RW), 0);
	ASSERT_EQ(pmt_poke(mm, WIN + 4 * MiB, 1), 1);
	ASSERT_EQ(pm_mprotect(mm, WIN + 4 * MiB, MiB, PM_PROT_READ), 0);
	is_int(vmf(mm, WIN + 4 * MiB), AC, "%s: ... read-only after a write fault: still ac", dn);
	ASSERT_EQ(pm_mmap(mm, WIN + 6 * MiB, MiB, PM_PROT_NONE, ANON | PM_MAP_NORESERVE, NULL, 0),
		  (long)(WIN + 6 * MiB));
	ASSERT_EQ(pm_mprotect(mm, WIN + 6 * MiB, MiB, RW), 0);
	is_int(vmf(mm, WIN + 6 * MiB), PM_VMF_NORESERVE, "%s: NORESERVE made writable: nr", dn);
	ASSERT_EQ(pm_mmap(mm, WIN + 8 * MiB, MiB, RW, PM_MAP_PRIVATE | FIX, f, 0),
		  (long)(WIN + 8 * MiB));
	ASSERT_EQ(pm_mprotect(mm, WIN + 8 * MiB, MiB, PM_PROT_READ), 0);
	is_int(vmf(mm, WIN + 8 * MiB), AC, "%s: a private object mapping keeps ac read-only", dn);
	ASSERT_EQ(pm_mmap(mm, WIN + 10 * MiB, MiB, RW, PM_MAP_SHARED | FIX, f, 0),
		  (long)(WIN + 10 * MiB));
	is_int(vmf(mm, WIN + 10 * MiB), 0, "%s: a shared one has none", dn);
	ASSERT_EQ(pm_munmap(mm, WIN, 12 * MiB), 0);
	pm_shmem_put(f);
}

/*
 * A 2 MiB RW mapping, its middle made read-only before any fault (uncharged), its first page
 * pinned (an anon_vma), then all of it PROT_NONE: the first piece keeps ac, the other two
 * lose it and merge - two VMAs, where pinmm made one (seed 0x3737, sequence 201).
 */
static void test_kept_apart_mprotect(struct pm_mm *mm)
{
	const unsigned long a = WIN + 0x600000;
	struct pm_page *pg;

	ASSERT_EQ(pm_mmap(mm, a, 2 * MiB, RW, ANON, NULL, 0), (long)a);
	ASSERT_EQ(pm_mprotect(mm, a + 0xb7000, 0xe000, PM_PROT_READ), 0);
	is_int(pmt_nr_maps(mm, a, a + 2 * MiB), 3, "%s: the middle read-only: three VMAs", dn);
	is_int(pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pg), 1,
	       "%s: the first page pinned", dn);
	ASSERT_EQ(pm_mprotect(mm, a, 2 * MiB, PM_PROT_NONE), 0);
	is_int(pmt_nr_maps(mm, a, a + 2 * MiB), 2,
	       "%s: all PROT_NONE: the charged first piece apart, the other two merged (Linux)",
	       dn);
	ok(vmf(mm, a) == AC && vmf(mm, a + 0xb7000) == 0, "%s: ... ac on the first only", dn);
	pm_unpin_user_page(pg);
	ASSERT_EQ(pm_munmap(mm, a, 2 * MiB), 0);
}

/*
 * A written RW mapping made R|X at its tail keeps ac; a new R|X mapping after it has none,
 * and does not merge with it (seed 0x3737, sequence 2).
 */
static void test_kept_apart_mmap(struct pm_mm *mm)
{
	const unsigned long a = WIN + 0x5fd000;

	ASSERT_EQ(pm_mmap(mm, a, 0x1ff000, RW, ANON, NULL, 0), (long)a);
	ASSERT_EQ(pmt_poke(mm, a + 0x3018, 1), 1);
	ASSERT_EQ(pm_mprotect(mm, a + 0xa6000, 0x159000, RX), 0);
	ASSERT_EQ(pm_mmap(mm, a + 0x1ff000, 0x26000, RX, ANON, NULL, 0), (long)(a + 0x1ff000));
	is_int(pmt_nr_maps(mm, a, a + 0x225000), 3,
	       "%s: an R|X mapping beside a charged R|X one stays apart (Linux)", dn);
	ASSERT_EQ(pm_munmap(mm, a, 0x225000), 0);
}

/*
 * A written WIPEONFORK mapping made read-only keeps ac; the fork child's copy has no
 * anon_vma, and an mprotect that changes nothing leaves its ac alone (mprotect_fixup returns
 * before it looks at the charge), where pinmm uncharged it (seed 0x4141, sequence 6337).
 */
static void test_same_prot_keeps_account(struct pm_mm *mm)
{
	const unsigned long a = WIN + 0x400000;
	struct pm_mm *child;

	ASSERT_EQ(pm_mmap(mm, a, 4 * PG, RW, ANON, NULL, 0), (long)a);
	ASSERT_EQ(pm_madvise(mm, a, 4 * PG, PM_MADV_WIPEONFORK), 0);
	ASSERT_EQ(pmt_poke(mm, a, 1), 1);
	ASSERT_EQ(pm_mprotect(mm, a, 4 * PG, PM_PROT_READ), 0);
	is_int(vmf(mm, a), AC, "%s: written WIPEONFORK made read-only: ac", dn);
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	is_int(vmf(child, a), AC, "%s: ... the child's wiped copy: ac", dn);
	ASSERT_EQ(pm_mprotect(child, a, 4 * PG, PM_PROT_READ), 0);
	is_int(vmf(child, a), AC, "%s: ... read-only again in the child: still ac (Linux)", dn);
	ASSERT_EQ(pm_mprotect(child, a, 4 * PG, PM_PROT_NONE), 0);
	is_int(vmf(child, a), 0, "%s: ... PROT_NONE, no anon_vma: uncharged", dn);
	pm_mm_destroy(child);
	ASSERT_EQ(pm_munmap(mm, a, 4 * PG), 0);
}

int main(void)
{
	static const struct {
		unsigned flags;
		const char *name;
	} designs[] = { { PM_MACHINE_LINUX_MM, "linux" }, { PM_MACHINE_RANGE_MM, "range" } };

	plan_no_plan();
	for (unsigned i = 0; i < 2; i++) {
		struct pm_config cfg = { .mem_bytes = 64UL << 20, .flags = designs[i].flags };
		struct pm_machine *m = pm_machine_create(&cfg);
		size_t free0;
		struct pm_mm *mm;

		ASSERT_TRUE(m != NULL);
		dn = designs[i].name;
		free0 = pm_machine_free_pages(m);
		mm = pm_mm_create(m);
		ASSERT_TRUE(mm != NULL);
		test_flags(m, mm);
		test_kept_apart_mprotect(mm);
		test_kept_apart_mmap(mm);
		test_same_prot_keeps_account(mm);
		is_int(pm_machine_check(m), 0, "%s: pm_machine_check", dn);
		pm_mm_destroy(mm);
		pmt_end(m, free0, &pmt_end_returned, dn);
	}
	return done_testing();
}
