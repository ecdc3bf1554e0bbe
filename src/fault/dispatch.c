// SPDX-License-Identifier: MIT
/*
 * dispatch.c - the fault entry points: pm_fault(), and the dispatcher every fault and every
 * slow GUP goes through, pm__handle_mm_fault().
 *
 * The pattern everywhere below: read the entry without a lock; allocate, zero or copy with no
 * lock held; take the narrowest lock (the PTE table's PTL, or the PMD lock for a 2 MiB leaf);
 * re-check that the entry is what we based the decision on; commit, or back out and let the
 * dispatcher look again (VM_FAULT_AGAIN).
 *
 * Locking: every handler runs with mmap_lock held for read (or write), or with the VMA's own
 * lock (FAULT_FLAG_VMA_LOCK; see mm/vma_lock.c), and asserts it (assert_fault_locked), so the
 * VMA and the page tables it covers are stable; entries are not - GUP-fast, pm_access, other
 * faults, MADV_DONTNEED and truncation change them under their locks concurrently.
 */
#include "fault/fault.h"
#include "pgtable/pte_cas.h"

/* Would an unshare fault change anything for this read-only mapped page? */
static bool needs_unshare(struct pm_page *page, bool special)
{
	if (special)
		return true; /* a zero page, 4 KiB or huge: a R/O long-term pin gets its own copy */
	if (folio_test_anon(page_folio(page)))
		return !page_anon_exclusive(page);
	return true; /* page cache page in a private mapping */
}

/**
 * pm__handle_mm_fault() - resolve a fault at @addr (page aligned) in @vma.
 * @fault_flags: FAULT_FLAG_WRITE (break COW, map writable when VM_WRITE allows), or
 *	FAULT_FLAG_UNSHARE (make a read-only mapped page exclusive, keep it read-only).
 *
 * The caller checked permissions (FOLL_FORCE may write through a read-only private mapping:
 * the result is then an exclusive page mapped read-only).
 * Context: mmap_lock held, or @vma's read lock (FAULT_FLAG_VMA_LOCK); assert_fault_locked,
 * as the handlers below.
 * Return: 0, VM_FAULT_SIGBUS or VM_FAULT_OOM (VM_FAULT_AGAIN and VM_FAULT_FALLBACK end here);
 * under FAULT_FLAG_COMPACT also VM_FAULT_COMPACT, nothing done.
 */
vm_fault_t pm__handle_mm_fault(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr,
			       unsigned fault_flags)
{
	pm_entry_t *pmdp;

	assert_fault_locked(vma);
	count_event(mm->m, FAULTS, 1);
	if (is_vm_hugetlb_page(vma))
		return pm__hugetlb_fault(mm, vma, addr, fault_flags); /* fault/hugetlb_fault.c */
	pmdp = pm__pmd_alloc(mm, addr);
	if (!pmdp)
		return VM_FAULT_OOM;
	for (;;) {
		pmd_t pmd = pmdp_get(pmdp);
		pm_entry_t *ptep;
		vm_fault_t ret;
		pte_t pte;

		if (pmd_none(pmd)) {
			if (pm__thp_vma_suitable(vma, addr)) {
				if ((fault_flags & FAULT_FLAG_COMPACT) && (vma->flags & VM_HUGEPAGE) &&
				    !pm__pmd_block_available(mm->m))
					return VM_FAULT_COMPACT;
				ret = pm__do_huge_pmd_anonymous_page(mm, vma, pmdp, fault_flags);
				if (ret & VM_FAULT_AGAIN)
					continue;
				if (!(ret & VM_FAULT_FALLBACK))
					return ret;
				/* No 2 MiB block: go on at PTE level. */
			}
			if (pm__pte_alloc(mm, pmdp, pte_lockless(mm)))
				return VM_FAULT_OOM;
			continue;
		}
		if (pmd_leaf(pmd)) {
			if (((fault_flags & FAULT_FLAG_WRITE) && !pmd_write(pmd)) ||
			    ((fault_flags & FAULT_FLAG_UNSHARE) && !pmd_write(pmd) &&
			     needs_unshare(pfn_to_page(mm->m, pmd_pfn(pmd)), pmd_special(pmd)))) {
				ret = pm__do_huge_pmd_wp_page(mm, vma, pmdp, addr, fault_flags);
				if (ret & VM_FAULT_AGAIN)
					continue;
				return ret;
			}
			return 0;
		}
		ptep = &entry_table(mm->m, pmd.val)[pte_index(addr)];
		pte = ptep_get(ptep);
		if (unlikely(is_migration_entry(pte))) {
			/* Being migrated (mm/migrate.c): sleep until it is mapped again. */
			pm__migration_entry_wait(mm, ptep, pte);
			continue;
		}
		if (pte_none(pte)) {
			if (vma_is_anonymous(vma))
				ret = pm__do_anonymous_page(mm, vma, pmdp, addr, fault_flags);
			else
				ret = pm__shmem_fault(mm, vma, pmdp, addr, fault_flags);
		} else if (((fault_flags & FAULT_FLAG_WRITE) && !pte_write(pte)) ||
			   ((fault_flags & FAULT_FLAG_UNSHARE) && !pte_write(pte) &&
			    needs_unshare(pfn_to_page(mm->m, pte_pfn(pte)), pte_special(pte)))) {
			ret = pm__do_wp_page(mm, vma, pmdp, addr, fault_flags);
		} else {
			ret = 0;
		}
		if (ret & VM_FAULT_AGAIN)
			continue;
		return ret;
	}
}

static bool access_error(struct pm_vma *vma, bool write)
{
	return write ? !(vma->flags & VM_WRITE) : !vma_is_accessible(vma);
}

/*
 * The fault's read hold and the first VMA that ends above @addr. The range design holds
 * @addr's range only, whose tree knows nothing above it; when no VMA is found there, a stack
 * in the next range may still grow down to @addr - it starts at most STACK_RLIMIT above - so
 * the span up to there is held instead and the VMA looked up again.
 */
static struct pm_vma *lock_mm_and_find_vma(struct pm_mm *mm, unsigned long addr)
{
	unsigned long reach = addr < PM_TASK_SIZE - STACK_RLIMIT ? addr + STACK_RLIMIT :
								    PM_TASK_SIZE;
	struct pm_vma *vma;

	mmap_read_lock_range(mm, addr, addr + 1);
	vma = pm__find_vma(mm, addr);
	if (!vma && range_of(mm, reach - 1) != range_of(mm, addr)) {
		mmap_read_unlock(mm);
		mmap_read_lock_range(mm, addr, reach);
		vma = pm__find_vma(mm, addr);
	}
	return vma;
}

/*
 * lock_mm_and_expand() - the part of Linux's lock_mm_and_find_vma() that grows a stack: @addr
 * lies below @vma, a VM_GROWSDOWN VMA found under the read hold of pm_fault(). A grow changes
 * the VMA, so it is made with the write hold of a change (mmap_write_lock_range(): in the range
 * design the ranges from the guard gap below @addr to the VMA's end, widened as every change
 * of VMAs is), taken after the read hold is dropped, as Linux's upgrade does when it cannot
 * trylock; the VMA is looked up again and checked, and the hold is downgraded for the fault
 * once it has grown. Return: the VMA, grown to cover @addr, with the mm's lock held for read;
 * or NULL (no VMA there any more, or it cannot grow: SIGSEGV), with the read hold kept too.
 */
static struct pm_vma *lock_mm_and_expand(struct pm_mm *mm, struct pm_vma *vma,
					 unsigned long addr)
{
	unsigned long lo = addr & PAGE_MASK, end = vma->end;
	unsigned long from = lo >= PM_USER_MIN + STACK_GUARD_GAP ? lo - STACK_GUARD_GAP :
								   PM_USER_MIN;

	for (;;) {
		mmap_read_unlock(mm);
		mmap_write_lock_range(mm, from, end);
		vma = pm__find_vma(mm, addr);
		/* The range design holds what the VMA spans now, or starts again wider. */
		if (vma && !pm__range_covers(mm, from, vma->end)) {
			end = vma->end;
			mmap_write_downgrade(mm); /* its unlock flushes what was retired */
			continue;
		}
		break;
	}
	if (vma && vma->start > addr &&
	    (!(vma->flags & VM_GROWSDOWN) || pm__expand_downwards(mm, vma, lo)))
		vma = NULL;
	mmap_write_downgrade(mm); /* the fault's unlock flushes what the grow retired */
	return vma;
}

/*
 * pm_fault() - a user-mode fault, as the architecture's handler takes it: first under the
 * VMA's own lock, found without mmap_lock (Linux 6.4); if no VMA lock can be had (no VMA, or
 * one being changed) or the fault asks for a retry, under mmap_lock for read.
 * PM_KNOB_NO_PER_VMA_LOCK goes to mmap_lock at once, as before 6.4. A THP fault of a
 * MADV_HUGEPAGE VMA that finds no free 2 MiB block asks for compaction (VM_FAULT_COMPACT):
 * it runs here, with no lock held, once (unless deferred after failed runs, as Linux defers
 * it), and the fault starts again.
 */
int pm_fault(struct pm_mm *mm, unsigned long addr, unsigned flags)
{
	bool write = flags & PM_FAULT_WRITE;
	unsigned fault_flags = (write ? FAULT_FLAG_WRITE : 0) | FAULT_FLAG_COMPACT;
	struct pm_vma *vma;
	vm_fault_t fault;

	if (pm__mm_bad(mm) || (flags & ~PM_FAULT_WRITE))
		return -EINVAL;
	if (addr < PM_USER_MIN || addr >= PM_TASK_SIZE)
		return -EFAULT;
again:
	if (knob(mm->m, PM_KNOB_NO_PER_VMA_LOCK))
		goto lock_mmap;
	vma = pm__lock_vma_under_rcu(mm, addr);
	if (!vma) {
		if (pm__vma_absent(mm, addr, true))
			return vm_fault_to_errno(VM_FAULT_SIGSEGV);
		goto lock_mmap;
	}
	if (unlikely(access_error(vma, write)))
		fault = VM_FAULT_SIGSEGV;
	else
		fault = pm__handle_mm_fault(mm, vma, addr & PAGE_MASK,
					    fault_flags | FAULT_FLAG_VMA_LOCK);
	pm__vma_end_read(vma);
	if (unlikely(fault & VM_FAULT_COMPACT))
		goto compact;
	if (!(fault & VM_FAULT_RETRY)) {
		count_event(mm->m, VMA_LOCK_SUCCESS, 1);
		return vm_fault_to_errno(fault);
	}
	count_event(mm->m, VMA_LOCK_RETRY, 1);

lock_mmap:
	vma = lock_mm_and_find_vma(mm, addr);
	if (vma && vma->start > addr && (vma->flags & VM_GROWSDOWN))
		vma = lock_mm_and_expand(mm, vma, addr);
	if (!vma || vma->start > addr || access_error(vma, write))
		fault = VM_FAULT_SIGSEGV;
	else
		fault = pm__handle_mm_fault(mm, vma, addr & PAGE_MASK, fault_flags);
	mmap_read_unlock(mm);
	if (likely(!(fault & VM_FAULT_COMPACT)))
		return vm_fault_to_errno(fault);
compact:
	pm__compact_for_fault(mm->m);
	fault_flags &= ~FAULT_FLAG_COMPACT; /* once: then a THP if there is a block, else 4 KiB */
	goto again;
}
