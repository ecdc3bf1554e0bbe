/* SPDX-License-Identifier: MIT */
/*
 * pinmm/gup.h - get_user_pages and pinning, with Linux's semantics (mm/gup.c).
 *
 * Two kinds of reference:
 *  - get (pm_get_user_pages*): +1 on the folio's refcount per page; release with pm_put_page().
 *  - pin (pm_pin_user_pages*, FOLL_PIN): on a small folio +1024 (GUP_PIN_COUNTING_BIAS) on the
 *    refcount; on a large folio +1 refcount and +1 pincount per page. Release only with the
 *    unpin family. The shared 4 KiB zero page is never really pinned (nor referenced):
 *    unpinning it is a no-op. The huge zero page (what a read fault maps in a THP-eligible
 *    private anonymous mapping, as Linux with use_zero_page=1) is a 2 MiB folio referenced and
 *    pinned like any other (nr_foll_pin_acquired counts it; Linux exempts only the 4 KiB one);
 *    the fast calls leave it to the slow path, as Linux 6.18 does.
 *
 * Return convention of every call that takes pages: the number taken, possibly fewer than
 * asked (a hole, the end of a VMA, a permission); a negative errno only when none was taken;
 * 0 for nr_pages == 0. Errors:
 *  -EINVAL	unknown gup_flags bit; FOLL_LONGTERM with get_*; pages == NULL with pin_* or *_fast;
 *		nr_pages too large for the fast calls' int; (pin_* slow calls answer bad arguments
 *		with -EINVAL too, where Linux would return 0)
 *  -EOVERFLOW	start + nr_pages * 4096 wraps
 *  -EFAULT	no VMA, beyond the user address space, no permission (a write pin of a read-only
 *		mapping without FOLL_FORCE, FOLL_FORCE on a shared mapping), FOLL_NOFAULT when a
 *		fault would be needed, SIGBUS (beyond a shmem object's end)
 *  -ENOMEM	out of memory while faulting, or a refcount that would overflow
 *
 * FOLL_FORCE writes through a read-only private mapping only into an exclusive anonymous page:
 * the request first breaks COW, so a page cache page or a page shared with a fork child is
 * never written (no Dirty COW). A read-only pin of an anonymous page that is not exclusive
 * first unshares it, so the pin keeps seeing the process's later writes (CVE-2020-29374). So
 * does a read-only FOLL_LONGTERM pin of a zero page, 4 KiB or huge, in a private mapping: the
 * pinned page gets a zeroed copy of its own (the huge zero page is split into 4 KiB zero pages
 * first); a write request does the same through a write fault.
 *
 * The fast calls walk the page tables without mmap_lock (under RCU, with speculative
 * references re-validated against the entries) and continue with the slow path for the
 * remainder only. See src/gup/gup_fast.c for why that is safe.
 *
 * Synchronization table. No call needs a lock of the caller's: pinmm orders them itself. The
 * table says which pairs, on one mm (and, for truncate, an object it maps), really run at the
 * same time and which wait for each other on the mm's mmap_lock:
 *
 *		slow	fast	unpin	mmap	DONTNEED fork	truncate
 *					munmap
 *					mprotect
 *  slow	X	X	X	-	X	 -	X
 *  fast	X	X	X	X	X	 X(a)	X
 *  unpin	X	X	X(b)	X	X	 X	X
 *  mmap ...	-	X	X	-	-	 -	X
 *  DONTNEED	X	X	X	-	X	 -	X
 *  fork	-	X(a)	X	-	-	 -	X
 *  truncate	X	X	X	X	X	 X	-(c)
 *
 * Legend:
 *  X	the two may run at the same time; page-table locks, RCU and the folio counts order
 *	what they do to the same pages (see src/gup/gup_fast.c, src/fault/shmem.c)
 *  -	mutual exclusion, provided by pinmm: one waits for the other (mmap_lock: the slow
 *	calls, DONTNEED and the fast calls' fallback take it for read; mmap, munmap, mprotect,
 *	the other madvise advices and fork take it for write)
 *  slow = pm_get_user_pages / pm_pin_user_pages; fast = the *_fast calls; unpin = the
 *	unpin family and pm_put_page (no lock at all); truncate = pm_shmem_truncate
 *  (a) a fast pin that overlaps a fork gives back what it took and continues on the slow
 *	path, which waits for the fork
 *  (b) each pin is released exactly once; releasing a page twice is a caller bug
 *  (c) truncations of one object wait for each other (its truncate lock)
 */
#ifndef PINMM_GUP_H
#define PINMM_GUP_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gup_flags (Linux FOLL_* values). Any other bit is -EINVAL. */
#define PM_FOLL_WRITE 0x01    /* the caller will write to the pages */
#define PM_FOLL_FORCE 0x08    /* write a read-only private mapping (into an exclusive copy) */
#define PM_FOLL_NOFAULT 0x20  /* do not fault: take what is present, else -EFAULT */
#define PM_FOLL_LONGTERM 0x100 /* the pin may be held indefinitely (pin_* only) */

#define PM_GUP_PIN_COUNTING_BIAS 1024

/** pm_get_user_pages() - take references under mmap_lock, faulting as needed. */
PM_API long pm_get_user_pages(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			      unsigned gup_flags, struct pm_page **pages);
/** pm_get_user_pages_fast() - lockless walk first, then the slow path for the rest. */
PM_API long pm_get_user_pages_fast(struct pm_mm *mm, unsigned long start,
				   unsigned long nr_pages, unsigned gup_flags,
				   struct pm_page **pages);
/** pm_pin_user_pages() - FOLL_PIN under mmap_lock, faulting as needed. */
PM_API long pm_pin_user_pages(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			      unsigned gup_flags, struct pm_page **pages);
/** pm_pin_user_pages_fast() - FOLL_PIN, lockless walk first, then the slow path for the rest. */
PM_API long pm_pin_user_pages_fast(struct pm_mm *mm, unsigned long start,
				   unsigned long nr_pages, unsigned gup_flags,
				   struct pm_page **pages);

/** pm_put_page() - release one get_* reference. */
PM_API void pm_put_page(struct pm_page *page);

/** pm_unpin_user_page() - release one pin. */
PM_API void pm_unpin_user_page(struct pm_page *page);

/**
 * pm_unpin_user_pages() - release @npages pins. Consecutive entries of the same folio are
 * released with one atomic update; a NULL entry is skipped and ends a batch. The pages may
 * belong to several machines; each counts its own releases.
 */
PM_API void pm_unpin_user_pages(struct pm_page **pages, unsigned long npages);

/**
 * pm_unpin_user_pages_dirty_lock() - as pm_unpin_user_pages(), marking each folio dirty first
 * when @make_dirty (under the folio lock, and only if it is not dirty already).
 */
PM_API void pm_unpin_user_pages_dirty_lock(struct pm_page **pages, unsigned long npages,
					   bool make_dirty);

/**
 * pm_unpin_user_page_range_dirty_lock() - release one pin on each of @npages physically
 * contiguous pages starting at @page, one atomic update per folio. A range that runs past the
 * last frame of @page's machine releases nothing (and warns once).
 */
PM_API void pm_unpin_user_page_range_dirty_lock(struct pm_page *page, unsigned long npages,
						bool make_dirty);

PM_API struct pm_folio *pm_page_folio(struct pm_page *page);
PM_API void *pm_page_address(struct pm_page *page); /* the frame's 4096 bytes */
PM_API unsigned long pm_page_to_pfn(struct pm_page *page);
/** pm_pfn_to_page() - the descriptor of frame @pfn, or NULL if @m has no such frame. */
PM_API struct pm_page *pm_pfn_to_page(struct pm_machine *m, unsigned long pfn);
PM_API bool pm_folio_maybe_dma_pinned(struct pm_folio *folio);
/**
 * pm_folio_ref_count(), pm_folio_pincount() - @folio's counts, as Linux reads them (the
 * pincount of large folios; 0 for small ones). A folio whose pins are counted per CPU (hot,
 * the range design) leaves that mode to answer, so a held reference never reads as none.
 */
PM_API int pm_folio_ref_count(struct pm_folio *folio);
PM_API int pm_folio_pincount(struct pm_folio *folio);
/* pm_folio_mapcount(): PTE mappings of its pages plus PMD mappings, a PMD mapping counting
 * once - Linux's folio_mapcount(). */
PM_API int pm_folio_mapcount(struct pm_folio *folio);
PM_API unsigned pm_folio_order(struct pm_folio *folio);
PM_API bool pm_folio_test_dirty(struct pm_folio *folio);
PM_API bool pm_folio_test_anon(struct pm_folio *folio);
PM_API bool pm_page_anon_exclusive(struct pm_page *page);
/* A zero page, as kpageflags ZERO_PAGE says: the 4 KiB zero page, or a page of the huge zero
 * page. Neither holds data of any process; never write through it. */
PM_API bool pm_page_is_zero(struct pm_page *page);
PM_API bool pm_mm_has_pinned(struct pm_mm *mm);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_GUP_H */
