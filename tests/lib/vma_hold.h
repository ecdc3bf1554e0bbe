/* SPDX-License-Identifier: MIT */
/*
 * vma_hold.h - a thread that holds one VMA's read lock (pm__vma_start_read) until told to let
 * go (tests/lib/vma_hold.c), so that the test's own faults in that VMA find it contended:
 *
 *	struct pmt_vma_holder h;
 *	pmt_vma_hold(&h, vma);		(returns once the thread holds it, or failed to)
 *	... faults; atomic_load(&h.ok) says whether the lock was had ...
 *	pmt_vma_release(&h);		(the thread lets go and is joined)
 */
#ifndef PM_TESTS_VMA_HOLD_H
#define PM_TESTS_VMA_HOLD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct pm_vma;

struct pmt_vma_holder {
	struct pm_vma *vma;
	pthread_t thread;
	atomic_int held, release, ok;
};

/* Start a thread that read-locks @vma; return once it has tried. */
void pmt_vma_hold(struct pmt_vma_holder *h, struct pm_vma *vma);

/* Let the thread drop its read lock, and join it. Return: whether it had the lock. */
bool pmt_vma_release(struct pmt_vma_holder *h);

#endif /* PM_TESTS_VMA_HOLD_H */
