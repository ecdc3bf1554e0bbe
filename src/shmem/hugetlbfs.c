// SPDX-License-Identifier: MIT
/*
 * hugetlbfs.c - hugetlbfs-like shmem objects (memfd MFD_HUGETLB, and the internal object behind
 * each anonymous PM_MAP_HUGETLB mapping, shared or private, as hugetlb_file_setup makes one):
 * 2 MiB pages from the machine's pool, and the reservations of shared mappings, which belong
 * to the object (Linux's inode resv_map). A private mapping's pages are anonymous and its
 * reservations its own (mem/hugetlb_pool.c); its object's i_mmap list is how the mapping's owner
 * finds its fork children (fault/hugetlb_fault.c, unmap_ref_private).
 *
 * The page cache of such an object holds one folio per 2 MiB page, at index = file offset /
 * 2 MiB, with folio->index the same. Sizes are multiples of 2 MiB.
 *
 * Reservations: bit i of f->hresv set means a pool page is reserved for page i of the object
 * and page i is not in the cache. A shared mmap reserves every page of its range that has
 * neither (hugetlb_reserve_pages: region_chg + region_add); the fault that adds page i to the
 * cache consumes its bit; truncation (to any size: hugetlb_vmtruncate) and the object's end
 * release the bits past the size. A shared mapping's unmap releases nothing: the bits stay
 * with the object (hugetlb_vm_op_close returns only a private owner's).
 *
 * hugetlb_mutex serialises all of that per object - the fault that fills a page, mmap's
 * reservation, truncation's release - as Linux's hugetlb_fault_mutex does per (object, index):
 * so "not in the cache and not reserved" cannot change under mmap, and two faults on one hole
 * never both allocate. Lookups of present pages do not take it (pm__shmem_lookup is lockless).
 * Lock order: truncate_lock > hugetlb_mutex > tree_lock > hugetlb_lock.
 */
#include "shmem/shmem.h"

#define BITS_PER_LONG (8 * sizeof(unsigned long))

static bool resv_test(struct pm_shmem *f, unsigned long i)
{
	return i < f->hresv_nr && (f->hresv[i / BITS_PER_LONG] & (1UL << (i % BITS_PER_LONG)));
}

static void resv_clear(struct pm_shmem *f, unsigned long i)
{
	if (i < f->hresv_nr)
		f->hresv[i / BITS_PER_LONG] &= ~(1UL << (i % BITS_PER_LONG));
}

/* Make room for bits [0, @nr). Context: hugetlb_mutex. Return: 0 or -ENOMEM. */
static int resv_grow(struct pm_shmem *f, unsigned long nr)
{
	size_t old_words = (f->hresv_nr + BITS_PER_LONG - 1) / BITS_PER_LONG;
	size_t words = (nr + BITS_PER_LONG - 1) / BITS_PER_LONG;
	unsigned long *map;

	if (nr <= f->hresv_nr)
		return 0;
	if (words > old_words) {
		if (pm__should_fail(f->m) || !(map = realloc(f->hresv, words * sizeof(*map))))
			return -ENOMEM;
		memset(map + old_words, 0, (words - old_words) * sizeof(*map));
		f->hresv = map;
	}
	f->hresv_nr = nr;
	return 0;
}

static bool in_cache(struct pm_shmem *f, unsigned long i)
{
	bool present;

	pm_rcu_read_lock();
	present = pm__shmem_peek(f, i) != NULL;
	pm_rcu_read_unlock();
	return present;
}

/**
 * pm__shmem_hugetlb_reserve() - reserve the pages [@first, @first + @nr) of @f that are
 * neither in the cache nor reserved already: a shared hugetlb mmap (@credit: reservations the
 * caller gives back next, pm__hugetlb_reserve_credit()).
 * Return: 0, or -ENOMEM (the pool cannot cover them; nothing reserved).
 */
int pm__shmem_hugetlb_reserve(struct pm_shmem *f, unsigned long first, unsigned long nr,
			      unsigned long credit)
{
	unsigned long need = 0;
	int err;

	pthread_mutex_lock(&f->hugetlb_mutex);
	err = resv_grow(f, first + nr);
	if (err)
		goto out;
	for (unsigned long i = first; i < first + nr; i++)
		need += !resv_test(f, i) && !in_cache(f, i);
	if (!pm__hugetlb_reserve_credit(f->m, need, credit)) {
		err = -ENOMEM;
		goto out;
	}
	for (unsigned long i = first; i < first + nr; i++)
		if (!resv_test(f, i) && !in_cache(f, i))
			f->hresv[i / BITS_PER_LONG] |= 1UL << (i % BITS_PER_LONG);
out:
	pthread_mutex_unlock(&f->hugetlb_mutex);
	return err;
}

/*
 * pm__shmem_hugetlb_extend() - a writable mapping reaching past the object's end grows it to
 * @end, as hugetlbfs_file_mmap grows i_size; it never shrinks. Under the locks truncation
 * takes, so a size change is never lost between the two.
 */
void pm__shmem_hugetlb_extend(struct pm_shmem *f, size_t end)
{
	pm_assert(f->hugetlb && !(end & ~PMD_MASK) && end <= PM_SHMEM_MAX_BYTES);
	pthread_mutex_lock(&f->truncate_lock);
	pthread_mutex_lock(&f->hugetlb_mutex);
	if (atomic_load_relaxed(&f->xsize) < end)
		atomic_store_mb(&f->xsize, end);
	pthread_mutex_unlock(&f->hugetlb_mutex);
	pthread_mutex_unlock(&f->truncate_lock);
}

/* Release the reservations of pages [@first, @end): truncation, a hole punched, or the
 * object's end (hugetlb_unreserve_pages). */
void pm__shmem_hugetlb_unreserve_from(struct pm_shmem *f, unsigned long first, unsigned long end)
{
	unsigned long n = 0;

	pthread_mutex_lock(&f->hugetlb_mutex);
	for (unsigned long i = first; i < min(end, f->hresv_nr); i++)
		if (resv_test(f, i)) {
			resv_clear(f, i);
			n++;
		}
	pthread_mutex_unlock(&f->hugetlb_mutex);
	if (n)
		pm__hugetlb_unreserve(f->m, n);
}

/**
 * pm__shmem_hugetlb_get_folio() - the 2 MiB page @hidx of @f with a reference, filling a hole
 * from the pool: with the page's reservation if it has one, else with a page nobody was
 * promised (an object grown by truncation after it was mapped).
 * Return: the folio, or NULL with *@err -EFAULT (beyond the size, or the pool is empty:
 * SIGBUS) or -ENOMEM.
 */
struct pm_folio *pm__shmem_hugetlb_get_folio(struct pm_shmem *f, unsigned long hidx, int *err)
{
	struct pm_folio *folio;
	bool reserved;
	int ret;

	folio = pm__shmem_lookup(f, hidx);
	if (folio)
		return folio;
	pthread_mutex_lock(&f->hugetlb_mutex);
	if (hidx >= atomic_load_acquire(&f->xsize) >> PMD_SHIFT) {
		*err = -EFAULT;
		folio = NULL;
		goto out;
	}
	folio = pm__shmem_lookup(f, hidx);
	if (folio)
		goto out;
	reserved = resv_test(f, hidx);
	folio = pm__hugetlb_alloc(f->m, reserved);
	if (!folio) {
		*err = -EFAULT;
		goto out;
	}
	page_set(&folio->page, PG_dirty);
	folio->page.mapping = f;
	folio->page.index = hidx;
	folio_get_refs(folio, 1); /* one for the cache, one for the caller */
	ret = pm__shmem_add(f, hidx, folio);
	if (ret) {
		/* Only memory for the tree can fail here (the mutex excludes a racing insert). */
		folio->page.mapping = NULL;
		folio_put_refs(folio, 2);
		if (reserved)
			pm__hugetlb_reserve(f->m, 1); /* the page just came back: always there */
		*err = ret == -EEXIST ? -EAGAIN : ret;
		folio = NULL;
		goto out;
	}
	resv_clear(f, hidx);
	count_event(f->m, SHMEM_ALLOCS, 1);
out:
	pthread_mutex_unlock(&f->hugetlb_mutex);
	return folio;
}
