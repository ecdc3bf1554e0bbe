// SPDX-License-Identifier: MIT
/*
 * stress_fault.c - concurrent faults and data integrity while the address space changes
 * next door.
 *
 *   workers (NW threads)  each owns a private 2 MiB region (THP-advised for even workers)
 *                         that it writes, verifies against a shadow copy, discards
 *                         (DONTNEED) and write-protects; all share one overlapping 1 MiB
 *                         region in which each owns every NW-th 128-byte chunk of every page,
 *                         so first-touch faults on the same pages race; between phases worker
 *                         0 discards the shared region (the others wait at a barrier) so the
 *                         races start again from the zero page.
 *   churn (1 thread)      maps, unmaps, write-protects and discards ranges in the gaps right
 *                         next to those regions (same page tables, neighbouring VMAs), and
 *                         checks its own pages against a per-page model.
 *
 * Layout (each worker slot is 8 MiB; P = private region, c = churn gap):
 *   B + w*8M:  PP cccccc    B + 64M: SSSS(1M) then churn gap (3M)
 *
 * Seeded (tap_seed; each thread derives its own stream), runs tap_seconds(2). At the end
 * everything is verified again from the main thread, then destroyed: every frame must come
 * back and pm_machine_check() must pass.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)

#define NW 3
#define BASE 0x100000000UL
#define SLOT (8 * MiB)
#define PRIV_LEN (2 * MiB)
#define GAP_OFF PRIV_LEN
#define GAP_LEN (6 * MiB)
#define SHARED_BASE (BASE + NW * SLOT)
#define SHARED_LEN (1 * MiB)
#define SHARED_PAGES (SHARED_LEN / PG)
#define CHUNK 128
#define CHUNKS (PG / CHUNK)
#define TAIL_GAP_LEN (3 * MiB)
#define NGAPS (NW + 1)

static struct pm_machine *m;
static struct pm_mm *mm;
static atomic_int stop;
static atomic_long errors;
static atomic_long ops_done;
static pthread_barrier_t phase_barrier;
static int phase_stop; /* written by worker 0 before a barrier, read by all after it */
static uint64_t seed;

#define fail(...) pmt_error(&errors, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------
 * Workers.
 */
struct worker {
	int id;
	uint64_t rng;
	unsigned long priv;		 /* private region */
	unsigned char *shadow;		 /* PRIV_LEN bytes */
	uint32_t sgen[SHARED_PAGES][CHUNKS]; /* generation of each owned shared chunk, 0 = zero */
	uint32_t gen;
	long ops;
	pthread_t th;
};

static struct worker workers[NW];

static bool owns_chunk(int w, unsigned c)
{
	return c % NW == (unsigned)w;
}

static void chunk_fill(unsigned char *p, int w, unsigned long addr, uint32_t gen)
{
	uint64_t *q = (uint64_t *)p;

	for (unsigned i = 0; i < CHUNK / 8; i++)
		q[i] = gen ? pmt_mix(addr + i * 8, ((uint64_t)w << 32) | gen) : 0;
}

static void shared_write(struct worker *wk, unsigned first, unsigned n)
{
	unsigned char buf[CHUNK];

	for (unsigned p = first; p < first + n; p++) {
		uint32_t gen = ++wk->gen;

		for (unsigned c = 0; c < CHUNKS; c++) {
			unsigned long a = SHARED_BASE + p * PG + c * CHUNK;
			long r;

			if (!owns_chunk(wk->id, c))
				continue;
			chunk_fill(buf, wk->id, a, gen);
			r = pm_access(mm, a, buf, CHUNK, 1);
			if (r != CHUNK)
				fail("worker %d: shared write %#lx -> %ld", wk->id, a, r);
			wk->sgen[p][c] = gen;
		}
	}
}

static void shared_verify(struct worker *wk, unsigned first, unsigned n)
{
	unsigned char page[PG], want[CHUNK];

	for (unsigned p = first; p < first + n; p++) {
		long r = pm_access(mm, SHARED_BASE + p * PG, page, PG, 0);

		if (r != (long)PG) {
			fail("worker %d: shared read page %u -> %ld", wk->id, p, r);
			continue;
		}
		for (unsigned c = 0; c < CHUNKS; c++) {
			unsigned long a = SHARED_BASE + p * PG + c * CHUNK;

			if (!owns_chunk(wk->id, c))
				continue;
			chunk_fill(want, wk->id, a, wk->sgen[p][c]);
			if (memcmp(page + c * CHUNK, want, CHUNK))
				fail("worker %d: shared chunk %#lx lost its data (gen %u)", wk->id,
				     a, wk->sgen[p][c]);
		}
	}
}

static void priv_write(struct worker *wk)
{
	size_t off = tap_rand(&wk->rng) % PRIV_LEN;
	size_t len = 1 + tap_rand(&wk->rng) % (32 * 1024);
	uint64_t v = tap_rand(&wk->rng);
	long r;

	if (off + len > PRIV_LEN)
		len = PRIV_LEN - off;
	for (size_t i = 0; i < len; i++)
		wk->shadow[off + i] = (unsigned char)(pmt_mix(off + i, v) >> 24);
	r = pm_access(mm, wk->priv + off, wk->shadow + off, len, 1);
	if (r != (long)len)
		fail("worker %d: private write %#lx+%zu -> %ld", wk->id, wk->priv + off, len, r);
}

static void priv_verify(struct worker *wk, size_t off, size_t len)
{
	unsigned char *buf = malloc(len);
	long r;

	ASSERT_TRUE(buf);
	r = pm_access(mm, wk->priv + off, buf, len, 0);
	if (r != (long)len || memcmp(buf, wk->shadow + off, len))
		fail("worker %d: private range %#lx+%zu does not match (r %ld)", wk->id,
		     wk->priv + off, len, r);
	free(buf);
}

static void priv_discard(struct worker *wk)
{
	size_t off = (tap_rand(&wk->rng) % (PRIV_LEN / PG)) * PG;
	size_t len = (1 + tap_rand(&wk->rng) % 64) * PG;
	int r;

	if (off + len > PRIV_LEN)
		len = PRIV_LEN - off;
	r = pm_madvise(mm, wk->priv + off, len, PM_MADV_DONTNEED);
	if (r)
		fail("worker %d: DONTNEED -> %d", wk->id, r);
	memset(wk->shadow + off, 0, len);
}

static void priv_protect(struct worker *wk)
{
	size_t off = (tap_rand(&wk->rng) % (PRIV_LEN / PG)) * PG;
	size_t len = (1 + tap_rand(&wk->rng) % 16) * PG;
	char c = 'x';
	int r;

	if (off + len > PRIV_LEN)
		len = PRIV_LEN - off;
	r = pm_mprotect(mm, wk->priv + off, len, PM_PROT_READ);
	if (r)
		fail("worker %d: mprotect RO -> %d", wk->id, r);
	if (pm_access(mm, wk->priv + off, &c, 1, 1) != -EFAULT)
		fail("worker %d: write to a read-only page did not fail", wk->id);
	priv_verify(wk, off, len);
	r = pm_mprotect(mm, wk->priv + off, len, RW);
	if (r)
		fail("worker %d: mprotect RW -> %d", wk->id, r);
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;

	for (;;) {
		if (wk->id == 0)
			phase_stop = atomic_load(&stop);
		pthread_barrier_wait(&phase_barrier);
		if (phase_stop)
			break;
		if (wk->id == 0 && pm_madvise(mm, SHARED_BASE, SHARED_LEN, PM_MADV_DONTNEED))
			fail("worker 0: DONTNEED of the shared region failed");
		pthread_barrier_wait(&phase_barrier);
		memset(wk->sgen, 0, sizeof(wk->sgen));

		for (int i = 0; i < 200; i++) {
			uint64_t r = tap_rand(&wk->rng);
			unsigned first = tap_rand(&wk->rng) % SHARED_PAGES;
			unsigned n = 1 + tap_rand(&wk->rng) % 8;

			if (first + n > SHARED_PAGES)
				n = SHARED_PAGES - first;
			switch (r % 16) {
			case 0 ... 4:
				shared_write(wk, first, n);
				break;
			case 5 ... 7:
				shared_verify(wk, first, n);
				break;
			case 8 ... 10:
				priv_write(wk);
				break;
			case 11 ... 12: {
				size_t off = tap_rand(&wk->rng) % PRIV_LEN;
				size_t len = 1 + tap_rand(&wk->rng) % (64 * 1024);

				priv_verify(wk, off, off + len > PRIV_LEN ? PRIV_LEN - off : len);
				break;
			}
			case 13:
				priv_discard(wk);
				break;
			case 14:
				priv_protect(wk);
				break;
			case 15:
				shared_verify(wk, 0, SHARED_PAGES);
				break;
			}
			wk->ops++;
		}
		shared_verify(wk, 0, SHARED_PAGES);
	}
	atomic_fetch_add(&ops_done, wk->ops);
	return NULL;
}

/* ------------------------------------------------------------------------------------------
 * The churn thread and its model of the gaps.
 */
enum { UNMAPPED, MAP_NONE, MAP_RO, MAP_RW };

struct gpage {
	uint8_t state;
	uint64_t val; /* first word of the page; 0 = never written since mapped/discarded */
};

static struct {
	unsigned long base[NGAPS];
	unsigned long len[NGAPS];
	struct gpage *pages[NGAPS];
	uint64_t rng;
	long ops, maps, unmaps, protects, discards, writes, reads;
} churn;

static const char *state_name(int s)
{
	static const char *const names[] = { "unmapped", "PROT_NONE", "read-only", "read-write" };

	return names[s];
}

static bool all_mapped(struct gpage *g, unsigned long first, unsigned long n)
{
	for (unsigned long i = first; i < first + n; i++)
		if (g[i].state == UNMAPPED)
			return false;
	return true;
}

static void churn_check_page(int gi, unsigned long i)
{
	struct gpage *g = &churn.pages[gi][i];
	unsigned long a = churn.base[gi] + i * PG;
	uint64_t v = 0xdeadbeef;
	long r = pm_access(mm, a, &v, 8, 0);

	churn.reads++;
	if (g->state == UNMAPPED || g->state == MAP_NONE) {
		if (r != -EFAULT)
			fail("churn: read of %s page %#lx -> %ld", state_name(g->state), a, r);
	} else if (r != 8 || v != g->val) {
		fail("churn: page %#lx (%s) reads %#lx (r %ld), model %#lx", a,
		     state_name(g->state), (unsigned long)v, r, (unsigned long)g->val);
	}
}

static void churn_op(void)
{
	int gi = tap_rand(&churn.rng) % NGAPS;
	struct gpage *g = churn.pages[gi];
	unsigned long npages = churn.len[gi] / PG;
	unsigned long first = tap_rand(&churn.rng) % npages;
	unsigned long n = 1 + tap_rand(&churn.rng) % (tap_rand(&churn.rng) % 2 ? 16 : 1024);
	unsigned long a = churn.base[gi] + first * PG;
	uint64_t r = tap_rand(&churn.rng);
	long ret;

	if (first + n > npages)
		n = npages - first;
	switch (r % 10) {
	case 0: /* map (replacing whatever is there), maybe THP-advised */
		ret = pm_mmap(mm, a, n * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
		if (ret != (long)a)
			fail("churn: mmap FIXED %#lx+%lu -> %ld", a, n, ret);
		if (r & 0x100 && pm_madvise(mm, a, n * PG, PM_MADV_HUGEPAGE))
			fail("churn: MADV_HUGEPAGE failed");
		for (unsigned long i = first; i < first + n; i++)
			g[i] = (struct gpage){ MAP_RW, 0 };
		churn.maps++;
		break;
	case 1: /* unmap */
		ret = pm_munmap(mm, a, n * PG);
		if (ret)
			fail("churn: munmap %#lx+%lu -> %ld", a, n, ret);
		for (unsigned long i = first; i < first + n; i++)
			g[i] = (struct gpage){ UNMAPPED, 0 };
		churn.unmaps++;
		break;
	case 2: { /* protect a fully mapped range */
		static const int prots[] = { PM_PROT_NONE, PM_PROT_READ, RW };
		int k = tap_rand(&churn.rng) % 3;

		if (!all_mapped(g, first, n))
			break;
		ret = pm_mprotect(mm, a, n * PG, prots[k]);
		if (ret)
			fail("churn: mprotect %#lx+%lu -> %ld", a, n, ret);
		for (unsigned long i = first; i < first + n; i++)
			g[i].state = MAP_NONE + k;
		churn.protects++;
		break;
	}
	case 3: /* discard a fully mapped range */
		if (!all_mapped(g, first, n))
			break;
		ret = pm_madvise(mm, a, n * PG, PM_MADV_DONTNEED);
		if (ret)
			fail("churn: DONTNEED %#lx+%lu -> %ld", a, n, ret);
		for (unsigned long i = first; i < first + n; i++)
			g[i].val = 0;
		churn.discards++;
		break;
	case 4 ... 6: /* write some pages */
		for (unsigned long i = first; i < first + n && i < first + 32; i++) {
			uint64_t v = pmt_mix(churn.base[gi] + i * PG, tap_rand(&churn.rng)) | 1;

			ret = pm_access(mm, churn.base[gi] + i * PG, &v, 8, 1);
			churn.writes++;
			if (g[i].state == MAP_RW) {
				if (ret != 8)
					fail("churn: write of a read-write page -> %ld", ret);
				g[i].val = v;
			} else if (ret != -EFAULT) {
				fail("churn: write of a %s page -> %ld", state_name(g[i].state),
				     ret);
			}
		}
		break;
	default: /* read some pages */
		for (unsigned long i = first; i < first + n && i < first + 32; i++)
			churn_check_page(gi, i);
		break;
	}
	churn.ops++;
}

static void *churn_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		churn_op();
	return NULL;
}

static void run(double seconds)
{
	pthread_t ct;
	size_t free0 = pmt_setup(&m, &mm, 128, 0);

	ASSERT_EQ(pthread_barrier_init(&phase_barrier, NULL, NW), 0);

	for (int w = 0; w < NW; w++) {
		struct worker *wk = &workers[w];

		memset(wk, 0, sizeof(*wk));
		wk->id = w;
		wk->rng = pmt_mix(seed, 100 + w);
		wk->priv = BASE + w * SLOT;
		wk->shadow = calloc(1, PRIV_LEN);
		ASSERT_TRUE(wk->shadow);
		ASSERT_EQ(pm_mmap(mm, wk->priv, PRIV_LEN, RW, PRIV | PM_MAP_FIXED, NULL, 0),
			  wk->priv);
		if (w % 2 == 0)
			ASSERT_EQ(pm_madvise(mm, wk->priv, PRIV_LEN, PM_MADV_HUGEPAGE), 0);
		churn.base[w] = wk->priv + GAP_OFF;
		churn.len[w] = GAP_LEN;
	}
	ASSERT_EQ(pm_mmap(mm, SHARED_BASE, SHARED_LEN, RW, PRIV | PM_MAP_FIXED, NULL, 0),
		  SHARED_BASE);
	churn.base[NW] = SHARED_BASE + SHARED_LEN;
	churn.len[NW] = TAIL_GAP_LEN;
	churn.rng = pmt_mix(seed, 7);
	for (int gi = 0; gi < NGAPS; gi++) {
		churn.pages[gi] = calloc(churn.len[gi] / PG, sizeof(struct gpage));
		ASSERT_TRUE(churn.pages[gi]);
	}

	for (int w = 0; w < NW; w++)
		ASSERT_EQ(pthread_create(&workers[w].th, NULL, worker_main, &workers[w]), 0);
	ASSERT_EQ(pthread_create(&ct, NULL, churn_main, NULL), 0);
	double end = tap_now() + seconds;

	pmt_wait_until(end, &errors);
	atomic_store(&stop, 1);
	for (int w = 0; w < NW; w++)
		pthread_join(workers[w].th, NULL);
	pthread_join(ct, NULL);
	pthread_barrier_destroy(&phase_barrier);

	diag("worker ops %ld; churn ops %ld: %ld maps, %ld unmaps, %ld protects, %ld discards, "
	     "%ld writes, %ld reads",
	     atomic_load(&ops_done), churn.ops, churn.maps, churn.unmaps, churn.protects,
	     churn.discards, churn.writes, churn.reads);
	is_int(atomic_load(&errors), 0, "no thread saw a wrong result or lost data");
	ok(atomic_load(&ops_done) >= NW * 200 && churn.ops > 0, "every thread made progress");

	/* Quiescent: verify everything once more from here. */
	long before = atomic_load(&errors);

	for (int w = 0; w < NW; w++) {
		workers[w].id = w;
		priv_verify(&workers[w], 0, PRIV_LEN);
		shared_verify(&workers[w], 0, SHARED_PAGES);
	}
	for (int gi = 0; gi < NGAPS; gi++)
		for (unsigned long i = 0; i < churn.len[gi] / PG; i++)
			churn_check_page(gi, i);
	is_int(atomic_load(&errors) - before, 0, "the final state matches every model");
	struct pm_stats s;

	pm_machine_stats(m, &s);
	diag("faults %lu, thp_faults %lu, thp_splits %lu, pgtable allocs %lu frees %lu", s.faults,
	     s.thp_faults, s.thp_splits, s.pgtable_allocs, s.pgtable_frees);
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive");

	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_after_run, NULL);
	for (int w = 0; w < NW; w++)
		free(workers[w].shadow);
	for (int gi = 0; gi < NGAPS; gi++)
		free(churn.pages[gi]);
}

int main(int argc, char **argv)
{
	seed = tap_seed(argc, argv);
	plan_no_plan();
	run(tap_seconds(2));
	return done_testing();
}
