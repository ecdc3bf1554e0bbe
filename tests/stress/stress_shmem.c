// SPDX-License-Identifier: MIT
/*
 * stress_shmem.c - many threads fault, write, read and pin one shmem object through several
 * address spaces while another thread truncates and re-extends it.
 *
 * Object: S pages, max_bytes L pages (K < L < S). Indexes [0, K) are never truncated: each
 * data thread owns the indexes i with i % NDATA == its number there, writes them (through any
 * shared mapping) and reads them back (through any other). Any thread may fault any index
 * (overlapping) without touching data. Indexes [K, S) are truncated and re-extended all the
 * time; there threads fault, pin and get pages (whose contents stay zero: nobody writes them)
 * and one thread writes private COW copies through a MAP_PRIVATE mapping.
 *
 * Several times a run every thread pauses and the main thread checks, on the quiescent
 * machine: pm_machine_check(); the limit; the data of [0, K); that no page is in two slots;
 * and that no mapping (shared, or private for a non-anonymous page) holds a page that is not
 * the cache's page at that index. At the end every frame must be back.
 *
 * Replay: -s SEED or PM_TEST_SEED (the thread interleaving is not replayed, the choices are).
 * Duration: PM_STRESS_SECONDS (default 2), split between the modern fault path and
 * PM_KNOB_SHMEM_LOCK_TWICE.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG ((unsigned long)PM_PAGE_SIZE)
#define RW (PM_PROT_READ | PM_PROT_WRITE)

enum {
	S = 512,  /* object size, pages */
	K = 256,  /* never truncated below this */
	L = 384,  /* max_bytes, pages */
	NMM = 3,  /* address spaces with a shared mapping */
	NDATA = 3,
	NUP = 2,
	NWORKERS = NDATA + NUP + 2, /* + private writer + truncator */
	EPOCHS = 3,
};

struct ctx {
	struct pm_machine *m;
	struct pm_shmem *f;
	struct pm_mm *mm[NMM], *priv;
	unsigned long addr[NMM], paddr;
	uint64_t last[K];		/* the word each data page holds; owner-written */
	struct pmt_gate gate;		/* the pauses for quiescent checks */
	uint64_t seed;
};

struct worker {
	struct ctx *c;
	int id;
	uint64_t rng;
	long ops, errors, bad_data, bad_zero, sigbus;
	uint64_t buf[PM_PAGE_SIZE / 8], rbuf[PM_PAGE_SIZE / 8];
};

static void werr(struct worker *w, const char *what, unsigned long idx, long r)
{
	if (!w->errors++)
		diag("worker %d: %s at index %lu: %ld", w->id, what, idx, r);
}

static void data_op(struct worker *w)
{
	struct ctx *c = w->c;
	unsigned r = tap_rand(&w->rng) % 8;

	if (r < 5) {
		unsigned long i = (tap_rand(&w->rng) % (K / NDATA)) * NDATA + w->id;
		int j = tap_rand(&w->rng) % NMM, k = tap_rand(&w->rng) % NMM;
		uint64_t v = (uint64_t)(w->id + 1) << 56 | (uint64_t)++w->ops << 16 | i;
		long e;

		if (i >= K)
			return;
		pmt_fill_words(w->buf, v);
		e = pm_access(c->mm[j], c->addr[j] + i * PG, w->buf, PG, 1);
		if (e != (long)PG) {
			werr(w, "data write", i, e);
			return;
		}
		c->last[i] = v;
		e = pm_access(c->mm[k], c->addr[k] + i * PG, w->rbuf, PG, 0);
		if (e != (long)PG || !pmt_page_all(w->rbuf, v)) {
			if (!w->bad_data++)
				diag("worker %d: index %lu reads %#llx (%ld), wrote %#llx",
				     w->id, i, (unsigned long long)w->rbuf[0], e,
				     (unsigned long long)v);
		}
	} else {
		/* Fault any index, overlapping the others, without touching data. */
		unsigned long i = tap_rand(&w->rng) % (r == 5 ? K : S);
		int j = tap_rand(&w->rng) % NMM;
		int e = pm_fault(c->mm[j], c->addr[j] + i * PG,
				 tap_rand(&w->rng) & 1 ? PM_FAULT_WRITE : 0);

		w->ops++;
		if (e == -EFAULT && i >= K)
			w->sigbus++;
		else if (e)
			werr(w, "fault", i, e);
	}
}

static void upper_op(struct worker *w)
{
	struct ctx *c = w->c;
	unsigned long i = K + tap_rand(&w->rng) % (S - K);
	int j = tap_rand(&w->rng) % NMM;
	unsigned long a = c->addr[j] + i * PG;
	unsigned r = tap_rand(&w->rng) % 6;
	struct pm_page *p = NULL;
	long e;

	w->ops++;
	switch (r) {
	case 0:
	case 1:
		e = pm_fault(c->mm[j], a, r ? PM_FAULT_WRITE : 0);
		break;
	case 2:
		e = pm_pin_user_pages_fast(c->mm[j], a, 1, PM_FOLL_LONGTERM, &p);
		break;
	case 3:
		e = pm_pin_user_pages_fast(c->mm[j], a, 1, PM_FOLL_WRITE, &p);
		break;
	case 4:
		e = pm_pin_user_pages(c->mm[j], a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &p);
		break;
	default:
		e = pm_get_user_pages_fast(c->mm[j], a, 1, 0, &p);
		break;
	}
	if (e == -EFAULT) {
		w->sigbus++;
		return;
	}
	if (r < 2) {
		if (e)
			werr(w, "upper fault", i, e);
		return;
	}
	if (e != 1) {
		werr(w, "upper pin/get", i, e);
		return;
	}
	/* Nobody writes these pages: a pinned page reads zero even if truncated meanwhile. */
	if (!pmt_page_all(pm_page_address(p), 0))
		w->bad_zero++;
	sched_yield();
	if (!pmt_page_all(pm_page_address(p), 0))
		w->bad_zero++;
	if (r == 5)
		pm_put_page(p);
	else
		pm_unpin_user_page(p);
}

static void private_op(struct worker *w)
{
	struct ctx *c = w->c;
	unsigned long i = K + tap_rand(&w->rng) % (S - K);
	uint64_t v = 0x7fULL << 56 | (uint64_t)++w->ops << 16 | i;
	long e;

	pmt_fill_words(w->buf, v);
	e = pm_access(c->priv, c->paddr + i * PG, w->buf, PG, 1);
	if (e == -EFAULT) {
		w->sigbus++;
		return;
	}
	if (e != (long)PG) {
		werr(w, "private write", i, e);
		return;
	}
	e = pm_access(c->priv, c->paddr + i * PG, w->rbuf, PG, 0);
	if (e == -EFAULT) {
		w->sigbus++;
		return;
	}
	/* Our copy, or - truncated and re-grown meanwhile - the object's zero page. */
	if (e != (long)PG || !(pmt_page_all(w->rbuf, v) || pmt_page_all(w->rbuf, 0))) {
		if (!w->bad_data++)
			diag("private: index %lu reads %#llx (%ld), wrote %#llx", i,
			     (unsigned long long)w->rbuf[0], e, (unsigned long long)v);
	}
}

static void truncate_op(struct worker *w)
{
	struct ctx *c = w->c;
	unsigned long sz = K + tap_rand(&w->rng) % (S - K + 1);
	int e;

	w->ops++;
	e = pm_shmem_truncate(c->f, sz * PG);
	if (e)
		werr(w, "truncate", sz, e);
	if (tap_rand(&w->rng) & 1)
		sched_yield();
	e = pm_shmem_truncate(c->f, S * PG);
	if (e)
		werr(w, "re-extend", S, e);
}

static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	do {
		if (w->id < NDATA)
			data_op(w);
		else if (w->id < NDATA + NUP)
			upper_op(w);
		else if (w->id == NDATA + NUP)
			private_op(w);
		else
			truncate_op(w);
	} while (pmt_gate_point(&w->c->gate));
	return NULL;
}

static unsigned long page_pfn(struct pm_mm *mm, unsigned long a, bool *anon)
{
	struct pm_page *p = NULL;
	unsigned long pfn;

	if (pm_get_user_pages(mm, a, 1, PM_FOLL_NOFAULT, &p) != 1)
		return ULONG_MAX;
	pfn = pm_page_to_pfn(p);
	if (anon)
		*anon = pm_folio_test_anon(pm_page_folio(p));
	pm_put_page(p);
	return pfn;
}

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

struct verdict {
	long check, limit, size, data, fault, stale, dup, exact;
};

/* On the quiescent machine: the invariants listed at the top. */
static void quiescent_check(struct ctx *c, struct verdict *v)
{
	static unsigned long pfns[S], sorted[S];
	static uint64_t buf[PM_PAGE_SIZE / 8];
	struct pm_mm *ref;
	unsigned long n = 0;
	long ra;

	pm_rcu_barrier();
	if (pm_machine_check(c->m))
		v->check++;
	if (pm_shmem_nr_pages(c->f) > L) {
		diag("%lu pages in the cache, limit %d", pm_shmem_nr_pages(c->f), L);
		v->limit++;
	}
	v->size += pm_shmem_size(c->f) != S * PG;
	for (unsigned long i = 0; i < K; i++)
		for (int j = 0; j < NMM; j++)
			if (pm_access(c->mm[j], c->addr[j] + i * PG, buf, PG, 0) != (long)PG ||
			    !pmt_page_all(buf, c->last[i])) {
				if (!v->data)
					diag("index %lu in mm %d: %#llx, want %#llx", i, j,
					     (unsigned long long)buf[0],
					     (unsigned long long)c->last[i]);
				v->data++;
			}
	ref = pm_mm_create(c->m);
	ASSERT_TRUE(ref != NULL);
	ra = pm_mmap(ref, 0, S * PG, PM_PROT_READ, PM_MAP_SHARED, c->f, 0);
	ASSERT_TRUE(ra > 0);
	for (unsigned long i = 0; i < S; i++) {
		int e = pm_fault(ref, ra + i * PG, 0);
		bool anon = false;

		pfns[i] = ULONG_MAX;
		if (e == 0)
			pfns[i] = page_pfn(ref, ra + i * PG, NULL);
		else if (e != -EFAULT || i < K)
			v->fault++;
		if (pfns[i] != ULONG_MAX)
			sorted[n++] = pfns[i];
		for (int j = 0; j < NMM; j++) {
			unsigned long p = page_pfn(c->mm[j], c->addr[j] + i * PG, NULL);

			if (p != ULONG_MAX && p != pfns[i]) {
				if (!v->stale)
					diag("mm %d maps frame %lu at index %lu, the cache has %lu",
					     j, p, i, pfns[i]);
				v->stale++;
			}
		}
		{
			unsigned long p = page_pfn(c->priv, c->paddr + i * PG, &anon);

			if (p != ULONG_MAX && !anon && p != pfns[i]) {
				if (!v->stale)
					diag("the private mapping maps frame %lu at index %lu, the "
					     "cache has %lu", p, i, pfns[i]);
				v->stale++;
			}
		}
	}
	qsort(sorted, n, sizeof(sorted[0]), cmp_ul);
	for (unsigned long i = 1; i < n; i++)
		v->dup += sorted[i] == sorted[i - 1];
	/* Every index was faulted: holes filled up to the limit exactly. */
	if (pm_shmem_nr_pages(c->f) != L) {
		diag("after filling every hole: %lu pages, limit %d", pm_shmem_nr_pages(c->f), L);
		v->exact++;
	}
	pm_mm_destroy(ref);
}

static void run(unsigned knobs, double seconds, uint64_t seed)
{
	struct ctx *c = calloc(1, sizeof(*c));
	struct worker *w = calloc(NWORKERS, sizeof(*w));
	pthread_t t[NWORKERS];
	struct verdict v = { 0 };
	long ops = 0, errors = 0, bad_data = 0, bad_zero = 0, sigbus = 0;
	size_t free0;
	char what[48];

	snprintf(what, sizeof(what), "stress shmem (knobs %#x)", knobs);
	ASSERT_TRUE(c && w);
	c->m = pmt_machine(128, knobs);
	free0 = pm_machine_free_pages(c->m);
	c->f = pm_shmem_create(c->m, S * PG, L * PG);
	ASSERT_TRUE(c->f != NULL);
	for (int j = 0; j < NMM; j++) {
		c->mm[j] = pm_mm_create(c->m);
		ASSERT_TRUE(c->mm[j] != NULL);
		c->addr[j] = pm_mmap(c->mm[j], 0, S * PG, RW, PM_MAP_SHARED, c->f, 0);
		ASSERT_TRUE((long)c->addr[j] > 0);
	}
	c->priv = pm_mm_create(c->m);
	ASSERT_TRUE(c->priv != NULL);
	c->paddr = pm_mmap(c->priv, 0, S * PG, RW, PM_MAP_PRIVATE, c->f, 0);
	ASSERT_TRUE((long)c->paddr > 0);
	/* Fill [0, K) so that data pages never need a new page (the limit cannot refuse them). */
	for (unsigned long i = 0; i < K; i++) {
		static uint64_t buf[PM_PAGE_SIZE / 8];

		c->last[i] = 0xabULL << 56 | i;
		pmt_fill_words(buf, c->last[i]);
		ASSERT_EQ(pm_access(c->mm[0], c->addr[0] + i * PG, buf, PG, 1), PG);
	}
	pmt_gate_init(&c->gate, NWORKERS);
	for (int i = 0; i < NWORKERS; i++) {
		w[i].c = c;
		w[i].id = i;
		w[i].rng = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1)) ^ knobs;
		ASSERT_EQ(pthread_create(&t[i], NULL, worker_fn, &w[i]), 0);
	}
	for (int e = 0; e < EPOCHS; e++) {
		pmt_wait_until(tap_now() + seconds / EPOCHS, NULL);
		pmt_gate_pause(&c->gate);
		quiescent_check(c, &v);
		pmt_gate_resume(&c->gate, e == EPOCHS - 1);
	}
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(t[i], NULL);
		ops += w[i].ops;
		errors += w[i].errors;
		bad_data += w[i].bad_data;
		bad_zero += w[i].bad_zero;
		sigbus += w[i].sigbus;
	}
	diag("%s: %ld operations, %ld SIGBUS (beyond the size or the limit)", what, ops, sigbus);
	is_int(errors, 0, "%s: no unexpected error", what);
	is_int(bad_data, 0, "%s: data in untruncated ranges intact", what);
	is_int(bad_zero, 0, "%s: pinned pages of truncated ranges stay valid (zero)", what);
	is_int(v.check, 0, "%s: pm_machine_check at every pause", what);
	is_int(v.limit, 0, "%s: never more pages than max_bytes", what);
	is_int(v.size, 0, "%s: size restored at every pause", what);
	is_int(v.data, 0, "%s: every mapping reads the owners' data", what);
	is_int(v.fault, 0, "%s: faults fail only beyond the limit", what);
	is_int(v.stale, 0, "%s: no mapped page that is not the cache's", what);
	is_int(v.dup, 0, "%s: no page in two slots", what);
	is_int(v.exact, 0, "%s: filling every hole stops exactly at the limit", what);
	pmt_gate_destroy(&c->gate);
	for (int j = 0; j < NMM; j++)
		pm_mm_destroy(c->mm[j]);
	pm_mm_destroy(c->priv);
	pm_shmem_put(c->f);
	pmt_end(c->m, free0,
		&(const struct pmt_end_names){ "every frame returned", NULL,
					       "pm_machine_check at the end" },
		what);
	free(w);
	free(c);
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);
	double seconds = tap_seconds(2);

	plan_no_plan();
	run(0, seconds / 3, seed);
	run(PM_KNOB_SHMEM_LOCK_TWICE, seconds / 3, seed);
	run(PM_KNOB_SHMEM_TREE_LOCK, seconds / 3, seed);
	return done_testing();
}
