// SPDX-License-Identifier: MIT
/*
 * madvise.c - pm_madvise.
 *
 * Arguments are checked first, in Linux's order (include/pinmm/mm.h). Advice that changes VMA
 * flags (HUGEPAGE, NOHUGEPAGE, DONTFORK, DOFORK) works under mmap_lock for write, merging
 * before it splits, as mprotect does (mmap.c); MADV_DONTNEED only zaps, under mmap_lock for
 * read. Splitting a PMD mapping needs no memory (the leaf carries a deposited PTE table), so
 * MADV_DONTNEED never fails for lack of memory.
 */
#include "internal.h"

static int madvise_vma_flags(struct pm_mm *mm, unsigned long start, unsigned long end,
			     int advice)
{
	unsigned long tmp = start;
	bool hole = false;
	int err = 0;

	while (tmp < end) {
		struct pm_vma *vma = pm__find_vma(mm, tmp);
		unsigned long newflags, s;

		if (!vma || vma->start >= end) {
			hole = true;
			break;
		}
		if (vma->start > tmp)
			hole = true;
		s = max(vma->start, tmp);
		tmp = min(vma->end, end);
		newflags = vma->flags;
		switch (advice) {
		case PM_MADV_HUGEPAGE:
			newflags = (newflags & ~VM_NOHUGEPAGE) | VM_HUGEPAGE;
			break;
		case PM_MADV_NOHUGEPAGE:
			newflags = (newflags & ~VM_HUGEPAGE) | VM_NOHUGEPAGE;
			break;
		case PM_MADV_DONTFORK:
			newflags |= VM_DONTCOPY;
			break;
		case PM_MADV_DOFORK:
			newflags &= ~VM_DONTCOPY;
			break;
		}
		/* As mprotect: merge first, split only what must (Linux's madvise_update_vma). */
		if (newflags != vma->flags) {
			err = pm__vma_modify(mm, vma, s, tmp, newflags);
			if (err)
				return err;
		}
	}
	return hole ? -ENOMEM : 0;
}

static int madvise_dontneed(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	unsigned long tmp = start;
	bool hole = false;

	while (tmp < end) {
		struct pm_vma *vma = pm__find_vma(mm, tmp);
		unsigned long s, e;

		if (!vma || vma->start >= end) {
			hole = true;
			break;
		}
		if (vma->start > tmp)
			hole = true;
		s = max(vma->start, tmp);
		e = min(vma->end, end);
		if (is_vm_hugetlb_page(vma)) {
			/* Linux: an aligned start, and the end rounded down to a 2 MiB page. */
			if (s & ~PMD_MASK)
				return -EINVAL;
			tmp = e;
			e &= PMD_MASK;
			/* The owner's pages go back to the pool with their reservations
			 * (6.9+), each under its fault mutex (mm/zap.c). */
			if (s < e && vma->hresv)
				pm__zap_hugetlb_resv(mm, vma, s, e);
			else if (s < e)
				pm__zap_range(mm, s, e);
			continue;
		}
		pm__zap_range(mm, s, e);
		tmp = e;
	}
	return hole ? -ENOMEM : 0;
}

int pm_madvise(struct pm_mm *mm, unsigned long start, size_t len, int advice)
{
	unsigned long end;
	int err;

	if (pm__mm_bad(mm) || (start & ~PAGE_MASK))
		return -EINVAL;
	switch (advice) {
	case PM_MADV_DONTNEED:
	case PM_MADV_HUGEPAGE:
	case PM_MADV_NOHUGEPAGE:
	case PM_MADV_DONTFORK:
	case PM_MADV_DOFORK:
		break;
	default:
		return -EINVAL;
	}
	if (!len)
		return 0;
	len = ALIGN_UP(len, PAGE_SIZE);
	end = start + len;
	if (!len || end < start)
		return -EINVAL;
	if (end > PM_TASK_SIZE)
		return -ENOMEM;

	if (advice == PM_MADV_DONTNEED) {
		mm_lock_read(mm, start, end);
		err = madvise_dontneed(mm, start, end);
		mmap_read_unlock(mm);
	} else {
		for (bool all = false;; all = true) {
			mm_lock_change_or_all(mm, start, end, all);
			err = madvise_vma_flags(mm, start, end, advice);
			mmap_write_unlock(mm);
			/* -EAGAIN: the VMA count asks for every range (range.c). */
			if (err != -EAGAIN || all)
				break;
		}
	}
	return err;
}
