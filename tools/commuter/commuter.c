// SPDX-License-Identifier: MIT
/*
 * commuter.c - build/pinmm-commuter: the Scalable Commutativity Rule applied to pinmm's mm and
 * pin operations (issue 27, docs/commuter.md).
 *
 * For every pair of operations, every placement of their arguments and a few initial states,
 * the reference model (model.c) says whether the pair commutes: both orders give the same
 * results and final states no later operation tells apart. Each case then runs for real in
 * the trace build (docs/tracer.md): a fresh machine and address space in the case's state,
 * warmed up, A on a thread pinned to CPU 0 and B on one pinned to CPU 1, each between the
 * tracer's markers, once in each order. A commutative case is conflict-free at a level when
 * neither order shows a conflict there: C1, a byte one operation writes and the other reads
 * or writes; C64, the same for a 64-byte line.
 *
 * This harness is not instrumented: only the library's accesses are in the logs. The two
 * operations of an order run one after the other, not at once. A log is one thread's, so
 * running them together would only add the noise of which one got where first.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h"
#include "trace/trace.h"
#include "tools/commuter/model.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define CPU_SHARE_MIB 16 /* memory per CPU for its page cache to keep a 2 MiB block: the
			  * caches share an eighth of memory (src/mem/page_alloc.c) */
#define GiB (1024 * MiB)
#define PG 4096UL

/* Region A lies 128 GiB into a 512 GiB range, away from the range's edges: a change at a
 * range's first page also locks the range before it (pm__range_lock_change). */
#define RA ((4UL << 39) + 128 * GiB)
#define LEN_A (GiB + 4 * MiB)
#define LEN_B (4 * MiB)
#define SCRATCH (100UL << 39) /* warm-up's own VMA, a range no case uses */

/* ---- operations ---- */

enum op_kind {
	OK_MMAP, OK_MUNMAP, OK_MPROTECT, OK_DONTNEED, OK_HUGEPAGE, OK_READ, OK_WRITE, OK_FAULT,
	OK_PIN_FAST, OK_PIN, OK_GET_FAST, OK_UNPIN, OK_UMEM_GET, OK_UMEM_RELEASE, OK_FORK,
	OK_TRUNCATE,
};

struct op {
	const char *name;
	enum op_kind kind;
	int bk;		/* the backing the op needs its region to have, or -1: the state's */
	int mk;		/* mmap: the backing it creates; unpin: which call */
	bool fixed, populate;
};

static const struct op ops[] = {
	{ "mmap:anon", OK_MMAP, -1, BK_ANON, false, false },
	{ "mmap:shared", OK_MMAP, -1, BK_SHARED, false, false },
	{ "mmap:shmem", OK_MMAP, -1, BK_SHMEM, false, false },
	{ "mmap:hugetlb", OK_MMAP, -1, BK_HUGETLB, false, false },
	{ "mmap:fixed_anon", OK_MMAP, -1, BK_ANON, true, false },
	{ "mmap:fixed_shared", OK_MMAP, -1, BK_SHARED, true, false },
	{ "mmap:fixed_shmem", OK_MMAP, -1, BK_SHMEM, true, false },
	{ "mmap:fixed_hugetlb", OK_MMAP, -1, BK_HUGETLB, true, false },
	{ "mmap:populate", OK_MMAP, -1, BK_ANON, true, true },
	{ "munmap", OK_MUNMAP, -1, 0, false, false },
	{ "mprotect", OK_MPROTECT, -1, 0, false, false },
	{ "madvise:dontneed", OK_DONTNEED, -1, 0, false, false },
	{ "madvise:hugepage", OK_HUGEPAGE, -1, 0, false, false },
	{ "access_read:anon", OK_READ, BK_ANON, 0, false, false },
	{ "access_read:thp", OK_READ, BK_THP, 0, false, false },
	{ "access_read:shmem", OK_READ, BK_SHMEM, 0, false, false },
	{ "access_read:hugetlb", OK_READ, BK_HUGETLB, 0, false, false },
	{ "access_write:anon", OK_WRITE, BK_ANON, 0, false, false },
	{ "access_write:thp", OK_WRITE, BK_THP, 0, false, false },
	{ "access_write:shmem", OK_WRITE, BK_SHMEM, 0, false, false },
	{ "access_write:hugetlb", OK_WRITE, BK_HUGETLB, 0, false, false },
	{ "fault:anon", OK_FAULT, BK_ANON, 0, false, false },
	{ "fault:thp", OK_FAULT, BK_THP, 0, false, false },
	{ "fault:shmem", OK_FAULT, BK_SHMEM, 0, false, false },
	{ "fault:hugetlb", OK_FAULT, BK_HUGETLB, 0, false, false },
	{ "pin_fast", OK_PIN_FAST, -1, 0, false, false },
	{ "pin", OK_PIN, -1, 0, false, false },
	{ "get_fast", OK_GET_FAST, -1, 0, false, false },
	{ "unpin", OK_UNPIN, -1, 0, false, false },
	{ "unpin:pages", OK_UNPIN, -1, 1, false, false },
	{ "unpin:dirty", OK_UNPIN, -1, 2, false, false },
	{ "unpin:range_dirty", OK_UNPIN, -1, 3, false, false },
	{ "umem_get", OK_UMEM_GET, -1, 0, false, false },
	{ "umem_release", OK_UMEM_RELEASE, -1, 0, false, false },
	{ "fork", OK_FORK, -1, 0, false, false },
	{ "shmem_truncate", OK_TRUNCATE, BK_SHMEM, 0, false, false },
};
#define NR_OPS ((int)(sizeof(ops) / sizeof(ops[0])))

/*
 * How --model traces a case, from the row being traced; the matrix runs with the default.
 * - steady: each fault's neighbouring page is faulted before the traced one, so that the
 *   traced fault is a will-it-scale loop's steady-state one (its tables exist), not the
 *   region's first; each mmap is preceded by an mmap and munmap of its kind, as the loop's
 *   previous iteration (see write_model).
 * - pages: pages that one pin_fast pins (and the set-up faults), into model_pins, one
 *   row at a time.
 * - cached: a shmem fault's page is in the page cache already, not mapped.
 */
#define MODEL_MAX_PAGES 64
struct model_mode {
	bool steady;
	unsigned pages;
	bool cached;
};
static const struct model_mode matrix_mode = { .pages = 1 };
static struct model_mode trace_mode = { .pages = 1 };
/* a row per CPU, each a whole number of lines: the pins' output arrays share none */
static _Alignas(64) struct pm_page *model_pins[2][MODEL_MAX_PAGES];

/* Operations of the whole mm: where the other one's target lies is all a placement says. */
static bool mm_wide(const struct op *o)
{
	return o->kind == OK_FORK || (o->kind == OK_MMAP && !o->fixed);
}

/* ---- placements, backings, states ---- */

enum placement {
	PL_SAME_PAGE, PL_SAME_PTE_LINE, PL_SAME_PTE_TABLE, PL_SAME_PMD_TABLE, PL_SAME_VMA,
	PL_ADJACENT, PL_SAME_RANGE, PL_DIFF_RANGES, PL_DIFF_MMS, PL_NR
};
static const char *const pl_names[PL_NR] = {
	"same_page", "same_pte_line", "same_pte_table", "same_pmd_table", "same_vma",
	"adjacent_vmas", "same_range", "different_ranges", "different_mms",
};
/* B's target relative to A's, in A's VMA (the first five), or the start of B's own VMA. */
static const unsigned long pl_offset[PL_NR] = {
	0, PG, 256 * KiB, 2 * MiB, GiB, LEN_A, 64 * GiB, 1UL << 39, 0,
};

static bool pl_same_vma(enum placement p)
{
	return p <= PL_SAME_VMA;
}

static const char *const bk_names[BK_NR] = { "anon", "thp", "shared", "shmem", "hugetlb" };
/* Backings an initial state gives the regions of operations that need none in particular. */
static const int state_bks[] = { BK_ANON, BK_THP, BK_SHMEM, BK_HUGETLB };

enum init { IN_UNMAPPED, IN_MAPPED, IN_FAULTED, IN_PINNED, IN_FORKED, IN_NR };
static const char *const in_names[IN_NR] = { "unmapped", "mapped", "faulted", "pinned",
					      "forked" };

struct cs {
	int a, b;		/* ops[] */
	enum placement pl;
	int sbk;		/* the state's backing */
	enum init in;
	/* derived */
	int bk[2];		/* each op's region's backing */
	unsigned long t[2];	/* targets */
	unsigned long len[2];	/* each op's length: a page, or a hugetlb page */
	int mmi[2];		/* 0: mm0, 1: mm1 */
	int addr[2];		/* model tracked page of each op */
	bool shared_region;	/* B works in A's VMA */
};

static unsigned long unit_len(int bk)
{
	return bk == BK_HUGETLB ? PM_PMD_SIZE : PG;
}

/*
 * Fill in what the case's fields imply. Return: 0, 1 for a combination that makes no sense
 * (counted), 2 for a duplicate of another case (not counted).
 */
static int case_derive(struct cs *c)
{
	const struct op *oa = &ops[c->a], *ob = &ops[c->b];
	bool used_state_bk = false;

	c->shared_region = pl_same_vma(c->pl);
	if ((mm_wide(oa) || mm_wide(ob)) && c->pl != PL_SAME_VMA && c->pl != PL_DIFF_MMS)
		return 1; /* an op without an address: only "same mm" or "other mm" */
	c->bk[0] = oa->bk >= 0 ? oa->bk : c->sbk;
	used_state_bk |= oa->bk < 0 && c->in != IN_UNMAPPED;
	if (c->shared_region) {
		if (ob->bk >= 0 && ob->bk != c->bk[0])
			return 1; /* one VMA, two backings */
		c->bk[1] = c->bk[0];
	} else {
		c->bk[1] = ob->bk >= 0 ? ob->bk : c->sbk;
		used_state_bk |= ob->bk < 0 && c->in != IN_UNMAPPED;
	}
	if (c->shared_region && oa->bk < 0 && ob->bk < 0 && c->in != IN_UNMAPPED)
		used_state_bk = true;
	if (!used_state_bk && c->sbk != BK_ANON)
		return 2;
	if (c->in == IN_UNMAPPED && c->sbk != BK_ANON)
		return 2;
	/* Pages of a hugetlb VMA are 2 MiB: no PTE tables, and no 1 GiB VMA of them. */
	if (c->bk[0] == BK_HUGETLB && c->shared_region &&
	    (c->pl == PL_SAME_PTE_LINE || c->pl == PL_SAME_PTE_TABLE || c->pl == PL_SAME_VMA))
		return 1;
	/* A THP's neighbours are in the THP (same_pte_line/table: one folio), a 4 KiB page's in
	 * its table. */
	c->t[0] = RA;
	c->t[1] = RA + pl_offset[c->pl];
	c->mmi[0] = 0;
	c->mmi[1] = c->pl == PL_DIFF_MMS;
	c->len[0] = unit_len(c->bk[0]);
	c->len[1] = unit_len(c->bk[1]);
	c->addr[0] = 0;
	c->addr[1] = (c->pl == PL_SAME_PAGE) ? 0 : 1;
	if ((oa->kind == OK_UNPIN || oa->kind == OK_UMEM_RELEASE) && c->in == IN_UNMAPPED)
		return 1; /* nothing to release */
	if ((ob->kind == OK_UNPIN || ob->kind == OK_UMEM_RELEASE) && c->in == IN_UNMAPPED)
		return 1;
	return 0;
}

/* ---- the model's side ---- */

static const int tag_setup[2] = { 0x11, 0x22 }, tag_op[2] = { 0xa1, 0xb2 };

static unsigned region_prot(int r)
{
	return PM_PROT_READ | PM_PROT_WRITE | (r ? PM_PROT_EXEC : 0);
}

/* Region r of the case (0: A's, 1: B's when it has one): start, length, backing, mm. */
struct region {
	bool live;
	unsigned long start, len;
	int bk, mm;
};

static void case_regions(const struct cs *c, struct region r[2])
{
	r[0] = (struct region){ true, RA, c->bk[0] == BK_HUGETLB ? LEN_B : LEN_A, c->bk[0], 0 };
	r[1] = (struct region){ !c->shared_region, c->t[1], LEN_B, c->bk[1], c->mmi[1] };
	if (c->in == IN_UNMAPPED)
		r[0].live = r[1].live = false;
}

static int unit_of(const struct region *r, int ri, unsigned long addr)
{
	if (r->bk != BK_THP && r->bk != BK_HUGETLB)
		return 0;
	return 1000 * (ri + 1) + (int)((addr - r->start) / PM_PMD_SIZE);
}

static void model_map_region(struct cm_model *md, const struct cs *c, const struct region *r,
			     int ri)
{
	for (int k = 0; k < 2; k++) {
		int a = c->addr[k];
		struct cm_slot *s = &md->slot[r->mm][a];
		unsigned long t = c->t[k];

		if (c->mmi[k] != r->mm || t < r->start || t >= r->start + r->len)
			continue;
		*s = (struct cm_slot){ .mapped = true, .prot = (unsigned char)region_prot(ri),
				       .bk = (unsigned char)r->bk, .obj = -1,
				       .pgoff = (long)((t - r->start) / PG),
				       .hugeadv = r->bk == BK_THP, .unit = unit_of(r, ri, t) };
		if (r->bk == BK_SHARED || r->bk == BK_SHMEM) {
			s->obj = ri;
			md->obj[ri].live = true;
			md->obj[ri].size = (long)(r->len / PG);
		}
	}
}

/* The case's initial state, and its op preparations, in the model. Return: false to skip. */
static bool model_setup(const struct cs *c, struct cm_model *md)
{
	struct region r[2];

	cm_init(md);
	md->nr_addrs = c->pl == PL_SAME_PAGE ? 1 : 2;
	md->mm_live[0] = true;
	md->mm_live[1] = c->pl == PL_DIFF_MMS;
	case_regions(c, r);
	for (int ri = 0; ri < 2; ri++)
		if (r[ri].live)
			model_map_region(md, c, &r[ri], ri);
	for (int k = 0; k < 2; k++) {
		const struct op *o = &ops[k ? c->b : c->a];

		if (o->kind == OK_MMAP && (o->mk == BK_SHMEM)) {
			md->obj[2 + k].live = true;
			md->obj[2 + k].size = (long)(LEN_B / PG);
		}
	}
	if (c->in >= IN_FAULTED)
		for (int k = 0; k < 2; k++) {
			int p;

			if (!md->slot[c->mmi[k]][c->addr[k]].mapped)
				return false;
			p = cm_make_writable(md, c->mmi[k], c->addr[k]);
			md->page[p].data = tag_setup[k];
		}
	if (c->in == IN_PINNED)
		for (int k = 0; k < 2; k++) {
			int p = cm_make_writable(md, c->mmi[k], c->addr[k]);

			md->page[p].pins++;
			md->handle[k] = p;
		}
	if (c->in == IN_FORKED) {
		cm_fork(md, 0, 2);
		if (md->mm_live[1])
			cm_fork(md, 1, 3);
	}
	for (int k = 0; k < 2; k++) {
		const struct op *o = &ops[k ? c->b : c->a];
		struct cm_slot *s = &md->slot[c->mmi[k]][c->addr[k]];
		int p;

		if (o->kind != OK_UNPIN && o->kind != OK_UMEM_RELEASE)
			continue;
		if (!s->mapped)
			return false;
		p = cm_make_writable(md, c->mmi[k], c->addr[k]);
		md->page[p].pins++;
		md->handle[4 + k] = p;
	}
	return !md->overflow;
}

struct mres {
	long rv;
	int data;	/* access_read: the byte read; else -1 */
};

static bool slot_beyond(struct cm_model *md, struct cm_slot *s)
{
	return s->obj >= 0 && s->pgoff >= md->obj[s->obj].size;
}

/* The tracked pages of mm @mm in [t, t + len), by model index. */
static int tracked_in(const struct cs *c, int mm, unsigned long t, unsigned long len, int out[2])
{
	int n = 0;

	for (int k = 0; k < 2; k++) {
		if (c->mmi[k] != mm || c->t[k] < t || c->t[k] >= t + len)
			continue;
		if (n && out[0] == c->addr[k])
			continue;
		out[n++] = c->addr[k];
	}
	return n;
}

static struct mres model_op(const struct cs *c, struct cm_model *md, int k)
{
	const struct op *o = &ops[k ? c->b : c->a];
	int mm = c->mmi[k], a = c->addr[k], in[2], n, p;
	struct cm_slot *s = &md->slot[mm][a];
	unsigned long t = c->t[k], len = c->len[k];
	struct mres r = { 0, -1 };

	switch (o->kind) {
	case OK_MMAP:
		if (!o->fixed) {
			r.rv = CM_ANY;
			break;
		}
		len = unit_len(o->mk);
		/* A fixed mapping may not cut a hugetlb page (hugetlb_vm_op_split). */
		if ((o->mk == BK_HUGETLB && t % PM_PMD_SIZE) ||
		    (s->mapped && s->bk == BK_HUGETLB && len < PM_PMD_SIZE)) {
			r.rv = -EINVAL;
			break;
		}
		n = tracked_in(c, mm, t, len, in);
		for (int i = 0; i < n; i++) {
			struct cm_slot *x = &md->slot[mm][in[i]];
			unsigned long at = c->t[in[i] == c->addr[0] ? 0 : 1];

			*x = (struct cm_slot){ .mapped = true, .prot = PM_PROT_READ | PM_PROT_WRITE,
					       .bk = (unsigned char)o->mk, .obj = -1,
					       .pgoff = (long)((at - t) / PG),
					       .unit = o->mk == BK_HUGETLB ? 3000 + k : 0 };
			if (o->mk == BK_SHARED || o->mk == BK_SHMEM) {
				x->obj = 2 + k;
				md->obj[2 + k].live = true;
				md->obj[2 + k].size = (long)((o->mk == BK_SHMEM ? LEN_B : len) / PG);
			}
		}
		for (int i = 0; i < n && o->populate; i++)
			cm_make_writable(md, mm, in[i]);
		r.rv = (long)t;
		break;
	case OK_MUNMAP:
		n = tracked_in(c, mm, t, len, in);
		for (int i = 0; i < n; i++)
			cm_unmap_slot(md, mm, in[i]);
		break;
	case OK_MPROTECT:
	case OK_DONTNEED:
	case OK_HUGEPAGE:
		if (!s->mapped) {
			r.rv = -ENOMEM;
			break;
		}
		n = tracked_in(c, mm, t, len, in);
		for (int i = 0; i < n; i++) {
			struct cm_slot *x = &md->slot[mm][in[i]];

			if (o->kind == OK_MPROTECT)
				x->prot = PM_PROT_READ;
			else if (o->kind == OK_HUGEPAGE)
				x->hugeadv = true;
			else if (x->obj >= 0)
				x->present = false;
			else
				x->page = CM_NONE;
		}
		break;
	case OK_READ:
		if (!s->mapped || slot_beyond(md, s)) {
			r.rv = -EFAULT;
			break;
		}
		cm_read_fault(md, mm, a);
		p = cm_slot_page(md, mm, a);
		r.rv = 8;
		r.data = p > 0 ? md->page[p].data : 0;
		break;
	case OK_WRITE:
	case OK_FAULT:
	case OK_PIN_FAST:
	case OK_PIN:
	case OK_GET_FAST:
	case OK_UMEM_GET:
		if (!s->mapped || !(s->prot & PM_PROT_WRITE) || slot_beyond(md, s)) {
			r.rv = -EFAULT;
			break;
		}
		p = cm_make_writable(md, mm, a);
		if (o->kind == OK_WRITE) {
			md->page[p].data = tag_op[k];
			r.rv = 8;
		} else if (o->kind == OK_FAULT) {
			r.rv = 0;
		} else {
			if (o->kind == OK_GET_FAST)
				md->page[p].gets++;
			else
				md->page[p].pins++;
			md->handle[2 + k] = p;
			r.rv = o->kind == OK_UMEM_GET ? 0 : 1;
		}
		break;
	case OK_UNPIN:
	case OK_UMEM_RELEASE:
		p = md->handle[4 + k];
		if (p > 0)
			md->page[p].pins--;
		md->handle[4 + k] = CM_NONE;
		break;
	case OK_FORK:
		cm_fork(md, mm, 4 + k);
		break;
	case OK_TRUNCATE:
		if (s->obj < 0) {
			r.rv = -EINVAL;
			break;
		}
		cm_truncate(md, s->obj, s->pgoff);
		break;
	}
	return r;
}

/*
 * Does the pair commute in this state? Both orders from one initial state: the same results,
 * and the same canonical final state. *@both_write: A alone and B alone both change one
 * element of the state (a slot, an object's page, a page's counts): a conflict the rule
 * does not promise to avoid.
 */
static bool model_commutes(const struct cs *c, const struct cm_model *init, struct mres res[2],
			   bool *both_write)
{
	static struct cm_model ab, ba, oa, ob;
	static char sab[4096], sba[4096], s0[4096], sa[4096], sb[4096];
	struct mres rab[2], rba[2];
	bool same;

	ab = *init;
	rab[0] = model_op(c, &ab, 0);
	rab[1] = model_op(c, &ab, 1);
	ba = *init;
	rba[1] = model_op(c, &ba, 1);
	rba[0] = model_op(c, &ba, 0);
	cm_canon(&ab, sab, sizeof(sab));
	cm_canon(&ba, sba, sizeof(sba));
	res[0] = rab[0];
	res[1] = rab[1];
	same = !ab.overflow && !ba.overflow && !strcmp(sab, sba) && rab[0].rv == rba[0].rv &&
	       rab[1].rv == rba[1].rv && rab[0].data == rba[0].data && rab[1].data == rba[1].data;

	/* The elements each one changes alone, compared token by token. */
	oa = *init;
	model_op(c, &oa, 0);
	ob = *init;
	model_op(c, &ob, 1);
	{
		struct cm_model z = *init;

		cm_canon(&z, s0, sizeof(s0));
	}
	cm_canon(&oa, sa, sizeof(sa));
	cm_canon(&ob, sb, sizeof(sb));
	*both_write = false;
	{
		char *p0 = s0, *pa = sa, *pb = sb;

		while (*p0 && *pa && *pb) {
			size_t n0 = strcspn(p0, " |"), na = strcspn(pa, " |"), nb = strcspn(pb, " |");
			bool ca = n0 != na || memcmp(p0, pa, n0), cb = n0 != nb || memcmp(p0, pb, n0);

			if (ca && cb)
				*both_write = true;
			p0 += n0 + !!p0[n0];
			pa += na + !!pa[na];
			pb += nb + !!pb[nb];
		}
	}
	return same;
}

/* ---- workers: one thread pinned to each CPU ---- */

struct worker {
	pthread_t th;
	int cpu;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	void (*fn)(void *);
	void *arg;
	bool busy, stop;
};

#define MAX_SLOTS 8
static struct worker workers[MAX_SLOTS][2];
static int nr_slots = 6;
static __thread int my_slot;

static void *worker_main(void *p)
{
	struct worker *w = p;
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) > w->cpu) {
		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->busy && !w->stop)
			pthread_cond_wait(&w->cv, &w->lock);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->lock);
		w->fn(w->arg);
		pthread_mutex_lock(&w->lock);
		w->busy = false;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Run @fn on this driver's worker for @cpu and wait for it. */
static void on_cpu(int cpu, void (*fn)(void *), void *arg)
{
	struct worker *w = &workers[my_slot][cpu];

	pthread_mutex_lock(&w->lock);
	w->fn = fn;
	w->arg = arg;
	w->busy = true;
	pthread_cond_broadcast(&w->cv);
	while (w->busy)
		pthread_cond_wait(&w->cv, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void workers_start(void)
{
	for (int s = 0; s < nr_slots; s++)
		for (int i = 0; i < 2; i++) {
			struct worker *w = &workers[s][i];

			w->cpu = i;
			pthread_mutex_init(&w->lock, NULL);
			pthread_cond_init(&w->cv, NULL);
			pthread_create(&w->th, NULL, worker_main, w);
		}
}

static void workers_stop(void)
{
	for (int s = 0; s < nr_slots; s++)
		for (int i = 0; i < 2; i++) {
			struct worker *w = &workers[s][i];

			pthread_mutex_lock(&w->lock);
			w->stop = true;
			pthread_cond_broadcast(&w->cv);
			pthread_mutex_unlock(&w->lock);
			pthread_join(w->th, NULL);
		}
}

/* ---- the real side ---- */

struct run {
	const struct cs *c;
	unsigned flags, knobs;
	struct pm_machine *m;
	struct pm_mm *mm[CM_MMS];
	struct pm_shmem *obj[4];
	struct pm_page *setup_pin[2], *prep_pin[2];
	/* What each operation returns into, each in a line of its own: the harness's memory
	 * must not be the conflict. */
	struct {
		struct pm_page *page __attribute__((aligned(64)));
	} out[2];
	struct pm_umem *prep_umem[2], *res_umem[2];
	long res[2];
	int data[2];
	struct pm_trace_log log[2];
	int k;			/* the op the worker runs next */
	bool ok;
};

static int map_region(struct run *r, const struct region *g, int ri)
{
	struct pm_mm *mm = r->mm[g->mm];
	int prot = (int)region_prot(ri), flags = PM_MAP_FIXED;
	struct pm_shmem *f = NULL;
	long a;

	switch (g->bk) {
	case BK_ANON:
	case BK_THP:
		flags |= PM_MAP_PRIVATE | PM_MAP_ANONYMOUS;
		break;
	case BK_SHARED:
		flags |= PM_MAP_SHARED | PM_MAP_ANONYMOUS;
		break;
	case BK_SHMEM:
		f = r->obj[ri] = pm_shmem_create(r->m, g->len, 0);
		if (!f)
			return -ENOMEM;
		flags |= PM_MAP_SHARED;
		break;
	case BK_HUGETLB:
		flags |= PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB;
		break;
	}
	a = pm_mmap(mm, g->start, g->len, prot, flags, f, 0);
	if (a != (long)g->start)
		return a < 0 ? (int)a : -EIO;
	if (g->bk == BK_THP)
		return pm_madvise(mm, g->start, g->len, PM_MADV_HUGEPAGE);
	return 0;
}

static void op_real(struct run *r, int k)
{
	const struct cs *c = r->c;
	const struct op *o = &ops[k ? c->b : c->a];
	struct pm_mm *mm = r->mm[c->mmi[k]];
	unsigned long t = c->t[k], len = c->len[k];
	uint64_t v = 0x0101010101010101ULL * (uint64_t)tag_op[k];
	unsigned char buf[8];
	int flags;
	long rv = 0;

	r->data[k] = -1;
	switch (o->kind) {
	case OK_MMAP:
		flags = (o->fixed ? PM_MAP_FIXED : 0) | (o->populate ? PM_MAP_POPULATE : 0);
		flags |= o->mk == BK_SHARED || o->mk == BK_SHMEM ? PM_MAP_SHARED : PM_MAP_PRIVATE;
		flags |= o->mk == BK_SHMEM ? 0 : PM_MAP_ANONYMOUS;
		flags |= o->mk == BK_HUGETLB ? PM_MAP_HUGETLB : 0;
		rv = pm_mmap(mm, o->fixed ? t : 0, unit_len(o->mk), PM_PROT_READ | PM_PROT_WRITE,
			     flags, o->mk == BK_SHMEM ? r->obj[2 + k] : NULL, 0);
		if (!o->fixed && rv >= 0)
			rv = CM_ANY;
		break;
	case OK_MUNMAP:
		rv = pm_munmap(mm, t, len);
		break;
	case OK_MPROTECT:
		rv = pm_mprotect(mm, t, len, PM_PROT_READ);
		break;
	case OK_DONTNEED:
		rv = pm_madvise(mm, t, len, PM_MADV_DONTNEED);
		break;
	case OK_HUGEPAGE:
		rv = pm_madvise(mm, t, len, PM_MADV_HUGEPAGE);
		break;
	case OK_READ:
		rv = pm_access(mm, t, buf, 8, 0);
		if (rv == 8)
			r->data[k] = buf[0];
		break;
	case OK_WRITE:
		rv = pm_access(mm, t, &v, 8, 1);
		break;
	case OK_FAULT:
		rv = pm_fault(mm, t, PM_FAULT_WRITE);
		break;
	case OK_PIN_FAST:
		if (trace_mode.pages > 1) {
			rv = pm_pin_user_pages_fast(mm, t, trace_mode.pages, PM_FOLL_WRITE,
						    model_pins[k]);
			if (rv > 0 && rv < (long)trace_mode.pages) {
				pm_unpin_user_pages(model_pins[k], (unsigned long)rv);
				rv = -EIO; /* the set-up faulted them all: a short pin is a bug */
			}
			r->out[k].page = rv > 0 ? model_pins[k][0] : NULL;
			rv = rv > 0 ? 1 : rv;
			break;
		}
		rv = pm_pin_user_pages_fast(mm, t, 1, PM_FOLL_WRITE, &r->out[k].page);
		break;
	case OK_PIN:
		rv = pm_pin_user_pages(mm, t, 1, PM_FOLL_WRITE, &r->out[k].page);
		break;
	case OK_GET_FAST:
		rv = pm_get_user_pages_fast(mm, t, 1, PM_FOLL_WRITE, &r->out[k].page);
		break;
	case OK_UNPIN:
		switch (o->mk) {
		case 0:
			pm_unpin_user_page(r->prep_pin[k]);
			break;
		case 1:
			pm_unpin_user_pages(&r->prep_pin[k], 1);
			break;
		case 2:
			pm_unpin_user_pages_dirty_lock(&r->prep_pin[k], 1, true);
			break;
		default:
			pm_unpin_user_page_range_dirty_lock(r->prep_pin[k], 1, true);
			break;
		}
		r->prep_pin[k] = NULL;
		break;
	case OK_UMEM_GET:
		r->res_umem[k] = pm_umem_get(mm, t, len, PM_UMEM_WRITE);
		rv = r->res_umem[k] ? 0 : -errno;
		break;
	case OK_UMEM_RELEASE:
		pm_umem_release(r->prep_umem[k], PM_UNPIN_RANGE);
		r->prep_umem[k] = NULL;
		break;
	case OK_FORK:
		r->mm[4 + k] = pm_mm_fork(mm);
		rv = r->mm[4 + k] ? 0 : -errno;
		break;
	case OK_TRUNCATE: {
		unsigned long ri = c->shared_region || k == 0 ? 0 : 1;

		rv = r->obj[ri] ? pm_shmem_truncate(r->obj[ri], t - (ri ? c->t[1] : RA)) : -EINVAL;
		break;
	}
	}
	if ((o->kind == OK_PIN_FAST || o->kind == OK_PIN || o->kind == OK_GET_FAST) && rv != 1)
		r->out[k].page = NULL;
	r->res[k] = rv;
}

static void traced_op(void *p)
{
	struct run *r = p;

	pm_trace_begin();
	op_real(r, r->k);
	pm_trace_end(&r->log[r->k]);
}

/*
 * Warm-up, on each worker's CPU: the thread's per-thread counters and RCU registration for
 * this machine exist, its CPU's page cache holds free frames and a free THP-sized block, the
 * huge zero folio exists, and the mm's has-pinned flag is set - all once-per-lifetime
 * transitions that a steady workload has long made.
 */
static void warm_cpu(void *p)
{
	struct run *r = p;

	for (int i = 0; i < 2; i++) {
		struct pm_mm *mm = r->mm[i];
		unsigned long a = SCRATCH + (unsigned long)sched_getcpu() * 4 * MiB;
		struct pm_page *pg;

		if (!mm)
			continue;
		if (pm_mmap(mm, a, 16 * PG, PM_PROT_READ | PM_PROT_WRITE,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0) != (long)a)
			continue;
		for (unsigned long j = 0; j < 16; j++)
			pm_fault(mm, a + j * PG, PM_FAULT_WRITE);
		if (pm_pin_user_pages_fast(mm, a, 1, PM_FOLL_WRITE, &pg) == 1)
			pm_unpin_user_page(pg);
		pm_munmap(mm, a, 16 * PG);
		/* A THP, unmapped: its block waits in this CPU's cache for the next THP. Read
		 * first: the huge zero folio, made once and kept while the mm lives. */
		a += 2 * MiB;
		if (i == 0 && pm_mmap(mm, a, 2 * MiB, PM_PROT_READ | PM_PROT_WRITE,
				      PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL,
				      0) == (long)a) {
			pm_madvise(mm, a, 2 * MiB, PM_MADV_HUGEPAGE);
			pm_fault(mm, a, 0);
			pm_fault(mm, a, PM_FAULT_WRITE);
			pm_munmap(mm, a, 2 * MiB);
		}
	}
}

/* Each VMA a case works in gets its per-CPU reader counts, as a contended VMA has them. */
static void warm_vma(struct pm_mm *mm, unsigned long addr)
{
	struct pm_vma *held, *v;

	if (!mm || !(held = pm__lock_vma_under_rcu(mm, addr)))
		return;
	/* One read lock per thread once the counts are per CPU: a VMA already switched is
	 * left alone. */
	if (atomic_load_relaxed(&held->xpcpu)) {
		pm__vma_end_read(held);
		return;
	}
	for (int i = 0; i < 80; i++)
		if ((v = pm__lock_vma_under_rcu(mm, addr)))
			pm__vma_end_read(v);
	pm__vma_end_read(held);
}

struct warm_pin {
	struct pm_mm *mm;
	unsigned long addr;
	struct pm_page *page;
	bool held;
};

static void warm_pin_fn(void *p)
{
	struct warm_pin *w = p;

	/* A slow write pin marks the folio dirty, once in its life, as a workload's first one does. */
	w->held = pm_pin_user_pages(w->mm, w->addr, 1, PM_FOLL_NOFAULT | PM_FOLL_WRITE,
					 &w->page) == 1 ||
		  pm_pin_user_pages(w->mm, w->addr, 1, PM_FOLL_NOFAULT, &w->page) == 1;
}

static void warm_unpin_fn(void *p)
{
	struct warm_pin *w = p;

	if (w->held)
		pm_unpin_user_page(w->page);
}

static void warm_hugetlb_fn(void *p)
{
	struct warm_pin *w = p;

	pm_fault(w->mm, w->addr, PM_FAULT_WRITE);
}

/*
 * Each CPU's list of hugetlb pool pages holds one, as a steady stream of faults leaves it
 * (src/mem/hugetlb_pool.c, "Per-CPU lists"): both faults go to one mapping made before
 * either, since a reservation folds the lists back.
 */
static void warm_hugetlb(struct run *r)
{
	struct pm_mm *mm = r->mm[0];
	unsigned long a = SCRATCH + GiB; /* past warm_cpu()'s */
	struct warm_pin w[2] = { { mm, a }, { mm, a + 2 * MiB } };
	size_t total = 0;

	if (!mm || pm_hugetlb_pool(r->m, &total, NULL) || !total ||
	    pm_mmap(mm, a, 4 * MiB, PM_PROT_READ | PM_PROT_WRITE,
		    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB | PM_MAP_FIXED, NULL,
		    0) != (long)a)
		return;
	on_cpu(0, warm_hugetlb_fn, &w[0]);
	on_cpu(1, warm_hugetlb_fn, &w[1]);
	pm_munmap(mm, a, 4 * MiB);
}

/* This CPU has copied through the table that maps the target before (pm__access_warm). */
static void warm_table_fn(void *p)
{
	struct warm_pin *w = p;

	pm__access_warm(w->mm, w->addr);
}

/*
 * A table that both CPUs read and write through knows them as its lockless readers
 * (pgtable.c, "Lockless readers"): the mark of each CPU's first copy, as a TLB's first fill
 * of it. Nothing else changes: no entry, no page, no data.
 */
static void warm_table(struct pm_mm *mm, unsigned long addr)
{
	struct warm_pin w = { mm, addr };

	if (!mm)
		return;
	on_cpu(0, warm_table_fn, &w);
	on_cpu(1, warm_table_fn, &w);
}

/*
 * A folio that both CPUs pin is hot in its steady state (src/mem/folio_hot.c): one pin from
 * each CPU at once, then their unpins, leave it so in the range design, and its first write
 * pin has marked it dirty. Nothing else changes (FOLL_NOFAULT: nothing is faulted in, broken
 * or unshared; a missing page stays missing).
 */
static void warm_folio(struct pm_mm *mm, unsigned long addr)
{
	struct warm_pin w[2] = { { mm, addr }, { mm, addr } };

	if (!mm)
		return;
	on_cpu(0, warm_pin_fn, &w[0]);
	on_cpu(1, warm_pin_fn, &w[1]);
	on_cpu(0, warm_unpin_fn, &w[0]);
	on_cpu(1, warm_unpin_fn, &w[1]);
}

static void run_teardown(struct run *r)
{
	for (int k = 0; k < 2; k++) {
		const struct op *o = &ops[k ? r->c->b : r->c->a];

		if (r->setup_pin[k])
			pm_unpin_user_page(r->setup_pin[k]);
		if (r->prep_pin[k])
			pm_unpin_user_page(r->prep_pin[k]);
		if (r->out[k].page && o->kind == OK_PIN_FAST && trace_mode.pages > 1) {
			pm_unpin_user_pages(model_pins[k], trace_mode.pages);
		} else if (r->out[k].page) {
			if (o->kind == OK_GET_FAST)
				pm_put_page(r->out[k].page);
			else
				pm_unpin_user_page(r->out[k].page);
		}
		if (r->prep_umem[k])
			pm_umem_release(r->prep_umem[k], PM_UNPIN_RANGE);
		if (r->res_umem[k])
			pm_umem_release(r->res_umem[k], PM_UNPIN_RANGE);
	}
	for (int i = 0; i < CM_MMS; i++)
		if (r->mm[i])
			pm_mm_destroy(r->mm[i]);
	for (int i = 0; i < 4; i++)
		if (r->obj[i])
			pm_shmem_put(r->obj[i]);
	pm_machine_destroy(r->m);
}


/*
 * The loop's previous iteration of a non-fixed mmap: an mmap and munmap of its kind, made by
 * the thread that makes the traced one (op k runs on CPU k's worker), so that what a thread's
 * first mmap does once - the range design's arena for the thread, its range's upper tables
 * and VMA credits - is done, as in a will-it-scale loop that has run a while.
 */
struct prior_mmap {
	struct run *r;
	int k;
	int err;
};

static void prior_mmap_fn(void *p)
{
	struct prior_mmap *pm = p;
	struct run *r = pm->r;
	const struct op *o = &ops[pm->k ? r->c->b : r->c->a];
	struct pm_mm *mm = r->mm[r->c->mmi[pm->k]];
	bool shmem = o->mk == BK_SHMEM;
	long a = pm_mmap(mm, 0, unit_len(o->mk), PM_PROT_READ | PM_PROT_WRITE,
			 shmem ? PM_MAP_SHARED : PM_MAP_PRIVATE | PM_MAP_ANONYMOUS,
			 shmem ? r->obj[2 + pm->k] : NULL, 0);

	pm->err = a < 0 ? (int)a : pm_munmap(mm, (unsigned long)a, unit_len(o->mk));
}

/* Build the case's state in a fresh machine, the same way the model did. */
static int run_setup(struct run *r)
{
	const struct cs *c = r->c;
	bool huge = c->bk[0] == BK_HUGETLB || c->bk[1] == BK_HUGETLB ||
		    ops[c->a].mk == BK_HUGETLB || ops[c->b].mk == BK_HUGETLB;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	struct pm_config cfg = { .mem_bytes = (huge ? 48 : 32) * MiB, .knobs = r->knobs,
				 .flags = r->flags, .nr_hugepages = huge ? 8 : 0 };
	struct region g[2];

	/* Large enough that each CPU's page cache may keep a THP-sized block, as on any machine
	 * of a useful size (src/mem/page_alloc.c, "THP-sized blocks"). */
	cfg.mem_bytes = max(cfg.mem_bytes, (size_t)(ncpu > 0 ? ncpu : 1) * CPU_SHARE_MIB * MiB);

	r->m = pm_machine_create(&cfg);
	if (!r->m)
		return -errno;
	r->mm[0] = pm_mm_create(r->m);
	if (c->pl == PL_DIFF_MMS)
		r->mm[1] = pm_mm_create(r->m);
	case_regions(c, g);
	for (int ri = 0; ri < 2; ri++)
		if (g[ri].live && map_region(r, &g[ri], ri))
			return -EIO;
	for (int k = 0; k < 2; k++) {
		const struct op *o = &ops[k ? c->b : c->a];

		if (o->kind == OK_MMAP && o->mk == BK_SHMEM &&
		    !(r->obj[2 + k] = pm_shmem_create(r->m, LEN_B, 0)))
			return -ENOMEM;
	}
	if (c->in >= IN_FAULTED)
		for (int k = 0; k < 2; k++) {
			uint64_t v = 0x0101010101010101ULL * (uint64_t)tag_setup[k];

			if (pm_access(r->mm[c->mmi[k]], c->t[k], &v, 8, 1) != 8)
				return -EIO;
		}
	if (c->in == IN_PINNED)
		for (int k = 0; k < 2; k++)
			if (pm_pin_user_pages_fast(r->mm[c->mmi[k]], c->t[k], 1, PM_FOLL_WRITE,
						   &r->setup_pin[k]) != 1)
				return -EIO;
	if (c->in == IN_FORKED) {
		r->mm[2] = pm_mm_fork(r->mm[0]);
		if (r->mm[1])
			r->mm[3] = pm_mm_fork(r->mm[1]);
	}
	for (int k = 0; k < 2; k++) {
		const struct op *o = &ops[k ? c->b : c->a];
		struct pm_mm *mm = r->mm[c->mmi[k]];

		if (o->kind == OK_UNPIN &&
		    pm_pin_user_pages_fast(mm, c->t[k], 1, PM_FOLL_WRITE, &r->prep_pin[k]) != 1)
			return -EIO;
		if (o->kind == OK_UMEM_RELEASE &&
		    !(r->prep_umem[k] = pm_umem_get(mm, c->t[k], PG, PM_UMEM_WRITE)))
			return -EIO;
	}
	if (trace_mode.pages > 1)
		for (int k = 0; k < 2; k++) {
			uint64_t v = 0x0101010101010101ULL * (uint64_t)tag_setup[k];

			for (unsigned i = 1; i < trace_mode.pages; i++)
				if (pm_access(r->mm[c->mmi[k]], c->t[k] + i * PG, &v, 8, 1) != 8)
					return -EIO;
		}
	if (trace_mode.cached)
		for (int k = 0; k < 2; k++) {
			struct pm_mm *mm = r->mm[c->mmi[k]];
			uint64_t v = 0;

			if (pm_access(mm, c->t[k], &v, 8, 1) != 8 ||
			    pm_madvise(mm, c->t[k], PG, PM_MADV_DONTNEED))
				return -EIO;
		}
	if (trace_mode.steady && c->in < IN_FAULTED)
		for (int k = 0; k < 2; k++)
			if (ops[k ? c->b : c->a].kind == OK_FAULT &&
			    pm_fault(r->mm[c->mmi[k]], c->t[k] + c->len[k], PM_FAULT_WRITE))
				return -EIO;
	if (trace_mode.steady)
		for (int k = 0; k < 2; k++) {
			struct prior_mmap pm = { r, k, -EIO };

			if (ops[k ? c->b : c->a].kind != OK_MMAP || ops[k ? c->b : c->a].fixed)
				continue;
			on_cpu(k, prior_mmap_fn, &pm);
			if (pm.err)
				return -EIO;
		}
	/* warm */
	for (int cpu = 0; cpu < 2; cpu++)
		on_cpu(cpu, warm_cpu, r);
	warm_hugetlb(r);
	if (!(r->knobs & PM_KNOB_VMA_LOCK_SHARED_COUNT))
		for (int k = 0; k < 2; k++)
			warm_vma(r->mm[c->mmi[k]], c->t[k]);
	for (int k = 0; k < 2; k++) {
		enum op_kind kind = ops[k ? c->b : c->a].kind;

		if (kind == OK_PIN_FAST || kind == OK_PIN || kind == OK_UNPIN ||
		    kind == OK_UMEM_GET || kind == OK_UMEM_RELEASE)
			warm_folio(r->mm[c->mmi[k]], c->t[k]);
		if (kind == OK_READ || kind == OK_WRITE)
			warm_table(r->mm[c->mmi[k]], c->t[k]);
	}
	/* The set-up's munmaps left page tables to free after a grace period: free them now,
	 * so that no RCU callback runs beside the traced operations. */
	pm_rcu_barrier();
	return 0;
}

/* ---- conflicts, as a case keeps them ---- */

struct hit {
	char *label;
	uintptr_t pc_a, pc_b;
};

struct result {
	struct cs c;
	int design;		/* 0 linux, 1 range */
	bool commutes, both_write, model_ok, ran, want_run;
	struct mres mres[2];
	long res[2];
	int nhit[2];		/* per level */
	struct hit *hit[2];
	long rmw[2];
	size_t dropped;
	/* --model: the share of each order's logs' accesses made in a serialising critical
	 * section (lock_share()), and the lock */
	double cs_share[2];
	uintptr_t cs_lock;
	char cs_label[192];	/* the lock's label, taken while its machine lives */
	/* --model: the conflicting lines' visits per order (line_visits()), in all and of the
	 * most visited line */
	double visits[2], hot[2], rw[2];
	double frames[2];	/* --model: frames each log wrote whole (count_frames()) */
};

static uint64_t min_gen(const struct pm_trace_log *l)
{
	return l[0].gen < l[1].gen ? l[0].gen : l[1].gen;
}

static void add_hits(struct result *res, int level, const struct pm_trace_log *l)
{
	struct pm_trace_conflict *cf;
	long n = pm_trace_conflicts(&l[0], &l[1], level ? PM_TRACE_C64 : PM_TRACE_C1, &cf);

	for (long i = 0; i < n; i++) {
		char label[256];
		unsigned off = (unsigned)(cf[i].addr - cf[i].line), len = 0;
		bool dup = false;

		while (off + len < 64 && (cf[i].mask >> (off + len) & 1))
			len++;
		pm_trace_label(cf[i].addr, len ? len : 1, min_gen(l), label, sizeof(label));
		for (int j = 0; j < res->nhit[level] && !dup; j++)
			dup = !strcmp(res->hit[level][j].label, label);
		if (dup || res->nhit[level] >= 16)
			continue;
		res->hit[level] = realloc(res->hit[level],
					  (size_t)(res->nhit[level] + 1) * sizeof(struct hit));
		res->hit[level][res->nhit[level]++] =
			(struct hit){ strdup(label), cf[i].a.pc, cf[i].b.pc };
	}
	free(cf);
}

static long count_rmw(const struct pm_trace_log *l)
{
	long n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += !!(l->acc[i].flags & PM_TRACE_RMW);
	return n;
}

/*
 * lock_share() - the share of @l's accesses made inside a critical section of a lock that
 * @o takes too, where either takes it exclusively: what two tasks' operations cannot run at
 * the same time. Accesses stand for time (the 1-CPU cost is spread over them evenly). Of each
 * lock the outermost sections count; of several such locks, the largest share (*@lock).
 */
static double lock_share(const struct pm_trace_log *l, const struct pm_trace_log *o,
			 uintptr_t *lock)
{
	double best = 0;

	for (size_t i = 0; l->n && i < l->nlocks; i++) {
		const struct pm_trace_lock_event *e = &l->locks[i];
		size_t in = 0, depth = 0, start = 0;
		bool seen = false, other = false, excl = false;

		if (!(e->flags & PM_TRACE_LOCK_ACQUIRE))
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = l->locks[j].lock == e->lock;
		for (size_t j = 0; j < o->nlocks; j++) {
			if (o->locks[j].lock != e->lock ||
			    !(o->locks[j].flags & PM_TRACE_LOCK_ACQUIRE))
				continue;
			other = true;
			excl |= o->locks[j].flags & PM_TRACE_LOCK_EXCL;
		}
		if (seen || !other)
			continue;
		for (size_t j = i; j < l->nlocks; j++) {
			const struct pm_trace_lock_event *f = &l->locks[j];

			if (f->lock != e->lock)
				continue;
			if (f->flags & PM_TRACE_LOCK_ACQUIRE) {
				excl |= f->flags & PM_TRACE_LOCK_EXCL;
				if (depth++ == 0)
					start = f->pos;
			} else if (depth && --depth == 0) {
				in += f->pos - start;
			}
		}
		if (depth)
			in += l->n - start;
		if (excl && (double)in / (double)l->n > best) {
			best = (double)in / (double)l->n;
			*lock = e->lock;
		}
	}
	return best;
}

/*
 * line_visits() - how many times @l goes to the 64-byte line at @line: its accesses there,
 * where one that follows the previous one by more than VISIT_GAP other accesses starts a new
 * visit. Between two visits another CPU can take the line, so each visit of a conflicting
 * line stands for a transfer (mmap_lock's reader count: one at down_read, one at up_read).
 * *@rw: the visits that read the line and then make a read-modify-write there before any
 * plain write (a count read, then its compare-and-swap): the read fetches the line shared,
 * the RMW must take it again, and a CAS that lost to the other CPU starts over, so such a
 * visit may cost more than one that writes first (the report's probe measures both kinds).
 */
#define VISIT_GAP 32

static unsigned line_visits(const struct pm_trace_log *l, uintptr_t line, unsigned *rw)
{
	unsigned n = 0;
	size_t last = 0;
	bool reading = false; /* this visit has read the line and not written it yet */
	bool released = false; /* its last access was a plain write (a lock's release) */

	*rw = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct pm_trace_access *a = &l->acc[i];
		bool w = a->flags & PM_TRACE_WRITE, rmw = a->flags & PM_TRACE_RMW;

		if (a->addr >= line + 64 || a->addr + a->size <= line)
			continue;
		if (!n || i - last > VISIT_GAP || (rmw && released)) {
			n++;
			reading = !w;
		} else if (reading && w) {
			*rw += rmw;
			reading = false;
		}
		released = w && !rmw;
		last = i;
	}
	return n;
}

/*
 * count_frames() - the 4 KiB frames that @l writes whole, by memset or memcpy: a fault's
 * cleared page, a COW's copy. A benchmark that faults fresh memory streams them from DRAM,
 * and two CPUs streaming share its bandwidth, which no line shows (the report's model
 * prices them with a probe of its own).
 */
static double count_frames(const struct pm_trace_log *l)
{
	uint64_t bytes = 0;

	for (size_t i = 0; i < l->n; i++)
		if ((l->acc[i].flags & (PM_TRACE_MEMFN | PM_TRACE_WRITE)) ==
			    (PM_TRACE_MEMFN | PM_TRACE_WRITE) && l->acc[i].size >= PG)
			bytes += l->acc[i].size;
	return (double)bytes / PG;
}

/* The C64-conflicting lines' visits, the mean of the two logs: in all, the most, and those
 * that read before they write. */
static void count_visits(const struct pm_trace_log *l, double *all, double *hot, double *rw)
{
	struct pm_trace_conflict *cf;
	long n = pm_trace_conflicts(&l[0], &l[1], PM_TRACE_C64, &cf);

	*all = *hot = *rw = 0;
	for (long i = 0; i < n; i++) {
		unsigned rw0, rw1;
		double v = (line_visits(&l[0], cf[i].line, &rw0) +
			    line_visits(&l[1], cf[i].line, &rw1)) / 2.0;

		*all += v;
		*hot = v > *hot ? v : *hot;
		*rw += (rw0 + rw1) / 2.0;
	}
	free(cf);
}

/* Run one order: @first on its CPU, then the other. */
static bool run_order(struct result *res, unsigned flags, unsigned knobs, int first)
{
	struct run *rp = aligned_alloc(64, (sizeof(struct run) + 63) / 64 * 64), r0 = {
		.c = &res->c, .flags = flags, .knobs = knobs };
#define r (*rp)
	bool ok;

	*rp = r0;
	ok = run_setup(&r) == 0;

	if (ok) {
		for (int i = 0; i < 2; i++) {
			r.k = i ? !first : first;
			on_cpu(r.k, traced_op, &r);
		}
		for (int level = 0; level < 2; level++)
			add_hits(res, level, r.log);
		res->cs_share[first] = (lock_share(&r.log[0], &r.log[1], &res->cs_lock) +
					lock_share(&r.log[1], &r.log[0], &res->cs_lock)) / 2;
		if (res->cs_share[first] > 0)
			pm_trace_label(res->cs_lock, 1, min_gen(r.log), res->cs_label,
				       sizeof(res->cs_label));
		count_visits(r.log, &res->visits[first], &res->hot[first], &res->rw[first]);
		if (first == 0) {
			res->frames[0] = count_frames(&r.log[0]);
			res->frames[1] = count_frames(&r.log[1]);
			res->rmw[0] = count_rmw(&r.log[0]);
			res->rmw[1] = count_rmw(&r.log[1]);
			res->res[0] = r.res[0];
			res->res[1] = r.res[1];
			res->model_ok = r.res[0] == res->mres[0].rv && r.res[1] == res->mres[1].rv &&
					r.data[0] == res->mres[0].data &&
					r.data[1] == res->mres[1].data;
		}
		res->dropped += r.log[0].dropped + r.log[1].dropped;
		pm_trace_log_free(&r.log[0]);
		pm_trace_log_free(&r.log[1]);
	}
	if (r.m)
		run_teardown(&r);
#undef r
	free(rp);
	return ok;
}

/* ---- the command ---- */

static const struct {
	const char *name;
	unsigned v;
} knob_names[] = {
	{ "HAS_PINNED_ALWAYS_WRITE", PM_KNOB_HAS_PINNED_ALWAYS_WRITE },
	{ "NO_GUP_FAST", PM_KNOB_NO_GUP_FAST },
	{ "GUP_FAST_RESTART", PM_KNOB_GUP_FAST_RESTART },
	{ "UNPIN_PER_PAGE", PM_KNOB_UNPIN_PER_PAGE },
	{ "SHMEM_LOCK_TWICE", PM_KNOB_SHMEM_LOCK_TWICE },
	{ "NO_PER_VMA_LOCK", PM_KNOB_NO_PER_VMA_LOCK },
	{ "VMA_LOCK_SHARED_COUNT", PM_KNOB_VMA_LOCK_SHARED_COUNT },
	{ "PTE_TABLE_LOCK", PM_KNOB_PTE_TABLE_LOCK },
	{ "FOLIO_SHARED_PINS", PM_KNOB_FOLIO_SHARED_PINS },
};
#define NR_KNOB_NAMES (sizeof(knob_names) / sizeof(knob_names[0]))
/* "before": every seed's old behaviour at once. */
#define KNOBS_BEFORE                                                                    \
	(PM_KNOB_HAS_PINNED_ALWAYS_WRITE | PM_KNOB_NO_GUP_FAST | PM_KNOB_UNPIN_PER_PAGE |   \
	 PM_KNOB_SHMEM_LOCK_TWICE | PM_KNOB_VMA_LOCK_SHARED_COUNT | PM_KNOB_PTE_TABLE_LOCK |    \
	 PM_KNOB_FOLIO_SHARED_PINS)

static int parse_knobs(const char *s, unsigned *out)
{
	char *dup, *tok, *save;

	if (!strcmp(s, "after")) {
		*out = 0;
		return 0;
	}
	if (!strcmp(s, "before")) {
		*out = KNOBS_BEFORE;
		return 0;
	}
	*out = 0;
	dup = strdup(s);
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *n = strncmp(tok, "PM_KNOB_", 8) ? tok : tok + 8;
		size_t i;

		for (i = 0; i < NR_KNOB_NAMES && strcmp(n, knob_names[i].name); i++)
			;
		if (i == NR_KNOB_NAMES) {
			free(dup);
			return -1;
		}
		*out |= knob_names[i].v;
	}
	free(dup);
	return 0;
}

static bool only[NR_OPS];

static int parse_only(const char *s)
{
	char *dup = strdup(s), *tok, *save;
	int rc = 0;

	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool hit = false;

		for (int i = 0; i < NR_OPS; i++) {
			size_t n = strlen(tok);

			if (!strcmp(ops[i].name, tok) ||
			    (!strncmp(ops[i].name, tok, n) && ops[i].name[n] == ':')) {
				only[i] = true;
				hit = true;
			}
		}
		if (!hit) {
			fprintf(stderr, "pinmm-commuter: --only: no operation '%s'\n", tok);
			rc = -1;
		}
	}
	free(dup);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pinmm-commuter [--design linux|range|both] [--knobs before|after|KNOB,...]\n"
		"                      [--only OP,...] [--out DIR] [--quick] [--list]\n"
		"       pinmm-commuter --seed 2008|2010|2020|2021|2023\n"
		"       pinmm-commuter --model FILE  (the report's scaling model: its trace figures)\n"
		"Every pair of operations x placement x initial state: does it commute (the model),\n"
		"and is it conflict-free (the trace build, at bytes C1 and 64-byte lines C64)?\n"
		"--quick: the faulted state of anonymous memory and THPs only; --all-states: every\n"
		"initial state of every backing; --jobs N: cases run N at a time (default 6);\n"
		"--list: run the cases that do not commute too.\n"
		"Output: matrices, the fields causing most conflicts, summary lines; DIR/cases.jsonl\n"
		"(default results/commuter/) and heatmaps DIR/DESIGN-LEVEL.png when gnuplot exists.\n");
}

struct opts {
	int design;		/* 0 linux, 1 range, 2 both */
	unsigned knobs;
	const char *knobs_name;
	const char *out;
	bool quick, list, all;
};

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* "function file:line < ..." -> "file:line" of the innermost, relative to the tree. */
static const char *src_of(const char *sym, char *buf, size_t len)
{
	const char *sp = strchr(sym, ' '), *end, *p;
	char cwd[4096];

	if (!sp) {
		snprintf(buf, len, "%s", sym);
		return buf;
	}
	sp++;
	end = strstr(sp, " < ");
	snprintf(buf, len, "%.*s", end ? (int)(end - sp) : (int)strlen(sp), sp);
	if (getcwd(cwd, sizeof(cwd)) && !strncmp(buf, cwd, strlen(cwd)) && buf[strlen(cwd)] == '/')
		memmove(buf, buf + strlen(cwd) + 1, strlen(buf + strlen(cwd) + 1) + 1);
	if ((p = strstr(buf, "/src/")) || (p = strstr(buf, "/trace/")))
		memmove(buf, p + 1, strlen(p + 1) + 1);
	return buf;
}

/* A label without its indexes and its state, to count fields across cases. */
static void field_key(const char *label, char *buf, size_t len)
{
	size_t n = 0;
	int depth = 0;

	for (const char *p = label; *p && n + 1 < len; p++) {
		if (*p == '[' || *p == '(')
			depth++;
		else if ((*p == ']' || *p == ')') && depth)
			depth--;
		else if (!depth)
			buf[n++] = *p;
	}
	while (n && buf[n - 1] == ' ')
		n--;
	buf[n] = 0;
}

struct pcmap {
	uintptr_t *pc;
	char **sym;
	size_t n, cap;
};

static void pcmap_add(struct pcmap *m, uintptr_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->pc[i] == pc)
			return;
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 256;
		m->pc = realloc(m->pc, m->cap * sizeof(*m->pc));
	}
	m->pc[m->n++] = pc;
}

static const char *pcmap_sym(struct pcmap *m, uintptr_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->pc[i] == pc)
			return m->sym ? m->sym[i] : "?";
	return "?";
}

static struct result *results;
static size_t nr_results, cap_results;

struct drive {
	int slot;
	size_t from, to;
	unsigned flags, knobs;
};

static size_t next_case;

static void *driver(void *p)
{
	struct drive *d = p;

	my_slot = d->slot;
	for (;;) {
		size_t i = __atomic_fetch_add(&next_case, 1, __ATOMIC_RELAXED) + d->from;
		struct result *r;

		if (i >= d->to)
			break;
		r = &results[i];
		if (!r->commutes && !r->want_run)
			continue;
		r->ran = run_order(r, d->flags, d->knobs, 0) && run_order(r, d->flags, d->knobs, 1);
	}
	return NULL;
}

static bool quick_state(int sbk, enum init in)
{
	return (sbk == BK_ANON && in == IN_FAULTED) || (sbk == BK_THP && in == IN_FAULTED);
}

/* The initial states run by default: every init of anonymous memory, the others' two. */
static bool default_state(int sbk, enum init in)
{
	if (sbk == BK_ANON)
		return true;
	return in == IN_FAULTED || (in == IN_MAPPED && sbk == BK_THP);
}

static void run_all(const struct opts *o, int design)
{
	unsigned flags = design ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM;
	long skipped = 0, noncommut = 0, unsupported = 0, total = 0;
	size_t first = nr_results;
	pthread_t th[MAX_SLOTS];
	struct drive dr[MAX_SLOTS];

	for (int a = 0; a < NR_OPS; a++)
		for (int b = a; b < NR_OPS; b++) {
			if (!only[a] && !only[b])
				continue;
			for (int pl = 0; pl < PL_NR; pl++)
				for (size_t sb = 0; sb < sizeof(state_bks) / sizeof(state_bks[0]); sb++)
					for (int in = 0; in < IN_NR; in++) {
						struct cs c = { a, b, (enum placement)pl,
								state_bks[sb], (enum init)in };
						struct cm_model init;
						struct result *r;
						int d;

						if (o->quick ? !quick_state(c.sbk, c.in)
							     : !o->all && !default_state(c.sbk, c.in))
							continue;
						d = case_derive(&c);
						if (d == 2)
							continue;
						total++;
						if (d == 1 || !model_setup(&c, &init)) {
							skipped++;
							continue;
						}
						if (nr_results == cap_results) {
							cap_results = cap_results ? 2 * cap_results : 4096;
							results = realloc(results, cap_results *
											   sizeof(*results));
						}
						r = &results[nr_results++];
						memset(r, 0, sizeof(*r));
						r->c = c;
						r->design = design;
						r->commutes = model_commutes(&c, &init, r->mres,
									     &r->both_write);
						r->want_run = o->list;
						noncommut += !r->commutes;
					}
		}
	next_case = 0;
	for (int sl = 0; sl < nr_slots; sl++) {
		dr[sl] = (struct drive){ sl, first, nr_results, flags, o->knobs };
		pthread_create(&th[sl], NULL, driver, &dr[sl]);
	}
	for (int sl = 0; sl < nr_slots; sl++)
		pthread_join(th[sl], NULL);
	for (size_t i = first; i < nr_results; i++)
		unsupported += (results[i].commutes || results[i].want_run) && !results[i].ran;
	fprintf(stderr,
		"commuter: %s: %ld combinations, %ld skipped as meaningless, %ld do not commute, "
		"%ld failed to set up\n",
		design ? "range" : "linux", total, skipped, noncommut, unsupported);
}

static void print_matrix(FILE *f, int design, int level, const char *outdir, bool gp)
{
	static long cf[NR_OPS][NR_OPS], cm[NR_OPS][NR_OPS];
	int idx[NR_OPS], n = 0;
	char path[4096];
	FILE *dat = NULL;

	memset(cf, 0, sizeof(cf));
	memset(cm, 0, sizeof(cm));
	for (size_t i = 0; i < nr_results; i++) {
		struct result *r = &results[i];

		if (r->design != design || !r->commutes || !r->ran)
			continue;
		cm[r->c.a][r->c.b]++;
		cf[r->c.a][r->c.b] += r->nhit[level] == 0;
	}
	for (int i = 0; i < NR_OPS; i++) {
		bool any = false;

		for (int j = 0; j < NR_OPS; j++)
			any |= cm[i][j] || cm[j][i];
		if (any)
			idx[n++] = i;
	}
	fprintf(f, "\n%s %s: conflict-free/commutative cases (row op x column op)\n",
		design ? "range" : "linux", level ? "C64" : "C1");
	fprintf(f, "%-22s", "");
	for (int j = 0; j < n; j++)
		fprintf(f, " %7d", j);
	fprintf(f, "\n");
	for (int ii = 0; ii < n; ii++) {
		fprintf(f, "%2d %-19s", ii, ops[idx[ii]].name);
		for (int jj = 0; jj < n; jj++) {
			char cell[32] = "";

			if (jj >= ii && cm[idx[ii]][idx[jj]])
				snprintf(cell, sizeof(cell), "%ld/%ld", cf[idx[ii]][idx[jj]],
					 cm[idx[ii]][idx[jj]]);
			fprintf(f, " %7s", cell);
		}
		fprintf(f, "\n");
	}
	if (!gp)
		return;
	snprintf(path, sizeof(path), "%s/%s-%s.dat", outdir, design ? "range" : "linux",
		 level ? "C64" : "C1");
	dat = fopen(path, "w");
	if (!dat)
		return;
	for (int ii = 0; ii < n; ii++)
		for (int jj = 0; jj < n; jj++) {
			long m = jj >= ii ? cm[idx[ii]][idx[jj]] : 0;

			if (m)
				fprintf(dat, "%d %d %.4f\n", jj, ii,
					(double)cf[idx[ii]][idx[jj]] / (double)m);
		}
	fclose(dat);
	{
		char gpath[4096];
		FILE *g;

		snprintf(gpath, sizeof(gpath), "%s/%s-%s.gp", outdir, design ? "range" : "linux",
			 level ? "C64" : "C1");
		g = fopen(gpath, "w");
		if (!g)
			return;
		fprintf(g, "set terminal pngcairo size 1400,1200 noenhanced\n");
		fprintf(g, "set output '%s/%s-%s.png'\n", outdir, design ? "range" : "linux",
			level ? "C64" : "C1");
		fprintf(g, "set title 'pinmm %s design, %s: conflict-free share of commutative "
			   "cases'\n", design ? "range" : "Linux", level ? "C64" : "C1");
		fprintf(g, "set palette defined (0 'red', 0.5 'yellow', 1 'green')\n");
		fprintf(g, "set cbrange [0:1]\nset yrange [%d.5:-0.5]\nset xrange [-0.5:%d.5]\n",
			n - 1, n - 1);
		fprintf(g, "set xtics rotate by 90 right (");
		for (int j = 0; j < n; j++)
			fprintf(g, "%s'%s' %d", j ? ", " : "", ops[idx[j]].name, j);
		fprintf(g, ")\nset ytics (");
		for (int j = 0; j < n; j++)
			fprintf(g, "%s'%s' %d", j ? ", " : "", ops[idx[j]].name, j);
		fprintf(g, ")\nset style fill solid 1.0 noborder\n");
		fprintf(g, "plot '%s' using 1:2:(0.5):(0.5):3 with boxxyerror lc palette notitle\n",
			path);
		fclose(g);
		snprintf(path, sizeof(path), "gnuplot '%s' 2>/dev/null", gpath);
		if (system(path) != 0)
			fprintf(stderr, "commuter: gnuplot failed on %s\n", gpath);
	}
}

struct fcount {
	char key[200];
	long n;
};

static void print_fields(FILE *f, int design, int level)
{
	struct fcount *fc = NULL;
	size_t nf = 0;

	for (size_t i = 0; i < nr_results; i++) {
		struct result *r = &results[i];

		if (r->design != design || !r->commutes || !r->ran)
			continue;
		for (int h = 0; h < r->nhit[level]; h++) {
			char key[200];
			size_t j;

			field_key(r->hit[level][h].label, key, sizeof(key));
			for (j = 0; j < nf && strcmp(fc[j].key, key); j++)
				;
			if (j == nf) {
				fc = realloc(fc, (nf + 1) * sizeof(*fc));
				snprintf(fc[nf].key, sizeof(fc[nf].key), "%s", key);
				fc[nf++].n = 0;
			}
			fc[j].n++;
		}
	}
	fprintf(f, "\n%s %s: the fields causing the most conflicts (commutative cases)\n",
		design ? "range" : "linux", level ? "C64" : "C1");
	for (int top = 0; top < 12; top++) {
		size_t best = nf;

		for (size_t j = 0; j < nf; j++)
			if (fc[j].n > 0 && (best == nf || fc[j].n > fc[best].n))
				best = j;
		if (best == nf)
			break;
		fprintf(f, "  %6ld  %s\n", fc[best].n, fc[best].key);
		fc[best].n = -fc[best].n;
	}
	free(fc);
}

static void write_json(FILE *f, const struct opts *o, struct pcmap *pm)
{
	for (size_t i = 0; i < nr_results; i++) {
		struct result *r = &results[i];
		char st[64], src[512];

		snprintf(st, sizeof(st), "%s/%s", bk_names[r->c.sbk], in_names[r->c.in]);
		fprintf(f, "{\"design\":\"%s\",\"knobs\":", r->design ? "range" : "linux");
		json_str(f, o->knobs_name);
		fprintf(f, ",\"a\":\"%s\",\"b\":\"%s\",\"placement\":\"%s\",\"state\":\"%s\","
			   "\"commutes\":%s,\"ran\":%s",
			ops[r->c.a].name, ops[r->c.b].name, pl_names[r->c.pl], st,
			r->commutes ? "true" : "false", r->ran ? "true" : "false");
		for (int level = 0; level < 2; level++) {
			fprintf(f, ",\"%s\":[", level ? "c64" : "c1");
			for (int h = 0; h < r->nhit[level]; h++) {
				struct hit *x = &r->hit[level][h];

				fprintf(f, "%s{\"label\":", h ? "," : "");
				json_str(f, x->label);
				fprintf(f, ",\"src\":");
				json_str(f, src_of(pcmap_sym(pm, x->pc_a), src, sizeof(src)));
				fprintf(f, ",\"src_b\":");
				json_str(f, src_of(pcmap_sym(pm, x->pc_b), src, sizeof(src)));
				fprintf(f, ",\"site_a\":");
				json_str(f, pcmap_sym(pm, x->pc_a));
				fprintf(f, ",\"site_b\":");
				json_str(f, pcmap_sym(pm, x->pc_b));
				fprintf(f, "}");
			}
			fprintf(f, "]");
		}
		fprintf(f, ",\"rmw_a\":%ld,\"rmw_b\":%ld,\"both_write\":%s,\"model_agrees\":%s,"
			   "\"result_a\":%ld,\"result_b\":%ld}\n",
			r->rmw[0], r->rmw[1], r->both_write ? "true" : "false",
			!r->ran ? "null" : r->model_ok ? "true" : "false", r->res[0], r->res[1]);
	}
}

/* ---- the seeds (item 5) ---- */

struct seed_case {
	const char *a, *b;
	enum placement pl;
	int sbk;
	enum init in;
	int design;
	const char *expect; /* a substring of the label the "before" run must show */
};

static int find_op(const char *name)
{
	for (int i = 0; i < NR_OPS; i++)
		if (!strcmp(ops[i].name, name))
			return i;
	return -1;
}

static int seed_pair(const struct seed_case *sc, unsigned before, unsigned after)
{
	int bad = 0;

	for (int pass = 0; pass < 2; pass++) {
		unsigned knobs = pass ? after : before;
		struct result r;
		struct cm_model init;
		long hits_expect = 0;

		memset(&r, 0, sizeof(r));
		r.c = (struct cs){ find_op(sc->a), find_op(sc->b), sc->pl, sc->sbk, sc->in };
		if (case_derive(&r.c) || !model_setup(&r.c, &init)) {
			printf("seed: case does not exist\n");
			return 1;
		}
		r.commutes = model_commutes(&r.c, &init, r.mres, &r.both_write);
		r.ran = run_order(&r, sc->design ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM,
				  knobs, 0) &&
			run_order(&r, sc->design ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM,
				  knobs, 1);
		printf("%s %s x %s, %s, %s/%s, knobs 0x%x: %s, rmw %ld + %ld, %d C1 conflicts%s\n",
		       pass ? "after: " : "before:", sc->a, sc->b, pl_names[sc->pl],
		       bk_names[sc->sbk], in_names[sc->in], knobs,
		       r.commutes ? "commutes" : "does not commute", r.rmw[0], r.rmw[1], r.nhit[0],
		       r.nhit[0] ? ":" : "");
		for (int h = 0; h < r.nhit[0]; h++) {
			printf("    %s\n", r.hit[0][h].label);
			hits_expect += !!strstr(r.hit[0][h].label, sc->expect);
		}
		if (!r.ran || (!pass && !hits_expect) || (pass && hits_expect))
			bad = 1;
		for (int l = 0; l < 2; l++) {
			for (int h = 0; h < r.nhit[l]; h++)
				free(r.hit[l][h].label);
			free(r.hit[l]);
		}
	}
	return bad;
}

struct rel_arg {
	struct pm_umem *u;
	enum pm_unpin_mode mode;
	struct pm_trace_log log;
};

static void traced_release(void *p)
{
	struct rel_arg *ra = p;

	pm_trace_begin();
	pm_umem_release(ra->u, ra->mode);
	pm_trace_end(&ra->log);
}

/* 2020: one release of a 1 GiB registration of THPs, in locked RMWs, by mode. */
static int seed_2020(void)
{
	static const char *const names[] = { "range", "batch", "per_page" };
	static const enum pm_unpin_mode modes[] = { PM_UNPIN_RANGE, PM_UNPIN_BATCH,
						     PM_UNPIN_PER_PAGE };
	int bad = 0;

	/* Per page, a release makes a few accesses to each of 262,144 descriptors: the
	 * worker's log (made at its first pm_trace_begin) must hold them all. */
	setenv("PINMM_TRACE_ENTRIES", "8388608", 0);
	for (int i = 0; i < 3; i++) {
		struct pm_config cfg = { .mem_bytes = 1536 * MiB, .flags = PM_MACHINE_LINUX_MM };
		struct pm_machine *m = pm_machine_create(&cfg);
		struct pm_mm *mm = m ? pm_mm_create(m) : NULL;
		struct rel_arg ra = { .mode = modes[i] };
		long a;

		if (!mm)
			return 1;
		a = pm_mmap(mm, RA, GiB, PM_PROT_READ | PM_PROT_WRITE,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);
		pm_madvise(mm, RA, GiB, PM_MADV_HUGEPAGE);
		ra.u = a == (long)RA ? pm_umem_get(mm, RA, GiB, PM_UMEM_WRITE) : NULL;
		if (!ra.u) {
			printf("2020: could not register 1 GiB\n");
			return 1;
		}
		on_cpu(0, traced_release, &ra);
		printf("2020: release of a 1 GiB THP registration, %-8s: %ld locked RMWs "
		       "(%zu accesses, %zu dropped)\n",
		       names[i], count_rmw(&ra.log), ra.log.n, ra.log.dropped);
		bad |= ra.log.dropped != 0;
		pm_trace_log_free(&ra.log);
		pm_mm_destroy(mm);
		pm_machine_destroy(m);
	}
	printf("2020: Linux's gup_put_folio touches _pincount and _refcount: 524,288 per page, "
	       "1,024 batched or by range\n");
	return bad;
}

/*
 * --model FILE: the trace's figures for the report's scaling model (bench/report_model.c),
 * one row per will-it-scale experiment and configuration: the pair of its unit operation
 * that two of its tasks run, each on its own data, as the benchmark places them, in the
 * loop's steady state (trace_mode.steady: a fault's table already exists). Columns: id,
 * configuration, C64-conflicting lines per unit (distinct labelled fields, at most 16), their
 * visits per unit and the most visited line's (line_visits()), locked RMWs per unit (the
 * mean of the two), the share of the unit's accesses made inside the critical section of a
 * lock that both take and one takes exclusively (lock_share()), the units per counted
 * iteration of the benchmark (pin_fast's iteration is 1024 pins), and the visits that read
 * their line before writing it, and the frames the unit writes whole (count_frames()). A
 * row's unit is one call, of as many pages as the bench's (pages; 0 is 1): a lock that a call
 * takes once is visited once per unit. cached: the fault finds its page in the page cache,
 * as page_fault3's loop does from its second iteration on (the object outlives each munmap).
 */
struct model_row {
	const char *id, *cfg, *a;
	enum placement pl;
	int sbk;
	enum init in;
	int design;
	unsigned knobs;
	unsigned units;
	unsigned pages;
	bool cached;
};

static const struct model_row model_rows[] = {
	{ "pin_fast", "before", "pin_fast", PL_SAME_VMA, BK_ANON, IN_FAULTED, 0,
	  PM_KNOB_HAS_PINNED_ALWAYS_WRITE, 1024 },
	{ "pin_fast", "after", "pin_fast", PL_SAME_VMA, BK_ANON, IN_FAULTED, 0, 0, 1024 },
	/* gup_fast: each task pins its 64 pages and unpins them, in one call each: the unit is
	 * the 64-page pin, mmap_lock taken once and, on the slow walk, the PTE table's lock
	 * once per page. The tasks' buffers are neighbours in one PTE table (256 KiB apart). */
	{ "gup_fast_nochurn", "before", "pin_fast", PL_SAME_PTE_TABLE, BK_ANON, IN_FAULTED, 0,
	  PM_KNOB_NO_GUP_FAST, 1, 64 },
	{ "gup_fast_nochurn", "after", "pin_fast", PL_SAME_PTE_TABLE, BK_ANON, IN_FAULTED, 0, 0,
	  1, 64 },
	{ "shmem_fault", "before", "fault:shmem", PL_SAME_VMA, BK_ANON, IN_MAPPED, 0,
	  PM_KNOB_SHMEM_LOCK_TWICE, 1 },
	{ "shmem_fault", "after", "fault:shmem", PL_SAME_VMA, BK_ANON, IN_MAPPED, 0, 0, 1 },
	{ "page_fault1", "before", "fault:anon", PL_ADJACENT, BK_ANON, IN_MAPPED, 0,
	  PM_KNOB_NO_PER_VMA_LOCK, 1 },
	{ "page_fault1", "after", "fault:anon", PL_ADJACENT, BK_ANON, IN_MAPPED, 0, 0, 1 },
	{ "page_fault1", "proc", "fault:anon", PL_DIFF_MMS, BK_ANON, IN_MAPPED, 0, 0, 1 },
	{ "page_fault1", "range", "fault:anon", PL_ADJACENT, BK_ANON, IN_MAPPED, 1, 0, 1 },
	{ "page_fault3", "before", "fault:shmem", PL_ADJACENT, BK_ANON, IN_MAPPED, 0,
	  PM_KNOB_NO_PER_VMA_LOCK, 1, 0, true },
	{ "page_fault3", "after", "fault:shmem", PL_ADJACENT, BK_ANON, IN_MAPPED, 0, 0, 1, 0, true },
	{ "page_fault3", "proc", "fault:shmem", PL_DIFF_MMS, BK_ANON, IN_MAPPED, 0, 0, 1, 0, true },
	{ "page_fault3", "range", "fault:shmem", PL_ADJACENT, BK_ANON, IN_MAPPED, 1, 0, 1, 0, true },
	/* pin_hot: one pin and its unpin: two units. Both configurations run in the range
	 * design (bench/report_experiments.c): before with every pin on the folio's counts,
	 * after with the folio hot (the warm-up leaves it so). */
	{ "pin_hot_same", "before", "pin_fast", PL_SAME_PAGE, BK_THP, IN_FAULTED, 1,
	  PM_KNOB_FOLIO_SHARED_PINS, 2 },
	{ "pin_hot_same", "after", "pin_fast", PL_SAME_PAGE, BK_THP, IN_FAULTED, 1, 0, 2 },
	{ "pin_hot_spread", "before", "pin_fast", PL_SAME_PTE_LINE, BK_THP, IN_FAULTED, 1,
	  PM_KNOB_FOLIO_SHARED_PINS, 2 },
	{ "pin_hot_spread", "after", "pin_fast", PL_SAME_PTE_LINE, BK_THP, IN_FAULTED, 1, 0,
	  2 },
	/* mmap1/2: an mmap and its munmap, taken as touching the same lines: two units */
	{ "mmap1", "after", "mmap:anon", PL_SAME_VMA, BK_ANON, IN_MAPPED, 0, 0, 2 },
	{ "mmap1", "proc", "mmap:anon", PL_DIFF_MMS, BK_ANON, IN_MAPPED, 0, 0, 2 },
	{ "mmap1", "range", "mmap:anon", PL_SAME_VMA, BK_ANON, IN_MAPPED, 1, 0, 2 },
	{ "mmap2", "after", "mmap:shmem", PL_SAME_VMA, BK_ANON, IN_MAPPED, 0, 0, 2 },
	{ "mmap2", "proc", "mmap:shmem", PL_DIFF_MMS, BK_ANON, IN_MAPPED, 0, 0, 2 },
	{ "mmap2", "range", "mmap:shmem", PL_SAME_VMA, BK_ANON, IN_MAPPED, 1, 0, 2 },
};

static int write_model(const char *path)
{
	FILE *f = fopen(path, "w");
	int bad = 0;

	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "# id\tcfg\tc64_lines\tvisits\thot_visits\trmw\tcs_share\tunits\t"
		"rw_visits\tframes\t(pinmm-commuter --model)\n");
	for (size_t i = 0; i < sizeof(model_rows) / sizeof(model_rows[0]); i++) {
		const struct model_row *m = &model_rows[i];
		unsigned flags = m->design ? PM_MACHINE_RANGE_MM : PM_MACHINE_LINUX_MM;
		struct cm_model init;
		struct result r;

		memset(&r, 0, sizeof(r));
		trace_mode = (struct model_mode){ true, m->pages ? m->pages : 1, m->cached };
		if (trace_mode.pages > MODEL_MAX_PAGES) {
			fprintf(stderr, "model: %s %s: more than %d pages\n", m->id, m->cfg,
				MODEL_MAX_PAGES);
			bad = 1;
			continue;
		}
		r.c = (struct cs){ find_op(m->a), find_op(m->a), m->pl, m->sbk, m->in };
		if (r.c.a < 0 || case_derive(&r.c) || !model_setup(&r.c, &init)) {
			fprintf(stderr, "model: %s %s: no such case\n", m->id, m->cfg);
			bad = 1;
			continue;
		}
		r.commutes = model_commutes(&r.c, &init, r.mres, &r.both_write);
		r.ran = run_order(&r, flags, m->knobs, 0) && run_order(&r, flags, m->knobs, 1);
		if (!r.ran) {
			fprintf(stderr, "model: %s %s: the case did not run\n", m->id, m->cfg);
			bad = 1;
		} else {
			double share = (r.cs_share[0] + r.cs_share[1]) / 2;
			const char *lock = share > 0 ? r.cs_label : "none";
			double visits = (r.visits[0] + r.visits[1]) / 2, hot = (r.hot[0] + r.hot[1]) / 2;
			double rw = (r.rw[0] + r.rw[1]) / 2;
			char pages[32] = "";

			if (trace_mode.pages > 1)
				snprintf(pages, sizeof(pages), " of %u pages", trace_mode.pages);

			double frames = (r.frames[0] + r.frames[1]) / 2;

			fprintf(f, "%s\t%s\t%d\t%.2f\t%.2f\t%.1f\t%.3f\t%u\t%.2f\t%.2f\n", m->id,
				m->cfg, r.nhit[1], visits, hot, (r.rmw[0] + r.rmw[1]) / 2.0, share,
				m->units, rw, frames);
			printf("model %-16s %-9s %s%s x%u: %d C64 lines, %.1f visits (%.1f the most "
			       "visited, %.1f read before an RMW), rmw %ld + %ld, critical section "
			       "%.0f%% (%s), %.1f frames written whole%s\n", m->id, m->cfg, m->a,
			       pages, m->units, r.nhit[1], visits, hot, rw, r.rmw[0], r.rmw[1],
			       100 * share, lock, frames, r.nhit[1] ? ":" : "");
			for (int h = 0; h < r.nhit[1]; h++)
				printf("    %s\n", r.hit[1][h].label);
		}
		for (int l = 0; l < 2; l++) {
			for (int h = 0; h < r.nhit[l]; h++)
				free(r.hit[l][h].label);
			free(r.hit[l]);
		}
	}
	trace_mode = matrix_mode;
	fclose(f);
	return bad;
}

static int run_seed(const char *which)
{
	if (!strcmp(which, "2021")) {
		struct seed_case sc = { "pin_fast", "pin_fast", PL_SAME_VMA, BK_ANON, IN_FAULTED,
					0, "has_pinned" };

		printf("2021: pins of different folios of one mm, has-pinned flag\n");
		return seed_pair(&sc, PM_KNOB_HAS_PINNED_ALWAYS_WRITE, 0);
	}
	if (!strcmp(which, "2008")) {
		struct seed_case sc = { "pin_fast", "pin_fast", PL_SAME_VMA, BK_ANON, IN_FAULTED,
					0, "pm_mm_range.lock" };

		printf("2008: slow against fast GUP of different pages, Linux's design\n");
		return seed_pair(&sc, PM_KNOB_NO_GUP_FAST, 0);
	}
	if (!strcmp(which, "2023")) {
		struct seed_case sc = { "fault:anon", "fault:anon", PL_SAME_VMA, BK_ANON,
					IN_FAULTED, 0, "pm_mm_range.lock" };
		struct seed_case sc2 = { "fault:anon", "fault:anon", PL_SAME_VMA, BK_ANON,
					 IN_FAULTED, 0, "vm_refcnt" };

		printf("2023: faults on different pages of one VMA: mmap_lock without per-VMA "
		       "locks\n");
		return seed_pair(&sc, PM_KNOB_NO_PER_VMA_LOCK, 0) |
		       (printf("2023: ... and the VMA's reader count as one shared count\n"),
			seed_pair(&sc2, PM_KNOB_VMA_LOCK_SHARED_COUNT, 0));
	}
	if (!strcmp(which, "2010"))
		return -2; /* handled by the caller: two acquisitions, not a pair */
	if (!strcmp(which, "2020"))
		return seed_2020();
	return -1;
}

struct sh_arg {
	struct pm_mm *mm;
	unsigned long addr;
	struct pm_trace_log log;
};

static void traced_fault(void *p)
{
	struct sh_arg *s = p;

	pm_trace_begin();
	pm_fault(s->mm, s->addr, PM_FAULT_WRITE);
	pm_trace_end(&s->log);
}

/* RMWs of one fault at @lock, and RMWs at any lock word labelled "lock" of a page-cache node. */
static void count_locks(const struct pm_trace_log *l, const void *lock, long *obj, long *leaf)
{
	*obj = *leaf = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct pm_trace_access *x = &l->acc[i];
		char label[256];

		if (!(x->flags & PM_TRACE_RMW))
			continue;
		if (x->addr == (uintptr_t)lock) {
			++*obj;
			continue;
		}
		pm_trace_label(x->addr, x->size, l->gen, label, sizeof(label));
		if (strstr(label, "page-cache node"))
			++*leaf;
	}
}

/*
 * 2010: shmem write faults on different indices of one object (different PTE tables and
 * leaves of the page cache, 600 pages apart). Before: info_lock twice per new page, a conflict. After: no
 * object-wide lock at all; one acquisition of the leaf's lock.
 */
static int seed_2010(void)
{
	long obj[2] = { 0, 0 }, leaf[2] = { 0, 0 };
	bool conflict[2] = { false, false };

	for (int pass = 0; pass < 2; pass++) {
		struct pm_config cfg = { .mem_bytes = 64 * MiB, .flags = PM_MACHINE_LINUX_MM,
					 .knobs = pass ? 0 : PM_KNOB_SHMEM_LOCK_TWICE };
		struct pm_machine *m = pm_machine_create(&cfg);
		struct pm_mm *mm = m ? pm_mm_create(m) : NULL;
		struct pm_shmem *f = m ? pm_shmem_create(m, 4 * MiB, 0) : NULL;
		struct sh_arg sa[2];
		struct pm_trace_conflict *cf;
		struct run *r = calloc(1, sizeof(*r));
		long n;

		if (!mm || !f || pm_mmap(mm, RA, 4 * MiB, PM_PROT_READ | PM_PROT_WRITE,
					 PM_MAP_SHARED | PM_MAP_FIXED, f, 0) != (long)RA)
			return 1;
		r->m = m;
		r->mm[0] = mm;
		for (int cpu = 0; cpu < 2; cpu++)
			on_cpu(cpu, warm_cpu, r);
		/* the PTE tables, the two leaves of the page cache and the VMA's per-CPU reader
		 * counts exist: pages 0 and 600 are in different tables and leaves */
		pm_fault(mm, RA + 1 * PG, PM_FAULT_WRITE);
		pm_fault(mm, RA + 601 * PG, PM_FAULT_WRITE);
		warm_vma(mm, RA);
		for (int t = 0; t < 2; t++) {
			sa[t] = (struct sh_arg){ .mm = mm, .addr = RA + (unsigned long)t * 600 * PG };
			on_cpu(t, traced_fault, &sa[t]);
		}
		count_locks(&sa[0].log, &f->info_lock, &obj[pass], &leaf[pass]);
		n = pm_trace_conflicts(&sa[0].log, &sa[1].log, PM_TRACE_C1, &cf);
		printf("%s knobs 0x%x: one fault takes info_lock %ld times (RMWs of its word), a "
		       "page-cache leaf's lock %ld; %ld C1 conflicts%s\n",
		       pass ? "after: " : "before:", cfg.knobs, obj[pass], leaf[pass], n,
		       n ? ":" : "");
		for (long i = 0; i < n; i++) {
			char label[256];

			pm_trace_label(cf[i].addr, 1, min_gen(sa[0].log.gen < sa[1].log.gen ?
								     &sa[0].log : &sa[1].log),
				       label, sizeof(label));
			printf("    %s\n", label);
			conflict[pass] |= strstr(label, "struct pm_shmem.info_lock") != NULL;
		}
		free(cf);
		pm_trace_log_free(&sa[0].log);
		pm_trace_log_free(&sa[1].log);
		pm_mm_destroy(mm);
		pm_shmem_put(f);
		pm_machine_destroy(m);
		free(r);
	}
	printf("2010: Linux's 2010 patch goes from two acquisitions of info->lock per new page to "
	       "one; pinmm's after takes none of the object's and one of the leaf's\n");
	return !(obj[0] == 2 && conflict[0] && obj[1] == 0 && !conflict[1] && leaf[1] >= 1);
}

static void report(FILE *out, const struct opts *op, bool gp, const struct timespec *t0,
		   const struct timespec *t1);
static void report_vma_local(FILE *out, const struct opts *o);

int main(int argc, char **argv)
{
	struct opts o = { .design = 2, .knobs = 0, .knobs_name = "after",
			  .out = "results/commuter" };
	const char *seed = NULL, *model_out = NULL;
	bool any_only = false, gp;
	struct pcmap pm = { 0 };
	struct timespec t0, t1;
	char path[4096];
	FILE *f;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(arg, "--quick")) {
			o.quick = true;
		} else if (!strcmp(arg, "--list")) {
			o.list = true;
		} else if (!strcmp(arg, "--all-states")) {
			o.all = true;
		} else if (!strcmp(arg, "--jobs") && val) {
			nr_slots = atoi(val);
			if (nr_slots < 1 || nr_slots > MAX_SLOTS) {
				fprintf(stderr, "pinmm-commuter: --jobs: 1 to %d\n", MAX_SLOTS);
				return 2;
			}
			i++;
		} else if (!val) {
			fprintf(stderr, "pinmm-commuter: %s needs a value\n", arg);
			usage(stderr);
			return 2;
		} else if (!strcmp(arg, "--design")) {
			if (!strcmp(val, "linux"))
				o.design = 0;
			else if (!strcmp(val, "range"))
				o.design = 1;
			else if (!strcmp(val, "both"))
				o.design = 2;
			else {
				fprintf(stderr, "pinmm-commuter: --design: linux, range or both\n");
				return 2;
			}
			i++;
		} else if (!strcmp(arg, "--knobs")) {
			if (parse_knobs(val, &o.knobs)) {
				fprintf(stderr, "pinmm-commuter: --knobs: before, after or KNOB,...\n");
				return 2;
			}
			o.knobs_name = val;
			i++;
		} else if (!strcmp(arg, "--only")) {
			if (parse_only(val))
				return 2;
			any_only = true;
			i++;
		} else if (!strcmp(arg, "--out")) {
			o.out = val;
			i++;
		} else if (!strcmp(arg, "--model") && val) {
			model_out = val;
			i++;
		} else if (!strcmp(arg, "--seed")) {
			seed = val;
			i++;
		} else {
			fprintf(stderr, "pinmm-commuter: unknown argument '%s'\n", arg);
			usage(stderr);
			return 2;
		}
	}
	workers_start();
	if (model_out) {
		int rc = write_model(model_out);

		workers_stop();
		return rc;
	}
	if (seed) {
		int rc = !strcmp(seed, "2010") ? seed_2010() : run_seed(seed);

		workers_stop();
		if (rc < 0) {
			fprintf(stderr, "pinmm-commuter: --seed: 2008, 2010, 2020, 2021 or 2023\n");
			return 2;
		}
		printf("seed %s: %s\n", seed, rc ? "FAILED" : "the before conflict is gone after");
		return rc ? 1 : 0;
	}
	if (!any_only)
		for (int i = 0; i < NR_OPS; i++)
			only[i] = true;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int d = 0; d < 2; d++)
		if (o.design == 2 || o.design == d)
			run_all(&o, d);
	workers_stop();
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (size_t i = 0; i < nr_results; i++)
		for (int l = 0; l < 2; l++)
			for (int h = 0; h < results[i].nhit[l]; h++) {
				pcmap_add(&pm, results[i].hit[l][h].pc_a);
				pcmap_add(&pm, results[i].hit[l][h].pc_b);
			}
	pm.sym = calloc(pm.n + 1, sizeof(char *));
	pm_trace_symbolize(pm.pc, pm.n, pm.sym);

	snprintf(path, sizeof(path), "mkdir -p '%s'", o.out);
	if (system(path) != 0) {
		fprintf(stderr, "pinmm-commuter: cannot make %s\n", o.out);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/cases.jsonl", o.out);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	write_json(f, &o, &pm);
	fclose(f);
	gp = system("command -v gnuplot >/dev/null 2>&1") == 0;
	/* What follows goes to stdout and to DIR/summary.txt (make bench shows it). */
	{
		char *text = NULL;
		size_t tlen = 0;
		FILE *out = open_memstream(&text, &tlen);

		report(out, &o, gp, &t0, &t1);
		fclose(out);
		fwrite(text, 1, tlen, stdout);
		snprintf(path, sizeof(path), "%s/summary.txt", o.out);
		if ((f = fopen(path, "w"))) {
			fwrite(text, 1, tlen, f);
			fclose(f);
		}
		free(text);
	}
	return 0;
}

/* Operations that work on their target page and leave every VMA as it was. */
static bool page_op(const struct op *o)
{
	switch (o->kind) {
	case OK_READ: case OK_WRITE: case OK_FAULT: case OK_PIN_FAST: case OK_PIN:
	case OK_GET_FAST: case OK_UNPIN: case OK_UMEM_GET: case OK_UMEM_RELEASE:
		return true;
	default:
		return false;
	}
}

/*
 * Issue 28's class: two page operations (faults, accesses, pins, unpins, umem) on
 * different pages, of one VMA or of different VMAs or mms. Neither changes a VMA, so a
 * design can make every such commuting pair conflict-free without per-page mapping
 * metadata; changes of VMAs (mmap, munmap, mprotect, madvise) and fork are outside it.
 */
static bool vma_local_case(const struct cs *c)
{
	return c->pl != PL_SAME_PAGE && page_op(&ops[c->a]) && page_op(&ops[c->b]);
}

static void report(FILE *out, const struct opts *op, bool gp, const struct timespec *t0,
		   const struct timespec *t1)
{
	const struct opts o = *op;

	for (int d = 0; d < 2; d++) {
		if (o.design != 2 && o.design != d)
			continue;
		for (int l = 0; l < 2; l++) {
			print_matrix(out, d, l, o.out, gp);
			print_fields(out, d, l);
		}
	}
	{
		long agree = 0, ran = 0, bw = 0, bwc = 0;

		for (size_t i = 0; i < nr_results; i++) {
			struct result *r = &results[i];

			if (!r->commutes || !r->ran)
				continue;
			ran++;
			agree += r->model_ok;
			bw += r->both_write;
			bwc += r->both_write && r->nhit[0];
		}
		fprintf(out, "\ncommuter: the model predicted both results of %ld of %ld runs; %ld "
		       "commutative cases change one element both (must conflict), %ld of them "
		       "do; %.1f s; %s/cases.jsonl%s\n",
		       agree, ran, bw, bwc,
		       (double)(t1->tv_sec - t0->tv_sec) + (double)(t1->tv_nsec - t0->tv_nsec) / 1e9,
		       o.out, gp ? ", heatmaps *.png" : " (no gnuplot: no heatmaps)");
	}
	report_vma_local(out, &o);
	for (int d = 0; d < 2; d++) {
		if (o.design != 2 && o.design != d)
			continue;
		for (int l = 0; l < 2; l++) {
			long x = 0, y = 0;

			for (size_t i = 0; i < nr_results; i++) {
				struct result *r = &results[i];

				if (r->design != d || !r->commutes || !r->ran)
					continue;
				y++;
				x += r->nhit[l] == 0;
			}
			fprintf(out, "commuter: %s %s: %ld of %ld commutative cases conflict-free\n",
			       d ? "range" : "linux", l ? "C64" : "C1", x, y);
		}
	}
}

/* Printed before the summary lines, which stay last (the contract's form). */
static void report_vma_local(FILE *out, const struct opts *o)
{
	for (int d = 0; d < 2; d++) {
		long x = 0, y = 0;

		if (o->design != 2 && o->design != d)
			continue;
		for (size_t i = 0; i < nr_results; i++) {
			struct result *r = &results[i];

			if (r->design != d || !r->commutes || !r->ran || !vma_local_case(&r->c))
				continue;
			y++;
			x += r->nhit[0] == 0;
		}
		fprintf(out, "commuter: %s C1, page operations on different pages: "
			"%ld of %ld commutative cases conflict-free (%.1f%%)\n",
			d ? "range" : "linux", x, y, y ? 100.0 * (double)x / (double)y : 0.0);
	}
}
