// SPDX-License-Identifier: MIT
/*
 * dio.c - direct I/O between a real file descriptor and an address space, the way
 * fs/direct-io.c used get_user_pages: the user buffer is pinned a window at a time and the
 * "device" (here preadv/pwritev) moves the bytes straight into or out of the pinned frames,
 * with no copy through the address space.
 *
 * The window is DIO_PAGES = 64 pages, the constant of the 2008 fast_gup patch (seed 001), and
 * each window is pinned with pm_pin_user_pages_fast(), the call that patch introduced for this
 * caller. A read writes the frames, so it pins FOLL_WRITE (breaking COW first) and releases
 * the pages dirty; a write only reads them.
 *
 * Partial transfers follow read(2)/write(2): the bytes done so far are returned, and an error
 * is reported only when nothing was transferred. A hole in the user range therefore ends the
 * transfer after the bytes before it, and gives -EFAULT if it is at @addr itself.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#define DIO_PAGES 64

/*
 * Move @bytes between @fd at @pos and the frames described by @iov, retrying after short
 * transfers until done, end of file (a read returning 0) or an error.
 * Return: bytes moved, or -errno when none were.
 */
static long dio_xfer(int fd, off_t pos, struct iovec *iov, int iovcnt, size_t bytes, bool rd)
{
	size_t done = 0;

	while (done < bytes) {
		ssize_t r = rd ? preadv(fd, iov, iovcnt, pos + (off_t)done)
			       : pwritev(fd, iov, iovcnt, pos + (off_t)done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return done ? (long)done : -errno;
		}
		if (r == 0)
			break; /* end of file (read), or a device that takes nothing (write) */
		done += r;
		/* Step over what was moved. */
		while (r > 0 && iovcnt > 0) {
			if ((size_t)r >= iov->iov_len) {
				r -= iov->iov_len;
				iov++;
				iovcnt--;
			} else {
				iov->iov_base = (char *)iov->iov_base + r;
				iov->iov_len -= r;
				r = 0;
			}
		}
	}
	return done;
}

static long dio_rw(struct pm_mm *mm, int fd, off_t offset, unsigned long addr, size_t len,
		   bool rd)
{
	unsigned gup_flags = rd ? PM_FOLL_WRITE : 0;
	struct pm_page *pages[DIO_PAGES];
	struct iovec iov[DIO_PAGES];
	size_t done = 0;

	if (!pm_mm_machine(mm) || offset < 0 || len > LONG_MAX)
		return -EINVAL;
	if (!len)
		return 0;
	/* A buffer that wraps or leaves the user address space is a bad address (access_ok). */
	if (addr + len < addr || addr + len > PM_TASK_SIZE)
		return -EFAULT;

	while (done < len) {
		unsigned long cur = addr + done;
		unsigned long in_page = cur & (PM_PAGE_SIZE - 1);
		unsigned long want = (in_page + (len - done) + PM_PAGE_SIZE - 1) >> PM_PAGE_SHIFT;
		size_t bytes = 0;
		long got, moved;

		if (want > DIO_PAGES)
			want = DIO_PAGES;
		got = pm_pin_user_pages_fast(mm, cur - in_page, want, gup_flags, pages);
		if (got <= 0)
			return done ? (long)done : (got ? got : -EFAULT);

		for (long i = 0; i < got; i++) {
			size_t off = i ? 0 : in_page;
			size_t n = PM_PAGE_SIZE - off;

			if (n > len - done - bytes)
				n = len - done - bytes;
			iov[i].iov_base = (char *)pm_page_address(pages[i]) + off;
			iov[i].iov_len = n;
			bytes += n;
		}
		moved = dio_xfer(fd, offset + (off_t)done, iov, (int)got, bytes, rd);
		/* The device wrote the frames behind the CPU's back: a read dirties them. */
		if (rd)
			pm_unpin_user_pages_dirty_lock(pages, got, true);
		else
			pm_unpin_user_pages(pages, got);
		if (moved < 0)
			return done ? (long)done : moved;
		done += moved;
		if ((size_t)moved < bytes)
			break; /* end of file, or the device stopped early */
	}
	return done;
}

long pm_dio_read(struct pm_mm *mm, int fd, off_t offset, unsigned long addr, size_t len)
{
	return dio_rw(mm, fd, offset, addr, len, true);
}

long pm_dio_write(struct pm_mm *mm, int fd, off_t offset, unsigned long addr, size_t len)
{
	return dio_rw(mm, fd, offset, addr, len, false);
}
