// SPDX-License-Identifier: MIT
/*
 * test_hostile.c - hostile and careless input (issue 13): every call answers with a clear
 * error and nothing is corrupted.
 *
 *   strerror		pm_strerror() of any long
 *
 * The release-build answer to a double unpin is in test_unpin_release.c, fork() of a process
 * that uses pinmm in test_atfork.c. "-t NAME" runs one group only.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ARRAY_SIZE_T(a) (sizeof(a) / sizeof((a)[0]))

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

static const struct {
	const char *name;
	void (*fn)(void);
} groups[] = {
	{ "strerror", test_strerror },
};

int main(int argc, char **argv)
{
	const char *only = NULL;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-t"))
			only = argv[i + 1];
	plan_no_plan();
	for (unsigned i = 0; i < ARRAY_SIZE_T(groups); i++) {
		if (only && strcmp(only, groups[i].name))
			continue;
		diag("%s", groups[i].name);
		groups[i].fn();
	}
	return done_testing();
}
