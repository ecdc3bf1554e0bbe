// SPDX-License-Identifier: MIT
/*
 * test_mmap.c - pm_mmap, pm_munmap, pm_mprotect and pm_madvise: every error of mm.h, fixed
 * mappings replacing others, hints, 2 MiB placement, and VMAs split by munmap and mprotect.
 *
 * Pages are filled with a pattern that depends on their address and a seed, so a page that
 * moved, was lost or was replaced by another is seen. Layout diagrams: one letter per page,
 * '.' for a hole, 'r' for read-only, 'n' for PROT_NONE.
 */
#include <errno.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;

/* White box: the number of VMAs, to see splits and merges. */
static unsigned nr_vmas(void)
{
	return mm_map_count(mm);
}

static long rd(unsigned long addr)
{
	char c;

	return pm_access(mm, addr, &c, 1, 0);
}

static long wr(unsigned long addr)
{
	char c = 'w';

	return pm_access(mm, addr, &c, 1, 1);
}

static long map(unsigned long addr, size_t len, int prot, int flags)
{
	return pm_mmap(mm, addr, len, prot, flags, NULL, 0);
}

static void setup(void)
{
	free0 = pmt_setup(&m, &mm, 64, 0);
}

static void teardown(const char *what)
{
	pmt_teardown(&m, &mm, free0, what);
}

static void test_mmap_errors(void)
{
	const unsigned long fixed = 0x10000000UL;

	setup();
	is_int(map(0, 0, RW, PRIV), -EINVAL, "mmap len 0 -> -EINVAL");
	is_int(map(0, SIZE_MAX, RW, PRIV), -ENOMEM, "mmap len SIZE_MAX -> -ENOMEM (do_mmap)");
	is_int(map(0, SIZE_MAX - PG + 2, RW, PRIV), -ENOMEM,
	       "mmap len that overflows when rounded up -> -ENOMEM");
	is_int(map(0, SIZE_MAX, RW, PRIV | PM_MAP_HUGETLB), -EINVAL,
	       "hugetlb: a len that wraps at 2 MiB is 0 -> -EINVAL (ksys_mmap_pgoff, then do_mmap)");
	/* The type nibble is always checked; other unknown bits are ignored (test_mmap_linux). */
	is_int(map(0, PG, RW, PM_MAP_ANONYMOUS), -EINVAL,
	       "mmap neither SHARED nor PRIVATE -> -EINVAL");
	is_int(map(0, PG, RW, PM_MAP_ANONYMOUS | PM_MAP_SHARED | PM_MAP_PRIVATE), -EINVAL,
	       "mmap both SHARED and PRIVATE (SHARED_VALIDATE) of anonymous memory -> -EINVAL");
	is_int(map(0, PG, RW, PM_MAP_ANONYMOUS | PM_MAP_SHARED_VALIDATE | 0x200), -EINVAL,
	       "... with an unknown flag too: -EINVAL, not -EOPNOTSUPP");
	is_int(map(0, PG, RW, PRIV | 0x04), -EINVAL, "mmap type 0x06 -> -EINVAL");
	is_int(map(0, PG, RW, PM_MAP_ANONYMOUS | 0x08), -EINVAL,
	       "mmap MAP_DROPPABLE (0x08) -> -EINVAL (pinmm has no reclaim to drop pages)");
	is_int(map(0, PG, RW, PM_MAP_ANONYMOUS | 0x0f), -EINVAL, "mmap type 0x0f -> -EINVAL");
	/* Linux flags whose effects pinmm lacks yet: refused rather than ignored. */
	is_int(map(0, PG, RW, PRIV | 0x40), -EINVAL, "mmap MAP_32BIT (0x40) -> -EINVAL (not yet)");
	is_int(map(0, PG, RW, PRIV | 0x80), -EINVAL, "mmap MAP_ABOVE4G (0x80) -> -EINVAL (not yet)");
	{
		long g = map(0, PG, RW, PRIV | 0x100), l = map(0, PG, RW, PRIV | 0x2000);

		ok(g > 0 && l > 0, "mmap MAP_GROWSDOWN (0x100) and MAP_LOCKED (0x2000) of private "
				   "anonymous memory map (test_mmap_flags has their effects)");
		pm_munmap(mm, (unsigned long)g, PG);
		pm_munmap(mm, (unsigned long)l, PG);
	}
	is_int(map(0, PG, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS | 0x100), -EINVAL,
	       "mmap MAP_GROWSDOWN of shared anonymous memory -> -EINVAL (do_mmap)");
	is_int(map(0, PG, RW, PRIV | PM_MAP_HUGETLB | (30 << 26)), -EINVAL,
	       "MAP_HUGETLB|MAP_HUGE_1GB: no such pool -> -EINVAL (hstate_sizelog)");
	is_int(pm_mmap(mm, 0, PG, RW, PRIV, NULL, 100), -EINVAL,
	       "mmap unaligned offset -> -EINVAL");
	is_int(map(0, PG, RW, PM_MAP_PRIVATE), -EBADF, "mmap private without file -> -EBADF");
	is_int(map(0, PG, RW, PM_MAP_SHARED), -EBADF, "mmap shared without file -> -EBADF");
	{
		struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);

		ASSERT_TRUE(f);
		is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED | 0x100, f, 0), -EINVAL,
		       "mmap MAP_GROWSDOWN of an object -> -EINVAL (do_mmap)");
		is_int(pm_mmap(mm, fixed, PG, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED_NOREPLACE, f,
			       0),
		       -EOPNOTSUPP, "SHARED_VALIDATE|FIXED_NOREPLACE (not legacy) -> -EOPNOTSUPP");
		is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED_NOREPLACE, f, 0),
		       -EPERM, "... at address 0: -EPERM, the address first");
		is_int(pm_mmap(mm, 0, PG, RW, 0x0f, f, 0), -EINVAL,
		       "mmap of an object with type 0x0f -> -EINVAL");
		pm_shmem_put(f);
	}
	is_int(map(fixed + 0x100, PG, RW, PRIV | PM_MAP_FIXED), -EINVAL,
	       "MAP_FIXED unaligned -> -EINVAL");
	is_int(map(0, PG, RW, PRIV | PM_MAP_FIXED), -EPERM, "MAP_FIXED at 0 -> -EPERM");
	is_int(map(PM_TASK_SIZE, PG, RW, PRIV | PM_MAP_FIXED), -ENOMEM,
	       "MAP_FIXED at PM_TASK_SIZE -> -ENOMEM");
	is_int(map(PM_TASK_SIZE - PG, 2 * PG, RW, PRIV | PM_MAP_FIXED), -ENOMEM,
	       "MAP_FIXED ending beyond PM_TASK_SIZE -> -ENOMEM");
	is_int(map(0, 1UL << 47, RW, PRIV), -ENOMEM, "mmap 128 TiB: no free range -> -ENOMEM");
	is_int(map(0, PM_TASK_SIZE, RW, PRIV), -ENOMEM,
	       "mmap the size of the address space -> -ENOMEM");
	is_int(nr_vmas(), 0, "no failed mmap left a VMA");
	is_int(pmt_free_pages(m), free0 - pmt_kept_tables(m),
	       "failed mmaps take no frame (the PGD, and the PUD table of the mmaps above)");

	/* FIXED_NOREPLACE. */
	is_int(map(fixed, 4 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE), fixed,
	       "FIXED_NOREPLACE on a free range maps exactly there");
	ok(pmt_fill(mm, fixed, 4, 1), "fill it");
	is_int(map(fixed, 4 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE), -EEXIST,
	       "FIXED_NOREPLACE over the same range -> -EEXIST");
	is_int(map(fixed + 3 * PG, 4 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE), -EEXIST,
	       "FIXED_NOREPLACE overlapping the last page -> -EEXIST");
	is_int(map(fixed - 2 * PG, 3 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE), -EEXIST,
	       "FIXED_NOREPLACE overlapping the first page -> -EEXIST");
	ok(pmt_check(mm, fixed, 4, 1), "the existing mapping is untouched by the refused ones");
	is_int(map(fixed + 4 * PG, PG, PM_PROT_READ, PRIV | PM_MAP_FIXED_NOREPLACE), fixed + 4 * PG,
	       "FIXED_NOREPLACE right after it succeeds");
	teardown("mmap errors");
}

static void test_mmap_placement(void)
{
	static const unsigned long lens[] = { 2 * MiB, 4 * MiB, PG, 6 * MiB, 3 * PG, 2 * MiB,
					      10 * MiB, 5 * PG, 2 * MiB };
	long addrs[sizeof(lens) / sizeof(lens[0])];
	bool in_range = true, aligned2m = true, aligned4k = true;

	setup();
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		long a = map(0, lens[i], RW, PRIV);

		addrs[i] = a;
		if (a < (long)PM_USER_MIN || (unsigned long)a + lens[i] > PM_TASK_SIZE)
			in_range = false;
		if (a & (PG - 1))
			aligned4k = false;
		if (lens[i] % (2 * MiB) == 0 && (a & (2 * MiB - 1)))
			aligned2m = false;
	}
	ok(in_range, "every mapping lies in [PM_USER_MIN, PM_TASK_SIZE)");
	ok(aligned4k, "every mapping is page aligned");
	ok(aligned2m, "anonymous mappings of 2 MiB multiples are 2 MiB aligned");
	/* No two overlap: fill the first page of each in turn, then check all. */
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unsigned n = lens[i] / PG;

		pmt_fill(mm, (unsigned long)addrs[i], 1, 100 + i);
		if (n > 1)
			pmt_fill(mm, (unsigned long)addrs[i] + (n - 1) * PG, 1, 200 + i);
	}
	bool intact = true;

	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		unsigned n = lens[i] / PG;

		intact &= pmt_check(mm, (unsigned long)addrs[i], 1, 100 + i);
		if (n > 1)
			intact &= pmt_check(mm, (unsigned long)addrs[i] + (n - 1) * PG, 1, 200 + i);
	}
	ok(intact, "no two mappings overlap (first and last pages keep their data)");

	/* A free hint is used as is; an occupied one is not. */
	const unsigned long hint = 0x200000000UL;

	is_int(map(hint, 3 * PG, RW, PRIV), hint, "a free hint is used as is");
	pmt_fill(mm, hint, 3, 7);
	long other = map(hint, 3 * PG, RW, PRIV);

	ok(other > 0 && other != (long)hint &&
		   ((unsigned long)other + 3 * PG <= hint || (unsigned long)other >= hint + 3 * PG),
	   "an occupied hint gives another, disjoint range");
	ok(pmt_check(mm, hint, 3, 7), "the hinted mapping is untouched");

	/* A hint beyond the user space is ignored; an unaligned one is masked down (Linux's
	 * round_hint_to_min). */
	long far = map(PM_TASK_SIZE + 0x1000, PG, RW, PRIV);

	ok(far >= (long)PM_USER_MIN && (unsigned long)far + PG <= PM_TASK_SIZE,
	   "a hint beyond PM_TASK_SIZE is ignored (%#lx)", far);
	is_int(map(0x210000123UL, PG, RW, PRIV), 0x210000000UL,
	       "an unaligned free hint is masked down to its page");

	/* PROT_NONE mappings are valid mappings. */
	long none = map(0, 2 * PG, PM_PROT_NONE, PRIV);

	ok(none > 0, "PROT_NONE mapping");
	is_int(rd((unsigned long)none), -EFAULT, "reading PROT_NONE -> -EFAULT");

	/* POPULATE faults every page in at once. */
	size_t f1 = pmt_free_pages(m);
	long pop = map(0, 16 * PG, RW, PRIV | PM_MAP_POPULATE);

	ok(pop > 0, "MAP_POPULATE mapping");
	size_t f2 = pmt_free_pages(m);

	ok(f1 - f2 >= 16, "MAP_POPULATE took at least 16 frames (took %zu)", f1 - f2);
	ok(pmt_reads_zero(mm, (unsigned long)pop, 16), "populated pages read zero");
	ok(pmt_fill(mm, (unsigned long)pop, 16, 9) && pmt_check(mm, (unsigned long)pop, 16, 9),
	   "populated pages take writes");
	is_int(pmt_free_pages(m), f2, "writing populated pages allocates nothing");
	teardown("placement");
}

static void test_fixed_replace(void)
{
	const unsigned long x = 0x30000000UL;

	setup();
	/* AAA -> A B A: a fixed mapping over the middle page replaces it. */
	is_int(map(x, 3 * PG, RW, PRIV | PM_MAP_FIXED), x, "MAP_FIXED on a free range");
	ok(pmt_fill(mm, x, 3, 2), "fill AAA");
	size_t f1 = pmt_free_pages(m);

	is_int(map(x + PG, PG, RW, PRIV | PM_MAP_FIXED), x + PG, "MAP_FIXED over the middle page");
	is_int(pmt_free_pages(m), f1 + 1, "the replaced page went back to the allocator");
	ok(pmt_reads_zero(mm, x + PG, 1), "the new middle page reads zero");
	ok(pmt_check(mm, x, 1, 2) && pmt_check(mm, x + 2 * PG, 1, 2),
	   "the pages either side are intact");

	/* A fixed read-only mapping over the last page: writes there now fail. */
	is_int(map(x + 2 * PG, PG, PM_PROT_READ, PRIV | PM_MAP_FIXED), x + 2 * PG,
	       "MAP_FIXED read-only over the last page");
	is_int(wr(x + 2 * PG), -EFAULT, "writing the new read-only page -> -EFAULT");
	ok(pmt_reads_zero(mm, x + 2 * PG, 1), "it reads zero");

	/* A fixed mapping over all of it and beyond, holes included. */
	is_int(map(x - PG, 8 * PG, RW, PRIV | PM_MAP_FIXED), x - PG,
	       "MAP_FIXED over everything and beyond");
	is_int(nr_vmas(), 1, "one VMA left");
	ok(pmt_reads_zero(mm, x - PG, 8), "all of it reads zero");
	teardown("fixed replace");
}

static void test_munmap(void)
{
	const unsigned long x = 0x40000000UL;

	setup();
	is_int(pm_munmap(mm, x + 1, PG), -EINVAL, "munmap unaligned -> -EINVAL");
	is_int(pm_munmap(mm, x, 0), -EINVAL, "munmap len 0 -> -EINVAL");
	is_int(pm_munmap(mm, PM_TASK_SIZE, PG), -EINVAL, "munmap at PM_TASK_SIZE -> -EINVAL");
	is_int(pm_munmap(mm, PM_TASK_SIZE - PG, 2 * PG), -EINVAL,
	       "munmap ending beyond PM_TASK_SIZE -> -EINVAL");
	is_int(pm_munmap(mm, x, SIZE_MAX - PG), -EINVAL,
	       "munmap with a wrapping length -> -EINVAL");
	is_int(pm_munmap(mm, x, 16 * PG), 0, "munmap of nothing -> 0");

	/* AAAAAAAA -> AAA..AAA */
	is_int(map(x, 8 * PG, RW, PRIV | PM_MAP_FIXED), x, "map 8 pages");
	ok(pmt_fill(mm, x, 8, 3), "fill them");
	size_t f1 = pmt_free_pages(m);

	is_int(pm_munmap(mm, x + 3 * PG, 2 * PG), 0, "munmap pages 3-4");
	is_int(nr_vmas(), 2, "the VMA is split in two");
	ok(pmt_check(mm, x, 3, 3), "pages 0-2 intact");
	ok(pmt_check(mm, x + 5 * PG, 3, 3), "pages 5-7 intact");
	is_int(rd(x + 3 * PG), -EFAULT, "reading the hole -> -EFAULT");
	is_int(wr(x + 4 * PG), -EFAULT, "writing the hole -> -EFAULT");
	is_int(pm_fault(mm, x + 3 * PG, 0), -EFAULT, "read fault in the hole -> -EFAULT");
	is_int(pm_fault(mm, x + 4 * PG, PM_FAULT_WRITE), -EFAULT,
	       "write fault in the hole -> -EFAULT");
	is_int(pmt_free_pages(m), f1 + 2, "the two unmapped pages are free again");
	char buf[3 * PG];

	is_int(pm_access(mm, x + PG, buf, sizeof(buf), 0), 2 * PG,
	       "a read running into the hole copies up to it");

	/* Refill the hole. */
	is_int(map(x + 3 * PG, 2 * PG, RW, PRIV | PM_MAP_FIXED_NOREPLACE), x + 3 * PG,
	       "the hole can be mapped again");
	ok(pmt_reads_zero(mm, x + 3 * PG, 2), "the new pages read zero");
	ok(pmt_check(mm, x, 3, 3) && pmt_check(mm, x + 5 * PG, 3, 3),
	   "the old pages either side are intact");

	/* An unaligned length is rounded up to a page. */
	is_int(pm_munmap(mm, x + 7 * PG, 100), 0, "munmap 100 bytes of the last page");
	is_int(rd(x + 7 * PG + 4000), -EFAULT, "the whole last page is gone");
	ok(pmt_check(mm, x + 6 * PG, 1, 3), "the page before it is intact");

	/* One munmap over several VMAs and holes. */
	is_int(pm_munmap(mm, x - 4 * PG, 16 * PG), 0, "munmap across VMAs and holes");
	is_int(nr_vmas(), 0, "no VMA left");
	is_int(rd(x), -EFAULT, "nothing mapped");
	teardown("munmap");
}

static void test_mprotect(void)
{
	const unsigned long x = 0x50000000UL;
	char buf[2 * PG];

	memset(buf, 0x11, sizeof(buf));
	setup();
	is_int(map(x, 8 * PG, RW, PRIV | PM_MAP_FIXED), x, "map 8 pages");
	ok(pmt_fill(mm, x, 8, 4), "fill them");
	is_int(pm_mprotect(mm, x + 1, PG, PM_PROT_READ), -EINVAL, "mprotect unaligned -> -EINVAL");
	is_int(pm_mprotect(mm, x, PG, RW | 0x10), -EINVAL, "mprotect unknown bit 0x10 -> -EINVAL");
	is_int(pm_mprotect(mm, x, PG, RW | 0x1000), -EINVAL,
	       "mprotect unknown bit 0x1000 -> -EINVAL");
	is_int(pm_mprotect(mm, x, PG, RW | 0x03000000), -EINVAL,
	       "mprotect PROT_GROWSDOWN|PROT_GROWSUP -> -EINVAL");
	is_int(pm_mprotect(mm, x, PG, RW | 0x01000000), -EINVAL,
	       "mprotect PROT_GROWSDOWN of a VMA that does not grow -> -EINVAL");
	is_int(pm_mprotect(mm, x, PG, RW | 0x02000000), -EINVAL,
	       "mprotect PROT_GROWSUP (x86 has none) -> -EINVAL");
	is_int(pm_mprotect(mm, x, 0, 0x10), 0,
	       "mprotect len 0 with a bad prot -> 0 (Linux's order)");
	is_int(pm_mprotect(mm, x, 0, PM_PROT_READ), 0, "mprotect len 0 -> 0");
	is_int(pm_mprotect(mm, 0x70000000UL, 0, PM_PROT_READ), 0, "mprotect len 0 on a hole -> 0");
	is_int(pm_mprotect(mm, 0x70000000UL, PG, PM_PROT_READ), -ENOMEM,
	       "mprotect of nothing -> -ENOMEM");
	is_int(pm_mprotect(mm, PM_TASK_SIZE, PG, PM_PROT_READ), -ENOMEM,
	       "mprotect beyond the user space -> -ENOMEM");
	is_int(pm_mprotect(mm, x, ~0UL - x - 100, PM_PROT_READ), -ENOMEM,
	       "mprotect with a wrapping length -> -ENOMEM");
	is_int(wr(x), 1, "the failed calls changed nothing");

	/* AAAAAAAA -> AArrrrAA */
	size_t f1 = pmt_free_pages(m);

	is_int(pm_mprotect(mm, x + 2 * PG, 4 * PG, PM_PROT_READ), 0,
	       "mprotect pages 2-5 read-only");
	is_int(nr_vmas(), 3, "split in three");
	is_int(wr(x + 3 * PG), -EFAULT, "pm_access write to read-only -> -EFAULT");
	is_int(pm_fault(mm, x + 3 * PG, PM_FAULT_WRITE), -EFAULT, "write fault -> -EFAULT");
	is_int(pm_fault(mm, x + 3 * PG, 0), 0, "read fault -> 0");
	ok(pmt_check(mm, x + 2 * PG, 4, 4), "read-only pages still read their data");
	is_int(pm_access(mm, x + PG, buf, sizeof(buf), 1), PG,
	       "a write running into read-only copies up to it");
	ok(pmt_fill(mm, x, 2, 4) && pmt_fill(mm, x + 6 * PG, 2, 4),
	   "the pages either side take writes");
	ok(pmt_check(mm, x, 8, 4), "all data intact");

	/* Back to RW: writes work again, in place, and the VMAs merge back. */
	is_int(pm_mprotect(mm, x + 2 * PG, 4 * PG, RW), 0, "mprotect back to read-write");
	ok(pmt_fill(mm, x + 2 * PG, 4, 5) && pmt_check(mm, x + 2 * PG, 4, 5), "writes work again");
	is_int(pmt_free_pages(m), f1, "writing a page made writable again reuses it (no copy)");
	is_int(nr_vmas(), 1, "the three VMAs merged back into one");

	/* PROT_NONE: neither read nor write. */
	is_int(pm_mprotect(mm, x + 4 * PG, PG, PM_PROT_NONE), 0, "mprotect page 4 PROT_NONE");
	is_int(rd(x + 4 * PG), -EFAULT, "read PROT_NONE -> -EFAULT");
	is_int(wr(x + 4 * PG), -EFAULT, "write PROT_NONE -> -EFAULT");
	is_int(pm_fault(mm, x + 4 * PG, 0), -EFAULT, "read fault on PROT_NONE -> -EFAULT");
	is_int(pm_mprotect(mm, x + 4 * PG, PG, PM_PROT_READ), 0, "then read-only");
	ok(pmt_check(mm, x + 4 * PG, 1, 5), "its data survived PROT_NONE");
	is_int(pm_mprotect(mm, x + 4 * PG, PG, RW), 0, "then read-write");

	/* A hole in the range: applied up to the hole, -ENOMEM.  AA.AA */
	const unsigned long y = 0x60000000UL;

	is_int(map(y, 5 * PG, RW, PRIV | PM_MAP_FIXED), y, "map 5 pages");
	is_int(pm_munmap(mm, y + 2 * PG, PG), 0, "punch page 2");
	ok(pmt_fill(mm, y, 2, 6) && pmt_fill(mm, y + 3 * PG, 2, 6), "fill both sides");
	is_int(pm_mprotect(mm, y, 5 * PG, PM_PROT_READ), -ENOMEM,
	       "mprotect over the hole -> -ENOMEM");
	is_int(wr(y + PG), -EFAULT, "the part before the hole became read-only");
	is_int(wr(y + 3 * PG), 1, "the part after the hole did not");
	ok(pmt_check(mm, y, 2, 6), "data before the hole intact");
	/* Starting in a hole: nothing changes. */
	is_int(pm_mprotect(mm, y + 2 * PG, 3 * PG, PM_PROT_READ), -ENOMEM,
	       "mprotect starting in the hole -> -ENOMEM");
	is_int(wr(y + 4 * PG), 1, "and it changed nothing after the hole");

	/* Never-faulted pages made read-only read zero and refuse writes. */
	const unsigned long z = 0x68000000UL;

	is_int(map(z, 4 * PG, RW, PRIV | PM_MAP_FIXED), z, "map 4 fresh pages");
	is_int(pm_mprotect(mm, z, 4 * PG, PM_PROT_READ), 0, "mprotect them read-only");
	ok(pmt_reads_zero(mm, z, 4), "they read zero");
	is_int(wr(z + PG), -EFAULT, "and refuse writes");
	teardown("mprotect");
}

static void test_madvise(void)
{
	const unsigned long x = 0x70000000UL;

	setup();
	is_int(map(x, 5 * PG, RW, PRIV | PM_MAP_FIXED), x, "map 5 pages");
	ok(pmt_fill(mm, x, 5, 8), "fill them");
	is_int(pm_madvise(mm, x + 8, PG, PM_MADV_DONTNEED), -EINVAL,
	       "madvise unaligned -> -EINVAL");
	is_int(pm_madvise(mm, x, PG, 3), -EINVAL, "madvise unknown advice 3 -> -EINVAL");
	is_int(pm_madvise(mm, x, PG, 999), -EINVAL, "madvise unknown advice 999 -> -EINVAL");
	is_int(pm_madvise(mm, x, PG, -1), -EINVAL, "madvise unknown advice -1 -> -EINVAL");
	is_int(pm_madvise(mm, x, 0, PM_MADV_DONTNEED), 0, "madvise len 0 -> 0");
	is_int(pm_madvise(mm, x, ~0UL - x - 100, PM_MADV_DONTNEED), -EINVAL,
	       "madvise with a wrapping length -> -EINVAL");
	ok(pmt_check(mm, x, 5, 8), "the refused calls changed nothing");

	static const int advice[] = { PM_MADV_HUGEPAGE, PM_MADV_NOHUGEPAGE, PM_MADV_DONTFORK,
				      PM_MADV_DOFORK };

	for (unsigned i = 0; i < 4; i++) {
		is_int(pm_madvise(mm, x, 5 * PG, advice[i]), 0, "madvise %d on a mapping -> 0",
		       advice[i]);
		is_int(pm_madvise(mm, 0x7f000000UL, PG, advice[i]), -ENOMEM,
		       "madvise %d on a hole -> -ENOMEM", advice[i]);
	}
	ok(pmt_check(mm, x, 5, 8), "flag advice keeps the data");

	/* DONTNEED discards: AA.AA over the whole range -> zeros both sides, -ENOMEM. */
	is_int(pm_munmap(mm, x + 2 * PG, PG), 0, "punch page 2");
	size_t f1 = pmt_free_pages(m);

	is_int(pm_madvise(mm, x, 5 * PG, PM_MADV_DONTNEED), -ENOMEM,
	       "DONTNEED over the hole -> -ENOMEM");
	ok(pmt_reads_zero(mm, x, 2), "pages before the hole were discarded");
	ok(pmt_reads_zero(mm, x + 3 * PG, 2), "pages after the hole were discarded");
	size_t f2 = pmt_free_pages(m);

	ok(f2 >= f1 + 4, "the four discarded pages were freed (%zu more free)", f2 - f1);
	ok(pmt_fill(mm, x, 2, 9) && pmt_check(mm, x, 2, 9), "discarded pages take writes again");
	is_int(pmt_free_pages(m), f2 - 2, "each rewritten page takes a new frame");

	/* DONTNEED of one page in the middle of a VMA. */
	is_int(pm_madvise(mm, x + PG, PG, PM_MADV_DONTNEED), 0, "DONTNEED one page");
	ok(pmt_check(mm, x, 1, 9), "its neighbour is intact");
	ok(pmt_reads_zero(mm, x + PG, 1), "it reads zero");
	teardown("madvise");
}

int main(void)
{
	plan_no_plan();
	test_mmap_errors();
	test_mmap_placement();
	test_fixed_replace();
	test_munmap();
	test_mprotect();
	test_madvise();
	return done_testing();
}
