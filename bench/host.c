// SPDX-License-Identifier: MIT
/*
 * host.c - the host-kernel side of the cases: temporary files as will-it-scale makes them,
 * user touches, aligned anonymous memory for THP, and reading back what THP the kernel gave.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

/*
 * A per-task file. pinmm's files are shmem objects, so by default the host twin is tmpfs too:
 * a memfd. With PINMM_BENCH_TMPDIR set it is what will-it-scale makes: mkstemp() in that
 * directory, unlinked at once. Either way truncated to @size.
 */
int bench_host_tmpfile(size_t size)
{
	const char *dir = getenv("PINMM_BENCH_TMPDIR");
	char path[4096];
	int fd;

	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/pinmm-bench.XXXXXX", dir);
		fd = mkstemp(path);
		if (fd >= 0)
			unlink(path);
	} else {
		fd = memfd_create("pinmm-bench", MFD_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int bench_host_file_task_init(struct bench_task *t)
{
	int fd = bench_host_tmpfile(bench_size(t->run, BENCH_MEM));

	if (fd < 0)
		return fd;
	t->priv = (void *)(intptr_t)fd;
	return 0;
}

int bench_host_file_fault_loop(struct bench_task *t, int flags)
{
	size_t mem = bench_size(t->run, BENCH_MEM);
	char *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, flags, (int)(intptr_t)t->priv, 0);

	if (p == MAP_FAILED)
		return -errno;
	for (size_t off = 0; off < mem && !bench_stopping(t->run); off += PM_PAGE_SIZE) {
		p[off] = 0;
		bench_count(t, 1);
	}
	return munmap(p, mem) ? -errno : 0;
}

void bench_host_file_task_exit(struct bench_task *t)
{
	close((int)(intptr_t)t->priv);
}

void bench_host_touch(void *p, size_t len)
{
	volatile char *c = p;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t off = 0; off < len; off += page)
		c[off] = 0;
}

/* Over-map by @align and trim both ends, so the result starts on an @align boundary. */
void *bench_host_map_aligned(size_t len, size_t align)
{
	char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	uintptr_t start, end;

	if (p == MAP_FAILED)
		return NULL;
	start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	end = start + len;
	if (start > (uintptr_t)p)
		munmap(p, start - (uintptr_t)p);
	if ((uintptr_t)p + len + align > end)
		munmap((void *)end, (uintptr_t)p + len + align - end);
	return (void *)start;
}

void bench_host_unmap_aligned(void *p, size_t len, size_t align)
{
	if (p)
		munmap(p, len);
}

long bench_host_anon_huge_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}
