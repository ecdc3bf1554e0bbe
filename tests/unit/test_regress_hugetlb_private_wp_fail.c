// SPDX-License-Identifier: MIT
/*
 * test_regress_hugetlb_private_wp_fail.c - a write to a private hugetlb mapping of an object
 * whose page is in the cache, when the copy finds no pool page: Linux maps the cache page
 * read-only first (hugetlb_no_page), then fails the copy (hugetlb_wp: SIGBUS) and leaves that
 * mapping in place. pinmm copied first and, failing, mapped nothing.
 *
 * Found by make oracle (seed 0x3535, sequence 2499, range design,
 * force_write/after-error-child-page-flags(L0x23,P0)): a fork child's FOLL_FORCE write. Here a
 * plain write and a FOLL_FORCE write, each by a fork child (which holds no reservation) with
 * the pool's one free page promised to its parent. In both designs.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define HP (2UL << 20)
#define WIN 0x200000000000UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define FIX PM_MAP_FIXED_NOREPLACE

static void run(unsigned design, const char *dn, bool force)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .nr_hugepages = 2, .flags = design };
	struct pm_machine *m = pm_machine_create(&cfg);
	const unsigned long sh = WIN, pr = WIN + 4 * HP;
	struct pm_shmem *obj;
	struct pm_mm *mm, *c;
	size_t free0, total, free, resv;
	struct pm_page *pg;
	char x = 'c';

	ASSERT_TRUE(m != NULL);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	obj = pm_shmem_create_hugetlb(m, HP);
	ASSERT_TRUE(mm && obj);
	ASSERT_EQ(pm_mmap(mm, sh, HP, RW, PM_MAP_SHARED | FIX, obj, 0), (long)sh);
	ASSERT_EQ(pmt_poke(mm, sh + 5, 's'), 1);	/* the cache page */
	ASSERT_EQ(pm_mmap(mm, pr, HP, RW, PM_MAP_PRIVATE | FIX, obj, 0), (long)pr);
	c = pmt_fork(mm);
	pm_hugetlb_pool(m, &total, &free);
	pm_hugetlb_reserved(m, &resv);
	ok(free == 1 && resv == 1, "%s%s: the free page is the parent's reservation", dn,
	   force ? " force" : "");
	if (force)
		is_int(pm_get_user_pages(c, pr, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, &pg), -EFAULT,
		       "%s force: the child's FOLL_FORCE write finds no page to copy into", dn);
	else
		is_int(pm_access(c, pr + 5, &x, 1, 1), -EFAULT,
		       "%s: the child's write finds no page to copy into", dn);
	ok(pmt_page_kind(c, pr) == PM_PAGE_PRESENT && pmt_pfn_at(c, pr) == pmt_pfn_at(mm, sh),
	   "%s%s: the cache page stays mapped there (Linux)", dn, force ? " force" : "");
	is_int(pmt_peek(c, pr + 5), 's', "%s%s: the child reads the cache page", dn,
	       force ? " force" : "");
	is_int(pmt_poke(mm, pr + 5, 'p'), 1, "%s%s: the parent's write copies, its reservation",
	       dn, force ? " force" : "");
	is_int(pmt_peek(mm, sh + 5), 's', "%s%s: the cache page is untouched", dn,
	       force ? " force" : "");
	is_int(pm_machine_check(m), 0, "%s%s: pm_machine_check", dn, force ? " force" : "");
	pm_mm_destroy(c);
	pm_mm_destroy(mm);
	pm_shmem_put(obj);
	pmt_hend(m, free0, 2, dn);
}

int main(void)
{
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, "linux", false);
	run(PM_MACHINE_LINUX_MM, "linux", true);
	run(PM_MACHINE_RANGE_MM, "range", false);
	run(PM_MACHINE_RANGE_MM, "range", true);
	return done_testing();
}
