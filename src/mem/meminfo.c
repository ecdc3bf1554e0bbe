// SPDX-License-Identifier: MIT
/*
 * meminfo.c - the machine-wide counts /proc/meminfo shows that pm_hugetlb_pool() does not:
 * HugePages_Rsvd.
 *
 * The pool's counts (mem/hugetlb_pool.c) are written under hugetlb_lock; a reader takes it too,
 * with the per-CPU lists folded back (pm__hugetlb_lock_exact), so what it returns is one
 * consistent state of the pool, (H) of internal.h holding in it.
 */
#include "mem/mem.h"

int pm_hugetlb_reserved(struct pm_machine *m, size_t *resv)
{
	if (unlikely(!m))
		return -EINVAL;
	if (resv) {
		pm__hugetlb_lock_exact(m);
		/* Linux's count, which dips below zero while a restored page outlives its
		 * mapping's close (mem/hugetlb_pool.c); it reads as an unsigned long does. */
		*resv = (size_t)m->hugetlb_resv;
		pm__hugetlb_unlock_exact(m);
	}
	return 0;
}
