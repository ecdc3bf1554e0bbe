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
 *
 * The long-term pin sessions (PIN_LONGTERM_TEST_START/STOP/READ, which Linux's gup_longterm.c
 * and cow.c selftests use) are pm_gup_test_longterm(), at the end of this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

	if (cmd < PM_GUP_FAST_BENCHMARK || cmd > PM_DUMP_USER_PAGES_TEST || !pm_mm_machine(mm) || !gup)
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

/*
 * ---- long-term pin sessions: Linux's pin_longterm_test_{start,stop,read} ----
 *
 * START pins [addr, addr + size) FOLL_LONGTERM (+FOLL_WRITE), fast or slow, and keeps the
 * pages; READ copies them, in order, to an address of the same mm as copy_to_user() would
 * (pm_access); STOP unpins. Linux keeps one session per open gup_test file, ended by the
 * file's release; pinmm keeps one per mm, ended by STOP or by pm_mm_destroy().
 *
 * Where a session lives. This layer calls only down and sees only the public API, so the
 * sessions are kept here, in a list keyed by mm (few live at once: a linear search), and
 * pm_mm_destroy() reaches them through a teardown notifier (pm_mm_notifier_register(),
 * Linux's mmu_notifier ->release): the mm layer calls a function pointer it was handed, not a
 * symbol of a layer above. The notifier is embedded in the session, registered by START and
 * unregistered by STOP; pm_mm_fork() starts the child without notifiers, so a session is
 * never inherited.
 *
 * Locking. One mutex, lt_lock, serialises every command of every mm, as Linux's
 * pin_longterm_test_mutex does, and is held across the pinning and the copying: it sits above
 * mmap_lock (docs/architecture.md). The release notifier takes it too; pm_mm_destroy() calls
 * it holding no lock. Commands on different mms thus wait for each other, which a test
 * interface can afford. A process fork() takes lt_lock around itself (pthread_atfork,
 * registered at the first command, after the library's RCU handlers, so that a command in
 * flight finishes while RCU still runs): the child never inherits it held by a thread it does
 * not have.
 *
 * Differences from Linux, forced by user space:
 *  - the slow path does not hold mmap_lock across the whole START: each pm_pin_user_pages()
 *    call takes it itself;
 *  - Linux allocates size / PAGE_SIZE pointers up front (kvcalloc); here the array grows with
 *    what the calls pin (at most GUP_TEST_CALL_MAX pages a call), so a huge size over a small
 *    mapping fails with -EFAULT at the first hole, not for want of memory;
 *  - a NULL @mm is -EINVAL; a NULL @arg where one is read is -EFAULT (copy_from_user);
 *  - a call that pinned nothing without an error would make Linux's loop spin; here it ends
 *    START with -EFAULT.
 */
#define LT_FLAGS (PM_PIN_LONGTERM_TEST_FLAG_USE_WRITE | PM_PIN_LONGTERM_TEST_FLAG_USE_FAST)

struct lt_session {
	struct pm_mm_notifier mn; /* ->release: the mm is being destroyed */
	struct pm_mm *mm;
	struct page_vec pages;	  /* pinned, in address order */
	struct lt_session *next;  /* on lt_sessions */
};

static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lt_session *lt_sessions; /* under lt_lock */
static pthread_once_t lt_atfork_once = PTHREAD_ONCE_INIT;

static void lt_atfork_prepare(void)
{
	pthread_mutex_lock(&lt_lock);
}

static void lt_atfork_release(void)
{
	pthread_mutex_unlock(&lt_lock);
}

static void lt_atfork_init(void)
{
	if (pthread_atfork(lt_atfork_prepare, lt_atfork_release, lt_atfork_release))
		abort();
}

/* Debug builds: is lt_lock held? (A plain mutex names no owner: a trylock must fail.) */
static void lt_assert_locked(void)
{
#if PM_DEBUG
	if (pthread_mutex_trylock(&lt_lock) == 0) {
		fprintf(stderr, "pinmm: BUG: gup_test: lt_lock is not held\n");
		abort();
	}
#endif
}

/* Where @mm's session is linked, or NULL. Context: lt_lock held. */
static struct lt_session **lt_find(struct pm_mm *mm)
{
	struct lt_session **pp;

	lt_assert_locked();
	for (pp = &lt_sessions; *pp; pp = &(*pp)->next)
		if ((*pp)->mm == mm)
			return pp;
	return NULL;
}

/* Unpin and free a session that is on no list. */
static void lt_free(struct lt_session *s)
{
	if (s->pages.n)
		pm_unpin_user_pages(s->pages.v, s->pages.n);
	free(s->pages.v);
	free(s);
}

/* pm_mm_destroy() of a session's mm (gup_test_release()); @mn is off the mm's list already. */
static void lt_release(struct pm_mm_notifier *mn, struct pm_mm *mm)
{
	struct lt_session *s = (struct lt_session *)((char *)mn - offsetof(struct lt_session, mn));
	struct lt_session **pp;

	pthread_mutex_lock(&lt_lock);
	pp = lt_find(mm);
	if (pp && *pp == s)
		*pp = s->next;
	pthread_mutex_unlock(&lt_lock);
	lt_free(s);
}

/* pin_longterm_test_stop(). Context: lt_lock held. */
static void lt_stop(struct pm_mm *mm)
{
	struct lt_session **pp, *s;

	lt_assert_locked();
	pp = lt_find(mm);
	if (!pp)
		return;
	s = *pp;
	*pp = s->next;
	pm_mm_notifier_unregister(&s->mn, mm);
	lt_free(s);
}

/* pin_longterm_test_start(). Context: lt_lock held. */
static int lt_start(struct pm_mm *mm, const struct pm_pin_longterm_test *arg)
{
	unsigned gup_flags = PM_FOLL_LONGTERM;
	struct pm_pin_longterm_test a;
	unsigned long nr_pages;
	struct lt_session *s;
	bool fast;
	int err;

	lt_assert_locked();
	if (lt_find(mm))
		return -EINVAL;
	if (!arg)
		return -EFAULT;
	a = *arg;
	if (a.flags & ~LT_FLAGS)
		return -EINVAL;
	if ((a.addr | a.size) & (PM_PAGE_SIZE - 1))
		return -EINVAL;
	if (a.size > LONG_MAX || a.addr > ULONG_MAX)
		return -EINVAL;
	nr_pages = a.size / PM_PAGE_SIZE;
	if (!nr_pages)
		return -EINVAL;
	if (a.flags & PM_PIN_LONGTERM_TEST_FLAG_USE_WRITE)
		gup_flags |= PM_FOLL_WRITE;
	fast = a.flags & PM_PIN_LONGTERM_TEST_FLAG_USE_FAST;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->mm = mm;
	s->mn.release = lt_release;
	while (s->pages.n < nr_pages) {
		unsigned long left = nr_pages - s->pages.n;
		unsigned long want = left < GUP_TEST_CALL_MAX ? left : GUP_TEST_CALL_MAX;
		unsigned long addr = (unsigned long)a.addr + s->pages.n * PM_PAGE_SIZE;
		long got;

		err = page_vec_reserve(&s->pages, want);
		if (err)
			goto fail;
		if (fast)
			got = pm_pin_user_pages_fast(mm, addr, want, gup_flags,
						     s->pages.v + s->pages.n);
		else
			got = pm_pin_user_pages(mm, addr, want, gup_flags, s->pages.v + s->pages.n);
		if (got <= 0) {
			err = got ? (int)got : -EFAULT;
			goto fail;
		}
		s->pages.n += (unsigned long)got;
	}
	err = pm_mm_notifier_register(&s->mn, mm);
	if (err)
		goto fail;
	s->next = lt_sessions;
	lt_sessions = s;
	return 0;
fail:
	lt_free(s);
	return err;
}

/* pin_longterm_test_read(). Context: lt_lock held. */
static int lt_read(struct pm_mm *mm, const uint64_t *arg)
{
	unsigned char bounce[PM_PAGE_SIZE];
	struct lt_session **pp;
	unsigned long uaddr;

	lt_assert_locked();
	pp = lt_find(mm);
	if (!pp)
		return -EINVAL;
	if (!arg)
		return -EFAULT;
	if (*arg > ULONG_MAX)
		return -EFAULT;
	uaddr = (unsigned long)*arg;
	for (unsigned long i = 0; i < (*pp)->pages.n; i++, uaddr += PM_PAGE_SIZE) {
		long r;

		/* Through a copy: the destination may be the very page that is read. */
		memcpy(bounce, pm_page_address((*pp)->pages.v[i]), PM_PAGE_SIZE);
		r = pm_access(mm, uaddr, bounce, PM_PAGE_SIZE, 1);
		if (r != PM_PAGE_SIZE)
			return r == -ENOMEM ? -ENOMEM : -EFAULT;
	}
	return 0;
}

int pm_gup_test_longterm(struct pm_mm *mm, unsigned cmd, void *arg)
{
	int ret = -EINVAL;

	if (!pm_mm_machine(mm)) /* NULL, or dead */
		return -EINVAL;
	pthread_once(&lt_atfork_once, lt_atfork_init);
	pthread_mutex_lock(&lt_lock);
	switch (cmd) {
	case PM_PIN_LONGTERM_TEST_START:
		ret = lt_start(mm, arg);
		break;
	case PM_PIN_LONGTERM_TEST_STOP:
		lt_stop(mm);
		ret = 0;
		break;
	case PM_PIN_LONGTERM_TEST_READ:
		ret = lt_read(mm, arg);
		break;
	}
	pthread_mutex_unlock(&lt_lock);
	return ret;
}
