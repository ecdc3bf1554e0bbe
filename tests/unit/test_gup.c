// SPDX-License-Identifier: MIT
/*
 * test_gup.c - get_user_pages and pinning with Linux's semantics: argument errors, partial
 * counts, permissions (FOLL_WRITE, FOLL_FORCE, FOLL_NOFAULT), exact refcounts and pincounts on
 * small and 2 MiB folios, the zero page, fast and slow path counters, writes through pins,
 * pins that outlive their mapping, the unpin family, and the knobs (same results, other
 * counters).
 *
 * Every page a test pins was stamped first (its own address in its first and last words), so
 * a returned page is checked to be the page of the address asked for.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define THP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define SHARED (PM_MAP_SHARED | PM_MAP_ANONYMOUS)
#define BIAS PM_GUP_PIN_COUNTING_BIAS

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;
static struct pm_page *pg[1100];

typedef long (*gup_fn)(struct pm_mm *, unsigned long, unsigned long, unsigned, struct pm_page **);

static const struct call {
	const char *name;
	gup_fn fn;
	bool pin, fast;
} calls[] = {
	{ "get", pm_get_user_pages, false, false },
	{ "get_fast", pm_get_user_pages_fast, false, true },
	{ "pin", pm_pin_user_pages, true, false },
	{ "pin_fast", pm_pin_user_pages_fast, true, true },
};
#define NCALLS 4

static void release(const struct call *c, struct pm_page **p, long n)
{
	for (long i = 0; i < n; i++) {
		if (c->pin)
			pm_unpin_user_page(p[i]);
		else
			pm_put_page(p[i]);
	}
}

static void setup_knobs(unsigned knobs)
{
	free0 = pmt_setup(&m, &mm, 64, knobs);
}

static void setup(void)
{
	setup_knobs(0);
}

static void teardown(const char *what)
{
	struct pm_stats s = pmt_stats(m);

	is_int(s.nr_foll_pin_acquired, s.nr_foll_pin_released,
	       "%s: nr_foll_pin acquired == released", what);
	pmt_teardown(&m, &mm, free0, what);
}

static long map(unsigned long addr, size_t len, int prot, int flags)
{
	return pm_mmap(mm, addr, len, prot, flags | PM_MAP_FIXED, NULL, 0);
}

/* Write each page's address into its first and last words (faulting it in for write). */
static void stamp(unsigned long addr, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		uint64_t v = addr + i * PG, w = ~v;

		ASSERT_EQ(pm_access(mm, v, &v, 8, 1), 8);
		ASSERT_EQ(pm_access(mm, addr + i * PG + PG - 8, &w, 8, 1), 8);
	}
}

/* Is @p the frame stamped for @addr? */
static bool is_page_of(struct pm_page *p, unsigned long addr)
{
	uint64_t *w = pm_page_address(p);

	return p && w[0] == addr && w[PG / 8 - 1] == ~addr;
}

static bool pages_are(struct pm_page **p, unsigned long addr, long n)
{
	for (long i = 0; i < n; i++)
		if (!is_page_of(p[i], addr + i * PG)) {
			diag("entry %ld is not the page of %#lx", i, addr + i * PG);
			return false;
		}
	return true;
}

static struct pm_folio *folio_at(unsigned long addr)
{
	struct pm_page *p;
	struct pm_folio *f;

	ASSERT_EQ(pm_get_user_pages(mm, addr, 1, 0, &p), 1);
	f = pm_page_folio(p);
	pm_put_page(p);
	return f;
}

static void thp_region(unsigned long addr, unsigned long windows)
{
	ASSERT_EQ(map(addr, windows * THP, RW, PRIV), addr);
	ASSERT_EQ(pm_madvise(mm, addr, windows * THP, PM_MADV_HUGEPAGE), 0);
}

static void test_args(void)
{
	const unsigned long x = 0x10000000UL;
	static const unsigned bad_flags[] = { 0x2, 0x4, 0x10, 0x40, 0x80, 0x200, 0x80000,
					      0x80000000u };
	long r;

	setup();
	ASSERT_EQ(map(x, 8 * PG, RW, PRIV), x);
	stamp(x, 8);
	for (int c = 0; c < NCALLS; c++) {
		const struct call *k = &calls[c];
		bool all = true;

		for (unsigned i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
			r = k->fn(mm, x, 1, PM_FOLL_WRITE | bad_flags[i], pg);
			if (r != -EINVAL) {
				diag("%s flag %#x -> %ld", k->name, bad_flags[i], r);
				all = false;
				release(k, pg, r);
			}
		}
		ok(all, "%s: unknown gup_flags bits -> -EINVAL", k->name);
		r = k->fn(mm, x, 1, PM_FOLL_LONGTERM, pg);
		if (k->pin) {
			is_int(r, 1, "%s: FOLL_LONGTERM is fine for pins", k->name);
			release(k, pg, r);
		} else {
			is_int(r, -EINVAL, "%s: FOLL_LONGTERM with get -> -EINVAL", k->name);
		}
		if (k->pin || k->fast)
			is_int(k->fn(mm, x, 1, 0, NULL), -EINVAL, "%s: pages == NULL -> -EINVAL",
			       k->name);
		is_int(k->fn(mm, ~0UL & ~(PG - 1), 2, 0, pg), -EOVERFLOW,
		       "%s: start + nr wraps -> -EOVERFLOW", k->name);
		is_int(k->fn(mm, PM_TASK_SIZE, 1, 0, pg), -EFAULT,
		       "%s: start at PM_TASK_SIZE -> -EFAULT", k->name);
		is_int(k->fn(mm, 0x7fff00000000UL, 4, 0, pg), -EFAULT,
		       "%s: unmapped range -> -EFAULT", k->name);
		is_int(k->fn(mm, x, 0, 0, pg), 0, "%s: nr_pages 0 -> 0", k->name);
		is_int(k->fn(mm, 0x7fff00000000UL, 0, PM_FOLL_WRITE, pg), 0,
		       "%s: nr_pages 0 on a hole -> 0", k->name);
		r = k->fn(mm, x + PG + 100, 1, PM_FOLL_WRITE, pg);
		ok(r == 1 && is_page_of(pg[0], x + PG), "%s: an unaligned start means its page",
		   k->name);
		release(k, pg, r);
		if (k->fast) {
			is_int(k->fn(mm, x, (unsigned long)INT_MAX + 1, 0, pg), -EINVAL,
			       "%s: nr_pages beyond int -> -EINVAL", k->name);
		} else {
			is_int(k->fn(mm, x, ~0UL >> 12, 0, pg), -EOVERFLOW,
			       "%s: nr_pages * 4096 wraps -> -EOVERFLOW", k->name);
		}
		r = k->fn(mm, x, 8, PM_FOLL_WRITE, pg);
		ok(r == 8 && pages_are(pg, x, 8), "%s: 8 pages, the right ones", k->name);
		release(k, pg, r);
	}
	/* The fast calls refuse a range that ends beyond the user address space. */
	ASSERT_EQ(map(PM_TASK_SIZE - PG, PG, RW, PRIV), PM_TASK_SIZE - PG);
	stamp(PM_TASK_SIZE - PG, 1);
	is_int(pm_pin_user_pages_fast(mm, PM_TASK_SIZE - PG, 2, 0, pg), -EFAULT,
	       "pin_fast: a range ending beyond PM_TASK_SIZE -> -EFAULT");
	is_int(pm_get_user_pages_fast(mm, PM_TASK_SIZE - PG, 2, 0, pg), -EFAULT,
	       "get_fast: a range ending beyond PM_TASK_SIZE -> -EFAULT");
	r = pm_pin_user_pages_fast(mm, PM_TASK_SIZE - PG, 1, PM_FOLL_WRITE, pg);
	ok(r == 1 && is_page_of(pg[0], PM_TASK_SIZE - PG), "pin_fast: the last page itself");
	release(&calls[3], pg, r);

	/* get without pages only faults in. */
	const unsigned long y = 0x20000000UL;

	ASSERT_EQ(map(y, 4 * PG, RW, PRIV), y);
	size_t f1 = pmt_free_pages(m);
	struct pm_stats s0 = pmt_stats(m);

	is_int(pm_get_user_pages(mm, y, 4, PM_FOLL_WRITE, NULL), 4,
	       "get with pages == NULL faults in and returns 4");
	ok(pmt_free_pages(m) <= f1 - 4, "4 pages were populated");
	is_int(pm_get_user_pages(mm, y, 4, PM_FOLL_WRITE | PM_FOLL_NOFAULT, pg), 4,
	       "they are present (NOFAULT succeeds)");
	release(&calls[0], pg, 4);
	is_int(pmt_stats(m).nr_foll_pin_acquired, s0.nr_foll_pin_acquired, "gets are not pins");
	teardown("args");
}

static void test_partial(void)
{
	const unsigned long x = 0x10000000UL, y = 0x20000000UL, z = 0x30000000UL;
	const unsigned long w = 0x40000000UL;
	long r;

	setup();
	/* AA.A : a hole after 2 pages. */
	ASSERT_EQ(map(x, 4 * PG, RW, PRIV), x);
	stamp(x, 4);
	ASSERT_EQ(pm_munmap(mm, x + 2 * PG, PG), 0);
	/* AAA then PROT_NONE NN: the end of a VMA. */
	ASSERT_EQ(map(y, 3 * PG, RW, PRIV), y);
	stamp(y, 3);
	ASSERT_EQ(map(y + 3 * PG, 2 * PG, PM_PROT_NONE, PRIV), y + 3 * PG);
	/* ww rr : two writable pages, two read-only ones. */
	ASSERT_EQ(map(z, 4 * PG, RW, PRIV), z);
	stamp(z, 4);
	ASSERT_EQ(pm_mprotect(mm, z + 2 * PG, 2 * PG, PM_PROT_READ), 0);
	/* pp.. : two present pages, two never touched. */
	ASSERT_EQ(map(w, 4 * PG, RW, PRIV), w);
	stamp(w, 2);
	ASSERT_EQ(pm_access(mm, w + 3 * PG, &(char){ 0 }, 1, 0), 1); /* zero page at 3 */
	/* Present pages made PROT_NONE: their entries stay, without user access. */
	const unsigned long v = 0x50000000UL;

	ASSERT_EQ(map(v, 2 * PG, RW, PRIV), v);
	stamp(v, 2);
	ASSERT_EQ(pm_mprotect(mm, v, 2 * PG, PM_PROT_NONE), 0);

	for (int c = 0; c < NCALLS; c++) {
		const struct call *k = &calls[c];

		r = k->fn(mm, x, 4, PM_FOLL_WRITE, pg);
		ok(r == 2 && pages_are(pg, x, 2), "%s: 2 pages before a hole", k->name);
		release(k, pg, r);
		is_int(k->fn(mm, x + 2 * PG, 2, 0, pg), -EFAULT,
		       "%s: starting in the hole -> -EFAULT", k->name);
		r = k->fn(mm, y, 5, PM_FOLL_WRITE, pg);
		ok(r == 3 && pages_are(pg, y, 3), "%s: 3 pages up to a PROT_NONE VMA", k->name);
		release(k, pg, r);
		is_int(k->fn(mm, y + 3 * PG, 1, 0, pg), -EFAULT, "%s: PROT_NONE -> -EFAULT",
		       k->name);
		r = k->fn(mm, y + PG, 8, 0, pg);
		ok(r == 2 && pages_are(pg, y + PG, 2), "%s: 2 pages up to the end", k->name);
		release(k, pg, r);
		r = k->fn(mm, z, 4, PM_FOLL_WRITE, pg);
		ok(r == 2 && pages_are(pg, z, 2), "%s: a write stops at read-only", k->name);
		release(k, pg, r);
		r = k->fn(mm, z, 4, 0, pg);
		ok(r == 4 && pages_are(pg, z, 4), "%s: a read goes through read-only", k->name);
		release(k, pg, r);
		is_int(k->fn(mm, z + 2 * PG, 2, PM_FOLL_WRITE, pg), -EFAULT,
		       "%s: write to read-only -> -EFAULT", k->name);
		r = k->fn(mm, w, 4, PM_FOLL_WRITE | PM_FOLL_NOFAULT, pg);
		ok(r == 2 && pages_are(pg, w, 2), "%s: NOFAULT takes the 2 present pages", k->name);
		release(k, pg, r);
		is_int(k->fn(mm, w + 2 * PG, 1, PM_FOLL_NOFAULT, pg), -EFAULT,
		       "%s: NOFAULT on an unpopulated page -> -EFAULT", k->name);
		is_int(k->fn(mm, w + 3 * PG, 1, PM_FOLL_WRITE | PM_FOLL_NOFAULT, pg), -EFAULT,
		       "%s: NOFAULT write on the zero page -> -EFAULT", k->name);
		is_int(k->fn(mm, v, 2, 0, pg), -EFAULT, "%s: present PROT_NONE pages -> -EFAULT",
		       k->name);
		r = k->fn(mm, v, 2, PM_FOLL_FORCE, pg);
		ok(r == 2 && pages_are(pg, v, 2), "%s: FORCE reads PROT_NONE pages (as ptrace)",
		   k->name);
		release(k, pg, r);
	}
	teardown("partial");
}

static void test_force(void)
{
	const unsigned long x = 0x10000000UL, y = 0x20000000UL, s = 0x30000000UL;
	char buf[8];
	long r;

	setup();
	/* Read-only private, never written: FORCE breaks COW into an exclusive anon page. */
	ASSERT_EQ(map(x, 4 * PG, PM_PROT_READ, PRIV), x);
	for (int c = 0; c < NCALLS; c++) {
		const struct call *k = &calls[c];
		unsigned long a = x + c * PG;

		is_int(k->fn(mm, a, 1, PM_FOLL_WRITE, pg), -EFAULT,
		       "%s: write to read-only private -> -EFAULT", k->name);
		r = k->fn(mm, a, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, pg);
		if (!is_int(r, 1, "%s: WRITE|FORCE on read-only private -> 1", k->name)) {
			skip(4, "no page");
			continue;
		}
		ok(!pm_page_is_zero(pg[0]) && pm_folio_test_anon(pm_page_folio(pg[0])),
		   "%s: a new anonymous page, not the zero page", k->name);
		ok(pm_page_anon_exclusive(pg[0]), "%s: AnonExclusive", k->name);
		memcpy(pm_page_address(pg[0]), "forced!", 8);
		release(k, pg, 1);
		ok(pm_access(mm, a, buf, 8, 0) == 8 && !memcmp(buf, "forced!", 8),
		   "%s: the mapping sees what was written through the page", k->name);
		is_int(pm_access(mm, a, buf, 1, 1), -EFAULT, "%s: the mapping is still read-only",
		       k->name);
	}

	/* Written, then made read-only: the page is already exclusive, FORCE takes it in place. */
	ASSERT_EQ(map(y, PG, RW, PRIV), y);
	stamp(y, 1);
	ASSERT_EQ(pm_mprotect(mm, y, PG, PM_PROT_READ), 0);
	struct pm_stats s0 = pmt_stats(m);

	r = pm_pin_user_pages(mm, y, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, pg);
	ok(r == 1 && is_page_of(pg[0], y), "FORCE on an exclusive read-only page pins it in place");
	is_int(pmt_stats(m).cow_copies - s0.cow_copies, 0, "no copy");
	release(&calls[2], pg, r);

	/* Shared mappings: FORCE never writes through a read-only one. */
	ASSERT_EQ(map(s, 2 * PG, RW, SHARED), s);
	stamp(s, 2);
	ASSERT_EQ(pm_mprotect(mm, s, PG, PM_PROT_READ), 0);
	for (int c = 0; c < NCALLS; c++) {
		const struct call *k = &calls[c];

		is_int(k->fn(mm, s, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, pg), -EFAULT,
		       "%s: WRITE|FORCE on read-only shared -> -EFAULT", k->name);
		r = k->fn(mm, s + PG, 1, PM_FOLL_WRITE | PM_FOLL_FORCE, pg);
		ok(r == 1 && is_page_of(pg[0], s + PG), "%s: WRITE|FORCE on writable shared -> 1",
		   k->name);
		release(k, pg, r);
		r = k->fn(mm, s, 1, 0, pg);
		ok(r == 1 && is_page_of(pg[0], s), "%s: a read of read-only shared -> 1", k->name);
		release(k, pg, r);
	}
	teardown("force");
}

static void test_counts_small(void)
{
	const unsigned long x = 0x10000000UL;
	struct pm_page *p, *q;
	struct pm_folio *f;
	struct pm_stats s0, s1;

	setup();
	ASSERT_EQ(map(x, 4 * PG, RW, PRIV), x);
	stamp(x, 4);
	f = folio_at(x);
	is_int(pm_folio_order(f), 0, "a small folio");
	is_int(pm_folio_ref_count(f), 1, "refcount 1: its mapping");
	is_int(pm_folio_mapcount(f), 1, "mapcount 1");
	ok(!pm_folio_maybe_dma_pinned(f), "not pinned");
	ok(!pm_mm_has_pinned(mm), "the mm has not pinned yet");

	s0 = pmt_stats(m);
	is_int(pm_pin_user_pages(mm, x, 1, PM_FOLL_WRITE, &p), 1, "pin");
	ok(pm_mm_has_pinned(mm), "the mm has pinned");
	is_int(pm_folio_ref_count(f), 1 + BIAS, "refcount 1 + 1024");
	is_int(pm_folio_pincount(f), 0, "small folios have no pincount");
	ok(pm_folio_maybe_dma_pinned(f), "maybe_dma_pinned");
	is_int(pm_pin_user_pages_fast(mm, x, 1, 0, &q), 1, "pin again (fast, read)");
	ok(p == q, "the same page");
	is_int(pm_folio_ref_count(f), 1 + 2 * BIAS, "refcount 1 + 2048");
	s1 = pmt_stats(m);
	is_int(s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired, 2, "nr_foll_pin_acquired +2");
	pm_unpin_user_page(p);
	is_int(pm_folio_ref_count(f), 1 + BIAS, "one unpin: 1 + 1024");
	pm_unpin_user_page(q);
	is_int(pm_folio_ref_count(f), 1, "both unpinned: 1");
	ok(!pm_folio_maybe_dma_pinned(f), "not pinned any more");
	s1 = pmt_stats(m);
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 2, "nr_foll_pin_released +2");
	/* The fast pin and the one-page unpins each count in one private slot that stands for
	 * two public counters: both must read it. */
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 1, "the fast pin: gup_fast_pages +1");
	is_int(s1.gup_slow_pages - s0.gup_slow_pages, 1, "the slow pin: gup_slow_pages +1");
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 2,
	       "two one-page unpins: unpin_folio_updates +2");

	/* Gets: +1 each; 1023 references read as "maybe pinned", as in Linux. */
	is_int(pm_get_user_pages(mm, x, 1, 0, &p), 1, "get");
	is_int(pm_folio_ref_count(f), 2, "refcount 2");
	ok(!pm_folio_maybe_dma_pinned(f), "a get is not a pin");
	for (int i = 0; i < 1021; i++)
		ASSERT_EQ(pm_get_user_pages_fast(mm, x, 1, 0, &q), 1);
	is_int(pm_folio_ref_count(f), 1023, "1022 gets: refcount 1023");
	ok(!pm_folio_maybe_dma_pinned(f), "1023 < 1024: not maybe pinned");
	ASSERT_EQ(pm_get_user_pages(mm, x, 1, 0, &q), 1);
	ok(pm_folio_maybe_dma_pinned(f),
	   "refcount 1024: maybe pinned (a false positive, as Linux)");
	for (int i = 0; i < 1022; i++)
		pm_put_page(q);
	pm_put_page(p);
	is_int(pm_folio_ref_count(f), 1, "all put: 1");
	is_int(pmt_stats(m).nr_foll_pin_acquired - s1.nr_foll_pin_acquired, 0, "gets count no pin");

	/* Frame numbers. */
	ASSERT_EQ(pm_get_user_pages(mm, x + PG, 1, 0, &p), 1);
	ok(pm_pfn_to_page(m, pm_page_to_pfn(p)) == p, "pm_pfn_to_page(pm_page_to_pfn(p)) == p");
	ok(pm_pfn_to_page(m, pm_machine_total_pages(m)) == NULL, "no page beyond the last frame");
	ok(!pm_page_is_zero(p), "not the zero page");
	pm_put_page(p);

	/*
	 * A pin that would pass GUP's reference limit (PM_GUP_REF_LIMIT, 2^30: headroom below
	 * INT_MAX for the references nobody may refuse) is refused; a get still fits below it
	 * (white box: the refcount set just under the limit).
	 */
	_Atomic int *ref = &((struct pm_page *)f)->xrefcount;
	int saved = atomic_load(ref);

	atomic_store(ref, PM_GUP_REF_LIMIT - 1000);
	s0 = pmt_stats(m);
	is_int(pm_pin_user_pages(mm, x, 1, 0, &p), -ENOMEM, "pin near the limit -> -ENOMEM");
	is_int(pm_pin_user_pages_fast(mm, x, 1, 0, &p), -ENOMEM,
	       "pin_fast near the limit -> -ENOMEM");
	is_int(atomic_load(ref), PM_GUP_REF_LIMIT - 1000, "the refcount did not move");
	is_int(pm_get_user_pages_fast(mm, x, 1, 0, &p), 1, "a get still fits");
	pm_put_page(p);
	atomic_store(ref, PM_GUP_REF_LIMIT);
	is_int(pm_get_user_pages(mm, x, 1, 0, &p), -ENOMEM, "a get at the limit -> -ENOMEM");
	is_int(pm_get_user_pages_fast(mm, x, 1, 0, &p), -ENOMEM,
	       "a get_fast at the limit -> -ENOMEM");
	is_int(pmt_stats(m).nr_foll_pin_acquired, s0.nr_foll_pin_acquired,
	       "refused pins not counted");
	atomic_store(ref, saved);
	teardown("small counts");
}

static void test_counts_thp(void)
{
	const unsigned long t = 0x40000000UL;
	struct pm_folio *a, *b, *sm;
	struct pm_stats s0, s1;
	long r;

	setup();
	thp_region(t, 2);
	ASSERT_EQ(map(t + 2 * THP, 4 * PG, RW, PRIV), t + 2 * THP);
	stamp(t, 1024 + 4);
	a = folio_at(t);
	b = folio_at(t + THP);
	sm = folio_at(t + 2 * THP);
	ok(pm_folio_order(a) == 9 && pm_folio_order(b) == 9 && a != b, "two 2 MiB folios");
	is_int(pm_folio_ref_count(a), 1, "PMD-mapped: refcount 1");
	is_int(pm_folio_pincount(a), 0, "pincount 0");

	s0 = pmt_stats(m);
	r = pm_pin_user_pages(mm, t, 1, 0, pg);
	ok(r == 1 && is_page_of(pg[0], t), "pin one page");
	is_int(pm_folio_ref_count(a), 2, "+1 refcount");
	is_int(pm_folio_pincount(a), 1, "+1 pincount");
	ok(pm_folio_maybe_dma_pinned(a), "maybe_dma_pinned");
	r = pm_pin_user_pages_fast(mm, t + PG, 511, PM_FOLL_WRITE, pg + 1);
	ok(r == 511 && pages_are(pg + 1, t + PG, 511), "pin the other 511 (fast)");
	is_int(pm_folio_ref_count(a), 513, "refcount 1 + 512");
	is_int(pm_folio_pincount(a), 512, "pincount 512");
	is_int(pmt_stats(m).nr_foll_pin_acquired - s0.nr_foll_pin_acquired, 512,
	       "512 pins counted");
	pm_unpin_user_pages(pg, 512);
	is_int(pm_folio_ref_count(a), 1, "unpinned: refcount 1");
	is_int(pm_folio_pincount(a), 0, "unpinned: pincount 0");
	ok(!pm_folio_maybe_dma_pinned(a), "not pinned");

	r = pm_get_user_pages_fast(mm, t + 7 * PG, 3, 0, pg);
	ok(r == 3 && pages_are(pg, t + 7 * PG, 3), "get 3 pages");
	is_int(pm_folio_ref_count(a), 4, "gets: +3 refcount");
	is_int(pm_folio_pincount(a), 0, "gets: no pincount");
	release(&calls[1], pg, r);

	/* Spanning two THPs, then a THP and a small folio. */
	for (int c = 2; c < NCALLS; c++) {
		const struct call *k = &calls[c];

		r = k->fn(mm, t + THP - 2 * PG, 4, PM_FOLL_WRITE, pg);
		ok(r == 4 && pages_are(pg, t + THP - 2 * PG, 4), "%s: 4 pages across two THPs",
		   k->name);
		ok(pm_page_folio(pg[1]) == a && pm_page_folio(pg[2]) == b, "%s: 2 in each",
		   k->name);
		is_int(pm_folio_ref_count(a), 3, "%s: first THP refcount 1 + 2", k->name);
		is_int(pm_folio_pincount(a), 2, "%s: first THP pincount 2", k->name);
		is_int(pm_folio_ref_count(b), 3, "%s: second THP refcount 1 + 2", k->name);
		is_int(pm_folio_pincount(b), 2, "%s: second THP pincount 2", k->name);
		pm_unpin_user_pages(pg, r);
		r = k->fn(mm, t + 2 * THP - 2 * PG, 3, PM_FOLL_WRITE, pg);
		ok(r == 3 && pages_are(pg, t + 2 * THP - 2 * PG, 3), "%s: 3 pages, THP then small",
		   k->name);
		is_int(pm_folio_ref_count(b), 3, "%s: THP refcount 1 + 2", k->name);
		is_int(pm_folio_pincount(b), 2, "%s: THP pincount 2", k->name);
		is_int(pm_folio_ref_count(sm), 1 + BIAS, "%s: small folio 1 + 1024", k->name);
		pm_unpin_user_pages(pg, r);
		ok(pm_folio_ref_count(a) == 1 && pm_folio_ref_count(b) == 1 &&
			   pm_folio_ref_count(sm) == 1 && pm_folio_pincount(a) == 0 &&
			   pm_folio_pincount(b) == 0,
		   "%s: all back to refcount 1, pincount 0", k->name);
	}
	s1 = pmt_stats(m);
	is_int(s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired, 512 + 14, "every pin counted");
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 512 + 14, "every unpin counted");
	teardown("THP counts");
}

static void test_fast_counters(void)
{
	const unsigned long x = 0x10000000UL, y = 0x20000000UL;
	struct pm_stats s0, s1;
	long r;

	setup();
	ASSERT_EQ(map(x, 8 * PG, RW, PRIV), x);
	ASSERT_EQ(map(y, 8 * PG, RW, PRIV), y);
	stamp(x, 4);

	s0 = pmt_stats(m);
	r = pm_pin_user_pages_fast(mm, x, 8, PM_FOLL_WRITE, pg);
	s1 = pmt_stats(m);
	is_int(r, 8, "fast pin over 4 present + 4 absent pages -> 8");
	ok(pages_are(pg, x, 4), "the present ones are the right pages");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 4, "head: 4 gup_fast_pages");
	is_int(s1.gup_slow_pages - s0.gup_slow_pages, 4, "tail: 4 gup_slow_pages");
	is_int(s1.gup_fast_fallbacks - s0.gup_fast_fallbacks, 1, "one fallback");
	pm_unpin_user_pages(pg, r);
	stamp(x + 4 * PG, 4);

	s0 = pmt_stats(m);
	r = pm_pin_user_pages_fast(mm, x, 8, PM_FOLL_WRITE, pg);
	s1 = pmt_stats(m);
	ok(r == 8 && pages_are(pg, x, 8), "all present: 8, the right pages");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 8, "8 gup_fast_pages");
	is_int(s1.gup_slow_pages - s0.gup_slow_pages, 0, "0 gup_slow_pages");
	is_int(s1.gup_fast_fallbacks - s0.gup_fast_fallbacks, 0, "no fallback");
	pm_unpin_user_pages(pg, r);

	s0 = pmt_stats(m);
	r = pm_pin_user_pages_fast(mm, y, 8, PM_FOLL_WRITE, pg);
	s1 = pmt_stats(m);
	is_int(r, 8, "none present: 8");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 0, "0 gup_fast_pages");
	is_int(s1.gup_slow_pages - s0.gup_slow_pages, 8, "8 gup_slow_pages");
	is_int(s1.gup_fast_fallbacks - s0.gup_fast_fallbacks, 1, "one fallback");
	pm_unpin_user_pages(pg, r);

	s0 = pmt_stats(m);
	r = pm_pin_user_pages(mm, x, 8, 0, pg);
	s1 = pmt_stats(m);
	ok(r == 8 && pages_are(pg, x, 8), "slow pin: 8");
	is_int(s1.gup_slow_pages - s0.gup_slow_pages, 8, "slow call: 8 gup_slow_pages");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 0, "slow call: no gup_fast_pages");
	is_int(s1.gup_fast_fallbacks - s0.gup_fast_fallbacks, 0, "slow call: no fallback");
	pm_unpin_user_pages(pg, r);

	s0 = pmt_stats(m);
	r = pm_get_user_pages_fast(mm, x + 2 * PG, 6, 0, pg);
	s1 = pmt_stats(m);
	ok(r == 6 && pages_are(pg, x + 2 * PG, 6), "get_fast: 6");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 6, "get_fast counts gup_fast_pages");
	is_int(s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired, 0, "and no pin");
	release(&calls[1], pg, r);

	/* A read-only fast pin of an exclusive anonymous page needs no unshare. */
	s0 = pmt_stats(m);
	r = pm_pin_user_pages_fast(mm, x, 2, 0, pg);
	s1 = pmt_stats(m);
	ok(r == 2 && pages_are(pg, x, 2), "read-only fast pin of exclusive pages");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 2, "taken by the fast walk");
	pm_unpin_user_pages(pg, r);

	/* Writes through pins are what the address space reads, and the other way round. */
	r = pm_pin_user_pages_fast(mm, x + PG, 2, PM_FOLL_WRITE, pg);
	ASSERT_EQ(r, 2);
	char msg[64], back[64];

	for (int i = 0; i < 2; i++) {
		snprintf(msg, sizeof(msg), "written through pin %d", i);
		memcpy((char *)pm_page_address(pg[i]) + 100, msg, sizeof(msg));
		ok(pm_access(mm, x + (1 + i) * PG + 100, back, sizeof(back), 0) == sizeof(back) &&
			   !memcmp(back, msg, sizeof(msg)),
		   "pm_access reads what was written through pin %d", i);
		snprintf(msg, sizeof(msg), "written by pm_access %d", i);
		ASSERT_EQ(pm_access(mm, x + (1 + i) * PG + 200, msg, sizeof(msg), 1), sizeof(msg));
		ok(!memcmp((char *)pm_page_address(pg[i]) + 200, msg, sizeof(msg)),
		   "the pinned frame holds what pm_access wrote %d", i);
	}
	pm_unpin_user_pages(pg, r);

	/* Same through a THP. */
	const unsigned long t = 0x40000000UL;

	thp_region(t, 1);
	stamp(t, 512);
	r = pm_pin_user_pages_fast(mm, t, 512, PM_FOLL_WRITE, pg);
	ok(r == 512 && pages_are(pg, t, 512), "pin a whole THP (fast)");
	memcpy((char *)pm_page_address(pg[300]) + 8, "thp pin", 8);
	ok(pm_access(mm, t + 300 * PG + 8, back, 8, 0) == 8 && !memcmp(back, "thp pin", 8),
	   "a write through subpage 300 is read at its address");
	pm_unpin_user_pages(pg, r);
	teardown("fast counters");
}

static void test_zero_page(void)
{
	const unsigned long x = 0x10000000UL;
	struct pm_stats s0, s1;
	struct pm_page *p, *z;
	int zref;
	long r;

	setup();
	ASSERT_EQ(map(x, 8 * PG, RW, PRIV), x);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(pm_access(mm, x + i * PG, &(char){ 0 }, 1, 0), 1);
	size_t f1 = pmt_free_pages(m);

	s0 = pmt_stats(m);
	r = pm_pin_user_pages(mm, x, 1, 0, &z);
	ok(r == 1 && pm_page_is_zero(z), "a read pin of a read-faulted page gives the zero page");
	zref = pm_folio_ref_count(pm_page_folio(z));
	for (int c = 0; c < NCALLS; c++) {
		r = calls[c].fn(mm, x + PG, 1, 0, &p);
		ok(r == 1 && p == z, "%s: the zero page", calls[c].name);
		is_int(pm_folio_ref_count(pm_page_folio(z)), zref,
		       "%s: the zero page's refcount does not move", calls[c].name);
		release(&calls[c], &p, r);
	}
	pm_unpin_user_page(z);
	pm_unpin_user_pages(&z, 1);
	pm_unpin_user_page_range_dirty_lock(z, 1, true);
	is_int(pm_folio_ref_count(pm_page_folio(z)), zref, "unpinning it changes nothing either");
	s1 = pmt_stats(m);
	is_int(s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired, 0, "no pin counted");
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 0, "no unpin counted");
	static const char zero[PG];

	ok(!memcmp(pm_page_address(z), zero, PG), "it reads zeros");
	is_int(pmt_free_pages(m), f1, "no frame was allocated");

	/* A long-term read pin unshares: a new anonymous page that sees later writes. */
	r = pm_pin_user_pages(mm, x + 2 * PG, 1, PM_FOLL_LONGTERM, &p);
	ok(r == 1 && !pm_page_is_zero(p) && pm_folio_test_anon(pm_page_folio(p)),
	   "a long-term read pin of the zero page gets an anonymous page");
	ok(!memcmp(pm_page_address(p), zero, PG), "which reads zeros");
	ASSERT_EQ(pm_access(mm, x + 2 * PG + 40, "later", 6, 1), 6);
	ok(!memcmp((char *)pm_page_address(p) + 40, "later", 6),
	   "the pin sees the process's later write");
	pm_unpin_user_page(p);
	r = pm_pin_user_pages_fast(mm, x + 3 * PG, 1, PM_FOLL_LONGTERM, &p);
	ok(r == 1 && !pm_page_is_zero(p), "the same with pin_fast");
	ASSERT_EQ(pm_access(mm, x + 3 * PG + 40, "later", 6, 1), 6);
	ok(!memcmp((char *)pm_page_address(p) + 40, "later", 6), "it sees the later write too");
	pm_unpin_user_page(p);

	/* A write pin replaces the zero page. */
	r = pm_pin_user_pages_fast(mm, x + 4 * PG, 1, PM_FOLL_WRITE, &p);
	ok(r == 1 && !pm_page_is_zero(p), "a write pin gets its own page");
	pm_unpin_user_page(p);
	teardown("zero page");
}

/* The dirty flag, white box: clear it so that marking is seen. */
static void clear_dirty(struct pm_folio *f)
{
	atomic_fetch_and(&f->page.xflags, ~PGF(PG_dirty));
}

static void test_unpin(void)
{
	const unsigned long t = 0x40000000UL, x = 0x10000000UL;
	struct pm_folio *a, *b, *f;
	struct pm_stats s0, s1;
	struct pm_page *arr[8];
	long r;

	setup();
	thp_region(t, 2);
	stamp(t, 1024);
	ASSERT_EQ(map(x, 8 * PG, RW, PRIV), x);
	stamp(x, 8);
	a = folio_at(t);
	b = folio_at(t + THP);

	ASSERT_EQ(pm_pin_user_pages(mm, t, 512, 0, pg), 512);
	s0 = pmt_stats(m);
	pm_unpin_user_pages(pg, 512);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 1,
	       "512 pages of one THP: 1 update");
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 512, "512 released");
	is_int(pm_folio_pincount(a), 0, "pincount 0");

	ASSERT_EQ(pm_pin_user_pages(mm, x, 8, 0, pg), 8);
	s0 = pmt_stats(m);
	pm_unpin_user_pages(pg, 8);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 8, "8 small folios: 8 updates");

	/* [A0 A1 B0 A2]: runs of the same folio, not folios. */
	ASSERT_EQ(pm_pin_user_pages(mm, t, 3, 0, pg), 3);
	ASSERT_EQ(pm_pin_user_pages(mm, t + THP, 1, 0, pg + 3), 1);
	arr[0] = pg[0], arr[1] = pg[1], arr[2] = pg[3], arr[3] = pg[2];
	s0 = pmt_stats(m);
	pm_unpin_user_pages(arr, 4);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 3, "[A0 A1 B0 A2]: 3 updates");
	ok(pm_folio_pincount(a) == 0 && pm_folio_pincount(b) == 0 &&
		   pm_folio_ref_count(a) == 1 && pm_folio_ref_count(b) == 1,
	   "both THPs back to refcount 1, pincount 0");

	/* A NULL entry is skipped and ends a batch: [A0 A1 NULL A2 A3]. */
	ASSERT_EQ(pm_pin_user_pages(mm, t, 4, 0, pg), 4);
	arr[0] = pg[0], arr[1] = pg[1], arr[2] = NULL, arr[3] = pg[2], arr[4] = pg[3];
	s0 = pmt_stats(m);
	pm_unpin_user_pages(arr, 5);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 2, "[A0 A1 NULL A2 A3]: 2 updates");
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 4, "4 released");
	is_int(pm_folio_pincount(a), 0, "pincount 0");

	/* Single unpins. */
	ASSERT_EQ(pm_pin_user_pages(mm, t, 2, 0, pg), 2);
	s0 = pmt_stats(m);
	pm_unpin_user_page(pg[0]);
	pm_unpin_user_page(pg[1]);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 2, "2 single unpins: 2 updates");

	/* Range unpin: one update per folio, by arithmetic. */
	r = pm_pin_user_pages(mm, t + 10 * PG, 100, 0, pg);
	ASSERT_EQ(r, 100);
	clear_dirty(a);
	s0 = pmt_stats(m);
	pm_unpin_user_page_range_dirty_lock(pg[0], 100, false);
	s1 = pmt_stats(m);
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 1,
	       "range of 100 in a THP: 1 update");
	is_int(s1.nr_foll_pin_released - s0.nr_foll_pin_released, 100, "100 released");
	is_int(pm_folio_pincount(a), 0, "pincount 0");
	ok(!pm_folio_test_dirty(a), "make_dirty false: not dirtied");
	ASSERT_EQ(pm_pin_user_pages(mm, t + THP - 100 * PG, 100, PM_FOLL_WRITE, pg), 100);
	pm_unpin_user_page_range_dirty_lock(pg[0], 100, true);
	ok(pm_folio_test_dirty(a), "make_dirty true: dirty");
	is_int(pm_folio_ref_count(a), 1, "refcount 1");
	ASSERT_EQ(pm_pin_user_pages(mm, x + 3 * PG, 1, 0, pg), 1);
	f = pm_page_folio(pg[0]);
	s0 = pmt_stats(m);
	pm_unpin_user_page_range_dirty_lock(pg[0], 1, false);
	is_int(pmt_stats(m).unpin_folio_updates - s0.unpin_folio_updates, 1, "range of 1 small: 1");
	is_int(pm_folio_ref_count(f), 1, "small folio refcount 1");

	/* dirty_lock on an array. */
	ASSERT_EQ(pm_pin_user_pages(mm, x, 4, PM_FOLL_WRITE, pg), 4);
	ASSERT_EQ(pm_pin_user_pages(mm, t + THP, 4, PM_FOLL_WRITE, pg + 4), 4);
	for (int i = 0; i < 8; i++)
		clear_dirty(pm_page_folio(pg[i]));
	pm_unpin_user_pages_dirty_lock(pg, 8, false);
	bool clean = true;

	for (int i = 0; i < 8; i++)
		clean &= !pm_folio_test_dirty(pm_page_folio(pg[i]));
	ok(clean, "dirty_lock(false) dirties nothing");
	ASSERT_EQ(pm_pin_user_pages(mm, x, 4, PM_FOLL_WRITE, pg), 4);
	ASSERT_EQ(pm_pin_user_pages(mm, t + THP, 4, PM_FOLL_WRITE, pg + 4), 4);
	s0 = pmt_stats(m);
	pm_unpin_user_pages_dirty_lock(pg, 8, true);
	s1 = pmt_stats(m);
	bool dirty = true;

	for (int i = 0; i < 8; i++)
		dirty &= pm_folio_test_dirty(pm_page_folio(pg[i]));
	ok(dirty, "dirty_lock(true) dirties every folio");
	is_int(s1.unpin_folio_updates - s0.unpin_folio_updates, 5,
	       "4 small + 1 THP run: 5 updates");
	ok(pm_folio_ref_count(b) == 1 && pm_folio_pincount(b) == 0, "THP back to 1/0");
	teardown("unpin");
}

/* A read-only or PROT_NONE THP: permissions checked at PMD level, nothing split. */
static void test_thp_prot(void)
{
	const unsigned long t = 0x40000000UL;
	struct pm_stats s0, s1;
	long r;

	setup();
	thp_region(t, 1);
	stamp(t, 512);
	s0 = pmt_stats(m);
	ASSERT_EQ(pm_mprotect(mm, t, THP, PM_PROT_NONE), 0);
	for (int c = 0; c < NCALLS; c++)
		is_int(calls[c].fn(mm, t + 3 * PG, 4, 0, pg), -EFAULT,
		       "%s: PROT_NONE THP -> -EFAULT", calls[c].name);
	ASSERT_EQ(pm_mprotect(mm, t, THP, PM_PROT_READ), 0);
	for (int c = 0; c < NCALLS; c++) {
		const struct call *k = &calls[c];

		is_int(k->fn(mm, t + 3 * PG, 4, PM_FOLL_WRITE, pg), -EFAULT,
		       "%s: write to a read-only THP -> -EFAULT", k->name);
		r = k->fn(mm, t, 512, 0, pg);
		ok(r == 512 && pages_are(pg, t, 512), "%s: read of a read-only THP -> 512",
		   k->name);
		release(k, pg, r);
	}
	s1 = pmt_stats(m);
	is_int(s1.thp_splits - s0.thp_splits, 0, "whole-THP mprotect and pins split nothing");
	is_int(s1.gup_fast_pages - s0.gup_fast_pages, 1024,
	       "the fast calls took 2 x 512 pages fast");
	is_int(pm_folio_order(folio_at(t)), 9, "still one 2 MiB folio");
	teardown("THP protections");
}

/* Pinned pages across DONTNEED, mprotect and a THP split: the pin keeps its frame. */
static void test_pins_and_changes(void)
{
	const unsigned long x = 0x10000000UL, t = 0x40000000UL;
	struct pm_stats s0, s1;
	struct pm_page *p, *q[2];
	struct pm_folio *f;
	char back[16];

	setup();
	ASSERT_EQ(map(x, 4 * PG, RW, PRIV), x);
	stamp(x, 4);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, x, 1, PM_FOLL_WRITE, &p), 1);
	f = pm_page_folio(p);
	ASSERT_EQ(pm_madvise(mm, x, PG, PM_MADV_DONTNEED), 0);
	ok(pm_access(mm, x, back, 8, 0) == 8 && !memcmp(back, "\0\0\0\0\0\0\0\0", 8),
	   "after DONTNEED the address reads zero");
	ok(is_page_of(p, x), "the pinned frame keeps its data");
	is_int(pm_folio_ref_count(f), BIAS, "refcount 1024: the pin only");
	is_int(pm_folio_mapcount(f), 0, "no mapping");
	size_t f1 = pmt_free_pages(m);

	pm_unpin_user_page(p);
	is_int(pmt_free_pages(m), f1 + 1, "unpinning frees it");

	/* A pinned buffer made read-only and writable again: writes land in the pinned frame. */
	ASSERT_EQ(pm_pin_user_pages(mm, x + PG, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &p), 1);
	ASSERT_EQ(pm_mprotect(mm, x + PG, PG, PM_PROT_READ), 0);
	is_int(pm_access(mm, x + PG + 64, "no", 2, 1), -EFAULT, "read-only: write -> -EFAULT");
	ASSERT_EQ(pm_mprotect(mm, x + PG, PG, RW), 0);
	s0 = pmt_stats(m);
	is_int(pm_access(mm, x + PG + 64, "io_uring", 8, 1), 8, "writable again");
	s1 = pmt_stats(m);
	ok(!memcmp((char *)pm_page_address(p) + 64, "io_uring", 8),
	   "the write landed in the pinned frame (reused, not copied)");
	is_int(s1.cow_copies - s0.cow_copies, 0, "no COW copy");
	pm_unpin_user_page(p);

	/* A THP split under two pins. */
	thp_region(t, 1);
	stamp(t, 512);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, t + 10 * PG, 2, PM_FOLL_WRITE, q), 2);
	f = pm_page_folio(q[0]);
	s0 = pmt_stats(m);
	ASSERT_EQ(pm_munmap(mm, t + 100 * PG, PG), 0);
	is_int(pmt_stats(m).thp_splits - s0.thp_splits, 1, "munmap of one page split the PMD");
	ok(is_page_of(q[0], t + 10 * PG) && is_page_of(q[1], t + 11 * PG),
	   "pins keep their frames");
	ASSERT_EQ(pm_access(mm, t + 11 * PG + 64, "after split", 12, 1), 12);
	ok(!memcmp((char *)pm_page_address(q[1]) + 64, "after split", 12),
	   "a write after the split lands in the pinned frame");
	is_int(pm_folio_ref_count(f), 511 + 2, "refcount: 511 PTE mappings + 2 pins");
	is_int(pm_folio_pincount(f), 2, "pincount 2");
	pm_unpin_user_pages(q, 2);
	is_int(pm_folio_ref_count(f), 511, "unpinned: 511");
	teardown("pins and changes");
}

/* Pins outlive munmap and the address space itself. */
static void test_pin_outlives(void)
{
	const unsigned long x = 0x10000000UL, t = 0x40000000UL;
	struct pm_page *p, *q[2];
	struct pm_folio *f;

	setup();
	ASSERT_EQ(map(x, 4 * PG, RW, PRIV), x);
	stamp(x, 4);
	ASSERT_EQ(pm_pin_user_pages_fast(mm, x + PG, 1, PM_FOLL_WRITE, &p), 1);
	f = pm_page_folio(p);
	size_t f1 = pmt_free_pages(m);

	ASSERT_EQ(pm_munmap(mm, x, 4 * PG), 0);
	ok(pmt_free_pages(m) >= f1 + 3, "the 3 unpinned pages are freed");
	is_int(pm_folio_ref_count(f), BIAS, "the pinned one stays: refcount 1024, no mapping");
	is_int(pm_folio_mapcount(f), 0, "mapcount 0");
	ok(is_page_of(p, x + PG), "its data is intact");
	size_t f2 = pmt_free_pages(m);

	pm_unpin_user_page(p);
	is_int(pmt_free_pages(m), f2 + 1, "the last unpin frees it");

	thp_region(t, 1);
	stamp(t, 512);
	ASSERT_EQ(pm_pin_user_pages(mm, t + 5 * PG, 2, PM_FOLL_WRITE | PM_FOLL_LONGTERM, q), 2);
	pm_mm_destroy(mm);
	mm = NULL;
	ok(pmt_free_pages(m) + 512 <= free0,
	   "after pm_mm_destroy the pinned THP is still allocated");
	ok(is_page_of(q[0], t + 5 * PG) && is_page_of(q[1], t + 6 * PG), "with its data");
	is_int(pm_folio_ref_count(pm_page_folio(q[0])), 2, "refcount 2 (two pins)");
	is_int(pm_folio_pincount(pm_page_folio(q[0])), 2, "pincount 2");
	pm_unpin_user_pages(q, 2);
	is_int(pmt_free_pages(m), free0, "the last unpin frees it: all frames free");
	teardown("pins outlive mappings");
}

/*
 * The knobs: one scenario run with each; results must be identical, counters differ.
 */
#define NOUT 32
struct outcome {
	long v[NOUT];
	int n;
};

static void out(struct outcome *o, long v)
{
	ASSERT_TRUE(o->n < NOUT);
	o->v[o->n++] = v;
}

static uint64_t sum_pages(struct pm_page **p, long n)
{
	uint64_t s = 0;

	for (long i = 0; i < n; i++) {
		const uint64_t *w = pm_page_address(p[i]);

		for (unsigned j = 0; j < PG / 8; j++)
			s = s * 31 + w[j];
	}
	return s;
}

struct knob_counters {
	unsigned long has_pinned_writes_10; /* over 10 single-page fast pins */
	unsigned long has_pinned_writes_all;
	unsigned long fast_total;
	unsigned long slow_partial, fast_partial, fallbacks_partial; /* the partial fast pin */
	unsigned long updates_512, updates_range, updates_small16;
};

static void scenario(unsigned knobs, struct outcome *o, struct knob_counters *k)
{
	const unsigned long s = 0x10000000UL, t = 0x40000000UL;
	struct pm_stats a, b, start;
	long r;

	memset(o, 0, sizeof(*o));
	setup_knobs(knobs);
	ASSERT_EQ(map(s, 16 * PG, RW, PRIV), s);
	thp_region(t, 2);
	stamp(s, 8);
	stamp(t, 4);
	stamp(t + THP - 4 * PG, 4);
	start = pmt_stats(m);
	out(o, pm_mm_has_pinned(mm));
	r = pm_get_user_pages_fast(mm, s, 4, 0, pg);
	out(o, r);
	out(o, pages_are(pg, s, 4));
	release(&calls[1], pg, r);
	out(o, pm_mm_has_pinned(mm));

	a = pmt_stats(m);
	r = pm_pin_user_pages_fast(mm, s, 16, PM_FOLL_WRITE, pg);
	b = pmt_stats(m);
	out(o, r);
	out(o, pages_are(pg, s, 8));
	out(o, (long)sum_pages(pg, r > 0 ? r : 0));
	out(o, pm_folio_ref_count(pm_page_folio(pg[0])));
	out(o, pm_folio_ref_count(pm_page_folio(pg[15])));
	k->fast_partial = b.gup_fast_pages - a.gup_fast_pages;
	k->slow_partial = b.gup_slow_pages - a.gup_slow_pages;
	k->fallbacks_partial = b.gup_fast_fallbacks - a.gup_fast_fallbacks;
	a = pmt_stats(m);
	pm_unpin_user_pages(pg, r);
	k->updates_small16 = pmt_stats(m).unpin_folio_updates - a.unpin_folio_updates;
	out(o, pm_mm_has_pinned(mm));

	a = pmt_stats(m);
	for (int i = 0; i < 10; i++) {
		r = pm_pin_user_pages_fast(mm, s + i * PG, 1, PM_FOLL_WRITE, pg);
		out(o, r == 1 && is_page_of(pg[0], s + i * PG));
		pm_unpin_user_page(pg[0]);
	}
	k->has_pinned_writes_10 = pmt_stats(m).has_pinned_writes - a.has_pinned_writes;

	r = pm_pin_user_pages(mm, t, 512, 0, pg);
	out(o, r);
	out(o, pm_folio_ref_count(pm_page_folio(pg[0])));
	out(o, pm_folio_pincount(pm_page_folio(pg[0])));
	a = pmt_stats(m);
	pm_unpin_user_pages(pg, r);
	k->updates_512 = pmt_stats(m).unpin_folio_updates - a.unpin_folio_updates;
	out(o, pm_folio_pincount(pm_page_folio(pg[0])));

	r = pm_pin_user_pages_fast(mm, t + 10 * PG, 100, PM_FOLL_WRITE, pg);
	out(o, r);
	a = pmt_stats(m);
	pm_unpin_user_page_range_dirty_lock(pg[0], r, true);
	k->updates_range = pmt_stats(m).unpin_folio_updates - a.unpin_folio_updates;
	out(o, pm_folio_test_dirty(pm_page_folio(pg[0])));
	out(o, pm_folio_ref_count(pm_page_folio(pg[0])));

	r = pm_pin_user_pages_fast(mm, t + THP - 4 * PG, 8, PM_FOLL_WRITE, pg);
	out(o, r);
	out(o, pages_are(pg, t + THP - 4 * PG, 4));
	out(o, pm_folio_pincount(pm_page_folio(pg[7])));
	pm_unpin_user_pages_dirty_lock(pg, r, true);
	out(o, pm_folio_pincount(pm_page_folio(pg[7])));

	struct pm_stats end = pmt_stats(m);

	k->fast_total = end.gup_fast_pages - start.gup_fast_pages;
	k->has_pinned_writes_all = end.has_pinned_writes - start.has_pinned_writes;
	/* Pin counters are not results: a restarted fast walk may count pins it dropped. */
	teardown("knob scenario");
}

static void test_knobs(void)
{
	struct outcome base, o;
	struct knob_counters kb, k;

	scenario(0, &base, &kb);
	diag("no knob: fast %lu/slow %lu/fallbacks %lu, has_pinned_writes %lu, updates %lu/%lu",
	     kb.fast_partial, kb.slow_partial, kb.fallbacks_partial, kb.has_pinned_writes_all,
	     kb.updates_512, kb.updates_range);
	is_int(kb.has_pinned_writes_all, 1, "no knob: the has-pinned flag is written once");
	is_int(kb.has_pinned_writes_10, 0, "no knob: 10 later pins write it 0 times");
	is_int(kb.fast_partial, 8, "no knob: partial fast pin takes 8 pages fast");
	is_int(kb.slow_partial, 8, "no knob: and 8 slow");
	is_int(kb.fallbacks_partial, 1, "no knob: one fallback");
	is_int(kb.updates_512, 1, "no knob: 512 pages of a THP unpinned in 1 update");
	is_int(kb.updates_range, 1, "no knob: a range of 100 in 1 update");
	is_int(kb.updates_small16, 16, "no knob: 16 small folios in 16 updates");

	scenario(PM_KNOB_HAS_PINNED_ALWAYS_WRITE, &o, &k);
	ok(o.n == base.n && !memcmp(o.v, base.v, sizeof(o.v)), "ALWAYS_WRITE: same results");
	is_int(k.has_pinned_writes_10, 10, "ALWAYS_WRITE: 10 pins, 10 writes of the flag");
	ok(k.has_pinned_writes_all >= 14, "ALWAYS_WRITE: a write per pin call (%lu)",
	   k.has_pinned_writes_all);
	is_int(k.fast_partial, kb.fast_partial, "ALWAYS_WRITE: same fast pages");

	scenario(PM_KNOB_NO_GUP_FAST, &o, &k);
	ok(o.n == base.n && !memcmp(o.v, base.v, sizeof(o.v)), "NO_GUP_FAST: same results");
	is_int(k.fast_total, 0, "NO_GUP_FAST: gup_fast_pages stays 0");
	is_int(k.slow_partial, 16, "NO_GUP_FAST: the partial pin is all slow");
	is_int(k.has_pinned_writes_all, 1, "NO_GUP_FAST: flag written once");

	scenario(PM_KNOB_GUP_FAST_RESTART, &o, &k);
	ok(o.n == base.n && !memcmp(o.v, base.v, sizeof(o.v)), "GUP_FAST_RESTART: same results");
	is_int(k.slow_partial, 16, "GUP_FAST_RESTART: a short fast walk is redone: 16 slow");
	is_int(k.fallbacks_partial, 1, "GUP_FAST_RESTART: one fallback");
	ok(k.fast_total > 0, "GUP_FAST_RESTART: full fast walks still count fast pages");

	scenario(PM_KNOB_UNPIN_PER_PAGE, &o, &k);
	ok(o.n == base.n && !memcmp(o.v, base.v, sizeof(o.v)), "UNPIN_PER_PAGE: same results");
	is_int(k.updates_512, 512, "UNPIN_PER_PAGE: 512 updates for 512 pages");
	is_int(k.updates_range, 100, "UNPIN_PER_PAGE: 100 updates for a range of 100");
	is_int(k.fast_partial, kb.fast_partial, "UNPIN_PER_PAGE: same fast pages");

	scenario(PM_KNOB_ALL, &o, &k);
	ok(o.n == base.n && !memcmp(o.v, base.v, sizeof(o.v)), "all knobs: same results");
	is_int(k.fast_total, 0, "all knobs: no fast pages");
	is_int(k.updates_512, 512, "all knobs: per-page unpin");
	ok(k.has_pinned_writes_10 >= 10, "all knobs: the flag written on every pin");
}

int main(void)
{
	plan_no_plan();
	test_args();
	test_partial();
	test_force();
	test_counts_small();
	test_counts_thp();
	test_fast_counters();
	test_zero_page();
	test_unpin();
	test_thp_prot();
	test_pins_and_changes();
	test_pin_outlives();
	test_knobs();
	return done_testing();
}
