// SPDX-License-Identifier: MIT
/*
 * stress_hugetlb_restore.c - Linux 6.9+'s hugetlb reservation restore (mem/hugetlb_pool.c,
 * "Restore") under races: a private owner's page unmapped while something else still holds
 * it gives its reservation back to the pool's count only when that holder lets go, from
 * whatever thread that is.
 *
 * Mapper threads, each with a mm of its own, loop: map a private hugetlb page, write it (the
 * fault may find the pool empty while restored pages are held: SIGBUS, as in Linux, counted
 * not failed), pin it long-term and hand the pin over, sometimes fork a child that keeps the
 * page a while, then unmap it by munmap, MADV_DONTNEED then munmap, or a MAP_FIXED anonymous
 * mapping over it. An unpinner thread drops the pins handed over, and a destroyer the
 * children, so the frees of restored pages - each raising the count with the page, in one
 * section - race the owners' closes, which lower it, and other mappings' reservations and
 * faults. After the run, with every holder gone: nothing reserved and the pool whole (a
 * restore counted twice or lost would show), and pm_machine_check (reserved <= free).
 *
 * Replay: -s SEED or PM_TEST_SEED (the choices; not the interleaving).
 * Duration: PM_STRESS_SECONDS (default 2).
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
#define NMAPPER 2
#define NPOOL 6
#define QLEN 2

/* A handed-over holder: a pinned page, or a fork child. */
struct queue {
	pthread_mutex_t lock;
	void *item[QLEN];
	unsigned n;
};

struct ctx {
	struct pm_machine *m;
	_Atomic bool stop;
	struct queue pins, children;
	atomic_long errors, sigbus, mapped, nomem;
};

static bool push(struct queue *q, void *p)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	ok = q->n < QLEN;
	if (ok)
		q->item[q->n++] = p;
	pthread_mutex_unlock(&q->lock);
	return ok;
}

static void *pop(struct queue *q)
{
	void *p = NULL;

	pthread_mutex_lock(&q->lock);
	if (q->n)
		p = q->item[--q->n];
	pthread_mutex_unlock(&q->lock);
	return p;
}

struct mapper {
	struct ctx *c;
	uint64_t rng;
};

static void *mapper_fn(void *arg)
{
	struct mapper *mp = arg;
	struct ctx *c = mp->c;
	struct pm_mm *mm = pm_mm_create(c->m);

	if (!mm) {
		pmt_error(&c->errors, "pm_mm_create: NULL");
		return NULL;
	}
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		unsigned r = (unsigned)tap_rand(&mp->rng);
		long a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
		struct pm_page *pg = NULL;
		uint64_t v = r | 1;

		if (a == -ENOMEM) {
			atomic_fetch_add(&c->nomem, 1); /* the pool is promised: wait for frees */
			sched_yield();
			continue;
		}
		if (a < 0) {
			pmt_error(&c->errors, "mmap: %ld", a);
			continue;
		}
		atomic_fetch_add(&c->mapped, 1);
		if (pm_access(mm, (unsigned long)a, &v, sizeof(v), 1) != sizeof(v)) {
			atomic_fetch_add(&c->sigbus, 1);
		} else if (r & 1) {
			if (pm_pin_user_pages(mm, (unsigned long)a, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM,
					      &pg) != 1)
				pmt_error(&c->errors, "pin of a present exclusive page failed");
			else if (!push(&c->pins, pg))
				pm_unpin_user_pages(&pg, 1); /* the queue is full: now */
		}
		if (r & 2) {
			struct pm_mm *child = pm_mm_fork(mm);

			if (child && !push(&c->children, child))
				pm_mm_destroy(child);
		}
		switch ((r >> 2) % 3) {
		case 0:
			break;
		case 1:
			if (pm_madvise(mm, (unsigned long)a, HP, PM_MADV_DONTNEED))
				pmt_error(&c->errors, "madvise(DONTNEED) failed");
			break;
		case 2:
			if (pm_mmap(mm, (unsigned long)a, HP, RW,
				    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0) != a)
				pmt_error(&c->errors, "anonymous MAP_FIXED over it failed");
			break;
		}
		if (pm_munmap(mm, (unsigned long)a, HP))
			pmt_error(&c->errors, "munmap failed");
	}
	pm_mm_destroy(mm);
	return NULL;
}

/* Drops the pins and children handed over, a little later than their owners' unmaps. */
static void *release_fn(void *arg)
{
	struct ctx *c = arg;

	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		struct pm_page *pg = pop(&c->pins);
		struct pm_mm *child = pop(&c->children);

		if (pg)
			pm_unpin_user_pages(&pg, 1);
		if (child)
			pm_mm_destroy(child);
		if (!pg && !child)
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);
	double secs = tap_seconds(2);
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .nr_hugepages = NPOOL };
	struct ctx *c = calloc(1, sizeof(*c));
	struct mapper mp[NMAPPER];
	pthread_t t[NMAPPER], rel;
	size_t free0, total = 0, pfree = 0, resv = 1;
	void *p;

	plan_no_plan();
	ASSERT_TRUE(c != NULL);
	pthread_mutex_init(&c->pins.lock, NULL);
	pthread_mutex_init(&c->children.lock, NULL);
	c->m = pm_machine_create(&cfg);
	ASSERT_TRUE(c->m != NULL);
	free0 = pm_machine_free_pages(c->m);
	for (int i = 0; i < NMAPPER; i++) {
		mp[i].c = c;
		mp[i].rng = pmt_mix(seed, (uint64_t)i + 1);
		ASSERT_EQ(pthread_create(&t[i], NULL, mapper_fn, &mp[i]), 0);
	}
	ASSERT_EQ(pthread_create(&rel, NULL, release_fn, c), 0);
	pmt_wait_until(tap_now() + secs, NULL);
	atomic_store(&c->stop, true);
	for (int i = 0; i < NMAPPER; i++)
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
	ASSERT_EQ(pthread_join(rel, NULL), 0);
	while ((p = pop(&c->pins))) {
		struct pm_page *pg = p;

		pm_unpin_user_pages(&pg, 1);
	}
	while ((p = pop(&c->children)))
		pm_mm_destroy(p);
	diag("%.1f s: %ld mappings, %ld SIGBUS faults (pool empty while restored pages were "
	     "held), %ld mmaps -ENOMEM",
	     secs, atomic_load(&c->mapped), atomic_load(&c->sigbus), atomic_load(&c->nomem));
	ok(atomic_load(&c->mapped) > 0, "the mappers ran");
	is_int(atomic_load(&c->errors), 0, "every mmap, pin, madvise and munmap succeeded");
	pm_rcu_barrier();
	ASSERT_EQ(pm_hugetlb_pool(c->m, &total, &pfree), 0);
	ASSERT_EQ(pm_hugetlb_reserved(c->m, &resv), 0);
	ok(total == NPOOL && pfree == NPOOL && resv == 0,
	   "every holder gone: the pool whole (%zu of %zu free), %ld reserved", pfree, total,
	   (long)resv);
	pmt_end(c->m, free0, &pmt_end_after_run, "restore");
	free(c);
	return done_testing();
}
