// SPDX-License-Identifier: MIT
/*
 * test_access.c - pm_access and pm_fault: data written reads back across page, THP and VMA
 * boundaries; reads of untouched memory see the zero page and cost no frame; the first write
 * allocates; pm_fault's return values; partial copies; no data leaks between address spaces;
 * and a seeded random walk of writes, reads and discards checked against a shadow copy.
 */
#include <errno.h>
#include <stdint.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)

static struct pm_machine *m;
static struct pm_mm *mm;
static size_t free0;
static uint64_t seed;

static void setup(size_t mib)
{
	free0 = pmt_setup(&m, &mm, mib, 0);
}

static void teardown(const char *what)
{
	pmt_teardown(&m, &mm, free0, what);
}

static void fill_random(void *p, size_t len, uint64_t *st)
{
	unsigned char *c = p;

	for (size_t i = 0; i < len; i++)
		c[i] = (unsigned char)(tap_rand(st) >> 56);
}

/* Read [addr, addr + len) and compare with @want; prints the first difference. */
static bool same_as(unsigned long addr, const void *want, size_t len)
{
	unsigned char *got = malloc(len);
	long r;
	bool same;

	ASSERT_TRUE(got);
	memset(got, 0x5a, len);
	r = pm_access(mm, addr, got, len, 0);
	same = r == (long)len && !memcmp(got, want, len);
	if (!same) {
		size_t i = 0;

		while (r == (long)len && i < len && got[i] == ((const unsigned char *)want)[i])
			i++;
		diag("read %#lx+%zu returned %ld; first difference at +%zu", addr, len, r, i);
	}
	free(got);
	return same;
}

static bool reads_zero(unsigned long addr, size_t len)
{
	void *z = calloc(1, len);
	bool r;

	ASSERT_TRUE(z);
	r = same_as(addr, z, len);
	free(z);
	return r;
}

static void test_boundaries(void)
{
	const unsigned long x = 0x10000000UL, y = 0x40000000UL, z = 0x20000000UL;
	uint64_t st = seed;
	unsigned char *shadow;
	size_t len;

	setup(64);
	/* Across pages: [x+100, x+3 pages+50) inside 4 pages. */
	shadow = calloc(1, 4 * PG);
	ASSERT_TRUE(shadow);
	is_int(pmt_map_fixed(mm, x, 4 * PG, RW), x, "map 4 pages");
	len = 3 * PG - 50;
	fill_random(shadow + 100, len, &st);
	is_int(pm_access(mm, x + 100, shadow + 100, len, 1), len, "write across 3 page boundaries");
	ok(same_as(x + 100, shadow + 100, len), "it reads back");
	ok(same_as(x, shadow, 4 * PG), "the 4 pages read back whole (zeros around the write)");
	free(shadow);

	/* Across a THP boundary: two 2 MiB windows of a MADV_HUGEPAGE mapping. */
	struct pm_stats s0 = pmt_stats(m);

	is_int(pmt_map_fixed(mm, y, 4 * MiB, RW), y, "map 4 MiB at a 2 MiB boundary");
	is_int(pm_madvise(mm, y, 4 * MiB, PM_MADV_HUGEPAGE), 0, "MADV_HUGEPAGE");
	shadow = calloc(1, 4 * MiB);
	ASSERT_TRUE(shadow);
	len = 8000;
	fill_random(shadow + 2 * MiB - 3000, len, &st);
	is_int(pm_access(mm, y + 2 * MiB - 3000, shadow + 2 * MiB - 3000, len, 1), len,
	       "write across the 2 MiB boundary");
	is_int(pmt_stats(m).thp_faults - s0.thp_faults, 2, "both windows were THP-faulted");
	ok(same_as(y + 2 * MiB - 3000, shadow + 2 * MiB - 3000, len), "it reads back");
	fill_random(shadow, 4096 * 3 + 17, &st);
	is_int(pm_access(mm, y, shadow, 4096 * 3 + 17, 1), 4096 * 3 + 17, "write the first bytes");
	fill_random(shadow + 4 * MiB - 999, 999, &st);
	is_int(pm_access(mm, y + 4 * MiB - 999, shadow + 4 * MiB - 999, 999, 1), 999,
	       "write the last bytes");
	ok(same_as(y, shadow, 4 * MiB), "all 4 MiB read back as written");
	free(shadow);

	/* Across VMAs: A (plain) | B (MADV_DONTFORK, so not merged) | C (THP-advised, 2 MiB). */
	shadow = calloc(1, 4 * PG + 2 * MiB);
	ASSERT_TRUE(shadow);
	is_int(pmt_map_fixed(mm, z - 4 * PG, 2 * PG, RW), z - 4 * PG, "map A");
	is_int(pmt_map_fixed(mm, z - 2 * PG, 2 * PG, RW), z - 2 * PG, "map B");
	is_int(pm_madvise(mm, z - 2 * PG, 2 * PG, PM_MADV_DONTFORK), 0, "B: DONTFORK");
	is_int(pmt_map_fixed(mm, z, 2 * MiB, RW), z, "map C");
	is_int(pm_madvise(mm, z, 2 * MiB, PM_MADV_HUGEPAGE), 0, "C: HUGEPAGE");
	len = 3 * PG + 100;
	fill_random(shadow + PG + 50, len, &st);
	is_int(pm_access(mm, z - 3 * PG + 50, shadow + PG + 50, len, 1), len,
	       "write across three VMAs");
	ok(same_as(z - 4 * PG, shadow, 4 * PG + 2 * MiB), "A, B and C read back as written");
	free(shadow);
	is_int(pm_mm_machine(mm) == m, 1, "pm_mm_machine gives the machine");
	teardown("boundaries");
}

static void test_zero_page(void)
{
	const unsigned long x = 0x10000000UL;
	char c;

	setup(64);
	is_int(pmt_map_fixed(mm, x, 16 * PG, RW), x, "map 16 pages");
	/* Page 0 builds the page tables; what follows must cost no frame. */
	c = 1;
	is_int(pm_access(mm, x, &c, 1, 1), 1, "write page 0");
	size_t f1 = pmt_free_pages(m);

	ok(reads_zero(x + PG, 15 * PG), "untouched pages read zeros");
	is_int(pmt_free_pages(m), f1, "reading them took no frame (zero page)");
	is_int(pm_fault(mm, x + 2 * PG, 0), 0, "read fault on an untouched page -> 0");
	is_int(pmt_free_pages(m), f1, "and took no frame either");

	/* The first write to a zero-page-mapped page allocates exactly one frame. */
	c = 'q';
	is_int(pm_access(mm, x + 5 * PG + 77, &c, 1, 1), 1, "write one byte in page 5");
	is_int(pmt_free_pages(m), f1 - 1, "write after read allocated one frame");
	char want[PG];

	memset(want, 0, sizeof(want));
	want[77] = 'q';
	ok(same_as(x + 5 * PG, want, PG), "page 5: the byte, zeros around it");
	ok(reads_zero(x + 6 * PG, PG), "page 6 still reads zero");
	is_int(pm_fault(mm, x + 2 * PG, PM_FAULT_WRITE), 0, "write fault on page 2 -> 0");
	is_int(pmt_free_pages(m), f1 - 2, "it allocated one frame");
	ok(reads_zero(x + 2 * PG, PG), "a newly allocated page reads zero");
	is_int(pm_fault(mm, x + 2 * PG, PM_FAULT_WRITE), 0, "write fault on a present page -> 0");
	is_int(pmt_free_pages(m), f1 - 2, "and allocates nothing");
	teardown("zero page");
}

static void test_fault_and_errors(void)
{
	const unsigned long x = 0x10000000UL;
	char buf[3 * PG];

	memset(buf, 0x33, sizeof(buf));
	setup(64);
	is_int(pmt_map_fixed(mm, x, 2 * PG, RW), x, "map 2 RW pages");
	is_int(pmt_map_fixed(mm, x + 2 * PG, 2 * PG, PM_PROT_READ), x + 2 * PG,
	       "map 2 RO pages after them");
	is_int(pmt_map_fixed(mm, x + 4 * PG, PG, PM_PROT_NONE), x + 4 * PG, "and 1 PROT_NONE page");

	is_int(pm_fault(mm, x, PM_FAULT_WRITE), 0, "write fault on RW -> 0");
	is_int(pm_fault(mm, x + PG, 0), 0, "read fault on RW -> 0");
	is_int(pm_fault(mm, x + 2 * PG, 0), 0, "read fault on RO -> 0");
	is_int(pm_fault(mm, x + 2 * PG, PM_FAULT_WRITE), -EFAULT, "write fault on RO -> -EFAULT");
	is_int(pm_fault(mm, x + 4 * PG, 0), -EFAULT, "read fault on PROT_NONE -> -EFAULT");
	is_int(pm_fault(mm, x + 4 * PG, PM_FAULT_WRITE), -EFAULT,
	       "write fault on PROT_NONE -> -EFAULT");
	is_int(pm_fault(mm, x + 5 * PG, 0), -EFAULT, "fault with no mapping -> -EFAULT");
	is_int(pm_fault(mm, 0, 0), -EFAULT, "fault at 0 -> -EFAULT");
	is_int(pm_fault(mm, PM_TASK_SIZE, 0), -EFAULT, "fault at PM_TASK_SIZE -> -EFAULT");
	is_int(pm_fault(mm, ~0UL, PM_FAULT_WRITE), -EFAULT, "fault at ~0 -> -EFAULT");
	is_int(pm_fault(mm, x, 0x2), -EINVAL, "unknown fault flag 0x2 -> -EINVAL");
	is_int(pm_fault(mm, x, 0x80000000u), -EINVAL, "unknown fault flag 0x80000000 -> -EINVAL");
	is_int(pm_fault(mm, x + 5 * PG, 0x4), -EINVAL, "unknown flag beats no mapping: -EINVAL");
	is_int(pm_fault(mm, x + 100, PM_FAULT_WRITE), 0, "unaligned fault address -> 0");

	is_int(pm_access(mm, x + 5 * PG, buf, 1, 0), -EFAULT, "read with no mapping -> -EFAULT");
	is_int(pm_access(mm, x + 5 * PG, buf, 1, 1), -EFAULT, "write with no mapping -> -EFAULT");
	is_int(pm_access(mm, x + 2 * PG, buf, 1, 1), -EFAULT, "write to read-only -> -EFAULT");
	is_int(pm_access(mm, x + 4 * PG, buf, 1, 0), -EFAULT, "read of PROT_NONE -> -EFAULT");
	is_int(pm_access(mm, 0, buf, 16, 0), -EFAULT, "read at 0 -> -EFAULT");
	is_int(pm_access(mm, x, buf, 0, 1), 0, "a zero-length write copies 0 bytes");
	is_int(pm_access(mm, x + PG + 96, buf, 2 * PG, 1), PG - 96,
	       "a write running into read-only copies up to it");
	char got[3 * PG];

	is_int(pm_access(mm, x + 3 * PG + 10, got, 2 * PG, 0), PG - 10,
	       "a read running into PROT_NONE copies up to it");
	is_int(pm_access(mm, x + 2 * PG, got, 3 * PG, 0), 2 * PG,
	       "a read from RO through PROT_NONE stops at it");

	is_int(pm_access(mm, x + PG, got, PG, 0), PG, "read the RW page back");
	ok(!memcmp(got + 96, buf, PG - 96), "the partial write's bytes are there");
	teardown("faults and errors");
}

/* A fresh page never shows what a destroyed address space left in its frame. */
static void test_no_leak_between_mms(void)
{
	const unsigned long x = 0x10000000UL;
	unsigned char page[PG];
	long n = 0, leaks = 0, r;

	setup(8);
	is_int(pmt_map_fixed(mm, x, 16 * MiB, RW), x, "mm 1: map 16 MiB on an 8 MiB machine");
	memset(page, 0xab, sizeof(page));
	while ((r = pm_access(mm, x + n * PG, page, PG, 1)) == (long)PG)
		n++;
	is_int(r, -ENOMEM, "mm 1 fills memory until -ENOMEM (%ld pages)", n);
	pm_mm_destroy(mm);
	mm = pm_mm_create(m);
	ASSERT_TRUE(mm);
	is_int(pmt_map_fixed(mm, x, 16 * MiB, RW), x, "mm 2: map 16 MiB");
	for (long i = 0; i < n; i++) {
		unsigned char one = 1;

		long w = pm_access(mm, x + i * PG + 5, &one, 1, 1);

		if (w != 1) {
			diag("page %ld: write returned %ld", i, w);
			leaks++;
			continue;
		}
		memset(page, 0x5a, sizeof(page));
		if (pm_access(mm, x + i * PG, page, PG, 0) != (long)PG) {
			leaks++;
			continue;
		}
		page[5] = 0;
		for (unsigned j = 0; j < PG; j++)
			if (page[j]) {
				diag("page %ld: byte %u is %#x", i, j, page[j]);
				leaks++;
				break;
			}
	}
	is_int(leaks, 0, "mm 2's %ld newly written pages hold only what it wrote", n);
	teardown("no leak between mms");
}

/* Random writes, reads and discards over A (4K) | B (THP, 4 MiB) | C (4K), against a shadow. */
static void test_random(void)
{
	const unsigned long base = 0x40000000UL - 64 * PG;
	const size_t total = 64 * PG + 4 * MiB + 64 * PG;
	unsigned char *shadow = calloc(1, total), *buf = malloc(64 * 1024);
	uint64_t st = seed ^ 0x1234;
	long ops = tap_scale(3000), bad = 0;

	ASSERT_TRUE(shadow && buf);
	setup(64);
	is_int(pmt_map_fixed(mm, base, 64 * PG, RW), base, "map A");
	is_int(pmt_map_fixed(mm, base + 64 * PG, 4 * MiB, RW), base + 64 * PG, "map B");
	is_int(pm_madvise(mm, base + 64 * PG, 4 * MiB, PM_MADV_HUGEPAGE), 0, "B: HUGEPAGE");
	is_int(pmt_map_fixed(mm, base + 64 * PG + 4 * MiB, 64 * PG, RW), base + 64 * PG + 4 * MiB,
	       "map C");
	for (long i = 0; i < ops; i++) {
		uint64_t r = tap_rand(&st);
		size_t len = 1 + tap_rand(&st) % (64 * 1024);
		size_t off = tap_rand(&st) % total;

		if (off + len > total)
			len = total - off;
		switch (r % 8) {
		case 0 ... 3:
			fill_random(buf, len, &st);
			if (pm_access(mm, base + off, buf, len, 1) != (long)len)
				bad++;
			memcpy(shadow + off, buf, len);
			break;
		case 4 ... 6:
			if (pm_access(mm, base + off, buf, len, 0) != (long)len ||
			    memcmp(buf, shadow + off, len))
				bad++;
			break;
		case 7:
			off &= ~(PG - 1);
			len = (len + PG - 1) & ~(PG - 1);
			if (off + len > total)
				len = total - off;
			if (pm_madvise(mm, base + off, len, PM_MADV_DONTNEED))
				bad++;
			memset(shadow + off, 0, len);
			break;
		}
	}
	is_int(bad, 0, "%ld random operations agree with the shadow copy", ops);
	ok(same_as(base, shadow, total), "the whole range matches the shadow at the end");
	is_int(pm_machine_check(m), 0, "pm_machine_check with the mm alive");
	teardown("random");
	free(shadow);
	free(buf);
}

int main(int argc, char **argv)
{
	seed = tap_seed(argc, argv);
	plan_no_plan();
	test_boundaries();
	test_zero_page();
	test_fault_and_errors();
	test_no_leak_between_mms();
	test_random();
	return done_testing();
}
