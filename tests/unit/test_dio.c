// SPDX-License-Identifier: MIT
/*
 * test_dio.c - direct I/O between a real file and an address space (src/consumers/dio.c).
 *
 * A temporary file (mkstemp in $TMPDIR or /tmp, unlinked at once) holds a known pattern; data
 * is moved with pm_dio_read/pm_dio_write and compared byte for byte with what pread/pwrite and
 * pm_access see, at unaligned offsets, across many 64-page windows, into THP and COW-shared
 * memory, and over ranges that end in a hole.
 */
#include <errno.h>
#include <fcntl.h>
#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#define PAGE PM_PAGE_SIZE
#define FILE_SIZE (3 * MiB + 777)

static struct pm_machine *m;
static struct pm_mm *mm;
static int fd;
static unsigned char *file_data; /* what the file holds, kept in step with every write */

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t st = seed;

	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(tap_rand(&st) >> 56);
}

/* Does the address space hold @want at @addr? */
static bool mem_equals(struct pm_mm *on, unsigned long addr, const unsigned char *want,
		       size_t len)
{
	unsigned char *buf = malloc(len ? len : 1);
	bool same;

	ASSERT_TRUE(buf);
	ASSERT_EQ(pm_access(on, addr, buf, len, 0), (long)len);
	same = !memcmp(buf, want, len);
	for (size_t i = 0; !same && i < len; i++) {
		if (buf[i] != want[i]) {
			diag("first difference at byte %zu: %#x, want %#x", i, buf[i], want[i]);
			break;
		}
	}
	free(buf);
	return same;
}

/* Does the file hold file_data (the model) everywhere? */
static bool file_matches(void)
{
	unsigned char *buf = malloc(FILE_SIZE);
	bool same;

	ASSERT_TRUE(buf);
	ASSERT_EQ(pread(fd, buf, FILE_SIZE, 0), FILE_SIZE);
	same = !memcmp(buf, file_data, FILE_SIZE);
	free(buf);
	return same;
}

static void put_mem(unsigned long addr, const void *buf, size_t len)
{
	ASSERT_EQ(pm_access(mm, addr, (void *)buf, len, 1), (long)len);
}

static void test_round_trip(void)
{
	size_t len = 2 * MiB + 5 * PAGE; /* 517 pages: many 64-page windows and a short one */
	unsigned long addr = pmt_map_anon(mm, len + 2 * PAGE, PM_PROT_READ | PM_PROT_WRITE, false);
	size_t n = len - 1000;
	unsigned char *pat = malloc(n);
	long r;

	ASSERT_TRUE(pat);
	/* Read into memory never touched: the pin faults it in. Both ends unaligned. */
	r = pm_dio_read(mm, fd, 4096 + 13, addr + 77, n);
	is_int(r, n, "read %zu bytes at file offset 4109 into addr + 77", n);
	ok(mem_equals(mm, addr + 77, file_data + 4109, n), "read: memory matches the file");

	/* Write a new pattern back from another unaligned place. */
	fill(pat, n, 42);
	put_mem(addr + 333, pat, n);
	r = pm_dio_write(mm, fd, 999, addr + 333, n);
	is_int(r, n, "write %zu bytes from addr + 333 to file offset 999", n);
	memcpy(file_data + 999, pat, n);
	ok(file_matches(), "write: file matches byte for byte");

	/* And read it back into memory full of something else. */
	fill(pat, n, 7);
	put_mem(addr + 5, pat, n);
	r = pm_dio_read(mm, fd, 999, addr + 5, n);
	is_int(r, n, "read back");
	ok(mem_equals(mm, addr + 5, file_data + 999, n), "read back: memory matches the file");

	/* One byte, and a range inside one page. */
	is_int(pm_dio_read(mm, fd, 12345, addr + 4095, 1), 1, "one byte at a page's last byte");
	ok(mem_equals(mm, addr + 4095, file_data + 12345, 1), "one byte: right byte");
	is_int(pm_dio_write(mm, fd, 100, addr + 10, 50), 50, "50 bytes within a page");
	ASSERT_EQ(pread(fd, file_data + 100, 50, 100), 50);
	ok(mem_equals(mm, addr + 10, file_data + 100, 50), "50 bytes: file matches");

	ok(pmt_pins_balanced(m), "round trip: pins acquired == released");
	free(pat);
	ASSERT_EQ(pm_munmap(mm, addr, len + 2 * PAGE), 0);
}

static void test_eof(void)
{
	unsigned long addr = pmt_map_anon(mm, 64 * KiB, PM_PROT_READ | PM_PROT_WRITE, false);

	is_int(pm_dio_read(mm, fd, FILE_SIZE - 100, addr + 1, 64 * KiB - 1), 100,
	       "read across the end of the file returns what was there");
	ok(mem_equals(mm, addr + 1, file_data + FILE_SIZE - 100, 100), "EOF read: data");
	is_int(pm_dio_read(mm, fd, FILE_SIZE, addr, PAGE), 0, "read at end of file: 0");
	is_int(pm_dio_read(mm, fd, FILE_SIZE + 5 * MiB, addr, PAGE), 0, "read past end: 0");
	ok(pmt_pins_balanced(m), "EOF: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, 64 * KiB), 0);
}

/*
 *  page 0               99 100 ... 103
 *  [ mapped ............. ][ hole     ]
 */
static void test_hole(void)
{
	unsigned long addr = pmt_map_anon(mm, 104 * PAGE, PM_PROT_READ | PM_PROT_WRITE, false);
	unsigned long before = 100 * PAGE - 300;
	unsigned char *pat = malloc(104 * PAGE);

	ASSERT_TRUE(pat);
	ASSERT_EQ(pm_munmap(mm, addr + 100 * PAGE, 4 * PAGE), 0);

	is_int(pm_dio_read(mm, fd, 50, addr + 300, 104 * PAGE), before,
	       "read over a hole: the bytes before it");
	ok(mem_equals(mm, addr + 300, file_data + 50, before), "read over a hole: data");

	fill(pat, before, 99);
	put_mem(addr + 300, pat, before);
	is_int(pm_dio_write(mm, fd, 8000, addr + 300, 104 * PAGE), before,
	       "write over a hole: the bytes before it");
	memcpy(file_data + 8000, pat, before);
	ok(file_matches(), "write over a hole: file");

	is_int(pm_dio_read(mm, fd, 0, addr + 100 * PAGE + 7, PAGE), -EFAULT,
	       "read starting in the hole: -EFAULT");
	is_int(pm_dio_write(mm, fd, 0, addr + 100 * PAGE, PAGE), -EFAULT,
	       "write starting in the hole: -EFAULT");
	ok(file_matches(), "a failed write leaves the file alone");
	ok(pmt_pins_balanced(m), "hole: pins balanced");
	free(pat);
	ASSERT_EQ(pm_munmap(mm, addr, 100 * PAGE), 0);
}

static void test_thp_and_dirty(void)
{
	size_t len = 4 * MiB;
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, true);
	struct pm_page *page;
	bool dirty = true, clean = true;
	unsigned char one = 1;

	/*
	 * Fault the memory in first (a write leaves anonymous folios clean), so that the read's
	 * pins come from the fast path, which marks nothing dirty: only the release can.
	 */
	for (unsigned long off = 0; off < len; off += PAGE)
		put_mem(addr + off, &one, 1);
	for (unsigned long off = 0; off < 3 * MiB; off += PAGE) {
		ASSERT_EQ(pm_get_user_pages(mm, addr + off, 1, 0, &page), 1);
		clean &= !pm_folio_test_dirty(pm_page_folio(page));
		pm_put_page(page);
	}
	ok(clean, "THP: clean before the read");
	is_int(pm_dio_read(mm, fd, 321, addr + 1, 3 * MiB), 3 * MiB, "read 3 MiB into THP");
	ok(mem_equals(mm, addr + 1, file_data + 321, 3 * MiB), "THP read: data");
	for (unsigned long off = 0; off < 3 * MiB; off += PAGE) {
		ASSERT_EQ(pm_get_user_pages(mm, addr + off, 1, 0, &page), 1);
		dirty &= pm_folio_test_dirty(pm_page_folio(page));
		pm_put_page(page);
	}
	ok(dirty, "a read leaves the pages it filled dirty");
	ASSERT_EQ(pm_get_user_pages(mm, addr, 1, 0, &page), 1);
	is_int(pm_folio_order(pm_page_folio(page)), 9, "the memory is THP");
	pm_put_page(page);
	ok(pmt_pins_balanced(m), "THP: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

/* A read into memory shared copy-on-write with a fork child must not reach the child. */
static void test_cow(void)
{
	size_t len = 80 * PAGE;
	unsigned long addr = pmt_map_anon(mm, len, PM_PROT_READ | PM_PROT_WRITE, false);
	unsigned char *old = malloc(len);
	struct pm_mm *child;

	ASSERT_TRUE(old);
	fill(old, len, 5);
	put_mem(addr, old, len);
	child = pm_mm_fork(mm);
	ASSERT_TRUE(child);

	is_int(pm_dio_read(mm, fd, 0, addr + 10, len - 20), len - 20, "read into COW memory");
	ok(mem_equals(mm, addr + 10, file_data, len - 20), "COW: the parent sees the file");
	ok(mem_equals(child, addr, old, len), "COW: the child still sees the old data");
	pm_mm_destroy(child);
	free(old);
	ok(pmt_pins_balanced(m), "COW: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, len), 0);
}

static void test_errors(void)
{
	unsigned long addr = pmt_map_anon(mm, 8 * PAGE, PM_PROT_READ | PM_PROT_WRITE, false);
	unsigned long ro = pmt_map_anon(mm, 8 * PAGE, PM_PROT_READ, false);
	unsigned char buf[64];

	is_int(pm_dio_read(mm, fd, 0, addr, 0), 0, "len 0: 0");
	is_int(pm_dio_read(mm, fd, -1, addr, PAGE), -EINVAL, "negative offset: -EINVAL");
	is_int(pm_dio_read(NULL, fd, 0, addr, PAGE), -EINVAL, "NULL mm: -EINVAL");
	is_int(pm_dio_read(mm, fd, 0, ~0UL - 10, 100), -EFAULT, "wrapping range: -EFAULT");
	is_int(pm_dio_write(mm, fd, 0, PM_TASK_SIZE - 10, 100), -EFAULT,
	       "range past the user space: -EFAULT");
	is_int(pm_dio_read(mm, -1, 0, addr, PAGE), -EBADF, "bad fd: -EBADF");
	is_int(pm_dio_read(mm, fd, 0, ro, PAGE), -EFAULT, "read into a read-only mapping: -EFAULT");
	is_int(pm_dio_write(mm, fd, 4000, ro + 100, 64), 64, "write from a read-only mapping");
	memset(file_data + 4000, 0, 64); /* untouched private memory reads as zeroes */
	ASSERT_EQ(pread(fd, buf, 64, 4000), 64);
	ok(!memcmp(buf, file_data + 4000, 64), "write from zero pages writes zeroes");
	ok(pmt_pins_balanced(m), "errors: pins balanced");
	ASSERT_EQ(pm_munmap(mm, addr, 8 * PAGE), 0);
	ASSERT_EQ(pm_munmap(mm, ro, 8 * PAGE), 0);
}

static int make_temp_file(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int tfd;

	snprintf(path, sizeof(path), "%s/pinmm-dio-XXXXXX", dir && *dir ? dir : "/tmp");
	tfd = mkstemp(path);
	ASSERT_TRUE(tfd >= 0);
	unlink(path);
	return tfd;
}

int main(void)
{
	size_t free_at_start;

	plan_no_plan();
	free_at_start = pmt_setup(&m, &mm, 64, 0);

	fd = make_temp_file();
	file_data = malloc(FILE_SIZE);
	ASSERT_TRUE(file_data);
	fill(file_data, FILE_SIZE, 1);
	ASSERT_EQ(pwrite(fd, file_data, FILE_SIZE, 0), FILE_SIZE);

	test_round_trip();
	test_eof();
	test_hole();
	test_thp_and_dirty();
	test_cow();
	test_errors();
	ok(file_matches(), "the file holds exactly what was written");

	close(fd);
	free(file_data);
	pm_mm_destroy(mm);
	pmt_end(m, free_at_start, &pmt_end_free_again, NULL);
	return done_testing();
}
