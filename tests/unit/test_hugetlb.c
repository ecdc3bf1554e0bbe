// SPDX-License-Identifier: MIT
/*
 * test_hugetlb.c - hugetlb pages as Linux has them: a pool of 2 MiB pages set aside at machine
 * creation (pm_config.nr_hugepages), PM_MAP_HUGETLB mappings and pm_shmem_create_hugetlb
 * objects, reservations at mmap time (-ENOMEM there, never at fault), Linux's alignment
 * errors, whole-page faults at PMD level, pins (fast, slow, exact counts, unpin by range,
 * umem), fork's COW (the child without a reservation gets -EFAULT when the pool is empty;
 * the owner with none unpromised takes the page from the child, which then gets -EFAULT),
 * MADV_DONTNEED rounding its end down and restoring the reservation, and everything back in
 * the pool at the end with pm_machine_check clean.
 *
 * Layouts (| = 2 MiB page boundary, R = reserved, U = in use, . = free in the pool):
 *	pool of 4:   [ . . . . ]   mmap 3 private   [ R R R . ]   fault one   [ U R R . ]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define SHARED (PM_MAP_SHARED | PM_MAP_ANONYMOUS)
#define HPRIV (PRIV | PM_MAP_HUGETLB)
#define HSHARED (SHARED | PM_MAP_HUGETLB)

static struct pm_page *pages[2048];

static size_t pool_free(struct pm_machine *m)
{
	size_t total = 0, free = 0;

	ASSERT_EQ(pm_hugetlb_pool(m, &total, &free), 0);
	return free;
}

static char peek(struct pm_mm *mm, unsigned long addr)
{
	char c = 0x55;

	ASSERT_EQ(pm_access(mm, addr, &c, 1, 0), 1);
	return c;
}

static void test_config(void)
{
	struct pm_config cfg = { .mem_bytes = 16 * MiB };
	struct pm_machine *m;
	size_t total = 99, free = 99, f0;

	cfg.flags = PM_MACHINE_RANGE_MM;
	m = pm_machine_create(&cfg);
	ok(m && pm_machine_flags(m) == PM_MACHINE_RANGE_MM, "PM_MACHINE_RANGE_MM: the range design");
	pm_machine_destroy(m);
	cfg.flags = PM_MACHINE_LINUX_MM;
	m = pm_machine_create(&cfg);
	ok(m && pm_machine_flags(m) == PM_MACHINE_LINUX_MM, "PM_MACHINE_LINUX_MM: Linux's design");
	pm_machine_destroy(m);
	cfg.flags = PM_MACHINE_RANGE_MM | PM_MACHINE_LINUX_MM;
	errno = 0;
	ok(!pm_machine_create(&cfg) && errno == EINVAL, "both design flags: EINVAL");
	cfg.flags = 0;
	cfg.nr_hugepages = 9; /* 18 MiB of a 16 MiB machine */
	errno = 0;
	ok(!pm_machine_create(&cfg) && errno == ENOMEM, "a pool larger than memory: ENOMEM");
	cfg.nr_hugepages = 8; /* all of it: the zero page and the first tables need frames */
	errno = 0;
	ok(!pm_machine_create(&cfg) && errno == ENOMEM, "a pool of all memory: ENOMEM");
	is_int(pm_hugetlb_pool(NULL, &total, &free), -EINVAL, "pm_hugetlb_pool(NULL): -EINVAL");
	is_int(pm_machine_flags(NULL), 0, "pm_machine_flags(NULL): 0");

	cfg.flags = PM_MACHINE_LINUX_MM;
	cfg.nr_hugepages = 3;
	m = pm_machine_create(&cfg);
	ASSERT_TRUE(m != NULL);
	is_int(pm_machine_flags(m), PM_MACHINE_LINUX_MM, "pm_machine_flags: PM_MACHINE_LINUX_MM");
	is_int(pm_hugetlb_pool(m, &total, &free), 0, "pm_hugetlb_pool");
	ok(total == 3 && free == 3, "3 pages, 3 free (%zu, %zu)", total, free);
	f0 = pm_machine_free_pages(m);
	ok(f0 <= 4096 - 3 * 512 - 1, "the pool's frames are not free frames (%zu free)", f0);
	is_int(pm_machine_check(m), 0, "pm_machine_check knows the free pool");
	pm_machine_destroy(m);

	m = pmt_hmachine(16, 0);
	is_int(pm_hugetlb_pool(m, &total, &free), 0, "no pool");
	ok(total == 0 && free == 0, "0 pages");
	pm_machine_destroy(m);
}

/* Reservation at mmap: -ENOMEM there, never at fault. */
static void test_reserve(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a, b, c;

	/* [ R R R . ] */
	a = pm_mmap(mm, 0, 3 * HP, RW, HPRIV, NULL, 0);
	ok(a > 0 && !(a & (HP - 1)), "mmap 3 hugetlb pages: 2 MiB aligned");
	is_int(pool_free(m), 4, "reserved pages still count as free (HugePages_Free)");
	is_int(pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0), -ENOMEM,
	       "2 more pages than the pool can promise: -ENOMEM at mmap");
	is_int(pm_mmap(mm, 0, 2 * HP, RW, HSHARED, NULL, 0), -ENOMEM,
	       "the same for a shared mapping");
	b = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	ok(b > 0, "the last page can be promised");
	is_int(pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0), -ENOMEM, "then nothing more");
	/* Every fault of every mapping succeeds: the pages were promised. */
	struct pm_stats s0 = pmt_stats(m);

	for (int i = 0; i < 3; i++)
		is_int(pmt_poke(mm, a + i * HP + 77, 'a' + i), 1, "fault page %d of the first mapping", i);
	is_int(pmt_poke(mm, b, 'z'), 1, "fault the second mapping");
	is_int(pmt_stats(m).hugetlb_faults - s0.hugetlb_faults, 4, "hugetlb_faults +4");
	is_int(pool_free(m), 0, "the pool is used up");
	is_int(pm_machine_check(m), 0, "check with the pool in use");
	is_int(pm_munmap(mm, b, HP), 0, "munmap the second");
	is_int(pool_free(m), 1, "its page went back");
	c = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	ok(c > 0, "and can be promised again");
	is_int(pm_munmap(mm, c, HP), 0, "munmap it unfaulted");
	is_int(pm_munmap(mm, a + HP, HP), 0, "munmap the middle page of the first (aligned)");
	is_int(pool_free(m), 2, "two free");
	ok(peek(mm, a + 77) == 'a' && peek(mm, a + 2 * HP + 77) == 'c', "the others keep their data");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "reserve");
}

static void test_alignment(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f, *plain;
	long a;

	a = pm_mmap(mm, 0, 1, RW, HPRIV, NULL, 0);
	ok(a > 0 && !(a & (HP - 1)), "one byte: a 2 MiB aligned mapping");
	is_int(pmt_poke(mm, a + HP - 1, 'x'), 1, "its length rounded up to 2 MiB");
	is_int(pm_access(mm, a + HP, &(char){ 0 }, 1, 0), -EFAULT, "and no further");
	is_int(pm_mmap(mm, 0x40000000UL + PG, HP, RW, HPRIV | PM_MAP_FIXED, NULL, 0), -EINVAL,
	       "MAP_FIXED at an address not 2 MiB aligned: -EINVAL");
	ok(pm_mmap(mm, 0x40000000UL, HP, RW, HPRIV | PM_MAP_FIXED, NULL, 0) == 0x40000000L,
	   "MAP_FIXED at an aligned one");
	is_int(pm_munmap(mm, a + PG, PG), -EINVAL, "munmap of 4 KiB inside a 2 MiB page: -EINVAL");
	is_int(pm_munmap(mm, a, PG), -EINVAL, "munmap cutting the page's end: -EINVAL");
	is_int(pm_mprotect(mm, a, PG, PM_PROT_READ), -EINVAL, "mprotect cutting it: -EINVAL");
	is_int(pm_madvise(mm, a + PG, PG, PM_MADV_DONTFORK), -EINVAL, "madvise cutting it: -EINVAL");
	is_int(pm_madvise(mm, a + PG, PG, PM_MADV_DONTNEED), -EINVAL,
	       "MADV_DONTNEED from an unaligned start: -EINVAL");
	ok(peek(mm, a + HP - 1) == 'x', "the page is intact");
	is_int(pm_mprotect(mm, a, HP, PM_PROT_READ), 0, "mprotect of the whole page");
	is_int(pmt_poke(mm, a, 'y'), -EFAULT, "read-only now");

	errno = 0;
	ok(!pm_shmem_create_hugetlb(m, MiB) && errno == EINVAL,
	   "a hugetlb object of 1 MiB: NULL, EINVAL");
	f = pm_shmem_create_hugetlb(m, 2 * HP);
	ok(f != NULL, "a hugetlb object of 4 MiB");
	is_int(pm_shmem_truncate(f, 3 * MiB), -EINVAL, "truncate to 3 MiB: -EINVAL");
	is_int(pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, PG), -EINVAL,
	       "an offset not 2 MiB aligned: -EINVAL");
	plain = pm_shmem_create(m, HP, 0);
	is_int(pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED | PM_MAP_HUGETLB, plain, 0), -EINVAL,
	       "MAP_HUGETLB with an object that is not hugetlb: -EINVAL");
	a = pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED, f, HP);
	ok(a > 0 && !(a & (HP - 1)), "a hugetlb object mapped without MAP_HUGETLB is hugetlb");
	is_int(pm_munmap(mm, a, PG), -EINVAL, "(so a 4 KiB munmap cuts it)");
	pm_shmem_put(plain);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "alignment");
}

static void test_fault_rw(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_folio *folio;
	char buf[64], zero[64] = { 0 };
	long a = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0);

	ok(a > 0, "mmap 2 pages");
	ok(pm_access(mm, a + HP - 32, buf, 64, 0) == 64 && !memcmp(buf, zero, 64),
	   "a fresh page reads as zeros, across the boundary");
	is_int(pool_free(m), 2, "both taken from the pool");
	memset(buf, 0xab, sizeof(buf));
	is_int(pm_access(mm, a + HP - 32, buf, 64, 1), 64, "write across the boundary");
	memset(buf, 0, sizeof(buf));
	ok(pm_access(mm, a + HP - 32, buf, 64, 0) == 64 && buf[0] == (char)0xab &&
	   buf[63] == (char)0xab, "read it back");
	is_int(pmt_order_at(mm, a + 12345), 9, "an order-9 folio");
	folio = pm_page_folio(pmt_page_at(mm, a + 5 * PG));
	is_int(pm_folio_mapcount(folio), 1, "mapped once, at PMD level");
	is_int(pm_folio_ref_count(folio), 1, "one reference: the mapping");
	ok(pm_folio_test_anon(folio), "a private hugetlb page is anonymous");
	ok(pmt_pfn_at(mm, a + 7 * PG) == pmt_pfn_at(mm, a) + 7, "subpages are contiguous");
	a = pm_mmap(mm, 0, HP, RW, HPRIV | PM_MAP_POPULATE, NULL, 0);
	ok(a > 0 && pool_free(m) == 1, "MAP_POPULATE faults the page in at mmap");
	ok(pmt_pfn_at(mm, a) != ~0UL, "mapped without a fault");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "fault");
}

static void test_pins(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_folio *f0, *f1;
	struct pm_stats s0;
	struct pm_umem *u;
	const struct pm_sg *sg;
	unsigned long nents = 0, total = 0;
	long a = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0);

	/* Fast over two pages not yet faulted: the walk finds nothing, the slow path faults. */
	is_int(pm_pin_user_pages_fast(mm, a, 1024, PM_FOLL_WRITE, pages), 1024,
	       "pin_fast 1024 pages over two unfaulted hugetlb pages");
	f0 = pm_page_folio(pages[0]);
	f1 = pm_page_folio(pages[1023]);
	ok(f0 != f1 && pm_page_folio(pages[511]) == f0 && pm_page_folio(pages[512]) == f1,
	   "two folios, 512 pages each");
	ok(pm_folio_pincount(f0) == 512 && pm_folio_pincount(f1) == 512, "pincount 512 each");
	ok(pm_folio_ref_count(f0) == 513 && pm_folio_ref_count(f1) == 513,
	   "refcount = 1 mapping + 512 pins (%d, %d)", pm_folio_ref_count(f0),
	   pm_folio_ref_count(f1));
	is_int(pm_machine_check(m), 0, "check with pinned hugetlb pages");
	/* By range: each range is physically contiguous, one per pool page. */
	pm_unpin_user_page_range_dirty_lock(pages[0], 512, true);
	pm_unpin_user_page_range_dirty_lock(pages[512], 512, true);
	ok(pm_folio_pincount(f0) == 0 && pm_folio_ref_count(f0) == 1 &&
	   pm_folio_pincount(f1) == 0 && pm_folio_ref_count(f1) == 1, "unpin by range: exact");

	/* Fast again, now mapped: the lockless walk, one atomic per folio. */
	s0 = pmt_stats(m);
	is_int(pm_pin_user_pages_fast(mm, a + 100 * PG, 600, 0, pages), 600,
	       "pin_fast 600 pages from page 100");
	is_int(pmt_stats(m).gup_fast_pages - s0.gup_fast_pages, 600, "all by the lockless walk");
	ok(pm_folio_pincount(f0) == 412 && pm_folio_pincount(f1) == 188, "pincounts 412 + 188");
	s0 = pmt_stats(m);
	pm_unpin_user_pages(pages, 600);
	is_int(pmt_stats(m).unpin_folio_updates - s0.unpin_folio_updates, 2,
	       "unpin: one update per folio");
	/* Slow. */
	s0 = pmt_stats(m);
	is_int(pm_pin_user_pages(mm, a + 511 * PG, 2, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pages), 2,
	       "pin (slow) across the boundary");
	is_int(pmt_stats(m).gup_slow_pages - s0.gup_slow_pages, 2, "by the slow path");
	ok(pm_folio_pincount(f0) == 1 && pm_folio_pincount(f1) == 1 && pm_folio_ref_count(f0) == 2,
	   "one pin each");
	pm_unpin_user_pages(pages, 2);
	is_int(pm_folio_ref_count(f1), 1, "unpinned");

	/* umem: one SG entry per physically contiguous run (two pool pages may be adjacent). */
	u = pm_umem_get(mm, a, 2 * HP, PM_UMEM_WRITE);
	ok(u != NULL, "pm_umem_get over 4 MiB of hugetlb");
	if (u) {
		sg = pm_umem_sg(u, &nents);
		for (unsigned long i = 0; i < nents; i++)
			total += sg[i].npages;
		ok(nents >= 1 && nents <= 2 && total == 1024 && sg[0].npages % 512 == 0,
		   "%lu SG entries of whole 2 MiB pages, 1024 pages", nents);
		is_int(pm_folio_pincount(f0), 512, "umem pins");
		pm_umem_release(u, PM_UNPIN_RANGE);
		is_int(pm_folio_pincount(f0), 0, "released");
	}

	/* A pinned page outlives its mapping, then goes back to the pool. */
	is_int(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, pages), 1, "pin one page");
	is_int(pm_munmap(mm, a, 2 * HP), 0, "munmap under the pin");
	is_int(pool_free(m), 3, "the unpinned page is back, the pinned one is not");
	is_int(pm_folio_ref_count(f0), 1, "the pin holds it");
	pm_unpin_user_page(pages[0]);
	is_int(pool_free(m), 4, "the last unpin gives it back to the pool");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "pins");
}

static void test_fork(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	struct pm_stats s0;
	long a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	long sh = pm_mmap(mm, 0, HP, RW, HSHARED, NULL, 0);

	is_int(pmt_poke(mm, a, 'A'), 1, "parent writes its private page");
	is_int(pmt_poke(mm, sh, 'S'), 1, "and its shared page");
	child = pmt_fork(mm);
	ok(peek(child, a) == 'A' && peek(child, sh) == 'S', "the child sees both");
	is_int(pm_folio_mapcount(pm_page_folio(pmt_page_at(mm, a))), 2, "the private page is shared");
	s0 = pmt_stats(m);
	is_int(pmt_poke(child, a, 'B'), 1, "the child writes: COW copy of the whole page");
	is_int(pmt_stats(m).cow_copies - s0.cow_copies, 1, "one copy");
	is_int(pool_free(m), 1, "taken from the pool's unpromised pages");
	ok(peek(mm, a) == 'A' && peek(child, a) == 'B', "each sees its own");
	s0 = pmt_stats(m);
	is_int(pmt_poke(mm, a, 'C'), 1, "the parent writes: sole user, reused");
	is_int(pmt_stats(m).cow_reuses - s0.cow_reuses, 1, "a reuse");
	is_int(pmt_poke(child, sh, 'T'), 1, "the child writes the shared page");
	ok(peek(mm, sh) == 'T', "the parent sees it: shared stays shared");
	is_int(pm_machine_check(m), 0, "check after fork and COW");
	pm_mm_destroy(child);
	is_int(pool_free(m), 2, "the child's copy went back");

	/* A pinned page is copied at fork, whole. */
	is_int(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, pages), 1, "pin the private page");
	s0 = pmt_stats(m);
	child = pmt_fork(mm);
	is_int(pmt_stats(m).fork_pinned_copies - s0.fork_pinned_copies, 512,
	       "copied at fork (512 pages)");
	is_int(pool_free(m), 1, "from the pool");
	((char *)pm_page_address(pages[0]))[1] = 'P'; /* DMA through the pin */
	ok(peek(mm, a + 1) == 'P' && peek(child, a + 1) != 'P', "the pin writes only the parent's");
	pm_unpin_user_page(pages[0]);
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "fork");
}

/* The child has no reservation: with the pool all promised, its COW gets -EFAULT (SIGBUS). */
static void test_fork_sigbus(void)
{
	struct pm_machine *m = pmt_hmachine(64, 2);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	long a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0), b;

	/* [ U . ] -> fork -> [ U R ] */
	is_int(pmt_poke(mm, a, 'A'), 1, "parent writes");
	child = pmt_fork(mm);
	b = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	ok(b > 0, "the parent reserves the last page");
	is_int(pm_fault(child, a, PM_FAULT_WRITE), -EFAULT,
	       "the child's COW with nothing unpromised: -EFAULT");
	is_int(pmt_poke(child, a, 'B'), -EFAULT, "pm_access too");
	ok(peek(child, a) == 'A', "the child still reads the shared page");
	is_int(pmt_poke(mm, b, 'b'), 1, "the parent's reserved fault succeeds");
	is_int(pm_machine_check(m), 0, "check");
	is_int(pm_munmap(mm, b, HP), 0, "munmap it");
	is_int(pmt_poke(child, a, 'B'), 1, "now the child's COW finds a free page");
	ok(peek(mm, a) == 'A', "the parent is untouched");
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 2, "fork sigbus");
}

/*
 * The owner's COW with nothing unpromised in the pool (Linux's unmap_ref_private): the page
 * is taken from the fork child, whose VMA is marked so that its later faults there get SIGBUS
 * (-EFAULT), and the owner reuses it.
 *	pool of 3: mmap 3 private [ R R R ], write all three [ U0 U1 U2 ], fork: the child maps
 *	them; the child's mprotect cuts its VMA in two: [ U0 ][ U1 U2 ]. The parent writes U0:
 *	nothing is free, so U0 leaves the child's first VMA, and only that VMA is marked.
 */
static void test_fork_owner_cow(void)
{
	struct pm_machine *m = pmt_hmachine(64, 3);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	long a = pm_mmap(mm, 0, 3 * HP, RW, HPRIV, NULL, 0);
	struct pm_folio *f0;
	struct pm_stats s0;
	char c = 0;

	ok(a > 0, "3 private pages, reserved");
	for (int i = 0; i < 3; i++)
		is_int(pmt_poke(mm, a + i * HP, (char)('A' + i)), 1, "the parent writes page %d", i);
	child = pmt_fork(mm);
	is_int(pm_mprotect(child, a + HP, 2 * HP, PM_PROT_READ), 0,
	       "the child's VMA cut in two at the second page");
	f0 = pm_page_folio(pmt_page_at(mm, a));
	is_int(pm_folio_mapcount(f0), 2, "the first page is shared with the child");
	is_int(pool_free(m), 0, "the pool is empty");

	s0 = pmt_stats(m);
	is_int(pmt_poke(mm, a + 1, 'a'), 1, "the parent writes the shared page with the pool empty");
	is_int(pmt_stats(m).cow_reuses - s0.cow_reuses, 1, "it reused the page");
	is_int(pmt_stats(m).cow_copies - s0.cow_copies, 0, "nothing was copied");
	ok(pm_page_folio(pmt_page_at(mm, a)) == f0, "the same page is mapped");
	ok(peek(mm, a) == 'A' && peek(mm, a + 1) == 'a', "the parent keeps its data");
	is_int(pm_folio_mapcount(f0), 1, "the child's mapping of it is gone");
	is_int(pm_folio_ref_count(f0), 1, "and its reference");
	is_int(pm_fault(child, a, 0), -EFAULT, "the child's fault there: SIGBUS (-EFAULT)");
	is_int(pm_access(child, a, &c, 1, 0), -EFAULT, "pm_access too");
	is_int(pm_pin_user_pages_fast(child, a, 1, 0, pages), -EFAULT, "and a pin");
	ok(peek(child, a + HP) == 'B' && peek(child, a + 2 * HP) == 'C',
	   "the child's other VMA keeps its pages");
	is_int(pm_madvise(child, a + HP, HP, PM_MADV_DONTNEED), 0,
	   "the child drops a page of its other VMA");
	is_int(pm_fault(child, a + HP, 0), -EFAULT,
	       "with the pool empty it has none to fault in: -EFAULT");
	is_int(pm_machine_check(m), 0, "check after the owner's COW");

	/* The marked VMA gets SIGBUS even with a free page; the other one faults normally. */
	is_int(pm_munmap(mm, a + HP, HP), 0, "the parent unmaps its second page");
	is_int(pool_free(m), 1, "it went back to the pool, unpromised");
	is_int(pm_fault(child, a, PM_FAULT_WRITE), -EFAULT,
	       "the marked VMA still gets SIGBUS (HPAGE_RESV_UNMAPPED)");
	is_int(pm_fault(child, a + HP, 0), 0, "the unmarked VMA faults in the free page");
	is_int(pool_free(m), 0, "the pool is empty again");
	is_int(pmt_poke(mm, a + 2 * HP, 'c'), 1, "the parent writes its third page, shared too");
	is_int(pm_fault(child, a + 2 * HP, 0), -EFAULT, "that page left the child's second VMA");
	is_int(pm_fault(child, a + HP, 0), 0, "whose present page stays");
	is_int(pm_madvise(child, a + HP, HP, PM_MADV_DONTNEED), 0, "but once dropped...");
	is_int(pool_free(m), 1, "(back in the pool)");
	is_int(pm_fault(child, a + HP, 0), -EFAULT, "...it cannot come back: that VMA is marked now");
	is_int(pm_machine_check(m), 0, "check");
	pm_mm_destroy(child);
	ok(peek(mm, a) == 'A' && peek(mm, a + 2 * HP) == 'c', "the parent's data survive the child");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 3, "owner cow");

	/* A free unpromised page: the owner copies, the child keeps its mapping. */
	m = pmt_hmachine(64, 2);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	is_int(pmt_poke(mm, a, 'A'), 1, "the parent writes its page");
	child = pmt_fork(mm);
	s0 = pmt_stats(m);
	is_int(pmt_poke(mm, a, 'P'), 1, "the parent writes it again, one page free in the pool");
	is_int(pmt_stats(m).cow_copies - s0.cow_copies, 1, "a copy");
	ok(peek(child, a) == 'A' && peek(mm, a) == 'P', "each sees its own");
	is_int(pmt_poke(child, a, 'C'), 1, "the child, now the only mapper, reuses the old page");
	is_int(pm_machine_check(m), 0, "check");
	pm_mm_destroy(mm);
	ok(peek(child, a) == 'C', "the child outlives its parent");
	pm_mm_destroy(child);
	pmt_hend(m, free0, 2, "owner cow with a free page");

	/* A R/O pin by the owner unshares the same way (hugetlb_wp with FAULT_FLAG_UNSHARE). */
	m = pmt_hmachine(64, 1);
	free0 = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	is_int(pmt_poke(mm, a, 'A'), 1, "the parent writes its only page");
	child = pmt_fork(mm);
	f0 = pm_page_folio(pmt_page_at(mm, a));
	is_int(pm_pin_user_pages_fast(mm, a, 1, 0, pages), 1,
	       "a R/O pin by the parent, the pool empty: the page is taken from the child");
	ok(pm_page_folio(pages[0]) == f0 && pm_page_anon_exclusive(pages[0]),
	   "the pinned page is the parent's own, exclusive");
	is_int(pm_folio_mapcount(f0), 1, "mapped by the parent only");
	is_int(pm_fault(child, a, 0), -EFAULT, "the child's fault: -EFAULT");
	is_int(pm_machine_check(m), 0, "check");
	pm_unpin_user_page(pages[0]);
	pm_mm_destroy(child);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "owner unshare");
}

/*
 * The owner's COW racing its child: while the parent writes its page with the pool empty
 * (unmap_ref_private), the child reads, writes (its COW finds no page: -EFAULT), forks a
 * grandchild and cuts its VMA in two. Whatever the order, the parent's write succeeds on its
 * own page, the child's calls answer 1/0 or -EFAULT, and after it the child (and any
 * grandchild) has lost the page for good.
 */
#define RACE_ROUNDS 100

struct owner_race {
	struct pm_mm *child;
	long a;
	atomic_int go, errors;
};

static void *owner_race_child(void *arg)
{
	struct owner_race *r = arg;
	char c;

	while (!atomic_load(&r->go))
		;
	for (int i = 0; i < 6; i++) {
		long ret;

		switch (i % 3) {
		case 0:
			c = 0x55;
			ret = pm_access(r->child, r->a + 64, &c, 1, 0);
			if (ret != 1 && ret != -EFAULT)
				atomic_fetch_add(&r->errors, 1);
			if (ret == 1 && c != 0)
				atomic_fetch_add(&r->errors, 1); /* never the parent's new 'P' */
			break;
		case 1:
			if (pm_fault(r->child, r->a, PM_FAULT_WRITE) != -EFAULT)
				atomic_fetch_add(&r->errors, 1); /* nothing in the pool to copy into */
			break;
		default: {
			struct pm_mm *g = pm_mm_fork(r->child);

			if (!g)
				atomic_fetch_add(&r->errors, 1);
			else
				pm_mm_destroy(g);
			break;
		}
		}
	}
	if (pm_mprotect(r->child, r->a + HP, HP, PM_PROT_READ))
		atomic_fetch_add(&r->errors, 1);
	return NULL;
}

static void test_owner_cow_race(void)
{
	struct pm_machine *m = pmt_hmachine(64, 2);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	int bad_parent = 0, bad_after = 0;
	struct owner_race r = { 0 };

	for (int round = 0; round < RACE_ROUNDS; round++) {
		pthread_t th;
		long a = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0);
		struct pm_mm *g;

		if (a < 0 || pmt_poke(mm, a, 'A') != 1 || pmt_poke(mm, a + HP, 'B') != 1) {
			bad_parent++;
			break;
		}
		r.child = pmt_fork(mm);
		r.a = a;
		atomic_store(&r.go, 0);
		ASSERT_EQ(pthread_create(&th, NULL, owner_race_child, &r), 0);
		atomic_store(&r.go, 1);
		if (pmt_poke(mm, a + 64, 'P') != 1)
			bad_parent++;
		pthread_join(th, NULL);
		if (peek(mm, a) != 'A' || peek(mm, a + 64) != 'P' ||
		    pm_folio_mapcount(pm_page_folio(pmt_page_at(mm, a))) != 1)
			bad_parent++;
		g = pmt_fork(r.child);
		if (pm_fault(r.child, r.a, 0) != -EFAULT || pm_fault(g, r.a, 0) != -EFAULT)
			bad_after++;
		pm_mm_destroy(g);
		pm_mm_destroy(r.child);
		ASSERT_EQ(pm_munmap(mm, a, 2 * HP), 0);
	}
	is_int(bad_parent, 0, "%d rounds: the parent's write always succeeds on its own page",
	       RACE_ROUNDS);
	is_int(atomic_load(&r.errors), 0, "the child's calls answer as they may");
	is_int(bad_after, 0, "the child and its child lost the page");
	is_int(pm_machine_check(m), 0, "check after the races");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 2, "owner cow race");
}

static void test_shared_object(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *mm2 = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	long a, b, c, p, x;

	ok(f != NULL, "a 4 MiB hugetlb object");
	a = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_SHARED, f, 0);
	b = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, HP);
	c = pm_mmap(mm2, 0, 2 * HP, RW, PM_MAP_SHARED, f, 0);
	ok(a > 0 && b > 0 && c > 0, "mapped three times, in two address spaces");
	/* The object's range is reserved once: two pages left to promise. */
	x = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0);
	ok(x > 0, "two more pages can be promised: the object's were reserved once");
	is_int(pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0), -ENOMEM, "and no more");
	is_int(pm_munmap(mm, x, 2 * HP), 0, "unmap those");
	is_int(pmt_poke(mm, a + HP + 9, 'q'), 1, "write page 1 through the first mapping");
	ok(peek(mm, b + 9) == 'q' && peek(mm2, c + HP + 9) == 'q', "seen by the other two");
	is_int(pm_shmem_nr_pages(f), 512, "the object holds one 2 MiB page");
	is_int(pmt_poke(mm2, c, 'r'), 1, "write page 0 from the other address space");
	ok(peek(mm, a) == 'r', "seen by the first");
	ok(pmt_pfn_at(mm, b) == pmt_pfn_at(mm2, c + HP), "the same frames");
	/* A private mapping reads the object and copies on write. */
	p = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_PRIVATE, f, 0);
	ok(p > 0, "a private mapping of the object");
	ok(peek(mm, p + HP + 9) == 'q', "reads the object's page");
	ok(pm_folio_test_anon(pm_page_folio(pmt_page_at(mm, p))) == false,
	   "mapped from the cache until written");
	is_int(pmt_poke(mm, p + HP + 9, 'w'), 1, "writes: a private copy");
	ok(peek(mm, a + HP + 9) == 'q' && peek(mm, p + HP + 9) == 'w', "the object is unchanged");
	is_int(pm_machine_check(m), 0, "check with a shared object mapped");
	/* Truncation takes the pages out of every mapping and back to the pool. */
	is_int(pm_shmem_truncate(f, HP), 0, "truncate to one page");
	is_int(pm_access(mm, b, &(char){ 0 }, 1, 0), -EFAULT, "beyond the size: SIGBUS");
	ok(peek(mm2, c) == 'r', "page 0 stays");
	is_int(pm_munmap(mm, a, 2 * HP), 0, "unmap");
	pm_shmem_put(f);
	pm_mm_destroy(mm2);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "shared object");
}

static void test_dontneed(void)
{
	struct pm_machine *m = pmt_hmachine(64, 3);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0), b, sh;

	/* [ U U R ] */
	is_int(pmt_poke(mm, a, 'x'), 1, "write page 0");
	is_int(pmt_poke(mm, a + HP, 'y'), 1, "write page 1");
	b = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	ok(b > 0, "reserve the last page elsewhere");
	is_int(pm_madvise(mm, a, HP + PG, PM_MADV_DONTNEED), 0,
	       "MADV_DONTNEED of 2 MiB + 4 KiB: the end rounds down");
	ok(peek(mm, a + HP) == 'y', "page 1 is untouched");
	is_int(pool_free(m), 2, "page 0 went back to the pool");
	is_int(pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0), -ENOMEM,
	       "its reservation was restored: nothing to promise");
	ok(peek(mm, a) == 0, "page 0 reads zero again");
	is_int(pm_madvise(mm, a, PG, PM_MADV_DONTNEED), 0, "a range below 2 MiB rounds to nothing");
	ok(peek(mm, a) == 0 && pool_free(m) == 1, "nothing given back");
	is_int(pm_munmap(mm, b, HP), 0, "unmap the other");

	sh = pm_mmap(mm, 0, HP, RW, HSHARED, NULL, 0);
	is_int(pmt_poke(mm, sh, 's'), 1, "a shared page");
	is_int(pm_madvise(mm, sh, HP, PM_MADV_DONTNEED), 0, "DONTNEED of it unmaps it");
	ok(peek(mm, sh) == 's', "its data stays in the object");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 3, "dontneed");
}

/*
 * Threads at once: each has its own address space mapping one shared hugetlb object and
 * writes, pins and unpins every page of it, and DONTNEEDs its mapping; each also owns one page
 * of a private hugetlb mapping in a common address space, which it writes and DONTNEEDs (the
 * page goes back, the reservation is restored, the next write takes it again). No call may
 * fail: every page was reserved at mmap.
 */
#define NTHR 4
#define ROUNDS 40

static struct {
	struct pm_shmem *f;
	struct pm_mm *common;
	long priv;
	atomic_long errors;
} conc;

static void *conc_worker(void *arg)
{
	long id = (long)arg;
	struct pm_mm *mm = pm_mm_create(pm_mm_machine(conc.common));
	struct pm_page *p[NTHR];
	long a = mm ? pm_mmap(mm, 0, NTHR * HP, RW, PM_MAP_SHARED, conc.f, 0) : -ENOMEM;

	if (a < 0) {
		atomic_fetch_add(&conc.errors, 1);
		return NULL;
	}
	for (int r = 0; r < ROUNDS; r++) {
		for (long i = 0; i < NTHR; i++) {
			if (pmt_poke(mm, a + i * HP + id, (char)(r + 1)) != 1)
				atomic_fetch_add(&conc.errors, 1);
			if (pm_pin_user_pages_fast(mm, a + i * HP + id * PG, 1, PM_FOLL_WRITE,
						   &p[i]) != 1)
				atomic_fetch_add(&conc.errors, 1);
		}
		pm_unpin_user_pages(p, NTHR);
		if (pm_madvise(mm, a, NTHR * HP, PM_MADV_DONTNEED))
			atomic_fetch_add(&conc.errors, 1);
		if (pmt_poke(conc.common, conc.priv + id * HP + 5, (char)(r + 1)) != 1 ||
		    peek(conc.common, conc.priv + id * HP + 5) != (char)(r + 1))
			atomic_fetch_add(&conc.errors, 1);
		if (pm_madvise(conc.common, conc.priv + id * HP, HP, PM_MADV_DONTNEED))
			atomic_fetch_add(&conc.errors, 1);
	}
	pm_mm_destroy(mm);
	return NULL;
}

static void test_concurrent(void)
{
	struct pm_machine *m = pmt_hmachine(64, 2 * NTHR);
	size_t free0 = pm_machine_free_pages(m);
	pthread_t thr[NTHR];

	conc.f = pm_shmem_create_hugetlb(m, NTHR * HP);
	conc.common = pm_mm_create(m);
	conc.priv = pm_mmap(conc.common, 0, NTHR * HP, RW, HPRIV, NULL, 0);
	ok(conc.f && conc.priv > 0, "an object and a private mapping of %d pages each", NTHR);
	for (long i = 0; i < NTHR; i++)
		pthread_create(&thr[i], NULL, conc_worker, (void *)i);
	for (int i = 0; i < NTHR; i++)
		pthread_join(thr[i], NULL);
	is_int(atomic_load(&conc.errors), 0, "%d threads x %d rounds: no call failed", NTHR,
	       ROUNDS);
	is_int(pm_shmem_nr_pages(conc.f), NTHR * 512, "the object holds its %d pages", NTHR);
	is_int(pool_free(m), NTHR, "the private pages went back with DONTNEED");
	is_int(pm_mmap(conc.common, 0, HP, RW, HPRIV, NULL, 0), -ENOMEM,
	       "their reservations were restored: nothing left to promise");
	is_int(pm_machine_check(m), 0, "check after the threads");
	pm_mm_destroy(conc.common);
	pm_shmem_put(conc.f);
	pmt_hend(m, free0, 2 * NTHR, "concurrent");
}

int main(void)
{
	test_config();
	test_reserve();
	test_alignment();
	test_fault_rw();
	test_pins();
	test_fork();
	test_fork_sigbus();
	test_fork_owner_cow();
	test_owner_cow_race();
	test_shared_object();
	test_dontneed();
	test_concurrent();
	return done_testing();
}
