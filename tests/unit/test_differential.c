// SPDX-License-Identifier: MIT
/*
 * test_differential.c - pinmm against the reference model (issue 9), the make-check budget:
 *  1. self-tests of the harness: the byte encoding round-trips, and a byte changed behind the
 *     model's back is caught (a differential test that cannot fail is no test);
 *  2. hand-written scenarios of Linux's COW/pin semantics and regression sequences (the table
 *     known[] below; a sequence marked xfail is a pinmm bug not fixed yet: it is run and
 *     reported with diag(), and must be unmarked once it passes);
 *  3. random sequences: a fixed seed, then the clock's (or -s SEED's), then VMA-heavy ones
 *     (many small mappings, splits and merges) from the same seed. A failure prints the
 *     seed, the shrunk sequence (paste it into known[]), its trace and its bytes in hex.
 *
 * Options: -s SEED (replay the random batch), -n SEQUENCES, -l OPS per sequence, -v (trace
 * every operation), -x HEX (run one encoded sequence, e.g. from a failure or a fuzzer crash,
 * with its trace), -f FILE (the same from a file), -c DIR (write the fuzzer's seed corpus).
 */
#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>

#include "lib/tap.h"
#include "lib/interp.h"

/* Readable builders for hand-written sequences (see interp.h for the fields). */
#define P_NONE 0
#define P_R 1
#define P_RW 2
#define K_PRIV_ANON 0
#define K_SHARED_ANON 1
#define K_PRIV_FILE 2
#define K_SHARED_FILE 3
#define G_GET 0
#define G_GET_FAST 1
#define G_PIN 2
#define G_PIN_FAST 3
#define G_WRITE 0x4
#define G_FORCE 0x8
#define G_LONGTERM 0x10
#define MMAP(mm, pg, n, prot, kind, obj, pgoff) \
	{ OP_MMAP, mm, pg, n, (prot) | (kind) << 2, obj, pgoff }
#define MUNMAP(mm, pg, n) { OP_MUNMAP, mm, pg, n, 0, 0, 0 }
#define MPROTECT(mm, pg, n, prot) { OP_MPROTECT, mm, pg, n, prot, 0, 0 }
#define MADVISE(mm, pg, n, adv) { OP_MADVISE, mm, pg, n, adv, 0, 0 }
#define A_DONTNEED 0
#define A_HUGEPAGE 1
#define A_NOHUGEPAGE 2
#define A_DONTFORK 3
#define A_DOFORK 4
#define A_FREE 7
#define WRITE(mm, pg, off, len, seed) { OP_ACCESS, mm, pg, (len) - 1, 1, seed, off }
#define READ(mm, pg, off, len) { OP_ACCESS, mm, pg, (len) - 1, 0, 0, off }
#define FAULT(mm, pg, w) { OP_FAULT, mm, pg, 0, w, 0, 0 }
#define FORK(mm) { OP_FORK, mm, 0, 0, 0, 0, 0 }
#define DESTROY(mm) { OP_MM_DESTROY, mm, 0, 0, 0, 0, 0 }
#define GUP(mm, pg, n, how) { OP_GUP, mm, pg, n, how, 0, 0 }
#define RELEASE(g, method) { OP_RELEASE, 0, 0, 0, g, method, 0 }
#define PIN_WRITE(g, idx, off, len, seed) { OP_PIN_WRITE, 0, (len) - 1, idx, g, seed, off }
#define REF_READ(g) { OP_REF_READ, 0, 0, 0, g, 0, 0 }
#define SHMEM_CREATE(obj, pages, max) { OP_SHMEM_CREATE, 0, 0, (pages) - 1, 0, obj, max }
#define TRUNCATE(obj, pages) { OP_SHMEM_TRUNCATE, 0, 0, pages, 0, obj, 0 }
#define SHMEM_PUT(obj) { OP_SHMEM_PUT, 0, 0, 0, 0, obj, 0 }
#define SHMEM_STAT(obj) { OP_SHMEM_STAT, 0, 0, 0, 0, obj, 0 }
#define CHECK() { OP_CHECK, 0, 0, 0, 0, 0, 0 }
#define MIGRATE(mm, pg, n, away) { OP_MIGRATE, mm, pg, n, away, 0, 0 }
/* @n2 (1 or 2) hugetlb pages at the PMD region of @pg; @shared: of a new hugetlbfs object */
#define HMMAP(mm, pg, n2, prot, shared) { OP_HUGETLB_MMAP, mm, pg, (n2) - 1, (prot) | (shared) << 2, 0, 0 }

/* A get reference taken before fork keeps the bytes of that moment once either side writes
 * (cow.c "vmsplice() before fork(), unmap in parent after fork()"). */
static const struct interp_op s_get_before_fork[] = {
	MMAP(0, 0, 4, P_RW, K_PRIV_ANON, 0, 0), WRITE(0, 0, 0, 4096, 1), GUP(0, 0, 2, G_GET_FAST),
	FORK(0),			       WRITE(0, 0, 100, 50, 2),	 REF_READ(0),
	READ(1, 0, 0, 4096),		       WRITE(1, 0, 200, 50, 3),	 REF_READ(0),
	MUNMAP(0, 0, 4),		       REF_READ(0),		 RELEASE(0, 0),
};

/* A R/W pin before fork stays the parent's: writes through it reach the parent only. */
static const struct interp_op s_pin_before_fork[] = {
	MMAP(0, 510, 4, P_RW, K_PRIV_ANON, 0, 0), WRITE(0, 510, 0, 8192, 4),
	GUP(0, 511, 2, G_PIN_FAST | G_WRITE),	  FORK(0),
	PIN_WRITE(0, 0, 10, 100, 5),		  READ(0, 511, 0, 4096),
	READ(1, 511, 0, 4096),			  WRITE(0, 511, 500, 10, 6),
	REF_READ(0),				  FORK(1),
	READ(2, 511, 0, 8192),			  RELEASE(0, 3),
};

/* A R/O pin of a COW-shared page unshares it first (CVE-2020-29374): it then sees the
 * parent's later writes, and the child keeps its bytes. */
static const struct interp_op s_ro_pin_after_fork[] = {
	MMAP(0, 0, 8, P_RW, K_PRIV_ANON, 0, 0),
	WRITE(0, 2, 0, 8192, 7),
	WRITE(0, 4, 0, 4096, 29),
	FORK(0),
	GUP(0, 2, 3, G_PIN),
	MPROTECT(0, 0, 8, P_R),
	MPROTECT(0, 0, 8, P_RW),
	WRITE(0, 2, 0, 8192, 8),
	REF_READ(0),
	READ(1, 2, 0, 8192),
	GUP(1, 3, 1, G_PIN_FAST | G_LONGTERM),
	WRITE(1, 3, 0, 64, 9),
	REF_READ(1),
	RELEASE(0, 1),
	RELEASE(1, 2),
};

/* shmem: shared and private mappings, a pin across truncate, a limit, regrowth. */
static const struct interp_op s_shmem[] = {
	SHMEM_CREATE(0, 8, 6),			  MMAP(0, 100, 8, P_RW, K_SHARED_FILE, 0, 0),
	MMAP(0, 200, 8, P_RW, K_PRIV_FILE, 0, 0), WRITE(0, 100, 0, 8192, 10),
	READ(0, 200, 0, 8192),			  WRITE(0, 201, 0, 100, 11),
	WRITE(0, 101, 0, 100, 12),		  READ(0, 200, 0, 8192),
	GUP(0, 100, 2, G_PIN | G_WRITE),	  GUP(0, 201, 1, G_GET),
	SHMEM_STAT(0),				  WRITE(0, 103, 0, 8192, 13),
	WRITE(0, 105, 0, 8192, 31),		  WRITE(0, 102, 0, 8192, 32), /* over the limit */
	SHMEM_STAT(0),				  TRUNCATE(0, 1),
	READ(0, 100, 0, 8192),			  READ(0, 200, 0, 8192),
	PIN_WRITE(0, 1, 0, 4096, 14),		  REF_READ(0),
	REF_READ(1),				  TRUNCATE(0, 8),
	READ(0, 100, 0, 8192),		  READ(0, 200, 0, 8192),
	SHMEM_STAT(0),				  FORK(0),
	WRITE(1, 102, 0, 4096, 15),		  READ(0, 102, 0, 4096),
	SHMEM_PUT(0),				  READ(1, 102, 0, 4096),
	CHECK(),				  RELEASE(0, 0),
};

/* THP: a PMD-mapped folio, pinned, split by mprotect, forked, partly unmapped. */
static const struct interp_op s_thp[] = {
	MMAP(0, 512, 512, P_RW, K_PRIV_ANON, 0, 0), MADVISE(0, 512, 512, A_HUGEPAGE),
	WRITE(0, 600, 0, 64, 16),		    GUP(0, 700, 4, G_PIN_FAST | G_WRITE),
	GUP(0, 800, 2, G_GET),			    GUP(0, 900, 1, G_PIN),
	MPROTECT(0, 650, 10, P_R),		    FORK(0),
	PIN_WRITE(0, 1, 0, 4096, 17),		    WRITE(0, 800, 0, 4096, 18),
	READ(1, 512, 0, 8192),			    READ(0, 700, 0, 8192),
	REF_READ(0),				    REF_READ(1),
	REF_READ(2),				    MADVISE(0, 512, 100, A_DONTNEED),
	MADVISE(0, 600, 1, A_DONTNEED),		    READ(0, 599, 0, 8192),
	MUNMAP(0, 701, 1),			    CHECK(),
	REF_READ(0),				    RELEASE(0, 3),
	WRITE(1, 512, 0, 8192, 19),		    DESTROY(1),
	RELEASE(1, 0),				    RELEASE(2, 1),
};

/*
 * The huge zero page (issue 29, divergence 3): references to a read-faulted THP window are
 * zero pages that later writes do not reach; a write there copies 4 KiB and leaves the rest
 * zero, in the child of a fork too; a R/O long-term pin unshares. The first six operations
 * are the sequence the random walk shrank to while the interpreter still took such a
 * reference for a THP page.
 */
static const struct interp_op s_huge_zero[] = {
	MMAP(0, 0, 1024, P_RW, K_PRIV_ANON, 0, 0), MADVISE(0, 0, 1024, A_HUGEPAGE),
	GUP(0, 2, 8, G_GET_FAST),		   WRITE(0, 413, 0x379, 22, 5),
	FORK(0),				   GUP(1, 2, 2, G_GET),
	READ(0, 0, 0, 8192),			   READ(1, 410, 0, 8192),
	GUP(0, 600, 4, G_PIN_FAST | G_LONGTERM),   GUP(1, 700, 2, G_PIN),
	WRITE(0, 601, 0, 64, 6),		   WRITE(1, 701, 0, 64, 7),
	REF_READ(0),				   REF_READ(1),
	REF_READ(2),				   REF_READ(3),
	MADVISE(0, 512, 512, A_DONTNEED),	   READ(0, 600, 0, 4096),
	CHECK(),				   RELEASE(0, 0),
	RELEASE(1, 0),				   RELEASE(2, 1),
	RELEASE(3, 2),
};

/* FOLL_FORCE writes a read-only private mapping through a COW copy; never a shared one. */
static const struct interp_op s_force[] = {
	SHMEM_CREATE(1, 4, 0),
	MMAP(0, 10, 4, P_R, K_PRIV_FILE, 1, 0),
	MMAP(0, 20, 4, P_R, K_SHARED_FILE, 1, 0),
	MMAP(0, 30, 4, P_R, K_PRIV_ANON, 0, 0),
	GUP(0, 10, 2, G_PIN | G_WRITE | G_FORCE),
	GUP(0, 20, 2, G_PIN | G_WRITE | G_FORCE),
	GUP(0, 30, 2, G_PIN_FAST | G_WRITE | G_FORCE),
	GUP(0, 30, 2, G_PIN_FAST | G_WRITE),
	PIN_WRITE(0, 0, 0, 4096, 20),
	PIN_WRITE(1, 1, 0, 4096, 21),
	READ(0, 10, 0, 8192),
	READ(0, 20, 0, 8192),
	READ(0, 30, 0, 8192),
	WRITE(0, 30, 0, 10, 22),
	REF_READ(0),
	REF_READ(1),
	RELEASE(0, 2),
	RELEASE(1, 1),
};

/*
 * A long-term R/O pin of a private file mapping must not pin the page cache page (gup_longterm
 * "R/O longterm GUP pin in MAP_PRIVATE file mapping"): it gets a private copy, which later
 * shared writes do not reach; a short-term one pins the object's page and sees them.
 */
static const struct interp_op s_longterm_private_file[] = {
	SHMEM_CREATE(2, 4, 0),
	MMAP(0, 40, 4, P_RW, K_SHARED_FILE, 2, 0),
	MMAP(0, 50, 4, P_R, K_PRIV_FILE, 2, 0),
	WRITE(0, 40, 0, 8192, 28),
	GUP(0, 50, 2, G_PIN_FAST | G_LONGTERM),
	GUP(0, 51, 2, G_PIN),
	GUP(0, 52, 1, G_GET),
	WRITE(0, 40, 0, 8192, 29),
	WRITE(0, 42, 0, 4096, 30),
	REF_READ(0),
	REF_READ(1),
	REF_READ(2),
	READ(0, 50, 0, 8192),
	READ(0, 52, 0, 4096),
	RELEASE(0, 1),
	RELEASE(1, 0),
	RELEASE(2, 0),
};

/* DONTFORK leaves a range out of the child; DOFORK puts it back. */
static const struct interp_op s_dontfork[] = {
	MMAP(0, 0, 16, P_RW, K_PRIV_ANON, 0, 0),
	MMAP(0, 16, 16, P_RW, K_SHARED_ANON, 0, 0),
	WRITE(0, 0, 0, 8192, 23),
	WRITE(0, 4, 0, 8192, 25),
	WRITE(0, 16, 0, 8192, 26),
	WRITE(0, 20, 0, 8192, 27),
	MADVISE(0, 4, 8, A_DONTFORK),
	MADVISE(0, 20, 2, A_DONTFORK),
	FORK(0),
	READ(1, 3, 0, 8192),
	READ(1, 19, 0, 8192),
	MADVISE(0, 0, 32, A_DOFORK),
	FORK(0),
	WRITE(2, 17, 0, 100, 24),
	READ(0, 17, 0, 100),
	READ(1, 17, 0, 100),
	DESTROY(0),
	READ(2, 4, 0, 4096),
};

struct known {
	const char *name;
	unsigned knobs;
	bool xfail; /* a pinmm bug not fixed yet: run, reported, does not fail the test */
	const struct interp_op *ops;
	size_t n;
};

#define KNOWN(name, knobs, xfail, ops) { name, knobs, xfail, ops, sizeof(ops) / sizeof(ops[0]) }

/* Migration moves no pinned or referenced page: writes through pins, gets and the mappings
 * keep meeting the same bytes, shared anonymous (shmem) pages and a fork child's too. */
static const struct interp_op s_migrate[] = {
	MMAP(0, 0, 8, P_RW, K_PRIV_ANON, 0, 0), WRITE(0, 0, 0, 32768, 50),
	MMAP(0, 16, 4, P_RW, K_SHARED_ANON, 0, 0), WRITE(0, 16, 0, 16384, 51),
	GUP(0, 1, 2, G_PIN_FAST | G_WRITE),	GUP(0, 17, 1, G_GET),
	MIGRATE(0, 0, 20, 0),			PIN_WRITE(0, 0, 0, 4096, 52),
	READ(0, 0, 0, 32768),			REF_READ(0),
	REF_READ(1),				WRITE(0, 17, 0, 100, 53),
	REF_READ(1),				FORK(0),
	MIGRATE(0, 0, 20, 1),			MIGRATE(1, 0, 20, 0),
	WRITE(1, 2, 0, 4096, 54),		READ(0, 0, 0, 32768),
	READ(1, 0, 0, 32768),			READ(1, 16, 0, 16384),
	RELEASE(0, 1),				RELEASE(1, 0),
	MIGRATE(0, 0, 21, 0),			CHECK(),
};

/* Hugetlb (model.c H1-H5): private and shared 2 MiB pages, a pin and a get on them, migration
 * refused then done, fork copying the pinned page and sharing the other, COW in a grandchild,
 * DONTNEED, and an munmap that would cut a hugetlb page (not predicted: skipped). */
static const struct interp_op s_hugetlb[] = {
	HMMAP(0, 0, 1, P_RW, 0),		  WRITE(0, 0, 0, 8192, 60),
	WRITE(0, 300, 0, 4096, 61),		  HMMAP(0, 512, 1, P_RW, 1),
	WRITE(0, 512, 0, 4096, 62),		  GUP(0, 1, 2, G_PIN_FAST | G_WRITE),
	GUP(0, 513, 1, G_GET),			  MIGRATE(0, 0, 1024, 0),
	PIN_WRITE(0, 0, 0, 4096, 63),		  READ(0, 0, 0, 8192),
	REF_READ(0),				  REF_READ(1),
	FORK(0),				  WRITE(1, 1, 0, 100, 64),
	READ(0, 1, 0, 4096),			  READ(1, 1, 0, 4096),
	WRITE(1, 513, 0, 100, 65),		  READ(0, 513, 0, 4096),
	REF_READ(1),				  RELEASE(0, 1),
	MIGRATE(0, 0, 1024, 0),			  READ(0, 0, 0, 8192),
	READ(1, 0, 0, 8192),			  MIGRATE(1, 0, 1024, 1),
	READ(1, 512, 0, 4096),			  FORK(1),
	WRITE(2, 300, 0, 50, 66),		  READ(1, 300, 0, 4096),
	READ(2, 300, 0, 4096),			  MIGRATE(1, 0, 512, 0),
	READ(1, 300, 0, 4096),			  MADVISE(0, 0, 512, A_DONTNEED),
	READ(0, 0, 0, 4096),			  MUNMAP(0, 256, 8),
	GUP(2, 2, 2, G_PIN | G_WRITE),		  FORK(2),
	WRITE(2, 2, 0, 4096, 67),		  PIN_WRITE(0, 1, 0, 64, 68),
	REF_READ(0),				  READ(3, 2, 0, 8192),
	CHECK(),				  RELEASE(1, 0),
};

/*
 * MADV_FREE of the tail of a THP splits it, and the split maps every page that holds only
 * zeros to the zero page (model.c R8), even pages pinned for write and released dirty
 * without a byte written: a later R/O pin of one may be the zero page. Then a write through
 * the mapping and a read pin of a page that holds data.
 */
static const struct interp_op s_free_split_zero[] = {
	MMAP(0, 1024, 512, P_RW, K_PRIV_ANON, 0, 0), MADVISE(0, 1024, 512, A_HUGEPAGE),
	GUP(0, 1025, 6, G_PIN_FAST | G_WRITE | G_LONGTERM),
	{ OP_RELEASE, 0, 0, 0, 0, 2, 1 }, /* unpin_user_pages_dirty_lock(), dirty */
	WRITE(0, 1027, 8, 64, 70),		     MADVISE(0, 1503, 14, A_FREE),
	GUP(0, 1025, 6, G_PIN_FAST),		     READ(0, 1024, 0, 32768),
	WRITE(0, 1030, 0, 4096, 71),		     REF_READ(0),
	CHECK(),				     RELEASE(0, 0),
};

static const struct known known[] = {
	KNOWN("get before fork keeps the old bytes", 0, false, s_get_before_fork),
	KNOWN("MADV_FREE's split maps zero-filled pages to the zero page", 0, false,
	      s_free_split_zero),
	KNOWN("R/W pin before fork stays the parent's", 0, false, s_pin_before_fork),
	KNOWN("R/W pin before fork, all knobs", PM_KNOB_ALL, false, s_pin_before_fork),
	KNOWN("R/O pin after fork unshares", 0, false, s_ro_pin_after_fork),
	KNOWN("R/O pin after fork unshares, all knobs", PM_KNOB_ALL, false, s_ro_pin_after_fork),
	KNOWN("shmem shared/private, truncate, limit", 0, false, s_shmem),
	KNOWN("THP pinned, split, forked", 0, false, s_thp),
	KNOWN("THP pinned, split, forked, all knobs", PM_KNOB_ALL, false, s_thp),
	KNOWN("FOLL_FORCE", 0, false, s_force),
	KNOWN("long-term R/O pin of a private file mapping", 0, false, s_longterm_private_file),
	KNOWN("DONTFORK", 0, false, s_dontfork),
	KNOWN("huge zero page: references, a write, fork, pins", 0, false, s_huge_zero),
	KNOWN("the same with every knob (THPs instead)", PM_KNOB_ALL, false, s_huge_zero),
	KNOWN("migration keeps every pin's and mapping's bytes", 0, false, s_migrate),
	KNOWN("hugetlb private and shared: pins, fork, COW, migration", 0, false, s_hugetlb),
	KNOWN("the same with every knob", PM_KNOB_ALL, false, s_hugetlb),
};

static bool verbose;

static int run_one(unsigned knobs, const struct interp_op *ops, size_t n, struct interp_stats *st,
		   struct interp_result *res)
{
	struct interp_opts opts = { .trace = verbose ? stdout : NULL };

	return interp_run(interp_machine_get(knobs), ops, n, &opts, res, st);
}

static uint64_t mix(uint64_t seed, uint64_t k)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (k + 1);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void random_batch(uint64_t seed, long nseq, size_t nops, const char *what)
{
	struct interp_stats st = { 0 };
	struct interp_op *ops = calloc(nops, sizeof(*ops));
	long failed = 0, i;

	ASSERT_TRUE(ops != NULL);
	for (i = 0; i < nseq; i++) {
		uint64_t sub = mix(seed, (uint64_t)i);
		unsigned knobs = interp_generate_knobs(sub);
		struct interp_result res;

		interp_generate(sub, ops, nops);
		if (run_one(knobs, ops, nops, &st, &res)) {
			diag("%s: sequence %ld (seed %" PRIu64 ", sub-seed %" PRIu64
			     ", knobs 0x%x) "
			     "failed",
			     what, i, seed, sub, knobs);
			interp_report(stdout, knobs, ops, nops, &res, tap_scale(600));
			failed++;
			break; /* one shrunk report is worth more than many */
		}
	}
	ok(failed == 0,
	   "%s: %ld random sequences of %zu operations agree with the model (seed %" PRIu64 ")",
	   what, i, nops, seed);
	interp_print_stats(stdout, what, &st);
	free(ops);
}

static void self_tests(void)
{
	struct interp_op ops[64], back[64];
	uint8_t buf[INTERP_KNOB_BYTES + 64 * INTERP_OP_BYTES];
	unsigned knobs;
	size_t len, n;
	struct interp_result res;
	static const struct interp_op tamper[] = {
		MMAP(0, 0, 2, P_RW, K_PRIV_ANON, 0, 0),
		WRITE(0, 0, 0, 8192, 30),
		GUP(0, 0, 2, G_PIN | G_WRITE),
		{ OP_TAMPER, 0, 0, 1, 0, 0, 77 },
		REF_READ(0),
		RELEASE(0, 1),
	};
	static const struct interp_op tamper_unseen[] = {
		MMAP(0, 0, 2, P_RW, K_PRIV_ANON, 0, 0),
		WRITE(0, 0, 0, 8192, 31),
		GUP(0, 0, 2, G_PIN_FAST | G_WRITE),
		{ OP_TAMPER, 0, 0, 0, 0, 0, 5 },
		READ(0, 0, 0, 16),
		RELEASE(0, 1),
	};

	interp_generate(42, ops, 64);
	/* The encoding's knob byte holds the knobs below 0x100 (interp_encode.c). */
	len = interp_encode(PM_KNOB_ALL, ops, 64, buf, sizeof(buf));
	n = interp_decode(buf, len, &knobs, back, 64);
	ok(len == sizeof(buf) && n == 64 && knobs == PM_KNOB_ALL &&
	   !memcmp(ops, back, sizeof(ops)), "encoding round-trips (%zu bytes)", len);

	ok(run_one(0, tamper, sizeof(tamper) / sizeof(tamper[0]), NULL, &res) && res.op == 4,
	   "a byte changed behind the model's back is caught by a read through the pin");
	if (res.failed)
		diag("as expected: %s", res.msg);
	ok(interp_run(interp_machine_get(0), tamper_unseen,
		      sizeof(tamper_unseen) / sizeof(tamper_unseen[0]), NULL, &res, NULL) &&
		   res.op == 4,
	   "... and by a pm_access read of the owner");

	/* The shrinker brings a long failing sequence down to the operations that matter. */
	interp_generate(43, ops, 20);
	memcpy(ops + 20, tamper, sizeof(tamper));
	n = interp_shrink(0, ops, 20 + sizeof(tamper) / sizeof(tamper[0]), 400);
	ok(n >= 4 && n <= sizeof(tamper) / sizeof(tamper[0]) &&
	   run_one(0, ops, n, NULL, &res) != 0, "the shrinker keeps a failure and drops the rest "
	   "(%zu operations left)", n);
}

static void write_corpus(const char *dir)
{
	uint8_t buf[INTERP_KNOB_BYTES + 256 * INTERP_OP_BYTES];
	struct interp_op ops[256];
	char path[4096];
	size_t len;
	int nr = 0;

	mkdir(dir, 0755);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		len = interp_encode(known[i].knobs, known[i].ops, known[i].n, buf, sizeof(buf));
		snprintf(path, sizeof(path), "%s/known-%02zu.bin", dir, i);
		FILE *f = fopen(path, "wb");

		ASSERT_TRUE(f && fwrite(buf, 1, len, f) == len && !fclose(f));
		nr++;
	}
	for (uint64_t s = 1; s <= 8; s++) {
		size_t n = 24 + 16 * (s % 4);

		interp_generate(s, ops, n);
		len = interp_encode(interp_generate_knobs(s), ops, n, buf, sizeof(buf));
		snprintf(path, sizeof(path), "%s/random-%02u.bin", dir, (unsigned)s);
		FILE *f = fopen(path, "wb");

		ASSERT_TRUE(f && fwrite(buf, 1, len, f) == len && !fclose(f));
		nr++;
	}
	printf("wrote %d seed inputs to %s\n", nr, dir);
}

static int replay_bytes(const uint8_t *buf, size_t len)
{
	struct interp_op *ops = calloc(INTERP_MAX_OPS, sizeof(*ops));
	struct interp_opts opts = { .trace = stdout };
	struct interp_result res;
	unsigned knobs;
	size_t n;
	int r;

	ASSERT_TRUE(ops != NULL);
	n = interp_decode(buf, len, &knobs, ops, INTERP_MAX_OPS);
	interp_print(stdout, "# ", knobs, ops, n);
	r = interp_run(interp_machine_get(knobs), ops, n, &opts, &res, NULL);
	ok(r == 0, "replayed sequence of %zu operations (knobs 0x%x)%s%s", n, knobs,
	   r ? ": " : "", r ? res.msg : "");
	free(ops);
	interp_machines_release(NULL);
	return done_testing();
}

static int replay_hex(const char *hex)
{
	size_t len = strlen(hex) / 2;
	uint8_t *buf = malloc(len + 1);
	int r;

	ASSERT_TRUE(buf != NULL);
	for (size_t i = 0; i < len; i++) {
		unsigned v;

		ASSERT_TRUE(sscanf(hex + 2 * i, "%2x", &v) == 1);
		buf[i] = (uint8_t)v;
	}
	r = replay_bytes(buf, len);
	free(buf);
	return r;
}

static int replay_file(const char *path)
{
	static uint8_t buf[INTERP_KNOB_BYTES + INTERP_MAX_OPS * INTERP_OP_BYTES];
	FILE *f = fopen(path, "rb");
	size_t len;

	ASSERT_TRUE(f != NULL);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return replay_bytes(buf, len);
}

int main(int argc, char **argv)
{
	long nseq = -1, nops = 50;
	uint64_t seed;
	int opt, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "s:n:l:vx:f:c:")) != -1) {
		switch (opt) {
		case 's':
			break; /* tap_seed() reads it */
		case 'n':
			nseq = atol(optarg);
			break;
		case 'l':
			nops = atol(optarg);
			break;
		case 'v':
			verbose = true;
			break;
		case 'x':
			return replay_hex(optarg);
		case 'f':
			return replay_file(optarg);
		case 'c':
			write_corpus(optarg);
			return 0;
		default:
			fprintf(stderr, "usage: %s [-s SEED] [-n SEQUENCES] [-l OPS] [-v] [-x HEX] "
				"[-f FILE] [-c CORPUS_DIR]\n", argv[0]);
			return 2;
		}
	}
	if (nops < 1 || nops > INTERP_MAX_OPS)
		nops = 50;

	self_tests();

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		const struct known *k = &known[i];
		struct interp_result res;
		struct interp_op ops[256];

		memcpy(ops, k->ops, k->n * sizeof(ops[0]));
		r = run_one(k->knobs, ops, k->n, NULL, &res);
		if (k->xfail) {
			if (r)
				diag("known pinmm bug still there: %s: %s", k->name, res.msg);
			else
				diag("known pinmm bug fixed? '%s' passes: remove its xfail mark",
				     k->name);
			ok(1, "%s (xfail: %s)", k->name, r ? "still fails" : "passes now");
			continue;
		}
		if (!ok(r == 0, "scenario: %s", k->name))
			interp_report(stdout, k->knobs, ops, k->n, &res, tap_scale(600));
	}

	random_batch(1, nseq > 0 ? nseq : tap_scale(100), (size_t)nops, "fixed seed");
	seed = tap_seed(argc, argv);
	random_batch(seed, nseq > 0 ? nseq : tap_scale(100), (size_t)nops, "clock seed");
	/* Many small VMAs: the VMA tree, splits, merges and per-VMA faults against the model. */
	interp_vma_heavy = true;
	random_batch(seed + 1, nseq > 0 ? nseq : tap_scale(60), (size_t)nops, "VMA-heavy");
	interp_vma_heavy = false;
	/* The same model against both address-space designs, whatever PINMM_RANGE_MM says. */
	interp_mm_flags = pm_machine_flags(interp_machine_get(0)) == PM_MACHINE_RANGE_MM ?
				  PM_MACHINE_LINUX_MM : PM_MACHINE_RANGE_MM;
	random_batch(seed + 2, nseq > 0 ? nseq : tap_scale(60), (size_t)nops,
		     interp_mm_flags == PM_MACHINE_RANGE_MM ? "range design" : "Linux's design");
	interp_vma_heavy = true;
	random_batch(seed + 3, nseq > 0 ? nseq : tap_scale(60), (size_t)nops,
		     interp_mm_flags == PM_MACHINE_RANGE_MM ? "range design, VMA-heavy" :
							      "Linux's design, VMA-heavy");
	interp_vma_heavy = false;
	interp_mm_flags = 0;

	interp_machines_release(stdout);
	return done_testing();
}
