// SPDX-License-Identifier: MIT
/*
 * vma.c - the VMA set of an address space: a sorted array of VMA pointers.
 *
 * Lookup is a binary search, O(log n). Insertion and removal move pointers, O(n); for the
 * address spaces pinmm serves (up to tens of thousands of VMAs) a memmove of a few pages of
 * pointers beats a balanced tree's pointer chasing, and the array is what Linux's maple tree
 * also is at heart: a cache-friendly sorted index. Neighbours are array neighbours.
 *
 * Locking: the array and every VMA's fields are written under mmap_lock for write. A file VMA
 * is also on its object's i_mmap list, which truncation walks without mmap_lock; its start,
 * end and pgoff therefore change only under the object's i_mmap lock too (pm__split_vma,
 * merge_into), and it leaves the list (pm__vma_unlink_file) before its page tables can be
 * freed.
 */
#include "internal.h"

/* Index of the first VMA whose end is above @addr (nr_vmas if none). */
int pm__vma_index(struct pm_mm *mm, unsigned long addr)
{
	unsigned lo = 0, hi = mm->nr_vmas;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (mm->vmas[mid]->end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)lo;
}

/* The first VMA that ends above @addr (it may start above @addr too), or NULL. */
struct pm_vma *pm__find_vma(struct pm_mm *mm, unsigned long addr)
{
	unsigned i = (unsigned)pm__vma_index(mm, addr);

	return i < mm->nr_vmas ? mm->vmas[i] : NULL;
}

struct pm_vma *pm__find_vma_intersection(struct pm_mm *mm, unsigned long start,
					 unsigned long end)
{
	struct pm_vma *vma = pm__find_vma(mm, start);

	return vma && vma->start < end ? vma : NULL;
}

static int vmas_reserve(struct pm_mm *mm, unsigned extra)
{
	struct pm_vma **n;
	unsigned cap;

	if (mm->nr_vmas + extra <= mm->cap_vmas)
		return 0;
	cap = mm->cap_vmas ? mm->cap_vmas * 2 : 16;
	while (cap < mm->nr_vmas + extra)
		cap *= 2;
	if (pm__should_fail(mm->m))
		return -ENOMEM;
	n = realloc(mm->vmas, cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	mm->vmas = n;
	mm->cap_vmas = cap;
	return 0;
}

/* Insert @vma, which must not overlap any VMA. Return: 0 or -ENOMEM. */
int pm__vma_insert(struct pm_mm *mm, struct pm_vma *vma)
{
	unsigned i;

	if (vmas_reserve(mm, 1))
		return -ENOMEM;
	i = (unsigned)pm__vma_index(mm, vma->start);
	pm_assert(i == mm->nr_vmas || mm->vmas[i]->start >= vma->end);
	memmove(&mm->vmas[i + 1], &mm->vmas[i], (mm->nr_vmas - i) * sizeof(mm->vmas[0]));
	mm->vmas[i] = vma;
	mm->nr_vmas++;
	return 0;
}

static void vma_remove_at(struct pm_mm *mm, unsigned idx)
{
	pm_assert(idx < mm->nr_vmas);
	memmove(&mm->vmas[idx], &mm->vmas[idx + 1], (mm->nr_vmas - idx - 1) * sizeof(mm->vmas[0]));
	mm->nr_vmas--;
}

struct pm_vma *pm__vma_alloc(struct pm_mm *mm)
{
	struct pm_vma *vma = pm__kzalloc(mm->m, sizeof(*vma));

	if (vma) {
		vma->mm = mm;
		pm_list_init(&vma->shared);
	}
	return vma;
}

/* Free a VMA that is in no array and on no i_mmap list; drops its file reference. */
void pm__vma_free(struct pm_vma *vma)
{
	if (vma->file)
		pm_shmem_put(vma->file);
	free(vma);
}

void pm__vma_link_file(struct pm_vma *vma)
{
	if (!vma->file)
		return;
	pm__shmem_map_lock(vma->file);
	pm_list_add_tail(&vma->shared, pm__shmem_i_mmap(vma->file));
	pm__shmem_map_unlock(vma->file);
}

void pm__vma_unlink_file(struct pm_vma *vma)
{
	if (!vma->file)
		return;
	pm__shmem_map_lock(vma->file);
	pm_list_del(&vma->shared);
	pm__shmem_map_unlock(vma->file);
}

/**
 * pm__split_vma() - split @vma at @addr (page aligned, strictly inside it) into two VMAs.
 * Context: mmap_lock held for write. Return: 0, or -ENOMEM with nothing changed.
 */
int pm__split_vma(struct pm_mm *mm, struct pm_vma *vma, unsigned long addr)
{
	struct pm_vma *new;

	mmap_assert_write_locked(mm);
	pm_assert(addr > vma->start && addr < vma->end && !(addr & ~PAGE_MASK));
	new = pm__vma_alloc(mm);
	if (!new)
		return -ENOMEM;
	if (vmas_reserve(mm, 1)) {
		free(new);
		return -ENOMEM;
	}
	/* A PMD leaf never straddles two VMAs: split it (from its deposit; this cannot fail). */
	pm__split_huge_pmd_at(mm, addr);
	new->flags = vma->flags;
	new->file = vma->file;
	new->start = addr;
	new->end = vma->end;
	new->pgoff = vma_pgoff(vma, addr);
	if (new->file) {
		pm__shmem_get(new->file);
		pm__shmem_map_lock(new->file);
		vma->end = addr;
		pm_list_add(&new->shared, &vma->shared);
		pm__shmem_map_unlock(new->file);
	} else {
		vma->end = addr;
	}
	pm__vma_insert(mm, new); /* cannot fail: reserved */
	return 0;
}

static bool can_merge(const struct pm_vma *a, const struct pm_vma *b)
{
	return a->end == b->start && a->flags == b->flags && a->file == b->file &&
	       (!a->file || a->pgoff + ((a->end - a->start) >> PAGE_SHIFT) == b->pgoff);
}

/* Absorb @gone (at index @gone_idx) into its neighbour @keep, under one i_mmap hold. */
static void merge_into(struct pm_mm *mm, struct pm_vma *keep, struct pm_vma *gone,
		       unsigned gone_idx)
{
	unsigned long start = min(keep->start, gone->start), end = max(keep->end, gone->end);
	unsigned long pgoff = keep->start < gone->start ? keep->pgoff : gone->pgoff;

	if (keep->file) {
		pm__shmem_map_lock(keep->file);
		pm_list_del(&gone->shared);
	}
	keep->start = start;
	keep->end = end;
	keep->pgoff = pgoff;
	if (keep->file)
		pm__shmem_map_unlock(keep->file);
	vma_remove_at(mm, gone_idx);
	pm__vma_free(gone);
}

/* Merge @vma with its neighbours where they are compatible. Context: mmap_lock (write). */
void pm__vma_try_merge(struct pm_mm *mm, struct pm_vma *vma)
{
	unsigned i;

	mmap_assert_write_locked(mm);
	i = (unsigned)pm__vma_index(mm, vma->start);
	pm_assert(mm->vmas[i] == vma);
	if (i + 1 < mm->nr_vmas && can_merge(vma, mm->vmas[i + 1]))
		merge_into(mm, vma, mm->vmas[i + 1], i + 1);
	if (i > 0 && can_merge(mm->vmas[i - 1], vma))
		merge_into(mm, mm->vmas[i - 1], vma, i);
}
