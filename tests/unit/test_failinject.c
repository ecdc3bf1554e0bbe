// SPDX-License-Identifier: MIT
/*
 * test_failinject.c - the allocation-failure walk of issue 9. For each scenario, and for
 * N = 1, 2, ... until a run makes no injected failure happen (the injection's countdown did not
 * reach 0: fewer than N allocations), every run:
 *   1. builds its state with injection off (an address space, data written, pins, a child...),
 *   2. arms pm_fail_nth(m, N) and makes the call under test, then disarms it,
 *   3. checks the call's answer: success, -ENOMEM, or the documented partial result (a short
 *      count of pages or bytes; NULL with errno ENOMEM for constructors), never another error,
 *   4. checks that the data written in step 1 is intact, that what the call reports done is
 *      done (bytes written read back, pinned pages hold the data), pm_machine_check() == 0,
 *   5. tears everything down and checks, after pm_rcu_barrier(), that the machine's free
 *      pages are back to their value before step 1 and that pins are balanced.
 * It reports how many injection points (values of N that made an allocation fail) each
 * scenario covered. test_oom.c walks single calls (mmap, splits, faults, THP faults, pin);
 * this walk covers the compound paths: fork, pins that fault and unshare, shmem, umem, the
 * hugetlb paths (mmap's reservation, PMD faults, fork's copies, pins that COW),
 * MADV_POPULATE_WRITE, a MAP_LOCKED mmap, a stack's grow, and migration (pm_migrate_range,
 * pm_compact, long-term pins that leave the movable zone), including the split of a THP whose
 * target has no free 2 MiB block and the allocations of its 512 pages after the split (PMD-
 * and PTE-mapped, the whole THP or part of it in the range: the answer is then exactly the
 * number of the range's pages left behind).
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"
#include "mem/mem.h" /* white-box: the injection's countdown, pfn_in_movable_zone() */

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define SHARED_ANON (PM_MAP_SHARED | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define MAX_N 4096 /* a walk that does not end by then is a failure */

#define A 0x10000000UL /* data written before the call: must stay intact */
#define B 0x10400000UL /* what the call under test works on (2 MiB aligned) */
#define C 0x10800000UL /* shared memory */
#define T 0x7f0000000000UL /* a THP range under a PGD entry of its own: every table is new */
#define NA 16
#define NB 16

struct ctx {
	struct pm_machine *m;
	struct pm_mm *mm, *child;
	struct pm_shmem *f;
	struct pm_umem *umem;
	struct pm_page *pages[NB];
	long npinned;
	bool pinned_pages; /* pages[] holds pins (else nothing) */
	int err;	   /* errno after a NULL constructor */
	unsigned long addr; /* where a call put something (mremap's target) */
	bool grow;	    /* mremap: the growing move, not the fixed one */
	int ref0[NB], pin0[NB]; /* pages[]'s folio counts after the pins were taken */
	char why[160];	   /* what verify found wrong */
};

/* The page at address @base + @p * PG holds (salt + its page number * 7 + i) at offset i. */
static void fill(uint8_t *buf, unsigned long base, unsigned long p, unsigned salt)
{
	for (unsigned long i = 0; i < PG; i++)
		buf[i] = (uint8_t)(salt + ((base >> 12) + p) * 7 + i);
}

static bool stamp(struct pm_mm *mm, unsigned long base, unsigned long n, unsigned salt)
{
	uint8_t buf[PG];

	for (unsigned long p = 0; p < n; p++) {
		fill(buf, base, p, salt);
		if (pm_access(mm, base + p * PG, buf, PG, 1) != (long)PG)
			return false;
	}
	return true;
}

static bool stamped(struct pm_mm *mm, unsigned long base, unsigned long n, unsigned salt)
{
	uint8_t buf[PG], want[PG];

	for (unsigned long p = 0; p < n; p++) {
		fill(want, base, p, salt);
		if (pm_access(mm, base + p * PG, buf, PG, 0) != (long)PG || memcmp(buf, want, PG))
			return false;
	}
	return true;
}

static bool page_is(struct pm_page *page, unsigned long base, unsigned long p, unsigned salt)
{
	uint8_t want[PG];

	fill(want, base, p, salt);
	return !memcmp(pm_page_address(page), want, PG);
}

static bool fail(struct ctx *c, const char *why)
{
	snprintf(c->why, sizeof(c->why), "%s", why);
	return false;
}

/* The common state: an address space with NA stamped pages at A. */
static void base_setup(struct ctx *c)
{
	c->mm = pm_mm_create(c->m);
	ASSERT_TRUE(c->mm);
	ASSERT_EQ(pm_mmap(c->mm, A, NA * PG, RW, PRIV, NULL, 0), A);
	ASSERT_TRUE(stamp(c->mm, A, NA, 1));
}

static bool base_verify(struct ctx *c)
{
	return stamped(c->mm, A, NA, 1) || fail(c, "the data written before the call changed");
}

/* A count of bytes is whole pages when the access starts on a page boundary. */
static bool ok_bytes(long r, unsigned long len)
{
	return r == -ENOMEM || (r > 0 && r <= (long)len && r % PG == 0);
}

static bool ok_pages(long r, long nr)
{
	return r == -ENOMEM || (r > 0 && r <= nr);
}

/* ---- the scenarios ---- */

/* mmap of a new range, then a write of 16 pages into it: VMAs, page tables, pages. */
static long mmap_fault_run(struct ctx *c)
{
	uint8_t buf[NB * PG];
	long r = pm_mmap(c->mm, B, NB * PG, RW, PRIV, NULL, 0);

	if (r != (long)B)
		return r == -ENOMEM ? -1000 - ENOMEM : r; /* mmap's own answer, told apart */
	for (unsigned long p = 0; p < NB; p++)
		fill(buf + p * PG, B, p, 2);
	return pm_access(c->mm, B, buf, sizeof(buf), 1);
}

static bool mmap_fault_ok(struct ctx *c, long r)
{
	return r == -1000 - ENOMEM || ok_bytes(r, NB * PG);
}

static bool mmap_fault_verify(struct ctx *c, long r)
{
	char x;

	if (r == -1000 - ENOMEM)
		return pm_access(c->mm, B, &x, 1, 0) == -EFAULT ||
		       fail(c, "a failed mmap left a mapping");
	if (r > 0 && !stamped(c->mm, B, (unsigned long)r / PG, 2))
		return fail(c, "the bytes reported written do not read back");
	return true;
}

/* A THP write fault (falls back to 4 KiB pages when the huge folio fails). */
static void thp_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, PM_PMD_SIZE, RW, PRIV, NULL, 0), B);
	ASSERT_EQ(pm_madvise(c->mm, B, PM_PMD_SIZE, PM_MADV_HUGEPAGE), 0);
	ASSERT_EQ(pm_mmap(c->mm, T, PM_PMD_SIZE, RW, PRIV, NULL, 0), T);
	ASSERT_EQ(pm_madvise(c->mm, T, PM_PMD_SIZE, PM_MADV_HUGEPAGE), 0);
}

static long thp_run(struct ctx *c)
{
	uint8_t buf[2 * PG];

	fill(buf, T, 0, 3);
	fill(buf + PG, T, 1, 3);
	return pm_access(c->mm, T, buf, sizeof(buf), 1);
}

static bool thp_ok(struct ctx *c, long r)
{
	return ok_bytes(r, 2 * PG);
}

static bool thp_verify(struct ctx *c, long r)
{
	if (r > 0 && !stamped(c->mm, T, (unsigned long)r / PG, 3))
		return fail(c, "the bytes reported written do not read back");
	return base_verify(c);
}

/*
 * The huge zero page: a read fault of a THP-eligible range maps it (or falls back to 4 KiB
 * zero pages when the folio or its deposited table cannot be had); a write into it splits it
 * and copies 4 KiB; a R/O long-term pin unshares; fork shares it.
 */
static long hz_read_run(struct ctx *c)
{
	uint8_t buf[2 * PG];

	return pm_access(c->mm, T, buf, sizeof(buf), 0);
}

static bool hz_reads_zero(struct ctx *c, unsigned long from, unsigned long n)
{
	uint8_t buf[PG], zero[PG] = { 0 };

	for (unsigned long i = from; i < from + n; i++)
		if (pm_access(c->mm, T + i * PG, buf, PG, 0) != (long)PG || memcmp(buf, zero, PG))
			return fail(c, "a page of the huge zero range does not read zero");
	return true;
}

static bool hz_read_verify(struct ctx *c, long r)
{
	return base_verify(c) && hz_reads_zero(c, 0, 8);
}

/* thp_setup, then a read fault maps the huge zero page at T. */
static void hz_setup(struct ctx *c)
{
	uint8_t b;

	thp_setup(c);
	ASSERT_EQ(pm_access(c->mm, T + 5, &b, 1, 0), 1);
}

static bool hz_write_verify(struct ctx *c, long r)
{
	return thp_verify(c, r) && hz_reads_zero(c, 2, 30);
}

static long hz_pin_run(struct ctx *c)
{
	long r = pm_pin_user_pages_fast(c->mm, T + 8 * PG, 4, PM_FOLL_LONGTERM, c->pages);

	if (r > 0) {
		c->npinned = r;
		c->pinned_pages = true;
	}
	return r;
}

static bool hz_pin_verify(struct ctx *c, long r)
{
	uint8_t zero[PG] = { 0 }, b = 0x66;

	if (!base_verify(c) || !hz_reads_zero(c, 0, 8))
		return false;
	for (long i = 0; i < c->npinned; i++) {
		if (memcmp(pm_page_address(c->pages[i]), zero, PG))
			return fail(c, "a pinned page does not read zero");
		if (pm_page_is_zero(c->pages[i]))
			return fail(c, "a R/O long-term pin kept a zero page");
		if (pm_access(c->mm, T + (8 + (unsigned long)i) * PG + 3, &b, 1, 1) != 1 ||
		    ((uint8_t *)pm_page_address(c->pages[i]))[3] != 0x66)
			return fail(c, "a write to the address space does not reach its pin");
	}
	return true;
}

static bool hz_fork_verify(struct ctx *c, long r)
{
	uint8_t b;

	if (!base_verify(c) || !hz_reads_zero(c, 0, 4))
		return false;
	if (c->child && (!stamped(c->child, A, NA, 1) ||
			 pm_access(c->child, T + 3 * PG + 1, &b, 1, 0) != 1 || b))
		return fail(c, "the child does not see the parent's memory");
	b = 0x11;
	if (c->child && (pm_access(c->child, T + 3 * PG + 1, &b, 1, 1) != 1 ||
			 !hz_reads_zero(c, 3, 1)))
		return fail(c, "the child's write reaches the parent");
	return true;
}

/*
 * fork of a parent with private pages, a THP, a shared mapping and a R/W pin: the child gets
 * copies (the pinned page at once), or fork fails with ENOMEM and the parent is intact.
 */
static void fork_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, PM_PMD_SIZE, RW, PRIV, NULL, 0), B);
	ASSERT_EQ(pm_madvise(c->mm, B, PM_PMD_SIZE, PM_MADV_HUGEPAGE), 0);
	ASSERT_TRUE(stamp(c->mm, B, 4, 4));
	ASSERT_EQ(pm_mmap(c->mm, C, 8 * PG, RW, SHARED_ANON, NULL, 0), C);
	ASSERT_TRUE(stamp(c->mm, C, 8, 5));
	ASSERT_EQ(pm_pin_user_pages_fast(c->mm, A + 3 * PG, 1, PM_FOLL_WRITE, c->pages), 1);
	c->npinned = 1;
	c->pinned_pages = true;
}

static long fork_run(struct ctx *c)
{
	errno = 0;
	c->child = pm_mm_fork(c->mm);
	c->err = errno;
	return c->child ? 0 : -c->err;
}

static bool fork_ok(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM;
}

static bool fork_verify(struct ctx *c, long r)
{
	uint8_t *p = pm_page_address(c->pages[0]);
	uint8_t b0, b1;

	if (!base_verify(c) || !stamped(c->mm, B, 4, 4) || !stamped(c->mm, C, 8, 5))
		return fail(c, "the parent's data changed");
	if (c->child && !(stamped(c->child, A, NA, 1) && stamped(c->child, B, 4, 4) &&
			  stamped(c->child, C, 8, 5)))
		return fail(c, "the child's data differs from the parent's at fork");
	/* The pinned page stays the parent's: a write through it reaches the parent only. */
	p[100] ^= 0xff;
	if (pm_access(c->mm, A + 3 * PG + 100, &b0, 1, 0) != 1 || b0 != p[100])
		return fail(c, "a write through the pin does not reach the parent");
	if (c->child && (pm_access(c->child, A + 3 * PG + 100, &b1, 1, 0) != 1 || b1 == p[100]))
		return fail(c, "a write through the parent's pin reaches the child");
	p[100] ^= 0xff;
	return true;
}

/* pin_user_pages(FOLL_WRITE) of 16 pages: 8 COW-shared with a live child, 8 never touched. */
static void pin_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, NB * PG, RW, PRIV, NULL, 0), B);
	ASSERT_TRUE(stamp(c->mm, B, NB / 2, 6));
	c->child = pm_mm_fork(c->mm);
	ASSERT_TRUE(c->child);
}

static long pin_run(struct ctx *c)
{
	long r = pm_pin_user_pages(c->mm, B, NB, PM_FOLL_WRITE, c->pages);

	if (r > 0) {
		c->npinned = r;
		c->pinned_pages = true;
	}
	return r;
}

/* The same with pin_user_pages_fast and a R/O pin: the shared pages must be unshared. */
static long pin_ro_fast_run(struct ctx *c)
{
	long r = pm_pin_user_pages_fast(c->mm, B, NB, 0, c->pages);

	if (r > 0) {
		c->npinned = r;
		c->pinned_pages = true;
	}
	return r;
}

static bool pin_ok(struct ctx *c, long r)
{
	return ok_pages(r, NB);
}

static bool pin_verify(struct ctx *c, long r)
{
	uint8_t zero[PG] = { 0 }, b;

	if (!base_verify(c) || !stamped(c->mm, B, NB / 2, 6) || !stamped(c->child, B, NB / 2, 6))
		return fail(c, "the parent's or the child's data changed");
	for (long i = 0; i < c->npinned; i++) {
		if (i < (long)NB / 2 ? !page_is(c->pages[i], B, (unsigned long)i, 6) :
				      memcmp(pm_page_address(c->pages[i]), zero, PG))
			return fail(c, "a pinned page does not hold the data");
		if (!pm_page_is_zero(c->pages[i]) &&
		    !pm_folio_maybe_dma_pinned(pm_page_folio(c->pages[i])))
			return fail(c, "a pinned page's folio does not say maybe_dma_pinned");
	}
	/* Pins of COW-shared pages were unshared: the parent's writes reach them. */
	for (long i = 0; i < c->npinned && i < (long)NB / 2; i++) {
		b = 0x5a;
		if (pm_access(c->mm, B + (unsigned long)i * PG, &b, 1, 1) != 1 ||
		    ((uint8_t *)pm_page_address(c->pages[i]))[0] != 0x5a)
			return fail(c, "a pinned page is not the parent's any more");
	}
	return true;
}

/* A long-term R/W pin of an untouched THP-eligible range (THP fault under GUP). */
static long pin_thp_run(struct ctx *c)
{
	long r = pm_pin_user_pages_fast(c->mm, T + 8 * PG, 4, PM_FOLL_WRITE | PM_FOLL_LONGTERM,
					c->pages);

	if (r > 0) {
		c->npinned = r;
		c->pinned_pages = true;
	}
	return r;
}

static bool pin_thp_ok(struct ctx *c, long r)
{
	return ok_pages(r, 4);
}

static bool pin_thp_verify(struct ctx *c, long r)
{
	uint8_t b = 0x77;

	if (!base_verify(c))
		return false;
	for (long i = 0; i < c->npinned; i++) {
		if (pm_access(c->mm, T + (8 + (unsigned long)i) * PG + 9, &b, 1, 1) != 1 ||
		    ((uint8_t *)pm_page_address(c->pages[i]))[9] != 0x77)
			return fail(c, "a write to the address space does not reach its pin");
	}
	return true;
}

/* shmem: write 8 new pages of a mapped object holding 4 (page cache insertions, tables). */
static void shmem_setup(struct ctx *c)
{
	base_setup(c);
	c->f = pm_shmem_create(c->m, NB * PG, 0);
	ASSERT_TRUE(c->f);
	ASSERT_EQ(pm_mmap(c->mm, C, NB * PG, RW, PM_MAP_SHARED | PM_MAP_FIXED, c->f, 0), C);
	ASSERT_TRUE(stamp(c->mm, C, 4, 7));
}

static long shmem_run(struct ctx *c)
{
	uint8_t buf[8 * PG];

	for (unsigned long p = 0; p < 8; p++)
		fill(buf + p * PG, C, 4 + p, 7);
	return pm_access(c->mm, C + 4 * PG, buf, sizeof(buf), 1);
}

static bool shmem_ok(struct ctx *c, long r)
{
	return ok_bytes(r, 8 * PG);
}

static bool shmem_verify(struct ctx *c, long r)
{
	unsigned long done = r > 0 ? (unsigned long)r / PG : 0, nr = pm_shmem_nr_pages(c->f);

	if (!base_verify(c) || !stamped(c->mm, C, 4 + done, 7))
		return fail(c, "the object's data is not what was written");
	/* A page may be cached and not mapped when the failure came after it was added. */
	if (nr < 4 + done || nr > 4 + done + 1)
		return fail(c, "the object holds an unexpected number of pages");
	return true;
}

/* shmem: a read fault through a private mapping (the object's page is cached, then mapped). */
static void shmem_private_setup(struct ctx *c)
{
	shmem_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, NB * PG, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, c->f, 0), B);
}

static long shmem_private_run(struct ctx *c)
{
	uint8_t buf[8 * PG];

	for (unsigned long p = 0; p < 8; p++)
		fill(buf + p * PG, B, p, 8);
	return pm_access(c->mm, B, buf, sizeof(buf), 1); /* COW of 4 cached pages, 4 holes */
}

static bool shmem_private_verify(struct ctx *c, long r)
{
	unsigned long done = r > 0 ? (unsigned long)r / PG : 0;

	if (!base_verify(c) || !stamped(c->mm, C, 4, 7))
		return fail(c, "the object's data changed under a private write");
	if (!stamped(c->mm, B, done, 8))
		return fail(c, "the private pages reported written do not read back");
	return true;
}

/* pm_shmem_create(): NULL with errno ENOMEM, or an object. */
static long shmem_create_run(struct ctx *c)
{
	errno = 0;
	c->f = pm_shmem_create(c->m, 64 * PG, 0);
	c->err = errno;
	return c->f ? 0 : -c->err;
}

static bool ctor_ok(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM;
}

static bool shmem_create_verify(struct ctx *c, long r)
{
	if (c->f && pm_shmem_size(c->f) != 64 * PG)
		return fail(c, "the object has the wrong size");
	return base_verify(c);
}

/* pm_shmem_truncate() of a mapped, populated object: 0 or -ENOMEM. */
static long truncate_run(struct ctx *c)
{
	return pm_shmem_truncate(c->f, 2 * PG);
}

static bool truncate_ok(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM;
}

static bool truncate_verify(struct ctx *c, long r)
{
	char x;

	if (!base_verify(c) || !stamped(c->mm, C, 2, 7))
		return fail(c, "data below the new size changed");
	if (r == 0 && (pm_shmem_size(c->f) != 2 * PG ||
		       pm_access(c->mm, C + 3 * PG, &x, 1, 0) != -EFAULT))
		return fail(c, "a successful truncate left pages beyond the end");
	if (r && (pm_shmem_size(c->f) != NB * PG || !stamped(c->mm, C, 4, 7)))
		return fail(c, "a failed truncate changed the object");
	return true;
}

/* umem registration of 24 pages, 8 of them untouched: NULL + ENOMEM and nothing pinned. */
static void umem_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, 24 * PG, RW, PRIV, NULL, 0), B);
	ASSERT_TRUE(stamp(c->mm, B, 16, 9));
}

static long umem_run(struct ctx *c)
{
	errno = 0;
	c->umem = pm_umem_get(c->mm, B, 24 * PG, PM_UMEM_WRITE);
	c->err = errno;
	return c->umem ? 0 : -c->err;
}

static bool umem_verify(struct ctx *c, long r)
{
	unsigned long nents = 0, pages = 0;
	const struct pm_sg *sg;
	struct pm_stats s;

	if (!base_verify(c) || !stamped(c->mm, B, 16, 9))
		return fail(c, "the registered range's data changed");
	if (!c->umem) {
		pm_machine_stats(c->m, &s);
		return s.nr_foll_pin_acquired == s.nr_foll_pin_released ||
		       fail(c, "a failed registration left pages pinned");
	}
	sg = pm_umem_sg(c->umem, &nents);
	for (unsigned long i = 0; i < nents; i++)
		pages += sg[i].npages;
	return pages == 24 || fail(c, "the registration does not cover the range");
}

/* A THP, written: then part of it is made read-only or dropped (VMA and PMD splits). */
static void thp_written_setup(struct ctx *c)
{
	thp_setup(c);
	ASSERT_TRUE(stamp(c->mm, B, 512, 11));
}

static long thp_mprotect_run(struct ctx *c)
{
	return pm_mprotect(c->mm, B + 100 * PG, 8 * PG, PM_PROT_READ);
}

static long thp_dontneed_run(struct ctx *c)
{
	return pm_madvise(c->mm, B + 100 * PG, 8 * PG, PM_MADV_DONTNEED);
}

static bool zero_or_enomem(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM;
}

static bool thp_mprotect_verify(struct ctx *c, long r)
{
	char x = 0;
	long w;

	/* Writable? Write back the byte that is there. */
	if (pm_access(c->mm, B + 101 * PG, &x, 1, 0) != 1)
		return fail(c, "the range cannot be read");
	w = pm_access(c->mm, B + 101 * PG, &x, 1, 1);
	if (!base_verify(c) || !stamped(c->mm, B, 512, 11))
		return fail(c, "the THP's data changed");
	if (r == 0 && w != -EFAULT)
		return fail(c, "mprotect succeeded but the range is still writable");
	if (r != 0 && w != 1)
		return fail(c, "a failed mprotect changed the protection");
	return true;
}

static bool thp_dontneed_verify(struct ctx *c, long r)
{
	uint8_t zero[8 * PG] = { 0 }, buf[8 * PG];

	if (!base_verify(c) || !stamped(c->mm, B, 100, 11) ||
	    !stamped(c->mm, B + 108 * PG, 512 - 108, 11))
		return fail(c, "the THP's data outside the range changed");
	if (pm_access(c->mm, B + 100 * PG, buf, sizeof(buf), 0) != (long)sizeof(buf))
		return fail(c, "the range cannot be read");
	if (r == 0 && memcmp(buf, zero, sizeof(buf)))
		return fail(c, "DONTNEED succeeded but the range does not read zero");
	if (r != 0 && !stamped(c->mm, B + 100 * PG, 8, 11))
		return fail(c, "a failed DONTNEED dropped data");
	return true;
}

/* ---- hugetlb (the machine's pool holds NHUGE pages) ---- */

#define H 0x20000000UL	/* private hugetlb, 2 pages */
#define HS 0x20800000UL /* shared hugetlb, 1 page */
#define HP PM_PMD_SIZE
#define NHUGE 4

/* mmap of a private hugetlb range, then a write across its two pages: the reservation map,
 * the VMA, the page tables; the pool pages themselves are never short after mmap. */
static long hugetlb_run(struct ctx *c)
{
	uint8_t buf[2 * PG];
	long r = pm_mmap(c->mm, H, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0);

	if (r != (long)H)
		return r == -ENOMEM ? -1000 - ENOMEM : r;
	fill(buf, H + HP - PG, 0, 11);
	fill(buf + PG, H + HP - PG, 1, 11);
	return pm_access(c->mm, H + HP - PG, buf, sizeof(buf), 1);
}

static bool hugetlb_ok(struct ctx *c, long r)
{
	return r == -1000 - ENOMEM || ok_bytes(r, 2 * PG);
}

static bool hugetlb_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	if (r > 0 && !stamped(c->mm, H + HP - PG, (unsigned long)r / PG, 11))
		return fail(c, "the bytes reported written do not read back");
	return true;
}

/* fork with a private hugetlb page COW-shared, one pinned (copied whole), a shared one. */
static void hugetlb_fork_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, H, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0), H);
	ASSERT_TRUE(stamp(c->mm, H, 2, 12));
	ASSERT_TRUE(stamp(c->mm, H + HP, 2, 13));
	ASSERT_EQ(pm_mmap(c->mm, HS, HP, RW, SHARED_ANON | PM_MAP_HUGETLB, NULL, 0), HS);
	ASSERT_TRUE(stamp(c->mm, HS, 2, 14));
	ASSERT_EQ(pm_pin_user_pages_fast(c->mm, H + HP, 1, PM_FOLL_WRITE, c->pages), 1);
	c->npinned = 1;
	c->pinned_pages = true;
}

static bool hugetlb_fork_verify(struct ctx *c, long r)
{
	if (!base_verify(c) || !stamped(c->mm, H, 2, 12) || !stamped(c->mm, H + HP, 2, 13) ||
	    !stamped(c->mm, HS, 2, 14))
		return fail(c, "the parent's data changed");
	if (c->child && !(stamped(c->child, H, 2, 12) && stamped(c->child, H + HP, 2, 13) &&
			  stamped(c->child, HS, 2, 14)))
		return fail(c, "the child's data differs from the parent's at fork");
	return true;
}

/*
 * pin_user_pages(FOLL_WRITE) across two private hugetlb pages either side of a 1 GiB line: the
 * first COW-shared with a child (its copy comes from the pool, which is never short), the
 * second never touched (its PMD table is new).
 */
#define HB 0x40000000UL
static void hugetlb_pin_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, HB - HP, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0), HB - HP);
	ASSERT_TRUE(stamp(c->mm, HB - 8 * PG, 8, 15));
	c->child = pm_mm_fork(c->mm);
	ASSERT_TRUE(c->child);
}

static long hugetlb_pin_run(struct ctx *c)
{
	c->npinned = pm_pin_user_pages(c->mm, HB - 8 * PG, NB, PM_FOLL_WRITE, c->pages);
	c->pinned_pages = c->npinned > 0;
	return c->npinned;
}

static bool hugetlb_pin_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	for (long i = 0; i < r && i < 8; i++)
		if (!page_is(c->pages[i], HB - 8 * PG, (unsigned long)i, 15))
			return fail(c, "a pinned page does not hold the data");
	if (!stamped(c->child, HB - 8 * PG, 8, 15))
		return fail(c, "the child's data changed");
	return true;
}

/* ---- mremap: a failed move leaves the old mapping whole ---- */

#define M 0x7e8000000000UL /* a target under a PGD entry of its own: every table is new */

/* The @n pages at @at hold what stamp() wrote at @base (they moved from there). */
static bool stamped_at(struct pm_mm *mm, unsigned long at, unsigned long base, unsigned long n,
		       unsigned salt)
{
	uint8_t buf[PG], want[PG];

	for (unsigned long p = 0; p < n; p++) {
		fill(want, base, p, salt);
		if (pm_access(mm, at + p * PG, buf, PG, 0) != (long)PG || memcmp(buf, want, PG))
			return false;
	}
	return true;
}

static bool unmapped(struct pm_mm *mm, unsigned long addr)
{
	char x;

	return pm_access(mm, addr, &x, 1, 0) == -EFAULT;
}

/* 16 stamped pages at B, two of them pinned, and a neighbour after them. */
static void mremap_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, NB * PG, RW, PRIV, NULL, 0), B);
	ASSERT_TRUE(stamp(c->mm, B, NB, 16));
	ASSERT_EQ(pm_mmap(c->mm, B + NB * PG, PG, PM_PROT_READ, PRIV, NULL, 0), B + NB * PG);
	ASSERT_EQ(pm_pin_user_pages_fast(c->mm, B + 3 * PG, 2, PM_FOLL_WRITE, c->pages), 2);
	c->npinned = 2;
	c->pinned_pages = true;
}

static long mremap_fixed_run(struct ctx *c)
{
	long r = pm_mremap(c->mm, B + PG, (NB - 2) * PG, (NB - 2) * PG,
			   PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, M + PG);

	c->addr = M + PG;
	return r == (long)(M + PG) ? 0 : r;
}

static long mremap_grow_run(struct ctx *c)
{
	long r = pm_mremap(c->mm, B, NB * PG, 4 * NB * PG, PM_MREMAP_MAYMOVE, 0);

	c->grow = true;
	c->addr = r > 0 ? (unsigned long)r : 0;
	return r > 0 ? 0 : r;
}

static bool mremap_verify(struct ctx *c, long r)
{
	unsigned long first = c->grow ? 0 : 1, n = c->grow ? NB : NB - 2;

	if (!base_verify(c))
		return false;
	for (long i = 0; i < 2; i++)
		if (!page_is(c->pages[i], B, 3 + (unsigned long)i, 16))
			return fail(c, "a pinned page does not hold its data");
	if (r == 0) {
		if (!stamped_at(c->mm, c->addr, B + first * PG, n, 16) || !unmapped(c->mm, B + PG))
			return fail(c, "the moved data is not at the target");
		return true;
	}
	if (!stamped(c->mm, B, NB, 16))
		return fail(c, "a failed mremap changed the old mapping");
	if (!c->grow && !unmapped(c->mm, M + PG))
		return fail(c, "a failed mremap left something at the target");
	return true;
}

/* A written THP at B moved to a target 4 KiB off a 2 MiB boundary: split, new PTE tables. */
static long mremap_thp_run(struct ctx *c)
{
	long r = pm_mremap(c->mm, B, PM_PMD_SIZE, PM_PMD_SIZE,
			   PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, M + PG);

	return r == (long)(M + PG) ? 0 : r;
}

static bool mremap_thp_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	if (r == 0)
		return (stamped_at(c->mm, M + PG, B, 512, 11) && unmapped(c->mm, B)) ||
		       fail(c, "the moved THP's data is not at the target");
	return stamped(c->mm, B, 512, 11) || fail(c, "a failed mremap changed the THP");
}

/* Two private hugetlb pages, one faulted, moved to new tables: the reservation goes along. */
static void mremap_hugetlb_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, H, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0), H);
	ASSERT_TRUE(stamp(c->mm, H, 2, 12));
}

static long mremap_hugetlb_run(struct ctx *c)
{
	long r = pm_mremap(c->mm, H, 2 * HP, 2 * HP, PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED, M);

	return r == (long)M ? 0 : r;
}

static bool mremap_hugetlb_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	if (r == 0)
		return (stamped_at(c->mm, M, H, 2, 12) && unmapped(c->mm, H) &&
			stamp(c->mm, M + HP, 1, 13)) ||
		       fail(c, "the moved hugetlb mapping lost data or its reservation");
	return stamped(c->mm, H, 2, 12) || fail(c, "a failed mremap changed the hugetlb mapping");
}

static void cleanup(struct ctx *c)
{
	if (c->umem)
		pm_umem_release(c->umem, PM_UNPIN_RANGE);
	if (c->pinned_pages)
		pm_unpin_user_pages(c->pages, (unsigned long)c->npinned);
	if (c->child)
		pm_mm_destroy(c->child);
	if (c->mm)
		pm_mm_destroy(c->mm);
	if (c->f)
		pm_shmem_put(c->f);
}

struct scenario {
	const char *name;
	long full; /* the answer when no allocation fails */
	void (*setup)(struct ctx *c);
	long (*run)(struct ctx *c);
	bool (*result_ok)(struct ctx *c, long r);
	bool (*verify)(struct ctx *c, long r);
	size_t movable_bytes; /* the machine's movable zone (0: none) */
	bool fill_movable;    /* the setup fills the movable zone: no hugetlb pool (it would
			       * take the zone's frames) and one CPU for the whole walk (frames
			       * in another CPU's cache would be out of the thread's reach) */
};

/* ---- migration (mm/migrate.c) ---- */

/* NB stamped pages at B besides the base state. */
static void migrate_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, NB * PG, RW, PRIV, NULL, 0), B);
	ASSERT_EQ(pm_madvise(c->mm, B, NB * PG, PM_MADV_NOHUGEPAGE), 0);
	ASSERT_TRUE(stamp(c->mm, B, NB, 12));
}

static long migrate_run(struct ctx *c)
{
	return pm_migrate_range(c->mm, B, NB * PG, PM_MIGRATE_ANYWHERE);
}

/* No frame for a page: that page is not moved, and counted. */
static bool migrate_ok(struct ctx *c, long r)
{
	return r >= 0 && r <= (long)NB;
}

static bool migrate_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	return stamped(c->mm, B, NB, 12) || fail(c, "the migrated pages lost their data");
}

/* Page-cache pages: 4 stamped pages of the object at C, and a child that maps them too. */
static void migrate_shmem_setup(struct ctx *c)
{
	shmem_setup(c);
	c->child = pm_mm_fork(c->mm);
	ASSERT_TRUE(c->child);
	ASSERT_TRUE(stamped(c->child, C, 4, 7));
}

static long migrate_shmem_run(struct ctx *c)
{
	return pm_migrate_range(c->mm, C, 4 * PG, PM_MIGRATE_ANYWHERE);
}

static bool migrate_shmem_ok(struct ctx *c, long r)
{
	return r >= 0 && r <= 4;
}

static bool migrate_shmem_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	return (stamped(c->mm, C, 4, 7) && stamped(c->child, C, 4, 7)) ||
	       fail(c, "a migrated cache page lost its data in one of the mms");
}

/* A THP written whole at B: it moves whole, or not at all (no order-9 frame: counted). */
static long migrate_thp_run(struct ctx *c)
{
	return pm_migrate_range(c->mm, B, PM_PMD_SIZE, PM_MIGRATE_ANYWHERE);
}

/* No order-9 frame splits the THP (migrate_pages' -ENOMEM split): then up to 512 pages, each
 * without a frame, are counted; a split that fails counts the THP once. */
static bool migrate_thp_ok(struct ctx *c, long r)
{
	return r >= 0 && r <= 512;
}

static bool migrate_thp_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	return stamped(c->mm, B, 512, 11) || fail(c, "the THP's data changed");
}

/* Two private hugetlb pages at H and a shared one at HS, mapped by a child too (mm/migrate.c,
 * migrate_hugetlb_*): the pool's page for each (the injection fails it: counted), the shared
 * migration's list of mappings. */
static void migrate_hugetlb_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, H, 2 * HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0), H);
	ASSERT_TRUE(stamp(c->mm, H, 2, 12));
	ASSERT_TRUE(stamp(c->mm, H + HP, 2, 13));
	ASSERT_EQ(pm_mmap(c->mm, HS, HP, RW, SHARED_ANON | PM_MAP_HUGETLB, NULL, 0), HS);
	ASSERT_TRUE(stamp(c->mm, HS, 2, 14));
	c->child = pm_mm_fork(c->mm);
	ASSERT_TRUE(c->child);
	ASSERT_TRUE(stamped(c->child, HS, 2, 14)); /* the child maps the shared page too */
	ASSERT_EQ(pm_madvise(c->child, H, 2 * HP, PM_MADV_DONTNEED), 0); /* the private ones: ours */
}

static long migrate_hugetlb_run(struct ctx *c)
{
	long r = pm_migrate_range(c->mm, H, 2 * HP, PM_MIGRATE_ANYWHERE), r2;

	if (r < 0)
		return r;
	r2 = pm_migrate_range(c->mm, HS, HP, PM_MIGRATE_ANYWHERE);
	return r2 < 0 ? r2 : r + r2;
}

static bool migrate_hugetlb_ok(struct ctx *c, long r)
{
	return r >= 0 && r <= 3;
}

static bool migrate_hugetlb_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	if (!stamped(c->mm, H, 2, 12) || !stamped(c->mm, H + HP, 2, 13) ||
	    !stamped(c->mm, HS, 2, 14) || !stamped(c->child, HS, 2, 14))
		return fail(c, "a migrated hugetlb page lost its data");
	return true;
}

/* Compaction's answer is a count of blocks that depends on the layout: 0 for success. */
static long compact_run(struct ctx *c)
{
	long r = pm_compact(c->m);

	return r < 0 ? r : 0;
}

static bool compact_ok(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM;
}

/* A long-term pin of pages in the movable zone: migrated out first, or -ENOMEM. */
static long pin_longterm_movable_run(struct ctx *c)
{
	long r = pm_pin_user_pages(c->mm, B, NB, PM_FOLL_WRITE | PM_FOLL_LONGTERM, c->pages);

	if (r > 0) {
		c->npinned = r;
		c->pinned_pages = true;
	}
	return r;
}

static bool pin_longterm_movable_verify(struct ctx *c, long r)
{
	if (!migrate_verify(c, r))
		return false;
	for (long i = 0; i < c->npinned; i++)
		if (!page_is(c->pages[i], B, (unsigned long)i, 12))
			return fail(c, "a pinned page does not hold its data");
	return true;
}

/*
 * The split of a THP whose target has no free 2 MiB block (mm/migrate.c: migrate_pte's
 * MIGRATE_NOMEM, split_thp, then its 512 pages one by one). The target is the movable zone
 * (SPLIT_MOVABLE): a filler at F takes every frame of it first, the THP at B and everything
 * else land outside it, then the upper half of each of its 2 MiB blocks is dropped - 512 free
 * 4 KiB frames, no free 2 MiB block. The order-9 allocation fails without injection; the walk then fails the
 * per-page allocations one by one. NPIN pages at A are pinned meanwhile.
 */
#define F 0x30000000UL
#define SPLIT_MOVABLE (4 * MiB)
#define NF (SPLIT_MOVABLE / PG)
#define NPIN 4

static bool in_movable(struct ctx *c, unsigned long addr, bool *movable)
{
	struct pm_page_info pi;

	if (pm_pagemap(c->mm, addr, 1, &pi) != 1 || !(pi.flags & PM_PAGE_PRESENT))
		return false;
	*movable = pfn_in_movable_zone(c->m, pi.pfn);
	return true;
}

/* The filler's page @p holds one byte of its own at offset @p % PG. */
static uint8_t filler_byte(unsigned long p)
{
	return (uint8_t)(p * 13 + 7);
}

static void split_setup(struct ctx *c)
{
	static struct pm_page_info pi[NF];
	bool movable;

	c->mm = pm_mm_create(c->m);
	ASSERT_TRUE(c->mm);
	ASSERT_EQ(pm_mmap(c->mm, F, NF * PG, RW, PRIV, NULL, 0), F);
	ASSERT_EQ(pm_madvise(c->mm, F, NF * PG, PM_MADV_NOHUGEPAGE), 0);
	for (unsigned long p = 0; p < NF; p++) {
		uint8_t b = filler_byte(p);

		ASSERT_EQ(pm_access(c->mm, F + p * PG + p % PG, &b, 1, 1), 1);
	}
	ASSERT_EQ(pm_pagemap(c->mm, F, NF, pi), NF);
	for (unsigned long p = 0; p < NF; p++)
		if (!(pi[p].flags & PM_PAGE_PRESENT) || !pfn_in_movable_zone(c->m, pi[p].pfn))
			ASSERT_EQ(p, NF); /* which page fell outside */
	ASSERT_EQ(pm_mmap(c->mm, A, NA * PG, RW, PRIV, NULL, 0), A);
	ASSERT_TRUE(stamp(c->mm, A, NA, 1));
	ASSERT_EQ(pm_mmap(c->mm, B, PM_PMD_SIZE, RW, PRIV, NULL, 0), B);
	ASSERT_EQ(pm_madvise(c->mm, B, PM_PMD_SIZE, PM_MADV_HUGEPAGE), 0);
	ASSERT_TRUE(stamp(c->mm, B, 512, 11));
	ASSERT_EQ(pmt_order_at(c->mm, B), 9);
	ASSERT_TRUE(in_movable(c, B, &movable) && !movable);
	/* The upper half of each 2 MiB block of the zone goes: 512 free frames, no free block. */
	for (unsigned long p = 256; p < NF; p += 512)
		ASSERT_EQ(pm_madvise(c->mm, F + p * PG, 256 * PG, PM_MADV_DONTNEED), 0);
	c->npinned = pm_pin_user_pages(c->mm, A, NPIN, PM_FOLL_WRITE, c->pages);
	ASSERT_EQ(c->npinned, NPIN);
	c->pinned_pages = true;
	for (int i = 0; i < NPIN; i++) {
		c->ref0[i] = pm_folio_ref_count(pm_page_folio(c->pages[i]));
		c->pin0[i] = pm_folio_pincount(pm_page_folio(c->pages[i]));
	}
}

/* The same THP mapped by PTEs (a PMD split by mprotect): unmap_thp's PTE path. */
static void split_pte_setup(struct ctx *c)
{
	split_setup(c);
	ASSERT_EQ(pm_mprotect(c->mm, B + PG, PG, PM_PROT_READ), 0);
	ASSERT_EQ(pm_mprotect(c->mm, B + PG, PG, RW), 0);
	ASSERT_EQ(pmt_order_at(c->mm, B), 9);
}

static long split_run(struct ctx *c)
{
	return pm_migrate_range(c->mm, B, PM_PMD_SIZE, PM_MIGRATE_TO_MOVABLE);
}

/* Part of the THP: all of it is split and moved, only the range's pages are counted. */
#define SPLIT_FROM 100
#define SPLIT_NR 8

static long split_part_run(struct ctx *c)
{
	return pm_migrate_range(c->mm, B + SPLIT_FROM * PG, SPLIT_NR * PG, PM_MIGRATE_TO_MOVABLE);
}

static bool split_ok(struct ctx *c, long r)
{
	return r == -ENOMEM || (r >= 0 && r <= 512);
}

static bool split_part_ok(struct ctx *c, long r)
{
	return r == -ENOMEM || (r >= 0 && r <= SPLIT_NR);
}

/*
 * After the call: every byte where it was (the THP, the filler, the base pages, the pinned
 * pages through their pins); the pins' counts as they were; and when the call answered a
 * count, the THP split into 512 small folios, each mapped once and held by its mapping alone,
 * and exactly that count of the range's pages left outside the target.
 */
static bool split_check(struct ctx *c, long r, unsigned long from, unsigned long nr)
{
	long unmoved = 0;

	if (!base_verify(c) || !stamped(c->mm, B, 512, 11))
		return fail(c, "the THP's data changed");
	for (unsigned long p = 0; p < NF; p++) {
		uint8_t b;

		if (p % 512 >= 256)
			continue;
		if (pm_access(c->mm, F + p * PG + p % PG, &b, 1, 0) != 1 || b != filler_byte(p))
			return fail(c, "a page of the filler changed");
	}
	for (int i = 0; i < NPIN; i++) {
		struct pm_folio *folio = pm_page_folio(c->pages[i]);

		if (!page_is(c->pages[i], A, (unsigned long)i, 1))
			return fail(c, "a pinned page does not hold its data");
		if (pm_folio_ref_count(folio) != c->ref0[i] || pm_folio_pincount(folio) != c->pin0[i])
			return fail(c, "a pinned page's counts changed");
	}
	if (r < 0)
		return true;
	for (unsigned long p = 0; p < 512; p++) {
		struct pm_page_info pi;
		struct pm_page *page;
		struct pm_folio *folio;
		bool movable;
		int ref, pin, order;

		if (pm_pagemap(c->mm, B + p * PG, 1, &pi) != 1 || !(pi.flags & PM_PAGE_PRESENT))
			return fail(c, "a page of the THP is not mapped");
		if ((pi.flags & PM_PAGE_THP) || pi.mapcount != 1)
			return fail(c, "the THP was not split into pages mapped once");
		if (pm_get_user_pages(c->mm, B + p * PG, 1, PM_FOLL_NOFAULT, &page) != 1)
			return fail(c, "a page of the THP cannot be got");
		folio = pm_page_folio(page);
		ref = pm_folio_ref_count(folio);
		pin = pm_folio_pincount(folio);
		order = (int)pm_folio_order(folio);
		pm_put_page(page);
		if (ref != 2 || pin != 0 || order != 0)
			return fail(c, "a split page's counts are not its mapping's alone");
		movable = pfn_in_movable_zone(c->m, pi.pfn);
		if (p >= from && p < from + nr && !movable)
			unmoved++;
	}
	if (unmoved != r) {
		snprintf(c->why, sizeof(c->why), "answered %ld pages not moved, %ld are", r,
			 unmoved);
		return false;
	}
	return true;
}

static bool split_verify(struct ctx *c, long r)
{
	return split_check(c, r, 0, 512);
}

static bool split_part_verify(struct ctx *c, long r)
{
	return split_check(c, r, SPLIT_FROM, SPLIT_NR);
}

static void shmem_create_setup(struct ctx *c)
{
	base_setup(c);
}

static void truncate_setup(struct ctx *c)
{
	shmem_setup(c);
	ASSERT_TRUE(stamp(c->mm, C + 4 * PG, NB - 4, 10));
}

/* MADV_POPULATE_WRITE of a new range: page tables and pages, no references. */
static void populate_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B, NB * PG, RW, PRIV, NULL, 0), B);
}

static long populate_run(struct ctx *c)
{
	return pm_madvise(c->mm, B, NB * PG, PM_MADV_POPULATE_WRITE);
}

/* Every page of [addr, addr + n pages) mapped writable. */
static bool all_writable(struct pm_mm *mm, unsigned long addr, unsigned long n)
{
	struct pm_page_info pi[NB];

	if (n > NB || pm_pagemap(mm, addr, n, pi) != (long)n)
		return false;
	for (unsigned long i = 0; i < n; i++)
		if (!(pi[i].flags & PM_PAGE_WRITABLE))
			return false;
	return true;
}

static bool populate_verify(struct ctx *c, long r)
{
	if (!base_verify(c))
		return false;
	if (r == 0 && !all_writable(c->mm, B, NB))
		return fail(c, "POPULATE_WRITE succeeded but left pages unpopulated");
	return true;
}

/* mmap with MAP_LOCKED: the VMA, then its populate (whose failures are not mmap's). */
static long locked_run(struct ctx *c)
{
	return pm_mmap(c->mm, B, NB * PG, RW, PRIV | PM_MAP_LOCKED, NULL, 0);
}

static bool locked_ok(struct ctx *c, long r)
{
	return r == (long)B || r == -ENOMEM;
}

static bool locked_verify(struct ctx *c, long r)
{
	uint8_t buf[NB * PG];

	if (!base_verify(c))
		return false;
	if (r == (long)B && pm_access(c->mm, B, buf, sizeof(buf), 1) != (long)sizeof(buf) &&
	    pm_access(c->mm, B, buf, PG, 1) != (long)PG)
		return fail(c, "the locked mapping cannot be written");
	return true;
}

/* A fault below a MAP_GROWSDOWN VMA: the VMA grows (tree nodes), then the page. */
static void grow_setup(struct ctx *c)
{
	base_setup(c);
	ASSERT_EQ(pm_mmap(c->mm, B + 8 * PG, 8 * PG, RW, PRIV | PM_MAP_GROWSDOWN, NULL, 0),
		  B + 8 * PG);
}

static long grow_run(struct ctx *c)
{
	return pm_fault(c->mm, B, PM_FAULT_WRITE);
}

/* Linux: a grow without memory is SIGSEGV (-EFAULT); the page's fault -ENOMEM. */
static bool grow_ok(struct ctx *c, long r)
{
	return r == 0 || r == -ENOMEM || r == -EFAULT;
}

static bool grow_verify(struct ctx *c, long r)
{
	struct pm_map_info mi;

	if (!base_verify(c))
		return false;
	if (pm_mm_maps(c->mm, B, &mi, 1) != 1 || mi.end != B + 16 * PG)
		return fail(c, "the stack VMA is gone");
	if (r == 0 && mi.start != B)
		return fail(c, "the fault succeeded but the stack did not grow");
	if (r == -EFAULT && mi.start != B + 8 * PG)
		return fail(c, "a failed grow changed the VMA");
	return true;
}

static const struct scenario scenarios[] = {
	{ "mmap + faults", NB * PG, base_setup, mmap_fault_run, mmap_fault_ok, mmap_fault_verify },
	{ "THP fault", 2 * PG, thp_setup, thp_run, thp_ok, thp_verify },
	{ "THP read fault (huge zero page)", 2 * PG, thp_setup, hz_read_run, thp_ok,
	  hz_read_verify },
	{ "write into the huge zero page", 2 * PG, hz_setup, thp_run, thp_ok, hz_write_verify },
	{ "pin longterm R/O of the huge zero page", 4, hz_setup, hz_pin_run, pin_thp_ok,
	  hz_pin_verify },
	{ "fork with the huge zero page", 0, hz_setup, fork_run, fork_ok, hz_fork_verify },
	{ "fork (private, THP, shared, pinned)", 0, fork_setup, fork_run, fork_ok, fork_verify },
	{ "pin_user_pages W (COW + new pages)", NB, pin_setup, pin_run, pin_ok, pin_verify },
	{ "pin_user_pages_fast R/O (unshare)", NB, pin_setup, pin_ro_fast_run, pin_ok, pin_verify },
	{ "pin longterm W of a THP range", 4, thp_setup, pin_thp_run, pin_thp_ok, pin_thp_verify },
	{ "shmem fault (shared)", 8 * PG, shmem_setup, shmem_run, shmem_ok, shmem_verify },
	{ "shmem fault (private COW)", 8 * PG, shmem_private_setup, shmem_private_run, shmem_ok,
	  shmem_private_verify },
	{ "shmem create", 0, shmem_create_setup, shmem_create_run, ctor_ok, shmem_create_verify },
	/* Shrinking allocates nothing today; the walk stays in case that changes. */
	{ "shmem truncate", 0, truncate_setup, truncate_run, truncate_ok, truncate_verify },
	{ "umem registration", 0, umem_setup, umem_run, ctor_ok, umem_verify },
	{ "mprotect inside a THP", 0, thp_written_setup, thp_mprotect_run, zero_or_enomem,
	  thp_mprotect_verify },
	{ "MADV_DONTNEED inside a THP", 0, thp_written_setup, thp_dontneed_run, zero_or_enomem,
	  thp_dontneed_verify },
	{ "hugetlb mmap + faults", 2 * PG, base_setup, hugetlb_run, hugetlb_ok, hugetlb_verify },
	{ "fork (hugetlb private, pinned, shared)", 0, hugetlb_fork_setup, fork_run, fork_ok,
	  hugetlb_fork_verify },
	{ "pin_user_pages W of hugetlb (COW + new pages)", NB, hugetlb_pin_setup, hugetlb_pin_run,
	  pin_ok, hugetlb_pin_verify },
	{ "mremap FIXED of pinned pages to new tables", 0, mremap_setup, mremap_fixed_run,
	  zero_or_enomem, mremap_verify },
	{ "mremap MAYMOVE growth", 0, mremap_setup, mremap_grow_run, zero_or_enomem,
	  mremap_verify },
	{ "mremap FIXED of a THP, unaligned", 0, thp_written_setup, mremap_thp_run,
	  zero_or_enomem, mremap_thp_verify },
	{ "mremap FIXED of private hugetlb", 0, mremap_hugetlb_setup, mremap_hugetlb_run,
	  zero_or_enomem, mremap_hugetlb_verify },
	{ "MADV_POPULATE_WRITE", 0, populate_setup, populate_run, zero_or_enomem,
	  populate_verify },
	{ "mmap MAP_LOCKED (populated)", (long)B, base_setup, locked_run, locked_ok,
	  locked_verify },
	{ "fault below a MAP_GROWSDOWN VMA", 0, grow_setup, grow_run, grow_ok, grow_verify },
	{ "migrate_range of anonymous pages", 0, migrate_setup, migrate_run, migrate_ok,
	  migrate_verify, 16 * MiB },
	{ "migrate_range of shmem pages (two mms)", 0, migrate_shmem_setup, migrate_shmem_run,
	  migrate_shmem_ok, migrate_shmem_verify },
	{ "migrate_range of a THP", 0, thp_written_setup, migrate_thp_run, migrate_thp_ok,
	  migrate_thp_verify },
	{ "migrate_range of hugetlb pages (private, shared)", 0, migrate_hugetlb_setup,
	  migrate_hugetlb_run, migrate_hugetlb_ok, migrate_hugetlb_verify },
	{ "compaction", 0, migrate_setup, compact_run, compact_ok, migrate_verify },
	{ "pin longterm W out of the movable zone", NB, migrate_setup, pin_longterm_movable_run,
	  pin_ok, pin_longterm_movable_verify, 16 * MiB },
	{ "migrate_range splits a PMD THP (no 2 MiB block in the target)", 0, split_setup,
	  split_run, split_ok, split_verify, SPLIT_MOVABLE, true },
	{ "migrate_range splits a PTE-mapped THP (no 2 MiB block in the target)", 0,
	  split_pte_setup, split_run, split_ok, split_verify, SPLIT_MOVABLE, true },
	{ "migrate_range splits a THP, 8 of its pages in the range", 0, split_setup,
	  split_part_run, split_part_ok, split_part_verify, SPLIT_MOVABLE, true },
};

static long walk(const struct scenario *sc, struct pm_machine *m)
{
	long n, points = 0, bad_result = 0, bad_data = 0, bad_check = 0, leaks = 0, unbalanced = 0;
	long successes = 0, failures = 0, partial = 0, uncounted = 0;
	size_t free0;
	bool injected = true;

	pm_rcu_barrier();
	free0 = pm_machine_free_pages(m);
	for (n = 1; n <= MAX_N && injected; n++) {
		struct ctx c = { .m = m };
		struct pm_stats s0, s1;
		long r;

		sc->setup(&c);
		pm_machine_stats(m, &s0);
		pm_fail_nth(m, n);
		r = sc->run(&c);
		/* The countdown reached 0: the N-th allocation was made, and failed. Not
		 * alloc_failures, which also counts real shortages (the split scenarios'
		 * order-9 allocation fails without any injection). */
		injected = atomic_load_relaxed(&m->xfail_nth) == 0;
		pm_fail_nth(m, 0);
		pm_machine_stats(m, &s1);
		if (injected && s1.alloc_failures == s0.alloc_failures && uncounted++ < 3)
			diag("%s: N=%ld: an injected failure not counted in alloc_failures",
			     sc->name, n);
		points += injected;
		if (r == sc->full)
			successes++;
		else if (r < 0)
			failures++;
		else
			partial++;
		/* Without an injected failure the call must succeed in full. */
		if (injected ? !sc->result_ok(&c, r) : r != sc->full) {
			if (bad_result++ < 3)
				diag("%s: N=%ld: the call answered %ld (%s)", sc->name, n, r,
				     r < 0 ? pm_strerror(r > -1000 ? r : r + 1000) : "a count");
		}
		if (!sc->verify(&c, r)) {
			if (bad_data++ < 3)
				diag("%s: N=%ld (answer %ld): %s", sc->name, n, r, c.why);
		}
		if (pm_machine_check(m)) {
			if (bad_check++ < 3)
				diag("%s: N=%ld: pm_machine_check failed after the call", sc->name,
				     n);
		}
		cleanup(&c);
		pm_rcu_barrier();
		if (pm_machine_free_pages(m) != free0) {
			if (leaks++ < 3)
				diag("%s: N=%ld (answer %ld): %ld pages leaked", sc->name, n, r,
				     (long)free0 - (long)pm_machine_free_pages(m));
			free0 = pm_machine_free_pages(m);
		}
		pm_machine_stats(m, &s1);
		if (s1.nr_foll_pin_acquired != s1.nr_foll_pin_released && unbalanced++ < 3)
			diag("%s: N=%ld: pins acquired %lu, released %lu", sc->name, n,
			     s1.nr_foll_pin_acquired, s1.nr_foll_pin_released);
	}
	ok(!injected, "%s: the walk ended (%ld allocations)", sc->name, n - 2);
	/* Shrinking and MADV_DONTNEED need no memory (a THP's split uses its deposited
	 * page table): for them, no injection point is the right answer. So for the hugetlb
	 * pin in the range design, whose mmap made the PMD table that the pin's fault in the
	 * next 1 GiB span allocates in Linux's (hugetlb pages come from the pool). */
	ok(points > 0 || sc->run == truncate_run || sc->run == thp_dontneed_run ||
		   (sc->run == hugetlb_pin_run && pm_machine_flags(m) == PM_MACHINE_RANGE_MM),
	   "%s: %ld injection points covered (%ld successes, %ld failures, %ld "
	   "partial)", sc->name, points, successes, failures, partial);
	is_int(bad_result, 0, "%s: every answer is success, -ENOMEM or a documented partial "
	       "result", sc->name);
	is_int(bad_data, 0, "%s: data intact and effects as reported", sc->name);
	is_int(bad_check, 0, "%s: pm_machine_check after each call", sc->name);
	is_int(leaks, 0, "%s: no page leaked", sc->name);
	is_int(unbalanced, 0, "%s: pins balanced", sc->name);
	is_int(uncounted, 0, "%s: every injected failure counted in alloc_failures", sc->name);
	is_int(pm_machine_check(m), 0, "%s: machine consistent after the walk", sc->name);
	return points;
}

int main(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .nr_hugepages = NHUGE };
	struct pm_machine *m;
	long total = 0;
	cpu_set_t cpus;

	ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
	plan_no_plan();
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		cfg.movable_bytes = scenarios[i].movable_bytes;
		cfg.nr_hugepages = scenarios[i].fill_movable ? 0 : NHUGE;
		if (scenarios[i].fill_movable)
			ASSERT_TRUE(pmt_run_on(sched_getcpu()));
		m = pm_machine_create(&cfg);
		ASSERT_TRUE(m);
		total += walk(&scenarios[i], m);
		pm_machine_destroy(m);
		if (scenarios[i].fill_movable)
			ASSERT_EQ(sched_setaffinity(0, sizeof(cpus), &cpus), 0);
	}
	diag("injection points covered: %ld in %zu scenarios", total,
	     sizeof(scenarios) / sizeof(scenarios[0]));
	return done_testing();
}
