/* SPDX-License-Identifier: MIT */
/*
 * shmem/shmem.h - the shmem object (its page cache, size and limit) and what crosses the files
 * of shmem/.
 */
#ifndef PM_SHMEM_SHMEM_H
#define PM_SHMEM_SHMEM_H

#include "mem/mem.h"
#include "mem/folio_hot.h"

/* Some object's i_mmap lock (this thread's count of them, debug builds). */
#define i_mmap_assert_held() pm_assert(pm__i_mmap_held > 0)

/*
 * struct pm_shmem - a memfd-like object: a page cache (a radix tree of folios with lockless
 * lookups), a size, an optional exact limit, and the list of VMAs mapping it. The object sits
 * below the address spaces (src/shmem/: object.c, cache.c, limit.c); its fault path is
 * fault/shmem.c, whose top comment gives the locking, and its truncation mm/truncate.c.
 */
struct pm_shmem_node;
struct pm_shmem_limit {
	_Atomic long *xpcpu;		/* per-CPU reserved pages (nr_cpus slots, 64 B apart) */
	struct pm_spinlock lock;	/* the global pool */
	long pool;			/* pages neither used nor reserved; under lock */
};
struct pm_shmem {
	struct pm_machine *m;
	_Atomic long xrefs;		/* creator + one per VMA */
	_Atomic unsigned long xsize;	/* bytes; written under truncate_lock */
	unsigned long max_pages;	/* 0 = unlimited */
	bool internal;			/* made by PM_MAP_SHARED|PM_MAP_ANONYMOUS */
	bool hugetlb;			/* 2 MiB pages from the pool; cache indices in 2 MiB units */
	bool dead;			/* emptied by pm_machine_destroy: calls fail, the last
					 * pm_shmem_put frees it (as pm__mm_bad) */
	struct pm_shmem_node *_Atomic xroot;	/* RCU-protected; read by every lookup and
						 * insert, written only when the tree grows:
						 * not on tree_lock's line */

	struct pm_spinlock tree_lock __cacheline_aligned; /* page-cache writers */

	/* The 2010 seed's inode info lock: PM_KNOB_SHMEM_LOCK_TWICE's faults take it twice per
	 * new page, around the lookup and around the insert. Modern faults do not take it. */
	struct pm_spinlock info_lock __cacheline_aligned;
	struct pm_shmem_limit limit;	/* max_pages accounting (when max_pages != 0) */

	pthread_mutex_t i_mmap_lock __cacheline_aligned; /* the mapping list and VMA bounds */
	struct pm_list i_mmap;
	pthread_mutex_t truncate_lock;	/* serialises size changes */
	/* hugetlb objects (shmem/hugetlbfs.c): Linux's hugetlb_fault_mutex and the object's
	 * reservation map - bit i set: 2 MiB page i is reserved in the pool, not yet in the
	 * cache. Under hugetlb_mutex. */
	pthread_mutex_t hugetlb_mutex;
	unsigned long *hresv;
	unsigned long hresv_nr;		/* bits in hresv */
	struct pm_list link;		/* on machine->shmems, under machine->lock */
};

#define PM_SHMEM_MAX_BYTES (1UL << 46)

/* Pages the object's size covers: a partial last page counts. */
static inline unsigned long shmem_size_pages(struct pm_shmem *f)
{
	return (atomic_load_acquire(&f->xsize) + PAGE_SIZE - 1) >> PAGE_SHIFT;
}

/* // shmem/object.c */
__hidden void pm__shmem_get(struct pm_shmem *f);
__hidden void pm__shmem_kill(struct pm_shmem *f);
__hidden struct pm_shmem *pm__shmem_create_internal(struct pm_machine *m, size_t size);
__hidden struct pm_shmem *pm__shmem_create_internal_hugetlb(struct pm_machine *m, size_t size);

/* // shmem/hugetlbfs.c */
__hidden int pm__shmem_hugetlb_reserve(struct pm_shmem *f, unsigned long first,
				       unsigned long nr, unsigned long credit);
__hidden struct pm_folio *pm__shmem_hugetlb_get_folio(struct pm_shmem *f, unsigned long hidx,
						      int *err);
__hidden void pm__shmem_hugetlb_unreserve_from(struct pm_shmem *f, unsigned long first,
					       unsigned long end);
__hidden void pm__shmem_hugetlb_extend(struct pm_shmem *f, size_t end);

/* // shmem/cache.c */
__hidden struct pm_folio *pm__shmem_peek(struct pm_shmem *f, unsigned long index);
__hidden unsigned long pm__shmem_nr_pages(struct pm_shmem *f);
__hidden struct pm_folio *pm__shmem_lookup(struct pm_shmem *f, unsigned long index);
__hidden int pm__shmem_add(struct pm_shmem *f, unsigned long index, struct pm_folio *folio);
__hidden bool pm__shmem_delete(struct pm_shmem *f, unsigned long index, struct pm_folio *folio);
__hidden bool pm__shmem_migrate_folio(struct pm_shmem *f, unsigned long index,
				      struct pm_folio *old, struct pm_folio *new, int expected);
__hidden unsigned pm__shmem_remove_from(struct pm_shmem *f, unsigned long start,
					unsigned long end, struct pm_folio **batch, unsigned max);
__hidden void pm__shmem_cache_fini(struct pm_shmem *f);
__hidden void pm__shmem_cache_grow(struct pm_shmem *f, unsigned long pages);

/* // shmem/limit.c */
__hidden int pm__shmem_limit_init(struct pm_shmem *f);
__hidden void pm__shmem_limit_fini(struct pm_shmem *f);
__hidden bool pm__shmem_limit_charge(struct pm_shmem *f);
__hidden void pm__shmem_limit_uncharge(struct pm_shmem *f, long n);


static inline void pm__shmem_map_lock(struct pm_shmem *f)
{
	pthread_mutex_lock(&f->i_mmap_lock);
	PM_I_MMAP_HELD(1);
}

static inline void pm__shmem_map_unlock(struct pm_shmem *f)
{
	PM_I_MMAP_HELD(-1);
	pthread_mutex_unlock(&f->i_mmap_lock);
}

static inline struct pm_list *pm__shmem_i_mmap(struct pm_shmem *f)
{
	return &f->i_mmap;
}

#endif /* PM_SHMEM_SHMEM_H */
