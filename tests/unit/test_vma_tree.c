// SPDX-License-Identifier: MIT
/*
 * test_vma_tree.c - the RCU-readable VMA tree (src/mm/vma_tree.c) against a brute-force model.
 *
 * A random sequence of stores and erases over a small address universe (so that ranges collide,
 * merge, split and cross node boundaries), with every lookup the mm layer uses compared with a
 * flat array after each step, the tree's own invariant check, allocation failure (nothing may
 * change), 65530 entries (Linux's max_map_count) and their removal, and lockless readers racing
 * a writer: readers must never see a wrong entry for a range the writer does not touch, and
 * ASan/TSan must see no use after free (nodes are freed through RCU).
 */
#include <pthread.h>

#include "gup/gup.h"
#include "mm/vma_tree.h"
#include "lib/tap.h"
#include "lib/pmtest.h"

#define UMAX 8192
static unsigned long U = 1024; /* universe, in pages */

static uintptr_t model[UMAX]; /* page -> id (0: free) */

static struct pm_vma *V(uintptr_t id)
{
	return (struct pm_vma *)(id << 4);
}

static unsigned long pa(unsigned long pg)
{
	return (pg + 1) << 12; /* keep 0 out of the universe */
}

static void model_store(unsigned long s, unsigned long e, uintptr_t id)
{
	for (unsigned long p = s; p < e; p++)
		model[p] = id;
}

/* Entries of the model: maximal runs of one id. Two stores of one id side by side stay two
 * entries in the tree, so the model keeps run boundaries too. */
static unsigned char boundary[UMAX + 1];

static void model_store_b(unsigned long s, unsigned long e, uintptr_t id)
{
	model_store(s, e, id);
	if (id) {
		boundary[s] = 1;
		boundary[e] = 1;
		for (unsigned long p = s + 1; p < e; p++)
			boundary[p] = 0;
	}
}

static void model_entry(unsigned long p, unsigned long *s, unsigned long *e)
{
	unsigned long a = p, b = p + 1;

	while (a > 0 && model[a - 1] == model[p] && !boundary[a])
		a--;
	while (b < U && model[b] == model[p] && !boundary[b])
		b++;
	*s = a;
	*e = b;
}

static bool compare_all(struct pm_vma_tree *t)
{
	unsigned long n = 0;

	for (unsigned long p = 0; p < U; p++) {
		struct pm_vma *got = pm__vt_lookup(t, pa(p) + 100);
		unsigned long s = 0, e = 0, ms, me;
		struct pm_vma *f = pm__vt_find(t, pa(p), &s, &e);

		if (got != (model[p] ? V(model[p]) : NULL)) {
			diag("lookup at page %lu: %p, model %lu", p, (void *)got, (unsigned long)model[p]);
			return false;
		}
		/* find: the first entry ending above pa(p) */
		unsigned long q = p;

		while (q < U && !model[q])
			q++;
		if (q == U) {
			if (f) {
				diag("find at page %lu: found %p, model none", p, (void *)f);
				return false;
			}
		} else {
			model_entry(q, &ms, &me);
			if (f != V(model[q]) || s != pa(ms) || e != pa(me)) {
				diag("find at page %lu: %p [%lx,%lx), model %lu [%lx,%lx)", p, (void *)f,
				     s, e, (unsigned long)model[q], pa(ms), pa(me));
				return false;
			}
		}
		/* prev: the last entry starting below pa(p) */
		f = pm__vt_prev(t, pa(p), &s, &e);
		q = p;
		while (q > 0 && !model[q - 1])
			q--;
		if (q == 0) {
			if (f) {
				diag("prev at page %lu: found %p, model none", p, (void *)f);
				return false;
			}
		} else {
			model_entry(q - 1, &ms, &me);
			if (f != V(model[q - 1]) || s != pa(ms)) {
				diag("prev at page %lu: %p, model %lu", p, (void *)f,
				     (unsigned long)model[q - 1]);
				return false;
			}
		}
		if (model[p] && (p == 0 || boundary[p] || model[p - 1] != model[p]))
			n++;
	}
	if (n != pm__vt_count(t)) {
		diag("count %lu, model %lu", pm__vt_count(t), n);
		return false;
	}
	return true;
}

static long brute_gap(unsigned long lo, unsigned long hi, unsigned long len, unsigned long align,
		      bool top)
{
	long best = -ENOMEM;

	for (unsigned long a = ALIGN_UP(lo, align); a + len <= hi; a += align) {
		bool free_ = true;

		for (unsigned long x = a; x < a + len && free_; x += 4096)
			if (x >= pa(0) && x < pa(U) && model[(x >> 12) - 1])
				free_ = false;
		if (free_) {
			best = (long)a;
			if (!top)
				break;
		}
	}
	return best;
}

static bool compare_gaps(struct pm_vma_tree *t, uint64_t *rs)
{
	for (int k = 0; k < 8; k++) {
		unsigned long lo = pa(tap_rand(rs) % U), hi = pa(tap_rand(rs) % (U + 1));
		unsigned long len = (1 + tap_rand(rs) % 8) << 12, align = 4096UL << (tap_rand(rs) % 3);

		if (lo > hi) {
			unsigned long x = lo;

			lo = hi;
			hi = x;
		}
		long a = pm__vt_gap_topdown(t, lo, hi, len, align);
		long b = brute_gap(lo, hi, len, align, true);

		if (a != b) {
			diag("topdown [%lx,%lx) len %lx align %lx: %ld, brute %ld", lo, hi, len, align,
			     a, b);
			return false;
		}
		a = pm__vt_gap_bottomup(t, lo, hi, len, align);
		b = brute_gap(lo, hi, len, align, false);
		if (a != b) {
			diag("bottomup [%lx,%lx) len %lx align %lx: %ld, brute %ld", lo, hi, len,
			     align, a, b);
			return false;
		}
	}
	return true;
}

static void test_random(uint64_t seed, unsigned long universe, long every)
{
	struct pm_machine *m = pmt_machine(8, 0);
	struct pm_vma_tree t;
	uint64_t rs = seed;
	long steps = tap_scale(20000);
	bool good = true, gaps = true;
	uintptr_t next_id = 1;
	int enomem_ok = 1;

	U = universe;
	memset(model, 0, sizeof(model));
	memset(boundary, 0, sizeof(boundary));
	pm__vt_init(&t, m);
	for (long i = 0; i < steps && good; i++) {
		unsigned long s = tap_rand(&rs) % U, len = 1 + tap_rand(&rs) % (tap_rand(&rs) % 4 ? 3 : 60);
		unsigned long e = min(s + len, (unsigned long)U);
		bool erase = tap_rand(&rs) % 4 == 0;
		uintptr_t id = erase ? 0 : next_id++;

		if (i % 97 == 0) {
			/* An injected allocation failure changes nothing. */
			pm_fail_nth(m, 1);
			int err = pm__vt_store(&t, pa(s), pa(e), erase ? NULL : V(id));

			pm_fail_nth(m, 0);
			if (err) {
				enomem_ok &= err == -ENOMEM && pm__vt_check(&t) == 0 && compare_all(&t);
				continue;
			}
		} else if (pm__vt_store(&t, pa(s), pa(e), erase ? NULL : V(id))) {
			good = false;
			break;
		}
		model_store_b(s, e, id);
		if (erase) {
			boundary[s] = 1;
			boundary[e] = 1;
		}
		pm__vt_retire_flush(&t);
		if (pm__vt_check(&t)) {
			diag("after step %ld", i);
			good = false;
		} else if (i % every == 0 || i < 200) {
			good = compare_all(&t);
			if (good && i % 21 == 0)
				gaps = gaps && compare_gaps(&t, &rs);
		}
	}
	ok(good, "random stores and erases match the model, structure checks out (height %u)",
	   t.height);
	ok(gaps, "gap searches match a brute-force search");
	ok(enomem_ok, "a store that cannot allocate returns -ENOMEM and changes nothing");
	pm__vt_destroy(&t);
	pm_rcu_barrier();
	pm_machine_destroy(m);
}

/* 65530 entries, in an order that makes the tree grow from both ends, then removed. */
static void test_max_map_count(void)
{
	struct pm_vma_tree t;
	const unsigned long n = 65530;
	bool good = true;

	pm__vt_init(&t, NULL);
	for (unsigned long i = 0; i < n && good; i++) {
		unsigned long k = i % 2 ? i : n * 2 - i; /* interleave the two ends */

		good = !pm__vt_store(&t, k << 13, (k << 13) + 4096, V(k + 1));
		if (i % 4096 == 0)
			pm__vt_retire_flush(&t);
	}
	pm__vt_retire_flush(&t);
	ok(good && pm__vt_count(&t) == n && !pm__vt_check(&t), "65530 entries (height %u)",
	   t.height);
	good = true;
	for (unsigned long i = 0; i < n && good; i++) {
		unsigned long k = i % 2 ? i : n * 2 - i;

		good = pm__vt_lookup(&t, (k << 13) + 10) == V(k + 1) &&
		       !pm__vt_lookup(&t, (k << 13) + 4096);
	}
	ok(good, "each is found");
	ok(pm__vt_gap_topdown(&t, 4096, 1UL << 40, 8192, 4096) == (long)((1UL << 40) - 8192),
	   "gap search above them");
	/* The odd slots below n leave three free pages between neighbours. */
	ok(pm__vt_gap_topdown(&t, 8192, (65529UL << 13) + 4096, 4 * 4096, 4096) == -ENOMEM,
	   "no four-page gap among them");
	ok(pm__vt_gap_topdown(&t, 8192, (65529UL << 13) + 4096, 3 * 4096, 4096) ==
	   (long)((65529UL << 13) - 3 * 4096), "the highest three-page gap among them");
	ok(pm__vt_gap_bottomup(&t, 8192, (65529UL << 13) + 4096, 3 * 4096, 4096) ==
	   (long)((1UL << 13) + 4096), "the lowest three-page gap among them");
	/* Erase every other one, then everything by one store over the whole range. */
	good = true;
	for (unsigned long i = 0; i < n && good; i += 2) {
		unsigned long k = i % 2 ? i : n * 2 - i;

		good = !pm__vt_store(&t, k << 13, (k << 13) + 4096, NULL);
		pm__vt_retire_flush(&t);
	}
	ok(good && pm__vt_count(&t) == n / 2 && !pm__vt_check(&t), "half erased (height %u)",
	   t.height);
	ok(!pm__vt_store(&t, 0, (n * 2 + 2) << 13, NULL) && pm__vt_count(&t) == 0 &&
	   !pm__vt_check(&t) && !pm__vt_lookup(&t, 3 << 13), "one erase over all of it");
	pm__vt_retire_flush(&t);
	pm__vt_destroy(&t);
	pm_rcu_barrier();
}

/* Lockless readers against a writer. Entries at even slots are stable; odd slots churn. */
#define SLOTS 512
static struct pm_vma_tree race_tree;
static atomic_bool race_stop;
static atomic_long race_bad, race_reads;

static void *race_reader(void *arg)
{
	uint64_t rs = (uintptr_t)arg;
	long reads = 0;

	while (!atomic_load(&race_stop)) {
		unsigned long k = tap_rand(&rs) % SLOTS;
		struct pm_vma *v;

		pm_rcu_read_lock();
		v = pm__vt_lookup(&race_tree, (k << 14) + 5);
		pm_rcu_read_unlock();
		if (k % 2 == 0 && v != V(k + 1))
			atomic_fetch_add(&race_bad, 1);
		if (k % 2 && v && v != V(k + 1) && v != V(k + 1 + SLOTS))
			atomic_fetch_add(&race_bad, 1);
		reads++;
	}
	atomic_fetch_add(&race_reads, reads);
	return NULL;
}

static void test_rcu_readers(void)
{
	pthread_t th[2];
	uint64_t rs = 7;
	long writes = tap_scale(200000);

	pm__vt_init(&race_tree, NULL);
	for (unsigned long k = 0; k < SLOTS; k++)
		pm__vt_store(&race_tree, k << 14, (k << 14) + 8192, V(k + 1));
	pm__vt_retire_flush(&race_tree);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, race_reader, (void *)(uintptr_t)(i + 1));
	for (long i = 0; i < writes; i++) {
		unsigned long k = (tap_rand(&rs) % (SLOTS / 2)) * 2 + 1;

		switch (tap_rand(&rs) % 3) {
		case 0:
			pm__vt_store(&race_tree, k << 14, (k << 14) + 8192, NULL);
			break;
		case 1:
			pm__vt_store(&race_tree, k << 14, (k << 14) + 8192, V(k + 1));
			break;
		default:
			pm__vt_store(&race_tree, k << 14, (k << 14) + 4096, V(k + 1 + SLOTS));
			break;
		}
		pm__vt_retire_flush(&race_tree);
	}
	atomic_store(&race_stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ok(atomic_load(&race_bad) == 0 && !pm__vt_check(&race_tree),
	   "lockless readers racing %ld writes: %ld reads, none wrong", writes,
	   atomic_load(&race_reads));
	pm_rcu_barrier();
	pm__vt_destroy(&race_tree);
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv);

	test_random(seed, 1024, 31);
	test_random(seed * 31 + 1, 1024, 31);
	test_random(seed * 17 + 3, UMAX, 997); /* deeper trees */
	test_max_map_count();
	test_rcu_readers();
	return done_testing();
}
