// SPDX-License-Identifier: MIT
/*
 * test_regress_check_shmem_partial.c - pm_machine_check() on shmem objects whose size is not a
 * multiple of 4096 (issue 13, defect 2).
 *
 * A shmem object's pages cover its size rounded up to a page (pinmm/shmem.h, as Linux's
 * i_size): a 100-byte object has one page, index 0, and a write to it caches that page. The
 * checker rounded the size down instead, so it saw the page holding the end as lying beyond
 * the size ("shmem page at index 0 beyond size 0") and the healthy machine failed the check
 * with -EUCLEAN. The same after a truncation to 3 pages + 100 bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static void test_sizes(void)
{
	static const size_t sizes[] = { 1, 100, PG - 1, PG + 1, 3 * PG + 100, 7 * PG + PG / 2 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct pm_machine *m = pmt_machine(16, 0);
		size_t free0 = pm_machine_free_pages(m), sz = sizes[i];
		unsigned long npages = (sz + PG - 1) / PG;
		struct pm_shmem *f = pm_shmem_create(m, sz, 0);
		struct pm_mm *mm = pm_mm_create(m);
		long x;

		ASSERT_TRUE(f && mm);
		x = pm_mmap(mm, 0, npages * PG, RW, PM_MAP_SHARED, f, 0);
		ASSERT_TRUE(x > 0);
		/* Every page, the one that holds the end included. */
		is_int(pmt_put_tag(mm, x, npages, 0x52, 0), npages, "size %zu: write all %lu pages",
		       sz, npages);
		is_int(pm_shmem_nr_pages(f), npages, "size %zu: %lu pages cached", sz, npages);
		is_int(pm_machine_check(m), 0, "size %zu: pm_machine_check with the last page in use",
		       sz);
		pm_mm_destroy(mm);
		is_int(pm_machine_check(m), 0, "size %zu: pm_machine_check with only the cache", sz);
		pm_shmem_put(f);
		pmt_end(m, free0, &pmt_end_returned, "partial size");
	}
}

static void test_truncate(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	struct pm_mm *mm = pm_mm_create(m);
	long x;

	ASSERT_TRUE(f && mm);
	x = pm_mmap(mm, 0, 8 * PG, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(x > 0);
	is_int(pmt_put_tag(mm, x, 8, 0x53, 0), 8, "truncate: fill 8 pages");
	is_int(pm_shmem_truncate(f, 3 * PG + 100), 0, "truncate: to 3 pages + 100 bytes");
	is_int(pm_shmem_nr_pages(f), 4, "truncate: the page holding the end stays cached");
	is_int(pm_machine_check(m), 0, "truncate: pm_machine_check after the truncation");
	is_int(pm_shmem_truncate(f, 100), 0, "truncate: to 100 bytes");
	is_int(pm_shmem_nr_pages(f), 1, "truncate: page 0 stays cached");
	is_int(pm_machine_check(m), 0, "truncate: pm_machine_check with one partial page");
	is_int(pm_shmem_truncate(f, 0), 0, "truncate: to zero");
	is_int(pm_machine_check(m), 0, "truncate: pm_machine_check of an empty object");
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "truncate");
}

int main(void)
{
	plan_no_plan();
	test_sizes();
	test_truncate();
	return done_testing();
}
