// SPDX-License-Identifier: MIT
/*
 * truncate.c - taking pages out of a shmem or hugetlb object and out of every mapping of them:
 * pm_shmem_truncate() and the hole MADV_REMOVE punches (pm__shmem_punch_hole(), Linux's
 * shmem_fallocate and hugetlbfs_punch_hole), as Linux's mm/truncate.c with its
 * unmap_mapping_range. It sits in the address-space layer because it needs both halves below
 * the faults: the object's cache (src/shmem/) and the zap of each VMA on the object's i_mmap
 * (zap.c).
 *
 * Against a racing fault, truncate keeps three rules whose interleavings are argued at the
 * top of fault/shmem.c, the other side: the size is stored with a full barrier before any
 * page leaves the cache; a page leaves the cache (PG_shmem cleared under tree_lock) before
 * the zap; and a full barrier separates the two, pairing with the fault's barrier under the
 * PTL. Pinned pages live on until their last unpin: truncation drops only the cache's and the
 * mappings' references.
 *
 * Locks, outermost first: truncate_lock > i_mmap_lock > PTL > tree_lock > a leaf's lock >
 * limit.lock.
 */
#include "mm/mm.h"

/*
 * Zap the object's pages [@first, @end) from every mapping: with @even_cows, private COW
 * copies too (truncation); without, only the object's own pages (a hole punched, as Linux's
 * unmap_mapping_range(..., 0) keeps private copies).
 */
static void unmap_mapping_range(struct pm_shmem *f, unsigned long first, unsigned long end,
				bool even_cows)
{
	struct pm_list *pos;

	pm__shmem_map_lock(f);
	pm_list_for_each(pos, &f->i_mmap) {
		struct pm_vma *vma = pm_list_entry(pos, struct pm_vma, shared);
		unsigned long npages = (vma->end - vma->start) >> PAGE_SHIFT;
		unsigned long start, stop;

		if (vma->pgoff + npages <= first || vma->pgoff >= end)
			continue;
		start = vma->start + (first > vma->pgoff ? (first - vma->pgoff) << PAGE_SHIFT : 0);
		stop = end - vma->pgoff < npages ? vma->start + ((end - vma->pgoff) << PAGE_SHIFT) :
						   vma->end;
		if (even_cows)
			pm__zap_vma_range(vma, start, stop);
		else
			pm__zap_file_range(vma->mm, start, stop);
	}
	pm__shmem_map_unlock(f);
}

/*
 * Zero the bytes from @pos to the end of its page, if that page is in the cache: what lies
 * beyond the size must read as zeros when the object grows again (truncate_inode_partial_folio).
 */
static void zero_partial_page(struct pm_shmem *f, size_t pos)
{
	struct pm_folio *folio;
	size_t off = pos & ~PAGE_MASK;

	if (!off)
		return;
	folio = pm__shmem_lookup(f, pos >> PAGE_SHIFT);
	if (folio) {
		memset((char *)page_address(f->m, &folio->page) + off, 0, PAGE_SIZE - off);
		folio_put(folio);
	}
}

/* Somebody holds @f's truncate_lock (a mutex records no owner: that much can be checked). */
#define truncate_assert_held(f) pm_assert(pthread_mutex_trylock(&(f)->truncate_lock) == EBUSY)

/* Take cache pages [@first, @end) out of @f's cache, uncharge its limit (a hugetlb object
 * has none) and drop the cache's references. Context: truncate_lock. */
static void cache_remove(struct pm_shmem *f, unsigned long first, unsigned long end)
{
	struct pm_folio *batch[64];
	unsigned n;

	truncate_assert_held(f);
	do {
		n = pm__shmem_remove_from(f, first, end, batch, ARRAY_SIZE(batch));
		if (n && f->max_pages)
			pm__shmem_limit_uncharge(f, n);
		for (unsigned i = 0; i < n; i++)
			folio_put(batch[i]);
	} while (n == ARRAY_SIZE(batch));
}

/*
 * Take the object's pages [@first, @end) out of its cache and then out of every mapping
 * (@even_cows: private copies too). Pinned pages live on until their last unpin. The barrier
 * orders the PG_shmem clears before the zap's reads of the page tables; it pairs with the one
 * in shmem_map() (a fault that published a table we do not see must see the clear:
 * store-buffering, which the locks alone do not forbid in C11). Context: truncate_lock.
 */
static void remove_pages(struct pm_shmem *f, unsigned long first, unsigned long end,
			 bool even_cows)
{
	truncate_assert_held(f);
	cache_remove(f, first, end);
	pm_smp_mb();
	unmap_mapping_range(f, first, end, even_cows);
}

/* A hugetlb object's 2 MiB pages [@first, @end) out of its cache, and with @unreserve the
 * reservations of the pages never faulted released too (truncation: hugetlb_unreserve_pages
 * to the end; a hole punched keeps them, as Linux's remove_inode_hugepages does for pages it
 * did not find). Context: truncate_lock. */
static void remove_hugetlb_pages(struct pm_shmem *f, unsigned long first, unsigned long end,
				 bool unreserve)
{
	truncate_assert_held(f);
	cache_remove(f, first, end);
	if (unreserve)
		pm__shmem_hugetlb_unreserve_from(f, first, end);
	pm_smp_mb(); /* pairs with the barrier in hugetlb_map_shared() (fault/hugetlb_fault.c) */
}

/*
 * A hugetlb object: sizes in whole 2 MiB pages, cache indices in 2 MiB units. The same steps
 * as below, with the reservations past the new size released - whatever the old size was:
 * Linux's hugetlb_vmtruncate runs for every size change, growing or not, and its
 * hugetlb_unreserve_pages drops the shared reservations a mapping past the end made.
 * hugetlb_mutex orders the size against a fault filling a hole (shmem/hugetlbfs.c), and the
 * PMD lock and the barriers order PG_shmem against the mapping, as in (a) and (b) above with
 * the PMD lock as the PTL.
 */
static int hugetlb_truncate(struct pm_shmem *f, size_t size)
{
	unsigned long new_hp = size >> PMD_SHIFT;

	if (size & ~PMD_MASK)
		return -EINVAL;
	pthread_mutex_lock(&f->truncate_lock);
	pthread_mutex_lock(&f->hugetlb_mutex);
	atomic_store_mb(&f->xsize, size);
	pthread_mutex_unlock(&f->hugetlb_mutex);
	remove_hugetlb_pages(f, new_hp, ULONG_MAX, true);
	unmap_mapping_range(f, new_hp << HPAGE_PMD_ORDER, ULONG_MAX, true);
	pthread_mutex_unlock(&f->truncate_lock);
	return 0;
}

int pm_shmem_truncate(struct pm_shmem *f, size_t size)
{
	unsigned long new_pages, old_pages;
	size_t old_size;

	if (unlikely(!f || f->dead) || size > PM_SHMEM_MAX_BYTES)
		return -EINVAL;
	if (f->hugetlb)
		return hugetlb_truncate(f, size);
	pthread_mutex_lock(&f->truncate_lock);
	old_size = atomic_load_relaxed(&f->xsize);
	old_pages = shmem_size_pages(f);
	new_pages = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	atomic_store_mb(&f->xsize, size);
	if (size != old_size)
		zero_partial_page(f, min(size, old_size));
	if (new_pages >= old_pages) {
		if (new_pages > old_pages && !f->internal)
			pm__shmem_cache_grow(f, new_pages); /* interior nodes ahead (shmem/cache.c) */
		pthread_mutex_unlock(&f->truncate_lock);
		return 0;
	}
	remove_pages(f, new_pages, ULONG_MAX, true);
	pthread_mutex_unlock(&f->truncate_lock);
	return 0;
}

/* Zero 4 KiB pages [@first, @end) of one cached 2 MiB page of hugetlb object @f, if it is
 * there. Context: truncate_lock. */
static void hugetlb_zero_partial(struct pm_shmem *f, unsigned long first, unsigned long end)
{
	struct pm_folio *folio;

	truncate_assert_held(f);
	if (first >= end)
		return;
	folio = pm__shmem_lookup(f, first >> HPAGE_PMD_ORDER);
	if (folio) {
		memset((char *)page_address(f->m, &folio->page) +
			       ((first & (HPAGE_PMD_NR - 1)) << PAGE_SHIFT),
		       0, (end - first) << PAGE_SHIFT);
		folio_put(folio);
	}
}

/**
 * pm__shmem_punch_hole() - fallocate(PUNCH_HOLE | KEEP_SIZE) of pages [@first, @end): what
 * MADV_REMOVE does. The size stays; the pages leave the cache and every mapping, and read as
 * zeros afterwards. Private COW copies stay, as Linux's shmem_fallocate keeps them. hugetlbfs,
 * as Linux's hugetlbfs_punch_hole: the inner whole 2 MiB pages leave the cache and every
 * mapping, private copies too, and the reservations of pages never faulted stay; the parts of
 * the pages at either end are zeroed in place (hugetlbfs_zero_partial_page).
 * Context: any, but with no mm's lock: the caller dropped its own, as Linux's madvise_remove
 * drops mmap_lock around vfs_fallocate (the zaps take the i_mmap lock).
 */
void pm__shmem_punch_hole(struct pm_shmem *f, unsigned long first, unsigned long end)
{
	pthread_mutex_lock(&f->truncate_lock);
	if (f->hugetlb) {
		unsigned long hfirst = ALIGN_UP(first, HPAGE_PMD_NR) >> HPAGE_PMD_ORDER;
		unsigned long hend = (end & ~(unsigned long)(HPAGE_PMD_NR - 1)) >> HPAGE_PMD_ORDER;

		if (first & (HPAGE_PMD_NR - 1))
			hugetlb_zero_partial(f, first, min(end, ALIGN_UP(first + 1, HPAGE_PMD_NR)));
		if ((end & (HPAGE_PMD_NR - 1)) && hend >= hfirst)
			hugetlb_zero_partial(f, end & ~(unsigned long)(HPAGE_PMD_NR - 1), end);
		if (hfirst < hend) {
			remove_hugetlb_pages(f, hfirst, hend, false);
			unmap_mapping_range(f, hfirst << HPAGE_PMD_ORDER, hend << HPAGE_PMD_ORDER,
					    true);
		}
	} else if (first < end) {
		remove_pages(f, first, end, false);
	}
	pthread_mutex_unlock(&f->truncate_lock);
}
