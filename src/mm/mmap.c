// SPDX-License-Identifier: MIT
/*
 * mmap.c - pm_mmap, pm_munmap and pm_mprotect (pm_madvise is madvise.c's).
 *
 * All three validate their arguments first (Linux's errors in Linux's order, see
 * include/pinmm/mm.h; pm_mmap answers those that Linux finds only once it has chosen the
 * address after choosing it, with nothing held for the mapping), then work under mmap_lock
 * for write. Changes that may need memory (a VMA split) are made before anything destructive,
 * so a failure leaves the address space as it was - at most with a VMA split in two, which
 * changes nothing observable.
 *
 * A PMD leaf (a PMD-mapped THP) always lies inside one VMA: pm__split_vma splits the leaf when
 * it splits the VMA inside it.
 */
#include "mm/range.h"

/* Linux's x86-64 mmap and mprotect bits that pinmm's headers do not name (uapi values). */
#define LX_MAP_TYPE 0x0fU	/* the type nibble: SHARED, PRIVATE, SHARED_VALIDATE, DROPPABLE */
#define LX_MAP_32BIT 0x40U
#define LX_MAP_ABOVE4G 0x80U
#define LX_MAP_GROWSDOWN 0x100U
#define LX_MAP_DENYWRITE 0x800U
#define LX_MAP_EXECUTABLE 0x1000U
#define LX_MAP_LOCKED 0x2000U
#define LX_MAP_UNINITIALIZED 0x4000000U
#define LX_MAP_HUGE_SHIFT 26	/* MAP_HUGETLB's page size, as log2, in bits 26-31 */
#define LX_MAP_HUGE_MASK 0x3fU
#define LX_MAP_HUGE_2MB (21U << LX_MAP_HUGE_SHIFT)
#define LX_MAP_HUGE_1GB (30U << LX_MAP_HUGE_SHIFT)
#define LX_PROT_SEM 0x8
#define LX_PROT_GROWSDOWN 0x01000000
#define LX_PROT_GROWSUP 0x02000000

/* include/linux/mman.h: what MAP_SHARED_VALIDATE accepts of an object whose file operations
 * add no flag (shmem's and hugetlbfs's add none: MAP_SYNC, MAP_FIXED_NOREPLACE and the
 * unknown bits are -EOPNOTSUPP). */
#define LEGACY_MAP_MASK (PM_MAP_SHARED | PM_MAP_PRIVATE | PM_MAP_FIXED | PM_MAP_ANONYMOUS | \
			 LX_MAP_DENYWRITE | LX_MAP_EXECUTABLE | LX_MAP_UNINITIALIZED | \
			 LX_MAP_GROWSDOWN | LX_MAP_LOCKED | PM_MAP_NORESERVE | PM_MAP_POPULATE | \
			 PM_MAP_NONBLOCK | PM_MAP_STACK | PM_MAP_HUGETLB | LX_MAP_32BIT | \
			 LX_MAP_HUGE_2MB | LX_MAP_HUGE_1GB)

/* Flags to which Linux gives effects pinmm does not have yet: -EINVAL, once every error Linux
 * answers first is ruled out, rather than a mapping without their effect. */
#define MAP_NOT_YET (LX_MAP_32BIT | LX_MAP_ABOVE4G)

/* calc_vm_prot_bits: what mmap and mprotect keep of prot; other bits are ignored by mmap. */
static unsigned long prot_to_vm(int prot)
{
	return ((prot & PM_PROT_READ) ? VM_READ : 0) | ((prot & PM_PROT_WRITE) ? VM_WRITE : 0) |
	       ((prot & PM_PROT_EXEC) ? VM_EXEC : 0);
}

/* ---- finding a free range ---- */

/*
 * lock_for_mmap() - take the locks of a new mapping of @len bytes and choose its address
 * when the caller did not fix it (@addr: the hint, page aligned, or 0). A fixed mapping holds
 * the ranges it changes (every range with @all: a change that must start again holding them
 * all); any other goes where the mm's policy puts it (range.c: Linux's top-down search under
 * mmap_lock, or this thread's own range). Return: the address, or -ENOMEM with nothing held.
 */
static long lock_for_mmap(struct pm_mm *mm, unsigned long addr, unsigned long len,
			  unsigned long align, int flags, bool all)
{
	if (flags & (PM_MAP_FIXED | PM_MAP_FIXED_NOREPLACE)) {
		mmap_write_lock_range_or_all(mm, addr, addr + len, all);
		return (long)addr;
	}
	return mm->policy->lock_area(mm, addr, len, align, all);
}

/* ---- munmap ---- */

/*
 * munmap_detach() - split the VMAs at the edges of [@start, @end) and take those inside out
 * of the tree. max_map_count as Linux's vms_gather_munmap_vmas(): only a hole in the middle of
 * one VMA leaves a VMA more, so only then is a split charged (the first); every other split
 * makes a piece that goes below, uncharged, and a munmap of a head or a tail works at the
 * limit. Context: mmap_lock held for write. Return: the detached VMAs (retire_next chain), or
 * NULL with *@err 0 (nothing mapped) or an error of pm__split_vma() or -ENOMEM (nothing was
 * unmapped; a piece split off stays, charged now: pm__vma_settle()).
 */
static struct pm_vma *munmap_detach(struct pm_mm *mm, unsigned long start, unsigned long end,
				     int *err)
{
	struct pm_vma *vma, *first, *gone[2] = { NULL, NULL };
	bool hole;

	mmap_assert_write_locked(mm);
	*err = 0;
	vma = pm__find_vma_intersection(mm, start, end);
	if (!vma)
		return NULL;
	hole = vma->start < start && vma->end > end;
	if (vma->start < start) {
		*err = pm__split_vma(mm, vma, start, hole ? PM_SPLIT_CHARGE : PM_SPLIT_UPPER_GOES);
		if (*err)
			return NULL;
		vma = gone[0] = pm__vma_next(mm, vma);
	}
	/* The VMA at end - 1: this one, unless it ends below. */
	if (vma->end < end)
		vma = pm__find_vma(mm, end - 1);
	if (vma && vma->start < end && vma->end > end) {
		*err = pm__split_vma(mm, vma, end, PM_SPLIT_LOWER_GOES);
		if (*err)
			goto fail;
		gone[1] = vma;
	}
	/* Out of the tree and write-locked: then no fault finds them. */
	first = pm__vma_detach_range(mm, start, end, err);
	if (!*err)
		return first;
fail:
	for (unsigned i = 0; i < 2; i++)
		if (gone[i])
			pm__vma_settle(mm, gone[i]);
	return NULL;
}

/*
 * unmap_region() - zap what the detached VMAs (@vma and its retire_next chain) mapped, take
 * each off its object's i_mmap list once zapped (pm__vma_detach_range says why not before),
 * free the page tables in the gap they leave, and queue the VMAs for freeing.
 * Context: mmap_lock held, for write or downgraded by its writer.
 */
static void unmap_region(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
			 unsigned long end)
{
	struct pm_vma *next;

	mmap_assert_locked(mm);
	for (; vma; vma = next) {
		next = vma->retire_next;
		pm__zap_vma_range(vma, vma->start, vma->end);
		pm__vma_unlink_file(vma);
		pm__vma_retire(mm, vma);
	}
	pm__vma_free_gap_tables(mm, start, end);
}

/*
 * do_munmap() - unmap [@start, @end) (mmap with MAP_FIXED over mappings). Context: mmap_lock
 * held for write. Return: 0, or -ENOMEM (a split failed; nothing was unmapped).
 */
static int do_munmap(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_vma *vma;
	int err;

	mmap_assert_write_locked(mm);
	vma = munmap_detach(mm, start, end, &err);
	if (vma)
		unmap_region(mm, vma, start, end);
	return err;
}

/* For mremap.c, which unmaps as munmap does. Context: mmap_lock (W). */
int pm__do_munmap(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	mmap_assert_write_locked(mm);
	return do_munmap(mm, start, end);
}

void pm__unmap_region(struct pm_mm *mm, struct pm_vma *vma, unsigned long start,
		      unsigned long end)
{
	mmap_assert_locked(mm);
	unmap_region(mm, vma, start, end);
}

int pm_munmap(struct pm_mm *mm, unsigned long addr, size_t len)
{
	struct pm_vma *vma;
	unsigned long end;
	bool all = false;
	int err;

	if (pm__mm_bad(mm))
		return -EINVAL;
	if ((addr & ~PAGE_MASK) || !len || addr > PM_TASK_SIZE)
		return -EINVAL;
	len = ALIGN_UP(len, PAGE_SIZE);
	if (!len || len > PM_TASK_SIZE - addr)
		return -EINVAL;
	end = addr + len;
again:
	mmap_write_lock_range_or_all(mm, addr, end, all);
	vma = munmap_detach(mm, addr, end, &err);
	if (!vma) {
		mmap_write_unlock(mm);
		if (err == -EAGAIN) {
			all = true; /* the VMA count asks for every range (range.c) */
			goto again;
		}
		return err;
	}
	/*
	 * The VMAs are out of the tree: drop the write hold - and every VMA write lock with it -
	 * before the zap, so that faults next door, and readers of mmap_lock, need not wait for
	 * it (Linux's munmap downgrade). No writer can come in before we are done.
	 */
	mmap_write_downgrade(mm);
	unmap_region(mm, vma, addr, end);
	mmap_read_unlock(mm);
	return 0;
}

/* ---- mmap ---- */

/*
 * mmap_late_error() - do_mmap's checks that come after the address is chosen, in its order:
 * the object's size (file_mmap_ok), the mapping type and MAP_SHARED_VALIDATE's flags, then
 * what pinmm lacks, then hugetlbfs_file_mmap's offset. @obj: the mapping has an object - a
 * file, or an anonymous hugetlb mapping, which Linux maps through one (hugetlb_file_setup), so
 * that MAP_SHARED_VALIDATE is valid there and -EINVAL only on other anonymous memory.
 * Return: 0, or the error pm_mmap answers once the address checks have passed.
 */
static int mmap_late_error(unsigned flags, bool obj, bool hugetlb, size_t offset,
			   unsigned long len)
{
	unsigned checked = flags;

	if (obj) {
		if (len > PM_SHMEM_MAX_BYTES || offset > PM_SHMEM_MAX_BYTES - len)
			return -EOVERFLOW;
		switch (flags & LX_MAP_TYPE) {
		case PM_MAP_SHARED:
			checked &= LEGACY_MAP_MASK; /* unknown flags ignored, for old callers */
			/* fall through */
		case PM_MAP_SHARED_VALIDATE:
			if (checked & ~LEGACY_MAP_MASK)
				return -EOPNOTSUPP;
			/* fall through */
		case PM_MAP_PRIVATE:
			if (flags & LX_MAP_GROWSDOWN)
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	} else {
		switch (flags & LX_MAP_TYPE) {
		case PM_MAP_SHARED:
			if (flags & LX_MAP_GROWSDOWN)
				return -EINVAL;
			break;
		case PM_MAP_PRIVATE:
			break;
		default: /* MAP_DROPPABLE too: pinmm has no reclaim that could drop the pages */
			return -EINVAL;
		}
	}
	if (flags & MAP_NOT_YET)
		return -EINVAL;
	if (hugetlb && (offset & ~PMD_MASK))
		return -EINVAL;
	return 0;
}

/*
 * mmap_prepare() - what a new mapping holds before its VMA exists: its object (a reference on
 * @*file, or a new internal one) and its hugetlb reservations (none with VM_NORESERVE).
 * Return: 0, or -ENOMEM with nothing held and *@file NULL.
 */
static int mmap_prepare(struct pm_mm *mm, struct pm_shmem **file, unsigned long *pgoff,
			unsigned long vm_flags, unsigned long len, size_t offset, bool anon,
			struct pm_hugetlb_resv **hresv, unsigned long credit)
{
	bool hugetlb = vm_flags & VM_HUGETLB, shared = vm_flags & VM_MAYSHARE;
	bool reserve = hugetlb && !(vm_flags & VM_NORESERVE);

	/* MAP_SHARED|MAP_ANONYMOUS is backed by an internal shmem object, as in Linux, and so is
	 * every anonymous hugetlb mapping (hugetlb_file_setup): its i_mmap list is how the owner
	 * of a private one finds its fork children's mappings (fault/hugetlb_fault.c). */
	if (anon && (shared || hugetlb)) {
		*file = hugetlb ? pm__shmem_create_internal_hugetlb(mm->m, len) :
				  pm__shmem_create_internal(mm->m, len);
		if (!*file)
			return -ENOMEM;
		*pgoff = 0;
	} else if (*file) {
		pm__shmem_get(*file);
	}
	/* Hugetlb pages are reserved now (hugetlb_reserve_pages), so that faults never fail for
	 * lack of them: shared mappings per object range, private ones per mapping. */
	if (reserve && shared &&
	    pm__shmem_hugetlb_reserve(*file, *pgoff >> HPAGE_PMD_ORDER, len >> PMD_SHIFT, credit))
		goto nomem;
	if (reserve && !shared &&
	    !(*hresv = pm__hugetlb_resv_create(mm->m, len >> PMD_SHIFT, credit)))
		goto nomem;
	return 0;
nomem:
	if (*file)
		pm_shmem_put(*file);
	*file = NULL;
	return -ENOMEM;
}

/*
 * The anonymous pages mapped in [@start, @end) of @vma: with @freed_only, those the zap will
 * free (the mapping's reference is their only one). Context: mmap_lock (W), @vma
 * write-locked.
 */
static unsigned long hugetlb_anon_mapped(struct pm_mm *mm, unsigned long start, unsigned long end,
					 bool freed_only)
{
	unsigned long n = 0;

	mmap_assert_write_locked(mm);
	for (unsigned long a = start & PMD_MASK; a < end; a += PMD_SIZE) {
		pm_entry_t *pmdp = pm__pmd_lookup(mm, a);
		pmd_t pmd = pmdp ? pmdp_get(pmdp) : (pmd_t){ 0 };
		struct pm_folio *folio;

		if (!pmd_leaf(pmd))
			continue;
		folio = page_folio(pfn_to_page(mm->m, pmd_pfn(pmd)));
		n += folio_test_anon(folio) &&
		     (!freed_only || atomic_load_relaxed(&folio->page.xrefcount) == 1);
	}
	return n;
}

/*
 * What unmapping [@start, @end) does to the pool before Linux reserves for the new mapping
 * (vms_clean_up_area, before mmap_file), counted as the room it makes: the private owners'
 * VMAs close with the reservations they still hold and one more for each anonymous page the
 * zap gives back to their map (pm__zap_vma_range; a page still held after the zap, by a pin
 * or a fork child, has its reservation closed before it comes back to the count:
 * mem/hugetlb_pool.c); the other private VMAs (fork children) free the pages only they hold.
 * Shared reservations stay with their object. The VMAs are write-locked first, so no fault
 * changes any of it before the munmap that follows. Context: mmap_lock (W).
 */
static unsigned long hugetlb_resv_credit(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	unsigned long credit = 0;

	mmap_assert_write_locked(mm);
	for (struct pm_vma *vma = pm__find_vma_intersection(mm, start, end); vma && vma->start < end;
	     vma = pm__vma_next(mm, vma)) {
		unsigned long s = max(vma->start, start), e = min(vma->end, end);

		if (!is_vm_hugetlb_page(vma) || (vma->flags & VM_MAYSHARE))
			continue;
		pm__vma_start_write(vma);
		if (vma->hresv)
			credit += pm__hugetlb_resv_count(vma->hresv, s, e) +
				  hugetlb_anon_mapped(mm, s, e, false);
		else
			credit += hugetlb_anon_mapped(mm, s, e, true);
	}
	return credit;
}

/* Give back the reservations hugetlb_resv_credit() counted. Context: mmap_lock (W). */
static void hugetlb_resv_drop(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	mmap_assert_write_locked(mm);
	for (struct pm_vma *vma = pm__find_vma_intersection(mm, start, end); vma && vma->start < end;
	     vma = pm__vma_next(mm, vma))
		pm__hugetlb_resv_release(vma->hresv, max(vma->start, start), min(vma->end, end));
}

long pm_mmap(struct pm_mm *mm, unsigned long addr, size_t len, int prot, int flags,
	     struct pm_shmem *file, size_t offset)
{
	unsigned long vm_flags, align = PAGE_SIZE, pgoff = offset >> PAGE_SHIFT;
	const unsigned uflags = (unsigned)flags, type = uflags & LX_MAP_TYPE;
	const bool anon = uflags & PM_MAP_ANONYMOUS;
	const bool fixed = uflags & (PM_MAP_FIXED | PM_MAP_FIXED_NOREPLACE);
	struct pm_hugetlb_resv *hresv = NULL;
	unsigned long credit = 0;
	struct pm_shmem *ufile;
	struct pm_vma *vma = NULL;
	bool hugetlb, deferred, all = false;
	long ret;
	int late;

	/* The order of Linux's checks: sys_mmap, ksys_mmap_pgoff, do_mmap, __get_unmapped_area;
	 * the rest once the address is chosen (mmap_late_error). */
	if (pm__mm_bad(mm) || (offset & ~PAGE_MASK))
		return -EINVAL;
	/* ksys_mmap_pgoff: MAP_ANONYMOUS ignores the file; without it there must be one. */
	if (anon)
		file = NULL;
	else if (!file)
		return -EBADF;
	if (file && unlikely(file->m != mm->m))
		return -EINVAL; /* an object of another machine: its frames are not ours */
	/* Hugetlb: the length in 2 MiB pages; MAP_HUGETLB with a file that is not a hugetlb
	 * object is -EINVAL, and anonymous MAP_HUGETLB's page size is 2 MiB or the default
	 * (hstate_sizelog: the machine has no other pool). A length that wraps is 0 here, and
	 * so -EINVAL below. */
	hugetlb = file ? file->hugetlb : (uflags & PM_MAP_HUGETLB);
	if (file && !file->hugetlb && (uflags & PM_MAP_HUGETLB))
		return -EINVAL;
	if (!file && hugetlb) {
		unsigned log = (uflags >> LX_MAP_HUGE_SHIFT) & LX_MAP_HUGE_MASK;

		if (log && log != PMD_SHIFT)
			return -EINVAL;
	}
	if (hugetlb)
		len = ALIGN_UP(len, PMD_SIZE);
	/* do_mmap */
	if (!len)
		return -EINVAL;
	if (!fixed)
		addr &= PAGE_MASK; /* round_hint_to_min: a hint is masked down, never rounded up */
	len = ALIGN_UP(len, PAGE_SIZE);
	if (!len)
		return -ENOMEM;
	if (pgoff + (len >> PAGE_SHIFT) < pgoff)
		return -EOVERFLOW;
	/* __get_unmapped_area, with hugetlb_get_unmapped_area's rules: a fixed address in whole
	 * 2 MiB pages; a hint rounded up to 2 MiB (past the top: none), never taken as is, or a
	 * PMD leaf would reach outside the VMA. */
	if (len > PM_TASK_SIZE)
		return -ENOMEM;
	if (hugetlb) {
		align = PMD_SIZE;
		if (fixed && (addr & ~PMD_MASK))
			return -EINVAL;
		if (!fixed)
			addr = ALIGN_UP(addr, PMD_SIZE);
	}
	if (fixed) {
		if (addr > PM_TASK_SIZE - len)
			return -ENOMEM;
		if (addr & ~PAGE_MASK)
			return -EINVAL;
		if (addr < PM_USER_MIN)
			return -EPERM;
	}

	vm_flags = prot_to_vm(prot) | VM_MAYREAD | VM_MAYWRITE | (hugetlb ? VM_HUGETLB : 0);
	if (type == PM_MAP_SHARED || type == PM_MAP_SHARED_VALIDATE)
		vm_flags |= VM_SHARED | VM_MAYSHARE;
	if (uflags & PM_MAP_STACK)
		vm_flags |= VM_NOHUGEPAGE; /* calc_vm_flag_bits, 6.7+ */
	if (uflags & PM_MAP_NORESERVE)
		vm_flags |= VM_NORESERVE; /* honoured: pinmm overcommits always */
	if (!hugetlb && (vm_flags & (VM_NORESERVE | VM_SHARED | VM_WRITE)) == VM_WRITE)
		vm_flags |= VM_ACCOUNT; /* accountable_mapping() */
	if (uflags & LX_MAP_GROWSDOWN)
		vm_flags |= VM_GROWSDOWN; /* private anonymous only: mmap_late_error */
	/* No memlock limit (CAP_IPC_LOCK); hugetlb VMAs drop VM_LOCKED, as __mmap_complete. */
	if ((uflags & LX_MAP_LOCKED) && !hugetlb)
		vm_flags |= VM_LOCKED;
	if (!file && !hugetlb && !(vm_flags & VM_SHARED) && !(len & ~PMD_MASK))
		align = PMD_SIZE; /* anonymous lengths of whole 2 MiB get THP alignment (6.12+) */

	late = mmap_late_error(uflags, file || hugetlb, hugetlb, offset, len);
	/* Nothing chosen under the lock comes before these for a fixed mapping but -EEXIST. */
	if (late && fixed && !(uflags & PM_MAP_FIXED_NOREPLACE))
		return late;
	ufile = file;
	/* FIXED_NOREPLACE prepares only once it knows the place is free: Linux checks before
	 * hugetlbfs reserves, and an object's shared reservations stay with it after a failure. */
	deferred = !late && (uflags & PM_MAP_FIXED_NOREPLACE);
	if (!late && !deferred)
		late = mmap_prepare(mm, &file, &pgoff, vm_flags, len, offset, anon, &hresv, 0);
	else
		file = NULL; /* no reference taken */

again:
	ret = lock_for_mmap(mm, addr, len, align, flags, all);
	if (ret < 0)
		goto fail_unlocked;
	if ((uflags & PM_MAP_FIXED_NOREPLACE) &&
	    pm__find_vma_intersection(mm, (unsigned long)ret, (unsigned long)ret + len)) {
		ret = -EEXIST;
		goto fail;
	}
	if (deferred) {
		deferred = false;
		file = ufile;
		late = mmap_prepare(mm, &file, &pgoff, vm_flags, len, offset, anon, &hresv, 0);
	}
	/*
	 * The pool could not cover a hugetlb MAP_FIXED mapping: Linux reserves only once the old
	 * mappings there gave theirs back (vms_clean_up_area before mmap_file), so count what
	 * they will and try again with that credit. The range design does it holding every
	 * range, where the VMA count cannot ask for a restart after the credit is spent.
	 */
	if (late == -ENOMEM && hugetlb && (uflags & PM_MAP_FIXED)) {
		credit = hugetlb_resv_credit(mm, addr, addr + len);
		if (credit && !pm__range_covers(mm, 0, PM_TASK_SIZE)) {
			credit = 0;
			ret = -EAGAIN;
			goto fail;
		}
		if (credit) {
			file = ufile;
			pgoff = offset >> PAGE_SHIFT;
			late = mmap_prepare(mm, &file, &pgoff, vm_flags, len, offset, anon, &hresv,
					    credit);
			if (late)
				credit = 0;
		}
	}
	if (late) {
		ret = late;
		goto fail;
	}
	vma = pm__vma_alloc(mm);
	if (!vma) {
		ret = -ENOMEM;
		goto fail;
	}
	vma->flags = vm_flags;
	vma->file = file;
	vma->pgoff = pgoff;
	if (fixed && pm__find_vma_intersection(mm, addr, addr + len))
		ret = do_munmap(mm, addr, addr + len) ?: ret;
	if (ret < 0)
		goto fail;
	vma->start = (unsigned long)ret;
	vma->end = vma->start + len;
	/* Linux's vm_pgoff of private anonymous memory: the page it was first mapped at. */
	if (!file)
		vma->pgoff = vma->start >> PAGE_SHIFT;
	if (hresv)
		pm__hugetlb_resv_set_base(hresv, vma->start);
	ret = pm__vma_insert(mm, vma) ?: ret;
	if (ret < 0)
		goto fail;
	vma->hresv = hresv; /* the VMA's now: released with it (mm/vma.c) */
	hresv = NULL;
	if (mm->policy->eager_upper)
		pm__upper_tables_prepare(mm, vma->start, vma->end);
	/* hugetlbfs_file_mmap: a writable mapping grows its object to its end - once the
	 * mapping stands, so a failed mmap leaves the size as it was. */
	if (hugetlb && !anon && (vm_flags & VM_WRITE))
		pm__shmem_hugetlb_extend(file, offset + len);
	pm__vma_link_file(vma);
	/* Uncharged at the limit, it merges - or, without memory to merge, is charged now. */
	pm__vma_settle(mm, pm__vma_try_merge(mm, vma));
	mmap_write_unlock(mm);

	/* Populated: MAP_LOCKED always, MAP_POPULATE unless MAP_NONBLOCK (populate.c). */
	if ((uflags & (PM_MAP_POPULATE | PM_MAP_NONBLOCK)) == PM_MAP_POPULATE ||
	    (uflags & LX_MAP_LOCKED))
		pm__mm_populate(mm, (unsigned long)ret, len, vm_flags);
	return ret;

fail:
	/* A credit spent on a mapping that failed after all: the old mappings give their
	 * reservations back now, or the pool would stay promised past its free pages. They
	 * keep their pages; their later faults there take what the pool has (pinmm's failure
	 * path only). The part of the credit that counted pages they still map is not given
	 * back: a private new mapping's reservation goes with it below; a shared one's stays
	 * with its object, over-promising by at most those pages until they are unmapped. */
	if (credit)
		hugetlb_resv_drop(mm, addr, addr + len);
	mmap_write_unlock(mm);
	if (ret == -EAGAIN) {
		/* The VMA count asks for every range (range.c): start again with them all. */
		free(vma);
		vma = NULL;
		all = true;
		goto again;
	}
fail_unlocked:
	free(vma); /* never in the tree */
	if (file)
		pm_shmem_put(file);
	pm__hugetlb_resv_put(hresv);
	return ret;
}

/* ---- mprotect ---- */

/* May a present mapping of @page become writable under @vm_flags without a fault? */
static bool can_change_writable(unsigned long vm_flags, struct pm_page *page, bool special)
{
	if (!(vm_flags & VM_WRITE) || special)
		return false;
	if (vm_flags & VM_SHARED)
		return true;
	return folio_test_anon(page_folio(page)) && page_anon_exclusive(page);
}

static uint64_t prot_bits(unsigned long vm_flags)
{
	return (vm_flags & (VM_READ | VM_WRITE | VM_EXEC)) ? _PAGE_USER : 0; /* vma_is_accessible */
}

static void change_pte_range(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long start,
			     unsigned long end, unsigned long vm_flags)
{
	struct pm_spinlock *ptl;
	pm_entry_t *ptep = pm__pte_offset_map_lock(mm, pmdp, start, &ptl);

	if (!ptep)
		return;
	for (pm_entry_t *stop = ptep + ((end - start) >> PAGE_SHIFT); ptep < stop; ptep++) {
		pte_t pte = ptep_get(ptep);
		uint64_t v;

		if (!pte_present(pte)) {
			/*
			 * A page-cache page that a migration started from another mm is moving
			 * (mm/migrate.c): the mapping it gets back takes the new protection; a
			 * writable entry may only become readable, as Linux's change_pte_range
			 * makes it.
			 */
			if (is_migration_entry(pte)) {
				v = (pte.val & ~(_PAGE_USER | _PAGE_RW)) | prot_bits(vm_flags);
				if ((pte.val & _PAGE_RW) && (vm_flags & VM_WRITE))
					v |= _PAGE_RW;
				set_pte(ptep, (pte_t){ v });
			}
			continue;
		}
		v = pte.val & ~(_PAGE_USER | _PAGE_RW);
		v |= prot_bits(vm_flags);
		if (can_change_writable(vm_flags, pfn_to_page(mm->m, pte_pfn(pte)), pte_special(pte)))
			v |= _PAGE_RW | _PAGE_DIRTY;
		/* Dropping write needs no exchange: a racing walker re-checks the entry. */
		set_pte(ptep, (pte_t){ v });
	}
	pm_spin_unlock(ptl);
}

/*
 * Give the 2 MiB entry at @pmdp @vm_flags' protection, whatever it is under the PMD lock: a
 * leaf, or a migration entry (as change_pte_range's; the leaf the migration puts back takes
 * the new protection). @read is the entry as read without the lock. Return false if it is
 * neither any more (a migration split the THP).
 */
static bool change_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr, pmd_t read,
			    unsigned long vm_flags)
{
	struct pm_spinlock *pml = pm__pmd_lockptr(mm, pmdp);
	pmd_t pmd;
	uint64_t v;

	if (unlikely(pm__pmd_migration_hook) && is_pmd_migration_entry(read))
		pm__pmd_migration_hook(mm, addr);
	pm__ptl_lock(pml);
	pmd = pmdp_get(pmdp);
	if (pmd_leaf(pmd)) {
		v = pmd.val & ~(_PAGE_USER | _PAGE_RW);
		v |= prot_bits(vm_flags);
		if (can_change_writable(vm_flags, pfn_to_page(mm->m, pmd_pfn(pmd)),
					pmd_special(pmd)))
			v |= _PAGE_RW | _PAGE_DIRTY;
		set_pmd(pmdp, (pmd_t){ v });
	} else if (is_pmd_migration_entry(pmd)) {
		v = (pmd.val & ~(_PAGE_USER | _PAGE_RW)) | prot_bits(vm_flags);
		if ((pmd.val & _PAGE_RW) && (vm_flags & VM_WRITE))
			v |= _PAGE_RW;
		set_pmd(pmdp, (pmd_t){ v });
	}
	pm_spin_unlock(pml);
	return !pmd_table(pmd);
}

/* Change the protection of [start, end), which lies inside one VMA. */
static void change_protection(struct pm_mm *mm, unsigned long start, unsigned long end,
			      unsigned long vm_flags)
{
	pm_entry_t *pmdp;

	for_each_pmd_span(mm, a, next, start, end, pmdp) {
		pmd_t pmd = pmdp_get(pmdp);

		if (pmd_table(pmd)) {
			change_pte_range(mm, pmdp, a, next, vm_flags);
		} else if (pmd_leaf(pmd) || is_pmd_migration_entry(pmd)) {
			/* A leaf, or a migration entry of a page another mm's migration, or a
			 * compaction, is moving (mm/migrate.c), which may turn into the other
			 * under the PMD lock: decided on the entry read under it. */
			if (!change_huge_pmd(mm, pmdp, a, pmd, vm_flags))
				next = a; /* a PTE table now: look again */
		}
	}
}

/*
 * mprotect_fixup()'s VM_ACCOUNT: a private VMA made writable is charged for good, unless it is
 * hugetlb, shared or NORESERVE; an anonymous one is uncharged when it stops being writable
 * while it has no anon_vma (no page to keep). Its anon_vma is read under its write lock, which
 * keeps the faults that would make one out, as Linux's mmap_lock does.
 * Context: mmap_lock (W) over @vma.
 */
static unsigned long mprotect_account(struct pm_vma *vma, unsigned long newflags)
{
	mmap_assert_write_locked(vma->mm);
	if (newflags & VM_WRITE) {
		if (!(vma->flags &
		      (VM_ACCOUNT | VM_WRITE | VM_HUGETLB | VM_SHARED | VM_NORESERVE)))
			newflags |= VM_ACCOUNT;
	} else if ((vma->flags & VM_ACCOUNT) && vma_is_anonymous(vma)) {
		pm__vma_start_write(vma);
		if (!pm__vma_anon_vma(vma))
			newflags &= ~VM_ACCOUNT;
	}
	return newflags;
}

int pm_mprotect(struct pm_mm *mm, unsigned long start, size_t len, int prot)
{
	int grows = prot & (LX_PROT_GROWSDOWN | LX_PROT_GROWSUP);
	unsigned long end, tmp;
	struct pm_vma *vma;
	bool all = false;
	int err = 0;

	/* do_mprotect_pkey's order: the length before prot, so a zero length is 0 and a
	 * wrapping one -ENOMEM whatever prot says; prot as arch_validate_prot (x86: generic). */
	prot &= ~grows;
	if (pm__mm_bad(mm) || grows == (LX_PROT_GROWSDOWN | LX_PROT_GROWSUP) ||
	    (start & ~PAGE_MASK))
		return -EINVAL;
	if (!len)
		return 0;
	len = ALIGN_UP(len, PAGE_SIZE);
	end = start + len;
	if (end <= start)
		return -ENOMEM;
	if (prot & ~(PM_PROT_READ | PM_PROT_WRITE | PM_PROT_EXEC | LX_PROT_SEM))
		return -EINVAL;

again:
	mmap_write_lock_range_or_all(mm, start, end, all);
	vma = pm__find_vma(mm, start);
	/* PROT_GROWSDOWN extends the change down to the start of the VMA it meets, which must
	 * grow down (-ENOMEM where none is); x86 has no VM_GROWSUP, so PROT_GROWSUP is -EINVAL
	 * wherever a VMA is found. The lock of the change covers that VMA: its edge. */
	if (grows & LX_PROT_GROWSDOWN) {
		if (!vma || vma->start >= end) {
			err = -ENOMEM;
			goto out;
		}
		if (!(vma->flags & VM_GROWSDOWN)) {
			err = -EINVAL;
			goto out;
		}
		start = vma->start;
		grows = 0;
	}
	if (!vma || vma->start > start) {
		err = -ENOMEM;
		goto out;
	}
	if (grows) {
		err = -EINVAL;
		goto out;
	}
	for (tmp = start; tmp < end;) {
		unsigned long newflags, e;

		vma = pm__find_vma(mm, tmp);
		if (!vma || vma->start > tmp) {
			err = -ENOMEM; /* a hole: what came before it stays changed, as in Linux */
			break;
		}
		e = min(vma->end, end);
		newflags = (vma->flags & ~(VM_READ | VM_WRITE | VM_EXEC)) | prot_to_vm(prot);
		/* Unchanged flags change nothing, not even VM_ACCOUNT: a read-only accounted
		 * VMA without an anon_vma (a fork child's WIPEONFORK copy) keeps its charge.
		 * Changed ones merge before they split, so only a change that leaves a VMA
		 * more meets max_map_count (Linux's mprotect_fixup). */
		if (newflags != vma->flags)
			newflags = mprotect_account(vma, newflags);
		if (newflags != vma->flags) {
			unsigned long oldflags = vma->flags;

			err = pm__vma_modify(mm, vma, tmp, e, newflags);
			if (err)
				break;
			change_protection(mm, tmp, e, newflags);
			/* A private locked VMA made writable is write-faulted now. */
			if ((oldflags & (VM_WRITE | VM_SHARED | VM_LOCKED)) == VM_LOCKED &&
			    (newflags & VM_WRITE))
				pm__mm_populate_locked(mm, tmp, e);
		}
		tmp = e;
	}
out:
	mmap_write_unlock(mm);
	if (err == -EAGAIN && !all) {
		/* The VMA count asks for every range (range.c); what was done is done again. */
		all = true;
		err = 0;
		goto again;
	}
	return err;
}
