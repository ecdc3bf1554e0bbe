/* SPDX-License-Identifier: MIT */
/*
 * interp.h - the differential interpreter of issue 9: runs one sequence of operations against
 * pinmm and against the reference model (model.h) side by side, and compares every return
 * value and every byte read (through pm_access and through get/pin references). Its users
 * include this header only; the code is interp.c and the interp_*.c files beside it, one
 * concern each (interp_internal.h lists them).
 *
 * An operation is 10 bytes (struct interp_op): an opcode, an address-space slot, a page index
 * into the model's window, a page count, and three arguments whose meaning depends on the
 * opcode (below). Any byte string decodes to a valid sequence (out-of-range values are reduced),
 * so the same encoding serves the random generator, replay, regression tables and libFuzzer:
 *
 *   encoded sequence = 1 byte of PM_KNOB_* bits, then 10 bytes per operation
 *   operation        = code, mm, page (le16), npages (le16), a, b, c (le16)
 *
 * Opcodes and their arguments ("page" counts from the window base MODEL_BASE; ranges are
 * clamped to the window; "group" is one outstanding get/pin call):
 *   OP_MMAP	  page, npages; a: bits 0-1 prot (NONE, READ, RW, RW), bits 2-3 kind (private
 *		  anon, shared anon, private shmem, shared shmem), bit 4 MAP_POPULATE, bits 5-6
 *		  placement (MAP_FIXED, MAP_FIXED, MAP_FIXED_NOREPLACE, hint); b: object slot;
 *		  c: page offset into the object
 *   OP_MUNMAP	  page, npages
 *   OP_MPROTECT  page, npages; a: prot as OP_MMAP
 *   OP_MADVISE	  page, npages; a % INTERP_NR_ADVICE: DONTNEED, HUGEPAGE, NOHUGEPAGE,
 *		  DONTFORK, DOFORK, WIPEONFORK, KEEPONFORK, FREE, POPULATE_READ, POPULATE_WRITE
 *   OP_ACCESS	  byte page * 4096 + c % 4096, length 1 + npages % 8192; a bit 0: write;
 *		  b, c: the bytes written
 *   OP_FAULT	  page (+ c % 4096); a bit 0: write
 *   OP_FORK	  mm is the parent; the child takes the first free slot
 *   OP_MM_DESTROY, OP_MM_CREATE
 *   OP_GUP	  page, npages % 17 pages; a: bits 0-1 call (get_user_pages, _fast,
 *		  pin_user_pages, _fast), bit 2 FOLL_WRITE, bit 3 FOLL_FORCE, bit 4 FOLL_LONGTERM,
 *		  bit 5 pages == NULL; the references go to the first free group
 *   OP_RELEASE	  group a; b % 5: one call per page, unpin_user_pages, ..._dirty_lock,
 *		  ..._range_dirty_lock (when physically contiguous), only reference c % n
 *   OP_PIN_WRITE group a, reference npages % n, byte c % 4096, length 1 + page % rest; b, c:
 *		  the bytes (only write pins are written through)
 *   OP_REF_READ  group a: compare every reference's 4096 bytes with the model
 *   OP_SHMEM_CREATE  object slot b, 1 + npages % 256 pages, limit c % 320 pages (0 or >= 256:
 *		  unlimited)
 *   OP_SHMEM_TRUNCATE  object b to npages % 257 pages
 *   OP_SHMEM_PUT, OP_SHMEM_STAT (compare size and pages held)  object b
 *   OP_CHECK	  pm_machine_check()
 *   OP_BADARG	  a: one of the contract's argument errors (see badarg() in interp.c)
 *   OP_MIGRATE	  page, npages; a bit 0: PM_MIGRATE_ANYWHERE or AWAY_MOVABLE. The model
 *		  changes nothing: every byte read later, through a mapping or a reference,
 *		  must be what it was (a pinned or referenced page is never moved)
 *   OP_HUGETLB_MMAP  MAP_FIXED hugetlb mapping of 1 + npages % 2 whole 2 MiB pages from the
 *		  PMD region of page (clamped to the window); a: bits 0-1 prot as OP_MMAP, bit 2
 *		  shared (a new hugetlbfs object of the mapping's size, put after the mmap) or
 *		  private anonymous (MAP_HUGETLB). The machines' pool (INTERP_NR_HUGEPAGES) never
 *		  runs short; the model's hugetlb rules are H1-H5 in model.c
 */
#ifndef PM_TESTS_INTERP_H
#define PM_TESTS_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pinmm/pinmm.h>

#include "model.h"

#define INTERP_NR_ADVICE 10 /* OP_MADVISE's advice, in the order above */

enum interp_opcode {
	OP_MMAP,
	OP_MUNMAP,
	OP_MPROTECT,
	OP_MADVISE,
	OP_ACCESS,
	OP_FAULT,
	OP_FORK,
	OP_MM_DESTROY,
	OP_MM_CREATE,
	OP_GUP,
	OP_RELEASE,
	OP_PIN_WRITE,
	OP_REF_READ,
	OP_SHMEM_CREATE,
	OP_SHMEM_TRUNCATE,
	OP_SHMEM_PUT,
	OP_SHMEM_STAT,
	OP_CHECK,
	OP_BADARG,
	OP_MIGRATE,
	OP_HUGETLB_MMAP,
	INTERP_NR_OPS,
	/* Self-test only, never decoded: write a byte into a referenced page behind the model's
	 * back (group a, reference npages), so that the next comparison must fail. */
	OP_TAMPER = 0xff,
};

struct interp_op { /* the field order is the regression tables' initializer order */
	uint8_t code, mm;
	uint16_t page, npages;
	uint8_t a, b;
	uint16_t c;
};

#define INTERP_OP_BYTES 10
#define INTERP_KNOB_BYTES 2 /* the knobs, first: the bits of PM_KNOB_ALL packed in order */
#define INTERP_MAX_OPS 4096
#define INTERP_MEM_BYTES (256UL << 20) /* machines for differential runs: never out of memory */
/* Their hugetlb pool (64 MiB of it): more than 4 address spaces of 3 hugetlb pages, the pages
 * references keep and a migration's target can ever need at once. */
#define INTERP_NR_HUGEPAGES 32

struct interp_stats {
	unsigned long sequences; /* sequences run to the end */
	unsigned long ops;	 /* operations run on both sides and compared */
	unsigned long skipped;	 /* not run: no target, or the model could not predict */
	unsigned long bytes;	 /* bytes compared */
	unsigned long refs;	 /* references taken */
	unsigned long checks;	 /* pm_machine_check() calls */
	unsigned long per_op[INTERP_NR_OPS];
	unsigned long events[MEV_NR]; /* the model's rules that applied (model.h) */
};

struct interp_result {
	bool failed;
	size_t op; /* index of the operation that diverged (n: at the end-of-sequence checks) */
	char msg[512];
};

struct interp_opts {
	FILE *trace;	 /* each operation and its results, as it runs ("#   " lines); or NULL */
	bool check_each; /* pm_machine_check() after every operation */
	bool light_end;	 /* skip the end-of-sequence check made while references are held */
};

/*
 * interp_run() - run @ops on machine @m (quiescent: new, or after a previous interp_run with
 * nothing else on it) and on a fresh model, then release and destroy
 * everything, pm_rcu_barrier(), and check that @m's free pages are back and pm_machine_check()
 * passes. @st (may be NULL) is added to.
 * Return: 0, or -1 with @res telling where and how pinmm and the model diverged.
 */
int interp_run(struct pm_machine *m, const struct interp_op *ops, size_t n,
	       const struct interp_opts *opts, struct interp_result *res,
	       struct interp_stats *st);

/* The address-space design of the machines below: PM_MACHINE_* flags, 0 = the default. */
extern unsigned interp_mm_flags;
/* interp_machine() - a new machine for differential runs (INTERP_MEM_BYTES, @knobs). */
struct pm_machine *interp_machine(unsigned knobs);
/* interp_machine_get() - the process's machine for @knobs, made on first use and kept. */
struct pm_machine *interp_machine_get(unsigned knobs);
/* interp_machines_release() - print each kept machine's counters on @f ("# " lines, or
 * nothing if NULL) and destroy it. */
void interp_machines_release(FILE *f);

/* interp_generate() - @n random operations from @seed (deterministic). */
void interp_generate(uint64_t seed, struct interp_op *ops, size_t n);
/* When set, interp_generate() makes VMA-heavy sequences: many small mmaps, munmaps, mprotects
 * and madvises (splits and merges) with accesses and faults among them. */
extern bool interp_vma_heavy;
/* interp_generate_knobs() - a knob combination from @seed: often 0, sometimes all. */
unsigned interp_generate_knobs(uint64_t seed);

size_t interp_encode(unsigned knobs, const struct interp_op *ops, size_t n, uint8_t *out,
		     size_t cap);
size_t interp_decode(const uint8_t *data, size_t len, unsigned *knobs, struct interp_op *ops,
		     size_t max);

/* interp_print_stats() - @st as TAP diagnostics on @f. */
void interp_print_stats(FILE *f, const char *what, const struct interp_stats *st);
/* interp_op_name() - "OP_MMAP" etc. */
const char *interp_op_name(unsigned code);
/* interp_describe() - one operation as a C-like call, from its fields alone. */
void interp_describe(const struct interp_op *op, char *buf, size_t len);
/* interp_print() - @ops as initializer lines for a regression table, each commented. */
void interp_print(FILE *f, const char *prefix, unsigned knobs, const struct interp_op *ops,
		  size_t n);

/*
 * interp_shrink() - delete operations from a failing sequence while it still fails (each try
 * on the kept machine for @knobs, see interp_machine_get()); at most @tries runs.
 * Return: the new length.
 */
size_t interp_shrink(unsigned knobs, struct interp_op *ops, size_t n, long tries);

/*
 * interp_report() - for a sequence that failed with @res: shrink it (@tries runs), then print
 * on @f, as TAP diagnostics, the shrunk sequence as regression-table lines, its trace on a
 * fresh machine, and its encoding in hex (for test_differential -x). @ops is shrunk in place.
 */
void interp_report(FILE *f, unsigned knobs, struct interp_op *ops, size_t n,
		   const struct interp_result *res, long tries);

#endif /* PM_TESTS_INTERP_H */
