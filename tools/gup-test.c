// SPDX-License-Identifier: MIT
/*
 * pinmm-gup-test - the kernel selftest tools/testing/selftests/mm/gup_test.c, run against a
 * pinmm address space instead of /sys/kernel/debug/gup_test.
 *
 * It takes the selftest's options and prints its lines, so a command line and its output can
 * be compared with a real kernel's:
 *
 *   -u GUP_FAST_BENCHMARK (default)  -a PIN_FAST_BENCHMARK  -L PIN_LONGTERM_BENCHMARK
 *   -U GUP_BASIC_TEST  -b PIN_BASIC_TEST  -c DUMP_USER_PAGES_TEST (page 0, or the trailing
 *      0-based page indices, at most 8)  -p dump through pin_user_pages
 *   -m MB size (128)  -n pages per call (1; negative: the whole size, as parsed so far; not 0)
 *   -r repeats (benchmarks)  -j threads (1, all on the same buffer)  -F gup_flags (0x.. ok)
 *   -t MADV_HUGEPAGE  -T MADV_NOHUGEPAGE  -w FOLL_WRITE (default)  -W read only
 *   -S MAP_SHARED (default MAP_PRIVATE)  -f FILE (default /dev/zero: anonymous memory)
 * pinmm's own:
 *   -M MB machine memory (default: the buffer plus 64 MiB)  -k KNOBS PM_KNOB_* bits  -h help
 *
 * Numbers are read strictly (tools/lib/cli.c): the whole argument, decimal or 0x, in range;
 * -m and -M take MiB or a K/M/G/T suffix. Anything else prints usage and "Bail out!", exit 1.
 * A buffer (-m) larger than the host's available memory (MemAvailable) is refused the same
 * way, before anything is allocated; the machine (-M) is not checked, as it is made lazily.
 *
 * pinmm has no file systems: -f with anything but /dev/zero maps a shmem object of the
 * buffer's size in its place (said on a "#" line). -H maps the buffer PM_MAP_HUGETLB (with
 * -f, a hugetlb shmem object), on a machine whose hugetlb pool covers it: the length rounds up
 * to 2 MiB, as the kernel's does.
 *
 * The selftest has no option for the long-term pin sessions (PIN_LONGTERM_TEST_*; its -L is
 * PIN_LONGTERM_BENCHMARK): their users are gup_longterm.c and cow.c, whose cases are
 * tests/unit/test_gup_longterm.c over pm_gup_test_longterm().
 *
 * Output is TAP, as kselftest's: a header, a plan of one test per thread, "# " lines with the
 * timings ("GUP_FAST_BENCHMARK: Time: get:%lld put:%lld us", ", truncated (size: %lld)" when a
 * call came back short), "ok N ioctl status 0" per thread and a totals line. The kernel prints
 * the truncation as a second "# " message on the same line; here it is one clean line.
 * Exit status 0 when every thread passed.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "cli.h"

#define MB (1UL << 20)
#define MAX_THREADS 4096
#define MAX_SIZE (1ULL << 46)		/* -m: half of the 128 TiB address space */
#define MAX_MACHINE (1ULL << 50)	/* -M: 1 PiB; pm_machine_create() decides */

static unsigned cmd = PM_GUP_FAST_BENCHMARK;
static int repeats = 1;
static unsigned long size = 128 * MB;
static struct pm_mm *mm;

static pthread_mutex_t print_mutex = PTHREAD_MUTEX_INITIALIZER;
static int nr_pass, nr_fail;

static const char *cmd_to_str(unsigned c)
{
	switch (c) {
	case PM_GUP_FAST_BENCHMARK:
		return "GUP_FAST_BENCHMARK";
	case PM_PIN_FAST_BENCHMARK:
		return "PIN_FAST_BENCHMARK";
	case PM_PIN_LONGTERM_BENCHMARK:
		return "PIN_LONGTERM_BENCHMARK";
	case PM_GUP_BASIC_TEST:
		return "GUP_BASIC_TEST";
	case PM_PIN_BASIC_TEST:
		return "PIN_BASIC_TEST";
	case PM_DUMP_USER_PAGES_TEST:
		return "DUMP_USER_PAGES_TEST";
	}
	return "Unknown command";
}

static __attribute__((noreturn, format(printf, 1, 2))) void fail_msg(const char *fmt, ...)
{
	va_list ap;

	printf("Bail out! ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	exit(1);
}

static bool is_benchmark(unsigned c)
{
	return c == PM_GUP_FAST_BENCHMARK || c == PM_PIN_FAST_BENCHMARK ||
	       c == PM_PIN_LONGTERM_BENCHMARK;
}

static void *gup_thread(void *data)
{
	struct pm_gup_test gup = *(struct pm_gup_test *)data;
	int status = 0;

	if (is_benchmark(cmd)) {
		for (int i = 0; i < repeats; i++) {
			gup.size = size;
			status = pm_gup_test(mm, cmd, &gup);
			if (status)
				break;
			pthread_mutex_lock(&print_mutex);
			printf("# %s: Time: get:%lld put:%lld us", cmd_to_str(cmd),
			       (long long)gup.get_delta_usec, (long long)gup.put_delta_usec);
			if (gup.size != size)
				printf(", truncated (size: %lld)", (long long)gup.size);
			printf("\n");
			pthread_mutex_unlock(&print_mutex);
		}
	} else {
		gup.size = size;
		status = pm_gup_test(mm, cmd, &gup);
		if (!status) {
			pthread_mutex_lock(&print_mutex);
			printf("# %s: done\n", cmd_to_str(cmd));
			if (gup.size != size)
				printf("# Truncated (size: %lld)\n", (long long)gup.size);
			pthread_mutex_unlock(&print_mutex);
		}
	}

	pthread_mutex_lock(&print_mutex);
	if (status)
		nr_fail++;
	else
		nr_pass++;
	printf("%s %d ioctl status %d%s%s\n", status ? "not ok" : "ok", nr_pass + nr_fail, status,
	       status ? ": " : "", status ? pm_strerror(status) : "");
	fflush(stdout);
	pthread_mutex_unlock(&print_mutex);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pinmm-gup-test [-u|-a|-L|-U|-b|-c [-p]] [-m MB] [-n PAGES] [-r REPEATS]\n"
		"                      [-j THREADS] [-F FLAGS] [-t|-T] [-w|-W] [-S] [-f FILE]\n"
		"                      [-M MB] [-k KNOBS] [PAGE_INDEX...]\n"
		"  the options of tools/testing/selftests/mm/gup_test; -M machine memory in MiB,\n"
		"  -k PM_KNOB_* bits (e.g. 0x2 = no GUP-fast) are pinmm's\n");
}

/* A bad number: usage, what is wrong, "Bail out!", exit 1. @opt 0: a page index. */
static __attribute__((noreturn)) void bad_arg(int opt, const char *arg, int err)
{
	char name[3] = { '-', (char)opt, 0 };

	usage(stderr);
	cli_complain("pinmm-gup-test", opt ? name : "page index", arg, err);
	fail_msg("Wrong argument\n");
}

static uint64_t number(int opt, const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;
	int err = cli_parse_u64(arg, min, max, &v);

	if (err)
		bad_arg(opt, arg, err);
	return v;
}

/* MiB (or a K, M, G, T suffix), at least 1 MiB, a whole number of pages. */
static unsigned long mib_size(int opt, const char *arg, uint64_t max)
{
	uint64_t v;
	int err = cli_parse_size(arg, MB, MB, max, &v);

	if (!err && v % PM_PAGE_SIZE)
		err = -EINVAL;
	if (err)
		bad_arg(opt, arg, err);
	return (unsigned long)v;
}

int main(int argc, char **argv)
{
	struct pm_gup_test gup = { 0 };
	int i, opt, thp = -1, write = 1, nthreads = 1, ret;
	long nr_pages = 1;
	int flags = PM_MAP_PRIVATE;
	const char *file = "/dev/zero";
	struct pm_config cfg = { 0 };
	unsigned long mem_bytes = 0;
	struct pm_machine *m;
	struct pm_shmem *shm = NULL;
	bool hugetlb = false;
	pthread_t *tid;
	long p;

	while ((opt = getopt(argc, argv, "m:r:n:F:f:abcj:tTLUuwWSHpzM:k:h")) != -1) {
		switch (opt) {
		case 'a':
			cmd = PM_PIN_FAST_BENCHMARK;
			break;
		case 'b':
			cmd = PM_PIN_BASIC_TEST;
			break;
		case 'L':
			cmd = PM_PIN_LONGTERM_BENCHMARK;
			break;
		case 'c':
			/* Page 0 unless page indices follow; which_pages[] is 1-based. */
			cmd = PM_DUMP_USER_PAGES_TEST;
			gup.which_pages[0] = 1;
			break;
		case 'p':
			gup.test_flags |= PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN;
			break;
		case 'F':
			gup.gup_flags = (uint32_t)number('F', optarg, 0, UINT32_MAX);
			break;
		case 'j':
			nthreads = (int)number('j', optarg, 1, MAX_THREADS);
			break;
		case 'm':
			size = mib_size('m', optarg, MAX_SIZE);
			break;
		case 'r':
			repeats = (int)number('r', optarg, 0, INT_MAX);
			break;
		case 'n':
			ret = cli_parse_long(optarg, LONG_MIN, UINT32_MAX, &nr_pages);
			if (ret || !nr_pages)
				bad_arg('n', optarg, ret ?: -ERANGE);
			if (nr_pages < 0) /* the whole size, as parsed so far */
				nr_pages = size / PM_PAGE_SIZE < UINT32_MAX ? (long)(size / PM_PAGE_SIZE) :
									      UINT32_MAX;
			break;
		case 't':
			thp = 1;
			break;
		case 'T':
			thp = 0;
			break;
		case 'U':
			cmd = PM_GUP_BASIC_TEST;
			break;
		case 'u':
			cmd = PM_GUP_FAST_BENCHMARK;
			break;
		case 'w':
			write = 1;
			break;
		case 'W':
			write = 0;
			break;
		case 'f':
			file = optarg;
			break;
		case 'S':
			flags &= ~PM_MAP_PRIVATE;
			flags |= PM_MAP_SHARED;
			break;
		case 'H':
			hugetlb = true;
			break;
		case 'M':
			/* Not checked against the host's memory: a machine is made lazily. */
			mem_bytes = mib_size('M', optarg, MAX_MACHINE);
			break;
		case 'k':
			cfg.knobs = (unsigned)number('k', optarg, 0, PM_KNOB_ALL);
			if (cfg.knobs & ~PM_KNOB_ALL) {
				fprintf(stderr, "pinmm-gup-test: -k '%s': not a knob\n", optarg);
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			fail_msg("Wrong argument\n");
		}
	}

	/* Trailing arguments: 0-based page indices to dump, e.g. "-c 0 1 0x1001". */
	if (argc - optind > PM_GUP_TEST_MAX_PAGES_TO_DUMP) {
		usage(stderr);
		fail_msg("at most %d page indices\n", PM_GUP_TEST_MAX_PAGES_TO_DUMP);
	}
	for (i = 0; optind < argc; i++, optind++)
		gup.which_pages[i] = (uint32_t)number(0, argv[optind], 0, UINT32_MAX - 1) + 1;

	/* Not usage: the number is fine, the host is too small for it. */
	if (cli_check_working_set("pinmm-gup-test", "-m", size))
		fail_msg("-m %lu: more than the host's available memory\n", size / MB);

	printf("TAP version 13\n");
	printf("1..%d\n", nthreads);

	gup.nr_pages_per_call = (uint32_t)nr_pages;
	if (write)
		gup.gup_flags |= PM_FOLL_WRITE;

	/* The machine: the buffer, its page tables and room to spare, in 2 MiB units; with -H,
	 * a hugetlb pool that covers the buffer, on top. */
	if (hugetlb) {
		size = (size + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);
		cfg.nr_hugepages = size / PM_PMD_SIZE;
	}
	if (!mem_bytes)
		mem_bytes = size + 64 * MB;
	cfg.mem_bytes = (mem_bytes + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);
	if (hugetlb)
		cfg.mem_bytes += cfg.nr_hugepages * PM_PMD_SIZE;
	m = pm_machine_create(&cfg);
	if (!m)
		fail_msg("pm_machine_create(%lu MiB, knobs %#x): %s\n", mem_bytes / MB, cfg.knobs,
			 strerror(errno));
	mm = pm_mm_create(m);
	if (!mm)
		fail_msg("pm_mm_create: %s\n", strerror(errno));

	if (strcmp(file, "/dev/zero")) {
		printf("# -f %s: pinmm has no file systems; a shmem object stands in for it\n",
		       file);
		shm = hugetlb ? pm_shmem_create_hugetlb(m, size) : pm_shmem_create(m, size, 0);
		if (!shm)
			fail_msg("pm_shmem_create: %s\n", strerror(errno));
	} else {
		flags |= PM_MAP_ANONYMOUS;
	}
	if (hugetlb)
		flags |= PM_MAP_HUGETLB;
	p = pm_mmap(mm, 0, size, PM_PROT_READ | PM_PROT_WRITE, flags, shm, 0);
	if (p < 0)
		fail_msg("mmap: %s\n", pm_strerror(p));
	gup.addr = p;

	if (thp == 1)
		pm_madvise(mm, p, size, PM_MADV_HUGEPAGE);
	else if (thp == 0)
		pm_madvise(mm, p, size, PM_MADV_NOHUGEPAGE);

	/* Fault them in here, from "user space": one byte written per page. */
	for (unsigned long a = p; a < p + size; a += PM_PAGE_SIZE) {
		char zero = 0;
		long r = pm_access(mm, a, &zero, 1, 1);

		if (r != 1)
			fail_msg("touching %#lx: %s\n", a, pm_strerror(r));
	}

	tid = malloc(sizeof(*tid) * nthreads);
	if (!tid)
		fail_msg("out of memory\n");
	for (i = 0; i < nthreads; i++) {
		ret = pthread_create(&tid[i], NULL, gup_thread, &gup);
		if (ret)
			fail_msg("pthread_create: %s\n", strerror(ret));
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	free(tid);

	pm_munmap(mm, p, size);
	pm_mm_destroy(mm);
	if (shm)
		pm_shmem_put(shm);
	pm_machine_destroy(m);

	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n", nr_pass, nr_fail);
	return nr_fail ? 1 : 0;
}
