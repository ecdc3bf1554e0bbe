// SPDX-License-Identifier: MIT
/*
 * vma_hold.c - a thread that holds a VMA's read lock until told to let go (vma_hold.h).
 */
#include <unistd.h>

#include "mm/mm.h"
#include "vma_hold.h"

static void *hold_thread(void *arg)
{
	struct pmt_vma_holder *h = arg;

	atomic_store(&h->ok, pm__vma_start_read(h->vma));
	atomic_store(&h->held, 1);
	while (!atomic_load(&h->release))
		usleep(100);
	if (atomic_load(&h->ok))
		pm__vma_end_read(h->vma);
	return NULL;
}

void pmt_vma_hold(struct pmt_vma_holder *h, struct pm_vma *vma)
{
	h->vma = vma;
	atomic_store(&h->held, 0);
	atomic_store(&h->release, 0);
	atomic_store(&h->ok, 0);
	if (pthread_create(&h->thread, NULL, hold_thread, h))
		pm_die("pthread_create");
	while (!atomic_load(&h->held))
		usleep(100);
}

bool pmt_vma_release(struct pmt_vma_holder *h)
{
	atomic_store(&h->release, 1);
	pthread_join(h->thread, NULL);
	return atomic_load(&h->ok);
}
