// SPDX-License-Identifier: MIT
/*
 * object.c - a shmem object's life: creation (public, or internal for MAP_SHARED|MAP_ANONYMOUS;
 * tmpfs-like or hugetlbfs-like), references (the creator's and one per VMA), size, and
 * destruction with its page cache and, for hugetlbfs, its reservations (hugetlbfs.c).
 *
 * Locks, outermost first: truncate_lock > i_mmap_lock > PTL > tree_lock > info_lock
 * (LOCK_TWICE: info_lock > tree_lock, never with a PTL held) > limit.lock. The page cache is
 * cache.c, the exact limit limit.c; the fault path is fault/shmem.c, truncation
 * mm/truncate.c.
 */
#include "shmem/shmem.h"

static struct pm_shmem *shmem_alloc(struct pm_machine *m, size_t size, size_t max_bytes,
				    bool internal)
{
	struct pm_shmem *f;

	if (size > PM_SHMEM_MAX_BYTES || max_bytes > PM_SHMEM_MAX_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	if (pm__should_fail(m) || posix_memalign((void **)&f, PM_CACHELINE, sizeof(*f))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(f, 0, sizeof(*f));
	f->m = m;
	f->internal = internal;
	atomic_store_relaxed(&f->xrefs, 1);
	atomic_store_relaxed(&f->xsize, size);
	f->max_pages = ALIGN_UP(max_bytes, PAGE_SIZE) >> PAGE_SHIFT;
	pm_spin_init(&f->tree_lock);
	pm_spin_init(&f->info_lock);
	if (pm__shmem_limit_init(f)) {
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&f->i_mmap_lock, NULL);
	pthread_mutex_init(&f->truncate_lock, NULL);
	pthread_mutex_init(&f->hugetlb_mutex, NULL);
	pm__trace_object(f, sizeof(*f), "pm_shmem");
	pm_list_init(&f->i_mmap);
	pthread_mutex_lock(&m->lock);
	pm_list_add_tail(&f->link, &m->shmems);
	pthread_mutex_unlock(&m->lock);
	return f;
}

struct pm_shmem *pm_shmem_create(struct pm_machine *m, size_t size, size_t max_bytes)
{
	struct pm_shmem *f;

	if (unlikely(!m)) {
		errno = EINVAL;
		return NULL;
	}
	f = shmem_alloc(m, size, max_bytes, false);
	if (f)
		pm__shmem_cache_grow(f, shmem_size_pages(f)); /* interior nodes ahead (cache.c) */
	return f;
}

struct pm_shmem *pm__shmem_create_internal(struct pm_machine *m, size_t size)
{
	return shmem_alloc(m, size, 0, true);
}

/* A hugetlbfs object (shmem/hugetlbfs.c): 2 MiB pages from the machine's pool. */
struct pm_shmem *pm__shmem_create_internal_hugetlb(struct pm_machine *m, size_t size)
{
	struct pm_shmem *f = pm__shmem_create_internal(m, size);

	if (f)
		f->hugetlb = true;
	return f;
}

struct pm_shmem *pm_shmem_create_hugetlb(struct pm_machine *m, size_t size)
{
	struct pm_shmem *f;

	if (unlikely(!m) || (size & ~PMD_MASK)) {
		errno = EINVAL;
		return NULL;
	}
	f = shmem_alloc(m, size, 0, false); /* no nodes ahead: one index per 2 MiB */
	if (f)
		f->hugetlb = true;
	return f;
}

void pm__shmem_get(struct pm_shmem *f)
{
	atomic_add_relaxed(&f->xrefs, 1);
}

/* Everything of @f but the struct itself goes. */
static void shmem_teardown(struct pm_shmem *f)
{
	struct pm_machine *m = f->m;

	pm_assert(pm_list_empty(&f->i_mmap));
	pthread_mutex_lock(&m->lock);
	pm_list_del(&f->link);
	pthread_mutex_unlock(&m->lock);

	/* Nobody maps or references the object: no lockless readers remain. */
	if (f->hugetlb)
		pm__shmem_hugetlb_unreserve_from(f, 0, ULONG_MAX);
	pm__shmem_cache_fini(f);
	pm__shmem_limit_fini(f);
	pthread_mutex_destroy(&f->i_mmap_lock);
	pthread_mutex_destroy(&f->truncate_lock);
	pthread_mutex_destroy(&f->hugetlb_mutex);
	free(f->hresv);
	f->hresv = NULL;
}

/* pm_machine_destroy() under a live @f (its mappings gone already): empty it while the
 * machine is still there; the last reference frees the rest. */
void pm__shmem_kill(struct pm_shmem *f)
{
	pm_assert(pm_list_empty(&f->i_mmap));
	shmem_teardown(f);
	f->dead = true;
	f->m = NULL;
	atomic_store_relaxed(&f->xsize, 0);
}

void pm_shmem_put(struct pm_shmem *f)
{
	if (f && atomic_sub_mb(&f->xrefs, 1) == 1) {
		if (!f->dead)
			shmem_teardown(f);
		pm__trace_object_gone(f);
		free(f);
	}
}

size_t pm_shmem_size(struct pm_shmem *f)
{
	return f ? atomic_load_acquire(&f->xsize) : 0;
}

unsigned long pm_shmem_nr_pages(struct pm_shmem *f)
{
	if (!f || f->dead)
		return 0;
	return pm__shmem_nr_pages(f) << (f->hugetlb ? HPAGE_PMD_ORDER : 0);
}
