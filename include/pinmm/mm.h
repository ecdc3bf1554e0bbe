/* SPDX-License-Identifier: MIT */
/*
 * pinmm/mm.h - address spaces: mmap, munmap, mprotect, madvise, faults and user-mode access.
 *
 * Errors are Linux's, with these choices where Linux is loose or the contract fixes them:
 *  - pm_mmap: len == 0 or a length that overflows when rounded up to a page -> -EINVAL;
 *    unknown prot/flags bits, neither or both of SHARED/PRIVATE, an unaligned offset, or a file
 *    together with PM_MAP_ANONYMOUS -> -EINVAL; no file without PM_MAP_ANONYMOUS -> -EBADF;
 *    a shmem object of another machine than @mm's -> -EINVAL;
 *    PM_MAP_FIXED at an unaligned address -> -EINVAL, below PM_USER_MIN -> -EPERM, beyond
 *    PM_TASK_SIZE -> -ENOMEM; no free range -> -ENOMEM. A hint that is free is used as is.
 *    Anonymous mappings whose length is a multiple of 2 MiB are placed 2 MiB-aligned (Linux
 *    6.12+), so THP can back them. mmap never fails for lack of frames (overcommit).
 *  - pm_munmap: unaligned addr, len == 0, or a range outside the user space -> -EINVAL.
 *  - pm_mprotect / pm_madvise: unaligned addr or unknown bits -> -EINVAL; len == 0 -> 0 (as
 *    Linux); a hole in the range -> -ENOMEM, after applying the change up to the hole
 *    (mprotect) or to every mapped part (madvise), as Linux.
 *  - Hugetlb mappings (PM_MAP_HUGETLB, or any mapping of a pm_shmem_create_hugetlb object), as
 *    Linux: the length rounds up to 2 MiB; PM_MAP_HUGETLB with a file that is not a hugetlb
 *    object, a PM_MAP_FIXED address or an offset not 2 MiB aligned -> -EINVAL; the pages are
 *    reserved from the machine's pool at mmap time (private mappings per mapping, shared ones
 *    per object range) and a mapping the pool cannot cover is -ENOMEM, so the mapping's own
 *    faults never fail for lack of pool pages. A fork child has no reservation: its COW of a
 *    private hugetlb page takes a free pool page or fails with -EFAULT (SIGBUS). munmap,
 *    mprotect and madvise that would cut a 2 MiB page -> -EINVAL, except MADV_DONTNEED, which
 *    needs a 2 MiB aligned start and rounds its end down; it gives private pages back to the
 *    pool and restores their reservation (Linux 6.9+). Hugetlb folios are never split.
 *  - Splitting a VMA may need memory: -ENOMEM, with nothing changed. Splitting a PMD (THP)
 *    mapping never does (each THP keeps a deposited page table), so MADV_DONTNEED never fails
 *    for lack of memory.
 *  - At most 65530 VMAs (Linux's vm.max_map_count): an mmap that would make a new one, or an
 *    mprotect/munmap/madvise that would leave one more, past that -> -ENOMEM, nothing changed.
 *    Only what adds a VMA counts, as in Linux: a mapping that merges into a neighbour, a munmap
 *    of a VMA's head or tail, an mprotect/madvise of a head or tail that the neighbour there
 *    takes over (its new flags match), or one that changes no flags, make none and succeed at
 *    the limit; a munmap or change of a VMA's middle does not. Each call is O(log n) in the
 *    VMAs.
 *
 * Synchronization: every call here may run concurrently with every other on the same mm.
 * mmap/munmap/mprotect/madvise(HUGEPAGE, NOHUGEPAGE, DONTFORK, DOFORK) take mmap_lock for write
 * (munmap drops to a read hold before it zaps); madvise(DONTNEED) takes it for read. pm_fault
 * takes only the faulting VMA's own lock, found without mmap_lock (Linux 6.4's per-VMA locks),
 * and mmap_lock for read only when that VMA is being changed or there is none
 * (PM_KNOB_NO_PER_VMA_LOCK: always); so a fault never waits for mmap/munmap of other VMAs.
 * pm_access takes no lock but page-table locks when the pages are present (it walks the tables
 * under RCU and copies under the page-table lock, the way a CPU's TLB would), and falls back to
 * pm_fault otherwise.
 */
#ifndef PINMM_MM_H
#define PINMM_MM_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** pm_mm_create() - an empty address space. NULL with errno ENOMEM on failure. */
PM_API struct pm_mm *pm_mm_create(struct pm_machine *m);

/**
 * pm_mm_destroy() - tell the registered notifiers (pm_mm_notifier_register()), then unmap
 * everything and free the address space. Pages still pinned stay allocated until their last
 * unpin. Must not race with other calls on @mm.
 */
PM_API void pm_mm_destroy(struct pm_mm *mm);

/**
 * pm_mm_fork() - a child address space with Linux fork semantics: shared mappings are shared;
 * private pages become copy-on-write in both, except pages that may be DMA-pinned, which the
 * child gets copies of at once; PM_MADV_DONTFORK ranges are left out. The child does not
 * inherit the has-pinned flag.
 *
 * Return: the child, or NULL with errno ENOMEM (the parent is left intact).
 */
PM_API struct pm_mm *pm_mm_fork(struct pm_mm *parent);

PM_API long pm_mmap(struct pm_mm *mm, unsigned long addr, size_t len, int prot, int flags,
		    struct pm_shmem *file, size_t offset);
PM_API int pm_munmap(struct pm_mm *mm, unsigned long addr, size_t len);
PM_API int pm_mprotect(struct pm_mm *mm, unsigned long addr, size_t len, int prot);
PM_API int pm_madvise(struct pm_mm *mm, unsigned long addr, size_t len, int advice);

/**
 * pm_access() - copy between @buf and the address space, as copy_{to,from}_user would.
 * @write: nonzero copies @buf into the address space.
 *
 * Respects protections (never forces), faults pages in, breaks COW on write.
 * Return: bytes copied; if none could be, -EFAULT (no mapping, no permission, beyond the end
 * of a shmem object) or -ENOMEM.
 */
PM_API long pm_access(struct pm_mm *mm, unsigned long addr, void *buf, size_t len, int write);

/**
 * pm_fault() - handle a user fault at @addr, as the CPU's exception would.
 * @flags: PM_FAULT_WRITE for a write access.
 *
 * Return: 0; -EFAULT for SIGSEGV (no mapping, no permission) and for SIGBUS (beyond a shmem
 * object's size or limit); -ENOMEM when memory ran out; -EINVAL for unknown flags.
 */
PM_API int pm_fault(struct pm_mm *mm, unsigned long addr, unsigned flags);

/*
 * Teardown notifiers: Linux's mmu_notifier reduced to ->release, for callers that keep state
 * per address space (gup_test's long-term pin sessions). Embed one, set ->release, register
 * it. pm_mm_destroy() takes each registered notifier off the list and calls its ->release
 * before it unmaps anything, with no lock of pinmm's held: ->release may unpin, read or write
 * @mm, but must not register or unregister on @mm. A fork child starts with none.
 */
struct pm_mm_notifier {
	void (*release)(struct pm_mm_notifier *mn, struct pm_mm *mm);
	struct pm_mm_notifier *next; /* pinmm's */
};
/**
 * pm_mm_notifier_register() - have pm_mm_destroy(@mm) call @mn->release(@mn, @mm).
 * Return: 0; -EINVAL (NULL @mn, @mm or ->release); -EEXIST (@mn is registered on @mm already).
 */
PM_API int pm_mm_notifier_register(struct pm_mm_notifier *mn, struct pm_mm *mm);
/** pm_mm_notifier_unregister() - take @mn off @mm's list (nothing if it is not on it). */
PM_API void pm_mm_notifier_unregister(struct pm_mm_notifier *mn, struct pm_mm *mm);
/** pm_mm_machine() - the machine an address space lives in; NULL for NULL or a dead one. */
PM_API struct pm_machine *pm_mm_machine(struct pm_mm *mm);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_MM_H */
