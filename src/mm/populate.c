// SPDX-License-Identifier: MIT
/*
 * populate.c - faulting ranges in for the address-space layer: mmap's MAP_POPULATE and
 * MAP_LOCKED (mmap.c), mprotect of a private locked VMA made writable (mmap.c), mremap's
 * growth of a locked VMA (mremap.c) and MADV_POPULATE_READ/WRITE (madvise.c). Linux's
 * populate_vma_page_range, __mm_populate and faultin_page_range.
 *
 * A populate is GUP's slow walk taking no reference, and GUP sits above the faults it takes,
 * so this file is where the address-space layer calls up into GUP, and the only one
 * (pm__populate(), gup/gup.c), as mm/access.c's pm_fault() is its only call into the faults
 * (tests/scripts/layers.sh checks both). Linux's mmap, mprotect, mremap and madvise reach its
 * gup.c through these three functions alone.
 */
#include "mm/mm.h"

/**
 * pm__mm_populate() - fault [@start, @start + @len) in, as populate_vma_page_range does for a
 * mapping with @vm_flags: write faults for a private writable one, read faults otherwise,
 * forced where any access is allowed (an exec-only or write-only mapping); nothing for
 * PROT_NONE. Failures are not the caller's: Linux's mm_populate ignores them too. Called with
 * no lock of @mm held: the mm's lock is taken in GUP.
 */
void pm__mm_populate(struct pm_mm *mm, unsigned long start, unsigned long len,
		     unsigned long vm_flags)
{
	unsigned gflags = FOLL_FORCE;

	if (!(vm_flags & (VM_READ | VM_WRITE | VM_EXEC)))
		return;
	if ((vm_flags & (VM_WRITE | VM_SHARED)) == VM_WRITE)
		gflags |= FOLL_WRITE;
	pm__populate(mm, start, len >> PAGE_SHIFT, gflags, false);
}

/**
 * pm__mm_populate_locked() - write-fault [@start, @end) of a private locked VMA that mprotect
 * just made writable, as mprotect_fixup's populate_vma_page_range; failures are not ours.
 * Context: mmap_lock held for write over the range.
 */
void pm__mm_populate_locked(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	mmap_assert_write_locked(mm);
	pm__populate(mm, start, (end - start) >> PAGE_SHIFT, FOLL_WRITE, true);
}

/**
 * pm__madvise_populate() - MADV_POPULATE_READ/WRITE: fault [@start, @end) in, for write with
 * @write, as GUP would, taking no reference (faultin_page_range). A hole is -ENOMEM, a VMA
 * that forbids the access (or PROT_NONE) -EINVAL, a fault that would SIGBUS or SIGSEGV
 * -EFAULT, no memory -ENOMEM. Pages before the error stay populated. Called with no lock of
 * @mm held.
 */
int pm__madvise_populate(struct pm_mm *mm, unsigned long start, unsigned long end, bool write)
{
	unsigned flags = FOLL_MADV_POPULATE | (write ? FOLL_WRITE : 0);

	while (start < end) {
		long n = pm__populate(mm, start, (end - start) >> PAGE_SHIFT, flags, false);

		if (n < 0) {
			switch (n) {
			case -EINVAL:
			case -EFAULT:
				return (int)n;
			default:
				return -ENOMEM;
			}
		}
		start += (unsigned long)n << PAGE_SHIFT;
	}
	return 0;
}
