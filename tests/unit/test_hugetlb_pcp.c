// SPDX-License-Identifier: MIT
/*
 * test_hugetlb_pcp.c - the range design's per-CPU lists of hugetlb pool pages
 * (mem/hugetlb_pool.c, "Per-CPU lists"): a reserved fault takes its page from its CPU's list,
 * and nothing a list holds changes an outcome.
 *  - A page on one CPU's list serves a fault on another CPU when the free list is empty: a
 *    pool of 4 pages serves 4 reserved faults, whichever CPUs make them.
 *  - The counts read as if no list existed (HugePages_Free and _Rsvd), and a reservation
 *    that the pool cannot cover fails while a list holds the only pages left unconsumed.
 * Each case runs in Linux's design, the range design, and the range design with
 * PM_KNOB_HUGETLB_POOL_LOCK (no lists), with the same expected figures. The two faulting
 * threads are bound to CPUs 0 and 1 where the host has both (otherwise both lists are one,
 * and the cases still hold).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define HP (2UL << 20)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define WIN 0x200000000000UL
#define ANON_HUGE (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB | PM_MAP_FIXED)
#define NPOOL 4

static const struct {
	unsigned flags, knobs;
	const char *name;
} configs[] = {
	{ PM_MACHINE_LINUX_MM, 0, "linux" },
	{ PM_MACHINE_RANGE_MM, 0, "range" },
	{ PM_MACHINE_RANGE_MM, PM_KNOB_HUGETLB_POOL_LOCK, "range, PM_KNOB_HUGETLB_POOL_LOCK" },
};

static const char *dn;
static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;

/* The pool's free and reserved counts (HugePages_Free, HugePages_Rsvd) are @f and @r. */
static void pool_is(long f, long r, const char *what)
{
	size_t total = 0, gf = 0, gr = 0;
	int err = pm_hugetlb_pool(m, &total, &gf) | pm_hugetlb_reserved(m, &gr);

	ok(!err && (long)gf == f && (long)gr == r, "%s: %s: free %zu, reserved %zu (want %ld/%ld)",
	   dn, what, gf, gr, f, r);
}

/* Write a tag into the 2 MiB page at @addr from a thread bound to @cpu, after checking the
 * fault gave it a zeroed page. */
struct touch {
	unsigned long addr;
	int cpu;
	long ret;
};

static void *touch_fn(void *p)
{
	struct touch *t = p;
	uint64_t v = 0, tag = t->addr;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	t->ret = pm_access(mm, t->addr + HP - 8, &v, 8, 0);
	if (t->ret == 8 && v != 0)
		t->ret = -EIO;
	if (t->ret == 8)
		t->ret = pm_access(mm, t->addr, &tag, 8, 1);
	return NULL;
}

static long touch_on(int cpu, unsigned long addr)
{
	struct touch t = { addr, cpu, -1 };
	pthread_t th;

	if (pthread_create(&th, NULL, touch_fn, &t))
		return -1;
	pthread_join(th, NULL);
	return t.ret;
}

static void start(unsigned i)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .nr_hugepages = NPOOL,
				 .flags = configs[i].flags, .knobs = configs[i].knobs };

	dn = configs[i].name;
	m = pm_machine_create(&cfg);
	ASSERT_TRUE(m != NULL);
	free0 = pmt_free_pages(m);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm != NULL);
}

static void finish(void)
{
	pm_mm_destroy(mm);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", dn);
	pmt_hend(m, free0, NPOOL, dn);
}

/* A: 2 pages, B: 2 pages; the whole pool reserved before any fault. */
static void map_both(void)
{
	ok(pm_mmap(mm, WIN, 2 * HP, RW, ANON_HUGE, NULL, 0) == (long)WIN &&
	   pm_mmap(mm, WIN + 4 * HP, 2 * HP, RW, ANON_HUGE, NULL, 0) == (long)(WIN + 4 * HP),
	   "%s: two mappings reserve the pool", dn);
	pool_is(NPOOL, NPOOL, "reserved, nothing faulted");
}

/* CPU 0 faults first (its list may keep a page); CPU 1 then takes every other page. */
static void other_cpu_list(void)
{
	static const struct {
		int cpu;
		unsigned long addr;
	} seq[] = { { 0, WIN }, { 1, WIN + 4 * HP }, { 1, WIN + 5 * HP }, { 1, WIN + HP } };
	uint64_t v;

	map_both();
	for (unsigned k = 0; k < 4; k++)
		is_int(touch_on(seq[k].cpu, seq[k].addr), 8, "%s: fault %u on CPU %d", dn, k,
		       seq[k].cpu);
	pool_is(0, 0, "all four faulted");
	for (unsigned k = 0; k < 4; k++)
		ok(pm_access(mm, seq[k].addr, &v, 8, 0) == 8 && v == seq[k].addr,
		   "%s: page %u kept its data", dn, k);
	is_int(pm_munmap(mm, WIN, 8 * HP), 0, "%s: munmap", dn);
	pool_is(NPOOL, 0, "unmapped");
}

/* One fault: a list may hold a page nobody consumed; the counts and a new reservation see it
 * as free and promised. */
static void counts_exact(void)
{
	map_both();
	is_int(touch_on(0, WIN), 8, "%s: one fault", dn);
	pool_is(NPOOL - 1, NPOOL - 1, "one page consumed");
	is_int(pm_mmap(mm, WIN + 8 * HP, HP, RW, ANON_HUGE, NULL, 0), -ENOMEM,
	       "%s: a fifth reservation fails", dn);
	is_int(pm_munmap(mm, WIN + 4 * HP, 2 * HP), 0, "%s: munmap B", dn);
	pool_is(NPOOL - 1, 1, "B's reservations given back");
	is_int(pm_mmap(mm, WIN + 8 * HP, HP, RW, ANON_HUGE, NULL, 0), (long)(WIN + 8 * HP),
	       "%s: now a reservation fits", dn);
	is_int(touch_on(1, WIN + 8 * HP), 8, "%s: and its fault on CPU 1", dn);
	is_int(touch_on(1, WIN + HP), 8, "%s: A's second page on CPU 1", dn);
	pool_is(NPOOL - 3, 0, "three faulted");
	is_int(pm_munmap(mm, WIN, 9 * HP), 0, "%s: munmap", dn);
	pool_is(NPOOL, 0, "unmapped");
}

int main(void)
{
	static void (*const cases[])(void) = { other_cpu_list, counts_exact };

	plan_no_plan();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		diag("one CPU: both lists are one");
	for (unsigned i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		for (unsigned j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
			start(i);
			cases[j]();
			finish();
		}
	return done_testing();
}
