// SPDX-License-Identifier: MIT
/*
 * test_gup_test.c - pm_gup_test(), Linux's gup_test ioctl as a call (src/consumers/gup_test.c),
 * and the pinmm-gup-test tool of the same build directory (found from this binary's path).
 *
 * Every command must take and give back exactly what it walked (refcounts, pincounts and the
 * pin counters return to where they were), report the size it covered with Linux's rules when
 * the range ends early, and refuse bad commands, ranges and flags with -EINVAL.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE

static struct pm_machine *m;
static struct pm_mm *mm;

static const char *const cmd_name[] = {
	[PM_GUP_FAST_BENCHMARK] = "GUP_FAST_BENCHMARK",
	[PM_PIN_FAST_BENCHMARK] = "PIN_FAST_BENCHMARK",
	[PM_PIN_LONGTERM_BENCHMARK] = "PIN_LONGTERM_BENCHMARK",
	[PM_GUP_BASIC_TEST] = "GUP_BASIC_TEST",
	[PM_PIN_BASIC_TEST] = "PIN_BASIC_TEST",
	[PM_DUMP_USER_PAGES_TEST] = "DUMP_USER_PAGES_TEST",
};

/* Private anonymous memory, every page faulted in for write. */
static unsigned long map_touched(size_t len, bool thp)
{
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, thp);

	pmt_touch(mm, addr, len);
	return addr;
}

static struct pm_gup_test mkgup(unsigned long addr, size_t size, unsigned per_call, unsigned flags)
{
	struct pm_gup_test g = { .addr = addr, .size = size, .nr_pages_per_call = per_call,
				 .gup_flags = flags };

	return g;
}

static void test_commands(const char *what, unsigned long addr, size_t len)
{
	static const unsigned per_call[] = { 1, 64, 512, 100000 };
	unsigned long npages = len / PAGE;
	struct pmt_snap *c = pmt_snapshot(mm, addr, npages);

	for (unsigned cmd = PM_GUP_FAST_BENCHMARK; cmd <= PM_DUMP_USER_PAGES_TEST; cmd++) {
		bool all = true;

		for (unsigned k = 0; k < 4; k++) {
			for (unsigned write = 0; write <= 1; write++) {
				struct pm_gup_test g = mkgup(addr, len, per_call[k], write);
				int r = pm_gup_test(mm, cmd, &g);

				if (r || g.size != len || !pmt_counts_equal(c, npages)) {
					diag("%s per_call %u write %u: ret %d size %llu",
					     cmd_name[cmd], per_call[k], write, r,
					     (unsigned long long)g.size);
					all = false;
				}
			}
		}
		ok(all, "%s %s: whole range, counts back", what, cmd_name[cmd]);
	}
	{
		struct pm_gup_test g = mkgup(addr, len, 16, 0);

		g.test_flags = PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN;
		g.which_pages[0] = 1;
		ok(!pm_gup_test(mm, PM_DUMP_USER_PAGES_TEST, &g) && pmt_counts_equal(c, npages),
		   "%s DUMP_USER_PAGES_TEST with pin: counts back", what);
	}
	ok(pmt_pins_balanced(m), "%s: pins balanced", what);
	free(c);
}

/*
 *  page 0     9 10      15
 *  [ mapped   ][ hole    ]   range = 16 pages
 */
static void test_truncated(void)
{
	unsigned long addr = map_touched(16 * PAGE, false);
	struct pmt_snap *c = pmt_snapshot(mm, addr, 10);
	struct pm_gup_test g;

	ASSERT_EQ(pm_munmap(mm, addr + 10 * PAGE, 6 * PAGE), 0);
	for (unsigned cmd = PM_GUP_FAST_BENCHMARK; cmd <= PM_DUMP_USER_PAGES_TEST; cmd++) {
		g = mkgup(addr, 16 * PAGE, 1, PM_FOLL_WRITE);
		is_int(pm_gup_test(mm, cmd, &g), 0, "%s over a hole: 0", cmd_name[cmd]);
		is_int(g.size, 10 * PAGE, "%s one page a call: size truncated to 10 pages",
		       cmd_name[cmd]);
	}
	/* Linux counts a short call's whole chunk: 4 + 4 + (2 of 4) -> 12 pages. */
	g = mkgup(addr, 16 * PAGE, 4, 0);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), 0, "4 a call: 0");
	is_int(g.size, 12 * PAGE, "4 a call: size covers the short call's chunk, as Linux");
	/* ... and a single short call that reaches the end is not truncated at all. */
	g = mkgup(addr, 16 * PAGE, 16, 0);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), 0, "16 a call: 0");
	is_int(g.size, 16 * PAGE, "16 a call: one short call to the end keeps the size, as Linux");
	/* Starting in the hole: nothing covered, yet not an error. */
	g = mkgup(addr + 12 * PAGE, 2 * PAGE, 1, 0);
	is_int(pm_gup_test(mm, PM_GUP_BASIC_TEST, &g), 0, "starting in a hole: 0");
	is_int(g.size, 0, "starting in a hole: size 0");
	/* A size that is not a page multiple: the partial page at the end is not taken. */
	g = mkgup(addr, 3 * PAGE + 100, 1, 0);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), 0, "size 3 pages + 100: 0");
	is_int(g.size, 3 * PAGE, "size 3 pages + 100: 3 pages covered");
	g = mkgup(addr, 8 * PAGE, 0, 0);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), 0, "0 pages a call: 0");
	is_int(g.size, 0, "0 pages a call: size 0");

	ok(pmt_counts_equal(c, 10) && pmt_pins_balanced(m),
	   "truncated: counts back, pins balanced");
	free(c);
	ASSERT_EQ(pm_munmap(mm, addr, 10 * PAGE), 0);
}

static void test_dump(void)
{
	unsigned long addr = map_touched(10 * PAGE, false);
	struct pm_gup_test g = mkgup(addr, 10 * PAGE, 3, 0);

	g.which_pages[0] = 1;
	g.which_pages[1] = 10;
	g.which_pages[2] = 11;
	g.which_pages[3] = 0x1002;
	is_int(pm_gup_test(mm, PM_DUMP_USER_PAGES_TEST, &g), 0, "dump: 0");
	ok(g.which_pages[0] == 1 && g.which_pages[1] == 10 && !g.which_pages[2] &&
		   !g.which_pages[3],
	   "dump: out-of-range page indices are zeroed, the others kept");
	ok(pmt_pins_balanced(m), "dump: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, 10 * PAGE), 0);
}

static void test_errors(void)
{
	unsigned long addr = map_touched(4 * PAGE, false);
	struct pmt_snap *c = pmt_snapshot(mm, addr, 4);
	struct pm_gup_test g = mkgup(addr, 4 * PAGE, 1, 0);

	is_int(pm_gup_test(mm, 0, &g), -EINVAL, "command 0: -EINVAL");
	is_int(pm_gup_test(mm, 7, &g), -EINVAL, "command 7 (PIN_LONGTERM_TEST_START): -EINVAL");
	is_int(pm_gup_test(mm, PM_GUP_FAST_BENCHMARK, NULL), -EINVAL, "NULL struct: -EINVAL");
	is_int(pm_gup_test(NULL, PM_GUP_FAST_BENCHMARK, &g), -EINVAL, "NULL mm: -EINVAL");
	g = mkgup(~0ULL - PAGE, 2 * PAGE, 1, 0);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), -EINVAL, "addr + size wraps: -EINVAL");
	is_int(g.size, 2 * PAGE, "a refused command leaves the struct alone");
	g = mkgup(addr, 4 * PAGE, 1, 0x2 /* FOLL_GET */);
	is_int(pm_gup_test(mm, PM_GUP_FAST_BENCHMARK, &g), -EINVAL, "gup_flags FOLL_GET: -EINVAL");
	g = mkgup(addr, 4 * PAGE, 1, 1u << 19 /* FOLL_PIN */);
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), -EINVAL, "gup_flags FOLL_PIN: -EINVAL");
	g = mkgup(addr, 4 * PAGE, 1, PM_FOLL_LONGTERM);
	is_int(pm_gup_test(mm, PM_GUP_BASIC_TEST, &g), -EINVAL, "FOLL_LONGTERM with get: -EINVAL");
	is_int(pm_gup_test(mm, PM_PIN_FAST_BENCHMARK, &g), 0, "FOLL_LONGTERM with pin: 0");
	g = mkgup(addr, 4 * PAGE, 1, 0);
	g.test_flags = 0x2;
	is_int(pm_gup_test(mm, PM_DUMP_USER_PAGES_TEST, &g), -EINVAL,
	       "unknown test_flags: -EINVAL");
	g = mkgup(PM_TASK_SIZE, 4 * PAGE, 1, 0);
	is_int(pm_gup_test(mm, PM_GUP_FAST_BENCHMARK, &g), 0, "beyond user space: 0, as Linux");
	is_int(g.size, 0, "beyond user space: size 0");
	ok(pmt_counts_equal(c, 4) && pmt_pins_balanced(m), "errors: counts back, pins balanced");
	free(c);
	ASSERT_EQ(pm_munmap(mm, addr, 4 * PAGE), 0);
}

/*
 * Untouched memory read without FOLL_WRITE maps the zero page, which is never really
 * referenced or pinned; a read-only FOLL_LONGTERM pin of it first unshares it into an anonymous
 * page of its own (Linux: longterm R/O pins in a COW mapping never land on the zero page).
 */
static void test_zero_page(void)
{
	static const unsigned cmds[] = { PM_GUP_FAST_BENCHMARK, PM_PIN_FAST_BENCHMARK,
					 PM_GUP_BASIC_TEST, PM_PIN_BASIC_TEST };
	unsigned long addr = pmt_map_anon(mm, 64 * PAGE, PM_PROT_READ | PM_PROT_WRITE, false);
	struct pm_gup_test g;
	bool ok_all = true, zero = true;

	for (unsigned i = 0; i < 4; i++) {
		g = mkgup(addr, 64 * PAGE, 8, 0);
		ok_all &= !pm_gup_test(mm, cmds[i], &g) && g.size == 64 * PAGE;
	}
	ok(ok_all, "read-only commands over untouched memory cover it");
	for (unsigned long off = 0; off < 64 * PAGE; off += PAGE)
		zero &= pm_page_is_zero(pmt_page_at(mm, addr + off));
	ok(zero, "... and leave it mapped to the zero page");

	g = mkgup(addr, 64 * PAGE, 8, 0);
	is_int(pm_gup_test(mm, PM_PIN_LONGTERM_BENCHMARK, &g), 0, "R/O longterm pin: 0");
	is_int(g.size, 64 * PAGE, "R/O longterm pin covers the range");
	zero = false;
	for (unsigned long off = 0; off < 64 * PAGE; off += PAGE)
		zero |= pm_page_is_zero(pmt_page_at(mm, addr + off));
	ok(!zero, "R/O longterm pin unshared every zero page");
	is_int(pm_folio_ref_count(pm_page_folio(pmt_page_at(mm, addr))), 1,
	       "an unshared page is left mapped once and unpinned (refcount 1)");
	ok(pmt_pins_balanced(m), "zero page: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, 64 * PAGE), 0);
}

struct thread_arg {
	unsigned cmd;
	unsigned long addr;
	size_t len;
	int failures;
};

static void *hammer(void *p)
{
	struct thread_arg *a = p;

	for (long i = 0; i < tap_scale(50); i++) {
		struct pm_gup_test g = mkgup(a->addr, a->len, 1 + i % 70, PM_FOLL_WRITE);

		if (pm_gup_test(mm, a->cmd, &g) || g.size != a->len)
			a->failures++;
	}
	return NULL;
}

/* Several threads on one buffer, as the selftest's -j. */
static void test_threads(void)
{
	size_t len = 4 * MiB;
	unsigned long addr = map_touched(len, true);
	struct pmt_snap *c = pmt_snapshot(mm, addr, len / PAGE);
	struct thread_arg args[4];
	pthread_t tid[4];
	int failures = 0;

	for (int i = 0; i < 4; i++) {
		static const unsigned cmds[] = { PM_PIN_FAST_BENCHMARK, PM_GUP_FAST_BENCHMARK,
						 PM_PIN_LONGTERM_BENCHMARK, PM_PIN_FAST_BENCHMARK };

		args[i] = (struct thread_arg){ .cmd = cmds[i], .addr = addr, .len = len };
		ASSERT_EQ(pthread_create(&tid[i], NULL, hammer, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(tid[i], NULL);
		failures += args[i].failures;
	}
	is_int(failures, 0, "4 threads, one buffer: every command covered it");
	ok(pmt_counts_equal(c, len / PAGE) && pmt_pins_balanced(m),
	   "threads: counts back, pins balanced");
	free(c);
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

/*
 * Where the tool is: the build directory this test binary was built in, as the Makefile lays it
 * out ($(O)/tests/unit/test_gup_test next to $(O)/pinmm-gup-test), whatever $O and the working
 * directory say. Empty when /proc/self/exe cannot be read.
 */
static void tool_path(char *path, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	path[0] = 0;
	if (n <= 0)
		return;
	exe[n] = 0;
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(exe, '/');

		if (!slash)
			return;
		*slash = 0;
	}
	if ((size_t)snprintf(path, len, "%s/pinmm-gup-test", exe) >= len)
		path[0] = 0;
}

/* Run the tool at @tool; return its exit status and up to @cap bytes of its stdout. */
static int run_tool(const char *tool, const char *args, char *out, size_t cap)
{
	char cmd[PATH_MAX + 288];
	size_t n = 0;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", tool, args);
	f = popen(cmd, "r");
	ASSERT_TRUE(f);
	while (n + 1 < cap && fgets(out + n, cap - n, f))
		n += strlen(out + n);
	out[n] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_tool(void)
{
	char tool[PATH_MAX + 32], out[8192];

	tool_path(tool, sizeof(tool));
	/* `make tests` builds the tool with this binary: missing, it is a failure, not a skip. */
	if (!ok(tool[0] && !access(tool, X_OK), "pinmm-gup-test is built next to this test (%s)",
		tool[0] ? tool : "/proc/self/exe unreadable")) {
		diag("build it: make SAN=... tests");
		return;
	}
	is_int(run_tool(tool, "-m 4 -a -n 64 -r 2 -t", out, sizeof(out)), 0, "tool -a: exit 0");
	ok(strstr(out, "PIN_FAST_BENCHMARK: Time: get:") && strstr(out, " us\n"),
	   "tool -a: prints the benchmark line");
	ok(strstr(out, "ok 1 ioctl status 0") && strstr(out, "1..1"), "tool -a: TAP result");
	is_int(run_tool(tool, "-m 2 -j 3 -L -n -1 -W", out, sizeof(out)), 0, "tool -L -j 3: exit 0");
	ok(strstr(out, "ok 3 ioctl status 0") && strstr(out, "1..3"), "tool -j 3: three results");
	is_int(run_tool(tool, "-m 1 -c -p 0 5 300", out, sizeof(out)), 0, "tool -c -p: exit 0");
	ok(strstr(out, "DUMP_USER_PAGES_TEST: done"), "tool -c: done line");
	ok(run_tool(tool, "-m 1 -F 0x80000", out, sizeof(out)) != 0 && strstr(out, "not ok 1"),
	   "tool -F FOLL_PIN: not ok, nonzero exit");

	/* The kernel selftest's matrix (run_vmtests.sh, run_gup_matrix): THP on, off, hugetlb ×
	 * GUP-fast, GUP, pin-fast, pin, long-term pin × write or not × shared or private × 1,
	 * 512 (a huge page) or 123 (a partial one) pages per call. */
	static const char *const huge[] = { "-t", "-T", "-H" };
	static const char *const cmd[] = { "-u", "-U", "-a", "-b", "-L" };
	static const char *const rw[] = { "-w", "-W" };
	static const char *const share[] = { "-S", "" };
	static const char *const num[] = { "-n 1", "-n 512", "-n 123" };
	unsigned failed = 0, runs = 0;

	for (unsigned h = 0; h < 3; h++)
		for (unsigned c = 0; c < 5; c++)
			for (unsigned w = 0; w < 2; w++)
				for (unsigned sh = 0; sh < 2; sh++)
					for (unsigned n = 0; n < 3; n++) {
						char args[128];

						snprintf(args, sizeof(args), "-m 4 -r 1 %s %s %s %s %s",
							 huge[h], cmd[c], rw[w], share[sh], num[n]);
						runs++;
						if (run_tool(tool, args, out, sizeof(out)) ||
						    !strstr(out, "ok 1 ioctl status 0")) {
							if (!failed++)
								diag("pinmm-gup-test %s:\n%s", args, out);
						}
					}
	ok(!failed, "the selftest's option matrix: %u runs, %u failed (-t/-T/-H x -u -U -a -b -L "
	   "x -w/-W x -S or not x -n 1/512/123)", runs, failed);
}

int main(void)
{
	size_t free_at_start;
	unsigned long addr;

	plan_no_plan();
	free_at_start = pmt_setup(&m, &mm, 128, 0);

	addr = map_touched(1 * MiB + 16 * PAGE, false);
	test_commands("4K", addr, 1 * MiB + 16 * PAGE);
	ASSERT_EQ(pm_munmap(mm, addr, 1 * MiB + 16 * PAGE), 0);
	addr = map_touched(4 * MiB, true);
	test_commands("THP", addr, 4 * MiB);
	ASSERT_EQ(pm_munmap(mm, addr, 4 * MiB), 0);
	test_truncated();
	test_dump();
	test_errors();
	test_zero_page();
	test_threads();
	test_tool();

	pm_mm_destroy(mm);
	pmt_end(m, free_at_start, &pmt_end_free_again, NULL);
	return done_testing();
}
