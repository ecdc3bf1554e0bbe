// SPDX-License-Identifier: MIT
/*
 * test_regress_hugetlb_owner_cow.c - decision 9 (docs/linux-differences.md): the owner of a
 * private hugetlb mapping writes a page it shares with a fork child while no pool page is
 * free beyond the reservations. As Linux's hugetlb_wp(), the page is unmapped from the child
 * and the owner reuses it. Linux 6.18's unmap_ref_private() also zaps the faulting address in
 * the owner's own mm when another of its VMAs maps the same file offset elsewhere (here the
 * mapping it inherited, at 2 MiB), and the write then lands in a new, zeroed page: the
 * owner's earlier write reads back 0 on the 6.18 host. pinmm keeps the owner's data.
 *
 * Found by make oracle (seed 0x6262, sequence 5187, range design, write/child-content), and
 * reproduced on the host by the same steps. In both designs.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <pinmm/pinmm.h>

#include "lib/pmtest.h"
#include "lib/tap.h"

#define HP (2UL << 20)
#define WIN 0x200000000000UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define RX (PM_PROT_READ | PM_PROT_EXEC)
#define PRIV (PM_MAP_PRIVATE | PM_MAP_FIXED)

static void run(unsigned design, const char *dn)
{
	struct pm_config cfg = { .mem_bytes = 64UL << 20, .nr_hugepages = 8, .flags = design };
	struct pm_machine *m = pm_machine_create(&cfg);
	struct pm_mm *p0, *p1, *p2;
	struct pm_shmem *obj;
	struct pm_page *pin;
	size_t total, free, resv;

	ASSERT_TRUE(m);
	p0 = pm_mm_create(m);
	obj = pm_shmem_create_hugetlb(m, 2 * HP);
	ASSERT_TRUE(p0 && obj);
	/* p0 maps both pages of the object privately, written in by MAP_POPULATE */
	ASSERT_EQ(pm_mmap(p0, WIN, 2 * HP, RW, PRIV | PM_MAP_POPULATE, obj, 0), (long)WIN);
	p1 = pmt_fork(p0);
	/* p1 pins (and so copies) the second; then maps the object's second page at 0, owning
	 * that mapping, and writes it */
	ASSERT_EQ(pm_pin_user_pages(p1, WIN + 0x35f000, 1, PM_FOLL_WRITE | PM_FOLL_LONGTERM, &pin),
		  1);
	ASSERT_EQ(pm_mmap(p1, WIN, HP, RW, PRIV | PM_MAP_POPULATE, obj, HP), (long)WIN);
	ASSERT_EQ(pmt_poke(p1, WIN + 0x15, (char)0x89), 1);
	/* a shared mapping's reservation of the object's first page, kept after its munmap */
	ASSERT_EQ(pm_mmap(p0, WIN + 3 * HP, HP, RX, PM_MAP_SHARED | PM_MAP_FIXED, obj, 0),
		  (long)(WIN + 3 * HP));
	ASSERT_EQ(pm_munmap(p0, WIN + 3 * HP, HP), 0);
	p2 = pmt_fork(p1);
	/* two more private mappings, reserving the rest of the pool */
	ASSERT_EQ(pm_mmap(p1, WIN + 3 * HP, 0xc000, RW, PRIV, obj, 0), (long)(WIN + 3 * HP));
	ASSERT_EQ(pm_mmap(p2, WIN + 2 * HP, 0xc000, RX, PRIV, obj, HP), (long)(WIN + 2 * HP));
	ASSERT_EQ(pm_hugetlb_pool(m, &total, &free), 0);
	ASSERT_EQ(pm_hugetlb_reserved(m, &resv), 0);
	is_int((long)free, (long)resv, "%s: no page free beyond the reservations", dn);

	is_int(pmt_poke(p1, WIN + 0xde026, 0x48), 1, "%s: the owner writes the page it shares", dn);
	is_int(pmt_peek(p1, WIN + 0x15), 0x89, "%s: ... and keeps its earlier write (Linux 6.18: 0)",
	       dn);
	is_int(pmt_peek(p1, WIN + 0xde026), 0x48, "%s: ... and the new one", dn);
	is_int((long)pmt_page_kind(p2, WIN), 0, "%s: the child's mapping of it is gone (Linux)", dn);
	ASSERT_EQ(pm_hugetlb_pool(m, &total, &free), 0);
	is_int((long)free, (long)resv, "%s: no page taken", dn);

	pm_unpin_user_page(pin);
	pm_mm_destroy(p2);
	pm_mm_destroy(p1);
	pm_mm_destroy(p0);
	pm_shmem_put(obj);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", dn);
	pm_rcu_barrier();
	ASSERT_EQ(pm_hugetlb_pool(m, &total, &free), 0);
	is_int((long)free, (long)total, "%s: every pool page back", dn);
	pm_machine_destroy(m);
}

int main(void)
{
	plan_no_plan();
	run(PM_MACHINE_LINUX_MM, "linux");
	run(PM_MACHINE_RANGE_MM, "range");
	return done_testing();
}
