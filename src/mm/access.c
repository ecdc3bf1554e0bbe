// SPDX-License-Identifier: MIT
/*
 * access.c - pm_access(): user-mode loads and stores, copy_{to,from}_user style.
 *
 * This is what a CPU does with a TLB: walk the page tables without mmap_lock and, if the
 * entry is present and permits the access, copy; otherwise take a fault (pm_fault, which
 * takes mmap_lock) and try again. The walk runs under RCU, so the tables it reaches stay valid
 * memory (pgtable.c); the copy itself happens under the PTE table's PTL (or the PMD lock of a
 * 2 MiB leaf) after re-checking the entry. Holding that lock is our TLB shootdown: a zap,
 * an mprotect, a COW break or fork's write-protect takes the same lock to change the entry,
 * so a copy is entirely before or entirely after it - a store can never land in a page after
 * it has been unmapped, shared with a fork child, or freed.
 */
#include "mm/mm.h"

/* Copy within one page if it is mapped with the right permission. Return: 0 or -EAGAIN. */
static int access_page(struct pm_mm *mm, unsigned long addr, void *buf, size_t n, bool write)
{
	struct pm_machine *m = mm->m;
	unsigned long off = addr & ~PAGE_MASK;
	struct pm_spinlock *lock;
	pm_entry_t *pmdp, *ptep;
	char *kaddr = NULL;
	int ret = -EAGAIN;
	pmd_t pmd;
	pte_t pte;

	pm_rcu_read_lock();
	pmdp = pm__pmd_lookup(mm, addr);
	if (!pmdp)
		goto out;
	pmd = pmdp_get(pmdp);
	if (pmd_leaf(pmd)) {
		/* A 2 MiB leaf: the PMD lock, and the byte inside the 2 MiB page. */
		lock = pm__pmd_lockptr(mm, pmdp);
		pm_spin_lock(lock);
		pmd = pmdp_get(pmdp);
		if (pmd_leaf(pmd) && pmd_user(pmd) && (!write || pmd_write(pmd)))
			kaddr = (char *)pfn_to_virt(m, pmd_pfn(pmd)) + (addr & ~PMD_MASK);
	} else {
		ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &lock);
		if (!ptep)
			goto out;
		pte = ptep_get(ptep);
		if (pte_present(pte) && pte_user(pte) && (!write || pte_write(pte)))
			kaddr = (char *)pfn_to_virt(m, pte_pfn(pte)) + off;
	}
	if (kaddr) {
		if (write)
			memcpy(kaddr, buf, n);
		else
			memcpy(buf, kaddr, n);
		ret = 0;
	}
	pm_spin_unlock(lock);
out:
	pm_rcu_read_unlock();
	return ret;
}

long pm_access(struct pm_mm *mm, unsigned long addr, void *buf, size_t len, int write)
{
	size_t done = 0;

	if (pm__mm_bad(mm))
		return -EINVAL;
	if (!len)
		return 0;
	if (addr < PM_USER_MIN || addr >= PM_TASK_SIZE)
		return -EFAULT;
	if (len > PM_TASK_SIZE - addr)
		len = PM_TASK_SIZE - addr;
	while (done < len) {
		unsigned long a = addr + done;
		size_t n = min(len - done, PAGE_SIZE - (a & ~PAGE_MASK));
		int err;

		if (!access_page(mm, a, (char *)buf + done, n, write)) {
			done += n;
			continue;
		}
		err = pm_fault(mm, a & PAGE_MASK, write ? PM_FAULT_WRITE : 0);
		if (err)
			return done ? (long)done : err;
	}
	return (long)done;
}
