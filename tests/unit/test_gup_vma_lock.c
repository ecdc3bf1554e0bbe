// SPDX-License-Identifier: MIT
/*
 * test_gup_vma_lock.c - the slow GUP path of the range design walks the VMA at its start under
 * that VMA's own read lock (gup/gup.c, gup_vma_locked) and goes on under the range's lock only
 * for what lies beyond it. The answer must be the one the mm's lock gives, in both designs:
 *
 *   span	a pin across two VMAs, across a VMA and a hole, from a hole; every page the
 *		right one (its tag read through the frame), faults on the way included
 *   flags	the first VMA's flags are checked (-EFAULT for a write pin of a read-only
 *		VMA), and so are the next VMA's (a short count)
 *   knob	PM_KNOB_NO_PER_VMA_LOCK gives the same answers
 *   race	slow pins of one VMA while another thread splits and merges it with mprotect
 *		(the VMA lock is not to be had then, or is had and the VMA stays as it was):
 *		every pin returns every page, each the right one
 *
 * "-t NAME" runs one group.
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
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define X 0x10000000000UL	/* 1 TiB: inside one range of the range design */

static unsigned cur;
#define DN (pmt_designs[cur].name)

static struct pm_machine *machine(unsigned knobs)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .knobs = knobs,
				 .flags = pmt_designs[cur].flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

static void map(struct pm_mm *mm, unsigned long addr, unsigned long npages, unsigned prot)
{
	ASSERT_EQ(pm_mmap(mm, addr, npages * PG, prot, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS |
			  PM_MAP_FIXED, NULL, 0), (long)addr);
}

/* Page i of [X, X + n pages) holds 'a' + i in its first byte (written where writable). */
static void tag(struct pm_mm *mm, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		ASSERT_EQ(pmt_poke(mm, X + i * PG, (char)('a' + i)), 1);
}

static bool pages_are(struct pm_page **pages, long n, unsigned long first)
{
	for (long i = 0; i < n; i++)
		if (*(char *)pm_page_address(pages[i]) != (char)('a' + first + (unsigned long)i))
			return false;
	return true;
}

/* The checks of "span" and "knob": A = 2 pages RW, B = 3 pages RW|EXEC (not merged), a hole,
 * C = 1 page read-only. */
static void spans(unsigned knobs, const char *what)
{
	struct pm_machine *m = machine(knobs);
	size_t free0 = pmt_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_page *pages[8];
	long n;

	ASSERT_TRUE(mm != NULL);
	map(mm, X, 2, RW);
	map(mm, X + 2 * PG, 3, RW | PM_PROT_EXEC);
	map(mm, X + 6 * PG, 1, PM_PROT_READ);
	tag(mm, 5);

	n = pm_pin_user_pages(mm, X, 5, PM_FOLL_WRITE, pages);
	is_int(n, 5, "%s %s: a write pin across two VMAs takes every page", DN, what);
	ok(n == 5 && pages_are(pages, n, 0), "%s %s: ... each the right one", DN, what);
	if (n > 0)
		pm_unpin_user_pages(pages, (unsigned long)n);

	n = pm_pin_user_pages(mm, X + PG, 6, PM_FOLL_WRITE, pages);
	is_int(n, 4, "%s %s: a pin that runs into a hole stops there", DN, what);
	ok(n == 4 && pages_are(pages, n, 1), "%s %s: ... each the right one", DN, what);
	if (n > 0)
		pm_unpin_user_pages(pages, (unsigned long)n);

	n = pm_pin_user_pages(mm, X + 5 * PG, 1, PM_FOLL_WRITE, pages);
	is_int(n, -EFAULT, "%s %s: a pin from a hole is -EFAULT", DN, what);

	n = pm_pin_user_pages(mm, X + 6 * PG, 1, PM_FOLL_WRITE, pages);
	is_int(n, -EFAULT, "%s %s: a write pin of a read-only VMA is -EFAULT", DN, what);
	n = pm_pin_user_pages(mm, X + 6 * PG, 1, 0, pages);
	is_int(n, 1, "%s %s: a read pin of it faults its page in", DN, what);
	if (n > 0)
		pm_unpin_user_pages(pages, (unsigned long)n);

	/* a fresh VMA: every page faulted in by the walk, the last one in the next VMA */
	map(mm, X + 16 * PG, 3, RW);
	map(mm, X + 19 * PG, 1, PM_PROT_READ);
	n = pm_get_user_pages(mm, X + 16 * PG, 4, PM_FOLL_WRITE, pages);
	is_int(n, 3, "%s %s: a write get faults in its VMA, then stops at a read-only one", DN,
		what);
	for (long i = 0; i < n; i++)
		pm_put_page(pages[i]);
	ok(pmt_reads_zero(mm, X + 16 * PG, 4), "%s %s: ... the pages faulted in read zero", DN,
	   what);

	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

static void test_span(void)
{
	spans(0, "span");
}

static void test_knob(void)
{
	spans(PM_KNOB_NO_PER_VMA_LOCK, "knob");
}

struct racer {
	struct pm_mm *mm;
	_Atomic bool stop;
	long changes;
};

/* Splits [X, X + 8 pages) at page 4 and merges it again, over and over. */
static void *splitter(void *arg)
{
	struct racer *r = arg;

	while (!atomic_load(&r->stop)) {
		if (pm_mprotect(r->mm, X + 4 * PG, PG, PM_PROT_READ | PM_PROT_WRITE | PM_PROT_EXEC))
			break;
		if (pm_mprotect(r->mm, X + 4 * PG, PG, RW))
			break;
		r->changes++;
	}
	return NULL;
}

static void test_race(void)
{
	struct pm_machine *m = machine(0);
	size_t free0 = pmt_free_pages(m);
	struct racer r = { .mm = pm_mm_create(m) };
	struct pm_page *pages[8];
	long bad = 0, pins = 0;
	pthread_t t;

	ASSERT_TRUE(r.mm != NULL);
	map(r.mm, X, 8, RW);
	tag(r.mm, 8);
	ASSERT_EQ(pthread_create(&t, NULL, splitter, &r), 0);
	for (int i = 0; i < 20000 && !bad; i++) {
		long n = pm_pin_user_pages(r.mm, X + (unsigned long)(i % 4) * PG, 4,
					   PM_FOLL_WRITE, pages);

		if (n != 4 || !pages_are(pages, n, (unsigned long)(i % 4)))
			bad++;
		if (n > 0)
			pm_unpin_user_pages(pages, (unsigned long)n);
		pins++;
	}
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	is_int(bad, 0, "%s race: %ld slow pins against %ld splits and merges: every pin whole "
		"and right", DN, pins, r.changes);
	pm_mm_destroy(r.mm);
	pmt_end(m, free0, &pmt_end_returned, "race");
}

static const struct pmt_group groups[] = {
	{ "span", test_span },
	{ "knob", test_knob },
	{ "race", test_race },
};

int main(int argc, char **argv)
{
	return pmt_run_groups_designs(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 120,
				      &cur);
}
