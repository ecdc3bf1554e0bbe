/* SPDX-License-Identifier: MIT */
/*
 * pinmm/mm.h - address spaces: mmap, munmap, mprotect, madvise, faults and user-mode access.
 *
 * Errors are Linux's (6.18, x86-64: do_mmap, do_mprotect_pkey, madvise), in Linux's order,
 * with these choices where Linux is loose or the contract fixes them:
 *  - pm_mmap: an unaligned offset -> -EINVAL; no file without PM_MAP_ANONYMOUS -> -EBADF (with
 *    it, the file is ignored, as the fd is); a shmem object of another machine than @mm's ->
 *    -EINVAL; len == 0 -> -EINVAL; a length that wraps when rounded up to a page -> -ENOMEM
 *    (to 2 MiB for hugetlb: 0, so -EINVAL); longer than PM_TASK_SIZE -> -ENOMEM. PM_MAP_FIXED
 *    (and _NOREPLACE): ending beyond PM_TASK_SIZE -> -ENOMEM, an unaligned address -> -EINVAL,
 *    below PM_USER_MIN -> -EPERM; no free range -> -ENOMEM; FIXED_NOREPLACE over a mapping ->
 *    -EEXIST. Then, as do_mmap checks once the address is chosen: a mapping of an object
 *    reaching past PM_SHMEM_MAX_BYTES -> -EOVERFLOW; the type nibble (flags & 0x0f) other than
 *    PM_MAP_SHARED, PM_MAP_PRIVATE or PM_MAP_SHARED_VALIDATE -> -EINVAL (Linux's MAP_DROPPABLE,
 *    0x08, too: pinmm has no reclaim to drop pages); PM_MAP_SHARED_VALIDATE with a flag
 *    outside Linux's legacy set (MAP_SYNC, PM_MAP_FIXED_NOREPLACE, unknown bits) ->
 *    -EOPNOTSUPP, and on anonymous memory other than hugetlb (which Linux maps through an
 *    object) -> -EINVAL. Unknown prot bits (PROT_SEM too) and unknown flag bits are ignored,
 *    as Linux ignores them; PM_MAP_SHARED ignores what SHARED_VALIDATE would refuse. Linux's
 *    MAP_32BIT (0x40) and MAP_ABOVE4G (0x80) are -EINVAL: pinmm does not implement them yet,
 *    and a mapping without their effect would be a silent difference. A failed PM_MAP_FIXED
 *    mmap leaves the old mapping in place (pinmm's choice: Linux may leave a hole).
 *    PM_MAP_LOCKED (VM_LOCKED, "lo"), as a process with CAP_IPC_LOCK (no RLIMIT_MEMLOCK):
 *    the mapping is populated at mmap as PM_MAP_POPULATE would (write faults when private
 *    and writable, read faults otherwise, nothing for PROT_NONE), and PM_MAP_NONBLOCK does
 *    not cancel that; MADV_DONTNEED, FREE and REMOVE there -> -EINVAL; it merges only with
 *    locked neighbours; a fork child's copy is not locked; pm_mprotect making part of a
 *    private locked mapping writable write-faults that part at once (mprotect_fixup); a
 *    hugetlb mapping is populated but not VM_LOCKED (Linux drops the flag there). pinmm has no reclaim, so nothing else
 *    changes.
 *    PM_MAP_GROWSDOWN (VM_GROWSDOWN, "gd"): private anonymous memory only (shared, a file,
 *    hugetlb -> -EINVAL). A fault (pm_fault, or pm_access's) at an address below such a VMA,
 *    with no VMA between, grows it down to that page (Linux 6.5+ expand_stack_locked; its
 *    pgoff follows), unless the VMA below is closer than 256 pages (stack_guard_gap; a
 *    PROT_NONE or growing-down VMA below keeps no gap) or the VMA would pass 8 MiB
 *    (RLIMIT_STACK): then the fault is -EFAULT (SIGSEGV). GUP and MADV_POPULATE_* never grow
 *    it. A fork child's VMA grows down too. Non-fixed mmap does not keep the guard gap free
 *    below such a VMA (Linux's vm_start_gap): pinmm's placement is its own.
 *    PM_PROT_EXEC is kept (VM_EXEC) and reported by pm_mm_maps; nothing executes, and an
 *    exec-only mapping reads as on x86 without protection keys (slow GUP needs PROT_READ).
 *    PM_MAP_NONBLOCK cancels PM_MAP_POPULATE; PM_MAP_STACK sets VM_NOHUGEPAGE (6.7+);
 *    PM_MAP_NORESERVE keeps the VMA from merging with others (VM_NORESERVE) and makes a
 *    hugetlb mapping reserve nothing (below). A non-fixed mapping's hint is masked down to its
 *    page (round_hint_to_min) and used if free. Anonymous mappings whose length is a multiple
 *    of 2 MiB are placed 2 MiB-aligned (Linux 6.12+), so THP can back them. mmap never fails
 *    for lack of frames (overcommit).
 *  - pm_munmap: unaligned addr, len == 0, or a range outside the user space -> -EINVAL.
 *  - pm_mprotect: unaligned addr -> -EINVAL; len == 0 -> 0 and a length that wraps -> -ENOMEM,
 *    whatever prot says; prot bits other than READ, WRITE, EXEC and PROT_SEM (0x8, accepted
 *    and ignored) -> -EINVAL. PROT_GROWSDOWN (0x01000000) and PROT_GROWSUP (0x02000000):
 *    both -> -EINVAL; either -> -ENOMEM when no VMA meets the range; PROT_GROWSDOWN on a
 *    PM_MAP_GROWSDOWN VMA changes it from the VMA's start to the range's end, elsewhere
 *    -EINVAL; PROT_GROWSUP -> -EINVAL (x86 has no VM_GROWSUP).
 *  - pm_madvise: unknown advice or an unaligned addr -> -EINVAL; len == 0 -> 0; a length
 *    that wraps -> -EINVAL. Per advice, as mm/madvise.c (a VMA's error ends the walk at
 *    once, what came before it done; a hole is -ENOMEM once the rest is done):
 *    PM_MADV_POPULATE_READ / _WRITE fault the range in as GUP would, without taking page
 *    references (faultin_page_range): a hole -> -ENOMEM; a VMA that forbids the access (no
 *    PROT_READ for READ, no PROT_WRITE for WRITE, PROT_NONE) -> -EINVAL; a fault that would
 *    SIGBUS or SIGSEGV (past a shmem object's size or limit, a NORESERVE hugetlb mapping
 *    with no pool page) -> -EFAULT; no memory -> -ENOMEM; the pages before the error stay
 *    populated. WRITE breaks COW in private mappings, as a write fault does; a failure after
 *    the first page of a GUP call is retried by the next (Linux's loop).
 *    PM_MADV_WIPEONFORK (VM_WIPEONFORK, "wf"): private anonymous memory only (shared
 *    anonymous, a file, hugetlb -> -EINVAL); a fork child gets the range empty - no pages,
 *    reads see zeros - and its VMA keeps the flag; PM_MADV_KEEPONFORK clears it (anywhere).
 *    PM_MADV_FREE: private anonymous memory only (shared anonymous, a file, hugetlb ->
 *    -EINVAL). pinmm has no reclaim, so a freed page keeps its contents until it is written
 *    or zapped, as Linux allows; what changes is Linux's folio_clear_dirty(): the folios it
 *    covers that this mm alone maps read !PM_PAGE_DIRTY in pm_pagemap afterwards, until a GUP
 *    write or a dirty unpin marks them again (a user write, as a CPU's store, dirties only
 *    the PTE). Folios shared with a fork child keep their flag. A THP covered only in part
 *    is split first, as Linux's split_folio() there, if it is this mm's alone and not pinned
 *    (otherwise it stays as it is, and keeps its flag): its pages become 4 KiB folios, and
 *    those that hold only zeros become the zero page (Linux 6.12+'s split maps them so:
 *    pm_pagemap PM_PAGE_ZERO, not in pm_mm_maps' rss), wherever the THP was mapped.
 *    PM_MADV_REMOVE: fallocate(PUNCH_HOLE) of the range in the mapped object: private
 *    anonymous memory -> -EINVAL; a private mapping of an object -> -EACCES (Linux asks
 *    VM_SHARED and VM_MAYWRITE, which every shared mapping here has, a read-only one too).
 *    The pages leave the object's cache and every mapping; the range reads zeros in every
 *    mapping of the object afterwards, the size stays, the limit's charge comes back, a pin
 *    holder keeps its page and data (as truncation); private COW copies stay (shmem's
 *    punch keeps them). A hugetlb object punches only the 2 MiB pages the range covers whole,
 *    zaps private copies of them too, and gives back the reservations of pages never
 *    faulted. The mm's lock is dropped around each punch, as Linux drops mmap_lock.
 *  - pm_mprotect / pm_madvise: a hole in the range -> -ENOMEM, after applying the change up
 *    to the hole (mprotect) or to every mapped part (madvise), as Linux.
 *  - Hugetlb mappings (PM_MAP_HUGETLB, or any mapping of a pm_shmem_create_hugetlb object), as
 *    Linux: the length rounds up to 2 MiB; PM_MAP_HUGETLB with a file that is not a hugetlb
 *    object, anonymous PM_MAP_HUGETLB asking a page size other than 2 MiB (flags >> 26, Linux's
 *    MAP_HUGE_SHIFT: 0 or 21), a PM_MAP_FIXED address or an offset not 2 MiB aligned ->
 *    -EINVAL; a hint is masked to its page, then rounded up to 2 MiB. The pages are reserved
 *    from the machine's pool at mmap time (private mappings per mapping, shared ones per
 *    object range) and a mapping the pool cannot cover is -ENOMEM, so the mapping's own
 *    faults never fail for lack of pool pages. A PM_MAP_FIXED mapping counts as free the
 *    reservations that the private mappings it replaces still hold there, as Linux gives
 *    them back (hugetlb_vm_op_close) before the new mapping reserves; shared mappings'
 *    reservations stay with their object. (Should the mapping fail after that for want of
 *    memory, the old mapping stays but gives up those reservations.) With PM_MAP_NORESERVE nothing is reserved:
 *    its faults take a pool page nobody was promised (a shared one also the object's
 *    reservation for that page, if another mapping made it) or fail with -EFAULT (SIGBUS).
 *    A fork child has no reservation: its COW of a private hugetlb page takes a free pool
 *    page or fails with -EFAULT (SIGBUS). munmap, mprotect and madvise that would cut a 2 MiB
 *    page -> -EINVAL, except MADV_DONTNEED, which needs a 2 MiB aligned start and rounds its
 *    end down; it gives private pages back to the pool and restores their reservation (Linux
 *    6.9+). Hugetlb folios are never split.
 *  - Splitting a VMA may need memory: -ENOMEM, with nothing changed. Splitting a PMD (THP)
 *    mapping never does (each THP keeps a deposited page table), so MADV_DONTNEED never fails
 *    for lack of memory.
 *  - THP (Linux's "madvise" mode): a fault in a PM_MADV_HUGEPAGE private anonymous VMA whose
 *    2 MiB-aligned window lies inside it maps 2 MiB at PMD level. A write allocates a THP; a
 *    read maps the huge zero page, as Linux with transparent_hugepage/use_zero_page=1: one
 *    2 MiB folio of zeros per machine, mapped read-only by every address space that read-
 *    faults such a window, counted in neither Rss, AnonHugePages nor thp_faults; a write
 *    there splits the PMD into 4 KiB zero pages and copies only the page written (it does not
 *    allocate a THP). fork shares it; MADV_DONTNEED and munmap drop the mapping; mprotect
 *    never makes it writable. PM_KNOB_NO_HUGE_ZERO_PAGE (use_zero_page=0): the read fault
 *    allocates a THP instead. Without a free 2 MiB block (for a THP, or for the huge zero page
 *    before it exists) the fault falls back to 4 KiB pages.
 *  - At most 65530 VMAs (Linux's vm.max_map_count): an mmap that would make a new one, or an
 *    mprotect/munmap/madvise that would leave one more, past that -> -ENOMEM, nothing changed.
 *    Only what adds a VMA counts, as in Linux: a mapping that merges into a neighbour, a munmap
 *    of a VMA's head or tail, an mprotect/madvise of a head or tail that the neighbour there
 *    takes over (its new flags match), or one that changes no flags, make none and succeed at
 *    the limit; a munmap or change of a VMA's middle does not. Each call is O(log n) in the
 *    VMAs.
 *
 * Synchronization: every call here may run concurrently with every other on the same mm.
 * mmap/munmap/mprotect/madvise(HUGEPAGE, NOHUGEPAGE, DONTFORK, DOFORK, WIPEONFORK, KEEPONFORK)
 * take mmap_lock for write (munmap drops to a read hold before it zaps); madvise(DONTNEED,
 * FREE, POPULATE_*) takes it for read, madvise(REMOVE) for read around each VMA's checks. pm_fault
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
 * child gets copies of at once; PM_MADV_DONTFORK ranges are left out; PM_MADV_WIPEONFORK
 * ranges are mapped empty in the child (its VMA keeps the flag). The child does not inherit
 * the has-pinned flag.
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
 * pm_mremap() - resize and/or move the mapping at @old_addr, as Linux 6.18's mremap().
 * @flags: PM_MREMAP_MAYMOVE (may move to grow), PM_MREMAP_FIXED (move to @new_addr, unmapping
 * what is there; needs MAYMOVE), PM_MREMAP_DONTUNMAP (move, and keep the old range mapped but
 * empty: later accesses fault in zero pages, or the object's pages; needs MAYMOVE and
 * @old_len == @new_len; -EINVAL on hugetlb). @new_addr: the target with FIXED, a hint with
 * DONTUNMAP alone, else ignored (but for hugetlb's alignment check).
 *
 * Lengths are rounded up to pages (hugetlb: to 2 MiB). Shrinking unmaps the tail in place;
 * growing extends the VMA when [@old_addr, +@old_len) ends it and the space after is free,
 * else moves it (MAYMOVE; without it -ENOMEM). A move makes a new VMA and moves the page-table
 * entries: PTE by PTE; a 2 MiB leaf (THP, hugetlb) whole where source and target are 2 MiB
 * aligned, a THP split otherwise. Pages keep their folio, pin counts, AnonExclusive and data: a
 * pin taken before the move holds the page now mapped at the new address. A private anonymous
 * VMA keeps its pgoff if a page of it moved (faulted), else takes the new address's. A private
 * hugetlb mapping's reservations move with its pages. With FIXED and equal lengths the range
 * may span several VMAs and the gaps between them, which are kept (Linux 6.17; a failure
 * part-way leaves the VMAs before it moved). A non-fixed target is chosen as pm_mmap would (the
 * range design: its own choice). A failed call leaves the old mapping in place (FIXED: the
 * target may be unmapped already, as in Linux).
 *
 * Return: the (new) address, or -EINVAL (unknown flags, unaligned @old_addr or target, new
 * length 0 or above the address space, FIXED or DONTUNMAP without MAYMOVE, DONTUNMAP with a
 * length change or on hugetlb, overlapping old and new ranges, a zero @old_len of a private
 * mapping, hugetlb growth or unaligned hugetlb addresses), -EFAULT (@old_addr not mapped, or
 * the old range not inside one VMA), -ENOMEM (cannot grow in place
 * without MAYMOVE, no room for the target, max_map_count, no memory), -EPERM (FIXED below the
 * lowest user address). Context: takes mmap_lock for write (range design: the ranges of the
 * old and new range; every range when it must choose the target).
 */
PM_API long pm_mremap(struct pm_mm *mm, unsigned long old_addr, unsigned long old_len,
		      unsigned long new_len, unsigned flags, unsigned long new_addr);

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

/*
 * Introspection: what /proc/PID/maps, smaps, pagemap, /proc/kpageflags, /proc/kpagecount and
 * mincore(2) show, for tests and tools. Each call holds @mm's lock for read over its span (as
 * the slow GUP does), takes no page reference and faults nothing in; what it returns is a
 * snapshot, which concurrent faults, zaps and pins may make stale at once, as /proc's is.
 * A NULL or dead @mm is -EINVAL.
 */
struct pm_map_info {		   /* one VMA, as a line of /proc/PID/maps shows it */
	unsigned long start, end;
	unsigned prot;		   /* PM_PROT_* */
	unsigned flags;		   /* PM_MAP_SHARED or PM_MAP_PRIVATE, | PM_MAP_ANONYMOUS,
				    * PM_MAP_HUGETLB */
	unsigned long pgoff;	   /* Linux's vm_pgoff: in the object, in 4 KiB pages; private
				    * anonymous: the address >> 12 where first mapped (kept by a
				    * move once faulted); shared anonymous: 0 at mmap */
	const struct pm_shmem *shmem; /* the object mapped (borrowed: never pm_shmem_put); NULL
				    * for private anonymous memory */
	unsigned vmflags;	   /* PM_VMF_* below: smaps' VmFlags that pinmm keeps */
	unsigned long rss_pages;   /* smaps Rss in 4 KiB pages: zero pages not counted;
				    * hugetlb 0 */
	unsigned long anon_pages;  /* smaps Anonymous */
	unsigned long anon_huge_pages; /* smaps AnonHugePages, in 4 KiB pages */
};
#define PM_VMF_LOCKED 0x01	/* lo */
#define PM_VMF_GROWSDOWN 0x02	/* gd */
#define PM_VMF_HUGEPAGE 0x04	/* hg */
#define PM_VMF_NOHUGEPAGE 0x08	/* nh */
#define PM_VMF_DONTCOPY 0x10	/* dc (MADV_DONTFORK) */
#define PM_VMF_WIPEONFORK 0x20	/* wf */
#define PM_VMF_ACCOUNT 0x40	/* ac: private, writable or once so, and reserved (VM_ACCOUNT;
				 * pinmm commits nothing, so only merging sees it) */
#define PM_VMF_NORESERVE 0x80	/* nr (MAP_NORESERVE) */

/**
 * pm_mm_maps() - fill up to @max entries with the VMAs that end above @start, in address
 * order, as /proc/PID/maps lists them (adjacent mappings that merged are one entry), with
 * smaps' Rss, Anonymous and AnonHugePages.
 *
 * As Linux: a private anonymous hugetlb mapping is backed by an internal object
 * (hugetlb_file_setup), so its pgoff is the offset in that object, 0 at mmap; @shmem is NULL
 * for it all the same. Rss counts present pages other than zero pages, 4 KiB or huge (a PTE
 * one each, a PMD-mapped THP 512); Anonymous those of anonymous folios (private anonymous memory and
 * private COW copies of an object's pages); AnonHugePages the anonymous ones mapped by a PMD.
 * Hugetlb mappings count 0 in all three (smaps shows them as *_Hugetlb).
 *
 * Return: the number of entries filled (0: no VMA ends above @start, @start at or beyond
 * PM_TASK_SIZE, or @max 0); -EINVAL (NULL or dead @mm, @max < 0); -EFAULT (@out NULL while
 * there was something to fill).
 */
PM_API long pm_mm_maps(struct pm_mm *mm, unsigned long start, struct pm_map_info *out, long max);

#define PM_PAGE_PRESENT 0x001	     /* mapped in this mm (pagemap bit 63) */
#define PM_PAGE_EXCLUSIVE 0x002	     /* pagemap bit 56: present, not a zero page,
				      * mapcount == 1 */
#define PM_PAGE_ANON 0x004	     /* kpageflags ANON: private anonymous and private hugetlb
				      * pages; not shmem, shared anonymous or zero pages */
#define PM_PAGE_ZERO 0x008	     /* a zero page (kpageflags ZERO_PAGE; the huge one:
				      * ZERO|THP) */
#define PM_PAGE_THP 0x010	     /* part of a PMD-mappable large folio (kpageflags THP) */
#define PM_PAGE_HUGETLB 0x020	     /* kpageflags HUGE */
#define PM_PAGE_DIRTY 0x040	     /* the folio's dirty flag (kpageflags DIRTY) */
/* pinmm only: no host interface shows these */
#define PM_PAGE_ANON_EXCLUSIVE 0x100 /* PageAnonExclusive: a PTE mapping's page; a PMD
				      * mapping's head */
#define PM_PAGE_MAYBE_PINNED 0x200   /* folio_maybe_dma_pinned */
#define PM_PAGE_WRITABLE 0x400	     /* the entry maps it writable */
struct pm_page_info {
	uint64_t pfn;	   /* the frame mapped (pm_pfn_to_page()); 0 when not present */
	unsigned flags;	   /* PM_PAGE_* */
	unsigned mapcount; /* as /proc/kpagecount */
};

/**
 * pm_pagemap() - one entry per 4 KiB page of [@addr, @addr + @nr * 4096): pagemap,
 * kpageflags and kpagecount of the page mapped there, in one call. Pages not present (holes
 * between VMAs included) give an entry of zeros. mapcount is /proc/kpagecount's: the page's
 * PTE mappings plus its folio's PMD mappings; hugetlb: the folio's; zero pages 0. A THP stays
 * PM_PAGE_THP when its PMD mapping is split into PTEs (the folio is not split). The huge zero
 * page's 512 pages are PRESENT|ZERO|THP with mapcount 0, never EXCLUSIVE or ANON; once a
 * write splits it they are the 4 KiB zero page's (PRESENT|ZERO), but the page written.
 *
 * Return: the number of entries filled, @nr or fewer past the top of the address space
 * (PM_TASK_SIZE; 0 from there on, as a read of pagemap there); -EINVAL (NULL or dead @mm;
 * @addr not page aligned: pinmm's choice, pagemap's offsets are per page); -EFAULT (@out
 * NULL while there was something to fill). @nr 0 is 0.
 */
PM_API long pm_pagemap(struct pm_mm *mm, unsigned long addr, unsigned long nr,
		       struct pm_page_info *out);

/**
 * pm_mincore() - mincore(2), mm/mincore.c's rules: one byte per 4 KiB page of [@addr,
 * @addr + @len) (@len rounded up to a page), 1 if resident, else 0. Anonymous memory: 1 if
 * mapped (the zero page too). An object's mappings, shared or private, shmem or shared
 * anonymous: 1 if mapped here, else if the object's page cache holds the page (whether or not
 * any mm maps it). Hugetlb mappings: 1 if mapped in @mm. Pages are filled VMA by VMA; a hole
 * stops the walk with the bytes before it written.
 *
 * Return: 0; -EINVAL (NULL or dead @mm, @addr not page aligned); -ENOMEM (the range reaches
 * past PM_TASK_SIZE or wraps, even with @len 0, or part of it is not mapped); -EFAULT (@vec
 * NULL, where Linux's copy_to_user fails: once the first VMA was found). @len 0 is 0.
 */
PM_API int pm_mincore(struct pm_mm *mm, unsigned long addr, unsigned long len,
		      unsigned char *vec);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_MM_H */
