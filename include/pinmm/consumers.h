/* SPDX-License-Identifier: MIT */
/*
 * pinmm/consumers.h - the callers the seeds were written for: an RDMA-style memory
 * registration (umem), direct I/O, and a gup_test-compatible benchmark interface with its
 * long-term pin sessions. They use only the public API.
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

/* ---- gup_test long-term pin sessions: Linux's PIN_LONGTERM_TEST_* (gup_longterm.c, cow.c) ---- */

enum { PM_PIN_LONGTERM_TEST_START = 7, PM_PIN_LONGTERM_TEST_STOP, PM_PIN_LONGTERM_TEST_READ };

#define PM_PIN_LONGTERM_TEST_FLAG_USE_WRITE 1 /* pin FOLL_WRITE too */
#define PM_PIN_LONGTERM_TEST_FLAG_USE_FAST 2  /* pm_pin_user_pages_fast (else the slow call) */

struct pm_pin_longterm_test { /* Linux's struct pin_longterm_test */
	uint64_t addr, size;
	uint32_t flags;
};

/**
 * pm_gup_test_longterm() - one PIN_LONGTERM_TEST_* command on @mm's session, as
 * ioctl(gup_fd, cmd, arg) would run it for the calling process; one session per mm.
 *
 * START (@arg: struct pm_pin_longterm_test *): pin [addr, addr + size) FOLL_LONGTERM (a read-
 * only pin of a page another may write first gets a page of its own, as any R/O long-term pin
 * in a private mapping). -EINVAL: a session exists, unknown flags, addr or size not a multiple
 * of 4096, size 0 or above LONG_MAX; -EFAULT: NULL @arg, or a page could not be pinned (a
 * hole, no permission), -ENOMEM: out of memory; on every error nothing stays pinned.
 * STOP (@arg unused): unpin and end the session, if any; always 0.
 * READ (@arg: uint64_t * holding an address of @mm): copy the pinned pages, in order, there
 * (pm_access: COW is broken, protections hold). 0; -EINVAL without a session; -EFAULT: NULL
 * @arg, or the destination is not writable; -ENOMEM. Pages before a failure are copied.
 *
 * pm_mm_destroy() ends @mm's session (it releases the pins); pm_mm_fork()'s child has none.
 * Every command of every mm waits for the others (one mutex, as Linux's).
 * Return: as above; -EINVAL for a NULL @mm or an unknown @cmd.
 */
PM_API int pm_gup_test_longterm(struct pm_mm *mm, unsigned cmd, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* PINMM_CONSUMERS_H */
