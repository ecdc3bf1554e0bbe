/* SPDX-License-Identifier: MIT */
/*
 * model.h - a reference model of pinmm's observable behaviour, the oracle of the differential
 * tests (issue 9). It knows nothing of frames, folios or page tables: per address space, each
 * page of a fixed window is mapped or not, with a protection, private or shared, anonymous or
 * backed by a shmem object at some page offset, and holds 4096 bytes.
 *
 *  - Private pages are the address space's own copies: fork copies them naively.
 *  - Shared pages are the object's pages: every mapping refers to the same struct mpage.
 *  - A get or pin reference holds a struct mpage, so a write through a pin is seen by whoever
 *    still maps that mpage, and a reference to a page that was unmapped keeps the old bytes.
 *
 * Where Linux decides by page identity (who keeps the page a reference holds when a COW is
 * broken) the model keeps one small piece of state per private page, the AnonExclusive bit of
 * Linux, in three values: exclusive, shared (after fork) or unknown. Every rule is written next
 * to the code that applies it in model.c. Where the model cannot know what Linux does, it
 * either marks a reference "uncertain" (its bytes are not compared any more) or answers
 * MODEL_UNSURE (the interpreter then does not run the operation at all).
 *
 * Hugetlb mappings (H1-H5 in model.c) are whole 2 MiB pages, faulted, copied on write and
 * forked 512 slots at a time; what the model cannot predict about them is MODEL_UNSURE or an
 * uncertain reference.
 *
 * Addresses are page indexes into the window [MODEL_BASE, MODEL_BASE + MODEL_WINDOW_PAGES
 * pages); the window holds three 2 MiB-aligned PMD regions so that THPs and PMD splits happen.
 */
#ifndef PM_TESTS_MODEL_H
#define PM_TESTS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_PAGE_SIZE 4096UL
#define MODEL_BASE 0x40000000UL /* 1 GiB: 2 MiB aligned, far from anything pinmm places */
#define MODEL_PMD_PAGES 512UL
#define MODEL_WINDOW_PAGES (3 * MODEL_PMD_PAGES)
#define MODEL_MAX_MMS 4
#define MODEL_MAX_OBJS 3
#define MODEL_OBJ_MAX_PAGES 256UL /* user objects: largest size and page offset used */
#define MODEL_MAX_GROUPS 6	  /* outstanding get/pin calls */
#define MODEL_GROUP_PAGES 16	  /* pages per get/pin call */

/* "Cannot predict": the interpreter skips the operation (never a real errno). */
#define MODEL_UNSURE (-100000L)

/* The AnonExclusive state of a private page (Linux's PG_anon_exclusive). */
enum model_excl {
	MX_EXCL,    /* only this address space may map it: a write reuses it in place */
	MX_SHARED,  /* COW-shared since a fork: a write copies it if anything else holds it */
	MX_UNKNOWN, /* may be either (a fork next to a pinned THP): references become uncertain */
};

struct mpage {
	int refs; /* holders: one slot or object index, plus every reference */
	int nref; /* references (gets and pins) among them */
	int npin; /* pins among those */
	uint8_t data[MODEL_PAGE_SIZE];
};

struct mobj {
	int refs;	    /* the creator's handle + one per mapped page of any address space */
	bool handle;	    /* the creator's reference is still held */
	bool internal;	    /* behind a MAP_SHARED|MAP_ANONYMOUS mapping */
	unsigned long size; /* pages */
	unsigned long max;  /* most pages it may hold, 0 = unlimited */
	unsigned long nr;   /* pages it holds */
	unsigned long cap;  /* length of pages[] */
	struct mpage **pages;
};

struct mslot {
	bool mapped, shared, hugepage, dontfork, wipeonfork;
	bool hugetlb;	     /* part of a 2 MiB hugetlb page (H1-H5 in model.c) */
	uint8_t prot;	     /* PM_PROT_* */
	uint8_t excl;	     /* enum model_excl, meaningful while priv != NULL */
	struct mobj *obj;    /* backing object, NULL = private anonymous */
	unsigned long pgoff; /* page index in obj */
	struct mpage *priv;  /* private page (anon, or a COW copy of obj's); NULL = none yet */
};

struct mmm {
	bool live;
	bool forked; /* a fork made it a parent or made it: its pages may be COW-shared */
	struct mslot slot[MODEL_WINDOW_PAGES];
};

enum mref_state {
	MREF_PAGE,	 /* holds mp: its bytes are what the reference reads */
	MREF_ZERO,	 /* the shared zero page: reads zeros forever */
	MREF_MAYBE_ZERO, /* just taken on a never-written private page: the zero page or a
			  * real (THP) page; the interpreter makes it MREF_ZERO or adopts it */
	MREF_UNCERTAIN,	 /* the model cannot tell which bytes it holds: never compared */
};

struct mref {
	struct mpage *mp;   /* MREF_PAGE, and kept (held) if it turns MREF_UNCERTAIN */
	uint8_t state;	    /* enum mref_state */
	bool priv;	    /* taken on a private (anonymous) page, not an object's */
	bool large;	    /* the frame is part of a large folio (told by the interpreter) */
	bool released;	    /* already given back */
	int mm;		    /* where it was taken */
	unsigned long page;
};

struct mgroup {
	bool live, pin, write;
	int n;
	struct mref ref[MODEL_GROUP_PAGES];
};

/* How often the model's subtler rules applied (coverage of the oracle, for the reports). */
enum model_event {
	MEV_COW_COPY_HELD,   /* R4: a COW-shared page held by a reference was copied on write */
	MEV_REFS_UNCERTAIN,  /* R4: references made uncertain (unknown exclusivity) */
	MEV_FORK_PINNED,     /* R5: a pinned private page copied for the child at fork */
	MEV_FORK_UNKNOWN,    /* R5: a page next to a pinned THP got unknown exclusivity */
	MEV_FILE_COW,	     /* R3: a private copy of an object's page */
	MEV_TRUNCATE_COW,    /* truncate dropped private copies */
	MEV_SIGBUS,	     /* R2: a fault beyond an object's end */
	MEV_LIMIT,	     /* R2: a fault beyond an object's limit */
	MEV_REF_ZERO,	     /* R7: a reference turned out to be the zero page */
	MEV_REF_ADOPTED,     /* R7: ... or a real page (a THP's), followed from then on */
	MEV_HUGETLB_FAULT,   /* H2: a 2 MiB hugetlb page faulted in whole */
	MEV_HUGETLB_FORK,    /* H4: a private hugetlb page COW-shared (or copied, pinned) at fork */
	MEV_HUGETLB_UNSURE,  /* H1: an operation that would cut a hugetlb page, not predicted */
	MEV_NR
};

struct model {
	unsigned long events[MEV_NR];
	struct mmm mm[MODEL_MAX_MMS];
	struct mobj *obj[MODEL_MAX_OBJS]; /* by handle slot; NULL after put */
	struct mgroup group[MODEL_MAX_GROUPS];
	long nr_mpages; /* model pages alive: 0 after model_fini(), or the model leaks */
	long nr_objs;
};

/* What a get/pin call asks for, in the model's words. */
struct model_gup {
	bool pin, write, force, longterm;
	bool nopages; /* get_user_pages with pages == NULL: fault in, keep no reference */
};

struct model *model_new(void);
/*
 * model_free() - drop every reference, address space and object, and free the model.
 * Return: model pages and objects that were still alive after that (0, or the model leaks).
 */
long model_free(struct model *md);

int model_mm_create(struct model *md); /* the slot, or -1 if all are in use */
void model_mm_destroy(struct model *md, int mm);
int model_fork(struct model *md, int parent); /* the child's slot, or -1 */

/* Page-range operations. Ranges are clamped to the window by the caller. */
long model_mmap(struct model *md, int mm, unsigned long page, unsigned long npages, int prot,
		int flags, int obj, unsigned long pgoff);
int model_munmap(struct model *md, int mm, unsigned long page, unsigned long npages);
/*
 * model_hugetlb_mmap() - a MAP_FIXED hugetlb mapping of whole 2 MiB pages (@page and @npages
 * multiples of MODEL_PMD_PAGES): private anonymous (MAP_HUGETLB), or @shared, of a new
 * hugetlbfs object of its size that only mappings hold. Return: 0, or MODEL_UNSURE.
 */
long model_hugetlb_mmap(struct model *md, int mm, unsigned long page, unsigned long npages,
			int prot, bool shared);
int model_mprotect(struct model *md, int mm, unsigned long page, unsigned long npages, int prot);
int model_madvise(struct model *md, int mm, unsigned long page, unsigned long npages,
		  int advice);
/* model_access() - @off is a byte offset from the window base. */
long model_access(struct model *md, int mm, unsigned long off, uint8_t *buf, size_t len,
		  bool write);
int model_fault(struct model *md, int mm, unsigned long page, bool write);
/* model_migrate() - pm_migrate_range() changes no byte: 0, or -ENOMEM for a hole. */
int model_migrate(struct model *md, int mm, unsigned long page, unsigned long npages);

/*
 * model_gup() - take @nr references from @page into group @g (which must be free).
 * Return: pages taken, -errno when none, or MODEL_UNSURE (nothing changed).
 */
long model_gup(struct model *md, int mm, unsigned long page, unsigned long nr,
	       const struct model_gup *req, int g);
void model_release(struct model *md, int g, int idx); /* idx < 0: every reference left */
/*
 * model_adopt() - reference @idx of group @g (MREF_MAYBE_ZERO) is a real page, not the zero
 * page: a never-written page of a THP. The model then follows it as the address space's page
 * (zeros), exclusive if pinned or if no fork ever touched that address space, else unknown.
 */
void model_adopt(struct model *md, int g, int idx);
/* model_ref_bytes() - what reference idx of group g reads, or NULL if uncertain. */
const uint8_t *model_ref_bytes(struct model *md, int g, int idx);
/* model_ref_write() - write through a pinned page (group g must be a write pin). */
void model_ref_write(struct model *md, int g, int idx, unsigned off, const uint8_t *src,
		     size_t len);

int model_shmem_create(struct model *md, int obj, unsigned long pages, unsigned long max);
int model_shmem_truncate(struct model *md, int obj, unsigned long pages);
void model_shmem_put(struct model *md, int obj);

extern const uint8_t model_zero_page[MODEL_PAGE_SIZE];

#endif /* PM_TESTS_MODEL_H */
