// SPDX-License-Identifier: MIT
/*
 * conflict.c - where two logs conflict, at a byte (C1) and at a 64-byte line (C64), and the
 * report that names each conflict and its two sites.
 *
 * C1 is the Scalable Commutativity Rule's conflict, what COMMUTER's checker compares: a byte
 * that one log writes and the other reads or writes. C64 is the same at the granularity of a
 * cache line, false sharing included: a line one log writes and the other touches - what the
 * hardware moves between CPUs. Each log is folded into a table of the lines it touches with
 * two 64-bit masks (bytes read, bytes written), so a check costs the lines touched, not the
 * accesses squared; a memset of 2 MiB is 32768 lines. The two sites of each conflict are
 * found afterwards by a scan of each log for the first access that makes it, since only
 * conflicting lines need one.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

#define LINE 64

struct line {
	uintptr_t key;		/* line address / 64 + 1; 0: empty */
	uint64_t r, w;		/* bytes read, bytes written */
};

struct lines {
	struct line *t;
	size_t cap, n;		/* cap: a power of two */
};

static size_t line_hash(uintptr_t key)
{
	return (size_t)(key * 0x9e3779b97f4a7c15ULL);
}

static struct line *line_slot(const struct lines *ls, uintptr_t key)
{
	size_t mask = ls->cap - 1;

	for (size_t i = line_hash(key) & mask;; i = (i + 1) & mask)
		if (!ls->t[i].key || ls->t[i].key == key)
			return &ls->t[i];
}

static bool lines_grow(struct lines *ls)
{
	struct lines n = { calloc(ls->cap ? ls->cap * 2 : 1024, sizeof(struct line)),
			   ls->cap ? ls->cap * 2 : 1024, ls->n };

	if (!n.t)
		return false;
	for (size_t i = 0; i < ls->cap; i++)
		if (ls->t[i].key)
			*line_slot(&n, ls->t[i].key) = ls->t[i];
	free(ls->t);
	*ls = n;
	return true;
}

/* Bytes [s, e) of a line, 0 <= s < e <= 64, as a mask. */
static uint64_t byte_mask(unsigned s, unsigned e)
{
	return (e - s == 64 ? ~0ULL : ((1ULL << (e - s)) - 1)) << s;
}

static bool lines_add(struct lines *ls, const struct pm_trace_access *a)
{
	uintptr_t end = a->addr + (a->size ? a->size : 1);

	for (uintptr_t l = a->addr & ~(uintptr_t)(LINE - 1); l < end; l += LINE) {
		unsigned s = a->addr > l ? (unsigned)(a->addr - l) : 0;
		unsigned e = end - l < LINE ? (unsigned)(end - l) : LINE;
		struct line *slot;

		if ((ls->n + 1) * 2 > ls->cap && !lines_grow(ls))
			return false;
		slot = line_slot(ls, l / LINE + 1);
		if (!slot->key) {
			slot->key = l / LINE + 1;
			ls->n++;
		}
		if (a->flags & PM_TRACE_WRITE)
			slot->w |= byte_mask(s, e);
		else
			slot->r |= byte_mask(s, e);
	}
	return true;
}

static bool lines_of(const struct pm_trace_log *log, struct lines *ls)
{
	*ls = (struct lines){ 0 };
	if (!lines_grow(ls))
		return false;
	for (size_t i = 0; i < log->n; i++)
		if (!lines_add(ls, &log->acc[i]))
			return false;
	return true;
}

/* The first access of @log that touches byte @x (write: only a write), or a zeroed one. */
static struct pm_trace_access first_at(const struct pm_trace_log *log, uintptr_t x, bool write)
{
	for (size_t i = 0; i < log->n; i++) {
		const struct pm_trace_access *a = &log->acc[i];

		if (x >= a->addr && x < a->addr + (a->size ? a->size : 1) &&
		    (!write || (a->flags & PM_TRACE_WRITE)))
			return *a;
	}
	return (struct pm_trace_access){ 0 };
}

/* The first access of @log in [@lo, @lo + 64) (write: only a write). */
static struct pm_trace_access first_in_line(const struct pm_trace_log *log, uintptr_t lo,
					    bool write)
{
	for (size_t i = 0; i < log->n; i++) {
		const struct pm_trace_access *a = &log->acc[i];

		if (a->addr < lo + LINE && a->addr + (a->size ? a->size : 1) > lo &&
		    (!write || (a->flags & PM_TRACE_WRITE)))
			return *a;
	}
	return (struct pm_trace_access){ 0 };
}

static int conflict_cmp(const void *x, const void *y)
{
	const struct pm_trace_conflict *a = x, *b = y;

	return a->line < b->line ? -1 : a->line > b->line;
}

long pm_trace_conflicts(const struct pm_trace_log *a, const struct pm_trace_log *b,
			enum pm_trace_level level, struct pm_trace_conflict **out)
{
	struct lines la, lb;
	struct pm_trace_conflict *c = NULL;
	size_t n = 0, cap = 0;
	long ret = -1;

	*out = NULL;
	if (!lines_of(a, &la)) {
		free(la.t);
		return -1;
	}
	if (!lines_of(b, &lb))
		goto out;
	for (size_t i = 0; i < la.cap; i++) {
		const struct line *x = &la.t[i], *y;
		uint64_t mask;
		struct pm_trace_conflict k;

		if (!x->key)
			continue;
		y = line_slot(&lb, x->key);
		if (!y->key)
			continue;
		if (level == PM_TRACE_C1)
			mask = (x->w & (y->r | y->w)) | (y->w & (x->r | x->w));
		else
			mask = (x->w && (y->r | y->w)) || (y->w && (x->r | x->w)) ? x->w | y->w : 0;
		if (!mask)
			continue;
		k.line = (x->key - 1) * LINE;
		k.mask = mask;
		k.addr = k.line + (unsigned)__builtin_ctzll(mask);
		if (level == PM_TRACE_C1) {
			bool aw = x->w >> (k.addr - k.line) & 1;

			k.a = first_at(a, k.addr, aw);
			k.b = first_at(b, k.addr, !aw);
		} else {
			bool aw = x->w != 0 && (y->r | y->w);

			k.a = first_in_line(a, k.line, aw);
			k.b = first_in_line(b, k.line, !aw);
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct pm_trace_conflict *nc = realloc(c, ncap * sizeof(*nc));

			if (!nc)
				goto out;
			c = nc;
			cap = ncap;
		}
		c[n++] = k;
	}
	qsort(c, n, sizeof(*c), conflict_cmp);
	*out = c;
	c = NULL;
	ret = (long)n;
out:
	free(c);
	free(la.t);
	free(lb.t);
	return ret;
}

static const char *kind(const struct pm_trace_access *a)
{
	if (a->flags & PM_TRACE_CAS_FAILED)
		return "failed CAS";
	if (a->flags & PM_TRACE_RMW)
		return "RMW";
	if (a->flags & PM_TRACE_MEMFN)
		return a->flags & PM_TRACE_WRITE ? "mem* write" : "mem* read";
	if (a->flags & PM_TRACE_ATOMIC)
		return a->flags & PM_TRACE_WRITE ? "atomic write" : "atomic read";
	return a->flags & PM_TRACE_WRITE ? "write" : "read";
}

long pm_trace_report(FILE *f, const struct pm_trace_log *a, const struct pm_trace_log *b,
		     enum pm_trace_level level)
{
	struct pm_trace_conflict *c;
	long n = pm_trace_conflicts(a, b, level, &c);
	uintptr_t *pcs;
	char **sites;
	uint64_t gen = a->gen < b->gen ? a->gen : b->gen;

	if (n < 0) {
		fprintf(f, "trace: no memory for the conflict check\n");
		return -1;
	}
	fprintf(f, "%s: %ld conflicting line%s (%zu and %zu accesses%s)\n",
		level == PM_TRACE_C1 ? "C1" : "C64", n, n == 1 ? "" : "s", a->n, b->n,
		a->dropped || b->dropped ? ", some dropped: raise PINMM_TRACE_ENTRIES" : "");
	pcs = calloc(2 * (size_t)n + 1, sizeof(*pcs));
	sites = calloc(2 * (size_t)n + 1, sizeof(*sites));
	if (pcs && sites) {
		for (long i = 0; i < n; i++) {
			pcs[2 * i] = c[i].a.pc;
			pcs[2 * i + 1] = c[i].b.pc;
		}
		pm_trace_symbolize(pcs, 2 * (size_t)n, sites);
	}
	for (long i = 0; i < n; i++) {
		char label[512];
		unsigned run = 0;

		while (run < LINE - (c[i].addr - c[i].line) &&
		       (c[i].mask >> (c[i].addr - c[i].line + run) & 1))
			run++;
		pm_trace_label(c[i].addr, run, gen, label, sizeof(label));
		fprintf(f, "  %s  [%#lx, %u bytes]\n", label, (unsigned long)c[i].addr, run);
		fprintf(f, "    A: %s %u at %s\n", kind(&c[i].a), c[i].a.size,
			sites && sites[2 * i] ? sites[2 * i] : "?");
		fprintf(f, "    B: %s %u at %s\n", kind(&c[i].b), c[i].b.size,
			sites && sites[2 * i + 1] ? sites[2 * i + 1] : "?");
	}
	if (sites)
		for (long i = 0; i < 2 * n; i++)
			free(sites[i]);
	free(sites);
	free(pcs);
	free(c);
	return n;
}
