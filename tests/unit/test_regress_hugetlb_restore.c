// SPDX-License-Identifier: MIT
/*
 * test_regress_hugetlb_restore.c - issue 29, divergence 1: hugetlb reservation counts that
 * differed from Linux 6.18's, each sequence found by make oracle and its numbers (free pages,
 * HugePages_Rsvd) Linux's.
 *
 * Linux 6.9+ rules, which pinmm follows now (mem/hugetlb_pool.c):
 *  - a zap of a private owner's anonymous page - munmap, exit, truncation, MAP_FIXED over it,
 *    MADV_DONTNEED - gives the page's reservation back to the owner's map and marks the page;
 *    the put that frees the marked page gives the reservation back to the pool's count
 *    (free_huge_folio's restore_reserve). The close takes the map's reservations off the
 *    count, so while the page is held (a pin, a fork child) the count is one lower, and may
 *    read below zero; it comes back when the page is freed.
 *  - truncation releases the shared reservations past the new size, whatever the old one.
 *  - a MAP_FIXED hugetlb mmap reserves after the old mappings are zapped and closed.
 * Both designs; every case ends with pm_machine_check and the pool whole again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define HP (2UL << 20)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define WIN 0x200000000000UL
#define ANON_HUGE (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB)

static const struct {
	unsigned flags;
	const char *name;
} designs[] = { { PM_MACHINE_LINUX_MM, "linux" }, { PM_MACHINE_RANGE_MM, "range" } };

static const char *dn;
static struct pm_machine *m;
static size_t free0;

static void start(unsigned flags)
{
	struct pm_config cfg = { .mem_bytes = 128UL << 20, .nr_hugepages = 8, .flags = flags };

	m = pm_machine_create(&cfg);
	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
}

static void finish(void)
{
	is_int(pm_machine_check(m), 0, "%s: ... pm_machine_check", dn);
	pmt_hend(m, free0, 8, dn);
}

static long pool_free(void)
{
	size_t t, f;

	return pm_hugetlb_pool(m, &t, &f) ? -1 : (long)f;
}

/* As HugePages_Rsvd reads, a count below zero read back as a signed one. */
static long pool_reserved(void)
{
	size_t r;

	return pm_hugetlb_reserved(m, &r) ? -100 : (long)r;
}

static void pool_is(long f, long r, const char *what)
{
	ok(pool_free() == f && pool_reserved() == r, "%s: %s: free %ld, reserved %ld (Linux %ld/%ld)",
	   dn, what, pool_free(), pool_reserved(), f, r);
}

static struct pm_mm *window(void)
{
	struct pm_mm *mm = pm_mm_create(m);

	ASSERT_TRUE(mm != NULL);
	ASSERT_EQ(pm_mmap(mm, WIN, 4 * HP, PM_PROT_NONE, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS |
			  PM_MAP_FIXED | PM_MAP_NORESERVE, NULL, 0), (long)WIN);
	return mm;
}

static long pin(struct pm_mm *mm, unsigned long a, struct pm_page **pg)
{
	return pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pg);
}

/* A fork child's private mapping of a page it reads, then truncated away: the owner's map has
 * its reservation back (the zap restores it, the page's free counts it). */
static void truncate_private(void)
{
	struct pm_mm *mm;
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);

	mm = window();
	ASSERT_EQ(pm_mmap(mm, WIN + HP, HP, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, HP),
		  (long)(WIN + HP));
	ASSERT_EQ(pmt_peek(mm, WIN + HP + 0x36), 0);
	pool_is(7, 0, "a private read of a missing page: an anonymous page");
	ASSERT_EQ(pm_shmem_truncate(f, HP), 0);
	pool_is(8, 1, "truncated away: the reservation is back");
	pm_mm_destroy(mm);
	pool_is(8, 0, "exit: the owner's close gives it back");
	pm_shmem_put(f);
	finish();
}

/* A truncation to the size the object has already drops a shared reservation past its end. */
static void truncate_same_size(void)
{
	struct pm_mm *mm = window(), *c1, *c2;
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);

	ASSERT_EQ(pm_shmem_truncate(f, 0), 0);
	ASSERT_EQ(pm_mmap(mm, WIN, 0xc000, PM_PROT_READ | PM_PROT_EXEC, PM_MAP_SHARED | PM_MAP_FIXED,
			  f, HP), (long)WIN);
	pool_is(8, 1, "a shared mapping past the end reserves");
	c1 = pmt_fork(mm);
	c2 = pmt_fork(c1);
	ASSERT_EQ(pm_shmem_truncate(f, 0), 0);
	pool_is(8, 0, "truncation to the same size releases it");
	pm_mm_destroy(c2);
	pm_mm_destroy(c1);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	finish();
}

/* A private populated mapping's pages shared with a fork child, then replaced in part by a
 * MAP_FIXED private mapping: the owner closes the restored page's reservation while the child
 * holds it. */
static void fixed_over_forked(void)
{
	struct pm_mm *mm = window(), *c;
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);

	ASSERT_EQ(pm_mmap(mm, WIN + 2 * HP, 2 * HP, PM_PROT_READ,
			  PM_MAP_PRIVATE | PM_MAP_FIXED | PM_MAP_POPULATE, f, 0), (long)(WIN + 2 * HP));
	pool_is(6, 0, "a private populate: two anonymous pages");
	c = pmt_fork(mm);
	ASSERT_EQ(pm_mmap(mm, WIN + 3 * HP, 0xf000, PM_PROT_READ, PM_MAP_PRIVATE | PM_MAP_FIXED, f,
			  HP), (long)(WIN + 3 * HP));
	pool_is(6, 0, "MAP_FIXED over a page the child holds: one reserved, one closed");
	pm_mm_destroy(c);
	pool_is(7, 1, "the child's exit frees it: its reservation is counted again");
	pm_mm_destroy(mm);
	pool_is(8, 0, "all gone");
	pm_shmem_put(f);
	finish();
}

/* The same with an anonymous MAP_FIXED mapping over a written private anonymous one. */
static void anon_over_forked(void)
{
	struct pm_mm *mm = window(), *c;

	ASSERT_EQ(pm_mmap(mm, WIN + HP, 2 * HP, RW, ANON_HUGE | PM_MAP_FIXED, NULL, 0),
		  (long)(WIN + HP));
	ASSERT_EQ(pmt_poke(mm, WIN + HP + 0x11d008, 148), 1);
	c = pmt_fork(mm);
	ASSERT_EQ(pm_mmap(mm, WIN, 2 * HP, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED,
			  NULL, 0), (long)WIN);
	pool_is(7, 0, "anonymous MAP_FIXED over the child's shared page: Linux's count");
	pm_mm_destroy(c);
	pool_is(8, 1, "the child's exit: the page and its reservation back");
	pm_mm_destroy(mm);
	pool_is(8, 0, "all gone");
	finish();
}

/* A pinned private page unmapped: one lower until the unpin. */
static void munmap_pinned(void)
{
	struct pm_mm *mm = window();
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	struct pm_page *pg;

	ASSERT_EQ(pm_mmap(mm, WIN + 2 * HP, 2 * HP, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, 0),
		  (long)(WIN + 2 * HP));
	ASSERT_EQ(pin(mm, WIN + 2 * HP, &pg), 1);
	pool_is(7, 1, "a pinned page of two");
	ASSERT_EQ(pm_munmap(mm, WIN + 2 * HP, HP), 0);
	pool_is(7, 0, "unmapped while pinned: one lower (Linux)");
	pm_unpin_user_pages(&pg, 1);
	pool_is(8, 1, "the unpin frees it and counts its reservation again");
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	finish();
}

/* A pinned private page replaced by a shared populated mapping of the same object page: the
 * count reads below zero while the pin lasts, as Linux's does. */
static void shared_over_pinned(void)
{
	struct pm_mm *mm = window();
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	struct pm_page *pg;

	ASSERT_EQ(pm_mmap(mm, WIN + 3 * HP, 0x8000, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, HP),
		  (long)(WIN + 3 * HP));
	ASSERT_EQ(pin(mm, WIN + 3 * HP + 0x142000, &pg), 1);
	ASSERT_EQ(pm_mmap(mm, WIN + 3 * HP, HP, RW, PM_MAP_SHARED | PM_MAP_FIXED | PM_MAP_POPULATE,
			  f, HP), (long)(WIN + 3 * HP));
	pool_is(6, -1, "shared populate over the pinned page: below zero (Linux)");
	pm_unpin_user_pages(&pg, 1);
	pool_is(7, 0, "the unpin brings it back");
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	finish();
}

/* MADV_DONTNEED of a pinned page: the map has its reservation at once, the count at the unpin. */
static void dontneed_pinned(void)
{
	struct pm_mm *mm = window();
	struct pm_page *pg;

	ASSERT_EQ(pm_mmap(mm, WIN, HP, RW, ANON_HUGE | PM_MAP_FIXED, NULL, 0), (long)WIN);
	ASSERT_EQ(pin(mm, WIN, &pg), 1);
	pool_is(7, 0, "a pinned page");
	ASSERT_EQ(pm_madvise(mm, WIN, HP, PM_MADV_DONTNEED), 0);
	pool_is(7, 0, "DONTNEED while pinned: counted only when freed");
	pm_unpin_user_pages(&pg, 1);
	pool_is(8, 1, "the unpin frees it with its reservation");
	ASSERT_EQ(pmt_poke(mm, WIN, 'x'), 1);
	pool_is(7, 0, "the refault consumes it");
	pm_mm_destroy(mm);
	finish();
}

/* MAP_FIXED over a fork child's own copies with the pool short: the zap frees them before
 * Linux reserves, so the mmap succeeds (pinmm: -ENOMEM before). */
static void fixed_over_child_copy(void)
{
	struct pm_mm *mm = window(), *c1, *c2;
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	struct pm_page *pg[2];

	ASSERT_EQ(pm_mmap(mm, WIN + 2 * HP, 2 * HP, RW, ANON_HUGE | PM_MAP_FIXED, NULL, 0),
		  (long)(WIN + 2 * HP));
	ASSERT_EQ(pmt_peek(mm, WIN + 2 * HP + 0xf), 0);
	ASSERT_EQ(pm_mmap(mm, WIN + HP, 0x1000, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, HP),
		  (long)(WIN + HP));
	ASSERT_EQ(pin(mm, WIN + HP, &pg[0]), 1);
	c1 = pmt_fork(mm);
	ASSERT_EQ(pin(mm, WIN + 0x5ee000, &pg[1]), 1);
	ASSERT_EQ(pmt_poke(c1, WIN + 0x694023, 0x77), 1);
	c2 = pmt_fork(mm);
	pool_is(1, 1, "a short pool");
	is_int(pm_mmap(c1, WIN + HP, 0x1fd000, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, HP),
	       (long)(WIN + HP), "%s: MAP_FIXED over the child's copy: mapped (Linux)", dn);
	pool_is(2, 2, "the copy freed, the new mapping reserved");
	pm_mm_destroy(c2);
	pm_mm_destroy(c1);
	pm_unpin_user_pages(pg, 2);
	pm_mm_destroy(mm);
	pm_shmem_put(f);
	finish();
}

/* A pinned private page truncated away, then unpinned (oracle: unpin/pool). */
static void truncate_pinned(void)
{
	struct pm_mm *mm = window();
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, 2 * HP);
	struct pm_page *pg;

	ASSERT_EQ(pm_mmap(mm, WIN + HP, HP, RW, PM_MAP_PRIVATE | PM_MAP_FIXED, f, HP),
		  (long)(WIN + HP));
	ASSERT_EQ(pin(mm, WIN + HP, &pg), 1);
	pool_is(7, 0, "a pinned private page");
	ASSERT_EQ(pm_shmem_truncate(f, HP), 0);
	pool_is(7, 0, "truncated away while pinned: the map has it, the count not yet");
	pm_unpin_user_pages(&pg, 1);
	pool_is(8, 1, "the unpin frees it with its reservation");
	pm_mm_destroy(mm);
	pool_is(8, 0, "exit");
	pm_shmem_put(f);
	finish();
}

/* The owner exits first while a fork child keeps its page (oracle: exit/pool). */
static void owner_exits_first(void)
{
	struct pm_mm *mm = window(), *c;

	ASSERT_EQ(pm_mmap(mm, WIN, 2 * HP, RW, ANON_HUGE | PM_MAP_FIXED, NULL, 0), (long)WIN);
	ASSERT_EQ(pmt_poke(mm, WIN, 'o'), 1);
	c = pmt_fork(mm);
	pool_is(7, 1, "one page faulted, shared with a child");
	pm_mm_destroy(mm);
	pool_is(7, -1, "the owner's exit closes both reservations: below zero (Linux)");
	pm_mm_destroy(c);
	pool_is(8, 0, "the child's exit frees the page with its reservation");
	finish();
}

/* Below zero with the pool empty: an allocation without a reservation finds nothing there,
 * though free - reserved is positive (it must not take a page the free list lacks). */
static void below_zero_empty(void)
{
	struct pm_mm *mm = window(), *other = window();
	struct pm_page *pg;
	int i;

	ASSERT_EQ(pm_mmap(mm, WIN, HP, RW, ANON_HUGE | PM_MAP_FIXED, NULL, 0), (long)WIN);
	ASSERT_EQ(pin(mm, WIN, &pg), 1);
	ASSERT_EQ(pm_munmap(mm, WIN, HP), 0);
	pool_is(7, -1, "a pinned page unmapped: below zero");
	ASSERT_EQ(pm_mmap(mm, WIN, 4 * HP, RW, ANON_HUGE | PM_MAP_FIXED | PM_MAP_NORESERVE, NULL, 0),
		  (long)WIN);
	ASSERT_EQ(pm_mmap(other, WIN, 4 * HP, RW, ANON_HUGE | PM_MAP_FIXED | PM_MAP_NORESERVE, NULL,
			  0), (long)WIN);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(pmt_poke(mm, WIN + (unsigned long)i * HP, 'n'), 1);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(pmt_poke(other, WIN + (unsigned long)i * HP, 'o'), 1);
	pool_is(0, -1, "seven unreserved pages: the pool empty, the count below zero");
	ok(pmt_poke(other, WIN + 3 * HP, 'o') != 1,
	   "%s: one more without a reservation: SIGBUS, not a page the list lacks", dn);
	pm_mm_destroy(other);
	pm_unpin_user_pages(&pg, 1);
	pool_is(4, 0, "the unpin: the page and its reservation back");
	pm_mm_destroy(mm);
	finish();
}

int main(void)
{
	static void (*const cases[])(void) = {
		truncate_private, truncate_same_size, fixed_over_forked, anon_over_forked,
		munmap_pinned, shared_over_pinned, dontneed_pinned, fixed_over_child_copy,
		below_zero_empty, truncate_pinned, owner_exits_first,
	};

	plan_no_plan();
	for (unsigned i = 0; i < 2; i++) {
		dn = designs[i].name;
		for (unsigned j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
			start(designs[i].flags);
			cases[j]();
		}
	}
	return done_testing();
}
