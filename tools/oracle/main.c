// SPDX-License-Identifier: MIT
/*
 * main.c - make oracle: seeded random sequences run on the host kernel and on pinmm,
 * compared after every operation (issue 29; docs/linux-differences.md).
 *
 *   ORACLE_SECONDS (60)  how long to run
 *   ORACLE_SEED          the seed (default: from the clock; printed)
 *   ORACLE_MM            linux (default), range, or both (sequences alternate)
 *   ORACLE_KNOWN         the allow-list (tools/oracle/known.txt)
 *   ORACLE_OUT           where found tests go (build/oracle)
 *   ORACLE_STRICT        0: divergences off the allow-list are reported, not failed (CI)
 *   ORACLE_JOBS          drivers run side by side (default: 1.5 per CPU, at most 8)
 *   ORACLE_SEQ           run one sequence again, by the number a divergence printed, with the
 *                        seed, ORACLE_MM and ORACLE_JOBS it ran with (they pick its driver,
 *                        and so whether it has hugetlb, and its design)
 *
 * The parent process probes, saves the host settings it changes, forks the driver, and
 * restores them however the driver ends (exit, crash, signal). The driver runs sequences of
 * SEQ_LEN operations, each starting from a fresh host server and a fresh pinmm machine; the
 * first operation reserves the window (PROT_NONE, MAP_FIXED | MAP_NORESERVE) on both sides.
 * A divergence ends its sequence; one not on the allow-list is shrunk by delta debugging to
 * a minimal sequence that still gives the same divergence (operation and field) and printed
 * as a ready C test. Exit status: 0, or 1 when a divergence not on the allow-list was found
 * (with ORACLE_STRICT=0: 0, the divergences reported all the same - for CI, whose host kernel
 * may not be the allow-list's, and whose hugetlb pool counts are not the same from run to run:
 * HugePages_Rsvd can still hold what an earlier sequence's io_uring pins left).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "oracle.h"

#define SEQ_LEN 80
#define MAX_FOUND 16

static struct caps caps;
static unsigned cmp_flags;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the allow-list ---- */

struct known {
	char pat[128], status[16], why[256];
	long hits;
};
static struct known known[64];
static int nknown;

static void load_known(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	if (!f) {
		printf("oracle: no allow-list at %s\n", path);
		return;
	}
	while (fgets(line, sizeof(line), f) && nknown < 64) {
		char *p = line + strspn(line, " \t");
		int n = 0;

		if (*p == '#' || *p == '\n' || !*p)
			continue;
		if (sscanf(p, "%127s %15s %n", known[nknown].pat, known[nknown].status, &n) < 2)
			continue;
		snprintf(known[nknown].why, sizeof(known[nknown].why), "%s", p + n);
		known[nknown].why[strcspn(known[nknown].why, "\n")] = 0;
		nknown++;
	}
	fclose(f);
}

static struct known *allowed(const char *sig)
{
	for (int i = 0; i < nknown; i++)
		if (!fnmatch(known[i].pat, sig, 0))
			return &known[i];
	return NULL;
}

/* ---- one sequence on both sides ---- */

struct run_out {
	int div_at;		/* the operation that diverged, -1: none */
	char sig[160];		/* variant/field */
	char detail[4096];	/* what each side showed */
	char ccheck[2048];	/* the C check of the field that differed */
	struct res hres[SEQ_LEN], pres[SEQ_LEN];
	bool done[SEQ_LEN];
	long compared;
	bool aborted;
	char why[256];
};

static struct obs_proc hobs[MAXPROC], pobs[MAXPROC];

/*
 * PTE tables Linux frees and pinmm keeps (docs/linux-differences.md, decision 8): since 6.14
 * (CONFIG_PT_RECLAIM) a MADV_DONTNEED that zaps a whole aligned 2 MiB span of one VMA frees
 * the span's PTE table, and the PMD entry is none; pinmm keeps the empty table. A later fault
 * there maps a THP or the huge zero page on Linux where the VMA allows one, 4 KiB pages in
 * pinmm. A span is marked at such a DONTNEED, and unmarked once pinmm maps a page in it or no
 * VMA of pinmm reaches it (the table is back on both sides, or freed on both). A divergence
 * that a marked span explains is named "(pt-reclaim)".
 */
static uint32_t pt_reclaimed[MAXPROC]; /* bit s: the span at WIN_BASE + s * HPAGE */

static uint32_t span_bits(unsigned long start, unsigned long end)
{
	uint32_t bits = 0;

	for (unsigned s = 0; s < WIN_SIZE / HPAGE; s++) {
		unsigned long a = WIN_BASE + s * HPAGE;

		if (a < end && a + HPAGE > start)
			bits |= 1u << s;
	}
	return bits;
}

/* After operation @op: mark what its DONTNEED reclaimed on Linux, unmark what converged. */
static void pt_reclaim_track(const struct op *op, bool ok, const bool *alive)
{
	if (op->kind == OP_FORK && ok)
		pt_reclaimed[op->x] = pt_reclaimed[op->proc];
	for (int p = 0; p < MAXPROC; p++) {
		const struct obs_proc *q = &pobs[p];

		if (!alive[p])
			continue;
		for (unsigned s = 0; s < WIN_SIZE / HPAGE; s++) {
			unsigned long a = WIN_BASE + s * HPAGE;
			bool whole = false, reached = false, mapped = false;

			for (int k = 0; k < q->nvma; k++) {
				reached |= q->vma[k].start < a + HPAGE && q->vma[k].end > a;
				whole |= q->vma[k].start <= a && q->vma[k].end >= a + HPAGE &&
					 !(q->vma[k].flags & PM_MAP_HUGETLB);
			}
			for (unsigned long g = 0; g < HPAGE / 4096; g++)
				mapped |= q->pg[(a - WIN_BASE) / 4096 + g].flags & PM_PAGE_PRESENT;
			if (ok && p == op->proc && op->kind == OP_MADVISE && op->x == PM_MADV_DONTNEED &&
			    op->addr <= a && op->addr + op->len >= a + HPAGE && whole && !mapped)
				pt_reclaimed[p] |= 1u << s;
			else if (mapped || !reached)
				pt_reclaimed[p] &= ~(1u << s);
		}
	}
}

#define FAIL(o, i, op, field, ...)                                                  \
	do {                                                                        \
		char v__[96];                                                       \
		(o)->div_at = (i);                                                  \
		snprintf((o)->sig, sizeof((o)->sig), "%s/%s",                       \
			 op_variant(op, v__, sizeof(v__)), field);                  \
		snprintf((o)->detail, sizeof((o)->detail), __VA_ARGS__);            \
	} while (0)

/* Frame numbers differ between the sides; which pages share a frame must not. */
struct cls_map {
	uint64_t key[4 * MAXPROC * WIN_PAGES];
	uint32_t val[4 * MAXPROC * WIN_PAGES];
	uint32_t next;
};

static void cls_reset(struct cls_map *c)
{
	memset(c->key, 0, sizeof(c->key));
	c->next = 1;
}

static uint32_t cls_of(struct cls_map *c, uint64_t pfn)
{
	size_t n = sizeof(c->key) / sizeof(c->key[0]), i = (size_t)(pfn * 0x9e3779b97f4a7c15ULL) % n;

	while (c->key[i] && c->key[i] != pfn + 1)
		i = (i + 1) % n;
	if (!c->key[i]) {
		c->key[i] = pfn + 1;
		c->val[i] = c->next++;
	}
	return c->val[i];
}

static bool cmp_smaps;	/* the host's observation came from smaps */

static int vma_cmp(const struct obs_vma *h, const struct obs_vma *p, char *what, size_t n)
{
	bool priv_anon = (h->flags & PM_MAP_PRIVATE) && (h->flags & PM_MAP_ANONYMOUS) &&
			 !(h->flags & PM_MAP_HUGETLB);
	unsigned vmf = PM_VMF_LOCKED | PM_VMF_GROWSDOWN | PM_VMF_HUGEPAGE | PM_VMF_NOHUGEPAGE |
		       PM_VMF_DONTCOPY | PM_VMF_WIPEONFORK | PM_VMF_ACCOUNT | PM_VMF_NORESERVE;

	if (h->start != p->start || h->end != p->end)
		return snprintf(what, n, "range");
	if (h->prot != p->prot)
		return snprintf(what, n, "prot");
	if (h->flags != p->flags)
		return snprintf(what, n, "flags");
	if (!(h->flags & PM_MAP_ANONYMOUS) && h->obj != p->obj)
		return snprintf(what, n, "object");
	if (!priv_anon && h->pgoff != p->pgoff)
		return snprintf(what, n, "pgoff");
	if (!cmp_smaps)
		return 0;
	if ((h->vmflags & vmf) != (p->vmflags & vmf))
		return snprintf(what, n, "vmflags");
	if (caps.smaps && h->rss != p->rss)
		return snprintf(what, n, "rss");
	if (caps.smaps && h->anon != p->anon)
		return snprintf(what, n, "anonymous");
	if (caps.smaps && h->ahuge != p->ahuge)
		return snprintf(what, n, "anonhugepages");
	return 0;
}

static void vma_str(const struct obs_vma *v, char *buf, size_t n)
{
	snprintf(buf, n, "%#lx-%#lx prot %#x flags %#x obj %d pgoff %#lx vmf %#x rss %lu anon %lu ahuge %lu",
		 v->start, v->end, v->prot, v->flags, v->obj, v->pgoff, v->vmflags, v->rss, v->anon,
		 v->ahuge);
}

/* @a's entries k and k+1 are adjacent, alike in what maps shows, where @b has one VMA. */
static bool kept_apart(const struct obs_proc *a, const struct obs_proc *b, int k)
{
	const struct obs_vma *x = &a->vma[k], *y = &a->vma[k + 1];

	if (k + 1 >= a->nvma || k >= b->nvma)
		return false;
	return x->end == y->start && x->prot == y->prot && x->flags == y->flags && x->obj == y->obj &&
	       x->vmflags == y->vmflags && b->vma[k].start == x->start && b->vma[k].end >= y->end;
}

/* An object's mapping (shmem, shared anonymous, hugetlb file): where fault-around acts. */
static bool vma_is_object(const struct obs_vma *v)
{
	return !(v->flags & PM_MAP_HUGETLB) && (v->obj >= 0 || (v->flags & PM_MAP_SHARED));
}

static const struct obs_vma *vma_at(const struct obs_proc *h, unsigned long addr)
{
	for (int k = 0; k < h->nvma; k++)
		if (addr >= h->vma[k].start && addr < h->vma[k].end)
			return &h->vma[k];
	return NULL;
}

static bool page_is_object(const struct obs_proc *h, unsigned long addr)
{
	const struct obs_vma *v = vma_at(h, addr);

	return v && vma_is_object(v);
}

/*
 * "[anon-read]": a difference where the host allocates pages at anonymous read faults
 * (caps.anon_read_page, probed) - in a private anonymous mapping, in what that changes: a
 * page's flags, mapcount and sharing, a VMA's Rss and Anonymous.
 */
static const char *anon_read_tag(const struct obs_vma *v)
{
	return caps.anon_read_page && v && (v->flags & PM_MAP_PRIVATE) &&
	       (v->flags & PM_MAP_ANONYMOUS) && !(v->flags & PM_MAP_HUGETLB) ? "[anon-read]" : "";
}

static void compare_obs(struct run_out *o, int i, const struct op *op, const bool *alive,
			bool after_error)
{
	static struct cls_map hc, pc;
	char field[96], a[256], b[256];
	const char *pre = after_error ? "after-error-" : "";

	if (caps.kpage) {
		cls_reset(&hc);
		cls_reset(&pc);
	}
	for (int p = 0; p < MAXPROC && o->div_at < 0; p++) {
		const struct obs_proc *h = &hobs[p], *q = &pobs[p];

		if (!alive[p])
			continue;
		cmp_smaps = h->smaps;
		if (h->nvma != q->nvma) {
			int k;

			for (k = 0; k < h->nvma && k < q->nvma; k++)
				if (vma_cmp(&h->vma[k], &q->vma[k], field, sizeof(field)))
					break;
			vma_str(&h->vma[k < h->nvma ? k : 0], a, sizeof(a));
			vma_str(&q->vma[k < q->nvma ? k : 0], b, sizeof(b));
			snprintf(field, sizeof(field), "%s%smaps-count%s", pre, p ? "child-" : "",
				 kept_apart(h, q, k) ? "(linux-kept-apart)" : kept_apart(q, h, k) ? "(pinmm-kept-apart)" : "");
			FAIL(o, i, op, field, "p%d: %d VMAs in the window on Linux, %d in pinmm; "
			     "first difference at entry %d: Linux %s | pinmm %s", p, h->nvma, q->nvma, k,
			     k < h->nvma ? a : "(none)", k < q->nvma ? b : "(none)");
			snprintf(o->ccheck, sizeof(o->ccheck),
				 "\tis_int(maps_in_window(mm[%d]), %d, \"VMAs in the window\");", p, h->nvma);
			return;
		}
		for (int k = 0; k < h->nvma; k++) {
			char w[32];

			if (!vma_cmp(&h->vma[k], &q->vma[k], w, sizeof(w)))
				continue;
			vma_str(&h->vma[k], a, sizeof(a));
			vma_str(&q->vma[k], b, sizeof(b));
			snprintf(field, sizeof(field), "%s%smaps-%s%s%s%s", pre, p ? "child-" : "", w,
				 vma_is_object(&h->vma[k]) ? "[object]" : "",
				 !strcmp(w, "rss") || !strcmp(w, "anonymous") ? anon_read_tag(&h->vma[k]) : "",
				 pt_reclaimed[p] & span_bits(h->vma[k].start, h->vma[k].end) ?
					 "(pt-reclaim)" : "");
			FAIL(o, i, op, field, "p%d VMA %d: Linux %s | pinmm %s", p, k, a, b);
			snprintf(o->ccheck, sizeof(o->ccheck),
				 "\t/* Linux: %s */\n\tis_int(vma_field(mm[%d], %#lxUL, \"%s\"), %ld, \"%s\");",
				 a, p, h->vma[k].start, w,
				 !strcmp(w, "rss") ? (long)h->vma[k].rss : !strcmp(w, "anonymous") ? (long)h->vma[k].anon :
				 !strcmp(w, "anonhugepages") ? (long)h->vma[k].ahuge : !strcmp(w, "prot") ? (long)h->vma[k].prot :
				 !strcmp(w, "vmflags") ? (long)h->vma[k].vmflags : !strcmp(w, "pgoff") ? (long)h->vma[k].pgoff :
				 !strcmp(w, "flags") ? (long)h->vma[k].flags : (long)h->vma[k].end, w);
			return;
		}
		for (unsigned long g = 0; g < WIN_PAGES; g++) {
			const struct obs_page *x = &h->pg[g], *y = &q->pg[g];
			unsigned long addr = WIN_BASE + g * 4096;
			const char *w = NULL;

			if ((x->flags & cmp_flags) != (y->flags & cmp_flags))
				w = "page-flags";
			else if (caps.kpage && (x->flags & PM_PAGE_PRESENT) && x->mapcount != y->mapcount)
				w = "mapcount";
			else if ((x->flags & PM_PAGE_PRESENT) && x->hash != y->hash)
				w = "content";
			else if (caps.kpage && (x->flags & PM_PAGE_PRESENT) && !(x->flags & PM_PAGE_ZERO) &&
				 cls_of(&hc, x->pfn) != cls_of(&pc, y->pfn))
				w = "sharing";
			if (!w)
				continue;
			const char *ptr = pt_reclaimed[p] & span_bits(addr, addr + 1) ? "(pt-reclaim)" : "";

			const char *ar = strcmp(w, "content") ? anon_read_tag(vma_at(h, addr)) : "";

			if (!strcmp(w, "page-flags"))
				snprintf(field, sizeof(field), "%s%s%s(L%#x,P%#x)%s%s%s", pre, p ? "child-" : "", w,
					 x->flags & cmp_flags, y->flags & cmp_flags,
					 page_is_object(h, addr) ? "[object]" : "", ar, ptr);
			else
				snprintf(field, sizeof(field), "%s%s%s%s%s%s", pre, p ? "child-" : "", w,
					 page_is_object(h, addr) ? "[object]" : "", ar, ptr);
			FAIL(o, i, op, field, "p%d page %#lx: Linux flags %#x mapcount %u hash %#llx class %u | "
			     "pinmm flags %#x mapcount %u hash %#llx class %u", p, addr, x->flags & cmp_flags,
			     x->mapcount, (unsigned long long)x->hash,
			     caps.kpage && x->pfn ? cls_of(&hc, x->pfn) : 0, y->flags & cmp_flags, y->mapcount,
			     (unsigned long long)y->hash, caps.kpage && y->pfn ? cls_of(&pc, y->pfn) : 0);
			if (!strcmp(w, "page-flags") || !strcmp(w, "mapcount"))
				snprintf(o->ccheck, sizeof(o->ccheck),
					 "\tis_int(page_%s(mm[%d], %#lxUL), %#x, \"page state (pm_pagemap)\");",
					 !strcmp(w, "mapcount") ? "mapcount" : "flags", p, addr,
					 !strcmp(w, "mapcount") ? x->mapcount : x->flags & cmp_flags);
			else
				snprintf(o->ccheck, sizeof(o->ccheck),
					 "\t/* the page's %s differs from Linux's (see the header) */", w);
			return;
		}
	}
}

static bool valid(const struct op *op, const bool *alive, const bool *used)
{
	if (!alive[op->proc])
		return false;
	if (op->kind == OP_FORK)
		return op->x < MAXPROC && !used[op->x];
	if (op->kind == OP_EXIT)
		return op->proc != 0;
	return true;
}

static bool mmap_like(const struct op *op)
{
	return op->kind == OP_MMAP || op->kind == OP_MREMAP;
}

static unsigned long op_map_len(const struct op *op)
{
	unsigned long len = op->kind == OP_MREMAP ? op->b : op->len;

	len = (len + 4095) & ~4095UL;
	if (op->kind == OP_MMAP && (op->o == 2 || (op->f & PM_MAP_HUGETLB)))
		len = (len + HPAGE - 1) & ~(HPAGE - 1);
	return len;
}

static bool check_each;	/* replays (shrinking) check the machine after every sequence */

static int run_seq(const struct op *ops, int n, unsigned design, struct run_out *o)
{
	bool alive[MAXPROC] = { true }, used[MAXPROC] = { true };
	struct pstate *ps;
	long fb0, lastr = 0, lastf = -1;
	bool backed = false, cow_unmap = false, leaves_part;
	int rc;

	o->sig[0] = o->detail[0] = o->ccheck[0] = o->why[0] = 0;
	o->compared = 0;
	o->aborted = false;
	o->div_at = -1;
	memset(o->done, 0, sizeof(o->done));
	memset(pt_reclaimed, 0, sizeof(pt_reclaimed));
	rc = host_seq_start(&caps);
	if (rc) {
		host_seq_end();
		o->aborted = true;
		if (rc == -EBUSY)
			snprintf(o->why, sizeof(o->why), "the host's hugetlb pool was not back to "
				 "a fresh pool's counts (an earlier sequence's pins not yet released)");
		else
			snprintf(o->why, sizeof(o->why), "host server: %s", strerror(-rc));
		return -1;
	}
	ps = pm_seq_start(design, &caps);
	if (!ps) {
		host_seq_end();
		o->aborted = true;
		snprintf(o->why, sizeof(o->why), "pm_machine_create: %s", strerror(errno));
		return -1;
	}
	fb0 = host_thp_fallbacks();
	for (int i = 0; i < n && o->div_at < 0; i++) {
		const struct op *op = &ops[i];
		const struct obs_vma *v;
		struct res hr, pr;
		long hf = -1, hrs = 0, pf, prs;
		bool err = false;

		if (!valid(op, alive, used))
			continue;
		o->done[i] = true;
		/* Before this operation, with reservations leaked (host_pool_leak()), whose pages
		 * are really free: HugePages_Rsvd read below zero, so the host can allocate free -
		 * reserved pages without a reservation, more than the free ones a clean pool has;
		 * or HugePages_Free read 0, so a fault that consumes its reservation still finds a
		 * page on the host, where a clean pool has none. What the host allocates beyond
		 * a clean pool's pages, a clean pool cannot. */
		backed = caps.hugetlb && host_pool_leak() > 0 && (lastr < 0 || lastf == 0);
		/* A write to a private hugetlb mapping while no page is free beyond the
		 * reservations: an owner's COW fails there, and Linux's unmap_ref_private()
		 * may zap the owner's own page (decision 9). */
		cow_unmap = caps.hugetlb && lastf >= 0 && lastf <= lastr &&
			    (op->kind == OP_WRITE || op->kind == OP_FWRITE || op->kind == OP_PIN ||
			     op->kind == OP_PINWRITE) &&
			    (v = vma_at(&hobs[op->proc], op->addr)) && (v->flags & PM_MAP_HUGETLB) &&
			    (v->flags & PM_MAP_PRIVATE);
		leaves_part = caps.hugetlb && pm_hugetlb_move_leaves_part(ps, op);
		hr = host_exec(op);
		pr = pm_do(ps, op);
		o->hres[i] = hr;
		o->pres[i] = pr;
		if (hr.ret == -EPIPE) {
			o->aborted = true;
			snprintf(o->why, sizeof(o->why), "host server p%d died", op->proc);
			break;
		}
		if (mmap_like(op) && design == PM_MACHINE_RANGE_MM && hr.ret >= 0 && pr.ret >= 0 &&
		    hr.ret != pr.ret && !(op->f & PM_MAP_FIXED) && !(op->f & PM_MAP_FIXED_NOREPLACE) &&
		    !(op->kind == OP_MREMAP && (op->f & PM_MREMAP_FIXED))) {
			/* The range design places freely: unmap both, go on. */
			struct op u = { .kind = OP_MUNMAP, .proc = op->proc, .o = -1,
					.len = op_map_len(op) };

			if (hr.ret != RET_OUTSIDE) {
				u.addr = (unsigned long)hr.ret;
				host_exec(&u);
			}
			if (pr.ret != RET_OUTSIDE) {
				u.addr = (unsigned long)pr.ret;
				pm_do(ps, &u);
			}
			hr.ret = pr.ret;
		}
		if (op->kind == OP_FORK && hr.ret == 0 && pr.ret == 0) {
			alive[op->x] = used[op->x] = true;
		} else if (op->kind == OP_EXIT) {
			alive[op->proc] = false;
		}
		if (hr.ret != pr.ret) {
			/* A hint Linux refuses for the stack guard gap: pinmm's placement is its own
			 * there (docs/linux-differences.md) - mmap's hint, or mremap's new address
			 * with DONTUNMAP and without FIXED, a hint too (vrm_implies_new_addr). */
			bool hint = op->kind == OP_MMAP ?
					    !(op->f & (PM_MAP_FIXED | PM_MAP_FIXED_NOREPLACE)) :
					    op->kind == OP_MREMAP && (op->f & PM_MREMAP_DONTUNMAP) &&
						    !(op->f & PM_MREMAP_FIXED);
			bool gap = hint && pr.ret > RET_OUTSIDE &&
				   pm_in_stack_guard_gap(ps, op->proc, (unsigned long)pr.ret,
							 op_map_len(op));

			FAIL(o, i, op, gap ? "ret(stack-guard-gap)" : "ret",
			     "Linux %ld (%s), pinmm %ld (%s)", hr.ret,
			     hr.ret < 0 ? strerror((int)-hr.ret) : "ok", pr.ret,
			     pr.ret < 0 ? strerror((int)-pr.ret) : "ok");
			break;
		}
		err = hr.ret < 0;
		if (hr.aux != pr.aux && op->kind == OP_MINCORE) {
			char at[160] = "";
			int len = 0, nr = 0;

			/* Which pages: the vector says where, not why (see the page flags). */
			for (unsigned long k = 0; k < (op->len + 4095) / 4096; k++) {
				uint64_t bit = 1ULL << (k % 64);

				if (!((hr.vec[k / 64] ^ pr.vec[k / 64]) & bit))
					continue;
				if (nr++ < 6 && len < (int)sizeof(at) - 40)
					len += snprintf(at + len, sizeof(at) - len, " %#lx:L%dP%d",
							op->addr + k * 4096,
							!!(hr.vec[k / 64] & bit), !!(pr.vec[k / 64] & bit));
			}
			FAIL(o, i, op, "mincore-vec", "the vectors differ at %d pages:%s%s", nr, at,
			     nr > 6 ? " ..." : "");
			break;
		}
		if (host_thp_fallbacks() != fb0) {
			o->aborted = true;
			snprintf(o->why, sizeof(o->why), "a host THP fault fell back (thp_fault_fallback rose)");
			break;
		}
		/* smaps walks every VMA of the server: every 4th operation, and after those that
		 * change VmFlags; maps (layout, prot, object, offset) after every one */
		bool smaps = caps.smaps && ((i & 3) == 3 || op->kind == OP_MADVISE || op->kind == OP_FORK ||
					    op->kind == OP_MMAP || i == n - 1);

		int ha[MAXPROC] = { 0 }, pa[MAXPROC] = { 0 };

		for (int p = 0; p < MAXPROC; p++)
			if (alive[p])
				ha[p] = host_observe_send(p, (i % 64) == 63, smaps);
		for (int p = 0; p < MAXPROC; p++)
			if (alive[p])
				pa[p] = pm_observe(ps, p, &pobs[p], (i % 64) == 63);
		for (int p = 0; p < MAXPROC; p++)
			if (alive[p] && !ha[p])
				ha[p] = host_observe_recv(p, &hobs[p]);
		for (int p = 0; p < MAXPROC && o->div_at < 0; p++)
			if (alive[p] && (ha[p] || pa[p]))
				FAIL(o, i, op, "observe", "p%d: host %d, pinmm %d", p, ha[p], pa[p]);
		if (o->div_at >= 0)
			break;
		compare_obs(o, i, op, alive, err);
		if (o->div_at >= 0)
			break;
		/* A hole in the range (-ENOMEM) ends a DONTNEED only after every VMA in it was
		 * zapped (madvise_walk_vmas), as a success does. */
		pt_reclaim_track(op, !err || hr.ret == -ENOMEM, alive);
		if (host_pool(&hf, &hrs) == 0 && pm_pool(ps, &pf, &prs) == 0 && caps.hugetlb &&
		    (hf != pf || hrs != prs)) {
			char field[40];

			/* Both counts are read as signed (host_pool): below zero is -1, not 2^64 - 1,
			 * and pinmm follows Linux there (mem/hugetlb_pool.c); named for the reader. */
			snprintf(field, sizeof(field), "%spool%s", err ? "after-error-" : "",
				 hrs < 0 || prs < 0 ? "-below-zero" : "");
			FAIL(o, i, op, field, "HugePages_Free/Rsvd: Linux %ld/%ld, pinmm %ld/%ld", hf, hrs, pf, prs);
			snprintf(o->ccheck, sizeof(o->ccheck),
				 "\tis_int(pool_free(), %ld, \"HugePages_Free\");\n"
				 "\tis_int(pool_reserved(), %ld, \"HugePages_Rsvd\");", hf, hrs);
			break;
		}
		lastr = hrs;
		lastf = hf;
		o->compared++;
		if (leaves_part && hr.ret >= 0) {
			/* Compared up to here; the host's pool counts are not Linux's design after. */
			o->aborted = true;
			snprintf(o->why, sizeof(o->why), "mremap moved part of a private hugetlb "
				 "mapping: Linux leaks the reservations of the part left behind "
				 "(docs/linux-differences.md, item 6)");
			break;
		}
	}
	host_seq_end();
	if (pm_seq_end(ps, check_each, o->why, sizeof(o->why)) && o->div_at < 0) {
		o->div_at = n - 1;
		snprintf(o->sig, sizeof(o->sig), "end/leak");
		snprintf(o->detail, sizeof(o->detail), "%s", o->why);
	} else if (o->div_at >= 0 && cow_unmap && !o->aborted) {
		size_t l = strlen(o->sig);

		snprintf(o->sig + l, sizeof(o->sig) - l, "(hugetlb-cow-unmap)");
	} else if (o->div_at >= 0 && backed && !o->aborted) {
		/* No verdict: the host allocated from reservations it leaked before the run. A
		 * failure where the host succeeded shows in the result, or only in the state: the
		 * owner of a private hugetlb mapping whose COW finds the pool empty unmaps the page
		 * from its fork children and reuses it (unmap_ref_private). */
		o->aborted = true;
		snprintf(o->why, sizeof(o->why), "%s after HugePages_Rsvd read below zero or "
			 "HugePages_Free 0, the host holding leaked reservations", o->sig);
	}
	return o->div_at;
}

/* ---- shrinking ---- */

static struct run_out scratch;

static bool reproduces(const struct op *ops, int n, unsigned design, const char *sig)
{
	run_seq(ops, n, design, &scratch);
	return !scratch.aborted && scratch.div_at >= 0 && !strcmp(scratch.sig, sig);
}

/* ddmin over ops[1..n) (ops[0], the reservation, stays). Returns the new length. */
static int shrink(struct op *ops, int n, unsigned design, const char *sig, double budget)
{
	static struct op cand[SEQ_LEN];
	double t0 = now();
	int k = 2;

	while (n - 1 >= 2 && now() - t0 < budget) {
		int len = n - 1, chunk = (len + k - 1) / k;
		bool reduced = false;

		for (int c = 0; c < k && !reduced && now() - t0 < budget; c++) {
			int lo = c * chunk, hi = lo + chunk < len ? lo + chunk : len, m = 1;

			if (lo >= len)
				break;
			cand[0] = ops[0];
			for (int j = 0; j < len; j++)
				if (j < lo || j >= hi)
					cand[m++] = ops[1 + j];
			if (reproduces(cand, m, design, sig)) {
				memcpy(ops, cand, (size_t)m * sizeof(*ops));
				n = m;
				k = k > 2 ? k - 1 : 2;
				reduced = true;
			}
		}
		if (!reduced) {
			if (k >= len)
				break;
			k = 2 * k < len ? 2 * k : len;
		}
	}
	return n;
}

/* ---- the C test ---- */

static const char c_prelude[] =
	"// SPDX-License-Identifier: MIT\n"
	"/* test_oracle_%s.c - found by make oracle (%s), design %s: Linux 6.18's results are the\n"
	" * expectations. Differs here: %s\n * %s */\n"
	"#include <errno.h>\n#include <stdlib.h>\n#include <string.h>\n\n#include <pinmm/pinmm.h>\n\n"
	"#include \"lib/pmtest.h\"\n#include \"lib/tap.h\"\n\n"
	"#define WIN %#lxUL\n#define WIN_END (WIN + %#lxUL)\n\n"
	"static struct pm_machine *m;\nstatic struct pm_mm *mm[%d];\nstatic struct pm_shmem *obj[3];\n"
	"static struct pm_page **pins[%d][%d];\nstatic long npins[%d][%d];\nstatic unsigned char vec[4096];\n\n"
	"/* mmap; an address outside the window is unmapped and reads 1 (the oracle's rule) */\n"
	"static __attribute__((unused)) long mmap_win(struct pm_mm *x, unsigned long a, size_t len, int prot, int flags,\n"
	"\t\t     struct pm_shmem *f, size_t off)\n{\n"
	"\tlong r = pm_mmap(x, a, len, prot, flags, f, off);\n"
	"\tunsigned long l = (len + 4095) & ~4095UL;\n\n"
	"\tif ((flags & PM_MAP_HUGETLB) || (f && f == obj[2]))\n\t\tl = (l + PM_PMD_SIZE - 1) & ~(PM_PMD_SIZE - 1);\n"
	"\tif (r >= 0 && ((unsigned long)r < WIN || (unsigned long)r + l > WIN_END)) {\n"
	"\t\tpm_munmap(x, (unsigned long)r, l);\n\t\treturn 1;\n\t}\n\treturn r;\n}\n\n"
	"%s"
	"static __attribute__((unused)) int peek(struct pm_mm *x, unsigned long a)\n{\n\tunsigned char c;\n"
	"\tlong r = pm_access(x, a, &c, 1, 0);\n\n\treturn r == 1 ? c : (int)r;\n}\n\n"
	"static __attribute__((unused)) int poke(struct pm_mm *x, unsigned long a, int v)\n{\n\tunsigned char c = (unsigned char)v;\n"
	"\tlong r = pm_access(x, a, &c, 1, 1);\n\n\treturn r == 1 ? 0 : (int)r;\n}\n\n"
	"/* FOLL_FORCE, as /proc/PID/mem: -EIO when nothing could be copied */\n"
	"static __attribute__((unused)) int force(struct pm_mm *x, unsigned long a, int write, int v)\n{\n\tstruct pm_page *pg;\n"
	"\tunsigned char *k;\n\n"
	"\tif (pm_get_user_pages(x, a & ~4095UL, 1, PM_FOLL_FORCE | (write ? PM_FOLL_WRITE : 0), &pg) != 1)\n"
	"\t\treturn -EIO;\n\tk = (unsigned char *)pm_page_address(pg) + (a & 4095);\n"
	"\tif (write)\n\t\t*k = (unsigned char)v;\n\tv = write ? 0 : *k;\n\tpm_put_page(pg);\n\treturn v;\n}\n\n"
	"/* a long-term pin as io_uring registers a fixed buffer: FOLL_WRITE, all or nothing */\n"
	"static __attribute__((unused)) long pin(int p, int s, unsigned long a, unsigned long n)\n{\n"
	"\tstruct pm_page **pages = calloc(n, sizeof(*pages));\n"
	"\tlong r = pm_pin_user_pages(mm[p], a, n, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pages);\n\n"
	"\tif (r == (long)n) {\n\t\tpins[p][s] = pages;\n\t\tnpins[p][s] = r;\n\t\treturn r;\n\t}\n"
	"\tif (r > 0)\n\t\tpm_unpin_user_pages(pages, (unsigned long)r);\n\tfree(pages);\n"
	"\treturn r > 0 ? -EFAULT : r;\n}\n\n"
	"static __attribute__((unused)) void unpin(int p, int s)\n{\n\tif (pins[p][s])\n"
	"\t\tpm_unpin_user_pages(pins[p][s], (unsigned long)npins[p][s]);\n\tfree(pins[p][s]);\n"
	"\tpins[p][s] = NULL;\n}\n\n"
	"static __attribute__((unused)) long pin_write(int p, int s, unsigned long pg, unsigned long v)\n{\n"
	"\tif (!pins[p][s])\n\t\treturn -ENOENT;\n"
	"\tmemset(pm_page_address(pins[p][s][pg %% (unsigned long)npins[p][s]]), (int)v, %d);\n"
	"\treturn %d;\n}\n\n"
	"static __attribute__((unused)) void exit_mm(int p)\n{\n\tfor (int s = 0; s < %d; s++)\n\t\tunpin(p, s);\n"
	"\tpm_mm_destroy(mm[p]);\n\tmm[p] = NULL;\n}\n\n"
	"static __attribute__((unused)) int maps_in_window(struct pm_mm *x)\n{\n\tstruct pm_map_info mi[64];\n"
	"\tlong n = pm_mm_maps(x, WIN, mi, 64), k = 0;\n\n"
	"\tfor (long i = 0; i < n; i++)\n\t\tk += mi[i].start < WIN_END;\n\treturn (int)k;\n}\n\n"
	"static __attribute__((unused)) long vma_field(struct pm_mm *x, unsigned long a, const char *w)\n{\n"
	"\tstruct pm_map_info v;\n\n\tif (pm_mm_maps(x, a, &v, 1) != 1 || v.start != a)\n\t\treturn -1;\n"
	"\treturn !strcmp(w, \"rss\") ? (long)v.rss_pages : !strcmp(w, \"anonymous\") ? (long)v.anon_pages :\n"
	"\t       !strcmp(w, \"anonhugepages\") ? (long)v.anon_huge_pages : !strcmp(w, \"prot\") ? (long)v.prot :\n"
	"\t       !strcmp(w, \"vmflags\") ? (long)v.vmflags : !strcmp(w, \"pgoff\") ? (long)v.pgoff :\n"
	"\t       !strcmp(w, \"flags\") ? (long)(v.flags & 0x40023) : (long)v.end;\n}\n\n"
	"static __attribute__((unused)) unsigned page_flags(struct pm_mm *x, unsigned long a)\n{\n\tstruct pm_page_info pi;\n\n"
	"\treturn pm_pagemap(x, a, 1, &pi) == 1 ? pi.flags & %#x : ~0u;\n}\n\n"
	"static __attribute__((unused)) unsigned page_mapcount(struct pm_mm *x, unsigned long a)\n{\n\tstruct pm_page_info pi;\n\n"
	"\treturn pm_pagemap(x, a, 1, &pi) == 1 ? pi.mapcount : ~0u;\n}\n\n"
	"static __attribute__((unused)) long pool_free(void)\n{\n\tsize_t t, f;\n\n\treturn pm_hugetlb_pool(m, &t, &f) ? -1 : (long)f;\n}\n\n"
	"static __attribute__((unused)) long pool_reserved(void)\n{\n\tsize_t r;\n\n\treturn pm_hugetlb_reserved(m, &r) ? -1 : (long)r;\n}\n\n"
	"int main(void)\n{\n"
	"\tstruct pm_config cfg = { .mem_bytes = 256UL << 20, .flags = %s, .nr_hugepages = %d };\n\n"
	"\tplan_no_plan();\n\tm = pm_machine_create(&cfg);\n\tASSERT_TRUE(m);\n\tmm[0] = pm_mm_create(m);\n"
	"\tobj[0] = pm_shmem_create(m, 1UL << 20, 0);\n\tobj[1] = pm_shmem_create(m, 4UL << 20, 0);\n"
	"\tobj[2] = %s;\n\t(void)vec;\n";

/* Only where libpinmm has pm_mremap: the row is off, and no test calls it, elsewhere. */
static const char c_mremap[] =
	"/* mremap; a new address outside the window is unmapped and reads 1 */\n"
	"static __attribute__((unused)) long mremap_win(struct pm_mm *x, unsigned long a, unsigned long ol,\n"
	"\t\t\t\t\t       unsigned long nl, unsigned f, unsigned long na)\n{\n"
	"\tlong r = pm_mremap(x, a, ol, nl, f, na);\n\n"
	"\tif (r >= 0 && ((unsigned long)r < WIN || (unsigned long)r + nl > WIN_END)) {\n"
	"\t\tpm_munmap(x, (unsigned long)r, nl);\n\t\treturn 1;\n\t}\n\treturn r;\n}\n\n";

static void print_test(FILE *f, const struct op *ops, int n, const struct run_out *o, unsigned design,
		       const char *name, const char *origin)
{
	bool range = design == PM_MACHINE_RANGE_MM;
	char line[512];

	fprintf(f, c_prelude, name, origin, range ? "range" : "linux", o->sig, o->detail, WIN_BASE,
		WIN_SIZE, MAXPROC, MAXPROC, NSLOT, MAXPROC, NSLOT, caps.pm_mremap ? c_mremap : "", HEAD, HEAD, NSLOT, cmp_flags,
		range ? "PM_MACHINE_RANGE_MM" : "PM_MACHINE_LINUX_MM", caps.hugetlb ? POOL_PAGES : 0,
		caps.hugetlb ? "pm_shmem_create_hugetlb(m, 4UL << 20)" : "NULL");
	for (int i = 0; i < n; i++) {
		if (!o->done[i])
			continue;
		op_print_c(&ops[i], i, &o->hres[i], line, sizeof(line));
		fprintf(f, "%s\n", line);
		if (o->hres[i].ret != o->pres[i].ret)
			fprintf(f, "\t/* pinmm: %ld */\n", o->pres[i].ret);
		if (i == o->div_at)
			break;
	}
	if (o->ccheck[0])
		fprintf(f, "%s\n", o->ccheck);
	fprintf(f, "\tfor (int p = %d; p >= 0; p--)\n\t\tif (mm[p])\n\t\t\texit_mm(p);\n"
		   "\tfor (int i = 0; i < 3; i++)\n\t\tif (obj[i])\n\t\t\tpm_shmem_put(obj[i]);\n"
		   "\tpm_rcu_barrier();\n\tpm_machine_destroy(m);\n\treturn done_testing();\n}\n",
		MAXPROC - 1);
}

/* ---- the driver ---- */

struct found {
	char sig[160];
	long count;
};

/*
 * What one driver found, in memory the drivers share with the parent, which sums and
 * prints them once all have ended. Each driver writes only its own.
 */
struct tally {
	long seqs, compared, aborted, unknown, hits[64];
	double shrink_time;
	int nfound;
	struct found found[MAX_FOUND];
	char abort_why[256];
};

/*
 * Driver @idx of @ndrv runs the sequences whose number is idx modulo ndrv (the numbers, and
 * with them the sequences, are the seed's whatever the count). Only driver 0 runs hugetlb:
 * the host's pool is one for all processes and is compared after every operation.
 */
static long only_seq = -1;	/* ORACLE_SEQ */

/*
 * Does the pool divergence at operation @at come back when the sequence runs again? The host
 * kernel can leak a hugetlb reservation, for no process, in the middle of a sequence
 * (docs/linux-differences.md, 5.): its counts then move for none of the operations, and a
 * replay, from a pool re-based on that leak, does not diverge there.
 */
static bool pool_diverges_again(const struct op *ops, int at, unsigned design)
{
	static struct run_out again;

	return run_seq(ops, at + 1, design, &again) == at && strstr(again.sig, "/pool");
}

/*
 * Does the divergence at operation @at, signed @sig, come back when the sequence runs again?
 * Asked where the host may have leaked a hugetlb reservation in the middle of the sequence:
 * every later reservation then finds one page fewer than pinmm's pool (an mmap's -ENOMEM where
 * pinmm's succeeds). The replay starts from a pool re-based on the leak (host_pool_settle()),
 * and *@leaked says whether that re-basing found a new one.
 */
static bool diverges_again(const struct op *ops, int at, unsigned design, const char *sig,
			   bool *leaked)
{
	static struct run_out again;
	long leak = host_pool_leak();
	bool same = run_seq(ops, at + 1, design, &again) == at && !strcmp(again.sig, sig);

	*leaked = host_pool_leak() > leak;
	return same;
}

static int driver(int idx, int ndrv, uint64_t seed, double seconds, int mm_mode, const char *outdir,
		  struct tally *t)
{
	static struct op ops[SEQ_LEN];
	static struct run_out o;
	struct found *found = t->found;
	long local = only_seq >= 0 ? only_seq / ndrv : 0;
	double t0 = now(), tend = t0 + seconds;

	if (idx > 0)
		caps.hugetlb = false;
	mkdir("build", 0755);
	mkdir(outdir, 0755);
	while (only_seq >= 0 ? local == only_seq / ndrv : now() < tend) {
		long seqno = local * ndrv + idx;
		uint64_t r = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(seqno + 1));
		unsigned design = mm_mode == 1 || (mm_mode == 2 && (local & 1)) ? PM_MACHINE_RANGE_MM
									       : PM_MACHINE_LINUX_MM;
		struct gen_ctx g = { .rng = &r, .caps = &caps, .nproc = 1, .alive = { true } };
		struct known *k;
		int at;

		rnd(&r);
		ops[0] = (struct op){ .kind = OP_MMAP, .addr = WIN_BASE, .len = WIN_SIZE, .x = PM_PROT_NONE,
				      .f = PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED | PM_MAP_NORESERVE,
				      .o = -1 };
		for (int i = 1; i < SEQ_LEN; i++)
			op_generate(&g, &ops[i]);
		at = run_seq(ops, SEQ_LEN, design, &o);
		local++;
		t->seqs++;
		t->compared += o.compared;
		if (o.aborted) {
			t->aborted++;
			snprintf(t->abort_why, sizeof(t->abort_why), "%s", o.why);
			continue;
		}
		if (at < 0)
			continue;
		k = allowed(o.sig);
		if (k) {
			t->hits[k - known]++;
			continue;
		}
		if (strstr(o.sig, "/pool") && !pool_diverges_again(ops, at, design)) {
			/* The host's counts moved for none of the operations: it leaked. */
			t->aborted++;
			snprintf(t->abort_why, sizeof(t->abort_why), "a pool divergence that did not "
				 "come back on replay (the host leaked a hugetlb reservation)");
			continue;
		}
		if (caps.hugetlb && strstr(o.sig, "hugetlb")) {
			bool leaked;

			if (!diverges_again(ops, at, design, o.sig, &leaked) && leaked) {
				t->aborted++;
				snprintf(t->abort_why, sizeof(t->abort_why), "%s, which did not come "
					 "back on replay: the host leaked a hugetlb reservation during "
					 "the sequence", o.sig);
				continue;
			}
		}
		{
			int i, n = at + 1;
			char name[64], origin[128], path[512], line[512];
			double ts = now();
			FILE *f;

			for (i = 0; i < t->nfound && strcmp(found[i].sig, o.sig); i++)
				;
			if (i < t->nfound) {
				found[i].count++;
				continue;
			}
			t->unknown++;
			if (t->nfound < MAX_FOUND) {
				snprintf(found[t->nfound].sig, sizeof(found[t->nfound].sig), "%s", o.sig);
				found[t->nfound++].count = 1;
			}
			printf("\noracle: DIVERGENCE %s at op %d of sequence %ld (seed %#llx, design %s)\n"
			       "  %s\n", o.sig, at, seqno, (unsigned long long)seed,
			       design == PM_MACHINE_RANGE_MM ? "range" : "linux", o.detail);
			/* shrinking has its own budget, within the run's time where it can */
			check_each = true;
			n = shrink(ops, n, design, o.sig, tend - now() > 20 ? 20 : tend - now() > 5 ? tend - now() : 5);
			t->shrink_time += now() - ts;
			run_seq(ops, n, design, &o);
			check_each = false;
			printf("  shrunk to %d operations:\n", n);
			for (int j = 0; j < n; j++) {
				if (!o.done[j])
					continue;
				op_print(&ops[j], line, sizeof(line));
				printf("    %2d %s -> Linux %ld, pinmm %ld\n", j, line, o.hres[j].ret, o.pres[j].ret);
			}
			printf("  then: %s\n", o.detail);
			snprintf(name, sizeof(name), "%d%02d", idx, t->nfound);
			snprintf(origin, sizeof(origin), "seed %#llx, sequence %ld", (unsigned long long)seed,
				 seqno);
			snprintf(path, sizeof(path), "%s/test_oracle_%s.c", outdir, name);
			f = fopen(path, "w");
			if (f) {
				print_test(f, ops, n, &o, design, name, origin);
				fclose(f);
				printf("  C test: %s\n", path);
			}
			print_test(stdout, ops, n, &o, design, name, origin);
		}
	}
	{
		char why[256];

		if (pm_run_end(why, sizeof(why))) {
			printf("oracle: DIVERGENCE end/leak: %s\n", why);
			t->unknown++;
		}
	}
	return 0;
}

/* The run's figures, summed over the drivers; the exit status. */
static int summary(const struct tally *t, int ndrv, double t0, const char *outdir)
{
	const char *st = getenv("ORACLE_STRICT");
	const bool strict = !st || strcmp(st, "0");
	long seqs = 0, compared = 0, aborted = 0, unknown = 0;
	double shrink = 0, el, cpu;
	const char *abort_why = "-";
	struct rusage rc;

	for (int d = 0; d < ndrv; d++) {
		seqs += t[d].seqs;
		compared += t[d].compared;
		aborted += t[d].aborted;
		unknown += t[d].unknown;
		if (t[d].shrink_time > shrink)
			shrink = t[d].shrink_time;
		if (t[d].aborted)
			abort_why = t[d].abort_why;
	}
	el = now() - t0 - shrink;
	getrusage(RUSAGE_CHILDREN, &rc);
	cpu = (double)(rc.ru_utime.tv_sec + rc.ru_stime.tv_sec) +
	      (double)(rc.ru_utime.tv_usec + rc.ru_stime.tv_usec) / 1e6;
	printf("\noracle: %ld sequences, %ld operations compared in %.1f s by %d driver%s (%.0f ops/s, "
	       "shrinking excluded; %.0f ops per CPU second, both sides), %ld sequences cut short "
	       "(last: %s)\n", seqs, compared, now() - t0, ndrv, ndrv > 1 ? "s" : "",
	       el > 0 ? (double)compared / el : 0.0, cpu > 0 ? (double)compared / cpu : 0.0, aborted,
	       abort_why);
	for (int i = 0; i < nknown; i++) {
		long hits = 0;

		for (int d = 0; d < ndrv; d++)
			hits += t[d].hits[i];
		if (hits)
			printf("oracle: %s %-40s %ld sequences: %s\n",
			       strcmp(known[i].status, "open") ? "allowed" : "open (reported, not fixed)",
			       known[i].pat, hits, known[i].why);
	}
	for (int d = 0; d < ndrv; d++)
		for (int i = 0; i < t[d].nfound; i++)
			printf("oracle: NOT ALLOWED %s: %ld sequences\n", t[d].found[i].sig,
			       t[d].found[i].count);
	if (unknown && !strict)
		printf("oracle: divergences not on the allow-list, reported above and in %s; "
		       "not failing (ORACLE_STRICT=0)\n", outdir);
	else
		printf("oracle: %s\n", unknown ? "FAILED: divergences not on the allow-list" : "ok");
	return unknown && strict ? 1 : 0;
}

#define MAX_DRIVERS 8
static pid_t driver_pid[MAX_DRIVERS];

static void forward(int sig)
{
	for (int d = 0; d < MAX_DRIVERS; d++)
		if (driver_pid[d] > 0)
			kill(driver_pid[d], sig);
}

static void print_skips(const char *host_why)
{
	static const int adv[] = { PM_MADV_FREE, PM_MADV_REMOVE, PM_MADV_WIPEONFORK, PM_MADV_KEEPONFORK,
				   PM_MADV_POPULATE_READ, PM_MADV_POPULATE_WRITE };
	static const char *advn[] = { "MADV_FREE", "MADV_REMOVE", "MADV_WIPEONFORK", "MADV_KEEPONFORK",
				      "MADV_POPULATE_READ", "MADV_POPULATE_WRITE" };

	if (host_why[0])
		printf("oracle: host skips: %s\n", host_why);
	for (size_t i = 0; i < sizeof(adv) / sizeof(adv[0]); i++)
		if (!caps.pm_madv[adv[i]])
			printf("oracle: skipped: madvise %s (pinmm returns -EINVAL on this branch)\n", advn[i]);
	if (!caps.pm_mremap)
		printf("oracle: skipped: mremap (pm_mremap is not in libpinmm on this branch)\n");
	if (!caps.pm_locked)
		printf("oracle: skipped: mmap MAP_LOCKED (pinmm returns -EINVAL on this branch)\n");
	if (!caps.pm_growsdown)
		printf("oracle: skipped: mmap MAP_GROWSDOWN (pinmm returns -EINVAL on this branch)\n");
	if (!caps.pm_huge_zero && caps.thp)
		printf("oracle: the huge zero page: pinmm has none on this branch, so the host runs with "
		       "transparent_hugepage/use_zero_page=0\n");
	printf("oracle: not compared: the dirty flag (an anonymous folio's PG_dirty is set at "
	       "different times on the host); short-term and read-only pins (io_uring pins "
	       "FOLL_WRITE|FOLL_LONGTERM only)\n");
}

int main(void)
{
	const char *s = getenv("ORACLE_SECONDS"), *sd = getenv("ORACLE_SEED"), *mmv = getenv("ORACLE_MM");
	const char *kn = getenv("ORACLE_KNOWN"), *out = getenv("ORACLE_OUT");
	double seconds = s ? atof(s) : 60;
	uint64_t seed = sd ? strtoull(sd, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
	const char *jobs = getenv("ORACLE_JOBS"), *sq = getenv("ORACLE_SEQ");
	const char *outdir = out ? out : "build/oracle";
	int mm_mode = 0, died = 0, ndrv;
	struct tally *tally;
	double t0;
	char host_why[2048], set_msg[1024];
	void *w;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A driver and its server take turns, so one CPU keeps about one and a half busy. */
	ndrv = jobs ? atoi(jobs) : ((int)sysconf(_SC_NPROCESSORS_ONLN) * 3 + 1) / 2;
	if (ndrv < 1 || ndrv > MAX_DRIVERS) {
		if (jobs) {
			fprintf(stderr, "oracle: ORACLE_JOBS must be 1 to %d\n", MAX_DRIVERS);
			return 2;
		}
		ndrv = ndrv < 1 ? 1 : MAX_DRIVERS;
	}
	if (!seed)
		seed = 1;
	if (sq) {
		only_seq = strtol(sq, NULL, 0);
		if (only_seq < 0 || !sd) {
			fprintf(stderr, "oracle: ORACLE_SEQ needs ORACLE_SEED and a number >= 0\n");
			return 2;
		}
	}
	if (mmv && !strcmp(mmv, "range"))
		mm_mode = 1;
	else if (mmv && !strcmp(mmv, "both"))
		mm_mode = 2;
	else if (mmv && strcmp(mmv, "linux")) {
		fprintf(stderr, "oracle: ORACLE_MM must be linux, range or both\n");
		return 2;
	}
	/* Can the host serve at all: the window free, a child process? */
	w = mmap((void *)WIN_BASE, WIN_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE |
		 MAP_NORESERVE, -1, 0);
	if (w != (void *)WIN_BASE) {
		printf("oracle: skipped: the host cannot map the window at %#lx (%s)\n", WIN_BASE,
		       strerror(errno));
		return 0;
	}
	munmap(w, WIN_SIZE);
	/* The hugetlb pool and the THP settings are the host's: one run at a time. */
	{
		int lk = open("/run/lock/pinmm-oracle.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);

		if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB)) {
			printf("oracle: waiting for another oracle run on this host\n");
			flock(lk, LOCK_EX);
		}
	}
	pm_probe(&caps);
	host_probe(&caps, host_why, sizeof(host_why));
	if (caps.root) {
		host_settings_save_and_set(&caps, set_msg, sizeof(set_msg));
		if (set_msg[0])
			printf("oracle: settings: %s\n", set_msg);
		host_probe(&caps, host_why, sizeof(host_why));	/* the pool exists now */
	}
	cmp_flags = PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE |
		    (caps.kpage ? PM_PAGE_ANON | PM_PAGE_ZERO | PM_PAGE_THP | PM_PAGE_HUGETLB : 0);
	printf("oracle: Linux host as the oracle, seed %#llx, %.0f s, design %s, window %#lx+%#lx, "
	       "%d driver%s%s\n",
	       (unsigned long long)seed, seconds, mm_mode == 0 ? "linux" : mm_mode == 1 ? "range" : "both",
	       WIN_BASE, WIN_SIZE, ndrv, ndrv > 1 ? "s" : "",
	       ndrv > 1 && caps.hugetlb ? " (hugetlb in driver 0 only)" : "");
	print_skips(host_why);
	load_known(kn ? kn : "tools/oracle/known.txt");
	signal(SIGINT, forward);
	signal(SIGTERM, forward);
	signal(SIGHUP, forward);
	tally = mmap(NULL, sizeof(*tally) * (size_t)ndrv, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tally == MAP_FAILED) {
		printf("oracle: skipped: no shared memory for the drivers (%s)\n", strerror(errno));
		host_settings_restore();
		return 0;
	}
	memset(tally, 0, sizeof(*tally) * (size_t)ndrv);
	t0 = now();
	for (int d = 0; d < ndrv; d++) {
		if (only_seq >= 0 && d != only_seq % ndrv)
			continue;
		driver_pid[d] = fork();
		if (driver_pid[d] == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			_exit(driver(d, ndrv, seed, seconds, mm_mode, outdir, &tally[d]));
		}
		if (driver_pid[d] < 0) {
			printf("oracle: cannot fork driver %d (%s)\n", d, strerror(errno));
			forward(SIGTERM);
			died = -1;
			break;
		}
	}
	for (int d = 0; d < ndrv; d++) {
		int status = 0;

		if (driver_pid[d] <= 0)
			continue;
		while (waitpid(driver_pid[d], &status, 0) < 0 && errno == EINTR)
			;
		driver_pid[d] = 0;
		if (WIFSIGNALED(status)) {
			printf("oracle: driver %d died of signal %d\n", d, WTERMSIG(status));
			died = 1;
		} else if (WEXITSTATUS(status)) {
			died = 1;
		}
	}
	host_settings_restore();
	if (died < 0)
		return 0;
	if (died) {
		printf("oracle: a driver died; settings restored\n");
		return 1;
	}
	return summary(tally, ndrv, t0, outdir);
}
