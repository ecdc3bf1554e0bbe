// SPDX-License-Identifier: MIT
/*
 * interp.c - the differential interpreter itself (see interp.h): one sequence of operations, run
 * on pinmm and on the model (model.h), every result compared; and the machines it runs on. The
 * generator, the encoding, the printer and the shrinker are the other interp_*.c files
 * (interp_internal.h lists them).
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

#include "interp_internal.h"

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
static const int advice_of[INTERP_NR_ADVICE] = {
	PM_MADV_DONTNEED, PM_MADV_HUGEPAGE,   PM_MADV_NOHUGEPAGE,    PM_MADV_DONTFORK,
	PM_MADV_DOFORK,	  PM_MADV_WIPEONFORK, PM_MADV_KEEPONFORK,    PM_MADV_FREE,
	PM_MADV_POPULATE_READ, PM_MADV_POPULATE_WRITE,
};

/* ---- small helpers ---- */

/* The bytes an OP_ACCESS or OP_PIN_WRITE writes: a function of its b and c arguments only,
 * so that shrinking a sequence keeps the data of the operations left. */
static void pattern(uint8_t *buf, size_t len, unsigned b, unsigned c)
{
	uint64_t s = ((uint64_t)b << 32) ^ ((uint64_t)c << 8) ^ 0x5bd1e995ULL;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			s = xorshift64s(&s);
		buf[i] = (uint8_t)(s >> (8 * (i % 8))) | 1; /* never 0: differs from a fresh page */
	}
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
		return skip(it, "placement not predictable, or a hugetlb page cut");
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
		break;
	case OP_MPROTECT:
		want = model_mprotect(it->md, mi, page, n, prot_of[op->a & 3]);
		break;
	default:
		want = model_madvise(it->md, mi, page, n, advice_of[op->a % INTERP_NR_ADVICE]);
		break;
	}
	if (want == MODEL_UNSURE)
		return skip(it, "would cut a hugetlb page, or advice on hugetlb not modelled");
	switch (op->code) {
	case OP_MUNMAP:
		got = pm_munmap(it->mm[mi], waddr(page), n * PS);
		break;
	case OP_MPROTECT:
		got = pm_mprotect(it->mm[mi], waddr(page), n * PS, prot_of[op->a & 3]);
		break;
	default:
		got = pm_madvise(it->mm[mi], waddr(page), n * PS, advice_of[op->a % INTERP_NR_ADVICE]);
		break;
	}
	return expect(it, got, want);
}

/*
 * A hugetlb mapping at MAP_FIXED of 1 or 2 whole 2 MiB pages from the PMD region of @page:
 * private anonymous (MAP_HUGETLB), or shared, of a new hugetlbfs object of its size whose
 * creator's reference is dropped at once (the mappings hold it, as a memfd closed after mmap).
 */
static int op_hugetlb_mmap(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = (op->page % W_PAGES) / MODEL_PMD_PAGES * MODEL_PMD_PAGES;
	unsigned long n = clamp_pages(page, (1 + op->npages % 2) * MODEL_PMD_PAGES);
	int prot = prot_of[op->a & 3];
	bool shared = op->a & 4;
	struct pm_shmem *f = NULL;
	long got;

	if (shared) {
		f = pm_shmem_create_hugetlb(it->m, n * PS);
		if (!f)
			return diverge(it, "pm_shmem_create_hugetlb failed: %s",
				       pm_strerror(-errno));
		got = pm_mmap(it->mm[mi], waddr(page), n * PS, prot, PM_MAP_SHARED | PM_MAP_FIXED,
			      f, 0);
		pm_shmem_put(f);
	} else {
		got = pm_mmap(it->mm[mi], waddr(page), n * PS, prot,
			      PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB | PM_MAP_FIXED,
			      NULL, 0);
	}
	if (expect(it, got, (long)waddr(page)))
		return -1;
	return (int)model_hugetlb_mmap(it->md, mi, page, n, prot, shared);
}

/* Migration: the model predicts only the holes; any count of folios not moved is right. */
static int op_migrate(struct interp *it, const struct interp_op *op, int mi)
{
	unsigned long page = op->page % W_PAGES, n = clamp_pages(page, op->npages);
	long want = model_migrate(it->md, mi, page, n);
	long got = pm_migrate_range(it->mm[mi], waddr(page), n * PS,
				    op->a & 1 ? PM_MIGRATE_AWAY_MOVABLE : PM_MIGRATE_ANYWHERE);

	trace(it, " = %ld", got);
	if (want == 0 && got >= 0 && got <= (long)n)
		return 0;
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
		return skip(it, "FOLL_FORCE on PROT_NONE or hugetlb");
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
	trace(it, " (%s)", interp_release_name[method]);
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
	case 4: /* unknown prot bits are ignored; the type nibble never is */
		return expect(it, pm_mmap(mm, w, PS, rw | 0x40, (anon & ~PM_MAP_PRIVATE) | 0x04,
					  NULL, 0), -EINVAL);
	case 5:
		return expect(it, pm_mmap(mm, w, PS, rw, PM_MAP_PRIVATE | PM_MAP_FIXED, NULL, 0),
			      -EBADF);
	case 6:
		if (!f)
			return skip(it, "no object");
		/* MAP_SHARED_VALIDATE of an object with an unknown flag: W keeps its mapping */
		return expect(it, pm_mmap(mm, w, PS, rw,
					  PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED | 0x200, f, 0),
			      -EOPNOTSUPP);
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
		return expect(it, pm_mmap(mm, w, (size_t)-1, rw, anon, NULL, 0), -ENOMEM);
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
	case OP_MIGRATE:
		return op_migrate(it, op, mi);
	case OP_HUGETLB_MMAP:
		return op_hugetlb_mmap(it, op, mi);
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
				 .flags = interp_mm_flags, .nr_hugepages = INTERP_NR_HUGEPAGES };

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
				"%lu, pins %lu, fast-GUP pages %lu, slow-GUP pages %lu, migrated %lu "
				"(not %lu, pinned %lu)\n",
				pm_machine_flags(*slot) == PM_MACHINE_RANGE_MM ? "range" : "linux",
				k, ms.faults, ms.thp_faults, ms.thp_fallbacks, ms.thp_splits,
				ms.cow_copies, ms.cow_reuses, ms.fork_pinned_copies,
				ms.shmem_allocs, ms.nr_foll_pin_acquired, ms.gup_fast_pages,
				ms.gup_slow_pages, ms.pgmigrate_success, ms.pgmigrate_fail,
				ms.migrate_pinned_skips);
		pm_machine_destroy(*slot);
		*slot = NULL;
	}
}
