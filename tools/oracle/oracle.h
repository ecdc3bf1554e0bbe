/* SPDX-License-Identifier: MIT */
/*
 * oracle.h - the differential run against the host kernel (make oracle, issue 29).
 *
 * One sequence of operations runs twice: on the host, in one server process per address
 * space (host.c), and on a pinmm machine (ops.c's pinmm halves). After every operation the
 * driver (main.c) compares the results and what each address space shows over the window
 * [WIN_BASE, WIN_BASE + WIN_SIZE): VMAs, per-page state, page contents, the hugetlb pool.
 *
 * Addresses: every mapping lives in the window. Fixed mappings are compared by value. A
 * non-fixed mmap (or a moving mremap) gets a hint in the window; a result outside the window
 * is unmapped at once by the side that got it and reported as RET_OUTSIDE, so nothing outside
 * the window is ever compared. In Linux's design the hint rule is x86's on both sides and the
 * values must agree; in the range design, whose placement is free, two different successful
 * addresses are unmapped on both sides and the sequence goes on (docs/linux-differences.md).
 */
#ifndef PINMM_ORACLE_H
#define PINMM_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIN_BASE 0x200000000000UL
#define WIN_SIZE (8UL << 20)
#define WIN_END (WIN_BASE + WIN_SIZE)
#define WIN_PAGES (WIN_SIZE / 4096)
#define HPAGE (2UL << 20)
#define MAXPROC 3
#define NSLOT 3
#define NOBJ 3		/* 0, 1: shmem (memfd); 2: hugetlb (memfd MFD_HUGETLB) */
#define HEAD 64		/* writes touch a page's first HEAD bytes; only those are hashed per op */
#define MAXVMA 64
#define RET_OUTSIDE 1L	/* a successful mmap/mremap whose address fell outside the window */
#define POOL_PAGES 8	/* hugetlb pool on both sides */

enum op_kind {
	OP_MMAP, OP_MUNMAP, OP_MPROTECT, OP_MADVISE, OP_READ, OP_WRITE, OP_FREAD, OP_FWRITE,
	OP_MINCORE, OP_PIN, OP_UNPIN, OP_PINWRITE, OP_FORK, OP_EXIT, OP_TRUNCATE, OP_MREMAP,
	OP_NR
};

/* One operation. Fields by kind: addr/len for ranges; x: prot, advice, byte value, slot or
 * new process; f: mmap/mremap flags; o: object (-1 none); off: file offset, truncate size;
 * b: mremap's new length; c: mremap's new address. */
struct op {
	uint8_t kind, proc;
	int x, f, o;
	unsigned long addr, len, off, b, c;
};

struct res {
	long ret;	/* the result, -errno on failure (host errno turned into -errno) */
	uint64_t aux;	/* mincore: a hash of the vector; 0 otherwise */
	uint64_t vec[(WIN_PAGES + 64 + 63) / 64]; /* mincore: the vector's bit 0s, for the report */
};

struct obs_page {
	uint64_t pfn;	/* raw frame number (0: unknown or not present) */
	uint32_t flags;	/* PM_PAGE_* subset compared: PRESENT EXCLUSIVE ANON ZERO THP HUGETLB */
	uint32_t mapcount;
	uint64_t hash;	/* of the first HEAD bytes, or of the whole page on a full check */
};

struct obs_vma {
	unsigned long start, end, pgoff;
	unsigned prot, flags, vmflags;	/* PM_PROT_*, PM_MAP_SHARED/PRIVATE|ANONYMOUS|HUGETLB */
	int obj;			/* 0..NOBJ-1, -1: none or anonymous */
	unsigned long rss, anon, ahuge;	/* pages */
};

struct obs_proc {
	int nvma;
	bool smaps;	/* rss, anon, ahuge and vmflags filled (host: read from smaps, not maps) */
	struct obs_vma vma[MAXVMA];
	struct obs_page pg[WIN_PAGES];
};

/* What the host can serve, probed at start-up; what it cannot is skipped, and said. */
struct caps {
	bool root, kpage, uring, hugetlb, memfd, force, smaps;
	bool thp;	/* the host's THP is madvise mode, its huge zero page as pinmm's */
	bool anon_read_page;	/* the host allocates a page at an anonymous read fault (probed) */
	/* pinmm on this branch */
	bool pm_mremap, pm_huge_zero, pm_locked, pm_growsdown;
	bool pm_madv[32];	/* by advice value */
};

/* ops.c: the table */
struct op_desc {
	const char *name;
	int weight;
	bool (*pinmm_has)(const struct caps *c, const struct op *op);	/* NULL: always */
	bool (*host_has)(const struct caps *c, const struct op *op);	/* NULL: always */
};
extern const struct op_desc op_table[OP_NR];

/* Per-sequence state of one side. */
struct hstate;	/* host.c / ops.c, one per server process */
struct pstate;	/* ops.c, the pinmm side */

struct gen_ctx {
	uint64_t *rng;
	const struct caps *caps;
	int nproc;		/* processes created so far (alive or not) */
	bool alive[MAXPROC];
};
void op_generate(struct gen_ctx *g, struct op *op);
const char *op_variant(const struct op *op, char *buf, size_t n); /* e.g. "mmap.fixed.hugetlb" */
void op_print_c(const struct op *op, int idx, const struct res *want, char *buf, size_t n);
void op_print(const struct op *op, char *buf, size_t n);

/* host side (host.c) */
int host_seq_start(const struct caps *c);	/* a fresh server 0; 0 or -errno */
void host_seq_end(void);
struct res host_exec(const struct op *op);
/* the server observes while the driver does pinmm's side: send, then receive */
int host_observe_send(int proc, bool full, bool smaps);
int host_observe_recv(int proc, struct obs_proc *out);
int host_pool(long *free, long *rsvd);
long host_pool_leak(void);
long host_thp_fallbacks(void);
void host_probe(struct caps *c, char *why, size_t n);
int host_settings_save_and_set(const struct caps *c, char *msg, size_t n);
void host_settings_restore(void);
bool host_alive(int proc);

/* the host server's op execution (ops.c), inside the server process */
struct res host_do(struct hstate *h, const struct op *op);
void host_state_init(struct hstate *h, int proc);
void host_state_forked(struct hstate *h, int proc);
void host_state_exit(struct hstate *h);
size_t host_state_size(void);

/* pinmm side (ops.c) */
struct pstate *pm_seq_start(unsigned design_flags, const struct caps *c);
/* 0, or -1 when the machine is not whole again (checked when @check, and now and then) */
int pm_seq_end(struct pstate *p, bool check, char *why, size_t n);
int pm_run_end(char *why, size_t n);
struct res pm_do(struct pstate *p, const struct op *op);
/* Does [@addr, @addr + @len) of process @proc's pinmm mm end within stack_guard_gap (256
 * pages) below a growing-down VMA - the gap Linux keeps free of non-fixed mmaps (vm_start_gap)? */
bool pm_in_stack_guard_gap(struct pstate *p, int proc, unsigned long addr, unsigned long len);
/* Does @op move part of a private hugetlb mapping (Linux then leaks the rest's reservations)? */
bool pm_hugetlb_move_leaves_part(struct pstate *p, const struct op *op);
int pm_observe(struct pstate *p, int proc, struct obs_proc *out, bool full);
int pm_pool(struct pstate *p, long *free, long *rsvd);
void pm_unmap_stray(struct pstate *p, int proc, unsigned long addr, unsigned long len);
void pm_probe(struct caps *c);

/* Keep mincore's @n-entry vector @vec (bit 0s) in @r, for the report of a divergence. */
static inline void res_keep_vec(struct res *r, const unsigned char *vec, unsigned long n)
{
	for (unsigned long i = 0; r->ret == 0 && i < n; i++)
		if (vec[i] & 1)
			r->vec[i / 64] |= 1ULL << (i % 64);
}

/* A hash of @n bytes, 8 at a time (@n a multiple of 8 except for short vectors). */
static inline uint64_t fnv64(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__builtin_memcpy(&w, s + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ULL;
	return h;
}

static inline uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

#endif
