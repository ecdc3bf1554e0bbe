// SPDX-License-Identifier: MIT
/*
 * test_madvise.c - the third round's advice, each case from Linux 6.18's mm/madvise.c, the
 * madvise(2) manual and tools/testing/selftests/mm/madv_populate.c, in both designs whatever
 * the environment picks:
 *
 *   populate	MADV_POPULATE_READ/WRITE: madv_populate.c's prot, holes, read and write cases;
 *		PROT_NONE and a read-only shared mapping -EINVAL; a fault that would SIGBUS
 *		(past a shmem object's end, a NORESERVE hugetlb mapping with no pool page)
 *		-EFAULT with the pages before it populated; a private file mapping written
 *		gets its own copies; no reference is left behind
 *   popfail	POPULATE_WRITE with the n-th allocation failing: -ENOMEM, what was faulted
 *		stays, nothing leaks, and the call succeeds once memory is back
 *   wipe	MADV_WIPEONFORK/KEEPONFORK: the child's range is empty (no page, zeros), the
 *		parent keeps its data, the child's VMA keeps the flag (wf in pm_mm_maps);
 *		part of a VMA splits it, KEEPONFORK merges it back; only private anonymous
 *		memory (shared anonymous, a file, hugetlb: -EINVAL); a hole -ENOMEM after
 *		the rest was done
 *   free	MADV_FREE: contents stay (no reclaim), the folio's dirty flag clears; a page
 *		shared with a fork child, and a THP covered in part, keep theirs; a whole THP
 *		clears; -EINVAL on shared anonymous, shmem, private file and hugetlb memory
 *   remove	MADV_REMOVE: a hole punched in shmem reads zeros in every mapping, the size
 *		stays, private COW copies stay, a pin holder keeps its data, the limit's
 *		charge comes back; shared anonymous memory too; private anonymous -EINVAL,
 *		a private mapping of an object -EACCES, a hole -ENOMEM; hugetlb: whole 2 MiB
 *		pages only, back to the pool
 *
 * Every case failed before the change (the advice was -EINVAL). "-t NAME" runs one group.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define SIZE (2 * MiB) /* madv_populate.c's SIZE */
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define SHANON (PM_MAP_SHARED | PM_MAP_ANONYMOUS)


static unsigned cur; /* the design of the group running */
#define DN (pmt_designs[cur].name)

static struct pm_machine *machine(size_t mib, size_t nr_huge)
{
	struct pm_config cfg = { .mem_bytes = mib * MiB, .nr_hugepages = nr_huge,
				 .flags = pmt_designs[cur].flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

static struct pm_page_info pinfo(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(mm, addr, 1, &pi), 1);
	return pi;
}

/* Every page of [addr, addr + len) present (madv_populate.c's range_is_populated). */
static bool populated(struct pm_mm *mm, unsigned long addr, size_t len)
{
	for (size_t off = 0; off < len; off += PG)
		if (!(pinfo(mm, addr + off).flags & PM_PAGE_PRESENT))
			return false;
	return true;
}

/* No page of [addr, addr + len) present (range_is_not_populated). */
static bool not_populated(struct pm_mm *mm, unsigned long addr, size_t len)
{
	for (size_t off = 0; off < len; off += PG)
		if (pinfo(mm, addr + off).flags & PM_PAGE_PRESENT)
			return false;
	return true;
}

/* Every page present, writable and a real anonymous page (no zero page). */
static bool populated_writable(struct pm_mm *mm, unsigned long addr, size_t len)
{
	for (size_t off = 0; off < len; off += PG) {
		unsigned f = pinfo(mm, addr + off).flags;

		if (!(f & PM_PAGE_PRESENT) || !(f & PM_PAGE_WRITABLE) || (f & PM_PAGE_ZERO))
			return false;
	}
	return true;
}

static long map(struct pm_mm *mm, size_t len, int prot, int flags, struct pm_shmem *f)
{
	long a = pm_mmap(mm, 0, len, prot, flags, f, 0);

	ASSERT_TRUE(a > 0);
	return a;
}

static unsigned vmflags_at(struct pm_mm *mm, unsigned long addr, unsigned long *start,
			   unsigned long *end)
{
	struct pm_map_info mi;

	ASSERT_EQ(pm_mm_maps(mm, addr, &mi, 1), 1);
	if (start)
		*start = mi.start;
	if (end)
		*end = mi.end;
	return mi.vmflags;
}

/* ---- MADV_POPULATE_READ / MADV_POPULATE_WRITE ---- */

static void test_populate(void)
{
	struct pm_machine *m = machine(64, 2);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f;
	unsigned long a;

	/* madv_populate.c test_prot_read */
	a = (unsigned long)map(mm, SIZE, PM_PROT_READ, PRIV, NULL);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_READ), 0,
	       "%s: POPULATE_READ with PROT_READ", DN);
	ok(populated(mm, a, SIZE), "%s: ... every page present", DN);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_WRITE), -EINVAL,
	       "%s: POPULATE_WRITE with PROT_READ -EINVAL", DN);
	pm_munmap(mm, a, SIZE);

	/* test_prot_write */
	a = (unsigned long)map(mm, SIZE, PM_PROT_WRITE, PRIV, NULL);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_READ), -EINVAL,
	       "%s: POPULATE_READ with PROT_WRITE -EINVAL", DN);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_WRITE), 0,
	       "%s: POPULATE_WRITE with PROT_WRITE", DN);
	ok(populated_writable(mm, a, SIZE), "%s: ... every page writable", DN);
	pm_munmap(mm, a, SIZE);

	/* PROT_NONE: neither access is allowed */
	a = (unsigned long)map(mm, SIZE, PM_PROT_NONE, PRIV, NULL);
	is_int(pm_madvise(mm, a, PG, PM_MADV_POPULATE_READ), -EINVAL,
	       "%s: POPULATE_READ with PROT_NONE -EINVAL", DN);
	is_int(pm_madvise(mm, a, PG, PM_MADV_POPULATE_WRITE), -EINVAL,
	       "%s: POPULATE_WRITE with PROT_NONE -EINVAL", DN);
	pm_munmap(mm, a, SIZE);

	/* test_holes: a missing first, last or middle page is -ENOMEM for both */
	{
		static const unsigned long holes[] = { 0, SIZE - PG, SIZE / 2 };
		static const char *const where[] = { "first", "last", "middle" };

		for (unsigned i = 0; i < 3; i++) {
			a = (unsigned long)map(mm, SIZE, RW, PRIV, NULL);
			ASSERT_EQ(pm_munmap(mm, a + holes[i], PG), 0);
			is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_READ), -ENOMEM,
			       "%s: POPULATE_READ with a hole at the %s page -ENOMEM", DN,
			       where[i]);
			is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_WRITE), -ENOMEM,
			       "%s: POPULATE_WRITE with a hole at the %s page -ENOMEM", DN,
			       where[i]);
			if (holes[i])
				ok(populated_writable(mm, a, holes[i]),
				   "%s: ... the pages before the %s hole are populated", DN,
				   where[i]);
			pm_munmap(mm, a, SIZE);
		}
	}

	/* test_populate_read, test_populate_write */
	a = (unsigned long)map(mm, SIZE, RW, PRIV, NULL);
	ok(not_populated(mm, a, SIZE), "%s: a new mapping is not populated", DN);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_READ), 0, "%s: POPULATE_READ", DN);
	ok(populated(mm, a, SIZE), "%s: ... populated (zero pages)", DN);
	ok(pinfo(mm, a).flags & PM_PAGE_ZERO, "%s: ... a read maps the zero page", DN);
	pm_munmap(mm, a, SIZE);
	a = (unsigned long)map(mm, SIZE, RW, PRIV, NULL);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_WRITE), 0, "%s: POPULATE_WRITE", DN);
	ok(populated_writable(mm, a, SIZE), "%s: ... populated with writable pages", DN);
	ok(!(pinfo(mm, a).flags & PM_PAGE_MAYBE_PINNED), "%s: ... and not pinned", DN);
	is_int(pinfo(mm, a).mapcount, 1, "%s: ... mapped once", DN);
	/* Over a populated range both are no-ops that succeed. */
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_WRITE), 0,
	       "%s: POPULATE_WRITE again", DN);
	is_int(pm_madvise(mm, a, SIZE, PM_MADV_POPULATE_READ), 0,
	       "%s: POPULATE_READ of written pages", DN);
	is_int(pm_madvise(mm, a + 1, PG, PM_MADV_POPULATE_READ), -EINVAL,
	       "%s: an unaligned start -EINVAL", DN);
	is_int(pm_madvise(mm, a, 0, PM_MADV_POPULATE_WRITE), 0, "%s: length 0 is 0", DN);
	pm_munmap(mm, a, SIZE);

	/* An object: a shared mapping past its end SIGBUSes there: -EFAULT */
	f = pm_shmem_create(m, PG, 0);
	a = (unsigned long)map(mm, 4 * PG, RW, PM_MAP_SHARED, f);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_POPULATE_READ), -EFAULT,
	       "%s: POPULATE_READ past a shmem object's end -EFAULT", DN);
	ok(populated(mm, a, PG) && not_populated(mm, a + PG, 3 * PG),
	   "%s: ... the page inside it is populated", DN);
	is_int(pm_madvise(mm, a, PG, PM_MADV_POPULATE_WRITE), 0,
	       "%s: POPULATE_WRITE of a shared page", DN);
	ok(pinfo(mm, a).flags & PM_PAGE_WRITABLE, "%s: ... mapped writable", DN);
	pm_munmap(mm, a, 4 * PG);
	/* A read-only shared mapping cannot be populated for write */
	a = (unsigned long)map(mm, PG, PM_PROT_READ, PM_MAP_SHARED, f);
	is_int(pm_madvise(mm, a, PG, PM_MADV_POPULATE_WRITE), -EINVAL,
	       "%s: POPULATE_WRITE of a read-only shared mapping -EINVAL", DN);
	pm_munmap(mm, a, PG);
	/* A private mapping of it: POPULATE_WRITE breaks COW, the object is untouched */
	a = (unsigned long)map(mm, PG, RW, PM_MAP_SHARED, f);
	ASSERT_EQ(pmt_poke(mm, a, 'o'), 1);
	{
		unsigned long p = (unsigned long)map(mm, PG, RW, PM_MAP_PRIVATE, f);

		is_int(pm_madvise(mm, p, PG, PM_MADV_POPULATE_READ), 0,
		       "%s: POPULATE_READ of a private file mapping", DN);
		ok(!(pinfo(mm, p).flags & PM_PAGE_ANON), "%s: ... maps the object's page", DN);
		is_int(pm_madvise(mm, p, PG, PM_MADV_POPULATE_WRITE), 0,
		       "%s: POPULATE_WRITE of a private file mapping", DN);
		ok((pinfo(mm, p).flags & (PM_PAGE_ANON | PM_PAGE_WRITABLE)) ==
			   (PM_PAGE_ANON | PM_PAGE_WRITABLE) && pmt_peek(mm, p) == 'o',
		   "%s: ... a private copy of it, writable, with its data", DN);
		ASSERT_EQ(pmt_poke(mm, p, 'p'), 1);
		is_int(pmt_peek(mm, a), 'o', "%s: ... the object is untouched", DN);
		pm_munmap(mm, p, PG);
	}
	pm_munmap(mm, a, PG);
	pm_shmem_put(f);

	/* hugetlb: a NORESERVE mapping with the pool taken SIGBUSes: -EFAULT */
	{
		long h1 = pm_mmap(mm, 0, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);
		long h2 = pm_mmap(mm, 0, HP, RW, PRIV | PM_MAP_HUGETLB | PM_MAP_NORESERVE, NULL, 0);

		ASSERT_TRUE(h1 > 0 && h2 > 0);
		is_int(pm_madvise(mm, (unsigned long)h1, 2 * HP, PM_MADV_POPULATE_WRITE), 0,
		       "%s: POPULATE_WRITE of a reserved hugetlb mapping", DN);
		ok(pinfo(mm, (unsigned long)h1 + HP).flags & PM_PAGE_HUGETLB,
		   "%s: ... its pages are mapped", DN);
		is_int(pm_madvise(mm, (unsigned long)h2, HP, PM_MADV_POPULATE_READ), -EFAULT,
		       "%s: POPULATE_READ of NORESERVE hugetlb with no pool page -EFAULT", DN);
		pm_munmap(mm, (unsigned long)h1, 2 * HP);
		is_int(pm_madvise(mm, (unsigned long)h2, HP, PM_MADV_POPULATE_WRITE), 0,
		       "%s: ... and 0 once a pool page is free", DN);
		pm_munmap(mm, (unsigned long)h2, HP);
	}

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 2, "populate");
}

/*
 * POPULATE_WRITE as each of its allocations fails in turn (issue 9's walk), each time in a
 * new address space, so that page tables and pages both come to fail. As Linux's
 * madvise_populate, a failure after the first page of a GUP call ends that call short and the
 * next call starts at the failed page: a one-time failure there is retried and the advice
 * succeeds; a failure at the first page is -ENOMEM.
 */
static void test_populate_failinject(void)
{
	struct pm_machine *m = machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	bool errors_ok = true, some_enomem = false, some_retried = false, checks = true;
	const size_t len = 256 * PG;
	long n;

	for (n = 1; n < 1000; n++) {
		struct pm_mm *mm = pm_mm_create(m);
		unsigned long a = (unsigned long)map(mm, len, RW, PRIV, NULL);
		unsigned long failures = PMT_STAT(m, alloc_failures);
		bool failed;
		int ret;

		pm_fail_nth(m, n);
		ret = pm_madvise(mm, a, len, PM_MADV_POPULATE_WRITE);
		pm_fail_nth(m, 0);
		failed = PMT_STAT(m, alloc_failures) != failures;
		if (ret && ret != -ENOMEM)
			errors_ok = false;
		if (ret == -ENOMEM)
			some_enomem = true;
		if (!ret && failed) {
			some_retried = true;
			if (!populated_writable(mm, a, len))
				errors_ok = false;
		}
		if (pm_machine_check(m))
			checks = false;
		/* Whatever was faulted stays usable. */
		ASSERT_EQ(pm_madvise(mm, a, len, PM_MADV_POPULATE_WRITE), 0);
		pm_mm_destroy(mm);
		if (!failed)
			break; /* the call made fewer than n allocations: the walk is done */
	}
	ok(n > 1 && n < 1000, "%s: POPULATE_WRITE walked %ld allocations", DN, n - 1);
	ok(errors_ok, "%s: each run is 0 with all populated, or -ENOMEM", DN);
	ok(some_enomem, "%s: a failure at the first page is -ENOMEM", DN);
	ok(some_retried, "%s: a failure after it is retried by the next call, as Linux's loop",
	   DN);
	ok(checks, "%s: pm_machine_check passes after each", DN);
	pmt_end(m, free0, &pmt_end_returned, "popfail");
}

/* ---- MADV_WIPEONFORK / MADV_KEEPONFORK ---- */

static void test_wipeonfork(void)
{
	struct pm_machine *m = machine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child, *grandchild;
	unsigned long a = (unsigned long)map(mm, 4 * PG, RW, PRIV, NULL), s, e;
	struct pm_shmem *f;
	long x;

	for (unsigned i = 0; i < 4; i++)
		ASSERT_EQ(pmt_poke(mm, a + i * PG, (char)('a' + i)), 1);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_WIPEONFORK), 0, "%s: WIPEONFORK", DN);
	ok(vmflags_at(mm, a, NULL, NULL) & PM_VMF_WIPEONFORK, "%s: ... shown as wf", DN);
	child = pmt_fork(mm);
	ok(not_populated(child, a, 4 * PG), "%s: the child has no page there", DN);
	is_int(pmt_peek(child, a + PG), 0, "%s: ... and reads zeros", DN);
	ok(vmflags_at(child, a, NULL, NULL) & PM_VMF_WIPEONFORK,
	   "%s: ... its VMA keeps the flag", DN);
	is_int(pmt_peek(mm, a + PG), 'b', "%s: the parent keeps its data", DN);
	ASSERT_EQ(pmt_poke(child, a, 'c'), 1);
	grandchild = pmt_fork(child);
	is_int(pmt_peek(grandchild, a), 0, "%s: the child's own fork wipes it again", DN);
	pm_mm_destroy(grandchild);
	pm_mm_destroy(child);

	/* Part of the VMA: split, only that part is wiped; KEEPONFORK merges it back */
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_KEEPONFORK), 0, "%s: KEEPONFORK", DN);
	ok(!(vmflags_at(mm, a, NULL, NULL) & PM_VMF_WIPEONFORK), "%s: ... wf cleared", DN);
	is_int(pm_madvise(mm, a + PG, PG, PM_MADV_WIPEONFORK), 0,
	       "%s: WIPEONFORK of one page", DN);
	vmflags_at(mm, a + PG, &s, &e);
	ok(s == a + PG && e == a + 2 * PG, "%s: ... splits the VMA around it", DN);
	child = pmt_fork(mm);
	ok(pmt_peek(child, a) == 'a' && pmt_peek(child, a + PG) == 0 &&
		   pmt_peek(child, a + 2 * PG) == 'c',
	   "%s: the child gets only that page empty", DN);
	pm_mm_destroy(child);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_KEEPONFORK), 0, "%s: KEEPONFORK of all", DN);
	vmflags_at(mm, a, &s, &e);
	ok(s == a && e == a + 4 * PG, "%s: ... one VMA again", DN);
	child = pmt_fork(mm);
	is_int(pmt_peek(child, a + PG), 'b', "%s: ... and the child inherits the page", DN);
	pm_mm_destroy(child);

	/* A hole: the mapped parts change, then -ENOMEM */
	ASSERT_EQ(pm_munmap(mm, a + PG, PG), 0);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_WIPEONFORK), -ENOMEM,
	       "%s: WIPEONFORK over a hole -ENOMEM", DN);
	ok((vmflags_at(mm, a, NULL, NULL) & PM_VMF_WIPEONFORK) &&
		   (vmflags_at(mm, a + 2 * PG, NULL, NULL) & PM_VMF_WIPEONFORK),
	   "%s: ... after the mapped parts changed", DN);
	pm_munmap(mm, a, 4 * PG);

	/* Only private anonymous memory */
	x = map(mm, PG, RW, SHANON, NULL);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_WIPEONFORK), -EINVAL,
	       "%s: WIPEONFORK of shared anonymous memory -EINVAL", DN);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_KEEPONFORK), 0,
	       "%s: KEEPONFORK of it is 0", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	f = pm_shmem_create(m, PG, 0);
	x = map(mm, PG, RW, PM_MAP_PRIVATE, f);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_WIPEONFORK), -EINVAL,
	       "%s: WIPEONFORK of a private file mapping -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	pm_shmem_put(f);
	x = map(mm, HP, RW, PRIV | PM_MAP_HUGETLB, NULL);
	is_int(pm_madvise(mm, (unsigned long)x, HP, PM_MADV_WIPEONFORK), -EINVAL,
	       "%s: WIPEONFORK of private hugetlb memory -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, HP);

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "wipe");
}

/* ---- MADV_FREE ---- */

/* Mark the page at @addr dirty as Linux's FOLL_WRITE GUP does. */
static void dirty_by_gup(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page *pg;

	ASSERT_EQ(pm_get_user_pages(mm, addr, 1, PM_FOLL_WRITE, &pg), 1);
	pm_put_page(pg);
}

static void test_free(void)
{
	struct pm_machine *m = machine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	unsigned long a = (unsigned long)map(mm, 4 * PG, RW, PRIV, NULL);
	struct pm_shmem *f;
	long x;

	for (unsigned i = 0; i < 4; i++) {
		ASSERT_EQ(pmt_poke(mm, a + i * PG, (char)('a' + i)), 1);
		dirty_by_gup(mm, a + i * PG);
	}
	ok(pinfo(mm, a).flags & PM_PAGE_DIRTY, "%s: a GUP write dirties the folio", DN);
	is_int(pm_madvise(mm, a, 2 * PG, PM_MADV_FREE), 0, "%s: FREE", DN);
	ok(!(pinfo(mm, a).flags & PM_PAGE_DIRTY) && !(pinfo(mm, a + PG).flags & PM_PAGE_DIRTY),
	   "%s: ... the freed folios are clean", DN);
	ok(pinfo(mm, a + 2 * PG).flags & PM_PAGE_DIRTY, "%s: ... the others still dirty", DN);
	ok(pmt_peek(mm, a) == 'a' && pmt_peek(mm, a + PG) == 'b',
	   "%s: ... and their contents stay (no reclaim)", DN);
	ASSERT_EQ(pmt_poke(mm, a, 'z'), 1);
	is_int(pmt_peek(mm, a), 'z', "%s: a freed page can be written again", DN);
	ok(!(pinfo(mm, a).flags & PM_PAGE_DIRTY), "%s: ... a user write dirties only the PTE",
	   DN);
	dirty_by_gup(mm, a);
	ok(pinfo(mm, a).flags & PM_PAGE_DIRTY, "%s: ... a GUP write the folio", DN);

	/* Shared with a fork child: left dirty */
	child = pmt_fork(mm);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_FREE), 0, "%s: FREE of pages a child shares",
	       DN);
	ok(pinfo(mm, a).flags & PM_PAGE_DIRTY, "%s: ... leaves them dirty", DN);
	is_int(pmt_peek(child, a), 'z', "%s: ... and the child's view as it was", DN);
	pm_mm_destroy(child);

	/* A hole: the mapped parts are done, then -ENOMEM */
	dirty_by_gup(mm, a + 3 * PG);
	ASSERT_EQ(pm_munmap(mm, a + PG, PG), 0);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_FREE), -ENOMEM, "%s: FREE over a hole -ENOMEM",
	       DN);
	ok(!(pinfo(mm, a + 3 * PG).flags & PM_PAGE_DIRTY), "%s: ... past it done too", DN);
	pm_munmap(mm, a, 4 * PG);

	/* A THP: a whole leaf clears and stays whole; a part splits it (Linux's split_folio:
	 * test_regress_madv_free_split.c has the rest) and its page freed is clean */
	a = pmt_map_anon(mm, HP, RW, true);
	ASSERT_EQ(pmt_poke(mm, a, 1), 1);
	if (pmt_order_at(mm, a) == 9) {
		dirty_by_gup(mm, a);
		is_int(pm_madvise(mm, a, HP, PM_MADV_FREE), 0, "%s: FREE of a whole THP", DN);
		ok(!(pinfo(mm, a).flags & PM_PAGE_DIRTY) && (pinfo(mm, a).flags & PM_PAGE_THP),
		   "%s: ... clears it, still mapped whole", DN);
		is_int(pmt_peek(mm, a), 1, "%s: ... with its contents", DN);
		dirty_by_gup(mm, a);
		is_int(pm_madvise(mm, a, PG, PM_MADV_FREE), 0, "%s: FREE of part of a THP", DN);
		ok(!(pinfo(mm, a).flags & (PM_PAGE_DIRTY | PM_PAGE_THP)),
		   "%s: ... splits it; the page freed is clean", DN);
		is_int(pmt_peek(mm, a), 1, "%s: ... with its contents", DN);
	} else {
		skip(6, "no THP");
	}
	pm_munmap(mm, a, HP);

	/* Only private anonymous memory */
	x = map(mm, PG, RW, SHANON, NULL);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_FREE), -EINVAL,
	       "%s: FREE of shared anonymous memory -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	f = pm_shmem_create(m, PG, 0);
	x = map(mm, PG, RW, PM_MAP_SHARED, f);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_FREE), -EINVAL,
	       "%s: FREE of shmem -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	x = map(mm, PG, RW, PM_MAP_PRIVATE, f);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_FREE), -EINVAL,
	       "%s: FREE of a private file mapping -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	pm_shmem_put(f);
	x = map(mm, HP, RW, PRIV | PM_MAP_HUGETLB, NULL);
	is_int(pm_madvise(mm, (unsigned long)x, HP, PM_MADV_FREE), -EINVAL,
	       "%s: FREE of hugetlb memory -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, HP);

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "free");
}

/* ---- MADV_REMOVE ---- */

static void test_remove(void)
{
	struct pm_machine *m = machine(64, 4);
	size_t free0 = pm_machine_free_pages(m), total, hfree;
	struct pm_mm *mm = pm_mm_create(m), *other = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 4 * PG);
	unsigned long a = (unsigned long)map(mm, 4 * PG, RW, PM_MAP_SHARED, f);
	unsigned long b = (unsigned long)map(other, 4 * PG, PM_PROT_READ, PM_MAP_SHARED, f);
	unsigned long c = (unsigned long)map(mm, 4 * PG, RW, PM_MAP_PRIVATE, f);
	struct pm_page *pin;
	long x;

	for (unsigned i = 0; i < 4; i++)
		ASSERT_EQ(pmt_poke(mm, a + i * PG, (char)('a' + i)), 1);
	for (unsigned i = 0; i < 4; i++)
		ASSERT_EQ(pmt_peek(other, b + i * PG), 'a' + (int)i);
	ASSERT_EQ(pmt_poke(mm, c + PG, 'P'), 1);     /* a private copy of page 1 */
	ASSERT_EQ(pmt_peek(mm, c + 2 * PG), 'c');    /* page 2 mapped from the object */
	ASSERT_EQ(pm_pin_user_pages(mm, a + 2 * PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin),
		  1);

	is_int(pm_madvise(other, b + PG, 2 * PG, PM_MADV_REMOVE), 0,
	       "%s: REMOVE through a read-only shared mapping (VM_MAYWRITE)", DN);
	ok(pmt_peek(mm, a + PG) == 0 && pmt_peek(mm, a + 2 * PG) == 0 &&
		   pmt_peek(other, b + PG) == 0 && pmt_peek(other, b + 2 * PG) == 0,
	   "%s: ... the hole reads zeros in every shared mapping", DN);
	ok(pmt_peek(mm, a) == 'a' && pmt_peek(mm, a + 3 * PG) == 'd',
	   "%s: ... the pages around it keep their data", DN);
	is_int(pmt_peek(mm, c + PG), 'P', "%s: ... a private COW copy stays", DN);
	is_int(pmt_peek(mm, c + 2 * PG), 0, "%s: ... a private mapping of the object sees zero",
	       DN);
	is_int(*(char *)pm_page_address(pin), 'c', "%s: ... a pin holder keeps its data", DN);
	pm_unpin_user_page(pin);
	/* The limit's charge came back: all four pages fit again */
	for (unsigned i = 0; i < 4; i++)
		ASSERT_EQ(pmt_poke(mm, a + i * PG, 'x'), 1);
	ok(1, "%s: ... the object's limit has room for the hole again", DN);
	{
		unsigned char vec[4];

		ASSERT_EQ(pm_madvise(mm, a, 4 * PG, PM_MADV_REMOVE), 0);
		pm_munmap(mm, c, 4 * PG);
		ASSERT_EQ(pm_munmap(mm, a, 4 * PG), 0);
		c = (unsigned long)map(mm, 4 * PG, PM_PROT_READ, PM_MAP_SHARED, f);
		is_int(pm_mincore(mm, c, 4 * PG, vec), 0, "%s: mincore after REMOVE", DN);
		ok(!vec[0] && !vec[1] && !vec[2] && !vec[3],
		   "%s: ... no page is left in the cache", DN);
		pm_munmap(mm, c, 4 * PG);
		a = (unsigned long)map(mm, 4 * PG, RW, PM_MAP_SHARED, f);
		is_int(pmt_peek(mm, a + 3 * PG), 0, "%s: ... and the size is kept", DN);
	}

	/* The errors */
	c = (unsigned long)map(mm, 4 * PG, RW, PM_MAP_PRIVATE, f);
	is_int(pm_madvise(mm, c, PG, PM_MADV_REMOVE), -EACCES,
	       "%s: REMOVE of a private file mapping -EACCES", DN);
	pm_munmap(mm, c, 4 * PG);
	x = map(mm, PG, RW, PRIV, NULL);
	is_int(pm_madvise(mm, (unsigned long)x, PG, PM_MADV_REMOVE), -EINVAL,
	       "%s: REMOVE of private anonymous memory -EINVAL", DN);
	pm_munmap(mm, (unsigned long)x, PG);
	ASSERT_EQ(pm_munmap(mm, a + PG, PG), 0);
	ASSERT_EQ(pmt_poke(mm, a + 3 * PG, 'q'), 1);
	is_int(pm_madvise(mm, a, 4 * PG, PM_MADV_REMOVE), -ENOMEM,
	       "%s: REMOVE over a hole -ENOMEM", DN);
	is_int(pmt_peek(mm, a + 3 * PG), 0, "%s: ... past the hole done too", DN);
	pm_munmap(mm, a, 4 * PG);
	pm_munmap(other, b, 4 * PG);
	pm_shmem_put(f);

	/* Shared anonymous memory is an object too */
	x = map(mm, 2 * PG, RW, SHANON, NULL);
	ASSERT_EQ(pmt_poke(mm, (unsigned long)x, 's'), 1);
	{
		struct pm_mm *child = pmt_fork(mm);

		is_int(pm_madvise(mm, (unsigned long)x, 2 * PG, PM_MADV_REMOVE), 0,
		       "%s: REMOVE of shared anonymous memory", DN);
		is_int(pmt_peek(child, (unsigned long)x), 0, "%s: ... the child sees the hole",
		       DN);
		pm_mm_destroy(child);
	}
	pm_munmap(mm, (unsigned long)x, 2 * PG);

	/* hugetlb (hugetlbfs_punch_hole): whole 2 MiB pages back to the pool, the parts of the
	 * pages at the ends zeroed in place, the reservations of pages never faulted kept */
	f = pm_shmem_create_hugetlb(m, 2 * HP);
	ASSERT_TRUE(f != NULL);
	a = (unsigned long)map(mm, 2 * HP, RW, PM_MAP_SHARED, f);
	ASSERT_EQ(pmt_poke(mm, a, 'h'), 1);
	ASSERT_EQ(pmt_poke(mm, a + PG, 'j'), 1);
	ASSERT_EQ(pmt_poke(mm, a + HP, 'i'), 1);
	pm_hugetlb_pool(m, &total, &hfree);
	is_int(pm_madvise(mm, a, PG, PM_MADV_REMOVE), 0, "%s: REMOVE of 4 KiB of hugetlb", DN);
	{
		size_t hfree2;

		pm_hugetlb_pool(m, &total, &hfree2);
		ok(pmt_peek(mm, a) == 0 && pmt_peek(mm, a + PG) == 'j' && hfree2 == hfree,
		   "%s: ... zeroes those 4 KiB in place, frees no page", DN);
	}
	pm_hugetlb_pool(m, &total, &hfree);
	is_int(pm_madvise(mm, a, HP, PM_MADV_REMOVE), 0, "%s: REMOVE of a 2 MiB page", DN);
	{
		size_t hfree2;

		pm_hugetlb_pool(m, &total, &hfree2);
		is_int(hfree2, hfree + 1, "%s: ... it goes back to the pool", DN);
	}
	ok(pmt_peek(mm, a) == 0 && pmt_peek(mm, a + HP) == 'i',
	   "%s: ... reads zero there, the next page keeps its data", DN);
	pm_munmap(mm, a, 2 * HP);
	pm_shmem_put(f);
	/* a page never faulted keeps its reservation (remove_inode_hugepages finds nothing) */
	f = pm_shmem_create_hugetlb(m, 2 * HP);
	ASSERT_TRUE(f != NULL);
	a = (unsigned long)map(mm, 2 * HP, RW, PM_MAP_SHARED, f);
	{
		size_t r0 = 0, r1 = 0;

		pm_hugetlb_reserved(m, &r0);
		is_int(pm_madvise(mm, a, HP, PM_MADV_REMOVE), 0,
		       "%s: REMOVE of a 2 MiB page never faulted", DN);
		pm_hugetlb_reserved(m, &r1);
		ok(r0 == 2 && r1 == 2, "%s: ... its reservation stays (%zu, %zu)", DN, r0, r1);
	}
	is_int(pmt_poke(mm, a, 'k'), 1, "%s: ... and a fault there still finds a page", DN);
	pm_munmap(mm, a, 2 * HP);
	pm_shmem_put(f);

	pm_mm_destroy(other);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "remove");
}

static const struct pmt_group groups[] = {
	{ "populate", test_populate }, { "popfail", test_populate_failinject },
	{ "wipe", test_wipeonfork },   { "free", test_free },
	{ "remove", test_remove },
};

int main(int argc, char **argv)
{
	return pmt_run_groups_designs(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 60,
				      &cur);
}
