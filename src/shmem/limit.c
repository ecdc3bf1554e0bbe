// SPDX-License-Identifier: MIT
/*
 * limit.c - the exact size limit of a shmem object (max_bytes).
 *
 * The object's quota of max_pages units is split between a global pool (under limit.lock) and
 * per-CPU reserves: a charge takes a unit from its CPU's reserve with a compare-and-swap (no
 * shared line in the common case), refilling it from the pool a batch at a time; when the pool
 * runs dry the charge reclaims every CPU's reserve under the lock before it fails. Units are
 * conserved - used + reserves + pool == max_pages - so the object can never hold more than
 * max_pages pages, and a charge fails only when all of them are in use.
 *
 * limit.lock is the innermost shmem lock: a charge runs under tree_lock (cache.c).
 */
#include "shmem/shmem.h"

#define LIMIT_STRIDE (PM_CACHELINE / sizeof(long))

static long limit_batch(struct pm_shmem *f)
{
	long b = (long)(f->max_pages / (4 * f->m->nr_cpus));

	return b < 1 ? 1 : b > 32 ? 32 : b;
}

static _Atomic long *limit_slot(struct pm_shmem *f)
{
	return &f->limit.xpcpu[pm_cpu_index(f->m->nr_cpus) * LIMIT_STRIDE];
}

bool pm__shmem_limit_charge(struct pm_shmem *f)
{
	struct pm_shmem_limit *l = &f->limit;
	_Atomic long *slot = limit_slot(f);
	long v = atomic_load_relaxed(slot), batch;

	while (v > 0)
		if (atomic_cas_acquire(slot, &v, v - 1))
			return true;

	batch = limit_batch(f);
	pm_spin_lock(&l->lock);
	if (l->pool < 1) {
		/* Near the limit: take back every CPU's reserve before saying no. */
		for (unsigned c = 0; c < f->m->nr_cpus; c++)
			l->pool += atomic_xchg_mb(&l->xpcpu[c * LIMIT_STRIDE], 0);
	}
	if (l->pool < 1) {
		pm_spin_unlock(&l->lock);
		return false;
	}
	l->pool--;
	if (l->pool >= batch * (long)f->m->nr_cpus * 2) {
		l->pool -= batch;
		atomic_add_relaxed(slot, batch);
	}
	pm_spin_unlock(&l->lock);
	return true;
}

void pm__shmem_limit_uncharge(struct pm_shmem *f, long n)
{
	struct pm_shmem_limit *l = &f->limit;

	pm_spin_lock(&l->lock);
	l->pool += n;
	pm_spin_unlock(&l->lock);
}

/* Context: a new object, not yet shared. Return: 0 or -ENOMEM. */
int pm__shmem_limit_init(struct pm_shmem *f)
{
	pm_spin_init(&f->limit.lock);
	if (!f->max_pages)
		return 0;
	f->limit.xpcpu = calloc(f->m->nr_cpus * LIMIT_STRIDE, sizeof(long));
	if (!f->limit.xpcpu)
		return -ENOMEM;
	pm__trace_object(f->limit.xpcpu, f->m->nr_cpus * LIMIT_STRIDE * sizeof(long),
			 "pm_shmem_limit_pcpu");
	f->limit.pool = (long)f->max_pages;
	return 0;
}

void pm__shmem_limit_fini(struct pm_shmem *f)
{
	pm__trace_object_gone(f->limit.xpcpu);
	free(f->limit.xpcpu);
}
