/* SPDX-License-Identifier: MIT */
/*
 * pinmm/shmem.h - memfd-like shared memory objects.
 *
 * An object holds a page cache (index -> page) with lockless lookups. It is mapped with
 * pm_mmap(..., PM_MAP_SHARED, f, offset) (every mapping, in any address space, sees the same
 * pages) or PM_MAP_PRIVATE (reads see the object, writes copy into anonymous pages).
 * PM_MAP_SHARED|PM_MAP_ANONYMOUS makes an internal object, as Linux does.
 *
 * Synchronization: faults on any mapping, pm_shmem_truncate() and pins may all race; truncate
 * unmaps what it removes from every mapping, private copies included, and pinned pages stay
 * valid until unpinned.
 */
#ifndef PINMM_SHMEM_H
#define PINMM_SHMEM_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * pm_shmem_create() - a new object of @size bytes (its pages cover the size rounded up to a
 * page; bytes past the size in the last page read as zeros).
 * @max_bytes: most bytes of pages the object may hold, like tmpfs size=; 0 = unlimited. The
 *	limit is exact under concurrent faults; a fault over it fails like SIGBUS.
 *
 * Return: the object holding one reference, or NULL with errno EINVAL or ENOMEM.
 */
PM_API struct pm_shmem *pm_shmem_create(struct pm_machine *m, size_t size, size_t max_bytes);

/**
 * pm_shmem_create_hugetlb() - a hugetlbfs-like object (memfd MFD_HUGETLB) of @size bytes,
 * backed by 2 MiB pages of the machine's hugetlb pool. @size, and every size given to
 * pm_shmem_truncate() later, must be a multiple of 2 MiB. Mappings of it are hugetlb mappings
 * (2 MiB aligned offsets and fixed addresses; pages reserved per object range at mmap time).
 *
 * Return: the object holding one reference, or NULL with errno EINVAL or ENOMEM.
 */
PM_API struct pm_shmem *pm_shmem_create_hugetlb(struct pm_machine *m, size_t size);
/** pm_shmem_put() - drop the creator's reference; the last reference (mappings hold one
 * each) frees the object and its pages. */
PM_API void pm_shmem_put(struct pm_shmem *f);

/**
 * pm_shmem_truncate() - set the size in bytes, like ftruncate. Shrinking drops the pages
 * beyond the new size from the cache and from every mapping, and zeroes the tail of a partial
 * last page, so that growing again shows zeros there.
 * Return: 0, -EINVAL (size overflows, or is not a multiple of 2 MiB for a hugetlb object),
 * -ENOMEM.
 */
PM_API int pm_shmem_truncate(struct pm_shmem *f, size_t size);

/** pm_shmem_size() - the current size in bytes. */
PM_API size_t pm_shmem_size(struct pm_shmem *f);

/** pm_shmem_nr_pages() - 4 KiB pages the page cache holds now (512 per hugetlb page). */
PM_API unsigned long pm_shmem_nr_pages(struct pm_shmem *f);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_SHMEM_H */
