// SPDX-License-Identifier: MIT
/*
 * meminfo.c - the machine-wide counts /proc/meminfo shows that pm_hugetlb_pool() does not:
 * HugePages_Rsvd.
 *
 * The pool's counts (mem/hugetlb_pool.c) are written under hugetlb_lock; a reader takes it too, so
 * what it returns is one consistent state of the pool, (H) of internal.h holding in it.
 */
#include "mem/mem.h"

int pm_hugetlb_reserved(struct pm_machine *m, size_t *resv)
{
	if (unlikely(!m))
		return -EINVAL;
	if (resv) {
		pm_spin_lock(&m->hugetlb_lock);
		*resv = m->hugetlb_resv;
		pm_spin_unlock(&m->hugetlb_lock);
	}
	return 0;
}
