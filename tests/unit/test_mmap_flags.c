// SPDX-License-Identifier: MIT
/*
 * test_mmap_flags.c - PM_MAP_LOCKED and PM_MAP_GROWSDOWN with Linux 6.18's effects (mm/mmap.c,
 * mm/mlock.c, mm/madvise.c, expand_downwards), in both designs whatever the environment picks:
 *
 *   locked	VM_LOCKED: populated at mmap (write faults when private and writable, read
 *		faults otherwise, nothing for PROT_NONE, MAP_NONBLOCK does not cancel it), lo
 *		in pm_mm_maps; MADV_DONTNEED, FREE and REMOVE -EINVAL (before a hole's
 *		-ENOMEM); no merge with unlocked neighbours, merges with locked ones; a fork
 *		child's VMA is not locked; hugetlb mappings are populated but not VM_LOCKED;
 *		mprotect making a private locked VMA writable write-faults it
 *   grows	VM_GROWSDOWN: a fault below grows the VMA (pgoff follows), a user access too;
 *		at most 8 MiB; the gap to the VMA below stays >= 256 pages unless that VMA is
 *		PROT_NONE or grows down too; GUP and MADV_POPULATE never grow it; gd in
 *		pm_mm_maps; the errors of MAP_GROWSDOWN (shared, a file, hugetlb: -EINVAL);
 *		mprotect PROT_GROWSDOWN reaches down to the VMA's start; a fork child's VMA
 *		keeps the flag; a grow across a 512 GiB boundary (two ranges of the range
 *		design)
 *   race	faults inside a stack VMA (per-VMA locks) while another thread grows it
 *
 * Every check here failed before the change (both flags were -EINVAL). "-t NAME" runs one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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
#define GAP (256 * PG) /* stack_guard_gap */
#define X_PROT_GROWSDOWN 0x01000000


static unsigned cur;
#define DN (pmt_designs[cur].name)

static struct pm_machine *machine(size_t mib, size_t nr_huge)
{
	struct pm_config cfg = { .mem_bytes = mib * MiB, .nr_hugepages = nr_huge,
				 .flags = pmt_designs[cur].flags };
	struct pm_machine *m = pm_machine_create(&cfg);

	ASSERT_TRUE(m != NULL);
	return m;
}

static unsigned pflags(struct pm_mm *mm, unsigned long addr)
{
	struct pm_page_info pi;

	ASSERT_EQ(pm_pagemap(mm, addr, 1, &pi), 1);
	return pi.flags;
}

static bool all_flags(struct pm_mm *mm, unsigned long addr, size_t len, unsigned want,
		      unsigned not)
{
	for (size_t off = 0; off < len; off += PG) {
		unsigned f = pflags(mm, addr + off);

		if ((f & want) != want || (f & not))
			return false;
	}
	return true;
}

static struct pm_map_info vma_at(struct pm_mm *mm, unsigned long addr)
{
	struct pm_map_info mi;

	ASSERT_EQ(pm_mm_maps(mm, addr, &mi, 1), 1);
	return mi;
}

/* ---- MAP_LOCKED ---- */

static void test_locked(void)
{
	struct pm_machine *m = machine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	const unsigned long base = 0x100000000UL;
	struct pm_map_info mi;
	long a, b;

	a = pm_mmap(mm, base, 16 * PG, RW, PRIV | PM_MAP_FIXED | PM_MAP_LOCKED, NULL, 0);
	is_int(a, (long)base, "%s: MAP_LOCKED private writable", DN);
	ok(all_flags(mm, base, 16 * PG, PM_PAGE_PRESENT | PM_PAGE_WRITABLE, PM_PAGE_ZERO),
	   "%s: ... populated with write faults", DN);
	ok(vma_at(mm, base).vmflags & PM_VMF_LOCKED, "%s: ... shown as lo", DN);
	ASSERT_EQ(pmt_poke(mm, base + PG, 'L'), 1);

	is_int(pm_madvise(mm, base, PG, PM_MADV_DONTNEED), -EINVAL, "%s: DONTNEED -EINVAL", DN);
	is_int(pm_madvise(mm, base, PG, PM_MADV_FREE), -EINVAL, "%s: FREE -EINVAL", DN);
	is_int(pm_madvise(mm, base - PG, 2 * PG, PM_MADV_DONTNEED), -EINVAL,
	       "%s: DONTNEED over a hole then a locked VMA: -EINVAL", DN);
	is_int(pmt_peek(mm, base + PG), 'L', "%s: ... the data stays", DN);
	is_int(pm_madvise(mm, base, 16 * PG, PM_MADV_POPULATE_WRITE), 0,
	       "%s: POPULATE_WRITE of a locked VMA", DN);

	/* Merging: an unlocked neighbour stays apart, a locked one merges */
	b = pm_mmap(mm, base - 4 * PG, 4 * PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
	ASSERT_EQ(b, (long)(base - 4 * PG));
	mi = vma_at(mm, b);
	ok(mi.end == base && !(mi.vmflags & PM_VMF_LOCKED),
	   "%s: an unlocked neighbour does not merge with it", DN);
	b = pm_mmap(mm, base + 16 * PG, 4 * PG, RW, PRIV | PM_MAP_FIXED | PM_MAP_LOCKED, NULL, 0);
	ASSERT_EQ(b, (long)(base + 16 * PG));
	mi = vma_at(mm, base);
	ok(mi.start == base && mi.end == base + 20 * PG, "%s: a locked neighbour merges", DN);

	/* fork: the child's VMA is not locked, its data the same */
	child = pmt_fork(mm);
	mi = vma_at(child, base);
	ok(!(mi.vmflags & PM_VMF_LOCKED), "%s: the fork child's VMA is not locked", DN);
	is_int(pmt_peek(child, base + PG), 'L', "%s: ... and has the data", DN);
	is_int(pm_madvise(child, base, PG, PM_MADV_DONTNEED), 0, "%s: ... DONTNEED works there",
	       DN);
	pm_mm_destroy(child);
	pm_munmap(mm, base - 4 * PG, 24 * PG);

	/* Read-only, PROT_NONE, NONBLOCK, shared */
	a = pm_mmap(mm, 0, 8 * PG, PM_PROT_READ, PRIV | PM_MAP_LOCKED, NULL, 0);
	ASSERT_TRUE(a > 0);
	ok(all_flags(mm, (unsigned long)a, 8 * PG, PM_PAGE_PRESENT | PM_PAGE_ZERO, 0),
	   "%s: MAP_LOCKED read-only: populated with read faults (zero pages)", DN);
	is_int(pm_mprotect(mm, (unsigned long)a + 2 * PG, 4 * PG, RW), 0,
	       "%s: mprotect of part of it to writable", DN);
	ok(all_flags(mm, (unsigned long)a + 2 * PG, 4 * PG, PM_PAGE_PRESENT | PM_PAGE_WRITABLE,
		     PM_PAGE_ZERO) &&
		   all_flags(mm, (unsigned long)a, 2 * PG, PM_PAGE_ZERO, PM_PAGE_WRITABLE),
	   "%s: ... write-faults that part at once (mprotect_fixup), only that", DN);
	pm_munmap(mm, (unsigned long)a, 8 * PG);
	a = pm_mmap(mm, 0, 8 * PG, PM_PROT_NONE, PRIV | PM_MAP_LOCKED, NULL, 0);
	ASSERT_TRUE(a > 0);
	ok(all_flags(mm, (unsigned long)a, 8 * PG, 0, PM_PAGE_PRESENT) &&
		   (vma_at(mm, (unsigned long)a).vmflags & PM_VMF_LOCKED),
	   "%s: MAP_LOCKED PROT_NONE: locked, nothing populated", DN);
	pm_munmap(mm, (unsigned long)a, 8 * PG);
	a = pm_mmap(mm, 0, 8 * PG, RW, PRIV | PM_MAP_LOCKED | PM_MAP_NONBLOCK, NULL, 0);
	ASSERT_TRUE(a > 0);
	ok(all_flags(mm, (unsigned long)a, 8 * PG, PM_PAGE_PRESENT | PM_PAGE_WRITABLE, 0),
	   "%s: MAP_NONBLOCK does not cancel MAP_LOCKED's populate", DN);
	pm_munmap(mm, (unsigned long)a, 8 * PG);
	a = pm_mmap(mm, 0, 8 * PG, RW, SHANON | PM_MAP_LOCKED, NULL, 0);
	ASSERT_TRUE(a > 0);
	ok(all_flags(mm, (unsigned long)a, 8 * PG, PM_PAGE_PRESENT, 0),
	   "%s: MAP_LOCKED shared: populated", DN);
	is_int(pm_madvise(mm, (unsigned long)a, PG, PM_MADV_REMOVE), -EINVAL,
	       "%s: REMOVE of a locked shared VMA -EINVAL", DN);
	pm_munmap(mm, (unsigned long)a, 8 * PG);

	/* hugetlb: populated, but VM_LOCKED is dropped (__mmap_complete) */
	a = pm_mmap(mm, 0, HP, RW, PRIV | PM_MAP_HUGETLB | PM_MAP_LOCKED, NULL, 0);
	ASSERT_TRUE(a > 0);
	ok((pflags(mm, (unsigned long)a) & PM_PAGE_HUGETLB) &&
		   !(vma_at(mm, (unsigned long)a).vmflags & PM_VMF_LOCKED),
	   "%s: MAP_LOCKED hugetlb: populated, not locked", DN);
	is_int(pm_madvise(mm, (unsigned long)a, HP, PM_MADV_DONTNEED), 0,
	       "%s: ... so DONTNEED works", DN);
	pm_munmap(mm, (unsigned long)a, HP);

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "locked");
}

/* ---- MAP_GROWSDOWN ---- */

static long stack_map(struct pm_mm *mm, unsigned long addr, size_t len)
{
	return pm_mmap(mm, addr, len, RW, PRIV | PM_MAP_FIXED | PM_MAP_GROWSDOWN, NULL, 0);
}

static void test_growsdown(void)
{
	struct pm_machine *m = machine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	const unsigned long s = 0x200000000UL; /* the stack's first start */
	struct pm_shmem *f;
	struct pm_map_info mi;
	struct pm_page *pg;

	is_int(stack_map(mm, s, 16 * PG), (long)s, "%s: MAP_GROWSDOWN private anonymous", DN);
	mi = vma_at(mm, s);
	ok(mi.vmflags & PM_VMF_GROWSDOWN, "%s: ... shown as gd", DN);
	is_int(pm_fault(mm, s - PG, PM_FAULT_WRITE), 0, "%s: a fault just below it", DN);
	mi = vma_at(mm, s - PG);
	ok(mi.start == s - PG && mi.end == s + 16 * PG, "%s: ... grows it by a page", DN);
	is_int(mi.pgoff, (s >> 12) - 1, "%s: ... and its pgoff follows", DN);
	ok(pflags(mm, s - PG) & PM_PAGE_PRESENT, "%s: ... the page is mapped", DN);
	is_int(pmt_poke(mm, s - 10 * PG + 5, 'g'), 1, "%s: a user access further below", DN);
	is_int(vma_at(mm, s - 10 * PG).start, s - 10 * PG, "%s: ... grows it too", DN);
	is_int(pmt_peek(mm, s - 10 * PG + 5), 'g', "%s: ... and the byte is there", DN);

	/* GUP and POPULATE never grow it */
	is_int(pm_get_user_pages(mm, s - 11 * PG, 1, 0, &pg), -EFAULT,
	       "%s: GUP below the stack -EFAULT", DN);
	is_int(pm_madvise(mm, s - 11 * PG, PG, PM_MADV_POPULATE_READ), -ENOMEM,
	       "%s: POPULATE below it -ENOMEM", DN);
	is_int(vma_at(mm, s - 11 * PG).start, s - 10 * PG, "%s: ... neither grew it", DN);

	/* RLIMIT_STACK: at most 8 MiB */
	is_int(pm_fault(mm, s + 16 * PG - 8 * MiB, 0), 0, "%s: a fault making it 8 MiB", DN);
	is_int(pm_fault(mm, s + 16 * PG - 8 * MiB - PG, 0), -EFAULT,
	       "%s: one page more: -EFAULT", DN);
	is_int(vma_at(mm, s).start, s + 16 * PG - 8 * MiB, "%s: ... it stays 8 MiB", DN);
	pm_munmap(mm, s - 8 * MiB, 8 * MiB + 16 * PG);

	/* The guard gap to an accessible VMA below */
	{
		const unsigned long low = 0x300000000UL, st = low + PG + 300 * PG;

		ASSERT_EQ(pm_mmap(mm, low, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)low);
		ASSERT_EQ(stack_map(mm, st, 4 * PG), (long)st);
		is_int(pm_fault(mm, low + PG + GAP, 0), 0, "%s: a gap of 256 pages left: grows",
		       DN);
		is_int(pm_fault(mm, low + PG + GAP - PG, 0), -EFAULT,
		       "%s: a gap of 255 pages: -EFAULT", DN);
		ASSERT_EQ(pm_mprotect(mm, low, PG, PM_PROT_NONE), 0);
		is_int(pm_fault(mm, low + PG, 0), 0,
		       "%s: the VMA below made PROT_NONE: grows up to it", DN);
		is_int(vma_at(mm, low + PG).start, low + PG, "%s: ... adjacent now", DN);
		pm_munmap(mm, low, PG + 304 * PG);
		/* Below another stack: no gap is kept either */
		ASSERT_EQ(stack_map(mm, low, PG), (long)low);
		ASSERT_EQ(stack_map(mm, low + 8 * PG, PG), (long)(low + 8 * PG));
		is_int(pm_fault(mm, low + PG, 0), 0, "%s: a stack grows up to a stack below", DN);
		pm_munmap(mm, low, 9 * PG);
	}

	/* A fault below a VMA that does not grow: SIGSEGV */
	ASSERT_EQ(pm_mmap(mm, s, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0), (long)s);
	is_int(pm_fault(mm, s - PG, 0), -EFAULT, "%s: below a VMA that does not grow: -EFAULT",
	       DN);
	pm_munmap(mm, s, PG);

	/* mprotect PROT_GROWSDOWN reaches down to the VMA's start */
	ASSERT_EQ(stack_map(mm, s, 8 * PG), (long)s);
	ASSERT_EQ(pm_fault(mm, s - 2 * PG, PM_FAULT_WRITE), 0);
	is_int(pm_mprotect(mm, s + 4 * PG, PG, PM_PROT_READ | X_PROT_GROWSDOWN), 0,
	       "%s: mprotect PROT_GROWSDOWN", DN);
	mi = vma_at(mm, s - 2 * PG);
	ok(mi.start == s - 2 * PG && mi.end == s + 5 * PG && mi.prot == PM_PROT_READ,
	   "%s: ... changed from the VMA's start to the range's end", DN);
	is_int(pmt_poke(mm, s - 2 * PG, 1), -EFAULT, "%s: ... which is read-only now", DN);
	is_int(pm_mprotect(mm, s - 100 * PG, PG, PM_PROT_READ | X_PROT_GROWSDOWN), -ENOMEM,
	       "%s: PROT_GROWSDOWN on a hole -ENOMEM", DN);

	/* fork: the child's VMA grows down too */
	child = pmt_fork(mm);
	ok(vma_at(child, s + 6 * PG).vmflags & PM_VMF_GROWSDOWN, "%s: the child's VMA keeps gd",
	   DN);
	is_int(pm_fault(child, s - 3 * PG, 0), 0, "%s: ... and grows in the child", DN);
	is_int(vma_at(child, s - 3 * PG).start, s - 3 * PG, "%s: ... down there", DN);
	is_int(vma_at(mm, s - 3 * PG).start, s - 2 * PG, "%s: ... not in the parent", DN);
	pm_mm_destroy(child);
	pm_munmap(mm, s - 2 * PG, 10 * PG);

	/* The errors */
	is_int(pm_mmap(mm, 0, PG, RW, SHANON | PM_MAP_GROWSDOWN, NULL, 0), -EINVAL,
	       "%s: MAP_GROWSDOWN shared anonymous -EINVAL", DN);
	f = pm_shmem_create(m, PG, 0);
	is_int(pm_mmap(mm, 0, PG, RW, PM_MAP_PRIVATE | PM_MAP_GROWSDOWN, f, 0), -EINVAL,
	       "%s: MAP_GROWSDOWN of an object -EINVAL", DN);
	pm_shmem_put(f);
	is_int(pm_mmap(mm, 0, HP, RW, PRIV | PM_MAP_HUGETLB | PM_MAP_GROWSDOWN, NULL, 0), -EINVAL,
	       "%s: MAP_GROWSDOWN hugetlb -EINVAL", DN);

	/* Across a 512 GiB boundary: the range design's two ranges */
	{
		const unsigned long b = 200UL << 39;

		ASSERT_EQ(stack_map(mm, b + 2 * PG, 2 * PG), (long)(b + 2 * PG));
		is_int(pm_fault(mm, b - PG, PM_FAULT_WRITE), 0,
		       "%s: a grow across a 512 GiB boundary", DN);
		mi = vma_at(mm, b - PG);
		ok(mi.start == b - PG && mi.end == b + 4 * PG, "%s: ... one VMA across it", DN);
		is_int(pmt_poke(mm, b + 3 * PG, 'x'), 1, "%s: ... usable above", DN);
		is_int(pmt_peek(mm, b - PG), 0, "%s: ... and below", DN);
		is_int(pm_munmap(mm, b - PG, 5 * PG), 0, "%s: ... and unmapped whole", DN);
	}

	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "grows");
}

/* ---- a grow racing faults inside the VMA ---- */

struct race {
	struct pm_mm *mm;
	unsigned long top;
	atomic_bool stop;
	atomic_int errors;
};

static void *reader(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop))
		for (unsigned long a = r->top - 4 * PG; a < r->top; a += PG)
			if (pmt_peek(r->mm, a) != (int)((a >> 12) & 0x7f))
				atomic_fetch_add(&r->errors, 1);
	return NULL;
}

static void test_race(void)
{
	struct pm_machine *m = machine(64, 0);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long top = (200UL << 39) + 4 * PG;
	struct race r = { .mm = mm, .top = top };
	pthread_t t;
	int err = 0;

	ASSERT_EQ(stack_map(mm, top - 4 * PG, 4 * PG), (long)(top - 4 * PG));
	for (unsigned long a = top - 4 * PG; a < top; a += PG)
		ASSERT_EQ(pmt_poke(mm, a, (char)((a >> 12) & 0x7f)), 1);
	ASSERT_EQ(pthread_create(&t, NULL, reader, &r), 0);
	for (unsigned long a = top - 5 * PG; a >= top - 300 * PG && !err; a -= PG)
		err = pm_fault(mm, a, PM_FAULT_WRITE);
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	is_int(err, 0, "%s: the stack grew page by page while another thread read it", DN);
	is_int(atomic_load(&r.errors), 0, "%s: ... every read saw its byte", DN);
	is_int(vma_at(mm, top - 300 * PG).start, top - 300 * PG, "%s: ... to 300 pages", DN);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, "race");
}

static const struct pmt_group groups[] = {
	{ "locked", test_locked },
	{ "grows", test_growsdown },
	{ "race", test_race },
};

int main(int argc, char **argv)
{
	return pmt_run_groups_designs(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 60,
				      &cur);
}
