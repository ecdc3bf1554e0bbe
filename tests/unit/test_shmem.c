// SPDX-License-Identifier: MIT
/*
 * test_shmem.c - shmem objects: shared and private mappings, the page cache under racing
 * faults, the max_bytes limit, truncation (mapped, pinned, partial pages), lifetime, the
 * PM_KNOB_SHMEM_LOCK_TWICE knob and GUP on shmem mappings (issue 4's acceptance tests).
 *
 * Page contents are written as 64-bit words (tag << 32 | page index), so a page that shows up
 * at the wrong index or in the wrong address space is told apart from the right one.
 *
 * Every test makes its own small machine and ends by releasing everything, waiting for RCU,
 * and checking that every frame came back and that pm_machine_check() passes.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define SHARED PM_MAP_SHARED
#define PRIVATE PM_MAP_PRIVATE
#define HINT 0x200000000UL /* 2 MiB aligned: one PTE table covers a small object's mapping */

/* ---- helpers ---- */

static long map_shmem(struct pm_mm *mm, unsigned long hint, size_t len, int prot, int flags,
		      struct pm_shmem *f, size_t off)
{
	long a = pm_mmap(mm, hint, len, prot, flags, f, off);

	if (a < 0)
		diag("pm_mmap: %ld (%s)", a, pm_strerror(a));
	ASSERT_TRUE(a > 0);
	return a;
}

/* ---- two address spaces share one object ---- */

static void test_shared_two_mms(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	unsigned long allocs0 = PMT_STAT(m, shmem_allocs);
	struct pm_shmem *f = pm_shmem_create(m, 16 * PG, 0);
	struct pm_mm *a = pm_mm_create(m), *b = pm_mm_create(m);
	struct pm_page *pa = NULL, *pb = NULL, *pc = NULL;
	long xa, xb, xc;

	ASSERT_TRUE(f && a && b);
	is_int(pm_shmem_size(f), 16 * PG, "shared: size as created");
	is_int(pm_shmem_nr_pages(f), 0, "shared: a new object holds no page");
	xa = map_shmem(a, 0, 16 * PG, RW, SHARED, f, 0);
	xb = map_shmem(b, 0, 16 * PG, RW, SHARED, f, 0);
	xc = map_shmem(b, 0, 8 * PG, RW, SHARED, f, 8 * PG); /* pages 8..15 */

	is_int(pmt_put_tag(a, xa, 8, 0xa1, 0), 8, "shared: A writes pages 0..7");
	is_int(pmt_put_tag(b, xb + 8 * PG, 8, 0xb2, 8), 8, "shared: B writes pages 8..15");
	is_int(pmt_bad_tag(b, xb, 8, 0xa1, 0), 0, "shared: B reads A's writes");
	is_int(pmt_bad_tag(a, xa + 8 * PG, 8, 0xb2, 8), 0, "shared: A reads B's writes");
	is_int(pmt_bad_tag(b, xc, 8, 0xb2, 8), 0,
	       "shared: a mapping at an offset sees the same pages");
	is_int(pmt_put_tag(b, xc + 3 * PG, 1, 0xc3, 11), 1,
	       "shared: write page 11 at the offset view");
	is_int(pmt_bad_tag(a, xa + 11 * PG, 1, 0xc3, 11), 0, "shared: A sees it at index 11");
	is_int(pm_shmem_nr_pages(f), 16, "shared: 16 pages in the cache");
	is_int(PMT_STAT(m, shmem_allocs) - allocs0, 16, "shared: shmem_allocs counts 16 new pages");
	is_int(PMT_STAT(m, cow_copies), 0, "shared: shared mappings never copy");

	is_int(pm_pin_user_pages(a, xa + 11 * PG, 1, 0, &pa), 1, "shared: pin index 11 in A");
	is_int(pm_pin_user_pages_fast(b, xb + 11 * PG, 1, PM_FOLL_WRITE, &pb), 1,
	       "shared: pin index 11 in B");
	is_int(pm_pin_user_pages(b, xc + 3 * PG, 1, PM_FOLL_LONGTERM, &pc), 1,
	       "shared: pin index 11 through the offset view");
	ok(pa && pb && pc && pm_page_to_pfn(pa) == pm_page_to_pfn(pb) &&
		   pm_page_to_pfn(pa) == pm_page_to_pfn(pc),
	   "shared: all three mappings hold the same frame");
	ok(pa && !pm_folio_test_anon(pm_page_folio(pa)), "shared: a shmem page is not anonymous");
	/* refcount = 3 PTE mappings + the cache + 3 pins (small folio: 1024 each) */
	is_int(pa ? pm_folio_mapcount(pm_page_folio(pa)) : -1, 3, "shared: mapcount 3");
	is_int(pa ? pm_folio_ref_count(pm_page_folio(pa)) : -1, 3 + 1 + 3 * 1024,
	       "shared: refcount covers mappings, cache and pins");
	pm_unpin_user_page(pa);
	pm_unpin_user_page(pb);
	pm_unpin_user_page(pc);

	/* The creator's reference goes; the mappings keep the object alive. */
	pm_shmem_put(f);
	is_int(pm_munmap(a, xa, 16 * PG), 0, "shared: A unmaps");
	/* The zap drops a mapping's mapcount and reference together (pm__folio_unmap_put). */
	is_int(pa ? pm_folio_mapcount(pm_page_folio(pa)) : -1, 2, "shared: mapcount 2 after A's unmap");
	is_int(pa ? pm_folio_ref_count(pm_page_folio(pa)) : -1, 2 + 1,
	       "shared: refcount 2 mappings + the cache after A's unmap");
	is_int(pm_munmap(b, xc, 8 * PG), 0, "shared: B unmaps its offset view");
	is_int(pa ? pm_folio_mapcount(pm_page_folio(pa)) : -1, 1, "shared: mapcount 1 left");
	is_int(pa ? pm_folio_ref_count(pm_page_folio(pa)) : -1, 1 + 1,
	       "shared: refcount 1 mapping + the cache left");
	is_int(pmt_bad_tag(b, xb, 8, 0xa1, 0), 0, "shared: data lives on in B after put and unmap");
	pm_mm_destroy(a);
	pm_mm_destroy(b);
	pmt_end(m, free0, &pmt_end_returned, "shared");
}

/* An object with no mapping keeps its pages until its last reference goes. */
static void test_lifetime(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *mm = pm_mm_create(m);
	long x;

	ASSERT_TRUE(f && mm);
	x = map_shmem(mm, 0, 4 * PG, RW, SHARED, f, 0);
	is_int(pmt_put_tag(mm, x, 4, 0x11, 0), 4, "lifetime: write 4 pages");
	is_int(pm_munmap(mm, x, 4 * PG), 0, "lifetime: unmap");
	is_int(pm_shmem_nr_pages(f), 4, "lifetime: pages stay in the unmapped object");
	x = map_shmem(mm, 0, 4 * PG, PM_PROT_READ, SHARED, f, 0);
	is_int(pmt_bad_tag(mm, x, 4, 0x11, 0), 0, "lifetime: a new mapping sees the data");
	is_int(pmt_put_tag(mm, x, 1, 0x12, 0), 0,
	       "lifetime: a read-only shared mapping refuses writes");
	pm_mm_destroy(mm);
	is_int(pm_machine_free_pages(m) < free0, 1, "lifetime: pages held while the object lives");
	pm_shmem_put(f);
	pmt_end(m, free0, &pmt_end_returned, "lifetime");
}

/* PM_MAP_SHARED|PM_MAP_ANONYMOUS: an internal object, shared (not copied) across fork. */
static void test_anon_shared_fork(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *p = pm_mm_create(m), *c, *g;
	unsigned long bad_pfn = 0;
	long x;

	ASSERT_TRUE(p);
	x = pm_mmap(p, 0, 8 * PG, RW, SHARED | PM_MAP_ANONYMOUS, NULL, 0);
	ok(x > 0, "anon shared: mmap");
	ASSERT_TRUE(x > 0);
	is_int(pmt_put_tag(p, x, 4, 0x21, 0), 4, "anon shared: parent writes pages 0..3");
	c = pmt_fork(p);
	is_int(pmt_bad_tag(c, x, 4, 0x21, 0), 0, "anon shared: child reads the parent's data");
	is_int(pmt_put_tag(c, x, 2, 0x22, 0), 2, "anon shared: child writes pages 0..1");
	is_int(pmt_bad_tag(p, x, 2, 0x22, 0), 0, "anon shared: parent sees the child's writes");
	is_int(pmt_put_tag(p, x + 2 * PG, 2, 0x23, 2), 2, "anon shared: parent writes pages 2..3");
	is_int(pmt_bad_tag(c, x + 2 * PG, 2, 0x23, 2), 0,
	       "anon shared: child sees the parent's writes");
	/* A hole first faulted after fork, by the child, is the same page for the parent. */
	is_int(pmt_put_tag(c, x + 6 * PG, 1, 0x24, 6), 1, "anon shared: child fills a hole");
	is_int(pmt_bad_tag(p, x + 6 * PG, 1, 0x24, 6), 0,
	       "anon shared: parent sees the filled hole");
	is_int(pmt_bad_tag(p, x + 7 * PG, 1, 0, 7), 0, "anon shared: an untouched page reads zero");
	for (unsigned long i = 0; i < 8; i++) {
		unsigned long pp, pc;

		ASSERT_EQ(pm_fault(p, x + i * PG, 0), 0);
		ASSERT_EQ(pm_fault(c, x + i * PG, 0), 0);
		pp = pmt_pfn_at(p, x + i * PG);
		pc = pmt_pfn_at(c, x + i * PG);
		bad_pfn += pp == ULONG_MAX || pp != pc;
	}
	is_int(bad_pfn, 0, "anon shared: parent and child map the same frames");
	g = pmt_fork(c);
	is_int(pmt_put_tag(g, x, 1, 0x25, 0), 1, "anon shared: grandchild writes page 0");
	is_int(pmt_bad_tag(p, x, 1, 0x25, 0), 0,
	       "anon shared: the parent sees the grandchild's write");
	is_int(PMT_STAT(m, cow_copies), 0, "anon shared: nothing was copied");
	pm_mm_destroy(p);
	is_int(pmt_bad_tag(c, x, 1, 0x25, 0), 0, "anon shared: data survives the parent");
	pm_mm_destroy(g);
	pm_mm_destroy(c);
	pmt_end(m, free0, &pmt_end_returned, "anon shared");
}

/* MAP_PRIVATE: reads see the object until written; writes never reach the object. */
static void test_private_cow(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0), *h = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *w = pm_mm_create(m), *p = pm_mm_create(m), *q = pm_mm_create(m), *c;
	struct pm_page *pp = NULL, *pw = NULL;
	long xw, xp, xq, xh, xhw;

	ASSERT_TRUE(f && h && w && p && q);
	xw = map_shmem(w, 0, 8 * PG, RW, SHARED, f, 0);
	xp = map_shmem(p, 0, 8 * PG, RW, PRIVATE, f, 0);
	xq = map_shmem(q, 0, 8 * PG, RW, PRIVATE, f, 0);
	is_int(pmt_put_tag(w, xw, 8, 0x31, 0), 8,
	       "private: object written through a shared mapping");
	is_int(pmt_bad_tag(p, xp, 8, 0x31, 0), 0, "private: a private mapping reads the object");
	is_int(pmt_put_tag(p, xp, 2, 0x32, 0), 2, "private: private writes to pages 0..1");
	is_int(pmt_bad_tag(p, xp, 2, 0x32, 0), 0, "private: the writer reads its private data");
	is_int(pmt_bad_tag(w, xw, 2, 0x31, 0), 0, "private: the object is unchanged");
	is_int(pmt_bad_tag(q, xq, 2, 0x31, 0), 0, "private: another private mapping is unchanged");
	is_int(pm_shmem_nr_pages(f), 8, "private: private copies are not in the cache");

	/* The object changes: private copies keep theirs, unwritten pages follow the object. */
	is_int(pmt_put_tag(w, xw, 8, 0x33, 0), 8, "private: object rewritten");
	is_int(pmt_bad_tag(p, xp, 2, 0x32, 0), 0, "private: private copies keep their data");
	is_int(pmt_bad_tag(p, xp + 2 * PG, 6, 0x33, 2), 0,
	       "private: pages not yet written privately show the new object data");
	is_int(pmt_bad_tag(q, xq, 8, 0x33, 0), 0, "private: a read-only user follows the object");

	is_int(pm_pin_user_pages(p, xp, 1, 0, &pp), 1, "private: pin the private copy");
	is_int(pm_pin_user_pages(w, xw, 1, 0, &pw), 1, "private: pin the object's page");
	ok(pp && pw && pm_page_to_pfn(pp) != pm_page_to_pfn(pw),
	   "private: the private copy is a different frame");
	ok(pp && pm_folio_test_anon(pm_page_folio(pp)), "private: the copy is anonymous");
	ok(pw && !pm_folio_test_anon(pm_page_folio(pw)), "private: the cache page is not");
	pm_unpin_user_page(pp);
	pm_unpin_user_page(pw);

	/* A fork inherits the private copies, and COW keeps parent and child apart. */
	c = pmt_fork(p);
	is_int(pmt_bad_tag(c, xp, 2, 0x32, 0), 0, "private: the child inherits the private copies");
	is_int(pmt_put_tag(p, xp, 1, 0x34, 0), 1, "private: parent rewrites its copy");
	is_int(pmt_bad_tag(c, xp, 1, 0x32, 0), 0, "private: the child keeps the old private data");
	is_int(pmt_bad_tag(w, xw, 1, 0x33, 0), 0, "private: the object is still unchanged");
	pm_mm_destroy(c);

	/* A private write into a hole: the object stays zero there. */
	xh = map_shmem(p, 0, 4 * PG, RW, PRIVATE, h, 0);
	xhw = map_shmem(w, 0, 4 * PG, RW, SHARED, h, 0);
	is_int(pmt_put_tag(p, xh, 1, 0x35, 0), 1, "private: write a hole privately");
	is_int(pmt_bad_tag(w, xhw, 1, 0, 0), 0, "private: the object reads zero there");
	is_int(pmt_bad_tag(p, xh + PG, 1, 0, 1), 0, "private: a private read of a hole reads zero");
	is_int(pmt_put_tag(w, xhw + PG, 1, 0x36, 1), 1, "private: the object writes that page");
	is_int(pmt_bad_tag(p, xh + PG, 1, 0x36, 1), 0, "private: the private reader follows it");

	pm_shmem_put(f);
	pm_shmem_put(h);
	pm_mm_destroy(w);
	pm_mm_destroy(p);
	pm_mm_destroy(q);
	pmt_end(m, free0, &pmt_end_returned, "private");
}

/* ---- racing faults on the same index ---- */

struct racer {
	pthread_barrier_t *bar;
	struct pm_mm *mm;
	unsigned long addr, n;
	unsigned flags;
	long ok, efault, other;
};

static void *racer_fn(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->bar);
	for (unsigned long i = 0; i < r->n; i++) {
		int e = pm_fault(r->mm, r->addr + i * PG, r->flags);

		if (!e)
			r->ok++;
		else if (e == -EFAULT)
			r->efault++;
		else
			r->other++;
	}
	return NULL;
}

/*
 * Two threads fault the same indexes at once, through two address spaces (or one), read or
 * write: one page per index in the cache, both mappings on it, refcounts exact.
 */
static void test_fault_race(unsigned knobs, bool same_mm, unsigned flags0, unsigned flags1)
{
	struct pm_machine *m = pmt_machine(64, knobs);
	size_t free0 = pm_machine_free_pages(m);
	const unsigned long n = 256;
	long rounds = tap_scale(12), errs = 0, bad_nr = 0, bad_allocs = 0, bad_pfn = 0,
	     bad_count = 0, bad_zero = 0;
	unsigned long races0 = PMT_STAT(m, shmem_alloc_races);
	char what[96];

	snprintf(what, sizeof(what), "race %s, %s/%s, knobs %#x", same_mm ? "one mm" : "two mms",
		 flags0 ? "write" : "read", flags1 ? "write" : "read", knobs);
	for (long r = 0; r < rounds; r++) {
		struct pm_shmem *f = pm_shmem_create(m, n * PG, 0);
		struct pm_mm *mm0 = pm_mm_create(m), *mm1 = same_mm ? mm0 : pm_mm_create(m);
		unsigned long allocs0 = PMT_STAT(m, shmem_allocs);
		pthread_barrier_t bar;
		pthread_t t[2];
		struct racer rc[2];
		long a0, a1;

		ASSERT_TRUE(f && mm0 && mm1);
		a0 = map_shmem(mm0, 0, n * PG, RW, SHARED, f, 0);
		a1 = same_mm ? a0 : map_shmem(mm1, 0, n * PG, RW, SHARED, f, 0);
		pthread_barrier_init(&bar, NULL, 2);
		rc[0] = (struct racer){ .bar = &bar, .mm = mm0, .addr = a0, .n = n,
					.flags = flags0 };
		rc[1] = (struct racer){ .bar = &bar, .mm = mm1, .addr = a1, .n = n,
					.flags = flags1 };
		for (int i = 0; i < 2; i++)
			ASSERT_EQ(pthread_create(&t[i], NULL, racer_fn, &rc[i]), 0);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&bar);
		errs += rc[0].efault + rc[0].other + rc[1].efault + rc[1].other;
		bad_nr += pm_shmem_nr_pages(f) != n;
		bad_allocs += PMT_STAT(m, shmem_allocs) - allocs0 != n;
		for (unsigned long i = 0; i < n; i++) {
			struct pm_page *p0 = NULL, *p1 = NULL;
			int maps = same_mm ? 1 : 2;

			if (pm_pin_user_pages(mm0, a0 + i * PG, 1, PM_FOLL_NOFAULT, &p0) != 1 ||
			    pm_pin_user_pages(mm1, a1 + i * PG, 1, PM_FOLL_NOFAULT, &p1) != 1) {
				bad_pfn++;
				if (p0)
					pm_unpin_user_page(p0);
				continue;
			}
			bad_pfn += pm_page_to_pfn(p0) != pm_page_to_pfn(p1);
			/* mappings + the cache + two pins */
			bad_count += pm_folio_mapcount(pm_page_folio(p0)) != maps ||
				     pm_folio_ref_count(pm_page_folio(p0)) != maps + 1 + 2 * 1024;
			bad_zero += !pmt_page_is(pm_page_address(p0), 0, 0);
			pm_unpin_user_page(p0);
			pm_unpin_user_page(p1);
		}
		pm_shmem_put(f);
		pm_mm_destroy(mm0);
		if (!same_mm)
			pm_mm_destroy(mm1);
	}
	is_int(errs, 0, "%s: every fault succeeds", what);
	is_int(bad_nr, 0, "%s: one page per index in the cache", what);
	is_int(bad_allocs, 0, "%s: shmem_allocs counts each index once", what);
	is_int(bad_pfn, 0, "%s: both mappings hold the cache's page", what);
	is_int(bad_count, 0, "%s: mapcount and refcount exact (no leaked loser reference)", what);
	is_int(bad_zero, 0, "%s: every new page reads zero", what);
	diag("%s: %lu allocation races in %ld rounds", what,
	     PMT_STAT(m, shmem_alloc_races) - races0, rounds);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- the max_bytes limit ---- */

static void test_limit(unsigned knobs)
{
	struct pm_machine *m = pmt_machine(64, knobs);
	size_t free0 = pm_machine_free_pages(m), free1;
	struct pm_shmem *f = pm_shmem_create(m, 16 * PG, 8 * PG);
	struct pm_mm *mm = pm_mm_create(m), *mm2 = pm_mm_create(m);
	static char buf[16 * PM_PAGE_SIZE];
	struct pm_page *pages[16];
	long x, x2, okc = 0;
	char what[48];

	snprintf(what, sizeof(what), "limit (knobs %#x)", knobs);
	ASSERT_TRUE(f && mm && mm2);
	x = map_shmem(mm, HINT, 16 * PG, RW, SHARED, f, 0);
	x2 = map_shmem(mm2, HINT, 16 * PG, RW, SHARED, f, 0);
	for (unsigned long i = 0; i < 8; i++)
		okc += pm_fault(mm, x + i * PG, PM_FAULT_WRITE) == 0;
	is_int(okc, 8, "%s: 8 pages fit", what);
	is_int(pm_fault(mm2, x2 + 3 * PG, PM_FAULT_WRITE), 0,
	       "%s: faults on pages already in the cache still work", what);
	free1 = pmt_free_pages(m);
	is_int(pm_fault(mm, x + 8 * PG, PM_FAULT_WRITE), -EFAULT,
	       "%s: the 9th write fault is SIGBUS", what);
	is_int(pm_fault(mm, x + 9 * PG, 0), -EFAULT, "%s: a read fault of a hole too", what);
	is_int(pm_fault(mm2, x2 + 15 * PG, 0), -EFAULT, "%s: from another address space too", what);
	is_int(pmt_free_pages(m), free1, "%s: failed faults leak no frame", what);
	is_int(pm_shmem_nr_pages(f), 8, "%s: 8 pages in the cache", what);

	memset(buf, 0x5a, sizeof(buf));
	is_int(pm_access(mm, x, buf, 16 * PG, 1), 8 * PG, "%s: pm_access stops at the limit", what);
	is_int(pm_access(mm, x + 8 * PG, buf, PG, 1), -EFAULT, "%s: pm_access beyond it: -EFAULT",
	       what);
	is_int(pm_access(mm2, x2 + 8 * PG, buf, PG, 0), -EFAULT, "%s: a read beyond it too", what);
	is_int(pm_access(mm2, x2 + 6 * PG, buf, 4 * PG, 0), 2 * PG, "%s: a read across it stops",
	       what);
	is_int(pm_pin_user_pages(mm, x, 16, PM_FOLL_WRITE, pages), 8,
	       "%s: a pin of 16 pages takes the 8 that exist", what);
	pm_unpin_user_pages(pages, 8);
	is_int(pm_pin_user_pages_fast(mm2, x2 + 8 * PG, 1, 0, pages), -EFAULT,
	       "%s: a fast pin beyond the limit: -EFAULT", what);
	is_int(pm_shmem_nr_pages(f), 8, "%s: still 8 pages", what);

	/* Truncation gives the blocks back. */
	is_int(pm_shmem_truncate(f, 4 * PG), 0, "%s: shrink to 4 pages", what);
	is_int(pm_shmem_truncate(f, 16 * PG), 0, "%s: grow back to 16", what);
	is_int(pm_shmem_nr_pages(f), 4, "%s: 4 pages left", what);
	okc = 0;
	for (unsigned long i = 8; i < 12; i++)
		okc += pm_fault(mm2, x2 + i * PG, PM_FAULT_WRITE) == 0;
	is_int(okc, 4, "%s: the 4 freed blocks can be used again", what);
	is_int(pm_fault(mm, x + 4 * PG, PM_FAULT_WRITE), -EFAULT, "%s: and then the limit again",
	       what);
	is_int(pm_shmem_nr_pages(f), 8, "%s: 8 pages", what);
	is_int(pmt_bad_tag(mm, x + 8 * PG, 4, 0, 0), 0, "%s: the refilled pages read zero", what);
	is_int(pm_access(mm, x + 4 * PG, buf, PG, 0), -EFAULT,
	       "%s: the truncated pages are holes over the limit", what);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pm_mm_destroy(mm2);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* Threads faulting disjoint indexes past the limit: exactly the limit gets in. */
static void test_limit_concurrent(unsigned knobs)
{
	enum { T = 4, N = 256, LIMIT = 100 };
	struct pm_machine *m = pmt_machine(64, knobs);
	size_t free0 = pm_machine_free_pages(m);
	long rounds = tap_scale(10), bad_sum = 0, bad_nr = 0, bad_other = 0, bad_leak = 0;
	char what[64];

	snprintf(what, sizeof(what), "limit, %d threads (knobs %#x)", T, knobs);
	for (long r = 0; r < rounds; r++) {
		size_t before = pmt_free_pages(m);
		struct pm_shmem *f = pm_shmem_create(m, N * PG, LIMIT * PG);
		struct pm_mm *mm[T];
		struct racer rc[T];
		pthread_t t[T];
		pthread_barrier_t bar;
		long sum = 0;

		ASSERT_TRUE(f);
		pthread_barrier_init(&bar, NULL, T);
		for (int i = 0; i < T; i++) {
			long a;

			mm[i] = pm_mm_create(m);
			ASSERT_TRUE(mm[i]);
			a = map_shmem(mm[i], 0, N * PG, RW, SHARED, f, 0);
			/* Thread i faults indexes i*N/T ... (i+1)*N/T - 1 */
			rc[i] = (struct racer){ .bar = &bar, .mm = mm[i],
						.addr = a + i * (N / T) * PG, .n = N / T,
						.flags = (i & 1) ? 0 : PM_FAULT_WRITE };
			ASSERT_EQ(pthread_create(&t[i], NULL, racer_fn, &rc[i]), 0);
		}
		for (int i = 0; i < T; i++) {
			pthread_join(t[i], NULL);
			sum += rc[i].ok;
			bad_other += rc[i].other;
		}
		pthread_barrier_destroy(&bar);
		bad_sum += sum != LIMIT;
		bad_nr += pm_shmem_nr_pages(f) != LIMIT;
		if (sum != LIMIT)
			diag("%s: round %ld: %ld faults succeeded", what, r, sum);
		pm_shmem_put(f);
		for (int i = 0; i < T; i++)
			pm_mm_destroy(mm[i]);
		bad_leak += pmt_free_pages(m) != before;
	}
	is_int(bad_sum, 0, "%s: exactly %d faults succeed", what, LIMIT);
	is_int(bad_nr, 0, "%s: exactly %d pages in the cache", what, LIMIT);
	is_int(bad_other, 0, "%s: failures are -EFAULT only", what);
	is_int(bad_leak, 0, "%s: every round returns its frames", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/*
 * The last pages under the limit, raced for by two threads: the loser uses the winner's page,
 * so neither may fail (blocks are charged after a successful insert only).
 */
static void test_limit_race_last(unsigned knobs)
{
	enum { N = 8 };
	struct pm_machine *m = pmt_machine(64, knobs);
	size_t free0 = pm_machine_free_pages(m);
	long rounds = tap_scale(100), fails = 0, bad_nr = 0, bad_after = 0;
	char what[64];

	snprintf(what, sizeof(what), "limit race for the last pages (knobs %#x)", knobs);
	for (long r = 0; r < rounds; r++) {
		struct pm_shmem *f = pm_shmem_create(m, 2 * N * PG, N * PG);
		struct pm_mm *mm0 = pm_mm_create(m), *mm1 = pm_mm_create(m);
		pthread_barrier_t bar;
		struct racer rc[2];
		pthread_t t[2];
		long a0, a1;

		ASSERT_TRUE(f && mm0 && mm1);
		a0 = map_shmem(mm0, 0, 2 * N * PG, RW, SHARED, f, 0);
		a1 = map_shmem(mm1, 0, 2 * N * PG, RW, SHARED, f, 0);
		pthread_barrier_init(&bar, NULL, 2);
		rc[0] = (struct racer){ .bar = &bar, .mm = mm0, .addr = a0, .n = N,
					.flags = PM_FAULT_WRITE };
		rc[1] = (struct racer){ .bar = &bar, .mm = mm1, .addr = a1, .n = N,
					.flags = r & 1 ? 0 : PM_FAULT_WRITE };
		for (int i = 0; i < 2; i++)
			ASSERT_EQ(pthread_create(&t[i], NULL, racer_fn, &rc[i]), 0);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&bar);
		fails += rc[0].efault + rc[0].other + rc[1].efault + rc[1].other;
		bad_nr += pm_shmem_nr_pages(f) != N;
		bad_after += pm_fault(mm0, a0 + N * PG, 0) != -EFAULT;
		pm_shmem_put(f);
		pm_mm_destroy(mm0);
		pm_mm_destroy(mm1);
	}
	is_int(fails, 0, "%s: no spurious SIGBUS", what);
	is_int(bad_nr, 0, "%s: the object is exactly full", what);
	is_int(bad_after, 0, "%s: the next page is over the limit", what);
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* ---- truncation ---- */

static void test_truncate_beyond(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	struct pm_mm *mm = pm_mm_create(m);
	static char buf[2 * PM_PAGE_SIZE];
	struct pm_page *pages[8];
	long x;

	ASSERT_TRUE(f && mm);
	x = map_shmem(mm, HINT, 8 * PG, RW, SHARED, f, 0);
	is_int(pmt_put_tag(mm, x, 8, 0x41, 0), 8, "truncate: fill 8 pages");
	is_int(pm_shmem_truncate(f, 4 * PG), 0, "truncate: shrink to 4 pages");
	is_int(pm_shmem_size(f), 4 * PG, "truncate: size is 4 pages");
	is_int(pm_shmem_nr_pages(f), 4, "truncate: 4 pages left in the cache");
	is_int(pm_fault(mm, x + 5 * PG, 0), -EFAULT,
	       "truncate: read fault beyond the size: SIGBUS");
	is_int(pm_fault(mm, x + 4 * PG, PM_FAULT_WRITE), -EFAULT,
	       "truncate: write fault at the size: SIGBUS");
	is_int(pm_access(mm, x + 4 * PG, buf, PG, 0), -EFAULT,
	       "truncate: pm_access beyond: -EFAULT");
	is_int(pm_access(mm, x + 3 * PG, buf, 2 * PG, 0), PG,
	       "truncate: pm_access stops at the size");
	is_int(pm_pin_user_pages(mm, x, 8, 0, pages), 4, "truncate: a pin stops at the size");
	pm_unpin_user_pages(pages, 4);
	is_int(pm_get_user_pages_fast(mm, x + 6 * PG, 1, 0, pages), -EFAULT,
	       "truncate: a fast get beyond the size: -EFAULT");
	is_int(pmt_bad_tag(mm, x, 4, 0x41, 0), 0, "truncate: pages below the size are intact");
	is_int(pm_shmem_nr_pages(f), 4, "truncate: failed faults added nothing");

	/* A size inside a page: that page stays, its tail is gone (POSIX: reads as zero). */
	is_int(pm_shmem_truncate(f, 2 * PG + 100), 0, "truncate: shrink to 2 pages + 100 bytes");
	is_int(pm_shmem_size(f), 2 * PG + 100, "truncate: size is exact");
	is_int(pm_fault(mm, x + 2 * PG, 0), 0, "truncate: the page holding the end is mapped");
	is_int(pm_fault(mm, x + 3 * PG, 0), -EFAULT, "truncate: the next one is beyond the end");
	is_int(pm_shmem_truncate(f, 8 * PG), 0, "truncate: grow to 8 pages");
	memset(buf, 0xff, sizeof(buf));
	is_int(pm_access(mm, x + 2 * PG, buf, PG, 0), PG, "truncate: read the old end page");
	{
		const uint64_t *w = (const uint64_t *)buf;
		unsigned long bad = 0;

		for (unsigned long k = 0; k < 96 / 8; k++)
			bad += w[k] != pmt_tag_word(0x41, 2);
		for (unsigned long k = 104 / 8; k < PG / 8; k++)
			bad += w[k] != 0;
		is_int(bad, 0, "truncate: bytes before the old end kept, bytes after it zeroed");
	}
	is_int(pmt_bad_tag(mm, x + 3 * PG, 5, 0, 3), 0, "truncate: re-grown pages read zero");

	is_int(pm_shmem_truncate(f, 0), 0, "truncate: to zero");
	is_int(pm_shmem_nr_pages(f), 0, "truncate: empty cache");
	is_int(pm_fault(mm, x, 0), -EFAULT, "truncate: nothing is inside an empty object");
	is_int(pm_shmem_truncate(f, SIZE_MAX), -EINVAL, "truncate: an overflowing size: -EINVAL");
	is_int(pm_shmem_size(f), 0, "truncate: the failed call changed nothing");
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "truncate");
}

/* Truncation unmaps what it drops from every mapping, private COW copies included. */
static void test_truncate_mapped(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m), before;
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	struct pm_mm *s1 = pm_mm_create(m), *s2 = pm_mm_create(m), *pv = pm_mm_create(m);
	struct pm_mm *mms[3] = { s1, s2, pv };
	long x1, x2, xp, stale = 0;
	long addr[3];

	ASSERT_TRUE(f && s1 && s2 && pv);
	x1 = map_shmem(s1, HINT, 8 * PG, RW, SHARED, f, 0);
	x2 = map_shmem(s2, HINT, 8 * PG, RW, SHARED, f, 0);
	xp = map_shmem(pv, HINT, 8 * PG, RW, PRIVATE, f, 0);
	addr[0] = x1;
	addr[1] = x2;
	addr[2] = xp;
	is_int(pmt_put_tag(s1, x1, 8, 0x51, 0), 8, "truncate mapped: fill");
	is_int(pmt_bad_tag(s2, x2, 8, 0x51, 0), 0, "truncate mapped: second shared mapping reads");
	is_int(pmt_bad_tag(pv, xp, 8, 0x51, 0), 0, "truncate mapped: private mapping reads");
	is_int(pmt_put_tag(pv, xp + PG, 1, 0x52, 1), 1, "truncate mapped: private copy of page 1");
	is_int(pmt_put_tag(pv, xp + 5 * PG, 2, 0x52, 5), 2,
	       "truncate mapped: private copies of 5, 6");
	before = pmt_free_pages(m);
	is_int(pm_shmem_truncate(f, 4 * PG), 0, "truncate mapped: shrink to 4 pages");
	is_int(pmt_free_pages(m) - before, 4 + 2,
	       "truncate mapped: 4 cache pages and 2 private copies freed");
	is_int(pm_shmem_nr_pages(f), 4, "truncate mapped: 4 pages left");
	for (int j = 0; j < 3; j++)
		for (unsigned long i = 4; i < 8; i++)
			stale += pm_fault(mms[j], addr[j] + i * PG, 0) != -EFAULT;
	is_int(stale, 0, "truncate mapped: every mapping faults SIGBUS beyond the size");
	is_int(pm_shmem_truncate(f, 8 * PG), 0, "truncate mapped: grow back");
	stale = 0;
	for (int j = 0; j < 3; j++)
		for (unsigned long i = 4; i < 8; i++)
			stale += pmt_pfn_at(mms[j], addr[j] + i * PG) != ULONG_MAX;
	is_int(stale, 0, "truncate mapped: no mapping kept a page beyond the old size");
	is_int(pmt_bad_tag(s1, x1 + 4 * PG, 4, 0, 4), 0,
	       "truncate mapped: re-grown pages read zero");
	is_int(pmt_bad_tag(s2, x2 + 4 * PG, 4, 0, 4), 0,
	       "truncate mapped: in the other mapping too");
	is_int(pmt_bad_tag(pv, xp + 4 * PG, 4, 0, 4), 0,
	       "truncate mapped: and where private copies were");
	is_int(pmt_bad_tag(s1, x1, 4, 0x51, 0), 0, "truncate mapped: pages below the size intact");
	is_int(pmt_bad_tag(s2, x2, 4, 0x51, 0), 0, "truncate mapped: in the other mapping too");
	is_int(pmt_bad_tag(pv, xp, 1, 0x51, 0) + pmt_bad_tag(pv, xp + PG, 1, 0x52, 1) +
		       pmt_bad_tag(pv, xp + 2 * PG, 2, 0x51, 2),
	       0, "truncate mapped: a private copy below the size survives");
	is_int(pm_shmem_nr_pages(f), 8, "truncate mapped: 8 pages again");
	pm_shmem_put(f);
	pm_mm_destroy(s1);
	pm_mm_destroy(s2);
	pm_mm_destroy(pv);
	pmt_end(m, free0, &pmt_end_returned, "truncate mapped");
}

/* A pinned page outlives its truncation until it is unpinned. */
static void test_truncate_pinned(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m), before, after;
	struct pm_shmem *f = pm_shmem_create(m, 8 * PG, 0);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_mm *pv = pm_mm_create(m);
	struct pm_page *p5 = NULL, *p6 = NULL, *pc = NULL;
	unsigned long pfn5 = 0, npfn;
	long x, xp;

	ASSERT_TRUE(f && mm && pv);
	x = map_shmem(mm, HINT, 8 * PG, RW, SHARED, f, 0);
	xp = map_shmem(pv, HINT, 8 * PG, RW, PRIVATE, f, 0);
	is_int(pmt_put_tag(mm, x, 8, 0x61, 0), 8, "truncate pinned: fill");
	is_int(pmt_put_tag(pv, xp + 7 * PG, 1, 0x63, 7), 1,
	       "truncate pinned: private copy of page 7");
	is_int(pm_pin_user_pages_fast(pv, xp + 7 * PG, 1, PM_FOLL_WRITE, &pc), 1,
	       "truncate pinned: pin the private copy");
	ASSERT_TRUE(pc != NULL);
	is_int(pm_pin_user_pages(mm, x + 5 * PG, 1, PM_FOLL_WRITE, &p5), 1,
	       "truncate pinned: R/W pin page 5");
	is_int(pm_pin_user_pages_fast(mm, x + 6 * PG, 1, PM_FOLL_LONGTERM, &p6), 1,
	       "truncate pinned: R/O long-term fast pin page 6");
	ASSERT_TRUE(p5 && p6);
	pfn5 = pm_page_to_pfn(p5);
	before = pmt_free_pages(m);
	is_int(pm_shmem_truncate(f, 4 * PG), 0, "truncate pinned: shrink to 4 pages");
	after = pmt_free_pages(m);
	is_int(after - before, 2, "truncate pinned: only the 2 unpinned cache pages were freed");
	is_int(pmt_pfn_at(pv, xp + 7 * PG), ULONG_MAX,
	       "truncate pinned: the private copy is unmapped");
	ok(pmt_page_is(pm_page_address(pc), 0x63, 7), "truncate pinned: its pin still reads it");
	is_int(pm_shmem_nr_pages(f), 4, "truncate pinned: the pinned pages left the cache");
	ok(pmt_page_is(pm_page_address(p5), 0x61, 5) && pmt_page_is(pm_page_address(p6), 0x61, 6),
	   "truncate pinned: the pins still read the data");
	pmt_fill_tag(pm_page_address(p5), 0x62, 5);
	ok(pmt_page_is(pm_page_address(p5), 0x62, 5),
	   "truncate pinned: writing through the pin works");
	is_int(pm_folio_mapcount(pm_page_folio(p5)), 0, "truncate pinned: the page is unmapped");
	is_int(pm_folio_ref_count(pm_page_folio(p5)), 1024,
	       "truncate pinned: only the pin holds the page");
	ok(pm_folio_maybe_dma_pinned(pm_page_folio(p6)), "truncate pinned: page 6 still pinned");
	is_int(pm_shmem_truncate(f, 8 * PG), 0, "truncate pinned: grow back");
	is_int(pmt_bad_tag(mm, x + 5 * PG, 1, 0, 5), 0,
	       "truncate pinned: index 5 is a new zero page, not the pinned one");
	npfn = pmt_pfn_at(mm, x + 5 * PG);
	ok(npfn != ULONG_MAX && npfn != pfn5, "truncate pinned: a different frame");
	ok(pmt_page_is(pm_page_address(p5), 0x62, 5), "truncate pinned: the pin kept its data");
	before = pmt_free_pages(m);
	pm_unpin_user_page(p5);
	is_int(pmt_free_pages(m) - before, 1, "truncate pinned: the last unpin frees page 5");
	pm_unpin_user_page(p6);
	is_int(pmt_free_pages(m) - before, 2, "truncate pinned: and page 6");
	pm_unpin_user_page(pc);
	is_int(pmt_free_pages(m) - before, 3, "truncate pinned: and the private copy");
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pm_mm_destroy(pv);
	pmt_end(m, free0, &pmt_end_returned, "truncate pinned");
}

/* Destroying everything with a page still pinned: that page lives until the unpin. */
static void test_destroy_pinned(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 32 * PG, 0);
	struct pm_mm *mm = pm_mm_create(m), *c;
	struct pm_page *p = NULL;
	long x;

	ASSERT_TRUE(f && mm);
	x = map_shmem(mm, 0, 32 * PG, RW, SHARED, f, 0);
	is_int(pmt_put_tag(mm, x, 32, 0x71, 0), 32, "destroy: fill 32 pages");
	c = pmt_fork(mm);
	is_int(pm_pin_user_pages_fast(c, x + 7 * PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &p), 1,
	       "destroy: the child pins page 7");
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pm_mm_destroy(c);
	is_int(pmt_free_pages(m), free0 - 1, "destroy: everything but the pinned page returned");
	ok(p && pmt_page_is(pm_page_address(p), 0x71, 7), "destroy: the pin still reads the data");
	pm_unpin_user_page(p);
	pmt_end(m, free0, &pmt_end_returned, "destroy");
}

/* ---- the knob: identical results, different locking ---- */

#define MAXRES 128

static void knob_scenario(unsigned knobs, long *res, int *nres, unsigned long *locks_a,
			  unsigned long *allocs_a)
{
	struct pm_machine *m = pmt_machine(64, knobs);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 32 * PG, 24 * PG);
	struct pm_mm *a = pm_mm_create(m), *b = pm_mm_create(m), *c = pm_mm_create(m);
	unsigned long l0 = PMT_STAT(m, shmem_lock_acquisitions), s0 = PMT_STAT(m, shmem_allocs);
	static char buf[PM_PAGE_SIZE];
	long xa, xb, xc;
	int n = 0;

	ASSERT_TRUE(f && a && b && c);
	xa = map_shmem(a, HINT, 32 * PG, RW, SHARED, f, 0);
	xb = map_shmem(b, HINT, 32 * PG, RW, SHARED, f, 0);
	xc = map_shmem(c, HINT, 32 * PG, RW, PRIVATE, f, 0);
	/* Phase A: write faults on holes only. */
	for (unsigned long i = 0; i < 16; i++)
		res[n++] = pm_fault(a, xa + i * PG, PM_FAULT_WRITE);
	*locks_a = PMT_STAT(m, shmem_lock_acquisitions) - l0;
	*allocs_a = PMT_STAT(m, shmem_allocs) - s0;
	res[n++] = pmt_put_tag(a, xa, 16, 0x81, 0);
	for (unsigned long i = 0; i < 32; i++)
		res[n++] = pm_access(b, xb + i * PG, buf, PG, 0);
	res[n++] = (long)pm_shmem_nr_pages(f);
	res[n++] = pmt_put_tag(c, xc + 3 * PG, 1, 0x82, 3);
	res[n++] = pmt_put_tag(c, xc + 30 * PG, 1, 0x82, 30);
	res[n++] = pmt_bad_tag(b, xb + 3 * PG, 1, 0x81, 3);
	res[n++] = pm_shmem_truncate(f, 8 * PG);
	res[n++] = (long)pm_shmem_nr_pages(f);
	res[n++] = pm_fault(b, xb + 10 * PG, 0);
	res[n++] = pm_shmem_truncate(f, 32 * PG);
	res[n++] = pmt_bad_tag(a, xa + 10 * PG, 1, 0, 10);
	res[n++] = pmt_bad_tag(c, xc + 3 * PG, 1, 0x82, 3);
	res[n++] = pmt_bad_tag(b, xb, 8, 0x81, 0);
	for (unsigned long i = 16; i < 32; i++)
		res[n++] = pm_fault(c, xc + i * PG, PM_FAULT_WRITE);
	res[n++] = (long)pm_shmem_nr_pages(f);
	res[n++] = (long)(PMT_STAT(m, shmem_allocs) - s0);
	res[n++] = PMT_STAT(m, shmem_alloc_races);
	ASSERT_TRUE(n <= MAXRES);
	*nres = n;
	pm_shmem_put(f);
	pm_mm_destroy(a);
	pm_mm_destroy(b);
	pm_mm_destroy(c);
	pmt_end(m, free0, &pmt_end_returned,
		knobs ? "knob scenario (lock twice)" : "knob scenario (modern)");
}

static void test_knob_identical(void)
{
	long r0[MAXRES], r1[MAXRES];
	int n0 = 0, n1 = 0, diff = 0;
	unsigned long l0, l1, a0, a1;

	knob_scenario(0, r0, &n0, &l0, &a0);
	knob_scenario(PM_KNOB_SHMEM_LOCK_TWICE, r1, &n1, &l1, &a1);
	is_int(n1, n0, "knob: same number of results");
	for (int i = 0; i < n0 && i < n1; i++) {
		if (r0[i] != r1[i]) {
			if (!diff)
				diag("knob: result %d: modern %ld, lock twice %ld", i, r0[i],
				     r1[i]);
			diff++;
		}
	}
	is_int(diff, 0, "knob: identical return values, data and page counts");
	is_int(a0, 16, "knob: 16 pages allocated in phase A (modern)");
	is_int(a1, 16, "knob: 16 pages allocated in phase A (lock twice)");
	is_int(l0, 0, "knob: modern takes no object-wide lock per new page (leaf locks only)");
	is_int(l1, 32, "knob: lock twice takes it twice per new page");
}

/* ---- GUP on shmem mappings ---- */

static void test_gup_shmem(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	struct pm_mm *a = pm_mm_create(m), *b = pm_mm_create(m);
	struct pm_page *pins[4] = { 0 }, *q = NULL;
	unsigned long pins0 = PMT_STAT(m, nr_foll_pin_acquired);
	long xa, xb, xr;

	ASSERT_TRUE(f && a && b);
	xa = map_shmem(a, 0, 4 * PG, RW, SHARED, f, 0);
	xb = map_shmem(b, 0, 4 * PG, RW, SHARED, f, 0);
	is_int(pmt_put_tag(a, xa, 4, 0x91, 0), 4, "gup shmem: fill");
	is_int(pm_pin_user_pages(a, xa, 1, 0, &pins[0]), 1, "gup shmem: R/O pin");
	is_int(pm_pin_user_pages_fast(a, xa + PG, 1, PM_FOLL_LONGTERM, &pins[1]), 1,
	       "gup shmem: R/O long-term fast pin");
	is_int(pm_pin_user_pages_fast(a, xa + 2 * PG, 1, PM_FOLL_WRITE, &pins[2]), 1,
	       "gup shmem: R/W fast pin");
	is_int(pm_pin_user_pages(a, xa + 3 * PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pins[3]), 1,
	       "gup shmem: R/W long-term pin");
	is_int(PMT_STAT(m, nr_foll_pin_acquired) - pins0, 4, "gup shmem: 4 pins counted");
	is_int(PMT_STAT(m, cow_copies), 0, "gup shmem: pinning a shared mapping copies nothing");
	is_int(pmt_bad_pin(pins, 4, 0x91, 0), 0, "gup shmem: pins read the data");
	is_int(pmt_put_tag(b, xb, 4, 0x92, 0), 4, "gup shmem: the other address space writes");
	is_int(pmt_bad_pin(pins, 4, 0x92, 0), 0, "gup shmem: every pin sees it");
	is_int(pmt_put_tag(a, xa, 4, 0x93, 0), 4, "gup shmem: the pinning address space writes");
	is_int(pmt_bad_pin(pins, 4, 0x93, 0), 0, "gup shmem: every pin sees that too");
	pmt_fill_tag(pm_page_address(pins[2]), 0x94, 2);
	pmt_fill_tag(pm_page_address(pins[3]), 0x94, 3);
	is_int(pmt_bad_tag(a, xa + 2 * PG, 2, 0x94, 2), 0,
	       "gup shmem: writes through R/W pins show in A");
	is_int(pmt_bad_tag(b, xb + 2 * PG, 2, 0x94, 2), 0, "gup shmem: and in B");
	is_int(pm_get_user_pages(b, xb + 3 * PG, 1, 0, &q), 1, "gup shmem: get the page from B");
	ok(q && pm_page_to_pfn(q) == pm_page_to_pfn(pins[3]), "gup shmem: the same frame");
	pm_put_page(q);
	ok(pm_folio_maybe_dma_pinned(pm_page_folio(pins[0])), "gup shmem: maybe_dma_pinned");
	pm_unpin_user_pages_dirty_lock(pins, 4, true);
	ok(!pm_folio_maybe_dma_pinned(pm_page_folio(pins[0])), "gup shmem: not pinned after unpin");
	ok(pm_mm_has_pinned(a) && !pm_mm_has_pinned(b), "gup shmem: has-pinned only where pinned");

	/* A read-only shared mapping: no write pin, not even forced. */
	xr = map_shmem(b, 0, 4 * PG, PM_PROT_READ, SHARED, f, 0);
	is_int(pm_pin_user_pages(b, xr, 1, PM_FOLL_WRITE, &q), -EFAULT,
	       "gup shmem: R/W pin of a read-only shared mapping: -EFAULT");
	is_int(pm_pin_user_pages(b, xr, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, &q), -EFAULT,
	       "gup shmem: FOLL_FORCE on a shared mapping: -EFAULT");
	is_int(pm_get_user_pages_fast(b, xr, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, &q), -EFAULT,
	       "gup shmem: fast FOLL_FORCE on a shared mapping: -EFAULT");
	is_int(pm_pin_user_pages(b, xr, 1, 0, &q), 1, "gup shmem: R/O pin of it works");
	ok(q && pmt_page_is(pm_page_address(q), 0x93, 0), "gup shmem: and reads the data");
	pm_unpin_user_page(q);
	pm_shmem_put(f);
	pm_mm_destroy(a);
	pm_mm_destroy(b);
	pmt_end(m, free0, &pmt_end_returned, "gup shmem");
}

/* ---- arguments ---- */

static void test_args(void)
{
	struct pm_machine *m = pmt_machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_shmem *f;
	struct pm_mm *mm = pm_mm_create(m);

	errno = 0;
	f = pm_shmem_create(m, SIZE_MAX, 0);
	ok(!f && errno == EINVAL, "args: an overflowing size: NULL, EINVAL");
	f = pm_shmem_create(m, 100, 0);
	ASSERT_TRUE(f && mm);
	is_int(pm_shmem_size(f), 100, "args: the size is kept exactly");
	is_int(pm_mmap(mm, 0, PG, RW, SHARED, f, 100), -EINVAL, "args: unaligned offset: -EINVAL");
	{
		long a = pm_mmap(mm, 0, PG, RW, SHARED | PM_MAP_ANONYMOUS, f, 0);
		char c = 'a';

		ok(a > 0 && pm_access(mm, a, &c, 1, 1) == 1 && pm_shmem_nr_pages(f) == 0,
		   "args: a file with MAP_ANONYMOUS is ignored (Linux): shared anonymous memory");
	}
	{
		long x = map_shmem(mm, 0, 4 * PG, RW, SHARED, f, 0);

		static char buf[PM_PAGE_SIZE];
		unsigned long nonzero = 0;

		is_int(pm_fault(mm, x, PM_FAULT_WRITE), 0, "args: fault inside the object");
		memset(buf, 0x77, sizeof(buf));
		is_int(pm_access(mm, x, buf, PG, 0), PG, "args: the page holding the end reads");
		for (unsigned long k = 0; k < PG; k++)
			nonzero += buf[k] != 0;
		is_int(nonzero, 0, "args: a new object reads zero, past its size too");
		is_int(pm_fault(mm, x + PG, 0), -EFAULT,
		       "args: a mapping longer than the object: SIGBUS beyond it");
		x = map_shmem(mm, 0, PG, RW, SHARED, f, 8 * PG);
		is_int(pm_fault(mm, x, 0), -EFAULT, "args: a mapping beyond the end: SIGBUS");
	}
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "args");
}

int main(void)
{
	plan_no_plan();
	test_shared_two_mms();
	test_lifetime();
	test_anon_shared_fork();
	test_private_cow();
	for (unsigned k = 0; k <= PM_KNOB_SHMEM_LOCK_TWICE; k += PM_KNOB_SHMEM_LOCK_TWICE) {
		test_fault_race(k, false, PM_FAULT_WRITE, PM_FAULT_WRITE);
		test_fault_race(k, false, 0, 0);
		test_fault_race(k, true, 0, PM_FAULT_WRITE);
		test_limit(k);
		test_limit_concurrent(k);
		test_limit_race_last(k);
	}
	test_truncate_beyond();
	test_truncate_mapped();
	test_truncate_pinned();
	test_destroy_pinned();
	test_knob_identical();
	test_gup_shmem();
	test_args();
	return done_testing();
}
