/* SPDX-License-Identifier: MIT */
/*
 * pinmm/consumers.h - the callers the seeds were written for: an RDMA-style memory
 * registration (umem), direct I/O, and a gup_test-compatible benchmark interface. They use
 * only the public GUP API.
 */
#ifndef PINMM_CONSUMERS_H
#define PINMM_CONSUMERS_H

#include <pinmm/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- umem: ib_umem-like memory registration ---- */

#define PM_UMEM_WRITE 0x1 /* the registration may be written (pins with FOLL_WRITE) */

/* One physically contiguous run of pinned frames. */
struct pm_sg {
	unsigned long pfn;
	unsigned long npages;
};

struct pm_umem;

/** How pm_umem_release() gives the pins back (the three versions of seed 003). */
enum pm_unpin_mode {
	PM_UNPIN_RANGE = 0, /* per SG entry, unpin_user_page_range_dirty_lock (final, default) */
	PM_UNPIN_BATCH,	    /* rebuild a page array, unpin_user_pages_dirty_lock (the RFC) */
	PM_UNPIN_PER_PAGE,  /* one unpin per page (before) */
};

/**
 * pm_umem_get() - pin [@addr, @addr + @len) FOLL_LONGTERM (+FOLL_WRITE with PM_UMEM_WRITE)
 * and build its scatter-gather table of maximal physically contiguous runs.
 *
 * Return: the registration, or NULL with errno EINVAL (len 0, overflow, unknown access bits),
 * EFAULT (a hole or no permission), ENOMEM; nothing stays pinned on failure.
 */
PM_API struct pm_umem *pm_umem_get(struct pm_mm *mm, unsigned long addr, size_t len,
				   unsigned access);
PM_API const struct pm_sg *pm_umem_sg(const struct pm_umem *umem, unsigned long *nents);
/** pm_umem_release() - unpin (dirtying when writable) and free the registration. */
PM_API void pm_umem_release(struct pm_umem *umem, enum pm_unpin_mode mode);

/* ---- direct I/O ---- */

/**
 * pm_dio_read() - read from @fd at @offset into the address space at @addr (the pages are
 * pinned for write, at most 64 at a time, and released dirty).
 * Return: bytes transferred, or -errno when none were (-EFAULT for a hole at @addr).
 */
PM_API long pm_dio_read(struct pm_mm *mm, int fd, off_t offset, unsigned long addr, size_t len);
/** pm_dio_write() - write the address space at @addr to @fd at @offset. */
PM_API long pm_dio_write(struct pm_mm *mm, int fd, off_t offset, unsigned long addr,
			 size_t len);

/* ---- gup_test: Linux's mm/gup_test.c interface ---- */

#define PM_GUP_TEST_MAX_PAGES_TO_DUMP 8
#define PM_GUP_TEST_FLAG_DUMP_PAGES_USE_PIN 0x1

struct pm_gup_test { /* fields as Linux's struct gup_test */
	uint64_t get_delta_usec, put_delta_usec, addr, size;
	uint32_t nr_pages_per_call, gup_flags, test_flags;
	uint32_t which_pages[PM_GUP_TEST_MAX_PAGES_TO_DUMP];
};

enum {
	PM_GUP_FAST_BENCHMARK = 1,
	PM_PIN_FAST_BENCHMARK,
	PM_PIN_LONGTERM_BENCHMARK,
	PM_GUP_BASIC_TEST,
	PM_PIN_BASIC_TEST,
	PM_DUMP_USER_PAGES_TEST,
};

/**
 * pm_gup_test() - run one gup_test command on @mm, as the ioctl would.
 *
 * Memory follows what the walk takes, not .size: a size far beyond the mapping costs no more
 * than the mapping (the walk ends at the first hole, as Linux's; see src/consumers/gup_test.c).
 * Return: 0 (the struct is updated: timings, and size truncated to what was covered), or
 * -EINVAL (unknown command, NULL @mm or @gup, addr or size beyond an unsigned long, a range
 * that wraps, unknown flags), -ENOMEM (not even the first pointers could be allocated).
 */
PM_API int pm_gup_test(struct pm_mm *mm, unsigned cmd, struct pm_gup_test *gup);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_CONSUMERS_H */
