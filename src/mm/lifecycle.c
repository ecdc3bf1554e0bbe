// SPDX-License-Identifier: MIT
/*
 * lifecycle.c - an address space's life: creation, teardown (telling the notifiers first, as
 * Linux's exit_mmap() does mmu_notifier_release()), and its small accessors.
 *
 * An mm's locks are its ranges' (range.c, with the lock verbs in range.h; Linux's design has
 * one, mmap_lock), each a pm_rwsem (lib/rwsem.h) like the kernel's rwsem: once mmap or munmap
 * waits, new readers (faults, slow GUP) queue behind it, and waiters spin briefly before
 * sleeping. Nothing takes them recursively: a thread holds one run of an mm's ranges at a time.
 */
#include "mm/range.h"

/* Default top of the top-down mmap area: below the user space's end, leaving a stack gap. */
#define PM_MMAP_BASE ((PM_TASK_SIZE - (128UL << 20)) & PMD_MASK)

/* An address space with no VMAs; the caller links it into the machine's list. */
static struct pm_mm *mm_alloc(struct pm_machine *m)
{
	struct pm_mm *mm;

	if (pm__should_fail(m) || posix_memalign((void **)&mm, PM_CACHELINE, sizeof(*mm)))
		return NULL;
	memset(mm, 0, sizeof(*mm));
	mm->m = m;
	mm->mmap_base = PM_MMAP_BASE;
	pm_spin_init(&mm->page_table_lock);
	/* The design is the machine's (machine.c): its policy, chosen here once (range.c). */
	if (pm__range_init(mm, m->range_mm)) {
		free(mm);
		return NULL;
	}
	if (mm->policy->hugetlb_lists && !knob(m, PM_KNOB_HUGETLB_POOL_LOCK))
		pm__hugetlb_lists_enable(m);
	mm->vcache = calloc(1, sizeof(*mm->vcache));
	if (!mm->vcache)
		goto fail;
	atomic_store_relaxed(&mm->vcache->xrefs, 1);
	mm->pgd = pm__pgd_alloc(m);
	if (!mm->pgd)
		goto fail;
	pm__trace_object(mm, sizeof(*mm), "pm_mm");
	pm__trace_object(mm->vcache, sizeof(*mm->vcache), "pm_vma_cache");
	return mm;
fail:
	free(mm->vcache);
	pm__range_fini(mm);
	free(mm);
	return NULL;
}

struct pm_mm *pm__mm_alloc(struct pm_machine *m)
{
	struct pm_mm *mm = mm_alloc(m);

	if (!mm) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&m->lock);
	pm_list_add_tail(&mm->link, &m->mms);
	pthread_mutex_unlock(&m->lock);
	return mm;
}

struct pm_mm *pm_mm_create(struct pm_machine *m)
{
	if (unlikely(!m)) {
		errno = EINVAL;
		return NULL;
	}
	return pm__mm_alloc(m);
}

/*
 * unmap_all() - remove every VMA, mapping and page table of @mm but the PGD.
 * Context: mmap_lock held for write.
 */
static void unmap_all(struct pm_mm *mm)
{
	struct pm_vma *vma, *first = NULL, **tail = &first;

	mmap_assert_write_locked(mm);

	for (vma = pm__find_vma(mm, 0); vma; vma = pm__vma_next(mm, vma)) {
		*tail = vma;
		tail = &vma->retire_next;
	}
	*tail = NULL;
	/* Each VMA leaves its i_mmap list once zapped, as in munmap (mm/vma.c,
	 * pm__vma_detach_range), and before its page tables are freed. */
	for (vma = first; vma; vma = vma->retire_next) {
		pm__zap_vma_range(vma, vma->start, vma->end);
		pm__vma_unlink_file(vma);
	}
	/* Nobody else can reach the mm, so no lockless lookup either: free without waiting. */
	for (unsigned r = 0; r < mm->nr_ranges; r++)
		pm__vt_destroy(&mm->ranges[r].set.vmt);
	while (first) {
		vma = first;
		first = vma->retire_next;
		pm__vma_free(vma);
	}
	pm__free_pgtables(mm); /* no VMA left: every table goes */
}

int pm_mm_notifier_register(struct pm_mm_notifier *mn, struct pm_mm *mm)
{
	struct pm_mm_notifier *pos;
	int err = 0;

	if (unlikely(!mn || !mn->release) || pm__mm_bad(mm))
		return -EINVAL;
	pthread_mutex_lock(&mm->m->lock);
	for (pos = mm->notifiers; pos && !err; pos = pos->next)
		err = pos == mn ? -EEXIST : 0;
	if (!err) {
		mn->next = mm->notifiers;
		mm->notifiers = mn;
	}
	pthread_mutex_unlock(&mm->m->lock);
	return err;
}

void pm_mm_notifier_unregister(struct pm_mm_notifier *mn, struct pm_mm *mm)
{
	struct pm_mm_notifier **pp;

	if (unlikely(!mn) || pm__mm_bad(mm))
		return;
	pthread_mutex_lock(&mm->m->lock);
	for (pp = &mm->notifiers; *pp; pp = &(*pp)->next) {
		if (*pp == mn) {
			*pp = mn->next;
			break;
		}
	}
	pthread_mutex_unlock(&mm->m->lock);
}

/* mmu_notifier_release(): each notifier leaves the list, then hears of the teardown. */
static void mm_notifiers_release(struct pm_mm *mm)
{
	struct pm_mm_notifier *mn;

	for (;;) {
		pthread_mutex_lock(&mm->m->lock);
		mn = mm->notifiers;
		if (mn)
			mm->notifiers = mn->next;
		pthread_mutex_unlock(&mm->m->lock);
		if (!mn)
			return;
		mn->next = NULL;
		mn->release(mn, mm);
	}
}

/* Everything of @mm but the struct itself goes: its notifiers hear of it first. */
static void mm_teardown(struct pm_mm *mm)
{
	struct pm_machine *m = mm->m;

	mm_notifiers_release(mm);
	pthread_mutex_lock(&m->compact_lock); /* no compaction run is using it */
	pthread_mutex_lock(&m->lock);
	pm_list_del(&mm->link);
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->compact_lock);

	mmap_write_lock_all(mm);
	unmap_all(mm);
	mmap_write_unlock(mm);
	pm__huge_zero_folio_put(m, &mm->xhuge_zero); /* no leaf maps it here any more */
	pm__mm_retire_free_now(mm);
	pm__pgd_free(m, mm->pgd);
	pm__range_fini(mm);
}

/* pm_machine_destroy() under a live @mm: empty it while the machine is still there. */
static void mm_kill(struct pm_mm *mm)
{
	mm_teardown(mm);
	mm->dead = true;
	mm->m = NULL;
}

void pm_mm_destroy(struct pm_mm *mm)
{
	if (!mm)
		return;
	if (!mm->dead)
		mm_teardown(mm);
	pm__trace_object_gone(mm);
	free(mm);
}

/*
 * pm_machine_destroy() is here, above mem/, because a machine destroyed under live address
 * spaces and objects (a misuse) empties them first: mms before objects, since mappings hold
 * references to objects. Then mem/ frees the machine.
 */
void pm_machine_destroy(struct pm_machine *m)
{
	if (!m)
		return;
	pm_rcu_barrier();
	if (!pm_list_empty(&m->mms) || !pm_list_empty(&m->shmems)) {
		fprintf(stderr, "pinmm: pm_machine_destroy: address spaces or shmem objects "
				"are still alive; they are emptied, and every call on them fails\n");
		while (!pm_list_empty(&m->mms))
			mm_kill(pm_list_entry(m->mms.next, struct pm_mm, link));
		while (!pm_list_empty(&m->shmems))
			pm__shmem_kill(pm_list_entry(m->shmems.next, struct pm_shmem, link));
		pm_rcu_barrier();
	}
	pm__table_readers_exit(m); /* every table is freed: only the index is left */
	pm__machine_free(m);
}

struct pm_machine *pm_mm_machine(struct pm_mm *mm)
{
	return pm__mm_bad(mm) ? NULL : mm->m;
}
