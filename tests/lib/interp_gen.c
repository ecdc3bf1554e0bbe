// SPDX-License-Identifier: MIT
/*
 * interp_gen.c - the differential interpreter's random generator (interp.h): sequences of
 * operations that mostly have a target, from a seed, and the knob combinations they run under.
 */
#include <string.h>

#include "interp_internal.h"

static unsigned long rnd(uint64_t *s, unsigned long n)
{
	return n ? (unsigned long)(xorshift64s(s) % n) : 0;
}

/*
 * The generator keeps a rough shadow of the state (which address spaces, objects and groups
 * probably exist, which ranges were mapped) so that most operations have a target. It need not
 * be exact: the interpreter resolves every operation against the real state.
 */
struct gen {
	uint64_t s;
	int nr;
	struct {
		unsigned long page, n;
	} range[8]; /* recent mmaps: most operations aim at them */
	unsigned mms, objs, groups; /* bit masks of slots that probably exist */
	struct interp_op pending[4]; /* the next operations, when one calls for others */
	int npending;
	unsigned wgroups;	     /* groups that probably hold write pins */
	uint16_t touched[4];	    /* pages accessed lately: present, so GUP-fast can take them */
};

/* A random set bit of @mask (else a random slot below @n). */
static unsigned gen_pick(struct gen *g, unsigned mask, unsigned n)
{
	unsigned k = 0, which;

	for (unsigned i = 0; i < n; i++)
		k += (mask >> i) & 1;
	if (!k || rnd(&g->s, 10) == 0)
		return (unsigned)rnd(&g->s, n);
	which = (unsigned)rnd(&g->s, k);
	for (unsigned i = 0; i < n; i++)
		if (((mask >> i) & 1) && which-- == 0)
			return i;
	return 0;
}

static unsigned gen_free(unsigned mask, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!((mask >> i) & 1))
			return i;
	return n;
}

static unsigned long gen_page(struct gen *g)
{
	unsigned long r = rnd(&g->s, 100), p;

	if (r < 60 && g->nr) {
		int k = (int)rnd(&g->s, (unsigned long)g->nr);

		p = g->range[k].page + rnd(&g->s, g->range[k].n + 2);
		if (p && rnd(&g->s, 4) == 0)
			p--;
	} else if (r < 82) {
		p = MODEL_PMD_PAGES * rnd(&g->s, 4) + rnd(&g->s, 9);
		p = p >= 4 ? p - 4 : 0;
	} else {
		p = rnd(&g->s, W_PAGES);
	}
	return p % W_PAGES;
}

static unsigned long gen_len(struct gen *g)
{
	unsigned long r = rnd(&g->s, 100);

	if (r < 30)
		return 1;
	if (r < 60)
		return 1 + rnd(&g->s, 16);
	if (r < 75)
		return 1 + rnd(&g->s, 128);
	if (r < 85)
		return MODEL_PMD_PAGES;
	if (r < 90)
		return 2 * MODEL_PMD_PAGES;
	return 1 + rnd(&g->s, W_PAGES);
}

static const struct {
	uint8_t code;
	uint8_t weight;
} op_weights[] = {
	{ OP_MMAP, 12 },     { OP_MUNMAP, 4 },	     { OP_MPROTECT, 6 },
	{ OP_MADVISE, 9 },   { OP_ACCESS, 22 },	     { OP_FAULT, 5 },
	{ OP_FORK, 5 },	     { OP_MM_DESTROY, 2 },   { OP_MM_CREATE, 1 },
	{ OP_GUP, 18 },	     { OP_RELEASE, 10 },     { OP_PIN_WRITE, 10 },
	{ OP_REF_READ, 7 },  { OP_SHMEM_CREATE, 3 }, { OP_SHMEM_TRUNCATE, 3 },
	{ OP_SHMEM_PUT, 1 }, { OP_SHMEM_STAT, 2 },   { OP_CHECK, 2 },
	{ OP_BADARG, 2 },    { OP_MIGRATE, 4 },	     { OP_HUGETLB_MMAP, 3 },
};

/* The VMA-heavy mix: many small mappings, splits and merges, and faults among them. */
static const struct {
	uint8_t code;
	uint8_t weight;
} vma_weights[] = {
	{ OP_MMAP, 24 },    { OP_MUNMAP, 14 },	 { OP_MPROTECT, 20 }, { OP_MADVISE, 10 },
	{ OP_ACCESS, 18 },  { OP_FAULT, 10 },	 { OP_FORK, 2 },      { OP_MM_DESTROY, 1 },
	{ OP_GUP, 5 },	    { OP_RELEASE, 4 },	 { OP_CHECK, 3 },     { OP_BADARG, 1 },
};

bool interp_vma_heavy;

static void gen_push(struct gen *g, struct interp_op op)
{
	if (g->npending < (int)(sizeof(g->pending) / sizeof(g->pending[0])))
		g->pending[g->npending++] = op;
}

/*
 * After a get/pin, now and then the operations that make Linux's COW-versus-GUP rules matter:
 * a fork, a write by one side, a write through the pin, a read through the reference.
 */
static void gen_recipe(struct gen *g, const struct interp_op *gup, unsigned group)
{
	uint8_t mm = gup->mm, child = (uint8_t)gen_free(g->mms, MODEL_MAX_MMS);
	uint16_t c = (uint16_t)xorshift64s(&g->s);

	if (rnd(&g->s, 3) || child >= MODEL_MAX_MMS)
		return;
	gen_push(g, (struct interp_op){ OP_FORK, mm, 0, 0, 0, 0, 0 });
	g->mms |= 1u << child;
	if ((gup->a & 6) == 6 && rnd(&g->s, 2)) /* a write pin: write through it */
		gen_push(g, (struct interp_op){ OP_PIN_WRITE, 0, 63, 0, (uint8_t)group,
						(uint8_t)c, c });
	gen_push(g, (struct interp_op){ OP_ACCESS, rnd(&g->s, 2) ? mm : child, gup->page, 31, 1,
					(uint8_t)(c >> 8), (uint16_t)(c % 64) });
	gen_push(g, (struct interp_op){ OP_REF_READ, 0, 0, 0, (uint8_t)group, 0, 0 });
}

static void gen_op(struct gen *g, struct interp_op *op, size_t i)
{
	unsigned total = 0, r, f;
	size_t k;

	if (interp_vma_heavy) {
		for (k = 0; k < sizeof(vma_weights) / sizeof(vma_weights[0]); k++)
			total += vma_weights[k].weight;
		r = (unsigned)rnd(&g->s, total);
		for (k = 0; r >= vma_weights[k].weight; k++)
			r -= vma_weights[k].weight;
		f = vma_weights[k].code;
	} else {
		for (k = 0; k < sizeof(op_weights) / sizeof(op_weights[0]); k++)
			total += op_weights[k].weight;
		r = (unsigned)rnd(&g->s, total);
		for (k = 0; r >= op_weights[k].weight; k++)
			r -= op_weights[k].weight;
		f = op_weights[k].code;
	}
	if (g->npending) { /* e.g. MADV_HUGEPAGE right after the mmap of a PMD region */
		*op = g->pending[0];
		memmove(g->pending, g->pending + 1, sizeof(g->pending[0]) * (size_t)--g->npending);
		return;
	}
	memset(op, 0, sizeof(*op));
	op->code = (uint8_t)f;
	if (i < 2)
		op->code = OP_MMAP; /* start with something mapped */
	else if (!g->mms)
		op->code = OP_MM_CREATE;
	else if (i == 2 && rnd(&g->s, 2))
		op->code = OP_SHMEM_CREATE;
	op->mm = (uint8_t)gen_pick(g, g->mms, MODEL_MAX_MMS);
	op->page = (uint16_t)gen_page(g);
	op->npages = (uint16_t)gen_len(g);
	if (interp_vma_heavy && op->code <= OP_MADVISE)
		op->npages = (uint16_t)(1 + rnd(&g->s, 6)); /* small: many VMAs, many splits */
	op->a = (uint8_t)xorshift64s(&g->s);
	op->b = (uint8_t)gen_pick(g, g->objs, MODEL_MAX_OBJS);
	op->c = (uint16_t)xorshift64s(&g->s);
	switch (op->code) {
	case OP_MMAP:
		if (!interp_vma_heavy && rnd(&g->s, 100) < 45) { /* whole PMD regions: THPs */
			op->page = (uint16_t)(MODEL_PMD_PAGES * rnd(&g->s, 3));
			op->npages = (uint16_t)(MODEL_PMD_PAGES * (1 + rnd(&g->s, 2)));
			if (rnd(&g->s, 100) < 70)
				gen_push(g, (struct interp_op){ OP_MADVISE, op->mm, op->page,
								op->npages, 1, 0, 0 });
		}
		op->a &= 0x1f | (rnd(&g->s, 8) ? 0 : 0x60); /* mostly MAP_FIXED */
		if (rnd(&g->s, 6))
			op->a &= (uint8_t)~0x10; /* MAP_POPULATE now and then */
		op->a &= (uint8_t)~3; /* RW mostly, then READ, then NONE */
		r = (unsigned)rnd(&g->s, 10);
		op->a |= r < 7 ? 2 : r < 9 ? 1 : 0;
		if (!g->objs)
			op->a &= (uint8_t)~0x08; /* no object yet: anonymous */
		op->c = (uint16_t)(rnd(&g->s, 3) ? 0 : rnd(&g->s, 64));
		k = g->nr < 8 ? (size_t)g->nr++ : rnd(&g->s, 8);
		g->range[k].page = op->page % W_PAGES;
		g->range[k].n = clamp_pages(op->page % W_PAGES, op->npages);
		break;
	case OP_HUGETLB_MMAP:
		op->a &= 4; /* private or shared; RW mostly, then READ */
		op->a |= rnd(&g->s, 5) ? 2 : 1;
		k = g->nr < 8 ? (size_t)g->nr++ : rnd(&g->s, 8);
		g->range[k].page = (op->page % W_PAGES) / MODEL_PMD_PAGES * MODEL_PMD_PAGES;
		g->range[k].n = clamp_pages(g->range[k].page,
					    (1 + op->npages % 2) * MODEL_PMD_PAGES);
		break;
	case OP_MPROTECT:
		if ((op->a & 3) == 0 && rnd(&g->s, 2))
			op->a |= 1;
		break;
	case OP_MADVISE:
		op->a = (uint8_t)(rnd(&g->s, 3) ? (rnd(&g->s, 2) ? 1 : 0) :
						  rnd(&g->s, INTERP_NR_ADVICE));
		if (g->nr && rnd(&g->s, 2)) { /* a whole recent mapping */
			k = rnd(&g->s, (unsigned long)g->nr);
			op->page = (uint16_t)g->range[k].page;
			op->npages = (uint16_t)g->range[k].n;
		}
		break;
	case OP_ACCESS:
		op->npages = (uint16_t)(rnd(&g->s, 4) ? rnd(&g->s, 64) : rnd(&g->s, ACCESS_MAX));
		op->a = rnd(&g->s, 5) < 3; /* writes a little more often than reads */
		g->touched[rnd(&g->s, 4)] = (uint16_t)(op->page % W_PAGES);
		break;
	case OP_FORK:
	case OP_MM_CREATE:
		f = gen_free(g->mms, MODEL_MAX_MMS);
		if (f < MODEL_MAX_MMS)
			g->mms |= 1u << f;
		break;
	case OP_MM_DESTROY:
		g->mms &= ~(1u << (op->mm % MODEL_MAX_MMS));
		break;
	case OP_GUP:
		op->npages = (uint16_t)(rnd(&g->s, 3) ? 1 + rnd(&g->s, 4) : rnd(&g->s, 17));
		if (rnd(&g->s, 2))
			op->page = g->touched[rnd(&g->s, 4)];
		r = (unsigned)rnd(&g->s, 4);
		op->a = (uint8_t)(r | (rnd(&g->s, 2) ? 4 : 0) | (rnd(&g->s, 8) ? 0 : 8) |
				  (rnd(&g->s, r >= 2 ? 4 : 30) ? 0 : 16) |
				  (rnd(&g->s, 40) ? 0 : 32));
		f = gen_free(g->groups, MODEL_MAX_GROUPS);
		if (f < MODEL_MAX_GROUPS && op->npages) {
			g->groups |= 1u << f;
			if ((op->a & 6) == 6)
				g->wgroups |= 1u << f;
			else
				g->wgroups &= ~(1u << f);
			gen_recipe(g, op, f);
		}
		break;
	case OP_RELEASE:
	case OP_REF_READ:
		op->a = (uint8_t)gen_pick(g, g->groups, MODEL_MAX_GROUPS);
		if (op->code == OP_RELEASE && op->b % 5 != 4) {
			g->groups &= ~(1u << op->a);
			g->wgroups &= ~(1u << op->a);
		}
		break;
	case OP_PIN_WRITE:
		op->a = (uint8_t)gen_pick(g, g->wgroups, MODEL_MAX_GROUPS);
		op->npages = (uint16_t)rnd(&g->s, 4);
		break;
	case OP_SHMEM_CREATE:
		f = gen_free(g->objs, MODEL_MAX_OBJS);
		op->b = (uint8_t)(f < MODEL_MAX_OBJS ? f : op->b);
		g->objs |= 1u << op->b;
		op->npages = (uint16_t)rnd(&g->s, rnd(&g->s, 2) ? 16 : MODEL_OBJ_MAX_PAGES);
		op->c = (uint16_t)(rnd(&g->s, 3) ? 0 : rnd(&g->s, 320));
		break;
	case OP_SHMEM_TRUNCATE:
		op->npages = (uint16_t)rnd(&g->s, rnd(&g->s, 2) ? 17 : MODEL_OBJ_MAX_PAGES + 1);
		break;
	case OP_SHMEM_PUT:
		g->objs &= ~(1u << op->b);
		break;
	default:
		break;
	}
}

void interp_generate(uint64_t seed, struct interp_op *ops, size_t n)
{
	struct gen g = { .s = seed * 0x9e3779b97f4a7c15ULL + 1, .mms = 1 };

	for (size_t i = 0; i < n; i++)
		gen_op(&g, &ops[i], i);
}

unsigned interp_generate_knobs(uint64_t seed)
{
	/* Every knob on and off, in four machines (results must not depend on knobs). */
	static const unsigned presets[] = {
		0,
		PM_KNOB_ALL,
		PM_KNOB_NO_GUP_FAST | PM_KNOB_UNPIN_PER_PAGE | PM_KNOB_NO_PER_VMA_LOCK,
		PM_KNOB_HAS_PINNED_ALWAYS_WRITE | PM_KNOB_GUP_FAST_RESTART |
			PM_KNOB_SHMEM_LOCK_TWICE | PM_KNOB_PTE_TABLE_LOCK,
	};
	uint64_t s = seed ^ 0xc2b2ae3d27d4eb4fULL;

	return presets[rnd(&s, 4)];
}
