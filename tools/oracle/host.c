// SPDX-License-Identifier: MIT
/*
 * host.c - the host side of the oracle: one server process per address space, what the host
 * kernel shows of it (/proc/self/{pagemap,smaps}, /proc/kpageflags, /proc/kpagecount,
 * /proc/meminfo), the probe of what the host can serve, and the sysctl and sysfs settings
 * the run needs, saved and restored by the parent process (main.c).
 *
 * Servers: the driver makes MAXPROC socket pairs per sequence and forks server 0, which
 * reserves the window (PROT_NONE) and creates the memfds. A fork operation is a fork() of
 * the server, whose child serves the next pair. Servers ignore SIGCHLD (no zombies) and the
 * driver waits for one to be gone with a pidfd, so that its address space is torn down
 * (hugetlb pages back in the pool) before the next observation.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <liburing.h>
#include <pinmm/pinmm.h>

#include "oracle.h"

enum { CMD_EXEC, CMD_OBSERVE, CMD_FORK, CMD_EXIT };

struct cmd {
	int type;
	int full;
	struct op op;
};

static int sv[MAXPROC][2];
static pid_t server_pid[MAXPROC];
static bool server_alive[MAXPROC];
static const struct caps *hcaps;

static int xwrite(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads wait at most 20 s: a server that died leaves its socket open in its relatives. */
static int xread(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pf, 1, 20000) == 0)
			return -EIO;
		r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- observation, inside a server ---- */

#define KPF_DIRTY 4
#define KPF_ANON 12
#define KPF_HUGE 17
#define KPF_THP 22
#define KPF_ZERO_PAGE 24

static int fd_pagemap = -1, fd_kflags = -1, fd_kcount = -1, fd_smaps = -1, fd_maps = -1;

static int parse_path_obj(const char *path, unsigned *flags)
{
	if (!*path)
		return -1;
	if (strstr(path, "/memfd:o0"))
		return 0;
	if (strstr(path, "/memfd:o1"))
		return 1;
	if (strstr(path, "/memfd:h2")) {
		*flags |= PM_MAP_HUGETLB;
		return 2;
	}
	if (strstr(path, "/dev/zero")) {
		*flags |= PM_MAP_ANONYMOUS;
		return -1;
	}
	if (strstr(path, "anon_hugepage")) {
		*flags |= PM_MAP_ANONYMOUS | PM_MAP_HUGETLB;
		return -1;
	}
	return -2;	/* something else: not ours */
}

/* /proc/self/smaps, or the cheaper /proc/self/maps (no page-table walk) when !@smaps. */
static int read_smaps(struct obs_proc *out, bool smaps)
{
	int fd = smaps ? fd_smaps : fd_maps;
	static char buf[1 << 18];
	ssize_t n = 0, r;
	char *line, *next;
	struct obs_vma *v = NULL;

	out->nvma = 0;
	out->smaps = smaps;
	while ((r = pread(fd, buf + n, sizeof(buf) - 1 - (size_t)n, n)) > 0)
		n += r;
	if (r < 0)
		return -errno;
	buf[n] = 0;
	for (line = buf; line && *line; line = next) {
		unsigned long s, e, off;
		char perms[8], path[256];
		int np;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		path[0] = 0;
		np = 0;
		if (((*line >= '0' && *line <= '9') || (*line >= 'a' && *line <= 'f')) && sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &s, &e, perms, &off, &np) >= 4 && np > 0 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			v = NULL;
			if (s < WIN_BASE || s >= WIN_END)
				continue;
			if (out->nvma == MAXVMA)
				return -E2BIG;
			snprintf(path, sizeof(path), "%s", line + np);
			v = &out->vma[out->nvma++];
			memset(v, 0, sizeof(*v));
			v->start = s;
			v->end = e;
			v->prot = (perms[0] == 'r' ? PM_PROT_READ : 0) | (perms[1] == 'w' ? PM_PROT_WRITE : 0) |
				  (perms[2] == 'x' ? PM_PROT_EXEC : 0);
			v->flags = perms[3] == 's' ? PM_MAP_SHARED : PM_MAP_PRIVATE;
			v->obj = parse_path_obj(path, &v->flags);
			if (!path[0])
				v->flags |= PM_MAP_ANONYMOUS;
			v->pgoff = path[0] ? off / 4096 : 0;
			continue;
		}
		if (!v)
			continue;
		if (!strncmp(line, "Rss:", 4))
			v->rss = strtoul(line + 4, NULL, 10) / 4;
		else if (!strncmp(line, "Anonymous:", 10))
			v->anon = strtoul(line + 10, NULL, 10) / 4;
		else if (!strncmp(line, "AnonHugePages:", 14))
			v->ahuge = strtoul(line + 14, NULL, 10) / 4;
		else if (!strncmp(line, "VmFlags:", 8)) {
			static const struct { const char *s; unsigned f; } vf[] = {
				{ " lo", PM_VMF_LOCKED }, { " gd", PM_VMF_GROWSDOWN },
				{ " hg", PM_VMF_HUGEPAGE }, { " nh", PM_VMF_NOHUGEPAGE },
				{ " dc", PM_VMF_DONTCOPY }, { " wf", PM_VMF_WIPEONFORK },
				{ " ac", PM_VMF_ACCOUNT }, { " nr", PM_VMF_NORESERVE } };
			for (size_t k = 0; k < sizeof(vf) / sizeof(vf[0]); k++)
				if (strstr(line + 8, vf[k].s))
					v->vmflags |= vf[k].f;
		}
	}
	return 0;
}

static void read_kpage(int fd, struct obs_proc *out, const uint64_t *raw, bool count)
{
	static uint64_t val[WIN_PAGES];

	for (unsigned long i = 0; i < WIN_PAGES;) {
		unsigned long j = i + 1;

		if (!(out->pg[i].flags & PM_PAGE_PRESENT) || !out->pg[i].pfn) {
			i++;
			continue;
		}
		/* one read per run of consecutive frames (a THP, a hugetlb page) */
		while (j < WIN_PAGES && (out->pg[j].flags & PM_PAGE_PRESENT) &&
		       out->pg[j].pfn == out->pg[j - 1].pfn + 1)
			j++;
		if (pread(fd, val + i, (j - i) * 8, (off_t)(out->pg[i].pfn * 8)) != (ssize_t)((j - i) * 8))
			memset(val + i, 0, (j - i) * 8);
		for (unsigned long k = i; k < j; k++) {
			uint64_t f = val[k];

			if (count) {
				out->pg[k].mapcount = (uint32_t)f;
				continue;
			}
			if (f & (1ULL << KPF_ANON))
				out->pg[k].flags |= PM_PAGE_ANON;
			if (f & (1ULL << KPF_ZERO_PAGE))
				out->pg[k].flags |= PM_PAGE_ZERO;
			if (f & (1ULL << KPF_THP))
				out->pg[k].flags |= PM_PAGE_THP;
			if (f & (1ULL << KPF_HUGE))
				out->pg[k].flags |= PM_PAGE_HUGETLB;
		}
		i = j;
	}
	(void)raw;
}

static int host_observe_self(struct hstate *h, struct obs_proc *out, bool full, bool smaps,
			     int memfd_self)
{
	static uint64_t pm[WIN_PAGES];
	int ret;

	if (pread(fd_pagemap, pm, sizeof(pm), (off_t)(WIN_BASE / 4096 * 8)) != (ssize_t)sizeof(pm))
		return -EIO;
	ret = read_smaps(out, smaps);
	if (ret)
		return ret;
	for (unsigned long i = 0; i < WIN_PAGES; i++) {
		struct obs_page *o = &out->pg[i];
		uint64_t e = pm[i];

		memset(o, 0, sizeof(*o));
		if (!(e & (1ULL << 63)))
			continue;
		o->flags = PM_PAGE_PRESENT;
		if (e & (1ULL << 56))
			o->flags |= PM_PAGE_EXCLUSIVE;
		o->pfn = e & ((1ULL << 55) - 1);
	}
	if (fd_kflags >= 0)
		read_kpage(fd_kflags, out, pm, false);
	if (fd_kcount >= 0)
		read_kpage(fd_kcount, out, pm, true);
	/* contents: loads where the VMA is readable, /proc/self/mem elsewhere; present pages only */
	for (int v = 0; v < out->nvma; v++) {
		const struct obs_vma *vma = &out->vma[v];

		for (unsigned long a = vma->start; a < vma->end; a += 4096) {
			unsigned long i = (a - WIN_BASE) / 4096;
			static unsigned char page[4096];
			size_t n = full ? 4096 : HEAD;

			if (!(out->pg[i].flags & PM_PAGE_PRESENT))
				continue;
			if (vma->prot & PM_PROT_READ) {
				out->pg[i].hash = fnv64((const void *)a, n);
			} else if (pread(memfd_self, page, n, (off_t)a) == (ssize_t)n) {
				out->pg[i].hash = fnv64(page, n);
			} else {
				out->pg[i].hash = 1;
			}
		}
	}
	(void)h;
	return 0;
}

/* ---- the server loop ---- */

/* /proc/self files name the process that opened them: each server opens its own. */
static void open_proc_files(void)
{
	int *fds[] = { &fd_pagemap, &fd_smaps, &fd_maps };

	for (int i = 0; i < 3; i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	fd_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	fd_smaps = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	fd_maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
}

static void serve(struct hstate *h, int fd) __attribute__((noreturn));

static void serve(struct hstate *h, int fd)
{
	static struct obs_proc obs;
	struct cmd c;
	pid_t me = getpid();

	xwrite(fd, &me, sizeof(me));
	for (;;) {
		if (xread(fd, &c, sizeof(c)))
			_exit(0);
		switch (c.type) {
		case CMD_EXEC: {
			struct res r = host_do(h, &c.op);

			xwrite(fd, &r, sizeof(r));
			break;
		}
		case CMD_OBSERVE: {
			int memfd_self = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
			int rc = host_observe_self(h, &obs, c.full & 1, c.full & 2, memfd_self);

			close(memfd_self);
			xwrite(fd, &rc, sizeof(rc));
			if (!rc)
				xwrite(fd, &obs, sizeof(obs));
			break;
		}
		case CMD_FORK: {
			int k = c.op.x;
			pid_t pid = fork();
			struct res r = { 0, 0 };

			if (pid == 0) {
				/* no parent-death signal: a parent may exit before its child.
				 * The driver's end closing gives every server EOF. */
				close(fd);
				host_state_forked(h, k);
				open_proc_files();
				serve(h, sv[k][1]);
			}
			r.ret = pid < 0 ? -errno : 0;
			xwrite(fd, &r, sizeof(r));
			break;
		}
		case CMD_EXIT:
			host_state_exit(h);
			_exit(0);
		}
	}
}

static int cmd_send(int proc, const struct cmd *c)
{
	return xwrite(sv[proc][0], c, sizeof(*c));
}

static void wait_gone(int proc)
{
	int pfd = (int)syscall(SYS_pidfd_open, server_pid[proc], 0);

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		poll(&p, 1, 10000);
		close(pfd);
	}
	server_alive[proc] = false;
	close(sv[proc][0]);
	sv[proc][0] = -1;
}

static int server_hello(int proc)
{
	if (xread(sv[proc][0], &server_pid[proc], sizeof(pid_t)))
		return -EIO;
	server_alive[proc] = true;
	return 0;
}

static int host_pool_settle(void);

int host_seq_start(const struct caps *c)
{
	pid_t pid;

	hcaps = c;
	if (c->hugetlb && host_pool_settle())
		return -EBUSY;
	for (int i = 0; i < MAXPROC; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]))
			return -errno;
		server_alive[i] = false;
	}
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		static struct hstate *h;
		void *w;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGCHLD, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		for (int i = 0; i < MAXPROC; i++)
			close(sv[i][0]);
		w = mmap((void *)WIN_BASE, WIN_SIZE, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
		if (w != (void *)WIN_BASE)
			_exit(3);
		/* pm_mm_create() cannot be given a reservation; the first op of every
		 * sequence makes it on both sides (main.c), so unmap ours again. */
		munmap(w, WIN_SIZE);
		h = malloc(host_state_size());
		host_state_init(h, 0);
		open_proc_files();
		if (c->kpage) {
			fd_kflags = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
			fd_kcount = open("/proc/kpagecount", O_RDONLY | O_CLOEXEC);
		}
		serve(h, sv[0][1]);
	}
	for (int i = 0; i < MAXPROC; i++) {
		close(sv[i][1]);
		sv[i][1] = -1;
	}
	return server_hello(0);
}

void host_seq_end(void)
{
	struct cmd c = { .type = CMD_EXIT };

	/* children first: each holds its parent's memfds too */
	for (int i = MAXPROC - 1; i >= 0; i--) {
		if (!server_alive[i])
			continue;
		cmd_send(i, &c);
		wait_gone(i);
	}
	for (int i = 0; i < MAXPROC; i++)
		if (sv[i][0] >= 0)
			close(sv[i][0]);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

bool host_alive(int proc)
{
	return server_alive[proc];
}

struct res host_exec(const struct op *op)
{
	struct cmd c = { .type = CMD_EXEC, .op = *op };
	struct res r = { -EPIPE, 0 };
	int p = op->proc;

	if (!server_alive[p])
		return r;
	if (op->kind == OP_FORK) {
		c.type = CMD_FORK;
		if (cmd_send(p, &c) || xread(sv[p][0], &r, sizeof(r)))
			return (struct res){ -EPIPE, 0 };
		if (r.ret == 0 && server_hello(op->x))
			r.ret = -EPIPE;
		return r;
	}
	if (op->kind == OP_EXIT) {
		c.type = CMD_EXIT;
		cmd_send(p, &c);
		wait_gone(p);
		return (struct res){ 0, 0 };
	}
	if (cmd_send(p, &c) || xread(sv[p][0], &r, sizeof(r)))
		return (struct res){ -EPIPE, 0 };
	return r;
}

int host_observe_send(int proc, bool full, bool smaps)
{
	struct cmd c = { .type = CMD_OBSERVE, .full = (full ? 1 : 0) | (smaps ? 2 : 0) };

	return cmd_send(proc, &c) ? -EPIPE : 0;
}

int host_observe_recv(int proc, struct obs_proc *out)
{
	int rc;

	if (xread(sv[proc][0], &rc, sizeof(rc)))
		return -EPIPE;
	if (rc)
		return rc;
	return xread(sv[proc][0], out, sizeof(*out));
}

/* A count as a signed long: HugePages_Rsvd below zero prints as an unsigned long (2^64 - 1
 * for -1), and pinmm's pm_hugetlb_reserved reads the same way, so both compare as -1. */
static long meminfo_field(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? (long)strtoul(p + strlen(key), NULL, 10) : -1;
}

/*
 * Reservations the host holds for nobody when the run starts: a kernel that leaked some (Linux
 * 6.18's hugetlb accounting can, see docs/linux-differences.md) keeps them in HugePages_Rsvd.
 * The pool is made that much larger, and host_pool() takes them out of both counts, so the run
 * sees a pool of POOL_PAGES with nothing reserved, as pinmm's.
 */
static long rsvd_leak;
/* More than this many, and the pool is not grown to make up for them: the host is unusable. */
#define MAX_RSVD_LEAK 256

static int host_pool_raw(long *free_, long *rsvd);

/*
 * The reservations host_pool() takes out. They stand for real free pages: while the counts
 * read a free list with nothing free and HugePages_Rsvd below zero, an allocation without a
 * reservation finds one of those pages on the host (free - reserved is positive there too)
 * where a pool without them, pinmm's or a clean host's, has none and fails (SIGBUS).
 */
long host_pool_leak(void)
{
	return rsvd_leak;
}

int host_pool(long *free_, long *rsvd)
{
	int err = host_pool_raw(free_, rsvd);

	if (!err) {
		*free_ -= rsvd_leak;
		*rsvd -= rsvd_leak;
	}
	return err;
}

static int host_pool_raw(long *free_, long *rsvd)
{
	static int fd = -1;
	char buf[8192];
	ssize_t n;

	if (fd < 0)
		fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	*free_ = meminfo_field(buf, "HugePages_Free:");
	*rsvd = meminfo_field(buf, "HugePages_Rsvd:");
	return 0;
}

long host_thp_fallbacks(void)
{
	static int fd = -1;
	static char buf[16384];
	ssize_t n;
	char *p;

	if (fd < 0)
		fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strstr(buf, "thp_fault_fallback ");
	return p ? strtol(p + 19, NULL, 10) : 0;
}

/* ---- settings ---- */

struct setting {
	const char *path;
	const char *want;	/* NULL: computed */
	char saved[64];
	bool have, changed;
};

#define THP "/sys/kernel/mm/transparent_hugepage/"
static struct setting settings[] = {
	{ "/proc/sys/vm/overcommit_memory", "1" },
	{ "/proc/sys/vm/nr_hugepages", NULL },
	{ THP "enabled", "madvise" },
	{ THP "defrag", "madvise" },
	{ THP "use_zero_page", NULL },
	{ THP "shmem_enabled", "never" },
	{ THP "khugepaged/defrag", "0" },
	{ THP "khugepaged/scan_sleep_millisecs", "3600000" },
	{ THP "khugepaged/alloc_sleep_millisecs", "3600000" },
	{ THP "hugepages-2048kB/enabled", "inherit" },
	{ THP "hugepages-2048kB/shmem_enabled", "never" },
	{ THP "hugepages-8kB/enabled", "never" },
	{ THP "hugepages-16kB/enabled", "never" },
	{ THP "hugepages-32kB/enabled", "never" },
	{ THP "hugepages-64kB/enabled", "never" },
	{ THP "hugepages-128kB/enabled", "never" },
	{ THP "hugepages-256kB/enabled", "never" },
	{ THP "hugepages-512kB/enabled", "never" },
	{ THP "hugepages-1024kB/enabled", "never" },
	{ THP "hugepages-8kB/shmem_enabled", "never" },
	{ THP "hugepages-16kB/shmem_enabled", "never" },
	{ THP "hugepages-32kB/shmem_enabled", "never" },
	{ THP "hugepages-64kB/shmem_enabled", "never" },
	{ THP "hugepages-128kB/shmem_enabled", "never" },
	{ THP "hugepages-256kB/shmem_enabled", "never" },
	{ THP "hugepages-512kB/shmem_enabled", "never" },
	{ THP "hugepages-1024kB/shmem_enabled", "never" },
	/* pinmm maps only the faulting page of an object: Linux's fault-around off */
	{ "/sys/kernel/debug/fault_around_bytes", "4096" },
};
#define NSET (sizeof(settings) / sizeof(settings[0]))

static int read_setting(const char *path, char *out, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char buf[256], *a, *b;
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -EIO;
	buf[r] = 0;
	a = strchr(buf, '[');	/* "always [madvise] never": the word in brackets */
	if (a && (b = strchr(a, ']'))) {
		*b = 0;
		snprintf(out, n, "%.63s", a + 1);
	} else {
		buf[strcspn(buf, "\n")] = 0;
		snprintf(out, n, "%.63s", buf);
	}
	return 0;
}

static int write_setting(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = write(fd, val, strlen(val));
	close(fd);
	return r == (ssize_t)strlen(val) ? 0 : -errno;
}

/*
 * Before a hugetlb sequence: the host's pool must read as a fresh one, every page free and
 * nothing reserved beyond what host_pool() takes out. The kernel tears an earlier sequence's
 * io_uring rings down after their process is gone, and only then do the pages they pinned and
 * their reservations come back: wait for that, up to HOST_SETTLE_MS. If every page is then
 * free but more reservations are held, for no process, the kernel leaked more of them during
 * the run (as at its start, above): they are taken out as those were, the pool grown by as
 * many pages. Return: 0, or -EBUSY if the pool never settled.
 */
#define HOST_SETTLE_MS 500
static int host_pool_settle(void)
{
	char pool[24];
	long f = -1, r = -1;

	for (int i = 0; i < HOST_SETTLE_MS; i++) {
		if (host_pool_raw(&f, &r) == 0 && f == POOL_PAGES + rsvd_leak && r == rsvd_leak)
			return 0;
		usleep(1000);
	}
	if (f != POOL_PAGES + rsvd_leak || r <= rsvd_leak || r > MAX_RSVD_LEAK)
		return -EBUSY;
	rsvd_leak = r;
	snprintf(pool, sizeof(pool), "%ld", POOL_PAGES + rsvd_leak);
	if (write_setting("/proc/sys/vm/nr_hugepages", pool) ||
	    host_pool_raw(&f, &r) || f != POOL_PAGES + rsvd_leak || r != rsvd_leak)
		return -EBUSY;
	printf("oracle: the host leaked hugetlb reservations during the run: now %ld held for no "
	       "process, the pool grown to %s pages\n", rsvd_leak, pool);
	return 0;
}

static bool debugfs_mounted;

/* Called in the parent, before the driver is forked; host_settings_restore() undoes it. */
int host_settings_save_and_set(const struct caps *c, char *msg, size_t n)
{
	char pool[24], cur[64];
	size_t used = 0;

	{
		long f, r;

		if (host_pool_raw(&f, &r) == 0 && r > 0 && r <= MAX_RSVD_LEAK)
			rsvd_leak = r;
	}
	snprintf(pool, sizeof(pool), "%ld", POOL_PAGES + rsvd_leak);
	msg[0] = 0;
	if (rsvd_leak)
		used += (size_t)snprintf(msg, n, "the host holds %ld hugetlb reservation%s for no "
					 "process: the pool is %ld pages, compared less %ld", rsvd_leak,
					 rsvd_leak > 1 ? "s" : "", POOL_PAGES + rsvd_leak, rsvd_leak);
	if (access("/sys/kernel/debug/fault_around_bytes", F_OK) &&
	    mount("none", "/sys/kernel/debug", "debugfs", 0, NULL) == 0)
		debugfs_mounted = true;
	for (size_t i = 0; i < NSET; i++) {
		struct setting *s = &settings[i];
		const char *want = s->want;

		if (!want)
			want = strstr(s->path, "nr_hugepages") ? pool : c->pm_huge_zero ? "1" : "0";
		if (read_setting(s->path, s->saved, sizeof(s->saved)))
			continue;	/* absent on this kernel */
		s->have = true;
		if (!strcmp(s->saved, want))
			continue;
		if (write_setting(s->path, want)) {
			used += (size_t)snprintf(msg + used, used < n ? n - used : 0,
						 "%scould not set %s to %s", used ? "; " : "", s->path, want);
			continue;
		}
		s->changed = true;
		if (strstr(s->path, "nr_hugepages") && (read_setting(s->path, cur, sizeof(cur)) ||
							strcmp(cur, want)))
			used += (size_t)snprintf(msg + used, used < n ? n - used : 0,
						 "%snr_hugepages is %s, not %s", used ? "; " : "", cur, want);
	}
	if (debugfs_mounted && !settings[NSET - 1].changed && umount("/sys/kernel/debug") == 0)
		debugfs_mounted = false;	/* locked down: fault-around stays on */
	return 0;
}

void host_settings_restore(void)
{
	for (size_t i = 0; i < NSET; i++)
		if (settings[i].changed && !write_setting(settings[i].path, settings[i].saved))
			settings[i].changed = false;
	if (debugfs_mounted && umount("/sys/kernel/debug") == 0)
		debugfs_mounted = false;
}

/*
 * Does a read fault of private anonymous memory map the zero page on this host, as Linux's
 * does (and pinmm)? Sixteen pages are read and the mapping's Rss is looked up in smaps: the
 * zero page counts for none of it, so any Rss is pages the host allocated for reads. A host
 * kernel may do so only some of the time, with the same settings: the probe runs at every
 * start rather than trusting a version.
 * Return: the Rss in kB, 0 where reads map the zero page, -1 where it could not be told.
 */
static long host_anon_read_rss(void)
{
	const size_t len = 16 * 4096;
	char *b = mmap(NULL, len + 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char line[256], key[32];
	long rss = -1;
	bool in = false;
	FILE *f;

	if (b == MAP_FAILED)
		return -1;
	/* a hole each side: a VMA merged with a neighbour would show the neighbour's Rss too */
	munmap(b, 4096);
	munmap(b + 4096 + len, 4096);
	b += 4096;
	for (size_t o = 0; o < len; o += 4096)
		(void)*(volatile char *)(b + o);
	snprintf(key, sizeof(key), "%lx-", (unsigned long)b);
	f = fopen("/proc/self/smaps", "re");
	while (f && rss < 0 && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, strlen(key)))
			in = true;
		else if (in && !strncmp(line, "Rss:", 4))
			rss = strtol(line + 4, NULL, 10);
	}
	if (f)
		fclose(f);
	munmap(b, len);
	return rss;
}

/* ---- what the host can serve ---- */

void host_probe(struct caps *c, char *why, size_t n)
{
	size_t used = 0;
	struct io_uring ring;
	char buf[64];
	int fd;
	long f = 0, r = 0;

#define SKIP(...) (used += (size_t)snprintf(why + used, used < n ? n - used : 0, __VA_ARGS__))
	why[0] = 0;
	c->root = geteuid() == 0;
	if (!c->root)
		SKIP("not root: no sysctl/sysfs settings (THP, overcommit, hugetlb pool as found), "
		     "no frame numbers, so no sharing classes, kpageflags or kpagecount; ");
	fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	c->kpage = c->root && fd >= 0;
	if (fd >= 0)
		close(fd);
	if (c->root && !c->kpage)
		SKIP("no /proc/kpageflags: anon/zero/thp/hugetlb flags and mapcounts not compared; ");
	fd = memfd_create("probe", MFD_CLOEXEC);
	c->memfd = fd >= 0;
	if (fd >= 0)
		close(fd);
	else
		SKIP("no memfd_create: shmem and hugetlb objects skipped; ");
	if (io_uring_queue_init(4, &ring, 0) == 0) {
		char *b = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct iovec iov = { b, 4096 };

		c->uring = io_uring_register_buffers(&ring, &iov, 1) == 0;
		io_uring_queue_exit(&ring);
		munmap(b, 4096);
	}
	if (!c->uring)
		SKIP("no io_uring fixed buffers: long-term pins skipped; ");
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		char *b = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char x = 7;

		c->force = pwrite(fd, &x, 1, (off_t)(unsigned long)b) == 1 && b[0] == 7;
		munmap(b, 4096);
		close(fd);
	}
	if (!c->force)
		SKIP("/proc/self/mem cannot write: FOLL_FORCE accesses skipped; ");
	c->hugetlb = c->memfd && host_pool(&f, &r) == 0 && f >= POOL_PAGES && r == 0;
	if (!c->hugetlb)
		SKIP("hugetlb pool of %d free pages not available (HugePages_Free %ld): hugetlb skipped; ",
		     POOL_PAGES, f);
	c->smaps = access("/proc/self/smaps", R_OK) == 0;
	{
		char en[64] = "", zp[64] = "";

		read_setting(THP "enabled", en, sizeof(en));
		read_setting(THP "use_zero_page", zp, sizeof(zp));
		c->thp = !strcmp(en, "madvise") && !strcmp(zp, c->pm_huge_zero ? "1" : "0");
		if (!c->thp)
			SKIP("host THP is enabled=%s use_zero_page=%s, pinmm's is madvise with%s the huge "
			     "zero page: MADV_HUGEPAGE skipped; ", en, zp, c->pm_huge_zero ? "" : "out");
	}
	{
		long rss = c->smaps ? host_anon_read_rss() : -1;

		c->anon_read_page = rss > 0;
		if (c->anon_read_page)
			SKIP("read faults of private anonymous memory allocate pages on this host (%ld kB "
			     "of Rss after reading 16 pages), where Linux maps the zero page: allowed as "
			     "[anon-read] differences; ", rss);
	}
	if (c->root && read_setting("/sys/kernel/debug/fault_around_bytes", buf, sizeof(buf)) == 0 &&
	    strcmp(buf, "4096"))
		SKIP("fault_around_bytes is %s: object read faults map their neighbours on the host; ", buf);
	else if (c->root && read_setting("/sys/kernel/debug/fault_around_bytes", buf, sizeof(buf)))
		SKIP("fault_around_bytes cannot be set (debugfs locked down): a read fault of an object "
		     "maps its cached neighbours on the host, allowed as [object] differences; ");
#undef SKIP
}
