/* SPDX-License-Identifier: MIT */
/*
 * mm/vma_lock.h - a contended VMA's per-CPU reader counts (vma_lock.c, "Per-CPU reader
 * counts"), and the one question about them that a fault asks inline: does this thread's read
 * lock of the VMA hold one of its slots? Included by vma_lock.c and, through fault.h, by the
 * fault handlers (vma_anon_prepare()); vma_lock.c's prototypes stay in mm/mm.h.
 */
#ifndef PM_MM_VMA_LOCK_H
#define PM_MM_VMA_LOCK_H

#include "mm/mm.h"

struct pm_vma_pcpu_slot {
	_Atomic long xreaders;
	_Atomic unsigned long xanon; /* when a fault here gave the VMA an anon_vma, 0 if none
				      * did (pm__vma_anon_clock(), vma.c) */
} __cacheline_aligned;
_Static_assert(sizeof(struct pm_vma_pcpu_slot) == PM_CACHELINE, "a slot is one line");

struct pm_vma_pcpu {
	_Atomic unsigned xwake;	/* bumped by a reader that leaves while a writer sleeps */
	unsigned mask;		/* slots - 1 */
	struct pm_vma_pcpu_slot slot[];
};

/* The xreaders of the slot whose read lock this thread holds, or NULL (vma_lock.c). */
extern __thread _Atomic long *pm__vma_read_slot __hidden;

/*
 * pm__vma_read_slot_of() - the slot of @vma's per-CPU counts that this thread's read lock
 * holds, or NULL: no VMA read lock, one on the central count, or one of another VMA. Reads
 * only this thread's variable and @vma's counts, which its read lock keeps alive.
 */
static inline struct pm_vma_pcpu_slot *pm__vma_read_slot_of(struct pm_vma *vma)
{
	_Atomic long *s = pm__vma_read_slot;
	struct pm_vma_pcpu *pc;

	if (!s)
		return NULL;
	pc = atomic_load_relaxed(&vma->xpcpu);
	if (!pc || (char *)s < (char *)pc->slot || (char *)s >= (char *)&pc->slot[pc->mask + 1])
		return NULL;
	return &pc->slot[(size_t)((char *)s - (char *)pc->slot) / sizeof(pc->slot[0])];
}

#endif /* PM_MM_VMA_LOCK_H */
