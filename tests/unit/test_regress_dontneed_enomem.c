// SPDX-License-Identifier: MIT
/*
 * test_regress_dontneed_enomem.c - MADV_DONTNEED must not report -ENOMEM after it has already
 * dropped data.
 *
 * pinmm/mm.h: "Splitting a VMA or a PMD mapping may need memory: -ENOMEM, with nothing
 * changed." (Linux itself never fails MADV_DONTNEED for a THP: the split uses the page table
 * deposited with the huge page.) src/mm/mmap.c madvise_dontneed() zaps VMA by VMA, and
 * pm__zap_range() splits a partly covered PMD leaf only when it reaches it: if the range covers
 * a small-page VMA and then part of a THP, the small pages are zapped first, the split then
 * fails, and the call returns -ENOMEM with the first VMA's data gone - the caller cannot tell
 * what happened (tests/unit/test_failinject.c treats "a failed DONTNEED dropped data" as a bug
 * for the single-VMA case).
 *
 * Suggested fix: split the leaves at the range's ends (and at each VMA boundary inside it)
 * before zapping anything, as munmap and mprotect do, or deposit a PTE table with each THP so
 * that a split never allocates.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define B 0x10400000UL	   /* a THP */
#define A (B - 16 * PG)	   /* 16 small pages right below it, in a VMA of their own */

int main(void)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20 };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm;
	uint8_t buf[PG], ref[PG];
	unsigned long intact = 0;
	size_t free0;
	long r;

	plan(5);
	ASSERT_TRUE(m);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	ASSERT_EQ(pm_mmap(mm, A, 16 * PG, RW, PRIV, NULL, 0), (long)A);
	ASSERT_EQ(pm_mmap(mm, B, 2UL << 20, RW, PRIV, NULL, 0), (long)B);
	ASSERT_EQ(pm_madvise(mm, B, 2UL << 20, PM_MADV_HUGEPAGE), 0);
	memset(ref, 0xa5, sizeof(ref));
	for (unsigned long i = 0; i < 16; i++)
		ASSERT_EQ(pm_access(mm, A + i * PG, ref, PG, 1), (long)PG);
	ASSERT_EQ(pm_access(mm, B, ref, PG, 1), (long)PG);
	{
		struct pm_page *p;

		ASSERT_EQ(pm_get_user_pages(mm, B, 1, 0, &p), 1);
		is_int(pm_folio_order(pm_page_folio(p)), 9, "B is backed by a THP");
		pm_put_page(p);
	}

	/* The first allocation from now (the PTE table that splitting B's leaf needs) fails. */
	pm_fail_nth(m, 1);
	r = pm_madvise(mm, A, 16 * PG + 8 * PG, PM_MADV_DONTNEED);
	pm_fail_nth(m, 0);
	diag("madvise(DONTNEED) over A and part of B returned %ld", r);
	for (unsigned long i = 0; i < 16; i++)
		if (pm_access(mm, A + i * PG, buf, PG, 0) == (long)PG && !memcmp(buf, ref, PG))
			intact++;
	ok(r == 0 || r == -ENOMEM, "DONTNEED answers 0 or -ENOMEM");
	if (r == -ENOMEM)
		is_int(intact, 16, "a DONTNEED that failed with -ENOMEM dropped nothing");
	else
		is_int(intact, 0, "a DONTNEED that succeeded dropped A");

	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "every frame returned");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
	return done_testing();
}
