/* SPDX-License-Identifier: MIT */
/*
 * pinmm/migrate.h - page migration (Linux's mm/migrate.c, as mbind(MPOL_MF_MOVE_ALL) and
 * move_pages() use it), the call that shows what pin accounting is for: a pinned page is
 * never moved.
 */
#ifndef PINMM_MIGRATE_H
#define PINMM_MIGRATE_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * pm_migrate_range() - move the folios mapped in [addr, addr + len) of mm to new frames in
 * target: PM_MIGRATE_ANYWHERE, PM_MIGRATE_AWAY_MOVABLE (outside the movable zone,
 * pm_config.movable_bytes) or PM_MIGRATE_TO_MOVABLE (inside it).
 *
 * Pages not present, zero pages, and folios already where the target wants them are skipped.
 * A moved folio's data, dirty state, writability and AnonExclusive state move with it; the
 * old frame is freed. Faults on a page being moved wait for it; GUP-fast falls back to the
 * slow path, which waits.
 *
 * A page-cache (shmem) folio moves with every mapping of it, in every mm (found through the
 * object's mappings, the rmap of file pages), and is replaced in the object's cache.
 *
 * Refused, as Linux refuses them, and counted as not moved (pm_stats.pgmigrate_fail, and
 * migrate_pinned_skips): a pinned AnonExclusive page, at unmap; a small anonymous page whose
 * refcount after unmap shows another reference (a get, a pin, a transient one); a page-cache
 * folio that cannot be frozen at its expected count (the cache's reference and the
 * migration's) after every mapping was unmapped - meanwhile its mappings are migration
 * entries, which pm_pagemap shows as not present. Refusals leave the mappings as they were,
 * and the data with them. Transient failures are retried, 10 times in all
 * (NR_MAX_MIGRATE_PAGES_RETRY).
 *
 * A THP moves whole to a free 2 MiB block of the target; a PMD-mapped one is split into
 * PTEs first (pinmm has no PMD migration entry, Linux keeps the PMD) and stays PTE-mapped.
 * A pinned THP is refused before its mapping changes.
 *
 * A THP with no free 2 MiB block in the target is split (Linux's split on -ENOMEM) and its
 * pages moved one by one; each of the range's pages not moved counts. A hugetlb folio moves
 * whole to a free pool page in the target zones (none: not moved; pinmm has no surplus
 * hugetlb pages); a hugetlbfs page with every mapping of it, in every mm.
 *
 * pinmm's limits, where the Linux contract is wider (each folio so left counts as not
 * moved, in pgmigrate_fail): an anonymous folio mapped by other mms too (shared by fork)
 * is refused, since pinmm keeps no anonymous rmap to find its other mappings; a THP only
 * partly mapped here is not moved.
 *
 * Context: takes the mm's lock for read over the range (mmap_lock, or the range design's
 * ranges); may sleep.
 * Return: the number of folios that could not be moved (0: all moved), or -EINVAL (NULL or
 * dead mm, unaligned addr, unknown target), -ENOMEM (no VMA covers part of the range, or it
 * passes the top of the address space), -ENOSPC (the target has no free frame at all, nor a
 * free hugetlb pool page).
 * len 0 (after rounding up to pages): 0.
 */
PM_API long pm_migrate_range(struct pm_mm *mm, unsigned long addr, unsigned long len,
			     int target);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_MIGRATE_H */
