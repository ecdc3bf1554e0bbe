/* SPDX-License-Identifier: MIT */
/*
 * model.h - the commuter's reference model (docs/commuter.md): what a pair of operations
 * leaves observable, so that the two orders can be compared.
 *
 * tests/lib/model.c models a 6 MiB window of one address range; the commuter's placements
 * reach across 512 GiB ranges and need THP units, hugetlb pages and mapcounts, so it has its
 * own smaller model. It follows only the addresses the two operations target ("tracked
 * pages", at most two per address space) and what they refer to: each address space's slot
 * for each tracked page (mapped, protection, backing, object and offset, the page it maps),
 * each object's page at each tracked offset, and each page's data, pins, gets and mapcount.
 * Frames are anonymous: two final states are the same when they are the same up to a
 * renaming of pages (model_canon), so the order in which frames were allocated never shows.
 */
#ifndef PM_COMMUTER_MODEL_H
#define PM_COMMUTER_MODEL_H

#include <stdbool.h>
#include <stddef.h>

enum cm_backing { BK_ANON, BK_THP, BK_SHARED, BK_SHMEM, BK_HUGETLB, BK_NR };

#define CM_MMS 6	/* mm0, mm1, fork children of mm0 and mm1 (setup), of the two ops */
#define CM_ADDRS 2	/* tracked pages: A's target and B's */
#define CM_OBJS 6
#define CM_PAGES 64
#define CM_HANDLES 8
#define CM_ANY (-999999L) /* a result the contract leaves open (a non-fixed mmap's address) */
#define CM_NONE 0	/* a slot that maps nothing */
#define CM_ZERO (-1)	/* a slot that maps the zero page */

struct cm_slot {
	bool mapped, hugeadv;
	bool present;		/* shared backings: this mapping's entry is filled */
	unsigned char prot, bk;
	int obj;		/* shared backings: the object; else -1 */
	long pgoff;		/* in the object, pages */
	int page;		/* private backings: CM_NONE, CM_ZERO or a page index */
	int unit;		/* pages that fault together (a THP or hugetlb unit) share this */
};

struct cm_page {
	int data, pins, gets;
	bool live;
};

struct cm_obj {
	bool live;
	long size;		/* pages */
	int page[CM_ADDRS];	/* the page at each tracked offset (CM_NONE or an index) */
	long off[CM_ADDRS];	/* the tracked offsets */
	int nr_off;
};

struct cm_model {
	bool mm_live[CM_MMS];
	struct cm_slot slot[CM_MMS][CM_ADDRS];
	int nr_addrs;		/* 1 when both ops target one page */
	struct cm_obj obj[CM_OBJS];
	struct cm_page page[CM_PAGES];
	int nr_pages;
	int handle[CM_HANDLES];	/* pages held by a pin or get that is still outstanding */
	bool overflow;		/* ran out of model pages: the verdict is "unknown" */
};

void cm_init(struct cm_model *md);
int cm_page_new(struct cm_model *md, int data);
/* The page a slot reads now (CM_NONE, CM_ZERO or an index), following its object. */
int cm_slot_page(struct cm_model *md, int mm, int a);
int *cm_slot_pagep(struct cm_model *md, int mm, int a);
/* Make slot (mm, a) hold a page of its own that may be written (fault, COW, unshare). */
int cm_make_writable(struct cm_model *md, int mm, int a);
/* Read fault: map something (the zero page for private memory never written). */
void cm_read_fault(struct cm_model *md, int mm, int a);
void cm_unmap_slot(struct cm_model *md, int mm, int a);
void cm_fork(struct cm_model *md, int parent, int child);
void cm_truncate(struct cm_model *md, int obj, long size);
/* The state's canonical form: equal strings for states no later operation tells apart. */
void cm_canon(struct cm_model *md, char *buf, size_t len);

#endif /* PM_COMMUTER_MODEL_H */
