/* SPDX-License-Identifier: MIT */
/*
 * pinmm/types.h - constants and opaque types shared by every pinmm header.
 *
 * The vocabulary is Linux's on purpose: pm_page is struct page, pm_folio is struct folio,
 * pm_mm is struct mm_struct, and the flag values below are the Linux UAPI values, so a reader
 * who knows mm/ can read a pinmm program without a glossary.
 */
#ifndef PINMM_TYPES_H
#define PINMM_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every public symbol is exported with PM_API; everything else in the library is hidden. */
#define PM_API __attribute__((visibility("default")))

#define PM_PAGE_SHIFT 12
#define PM_PAGE_SIZE 4096
#define PM_PMD_SHIFT 21
#define PM_PMD_SIZE (1UL << PM_PMD_SHIFT)	/* one PMD leaf: a 2 MiB THP */
#define PM_HPAGE_PMD_NR 512			/* small pages in a PMD-mapped folio */

/* The user address space: [PM_USER_MIN, PM_TASK_SIZE), 48 bits, as x86-64 with 4 levels. */
#define PM_USER_MIN 0x1000UL
#define PM_TASK_SIZE 0x7ffffffff000UL

/* Protections (Linux PROT_* values). */
#define PM_PROT_NONE 0x0
#define PM_PROT_READ 0x1
#define PM_PROT_WRITE 0x2
#define PM_PROT_EXEC 0x4 /* kept (VM_EXEC) and reported; nothing executes */

/* mmap flags (Linux MAP_* values). */
#define PM_MAP_SHARED 0x01
#define PM_MAP_PRIVATE 0x02
#define PM_MAP_SHARED_VALIDATE 0x03	/* MAP_SHARED, and unknown flags are -EOPNOTSUPP */
#define PM_MAP_FIXED 0x10
#define PM_MAP_ANONYMOUS 0x20
#define PM_MAP_GROWSDOWN 0x0100		/* private anonymous only; faults below grow it */
#define PM_MAP_LOCKED 0x2000		/* VM_LOCKED with Linux's effects */
#define PM_MAP_NORESERVE 0x4000		/* hugetlb: no reservation; faults may SIGBUS */
#define PM_MAP_POPULATE 0x8000
#define PM_MAP_NONBLOCK 0x10000		/* cancels PM_MAP_POPULATE */
#define PM_MAP_STACK 0x20000		/* VM_NOHUGEPAGE (Linux 6.7+) */
#define PM_MAP_HUGETLB 0x40000		/* 2 MiB pages from the machine's hugetlb pool */
#define PM_MAP_FIXED_NOREPLACE 0x100000 /* extension: MAP_FIXED that fails with -EEXIST */

/* madvise advice (Linux MADV_* values). */
#define PM_MADV_DONTNEED 4
#define PM_MADV_FREE 8
#define PM_MADV_REMOVE 9
#define PM_MADV_DONTFORK 10
#define PM_MADV_DOFORK 11
#define PM_MADV_HUGEPAGE 14
#define PM_MADV_NOHUGEPAGE 15
#define PM_MADV_WIPEONFORK 18
#define PM_MADV_KEEPONFORK 19
#define PM_MADV_POPULATE_READ 22
#define PM_MADV_POPULATE_WRITE 23

/* pm_mremap flags (Linux MREMAP_* values). */
#define PM_MREMAP_MAYMOVE 1
#define PM_MREMAP_FIXED 2
#define PM_MREMAP_DONTUNMAP 4

/* pm_migrate_range targets. */
#define PM_MIGRATE_ANYWHERE 0	  /* a new frame in any zone */
#define PM_MIGRATE_AWAY_MOVABLE 1 /* a frame outside the movable zone */
#define PM_MIGRATE_TO_MOVABLE 2	  /* a frame in the movable zone */

/* pm_fault flags. */
#define PM_FAULT_WRITE 0x01

/* Handles. A NULL handle is answered with -EINVAL (or NULL, 0, nothing): see pinmm.h. */
struct pm_machine;	/* physical memory, allocator, counters, knobs */
struct pm_mm;		/* an address space */
struct pm_shmem;	/* a memfd-like shared memory object */
struct pm_page;		/* one 4 KiB frame's descriptor */
struct pm_folio;	/* 2^order contiguous frames managed as one (a THP is order 9) */

#ifdef __cplusplus
}
#endif
#endif /* PINMM_TYPES_H */
