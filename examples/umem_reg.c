// SPDX-License-Identifier: MIT
/*
 * umem_reg - register memory the way an RDMA driver does, look at the scatter-gather table a
 * device would be handed, and release the registration.
 *
 *	build/examples/umem_reg
 *
 * An RDMA NIC reads and writes registered memory by physical address, long after the system
 * call that registered it returned. So registration (ibv_reg_mr -> ib_umem_get in Linux) pins
 * every page of the buffer FOLL_LONGTERM, which keeps the frames in place, and describes them
 * to the device as a scatter-gather (SG) table: a list of physically contiguous runs.
 *
 * Two buffers show the two extremes:
 *  - 8 MiB marked MADV_HUGEPAGE: backed by four 2 MiB folios (THP), so at most four runs;
 *    fewer if the allocator happened to place folios next to each other.
 *  - 64 KiB of ordinary 4 KiB pages: one run per stretch of frames with consecutive pfns.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pinmm/pinmm.h>

#define KiB (1UL << 10)
#define MiB (1UL << 20)

static void print_sg(const struct pm_umem *umem)
{
	unsigned long nents, total = 0;
	const struct pm_sg *sg = pm_umem_sg(umem, &nents);

	for (unsigned long i = 0; i < nents; i++) {
		unsigned long last = sg[i].pfn + sg[i].npages - 1;

		printf("    [%lu] pfn %#8lx .. %#8lx  %4lu pages  %5lu KiB\n", i, sg[i].pfn, last,
		       sg[i].npages, sg[i].npages * PM_PAGE_SIZE / KiB);
		total += sg[i].npages;
	}
	printf("    %lu entries, %lu pages\n", nents, total);
}

/* Map @len bytes of anonymous memory, optionally THP-backed, and write every page once. */
static unsigned long make_buffer(struct pm_mm *mm, size_t len, bool thp)
{
	long addr = pm_mmap(mm, 0, len, PM_PROT_READ | PM_PROT_WRITE,
			    PM_MAP_PRIVATE | PM_MAP_ANONYMOUS, NULL, 0);

	if (addr < 0) {
		fprintf(stderr, "pm_mmap: %s\n", pm_strerror(addr));
		return 0;
	}
	/* A length that is a multiple of 2 MiB is placed 2 MiB-aligned, so THP can back it. */
	if (thp)
		pm_madvise(mm, addr, len, PM_MADV_HUGEPAGE);
	for (size_t off = 0; off < len; off += PM_PAGE_SIZE) {
		char byte = (char)(off >> PM_PAGE_SHIFT);

		pm_access(mm, addr + off, &byte, 1, 1);
	}
	return addr;
}

static int register_and_release(struct pm_mm *mm, const char *what, unsigned long addr,
				size_t len)
{
	struct pm_umem *umem;
	struct pm_page *first;

	printf("%s: %zu KiB at %#lx\n", what, len / KiB, addr);

	/* Register for read and write: pins FOLL_LONGTERM | FOLL_WRITE. */
	umem = pm_umem_get(mm, addr, len, PM_UMEM_WRITE);
	if (!umem) {
		fprintf(stderr, "pm_umem_get: %s\n", strerror(errno));
		return 1;
	}
	print_sg(umem);

	/* While registered, the frames are pinned: a DMA engine may use them. */
	first = pm_pfn_to_page(pm_mm_machine(mm), pm_umem_sg(umem, NULL)[0].pfn);
	printf("    first folio: order %u, maybe DMA-pinned: %s\n",
	       pm_folio_order(pm_page_folio(first)),
	       pm_folio_maybe_dma_pinned(pm_page_folio(first)) ? "yes" : "no");

	/*
	 * Deregister: one unpin per SG entry (the default), marking the pages dirty because the
	 * device may have written them.
	 */
	pm_umem_release(umem, PM_UNPIN_RANGE);
	printf("    released; maybe DMA-pinned: %s, dirty: %s\n",
	       pm_folio_maybe_dma_pinned(pm_page_folio(first)) ? "yes" : "no",
	       pm_folio_test_dirty(pm_page_folio(first)) ? "yes" : "no");
	return 0;
}

int main(void)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB };
	unsigned long thp_buf, small_buf;
	struct pm_machine *m;
	size_t free_at_start;
	struct pm_mm *mm;
	int ret = 0;

	m = pm_machine_create(&cfg);
	if (!m) {
		perror("pm_machine_create");
		return 1;
	}
	free_at_start = pm_machine_free_pages(m);
	mm = pm_mm_create(m);
	if (!mm) {
		perror("pm_mm_create");
		pm_machine_destroy(m);
		return 1;
	}

	thp_buf = make_buffer(mm, 8 * MiB, true);
	small_buf = make_buffer(mm, 64 * KiB, false);
	if (!thp_buf || !small_buf)
		ret = 1;
	else
		ret = register_and_release(mm, "THP buffer", thp_buf, 8 * MiB) |
		      register_and_release(mm, "4 KiB-page buffer", small_buf, 64 * KiB);

	pm_mm_destroy(mm);
	pm_rcu_barrier();
	if (pm_machine_free_pages(m) != free_at_start) {
		fprintf(stderr, "leak: %zu free pages, %zu at start\n", pm_machine_free_pages(m),
			free_at_start);
		ret = 1;
	}
	pm_machine_destroy(m);
	return ret;
}
