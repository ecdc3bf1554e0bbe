// SPDX-License-Identifier: MIT
/*
 * model.c - the reference model (see model.h): plain arrays, no concurrency, no cleverness.
 *
 * The rules, in one place (each is repeated next to its code):
 *  R1 A private page is the address space's own struct mpage. Never written private anonymous
 *     memory has none (priv == NULL) and reads as zeros.
 *  R2 A page of a shmem object is the object's mpage, allocated by the first fault of any kind
 *     through any mapping (shmem has no zero page); beyond the object's size a fault is SIGBUS
 *     (-EFAULT), and so is a fault that would make the object hold more than its limit.
 *  R3 A write to a private file mapping, or a long-term R/O pin of it, copies the object's
 *     page into a private page (COW); reads and short-term R/O pins see the object's page.
 *  R4 Writing a private page (or unsharing it for a R/O pin): if it is exclusive, in place;
 *     if it is COW-shared since a fork and some reference holds it, the writer gets a copy and
 *     the references keep the old bytes (Linux reuses a shared page only when nothing else
 *     holds it); if its state is unknown, the references become uncertain.
 *  R5 fork: shared mappings are shared; DONTFORK ranges are left out; a private page that is
 *     pinned stays the parent's (exclusive) and the child gets a copy; any other private page
 *     becomes COW-shared in both, unless it may belong to a pinned large folio of the parent
 *     (Linux then copies the whole folio for the child): then its state is unknown.
 *  R6 Get and pin references hold an mpage: they see writes made to it for as long as its owner
 *     writes in place (R4), and keep it when it is unmapped (munmap, DONTNEED, truncate, exit).
 *  R7 A short-term R/O reference to never-written private anonymous memory is the zero page
 *     (reads zeros for ever) or, in a THP, a real page: the interpreter tells which from the
 *     page pinmm returned (MREF_MAYBE_ZERO). A real page becomes the address space's private
 *     page from then on (model_adopt): exclusive if it is pinned (a R/O pin unshares) or if no
 *     fork ever involved that address space, else of unknown exclusivity.
 *  R8 MADV_FREE splits a THP it covers in part, and the split maps each page that holds only
 *     zeros to the zero page (Linux 6.12+, RMP_USE_SHARED_ZEROPAGE), even one written (with
 *     zeros) or pinned for write before. The model knows neither where THPs lie nor where
 *     VMAs cut them, so a private anonymous page that holds only zeros and that nothing else
 *     holds (no other address space, no reference), in any 2 MiB span the advice touches,
 *     becomes never-written memory again (R1): reads and writes cannot tell the difference,
 *     and a R/O reference taken on it later may be the zero page or a real one (R7).
 *
 * Hugetlb (2 MiB pages of the pool, Linux's mm/hugetlb.c; the pool is large enough that no
 * reservation or fault ever runs short, so the pool's accounting is not modelled):
 *  H1 A hugetlb mapping covers whole 2 MiB pages. An munmap, mprotect, madvise or mmap whose
 *     range would cut one (Linux: -EINVAL, and DONTNEED's rounding) is not predicted
 *     (MODEL_UNSURE), nor are MADV_HUGEPAGE, NOHUGEPAGE and KEEPONFORK on hugetlb, nor
 *     FOLL_FORCE; WIPEONFORK and FREE are -EINVAL, as for any file mapping.
 *  H2 There is no zero page: the first fault of any kind, read or write, GUP or populate,
 *     brings in all 512 pages of the 2 MiB page - zeros, exclusive, for a private mapping;
 *     the object's, for a shared one (whose pages every mapping and fork share).
 *  H3 A write (or unshare) of a COW-shared private hugetlb page makes all its 512 pages
 *     exclusive at once (hugetlb_wp copies or reuses the whole folio).
 *  H4 fork: a private hugetlb page with a pin on any of its pages is copied for the child,
 *     the parent's stays exclusive (hugetlb_try_dup_anon_rmap); any other becomes COW-shared
 *     in both. Linux's hugetlb_wp then reuses a shared page once only one mapping is left
 *     (by mapcount, not by reference count as R4), which the model, keeping a copy per
 *     address space, cannot follow: so the references to a page COW-shared at fork, and
 *     R/O get references taken on one later, are uncertain.
 *  H5 Migration moves no byte (as for every page): hugetlb pages move whole or stay.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pinmm/types.h>

#include "model.h"

const uint8_t model_zero_page[MODEL_PAGE_SIZE];

enum fkind {
	FK_READ,      /* read access or fault, populate without write, R/O get */
	FK_WRITE,     /* write access or fault, FOLL_WRITE, FOLL_FORCE write */
	FK_PIN_RO,    /* R/O pin: unshares anonymous pages (CVE-2020-29374) */
	FK_PIN_RO_LT, /* R/O long-term pin: also unshares the zero page and page cache pages */
};

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		abort();
	return p;
}

/* ---- pages ---- */

static struct mpage *mp_new(struct model *md, const uint8_t *src)
{
	struct mpage *mp = xcalloc(1, sizeof(*mp));

	mp->refs = 1;
	if (src)
		memcpy(mp->data, src, MODEL_PAGE_SIZE);
	md->nr_mpages++;
	return mp;
}

static void mp_put(struct model *md, struct mpage *mp)
{
	if (--mp->refs == 0) {
		md->nr_mpages--;
		free(mp);
	}
}

static void mp_ref(struct mpage *mp, bool pin)
{
	mp->refs++;
	mp->nref++;
	mp->npin += pin;
}

static void mp_unref(struct model *md, struct mpage *mp, bool pin)
{
	mp->nref--;
	mp->npin -= pin;
	mp_put(md, mp);
}

/* ---- objects ---- */

static struct mobj *obj_new(struct model *md, unsigned long size, unsigned long max,
			    bool internal)
{
	struct mobj *o = xcalloc(1, sizeof(*o));

	o->internal = internal;
	o->handle = !internal;
	o->refs = o->handle;
	o->size = size;
	o->max = max;
	o->cap = size ? size : 1;
	o->pages = xcalloc(o->cap, sizeof(*o->pages));
	md->nr_objs++;
	return o;
}

static void obj_put(struct model *md, struct mobj *o)
{
	if (--o->refs)
		return;
	for (unsigned long i = 0; i < o->cap; i++)
		if (o->pages[i])
			mp_put(md, o->pages[i]);
	free(o->pages);
	free(o);
	md->nr_objs--;
}

/* R2: the object's page at @pgoff, allocated by the first fault. */
static int obj_page(struct model *md, struct mobj *o, unsigned long pgoff, struct mpage **out)
{
	if (pgoff >= o->size) {
		md->events[MEV_SIGBUS]++;
		return -EFAULT;
	}
	if (!o->pages[pgoff]) {
		if (o->max && o->nr >= o->max) {
			md->events[MEV_LIMIT]++;
			return -EFAULT;
		}
		o->pages[pgoff] = mp_new(md, NULL);
		o->nr++;
	}
	*out = o->pages[pgoff];
	return 0;
}

/* ---- slots ---- */

static void slot_clear(struct model *md, struct mslot *s)
{
	if (s->priv)
		mp_put(md, s->priv);
	if (s->obj)
		obj_put(md, s->obj);
	memset(s, 0, sizeof(*s));
}

/* Mark every reference to @mp uncertain: the model no longer knows what it holds. */
static void refs_make_uncertain(struct model *md, struct mpage *mp)
{
	for (int g = 0; g < MODEL_MAX_GROUPS; g++) {
		struct mgroup *grp = &md->group[g];

		if (!grp->live)
			continue;
		for (int i = 0; i < grp->n; i++)
			if (!grp->ref[i].released && grp->ref[i].mp == mp &&
			    grp->ref[i].state == MREF_PAGE)
				grp->ref[i].state = MREF_UNCERTAIN;
	}
}

/* R4: make the private page of @s exclusive before writing it or pinning it. */
static void break_cow(struct model *md, struct mslot *s)
{
	if (s->excl == MX_EXCL)
		return;
	if (s->priv->nref > 0) {
		struct mpage *copy;

		/*
		 * Shared and held by a reference: Linux copies (the refcount is not 1). Unknown:
		 * Linux may have kept the page exclusive and write in place, or copy; either way
		 * the references are no longer predictable.
		 */
		if (s->excl == MX_UNKNOWN) {
			refs_make_uncertain(md, s->priv);
			md->events[MEV_REFS_UNCERTAIN]++;
		} else {
			md->events[MEV_COW_COPY_HELD]++;
		}
		copy = mp_new(md, s->priv->data);
		mp_put(md, s->priv);
		s->priv = copy;
	}
	/* Nothing else holds it: whether Linux reuses or copies, nobody can tell. */
	s->excl = MX_EXCL;
}

/*
 * A fault (or the fault-in of GUP) of kind @kind on a mapped slot whose permissions the caller
 * checked. *@out is the page the access or reference then sees; NULL means never-written
 * private anonymous memory (the zero page, R1/R7).
 */
static int huge_fault(struct model *md, struct mslot *s, enum fkind kind, struct mpage **out);

static int slot_fault(struct model *md, struct mslot *s, enum fkind kind, struct mpage **out)
{
	struct mpage *mp;
	int r;

	*out = NULL;
	if (s->hugetlb)
		return huge_fault(md, s, kind, out); /* H2, H3 */
	if (s->obj && !s->priv) {
		r = obj_page(md, s->obj, s->pgoff, &mp); /* R2 */
		if (r)
			return r;
		if (s->shared || kind == FK_READ || kind == FK_PIN_RO) {
			*out = mp;
			return 0;
		}
		/* R3: COW of a page cache page into a private, exclusive page. */
		md->events[MEV_FILE_COW]++;
		s->priv = mp_new(md, mp->data);
		s->excl = MX_EXCL;
		*out = s->priv;
		return 0;
	}
	if (!s->priv) {
		if (kind == FK_READ || kind == FK_PIN_RO)
			return 0; /* R1, R7: the zero page (not anonymous: a R/O pin keeps it) */
		s->priv = mp_new(md, NULL);
		s->excl = MX_EXCL;
		*out = s->priv;
		return 0;
	}
	if (kind != FK_READ)
		break_cow(md, s); /* R4 */
	*out = s->priv;
	return 0;
}

static struct mslot *slot_at(struct model *md, int mm, unsigned long page)
{
	if (page >= MODEL_WINDOW_PAGES || !md->mm[mm].live)
		return NULL;
	return &md->mm[mm].slot[page];
}

/* ---- hugetlb (H1-H5) ---- */

/* The first of the 512 slots of the 2 MiB page that slot @s is part of. */
static struct mslot *huge_unit(struct model *md, struct mslot *s)
{
	for (int i = 0; i < MODEL_MAX_MMS; i++) {
		struct mslot *base = md->mm[i].slot;

		if (s >= base && s < base + MODEL_WINDOW_PAGES)
			return base + (unsigned long)(s - base) / MODEL_PMD_PAGES * MODEL_PMD_PAGES;
	}
	abort();
}

/* H1: would [@page, @page + @n) of @mm cut a hugetlb page? */
static bool cuts_hugetlb(struct model *md, int mm, unsigned long page, unsigned long n)
{
	if (page % MODEL_PMD_PAGES == 0 && (page + n) % MODEL_PMD_PAGES == 0)
		return false;
	for (unsigned long i = page; i < page + n && i < MODEL_WINDOW_PAGES; i++)
		if (md->mm[mm].slot[i].mapped && md->mm[mm].slot[i].hugetlb) {
			md->events[MEV_HUGETLB_UNSURE]++;
			return true;
		}
	return false;
}

/* H3: make the private hugetlb page at @u (its first slot) exclusive. */
static void huge_break_cow(struct model *md, struct mslot *u)
{
	if (u->excl == MX_EXCL)
		return;
	for (unsigned long j = 0; j < MODEL_PMD_PAGES; j++) {
		if (u[j].priv->nref > 0) {
			/* Copied or reused, by mapcount (H4): its references cannot tell. */
			refs_make_uncertain(md, u[j].priv);
			md->events[MEV_REFS_UNCERTAIN]++;
		}
		u[j].excl = MX_EXCL;
	}
}

/* H2, H3: slot_fault() of a hugetlb slot. */
static int huge_fault(struct model *md, struct mslot *s, enum fkind kind, struct mpage **out)
{
	struct mslot *u = huge_unit(md, s);
	struct mpage *mp;

	if (s->obj) {
		for (unsigned long j = 0; j < MODEL_PMD_PAGES; j++)
			if (!u[j].obj->pages[u[j].pgoff] && obj_page(md, u[j].obj, u[j].pgoff, &mp))
				return -EFAULT; /* never: the object is the mapping's size */
		if (!s->obj->pages[s->pgoff])
			return -EFAULT;
		*out = s->obj->pages[s->pgoff];
		return 0;
	}
	if (!s->priv) {
		md->events[MEV_HUGETLB_FAULT]++;
		for (unsigned long j = 0; j < MODEL_PMD_PAGES; j++) {
			if (!u[j].priv)
				u[j].priv = mp_new(md, NULL);
			u[j].excl = MX_EXCL;
		}
	} else if (kind != FK_READ) {
		huge_break_cow(md, u);
	}
	*out = s->priv;
	return 0;
}

/* H4: fork of the private hugetlb slot @s of @parent (its page present) into @d. */
static void huge_fork(struct model *md, struct mslot *s, struct mslot *d)
{
	struct mslot *u = huge_unit(md, s);
	bool pinned = false;

	for (unsigned long j = 0; j < MODEL_PMD_PAGES; j++)
		pinned |= u[j].priv && u[j].priv->npin > 0;
	if (s == u)
		md->events[MEV_HUGETLB_FORK]++;
	d->priv = mp_new(md, s->priv->data);
	if (pinned) {
		d->excl = MX_EXCL; /* the parent's stays exclusive */
		return;
	}
	refs_make_uncertain(md, s->priv);
	s->excl = MX_SHARED;
	d->excl = MX_SHARED;
}

long model_hugetlb_mmap(struct model *md, int mm, unsigned long page, unsigned long npages,
			int prot, bool shared)
{
	struct mobj *o = shared ? obj_new(md, npages, 0, true) : NULL;

	for (unsigned long i = page; i < page + npages; i++)
		slot_clear(md, &md->mm[mm].slot[i]);
	for (unsigned long i = 0; i < npages; i++) {
		struct mslot *s = &md->mm[mm].slot[page + i];

		s->mapped = true;
		s->hugetlb = true;
		s->shared = shared;
		s->prot = (uint8_t)prot;
		s->obj = o;
		s->pgoff = i;
		if (o)
			o->refs++;
	}
	return 0;
}

/* ---- address spaces ---- */

struct model *model_new(void)
{
	return xcalloc(1, sizeof(struct model));
}

int model_mm_create(struct model *md)
{
	for (int i = 0; i < MODEL_MAX_MMS; i++) {
		if (!md->mm[i].live) {
			memset(&md->mm[i], 0, sizeof(md->mm[i]));
			md->mm[i].live = true;
			return i;
		}
	}
	return -1;
}

void model_mm_destroy(struct model *md, int mm)
{
	for (unsigned long i = 0; i < MODEL_WINDOW_PAGES; i++)
		slot_clear(md, &md->mm[mm].slot[i]);
	md->mm[mm].live = false;
}

/* May page @page of @mm belong to a large folio that is pinned (R5)? */
static bool near_pinned_large(struct model *md, int mm, unsigned long page)
{
	for (int g = 0; g < MODEL_MAX_GROUPS; g++) {
		struct mgroup *grp = &md->group[g];

		if (!grp->live || !grp->pin)
			continue;
		for (int i = 0; i < grp->n; i++) {
			struct mref *r = &grp->ref[i];

			if (!r->released && r->large && r->priv && r->mm == mm &&
			    r->page / MODEL_PMD_PAGES == page / MODEL_PMD_PAGES)
				return true;
		}
	}
	return false;
}

int model_fork(struct model *md, int parent)
{
	int child = model_mm_create(md);

	if (child < 0)
		return -1;
	md->mm[parent].forked = true;
	md->mm[child].forked = true;
	for (unsigned long i = 0; i < MODEL_WINDOW_PAGES; i++) {
		struct mslot *s = &md->mm[parent].slot[i], *d = &md->mm[child].slot[i];

		if (!s->mapped || s->dontfork)
			continue; /* R5: DONTFORK ranges are left out */
		*d = *s;
		d->priv = NULL;
		if (d->obj)
			d->obj->refs++;
		if (s->wipeonfork)
			continue; /* R5: WIPEONFORK ranges start empty, the flag kept */
		if (!s->priv)
			continue;
		if (s->hugetlb) {
			huge_fork(md, s, d); /* H4 */
			continue;
		}
		d->priv = mp_new(md, s->priv->data);
		if (s->priv->npin > 0) {
			/* R5: pinned, so exclusive: the parent keeps it, the child gets a copy. */
			d->excl = MX_EXCL;
			md->events[MEV_FORK_PINNED]++;
		} else if (s->excl == MX_SHARED) {
			d->excl = MX_SHARED;
		} else if (s->excl == MX_UNKNOWN || near_pinned_large(md, parent, i)) {
			md->events[MEV_FORK_UNKNOWN]++;
			s->excl = MX_UNKNOWN;
			d->excl = MX_UNKNOWN;
		} else {
			s->excl = MX_SHARED;
			d->excl = MX_SHARED;
		}
	}
	return child;
}

/* ---- mmap, munmap, mprotect, madvise ---- */

static bool range_mapped_any(struct model *md, int mm, unsigned long page, unsigned long n)
{
	for (unsigned long i = page; i < page + n && i < MODEL_WINDOW_PAGES; i++)
		if (md->mm[mm].slot[i].mapped)
			return true;
	return false;
}

long model_mmap(struct model *md, int mm, unsigned long page, unsigned long npages, int prot,
		int flags, int obj, unsigned long pgoff)
{
	bool shared = flags & PM_MAP_SHARED;
	struct mobj *o = NULL;

	if (flags & PM_MAP_FIXED_NOREPLACE) {
		if (range_mapped_any(md, mm, page, npages))
			return -EEXIST;
	} else if (!(flags & PM_MAP_FIXED)) {
		/*
		 * A hint: used as is when free. When it is not, pinmm places the mapping where it
		 * likes; and a 2 MiB-multiple anonymous length at an unaligned hint may be moved to
		 * an aligned address. The model cannot tell: skip.
		 */
		if (range_mapped_any(md, mm, page, npages))
			return MODEL_UNSURE;
		if ((flags & PM_MAP_ANONYMOUS) && npages % MODEL_PMD_PAGES == 0 &&
		    page % MODEL_PMD_PAGES)
			return MODEL_UNSURE;
	}
	if (cuts_hugetlb(md, mm, page, npages))
		return MODEL_UNSURE; /* H1 */
	for (unsigned long i = page; i < page + npages; i++)
		slot_clear(md, &md->mm[mm].slot[i]);
	if (flags & PM_MAP_ANONYMOUS) {
		if (shared) {
			/* MAP_SHARED|MAP_ANONYMOUS: an internal object of the mapping's size. */
			o = obj_new(md, npages, 0, true);
			pgoff = 0;
		}
	} else {
		o = md->obj[obj];
	}
	for (unsigned long i = 0; i < npages; i++) {
		struct mslot *s = &md->mm[mm].slot[page + i];

		s->mapped = true;
		s->shared = shared;
		s->prot = (uint8_t)prot;
		s->obj = o;
		s->pgoff = pgoff + i;
		if (o)
			o->refs++;
	}
	if (flags & PM_MAP_POPULATE) {
		/*
		 * Linux's populate: write faults for private writable mappings (FOLL_WRITE), read
		 * faults otherwise; nothing for PROT_NONE. It stops at the first failure (SIGBUS
		 * beyond a shmem object's end or limit), which mmap does not report.
		 */
		for (unsigned long i = 0; i < npages && prot != PM_PROT_NONE; i++) {
			struct mslot *s = &md->mm[mm].slot[page + i];
			struct mpage *mp;
			enum fkind k = (!shared && (prot & PM_PROT_WRITE)) ? FK_WRITE : FK_READ;

			if (slot_fault(md, s, k, &mp))
				break;
		}
	}
	return 0;
}

int model_munmap(struct model *md, int mm, unsigned long page, unsigned long npages)
{
	if (cuts_hugetlb(md, mm, page, npages))
		return (int)MODEL_UNSURE; /* H1 */
	for (unsigned long i = page; i < page + npages && i < MODEL_WINDOW_PAGES; i++)
		slot_clear(md, &md->mm[mm].slot[i]);
	return 0;
}

int model_migrate(struct model *md, int mm, unsigned long page, unsigned long npages)
{
	for (unsigned long i = page; i < page + npages; i++) {
		struct mslot *s = slot_at(md, mm, i);

		if (!s || !s->mapped)
			return -ENOMEM;
	}
	return 0;
}

int model_mprotect(struct model *md, int mm, unsigned long page, unsigned long npages, int prot)
{
	/* Linux: applied page by page up to the first hole, which makes it -ENOMEM. */
	if (cuts_hugetlb(md, mm, page, npages))
		return (int)MODEL_UNSURE; /* H1 */
	for (unsigned long i = page; i < page + npages; i++) {
		struct mslot *s = slot_at(md, mm, i);

		if (!s || !s->mapped)
			return -ENOMEM;
		s->prot = (uint8_t)prot;
	}
	return 0;
}

/*
 * MADV_POPULATE_*: page by page as GUP faults them, stopping at the first error, as Linux's
 * madvise_populate: a hole -ENOMEM, a protection that forbids the access -EINVAL (read asks
 * PROT_READ itself), a fault that fails its own error (SIGBUS: -EFAULT).
 */
static int model_populate(struct model *md, int mm, unsigned long page, unsigned long npages,
			  bool write)
{
	for (unsigned long i = page; i < page + npages; i++) {
		struct mslot *s = slot_at(md, mm, i);
		struct mpage *mp;
		int r;

		if (!s || !s->mapped)
			return -ENOMEM;
		if (!(s->prot & (write ? PM_PROT_WRITE : PM_PROT_READ)))
			return -EINVAL;
		r = slot_fault(md, s, write ? FK_WRITE : FK_READ, &mp);
		if (r)
			return r == -EFAULT ? -EFAULT : -ENOMEM;
	}
	return 0;
}

/* R8: the pages of @page's 2 MiB span that a split may have mapped to the zero page. */
static void free_split_zero(struct model *md, int mm, unsigned long page)
{
	unsigned long first = page - page % MODEL_PMD_PAGES;

	for (unsigned long i = first; i < first + MODEL_PMD_PAGES; i++) {
		struct mslot *s = slot_at(md, mm, i);

		if (!s || !s->mapped || s->obj || s->hugetlb || !s->priv || s->priv->refs != 1)
			continue;
		if (!memcmp(s->priv->data, model_zero_page, MODEL_PAGE_SIZE)) {
			mp_put(md, s->priv);
			s->priv = NULL;
			s->excl = MX_EXCL;
		}
	}
}

int model_madvise(struct model *md, int mm, unsigned long page, unsigned long npages, int advice)
{
	bool hole = false;

	if (cuts_hugetlb(md, mm, page, npages))
		return (int)MODEL_UNSURE; /* H1 */
	if (advice == PM_MADV_HUGEPAGE || advice == PM_MADV_NOHUGEPAGE ||
	    advice == PM_MADV_KEEPONFORK) {
		for (unsigned long i = page; i < page + npages && i < MODEL_WINDOW_PAGES; i++)
			if (md->mm[mm].slot[i].mapped && md->mm[mm].slot[i].hugetlb) {
				md->events[MEV_HUGETLB_UNSURE]++;
				return (int)MODEL_UNSURE; /* H1 */
			}
	}
	if (advice == PM_MADV_POPULATE_READ || advice == PM_MADV_POPULATE_WRITE)
		return model_populate(md, mm, page, npages, advice == PM_MADV_POPULATE_WRITE);
	/* Linux: applied to every mapped part; any hole makes it -ENOMEM; a mapping the advice
	 * does not apply to ends it at once with -EINVAL, what came before it done. */
	for (unsigned long i = page; i < page + npages; i++) {
		struct mslot *s = slot_at(md, mm, i);

		if (!s || !s->mapped) {
			hole = true;
			continue;
		}
		switch (advice) {
		case PM_MADV_DONTNEED:
			/*
			 * Private pages (anonymous or COW copies) are dropped: the next read
			 * sees zeros or the object again; references keep the old page (R6).
			 * Shared pages stay in their object.
			 */
			if (s->priv) {
				mp_put(md, s->priv);
				s->priv = NULL;
				s->excl = MX_EXCL;
			}
			break;
		case PM_MADV_HUGEPAGE:
			s->hugepage = true;
			break;
		case PM_MADV_NOHUGEPAGE:
			s->hugepage = false;
			break;
		case PM_MADV_DONTFORK:
			s->dontfork = true;
			break;
		case PM_MADV_DOFORK:
			s->dontfork = false;
			break;
		case PM_MADV_WIPEONFORK:
			if (s->obj || s->hugetlb) /* private anonymous memory only */
				return -EINVAL;
			s->wipeonfork = true;
			break;
		case PM_MADV_KEEPONFORK:
			s->wipeonfork = false;
			break;
		case PM_MADV_FREE:
			/* No reclaim: the contents stay; private anonymous memory only. */
			if (s->obj || s->hugetlb)
				return -EINVAL;
			if (i == page || i % MODEL_PMD_PAGES == 0)
				free_split_zero(md, mm, i);
			break;
		}
	}
	return hole ? -ENOMEM : 0;
}

/* ---- access and faults ---- */

static int access_page(struct model *md, int mm, unsigned long page, unsigned in, uint8_t *buf,
		       size_t len, bool write)
{
	struct mslot *s = slot_at(md, mm, page);
	struct mpage *mp;
	int r;

	/* A user access respects the protection (never forces); PROT_WRITE implies read. */
	if (!s || !s->mapped || !(s->prot & (write ? PM_PROT_WRITE : PM_PROT_READ)))
		return -EFAULT;
	r = slot_fault(md, s, write ? FK_WRITE : FK_READ, &mp);
	if (r)
		return r;
	if (write)
		memcpy(mp->data + in, buf, len);
	else
		memcpy(buf, (mp ? mp->data : model_zero_page) + in, len);
	return 0;
}

long model_access(struct model *md, int mm, unsigned long off, uint8_t *buf, size_t len,
		  bool write)
{
	size_t done = 0;

	/* Copied page by page; a failure returns what was copied before it, if anything. */
	while (done < len) {
		unsigned long a = off + done;
		unsigned in = (unsigned)(a % MODEL_PAGE_SIZE);
		size_t chunk = MODEL_PAGE_SIZE - in;
		int r;

		if (chunk > len - done)
			chunk = len - done;
		r = access_page(md, mm, a / MODEL_PAGE_SIZE, in, buf + done, chunk, write);
		if (r)
			return done ? (long)done : r;
		done += chunk;
	}
	return (long)done;
}

int model_fault(struct model *md, int mm, unsigned long page, bool write)
{
	struct mslot *s = slot_at(md, mm, page);
	struct mpage *mp;

	if (!s || !s->mapped || !(s->prot & (write ? PM_PROT_WRITE : PM_PROT_READ)))
		return -EFAULT;
	return slot_fault(md, s, write ? FK_WRITE : FK_READ, &mp);
}

/* ---- get_user_pages and pinning ---- */

static int gup_page(struct model *md, int mm, unsigned long page, const struct model_gup *req,
		    struct mref *ref)
{
	struct mslot *s = slot_at(md, mm, page);
	struct mpage *mp;
	enum fkind kind;
	int r;

	if (!s || !s->mapped)
		return -EFAULT;
	/* Linux's check_vma_flags(); FOLL_FORCE on PROT_NONE never gets here (UNSURE). */
	if (!(s->prot & PM_PROT_READ))
		return -EFAULT;
	if (req->write && !(s->prot & PM_PROT_WRITE) && (!req->force || s->shared))
		return -EFAULT; /* FOLL_FORCE writes only private mappings, into a COW copy */
	if (req->write)
		kind = FK_WRITE;
	else if (req->pin)
		kind = req->longterm ? FK_PIN_RO_LT : FK_PIN_RO;
	else
		kind = FK_READ;
	r = slot_fault(md, s, kind, &mp);
	if (r)
		return r;
	memset(ref, 0, sizeof(*ref));
	ref->mm = mm;
	ref->page = page;
	if (mp) {
		ref->mp = mp;
		ref->state = MREF_PAGE;
		/* H4: a R/O get of a COW-shared hugetlb page follows whichever side reuses it. */
		if (s->hugetlb && !s->obj && !req->pin && !req->write && s->excl != MX_EXCL)
			ref->state = MREF_UNCERTAIN;
		ref->priv = mp == s->priv;
		if (!req->nopages)
			mp_ref(mp, req->pin);
	} else {
		ref->state = MREF_MAYBE_ZERO; /* R7 */
		ref->priv = true;
	}
	return 0;
}

long model_gup(struct model *md, int mm, unsigned long page, unsigned long nr,
	       const struct model_gup *req, int g)
{
	struct mgroup *grp = &md->group[g];
	unsigned long i;
	int r = 0, n = 0;

	/*
	 * FOLL_FORCE on PROT_NONE: Linux lets ptrace read (and COW-write) it; pinmm's choice is
	 * not fixed by the contract. Keep it out of the comparison.
	 */
	for (i = 0; i < nr; i++) {
		struct mslot *s = slot_at(md, mm, page + i);

		if (!s || !s->mapped)
			break;
		if (req->force && (!(s->prot & PM_PROT_READ) || s->hugetlb))
			return MODEL_UNSURE; /* and H1 */
	}
	memset(grp, 0, sizeof(*grp));
	for (i = 0; i < nr; i++) {
		struct mref ref;

		r = gup_page(md, mm, page + i, req, &ref);
		if (r)
			break;
		if (!req->nopages)
			grp->ref[n++] = ref;
	}
	if (n) {
		grp->live = true;
		grp->pin = req->pin;
		grp->write = req->write;
		grp->n = n;
	}
	if (i == 0 && nr > 0)
		return r;
	return (long)i;
}

void model_adopt(struct model *md, int g, int idx)
{
	struct mgroup *grp = &md->group[g];
	struct mref *r = &grp->ref[idx];
	struct mslot *s = slot_at(md, r->mm, r->page);

	if (!s || !s->mapped || s->obj || s->priv) { /* cannot happen: be safe, not sorry */
		r->state = MREF_UNCERTAIN;
		return;
	}
	s->priv = mp_new(md, NULL);
	s->excl = (grp->pin || !md->mm[r->mm].forked) ? MX_EXCL : MX_UNKNOWN;
	r->mp = s->priv;
	r->state = MREF_PAGE;
	mp_ref(r->mp, grp->pin);
}

void model_release(struct model *md, int g, int idx)
{
	struct mgroup *grp = &md->group[g];
	bool left = false;

	for (int i = 0; i < grp->n; i++) {
		struct mref *r = &grp->ref[i];

		if (!r->released && (idx < 0 || idx == i)) {
			if (r->mp)
				mp_unref(md, r->mp, grp->pin);
			r->mp = NULL;
			r->released = true;
		}
		left |= !r->released;
	}
	if (!left)
		memset(grp, 0, sizeof(*grp));
}

const uint8_t *model_ref_bytes(struct model *md, int g, int idx)
{
	struct mref *r = &md->group[g].ref[idx];

	if (r->released)
		return NULL;
	if (r->state == MREF_PAGE)
		return r->mp->data;
	if (r->state == MREF_ZERO)
		return model_zero_page;
	return NULL;
}

void model_ref_write(struct model *md, int g, int idx, unsigned off, const uint8_t *src,
		     size_t len)
{
	struct mref *r = &md->group[g].ref[idx];

	memcpy(r->mp->data + off, src, len);
}

/* ---- shmem objects ---- */

int model_shmem_create(struct model *md, int obj, unsigned long pages, unsigned long max)
{
	md->obj[obj] = obj_new(md, pages, max, false);
	return 0;
}

int model_shmem_truncate(struct model *md, int obj, unsigned long pages)
{
	struct mobj *o = md->obj[obj];

	if (pages < o->size) {
		/*
		 * Shrinking drops the pages beyond the new end from the object and, as Linux's
		 * truncate (unmap_mapping_range with even_cows), the private COW copies of them
		 * in every private mapping. References keep their pages (R6).
		 */
		for (unsigned long i = pages; i < o->size && i < o->cap; i++) {
			if (o->pages[i]) {
				mp_put(md, o->pages[i]);
				o->pages[i] = NULL;
				o->nr--;
			}
		}
		for (int m = 0; m < MODEL_MAX_MMS; m++) {
			if (!md->mm[m].live)
				continue;
			for (unsigned long i = 0; i < MODEL_WINDOW_PAGES; i++) {
				struct mslot *s = &md->mm[m].slot[i];

				if (s->obj == o && s->pgoff >= pages && s->priv) {
					md->events[MEV_TRUNCATE_COW]++;
					mp_put(md, s->priv);
					s->priv = NULL;
					s->excl = MX_EXCL;
				}
			}
		}
	}
	if (pages > o->cap) {
		struct mpage **np = xcalloc(pages, sizeof(*np));

		memcpy(np, o->pages, o->cap * sizeof(*np));
		free(o->pages);
		o->pages = np;
		o->cap = pages;
	}
	o->size = pages;
	return 0;
}

void model_shmem_put(struct model *md, int obj)
{
	struct mobj *o = md->obj[obj];

	md->obj[obj] = NULL;
	o->handle = false;
	obj_put(md, o);
}

long model_free(struct model *md)
{
	long left;

	for (int g = 0; g < MODEL_MAX_GROUPS; g++)
		if (md->group[g].live)
			model_release(md, g, -1);
	for (int i = 0; i < MODEL_MAX_MMS; i++)
		if (md->mm[i].live)
			model_mm_destroy(md, i);
	for (int i = 0; i < MODEL_MAX_OBJS; i++)
		if (md->obj[i])
			model_shmem_put(md, i);
	left = md->nr_mpages + md->nr_objs;
	free(md);
	return left;
}
