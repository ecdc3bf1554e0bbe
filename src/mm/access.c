// SPDX-License-Identifier: MIT
/*
 * access.c - pm_access(): user-mode loads and stores, copy_{to,from}_user style.
 *
 * This is what a CPU does with a TLB: walk the page tables without mmap_lock and, if the
 * entry is present and permits the access, copy; otherwise take a fault (pm_fault, which
 * takes mmap_lock) and try again. The walk runs under RCU, so the tables it reaches stay valid
 * memory (pgtable.c). The copy must not overlap a change of the entry: a store can never
 * land in a page after it has been unmapped, shared with a fork child, or freed. Every such
 * change is made under the table's PTL (the PMD lock for a 2 MiB leaf), so the copy runs
 * under that lock, or, in the range design, as its lockless reader once several threads copy
 * through the table (pgtable.c, "Lockless readers"): then it writes only its CPU's slot of
 * the table, and a writer that takes the lock waits for it. Linux's design, and the range
 * design under PM_KNOB_PTE_TABLE_LOCK, always copy under the lock. After the lock or the
 * reader's begin, the entry is read again, and the PMD for a PTE table, as
 * pm__pte_offset_map_lock() does.
 */
#include "mm/mm.h"
#include "pgtable/pte_cas.h"

/*
 * Copy @n bytes between @buf and the page at @kaddr. Lockless copies of the same bytes by two
 * CPUs overlap, as two CPUs' loads and stores do: a race of the program that pinmm runs, not
 * of pinmm. Under ThreadSanitizer the page's side is therefore accessed with relaxed atomics,
 * a word at a time where aligned (what the hardware gives), so that TSan reports pinmm's own
 * races only.
 */
static inline void copy_page_part(char *kaddr, void *buf, size_t n, bool write)
{
#if PM_TSAN
	char *b = buf;

	for (size_t i = 0; i < n;) {
		if (!((uintptr_t)(kaddr + i) & 7) && n - i >= 8) {
			uint64_t w;

			if (write) {
				memcpy(&w, b + i, 8);
				__atomic_store_n((uint64_t *)(void *)(kaddr + i), w, __ATOMIC_RELAXED);
			} else {
				w = __atomic_load_n((uint64_t *)(void *)(kaddr + i), __ATOMIC_RELAXED);
				memcpy(b + i, &w, 8);
			}
			i += 8;
		} else {
			if (write)
				__atomic_store_n(kaddr + i, b[i], __ATOMIC_RELAXED);
			else
				b[i] = __atomic_load_n(kaddr + i, __ATOMIC_RELAXED);
			i++;
		}
	}
#else
	if (write)
		memcpy(kaddr, buf, n);
	else
		memcpy(buf, kaddr, n);
#endif
}

/* Where @addr lies in the 2 MiB page of a PMD leaf @pmd, if it permits the access. */
static char *leaf_addr(struct pm_machine *m, pmd_t pmd, unsigned long addr, bool write)
{
	if (pmd_leaf(pmd) && pmd_user(pmd) && (!write || pmd_write(pmd)))
		return (char *)pfn_to_virt(m, pmd_pfn(pmd)) + (addr & ~PMD_MASK);
	return NULL;
}

/* Where @addr lies in the page of @pte, if it permits the access. */
static char *pte_addr(struct pm_machine *m, pte_t pte, unsigned long addr, bool write)
{
	if (pte_present(pte) && pte_user(pte) && (!write || pte_write(pte)))
		return (char *)pfn_to_virt(m, pte_pfn(pte)) + (addr & ~PAGE_MASK);
	return NULL;
}

/*
 * The copy as a lockless reader of @ptl, the lock of the table that @pmd leads to. Return: 0
 * (copied), -EAGAIN (not mapped so: fault), or 1 (could not begin: take the lock).
 */
static int access_page_lockless(struct pm_machine *m, pm_entry_t *pmdp, struct pm_spinlock *ptl,
				unsigned long addr, void *buf, size_t n, bool write)
{
	struct pm_reader_slot *slot;
	char *kaddr = NULL;
	pmd_t pmd;

	if (!pm__ptl_read_begin(m, ptl, &slot))
		return 1;
	pmd = pmdp_get(pmdp); /* (R3): as a locker re-reads after taking the lock */
	if (pmd_walk_lock(m, pmdp, pmd) == ptl)
		kaddr = pmd_leaf(pmd) ? leaf_addr(m, pmd, addr, write) :
			pte_addr(m, ptep_get(&entry_table(m, pmd.val)[pte_index(addr)]), addr, write);
	if (kaddr)
		copy_page_part(kaddr, buf, n, write);
	pm__ptl_read_end(slot);
	return kaddr ? 0 : -EAGAIN;
}

/*
 * Copy within one page if it is mapped with the right permission. *@attach: set when the
 * table should get reader slots (pgtable.c). Return: 0 or -EAGAIN.
 */
static __always_inline int access_page(struct pm_mm *mm, unsigned long addr, void *buf, size_t n,
				       bool write, bool *attach)
{
	struct pm_machine *m = mm->m;
	struct pm_spinlock *lock;
	pm_entry_t *pmdp, *ptep;
	char *kaddr = NULL;
	unsigned seen = 0;
	int ret = -EAGAIN;
	pmd_t pmd;

	pm_rcu_read_lock();
	pmdp = pm__pmd_lookup(mm, addr);
	if (!pmdp)
		goto out;
	pmd = pmdp_get(pmdp);
	if (pte_lockless(mm)) {
		lock = pmd_walk_lock(m, pmdp, pmd);
		if (!lock)
			goto out;
		seen = atomic_load_acquire(&ptl_table_page(lock)->xaccess_threads);
		if (seen & TABLE_READERS) {
			ret = access_page_lockless(m, pmdp, lock, addr, buf, n, write);
			if (ret <= 0)
				goto out;
			ret = -EAGAIN;
		}
		/* A thread already counted (a hint: marks are never cleared) marks nothing. */
		seen = (seen & pm__ptl_reader_bit()) ? 0 : 1;
	}
	if (pmd_leaf(pmd)) {
		/* A 2 MiB leaf: the PMD lock, and the byte inside the 2 MiB page. */
		lock = pm__pmd_lockptr(mm, pmdp);
		pm__ptl_lock(lock);
		kaddr = leaf_addr(m, pmdp_get(pmdp), addr, write);
	} else {
		ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &lock);
		if (!ptep)
			goto out;
		kaddr = pte_addr(m, ptep_get(ptep), addr, write);
	}
	if (kaddr) {
		copy_page_part(kaddr, buf, n, write);
		ret = 0;
		if (seen)
			*attach = pm__ptl_mark_reader(lock);
	}
	pm_spin_unlock(lock);
out:
	pm_rcu_read_unlock();
	return ret;
}

/*
 * pm__access_warm() - the copy of nothing through the table that maps @addr, by this thread:
 * as a workload's first copies would, it counts the thread among the table's copiers, and
 * gives the table its reader slots if it is the second (pgtable.c, "Lockless readers"). For
 * the conflict checker's warm-up (tools/commuter): the steady state of threads that have long
 * copied through their tables. Nothing if nothing maps @addr; in Linux's design, a take of
 * the lock.
 */
void pm__access_warm(struct pm_mm *mm, unsigned long addr)
{
	bool attach = false;
	char none;

	access_page(mm, addr, &none, 0, false, &attach);
	if (attach)
		pm__table_readers_attach(mm, addr);
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
		bool attach = false;
		int err;

		err = access_page(mm, a, (char *)buf + done, n, write, &attach);
		if (attach)
			pm__table_readers_attach(mm, a);
		if (!err) {
			done += n;
			continue;
		}
		err = pm_fault(mm, a & PAGE_MASK, write ? PM_FAULT_WRITE : 0);
		if (err)
			return done ? (long)done : err;
	}
	return (long)done;
}
