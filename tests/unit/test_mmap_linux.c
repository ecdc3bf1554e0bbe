// SPDX-License-Identifier: MIT
/*
 * test_mmap_linux.c - pm_mmap, pm_mprotect and pm_madvise answer as Linux 6.18 does where the
 * first contract said otherwise (issue 29, divergences 4 to 6; the contract's third round),
 * in both designs, whatever the environment picks:
 *
 *   lengths	a length that wraps when page-aligned: mmap and mprotect -ENOMEM; a zero or
 *		wrapping mprotect is answered before its prot is looked at
 *   order	do_mmap's order: no file before a zero length, a fixed address before the
 *		mapping type, an address past the top before its alignment
 *   ignored	unknown prot and flag bits, and a file passed with PM_MAP_ANONYMOUS, are
 *		ignored; an anonymous mapping's offset too
 *   validate	PM_MAP_SHARED_VALIDATE: a shared mapping of an object, -EOPNOTSUPP for flags
 *		outside Linux's legacy set (after -EEXIST), valid on anonymous hugetlb memory
 *   exec	PM_PROT_EXEC: accepted by mmap and mprotect, kept, reported, readable (x86
 *		without protection keys), no slow GUP; PROT_SEM accepted by mprotect;
 *		PROT_GROWSDOWN/UP: -ENOMEM where no VMA is
 *   flags	PM_MAP_NONBLOCK cancels PM_MAP_POPULATE; PM_MAP_STACK is VM_NOHUGEPAGE;
 *		PM_MAP_NORESERVE keeps anonymous VMAs apart
 *   noreserve	hugetlb PM_MAP_NORESERVE: no reservation at mmap, faults take a pool page
 *		nobody was promised or fail with -EFAULT (SIGBUS), private and shared
 *   hint	an unaligned free hint is masked down to its page (round_hint_to_min); a
 *		hugetlb hint is masked, then rounded up to 2 MiB
 *
 * Every check here failed before the change. "-t NAME" runs one group only.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define SHANON (PM_MAP_SHARED | PM_MAP_ANONYMOUS)

/* Linux's bits that pinmm's headers do not name. */
#define X_PROT_SEM 0x8
#define X_PROT_GROWSDOWN 0x01000000
#define X_PROT_GROWSUP 0x02000000
#define X_MAP_UNKNOWN 0x200	 /* no meaning in Linux */
#define X_MAP_DENYWRITE 0x800	 /* ignored by Linux */
#define X_MAP_ABOVE4G 0x80	 /* not in the legacy set */
#define X_MAP_SYNC 0x80000	 /* DAX only */
#define X_MAP_HUGE_2MB (21 << 26)
#define X_MAP_HUGE_BIT31 (int)0x80000000U


static unsigned cur; /* the design of the group running */

static struct pm_machine *machine(size_t nr_huge)
{
	struct pm_config cfg = { .mem_bytes = 64 * MiB, .nr_hugepages = nr_huge,
				 .flags = pmt_designs[cur].flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

static void end(struct pm_machine *m, size_t free0, size_t nr_huge, const char *what)
{
	size_t total = 0, free = 0;

	if (nr_huge) {
		pm_rcu_barrier();
		pm_hugetlb_pool(m, &total, &free);
		ok(total == nr_huge && free == nr_huge,
		   "%s/%s: the pool is whole again (%zu of %zu free)", pmt_designs[cur].name, what,
		   free, total);
	}
	pmt_end(m, free0, &pmt_end_returned, what);
}

/* The VMA that holds @addr, as pm_mm_maps shows it; false if there is none. */
static bool vma_at(struct pm_mm *mm, unsigned long addr, struct pm_map_info *mi)
{
	return pm_mm_maps(mm, addr, mi, 1) == 1 && mi->start <= addr;
}

#define D pmt_designs[cur].name

/* ---- lengths ---- */

static void test_lengths(void)
{
	struct pm_machine *m = machine(0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a;

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mmap(mm, 0, SIZE_MAX, RW, PRIV, NULL, 0), -ENOMEM,
	       "%s: mmap of SIZE_MAX bytes: -ENOMEM (do_mmap: PAGE_ALIGN wraps)", D);
	is_int(pm_mmap(mm, 0, SIZE_MAX - PG + 2, RW, PRIV, NULL, 0), -ENOMEM,
	       "%s: mmap of a length that wraps when page-aligned: -ENOMEM", D);
	a = pm_mmap(mm, 0, 4 * PG, RW, PRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	is_int(pm_mprotect(mm, a, SIZE_MAX, 0x40), -ENOMEM,
	       "%s: a wrapping mprotect is -ENOMEM before its prot is looked at", D);
	is_int(pm_mprotect(mm, a, SIZE_MAX - PG + 2, PM_PROT_READ | PM_PROT_EXEC), -ENOMEM,
	       "%s: a wrapping mprotect with PROT_EXEC: -ENOMEM", D);
	is_int(pm_mprotect(mm, a, 0, 0x40), 0, "%s: a zero-length mprotect with bad prot: 0", D);
	is_int(pm_mprotect(mm, a, 0, PM_PROT_EXEC), 0,
	       "%s: a zero-length mprotect with PROT_EXEC: 0", D);
	pm_mm_destroy(mm);
	end(m, free0, 0, "lengths");
}

/* ---- the order of the checks ---- */

static void test_order(void)
{
	struct pm_machine *m = machine(0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mmap(mm, 0, 0, RW, PM_MAP_PRIVATE, NULL, 0), -EBADF,
	       "%s: no file and length 0: -EBADF (ksys_mmap_pgoff before do_mmap)", D);
	is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_ANONYMOUS | PM_MAP_FIXED, NULL, 0), -EPERM,
	       "%s: MAP_FIXED at 0 without a type: -EPERM (the address before the type)", D);
	is_int(pm_mmap(mm, PM_TASK_SIZE - PG + 0x100, 2 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0),
	       -ENOMEM, "%s: MAP_FIXED unaligned and past the top: -ENOMEM before -EINVAL", D);
	is_int(pm_mmap(mm, 0, PM_TASK_SIZE, RW, PRIV | PM_MAP_FIXED, NULL, 0), -EPERM,
	       "%s: MAP_FIXED at 0 of the whole address space: -EPERM (len fits TASK_SIZE)", D);
	pm_mm_destroy(mm);
	end(m, free0, 0, "order");
}

/* ---- bits that are ignored ---- */

static void test_ignored(void)
{
	struct pm_machine *m = machine(1), *other = machine(0);
	size_t free0 = pm_machine_free_pages(m), free_other = pm_machine_free_pages(other);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0), *fo = pm_shmem_create(other, PG, 0);
	struct pm_shmem *hf = pm_shmem_create_hugetlb(m, HP);
	struct pm_map_info mi;
	long a;

	ASSERT_TRUE(mm && f && fo && hf);
	a = pm_mmap(mm, 0, PG, PM_PROT_READ | X_PROT_SEM, PRIV, NULL, 0);
	ok(a > 0, "%s: mmap ignores PROT_SEM (%ld)", D, a);
	a = pm_mmap(mm, 0, PG, RW | 0x1000 | 0x40, PRIV, NULL, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && mi.prot == RW,
	   "%s: mmap ignores unknown prot bits 0x1040: prot read-write", D);
	ok(pmt_poke(mm, a, 'p') == 1, "%s: and the mapping writes", D);
	a = pm_mmap(mm, 0, PG, RW, PRIV | X_MAP_UNKNOWN | 0x400, NULL, 0);
	ok(a > 0, "%s: mmap ignores unknown flags 0x600 (%ld)", D, a);
	a = pm_mmap(mm, 0, PG, RW, PRIV | X_MAP_HUGE_BIT31, NULL, 0);
	ok(a > 0, "%s: flag 0x80000000 (a MAP_HUGE size bit) without MAP_HUGETLB: ignored", D);
	a = pm_mmap(mm, 0, PG, RW, PRIV | X_MAP_DENYWRITE | X_MAP_SYNC, NULL, 0);
	ok(a > 0, "%s: MAP_DENYWRITE and MAP_SYNC on private memory: ignored (%ld)", D, a);
	a = pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED | X_MAP_UNKNOWN | X_MAP_SYNC, f, 0);
	ok(a > 0, "%s: MAP_SHARED of an object ignores unknown flags and MAP_SYNC (%ld)", D, a);

	/* ksys_mmap_pgoff: MAP_ANONYMOUS never looks at the file. */
	a = pm_mmap(mm, 0, PG, RW, SHANON, f, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && (mi.flags & PM_MAP_ANONYMOUS) && mi.shmem != f,
	   "%s: a file passed with MAP_SHARED|MAP_ANONYMOUS is ignored: shared anonymous", D);
	ok(pmt_poke(mm, a, 's') == 1 && pm_shmem_nr_pages(f) == 0,
	   "%s: written, and the object stays empty", D);
	a = pm_mmap(mm, 0, PG, RW, PRIV, fo, 0);
	ok(a > 0, "%s: an object of another machine with MAP_ANONYMOUS: ignored (%ld)", D, a);
	a = pm_mmap(mm, 0, HP, RW, PRIV, hf, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && !(mi.flags & PM_MAP_HUGETLB),
	   "%s: a hugetlb object with MAP_ANONYMOUS: plain anonymous memory", D);
	/* sys_mmap passes the offset on; anonymous memory ignores it (do_mmap). */
	a = pm_mmap(mm, 0, PG, RW, PRIV, NULL, ~0UL & ~(PG - 1));
	ok(a > 0, "%s: an anonymous mapping with the largest offset: mapped (%ld)", D, a);

	pm_shmem_put(f);
	pm_shmem_put(fo);
	pm_shmem_put(hf);
	pm_mm_destroy(mm);
	end(m, free0, 1, "ignored");
	pmt_end(other, free_other, &pmt_end_returned, "ignored (other machine)");
}

/* ---- MAP_SHARED_VALIDATE ---- */

static void test_validate(void)
{
	struct pm_machine *m = machine(1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create(m, 4 * PG, 0);
	const unsigned long fixed = 0x30000000UL;
	struct pm_map_info mi;
	long a, b;

	ASSERT_TRUE(mm && f);
	a = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_SHARED_VALIDATE, f, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && mi.flags == PM_MAP_SHARED && mi.shmem == f,
	   "%s: SHARED_VALIDATE of an object: a shared mapping of it", D);
	b = pm_mmap(mm, 0, 4 * PG, RW, PM_MAP_SHARED, f, 0);
	ok(b > 0 && pmt_poke(mm, a, 'v') == 1 && pmt_peek(mm, b) == 'v',
	   "%s: its writes are the object's", D);
	a = pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED_VALIDATE | X_MAP_DENYWRITE | PM_MAP_POPULATE |
		    PM_MAP_NORESERVE | PM_MAP_STACK | X_MAP_HUGE_2MB, f, 0);
	ok(a > 0, "%s: SHARED_VALIDATE with legacy flags only: mapped (%ld)", D, a);
	is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED_VALIDATE | X_MAP_UNKNOWN, f, 0), -EOPNOTSUPP,
	       "%s: SHARED_VALIDATE with an unknown flag: -EOPNOTSUPP", D);
	is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED_VALIDATE | X_MAP_SYNC, f, 0), -EOPNOTSUPP,
	       "%s: SHARED_VALIDATE with MAP_SYNC (not DAX): -EOPNOTSUPP", D);
	is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_SHARED_VALIDATE | X_MAP_ABOVE4G, f, 0), -EOPNOTSUPP,
	       "%s: SHARED_VALIDATE with MAP_ABOVE4G (not legacy): -EOPNOTSUPP", D);
	is_int(pm_mmap(mm, fixed, PG, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED_NOREPLACE, f, 0),
	       -EOPNOTSUPP, "%s: SHARED_VALIDATE|FIXED_NOREPLACE on a free range: -EOPNOTSUPP", D);
	ASSERT_TRUE(pm_mmap(mm, fixed, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0) == (long)fixed);
	ASSERT_TRUE(pmt_poke(mm, fixed, 'k') == 1);
	is_int(pm_mmap(mm, fixed, PG, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED_NOREPLACE, f, 0),
	       -EEXIST, "%s: ... and over a mapping: -EEXIST comes first", D);
	a = pm_mmap(mm, fixed, PG, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_FIXED | X_MAP_UNKNOWN, f, 0);
	ok(a == -EOPNOTSUPP && pmt_peek(mm, fixed) == 'k',
	   "%s: SHARED_VALIDATE|FIXED with an unknown flag over it: -EOPNOTSUPP, it stays (%ld)",
	   D, a);
	a = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED_VALIDATE | PM_MAP_ANONYMOUS | PM_MAP_HUGETLB,
		    NULL, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && (mi.flags & PM_MAP_SHARED) &&
		   (mi.flags & PM_MAP_HUGETLB),
	   "%s: SHARED_VALIDATE of anonymous hugetlb memory (an object in Linux): shared", D);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	end(m, free0, 1, "validate");
}

/* ---- PROT_EXEC and mprotect's prot ---- */

static void test_exec(void)
{
	struct pm_machine *m = machine(0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long at = 0x40000000UL;
	struct pm_page *page;
	struct pm_map_info mi;
	long a, x;

	ASSERT_TRUE(mm != NULL);
	a = pm_mmap(mm, 0, 2 * PG, PM_PROT_READ | PM_PROT_EXEC, PRIV, NULL, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && mi.prot == (PM_PROT_READ | PM_PROT_EXEC),
	   "%s: mmap PROT_READ|PROT_EXEC: kept and reported", D);
	is_int(pm_mprotect(mm, a, PG, PM_PROT_READ), 0, "%s: mprotect PROT_READ", D);
	ok(vma_at(mm, a, &mi) && mi.prot == PM_PROT_READ && mi.end == (unsigned long)a + PG,
	   "%s: exec dropped on the first page only (a VMA of its own)", D);
	is_int(pm_mprotect(mm, a, PG, PM_PROT_READ | PM_PROT_EXEC), 0,
	       "%s: mprotect PROT_READ|PROT_EXEC back", D);
	ok(vma_at(mm, a, &mi) && mi.prot == (PM_PROT_READ | PM_PROT_EXEC) &&
		   mi.end == (unsigned long)a + 2 * PG,
	   "%s: and the two merge again", D);
	is_int(pm_mprotect(mm, a, 2 * PG, RW | X_PROT_SEM), 0, "%s: mprotect accepts PROT_SEM", D);
	ok(vma_at(mm, a, &mi) && mi.prot == RW, "%s: which changes nothing else", D);

	x = pm_mmap(mm, at, PG, PM_PROT_EXEC, PRIV | PM_MAP_FIXED, NULL, 0);
	is_int(x, (long)at, "%s: an exec-only mapping", D);
	is_int(pmt_peek(mm, at), 0, "%s: reads (x86: exec implies read without protection keys)", D);
	ok(x == (long)at && pmt_poke(mm, at, 'x') == -EFAULT &&
		   pm_get_user_pages(mm, at, 1, 0, &page) == -EFAULT,
	   "%s: but neither writes nor lets slow GUP take it (no VM_READ)", D);
	ASSERT_TRUE(pm_mmap(mm, at + PG, PG, PM_PROT_READ, PRIV | PM_MAP_FIXED, NULL, 0) ==
		    (long)(at + PG));
	ok(vma_at(mm, at, &mi) && mi.end == at + PG,
	   "%s: an exec-only VMA does not merge with a read-only one next to it", D);
	is_int(pm_mprotect(mm, at - 4 * PG, PG, PM_PROT_READ | X_PROT_GROWSDOWN), -ENOMEM,
	       "%s: PROT_GROWSDOWN on a hole: -ENOMEM", D);
	is_int(pm_mprotect(mm, at - 4 * PG, PG, PM_PROT_READ | X_PROT_GROWSUP), -ENOMEM,
	       "%s: PROT_GROWSUP on a hole: -ENOMEM", D);
	pm_mm_destroy(mm);
	end(m, free0, 0, "exec");
}

/* ---- NONBLOCK, STACK, NORESERVE on ordinary memory ---- */

static void test_flags(void)
{
	struct pm_machine *m = machine(0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long at = 0x50000000UL;
	struct pm_map_info mi;
	long a;

	ASSERT_TRUE(mm != NULL);
	a = pm_mmap(mm, 0, 16 * PG, RW, PRIV | PM_MAP_POPULATE | PM_MAP_NONBLOCK, NULL, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && mi.rss_pages == 0,
	   "%s: POPULATE|NONBLOCK: mapped, nothing faulted in (rss %lu)", D,
	   a > 0 ? mi.rss_pages : 0);
	a = pm_mmap(mm, 0, 16 * PG, PM_PROT_EXEC, PRIV | PM_MAP_POPULATE, NULL, 0);
	{
		struct pm_page_info pi[16];
		unsigned present = 0;

		if (a > 0 && pm_pagemap(mm, a, 16, pi) == 16)
			for (unsigned i = 0; i < 16; i++)
				present += !!(pi[i].flags & PM_PAGE_PRESENT);
		is_int(present, 16, "%s: an exec-only mapping with POPULATE: every page present",
		       D);
	}
	a = pm_mmap(mm, 0, 16 * PG, PM_PROT_WRITE, SHANON | PM_MAP_POPULATE, NULL, 0);
	ok(a > 0 && vma_at(mm, a, &mi) && mi.rss_pages == 16,
	   "%s: a write-only shared mapping with POPULATE is populated (FOLL_FORCE; rss %lu)", D,
	   a > 0 ? mi.rss_pages : 0);

	a = pm_mmap(mm, at, HP, RW, PRIV | PM_MAP_FIXED | PM_MAP_STACK, NULL, 0);
	ok(a == (long)at && vma_at(mm, at, &mi) && (mi.vmflags & PM_VMF_NOHUGEPAGE),
	   "%s: MAP_STACK: VM_NOHUGEPAGE (nh)", D);
	is_int(pm_madvise(mm, at, HP, PM_MADV_HUGEPAGE), 0, "%s: MADV_HUGEPAGE over it", D);
	is_int(pmt_poke(mm, at, 's'), 1, "%s: written", D);
	ok(vma_at(mm, at, &mi) && !(mi.vmflags & PM_VMF_NOHUGEPAGE) && mi.anon_huge_pages == 512,
	   "%s: then a THP backs it, as any hugepage VMA", D);
	a = pm_mmap(mm, at + HP, PG, RW, PRIV | PM_MAP_FIXED | PM_MAP_STACK, NULL, 0);
	a = pm_mmap(mm, at + HP + PG, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
	ok(a > 0 && vma_at(mm, at + HP, &mi) && mi.end == at + HP + PG,
	   "%s: a MAP_STACK VMA does not merge with a plain one", D);
	a = pm_mmap(mm, at + HP + 2 * PG, PG, RW, PRIV | PM_MAP_FIXED | PM_MAP_NORESERVE, NULL, 0);
	ok(a > 0 && vma_at(mm, at + HP + PG, &mi) && mi.end == at + HP + 2 * PG,
	   "%s: nor a MAP_NORESERVE one (VM_NORESERVE)", D);
	pm_mm_destroy(mm);
	end(m, free0, 0, "flags");
}

/* ---- hugetlb MAP_NORESERVE ---- */

static void test_noreserve(void)
{
	struct pm_machine *m = machine(3);
	size_t free0 = pm_machine_free_pages(m), resv = 99;
	struct pm_mm *mm = pm_mm_create(m);
	const int hpriv = PRIV | PM_MAP_HUGETLB;
	struct pm_shmem *f;
	long a, r, s;

	ASSERT_TRUE(mm != NULL);
	a = pm_mmap(mm, 0, 4 * HP, RW, hpriv | PM_MAP_NORESERVE, NULL, 0);
	pm_hugetlb_reserved(m, &resv);
	ok(a > 0 && resv == 0,
	   "%s: private NORESERVE of more than the pool (4 of 3 pages): mapped, none reserved",
	   D);
	r = pm_mmap(mm, 0, HP, RW, hpriv, NULL, 0);
	ASSERT_TRUE(r > 0); /* a reserving mapping: the third page is promised to it */
	is_int(pm_fault(mm, a, PM_FAULT_WRITE), 0, "%s: NORESERVE fault 1: a free page", D);
	is_int(pm_fault(mm, a + HP, 0), 0, "%s: fault 2: the last unpromised page", D);
	ok(a > 0 && pm_fault(mm, a + 2 * HP, PM_FAULT_WRITE) == -EFAULT &&
		   pmt_poke(mm, a + 3 * HP, 'n') == -EFAULT && pmt_poke(mm, r, 'r') == 1,
	   "%s: faults 3 and 4: the promised page is not theirs: -EFAULT (SIGBUS)", D);
	is_int(pm_munmap(mm, a, 4 * HP), 0, "%s: the NORESERVE mapping unmapped", D);

	/* Shared: the object's pages, reserved by nobody. */
	f = pm_shmem_create_hugetlb(m, 4 * HP);
	ASSERT_TRUE(f != NULL);
	s = pm_mmap(mm, 0, 4 * HP, RW, PM_MAP_SHARED | PM_MAP_NORESERVE, f, 0);
	pm_hugetlb_reserved(m, &resv);
	ok(s > 0 && resv == 0,
	   "%s: shared NORESERVE of an object larger than the free pool: mapped, none reserved",
	   D);
	is_int(pmt_poke(mm, s, 'a'), 1, "%s: page 1 from the pool", D);
	is_int(pmt_poke(mm, s + HP, 'b'), 1, "%s: page 2", D);
	ok(s > 0 && pmt_poke(mm, s + 2 * HP, 'c') == -EFAULT,
	   "%s: page 3: the pool is empty: -EFAULT", D);
	a = pm_mmap(mm, 0, HP, RW, SHANON | PM_MAP_HUGETLB | PM_MAP_NORESERVE, NULL, 0);
	ok(a > 0 && pmt_poke(mm, a, 'd') == -EFAULT,
	   "%s: shared anonymous NORESERVE with the pool in use: mapped, its fault -EFAULT", D);
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	end(m, free0, 3, "noreserve");
}

/* ---- hints ---- */

static void test_hint(void)
{
	struct pm_machine *m = machine(1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a;

	ASSERT_TRUE(mm != NULL);
	is_int(pm_mmap(mm, 0x210000123UL, PG, RW, PRIV, NULL, 0), 0x210000000L,
	       "%s: an unaligned free hint is masked down to its page", D);
	is_int(pm_mmap(mm, 0x220000fffUL, 3 * PG, RW, SHANON, NULL, 0), 0x220000000L,
	       "%s: shared anonymous memory too", D);
	a = pm_mmap(mm, 0x123, PG, RW, PRIV, NULL, 0);
	ok(a > 0 && a != (long)PM_USER_MIN,
	   "%s: a hint inside page 0 is no hint (masked to 0): placed elsewhere (%#lx)", D,
	   (unsigned long)a);
	is_int(pm_mmap(mm, 0x40000123UL, HP, RW, PRIV | PM_MAP_HUGETLB, NULL, 0), 0x40000000L,
	       "%s: hugetlb: masked to the page, then rounded up to 2 MiB: 0x40000000", D);
	pm_mm_destroy(mm);
	end(m, free0, 1, "hint");
}

static const struct pmt_group groups[] = {
	{ "lengths", test_lengths }, { "order", test_order },	      { "ignored", test_ignored },
	{ "validate", test_validate }, { "exec", test_exec },	      { "flags", test_flags },
	{ "noreserve", test_noreserve }, { "hint", test_hint },
};

int main(int argc, char **argv)
{
	return pmt_run_groups_designs(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 60,
				      &cur);
}
