// SPDX-License-Identifier: MIT
/*
 * test_hostile3.c - hostile input, third set (issue 26): address-space edges where both
 * designs must answer as Linux does. Each group runs in the design the environment picks
 * (make check: Linux's, make check-range: the range design).
 *
 *   gap_fallback	the lower half of the address space taken: non-fixed mmaps of 600 GiB
 *			and 2 x 400 GiB find room, and 400 GiB mappings keep finding it until
 *			the upper half is full (the range design's search of the whole address
 *			space looked only below the arenas and above mmap_base)
 *
 * "-t NAME" runs one group only.
 */
#include <errno.h>

#include <pinmm/pinmm.h>

#include "internal.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define GiB (1UL << 30)
#define TiB (1UL << 40)
#define RANGE (1UL << PM_RANGE_SHIFT)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RO PM_PROT_READ
#define FIX (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define ARRAY_SIZE_T(a) (sizeof(a) / sizeof((a)[0]))

static const char *design(struct pm_machine *m)
{
	return pm_machine_flags(m) == PM_MACHINE_RANGE_MM ? "range design" : "Linux's design";
}

/* [@a, @a + @len) lies in the user address space above @floor and misses [@b, @b + @blen). */
static bool placed(long a, unsigned long len, unsigned long floor, long b, unsigned long blen)
{
	unsigned long x = (unsigned long)a, y = (unsigned long)b;

	return a > 0 && x >= floor && x <= PM_TASK_SIZE - len && (x + len <= y || x >= y + blen);
}

/* ---- 1. the fallback search finds every gap ---- */

static void test_gap_fallback(void)
{
	struct pm_machine *m = pmt_machine(16, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long half = (PM_TASK_SIZE + PG) / 2; /* 64 TiB: ranges 128 and up */
	unsigned long total;
	long a, b, c, r;
	int n = 0, low = 0;

	ASSERT_TRUE(mm != NULL);
	diag("%s", design(m));
	is_int(pm_mmap(mm, PM_USER_MIN, half - PM_USER_MIN, RO, FIX, NULL, 0), (long)PM_USER_MIN,
	       "the lower half of the address space is taken");
	a = pm_mmap(mm, 0, 600 * GiB, RW, PRIV, NULL, 0);
	ok(placed(a, 600 * GiB, half, 0, 0), "600 GiB, more than one range, finds room (%#lx)", a);
	b = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0);
	ok(placed(b, 400 * GiB, half, a, 600 * GiB), "400 GiB finds room (%#lx)", b);
	c = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0);
	ok(placed(c, 400 * GiB, half, a, 600 * GiB) && placed(c, 400 * GiB, half, b, 400 * GiB),
	   "another 400 GiB too, apart from both (%#lx)", c);
	is_int(pm_access(mm, (unsigned long)a + 600 * GiB - 8, (char[8]){ 1 }, 8, 1), 8,
	       "the 600 GiB mapping is usable at its end");
	is_int(pm_access(mm, (unsigned long)c, (char[8]){ 2 }, 8, 1), 8,
	       "the last 400 GiB one at its start");
	/* About 63 TiB are free: every 400 GiB that fits in the gaps left must come in. */
	total = 1400 * GiB;
	while ((r = pm_mmap(mm, 0, 400 * GiB, RW, PRIV, NULL, 0)) > 0 && n++ < 1000) {
		low += !placed(r, 400 * GiB, half, 0, 0);
		total += 400 * GiB;
	}
	is_int(r, -ENOMEM, "400 GiB mappings come in until the upper half is full");
	ok(!low && total >= 63 * TiB, "it holds %lu GiB of mappings then", total / GiB);
	ok(pm_mmap(mm, 0, GiB, RW, PRIV, NULL, 0) > 0, "1 GiB still finds what is left over");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_destroy, "gap_fallback");
}

static const struct {
	const char *name;
	void (*fn)(void);
} groups[] = {
	{ "gap_fallback", test_gap_fallback },
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
