// SPDX-License-Identifier: MIT
/*
 * torture.c - every operation at once, across threads and forked address spaces, with
 * generation counts on frames, so that a stale pin or a use after free is detected rather
 * than crashed on.
 *
 * Layout of the parent address space:
 *   lanes	private anonymous memory, one 1 MiB lane per worker thread, THP-advised as a
 *		whole so 2 MiB folios straddle two lanes and get split under each other's feet
 *   shared	a shmem object mapped shared, written by everyone, truncated and re-grown
 *   private	the same object mapped private (COW copies of the object)
 * Each worker owns its lane: it is the only one that writes it, maps and unmaps it, changes
 * its protection, zaps it, and pins it, so it knows exactly what every page must hold -
 * whatever the others do to the address space, the page tables and the folios meanwhile.
 * Each pin records its frame's generation count (bumped whenever a frame is freed, debug
 * builds); before unpinning, the generation must not have moved, the folio must still look
 * pinned, and while the lane page is still mapped the frame and the mapping must agree
 * (through writes to the pin for R/W pins, and writes to the mapping for R/O pins).
 * A forker thread keeps forking the parent; each child writes a marker into its copies of the
 * lanes and of the private mapping, and is destroyed; no lane may ever show the marker.
 * A truncator shrinks and re-grows the shared object.
 *
 * At the end: everything released, every frame free again, pm_machine_check() clean.
 */
#include <pthread.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define LANE (1UL << 20)
#define LANE_PAGES (LANE >> 12)
#define MAX_WORKERS 8
#define MAX_PINS 64
#define SHARED_LEN (4UL << 20)
#define CHILD_MARK 0xc4c4c4c4u

struct pin {
	struct pm_page *page;
	unsigned idx;	   /* lane page */
	uint32_t gen;	   /* frame generation when pinned */
	bool writable;	   /* FOLL_WRITE pin */
	bool coherent;	   /* the lane still maps this frame */
};

struct worker {
	int id;
	uint64_t rng;
	unsigned long lane; /* address */
	bool mapped;
	bool readonly;
	uint32_t expect[LANE_PAGES]; /* first word of each page; 0 = zero page */
	struct pin pins[MAX_PINS];
	int nr_pins;
	unsigned long ops, pins_taken, checks;
};

static struct pm_machine *m;
static struct pm_mm *parent;
static struct pm_shmem *obj;
static unsigned long lanes_base, shared_base, private_base;
static int nr_workers;
static double deadline;
static _Atomic int failed;
static _Atomic unsigned long forks, truncates;

static void fail(const char *what, struct worker *w, unsigned idx, uint32_t got, uint32_t want)
{
	if (!atomic_xchg_mb(&failed, 1))
		diag("FAIL: %s: worker %d page %u: got %#x want %#x", what, w ? w->id : -1, idx, got,
		     want);
}

/* A device's read through a pin: atomic, as the hardware's (copies through the mapping may
 * run beside it). */
static uint32_t frame_word(struct pm_page *page)
{
	return __atomic_load_n((uint32_t *)pm_page_address(page), __ATOMIC_RELAXED);
}

static uint32_t gen_of(struct pm_page *page)
{
	return atomic_load_relaxed(&page->xgen);
}

static void write_page(struct worker *w, unsigned idx, uint32_t v)
{
	uint32_t buf[16];

	for (unsigned i = 0; i < ARRAY_SIZE(buf); i++)
		buf[i] = v;
	if (pm_access(parent, w->lane + idx * 4096UL, buf, sizeof(buf), 1) != sizeof(buf))
		fail("lane write", w, idx, 0, v);
	else
		w->expect[idx] = v;
}

static void check_page(struct worker *w, unsigned idx)
{
	uint32_t buf[16];

	if (pm_access(parent, w->lane + idx * 4096UL, buf, sizeof(buf), 0) != sizeof(buf)) {
		fail("lane read", w, idx, 0, w->expect[idx]);
		return;
	}
	for (unsigned i = 0; i < ARRAY_SIZE(buf); i++) {
		if (buf[i] != w->expect[idx]) {
			fail(buf[i] == CHILD_MARK ? "child write leaked into parent" :
						    "lane content",
			     w, idx, buf[i], w->expect[idx]);
			return;
		}
	}
	w->checks++;
}

static void drop_coherence(struct worker *w)
{
	for (int i = 0; i < w->nr_pins; i++)
		w->pins[i].coherent = false;
}

static void unpin_one(struct worker *w, int i)
{
	struct pin *p = &w->pins[i];

	if (gen_of(p->page) != p->gen)
		fail("frame freed while pinned (generation moved)", w, p->idx, gen_of(p->page), p->gen);
	if (!pm_folio_maybe_dma_pinned(pm_page_folio(p->page)))
		fail("pinned folio does not look pinned", w, p->idx, 0, 1);
	if (p->coherent && w->mapped && p->writable) {
		/* A write through the pin must be what the mapping reads. */
		uint32_t v = (uint32_t)tap_rand(&w->rng) | 1, *dev = pm_page_address(p->page);

		for (unsigned k = 0; k < 16; k++) /* a device's write: atomic words */
			__atomic_store_n(&dev[k], v, __ATOMIC_RELAXED);
		w->expect[p->idx] = v;
		check_page(w, p->idx);
	}
	pm_unpin_user_page(p->page);
	w->pins[i] = w->pins[--w->nr_pins];
}

static void pin_some(struct worker *w)
{
	unsigned idx = (unsigned)(tap_rand(&w->rng) % LANE_PAGES);
	unsigned n = 1 + (unsigned)(tap_rand(&w->rng) % 8);
	bool writable = !w->readonly && (tap_rand(&w->rng) & 1);
	bool fast = tap_rand(&w->rng) & 1;
	struct pm_page *pages[8];
	unsigned flags = (writable ? PM_FOLL_WRITE : 0) | PM_FOLL_LONGTERM;
	long got;

	if (!w->mapped)
		return;
	if (idx + n > LANE_PAGES)
		n = LANE_PAGES - idx;
	if (w->nr_pins + (int)n > MAX_PINS)
		return;
	got = fast ? pm_pin_user_pages_fast(parent, w->lane + idx * 4096UL, n, flags, pages) :
		     pm_pin_user_pages(parent, w->lane + idx * 4096UL, n, flags, pages);
	if (got < 0) {
		if (got != -ENOMEM)
			fail("pin", w, idx, (uint32_t)-got, 0);
		return;
	}
	for (long i = 0; i < got; i++) {
		struct pin *p = &w->pins[w->nr_pins++];

		*p = (struct pin){ pages[i], idx + (unsigned)i, gen_of(pages[i]), writable, true };
		/* A pin of a never-written page may be the zero page: compare what it reads. */
		if (frame_word(pages[i]) != w->expect[p->idx])
			fail("pinned frame content", w, p->idx, frame_word(pages[i]),
			     w->expect[p->idx]);
		if (pm_page_is_zero(pages[i])) {
			pm_unpin_user_page(pages[i]);
			w->nr_pins--;
		}
	}
	w->pins_taken += (unsigned long)got;
}

static void lane_op(struct worker *w)
{
	unsigned r = (unsigned)(tap_rand(&w->rng) % 100);
	unsigned idx = (unsigned)(tap_rand(&w->rng) % LANE_PAGES);

	if (!w->mapped) {
		long a = pm_mmap(parent, w->lane, LANE, PM_PROT_READ | PM_PROT_WRITE,
				 PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);

		if (a != (long)w->lane) {
			fail("remap lane", w, 0, (uint32_t)a, 0);
			return;
		}
		memset(w->expect, 0, sizeof(w->expect));
		w->mapped = true;
		w->readonly = false;
		return;
	}
	if (r < 35) {
		if (!w->readonly) {
			write_page(w, idx, (uint32_t)tap_rand(&w->rng) | 1);
			/* A R/O pin of this page must see the write (it was unshared). */
			for (int i = 0; i < w->nr_pins; i++) {
				struct pin *p = &w->pins[i];

				if (p->idx == idx && p->coherent &&
				    frame_word(p->page) != w->expect[idx])
					fail("pin does not see the owner's write", w, idx,
					     frame_word(p->page), w->expect[idx]);
			}
		}
	} else if (r < 60) {
		check_page(w, idx);
	} else if (r < 75) {
		pin_some(w);
	} else if (r < 85) {
		if (w->nr_pins)
			unpin_one(w, (int)(tap_rand(&w->rng) % (unsigned)w->nr_pins));
	} else if (r < 90) {
		unsigned n = 1 + (unsigned)(tap_rand(&w->rng) % 64);

		if (idx + n > LANE_PAGES)
			n = LANE_PAGES - idx;
		if (pm_madvise(parent, w->lane + idx * 4096UL, n * 4096UL, PM_MADV_DONTNEED))
			fail("dontneed", w, idx, 0, 0);
		memset(&w->expect[idx], 0, n * sizeof(w->expect[0]));
		for (int i = 0; i < w->nr_pins; i++)
			if (w->pins[i].idx >= idx && w->pins[i].idx < idx + n)
				w->pins[i].coherent = false;
	} else if (r < 95) {
		w->readonly = !w->readonly;
		if (pm_mprotect(parent, w->lane, LANE,
				w->readonly ? PM_PROT_READ : PM_PROT_READ | PM_PROT_WRITE))
			fail("mprotect", w, 0, 0, 0);
	} else if (r < 97) {
		if (pm_munmap(parent, w->lane, LANE))
			fail("munmap", w, 0, 0, 0);
		w->mapped = false;
		drop_coherence(w);
	} else {
		/* The shared object: anyone writes; reads may fail while it is truncated. */
		uint32_t v = (uint32_t)w->id;
		unsigned long off = (tap_rand(&w->rng) % (SHARED_LEN / 4096)) * 4096;
		long ret = pm_access(parent, shared_base + off, &v, 4, 1);

		if (ret != 4 && ret != -EFAULT)
			fail("shared write", w, 0, (uint32_t)ret, 4);
		ret = pm_access(parent, private_base + off, &v, 4, tap_rand(&w->rng) & 1);
		if (ret != 4 && ret != -EFAULT)
			fail("private access", w, 0, (uint32_t)ret, 4);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (tap_now() < deadline && !atomic_load_relaxed(&failed)) {
		lane_op(w);
		w->ops++;
	}
	while (w->nr_pins)
		unpin_one(w, w->nr_pins - 1);
	return NULL;
}

static void *forker_main(void *arg)
{
	uint64_t rng = *(uint64_t *)arg;

	while (tap_now() < deadline && !atomic_load_relaxed(&failed)) {
		struct pm_mm *child = pm_mm_fork(parent);
		uint32_t mark = CHILD_MARK;

		if (!child)
			continue; /* out of memory is allowed: the parent is intact */
		for (int i = 0; i < 32; i++) {
			unsigned long off = (tap_rand(&rng) % (nr_workers * LANE_PAGES)) * 4096;

			pm_access(child, lanes_base + off, &mark, 4, 1);
			pm_access(child, private_base + (tap_rand(&rng) % 1024) * 4096, &mark, 4, 1);
		}
		pm_mm_destroy(child);
		atomic_add_relaxed(&forks, 1);
	}
	return NULL;
}

static void *truncator_main(void *arg)
{
	(void)arg;
	while (tap_now() < deadline && !atomic_load_relaxed(&failed)) {
		pm_shmem_truncate(obj, SHARED_LEN / 2);
		sched_yield();
		pm_shmem_truncate(obj, SHARED_LEN);
		atomic_add_relaxed(&truncates, 1);
		usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = tap_seed(argc, argv), frng = seed ^ 0x5bd1e995;
	double secs = tap_seconds(2);
	static struct worker workers[MAX_WORKERS];
	pthread_t tids[MAX_WORKERS + 2];
	unsigned long ops = 0, pins = 0, checks = 0;
	size_t free0;
	long a;

	plan(5);
	nr_workers = tap_scale(4) >= 4 ? 4 : 2; /* even: THPs straddle pairs of lanes */
	m = pmt_machine(256, 0);
	free0 = pm_machine_free_pages(m);
	parent = pm_mm_create(m);
	obj = pm_shmem_create(m, SHARED_LEN, 0);
	ASSERT_TRUE(parent && obj);
	a = pm_mmap(parent, 0, nr_workers * LANE, PM_PROT_READ | PM_PROT_WRITE,
		    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);
	ASSERT_TRUE(a > 0);
	lanes_base = (unsigned long)a;
	pm_madvise(parent, lanes_base, nr_workers * LANE, PM_MADV_HUGEPAGE);
	a = pm_mmap(parent, 0, SHARED_LEN, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_SHARED, obj, 0);
	ASSERT_TRUE(a > 0);
	shared_base = (unsigned long)a;
	a = pm_mmap(parent, 0, SHARED_LEN, PM_PROT_READ | PM_PROT_WRITE, PM_MAP_PRIVATE, obj, 0);
	ASSERT_TRUE(a > 0);
	private_base = (unsigned long)a;

	deadline = tap_now() + secs;
	for (int i = 0; i < nr_workers; i++) {
		workers[i] = (struct worker){ .id = i, .rng = seed + (uint64_t)i * 7919,
					      .lane = lanes_base + i * LANE, .mapped = true };
		pthread_create(&tids[i], NULL, worker_main, &workers[i]);
	}
	pthread_create(&tids[nr_workers], NULL, forker_main, &frng);
	pthread_create(&tids[nr_workers + 1], NULL, truncator_main, NULL);
	for (int i = 0; i < nr_workers + 2; i++)
		pthread_join(tids[i], NULL);
	for (int i = 0; i < nr_workers; i++) {
		ops += workers[i].ops;
		pins += workers[i].pins_taken;
		checks += workers[i].checks;
	}
	diag("%.1f s, %d workers: %lu operations, %lu pages pinned, %lu lane checks, %lu forks, "
	     "%lu truncations", secs, nr_workers, ops, pins, checks, atomic_load_relaxed(&forks),
	     atomic_load_relaxed(&truncates));
	ok(!atomic_load_relaxed(&failed), "no stale pin, lost write or leaked child write");
	ok(ops > 0 && atomic_load_relaxed(&forks) > 0, "all kinds of operation ran");
	ok(pm_machine_check(m) == 0, "invariants hold with everything still mapped");
	pm_mm_destroy(parent);
	pm_shmem_put(obj);
	pmt_end(m, free0,
		&(const struct pmt_end_names){ "every frame is free again", NULL,
					       "invariants hold at the end" },
		NULL);
	return done_testing();
}
