// SPDX-License-Identifier: MIT
/*
 * stress_fork.c - threads pin pages of a parent address space with the fast path (R/W and
 * R/O, long-term or not; some slow pins) while another thread forks the parent again and
 * again and the children write their copies.
 *
 * The invariant is that a pinned page is never shared with a child:
 *  - data the parent side writes while it holds a pin (through a R/W pin, or with pm_access
 *    for a R/O pin) is seen through the pin and in the parent's memory, and never in a child;
 *  - a child's writes never appear through the parent's pins;
 *  - every child reads, page by page, exactly what the parent held at the fork, until it
 *    writes its own data;
 *  - at every pause (all threads quiescent, pins still held): no held pin's frame is mapped by
 *    a child, and pm_machine_check() passes.
 * Writes to parent pages happen under a test-level read lock and the fork under its write
 * lock, so that a fork copies a stable page (in Linux, DMA into a page while fork copies it
 * is the device's race; here it would be a data race in the test). The pins themselves, the
 * fast walks and fork's write-protection race freely.
 *
 * Replay: -s SEED or PM_TEST_SEED. Duration: PM_STRESS_SECONDS (default 2).
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
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

enum {
	NSMALL = 64,		 /* 4 KiB pages */
	NP = NSMALL + 512,	 /* + one THP */
	NPIN = 3,		 /* pinning threads */
	NWORKERS = NPIN + 1,	 /* + the forker */
	NCHILD = 2,		 /* children kept alive */
	EPOCHS = 4,
};

struct ctx {
	struct pm_machine *m;
	struct pm_mm *parent;
	unsigned long small, thp;
	_Atomic uint64_t tok[NP];     /* what parent page i holds (written under fork_lock R) */
	pthread_rwlock_t fork_lock;
	struct pm_mm *child[NCHILD];  /* owned by the forker */
	uint64_t expect[NCHILD][NP];  /* what each child's page holds */
	_Atomic unsigned long pinned[NPIN]; /* frame each pinner holds a pin on, or ULONG_MAX */
	struct pmt_gate gate;	      /* the pauses for quiescent checks */
};

struct worker {
	struct ctx *c;
	int id;
	uint64_t rng;
	long ops, pins, forks, errors, bad_pin, bad_mem, bad_child, bad_shared;
	struct pm_page *held;	/* the pin held at a pause, for the main thread's check */
	unsigned long held_idx;
	uint64_t buf[PM_PAGE_SIZE / 8], rbuf[PM_PAGE_SIZE / 8];
};

static unsigned long page_addr(struct ctx *c, unsigned long i)
{
	return i < NSMALL ? c->small + i * PG : c->thp + (i - NSMALL) * PG;
}

static uint64_t mktok(unsigned who, uint64_t seq, unsigned long i)
{
	return (uint64_t)who << 56 | (seq & 0xffffffffffULL) << 16 | i;
}

static void werr(struct worker *w, const char *what, unsigned long idx, long r)
{
	if (!w->errors++)
		diag("worker %d: %s at page %lu: %ld", w->id, what, idx, r);
}

static bool checkpoint(struct worker *w, struct pm_page *held, unsigned long idx)
{
	bool go_on;

	if (!pmt_gate_pausing(&w->c->gate))
		return true;
	w->held = held;
	w->held_idx = idx;
	go_on = pmt_gate_wait(&w->c->gate);
	w->held = NULL;
	return go_on;
}

static bool pinner_once(struct worker *w)
{
	struct ctx *c = w->c;
	/* Half the pins go to a hot set of 8 pages per thread, to meet fork more often. */
	unsigned long i = (tap_rand(&w->rng) % (tap_rand(&w->rng) & 1 ? 8 : NP / NPIN)) * NPIN +
			  w->id;
	unsigned mode = tap_rand(&w->rng) % 5;
	static const unsigned flags[5] = {
		PM_FOLL_WRITE, PM_FOLL_WRITE | PM_FOLL_LONGTERM, PM_FOLL_LONGTERM, 0,
		PM_FOLL_WRITE | PM_FOLL_LONGTERM,
	};
	bool rw = flags[mode] & PM_FOLL_WRITE;
	unsigned holds = 1 + tap_rand(&w->rng) % 3;
	struct pm_page *p = NULL;
	bool go_on = true;
	long r;

	if (i >= NP)
		return true;
	r = mode == 4 ? pm_pin_user_pages(c->parent, page_addr(c, i), 1, flags[mode], &p)
		      : pm_pin_user_pages_fast(c->parent, page_addr(c, i), 1, flags[mode], &p);
	w->ops++;
	if (r != 1) {
		werr(w, "pin", i, r);
		return true;
	}
	w->pins++;
	atomic_store(&c->pinned[w->id], pm_page_to_pfn(p));
	for (unsigned h = 0; h < holds && go_on; h++) {
		uint64_t v = mktok(w->id + 1, ++w->ops, i);
		long e = 0;

		pthread_rwlock_rdlock(&c->fork_lock);
		if (rw) {
			pmt_fill_words(pm_page_address(p), v);
		} else {
			pmt_fill_words(w->buf, v);
			e = pm_access(c->parent, page_addr(c, i), w->buf, PG, 1);
		}
		atomic_store_explicit(&c->tok[i], v, memory_order_relaxed);
		pthread_rwlock_unlock(&c->fork_lock);
		if (e && e != (long)PG)
			werr(w, "parent write", i, e);
		sched_yield();
		/* The pin sees the parent's write (R/O: it unshared first), never a child's. */
		if (!pmt_page_all(pm_page_address(p), v)) {
			if (!w->bad_pin++)
				diag("worker %d: %s pin of page %lu: %#llx, parent wrote %#llx",
				     w->id, rw ? "R/W" : "R/O", i,
				     *(unsigned long long *)pm_page_address(p),
				     (unsigned long long)v);
		}
		e = pm_access(c->parent, page_addr(c, i), w->rbuf, PG, 0);
		if (e != (long)PG || !pmt_page_all(w->rbuf, v)) {
			if (!w->bad_mem++)
				diag("worker %d: parent page %lu: %#llx (%ld), pin holds %#llx",
				     w->id, i, (unsigned long long)w->rbuf[0], e,
				     (unsigned long long)v);
		}
		go_on = checkpoint(w, p, i);
	}
	atomic_store(&c->pinned[w->id], ULONG_MAX);
	pm_unpin_user_page(p);
	return go_on;
}

/*
 * No frame a pinner holds a pin on may be mapped by a child, whatever the order of the pin
 * and the fork. A published frame was pinned when we read it, and only this thread changes
 * the children's mappings, so reading the two one after the other is enough.
 */
static void check_pins_vs_child(struct worker *w, struct pm_mm *child)
{
	struct ctx *c = w->c;

	for (unsigned long i = 0; i < NP; i++) {
		struct pm_page *p = NULL;
		unsigned long pfn;

		if (pm_get_user_pages(child, page_addr(c, i), 1, PM_FOLL_NOFAULT, &p) != 1)
			continue;
		pfn = pm_page_to_pfn(p);
		pm_put_page(p);
		for (int t = 0; t < NPIN; t++) {
			if (atomic_load(&c->pinned[t]) == pfn) {
				if (!w->bad_shared++)
					diag("child maps frame %lu at page %lu, pinned by %d",
					     pfn, i, t);
			}
		}
	}
}

/* Check every page of child slot @s against what it must hold. */
static void verify_child(struct worker *w, int s)
{
	struct ctx *c = w->c;

	for (unsigned long i = 0; i < NP; i++) {
		long e = pm_access(c->child[s], page_addr(c, i), w->rbuf, PG, 0);

		if (e != (long)PG || !pmt_page_all(w->rbuf, c->expect[s][i])) {
			if (!w->bad_child++)
				diag("child page %lu reads %#llx (%ld), expected %#llx", i,
				     (unsigned long long)w->rbuf[0], e,
				     (unsigned long long)c->expect[s][i]);
		}
	}
}

static bool forker_once(struct worker *w)
{
	struct ctx *c = w->c;
	int s = w->forks % NCHILD;
	struct pm_mm *child;

	if (c->child[s])
		pm_mm_destroy(c->child[s]);
	c->child[s] = NULL;
	pthread_rwlock_wrlock(&c->fork_lock);
	for (unsigned long i = 0; i < NP; i++)
		c->expect[s][i] = atomic_load_explicit(&c->tok[i], memory_order_relaxed);
	child = pm_mm_fork(c->parent);
	pthread_rwlock_unlock(&c->fork_lock);
	w->ops++;
	if (!child) {
		werr(w, "fork", 0, -errno);
		return checkpoint(w, NULL, 0);
	}
	c->child[s] = child;
	w->forks++;
	check_pins_vs_child(w, child);
	verify_child(w, s);
	if (!checkpoint(w, NULL, 0))
		return false;
	/* The child writes some of its pages. */
	for (unsigned long i = 0; i < NP; i++) {
		uint64_t v;
		long e;

		if (tap_rand(&w->rng) % 4)
			continue;
		v = mktok(0x80 | s, (uint64_t)w->forks, i);
		pmt_fill_words(w->buf, v);
		e = pm_access(child, page_addr(c, i), w->buf, PG, 1);
		if (e != (long)PG)
			werr(w, "child write", i, e);
		else
			c->expect[s][i] = v;
	}
	verify_child(w, s);
	check_pins_vs_child(w, child);
	if (c->child[!s]) {
		verify_child(w, !s);
		check_pins_vs_child(w, c->child[!s]);
	}
	return checkpoint(w, NULL, 0);
}

static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		bool go_on = w->id < NPIN ? pinner_once(w) : forker_once(w);

		if (!go_on || !checkpoint(w, NULL, 0))
			break;
	}
	return NULL;
}

struct verdict {
	long check, shared, parent;
};

static void quiescent_check(struct ctx *c, struct worker *w, struct verdict *v)
{
	static uint64_t buf[PM_PAGE_SIZE / 8];

	pm_rcu_barrier();
	if (pm_machine_check(c->m))
		v->check++;
	for (int t = 0; t < NPIN; t++) {
		unsigned long pfn, a;

		if (!w[t].held)
			continue;
		pfn = pm_page_to_pfn(w[t].held);
		a = page_addr(c, w[t].held_idx);
		for (int s = 0; s < NCHILD; s++) {
			struct pm_page *p = NULL;

			if (!c->child[s] ||
			    pm_get_user_pages(c->child[s], a, 1, PM_FOLL_NOFAULT, &p) != 1)
				continue;
			if (pm_page_to_pfn(p) == pfn) {
				diag("pinned page %lu (frame %lu) is mapped by child %d",
				     w[t].held_idx, pfn, s);
				v->shared++;
			}
			pm_put_page(p);
		}
	}
	for (unsigned long i = 0; i < NP; i++)
		if (pm_access(c->parent, page_addr(c, i), buf, PG, 0) != (long)PG ||
		    !pmt_page_all(buf, atomic_load(&c->tok[i])))
			v->parent++;
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);
	double seconds = tap_seconds(2);
	struct ctx *c = calloc(1, sizeof(*c));
	struct worker *w = calloc(NWORKERS, sizeof(*w));
	pthread_t t[NWORKERS];
	struct verdict v = { 0 };
	long ops = 0, pins = 0, forks = 0, errors = 0, bad_pin = 0, bad_mem = 0, bad_child = 0,
	     bad_shared = 0;
	struct pm_stats st;
	size_t free0;

	plan_no_plan();
	ASSERT_TRUE(c && w);
	c->m = pmt_machine(128, 0);
	free0 = pm_machine_free_pages(c->m);
	c->parent = pm_mm_create(c->m);
	ASSERT_TRUE(c->parent != NULL);
	c->small = pm_mmap(c->parent, 0, NSMALL * PG, RW, ANON, NULL, 0);
	c->thp = pm_mmap(c->parent, 0, PM_PMD_SIZE, RW, ANON, NULL, 0);
	ASSERT_TRUE((long)c->small > 0 && (long)c->thp > 0);
	ASSERT_EQ(pm_madvise(c->parent, c->thp, PM_PMD_SIZE, PM_MADV_HUGEPAGE), 0);
	for (unsigned long i = 0; i < NP; i++) {
		static uint64_t buf[PM_PAGE_SIZE / 8];

		atomic_store(&c->tok[i], mktok(0x7f, 0, i));
		pmt_fill_words(buf, atomic_load(&c->tok[i]));
		ASSERT_EQ(pm_access(c->parent, page_addr(c, i), buf, PG, 1), PG);
	}
	pm_machine_stats(c->m, &st);
	ok(st.thp_faults == 1, "stress fork: the parent has a THP");
	pthread_rwlock_init(&c->fork_lock, NULL);
	pmt_gate_init(&c->gate, NWORKERS);
	for (int i = 0; i < NPIN; i++)
		atomic_store(&c->pinned[i], ULONG_MAX);
	for (int i = 0; i < NWORKERS; i++) {
		w[i].c = c;
		w[i].id = i;
		w[i].rng = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));
		ASSERT_EQ(pthread_create(&t[i], NULL, worker_fn, &w[i]), 0);
	}
	for (int e = 0; e < EPOCHS; e++) {
		pmt_wait_until(tap_now() + seconds / EPOCHS, NULL);
		pmt_gate_pause(&c->gate);
		quiescent_check(c, w, &v);
		pmt_gate_resume(&c->gate, e == EPOCHS - 1);
	}
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(t[i], NULL);
		ops += w[i].ops;
		pins += w[i].pins;
		forks += w[i].forks;
		errors += w[i].errors;
		bad_pin += w[i].bad_pin;
		bad_mem += w[i].bad_mem;
		bad_child += w[i].bad_child;
		bad_shared += w[i].bad_shared;
	}
	pm_machine_stats(c->m, &st);
	diag("stress fork: %ld operations, %ld pins, %ld forks; fork_pinned_copies %lu, "
	     "gup_fast_fallbacks %lu, cow_copies %lu, thp_splits %lu",
	     ops, pins, forks, st.fork_pinned_copies, st.gup_fast_fallbacks, st.cow_copies,
	     st.thp_splits);
	ok(forks > 0 && pins > 0, "stress fork: it forked and pinned");
	is_int(errors, 0, "stress fork: no unexpected error");
	is_int(bad_pin, 0, "stress fork: every pin sees the parent's writes and no child's");
	is_int(bad_mem, 0, "stress fork: the parent's memory is the pinned page");
	is_int(bad_child, 0, "stress fork: children see the data of fork time, then their own");
	is_int(v.shared + bad_shared, 0, "stress fork: no pinned page is ever mapped by a child");
	is_int(v.parent, 0, "stress fork: the parent's data at every pause");
	is_int(v.check, 0, "stress fork: pm_machine_check at every pause");
	for (int s = 0; s < NCHILD; s++)
		if (c->child[s])
			pm_mm_destroy(c->child[s]);
	pm_mm_destroy(c->parent);
	pmt_gate_destroy(&c->gate);
	pthread_rwlock_destroy(&c->fork_lock);
	pmt_end(c->m, free0,
		&(const struct pmt_end_names){ "every frame returned", "pins balanced",
					       "pm_machine_check at the end" },
		"stress fork");
	free(w);
	free(c);
	return done_testing();
}
