// SPDX-License-Identifier: MIT
/*
 * test_regress_hugetlb_fixed_resv.c - issue 29, divergence 1: a hugetlb MAP_FIXED mapping over
 * a private owner's hugetlb mapping, with the pool short, succeeds in Linux and was -ENOMEM in
 * pinmm.
 *
 * Linux's __mmap_region gathers the old VMAs and calls their vm_ops->close
 * (vms_clean_up_area) before the new mapping's f_op->mmap reserves: hugetlb_vm_op_close gives
 * back the owner's unused reservations of the range first, so the new mapping can reserve
 * them. pinmm reserved before it unmapped, and a pool that the old mapping had promised whole
 * answered -ENOMEM. Now the reservations the old mapping gives back count as free
 * (mm/mmap.c, hugetlb_resv_credit), while a mapping the pool cannot cover even so still
 * fails with the old mapping in place. In both designs; a walk of injected allocation
 * failures checks that a failure after the credit never leaves the pool over-promised
 * (pm_machine_check: reserved <= free).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define HP (2UL << 20)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static const struct {
	unsigned flags;
	const char *name;
} designs[] = { { PM_MACHINE_LINUX_MM, "linux" }, { PM_MACHINE_RANGE_MM, "range" } };

static struct pm_machine *machine(unsigned flags)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .nr_hugepages = 4, .flags = flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

static size_t reserved(struct pm_machine *m)
{
	size_t r = 0;

	pm_hugetlb_reserved(m, &r);
	return r;
}

static void one_design(unsigned flags, const char *dn)
{
	struct pm_machine *m = machine(flags);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 4 * HP);
	long p, s, q;

	/* A private owner of the whole pool, then a shared mapping over half of it */
	p = pm_mmap(mm, 0, 4 * HP, RW, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(p > 0);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)p + 3 * HP, 'p'), 1);
	is_int(reserved(m), 3, "%s: the private owner holds the pool (3 reserved, 1 used)", dn);
	s = pm_mmap(mm, (unsigned long)p, 2 * HP, RW, PM_MAP_SHARED | PM_MAP_FIXED, f, 0);
	is_int(s, p, "%s: MAP_FIXED shared over the owner's unused half: mapped (Linux)", dn);
	is_int(reserved(m), 3, "%s: ... the owner gave 2 back, the object took 2", dn);
	ok(pmt_poke(mm, (unsigned long)p, 's') == 1 && pmt_poke(mm, (unsigned long)p + HP, 't') == 1 &&
		   pmt_poke(mm, (unsigned long)p + 2 * HP, 'u') == 1,
	   "%s: ... every fault of both mappings finds its page", dn);
	is_int(pmt_peek(mm, (unsigned long)p + 3 * HP), 'p', "%s: ... the owner's page stays", dn);
	is_int(pm_machine_check(m), 0, "%s: ... pm_machine_check", dn);
	pm_munmap(mm, (unsigned long)p, 4 * HP);
	pm_shmem_put(f);

	/* Anonymous: MAP_FIXED private over the middle of a private one */
	p = pm_mmap(mm, 0, 4 * HP, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(p > 0);
	s = pm_mmap(mm, (unsigned long)p + HP, 2 * HP, RW,
		    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB | PM_MAP_FIXED, NULL, 0);
	is_int(s, p + (long)HP, "%s: MAP_FIXED anonymous hugetlb over the middle: mapped", dn);
	is_int(reserved(m), 4, "%s: ... 4 reserved", dn);
	for (unsigned i = 0; i < 4; i++)
		ASSERT_EQ(pmt_poke(mm, (unsigned long)p + i * HP, 'a'), 1);
	is_int(reserved(m), 0, "%s: ... every page faulted with its reservation", dn);
	pm_munmap(mm, (unsigned long)p, 4 * HP);

	/*
	 * Still short after the credit: -ENOMEM, the old mapping in place. The owner's faulted
	 * page counts too (Linux 6.9+: its zap gives the reservation back, the close takes it):
	 * a one-page owner, faulted, and three pages promised elsewhere, leave 1 for 2.
	 */
	{
		unsigned long w = 0x200000000000UL;

		ASSERT_EQ(pm_mmap(mm, w, 8 * HP, PM_PROT_NONE, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS |
				  PM_MAP_FIXED | PM_MAP_NORESERVE, NULL, 0), (long)w);
		p = pm_mmap(mm, w, HP, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB |
			    PM_MAP_FIXED, NULL, 0);
		ASSERT_EQ(pmt_poke(mm, w, 'o'), 1);
		q = pm_mmap(mm, w + 4 * HP, 3 * HP, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS |
			    PM_MAP_HUGETLB | PM_MAP_FIXED, NULL, 0);
		ASSERT_TRUE(p == (long)w && q == (long)(w + 4 * HP));
		s = pm_mmap(mm, w, 2 * HP, RW,
			    PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB | PM_MAP_FIXED, NULL, 0);
		is_int(s, -ENOMEM, "%s: a credit of 1 for 2 pages: -ENOMEM", dn);
		ok(pmt_peek(mm, w) == 'o' && reserved(m) == 3,
		   "%s: ... the old mapping and its reservations in place", dn);
		pm_munmap(mm, w, 8 * HP);
	}

	/* Each allocation of the credited mmap failing in turn */
	{
		bool answers = true, checks = true;
		long n;

		for (n = 1; n < 100; n++) {
			unsigned long before = PMT_STAT(m, alloc_failures);

			f = pm_shmem_create_hugetlb(m, 4 * HP);
			p = pm_mmap(mm, 0, 4 * HP, RW, PM_MAP_PRIVATE, f, 0);
			ASSERT_TRUE(p > 0);
			pm_fail_nth(m, n);
			s = pm_mmap(mm, (unsigned long)p, 2 * HP, RW, PM_MAP_SHARED | PM_MAP_FIXED, f,
				    0);
			pm_fail_nth(m, 0);
			if (s != p && s != -ENOMEM)
				answers = false;
			if (pm_machine_check(m))
				checks = false;
			pm_munmap(mm, (unsigned long)p, 4 * HP);
			pm_shmem_put(f);
			if (PMT_STAT(m, alloc_failures) == before)
				break;
		}
		ok(n > 1 && n < 100, "%s: the walk covered %ld allocations", dn, n - 1);
		ok(answers, "%s: ... each answer the mapping or -ENOMEM", dn);
		ok(checks, "%s: ... the pool never over-promised (pm_machine_check)", dn);
	}

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, dn);
}

/*
 * Found by make oracle: a shared MAP_FIXED_NOREPLACE mmap of a hugetlb object over a mapping
 * fails with -EEXIST in both, but pinmm had reserved the object's page first, and an object's
 * shared reservations stay with it: HugePages_Rsvd 1 where Linux, which checks before
 * hugetlbfs reserves, has 0.
 */
static void noreplace(unsigned flags, const char *dn)
{
	struct pm_machine *m = machine(flags);
	size_t free0 = pmt_free_pages(m), resv = 9;
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	unsigned long a = 0x200000000000UL;

	ASSERT_TRUE(mm && f);
	ASSERT_EQ(pm_mmap(mm, a, 4 * HP, PM_PROT_NONE, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS |
			  PM_MAP_FIXED | PM_MAP_NORESERVE, NULL, 0), (long)a);
	is_int(pm_mmap(mm, a + 2 * HP, HP, RW, PM_MAP_SHARED | PM_MAP_FIXED_NOREPLACE, f, 0),
	       -EEXIST, "%s: a shared hugetlb FIXED_NOREPLACE mmap over a mapping: -EEXIST", dn);
	pm_hugetlb_reserved(m, &resv);
	is_int(resv, 0, "%s: ... and it reserved nothing", dn);
	is_int(pm_mmap(mm, a + 2 * HP, HP, RW, PM_MAP_SHARED | PM_MAP_FIXED, f, 0),
	       (long)(a + 2 * HP), "%s: the same with MAP_FIXED", dn);
	pm_hugetlb_reserved(m, &resv);
	is_int(resv, 1, "%s: ... reserves its page", dn);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, dn);
}

int main(void)
{
	plan_no_plan();
	for (unsigned i = 0; i < 2; i++)
		one_design(designs[i].flags, designs[i].name);
	for (unsigned i = 0; i < 2; i++)
		noreplace(designs[i].flags, designs[i].name);
	return done_testing();
}
