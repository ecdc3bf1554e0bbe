// SPDX-License-Identifier: MIT
/*
 * gup_test.c - Linux's mm/gup_test.c as a library call: pm_gup_test(mm, cmd, &gup) does what
 * ioctl(fd, cmd, &gup) on /sys/kernel/debug/gup_test does to the calling process, so that the
 * kernel selftest (tools/gup-test.c, built as pinmm-gup-test) and its numbers carry over.
 *
 * One command walks [addr, addr + size) in calls of nr_pages_per_call pages, timing the whole
 * walk (get_delta_usec), then times giving everything back (put_delta_usec). The walk stops at
 * the first call that fails or comes back short, and size is rewritten to the bytes covered
 * ("truncated"); a failed call is not an error of the command, as in Linux.
 *
 * Differences from the ioctl, all forced by running in user space on a pm_mm:
 *  - the slow commands do not hold mmap_lock across the walk: each pm_get/pin_user_pages call
 *    takes it itself, so a concurrent munmap may land between two calls;
 *  - gup_flags bits that pinmm's GUP does not define, and FOLL_LONGTERM with a get command,
 *    are -EINVAL up front (Linux's is_valid_gup_args() would fail every call and the ioctl
 *    would report size 0 instead);
 *  - the DMA-pinned check and the page dumps print to stderr instead of the kernel log;
 *  - memory: Linux allocates size / PAGE_SIZE page pointers up front (kvcalloc), so a huge size
 *    fails with -ENOMEM or worse. Here the array grows with the pages the calls return, and a
 *    call of more than GUP_TEST_CALL_MAX pages is made as several calls of at most that many:
 *    memory follows what the mapping covers, never the size asked for. A growth that fails
 *    ends the walk like a failed call.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pinmm/pinmm.h>

#define GUP_TEST_FOLL_FLAGS (PM_FOLL_WRITE | PM_FOLL_FORCE | PM_FOLL_NOFAULT | PM_FOLL_LONGTERM)
#define GUP_TEST_CALL_MAX (1UL << 16)	/* pages asked of one library call at most */
#define GUP_TEST_PREALLOC (1UL << 18)	/* pointers allocated before the walk (a 1 GiB walk) */

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Does @cmd take FOLL_PIN references (released with the unpin family)? */
static bool cmd_pins(unsigned cmd, const struct pm_gup_test *gup)
{
	switch (cmd) {
	case PM_PIN_FAST_BENCHMARK:
	case PM_PIN_BASIC_TEST:
	case PM_PIN_LONGTERM_BENCHMARK:
		return true;
	case PM_DUMP_USER_PAGES_TEST:
		return gup->test_flags & PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN;
	default:
		return false;
	}
}

static long gup_call(struct pm_mm *mm, unsigned cmd, const struct pm_gup_test *gup,
		     unsigned long addr, unsigned long nr, struct pm_page **pages)
{
	unsigned flags = gup->gup_flags;

	switch (cmd) {
	case PM_GUP_FAST_BENCHMARK:
		return pm_get_user_pages_fast(mm, addr, nr, flags, pages);
	case PM_PIN_FAST_BENCHMARK:
		return pm_pin_user_pages_fast(mm, addr, nr, flags, pages);
	case PM_GUP_BASIC_TEST:
		return pm_get_user_pages(mm, addr, nr, flags, pages);
	case PM_PIN_BASIC_TEST:
		return pm_pin_user_pages(mm, addr, nr, flags, pages);
	case PM_PIN_LONGTERM_BENCHMARK:
		return pm_pin_user_pages(mm, addr, nr, flags | PM_FOLL_LONGTERM, pages);
	case PM_DUMP_USER_PAGES_TEST:
		if (gup->test_flags & PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN)
			return pm_pin_user_pages(mm, addr, nr, flags, pages);
		return pm_get_user_pages(mm, addr, nr, flags, pages);
	}
	return -EINVAL;
}

/* The pages taken so far: grows with what the calls return. */
struct page_vec {
	struct pm_page **v;
	unsigned long n, cap;
};

static int page_vec_reserve(struct page_vec *pv, unsigned long more)
{
	unsigned long cap = pv->cap * 2 > pv->n + more ? pv->cap * 2 : pv->n + more;
	struct pm_page **v;

	if (pv->n + more <= pv->cap)
		return 0;
	v = realloc(pv->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	pv->v = v;
	pv->cap = cap;
	return 0;
}

/*
 * One call of the walk: @nr pages at @addr, appended to @pv, asked in pieces of at most
 * GUP_TEST_CALL_MAX pages. Return: pages taken (fewer than @nr if a piece came back short),
 * or -errno when none were.
 */
static long walk_call(struct pm_mm *mm, unsigned cmd, const struct pm_gup_test *gup,
		      unsigned long addr, unsigned long nr, struct page_vec *pv)
{
	unsigned long done = 0;

	while (done < nr) {
		unsigned long want = nr - done < GUP_TEST_CALL_MAX ? nr - done : GUP_TEST_CALL_MAX;
		long got = page_vec_reserve(pv, want);

		if (!got)
			got = gup_call(mm, cmd, gup, addr + done * PM_PAGE_SIZE, want,
				       pv->v + pv->n);
		if (got <= 0)
			return done ? (long)done : got;
		pv->n += (unsigned long)got;
		done += (unsigned long)got;
		if ((unsigned long)got < want)
			break;
	}
	return (long)done;
}

/* Untimed: every page a pin command returned must look DMA-pinned (the zero page never is). */
static void verify_dma_pinned(struct pm_page **pages, unsigned long nr)
{
	for (unsigned long i = 0; i < nr; i++) {
		if (pm_page_is_zero(pages[i]))
			continue;
		if (!pm_folio_maybe_dma_pinned(pm_page_folio(pages[i]))) {
			fprintf(stderr, "pinmm: gup_test: pages[%lu] is NOT dma-pinned\n", i);
			break;
		}
	}
}

static void dump_page(struct pm_page *page, unsigned index, uint64_t addr)
{
	struct pm_folio *folio = pm_page_folio(page);

	fprintf(stderr, "gup_test: ---- page #%u, starting from user virt addr: 0x%" PRIx64 "\n",
		index, addr);
	fprintf(stderr,
		"gup_test: page pfn:%#lx refcount:%d mapcount:%d pincount:%d order:%u%s%s%s\n",
		pm_page_to_pfn(page), pm_folio_ref_count(folio), pm_folio_mapcount(folio),
		pm_folio_pincount(folio), pm_folio_order(folio),
		pm_folio_test_anon(folio) ? " anon" : "",
		pm_folio_test_dirty(folio) ? " dirty" : "", pm_page_is_zero(page) ? " zero" : "");
}

/* which_pages[] is 1-based (0 = unused); indices past what was taken are zeroed, as Linux. */
static void dump_pages_test(struct pm_gup_test *gup, struct pm_page **pages, unsigned long nr)
{
	for (unsigned i = 0; i < PM_GUP_TEST_MAX_PAGES_TO_DUMP; i++) {
		if (gup->which_pages[i] > nr) {
			fprintf(stderr,
				"gup_test: ZEROING due to out of range: .which_pages[%u]: %u\n", i,
				gup->which_pages[i]);
			gup->which_pages[i] = 0;
		}
	}
	for (unsigned i = 0; i < PM_GUP_TEST_MAX_PAGES_TO_DUMP; i++) {
		unsigned index = gup->which_pages[i];

		if (index)
			dump_page(pages[index - 1], index - 1, gup->addr);
	}
}

int pm_gup_test(struct pm_mm *mm, unsigned cmd, struct pm_gup_test *gup)
{
	unsigned long start, end, addr, next, nr_pages, i;
	struct page_vec pv = { 0 };
	struct pm_page **pages;
	uint64_t t0, t1;
	long nr;

	if (cmd < PM_GUP_FAST_BENCHMARK || cmd > PM_DUMP_USER_PAGES_TEST || !mm || !gup)
		return -EINVAL;
	if (gup->addr > ULONG_MAX || gup->size > ULONG_MAX)
		return -EINVAL;
	start = gup->addr;
	if (__builtin_add_overflow(start, (unsigned long)gup->size, &end))
		return -EINVAL;
	if (gup->gup_flags & ~GUP_TEST_FOLL_FLAGS)
		return -EINVAL;
	if ((gup->gup_flags & PM_FOLL_LONGTERM) && !cmd_pins(cmd, gup))
		return -EINVAL;
	if (gup->test_flags & ~PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN)
		return -EINVAL;

	nr_pages = gup->size / PM_PAGE_SIZE;
	if (page_vec_reserve(&pv, nr_pages < GUP_TEST_PREALLOC ? nr_pages + 1 : GUP_TEST_PREALLOC))
		return -ENOMEM;

	/*
	 * Each call asks for nr_pages_per_call pages, the last one for what is left; walk_call()
	 * makes room in pages[] for each piece before asking for it.
	 */
	nr = gup->nr_pages_per_call;
	t0 = now_usec();
	for (addr = start; addr < end; addr = next) {
		if (nr != (long)gup->nr_pages_per_call)
			break; /* the previous call came back short */
		next = addr + nr * PM_PAGE_SIZE;
		if (next > end || next < addr) {
			next = end;
			nr = (next - addr) / PM_PAGE_SIZE;
		}
		nr = walk_call(mm, cmd, gup, addr, (unsigned long)nr, &pv);
		if (nr <= 0)
			break;
	}
	t1 = now_usec();
	gup->get_delta_usec = t1 - t0;
	gup->size = addr - start;
	pages = pv.v;
	nr_pages = pv.n;

	if (cmd_pins(cmd, gup))
		verify_dma_pinned(pages, nr_pages);
	if (cmd == PM_DUMP_USER_PAGES_TEST)
		dump_pages_test(gup, pages, nr_pages);

	t0 = now_usec();
	if (cmd_pins(cmd, gup)) {
		pm_unpin_user_pages(pages, nr_pages);
	} else {
		for (i = 0; i < nr_pages; i++)
			pm_put_page(pages[i]);
	}
	t1 = now_usec();
	gup->put_delta_usec = t1 - t0;

	free(pages);
	return 0;
}
