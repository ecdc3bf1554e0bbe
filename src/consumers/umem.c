// SPDX-License-Identifier: MIT
/*
 * umem.c - an RDMA-style memory registration (the ib_umem of drivers/infiniband/core/umem.c),
 * built on the public pinning API only.
 *
 * Registering pins the whole range FOLL_LONGTERM (a device may DMA into it for as long as the
 * registration lives), 512 pages per pm_pin_user_pages_fast() call, and folds the pinned frames
 * into a scatter-gather table as it goes: an entry is a maximal run of frames with consecutive
 * pfns, whatever folios they belong to. A THP-backed range therefore needs at most one entry per
 * 2 MiB folio, and fewer when the allocator placed folios next to each other.
 *
 * The page array is not kept: the SG table is the registration's only record of its pins, as
 * in the kernel. Releasing walks it back in one of the three ways seed 003 went through:
 *
 *  PM_UNPIN_PER_PAGE	every page on its own: one atomic update per page (before the series)
 *  PM_UNPIN_BATCH	rebuild page arrays of PAGES_PER_LIST entries from the table and hand
 *			them to pm_unpin_user_pages_dirty_lock(), which folds consecutive pages
 *			of one folio into one update (the RFC, v1 of the patch)
 *  PM_UNPIN_RANGE	one pm_unpin_user_page_range_dirty_lock() per SG entry: the mm splits
 *			the run into (folio, count) pairs arithmetically, no array at all (the
 *			version that was merged, as the review asked; the default)
 *
 * A writable registration's pages are marked dirty as they are released: the device may have
 * written them behind the CPU's back.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <pinmm/pinmm.h>

/* One page's worth of page pointers: the chunk size for pinning and for batched release. */
#define PAGES_PER_LIST (PM_PAGE_SIZE / sizeof(struct pm_page *))

struct pm_umem {
	struct pm_machine *machine; /* outlives the mm: pins keep frames alive past munmap */
	unsigned long addr;	    /* the registered range, as the caller gave it */
	size_t length;
	unsigned long npages;	    /* pinned pages = sum of sg[i].npages */
	bool writable;		    /* pinned FOLL_WRITE; released dirty */
	unsigned long nents;	    /* entries used in sg[] */
	uintptr_t stride;	    /* bytes from one frame's descriptor to the next (sg_append) */
	unsigned long sg_cap;	    /* entries allocated */
	struct pm_sg *sg;
};

/*
 * Make room for @more entries. Called before each pin, so that folding a chunk of pinned
 * pages into the table can never fail half way (worst case, every page its own entry).
 */
static int sg_reserve(struct pm_umem *umem, unsigned long more)
{
	unsigned long want = umem->nents + more, cap = umem->sg_cap;
	struct pm_sg *sg;

	if (want <= cap)
		return 0;
	cap = cap ? cap * 2 : 64;
	if (cap < want)
		cap = want;
	sg = realloc(umem->sg, cap * sizeof(*sg));
	if (!sg)
		return -ENOMEM;
	umem->sg = sg;
	umem->sg_cap = cap;
	return 0;
}

/* Fold one pinned frame into the table: extend the last run or start a new one. */
static void sg_append_pfn(struct pm_umem *umem, unsigned long pfn)
{
	struct pm_sg *last = umem->nents ? &umem->sg[umem->nents - 1] : NULL;

	if (last && last->pfn + last->npages == pfn) {
		last->npages++;
	} else {
		umem->sg[umem->nents].pfn = pfn;
		umem->sg[umem->nents].npages = 1;
		umem->nents++;
	}
	umem->npages++;
}

/* Is @page the descriptor of the last frame of @sg? */
static bool sg_ends_at(struct pm_umem *umem, const struct pm_sg *sg, struct pm_page *page)
{
	return pm_pfn_to_page(umem->machine, sg->pfn + sg->npages - 1) == page;
}

/*
 * Fold @n pinned pages into the table: extend the last run while each page is the frame after
 * it, start a new run where one is not (sg_alloc_append_table_from_pages, which compares
 * page_to_pfn() of neighbours). As Linux's vmemmap, a machine's descriptors are one array in
 * pfn order, so "the frame after" is the next descriptor, umem->stride bytes on: the test is
 * arithmetic on the page pointers and reads no descriptor (a descriptor is a cache miss per
 * page: 4 KiB of frames per 64 bytes of descriptors). Only a page that starts a run has its
 * descriptor read, for its pfn. Each run's last page is checked against pm_pfn_to_page() when
 * the run ends; were the descriptors not laid out so, the chunk is folded again page by page.
 */
static void sg_append(struct pm_umem *umem, struct pm_page **pages, unsigned long n)
{
	unsigned long nents0 = umem->nents, npages0 = nents0 ? umem->sg[nents0 - 1].npages : 0;
	struct pm_sg *last = nents0 ? &umem->sg[nents0 - 1] : NULL;
	uintptr_t stride = umem->stride, next = 0;
	unsigned long run = npages0; /* the last run's length, stored when it ends: a count
				      * kept in memory would chain every page's add through it */

	if (last)
		next = (uintptr_t)pm_pfn_to_page(umem->machine, last->pfn + last->npages);
	for (unsigned long i = 0; i < n; i++) {
		if (last && (uintptr_t)pages[i] == next) {
			run++;
			next += stride;
			continue;
		}
		if (last) {
			last->npages = run;
			if (i && !sg_ends_at(umem, last, pages[i - 1]))
				goto slow;
		}
		last = &umem->sg[umem->nents++];
		last->pfn = pm_page_to_pfn(pages[i]);
		run = 1;
		next = (uintptr_t)pages[i] + stride;
	}
	if (last)
		last->npages = run;
	if (n && !sg_ends_at(umem, last, pages[n - 1]))
		goto slow;
	umem->npages += n;
	return;
slow:
	umem->nents = nents0;
	if (nents0)
		umem->sg[nents0 - 1].npages = npages0;
	for (unsigned long i = 0; i < n; i++)
		sg_append_pfn(umem, pm_page_to_pfn(pages[i]));
}

static struct pm_page *sg_page(const struct pm_umem *umem, unsigned long pfn)
{
	return pm_pfn_to_page(umem->machine, pfn);
}

static void release_per_page(struct pm_umem *umem, bool dirty)
{
	for (unsigned long i = 0; i < umem->nents; i++) {
		const struct pm_sg *sg = &umem->sg[i];

		for (unsigned long j = 0; j < sg->npages; j++) {
			struct pm_page *page = sg_page(umem, sg->pfn + j);

			if (dirty)
				pm_unpin_user_pages_dirty_lock(&page, 1, true);
			else
				pm_unpin_user_page(page);
		}
	}
}

/*
 * The RFC's shape. The array lives on the stack: the review of that patch objected to
 * allocating memory on a release path, which must not be able to fail.
 */
static void release_batch(struct pm_umem *umem, bool dirty)
{
	struct pm_page *list[PAGES_PER_LIST];
	unsigned long nr = 0;

	for (unsigned long i = 0; i < umem->nents; i++) {
		const struct pm_sg *sg = &umem->sg[i];

		for (unsigned long j = 0; j < sg->npages; j++) {
			list[nr++] = sg_page(umem, sg->pfn + j);
			if (nr == PAGES_PER_LIST) {
				pm_unpin_user_pages_dirty_lock(list, nr, dirty);
				nr = 0;
			}
		}
	}
	if (nr)
		pm_unpin_user_pages_dirty_lock(list, nr, dirty);
}

static void release_range(struct pm_umem *umem, bool dirty)
{
	for (unsigned long i = 0; i < umem->nents; i++) {
		const struct pm_sg *sg = &umem->sg[i];

		pm_unpin_user_page_range_dirty_lock(sg_page(umem, sg->pfn), sg->npages, dirty);
	}
}

static void umem_unpin(struct pm_umem *umem, enum pm_unpin_mode mode, bool dirty)
{
	switch (mode) {
	case PM_UNPIN_PER_PAGE:
		release_per_page(umem, dirty);
		break;
	case PM_UNPIN_BATCH:
		release_batch(umem, dirty);
		break;
	case PM_UNPIN_RANGE:
	default: /* an unknown mode still releases everything, the default way */
		release_range(umem, dirty);
		break;
	}
	umem->nents = 0;
	umem->npages = 0;
}

static void umem_free(struct pm_umem *umem)
{
	free(umem->sg);
	free(umem);
}

struct pm_umem *pm_umem_get(struct pm_mm *mm, unsigned long addr, size_t len, unsigned access)
{
	unsigned gup_flags = PM_FOLL_LONGTERM;
	struct pm_page *list[PAGES_PER_LIST];
	unsigned long first, end, cur, left;
	struct pm_umem *umem;
	int err;

	if (!pm_mm_machine(mm) || !len || (access & ~PM_UMEM_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	/* The range and its page-aligned end must both be representable. */
	if (addr + len < addr || addr + len > UINTPTR_MAX - (PM_PAGE_SIZE - 1)) {
		errno = EINVAL;
		return NULL;
	}
	first = addr & ~(unsigned long)(PM_PAGE_SIZE - 1);
	end = (addr + len + PM_PAGE_SIZE - 1) & ~(unsigned long)(PM_PAGE_SIZE - 1);
	if (end > PM_TASK_SIZE) {
		errno = EFAULT;
		return NULL;
	}

	umem = calloc(1, sizeof(*umem));
	if (!umem) {
		errno = ENOMEM;
		return NULL;
	}
	umem->machine = pm_mm_machine(mm);
	umem->stride = (uintptr_t)pm_pfn_to_page(umem->machine, 1) -
		       (uintptr_t)pm_pfn_to_page(umem->machine, 0);
	umem->addr = addr;
	umem->length = len;
	umem->writable = access & PM_UMEM_WRITE;
	if (umem->writable)
		gup_flags |= PM_FOLL_WRITE;

	cur = first;
	left = (end - first) >> PM_PAGE_SHIFT;
	while (left) {
		unsigned long chunk = left < PAGES_PER_LIST ? left : PAGES_PER_LIST;
		long got;

		err = sg_reserve(umem, chunk);
		if (err)
			goto fail;
		got = pm_pin_user_pages_fast(mm, cur, chunk, gup_flags, list);
		if (got <= 0) {
			err = got ? (int)got : -EFAULT;
			goto fail;
		}
		sg_append(umem, list, (unsigned long)got);
		cur += (unsigned long)got << PM_PAGE_SHIFT;
		left -= got;
	}

	/* Give back what the worst-case reservations did not use. */
	if (umem->sg_cap > umem->nents) {
		struct pm_sg *sg = realloc(umem->sg, umem->nents * sizeof(*sg));

		if (sg) {
			umem->sg = sg;
			umem->sg_cap = umem->nents;
		}
	}
	return umem;

fail:
	/* Nothing reached a device: give the pins back clean, as ib_umem_get's error path. */
	umem_unpin(umem, PM_UNPIN_RANGE, false);
	umem_free(umem);
	errno = -err;
	return NULL;
}

const struct pm_sg *pm_umem_sg(const struct pm_umem *umem, unsigned long *nents)
{
	if (nents)
		*nents = umem ? umem->nents : 0;
	return umem ? umem->sg : NULL;
}

void pm_umem_release(struct pm_umem *umem, enum pm_unpin_mode mode)
{
	if (!umem)
		return;
	umem_unpin(umem, mode, umem->writable);
	umem_free(umem);
}
