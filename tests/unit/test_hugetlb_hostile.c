// SPDX-License-Identifier: MIT
/*
 * test_hugetlb_hostile.c - hugetlb under careless placement and sizes (issue 26), in the
 * design the environment picks (make check, make check-range):
 *
 *   hint		a non-fixed hugetlb mmap whose hint is 4 KiB but not 2 MiB aligned is
 *			placed at the hint rounded up (hugetlb_get_unmapped_area), never at it;
 *			a page mapped right after it stays its own, and munmap is clean
 *   hint_edges		hints near the top and the wrap of the address space: searched instead
 *   pte_table		a PTE table under a hugetlb VMA (only a broken placement made one):
 *			the fault and fork fail with -EFAULT instead of retrying forever
 *   check_vma		pm_machine_check rejects a hugetlb VMA whose offset is not 2 MiB aligned
 *   grow		a writable mapping longer than its hugetlb object grows the object to
 *			its end (hugetlbfs_file_mmap); a read-only one does not
 *   noop_partial	mprotect or madvise of part of a huge page that changes nothing is 0,
 *			as Linux returns before split_vma; one that changes something -EINVAL
 *
 * A hang is a failure: each group runs under alarm(). "-t NAME" runs one group only.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pinmm/pinmm.h>

#include "gup/gup.h" /* white-box: a PTE table under a hugetlb VMA, a VMA's pgoff */
#include "lib/pmtest.h"
#include "lib/tap.h"

#define MiB (1UL << 20)
#define PG 4096UL
#define HP (2 * MiB)
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS)
#define HPRIV (PRIV | PM_MAP_HUGETLB)

/* ---- 1. a hint not 2 MiB aligned ---- */

static void test_hint(void)
{
	struct pm_machine *m = pmt_hmachine(64, 2);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const unsigned long hint = 0x40001000UL;
	long a, b;

	a = pm_mmap(mm, hint, HP, RW, HPRIV, NULL, 0);
	is_int(a, (long)ALIGN_UP(hint, HP), "hint %#lx: placed at it rounded up to 2 MiB", hint);
	if (a < 0 || (a & (HP - 1))) {
		/* The old placement: going on would corrupt memory and abort. */
		ok(0, "the rest needs an aligned VMA");
		return;
	}
	is_int(pmt_poke(mm, a + HP - 1, 'h'), 1, "a write to its last byte");
	b = pm_mmap(mm, a + HP, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
	is_int(b, a + HP, "a fixed anonymous page right after it");
	is_int(pmt_poke(mm, b, 'a'), 1, "written");
	is_int(pmt_peek(mm, a + HP - 1), 'h', "the huge page keeps its byte");
	is_int(pmt_peek(mm, b), 'a', "the page after it is its own");
	is_int(pm_machine_check(m), 0, "the machine checks clean");
	is_int(pm_munmap(mm, a, HP), 0, "munmap of the hugetlb VMA");
	is_int(pmt_peek(mm, b), 'a', "the page after it is intact");

	/* An anonymous page below it in the same 2 MiB: the mapping goes above. */
	b = pm_mmap(mm, 0x80000000UL, PG, RW, PRIV | PM_MAP_FIXED, NULL, 0);
	is_int(pmt_poke(mm, b, 'b'), 1, "an anonymous page at 0x80000000");
	a = pm_mmap(mm, b + PG, HP, RW, HPRIV, NULL, 0);
	is_int(a, b + HP, "a hugetlb hint just after it: the next 2 MiB");
	is_int(pmt_poke(mm, a, 'c'), 1, "its first write returns");
	is_int(pmt_peek(mm, b), 'b', "the anonymous page below is intact");
	is_int(pm_machine_check(m), 0, "the machine checks clean");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 2, "hint");
}

static void test_hint_edges(void)
{
	static const unsigned long hints[] = { PM_TASK_SIZE - PG, PM_TASK_SIZE - HP + PG,
					       ~0UL - PG + 1, PG };
	struct pm_machine *m = pmt_hmachine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);

	for (unsigned i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		long a = pm_mmap(mm, hints[i], HP, RW, HPRIV, NULL, 0);

		ok(a > 0 && !(a & (HP - 1)) && (unsigned long)a + HP <= PM_TASK_SIZE,
		   "hint %#lx: a 2 MiB aligned mapping inside the address space (%#lx)", hints[i],
		   (unsigned long)a);
		if (a > 0) {
			is_int(pmt_poke(mm, a, 'e'), 1, "written");
			is_int(pm_munmap(mm, a, HP), 0, "and unmapped");
		}
	}
	is_int(pm_machine_check(m), 0, "the machine checks clean");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "hint_edges");
}

/* ---- 2. no fault and no fork may retry forever ---- */

static void test_pte_table(void)
{
	struct pm_machine *m = pmt_hmachine(64, 2);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m), *child;
	pm_entry_t *pmdp;
	long a;

	a = pm_mmap(mm, 0, 2 * HP, RW, HPRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	is_int(pmt_poke(mm, a + HP, 'p'), 1, "the second huge page is faulted in");
	/* What a VMA placed across a PTE table used to find. */
	mmap_write_lock_all(mm); /* either design: the whole address space */
	pmdp = pm__pmd_alloc(mm, a);
	ASSERT_TRUE(pmdp != NULL);
	ASSERT_EQ(pm__pte_alloc(mm, pmdp, false), 0);
	mmap_write_unlock(mm);
	fprintf(stderr, "# a warning about the PTE table is expected below\n");
	is_int(pmt_poke(mm, a, 'x'), -EFAULT, "a write over the PTE table: -EFAULT, not a hang");
	is_int(pmt_peek(mm, a), -EFAULT, "a read: the same");
	errno = 0;
	child = pm_mm_fork(mm);
	ok(!child && errno == EFAULT, "fork: NULL, EFAULT, not a hang (errno %d)", errno);
	if (child)
		pm_mm_destroy(child);
	is_int(pmt_peek(mm, a + HP), 'p', "the good huge page is intact");
	is_int(pm_munmap(mm, a, 2 * HP), 0, "munmap takes the table away");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 2, "pte_table");
}

/* ---- pm_machine_check's (V) ---- */

static void test_check_vma(void)
{
	struct pm_machine *m = pmt_hmachine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_vma *vma;
	long a;

	a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);
	ASSERT_TRUE(a > 0);
	is_int(pm_machine_check(m), 0, "an aligned hugetlb VMA checks clean");
	vma = pm__find_vma(mm, (unsigned long)a);
	ASSERT_TRUE(vma != NULL);
	vma->pgoff += 1;
	fprintf(stderr, "# a complaint about the VMA is expected below\n");
	is_int(pm_machine_check(m), -EUCLEAN, "its file offset off by 4 KiB: -EUCLEAN");
	vma->pgoff -= 1;
	is_int(pm_machine_check(m), 0, "put back: clean");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "check_vma");
}

/* ---- 7. a writable shared mapping longer than its object ---- */

static void test_grow(void)
{
	struct pm_machine *m = pmt_hmachine(64, 4);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	struct pm_shmem *f = pm_shmem_create_hugetlb(m, HP);
	long a;

	ASSERT_TRUE(f != NULL);
	a = pm_mmap(mm, 0, 2 * HP, PM_PROT_READ, PM_MAP_SHARED, f, 0);
	ok(a > 0, "a read-only shared mapping of 4 MiB of a 2 MiB object");
	is_int(pm_shmem_size(f), HP, "does not grow it");
	is_int(pmt_peek(mm, a + HP), -EFAULT, "its second page is beyond the end: -EFAULT");
	is_int(pm_munmap(mm, a, 2 * HP), 0, "unmapped");

	a = pm_mmap(mm, 0, 2 * HP, RW, PM_MAP_SHARED, f, 0);
	ok(a > 0, "a writable shared mapping of 4 MiB");
	is_int(pm_shmem_size(f), 2 * HP, "grows the object to 4 MiB");
	is_int(pmt_poke(mm, a + HP, 's'), 1, "its second page is written, no SIGBUS");
	is_int(pm_munmap(mm, a, 2 * HP), 0, "unmapped");

	a = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, 2 * HP);
	ok(a > 0, "a writable mapping at offset 4 MiB");
	is_int(pm_shmem_size(f), 3 * HP, "grows it to 6 MiB");
	is_int(pmt_poke(mm, a, 't'), 1, "written");
	is_int(pm_munmap(mm, a, HP), 0, "unmapped");

	a = pm_mmap(mm, 0, HP, RW, PM_MAP_PRIVATE, f, 3 * HP);
	ok(a > 0, "a writable private mapping at offset 6 MiB");
	is_int(pm_shmem_size(f), 4 * HP, "grows it too, as hugetlbfs does");
	is_int(pm_munmap(mm, a, HP), 0, "unmapped");

	a = pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, 0);
	is_int(pm_shmem_size(f), 4 * HP, "a shorter one never shrinks it");
	is_int(pmt_peek(mm, a), 0, "its first page reads (never written: zero)");
	is_int(pm_munmap(mm, a, HP), 0, "unmapped");
	a = pm_mmap(mm, 0, HP, RW, PRIV, NULL, 0);
	is_int(pm_mmap(mm, a, HP, RW, PM_MAP_SHARED | PM_MAP_FIXED_NOREPLACE, f, 4 * HP), -EEXIST,
	       "a writable mapping past the end where the range is taken: -EEXIST");
	is_int(pm_shmem_size(f), 4 * HP, "a failed mmap leaves the size as it was");
	is_int(pm_munmap(mm, a, HP), 0, "unmapped");
	is_int(pm_mmap(mm, 0, HP, RW, PM_MAP_SHARED, f, (1UL << 46)), -EOVERFLOW,
	       "a mapping past the largest object: -EOVERFLOW");
	is_int(pm_shmem_size(f), 4 * HP, "and the size stays");
	is_int(pm_machine_check(m), 0, "the machine checks clean");
	pm_shmem_put(f);
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 4, "grow");
}

/* ---- a change of part of a huge page that changes nothing ---- */

static void test_noop_partial(void)
{
	struct pm_machine *m = pmt_hmachine(64, 1);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	long a = pm_mmap(mm, 0, HP, RW, HPRIV, NULL, 0);

	ASSERT_TRUE(a > 0);
	is_int(pmt_poke(mm, a, 'n'), 1, "the huge page is written");
	is_int(pm_mprotect(mm, a + PG, PG, RW), 0, "mprotect of 4 KiB to the same prot: 0");
	is_int(pm_madvise(mm, a, PG, PM_MADV_DOFORK), 0, "MADV_DOFORK of 4 KiB (no change): 0");
	is_int(pm_mprotect(mm, a, PG, PM_PROT_READ), -EINVAL,
	       "mprotect of 4 KiB that changes it: -EINVAL");
	is_int(pm_madvise(mm, a, PG, PM_MADV_DONTFORK), -EINVAL, "MADV_DONTFORK of 4 KiB: -EINVAL");
	is_int(pmt_peek(mm, a), 'n', "the page is intact");
	is_int(pm_machine_check(m), 0, "the machine checks clean");
	pm_mm_destroy(mm);
	pmt_hend(m, free0, 1, "noop_partial");
}

static const struct pmt_group groups[] = {
	{ "hint", test_hint },		 { "hint_edges", test_hint_edges },
	{ "pte_table", test_pte_table }, { "check_vma", test_check_vma },
	{ "grow", test_grow },		 { "noop_partial", test_noop_partial },
};

int main(int argc, char **argv)
{
	return pmt_run_groups(argc, argv, groups, sizeof(groups) / sizeof(groups[0]), 60);
}
