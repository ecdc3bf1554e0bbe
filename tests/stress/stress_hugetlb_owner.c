// SPDX-License-Identifier: MIT
/*
 * stress_hugetlb_owner.c - the owner of a private hugetlb mapping reads and writes its own
 * pages while another thread takes them from it in one of the two ways the contract allows:
 *
 *  fork      a thread forks the owner's address space and destroys the child, which does
 *            nothing, again and again. The pool holds exactly the mapping's pages, so the
 *            owner's first write after a fork finds nothing unpromised to copy into and must
 *            take the page back from the children (Linux's unmap_ref_private) and reuse it;
 *            its reads of a present page never fault.
 *  dontneed  a thread MADV_DONTNEEDs the mapping's one page again and again, with a pool of
 *            one page: each DONTNEED gives the page back and restores the reservation, so the
 *            owner's next fault finds its page or its reservation.
 *  pages     the same over a mapping of four pages, a pool of four, one page at a time, the
 *            owner threads bound to different CPUs: in the range design their faults take
 *            pages and reservations from their CPUs' lists, install by compare-and-swap
 *            into one PMD table and consume bytes of one reservation map, while the taker's
 *            reads of the pool fold the lists back (mem/hugetlb_pool.c, "Per-CPU lists"),
 *            and a fault that finds the free list empty folds them too.
 *
 * "The mapping's own faults never fail" (the contract, PM_MAP_HUGETLB): every owner access
 * that does not copy its whole length is counted, and the test fails if there is one. Two
 * owner threads, each with words of its own at random offsets, write and read back, so that
 * two faults of the owner on one page race too. In the fork case the data must also survive
 * (nobody else writes); in the dontneed case a word reads as its last value or as zero.
 * After the run: the pool is whole and pm_machine_check() passes.
 *
 * Replay: -s SEED or PM_TEST_SEED (the choices; not the interleaving).
 * Duration: PM_STRESS_SECONDS (default 2) for each case; -c fork or -c dontneed runs one.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define HPRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB)

enum {
	NOWNER = 2, /* owner threads */
	NSLOT = 16, /* words each owner thread keeps */
};

enum mode { FORK, DONTNEED, PAGES };
static const char *const mode_names[] = { "fork", "dontneed", "pages" };

struct ctx {
	enum mode mode;
	struct pm_machine *m;
	struct pm_mm *mm;
	unsigned long addr, len;
	_Atomic bool stop;
	atomic_long errors; /* what the other thread got that it should not (pmt_error) */
};

struct owner {
	struct ctx *c;
	int id;
	uint64_t rng;
	unsigned long off[NSLOT]; /* byte offset of each word in the mapping */
	uint64_t val[NSLOT];	  /* what it holds (or 0 after a DONTNEED) */
	long ops, reads, writes, failed, bad_data;
};

static void owner_fail(struct owner *o, const char *what, unsigned long off, long r)
{
	if (!o->failed++)
		diag("owner %d: %s at +%#lx: %ld", o->id, what, off, r);
}

static void *owner_fn(void *arg)
{
	struct owner *o = arg;
	struct ctx *c = o->c;

	if (c->mode == PAGES) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o->id, &set);
		(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		unsigned s = tap_rand(&o->rng) % NSLOT;
		unsigned long a = c->addr + o->off[s];
		uint64_t v;
		long r;

		o->ops++;
		if (tap_rand(&o->rng) & 1) {
			v = pmt_mix(o->rng, (uint64_t)o->ops) | 1; /* never 0 */
			r = pm_access(c->mm, a, &v, sizeof(v), 1);
			o->writes++;
			if (r != (long)sizeof(v)) {
				owner_fail(o, "write", o->off[s], r);
				continue;
			}
			o->val[s] = v;
			continue;
		}
		v = 0x5555555555555555ULL;
		r = pm_access(c->mm, a, &v, sizeof(v), 0);
		o->reads++;
		if (r != (long)sizeof(v)) {
			owner_fail(o, "read", o->off[s], r);
			continue;
		}
		if (v == o->val[s])
			continue;
		if (c->mode != FORK && v == 0) {
			o->val[s] = 0; /* the page was given back */
			continue;
		}
		if (!o->bad_data++)
			diag("owner %d: +%#lx reads %#llx, last written %#llx", o->id, o->off[s],
			     (unsigned long long)v, (unsigned long long)o->val[s]);
	}
	return NULL;
}

/* The other thread: fork and destroy, or DONTNEED. Returns its operation count. */
static void *taker_fn(void *arg)
{
	struct ctx *c = arg;
	long n = 0;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (c->mode == FORK) {
			struct pm_mm *child = pm_mm_fork(c->mm);

			if (!child) {
				pmt_error(&c->errors, "fork: NULL, errno %d", errno);
				continue;
			}
			if (n & 1)
				sched_yield(); /* a child that lives a little longer */
			pm_mm_destroy(child);
		} else {
			size_t pfree = 1;
			int r;

			/* Mostly once the owner has its page again (nothing else takes a
			 * pool page), so that most DONTNEEDs give one back; else at once. */
			for (int k = 0; (n & 3) && pfree && k < 1000; k++) {
				pm_hugetlb_pool(c->m, NULL, &pfree);
				if (pfree)
					sched_yield();
			}
			if (c->mode == PAGES)
				r = pm_madvise(c->mm, c->addr + (unsigned long)(n % 7 % 4) * HP, HP,
					       PM_MADV_DONTNEED);
			else
				r = pm_madvise(c->mm, c->addr, c->len, PM_MADV_DONTNEED);
			if (r)
				pmt_error(&c->errors, "madvise(DONTNEED): %d", r);
		}
		n++;
	}
	return (void *)n;
}

static void run_case(enum mode mode, double secs, uint64_t seed)
{
	const char *name = mode_names[mode];
	size_t npages = mode == FORK ? 2 : mode == PAGES ? 4 : 1;
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .nr_hugepages = npages };
	struct ctx *c = calloc(1, sizeof(*c));
	struct owner *o = calloc(NOWNER, sizeof(*o));
	long ops = 0, reads = 0, writes = 0, failed = 0, bad_data = 0, taken;
	pthread_t t[NOWNER], taker;
	size_t free0, total = 0, pfree = 0;
	struct pm_stats st;
	void *ret;
	long a;

	ASSERT_TRUE(c && o);
	c->mode = mode;
	c->m = pm_machine_create(&cfg);
	if (!c->m)
		diag("pm_machine_create(64 MiB, %zu hugepages): errno %d", npages, errno);
	ASSERT_TRUE(c->m != NULL);
	free0 = pm_machine_free_pages(c->m);
	c->mm = pm_mm_create(c->m);
	ASSERT_TRUE(c->mm != NULL);
	c->len = npages * HP;
	a = pm_mmap(c->mm, 0, c->len, RW, HPRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	c->addr = (unsigned long)a;
	for (int i = 0; i < NOWNER; i++) {
		o[i].c = c;
		o[i].id = i;
		o[i].rng = pmt_mix(seed, (uint64_t)(mode * NOWNER + i + 1));
		/* Distinct words: slot s of thread i lies in region s * NOWNER + i of the mapping,
		 * so each thread's words are spread over every page. */
		for (unsigned s = 0; s < NSLOT; s++) {
			unsigned long words = c->len / 8 / (NSLOT * NOWNER);

			o[i].off[s] = ((s * NOWNER + (unsigned long)i) * words +
				       tap_rand(&o[i].rng) % words) * 8;
		}
	}
	/* Every page faulted in by a write: the mapping's reservations are consumed. */
	for (unsigned long off = 0; off < c->len; off += HP) {
		uint64_t z = 0;

		ASSERT_EQ(pm_access(c->mm, c->addr + off, &z, sizeof(z), 1), sizeof(z));
	}
	ASSERT_EQ(pm_hugetlb_pool(c->m, &total, &pfree), 0);
	is_int(pfree, 0, "%s: the mapping holds every pool page", name);
	for (int i = 0; i < NOWNER; i++)
		ASSERT_EQ(pthread_create(&t[i], NULL, owner_fn, &o[i]), 0);
	ASSERT_EQ(pthread_create(&taker, NULL, taker_fn, c), 0);
	pmt_wait_until(tap_now() + secs, NULL);
	atomic_store(&c->stop, true);
	ASSERT_EQ(pthread_join(taker, &ret), 0);
	taken = (long)ret;
	for (int i = 0; i < NOWNER; i++) {
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
		ops += o[i].ops;
		reads += o[i].reads;
		writes += o[i].writes;
		failed += o[i].failed;
		bad_data += o[i].bad_data;
	}
	pm_machine_stats(c->m, &st);
	diag("%s: %.1f s, %ld owner accesses (%ld reads, %ld writes), %ld failed; %ld %s; "
	     "hugetlb_faults %lu, cow_copies %lu, cow_reuses %lu",
	     name, secs, ops, reads, writes, failed, taken, mode == FORK ? "forks" : "DONTNEEDs",
	     st.hugetlb_faults, st.cow_copies, st.cow_reuses);
	ok(taken > 0 && ops > 0, "%s: both sides ran", name);
	is_int(failed, 0, "%s: no owner access failed", name);
	is_int(bad_data, 0, "%s: every owner word reads what the owner wrote%s", name,
	       mode != FORK ? " (or zero)" : "");
	is_int(atomic_load(&c->errors), 0, "%s: every %s succeeded", name,
	       mode == FORK ? "fork" : "DONTNEED");
	pm_mm_destroy(c->mm);
	pm_rcu_barrier();
	ASSERT_EQ(pm_hugetlb_pool(c->m, &total, &pfree), 0);
	ok(total == npages && pfree == npages, "%s: the pool is whole again (%zu of %zu free)",
	   name, pfree, total);
	pmt_end(c->m, free0, &pmt_end_after_run, name);
	free(o);
	free(c);
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);
	double secs = tap_seconds(2);
	const char *only = NULL;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-c"))
			only = argv[i + 1];
	if (only && strcmp(only, "fork") && strcmp(only, "dontneed") && strcmp(only, "pages")) {
		printf("Bail out! -c %s: the cases are fork, dontneed and pages\n", only);
		return 2;
	}
	plan_no_plan();
	for (enum mode md = FORK; md <= PAGES; md++)
		if (!only || !strcmp(only, mode_names[md]))
			run_case(md, secs, seed);
	return done_testing();
}
