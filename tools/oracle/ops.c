// SPDX-License-Identifier: MIT
/*
 * ops.c - the one table of operations the oracle runs, and each operation twice: on the
 * host (in a server process, host_do) and on pinmm (pm_do).
 *
 * A row says whether pinmm has the operation (pinmm_has) and whether the host can serve it
 * (host_has). Operations other workers are adding to pinmm (pm_mremap, MADV_POPULATE_*,
 * WIPEONFORK, KEEPONFORK, REMOVE, FREE, MAP_LOCKED, MAP_GROWSDOWN) have rows already; their
 * pinmm halves are enabled by the start-up probe (pm_probe), which calls them once on a
 * scratch machine: -EINVAL for a mapped, valid range means "not on this branch". pm_mremap is
 * a weak reference, so the oracle links whether or not libpinmm has it.
 *
 * Pins on the host are io_uring fixed buffers (one ring per slot), which always pin
 * FOLL_WRITE | FOLL_LONGTERM and are all-or-nothing: pinmm's half pins the same way and turns
 * a partial pin into io_uring's -EFAULT. A write through a pin is an IORING_OP_READ_FIXED
 * from a memfd into the buffer on the host and a store to the pinned frame in pinmm.
 * FOLL_FORCE accesses are /proc/self/mem on the host (-EIO when nothing could be copied)
 * and pm_get_user_pages(FOLL_FORCE) in pinmm.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liburing.h>
#include <pinmm/pinmm.h>

#include "oracle.h"

/* pinmm calls other branches add: weak, so the oracle links without them. */
long pm_mremap(struct pm_mm *mm, unsigned long old_addr, unsigned long old_len,
	       unsigned long new_len, unsigned flags, unsigned long new_addr) __attribute__((weak));

#define RW (PM_PROT_READ | PM_PROT_WRITE)

/* ---- the table ---- */

static bool has_madv(const struct caps *c, const struct op *op)
{
	return op->x >= 0 && op->x < 32 && c->pm_madv[op->x];
}

static bool has_mmap(const struct caps *c, const struct op *op)
{
	if ((op->f & PM_MAP_LOCKED) && !c->pm_locked)
		return false;
	if ((op->f & PM_MAP_GROWSDOWN) && !c->pm_growsdown)
		return false;
	return true;
}

static bool host_mmap(const struct caps *c, const struct op *op)
{
	if (op->o >= 0 && !c->memfd)
		return false;
	if ((op->o == 2 || (op->f & PM_MAP_HUGETLB)) && !c->hugetlb)
		return false;
	return true;
}

static bool has_mremap(const struct caps *c, const struct op *op)
{
	return c->pm_mremap;
}

static bool host_pin(const struct caps *c, const struct op *op)
{
	return c->uring;
}

static bool host_force(const struct caps *c, const struct op *op)
{
	return c->force;
}

static bool host_trunc(const struct caps *c, const struct op *op)
{
	return c->memfd && (op->o != 2 || c->hugetlb);
}

static bool host_madv(const struct caps *c, const struct op *op)
{
	return c->thp || op->x != PM_MADV_HUGEPAGE;
}

const struct op_desc op_table[OP_NR] = {
	[OP_MMAP] = { "mmap", 14, has_mmap, host_mmap },
	[OP_MUNMAP] = { "munmap", 6, NULL, NULL },
	[OP_MPROTECT] = { "mprotect", 6, NULL, NULL },
	[OP_MADVISE] = { "madvise", 8, has_madv, host_madv },
	[OP_READ] = { "read", 14, NULL, NULL },
	[OP_WRITE] = { "write", 16, NULL, NULL },
	[OP_FREAD] = { "force_read", 3, NULL, host_force },
	[OP_FWRITE] = { "force_write", 4, NULL, host_force },
	[OP_MINCORE] = { "mincore", 3, NULL, NULL },
	[OP_PIN] = { "pin_longterm", 5, NULL, host_pin },
	[OP_UNPIN] = { "unpin", 3, NULL, host_pin },
	[OP_PINWRITE] = { "pin_write", 3, NULL, host_pin },
	[OP_FORK] = { "fork", 2, NULL, NULL },
	[OP_EXIT] = { "exit", 1, NULL, NULL },
	[OP_TRUNCATE] = { "truncate", 2, NULL, host_trunc },
	[OP_MREMAP] = { "mremap", 4, has_mremap, NULL },
};

/* ---- generation ---- */

static unsigned long pick_addr(uint64_t *r)
{
	unsigned long pg = rnd(r) % WIN_PAGES;

	if (rnd(r) % 3 == 0)
		pg &= ~511UL;	/* 2 MiB aligned */
	return WIN_BASE + pg * 4096;
}

static unsigned long pick_len(uint64_t *r)
{
	switch (rnd(r) % 16) {
	case 0:
		return HPAGE;
	case 1:
		return 2 * HPAGE;
	case 2:
		return (rnd(r) % 3) * 4096 + (rnd(r) % 2 ? 0 : 1);	/* 0, unaligned */
	case 3:
		return HPAGE - 4096 * (rnd(r) % 4);
	default:
		return 4096 * (1 + rnd(r) % 16);
	}
}

static int pick_prot(uint64_t *r)
{
	static const int p[] = { PM_PROT_NONE, PM_PROT_READ, RW, RW, RW, PM_PROT_READ | PM_PROT_EXEC };

	return p[rnd(r) % 6];
}

static void gen_mmap(struct gen_ctx *g, struct op *op)
{
	uint64_t *r = g->rng;
	unsigned kind = rnd(r) % 10;
	int f = 0;

	op->addr = pick_addr(r);
	op->len = pick_len(r);
	op->x = pick_prot(r);
	op->o = -1;
	switch (kind) {
	case 0: case 1: case 2: case 3:
		f = PM_MAP_PRIVATE | PM_MAP_ANONYMOUS;
		break;
	case 4:
		f = PM_MAP_SHARED | PM_MAP_ANONYMOUS;
		break;
	case 5: case 6:
		f = (rnd(r) % 2 ? PM_MAP_SHARED : PM_MAP_PRIVATE);
		op->o = rnd(r) % 2;
		op->off = 4096 * (rnd(r) % 64);
		break;
	case 7: case 8:
		f = (rnd(r) % 2 ? PM_MAP_SHARED : PM_MAP_PRIVATE);
		op->o = 2;
		op->off = HPAGE * (rnd(r) % 2);
		break;
	default:
		f = (rnd(r) % 2 ? PM_MAP_SHARED : PM_MAP_PRIVATE) | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB;
		break;
	}
	if (op->o == 2 || (f & PM_MAP_HUGETLB)) {
		op->addr &= ~(HPAGE - 1);
		if (rnd(r) % 2)
			op->len = HPAGE * (1 + rnd(r) % 2);
	}
	switch (rnd(r) % 8) {
	case 0:
		break;			/* a hint */
	case 1:
		f |= PM_MAP_FIXED_NOREPLACE;
		break;
	default:
		f |= PM_MAP_FIXED;
	}
	if (rnd(r) % 5 == 0)
		f |= PM_MAP_POPULATE;
	if (rnd(r) % 12 == 0)
		f |= PM_MAP_NORESERVE;
	if (rnd(r) % 20 == 0)
		f |= PM_MAP_STACK;
	if ((f & PM_MAP_PRIVATE) && (f & PM_MAP_ANONYMOUS) && rnd(r) % 16 == 0)
		f |= PM_MAP_LOCKED;
	if ((f & PM_MAP_PRIVATE) && (f & PM_MAP_ANONYMOUS) && !(f & PM_MAP_HUGETLB) &&
	    rnd(r) % 24 == 0)
		f |= PM_MAP_GROWSDOWN;
	op->f = f;
}

static int pick_alive(struct gen_ctx *g)
{
	int n = 0, a[MAXPROC];

	for (int i = 0; i < MAXPROC; i++)
		if (g->alive[i])
			a[n++] = i;
	return n ? a[rnd(g->rng) % n] : 0;
}

/* Ranges stay in the window (an unaligned or zero length stays as drawn). */
static void clamp(struct op *op)
{
	if (op->addr < WIN_END && op->len > WIN_END - op->addr)
		op->len = WIN_END - op->addr;
}

void op_generate(struct gen_ctx *g, struct op *op)
{
	static int total;
	uint64_t *r = g->rng;
	int w, k;

	if (!total)
		for (k = 0; k < OP_NR; k++)
			total += op_table[k].weight;
	for (;;) {
		memset(op, 0, sizeof(*op));
		w = rnd(r) % total;
		for (k = 0; w >= op_table[k].weight; k++)
			w -= op_table[k].weight;
		op->kind = k;
		op->o = -1;
		op->proc = pick_alive(g);
		switch (k) {
		case OP_MMAP:
			gen_mmap(g, op);
			break;
		case OP_MUNMAP:
		case OP_MINCORE:
			op->addr = pick_addr(r);
			op->len = pick_len(r);
			break;
		case OP_MPROTECT:
			op->addr = pick_addr(r);
			op->len = pick_len(r);
			op->x = pick_prot(r);
			break;
		case OP_MADVISE: {
			static const int adv[] = { PM_MADV_DONTNEED, PM_MADV_DONTNEED, PM_MADV_HUGEPAGE,
				PM_MADV_HUGEPAGE, PM_MADV_NOHUGEPAGE, PM_MADV_DONTFORK, PM_MADV_DOFORK,
				PM_MADV_FREE, PM_MADV_REMOVE, PM_MADV_WIPEONFORK, PM_MADV_KEEPONFORK,
				PM_MADV_POPULATE_READ, PM_MADV_POPULATE_WRITE };
			op->addr = pick_addr(r);
			op->len = pick_len(r);
			op->x = adv[rnd(r) % (sizeof(adv) / sizeof(adv[0]))];
			break;
		}
		case OP_READ:
		case OP_WRITE:
		case OP_FREAD:
		case OP_FWRITE:
			op->addr = pick_addr(r) + rnd(r) % HEAD;
			op->x = 1 + rnd(r) % 255;
			break;
		case OP_PIN:
			op->x = rnd(r) % NSLOT;
			op->addr = pick_addr(r);
			op->len = 1 + (rnd(r) % 4 == 0 ? 512 : rnd(r) % 8);
			break;
		case OP_UNPIN:
			op->x = rnd(r) % NSLOT;
			break;
		case OP_PINWRITE:
			op->x = rnd(r) % NSLOT;
			op->addr = rnd(r) % 8;	/* the page of the pinned range (mod its length) */
			op->len = 1 + rnd(r) % 255;	/* the byte value */
			break;
		case OP_FORK:
			if (g->nproc >= MAXPROC)
				continue;
			op->x = g->nproc;
			break;
		case OP_EXIT:
			if (op->proc == 0)
				continue;
			break;
		case OP_TRUNCATE:
			op->o = rnd(r) % NOBJ;
			op->off = op->o == 2 ? HPAGE * (rnd(r) % 3) : 4096 * (rnd(r) % 80);
			if (op->o == 2 && rnd(r) % 8 == 0)
				op->off += 4096;
			break;
		case OP_MREMAP:
			op->addr = pick_addr(r);
			op->len = 4096 * (1 + rnd(r) % 8);
			op->b = rnd(r) % 2 ? op->len * 2 : 4096 * (1 + rnd(r) % 8);
			op->f = (int)(rnd(r) % 8) & (PM_MREMAP_MAYMOVE | PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP);
			if (op->f & (PM_MREMAP_FIXED | PM_MREMAP_DONTUNMAP))
				op->f |= PM_MREMAP_MAYMOVE;
			op->c = pick_addr(r);
			break;
		}
		if (k == OP_MMAP || k == OP_MUNMAP || k == OP_MPROTECT || k == OP_MADVISE || k == OP_MINCORE)
			clamp(op);
		if (!op_table[k].pinmm_has || op_table[k].pinmm_has(g->caps, op))
			if (!op_table[k].host_has || op_table[k].host_has(g->caps, op))
				break;
	}
	if (op->kind == OP_FORK) {
		g->alive[op->x] = true;
		g->nproc++;
	} else if (op->kind == OP_EXIT) {
		g->alive[op->proc] = false;
	}
}

const char *op_variant(const struct op *op, char *buf, size_t n)
{
	static const char *adv[32] = { [4] = "dontneed", [8] = "free", [9] = "remove",
		[10] = "dontfork", [11] = "dofork", [14] = "hugepage", [15] = "nohugepage",
		[18] = "wipeonfork", [19] = "keeponfork", [22] = "populate_read",
		[23] = "populate_write" };
	const char *name = op_table[op->kind].name;

	switch (op->kind) {
	case OP_MMAP:
		snprintf(buf, n, "%s.%s.%s%s%s", name,
			 (op->f & PM_MAP_FIXED) ? "fixed" :
			 (op->f & PM_MAP_FIXED_NOREPLACE) ? "noreplace" : "hint",
			 (op->o == 2 || (op->f & PM_MAP_HUGETLB)) ? "hugetlb" :
			 op->o >= 0 ? "shmem" : (op->f & PM_MAP_SHARED) ? "shared_anon" : "anon",
			 (op->f & PM_MAP_POPULATE) ? ".populate" : "",
			 (op->f & PM_MAP_LOCKED) ? ".locked" : "");
		break;
	case OP_MADVISE:
		snprintf(buf, n, "%s.%s", name, op->x >= 0 && op->x < 32 && adv[op->x] ? adv[op->x] : "?");
		break;
	default:
		snprintf(buf, n, "%s", name);
	}
	return buf;
}

void op_print(const struct op *op, char *buf, size_t n)
{
	char v[64];

	snprintf(buf, n, "p%u %s addr=%#lx len=%#lx x=%#x f=%#x o=%d off=%#lx b=%#lx c=%#lx",
		 op->proc, op_variant(op, v, sizeof(v)), op->addr, op->len, op->x, op->f, op->o,
		 op->off, op->b, op->c);
}

/* One line of the C test: the pinmm call with the host's result as the expectation. */
void op_print_c(const struct op *op, int i, const struct res *want, char *buf, size_t n)
{
	int p = op->proc;
	const char *file = op->o >= 0 ? (op->o == 0 ? "obj[0]" : op->o == 1 ? "obj[1]" : "obj[2]") : "NULL";

	switch (op->kind) {
	case OP_MMAP:
		snprintf(buf, n, "\tis_int(mmap_win(mm[%d], %#lxUL, %#lx, %#x, %#x, %s, %#lx), %ld, \"%d: mmap\");",
			 p, op->addr, op->len, op->x, op->f, file, op->off, want->ret, i);
		break;
	case OP_MUNMAP:
		snprintf(buf, n, "\tis_int(pm_munmap(mm[%d], %#lxUL, %#lx), %ld, \"%d: munmap\");",
			 p, op->addr, op->len, want->ret, i);
		break;
	case OP_MPROTECT:
		snprintf(buf, n, "\tis_int(pm_mprotect(mm[%d], %#lxUL, %#lx, %#x), %ld, \"%d: mprotect\");",
			 p, op->addr, op->len, op->x, want->ret, i);
		break;
	case OP_MADVISE:
		snprintf(buf, n, "\tis_int(pm_madvise(mm[%d], %#lxUL, %#lx, %d), %ld, \"%d: madvise\");",
			 p, op->addr, op->len, op->x, want->ret, i);
		break;
	case OP_READ:
		snprintf(buf, n, "\tis_int(peek(mm[%d], %#lxUL), %ld, \"%d: read\");", p, op->addr,
			 want->ret, i);
		break;
	case OP_WRITE:
		snprintf(buf, n, "\tis_int(poke(mm[%d], %#lxUL, %d), %ld, \"%d: write\");", p, op->addr,
			 op->x, want->ret, i);
		break;
	case OP_FREAD:
	case OP_FWRITE:
		snprintf(buf, n, "\tis_int(force(mm[%d], %#lxUL, %d, %d), %ld, \"%d: force %s\");", p,
			 op->addr, op->kind == OP_FWRITE, op->x, want->ret, i,
			 op->kind == OP_FWRITE ? "write" : "read");
		break;
	case OP_MINCORE:
		snprintf(buf, n, "\tis_int(pm_mincore(mm[%d], %#lxUL, %#lx, vec), %ld, \"%d: mincore\");",
			 p, op->addr, op->len, want->ret, i);
		break;
	case OP_PIN:
		snprintf(buf, n, "\tis_int(pin(%d, %d, %#lxUL, %lu), %ld, \"%d: pin FOLL_WRITE|FOLL_LONGTERM\");",
			 p, op->x, op->addr, op->len, want->ret, i);
		break;
	case OP_UNPIN:
		snprintf(buf, n, "\tunpin(%d, %d);", p, op->x);
		break;
	case OP_PINWRITE:
		snprintf(buf, n, "\tis_int(pin_write(%d, %d, %lu, %lu), %ld, \"%d: write through the pin\");",
			 p, op->x, op->addr, op->len, want->ret, i);
		break;
	case OP_FORK:
		snprintf(buf, n, "\tmm[%d] = pmt_fork(mm[%d]);", op->x, p);
		break;
	case OP_EXIT:
		snprintf(buf, n, "\texit_mm(%d);", p);
		break;
	case OP_TRUNCATE:
		snprintf(buf, n, "\tis_int(pm_shmem_truncate(obj[%d], %#lx), %ld, \"%d: truncate\");",
			 op->o, op->off, want->ret, i);
		break;
	case OP_MREMAP:
		/* only generated where libpinmm has pm_mremap (the probe enables the row) */
		snprintf(buf, n, "\tis_int(mremap_win(mm[%d], %#lxUL, %#lx, %#lx, %#x, %#lxUL), %ld, \"%d: mremap\");",
			 p, op->addr, op->len, op->b, op->f, op->c, want->ret, i);
		break;
	}
}

/* ---- the host half, run inside a server process ---- */

struct hstate {
	int proc;
	int memfd[NOBJ];
	int memfd_ok[NOBJ];
	int srcfd;		/* the source of writes through a pin */
	int memfd_self;		/* /proc/self/mem of this process */
	struct io_uring ring[NSLOT];
	bool ring_init[NSLOT], pinned[NSLOT];
	unsigned long pin_addr[NSLOT], pin_n[NSLOT];
};

size_t host_state_size(void)
{
	return sizeof(struct hstate);
}

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_armed;

static void on_fault(int sig)
{
	if (fault_armed)
		siglongjmp(fault_jmp, sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

void host_state_init(struct hstate *h, int proc)
{
	struct sigaction sa = { .sa_handler = on_fault };
	static const char *names[NOBJ] = { "o0", "o1", "h2" };
	static const size_t sizes[NOBJ] = { 1UL << 20, 4UL << 20, 4UL << 20 };

	memset(h, 0, sizeof(*h));
	h->proc = proc;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	for (int i = 0; i < NOBJ; i++) {
		h->memfd[i] = memfd_create(names[i], MFD_CLOEXEC | (i == 2 ? MFD_HUGETLB : 0));
		h->memfd_ok[i] = h->memfd[i] >= 0 && ftruncate(h->memfd[i], (off_t)sizes[i]) == 0;
	}
	h->srcfd = memfd_create("src", MFD_CLOEXEC);
	if (h->srcfd >= 0 && ftruncate(h->srcfd, 4096))
		h->srcfd = -1;
	h->memfd_self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
}

void host_state_forked(struct hstate *h, int proc)
{
	/* The rings stay the parent's: its pins are not this process's. */
	for (int i = 0; i < NSLOT; i++) {
		if (h->ring_init[i])
			io_uring_queue_exit(&h->ring[i]);
		h->ring_init[i] = h->pinned[i] = false;
	}
	h->proc = proc;
	if (h->memfd_self >= 0)
		close(h->memfd_self);
	h->memfd_self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
}

void host_state_exit(struct hstate *h)
{
	for (int i = 0; i < NSLOT; i++) {
		if (h->pinned[i])
			io_uring_unregister_buffers(&h->ring[i]);
		if (h->ring_init[i])
			io_uring_queue_exit(&h->ring[i]);
	}
}

static long neg_errno(long r)
{
	return r < 0 ? -errno : r;
}

static bool in_window(unsigned long a, unsigned long len)
{
	return a >= WIN_BASE && a < WIN_END && len <= WIN_END - a;
}

static unsigned long map_len(const struct op *op, unsigned long len)
{
	len = (len + 4095) & ~4095UL;
	if (op->o == 2 || (op->f & PM_MAP_HUGETLB))
		len = (len + HPAGE - 1) & ~(HPAGE - 1);
	return len;
}

struct res host_do(struct hstate *h, const struct op *op)
{
	struct res r = { 0, 0 };
	volatile unsigned char *p = (volatile unsigned char *)op->addr;
	unsigned char c = (unsigned char)op->x;
	int sig;

	switch (op->kind) {
	case OP_MMAP: {
		int fd = -1;
		void *a;

		if (op->o >= 0) {
			if (!h->memfd_ok[op->o])
				return (struct res){ -EBADF, 0 };
			fd = h->memfd[op->o];
		}
		a = mmap((void *)op->addr, op->len, op->x, op->f, fd, (off_t)op->off);
		if (a == MAP_FAILED) {
			r.ret = -errno;
		} else if (!in_window((unsigned long)a, map_len(op, op->len))) {
			munmap(a, map_len(op, op->len));
			r.ret = RET_OUTSIDE;
		} else {
			r.ret = (long)a;
		}
		break;
	}
	case OP_MUNMAP:
		r.ret = neg_errno(munmap((void *)op->addr, op->len));
		break;
	case OP_MPROTECT:
		r.ret = neg_errno(mprotect((void *)op->addr, op->len, op->x));
		break;
	case OP_MADVISE:
		r.ret = neg_errno(madvise((void *)op->addr, op->len, op->x));
		break;
	case OP_READ:
	case OP_WRITE:
		fault_armed = 1;
		sig = sigsetjmp(fault_jmp, 1);
		if (!sig) {
			if (op->kind == OP_WRITE) {
				*p = c;
				r.ret = 0;
			} else {
				r.ret = *p;
			}
		} else {
			r.ret = -EFAULT;
			r.aux = (uint64_t)sig;
		}
		fault_armed = 0;
		break;
	case OP_FREAD:
	case OP_FWRITE: {
		ssize_t n;

		if (op->kind == OP_FWRITE)
			n = pwrite(h->memfd_self, &c, 1, (off_t)op->addr);
		else
			n = pread(h->memfd_self, &c, 1, (off_t)op->addr);
		r.ret = n < 0 ? -errno : n == 0 ? -EIO : op->kind == OP_FREAD ? c : 0;
		break;
	}
	case OP_MINCORE: {
		static unsigned char vec[WIN_PAGES + 64];
		unsigned long n = (op->len + 4095) / 4096;

		memset(vec, 0, sizeof(vec));
		if (n > WIN_PAGES + 64) {
			r.ret = -EINVAL;
			break;
		}
		r.ret = neg_errno(mincore((void *)op->addr, op->len, vec));
		for (unsigned long i = 0; i < n; i++)
			vec[i] &= 1;
		r.aux = r.ret == 0 ? fnv64(vec, n) : 0;
		res_keep_vec(&r, vec, n);
		break;
	}
	case OP_PIN: {
		struct iovec iov = { (void *)op->addr, op->len * 4096 };
		int s = op->x;

		if (h->pinned[s]) {
			r.ret = -EBUSY;
			break;
		}
		if (!h->ring_init[s]) {
			if (io_uring_queue_init(4, &h->ring[s], 0) < 0) {
				r.ret = -ENOSYS;
				break;
			}
			h->ring_init[s] = true;
		}
		r.ret = io_uring_register_buffers(&h->ring[s], &iov, 1);
		if (r.ret == 0) {
			h->pinned[s] = true;
			h->pin_addr[s] = op->addr;
			h->pin_n[s] = op->len;
			r.ret = (long)op->len;
		}
		break;
	}
	case OP_UNPIN:
		if (h->pinned[op->x]) {
			r.ret = io_uring_unregister_buffers(&h->ring[op->x]);
			h->pinned[op->x] = false;
		}
		break;
	case OP_PINWRITE: {
		int s = op->x;
		unsigned char buf[HEAD];
		struct io_uring_sqe *sqe;
		struct io_uring_cqe *cqe;
		unsigned long pg;

		if (!h->pinned[s] || h->srcfd < 0) {
			r.ret = -ENOENT;
			break;
		}
		pg = op->addr % h->pin_n[s];
		memset(buf, (int)op->len, sizeof(buf));
		if (pwrite(h->srcfd, buf, HEAD, 0) != HEAD) {
			r.ret = -EIO;
			break;
		}
		sqe = io_uring_get_sqe(&h->ring[s]);
		io_uring_prep_read_fixed(sqe, h->srcfd, (void *)(h->pin_addr[s] + pg * 4096), HEAD, 0, 0);
		io_uring_submit(&h->ring[s]);
		if (io_uring_wait_cqe(&h->ring[s], &cqe) < 0) {
			r.ret = -EIO;
			break;
		}
		r.ret = cqe->res;
		io_uring_cqe_seen(&h->ring[s], cqe);
		break;
	}
	case OP_TRUNCATE:
		if (!h->memfd_ok[op->o])
			r.ret = -EBADF;
		else
			r.ret = neg_errno(ftruncate(h->memfd[op->o], (off_t)op->off));
		break;
	case OP_MREMAP: {
		/* The system call itself: glibc's wrapper passes new_address only with
		 * MREMAP_FIXED or MREMAP_DONTUNMAP (0 otherwise), and the kernel checks even an
		 * unused one (hugetlb: align_hugetlb), as pm_mremap does. */
		long sr = syscall(SYS_mremap, op->addr, op->len, op->b, op->f, op->c);
		void *a = sr == -1 ? MAP_FAILED : (void *)sr;

		if (a == MAP_FAILED) {
			r.ret = -errno;
		} else if (!in_window((unsigned long)a, op->b)) {
			munmap(a, op->b);
			r.ret = RET_OUTSIDE;
		} else {
			r.ret = (long)a;
		}
		break;
	}
	default:
		r.ret = -ENOSYS;
	}
	return r;
}

/* ---- the pinmm half ---- */

struct pstate {
	struct pm_machine *m;
	struct pm_mm *mm[MAXPROC];
	struct pm_shmem *obj[NOBJ];
	struct pm_page **pins[MAXPROC][NSLOT];
	long npins[MAXPROC][NSLOT];
	size_t free0;
};

/*
 * One machine per design for the whole run, as one host serves every sequence: a sequence
 * ends with its address spaces and objects gone; every CHECK_EVERY sequences (and at the
 * end) the machine must be whole again (pm_machine_check) with every frame free. Creating a
 * machine per sequence costs RCU grace periods that dominated the run.
 */
#define CHECK_EVERY 32
static struct pm_machine *machines[2];
static size_t machine_free0[2];
static long machine_seqs[2];

/*
 * The host servers are forked from this process, which holds the pinmm machines' memory
 * (hundreds of MiB, host THP). Inherited, it made every fork copy its page tables, every
 * later pinmm store a COW fault with a TLB shootdown, and every smaps read of a server walk
 * it. No server touches it: the mapping of the machine's frames, the one a machine's
 * creation adds that is at least its memory's size, is MADV_DONTFORK.
 * The library leaves that choice to its user (a host fork may be a snapshot).
 */
struct span {
	unsigned long lo, hi;
};

static int read_spans(struct span *sp, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &sp[n].lo, &sp[n].hi) == 2)
			n++;
	fclose(f);
	return n;
}

static void dontfork_new_spans(const struct span *old, int nold, unsigned long min)
{
	struct span now[512];
	int n = read_spans(now, 512);

	for (int i = 0; i < n; i++) {
		bool seen = false;

		for (int j = 0; j < nold && !seen; j++)
			seen = now[i].lo >= old[j].lo && now[i].hi <= old[j].hi;
		/* the machine's frames only: a malloc arena the server uses may be new too */
		if (!seen && now[i].hi - now[i].lo >= min)
			madvise((void *)now[i].lo, now[i].hi - now[i].lo, MADV_DONTFORK);
	}
}

static struct pm_machine *machine_create_nofork(const struct pm_config *cfg)
{
	static struct span old[512];
	int nold = read_spans(old, 512);
	struct pm_machine *m = pm_machine_create(cfg);

	if (m)
		dontfork_new_spans(old, nold, cfg->mem_bytes);
	return m;
}

static int mslot(unsigned design)
{
	return design == PM_MACHINE_RANGE_MM;
}

struct pstate *pm_seq_start(unsigned design, const struct caps *c)
{
	struct pm_config cfg = { .mem_bytes = 256UL << 20, .flags = design,
				 .nr_hugepages = c->hugetlb ? POOL_PAGES : 0 };
	struct pstate *p = calloc(1, sizeof(*p));
	int k = mslot(design);
	size_t total, f;

	if (!p)
		return NULL;
	if (!machines[k]) {
		machines[k] = machine_create_nofork(&cfg);
		if (!machines[k]) {
			free(p);
			return NULL;
		}
		pm_rcu_barrier();
		machine_free0[k] = pm_machine_free_pages(machines[k]);
	}
	p->m = machines[k];
	/* a hugetlb page freed by the last sequence may still wait for a grace period */
	if (pm_hugetlb_pool(p->m, &total, &f) == 0 && f != total)
		pm_rcu_barrier();
	p->free0 = machine_free0[k];
	p->mm[0] = pm_mm_create(p->m);
	p->obj[0] = pm_shmem_create(p->m, 1UL << 20, 0);
	p->obj[1] = pm_shmem_create(p->m, 4UL << 20, 0);
	p->obj[2] = c->hugetlb ? pm_shmem_create_hugetlb(p->m, 4UL << 20) : NULL;
	return p;
}

static void pm_unpin_all(struct pstate *p, int proc)
{
	for (int s = 0; s < NSLOT; s++) {
		if (p->pins[proc][s]) {
			pm_unpin_user_pages(p->pins[proc][s], (unsigned long)p->npins[proc][s]);
			free(p->pins[proc][s]);
			p->pins[proc][s] = NULL;
		}
	}
}

static int machine_whole(struct pm_machine *m, size_t free0, char *why, size_t n)
{
	pm_rcu_barrier();
	if (pm_machine_check(m)) {
		snprintf(why, n, "pm_machine_check failed after the sequence");
		return -1;
	}
	if (pm_machine_free_pages(m) != free0) {
		snprintf(why, n, "frames leaked: %zu free after the sequence, %zu at the start",
			 pm_machine_free_pages(m), free0);
		return -1;
	}
	return 0;
}

int pm_seq_end(struct pstate *p, bool check, char *why, size_t n)
{
	int k = mslot(pm_machine_flags(p->m)), ret = 0;

	for (int i = 0; i < MAXPROC; i++) {
		pm_unpin_all(p, i);
		if (p->mm[i])
			pm_mm_destroy(p->mm[i]);
	}
	for (int i = 0; i < NOBJ; i++)
		if (p->obj[i])
			pm_shmem_put(p->obj[i]);
	if (check || ++machine_seqs[k] % CHECK_EVERY == 0)
		ret = machine_whole(p->m, p->free0, why, n);
	if (ret) {
		/* a broken machine is not reused */
		pm_machine_destroy(p->m);
		machines[k] = NULL;
	}
	free(p);
	return ret;
}

int pm_run_end(char *why, size_t n)
{
	int ret = 0;

	for (int k = 0; k < 2; k++) {
		if (!machines[k])
			continue;
		if (machine_whole(machines[k], machine_free0[k], why, n))
			ret = -1;
		pm_machine_destroy(machines[k]);
		machines[k] = NULL;
	}
	return ret;
}

static long pm_force(struct pm_mm *mm, unsigned long addr, bool write, unsigned char *c)
{
	struct pm_map_info mi;
	struct pm_page *pg;
	unsigned char *kaddr;
	long n;

	/* /proc/PID/mem is access_remote_vm, which grows a stack VMA above a hole first
	 * (expand_stack) where GUP itself never does: a fault there does the same growth. */
	if (pm_mm_maps(mm, addr, &mi, 1) == 1 && mi.start > addr &&
	    (mi.vmflags & PM_VMF_GROWSDOWN))
		(void)pm_fault(mm, addr, 0);
	n = pm_get_user_pages(mm, addr & ~4095UL, 1, PM_FOLL_FORCE | (write ? PM_FOLL_WRITE : 0),
			      &pg);

	if (n != 1)
		return -EIO;	/* /proc/PID/mem: nothing copied */
	kaddr = (unsigned char *)pm_page_address(pg) + (addr & 4095);
	if (write)
		*kaddr = *c;
	else
		*c = *kaddr;
	pm_put_page(pg);
	return write ? 0 : *c;
}

bool pm_in_stack_guard_gap(struct pstate *p, int proc, unsigned long addr, unsigned long len)
{
	struct pm_map_info mi;
	struct pm_mm *mm = p->mm[proc];

	if (!mm || pm_mm_maps(mm, addr + len, &mi, 1) != 1)
		return false;
	return (mi.vmflags & PM_VMF_GROWSDOWN) && mi.start >= addr + len &&
	       mi.start - (addr + len) < (256UL << 12);
}

/*
 * Will @op, if it succeeds, move part of a private hugetlb mapping and leave the rest behind?
 * Asked before it runs. Linux 6.18 then drops the reservation map of the part left behind:
 * that part's outstanding reservations stay in HugePages_Rsvd for no one, and its later faults
 * take none (docs/linux-differences.md, item 6). A hugetlb mapping moves only with
 * MREMAP_FIXED (same or smaller length; MAYMOVE alone at the same length is a no-op, and
 * DONTUNMAP is refused); what is left is the VMA outside [addr, addr + old length).
 */
bool pm_hugetlb_move_leaves_part(struct pstate *p, const struct op *op)
{
	const unsigned long huge = 2UL << 20;
	struct pm_map_info mi;
	struct pm_mm *mm = p->mm[op->proc];
	unsigned long end;

	if (op->kind != OP_MREMAP || !(op->f & PM_MREMAP_FIXED) || !mm ||
	    pm_mm_maps(mm, op->addr, &mi, 1) != 1 || mi.start > op->addr ||
	    !(mi.flags & PM_MAP_HUGETLB) || (mi.flags & PM_MAP_SHARED))
		return false;
	end = op->addr + ((op->len + huge - 1) & ~(huge - 1));
	return mi.start < op->addr || mi.end > end;
}

struct res pm_do(struct pstate *p, const struct op *op)
{
	struct res r = { 0, 0 };
	struct pm_mm *mm = p->mm[op->proc];
	unsigned char c = (unsigned char)op->x;

	switch (op->kind) {
	case OP_MMAP: {
		struct pm_shmem *f = op->o >= 0 ? p->obj[op->o] : NULL;

		if (op->o >= 0 && !f)
			return (struct res){ -EBADF, 0 };
		r.ret = pm_mmap(mm, op->addr, op->len, op->x, op->f, f, op->off);
		if (r.ret >= 0 && !in_window((unsigned long)r.ret, map_len(op, op->len))) {
			pm_munmap(mm, (unsigned long)r.ret, map_len(op, op->len));
			r.ret = RET_OUTSIDE;
		}
		break;
	}
	case OP_MUNMAP:
		r.ret = pm_munmap(mm, op->addr, op->len);
		break;
	case OP_MPROTECT:
		r.ret = pm_mprotect(mm, op->addr, op->len, op->x);
		break;
	case OP_MADVISE:
		r.ret = pm_madvise(mm, op->addr, op->len, op->x);
		break;
	case OP_READ:
		r.ret = pm_access(mm, op->addr, &c, 1, 0);
		r.ret = r.ret == 1 ? c : r.ret;
		break;
	case OP_WRITE:
		r.ret = pm_access(mm, op->addr, &c, 1, 1);
		r.ret = r.ret == 1 ? 0 : r.ret;
		break;
	case OP_FREAD:
	case OP_FWRITE:
		r.ret = pm_force(mm, op->addr, op->kind == OP_FWRITE, &c);
		break;
	case OP_MINCORE: {
		static unsigned char vec[WIN_PAGES + 64];
		unsigned long n = (op->len + 4095) / 4096;

		memset(vec, 0, sizeof(vec));
		if (n > WIN_PAGES + 64) {
			r.ret = -EINVAL;
			break;
		}
		r.ret = pm_mincore(mm, op->addr, op->len, vec);
		r.aux = r.ret == 0 ? fnv64(vec, n) : 0;
		res_keep_vec(&r, vec, n);
		break;
	}
	case OP_PIN: {
		int s = op->x;
		struct pm_page **pages;
		long n;

		if (p->pins[op->proc][s]) {
			r.ret = -EBUSY;
			break;
		}
		pages = calloc(op->len, sizeof(*pages));
		n = pm_pin_user_pages(mm, op->addr, op->len, PM_FOLL_WRITE | PM_FOLL_LONGTERM, pages);
		if (n == (long)op->len) {
			p->pins[op->proc][s] = pages;
			p->npins[op->proc][s] = n;
			r.ret = n;
			break;
		}
		/* io_uring's registration is all or nothing: a short pin is -EFAULT. */
		if (n > 0)
			pm_unpin_user_pages(pages, (unsigned long)n);
		free(pages);
		r.ret = n > 0 ? -EFAULT : n;
		break;
	}
	case OP_UNPIN: {
		int s = op->x;

		if (p->pins[op->proc][s]) {
			pm_unpin_user_pages(p->pins[op->proc][s], (unsigned long)p->npins[op->proc][s]);
			free(p->pins[op->proc][s]);
			p->pins[op->proc][s] = NULL;
		}
		break;
	}
	case OP_PINWRITE: {
		int s = op->x;

		if (!p->pins[op->proc][s]) {
			r.ret = -ENOENT;
			break;
		}
		memset(pm_page_address(p->pins[op->proc][s][op->addr % (unsigned long)p->npins[op->proc][s]]),
		       (int)op->len, HEAD);
		r.ret = HEAD;
		break;
	}
	case OP_FORK: {
		struct pm_mm *child = pm_mm_fork(mm);

		p->mm[op->x] = child;
		r.ret = child ? 0 : -errno;
		break;
	}
	case OP_EXIT:
		pm_unpin_all(p, op->proc);
		pm_mm_destroy(mm);
		p->mm[op->proc] = NULL;
		break;
	case OP_TRUNCATE:
		r.ret = p->obj[op->o] ? pm_shmem_truncate(p->obj[op->o], op->off) : -EBADF;
		break;
	case OP_MREMAP:
		if (!pm_mremap) {
			r.ret = -ENOSYS;
			break;
		}
		r.ret = pm_mremap(mm, op->addr, op->len, op->b, (unsigned)op->f, op->c);
		if (r.ret >= 0 && !in_window((unsigned long)r.ret, op->b)) {
			pm_munmap(mm, (unsigned long)r.ret, op->b);
			r.ret = RET_OUTSIDE;
		}
		break;
	}
	return r;
}

/* ---- pinmm's observation ---- */

#define CMP_FLAGS (PM_PAGE_PRESENT | PM_PAGE_EXCLUSIVE | PM_PAGE_ANON | PM_PAGE_ZERO | \
		   PM_PAGE_THP | PM_PAGE_HUGETLB)

int pm_observe(struct pstate *p, int proc, struct obs_proc *out, bool full)
{
	static struct pm_page_info pi[WIN_PAGES];
	static struct pm_map_info mi[MAXVMA + 1];
	struct pm_mm *mm = p->mm[proc];
	long n;

	n = pm_pagemap(mm, WIN_BASE, WIN_PAGES, pi);
	if (n != (long)WIN_PAGES)
		return n < 0 ? (int)n : -EIO;
	for (unsigned long i = 0; i < WIN_PAGES; i++) {
		struct obs_page *o = &out->pg[i];

		o->flags = pi[i].flags & CMP_FLAGS;
		o->pfn = pi[i].pfn;
		o->mapcount = pi[i].mapcount;
		o->hash = 0;
		if (pi[i].flags & PM_PAGE_PRESENT) {
			struct pm_page *pg = pm_pfn_to_page(p->m, pi[i].pfn);
			void *a = pg ? pm_page_address(pg) : NULL;

			o->hash = a ? fnv64(a, full ? 4096 : HEAD) : 1;
		}
	}
	n = pm_mm_maps(mm, WIN_BASE, mi, MAXVMA + 1);
	if (n < 0)
		return (int)n;
	out->nvma = 0;
	out->smaps = true;
	for (long i = 0; i < n && mi[i].start < WIN_END; i++) {
		struct obs_vma *v = &out->vma[out->nvma];

		if (out->nvma == MAXVMA)
			return -E2BIG;
		v->start = mi[i].start;
		v->end = mi[i].end;
		v->prot = mi[i].prot;
		v->flags = mi[i].flags & (PM_MAP_SHARED | PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB);
		v->pgoff = mi[i].pgoff;
		v->vmflags = mi[i].vmflags;
		v->obj = -1;
		for (int k = 0; k < NOBJ; k++)
			if (mi[i].shmem && mi[i].shmem == p->obj[k])
				v->obj = k;
		v->rss = mi[i].rss_pages;
		v->anon = mi[i].anon_pages;
		v->ahuge = mi[i].anon_huge_pages;
		out->nvma++;
	}
	return 0;
}

int pm_pool(struct pstate *p, long *free_, long *rsvd)
{
	size_t total, f, r;

	if (pm_hugetlb_pool(p->m, &total, &f) || pm_hugetlb_reserved(p->m, &r))
		return -EIO;
	*free_ = (long)f;
	*rsvd = (long)r;
	return 0;
}

/* ---- what pinmm has on this branch ---- */

void pm_probe(struct caps *c)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .flags = PM_MACHINE_LINUX_MM };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *mm = m ? pm_mm_create(m) : NULL;
	struct pm_shmem *f = m ? pm_shmem_create(m, 1UL << 20, 0) : NULL;
	static const int adv[] = { PM_MADV_DONTNEED, PM_MADV_HUGEPAGE, PM_MADV_NOHUGEPAGE,
		PM_MADV_DONTFORK, PM_MADV_DOFORK, PM_MADV_FREE, PM_MADV_REMOVE,
		PM_MADV_WIPEONFORK, PM_MADV_KEEPONFORK, PM_MADV_POPULATE_READ,
		PM_MADV_POPULATE_WRITE };
	unsigned long a = WIN_BASE;
	struct pm_page_info pi;
	long r;

	if (!mm || !f)
		goto out;
	for (size_t i = 0; i < sizeof(adv) / sizeof(adv[0]); i++) {
		bool sh = adv[i] == PM_MADV_REMOVE;

		r = pm_mmap(mm, a, 4096, RW, (sh ? PM_MAP_SHARED : PM_MAP_PRIVATE | PM_MAP_ANONYMOUS) |
			    PM_MAP_FIXED, sh ? f : NULL, 0);
		c->pm_madv[adv[i]] = r == (long)a && pm_madvise(mm, a, 4096, adv[i]) != -EINVAL;
		pm_munmap(mm, a, 4096);
	}
	r = pm_mmap(mm, a, 4096, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED | PM_MAP_LOCKED, NULL, 0);
	c->pm_locked = r == (long)a;
	pm_munmap(mm, a, 4096);
	r = pm_mmap(mm, a, 4096, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED | PM_MAP_GROWSDOWN, NULL, 0);
	c->pm_growsdown = r == (long)a;
	pm_munmap(mm, a, 4096);
	c->pm_mremap = pm_mremap != NULL;
	if (c->pm_mremap) {
		r = pm_mmap(mm, a, 4096, RW, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);
		c->pm_mremap = pm_mremap(mm, a, 4096, 8192, PM_MREMAP_MAYMOVE, 0) >= 0;
		pm_munmap(mm, a, 1UL << 20);
	}
	/* the huge zero page: a read fault in a MADV_HUGEPAGE region maps ZERO|THP */
	r = pm_mmap(mm, a, HPAGE, PM_PROT_READ, PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0);
	if (r == (long)a && pm_madvise(mm, a, HPAGE, PM_MADV_HUGEPAGE) == 0 && pm_fault(mm, a, 0) == 0 &&
	    pm_pagemap(mm, a, 1, &pi) == 1)
		c->pm_huge_zero = (pi.flags & (PM_PAGE_ZERO | PM_PAGE_THP)) == (PM_PAGE_ZERO | PM_PAGE_THP);
	pm_munmap(mm, a, HPAGE);
out:
	if (f)
		pm_shmem_put(f);
	if (mm)
		pm_mm_destroy(mm);
	if (m)
		pm_machine_destroy(m);
}
