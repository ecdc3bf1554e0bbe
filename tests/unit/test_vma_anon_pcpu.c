// SPDX-License-Identifier: MIT
/*
 * test_vma_anon_pcpu.c - a contended VMA's anon_vma (src/mm/vma.c, pm__vma_anon_vma). Once a
 * VMA has per-CPU reader counts, its first anonymous page marks the fault's own slot instead
 * of the VMA's shared word, and the id is made when fork, split, merge or mremap first asks.
 * What Linux shows must not change: fork copies the VMA's pages (vma_needs_copy), it does not
 * merge with a neighbour that has another anon_vma, it merges with one that has none, split
 * halves keep one anon_vma, and mremap DONTUNMAP of all of it takes it away.
 *
 * The VMA is made contended by read faults (the zero page: no anon_vma) while another thread
 * holds its read lock, so that no write fault happens before it has per-CPU counts.
 */

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"
#include "lib/vma_hold.h"

#define PG 4096UL
#define NPG 64
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define FIX (PM_MAP_FIXED | PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define A 0x200000000UL

/* Map [A, A + NPG pages) and give its VMA per-CPU reader counts with read faults only. */
static struct pm_vma *contended_vma(struct pm_mm *mm)
{
	struct pmt_vma_holder h;
	struct pm_vma *vma;

	ASSERT_EQ(pm_mmap(mm, A, NPG * PG, RW, FIX, NULL, 0), (long)A);
	vma = pm__find_vma(mm, A);
	ASSERT_TRUE(vma);
	pmt_vma_hold(&h, vma);
	for (unsigned long i = 0; i < 200; i++)
		ASSERT_EQ(pm_fault(mm, A + (i % NPG) * PG, 0), 0);
	ASSERT_TRUE(pmt_vma_release(&h));
	return vma;
}

static void one_design(unsigned flags, const char *name)
{
	struct pm_config cfg = { .mem_bytes = 32UL << 20, .flags = flags };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm, *child;
	struct pm_vma *vma;
	unsigned char b = 0;

	ASSERT_TRUE(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	vma = contended_vma(mm);
	ok(atomic_load_relaxed(&vma->xpcpu) && !atomic_load_relaxed(&vma->xanon_vma),
	   "%s: a VMA with per-CPU counts and no anon_vma (read faults only)", name);
	ASSERT_EQ(pmt_poke(mm, A + 5 * PG, 0x5a), 1);
	ok(!atomic_load_relaxed(&vma->xanon_vma),
	   "%s: its first write fault leaves the shared word alone", name);

	/* Fork is the first to ask: it copies the page, and the child reads it. */
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child);
	ok(pm_access(child, A + 5 * PG, &b, 1, 0) == 1 && b == 0x5a,
	   "%s: fork copied the page of a VMA marked per CPU", name);
	pm_mm_destroy(child);
	ok(pm__vma_anon_vma(vma) != 0, "%s: it has an anon_vma", name);
	is_int(pm__vma_anon_vma(vma), atomic_load_relaxed(&vma->xanon_vma),
	       "%s: made once, the same id every time", name);

	/* A new neighbour without an anon_vma merges with it, as in Linux. */
	ASSERT_EQ(pm_mmap(mm, A + NPG * PG, PG, RW, FIX, NULL, 0), (long)(A + NPG * PG));
	is_int(pmt_nr_maps(mm, A, A + (NPG + 1) * PG), 1, "%s: merges with a neighbour without one",
	       name);
	ASSERT_EQ(pm_munmap(mm, A + NPG * PG, PG), 0);

	pm_mm_destroy(mm);

	/* A VMA faulted apart, then moved next to it: two anon_vmas, which never merge. */
	mm = pm_mm_create(m);
	vma = contended_vma(mm);
	ASSERT_EQ(pmt_poke(mm, A, 1), 1);
	ASSERT_EQ(pm_mmap(mm, A + 4 * NPG * PG, PG, RW, FIX, NULL, 0), (long)(A + 4 * NPG * PG));
	ASSERT_EQ(pmt_poke(mm, A + 4 * NPG * PG, 2), 1);
	ASSERT_EQ(pm_mremap(mm, A + 4 * NPG * PG, PG, PG, PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED,
			    A + NPG * PG), (long)(A + NPG * PG));
	is_int(pmt_nr_maps(mm, A, A + (NPG + 1) * PG), 2,
	       "%s: a neighbour with an anon_vma of its own stays apart", name);
	ASSERT_EQ(pm_munmap(mm, A + NPG * PG, PG), 0);

	/* A split keeps one anon_vma in both halves, so mprotect back merges them again. */
	ASSERT_EQ(pm_mprotect(mm, A, 8 * PG, PM_PROT_READ), 0);
	is_int(pmt_nr_maps(mm, A, A + NPG * PG), 2, "%s: mprotect splits", name);
	ASSERT_EQ(pm_mprotect(mm, A, 8 * PG, RW), 0);
	is_int(pmt_nr_maps(mm, A, A + NPG * PG), 1, "%s: and the halves merge back", name);

	/* mremap DONTUNMAP of the whole VMA takes its anon_vma away, marks included. */
	vma = pm__find_vma(mm, A);
	ASSERT_TRUE(vma);
	ASSERT_EQ(pm_mremap(mm, A, NPG * PG, NPG * PG,
			    PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP,
			    A + 2 * NPG * PG), (long)(A + 2 * NPG * PG));
	vma = pm__find_vma(mm, A);
	ok(vma && vma->start == A && !pm__vma_anon_vma(vma),
	   "%s: the source of a whole-VMA DONTUNMAP move has no anon_vma", name);
	pm_mm_destroy(mm);

	/*
	 * The order of first faults, the contended VMA's stamped in its slot: R|W|X VMAs P below
	 * and N above it. Faulted after both, it reuses N's anon_vma (the VMA after first), and
	 * made R|W all of it is two VMAs; faulted before both, P and N reuse its own: one VMA
	 * (the 6.18 host's /proc/self/maps).
	 */
	for (int first = 0; first < 2; first++) {
		mm = pm_mm_create(m);
		vma = contended_vma(mm);
		ASSERT_EQ(pm_mmap(mm, A - 4 * PG, 4 * PG, RW | PM_PROT_EXEC, FIX, NULL, 0),
			  (long)(A - 4 * PG));
		ASSERT_EQ(pm_mmap(mm, A + NPG * PG, 4 * PG, RW | PM_PROT_EXEC, FIX, NULL, 0),
			  (long)(A + NPG * PG));
		if (first)
			ASSERT_EQ(pmt_poke(mm, A + 3 * PG, 1), 1);
		ASSERT_EQ(pmt_poke(mm, A - PG, 2), 1);
		ASSERT_EQ(pmt_poke(mm, A + NPG * PG, 3), 1);
		if (!first)
			ASSERT_EQ(pmt_poke(mm, A + 3 * PG, 1), 1);
		ok(!atomic_load_relaxed(&vma->xanon_vma), "%s: its first fault %s: stamped per CPU",
		   name, first ? "first" : "last");
		ASSERT_EQ(pm_mprotect(mm, A - 4 * PG, (NPG + 8) * PG, RW), 0);
		is_int(pmt_nr_maps(mm, A - 4 * PG, A + (NPG + 4) * PG), first ? 1 : 2,
		       "%s: ... made R|W: %s (Linux)", name,
		       first ? "the others reused its anon_vma, one VMA" :
			       "it reused the one after it, two VMAs");
		pm_mm_destroy(mm);
	}
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", name);
	pm_machine_destroy(m);
}

int main(void)
{
	plan(30);
	one_design(PM_MACHINE_LINUX_MM, "linux");
	one_design(PM_MACHINE_RANGE_MM, "range");
	return done_testing();
}
