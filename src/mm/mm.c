// SPDX-License-Identifier: MIT
/*
 * mm.c - an address space's life: creation, teardown, and its small accessors.
 *
 * mmap_lock is a pm_rwsem (lib/rwsem.h), like the kernel's rwsem: once mmap or munmap waits,
 * new readers (faults, slow GUP) queue behind it, and waiters spin briefly before sleeping.
 * Nothing takes it recursively.
 */
#include "internal.h"

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
	mm->knobs = m->knobs;
	mm->mmap_base = PM_MMAP_BASE;
	pm_spin_init(&mm->page_table_lock);
	pm_rwsem_init(&mm->mmap_lock);
	mm->pgd = pm__pgd_alloc(m);
	if (!mm->pgd) {
		free(mm);
		return NULL;
	}
	return mm;
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
 * pm__unmap_all() - remove every VMA, mapping and page table of @mm but the PGD.
 * Context: mmap_lock held for write (or the mm is private to the caller).
 */
void pm__unmap_all(struct pm_mm *mm)
{
	for (unsigned i = 0; i < mm->nr_vmas; i++)
		pm__vma_unlink_file(mm->vmas[i]);
	for (unsigned i = 0; i < mm->nr_vmas; i++)
		pm__zap_range(mm, mm->vmas[i]->start, mm->vmas[i]->end);
	while (mm->nr_vmas) {
		struct pm_vma *vma = mm->vmas[mm->nr_vmas - 1];

		mm->nr_vmas--;
		pm__vma_free(vma);
	}
	pm__free_pgtables(mm, 0, PM_TASK_SIZE);
}

void pm_mm_destroy(struct pm_mm *mm)
{
	struct pm_machine *m;

	if (!mm)
		return;
	m = mm->m;
	pthread_mutex_lock(&m->lock);
	pm_list_del(&mm->link);
	pthread_mutex_unlock(&m->lock);

	mmap_write_lock(mm);
	pm__unmap_all(mm);
	mmap_write_unlock(mm);
	pm__pgd_free(m, mm->pgd);
	free(mm->vmas);
	free(mm);
}

struct pm_machine *pm_mm_machine(struct pm_mm *mm)
{
	return mm ? mm->m : NULL;
}

bool pm_mm_has_pinned(struct pm_mm *mm)
{
	return mm && mm_has_pinned(mm);
}
