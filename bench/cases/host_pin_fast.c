// SPDX-License-Identifier: MIT
/*
 * host_pin_fast.c - the seed's pin_fast test on the running kernel, through the gup_test
 * debugfs file (CONFIG_GUP_TEST): each task has a 4 MiB buffer aligned to 2 MiB, advised
 * MADV_HUGEPAGE and touched; one iteration is one PIN_FAST_BENCHMARK ioctl with one page per
 * call (1024 pin_user_pages_fast() calls and the unpins).
 *
 * The request number encodes the size of struct gup_test, which changed: 80 bytes since
 * v5.13 (gup_flags and test_flags), 72 bytes in the seed's kernel (one flags word). The
 * layout is probed on a small buffer, newest first. Without the file the case says that the
 * kernel does not have it and exits 0: it never makes a number up.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../bench.h"

#define DEBUGFS_DIR "/sys/kernel/debug"
#define GUP_TEST_FILE DEBUGFS_DIR "/gup_test"
#define HOST_PIN_PAGES 1024
#define HOST_PIN_LEN ((size_t)HOST_PIN_PAGES * PM_PAGE_SIZE)

struct gup_test_v513 {		/* mm/gup_test.h since v5.13 */
	uint64_t get_delta_usec, put_delta_usec, addr, size;
	uint32_t nr_pages_per_call, gup_flags, test_flags;
	uint32_t which_pages[8];
};

struct gup_test_v512 {		/* the seed's layout */
	uint64_t get_delta_usec, put_delta_usec, addr, size;
	uint32_t nr_pages_per_call, flags;
	uint32_t which_pages[8];
};

#define PIN_FAST_BENCHMARK_V513 _IOWR('g', 2, struct gup_test_v513)
#define PIN_FAST_BENCHMARK_V512 _IOWR('g', 2, struct gup_test_v512)

struct host_pin_run {
	int fd;
	unsigned long request;
	bool mounted_debugfs;
};

/* One ioctl over [@addr, @addr + @len) with the probed (or given) layout. */
static int pin_fast_ioctl(int fd, unsigned long request, void *addr, size_t len)
{
	union {
		struct gup_test_v513 v513;
		struct gup_test_v512 v512;
	} g;

	memset(&g, 0, sizeof(g));
	g.v513.addr = (uintptr_t)addr;	/* the leading fields are common to both */
	g.v513.size = len;
	g.v513.nr_pages_per_call = 1;
	return ioctl(fd, request, &g) ? -errno : 0;
}

static bool debugfs_mounted(void)
{
	struct statfs st;

	return !statfs(DEBUGFS_DIR, &st) && st.f_type == DEBUGFS_MAGIC;
}

static int probe_layout(struct bench_run *run, struct host_pin_run *r)
{
	static const unsigned long requests[] = { PIN_FAST_BENCHMARK_V513,
						  PIN_FAST_BENCHMARK_V512 };
	void *p = mmap(NULL, PM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	int err = -EINVAL;

	if (p == MAP_FAILED)
		return -errno;
	bench_host_touch(p, PM_PAGE_SIZE);
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		err = pin_fast_ioctl(r->fd, requests[i], p, PM_PAGE_SIZE);
		if (!err) {
			r->request = requests[i];
			bench_note(run, "host_pin_fast: gup_test with the %s struct layout",
				   i ? "72-byte (<= v5.12)" : "80-byte (>= v5.13)");
			break;
		}
	}
	munmap(p, PM_PAGE_SIZE);
	return err;
}

static int host_pin_fast_prepare(struct bench_run *run)
{
	struct host_pin_run *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	run->priv = r;
	r->fd = -1;
	if (!debugfs_mounted()) {
		if (mount("debugfs", DEBUGFS_DIR, "debugfs", 0, NULL))
			return bench_unavailable(run, "debugfs is not mounted and mounting it "
						 "failed (%s)", strerror(errno));
		r->mounted_debugfs = true;
	}
	r->fd = open(GUP_TEST_FILE, O_RDWR);
	if (r->fd < 0)
		return bench_unavailable(run, "%s: %s (the kernel needs CONFIG_GUP_TEST=y, and "
					 "root)", GUP_TEST_FILE, strerror(errno));
	err = probe_layout(run, r);
	if (err)
		return bench_unavailable(run, "the PIN_FAST_BENCHMARK ioctl failed with both "
					 "struct gup_test layouts (%s)", strerror(-err));
	return 0;
}

static int host_pin_fast_task_init(struct bench_task *t)
{
	void *p = bench_host_map_aligned(HOST_PIN_LEN, PM_PMD_SIZE);

	if (!p)
		return -errno;
	if (madvise(p, HOST_PIN_LEN, MADV_HUGEPAGE)) {
		int err = -errno;

		bench_host_unmap_aligned(p, HOST_PIN_LEN, PM_PMD_SIZE);
		return err;
	}
	bench_host_touch(p, HOST_PIN_LEN);
	t->priv = p;
	return 0;
}

static int host_pin_fast_loop(struct bench_task *t)
{
	struct host_pin_run *r = t->run->priv;
	int err = pin_fast_ioctl(r->fd, r->request, t->priv, HOST_PIN_LEN);

	if (err)
		return err;
	bench_count(t, 1);
	return 0;
}

static void host_pin_fast_task_exit(struct bench_task *t)
{
	bench_host_unmap_aligned(t->priv, HOST_PIN_LEN, PM_PMD_SIZE);
}

static void host_pin_fast_cleanup(struct bench_run *run)
{
	struct host_pin_run *r = run->priv;

	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->mounted_debugfs)
		umount2(DEBUGFS_DIR, MNT_DETACH);
	free(r);
}

const struct bench_case bench_case_host_pin_fast = {
	.name = "host_pin_fast",
	.description = "pin_user_pages_fast SMP scalability benchmark",
	.seed = "2021 mm: gup: allow FOLL_PIN to scale in SMP, on the host kernel",
	.flags = BENCH_F_HOST,
	.prepare = host_pin_fast_prepare,
	.task_init = host_pin_fast_task_init,
	.loop = host_pin_fast_loop,
	.task_exit = host_pin_fast_task_exit,
	.cleanup = host_pin_fast_cleanup,
};
