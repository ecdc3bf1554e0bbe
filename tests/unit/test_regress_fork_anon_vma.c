// SPDX-License-Identifier: MIT
/*
 * test_regress_fork_anon_vma.c - issue 29, found by make oracle: fork copied the page tables
 * of every private VMA, and fork children merged VMAs that Linux keeps apart.
 *
 * Linux 6.18's copy_page_range() copies a VMA's tables only when vma_needs_copy() says so:
 * for pinmm's VMAs, when the VMA has an anon_vma - it held an anonymous page at some point
 * (do_anonymous_page's write path, wp_page_copy, do_cow_fault, do_huge_pmd_anonymous_page
 * even for the huge zero page, hugetlb_no_page/hugetlb_wp of a private mapping) or inherited
 * one at fork. A VMA that only ever mapped the 4 KiB zero page or page-cache pages read-only
 * is duplicated empty: the child faults them in again. So the child's pagemap shows nothing
 * there, and the parent's page-cache page keeps a mapcount of 1.
 *
 * Linux's is_mergeable_anon_vma() does not merge a fork child's VMA whose anon_vma came from
 * fork (its anon_vma_chain is not singular) with a neighbour without one, nor two VMAs with
 * different anon_vmas; the parent, whose chains are singular, merges the same pair.
 * Each expectation was checked against the 6.18 host by make oracle.
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
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

static const struct {
	unsigned flags;
	const char *name;
} designs[] = { { PM_MACHINE_LINUX_MM, "linux" }, { PM_MACHINE_RANGE_MM, "range" } };

static struct pm_pagemap_one {
	unsigned flags, mapcount;
} page(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi = { 0 };
	struct pm_pagemap_one r = { ~0u, ~0u };

	if (pm_pagemap(mm, addr, 1, &pi) == 1) {
		r.flags = pi.flags;
		r.mapcount = pi.mapcount;
	}
	return r;
}

static void one_design(unsigned flags, const char *dn)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .nr_hugepages = 4, .flags = flags };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm, *child;
	struct pm_shmem *f, *hf;
	long z, w, s, h, t, a, b;

	ASSERT_TRUE(m != NULL);
	mm = pm_mm_create(m);
	f = pm_shmem_create(m, 64 * PG, 0);
	hf = pm_shmem_create_hugetlb(m, 2 * HP);
	ASSERT_TRUE(mm && f && hf);

	/* read-only faults: the zero page, a private shmem mapping's cache page, a private
	 * hugetlb mapping's cache page; a written anonymous page; a THP read (huge zero) */
	z = pm_mmap(mm, 0, 4 * PG, PM_PROT_READ, ANON, NULL, 0); /* no merge with w */
	w = pm_mmap(mm, 0, 4 * PG, RW, ANON, NULL, 0);
	s = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_PRIVATE, f, 0);
	h = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, hf, 0);
	t = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_PRIVATE, hf, 0);
	ASSERT_TRUE(z > 0 && w > 0 && s > 0 && h > 0 && t > 0);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)h, 'h'), 1); /* the object's page, via a shared map */
	ASSERT_EQ(pmt_poke(mm, (unsigned long)s + PG, 'c'), 1); /* private: COW copy in page 1 */
	ASSERT_EQ(pm_munmap(mm, (unsigned long)s, 4 * PG), 0);
	s = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_PRIVATE, f, 0); /* a fresh VMA: no anon_vma */
	ASSERT_TRUE(s > 0);
	is_int(pmt_peek(mm, (unsigned long)z), 0, "%s: zero page read", dn);
	is_int(pmt_poke(mm, (unsigned long)w, 'w'), 1, "%s: anonymous page written", dn);
	is_int(pmt_peek(mm, (unsigned long)s), 0, "%s: private shmem: cache page read", dn);
	is_int(pmt_peek(mm, (unsigned long)t), 'h', "%s: private hugetlb: cache page read", dn);

	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	is_int(page(child, (unsigned long)z).flags, 0,
	       "%s: the child has no zero-page PTE (VMA without anon_vma: not copied)", dn);
	ok(page(mm, (unsigned long)z).flags & PM_PAGE_ZERO, "%s: ... the parent keeps its", dn);
	is_int(page(child, (unsigned long)s).flags, 0,
	       "%s: the child has no PTE for a private mapping's cache page", dn);
	is_int(page(mm, (unsigned long)s).mapcount, 1, "%s: ... its mapcount stays 1", dn);
	is_int(page(child, (unsigned long)t).flags, 0,
	       "%s: the child has no PMD for a private hugetlb mapping's cache page", dn);
	ok(page(child, (unsigned long)w).flags & PM_PAGE_ANON,
	   "%s: an anonymous page is copied (the VMA has an anon_vma)", dn);
	is_int(page(mm, (unsigned long)w).mapcount, 2, "%s: ... and shared by both", dn);
	/* what the child sees is the same either way */
	is_int(pmt_peek(child, (unsigned long)z), 0, "%s: the child refaults the zero page", dn);
	is_int(pmt_peek(child, (unsigned long)s), 0, "%s: ... and the cache page", dn);
	is_int(pmt_peek(child, (unsigned long)t), 'h', "%s: ... and the hugetlb cache page", dn);
	is_int(pmt_peek(child, (unsigned long)w), 'w', "%s: ... and reads the copied page", dn);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", dn);
	pm_mm_destroy(child);

	/* A write fault past the end of the object SIGBUSes, but do_cow_fault prepared the
	 * anon_vma first: once the object grows, a read-only cache page there is copied. */
	{
		struct pm_shmem *g = pm_shmem_create(m, 4 * PG, 0);
		long p = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_PRIVATE, g, 4 * PG);

		ASSERT_TRUE(g && p > 0);
		is_int(pmt_poke(mm, (unsigned long)p, 'x'), -EFAULT, "%s: write past the end", dn);
		ASSERT_EQ(pm_shmem_truncate(g, 8 * PG), 0);
		is_int(pmt_peek(mm, (unsigned long)p), 0, "%s: ... read once it grew", dn);
		child = pm_mm_fork(mm);
		ASSERT_TRUE(child != NULL);
		ok(page(child, (unsigned long)p).flags & PM_PAGE_PRESENT,
		   "%s: ... the failed write fault gave the VMA an anon_vma: copied", dn);
		is_int(page(mm, (unsigned long)p).mapcount, 2, "%s: ... mapcount 2", dn);
		pm_mm_destroy(child);
		ASSERT_EQ(pm_munmap(mm, (unsigned long)p, 4 * PG), 0);
		pm_shmem_put(g);
	}

	/* A THP-eligible VMA read once (the huge zero page) has an anon_vma: copied. */
	a = pm_mmap(mm, 0, 4 * HP, RW, ANON, NULL, 0);
	ASSERT_TRUE(a > 0);
	{
		unsigned long hz = ((unsigned long)a + HP - 1) & ~(HP - 1);

		ASSERT_EQ(pm_madvise(mm, hz, HP, PM_MADV_HUGEPAGE), 0);
		is_int(pmt_peek(mm, hz), 0, "%s: THP read fault", dn);
		child = pm_mm_fork(mm);
		ASSERT_TRUE(child != NULL);
		is_int(page(child, hz).flags, page(mm, hz).flags,
		       "%s: the child's huge zero leaf is copied (do_huge_pmd_anonymous_page "
		       "prepares the anon_vma first)", dn);
		pm_mm_destroy(child);
	}
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 4 * HP), 0);

	/* Merging. Two neighbours, one written (anon_vma), one read only (none): the parent
	 * merges them once their flags agree; a fork child keeps them apart. */
	a = pm_mmap(mm, 0, 8 * PG, RW, ANON, NULL, 0);
	ASSERT_TRUE(a > 0);
	b = a + 4 * (long)PG;
	ASSERT_EQ(pm_mprotect(mm, (unsigned long)b, 4 * PG, PM_PROT_READ), 0);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)a, 'a'), 1);
	is_int(pmt_peek(mm, (unsigned long)b), 0, "%s: the read-only half: zero page", dn);
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	is_int(pmt_nr_maps(child, (unsigned long)a, (unsigned long)a + 8 * PG), 2,
	       "%s: the child has both VMAs", dn);
	is_int(pm_mprotect(child, (unsigned long)b, 4 * PG, RW), 0, "%s: child mprotect", dn);
	is_int(pmt_nr_maps(child, (unsigned long)a, (unsigned long)a + 8 * PG), 2,
	       "%s: ... the child keeps them apart (its anon_vma came from fork)", dn);
	is_int(pm_mprotect(mm, (unsigned long)b, 4 * PG, RW), 0, "%s: parent mprotect", dn);
	is_int(pmt_nr_maps(mm, (unsigned long)a, (unsigned long)a + 8 * PG), 1,
	       "%s: ... the parent merges them", dn);
	is_int(pmt_peek(child, (unsigned long)a), 'a', "%s: the child still reads its copy", dn);
	pm_mm_destroy(child);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 8 * PG), 0);

	/* One anon_vma split in two by mprotect: the parent merges the halves back; a fork
	 * child gave each half its own anon_vma (anon_vma_fork), so it does not. */
	a = pm_mmap(mm, 0, 8 * PG, RW, ANON, NULL, 0);
	ASSERT_TRUE(a > 0);
	b = a + 4 * (long)PG;
	ASSERT_EQ(pmt_poke(mm, (unsigned long)a, 'a'), 1);
	ASSERT_EQ(pm_mprotect(mm, (unsigned long)b, 4 * PG, PM_PROT_READ), 0);
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	is_int(pm_mprotect(child, (unsigned long)b, 4 * PG, RW), 0, "%s: child mprotect", dn);
	is_int(pmt_nr_maps(child, (unsigned long)a, (unsigned long)a + 8 * PG), 2,
	       "%s: ... two anon_vmas from fork: apart", dn);
	is_int(pm_mprotect(mm, (unsigned long)b, 4 * PG, RW), 0, "%s: parent mprotect", dn);
	is_int(pmt_nr_maps(mm, (unsigned long)a, (unsigned long)a + 8 * PG), 1,
	       "%s: ... one anon_vma in the parent: merged", dn);
	pm_mm_destroy(child);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 8 * PG), 0);

	/* Anonymous VMAs merge only where their pgoffs meet (where each was first mapped): a
	 * moved VMA with an anon_vma keeps its pgoff and stays apart from a new neighbour; one
	 * without takes the new address as its pgoff and merges (copy_vma). */
	a = pm_mmap(mm, 0, 64 * PG, RW, ANON, NULL, 0);
	ASSERT_TRUE(a > 0);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 64 * PG), 0);
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a, 16 * PG, RW, ANON | PM_MAP_FIXED, NULL, 0), a);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)a, 'a'), 1);
	is_int(pm_mremap(mm, (unsigned long)a + 12 * PG, 4 * PG, 4 * PG,
			 PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, (unsigned long)a + 32 * PG),
	       a + 32 * (long)PG, "%s: a faulted VMA's tail moved", dn);
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a + 36 * PG, 4 * PG, RW, ANON | PM_MAP_FIXED, NULL,
			  0), a + 36 * (long)PG);
	is_int(pmt_nr_maps(mm, (unsigned long)a + 32 * PG, (unsigned long)a + 40 * PG), 2,
	       "%s: ... its pgoff stayed: no merge with a new neighbour", dn);
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a + 48 * PG, 4 * PG, RW, ANON | PM_MAP_FIXED, NULL,
			  0), a + 48 * (long)PG);
	is_int(pm_mremap(mm, (unsigned long)a + 48 * PG, 4 * PG, 4 * PG,
			 PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, (unsigned long)a + 40 * PG),
	       a + 40 * (long)PG, "%s: an unfaulted VMA moved next to it", dn);
	is_int(pmt_nr_maps(mm, (unsigned long)a + 36 * PG, (unsigned long)a + 44 * PG), 1,
	       "%s: ... took the new address as its pgoff: merged", dn);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 64 * PG), 0);

	/* MREMAP_DONTUNMAP of the middle of a VMA leaves the source VMA whole (Linux splits it
	 * only to unmap); the part that moved reads zero there. */
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a, 8 * PG, RW, ANON | PM_MAP_FIXED, NULL, 0), a);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)a + 2 * PG, 'd'), 1);
	is_int(pm_mremap(mm, (unsigned long)a + 2 * PG, 2 * PG, 2 * PG,
			 PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP,
			 (unsigned long)a + 32 * PG), a + 32 * (long)PG, "%s: DONTUNMAP of the middle",
	       dn);
	is_int(pmt_nr_maps(mm, (unsigned long)a, (unsigned long)a + 8 * PG), 1,
	       "%s: ... the source stays one VMA", dn);
	ok(pmt_peek(mm, (unsigned long)a + 32 * PG + 0) == 'd' &&
		   pmt_peek(mm, (unsigned long)a + 2 * PG) == 0,
	   "%s: ... the page moved, the source reads zero", dn);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 64 * PG), 0);

	/* mprotect of a VMA's head that its neighbour takes (the boundary moves): the
	 * neighbour takes the anon_vma with the pages (dup_anon_vma), so fork copies them. */
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a, 8 * PG, PM_PROT_READ, ANON | PM_MAP_FIXED, NULL,
			  0), a);
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a + 8 * PG, 8 * PG, RW, ANON | PM_MAP_FIXED, NULL,
			  0), a + 8 * (long)PG);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)a + 9 * PG, 's'), 1);
	ASSERT_EQ(pm_mprotect(mm, (unsigned long)a + 8 * PG, 4 * PG, PM_PROT_READ), 0);
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child != NULL);
	ok(page(child, (unsigned long)a + 9 * PG).flags & PM_PAGE_PRESENT,
	   "%s: a page that changed VMA by mprotect is copied at fork", dn);
	pm_mm_destroy(child);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 64 * PG), 0);

	/* A locked PROT_NONE mapping grown by mremap is not populated (populate skips
	 * PROT_NONE VMAs, __mm_populate). */
	ASSERT_EQ(pm_mmap(mm, (unsigned long)a, 4 * PG, PM_PROT_NONE,
			  ANON | PM_MAP_FIXED | PM_MAP_LOCKED, NULL, 0), a);
	is_int(pm_mremap(mm, (unsigned long)a, 4 * PG, 8 * PG, PM_MREMAP_MAYMOVE, 0), a,
	       "%s: locked PROT_NONE grown in place", dn);
	is_int(page(mm, (unsigned long)a + 5 * PG).flags, 0,
	       "%s: ... its new part is not populated", dn);
	ASSERT_EQ(pm_munmap(mm, (unsigned long)a, 64 * PG), 0);

	ASSERT_EQ(pm_munmap(mm, (unsigned long)z, 4 * PG), 0);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pm_shmem_put(hf);
	pm_rcu_barrier();
	pm_machine_destroy(m);
}

int main(void)
{
	plan_no_plan();
	for (unsigned i = 0; i < 2; i++)
		one_design(designs[i].flags, designs[i].name);
	return done_testing();
}
