// SPDX-License-Identifier: MIT
/*
 * test_hostile.c - hostile and careless input (issue 13): every call answers with a clear
 * error and nothing is corrupted.
 *
 *   cross_machine	a shmem object of one machine mapped into an address space of another
 *			is -EINVAL; pages of two machines released in one unpin call; a page
 *			range that runs past a machine's last frame
 *   gup_test_size	pm_gup_test() with a size far beyond the mapping: bounded memory, the
 *			size truncated to what the mapping covered
 *   strerror		pm_strerror() of any long
 *   emfile		the machine after the last slot: NULL with errno EMFILE, a text for it
 *   double_unpin	a double unpin in a debug build dies with the values in its message
 *   null_handles	a NULL machine, address space or shmem handle in every call
 *   dead_mm		the machine destroyed under a live address space and shmem object:
 *			both emptied, every later call on them -EINVAL, nothing leaked
 *
 * The release-build answer to a double unpin is in test_unpin_release.c, fork() of a process
 * that uses pinmm in test_atfork.c. "-t NAME" runs one group only.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ARRAY_SIZE_T(a) (sizeof(a) / sizeof((a)[0]))

/* ---- 1. objects of two machines ---- */

static void test_cross_machine(void)
{
	struct pm_machine *a = pmt_machine(8, 0), *b = pmt_machine(8, 0);
	size_t free_a = pm_machine_free_pages(a), free_b = pm_machine_free_pages(b);
	struct pm_mm *mm_a = pm_mm_create(a), *mm_b = pm_mm_create(b);
	struct pm_shmem *f_a = pm_shmem_create(a, 4 * PAGE, 0);
	struct pm_page *pages[2];
	struct pm_stats sa, sb;
	unsigned long addr_a, addr_b;
	long r;

	ASSERT_TRUE(mm_a && mm_b && f_a);
	is_int(pm_mmap(mm_b, 0, PAGE, RW, PM_MAP_SHARED, f_a, 0), -EINVAL,
	       "pm_mmap(mm of B, MAP_SHARED, shmem of A) -> -EINVAL");
	is_int(pm_mmap(mm_b, 0, PAGE, RW, PM_MAP_PRIVATE, f_a, 0), -EINVAL,
	       "pm_mmap(mm of B, MAP_PRIVATE, shmem of A) -> -EINVAL");
	is_int(pm_mmap(mm_b, 0x40000000, PAGE, RW, PM_MAP_SHARED | PM_MAP_FIXED, f_a, 0), -EINVAL,
	       "pm_mmap(mm of B, MAP_FIXED, shmem of A) -> -EINVAL");
	/* Whatever got through would fault A's page into B's tables: try it. */
	r = pm_access(mm_b, 0x40000000, (char[8]){ 1 }, 8, 1);
	is_int(r, -EFAULT, "nothing was mapped in B");
	r = pm_mmap(mm_a, 0, PAGE, RW, PM_MAP_SHARED, f_a, 0);
	ok(r > 0, "the same object maps into its own machine's address space");
	if (r > 0)
		is_int(pm_access(mm_a, (unsigned long)r, (char[8]){ 1 }, 8, 1), 8,
		       "and can be written there");
	else
		skip(1, "no mapping");
	is_int(pm_machine_check(a), 0, "machine A passes pm_machine_check");
	is_int(pm_machine_check(b), 0, "machine B passes pm_machine_check");

	/* Pins of two machines released by one call: each machine counts its own release. */
	addr_a = pmt_map_anon(mm_a, 4 * PAGE, RW, false);
	addr_b = pmt_map_anon(mm_b, 4 * PAGE, RW, false);
	ASSERT_EQ(pm_pin_user_pages(mm_a, addr_a, 1, PM_FOLL_WRITE, &pages[0]), 1);
	ASSERT_EQ(pm_pin_user_pages(mm_b, addr_b, 1, PM_FOLL_WRITE, &pages[1]), 1);
	sa = pmt_stats(a);
	sb = pmt_stats(b);
	pm_unpin_user_pages(pages, 2);
	is_int(pmt_stats(a).unpin_folio_updates - sa.unpin_folio_updates, 1,
	       "unpin of pages of two machines: A counts its one folio update");
	is_int(pmt_stats(b).unpin_folio_updates - sb.unpin_folio_updates, 1,
	       "unpin of pages of two machines: B counts its one folio update");
	ok(pmt_pins_balanced(a) && pmt_pins_balanced(b), "both machines' pins are balanced");

	/* A physically contiguous range that runs past A's last frame (into B's, or nothing). */
	ASSERT_EQ(pm_pin_user_pages(mm_a, addr_a, 1, PM_FOLL_WRITE, &pages[0]), 1);
	r = pm_folio_ref_count(pm_page_folio(pages[0]));
	pm_unpin_user_page_range_dirty_lock(pages[0], pm_machine_total_pages(a) + 1, false);
	is_int(pm_folio_ref_count(pm_page_folio(pages[0])), r,
	       "a page range past the machine's last frame releases nothing");
	pm_unpin_user_page_range_dirty_lock(pages[0], 1, false);
	ok(pmt_pins_balanced(a), "the pin is released by a range that fits");

	pm_mm_destroy(mm_a);
	pm_mm_destroy(mm_b);
	pm_shmem_put(f_a);
	pmt_end(a, free_a, &pmt_end_returned, "machine A");
	pmt_end(b, free_b, &pmt_end_returned, "machine B");
}

/* ---- 4. pm_gup_test() with a huge size ---- */

static void test_gup_test_size(void)
{
	static const uint64_t sizes[] = { 1ULL << 40, 1ULL << 46, 1ULL << 60,
					  (uint64_t)PM_TASK_SIZE };
	static const unsigned cmds[] = { PM_PIN_FAST_BENCHMARK, PM_GUP_BASIC_TEST };
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long addr = 0x10000000;

	ASSERT_TRUE(mm);
	ASSERT_EQ(pmt_map_fixed(mm, addr, 16 * PAGE, RW), addr);
	pmt_touch(mm, addr, 16 * PAGE);
	for (unsigned i = 0; i < ARRAY_SIZE_T(sizes); i++) {
		for (unsigned c = 0; c < ARRAY_SIZE_T(cmds); c++) {
			/* 16 pages a call: the second call finds the hole and ends the walk. */
			struct pm_gup_test g = { .addr = addr, .size = sizes[i],
						 .nr_pages_per_call = 16 };
			int r = pm_gup_test(mm, cmds[c], &g);

			ok(r == 0 && g.size == 16 * PAGE,
			   "cmd %u, size %#llx, 16 pages a call -> 0, size 16 pages (got %d, %#llx)",
			   cmds[c], (unsigned long long)sizes[i], r, (unsigned long long)g.size);
			/* One call for everything: it comes back short, and Linux counts it whole. */
			g = (struct pm_gup_test){ .addr = addr, .size = sizes[i],
						  .nr_pages_per_call = UINT32_MAX };
			r = pm_gup_test(mm, cmds[c], &g);
			ok(r == 0 && g.size <= sizes[i],
			   "cmd %u, size %#llx, %u pages a call -> 0 (got %d, size %#llx)", cmds[c],
			   (unsigned long long)sizes[i], UINT32_MAX, r, (unsigned long long)g.size);
		}
	}
	/* A range that starts in a hole covers nothing, whatever its size. */
	struct pm_gup_test g = { .addr = addr + 64 * PAGE, .size = 1ULL << 46,
				 .nr_pages_per_call = 512 };

	is_int(pm_gup_test(mm, PM_GUP_FAST_BENCHMARK, &g), 0, "a hole and a huge size -> 0");
	is_int(g.size, 0, "... covering nothing");
	ok(pmt_pins_balanced(m), "every pin was released");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "gup_test");
}

/* ---- 5. pm_strerror() of any long ---- */

static void test_strerror(void)
{
	static const long errs[] = { LONG_MIN, LONG_MIN + 1, -LONG_MAX, LONG_MAX, INT_MIN,
				     (long)INT_MIN - 1, -(long)INT_MAX, (long)INT_MAX + 1,
				     -1000000, -4096, -1, 0, 1, EINVAL };

	for (unsigned i = 0; i < ARRAY_SIZE_T(errs); i++) {
		const char *s = pm_strerror(errs[i]);

		ok(s && *s, "pm_strerror(%ld) = \"%s\"", errs[i], s ? s : "(null)");
	}
	ok(!strcmp(pm_strerror(-EINVAL), "invalid argument"), "pm_strerror(-EINVAL) as before");
}

/* ---- 6. the last machine slot ---- */

static void test_emfile(void)
{
	struct pm_config c = { .mem_bytes = 2 * MiB };
	struct pm_machine **ms = calloc(8192, sizeof(*ms));
	unsigned n = 0;
	int err = 0;

	ASSERT_TRUE(ms);
	/* Each machine's zero page would otherwise cost a 2 MiB host THP: 8 GiB in all. */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	while (n < 8192) {
		errno = 0;
		ms[n] = pm_machine_create(&c);
		if (!ms[n]) {
			err = errno;
			break;
		}
		n++;
	}
	is_int(err, EMFILE, "machine creation fails with EMFILE once every slot is taken");
	ok(n >= 4000 && n <= PM_MACHINES_MAX, "after %u machines (PM_MACHINES_MAX live at once)", n);
	ok(strstr(pm_strerror(-EMFILE), "machines") != NULL,
	   "pm_strerror(-EMFILE) names the limit: \"%s\"", pm_strerror(-EMFILE));
	if (n) {
		pm_machine_destroy(ms[--n]);
		ms[n] = pm_machine_create(&c);
		ok(ms[n] != NULL, "one destroyed: the next creation succeeds again");
		if (ms[n])
			n++;
	}
	while (n)
		pm_machine_destroy(ms[--n]);
	free(ms);
	prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
}

/* ---- 7. a double unpin in a debug build ---- */

/* Run @fn in a child whose stderr comes back in @buf; returns its wait status. */
static int run_child(void (*fn)(void), char *buf, size_t len)
{
	int fds[2], status = 0;
	size_t got = 0;
	pid_t pid;

	ASSERT_EQ(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		alarm(60);
		fn();
		_exit(0);
	}
	close(fds[1]);
	while (got + 1 < len) {
		ssize_t r = read(fds[0], buf + got, len - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	close(fds[0]);
	waitpid(pid, &status, 0);
	return status;
}

static void double_unpin_thp(void)
{
	struct pm_machine *m = pmt_machine(8, 0);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, PM_PMD_SIZE, RW, true);
	struct pm_page *p;

	pmt_touch(mm, a, PM_PMD_SIZE);
	ASSERT_EQ(pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE, &p), 1);
	pm_unpin_user_page(p);
	pm_unpin_user_page(p);
}

static void double_unpin_small(void)
{
	struct pm_machine *m = pmt_machine(8, 0);
	struct pm_mm *mm = pm_mm_create(m);
	unsigned long a = pmt_map_anon(mm, 4 * PAGE, RW, false);
	struct pm_page *p;

	pmt_touch(mm, a, 4 * PAGE);
	ASSERT_EQ(pm_pin_user_pages(mm, a, 1, PM_FOLL_WRITE, &p), 1);
	pm_unpin_user_page(p);
	pm_unpin_user_page(p);
}

static void test_double_unpin(void)
{
	static const struct { const char *name; void (*fn)(void); } cases[] = {
		{ "THP", double_unpin_thp }, { "4 KiB page", double_unpin_small },
	};

	for (unsigned i = 0; i < ARRAY_SIZE_T(cases); i++) {
		char buf[8192];
		int st = run_child(cases[i].fn, buf, sizeof(buf));
		char *bug = strstr(buf, "pinmm: ");

		ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
		   "%s: a double unpin aborts a debug build (status %#x)", cases[i].name, st);
		ok(bug && strstr(buf, "double unpin") && strstr(buf, "pincount") &&
			   strstr(buf, "refcount") && !strstr(buf, "atomic_") && !strstr(buf, "__"),
		   "%s: the message names the counts, not macro text", cases[i].name);
		if (bug) {
			char *nl = strchr(bug, '\n');

			if (nl)
				*nl = 0;
			diag("%s", bug);
		}
	}
}

/* ---- 8. NULL handles ---- */

static void test_null_handles(void)
{
	struct pm_machine *m = pmt_machine(8, 0);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_page *pages[1] = { NULL };
	struct pm_gup_test g = { .addr = 0x10000, .size = PAGE, .nr_pages_per_call = 1 };
	struct pm_stats st;
	char buf[8] = { 0 };

	ASSERT_TRUE(mm);
	/* Constructors: NULL with errno EINVAL. */
	errno = 0;
	ok(!pm_mm_create(NULL) && errno == EINVAL, "pm_mm_create(NULL) -> NULL, EINVAL");
	errno = 0;
	ok(!pm_mm_fork(NULL) && errno == EINVAL, "pm_mm_fork(NULL) -> NULL, EINVAL");
	errno = 0;
	ok(!pm_shmem_create(NULL, PAGE, 0) && errno == EINVAL,
	   "pm_shmem_create(NULL, ...) -> NULL, EINVAL");
	errno = 0;
	ok(!pm_umem_get(NULL, 0x10000, PAGE, 0) && errno == EINVAL,
	   "pm_umem_get(NULL, ...) -> NULL, EINVAL");

	/* Machine calls. */
	is_int(pm_machine_free_pages(NULL), 0, "pm_machine_free_pages(NULL) -> 0");
	is_int(pm_machine_total_pages(NULL), 0, "pm_machine_total_pages(NULL) -> 0");
	is_int(pm_machine_knobs(NULL), 0, "pm_machine_knobs(NULL) -> 0");
	is_int(pm_machine_check(NULL), -EINVAL, "pm_machine_check(NULL) -> -EINVAL");
	memset(&st, 0xa5, sizeof(st));
	pm_machine_stats(NULL, &st);
	ok(!memcmp(&st, &(struct pm_stats){ 0 }, sizeof(st)),
	   "pm_machine_stats(NULL, &out) zeroes out");
	pm_machine_stats(m, NULL);
	pm_machine_stats(NULL, NULL);
	pm_fail_nth(NULL, 1);
	pm_machine_destroy(NULL);
	ok(pm_pfn_to_page(NULL, 0) == NULL, "pm_pfn_to_page(NULL, 0) -> NULL");

	/* Address-space calls. */
	is_int(pm_mmap(NULL, 0, PAGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0), -EINVAL,
	       "pm_mmap(NULL, ...) -> -EINVAL");
	is_int(pm_munmap(NULL, 0x10000, PAGE), -EINVAL, "pm_munmap(NULL, ...) -> -EINVAL");
	is_int(pm_mprotect(NULL, 0x10000, PAGE, PM_PROT_READ), -EINVAL,
	       "pm_mprotect(NULL, ...) -> -EINVAL");
	is_int(pm_madvise(NULL, 0x10000, PAGE, PM_MADV_DONTNEED), -EINVAL,
	       "pm_madvise(NULL, ...) -> -EINVAL");
	is_int(pm_access(NULL, 0x10000, buf, sizeof(buf), 0), -EINVAL,
	       "pm_access(NULL, ...) -> -EINVAL");
	is_int(pm_access(NULL, 0x10000, buf, 0, 0), -EINVAL, "pm_access(NULL, ..., 0 bytes) -> -EINVAL");
	is_int(pm_fault(NULL, 0x10000, 0), -EINVAL, "pm_fault(NULL, ...) -> -EINVAL");
	ok(pm_mm_machine(NULL) == NULL, "pm_mm_machine(NULL) -> NULL");
	ok(!pm_mm_has_pinned(NULL), "pm_mm_has_pinned(NULL) -> false");
	pm_mm_destroy(NULL);
	is_int(pm_get_user_pages(NULL, 0x10000, 1, 0, pages), -EINVAL,
	       "pm_get_user_pages(NULL, ...) -> -EINVAL");
	is_int(pm_get_user_pages_fast(NULL, 0x10000, 1, 0, pages), -EINVAL,
	       "pm_get_user_pages_fast(NULL, ...) -> -EINVAL");
	is_int(pm_pin_user_pages(NULL, 0x10000, 1, 0, pages), -EINVAL,
	       "pm_pin_user_pages(NULL, ...) -> -EINVAL");
	is_int(pm_pin_user_pages_fast(NULL, 0x10000, 1, 0, pages), -EINVAL,
	       "pm_pin_user_pages_fast(NULL, ...) -> -EINVAL");
	is_int(pm_get_user_pages(NULL, 0x10000, 0, 0, pages), -EINVAL,
	       "pm_get_user_pages(NULL, ..., 0 pages) -> -EINVAL");
	is_int(pm_pin_user_pages_fast(NULL, 0x10000, 0, 0, pages), -EINVAL,
	       "pm_pin_user_pages_fast(NULL, ..., 0 pages) -> -EINVAL");
	is_int(pm_dio_read(NULL, 0, 0, 0x10000, PAGE), -EINVAL, "pm_dio_read(NULL, ...) -> -EINVAL");
	is_int(pm_dio_write(NULL, 1, 0, 0x10000, PAGE), -EINVAL,
	       "pm_dio_write(NULL, ...) -> -EINVAL");
	is_int(pm_gup_test(NULL, PM_GUP_FAST_BENCHMARK, &g), -EINVAL,
	       "pm_gup_test(NULL, ...) -> -EINVAL");

	/* Shmem calls. */
	is_int(pm_shmem_truncate(NULL, PAGE), -EINVAL, "pm_shmem_truncate(NULL, ...) -> -EINVAL");
	is_int(pm_shmem_size(NULL), 0, "pm_shmem_size(NULL) -> 0");
	is_int(pm_shmem_nr_pages(NULL), 0, "pm_shmem_nr_pages(NULL) -> 0");
	pm_shmem_put(NULL);

	/* Registrations and pages. */
	unsigned long nents = 7;

	ok(pm_umem_sg(NULL, &nents) == NULL && nents == 0, "pm_umem_sg(NULL) -> NULL, 0 entries");
	pm_umem_release(NULL, PM_UNPIN_RANGE);
	pm_put_page(NULL);
	pm_unpin_user_page(NULL);
	pm_unpin_user_pages(NULL, 1);
	pm_unpin_user_pages(pages, 1);
	pm_unpin_user_pages_dirty_lock(NULL, 1, true);
	pm_unpin_user_page_range_dirty_lock(NULL, 1, true);

	pm_mm_destroy(mm);
	is_int(pm_machine_check(m), 0, "the machine is intact");
	pm_machine_destroy(m);
}

/* ---- 7. the machine destroyed under a live address space and object (issue 26) ---- */

static int dead_released;

static void dead_release(struct pm_mm_notifier *mn, struct pm_mm *mm)
{
	dead_released++;
}

static void test_dead_mm(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PAGE, 0);
	struct pm_page *pages[2];
	struct pm_gup_test gt = { .size = PAGE };
	struct pm_mm_notifier mn = { .release = dead_release }, mn2 = mn;
	long a, s;
	char c = 'd';

	ASSERT_TRUE(mm && f);
	a = pm_mmap(mm, 0, 4 * PAGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	s = pm_mmap(mm, 0, 4 * PAGE, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(a > 0 && s > 0);
	is_int(pm_access(mm, a, &c, 1, 1), 1, "anonymous page written");
	is_int(pm_access(mm, s, &c, 1, 1), 1, "shared page written");
	is_int(pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, pages), 1, "one page pinned");
	pm_unpin_user_page(pages[0]);
	is_int(pm_mm_notifier_register(&mn, mm), 0, "a notifier registered");
	gt.addr = a;

	fprintf(stderr, "# a warning about live address spaces is expected below\n");
	pm_machine_destroy(m);
	is_int(dead_released, 1, "the notifier heard of the teardown");
	is_int(pm_mmap(mm, 0, PAGE, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0), -EINVAL,
	       "dead mm: pm_mmap -> -EINVAL");
	is_int(pm_munmap(mm, a, PAGE), -EINVAL, "pm_munmap -> -EINVAL");
	is_int(pm_mprotect(mm, a, PAGE, PM_PROT_READ), -EINVAL, "pm_mprotect -> -EINVAL");
	is_int(pm_madvise(mm, a, PAGE, PM_MADV_DONTNEED), -EINVAL, "pm_madvise -> -EINVAL");
	is_int(pm_access(mm, a, &c, 1, 0), -EINVAL, "pm_access -> -EINVAL");
	is_int(pm_fault(mm, a, PM_FAULT_WRITE), -EINVAL, "pm_fault -> -EINVAL");
	is_int(pm_get_user_pages(mm, a, 1, 0, pages), -EINVAL, "pm_get_user_pages -> -EINVAL");
	is_int(pm_get_user_pages_fast(mm, a, 1, 0, pages), -EINVAL,
	       "pm_get_user_pages_fast -> -EINVAL");
	is_int(pm_pin_user_pages(mm, a, 1, 0, pages), -EINVAL, "pm_pin_user_pages -> -EINVAL");
	is_int(pm_pin_user_pages_fast(mm, a, 1, 0, pages), -EINVAL,
	       "pm_pin_user_pages_fast -> -EINVAL");
	is_int(pm_gup_test(mm, PM_GUP_FAST_BENCHMARK, &gt), -EINVAL, "pm_gup_test -> -EINVAL");
	is_int(pm_dio_read(mm, 0, 0, a, PAGE), -EINVAL, "pm_dio_read -> -EINVAL");
	is_int(pm_mm_notifier_register(&mn2, mm), -EINVAL, "pm_mm_notifier_register -> -EINVAL");
	pm_mm_notifier_unregister(&mn, mm);
	errno = 0;
	ok(!pm_mm_fork(mm) && errno == EINVAL, "pm_mm_fork -> NULL, EINVAL");
	errno = 0;
	ok(!pm_umem_get(mm, a, PAGE, 0) && errno == EINVAL, "pm_umem_get -> NULL, EINVAL");
	ok(pm_mm_machine(mm) == NULL, "pm_mm_machine -> NULL");
	ok(!pm_mm_has_pinned(mm), "pm_mm_has_pinned -> false");
	is_int(pm_shmem_truncate(f, PAGE), -EINVAL, "dead object: pm_shmem_truncate -> -EINVAL");
	is_int(pm_shmem_size(f), 0, "pm_shmem_size -> 0");
	is_int(pm_shmem_nr_pages(f), 0, "pm_shmem_nr_pages -> 0");
	pm_mm_destroy(mm); /* frees what is left: the leak check at exit sees nothing */
	pm_shmem_put(f);
}

static const struct pmt_group groups[] = {
	/* First: each of its 4095 pm_machine_destroy() waits for RCU, at no cost before the
	 * process has deferred any free. */
	{ "emfile", test_emfile },
	{ "cross_machine", test_cross_machine },
	{ "gup_test_size", test_gup_test_size },
	{ "strerror", test_strerror },
	{ "double_unpin", test_double_unpin },
	{ "null_handles", test_null_handles },
	{ "dead_mm", test_dead_mm },
};

int main(int argc, char **argv)
{
	return pmt_run_groups(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 0);
}
