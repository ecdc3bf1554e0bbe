// SPDX-License-Identifier: MIT
/*
 * test_machine.c - a machine's life: pm_machine_create() argument checks, totals, knobs,
 * counters that start at zero and sum over threads, pm_fail_nth() and pm_strerror().
 */
#include <errno.h>
#include <pthread.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)

static void test_create_errors(void)
{
	static const size_t bad_sizes[] = { 1, 4096, 3 * MiB, 2 * MiB + 4096, 64 * MiB - 4096 };
	static const unsigned bad_knobs[] = { 0x4000, 0x2000, 0x80000000u, PM_KNOB_ALL + 1 };
	struct pm_config c;

	for (unsigned i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		c = (struct pm_config){ .mem_bytes = bad_sizes[i] };
		errno = 0;
		ok(!pm_machine_create(&c) && errno == EINVAL,
		   "mem_bytes %zu (not a multiple of 2 MiB) -> NULL, EINVAL", bad_sizes[i]);
	}
	for (unsigned i = 0; i < sizeof(bad_knobs) / sizeof(bad_knobs[0]); i++) {
		c = (struct pm_config){ .mem_bytes = 8 * MiB, .knobs = bad_knobs[i] };
		errno = 0;
		ok(!pm_machine_create(&c) && errno == EINVAL,
		   "unknown knob bits %#x -> NULL, EINVAL", bad_knobs[i]);
	}
	/* Both wrong at once is still EINVAL. */
	c = (struct pm_config){ .mem_bytes = 3 * MiB, .knobs = 0x100 };
	errno = 0;
	ok(!pm_machine_create(&c) && errno == EINVAL, "bad size and bad knobs -> EINVAL");
}

static void test_totals(void)
{
	static const size_t sizes[] = { 2 * MiB, 4 * MiB, 64 * MiB, 130 * MiB };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct pm_config c = { .mem_bytes = sizes[i] };
		struct pm_machine *m = pm_machine_create(&c);

		if (!ok(m != NULL, "create %zu MiB", sizes[i] / MiB)) {
			skip(4, "no machine");
			continue;
		}
		is_int(pm_machine_total_pages(m), sizes[i] / 4096, "total pages of %zu MiB",
		       sizes[i] / MiB);
		/* Every frame but the shared zero page is free (internal.h invariant (T)). */
		is_int(pm_machine_free_pages(m), sizes[i] / 4096 - 1,
		       "a fresh machine has every frame free but the zero page");
		is_int(pm_machine_knobs(m), 0, "no knobs by default");
		is_int(pm_machine_check(m), 0, "pm_machine_check on a fresh machine");
		pm_machine_destroy(m);
	}

	/* NULL config and mem_bytes == 0 both mean 1 GiB. */
	struct pm_machine *m = pm_machine_create(NULL);

	if (ok(m != NULL, "create with NULL config")) {
		is_int(pm_machine_total_pages(m), (1UL << 30) / 4096, "NULL config: 1 GiB");
		pm_machine_destroy(m);
	} else {
		skip(1, "no machine");
	}
	struct pm_config c0 = { 0 };

	m = pm_machine_create(&c0);
	if (ok(m != NULL, "create with mem_bytes 0")) {
		is_int(pm_machine_total_pages(m), (1UL << 30) / 4096, "mem_bytes 0: 1 GiB");
		pm_machine_destroy(m);
	} else {
		skip(1, "no machine");
	}
}

static void test_knobs_and_stats_start(void)
{
	struct pm_config c = { .mem_bytes = 16 * MiB, .knobs = PM_KNOB_ALL };
	struct pm_machine *m = pm_machine_create(&c);
	struct pm_stats zero, s;

	ASSERT_TRUE(m);
	is_int(pm_machine_knobs(m), PM_KNOB_ALL, "knobs are kept as given");
	memset(&zero, 0, sizeof(zero));
	memset(&s, 0xa5, sizeof(s));
	pm_machine_stats(m, &s);
	ok(!memcmp(&s, &zero, sizeof(s)), "every counter is zero on a fresh machine");
	pm_machine_destroy(m);

	for (unsigned k = 1; k <= PM_KNOB_ALL; k <<= 1) {
		if (!(k & PM_KNOB_ALL))
			continue; /* a bit no knob has yet: bad_knobs above */
		c = (struct pm_config){ .mem_bytes = 4 * MiB, .knobs = k };
		m = pm_machine_create(&c);
		ok(m && pm_machine_knobs(m) == k, "knob %#x alone is accepted", k);
		if (m)
			pm_machine_destroy(m);
	}
}

/* Counters are per thread and summed on read: events of exited threads still count. */
struct fault_arg {
	struct pm_mm *mm;
	unsigned long addr;
	int n;
	int bad;
};

static void *fault_thread(void *p)
{
	struct fault_arg *a = p;

	for (int i = 0; i < a->n; i++)
		if (pm_fault(a->mm, a->addr + (unsigned long)i * 4096, PM_FAULT_WRITE) != 0)
			a->bad++;
	return NULL;
}

static void test_stats_sum_threads(void)
{
	struct pm_config c = { .mem_bytes = 16 * MiB };
	struct pm_machine *m = pm_machine_create(&c);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct fault_arg args[3];
	pthread_t th[3];
	long addr;

	ASSERT_TRUE(mm);
	/* 2 MiB (so 2 MiB-aligned, one PTE table), no THP without MADV_HUGEPAGE. */
	addr = pm_mmap(mm, 0, 2 * MiB, PM_PROT_READ | PM_PROT_WRITE,
		       PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(addr > 0);
	/* Build the page tables first, so that the threads never race to allocate them. */
	ASSERT_EQ(pm_fault(mm, (unsigned long)addr + 2 * MiB - 4096, PM_FAULT_WRITE), 0);
	struct pm_stats s0 = pmt_stats(m);

	for (int i = 0; i < 3; i++) {
		args[i] = (struct fault_arg){ mm, (unsigned long)addr + i * 64 * 4096UL, 64, 0 };
		ASSERT_EQ(pthread_create(&th[i], NULL, fault_thread, &args[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	struct pm_stats s1 = pmt_stats(m);

	is_int(args[0].bad + args[1].bad + args[2].bad, 0, "192 write faults in 3 threads succeed");
	is_int(s1.faults - s0.faults, 192, "faults counted by 3 exited threads sum to 192");
	/* A second round on the same (now present) pages: pm_fault still counts calls. */
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, fault_thread, &args[i]), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ok(pmt_stats(m).faults - s0.faults >= 192, "counters never go backwards");

	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free pages back after destroy");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

/* Two machines share nothing: faults in one do not move the other's free count or stats. */
static void test_two_machines(void)
{
	struct pm_config c = { .mem_bytes = 8 * MiB };
	struct pm_machine *a = pm_machine_create(&c), *b = pm_machine_create(&c);
	size_t fa, fb;

	ASSERT_TRUE(a && b);
	fa = pm_machine_free_pages(a);
	fb = pm_machine_free_pages(b);
	struct pm_mm *mm = pm_mm_create(a);

	ASSERT_TRUE(mm);
	long addr = pm_mmap(mm, 0, 16 * 4096, PM_PROT_READ | PM_PROT_WRITE,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

	ASSERT_TRUE(addr > 0);
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(pm_fault(mm, (unsigned long)addr + i * 4096UL, PM_FAULT_WRITE), 0);
	ok(pm_machine_free_pages(a) < fa - 16, "faults take frames of their own machine");
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(b), fb, "the other machine's free count does not move");
	is_int(pmt_stats(b).faults, 0, "the other machine counts no fault");
	pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(a), fa, "machine a: free pages back");
	is_int(pm_machine_check(a), 0, "machine a: check");
	is_int(pm_machine_check(b), 0, "machine b: check");
	pm_machine_destroy(a);
	pm_machine_destroy(b);
}

static void test_fail_nth(void)
{
	struct pm_config c = { .mem_bytes = 8 * MiB };
	struct pm_machine *m = pm_machine_create(&c);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm;

	ASSERT_TRUE(m);
	/* One-shot: the first allocation from now fails, the next succeeds. */
	pm_fail_nth(m, 1);
	errno = 0;
	mm = pm_mm_create(m);
	ok(!mm && errno == ENOMEM, "pm_fail_nth(1): pm_mm_create -> NULL, ENOMEM");
	is_int(pmt_stats(m).alloc_failures, 1, "alloc_failures counts the injected failure");
	mm = pm_mm_create(m);
	ok(mm != NULL, "after the injected failure, allocations succeed again");
	if (mm)
		pm_mm_destroy(mm);

	/* Failing the n-th allocation for growing n: create fails until n passes its needs. */
	int n, fails = 0;

	for (n = 1; n < 64; n++) {
		pm_fail_nth(m, n);
		errno = 0;
		mm = pm_mm_create(m);
		if (mm)
			break;
		if (errno != ENOMEM)
			break;
		fails++;
	}
	pm_fail_nth(m, 0);
	ok(mm != NULL, "pm_mm_create succeeds once n is past its allocations (n = %d)", n);
	is_int(fails, n - 1, "every earlier n failed with ENOMEM");
	if (mm)
		pm_mm_destroy(mm);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "failed creates leak no frame");

	/* 0 turns injection off. */
	unsigned long f0 = pmt_stats(m).alloc_failures;

	pm_fail_nth(m, 2);
	pm_fail_nth(m, 0);
	for (int i = 0; i < 4; i++) {
		mm = pm_mm_create(m);
		ok(mm != NULL, "pm_fail_nth(0) turned injection off (create %d)", i);
		if (mm)
			pm_mm_destroy(mm);
	}
	is_int(pmt_stats(m).alloc_failures, f0, "no failure counted while off");

	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "free pages back at the end");
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
}

static void test_strerror(void)
{
	static const int errs[] = { EINVAL, EFAULT, ENOMEM, EOVERFLOW, EPERM, EBADF, EEXIST };
	const char *seen[sizeof(errs) / sizeof(errs[0])];
	bool distinct = true;

	for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const char *s = pm_strerror(-errs[i]);

		ok(s && *s, "pm_strerror(-%d) is a non-empty text", errs[i]);
		seen[i] = s;
		for (unsigned j = 0; j < i; j++)
			if (s && seen[j] && !strcmp(s, seen[j]))
				distinct = false;
	}
	ok(distinct, "each errno has its own text");
	ok(pm_strerror(0) != NULL, "pm_strerror(0) is a text");
	ok(pm_strerror(-9999) && *pm_strerror(-9999), "an unknown errno still gets a text");
}

int main(void)
{
	plan_no_plan();
	test_create_errors();
	test_totals();
	test_knobs_and_stats_start();
	test_stats_sum_threads();
	test_two_machines();
	test_fail_nth();
	test_strerror();
	return done_testing();
}
