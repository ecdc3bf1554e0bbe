// SPDX-License-Identifier: MIT
/*
 * test_regress_refcount_limit.c - behaviour at the refcount ceiling.
 *
 * src/mem/folio.c: "Refcount overflow is refused, never wrapped: try_get and ref_add fail (GUP
 * answers -ENOMEM, as Linux's try_grab_folio does) when the count would pass INT_MAX." GUP could
 * therefore drive a folio's refcount to exactly INT_MAX: ~2 million pins (1024 each) and then
 * plain gets, which takes a fraction of a second through the public API. Two problems followed
 * (the test pins and gets until GUP refuses, whatever ceiling GUP uses).
 *
 * 1. The lockless page-cache lookup (src/shmem/cache.c, pm__shmem_lookup) treats a try_get that
 *    keeps failing on a live folio as a hole ("folio = NULL") after 1000 tries. Its callers then
 *    act on a hole that is not there:
 *    - shmem_get_folio() allocates a page, finds the slot taken (-EEXIST) and retries - forever:
 *      a fault by any other mapping of that page spins and never returns (it should fail,
 *      e.g. -ENOMEM, as GUP does);
 *    - zero_partial_page() skips the page, so a truncate into that page leaves the bytes past
 *      the new size unzeroed, and growing the object again shows stale data (the contract says
 *      they read as zeros).
 * 2. Paths that add references with the unchecked folio_get_refs() wrap the count to INT_MIN:
 *    fork sharing the page (copy_pte_range), and the temporary reference of a COW copy
 *    (do_wp_page) - after which folio_put_refs()'s "old >= refs" assertion kills debug builds
 *    and GUP refuses the page (negative count) in release builds. Both run in a child process so
 *    that a crash is reported as a failure instead of ending the test.
 *
 * Suggested fix: stop GUP short of INT_MAX (leave headroom for mappings and temporary
 * references, e.g. refuse above INT_MAX - 2^24, or refuse at 2^30 as a "saturation" level), and
 * make pm__shmem_lookup() return an error the fault can report instead of a hole.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

/* Globals: objects stay reachable for LeakSanitizer whatever path the test takes. */
static struct pm_machine *m;
static struct pm_shmem *f;
static struct pm_mm *a, *b;
static struct pm_page *pinned; /* the page every pin and get was taken on */
static long npins, ngets;
static _Atomic int fault_done;

#define NMAP 512 /* the page is mapped this many times side by side: 512 pins per call */
static struct pm_page *batch[NMAP];

/* Map page 0 of @file NMAP times from @base (one VMA each); return the base. */
static long map_many(struct pm_mm *mm, struct pm_shmem *file, int type)
{
	long base = pm_mmap(mm, 0, NMAP * PG, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

	ASSERT_TRUE(base > 0);
	for (unsigned long i = 0; i < NMAP; i++)
		ASSERT_EQ(pm_mmap(mm, base + i * PG, PG, RW, type | PM_MAP_FIXED, file, 0),
			  (long)(base + i * PG));
	return base;
}

/* Pin and get the page mapped NMAP times at @base until GUP refuses (its ceiling). */
static void saturate(struct pm_mm *mm, unsigned long base)
{
	struct pm_page *p;
	long r;

	npins = ngets = 0;
	while ((r = pm_pin_user_pages_fast(mm, base, NMAP, 0, batch)) == NMAP)
		npins += r;
	if (r > 0) {
		pm_unpin_user_pages(batch, (unsigned long)r);
	}
	while (pm_pin_user_pages_fast(mm, base, 1, 0, &p) == 1)
		npins++;
	pinned = batch[0];
	while (pm_get_user_pages_fast(mm, base, 1, 0, &p) == 1)
		ngets++;
}

static void unsaturate(void)
{
	for (long i = 0; i < ngets; i++)
		pm_put_page(pinned);
	for (unsigned long i = 0; i < NMAP; i++)
		batch[i] = pinned;
	for (; npins >= NMAP; npins -= NMAP)
		pm_unpin_user_pages(batch, NMAP);
	pm_unpin_user_pages(batch, (unsigned long)npins);
	npins = ngets = 0;
}

static void *fault_thread(void *arg)
{
	char c;

	(void)arg;
	pm_access(b, (unsigned long)(uintptr_t)arg, &c, 1, 0);
	atomic_store(&fault_done, 1);
	return NULL;
}

/* Part 1: a shmem page at the ceiling, seen through the page cache. */
static void test_lookup(void)
{
	size_t free0 = pm_machine_free_pages(m);
	long xa, xb;
	pthread_t t;
	double until;
	uint64_t v = 0x1234567890abcdefULL, w = 0;

	f = pm_shmem_create(m, PG, 0);
	a = pm_mm_create(m);
	b = pm_mm_create(m);
	ASSERT_TRUE(f && a && b);
	xa = map_many(a, f, PM_MAP_SHARED);
	xb = pm_mmap(b, 0, PG, RW, PM_MAP_SHARED, f, 0);
	ASSERT_TRUE(xb > 0);
	for (unsigned off = 0; off < PG; off += sizeof(v))
		ASSERT_EQ(pm_access(a, xa + off, &v, sizeof(v), 1), (long)sizeof(v));
	saturate(a, xa);
	diag("%ld pins and %ld gets; refcount %d", npins, ngets,
	     pm_folio_ref_count(pm_page_folio(pinned)));
	ok(npins > 0 && pm_pin_user_pages_fast(a, xa, 1, 0, batch) < 0,
	   "GUP refuses further pins: the page is at GUP's ceiling");

	/* 1a. truncate into the page: bytes past the new size must read as zeros afterwards. */
	ASSERT_EQ(pm_shmem_truncate(f, 100), 0);
	ASSERT_EQ(pm_shmem_truncate(f, PG), 0);
	ASSERT_EQ(pm_access(a, xa + 2048, &w, sizeof(w), 0), (long)sizeof(w));
	is_int(w, 0, "truncate zeroed the tail of the partial page");

	/* 1b. another mapping faults the page in: it must return, whatever it answers. */
	ASSERT_EQ(pthread_create(&t, NULL, fault_thread, (void *)(uintptr_t)xb), 0);
	until = tap_now() + 2.0;
	while (!atomic_load(&fault_done) && tap_now() < until)
		usleep(1000);
	ok(atomic_load(&fault_done), "a fault on a page at the refcount ceiling returns");
	unsaturate(); /* lets a spinning fault finish */
	pthread_join(t, NULL);

	pm_mm_destroy(a);
	pm_mm_destroy(b);
	pm_shmem_put(f);
	pm_rcu_barrier();
	is_int(pm_machine_free_pages(m), free0, "part 1: every frame returned");
}

/* Run @fn in a child process. Return: its exit code, or 128 + signal. */
static int in_child(int (*fn)(void))
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(fn());
	ASSERT_TRUE(pid > 0);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static long xp;

/* A private mapping whose page-cache page is mapped read-only, at the ceiling. */
static void setup_private(void)
{
	char c;

	f = pm_shmem_create(m, PG, 0);
	a = pm_mm_create(m);
	ASSERT_TRUE(f && a);
	xp = map_many(a, f, PM_MAP_PRIVATE);
	for (unsigned long i = 0; i < NMAP; i++) /* maps the cache page read-only */
		ASSERT_EQ(pm_access(a, xp + i * PG, &c, 1, 0), 1);
	saturate(a, xp);
	diag("private: %ld pins and %ld gets; refcount %d", npins, ngets,
	     pm_folio_ref_count(pm_page_folio(pinned)));
}

static int child_fork(void)
{
	struct pm_mm *c = pm_mm_fork(a);

	if (!c)
		return 2;
	/* Exit code 1: the fork made the count negative. */
	return pm_folio_ref_count(pm_page_folio(pinned)) < 0 ? 1 : 0;
}

static int child_cow(void)
{
	uint64_t v = 1;

	if (pm_access(a, xp, &v, sizeof(v), 1) != (long)sizeof(v))
		return 2;
	return pm_folio_ref_count(pm_page_folio(pinned)) < 0 ? 1 : 0;
}

int main(void)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20 };
	int rc;

	plan(7);
	m = pm_machine_create(&cfg);
	ASSERT_TRUE(m);
	test_lookup();

	/* Part 2, in child processes: the parent's copy of the machine stays intact. */
	setup_private();
	rc = in_child(child_fork);
	diag("fork child: %s %d", rc >= 128 ? "killed by signal" : "exit", rc >= 128 ? rc - 128 : rc);
	is_int(rc, 0, "fork of a page at the ceiling neither wraps the refcount nor crashes");
	rc = in_child(child_cow);
	diag("COW child: %s %d", rc >= 128 ? "killed by signal" : "exit", rc >= 128 ? rc - 128 : rc);
	is_int(rc, 0, "a COW fault on a page at the ceiling neither wraps the refcount nor crashes");
	unsaturate();
	pm_mm_destroy(a);
	pm_shmem_put(f);
	pm_rcu_barrier();
	is_int(pm_machine_check(m), 0, "pm_machine_check");
	pm_machine_destroy(m);
	return done_testing();
}
