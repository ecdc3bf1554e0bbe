// SPDX-License-Identifier: MIT
/*
 * test_ptl_readers.c - the lockless readers of a table's lock (pgtable.c, "Lockless readers";
 * the range design's pm_access):
 *  1. A table gets reader slots when a second thread copies through it, not before; in Linux's
 *     design, and under PM_KNOB_PTE_TABLE_LOCK, never.
 *  2. A writer that takes the lock waits for the reader inside: it gets the lock only after
 *     pm__ptl_read_end().
 *  3. A reader does not begin while the lock is held, nor while another thread of its CPU's
 *     class is inside; it takes the lock instead.
 *  4. Both for a PTE table and for a PMD table (a THP's PMD lock); data intact, every frame
 *     back, and the tables' slots freed with them (ASan sees a leak otherwise).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "gup/gup.h"
#include "lib/pmtest.h"
#include "lib/tap.h"

#define PG 4096UL
#define RW (PM_PROT_READ | PM_PROT_WRITE)
#define ANON (PM_MAP_PRIVATE | PM_MAP_ANONYMOUS | PM_MAP_FIXED)
#define BASE 0x40000000UL /* 2 MiB aligned */

/* The lock of the table that maps @addr, or NULL. Context: pm_rcu_read_lock(). */
static struct pm_spinlock *lock_of(struct pm_mm *mm, unsigned long addr)
{
	pm_entry_t *pmdp = pm__pmd_lookup(mm, addr);

	return pmdp ? pmd_walk_lock(pm_mm_machine(mm), pmdp, pmdp_get(pmdp)) : NULL;
}

static unsigned table_flags(struct pm_mm *mm, unsigned long addr)
{
	struct pm_spinlock *ptl;
	unsigned f = 0;

	pm_rcu_read_lock();
	ptl = lock_of(mm, addr);
	if (ptl)
		f = atomic_load(&ptl_table_page(ptl)->xaccess_threads);
	pm_rcu_read_unlock();
	return f;
}

struct writer {
	struct pm_spinlock *ptl;
	atomic_int state; /* 1: trying, 2: got the lock */
};

static void *writer_main(void *p)
{
	struct writer *w = p;

	atomic_store(&w->state, 1);
	pm__ptl_lock(w->ptl);
	atomic_store(&w->state, 2);
	pm_spin_unlock(w->ptl);
	return NULL;
}

struct reader {
	struct pm_machine *m;
	struct pm_spinlock *ptl;
	bool began;
};

static void *reader_main(void *p)
{
	struct reader *r = p;
	struct pm_reader_slot *slot;

	pm_rcu_read_lock();
	r->began = pm__ptl_read_begin(r->m, r->ptl, &slot);
	if (r->began)
		pm__ptl_read_end(slot);
	pm_rcu_read_unlock();
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

static void test_table(bool thp)
{
	struct pm_config c = { .mem_bytes = 64UL << 20, .flags = PM_MACHINE_RANGE_MM };
	struct pm_machine *m = pm_machine_create(&c);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);
	const char *kind = thp ? "PMD table" : "PTE table";
	unsigned long addr = BASE + (thp ? 0 : 5 * PG);
	struct pm_reader_slot *slot;
	struct pm_spinlock *ptl;
	struct writer w = { 0 };
	struct reader r = { .m = m };
	pthread_t th;
	char v = 0;

	ok(pm_mmap(mm, BASE, 2UL << 20, RW, ANON, NULL, 0) == (long)BASE, "%s: mmap", kind);
	if (thp)
		pm_madvise(mm, BASE, 2UL << 20, PM_MADV_HUGEPAGE);
	pmt_poke(mm, addr, 'r');
	ok(!(table_flags(mm, addr) & TABLE_READERS), "%s: one thread's copies: no reader slots", kind);
	pm__table_readers_attach(mm, addr); /* what a second thread's copy under the lock asks */
	ok(table_flags(mm, addr) & TABLE_READERS, "%s: reader slots attached", kind);

	/* 2: a writer waits for the reader inside. */
	pm_rcu_read_lock();
	ptl = lock_of(mm, addr);
	w.ptl = ptl;
	ok(ptl && pm__ptl_read_begin(m, ptl, &slot), "%s: a lockless read begins", kind);
	ok(!pthread_create(&th, NULL, writer_main, &w), "%s: a writer starts", kind);
	while (atomic_load(&w.state) == 0)
		sleep_ms(1);
	sleep_ms(50);
	is_int(atomic_load(&w.state), 1, "%s: the writer waits while the reader is inside", kind);
	pm__ptl_read_end(slot);
	pm_rcu_read_unlock();
	pthread_join(th, NULL);
	is_int(atomic_load(&w.state), 2, "%s: and gets the lock once it has left", kind);

	/* 3: no begin under a held lock, nor in a slot another thread of this class holds. */
	pm_rcu_read_lock();
	ptl = lock_of(mm, addr);
	r.ptl = ptl;
	pm__ptl_lock(ptl);
	ok(!pm__ptl_read_begin(m, ptl, &slot), "%s: no lockless read while the lock is held", kind);
	pm_spin_unlock(ptl);
	ok(pm__ptl_read_begin(m, ptl, &slot), "%s: one after it is released", kind);
	{
		/* Every class's slot is taken: another thread's begin must fail, whatever CPU
		 * it runs on. */
		struct pm_reader_slot *base =
			atomic_load(&atomic_load(&m->xtable_readers)[ptl_table_page(ptl) - m->pages]);
		unsigned long one = 1;

		for (unsigned i = 0; i < m->table_reader_slots; i++)
			if (base + i != slot)
				atomic_store(&base[i].xin, one);
		ok(!pthread_create(&th, NULL, reader_main, &r) && !pthread_join(th, NULL) &&
		   !r.began, "%s: no lockless read in a slot another thread holds", kind);
		for (unsigned i = 0; i < m->table_reader_slots; i++)
			if (base + i != slot)
				atomic_store(&base[i].xin, 0UL);
	}
	pm__ptl_read_end(slot);
	pm_rcu_read_unlock();

	/* 4: the data through both paths, then the teardown frees the slots. */
	is_int(pm_access(mm, addr, &v, 1, 0), 1, "%s: pm_access reads", kind);
	is_int(v, 'r', "%s: the byte written", kind);
	v = 'w';
	is_int(pm_access(mm, addr + 1, &v, 1, 1), 1, "%s: pm_access writes", kind);
	is_int(pmt_peek(mm, addr + 1), 'w', "%s: and reads it back", kind);
	is_int(pm_munmap(mm, BASE, 2UL << 20), 0, "%s: munmap", kind);
	is_int(pm_machine_check(m), 0, "%s: pm_machine_check", kind);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, kind);
}

/* 1: the other designs never attach slots. */
static void test_never(unsigned flags, unsigned knobs, const char *what)
{
	struct pm_config c = { .mem_bytes = 64UL << 20, .flags = flags, .knobs = knobs };
	struct pm_machine *m = pm_machine_create(&c);
	size_t free0 = pm_machine_free_pages(m);
	struct pm_mm *mm = pm_mm_create(m);

	pm_mmap(mm, BASE, 16 * PG, RW, ANON, NULL, 0);
	pmt_poke(mm, BASE, 'n');
	pm__access_warm(mm, BASE);
	ok(!(table_flags(mm, BASE) & TABLE_READERS), "%s: no reader slots", what);
	is_int(pmt_peek(mm, BASE), 'n', "%s: the data", what);
	pm_mm_destroy(mm);
	pmt_end(m, free0, &pmt_end_returned, what);
}

int main(void)
{
	plan_no_plan();
	test_table(false);
	test_table(true);
	test_never(PM_MACHINE_LINUX_MM, 0, "Linux's design");
	test_never(PM_MACHINE_RANGE_MM, PM_KNOB_PTE_TABLE_LOCK, "range + PTE_TABLE_LOCK");
	return done_testing();
}
