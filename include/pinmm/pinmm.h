/* SPDX-License-Identifier: MIT */
/*
 * pinmm/pinmm.h - the whole public API of pinmm, a user-space implementation of the Linux
 * memory-management core that makes page pinning scale.
 *
 * Conventions: int/long calls return 0 (or a count) on success and -errno on failure;
 * constructors return NULL and set errno. Every call is thread-safe unless its comment says
 * otherwise, and threads need no registration.
 *
 * NULL handles: every call given a NULL struct pm_machine, pm_mm or pm_shmem handle answers
 * without touching anything: -EINVAL from int/long calls, NULL with errno EINVAL from
 * constructors (pm_mm_create, pm_mm_fork, pm_shmem_create, pm_umem_get), 0 from counts and
 * queries (pm_machine_free_pages, pm_shmem_size, pm_mm_has_pinned, ...), NULL from
 * pm_mm_machine and pm_pfn_to_page, a zeroed output from pm_machine_stats, and nothing from
 * void calls. A NULL page, page array or registration is ignored by the release calls.
 */
#ifndef PINMM_PINMM_H
#define PINMM_PINMM_H

#include <pinmm/types.h>
#include <pinmm/machine.h>
#include <pinmm/mm.h>
#include <pinmm/shmem.h>
#include <pinmm/gup.h>
#include <pinmm/migrate.h>
#include <pinmm/consumers.h>

#endif /* PINMM_PINMM_H */
