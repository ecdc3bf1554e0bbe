// SPDX-License-Identifier: MIT
/*
 * model.c - the commuter's reference model (model.h). Rules, each Linux's:
 *  M1 a private page never written maps the zero page on a read fault; a write gives it a
 *     page of its own (zeros);
 *  M2 a write to a private page that another mapping shares copies it first (COW); a page
 *     only this slot maps is exclusive (PageAnonExclusive) and is written in place, pinned
 *     or not;
 *  M3 shared backings (anonymous shared, shmem, hugetlb of an object) keep their pages in the
 *     object: every mapping of an offset maps the same page, and unmapping keeps it;
 *  M4 fork shares private pages with the child, except those that may be pinned, which the
 *     child gets a copy of;
 *  M5 a THP or hugetlb unit faults as one: both tracked pages of one unit get pages together;
 *  M6 truncation drops an object's pages from the new size on, and the private copies
 *     mapped there: such slots map nothing and fault with SIGBUS.
 */
#include <stdio.h>
#include <string.h>

#include "model.h"

void cm_init(struct cm_model *md)
{
	memset(md, 0, sizeof(*md));
	md->nr_pages = 1; /* index 0 is CM_NONE */
	for (int i = 0; i < CM_MMS; i++)
		for (int a = 0; a < CM_ADDRS; a++)
			md->slot[i][a].obj = -1;
}

int cm_page_new(struct cm_model *md, int data)
{
	if (md->nr_pages >= CM_PAGES) {
		md->overflow = true;
		return CM_NONE;
	}
	md->page[md->nr_pages] = (struct cm_page){ .data = data, .live = true };
	return md->nr_pages++;
}

static int obj_index(struct cm_obj *o, long off)
{
	for (int i = 0; i < o->nr_off; i++)
		if (o->off[i] == off)
			return i;
	if (o->nr_off >= CM_ADDRS)
		return -1;
	o->off[o->nr_off] = off;
	o->page[o->nr_off] = CM_NONE;
	return o->nr_off++;
}

int *cm_slot_pagep(struct cm_model *md, int mm, int a)
{
	struct cm_slot *s = &md->slot[mm][a];

	if (s->obj >= 0 && s->page == CM_NONE) {
		struct cm_obj *o = &md->obj[s->obj];
		int i = obj_index(o, s->pgoff);

		if (i < 0) {
			md->overflow = true;
			return &s->page;
		}
		return &o->page[i];
	}
	return &s->page;
}

int cm_slot_page(struct cm_model *md, int mm, int a)
{
	struct cm_slot *s = &md->slot[mm][a];

	if (!s->mapped)
		return CM_NONE;
	return *cm_slot_pagep(md, mm, a);
}

static int mapcount(struct cm_model *md, int page)
{
	int n = 0;

	for (int mm = 0; mm < CM_MMS; mm++)
		for (int a = 0; a < md->nr_addrs; a++)
			if (md->mm_live[mm] && md->slot[mm][a].mapped &&
			    (md->slot[mm][a].obj < 0 || md->slot[mm][a].present) &&
			    cm_slot_page(md, mm, a) == page)
				n++;
	return n;
}

/* M5: the other tracked page of this slot's unit faults with it, with zeros. */
static void unit_fault(struct cm_model *md, int mm, int a, bool zero)
{
	struct cm_slot *s = &md->slot[mm][a];

	for (int b = 0; b < md->nr_addrs; b++) {
		struct cm_slot *t = &md->slot[mm][b];

		if (b == a || !s->unit || t->unit != s->unit || !t->mapped || t->prot != s->prot)
			continue;
		if (t->obj >= 0)
			t->present = true;
		else if (t->page == CM_NONE || (!zero && t->page == CM_ZERO))
			t->page = zero ? CM_ZERO : cm_page_new(md, 0);
	}
}

int cm_make_writable(struct cm_model *md, int mm, int a)
{
	struct cm_slot *s = &md->slot[mm][a];
	int *pp = cm_slot_pagep(md, mm, a);

	if (s->obj >= 0 && pp != &s->page) { /* M3 */
		s->present = true;
		if (*pp == CM_NONE) {
			*pp = cm_page_new(md, 0);
			unit_fault(md, mm, a, false);
		}
		return *pp;
	}
	if (*pp == CM_NONE || *pp == CM_ZERO) { /* M1 */
		bool was_none = *pp == CM_NONE;

		*pp = cm_page_new(md, 0);
		if (was_none || s->bk == BK_THP)
			unit_fault(md, mm, a, false);
		return *pp;
	}
	if (mapcount(md, *pp) > 1) { /* M2 */
		int copy = cm_page_new(md, md->page[*pp].data);

		*pp = copy;
	}
	return *pp;
}

void cm_read_fault(struct cm_model *md, int mm, int a)
{
	struct cm_slot *s = &md->slot[mm][a];
	int *pp = cm_slot_pagep(md, mm, a);

	if (s->obj >= 0 && pp != &s->page)
		s->present = true;
	if (*pp != CM_NONE)
		return;
	if (s->obj >= 0 && pp != &s->page) {
		*pp = cm_page_new(md, 0);
		unit_fault(md, mm, a, false);
	} else if (s->bk == BK_HUGETLB) {
		*pp = cm_page_new(md, 0);
		unit_fault(md, mm, a, false);
	} else {
		*pp = CM_ZERO;
		unit_fault(md, mm, a, true);
	}
}

void cm_unmap_slot(struct cm_model *md, int mm, int a)
{
	struct cm_slot *s = &md->slot[mm][a];

	*s = (struct cm_slot){ .obj = -1 };
}

void cm_fork(struct cm_model *md, int parent, int child)
{
	md->mm_live[child] = true;
	for (int a = 0; a < md->nr_addrs; a++) {
		struct cm_slot *p = &md->slot[parent][a];

		md->slot[child][a] = *p;
		if (!p->mapped || p->page == CM_NONE || p->page == CM_ZERO)
			continue;
		if (md->page[p->page].pins) /* M4 */
			md->slot[child][a].page = cm_page_new(md, md->page[p->page].data);
	}
}

void cm_truncate(struct cm_model *md, int obj, long size)
{
	struct cm_obj *o = &md->obj[obj];

	o->size = size;
	for (int i = 0; i < o->nr_off; i++)
		if (o->off[i] >= size)
			o->page[i] = CM_NONE;
	for (int mm = 0; mm < CM_MMS; mm++)
		for (int a = 0; a < md->nr_addrs; a++) {
			struct cm_slot *s = &md->slot[mm][a];

			if (s->mapped && s->obj == obj && s->pgoff >= size) {
				s->page = CM_NONE; /* M6: private copies go too */
				s->present = false;
			}
		}
}

/* A page's canonical name: the order in which the walk below first meets it. */
static int canon_id(int *map, int page)
{
	if (page <= 0)
		return page;
	if (!map[page]) {
		int next = 0;

		for (int i = 0; i < CM_PAGES; i++)
			next = map[i] > next ? map[i] : next;
		map[page] = next + 1;
	}
	return map[page];
}

void cm_canon(struct cm_model *md, char *buf, size_t len)
{
	int map[CM_PAGES] = { 0 }, order[CM_PAGES + 1] = { 0 };
	size_t n = 0;

#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
	if (md->overflow) {
		PUT("overflow");
		return;
	}
	for (int mm = 0; mm < CM_MMS; mm++) {
		PUT("|mm%d:%d", mm, md->mm_live[mm]);
		if (!md->mm_live[mm])
			continue;
		for (int a = 0; a < md->nr_addrs; a++) {
			struct cm_slot *s = &md->slot[mm][a];

			if (!s->mapped) {
				PUT(" -");
				continue;
			}
			PUT(" %d/%d/%d/%d/%ld/%d/p%d", s->prot, s->bk, s->hugeadv, s->obj, s->pgoff,
			    s->present, canon_id(map, s->page));
		}
	}
	for (int o = 0; o < CM_OBJS; o++) {
		if (!md->obj[o].live)
			continue;
		PUT("|obj%d:%ld", o, md->obj[o].size);
		/* offsets in ascending order, each with its page */
		for (int pass = 0; pass < md->obj[o].nr_off; pass++) {
			int best = -1;

			for (int i = 0; i < md->obj[o].nr_off; i++) {
				bool done = false;

				for (int k = 0; k < pass; k++)
					done |= order[k] == i;
				if (!done && (best < 0 || md->obj[o].off[i] < md->obj[o].off[best]))
					best = i;
			}
			order[pass] = best;
			if (md->obj[o].page[best] != CM_NONE)
				PUT(" %ld:p%d", md->obj[o].off[best],
				    canon_id(map, md->obj[o].page[best]));
		}
	}
	PUT("|h");
	for (int h = 0; h < CM_HANDLES; h++)
		PUT(" %d", canon_id(map, md->handle[h]));
	/* every page reachable, by canonical name: data, pins, gets, mapcount */
	for (int id = 1; id < CM_PAGES; id++)
		for (int p = 1; p < md->nr_pages; p++)
			if (map[p] == id)
				PUT("|%d:d%d,p%d,g%d,m%d", id, md->page[p].data, md->page[p].pins,
				    md->page[p].gets, mapcount(md, p));
#undef PUT
}
