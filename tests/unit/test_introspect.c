// SPDX-License-Identifier: MIT
/*
 * test_introspect.c - what /proc would show: pm_mm_maps() (maps with smaps' Rss, Anonymous and
 * AnonHugePages), pm_pagemap() (pagemap, kpageflags, kpagecount), pm_mincore() (mincore(2))
 * and pm_hugetlb_reserved() (HugePages_Rsvd), every field on each kind of page:
 *
 *	kind			flags of a mapped page (pagemap)	mapcount
 *	anonymous 4 KiB		PRESENT EXCL ANON AEXCL WRITABLE	1
 *	  after fork		PRESENT ANON				2
 *	  pinned		... MAYBE_PINNED
 *	zero page		PRESENT ZERO				0
 *	THP, PMD or PTEs	PRESENT EXCL ANON THP AEXCL WRITABLE	1
 *	shmem, shared anon	PRESENT EXCL DIRTY WRITABLE		1
 *	private hugetlb		PRESENT EXCL ANON HUGETLB AEXCL WRITABLE 1
 *	shared hugetlb		PRESENT EXCL HUGETLB DIRTY WRITABLE	1
 *
 * with the merges pm_mm_maps() shows (adjacent mappings, mprotect back, a VMA across two of
 * the range design's ranges), every error path of the four calls, and a run of walkers against
 * faults, zaps and munmaps. Every group runs on both designs, then checks that every frame and
 * pin came back and pm_machine_check() passes.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define SHARED_ANON (PM_MAP_SHARED | PM_MAP_ANONYMOUS)

#define P_PRESENT PM_PAGE_PRESENT
#define ANON_RW (PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_ANON | PM_PAGE_ANON_EXCLUSIVE | \
		 PM_PAGE_WRITABLE)
#define ZERO_PG (PM_PAGE_PRESENT | PM_PAGE_ZERO)

static unsigned design;	/* PM_MACHINE_LINUX_MM or PM_MACHINE_RANGE_MM: this pass */
static const char *dn;	/* its name, the prefix of every test name */

static struct pm_machine *machine(size_t mib, size_t nr_huge)
{
	struct pm_config cfg = { .mem_bytes = mib * MiB, .nr_hugepages = nr_huge, .flags = design };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	ASSERT_EQ(pm_machine_flags(m), design);
	return m;
}

static struct pm_page_info pinfo(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(mm, addr, 1, &pi), 1);
	return pi;
}

/* The VMA that holds @addr, as pm_mm_maps() shows it. */
static struct pm_map_info vma_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_map_info mi;

	ASSERT_EQ(pm_mm_maps(mm, addr, &mi, 1), 1);
	ASSERT_TRUE(mi.start <= addr && addr < mi.end);
	return mi;
}

static unsigned long pfn_at(struct pm_mm *mm, unsigned long addr)
{
	unsigned long pfn = pmt_pfn_at(mm, addr);

	ASSERT_TRUE(pfn != ULONG_MAX);
	return pfn;
}

/*
 * Do the @n entries of @pi have @flags and @mapcount, and pfns @pfn0 + i (@pfn0 0: any)?
 * Return the first that does not (diag()), or -1.
 */
static long entries_not(const struct pm_page_info *pi, unsigned long n, unsigned flags,
			unsigned mapcount, uint64_t pfn0)
{
	for (unsigned long i = 0; i < n; i++) {
		if (pi[i].flags == flags && pi[i].mapcount == mapcount &&
		    (!pfn0 || pi[i].pfn == pfn0 + i))
			continue;
		diag("entry %lu: flags %#x mapcount %u pfn %#llx; expected %#x, %u, %#llx", i,
		     pi[i].flags, pi[i].mapcount, (unsigned long long)pi[i].pfn, flags, mapcount,
		     (unsigned long long)(pfn0 ? pfn0 + i : 0));
		return (long)i;
	}
	return -1;
}

/* The entries of @n pages at @addr. */
static struct pm_page_info *pagemap(struct pm_mm *mm, unsigned long addr, unsigned long n)
{
	struct pm_page_info *pi = calloc(n, sizeof(*pi));

	ASSERT_TRUE(pi != NULL);
	ASSERT_EQ(pm_pagemap(mm, addr, n, pi), (long)n);
	return pi;
}

/* mincore() of @n pages at @addr matches @want (a string of '0' and '1')? */
static bool mincore_is(struct pm_mm *mm, unsigned long addr, const char *want)
{
	size_t n = strlen(want);
	unsigned char vec[64];
	int r;

	ASSERT_TRUE(n <= sizeof(vec));
	memset(vec, 0x55, sizeof(vec));
	r = pm_mincore(mm, addr, n * PG, vec);
	if (r) {
		diag("pm_mincore: %d", r);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (vec[i] != (unsigned char)(want[i] - '0')) {
			diag("page %zu: %u, expected %c", i, vec[i], want[i]);
			return false;
		}
	return vec[n] == 0x55;
}

/* pm_mincore() of @n pages at @addr: are the first @ones 1 and the rest 0? */
static bool mincore_ones(struct pm_mm *mm, unsigned long addr, unsigned long n,
			 unsigned long ones)
{
	unsigned char *vec = malloc(n);
	bool good;

	ASSERT_TRUE(vec != NULL);
	memset(vec, 0x55, n);
	good = pm_mincore(mm, addr, n * PG, vec) == 0;
	for (unsigned long i = 0; good && i < n; i++)
		if (vec[i] != (i < ones)) {
			diag("page %lu: %u", i, vec[i]);
			good = false;
		}
	free(vec);
	return good;
}

static void poke(struct pm_mm *mm, unsigned long addr)
{
	char c = 'w';

	ASSERT_EQ(pm_access(mm, addr, &c, 1, 1), 1);
}

static void peek(struct pm_mm *mm, unsigned long addr)
{
	char c;

	ASSERT_EQ(pm_access(mm, addr, &c, 1, 0), 1);
}

static size_t reserved(struct pm_machine *m)
{
	size_t r = ~(size_t)0;

	ASSERT_EQ(pm_hugetlb_reserved(m, &r), 0);
	return r;
}

/* ---- 1. every error path ---- */

static void test_errors(void)
{
	struct pm_machine *m = machine(32, 1);
	size_t free0 = pmt_free_pages(m), r = 7;
	struct pm_mm *mm = pm_mm_create(m), *dead;
	struct pm_map_info mi[4];
	struct pm_page_info pi[8];
	unsigned char vec[16];
	long a;

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mm_maps(NULL, 0, mi, 4), -EINVAL, "%s: pm_mm_maps(NULL mm) -> -EINVAL", dn);
	is_int(pm_mm_maps(mm, 0, mi, -1), -EINVAL, "%s: pm_mm_maps(max -1) -> -EINVAL", dn);
	is_int(pm_mm_maps(mm, 0, mi, 4), 0, "%s: pm_mm_maps of an empty mm -> 0", dn);
	is_int(pm_mm_maps(mm, 0, NULL, 4), 0, "%s: ... with NULL out too: nothing to fill", dn);
	a = pm_mmap(mm, 0, 4 * PG, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	is_int(pm_mm_maps(mm, 0, NULL, 4), -EFAULT, "%s: pm_mm_maps(NULL out) -> -EFAULT", dn);
	is_int(pm_mm_maps(mm, 0, NULL, 0), 0, "%s: pm_mm_maps(NULL out, max 0) -> 0", dn);
	is_int(pm_mm_maps(mm, 0, mi, 0), 0, "%s: pm_mm_maps(max 0) -> 0", dn);
	is_int(pm_mm_maps(mm, a + 4 * PG, mi, 4), 0, "%s: pm_mm_maps above the last VMA -> 0", dn);
	is_int(pm_mm_maps(mm, PM_TASK_SIZE, mi, 4), 0, "%s: pm_mm_maps(PM_TASK_SIZE) -> 0", dn);
	is_int(pm_mm_maps(mm, ULONG_MAX, mi, 4), 0, "%s: pm_mm_maps(ULONG_MAX) -> 0", dn);
	is_int(pm_mm_maps(mm, a + 4 * PG - 1, mi, 4), 1, "%s: a start inside the VMA finds it", dn);

	is_int(pm_pagemap(NULL, a, 1, pi), -EINVAL, "%s: pm_pagemap(NULL mm) -> -EINVAL", dn);
	is_int(pm_pagemap(mm, a + 1, 1, pi), -EINVAL, "%s: pm_pagemap(unaligned) -> -EINVAL", dn);
	is_int(pm_pagemap(mm, a + 1, 0, NULL), -EINVAL, "%s: ... even with nr 0", dn);
	is_int(pm_pagemap(mm, a, 1, NULL), -EFAULT, "%s: pm_pagemap(NULL out) -> -EFAULT", dn);
	is_int(pm_pagemap(mm, a, 0, pi), 0, "%s: pm_pagemap(nr 0) -> 0", dn);
	is_int(pm_pagemap(mm, a, 0, NULL), 0, "%s: pm_pagemap(nr 0, NULL out) -> 0", dn);
	is_int(pm_pagemap(mm, PM_TASK_SIZE - 2 * PG, 5, pi), 2,
	       "%s: pm_pagemap past the top -> the entries below it", dn);
	is_int(pm_pagemap(mm, PM_TASK_SIZE - PG, ULONG_MAX, pi), 1,
	       "%s: pm_pagemap(nr ULONG_MAX) below the top -> 1, no overflow", dn);
	is_int(pm_pagemap(mm, PM_TASK_SIZE, 1, pi), 0, "%s: pm_pagemap(PM_TASK_SIZE) -> 0", dn);
	is_int(pm_pagemap(mm, ULONG_MAX & ~(PG - 1), 4, NULL), 0,
	       "%s: pm_pagemap above the top, NULL out -> 0", dn);
	memset(pi, 0xff, sizeof(pi));
	is_int(pm_pagemap(mm, a - 2 * PG, 8, pi), 8, "%s: pm_pagemap over holes -> every entry", dn);
	is_int(entries_not(pi, 8, 0, 0, 0), -1, "%s: holes and unfaulted pages are all zeros", dn);

	is_int(pm_mincore(NULL, a, PG, vec), -EINVAL, "%s: pm_mincore(NULL mm) -> -EINVAL", dn);
	is_int(pm_mincore(mm, a + 1, PG, vec), -EINVAL, "%s: pm_mincore(unaligned) -> -EINVAL", dn);
	is_int(pm_mincore(mm, a + 1, 0, vec), -EINVAL, "%s: ... even with len 0", dn);
	is_int(pm_mincore(mm, a, 0, vec), 0, "%s: pm_mincore(len 0) -> 0", dn);
	is_int(pm_mincore(mm, a, 0, NULL), 0, "%s: pm_mincore(len 0, NULL vec) -> 0", dn);
	is_int(pm_mincore(mm, a + 4 * PG, PG, vec), -ENOMEM, "%s: pm_mincore(unmapped) -> -ENOMEM",
	       dn);
	is_int(pm_mincore(mm, a - PG, 2 * PG, vec), -ENOMEM,
	       "%s: pm_mincore starting in a hole -> -ENOMEM", dn);
	is_int(pm_mincore(mm, a, PG, NULL), -EFAULT, "%s: pm_mincore(NULL vec) -> -EFAULT", dn);
	is_int(pm_mincore(mm, a + 4 * PG, PG, NULL), -ENOMEM,
	       "%s: pm_mincore(unmapped, NULL vec) -> -ENOMEM first", dn);
	is_int(pm_mincore(mm, PM_TASK_SIZE, PG, vec), -ENOMEM,
	       "%s: pm_mincore(PM_TASK_SIZE) -> -ENOMEM", dn);
	is_int(pm_mincore(mm, PM_TASK_SIZE + PG, 0, vec), -ENOMEM,
	       "%s: pm_mincore beyond the top, len 0 -> -ENOMEM (access_ok)", dn);
	is_int(pm_mincore(mm, PM_TASK_SIZE - PG, 2 * PG, vec), -ENOMEM,
	       "%s: pm_mincore across the top -> -ENOMEM", dn);
	is_int(pm_mincore(mm, a, ULONG_MAX - PG, vec), -ENOMEM,
	       "%s: pm_mincore whose end wraps -> -ENOMEM", dn);
	poke(mm, a);
	memset(vec, 0x55, sizeof(vec));
	is_int(pm_mincore(mm, a, PG + 1, vec), 0, "%s: pm_mincore(len 4097) -> 0", dn);
	ok(vec[0] == 1 && vec[1] == 0 && vec[2] == 0x55,
	   "%s: ... the length rounds up to 2 pages, no byte more written", dn);
	ASSERT_EQ(pm_mmap(mm, a + 6 * PG, 2 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), a + 6 * PG);
	memset(vec, 0x55, sizeof(vec));
	is_int(pm_mincore(mm, a, 8 * PG, vec), -ENOMEM, "%s: pm_mincore over a hole -> -ENOMEM", dn);
	ok(vec[0] == 1 && vec[1] == 0 && vec[3] == 0 && vec[4] == 0x55 && vec[6] == 0x55,
	   "%s: ... the bytes before the hole are written, none after", dn);

	is_int(pm_hugetlb_reserved(NULL, &r), -EINVAL, "%s: pm_hugetlb_reserved(NULL) -> -EINVAL",
	       dn);
	is_int(r, 7, "%s: ... and writes nothing", dn);
	is_int(pm_hugetlb_reserved(m, NULL), 0, "%s: pm_hugetlb_reserved(NULL resv) -> 0", dn);
	is_int(reserved(m), 0, "%s: nothing reserved in a new machine", dn);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "errors");

	/* A dead address space: its machine destroyed under it (a misuse, see pm__mm_bad). */
	m = machine(16, 0);
	dead = pm_mm_create(m);
	ASSERT_TRUE(dead != NULL);
	a = pm_mmap(dead, 0, 4 * PG, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	poke(dead, a);
	fprintf(stderr, "# a warning about live address spaces is expected below\n");
	pm_machine_destroy(m);
	is_int(pm_mm_maps(dead, 0, mi, 4), -EINVAL, "%s: dead mm: pm_mm_maps -> -EINVAL", dn);
	is_int(pm_pagemap(dead, a, 1, pi), -EINVAL, "%s: dead mm: pm_pagemap -> -EINVAL", dn);
	is_int(pm_mincore(dead, a, PG, vec), -EINVAL, "%s: dead mm: pm_mincore -> -EINVAL", dn);
	pm_mm_destroy(dead);
}

/* ---- 2. anonymous 4 KiB pages, the zero page, pins, mprotect, DONTNEED ---- */

static void test_anon(void)
{
	struct pm_machine *m = machine(32, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_map_info mi[4];
	struct pm_page_info pi;
	struct pm_page *pins[2];
	unsigned long a, zpfn;

	ASSERT_TRUE(mm != NULL);
	a = pmt_map_anon(mm, 16 * PG, RW, false);
	mi[0] = vma_at(mm, a);
	ok(mi[0].start == a && mi[0].end == a + 16 * PG, "%s: maps: start and end", dn);
	is_int(mi[0].prot, RW, "%s: maps: prot READ|WRITE", dn);
	is_int(mi[0].flags, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, "%s: maps: private anonymous", dn);
	is_int(mi[0].pgoff, a >> 12, "%s: maps: pgoff is the address >> 12", dn);
	ok(mi[0].shmem == NULL, "%s: maps: no object", dn);
	is_int(mi[0].vmflags, PM_VMF_ACCOUNT, "%s: maps: ac (private, writable) alone", dn);
	ok(mi[0].rss_pages == 0 && mi[0].anon_pages == 0 && mi[0].anon_huge_pages == 0,
	   "%s: maps: nothing resident yet", dn);
	ok(mincore_is(mm, a, "0000000000000000"), "%s: mincore: nothing resident yet", dn);

	pmt_touch(mm, a, 4 * PG); /* pages 0-3 written */
	peek(mm, a + 4 * PG);	  /* page 4: the zero page */
	mi[0] = vma_at(mm, a);
	is_int(mi[0].rss_pages, 4, "%s: maps: Rss counts the 4 written pages, not the zero page",
	       dn);
	is_int(mi[0].anon_pages, 4, "%s: maps: Anonymous 4", dn);
	is_int(mi[0].anon_huge_pages, 0, "%s: maps: AnonHugePages 0", dn);

	pi = pinfo(mm, a);
	is_int(pi.flags, ANON_RW, "%s: pagemap: a written page is PRESENT EXCLUSIVE ANON "
				  "ANON_EXCLUSIVE WRITABLE", dn);
	is_int(pi.pfn, pfn_at(mm, a), "%s: pagemap: its pfn", dn);
	is_int(pi.mapcount, 1, "%s: kpagecount: 1", dn);
	pi = pinfo(mm, a + 4 * PG);
	zpfn = pi.pfn;
	is_int(pi.flags, ZERO_PG, "%s: pagemap: a read page is the zero page, PRESENT ZERO", dn);
	ok(zpfn == pfn_at(mm, a + 4 * PG) && pm_page_is_zero(pm_pfn_to_page(m, zpfn)),
	   "%s: pagemap: the zero page's pfn", dn);
	is_int(pi.mapcount, 0, "%s: kpagecount of the zero page: 0", dn);
	pi = pinfo(mm, a + 5 * PG);
	ok(pi.flags == 0 && pi.pfn == 0 && pi.mapcount == 0, "%s: pagemap: not faulted: zeros", dn);
	ok(mincore_is(mm, a, "1111100000000000"), "%s: mincore: the written pages and the zero page",
	   dn);

	/* Pins: maybe_pinned on the pinned page only; the zero page is never pinned. */
	ASSERT_EQ(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, &pins[0]), 1);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, a + 4 * PG, 1, 0, &pins[1]), 1);
	is_int(pinfo(mm, a).flags, ANON_RW | PM_PAGE_MAYBE_PINNED, "%s: a pinned page: MAYBE_PINNED",
	       dn);
	is_int(pinfo(mm, a + PG).flags, ANON_RW, "%s: its neighbour: not", dn);
	is_int(pinfo(mm, a + 4 * PG).flags, ZERO_PG, "%s: the zero page pinned: not MAYBE_PINNED", dn);
	is_int(vma_at(mm, a).rss_pages, 4, "%s: a pin changes no count of maps", dn);
	pm_unpin_user_pages(pins, 2);
	is_int(pinfo(mm, a).flags, ANON_RW, "%s: unpinned: MAYBE_PINNED gone", dn);

	/* The folio's dirty flag: a slow FOLL_WRITE pin sets it (follow_page's set_page_dirty). */
	ASSERT_EQ(pm_pin_user_pages(mm, a + PG, 1, PM_FOLL_WRITE, &pins[0]), 1);
	pm_unpin_user_page(pins[0]);
	is_int(pinfo(mm, a + PG).flags, ANON_RW | PM_PAGE_DIRTY, "%s: written through a pin: DIRTY",
	       dn);
	is_int(pinfo(mm, a + 2 * PG).flags, ANON_RW, "%s: written by faults only: not DIRTY", dn);

	/* mprotect: the VMA splits in three and merges back; entries lose and keep WRITABLE. */
	ASSERT_EQ(pm_mprotect(mm, a + 2 * PG, PG, PM_PROT_READ), 0);
	is_int(pm_mm_maps(mm, 0, mi, 4), 3, "%s: mprotect of one page: three VMAs", dn);
	ok(mi[0].end == a + 2 * PG && mi[1].start == a + 2 * PG && mi[1].end == a + 3 * PG &&
		   mi[2].start == a + 3 * PG && mi[2].end == a + 16 * PG,
	   "%s: ... split at the page", dn);
	ok(mi[0].pgoff == a >> 12 && mi[1].pgoff == (a >> 12) + 2 && mi[2].pgoff == (a >> 12) + 3,
	   "%s: ... each pgoff its start >> 12", dn);
	ok(mi[1].prot == PM_PROT_READ && mi[1].rss_pages == 1 && mi[2].rss_pages == 1 &&
		   mi[0].rss_pages == 2,
	   "%s: ... each with its prot and Rss", dn);
	is_int(pinfo(mm, a + 2 * PG).flags, ANON_RW & ~PM_PAGE_WRITABLE,
	       "%s: pagemap: a read-only page is not WRITABLE, still exclusive", dn);
	ASSERT_EQ(pm_mprotect(mm, a + 3 * PG, PG, PM_PROT_NONE), 0);
	pi = pinfo(mm, a + 3 * PG);
	ok((pi.flags & (PM_PAGE_PRESENT | PM_PAGE_WRITABLE)) == PM_PAGE_PRESENT && pi.mapcount == 1,
	   "%s: pagemap: a PROT_NONE page is PRESENT, not WRITABLE", dn);
	ok(mincore_is(mm, a, "1111100000000000"), "%s: mincore: PROT_NONE pages are resident", dn);
	ASSERT_EQ(pm_mprotect(mm, a + 2 * PG, 2 * PG, RW), 0);
	is_int(pm_mm_maps(mm, 0, mi, 4), 1, "%s: mprotect back: the VMAs merge into one", dn);
	ok(mi[0].start == a && mi[0].end == a + 16 * PG && mi[0].pgoff == a >> 12 &&
		   mi[0].rss_pages == 4,
	   "%s: ... the whole range again, pgoff of its start", dn);

	/* MADV_DONTNEED empties; DONTFORK shows as dc on its own VMA. */
	ASSERT_EQ(pm_madvise(mm, a + PG, PG, PM_MADV_DONTNEED), 0);
	pi = pinfo(mm, a + PG);
	ok(pi.flags == 0 && pi.pfn == 0, "%s: DONTNEED: the entry is zeros", dn);
	is_int(vma_at(mm, a).rss_pages, 3, "%s: ... Rss 3", dn);
	ok(mincore_is(mm, a, "1011100000000000"), "%s: ... not resident", dn);
	ASSERT_EQ(pm_madvise(mm, a + 8 * PG, 8 * PG, PM_MADV_DONTFORK), 0);
	is_int(pm_mm_maps(mm, 0, mi, 4), 2, "%s: DONTFORK of the upper half: two VMAs", dn);
	ok(mi[0].vmflags == PM_VMF_ACCOUNT && mi[1].vmflags == (PM_VMF_ACCOUNT | PM_VMF_DONTCOPY) &&
		   mi[1].pgoff == (a >> 12) + 8,
	   "%s: ... the upper one dc", dn);
	ASSERT_EQ(pm_madvise(mm, a + 8 * PG, 8 * PG, PM_MADV_DOFORK), 0);
	is_int(pm_mm_maps(mm, 0, mi, 4), 1, "%s: DOFORK: one again", dn);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "anon");
}

/* ---- 3. fork: exclusive cleared, mapcount 2, pinned pages copied ---- */

static void test_fork(void)
{
	struct pm_machine *m = machine(32, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	struct pm_map_info mi[4];
	struct pm_page_info pp, cp;
	struct pm_page *pin;
	unsigned long a, b;

	ASSERT_TRUE(mm != NULL);
	a = pmt_map_anon(mm, 8 * PG, RW, false);
	b = pmt_map_anon(mm, 4 * PG, RW, false);
	pmt_touch(mm, a, 3 * PG);
	peek(mm, a + 3 * PG);
	pmt_touch(mm, b, PG);
	ASSERT_EQ(pm_madvise(mm, b, 4 * PG, PM_MADV_DONTFORK), 0);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin), 1);
	c = pmt_fork(mm);

	pp = pinfo(mm, a);
	cp = pinfo(c, a);
	is_int(pp.flags, ANON_RW | PM_PAGE_MAYBE_PINNED, "%s: fork: the pinned page stays the "
							 "parent's, exclusive", dn);
	ok(cp.pfn != pp.pfn && (cp.flags & ~PM_PAGE_WRITABLE) == (ANON_RW & ~PM_PAGE_WRITABLE) &&
		   cp.mapcount == 1,
	   "%s: ... the child has a copy of its own, exclusive, not pinned", dn);
	pp = pinfo(mm, a + PG);
	cp = pinfo(c, a + PG);
	is_int(pp.flags, PM_PAGE_PRESENT | PM_PAGE_ANON,
	       "%s: fork: a shared page is PRESENT ANON only in the parent", dn);
	is_int(cp.flags, PM_PAGE_PRESENT | PM_PAGE_ANON, "%s: ... and in the child", dn);
	ok(pp.pfn == cp.pfn && pp.mapcount == 2 && cp.mapcount == 2,
	   "%s: ... one pfn, kpagecount 2", dn);
	is_int(pinfo(c, a + 3 * PG).flags, ZERO_PG, "%s: ... the zero page is the child's too", dn);
	mi[0] = vma_at(c, a);
	ok(mi[0].start == a && mi[0].end == a + 8 * PG && mi[0].pgoff == a >> 12 &&
		   mi[0].rss_pages == 3 && mi[0].anon_pages == 3,
	   "%s: the child's maps: the VMA, its pgoff and Rss", dn);
	is_int(pm_mm_maps(c, 0, mi, 4), 1, "%s: ... the DONTFORK VMA is not the child's", dn);
	is_int(pm_mm_maps(mm, 0, mi, 4), 2, "%s: ... the parent has both", dn);
	ok((mi[0].vmflags | mi[1].vmflags) & PM_VMF_DONTCOPY,
	   "%s: ... one of them dc", dn);

	/* The child writes: its own page; the parent's is mapped once, still not AnonExclusive. */
	poke(c, a + PG);
	cp = pinfo(c, a + PG);
	pp = pinfo(mm, a + PG);
	ok(cp.flags == ANON_RW && cp.mapcount == 1 && cp.pfn != pp.pfn,
	   "%s: the child's COW: a new exclusive page", dn);
	ok(pp.flags == (PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_EXCLUSIVE) && pp.mapcount == 1,
	   "%s: ... the parent's: mapcount 1 (EXCLUSIVE), not AnonExclusive until it writes", dn);
	poke(mm, a + PG);
	ok(pinfo(mm, a + PG).flags == ANON_RW && pinfo(mm, a + PG).pfn == pp.pfn,
	   "%s: ... the parent's write reuses it", dn);
	pm_mm_destroy(c);
	pp = pinfo(mm, a + 2 * PG);
	ok(pp.mapcount == 1 && (pp.flags & PM_PAGE_EXCLUSIVE),
	   "%s: the child gone: mapcount 1 again", dn);
	pm_unpin_user_page(pin);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "fork");
}

/* ---- 4. THP: PMD-mapped, shared by fork, split into PTEs ---- */

static void test_thp(void)
{
	struct pm_machine *m = machine(64, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned thp = ANON_RW | PM_PAGE_THP;
	unsigned long a, pfn0, splits;
	struct pm_map_info mi[4];
	struct pm_page_info *pi;
	struct pm_page *pin;

	ASSERT_TRUE(mm != NULL);
	a = pmt_map_anon(mm, 2 * HP, RW, true);
	ASSERT_TRUE((a & (HP - 1)) == 0);
	poke(mm, a + 5 * PG);
	ASSERT_EQ(PMT_STAT(m, thp_faults), 1);
	pfn0 = pfn_at(mm, a);
	mi[0] = vma_at(mm, a);
	is_int(mi[0].vmflags, PM_VMF_ACCOUNT | PM_VMF_HUGEPAGE, "%s: THP: maps: ac hg", dn);
	ok(mi[0].rss_pages == 512 && mi[0].anon_pages == 512 && mi[0].anon_huge_pages == 512,
	   "%s: THP: Rss, Anonymous and AnonHugePages 512", dn);
	pi = pagemap(mm, a, 1024);
	is_int(entries_not(pi, 512, thp, 1, pfn0), -1,
	       "%s: THP: 512 entries PRESENT EXCL ANON THP AEXCL WRITABLE, consecutive pfns, "
	       "kpagecount 1", dn);
	is_int(entries_not(pi + 512, 512, 0, 0, 0), -1, "%s: THP: the next 2 MiB empty", dn);
	free(pi);
	ok(mincore_ones(mm, a, 1024, 512), "%s: THP: mincore 512 resident, 512 not", dn);
	pi = pagemap(mm, a + 100 * PG, 3);
	is_int(entries_not(pi, 3, thp, 1, pfn0 + 100), -1,
	       "%s: THP: pagemap from inside the leaf", dn);
	free(pi);

	ASSERT_EQ(pm_pin_user_pages_fast(mm, a + 7 * PG, 1, 0, &pin), 1);
	pi = pagemap(mm, a, 512);
	is_int(entries_not(pi, 512, thp | PM_PAGE_MAYBE_PINNED, 1, pfn0), -1,
	       "%s: THP: one page pinned: the whole folio MAYBE_PINNED", dn);
	free(pi);
	pm_unpin_user_page(pin);

	c = pmt_fork(mm);
	pi = pagemap(mm, a, 512);
	is_int(entries_not(pi, 512, PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP, 2, pfn0), -1,
	       "%s: THP after fork: PRESENT ANON THP, kpagecount 2 (two PMD mappings)", dn);
	free(pi);
	pi = pagemap(c, a, 512);
	is_int(entries_not(pi, 512, PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP, 2, pfn0), -1,
	       "%s: ... the child's the same", dn);
	free(pi);
	mi[0] = vma_at(c, a);
	ok(mi[0].anon_huge_pages == 512 && mi[0].vmflags == (PM_VMF_ACCOUNT | PM_VMF_HUGEPAGE),
	   "%s: ... the child's maps: AnonHugePages 512, hg", dn);
	pm_mm_destroy(c);
	poke(mm, a); /* the parent's write reuses the folio, AnonExclusive again */

	pi = pagemap(mm, a, 512);
	is_int(entries_not(pi, 512, thp, 1, pfn0), -1, "%s: the child gone, a write: as before", dn);
	free(pi);

	/* Split the PMD mapping: still a THP (the folio is whole), page by page. */
	splits = PMT_STAT(m, thp_splits);
	ASSERT_EQ(pm_mprotect(mm, a + PG, PG, PM_PROT_READ), 0);
	ASSERT_EQ(pm_mprotect(mm, a + PG, PG, RW), 0);
	is_int(PMT_STAT(m, thp_splits) - splits, 1, "%s: mprotect of one page split the PMD", dn);
	is_int(pm_mm_maps(mm, 0, mi, 4), 1, "%s: ... and the VMAs merged back", dn);
	ok(mi[0].rss_pages == 512 && mi[0].anon_pages == 512 && mi[0].anon_huge_pages == 0,
	   "%s: PTE-mapped THP: Rss and Anonymous 512, AnonHugePages 0", dn);
	pi = pagemap(mm, a, 512);
	is_int(entries_not(pi, 1, thp, 1, pfn0), -1, "%s: PTE-mapped THP: page 0 as before", dn);
	ok(pi[1].pfn == pfn0 + 1 && (pi[1].flags & ~PM_PAGE_WRITABLE) == (thp & ~PM_PAGE_WRITABLE),
	   "%s: ... page 1 (mprotected back) too", dn);
	is_int(entries_not(pi + 2, 510, thp, 1, pfn0 + 2), -1, "%s: ... and the 510 others", dn);
	free(pi);
	ok(mincore_ones(mm, a, 1024, 512), "%s: PTE-mapped THP: mincore 512 resident", dn);
	c = pmt_fork(mm);
	pi = pagemap(c, a + 2 * PG, 510);
	is_int(entries_not(pi, 510, PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP, 2, pfn0 + 2), -1,
	       "%s: PTE-mapped THP after fork: kpagecount 2 per page", dn);
	free(pi);
	pm_mm_destroy(c);
	ASSERT_EQ(pm_madvise(mm, a, 2 * HP, PM_MADV_NOHUGEPAGE), 0);
	is_int(vma_at(mm, a).vmflags, PM_VMF_ACCOUNT | PM_VMF_NOHUGEPAGE,
	       "%s: MADV_NOHUGEPAGE: nh, not hg", dn);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "thp");
}

/*
 * A fork child's write splits its PMD and copies one page: the parent's PMD still maps that
 * page of the folio, and only the parent maps it (kpagecount 1), but pagemap asks about the
 * leaf's head for every page of a PMD leaf, and the child still PTE-maps the head: not
 * exclusive (pagemap_pmd_range with CONFIG_PAGE_MAPCOUNT; Linux 6.18, found by make oracle).
 */
static void test_thp_pmd_head(void)
{
	struct pm_machine *m = machine(64, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned shared = PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_THP;
	struct pm_page_info *pi;
	unsigned long a, pfn0;

	ASSERT_TRUE(mm != NULL);
	a = pmt_map_anon(mm, HP, RW, true);
	ASSERT_TRUE((a & (HP - 1)) == 0);
	poke(mm, a + 0x67 * PG);
	pfn0 = pfn_at(mm, a);
	c = pmt_fork(mm);
	ASSERT_TRUE(c != NULL);
	poke(c, a + 0x15f * PG);
	pi = pagemap(mm, a, 512);
	is_int(entries_not(pi + 0x15f, 1, shared, 1, pfn0 + 0x15f), -1,
	       "%s: THP, a child's COW of one page: the parent's PMD maps it alone, kpagecount 1, "
	       "yet not EXCL (the head is mapped twice)", dn);
	is_int(entries_not(pi, 1, shared, 2, pfn0), -1, "%s: ... the head: kpagecount 2", dn);
	free(pi);
	is_int(pinfo(c, a + 0x15f * PG).flags, ANON_RW,
	       "%s: ... the child's copy: a 4 KiB page of its own", dn);
	pm_mm_destroy(c);
	is_int(pinfo(mm, a + 0x15f * PG).flags & PM_PAGE_EXCLUSIVE, PM_PAGE_EXCLUSIVE,
	       "%s: ... the child gone: EXCL", dn);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "thp pmd head");
}

/* ---- 5. shmem: shared and private mappings of an object, shared anonymous memory ---- */

static void test_shmem(void)
{
	struct pm_machine *m = machine(32, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	const unsigned shm = PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_DIRTY | PM_PAGE_WRITABLE;
	struct pm_page_info pi, cache;
	struct pm_map_info mi;
	long s1, s2, p, sa;

	ASSERT_TRUE(mm && f);
	s1 = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_SHARED, f, 2 * PG);
	ASSERT_TRUE(s1 > 0);
	poke(mm, s1);
	poke(mm, s1 + PG);
	mi = vma_at(mm, s1);
	ok(mi.start == (unsigned long)s1 && mi.end == s1 + 4 * PG && mi.prot == RW,
	   "%s: shmem: maps: start, end, prot", dn);
	is_int(mi.flags, PM_MAP_SHARED, "%s: shmem: maps: shared, not anonymous", dn);
	ok(mi.shmem == f, "%s: shmem: maps: the object", dn);
	is_int(mi.pgoff, 2, "%s: shmem: maps: pgoff is the offset in pages", dn);
	ok(mi.rss_pages == 2 && mi.anon_pages == 0 && mi.anon_huge_pages == 0,
	   "%s: shmem: maps: Rss 2, Anonymous 0", dn);
	cache = pinfo(mm, s1);
	is_int(cache.flags, shm, "%s: shmem: pagemap: PRESENT EXCLUSIVE DIRTY WRITABLE, not ANON",
	       dn);
	ok(cache.pfn == pfn_at(mm, s1) && cache.mapcount == 1, "%s: shmem: pfn, kpagecount 1", dn);

	/* A second mapping: the page cache shows in mincore before anything is mapped. */
	s2 = pm_mmap(mm, 0, 8 * PG, PM_PROT_READ, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(s2 > 0);
	ok(mincore_is(mm, s2, "00110000"), "%s: shmem: mincore: in the page cache, not mapped", dn);
	is_int(pinfo(mm, s2 + 2 * PG).flags, 0, "%s: ... pagemap: not mapped here", dn);
	peek(mm, s2 + 2 * PG);
	pi = pinfo(mm, s2 + 2 * PG);
	ok(pi.pfn == cache.pfn && pi.mapcount == 2 &&
		   pi.flags == (PM_PAGE_PRESENT | PM_PAGE_DIRTY),
	   "%s: shmem mapped twice: one pfn, kpagecount 2, not EXCLUSIVE, read-only here", dn);
	is_int(pinfo(mm, s1).mapcount, 2, "%s: ... the first mapping sees 2 as well", dn);

	/* A private mapping: the cache page read, a COW copy written. */
	p = pm_mmap(mm, 0, 8 * PG, RW, PM_MAP_PRIVATE, f, 0);
	ASSERT_TRUE(p > 0);
	peek(mm, p + 3 * PG);
	poke(mm, p + 2 * PG);
	pi = pinfo(mm, p + 3 * PG);
	ok(pi.pfn == pfn_at(mm, s1 + PG) && pi.flags == (PM_PAGE_PRESENT | PM_PAGE_DIRTY) &&
		   pi.mapcount == 2,
	   "%s: private mapping, read: the cache page, read-only, not ANON", dn);
	pi = pinfo(mm, p + 2 * PG);
	ok(pi.pfn != cache.pfn && pi.flags == ANON_RW && pi.mapcount == 1,
	   "%s: private mapping, written: an anonymous COW copy", dn);
	mi = vma_at(mm, p);
	ok(mi.flags == PM_MAP_PRIVATE && mi.shmem == f && mi.pgoff == 0,
	   "%s: private mapping: maps: private, the object, pgoff 0", dn);
	ok(mi.rss_pages == 2 && mi.anon_pages == 1, "%s: ... Rss 2, Anonymous 1 (the copy)", dn);
	ok(mincore_is(mm, p, "00110000"), "%s: ... mincore: the copy and the cache page", dn);
	ASSERT_EQ(pm_madvise(mm, p + 2 * PG, PG, PM_MADV_DONTNEED), 0);
	ok(mincore_is(mm, p, "00110000"), "%s: ... the copy dropped: the cache has the page", dn);

	ASSERT_EQ(pm_shmem_truncate(f, 0), 0);
	ok(mincore_is(mm, s2, "00000000"), "%s: truncated: nothing in the cache", dn);
	ok(pinfo(mm, s1).flags == 0 && vma_at(mm, s1).rss_pages == 0,
	   "%s: ... nothing mapped, Rss 0", dn);
	pm_munmap(mm, s1, 4 * PG);
	pm_munmap(mm, s2, 8 * PG);
	pm_munmap(mm, p, 8 * PG);
	pm_shmem_put(f);

	/* Shared anonymous memory: an internal object. */
	sa = pm_mmap(mm, 0, 4 * PG, RW, SHARED_ANON, NULL, 0);
	ASSERT_TRUE(sa > 0);
	poke(mm, sa);
	mi = vma_at(mm, sa);
	ok(mi.flags == (PM_MAP_SHARED | PM_MAP_ANONYMOUS) && mi.shmem != NULL && mi.pgoff == 0,
	   "%s: shared anonymous: maps: shared anonymous, its object, pgoff 0", dn);
	ok(mi.rss_pages == 1 && mi.anon_pages == 0, "%s: ... Rss 1, Anonymous 0", dn);
	is_int(pinfo(mm, sa).flags, shm, "%s: ... pagemap: not ANON", dn);
	ok(mincore_is(mm, sa, "1000"), "%s: ... mincore", dn);
	c = pmt_fork(mm);
	ok(pinfo(c, sa).flags == 0 && mincore_is(c, sa, "1000"),
	   "%s: ... fork copies no shared entry (Linux's vma_needs_copy); the cache has it", dn);
	poke(c, sa);
	pi = pinfo(c, sa);
	ok(pi.pfn == pinfo(mm, sa).pfn && pi.mapcount == 2 && pi.flags == (shm & ~PM_PAGE_EXCLUSIVE),
	   "%s: ... the child's fault maps the same page: kpagecount 2, writable", dn);
	ok(vma_at(c, sa).shmem == mi.shmem, "%s: ... the child maps the same object", dn);
	pm_mm_destroy(c);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "shmem");
}

/* ---- 6. hugetlb: private and shared, reservations ---- */

static void test_hugetlb(void)
{
	struct pm_machine *m = machine(64, 6);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned hpriv = ANON_RW | PM_PAGE_HUGETLB;
	const unsigned hshared = PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_HUGETLB |
				 PM_PAGE_DIRTY | PM_PAGE_WRITABLE;
	struct pm_shmem *hf = pm_shmem_create_hugetlb(m, 2 * HP);
	unsigned long pfn0;
	struct pm_map_info mi;
	struct pm_page_info *pi;
	struct pm_page *pin;
	long h, s1, s2, s3, sa;

	ASSERT_TRUE(mm && hf);
	is_int(reserved(m), 0, "%s: hugetlb: nothing reserved", dn);
	h = pm_mmap(mm, 0, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(h > 0);
	is_int(reserved(m), 2, "%s: a private mapping of 2 pages: HugePages_Rsvd 2", dn);
	poke(mm, h + 3 * PG);
	is_int(reserved(m), 1, "%s: one faulted: 1", dn);
	pfn0 = pfn_at(mm, h);
	mi = vma_at(mm, h);
	is_int(mi.flags, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB,
	       "%s: private hugetlb: maps: private anonymous hugetlb", dn);
	ok(mi.shmem == NULL && mi.pgoff == 0 && mi.prot == RW && mi.vmflags == 0,
	   "%s: ... no object shown, pgoff 0 (Linux's internal file), prot", dn);
	ok(mi.rss_pages == 0 && mi.anon_pages == 0 && mi.anon_huge_pages == 0,
	   "%s: ... Rss, Anonymous, AnonHugePages 0", dn);
	pi = pagemap(mm, h, 1024);
	is_int(entries_not(pi, 512, hpriv, 1, pfn0), -1,
	       "%s: private hugetlb: PRESENT EXCL ANON HUGETLB AEXCL WRITABLE, kpagecount 1", dn);
	is_int(entries_not(pi + 512, 512, 0, 0, 0), -1, "%s: ... the second page not faulted", dn);
	free(pi);
	ok(mincore_ones(mm, h, 1024, 512), "%s: ... mincore: the mapped page", dn);

	ASSERT_EQ(pm_pin_user_pages_fast(mm, h, 1, PM_FOLL_WRITE, &pin), 1);
	is_int(pinfo(mm, h + 300 * PG).flags, hpriv | PM_PAGE_MAYBE_PINNED,
	       "%s: ... pinned: MAYBE_PINNED", dn);
	pm_unpin_user_page(pin);
	c = pmt_fork(mm);
	pi = pagemap(c, h, 512);
	is_int(entries_not(pi, 512, PM_PAGE_PRESENT | PM_PAGE_ANON | PM_PAGE_HUGETLB, 2, pfn0), -1,
	       "%s: ... after fork: the page shared, kpagecount 2", dn);
	free(pi);
	is_int(pinfo(mm, h).mapcount, 2, "%s: ... in the parent too", dn);
	pm_mm_destroy(c);

	/* A hugetlb object mapped shared twice, and at an offset. */
	s1 = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_SHARED, hf, 0);
	ASSERT_TRUE(s1 > 0);
	is_int(reserved(m), 3, "%s: a shared mapping of 2 pages: HugePages_Rsvd +2", dn);
	poke(mm, s1);
	is_int(reserved(m), 2, "%s: ... one faulted: -1", dn);
	s2 = pm_mmap(mm, 0, 2 * HP, PM_PROT_READ, PM_MAP_SHARED, hf, 0);
	s3 = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, hf, HP);
	ASSERT_TRUE(s2 > 0 && s3 > 0);
	is_int(reserved(m), 2, "%s: ... more mappings of the same range reserve nothing more", dn);
	mi = vma_at(mm, s1);
	ok(mi.flags == (PM_MAP_SHARED | PM_MAP_HUGETLB) && mi.shmem == hf && mi.pgoff == 0 &&
		   mi.rss_pages == 0,
	   "%s: shared hugetlb: maps: shared hugetlb, the object, pgoff 0, Rss 0", dn);
	mi = vma_at(mm, s3);
	is_int(mi.pgoff, 512, "%s: ... at a 2 MiB offset: pgoff 512", dn);
	pi = pagemap(mm, s1, 512);
	is_int(entries_not(pi, 512, hshared, 1, pfn_at(mm, s1)), -1,
	       "%s: shared hugetlb: PRESENT EXCL HUGETLB DIRTY WRITABLE, not ANON", dn);
	free(pi);
	ok(mincore_ones(mm, s2, 1024, 0),
	   "%s: ... mincore of the other mapping: 0, hugetlb counts what is mapped here", dn);
	peek(mm, s2 + PG);
	ok(mincore_ones(mm, s2, 1024, 512), "%s: ... mapped there too: 1", dn);
	ok(pinfo(mm, s1).mapcount == 2 && pinfo(mm, s2).mapcount == 2 &&
		   pinfo(mm, s2).flags == (PM_PAGE_PRESENT | PM_PAGE_HUGETLB | PM_PAGE_DIRTY),
	   "%s: ... kpagecount 2 in both, read-only in the second", dn);

	sa = pm_mmap(mm, 0, HP, RW, SHARED_ANON | PM_MAP_HUGETLB, NULL, 0);
	ASSERT_TRUE(sa > 0);
	mi = vma_at(mm, sa);
	ok(mi.flags == (PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB) && mi.shmem != NULL &&
		   mi.shmem != hf && mi.pgoff == 0,
	   "%s: shared anonymous hugetlb: maps: its internal object, pgoff 0", dn);
	is_int(reserved(m), 3, "%s: ... reserves its page", dn);
	pm_munmap(mm, sa, HP);
	pm_munmap(mm, h, 2 * HP);
	is_int(reserved(m), 1, "%s: munmaps give back their reservations: the object's is left", dn);
	pm_mm_destroy(mm);
	pm_shmem_put(hf);
	is_int(reserved(m), 0, "%s: everything gone: HugePages_Rsvd 0", dn);
	pmt_end(m, free0, &pmt_end_returned, "hugetlb");
}

/*
 * fork gives the child a PMD table wherever the parent has one over a VMA it copies, entries
 * or not (Linux's copy_pmd_range allocates it before its loop). So in the child a shared
 * hugetlb page next to an anonymous VMA that fork copied, in the same 1 GiB, reads 0 (a none
 * entry: mincore_hugetlb), not the page cache's 1. Found by make oracle (range design, both
 * designs alike), Linux 6.18.
 */
static void test_fork_pmd_table_mincore(void)
{
	struct pm_machine *m = machine(64, 2);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned long a = 0x200000000000UL;

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mmap(mm, a, 4 * HP, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)a,
	       "%s: fork PMD table: 8 MiB anonymous", dn);
	poke(mm, a + HP + 5 * PG); /* an anon_vma, and the PMD table of this 1 GiB */
	is_int(pm_mmap(mm, a + HP, HP, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB |
		       PM_MAP_FIXED, NULL, 0), (long)(a + HP),
	       "%s: ... shared hugetlb over the faulted page: no anonymous page left", dn);
	peek(mm, a + HP);
	ok(mincore_ones(mm, a + HP, 512, 512), "%s: ... the parent's hugetlb page: 1", dn);
	c = pmt_fork(mm);
	ASSERT_TRUE(c != NULL);
	ok(mincore_ones(c, a + HP, 512, 0),
	   "%s: ... the child's: the PMD table came with the copied VMAs, a none entry: 0", dn);
	ok(mincore_ones(c, a, 512, 0), "%s: ... its anonymous pages: none: 0", dn);
	pm_mm_destroy(c);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "fork PMD table");
}

/*
 * So for a private hugetlb VMA that fork copies (it has an anon_vma) whose only leaf was
 * zapped: copy_hugetlb_page_range allocates the child's PMD table before it looks at the
 * entry, so the child's shared hugetlb page beside it reads 0. Found by make oracle (seed
 * 0x3535, sequence 13494, Linux's design, mincore/mincore-vec), Linux 6.18.
 */
static void test_fork_hugetlb_table_mincore(void)
{
	struct pm_machine *m = machine(64, 2);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned long a = 0x200000000000UL;

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mmap(mm, a, HP, RW, PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB |
		       PM_MAP_FIXED, NULL, 0), (long)a,
	       "%s: fork hugetlb table: shared hugetlb", dn);
	is_int(pm_mmap(mm, a + HP, HP, RW, PRIV | PM_MAP_HUGETLB | PM_MAP_FIXED, NULL, 0),
	       (long)(a + HP), "%s: ... private hugetlb beside it", dn);
	poke(mm, a + HP); /* an anon_vma, and the PMD table of this 1 GiB */
	is_int(pm_madvise(mm, a + HP, HP, PM_MADV_DONTNEED), 0,
	       "%s: ... its page zapped: the table stays", dn);
	c = pmt_fork(mm);
	ASSERT_TRUE(c != NULL);
	peek(mm, a);
	ok(mincore_ones(mm, a, 512, 512), "%s: ... the parent's shared page: 1", dn);
	ok(mincore_ones(c, a, 512, 0),
	   "%s: ... the child's: the table came with the private VMA, a none entry: 0", dn);
	pm_mm_destroy(c);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "fork hugetlb table");
}

/*
 * mincore of a shared hugetlb mapping where no PMD table reaches: a fork child's, which fork
 * did not copy (no anon_vma). walk_hugetlb_range finds no entry and calls the pte_hole every
 * mapping gets, which asks the page cache: the object's page is resident. Once a table is
 * made in that 1 GiB (a fault elsewhere, not a mapping: a table the range design's mmap made
 * reads as missing until then), the none entry there reads 0 (mincore_hugetlb); zaps leave
 * the table, the munmap that empties the 1 GiB takes it. Linux 6.18, checked by make oracle.
 */
static void test_hugetlb_fork_mincore(void)
{
	struct pm_machine *m = machine(64, 2);
	size_t free0 = pmt_free_pages(m);
	struct pm_shmem *hf = pm_shmem_create_hugetlb(m, HP);
	struct pm_mm *mm = pm_mm_create(m), *c;
	const unsigned long a = 0x200000000000UL;

	ASSERT_TRUE(mm && hf);
	is_int(pm_mmap(mm, a, HP, PM_PROT_READ, PM_MAP_SHARED | PM_MAP_FIXED, hf, 0), (long)a,
	       "%s: hugetlb fork mincore: a shared mapping at a 1 GiB boundary", dn);
	ok(mincore_ones(mm, a, 512, 0), "%s: ... nothing in the cache: 0", dn);
	peek(mm, a + 0xc9 * PG);
	ok(mincore_ones(mm, a, 512, 512), "%s: ... faulted: 1", dn);
	c = pmt_fork(mm);
	ASSERT_TRUE(c != NULL);
	is_int(pinfo(c, a).flags, 0, "%s: ... the child has no entry (fork copied none)", dn);
	ok(mincore_ones(c, a + 0xaf * PG, 13, 13),
	   "%s: ... the child's mincore: no table there, the page cache has it: 1", dn);
	is_int(pm_mmap(c, a + 4 * HP, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)(a + 4 * HP),
	       "%s: ... an anonymous page in the same 1 GiB", dn);
	ok(mincore_ones(c, a, 512, 512),
	   "%s: ... mapped, not faulted: still no PMD table there (none before a fault): 1", dn);
	poke(c, a + 4 * HP);
	ok(mincore_ones(c, a, 512, 0), "%s: ... faulted: a PMD table now, its none entry: 0", dn);
	peek(c, a);
	ok(mincore_ones(c, a, 512, 512), "%s: ... mapped in the child too: 1", dn);
	/* Clears leave the table, as Linux's do, until its 1 GiB holds no VMA. */
	is_int(pm_munmap(c, a + 4 * HP, PG), 0, "%s: ... the anonymous page unmapped", dn);
	ok(mincore_ones(c, a, 512, 512), "%s: ... the hugetlb page still mapped: 1", dn);
	is_int(pm_madvise(c, a, HP, PM_MADV_DONTNEED), 0, "%s: ... MADV_DONTNEED of it", dn);
	ok(mincore_ones(c, a, 512, 0),
	   "%s: ... zapped: the table stays while a VMA is in its 1 GiB, a none entry: 0", dn);
	is_int(pm_munmap(c, a, HP), 0, "%s: ... unmapped: the 1 GiB holds no VMA", dn);
	is_int(pm_mmap(c, a, HP, PM_PROT_READ, PM_MAP_SHARED | PM_MAP_FIXED, hf, 0), (long)a,
	       "%s: ... and mapped again", dn);
	ok(mincore_ones(c, a, 512, 512),
	   "%s: ... the table went with the last VMA: the page cache again, 1", dn);
	is_int(pm_madvise(mm, a, HP, PM_MADV_DONTNEED), 0,
	       "%s: ... the parent's one mapping in its 1 GiB: MADV_DONTNEED", dn);
	ok(mincore_ones(mm, a, 512, 0), "%s: ... the zap left the table, a none entry: 0", dn);
	pm_mm_destroy(c);
	pm_mm_destroy(mm);
	pm_shmem_put(hf);
	pmt_end(m, free0, &pmt_end_returned, "hugetlb fork mincore");
}

/* ---- 7. merges, and VMAs across the range design's 512 GiB ranges ---- */

static void test_merges(void)
{
	struct pm_machine *m = machine(32, 0);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, 16 * PG, 0);
	const unsigned long boundary = 1UL << 39; /* ranges 0 and 1 of the range design */
	struct pm_map_info mi[8];
	struct pm_page_info *pi;
	unsigned long a, s;

	ASSERT_TRUE(mm && f);
	a = pmt_map_anon(mm, 12 * PG, RW, false);
	ASSERT_EQ(pm_munmap(mm, a, 12 * PG), 0);
	ASSERT_EQ(pm_mmap(mm, a, 4 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), a);
	ASSERT_EQ(pm_mmap(mm, a + 4 * PG, 4 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), a + 4 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 1, "%s: two adjacent anonymous mappings: one VMA", dn);
	ok(mi[0].start == a && mi[0].end == a + 8 * PG && mi[0].pgoff == a >> 12,
	   "%s: ... its start, end and pgoff", dn);
	ASSERT_EQ(pm_mmap(mm, a + 8 * PG, 4 * PG, PM_PROT_READ, PRIV | PM_MAP_FIXED, NULL, 0),
		  a + 8 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 2, "%s: a neighbour of another prot: two", dn);
	ok(mi[1].start == a + 8 * PG && mi[1].pgoff == (a >> 12) + 8 && mi[1].prot == PM_PROT_READ,
	   "%s: ... the second's start, pgoff and prot", dn);
	is_int(pm_mm_maps(mm, 0, mi, 1), 1, "%s: max 1: only the first", dn);
	ASSERT_EQ(pm_mprotect(mm, a + 8 * PG, 4 * PG, RW), 0);
	is_int(pm_mm_maps(mm, 0, mi, 8), 1, "%s: mprotect to the same prot: they merge", dn);
	ok(mi[0].end == a + 12 * PG && mi[0].pgoff == a >> 12, "%s: ... into [a, a + 12 pages)",
	   dn);
	ASSERT_EQ(pm_munmap(mm, a + 5 * PG, PG), 0);
	is_int(pm_mm_maps(mm, 0, mi, 8), 2, "%s: munmap of a page in the middle: two", dn);
	ok(mi[0].end == a + 5 * PG && mi[1].start == a + 6 * PG && mi[1].pgoff == (a >> 12) + 6,
	   "%s: ... the upper one keeps its pgoff", dn);
	ASSERT_EQ(pm_munmap(mm, a, 12 * PG), 0);

	/* An object's mappings merge when their offsets follow on. */
	s = (unsigned long)pm_mmap(mm, 0, 12 * PG, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE((long)s > 0);
	ASSERT_EQ(pm_munmap(mm, s, 12 * PG), 0);
	ASSERT_EQ(pm_mmap(mm, s, 4 * PG, RW, PM_MAP_SHARED | PM_MAP_FIXED, f, 0), s);
	ASSERT_EQ(pm_mmap(mm, s + 4 * PG, 4 * PG, RW, PM_MAP_SHARED | PM_MAP_FIXED, f, 4 * PG),
		  s + 4 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 1, "%s: shmem at following offsets: one VMA", dn);
	ok(mi[0].end == s + 8 * PG && mi[0].pgoff == 0 && mi[0].shmem == f, "%s: ... pgoff 0", dn);
	ASSERT_EQ(pm_mmap(mm, s + 8 * PG, 4 * PG, RW, PM_MAP_SHARED | PM_MAP_FIXED, f, 12 * PG),
		  s + 8 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 2, "%s: ... at an offset that does not follow: two", dn);
	is_int(mi[1].pgoff, 12, "%s: ... the second's pgoff 12", dn);
	ASSERT_EQ(pm_munmap(mm, s, 12 * PG), 0);

	/* A VMA across the boundary of two ranges (one in Linux's design too). */
	a = boundary - 2 * PG;
	ASSERT_EQ(pm_mmap(mm, a, 4 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), a);
	pmt_touch(mm, a, 4 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 1, "%s: a VMA across 512 GiB: one entry", dn);
	ok(mi[0].start == a && mi[0].end == boundary + 2 * PG &&
		   mi[0].rss_pages == 4,
	   "%s: ... whole, Rss 4", dn);
	is_int(pm_mm_maps(mm, boundary + PG, mi, 8), 1, "%s: ... found from above the boundary", dn);
	ok(mi[0].start == a, "%s: ... with its start below it", dn);
	pi = pagemap(mm, a, 4);
	is_int(entries_not(pi, 4, ANON_RW, 1, 0), -1, "%s: ... pagemap across the boundary", dn);
	free(pi);
	ok(mincore_is(mm, a, "1111"), "%s: ... mincore across it", dn);
	ASSERT_EQ(pm_mmap(mm, boundary + 2 * PG, 2 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0),
		  boundary + 2 * PG);
	is_int(pm_mm_maps(mm, 0, mi, 8), 1, "%s: ... a neighbour above merges with it", dn);
	ok(mi[0].end == boundary + 4 * PG && mi[0].pgoff == a >> 12, "%s: ... pgoff kept", dn);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	pmt_end(m, free0, &pmt_end_returned, "merges");
}

/* ---- 8. walkers against faults, zaps and munmaps ---- */

struct race {
	struct pm_mm *mm;
	unsigned long a;	/* 4 MiB: 2 MiB THP-eligible, then 4 KiB pages */
	atomic_int stop;
	atomic_long errors, walks, changes;
};

static void *race_changer(void *arg)
{
	struct race *r = arg;
	unsigned long a = r->a;

	for (unsigned i = 0; !atomic_load(&r->stop); i++) {
		long got = pm_mmap(r->mm, a, 2 * HP, RW, PRIV | PM_MAP_FIXED, NULL, 0);

		if (got != (long)a) {
			pmt_error(&r->errors, "mmap: %ld", got);
			break;
		}
		pm_madvise(r->mm, a, HP, PM_MADV_HUGEPAGE);
		for (unsigned long off = 0; off < 2 * HP; off += 64 * PG) {
			char c = 1;

			if (pm_access(r->mm, a + off, &c, 1, !(i & 1)) != 1)
				pmt_error(&r->errors, "access at %#lx", a + off);
		}
		pm_madvise(r->mm, a + HP, HP, PM_MADV_DONTNEED);
		pm_mprotect(r->mm, a + PG, PG, PM_PROT_READ);
		pm_munmap(r->mm, a + HP / 2, HP);
		atomic_fetch_add(&r->changes, 1);
	}
	return NULL;
}

static void *race_walker(void *arg)
{
	struct race *r = arg;
	struct pm_page_info *pi = calloc(1024, sizeof(*pi));
	struct pm_map_info mi[8];
	unsigned char vec[1024];

	ASSERT_TRUE(pi != NULL);
	while (!atomic_load(&r->stop)) {
		long n = pm_pagemap(r->mm, r->a, 1024, pi), k;
		int mc;

		if (n != 1024)
			pmt_error(&r->errors, "pm_pagemap: %ld", n);
		for (long i = 0; i < n; i++)
			if ((pi[i].flags & PM_PAGE_PRESENT) && !(pi[i].flags & PM_PAGE_ZERO) &&
			    (pi[i].mapcount < 1 || !pi[i].pfn))
				pmt_error(&r->errors, "page %ld present, mapcount %u pfn %#llx", i,
					  pi[i].mapcount, (unsigned long long)pi[i].pfn);
		k = pm_mm_maps(r->mm, 0, mi, 8);
		if (k < 0 || k > 8)
			pmt_error(&r->errors, "pm_mm_maps: %ld", k);
		for (long i = 0; i < k; i++)
			if (mi[i].rss_pages > (mi[i].end - mi[i].start) / PG ||
			    mi[i].anon_huge_pages > mi[i].anon_pages)
				pmt_error(&r->errors, "VMA %ld: Rss %lu over %lu pages", i,
					  mi[i].rss_pages, (mi[i].end - mi[i].start) / PG);
		mc = pm_mincore(r->mm, r->a, 1024 * PG, vec);
		if (mc && mc != -ENOMEM)
			pmt_error(&r->errors, "pm_mincore: %d", mc);
		atomic_fetch_add(&r->walks, 1);
	}
	free(pi);
	return NULL;
}

static void test_race(void)
{
	struct pm_machine *m = machine(64, 0);
	size_t free0 = pmt_free_pages(m);
	struct race r = { .mm = pm_mm_create(m) };
	pthread_t t[3];
	long a;

	ASSERT_TRUE(r.mm != NULL);
	a = pm_mmap(r.mm, 0, 2 * HP, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0 && !(a & (HP - 1)));
	r.a = (unsigned long)a;
	pthread_create(&t[0], NULL, race_changer, &r);
	pthread_create(&t[1], NULL, race_walker, &r);
	pthread_create(&t[2], NULL, race_walker, &r);
	pmt_wait_until(tap_now() + 0.5, &r.errors);
	atomic_store(&r.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	ok(atomic_load(&r.errors) == 0 && atomic_load(&r.walks) > 0 && atomic_load(&r.changes) > 0,
	   "%s: walkers against mmap, faults, DONTNEED, mprotect, munmap: %ld walks, %ld rounds "
	   "of changes, no error", dn, atomic_load(&r.walks), atomic_load(&r.changes));
	pm_mm_destroy(r.mm);
	pmt_end(m, free0, &pmt_end_returned, "race");
}

int main(void)
{
	static const unsigned designs[] = { PM_MACHINE_LINUX_MM, PM_MACHINE_RANGE_MM };

	plan_no_plan();
	for (unsigned i = 0; i < 2; i++) {
		design = designs[i];
		dn = design == PM_MACHINE_RANGE_MM ? "range" : "linux";
		test_errors();
		test_anon();
		test_fork();
		test_thp();
		test_thp_pmd_head();
		test_shmem();
		test_hugetlb();
		test_hugetlb_fork_mincore();
		test_fork_pmd_table_mincore();
		test_fork_hugetlb_table_mincore();
		test_merges();
		test_race();
	}
	return done_testing();
}
