// SPDX-License-Identifier: MIT
/*
 * interp.c - the differential interpreter (see interp.h): one sequence of operations, run on
 * pinmm and on the model (model.h), every result compared; plus the random generator, the byte
 * encoding, the printer and a shrinker.
 *
 * Each operation is first resolved against the current state (which address space, which
 * object, which group of references); one that has no target, or that the model cannot
 * predict (MODEL_UNSURE), is skipped on both sides. The model is asked first (it applies its
 * effects), then pinmm; a difference stops the sequence.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

#define W_PAGES MODEL_WINDOW_PAGES
#define PS MODEL_PAGE_SIZE
#define ACCESS_MAX 8192

struct igroup { /* pinmm's side of a group of references */
	int n;
	bool pin;
	bool released[MODEL_GROUP_PAGES];
	struct pm_page *page[MODEL_GROUP_PAGES];
};

struct interp {
	struct pm_machine *m;
	struct model *md;
	struct pm_mm *mm[MODEL_MAX_MMS];
	struct pm_shmem *obj[MODEL_MAX_OBJS];
	struct igroup grp[MODEL_MAX_GROUPS];
	const struct interp_opts *opts;
	struct interp_result *res;
	struct interp_stats *st;
	size_t i;
	char desc[256];
	uint8_t pbuf[ACCESS_MAX], mbuf[ACCESS_MAX];
};

static const int prot_of[4] = { PM_PROT_NONE, PM_PROT_READ, PM_PROT_READ | PM_PROT_WRITE,
				PM_PROT_READ | PM_PROT_WRITE };
static const int advice_of[5] = { PM_MADV_DONTNEED, PM_MADV_HUGEPAGE, PM_MADV_NOHUGEPAGE,
				  PM_MADV_DONTFORK, PM_MADV_DOFORK };
static const char *const advice_name[5] = { "DONTNEED", "HUGEPAGE", "NOHUGEPAGE", "DONTFORK",
					    "DOFORK" };
static const char *const prot_name[4] = { "NONE", "READ", "RW", "RW" };
static const char *const kind_name[4] = { "PRIVATE|ANON", "SHARED|ANON", "PRIVATE", "SHARED" };
static const char *const gup_name[4] = { "get_user_pages", "get_user_pages_fast",
					 "pin_user_pages", "pin_user_pages_fast" };
static const char *const release_name[5] = { "per page", "unpin_user_pages",
					     "unpin_user_pages_dirty_lock",
					     "unpin_user_page_range_dirty_lock", "one page" };

/* ---- small helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static unsigned long rnd(uint64_t *s, unsigned long n)
{
	return n ? (unsigned long)(rng_next(s) % n) : 0;
}

/* The bytes an OP_ACCESS or OP_PIN_WRITE writes: a function of its b and c arguments only,
 * so that shrinking a sequence keeps the data of the operations left. */
static void pattern(uint8_t *buf, size_t len, unsigned b, unsigned c)
{
	uint64_t s = ((uint64_t)b << 32) ^ ((uint64_t)c << 8) ^ 0x5bd1e995ULL;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			s = rng_next(&s);
		buf[i] = (uint8_t)(s >> (8 * (i % 8))) | 1; /* never 0: differs from a fresh page */
	}
}

static unsigned long clamp_pages(unsigned long page, unsigned long n)
{
	if (n < 1)
		n = 1;
	if (n > W_PAGES - page)
		n = W_PAGES - page;
	return n;
}

static unsigned long waddr(unsigned long page)
{
	return MODEL_BASE + page * PS;
}

static void trace(struct interp *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(struct interp *it, const char *fmt, ...)
{
	va_list ap;

	if (!it->opts || !it->opts->trace)
		return;
	fprintf(it->opts->trace, "#   [%zu] %s", it->i, it->desc);
	va_start(ap, fmt);
	vfprintf(it->opts->trace, fmt, ap);
	va_end(ap);
	fputc('\n', it->opts->trace);
	fflush(it->opts->trace);
}

static int diverge(struct interp *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int diverge(struct interp *it, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (it->res->failed)
		return -1;
	it->res->failed = true;
	it->res->op = it->i;
	n = snprintf(it->res->msg, sizeof(it->res->msg), "op %zu, %s: ", it->i, it->desc);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(it->res->msg))
		vsnprintf(it->res->msg + n, sizeof(it->res->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (it->opts && it->opts->trace)
		fprintf(it->opts->trace, "#   DIVERGENCE %s\n", it->res->msg);
	return -1;
}

/* Compare a return value; -1 (stop) on a difference. */
static int expect(struct interp *it, long got, long want)
{
	trace(it, " = %ld", got);
	if (got != want)
		return diverge(it, "pinmm returned %ld (%s), the model %ld (%s)", got,
			       got < 0 ? pm_strerror(got) : "ok", want,
			       want < 0 ? pm_strerror(want) : "ok");
	return 0;
}

static int compare_bytes(struct interp *it, const uint8_t *got, const uint8_t *want, size_t len,
			 const char *what)
{
	it->st->bytes += len;
	if (!memcmp(got, want, len))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			return diverge(it, "%s: byte %zu is 0x%02x in pinmm, 0x%02x in the model",
				       what, i, got[i], want[i]);
	return 0;
}

static int skip(struct interp *it, const char *why)
{
	trace(it, " skipped (%s)", why);
	it->st->skipped++;
	return 1;
}

/* ---- operations ---- */

static int op_mmap(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = op->page % W_PAGES, n = clamp_pages(page, op->npages);
	int prot = prot_of[op->a & 3], kind = (op->a >> 2) & 3, place = (op->a >> 5) & 3;
	int flags = (kind & 1) ? PM_MAP_SHARED : PM_MAP_PRIVATE, oi = op->b % MODEL_MAX_OBJS;
	unsigned long pgoff = 0;
	struct pm_shmem *f = NULL;
	long want, got;

	if (kind < 2) {
		flags |= PM_MAP_ANONYMOUS;
	} else {
		f = it->obj[oi];
		if (!f)
			return skip(it, "no object");
		pgoff = op->c % MODEL_OBJ_MAX_PAGES;
	}
	if (op->a & 0x10)
		flags |= PM_MAP_POPULATE;
	if (place < 2)
		flags |= PM_MAP_FIXED;
	else if (place == 2)
		flags |= PM_MAP_FIXED_NOREPLACE;
	want = model_mmap(it->md, mi, page, n, prot, flags, oi, pgoff);
	if (want == MODEL_UNSURE)
		return skip(it, "placement not predictable");
	if (want == 0)
		want = (long)waddr(page);
	got = pm_mmap(it->mm[mi], waddr(page), n * PS, prot, flags, f, pgoff * PS);
	if (got == want && got > 0) {
		trace(it, " = W+0x%lx", (unsigned long)got - MODEL_BASE);
		return 0;
	}
	return expect(it, got, want);
}

static int op_range(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = op->page % W_PAGES, n = clamp_pages(page, op->npages);
	long want, got;

	switch (op->code) {
	case OP_MUNMAP:
		want = model_munmap(it->md, mi, page, n);
		got = pm_munmap(it->mm[mi], waddr(page), n * PS);
		break;
	case OP_MPROTECT:
		want = model_mprotect(it->md, mi, page, n, prot_of[op->a & 3]);
		got = pm_mprotect(it->mm[mi], waddr(page), n * PS, prot_of[op->a & 3]);
		break;
	default:
		want = model_madvise(it->md, mi, page, n, advice_of[op->a % 5]);
		got = pm_madvise(it->mm[mi], waddr(page), n * PS, advice_of[op->a % 5]);
		break;
	}
	return expect(it, got, want);
}

static int op_access(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long off = (op->page % W_PAGES) * PS + op->c % PS;
	size_t len = 1 + op->npages % ACCESS_MAX;
	bool write = op->a & 1;
	long want, got;

	if (write) {
		pattern(it->mbuf, len, op->b, op->c);
		memcpy(it->pbuf, it->mbuf, len);
	} else {
		memset(it->pbuf, 0xa5, len);
		memset(it->mbuf, 0x5a, len);
	}
	want = model_access(it->md, mi, off, it->mbuf, len, write);
	got = pm_access(it->mm[mi], MODEL_BASE + off, it->pbuf, len, write);
	if (expect(it, got, want))
		return -1;
	if (!write && got > 0)
		return compare_bytes(it, it->pbuf, it->mbuf, (size_t)got, "pm_access read");
	return 0;
}

static int op_fault(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = op->page % W_PAGES;
	bool write = op->a & 1;
	long want = model_fault(it->md, mi, page, write);

	return expect(it,
		      pm_fault(it->mm[mi], waddr(page) + op->c % PS, write ? PM_FAULT_WRITE : 0),
		      want);
}

static int op_fork(struct interp *it, int mi)
{
	int child = model_fork(it->md, mi);
	struct pm_mm *c;

	if (child < 0)
		return skip(it, "no free address-space slot");
	c = pm_mm_fork(it->mm[mi]);
	trace(it, " = mm%d", child);
	if (!c)
		return diverge(it, "pm_mm_fork failed: %s", pm_strerror(-errno));
	it->mm[child] = c;
	return 0;
}

static int op_mm_create(struct interp *it)
{
	int slot = model_mm_create(it->md);

	if (slot < 0)
		return skip(it, "no free address-space slot");
	it->mm[slot] = pm_mm_create(it->m);
	trace(it, " = mm%d", slot);
	if (!it->mm[slot])
		return diverge(it, "pm_mm_create failed: %s", pm_strerror(-errno));
	return 0;
}

static long gup_call(struct pm_mm *mm, int call, unsigned long start, unsigned long nr,
		     unsigned flags, struct pm_page **pages)
{
	switch (call) {
	case 0:
		return pm_get_user_pages(mm, start, nr, flags, pages);
	case 1:
		return pm_get_user_pages_fast(mm, start, nr, flags, pages);
	case 2:
		return pm_pin_user_pages(mm, start, nr, flags, pages);
	default:
		return pm_pin_user_pages_fast(mm, start, nr, flags, pages);
	}
}

static void release_page(struct igroup *ig, int i)
{
	if (ig->pin)
		pm_unpin_user_page(ig->page[i]);
	else
		pm_put_page(ig->page[i]);
	ig->released[i] = true;
}

static void release_all(struct igroup *ig)
{
	for (int i = 0; i < ig->n; i++)
		if (!ig->released[i])
			release_page(ig, i);
	memset(ig, 0, sizeof(*ig));
}

/* What the model says reference @i of group @g reads, checked against pinmm's page. */
static int check_ref(struct interp *it, int g, int i, const char *what)
{
	struct pm_page *p = it->grp[g].page[i];
	const uint8_t *want = model_ref_bytes(it->md, g, i);
	char buf[96];

	if (it->grp[g].pin && !pm_page_is_zero(p) &&
	    !pm_folio_maybe_dma_pinned(pm_page_folio(p)))
		return diverge(it, "reference %d of group %d is pinned but its folio does not say "
			       "maybe_dma_pinned", i, g);
	if (!want)
		return 0;
	snprintf(buf, sizeof(buf), "%s: group %d page %d", what, g, i);
	return compare_bytes(it, pm_page_address(p), want, PS, buf);
}

static int op_gup(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = op->page % W_PAGES, nr = op->npages % (MODEL_GROUP_PAGES + 1);
	int call = op->a & 3, g;
	struct model_gup req = {
		.pin = call >= 2,
		.write = op->a & 0x4,
		.force = op->a & 0x8,
		.longterm = op->a & 0x10,
		.nopages = op->a & 0x20,
	};
	unsigned flags = (req.write ? PM_FOLL_WRITE : 0) | (req.force ? PM_FOLL_FORCE : 0) |
			 (req.longterm ? PM_FOLL_LONGTERM : 0);
	struct pm_page *pages[MODEL_GROUP_PAGES];
	struct igroup *ig;
	long want, got;

	if ((req.nopages && call != 0) || (req.longterm && !req.pin)) {
		/* The contract: pages == NULL with pin_* or *_fast, LONGTERM with get_*. */
		got = gup_call(it->mm[mi], call, waddr(page), nr, flags,
			       req.nopages ? NULL : pages);
		for (long i = 0; i < got && !req.nopages; i++) { /* never: give them back */
			if (req.pin)
				pm_unpin_user_page(pages[i]);
			else
				pm_put_page(pages[i]);
		}
		return expect(it, got, -EINVAL);
	}
	for (g = 0; g < MODEL_MAX_GROUPS; g++)
		if (!it->grp[g].n && !it->md->group[g].live)
			break;
	if (g == MODEL_MAX_GROUPS)
		return skip(it, "no free group");
	want = model_gup(it->md, mi, page, nr, &req, g);
	if (want == MODEL_UNSURE)
		return skip(it, "FOLL_FORCE on PROT_NONE");
	got = gup_call(it->mm[mi], call, waddr(page), nr, flags, req.nopages ? NULL : pages);
	ig = &it->grp[g];
	if (got > 0 && !req.nopages) {
		ig->n = (int)(got < (long)nr ? got : (long)nr);
		ig->pin = req.pin;
		memcpy(ig->page, pages, sizeof(pages[0]) * (size_t)ig->n);
		it->st->refs += (unsigned long)ig->n;
	}
	if (expect(it, got, want))
		return -1;
	if (ig->n)
		trace(it, " -> group %d", g);
	for (int i = 0; i < ig->n; i++) {
		struct mref *r = &it->md->group[g].ref[i];
		bool zero = pm_page_is_zero(ig->page[i]);

		if (r->state == MREF_MAYBE_ZERO) { /* R7 in model.c */
			it->md->events[zero ? MEV_REF_ZERO : MEV_REF_ADOPTED]++;
			if (zero)
				r->state = MREF_ZERO;
			else
				model_adopt(it->md, g, i);
		} else if (zero) {
			return diverge(it,
				       "page %d is the zero page; the model expects a real page "
				       "(written, shared or FOLL_WRITE)",
				       i);
		}
		r->large = !zero && pm_folio_order(pm_page_folio(ig->page[i])) > 0;
		if (check_ref(it, g, i, "just taken"))
			return -1;
	}
	return 0;
}

static int op_release(struct interp *it, const struct interp_op *op)
{
	int g = op->a % MODEL_MAX_GROUPS, method = op->b % 5, n, idx;
	struct igroup *ig = &it->grp[g];
	struct pm_page *arr[MODEL_GROUP_PAGES];
	bool dirty = op->c & 1, contiguous = true;

	if (!ig->n)
		return skip(it, "no such group");
	n = ig->n;
	for (int i = 0; i < n; i++) {
		arr[i] = ig->released[i] ? NULL : ig->page[i];
		if (!arr[i] ||
		    pm_page_to_pfn(ig->page[i]) != pm_page_to_pfn(ig->page[0]) + (unsigned)i)
			contiguous = false;
	}
	trace(it, " (%s)", release_name[method]);
	if (method == 4) {
		idx = op->c % n;
		if (ig->released[idx])
			return skip(it, "already released");
		release_page(ig, idx);
		model_release(it->md, g, idx);
		for (int i = 0; i < n; i++)
			if (!ig->released[i])
				return 0;
		memset(ig, 0, sizeof(*ig));
		return 0;
	}
	if (!ig->pin || method == 0) {
		release_all(ig);
	} else if (method == 3 && contiguous) {
		pm_unpin_user_page_range_dirty_lock(arr[0], (unsigned long)n, dirty);
	} else if (method == 2) {
		pm_unpin_user_pages_dirty_lock(arr, (unsigned long)n, dirty);
	} else {
		pm_unpin_user_pages(arr, (unsigned long)n); /* NULL entries: released already */
	}
	memset(ig, 0, sizeof(*ig));
	model_release(it->md, g, -1);
	return 0;
}

static int op_pin_write(struct interp *it, const struct interp_op *op)
{
	int g = op->a % MODEL_MAX_GROUPS, idx;
	struct igroup *ig = &it->grp[g];
	struct mgroup *mg = &it->md->group[g];
	unsigned off = op->c % PS;
	size_t len;

	if (!ig->n || !ig->pin || !mg->write)
		return skip(it, "no write pin");
	idx = op->npages % ig->n;
	if (ig->released[idx] || mg->ref[idx].state != MREF_PAGE)
		return skip(it, "released");
	len = 1 + op->page % (PS - off);
	pattern(it->mbuf, len, op->b, op->c);
	memcpy((uint8_t *)pm_page_address(ig->page[idx]) + off, it->mbuf, len);
	model_ref_write(it->md, g, idx, off, it->mbuf, len);
	trace(it, " (group %d page %d, bytes %u..%zu)", g, idx, off, off + len - 1);
	return 0;
}

static int op_ref_read(struct interp *it, const struct interp_op *op)
{
	int g = op->a % MODEL_MAX_GROUPS;
	struct igroup *ig = &it->grp[g];

	if (!ig->n)
		return skip(it, "no such group");
	trace(it, " (group %d, %d pages)", g, ig->n);
	for (int i = 0; i < ig->n; i++)
		if (!ig->released[i] && check_ref(it, g, i, "read through reference"))
			return -1;
	return 0;
}

static int op_tamper(struct interp *it, const struct interp_op *op)
{
	int g = op->a % MODEL_MAX_GROUPS;
	struct igroup *ig = &it->grp[g];
	uint8_t *p;

	if (!ig->n || pm_page_is_zero(ig->page[op->npages % ig->n]))
		return skip(it, "nothing to tamper with");
	p = pm_page_address(ig->page[op->npages % ig->n]);
	p[op->c % PS] ^= 0x40;
	trace(it, " (behind the model's back)");
	return 0;
}

static int op_shmem(struct interp *it, const struct interp_op *op)
{
	int oi = op->b % MODEL_MAX_OBJS;
	struct pm_shmem *f = it->obj[oi];
	struct mobj *mo = it->md->obj[oi];
	unsigned long pages, max;

	if (op->code == OP_SHMEM_CREATE) {
		if (f)
			return skip(it, "slot in use");
		pages = 1 + op->npages % MODEL_OBJ_MAX_PAGES;
		max = op->c % 320;
		if (max >= MODEL_OBJ_MAX_PAGES)
			max = 0;
		it->obj[oi] = pm_shmem_create(it->m, pages * PS, max * PS);
		trace(it, " = obj%d", oi);
		if (!it->obj[oi])
			return diverge(it, "pm_shmem_create failed: %s", pm_strerror(-errno));
		return model_shmem_create(it->md, oi, pages, max);
	}
	if (!f)
		return skip(it, "no object");
	switch (op->code) {
	case OP_SHMEM_TRUNCATE:
		pages = op->npages % (MODEL_OBJ_MAX_PAGES + 1);
		return expect(it, pm_shmem_truncate(f, pages * PS),
			      model_shmem_truncate(it->md, oi, pages));
	case OP_SHMEM_PUT:
		model_shmem_put(it->md, oi);
		pm_shmem_put(f);
		it->obj[oi] = NULL;
		trace(it, "%s", "");
		return 0;
	default:
		if (expect(it, (long)pm_shmem_size(f), (long)(mo->size * PS)))
			return -1;
		return expect(it, (long)pm_shmem_nr_pages(f), (long)mo->nr);
	}
}

static int op_check(struct interp *it)
{
	int r = pm_machine_check(it->m);

	it->st->checks++;
	trace(it, " = %d", r);
	if (r)
		return diverge(it, "pm_machine_check() = %d (%s)", r, pm_strerror(r));
	return 0;
}

/* The contract's argument errors: each call must fail as api.md and the headers say. */
#define NR_BADARG 27
static int badarg(struct interp *it, const struct interp_op *op, int mi)
{
	struct pm_mm *mm = it->mm[mi];
	struct pm_shmem *f = it->obj[op->b % MODEL_MAX_OBJS];
	const unsigned long w = MODEL_BASE;
	const int anon = PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED,
		  rw = PM_PROT_READ | PM_PROT_WRITE;
	struct pm_page *pages[4];
	int call = op->c % 4;
	long r;

	switch (op->a % NR_BADARG) {
	case 0:
		return expect(it, pm_mmap(mm, w, 0, rw, anon, NULL, 0), -EINVAL);
	case 1:
		return expect(it, pm_mmap(mm, w + 1, PS, rw, anon, NULL, 0), -EINVAL);
	case 2:
		return expect(it, pm_mmap(mm, w, PS, rw, anon | PM_MAP_SHARED, NULL, 0), -EINVAL);
	case 3:
		return expect(it, pm_mmap(mm, w, PS, rw, PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0),
			      -EINVAL);
	case 4:
		return expect(it, pm_mmap(mm, w, PS, 0x40, anon, NULL, 0), -EINVAL);
	case 5:
		return expect(it, pm_mmap(mm, w, PS, rw, PM_MAP_PRIVATE | PM_MAP_FIXED, NULL, 0),
			      -EBADF);
	case 6:
		if (!f)
			return skip(it, "no object");
		return expect(it, pm_mmap(mm, w, PS, rw, PM_MAP_SHARED | PM_MAP_ANONYMOUS |
					  PM_MAP_FIXED, f, 0), -EINVAL);
	case 7:
		if (!f)
			return skip(it, "no object");
		return expect(it, pm_mmap(mm, w, PS, rw, PM_MAP_SHARED | PM_MAP_FIXED, f, 100),
			      -EINVAL);
	case 8:
		return expect(it, pm_mmap(mm, 0, PS, rw, anon, NULL, 0), -EPERM);
	case 9:
		return expect(it, pm_mmap(mm, PM_TASK_SIZE, PS, rw, anon, NULL, 0), -ENOMEM);
	case 10:
		return expect(it, pm_mmap(mm, w, (size_t)-1, rw, anon, NULL, 0), -EINVAL);
	case 11:
		return expect(it, pm_munmap(mm, w + 1, PS), -EINVAL);
	case 12:
		return expect(it, pm_munmap(mm, w, 0), -EINVAL);
	case 13:
		return expect(it, pm_mprotect(mm, w + 1, PS, PM_PROT_READ), -EINVAL);
	case 14:
		return expect(it, pm_mprotect(mm, w, PS, 0x40), -EINVAL);
	case 15:
		return expect(it, pm_mprotect(mm, w, 0, PM_PROT_READ), 0);
	case 16:
		return expect(it, pm_madvise(mm, w, PS, 99), -EINVAL);
	case 17:
		return expect(it, pm_madvise(mm, w, 0, PM_MADV_DONTNEED), 0);
	case 18:
		return expect(it, pm_fault(mm, w, 0x80), -EINVAL);
	case 19:
		r = gup_call(mm, call, w, 1, 0x4000, pages);
		break;
	case 20:
		r = gup_call(mm, call & 1, w, 1, PM_FOLL_LONGTERM, pages);
		break;
	case 21:
		r = gup_call(mm, call ? call : 1, w, 1, 0, NULL);
		break;
	case 22:
		r = gup_call(mm, call, 0xfffffffffffff000UL, 16, 0, pages);
		if (r > 0)
			break;
		return expect(it, r, -EOVERFLOW);
	case 23:
		r = gup_call(mm, call, w, 0, 0, pages);
		if (r > 0)
			break;
		return expect(it, r, 0);
	case 24:
		/* Nothing is ever mapped at the lowest user page. */
		return expect(it, pm_access(mm, PM_USER_MIN, it->pbuf, 16, op->c & 1), -EFAULT);
	case 25:
		if (!f)
			return skip(it, "no object");
		return expect(it, pm_shmem_truncate(f, (size_t)-1), -EINVAL);
	default: {
		struct pm_shmem *bad = pm_shmem_create(it->m, (size_t)-1, 0);

		if (bad) {
			pm_shmem_put(bad);
			return expect(it, 0, -EINVAL);
		}
		return expect(it, -errno, -EINVAL);
	}
	}
	for (long i = 0; i < r; i++) { /* taken references would be lost: give them back */
		if (call >= 2)
			pm_unpin_user_page(pages[i]);
		else
			pm_put_page(pages[i]);
	}
	return expect(it, r, -EINVAL);
}

static int run_op(struct interp *it, const struct interp_op *op)
{
	int mi = op->mm % MODEL_MAX_MMS;

	interp_describe(op, it->desc, sizeof(it->desc));
	switch (op->code) {
	case OP_MM_CREATE:
		return op_mm_create(it);
	case OP_GUP ... OP_REF_READ:
	case OP_SHMEM_CREATE ... OP_CHECK:
	case OP_TAMPER:
		break;
	default:
		if (!it->mm[mi])
			return skip(it, "no such address space");
	}
	switch (op->code) {
	case OP_MMAP:
		return op_mmap(it, op, mi);
	case OP_MUNMAP:
	case OP_MPROTECT:
	case OP_MADVISE:
		return op_range(it, op, mi);
	case OP_ACCESS:
		return op_access(it, op, mi);
	case OP_FAULT:
		return op_fault(it, op, mi);
	case OP_FORK:
		return op_fork(it, mi);
	case OP_MM_DESTROY:
		model_mm_destroy(it->md, mi);
		pm_mm_destroy(it->mm[mi]);
		it->mm[mi] = NULL;
		trace(it, "%s", "");
		return 0;
	case OP_GUP:
		if (!it->mm[mi])
			return skip(it, "no such address space");
		return op_gup(it, op, mi);
	case OP_RELEASE:
		return op_release(it, op);
	case OP_PIN_WRITE:
		return op_pin_write(it, op);
	case OP_REF_READ:
		return op_ref_read(it, op);
	case OP_SHMEM_CREATE:
	case OP_SHMEM_TRUNCATE:
	case OP_SHMEM_PUT:
	case OP_SHMEM_STAT:
		return op_shmem(it, op);
	case OP_CHECK:
		return op_check(it);
	case OP_BADARG:
		return badarg(it, op, mi);
	case OP_TAMPER:
		return op_tamper(it, op);
	}
	return skip(it, "unknown opcode");
}

int interp_run(struct pm_machine *m, const struct interp_op *ops, size_t n,
	       const struct interp_opts *opts, struct interp_result *res,
	       struct interp_stats *st)
{
	static const struct interp_opts no_opts;
	struct interp_stats dummy;
	struct interp *it = calloc(1, sizeof(*it));
	struct pm_stats s0, s1;
	size_t free0;
	long left;

	if (!it)
		abort();
	memset(res, 0, sizeof(*res));
	if (!st) {
		memset(&dummy, 0, sizeof(dummy));
		st = &dummy;
	}
	it->m = m;
	it->opts = opts ? opts : &no_opts;
	it->res = res;
	it->st = st;
	it->md = model_new();
	free0 = pm_machine_free_pages(m); /* exact: @m is quiescent (new, or after interp_run) */
	pm_machine_stats(m, &s0);

	it->i = 0;
	snprintf(it->desc, sizeof(it->desc), "pm_mm_create()");
	if (op_mm_create(it) == 0) {
		for (it->i = 0; it->i < n; it->i++) {
			int r;

			if (ops[it->i].code >= INTERP_NR_OPS && ops[it->i].code != OP_TAMPER)
				continue;
			r = run_op(it, &ops[it->i]);
			if (r < 0)
				break;
			if (r == 0) {
				st->ops++;
				if (ops[it->i].code < INTERP_NR_OPS)
					st->per_op[ops[it->i].code]++;
			}
			if (it->opts->check_each && op_check(it))
				break;
		}
	}

	/* The end: everything released and destroyed, the machine must be as it started. */
	it->i = n;
	snprintf(it->desc, sizeof(it->desc), "end of sequence");
	if (!res->failed && !it->opts->light_end)
		op_check(it); /* quiescent, references still held */
	for (int g = 0; g < MODEL_MAX_GROUPS; g++)
		if (it->grp[g].n)
			release_all(&it->grp[g]);
	for (int i = 0; i < MODEL_MAX_MMS; i++)
		if (it->mm[i])
			pm_mm_destroy(it->mm[i]);
	for (int i = 0; i < MODEL_MAX_OBJS; i++)
		if (it->obj[i])
			pm_shmem_put(it->obj[i]);
	if (!res->failed)
		op_check(it);
	if (!res->failed) {
		size_t free1 = pm_machine_free_pages(m);

		/*
		 * Exact after pm_rcu_barrier(); pm_machine_check() flushes deferred frees
		 * already, so pay for another barrier (10 ms of liburcu's batching) only to
		 * confirm a difference.
		 */
		if (free1 != free0) {
			pm_rcu_barrier();
			free1 = pm_machine_free_pages(m);
		}
		if (free1 != free0)
			diverge(it, "free pages %zu after everything was released, %zu before: %ld "
				"pages leaked", free1, free0, (long)free0 - (long)free1);
	} else {
		pm_rcu_barrier();
	}
	pm_machine_stats(m, &s1);
	if (!res->failed && s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired !=
				    s1.nr_foll_pin_released - s0.nr_foll_pin_released)
		diverge(it, "pins acquired %lu, released %lu during the sequence",
			s1.nr_foll_pin_acquired - s0.nr_foll_pin_acquired,
			s1.nr_foll_pin_released - s0.nr_foll_pin_released);
	for (int e = 0; e < MEV_NR; e++)
		st->events[e] += it->md->events[e];
	left = model_free(it->md);
	if (left && !res->failed)
		diverge(it, "the model leaks %ld pages or objects (a model bug)", left);
	if (!res->failed)
		st->sequences++;
	free(it);
	return res->failed ? -1 : 0;
}

unsigned interp_mm_flags;

struct pm_machine *interp_machine(unsigned knobs)
{
	struct pm_config cfg = { .mem_bytes = INTERP_MEM_BYTES, .knobs = knobs,
				 .flags = interp_mm_flags };

	return pm_machine_create(&cfg);
}

/* Kept machines, by design flags (0, PM_MACHINE_RANGE_MM, PM_MACHINE_LINUX_MM) and knobs. */
static struct pm_machine *kept[3][PM_KNOB_ALL + 1];

struct pm_machine *interp_machine_get(unsigned knobs)
{
	struct pm_machine **slot = &kept[interp_mm_flags % 3][knobs & PM_KNOB_ALL];

	if (!*slot) {
		*slot = interp_machine(knobs & PM_KNOB_ALL);
		if (!*slot) {
			perror("interp: pm_machine_create");
			abort();
		}
	}
	return *slot;
}

void interp_machines_release(FILE *f)
{
	for (unsigned i = 0; i < 3 * (PM_KNOB_ALL + 1); i++) {
		struct pm_machine **slot = &kept[i / (PM_KNOB_ALL + 1)][i % (PM_KNOB_ALL + 1)];
		unsigned k = i % (PM_KNOB_ALL + 1);
		struct pm_stats ms;

		if (!*slot)
			continue;
		pm_machine_stats(*slot, &ms);
		if (f)
			fprintf(f,
				"# %s knobs 0x%02x: faults %lu, THP faults %lu (fallbacks %lu, splits "
				"%lu), COW copies %lu, reuses %lu, fork pinned copies %lu, shmem "
				"pages "
				"%lu, pins %lu, fast-GUP pages %lu, slow-GUP pages %lu\n",
				pm_machine_flags(*slot) == PM_MACHINE_RANGE_MM ? "range" : "linux",
				k, ms.faults, ms.thp_faults, ms.thp_fallbacks, ms.thp_splits,
				ms.cow_copies, ms.cow_reuses, ms.fork_pinned_copies,
				ms.shmem_allocs, ms.nr_foll_pin_acquired, ms.gup_fast_pages,
				ms.gup_slow_pages);
		pm_machine_destroy(*slot);
		*slot = NULL;
	}
}

/* ---- the random generator ---- */

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
	{ OP_BADARG, 2 },
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
	uint16_t c = (uint16_t)rng_next(&g->s);

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
	op->a = (uint8_t)rng_next(&g->s);
	op->b = (uint8_t)gen_pick(g, g->objs, MODEL_MAX_OBJS);
	op->c = (uint16_t)rng_next(&g->s);
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
	case OP_MPROTECT:
		if ((op->a & 3) == 0 && rnd(&g->s, 2))
			op->a |= 1;
		break;
	case OP_MADVISE:
		op->a = (uint8_t)(rnd(&g->s, 3) ? (rnd(&g->s, 2) ? 1 : 0) : rnd(&g->s, 5));
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
			PM_KNOB_SHMEM_LOCK_TWICE,
	};
	uint64_t s = seed ^ 0xc2b2ae3d27d4eb4fULL;

	return presets[rnd(&s, 4)];
}

/* ---- encoding, printing, shrinking ---- */

size_t interp_encode(unsigned knobs, const struct interp_op *ops, size_t n, uint8_t *out,
		     size_t cap)
{
	size_t len = 1;

	if (!cap)
		return 0;
	out[0] = (uint8_t)knobs;
	for (size_t i = 0; i < n && len + INTERP_OP_BYTES <= cap; i++) {
		uint8_t *p = out + len;

		p[0] = ops[i].code;
		p[1] = ops[i].mm;
		p[2] = (uint8_t)ops[i].page;
		p[3] = (uint8_t)(ops[i].page >> 8);
		p[4] = (uint8_t)ops[i].npages;
		p[5] = (uint8_t)(ops[i].npages >> 8);
		p[6] = ops[i].a;
		p[7] = ops[i].b;
		p[8] = (uint8_t)ops[i].c;
		p[9] = (uint8_t)(ops[i].c >> 8);
		len += INTERP_OP_BYTES;
	}
	return len;
}

size_t interp_decode(const uint8_t *data, size_t len, unsigned *knobs, struct interp_op *ops,
		     size_t max)
{
	size_t n = 0;

	*knobs = len ? data[0] & PM_KNOB_ALL : 0;
	for (size_t off = 1; off + INTERP_OP_BYTES <= len && n < max; off += INTERP_OP_BYTES) {
		const uint8_t *p = data + off;

		ops[n].code = (uint8_t)(p[0] % INTERP_NR_OPS);
		ops[n].mm = p[1];
		ops[n].page = (uint16_t)(p[2] | p[3] << 8);
		ops[n].npages = (uint16_t)(p[4] | p[5] << 8);
		ops[n].a = p[6];
		ops[n].b = p[7];
		ops[n].c = (uint16_t)(p[8] | p[9] << 8);
		n++;
	}
	return n;
}

static const char *const op_names[INTERP_NR_OPS] = {
	[OP_MMAP] = "OP_MMAP",
	[OP_MUNMAP] = "OP_MUNMAP",
	[OP_MPROTECT] = "OP_MPROTECT",
	[OP_MADVISE] = "OP_MADVISE",
	[OP_ACCESS] = "OP_ACCESS",
	[OP_FAULT] = "OP_FAULT",
	[OP_FORK] = "OP_FORK",
	[OP_MM_DESTROY] = "OP_MM_DESTROY",
	[OP_MM_CREATE] = "OP_MM_CREATE",
	[OP_GUP] = "OP_GUP",
	[OP_RELEASE] = "OP_RELEASE",
	[OP_PIN_WRITE] = "OP_PIN_WRITE",
	[OP_REF_READ] = "OP_REF_READ",
	[OP_SHMEM_CREATE] = "OP_SHMEM_CREATE",
	[OP_SHMEM_TRUNCATE] = "OP_SHMEM_TRUNCATE",
	[OP_SHMEM_PUT] = "OP_SHMEM_PUT",
	[OP_SHMEM_STAT] = "OP_SHMEM_STAT",
	[OP_CHECK] = "OP_CHECK",
	[OP_BADARG] = "OP_BADARG",
};

void interp_print_stats(FILE *f, const char *what, const struct interp_stats *st)
{
	static const char *const ev[MEV_NR] = {
		[MEV_COW_COPY_HELD] = "COW copies away from a held page",
		[MEV_REFS_UNCERTAIN] = "references made uncertain",
		[MEV_FORK_PINNED] = "pinned pages copied at fork",
		[MEV_FORK_UNKNOWN] = "fork next to a pinned THP",
		[MEV_FILE_COW] = "private copies of object pages",
		[MEV_TRUNCATE_COW] = "private copies dropped by truncate",
		[MEV_SIGBUS] = "faults beyond an object's end",
		[MEV_LIMIT] = "faults beyond an object's limit",
		[MEV_REF_ZERO] = "references to the zero page",
		[MEV_REF_ADOPTED] = "references to never-written THP pages",
	};

	fprintf(f,
		"# %s: %lu sequences, %lu operations run on both sides (%lu skipped), %lu "
		"references, %lu bytes compared, %lu machine checks\n",
		what, st->sequences, st->ops, st->skipped, st->refs, st->bytes, st->checks);
	fprintf(f, "#   operations:");
	for (int k = 0; k < INTERP_NR_OPS; k++)
		fprintf(f, " %s %lu", op_names[k] + 3, st->per_op[k]);
	fprintf(f, "\n#   model rules:");
	for (int e = 0; e < MEV_NR; e++)
		fprintf(f, "%s %s %lu", e ? "," : "", ev[e], st->events[e]);
	fprintf(f, "\n");
}

const char *interp_op_name(unsigned code)
{
	if (code == OP_TAMPER)
		return "OP_TAMPER";
	return code < INTERP_NR_OPS ? op_names[code] : "?";
}

void interp_describe(const struct interp_op *op, char *buf, size_t len)
{
	unsigned long page = op->page % W_PAGES, n = clamp_pages(page, op->npages);
	int mm = op->mm % MODEL_MAX_MMS, o = op->b % MODEL_MAX_OBJS, g = op->a % MODEL_MAX_GROUPS;
	static const char *const place[4] = { "FIXED", "FIXED", "FIXED_NOREPLACE", "hint" };
	unsigned long max;

	switch (op->code) {
	case OP_MMAP:
		if (((op->a >> 2) & 3) >= 2)
			snprintf(buf, len,
				 "pm_mmap(mm%d, W+0x%lx, 0x%lx, %s, %s|%s%s, obj%d, 0x%lx)", mm,
				 page * PS, n * PS, prot_name[op->a & 3],
				 kind_name[(op->a >> 2) & 3], place[(op->a >> 5) & 3],
				 op->a & 0x10 ? "|POPULATE" : "", o,
				 (op->c % MODEL_OBJ_MAX_PAGES) * PS);
		else
			snprintf(buf, len, "pm_mmap(mm%d, W+0x%lx, 0x%lx, %s, %s|%s%s, NULL, 0)",
				 mm, page * PS, n * PS, prot_name[op->a & 3],
				 kind_name[(op->a >> 2) & 3], place[(op->a >> 5) & 3],
				 op->a & 0x10 ? "|POPULATE" : "");
		break;
	case OP_MUNMAP:
		snprintf(buf, len, "pm_munmap(mm%d, W+0x%lx, 0x%lx)", mm, page * PS, n * PS);
		break;
	case OP_MPROTECT:
		snprintf(buf, len, "pm_mprotect(mm%d, W+0x%lx, 0x%lx, %s)", mm, page * PS, n * PS,
			 prot_name[op->a & 3]);
		break;
	case OP_MADVISE:
		snprintf(buf, len, "pm_madvise(mm%d, W+0x%lx, 0x%lx, %s)", mm, page * PS, n * PS,
			 advice_name[op->a % 5]);
		break;
	case OP_ACCESS:
		snprintf(buf, len, "pm_access(mm%d, W+0x%lx, buf, %u, %s)", mm,
			 page * PS + op->c % PS, 1 + op->npages % ACCESS_MAX,
			 op->a & 1 ? "write" : "read");
		break;
	case OP_FAULT:
		snprintf(buf, len, "pm_fault(mm%d, W+0x%lx, %s)", mm, page * PS + op->c % PS,
			 op->a & 1 ? "WRITE" : "0");
		break;
	case OP_FORK:
		snprintf(buf, len, "pm_mm_fork(mm%d)", mm);
		break;
	case OP_MM_DESTROY:
		snprintf(buf, len, "pm_mm_destroy(mm%d)", mm);
		break;
	case OP_MM_CREATE:
		snprintf(buf, len, "pm_mm_create()");
		break;
	case OP_GUP:
		snprintf(buf, len, "pm_%s(mm%d, W+0x%lx, %u, %s%s%s%s, %s)", gup_name[op->a & 3],
			 mm, page * PS, op->npages % (MODEL_GROUP_PAGES + 1),
			 op->a & 0x4 ? "WRITE|" : "", op->a & 0x8 ? "FORCE|" : "",
			 op->a & 0x10 ? "LONGTERM|" : "", "0", op->a & 0x20 ? "NULL" : "pages");
		break;
	case OP_RELEASE:
		snprintf(buf, len, "release(group %d, %s%s)", g, release_name[op->b % 5],
			 op->c & 1 ? ", dirty" : "");
		break;
	case OP_PIN_WRITE:
		snprintf(buf, len, "memcpy(pm_page_address(group %d[%u]) + %u, data, %lu)", g,
			 op->npages, op->c % (unsigned)PS,
			 1 + op->page % (PS - op->c % PS));
		break;
	case OP_REF_READ:
		snprintf(buf, len, "read(group %d)", g);
		break;
	case OP_SHMEM_CREATE:
		max = op->c % 320;
		snprintf(buf, len, "pm_shmem_create(m, 0x%lx, 0x%lx) -> obj%d",
			 (1 + op->npages % MODEL_OBJ_MAX_PAGES) * PS,
			 max >= MODEL_OBJ_MAX_PAGES ? 0 : max * PS, o);
		break;
	case OP_SHMEM_TRUNCATE:
		snprintf(buf, len, "pm_shmem_truncate(obj%d, 0x%lx)", o,
			 (op->npages % (MODEL_OBJ_MAX_PAGES + 1)) * PS);
		break;
	case OP_SHMEM_PUT:
		snprintf(buf, len, "pm_shmem_put(obj%d)", o);
		break;
	case OP_SHMEM_STAT:
		snprintf(buf, len, "pm_shmem_size/nr_pages(obj%d)", o);
		break;
	case OP_CHECK:
		snprintf(buf, len, "pm_machine_check(m)");
		break;
	case OP_BADARG:
		snprintf(buf, len, "bad arguments #%d (mm%d)", op->a % NR_BADARG, mm);
		break;
	case OP_TAMPER:
		snprintf(buf, len, "tamper(group %d[%u], byte %u)", g, op->npages,
			 op->c % (unsigned)PS);
		break;
	default:
		snprintf(buf, len, "opcode %u", op->code);
		break;
	}
}

void interp_print(FILE *f, const char *prefix, unsigned knobs, const struct interp_op *ops,
		  size_t n)
{
	char desc[256];

	fprintf(f, "%s/* knobs 0x%x, %zu operations; W = 0x%lx */\n", prefix, knobs, n, MODEL_BASE);
	for (size_t i = 0; i < n; i++) {
		interp_describe(&ops[i], desc, sizeof(desc));
		if (ops[i].code < INTERP_NR_OPS)
			fprintf(f, "%s{ %s, %u, %u, %u, 0x%02x, 0x%02x, 0x%04x }, /* %s */\n",
				prefix, op_names[ops[i].code], ops[i].mm, ops[i].page,
				ops[i].npages, ops[i].a, ops[i].b, ops[i].c, desc);
		else
			fprintf(f, "%s{ %u, %u, %u, %u, 0x%02x, 0x%02x, 0x%04x }, /* %s */\n",
				prefix, ops[i].code, ops[i].mm, ops[i].page, ops[i].npages,
				ops[i].a, ops[i].b, ops[i].c, desc);
	}
}

/* A try of the shrinker runs on the kept machine: interp_run() leaves it quiescent even after
 * a divergence, and measures leaks from its own start. */
static bool fails(unsigned knobs, const struct interp_op *ops, size_t n)
{
	struct interp_result res;

	return interp_run(interp_machine_get(knobs), ops, n, NULL, &res, NULL) != 0;
}

size_t interp_shrink(unsigned knobs, struct interp_op *ops, size_t n, long tries)
{
	struct interp_op *tmp = malloc(sizeof(*tmp) * (n ? n : 1));

	if (!tmp)
		return n;
	/* Delta debugging, simplified: drop chunks of halving size while it still fails. */
	for (size_t chunk = n / 2 ? n / 2 : 1; chunk >= 1 && tries > 0; chunk /= 2) {
		bool progress = true;

		while (progress && tries > 0) {
			progress = false;
			for (size_t start = 0; start < n && tries > 0;) {
				size_t end = start + chunk < n ? start + chunk : n, k = 0;

				for (size_t i = 0; i < n; i++)
					if (i < start || i >= end)
						tmp[k++] = ops[i];
				tries--;
				if (k < n && fails(knobs, tmp, k)) {
					memcpy(ops, tmp, sizeof(*tmp) * k);
					n = k;
					progress = true;
				} else {
					start = end;
				}
			}
		}
		if (chunk == 1)
			break;
	}
	free(tmp);
	return n;
}

void interp_report(FILE *f, unsigned knobs, struct interp_op *ops, size_t n,
		   const struct interp_result *res, long tries)
{
	struct interp_opts opts = { .trace = f };
	struct interp_result r2;
	struct pm_machine *m;
	size_t k, cap, len;
	uint8_t *buf;

	fprintf(f, "# divergence (knobs 0x%x): %s\n", knobs, res->msg);
	k = interp_shrink(knobs, ops, n, tries);
	fprintf(f, "# shrunk from %zu to %zu operations; as a regression entry:\n", n, k);
	interp_print(f, "#   ", knobs, ops, k);
	fprintf(f, "# trace of the shrunk sequence on a fresh machine:\n");
	m = interp_machine(knobs);
	if (m) {
		interp_run(m, ops, k, &opts, &r2, NULL);
		pm_machine_destroy(m);
	}
	cap = 1 + k * INTERP_OP_BYTES;
	buf = malloc(cap);
	if (!buf)
		return;
	len = interp_encode(knobs, ops, k, buf, cap);
	fprintf(f, "# replay: test_differential -x ");
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%02x", buf[i]);
	fprintf(f, "\n");
	fflush(f);
	free(buf);
}
