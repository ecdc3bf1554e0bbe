// SPDX-License-Identifier: MIT
/*
 * pgtable.c - four-level page tables: allocation, publication, lookup, locking and freeing.
 *
 * Layout. x86-64 with 4 levels and 48-bit addresses: PGD (bits 39-47), PUD (30-38), PMD
 * (21-29), PTE (12-20); each table is one 4 KiB frame of 512 64-bit entries taken from the
 * machine's memory. An upper entry holds the next table's pfn | PRESENT|RW|USER|ACCESSED; a PMD
 * entry is either such a table pointer or a 2 MiB leaf (PSE) mapping an order-9 folio.
 *
 * Locks (Linux's split page-table locks). mm->page_table_lock serialises populating PGD and PUD
 * entries (the range design publishes them by compare-and-swap instead: populate_upper). Each PMD table page's descriptor holds that table's PMD lock, which serialises
 * installing or clearing entries in it (a PTE table, a THP leaf, a split). Each PTE table
 * page's descriptor holds its PTL, which serialises changes to its 512 PTEs - but, in the
 * range design, a fault's install into an empty PTE, a compare-and-swap without it
 * (pgtable/pte_cas.h; the argument is at the top of fault/anon.c).
 *
 * Why lockless walkers are safe (GUP-fast, pm_access, shmem truncation's zaps):
 *  1. Publication. A table is zeroed while private, then stored into its parent with a release
 *     store under the parent's lock, after re-checking that the slot is still empty (a racing
 *     allocator frees its unpublished copy at once). A walker loads every entry with acquire,
 *     so it sees an initialised table or none.
 *  2. Lifetime. Tables are freed only by pm__free_pgd_range() (munmap; pm__free_pgtables()
 *     at the teardown), after the VMAs covering them are gone and their entries are zapped,
 *     and only tables whose whole span lies in the gap between the VMAs left below and
 *     above. munmap runs it holding mmap_lock for read, downgraded from the write hold that
 *     detached the VMAs, so no VMA can appear in the gap meanwhile. It clears the parent
 *     entry under the parent's lock - and, for a PTE table, under the table's own PTL as
 *     well - and hands the frame to pm_call_rcu(). A walker runs inside pm_rcu_read_lock(),
 *     so any table it reached through an entry it loaded stays valid memory until it leaves:
 *     it may read stale entries, never freed or reused memory.
 *  3. Staleness. A walker that acts on what it read re-validates: GUP-fast re-reads the PMD and
 *     PTE after taking its speculative reference (gup_fast.c); a walker that locks a PTE table
 *     (pm__pte_offset_map_lock) re-reads the PMD after taking the PTL and retries if it changed,
 *     so nobody ever writes into, or copies through, a table that has been unlinked. This is
 *     why the free path takes the PTL: after it, every later locker sees the PMD cleared.
 *  4. A table never changes level or owner while it is reachable, and entries are single
 *     64-bit words written atomically, so a walker never sees a torn entry.
 * Holders of mmap_lock (read) or of a VMA's read lock need no RCU: they walk only under a VMA
 * they found, and a table any live VMA reaches into is never freed.
 *
 * Lockless readers (the range design's pm_access, mm/access.c; pgtable.h's pm__ptl_read_*).
 * A copy through a table must not overlap a change of its entries: a store must never land
 * in a page after it has been unmapped, write-protected for a fork child, or freed. Linux
 * gets that from the TLB shootdown; pinmm copies under the table's lock, so two copies
 * through one table write its lock word. A table that several threads copy through (its
 * xaccess_threads marks those that took the lock to copy, by pin tag % 8) gets reader
 * slots, a line per CPU class (TABLE_READERS; m->xtable_readers by the table's pfn), and its lock
 * becomes a reader-writer lock whose readers write only their own slot: a reader marks its
 * slot (compare-and-swap from 0, so that two threads of one class cannot share it), then
 * reads the lock word; if it is held, it unmarks and takes the lock instead. Every writer
 * takes the lock with pm__ptl_lock(): the acquiring RMW, then, if the table has slots, a
 * wait while any of them is marked.
 *  (R1) Each side writes, then reads what the other writes, all sequentially consistent (the
 *       lock's RMW included, spinlock.h): a store-buffering pattern. Either the reader sees
 *       the lock held and backs off, or the writer's read of the slot comes after the
 *       reader's mark and it waits for the copy to end.
 *  (R2) The slots are attached under the table's lock (pm__table_readers_attach): published
 *       in the index, then TABLE_READERS set, both before an unlock, so every later holder
 *       sees them; a reader uses them only after reading the flag with acquire. They stay
 *       until the table is freed, after its grace period, when no reader can be inside.
 *  (R3) A reader re-reads the PMD and the entry after its check of the lock, as a locker does
 *       after taking it (3. above); the copy then runs as if under the lock. The table and
 *       its slots stay memory by RCU (2.), and the page it copies stays allocated because
 *       whoever unmaps or replaces it changes the entry under the lock, which waits.
 *  (R4) No deadlock: a reader takes nothing and waits for nothing while marked, and a writer
 *       waits only for readers.
 * A writer reads the slots of its own table only, so copies and changes in different tables
 * share no byte, and copies through one table by different CPUs share none once it has them.
 */
#include <sys/mman.h>

#include "pgtable/pgtable.h"

static void table_init(struct pm_page *page, int level)
{
	atomic_store_relaxed(&page->xflags, PGF(PG_table));
	atomic_store_relaxed(&page->xtable_used_any, 0);
	pm_spin_init(&page->ptl);
	page->level = (int16_t)level;
	atomic_store_relaxed(&page->xaccess_threads, 0);
	page->huge_ptes = NULL;
}

/* The tracer's name of each level's tables (lib/trace.h). */
static const char *const table_trace_type[] __maybe_unused = {
	[1] = "pte_table", [2] = "pmd_table", [3] = "pud_table", [4] = "pgd_table",
};

static pm_entry_t *table_alloc(struct pm_machine *m, int level)
{
	struct pm_page *page = pm__alloc_frames(m, 0, PM_ALLOC_ZERO | PM_ALLOC_UNMOVABLE);

	if (!page)
		return NULL;
	table_init(page, level);
	count_event(m, PGTABLE_ALLOCS, 1);
	pm__trace_object(page_address(m, page), PAGE_SIZE, table_trace_type[level]);
	return page_address(m, page);
}

/* The reader slots of a table nobody can reach any more, if it has them ((R2)). */
static void table_readers_free(struct pm_machine *m, struct pm_page *page)
{
	struct pm_reader_slot *_Atomic *index;
	struct pm_reader_slot *r;

	if (!(atomic_load_relaxed(&page->xaccess_threads) & TABLE_READERS))
		return;
	index = atomic_load_relaxed(&m->xtable_readers);
	r = atomic_xchg_acquire(&index[page - m->pages], NULL);
	pm__trace_object_gone(r);
	free(r);
	atomic_store_relaxed(&page->xaccess_threads, 0);
}

/* Free a table that was never published (or that nobody can reach any more). */
static void table_free_now(struct pm_machine *m, pm_entry_t *table)
{
	struct pm_page *page = table_page(m, table);

	table_readers_free(m, page);
	atomic_store_relaxed(&page->xflags, 0);
	atomic_store_relaxed(&page->xtable_used_any, 0); /* xpincount again for the allocator */
	pm__trace_object_gone(table);
	pm__free_frames(m, page, 0, PM_ALLOC_UNMOVABLE);
}

static void table_free_rcu_cb(struct pm_rcu_head *head)
{
	struct pm_page *page = container_of(head, struct pm_page, rcu);
	struct pm_machine *m = page_machine(page);

	if (unlikely(m->fork_busy))
		return; /* queued by a fork parent, for a copy the child cannot use (mem/mem.c) */
	table_readers_free(m, page);
	atomic_store_relaxed(&page->xflags, 0);
	atomic_store_relaxed(&page->xtable_used_any, 0);
	pm__trace_object_gone(page_address(m, page));
	pm__free_frames(m, page, 0, PM_ALLOC_UNMOVABLE);
	atomic_sub_relaxed(&m->xrcu_pending, 1);
}

/* Free an unlinked table once every walker that may have reached it has left. */
static void table_free_rcu(struct pm_machine *m, pm_entry_t *table)
{
	struct pm_page *page = table_page(m, table);

#if PM_DEBUG >= 2
	for (unsigned i = 0; i < PTRS_PER_TABLE; i++) {
		uint64_t e = atomic_load_relaxed(&table[i]);
		char msg[96];

		if (likely(e == 0))
			continue;
		snprintf(msg, sizeof(msg), "BUG: freeing a level-%d table whose entry %u is %#llx",
			 page->level, i, (unsigned long long)e);
		pm_die(msg);
	}
#endif
	count_event(m, PGTABLE_FREES, 1);
	atomic_add_relaxed(&m->xrcu_pending, 1);
	pm_call_rcu(&page->rcu, table_free_rcu_cb);
}

pm_entry_t *pm__pgd_alloc(struct pm_machine *m)
{
	return table_alloc(m, 4);
}

void pm__pgd_free(struct pm_machine *m, pm_entry_t *pgd)
{
	table_free_rcu(m, pgd);
}

pm_entry_t *pm__pte_alloc_one(struct pm_machine *m)
{
	return table_alloc(m, 1);
}

void pm__pte_free_now(struct pm_machine *m, pm_entry_t *table)
{
	table_free_now(m, table);
}

/* Load the table an upper-level slot points to, or NULL. */
static pm_entry_t *next_table(struct pm_machine *m, pm_entry_t *slot)
{
	uint64_t e = atomic_load_acquire(slot);

	return (e & _PAGE_PRESENT) ? entry_table(m, e) : NULL;
}

/**
 * pm__pmd_lookup() - the PMD slot for @addr, or NULL if an upper table is missing.
 * Context: mmap_lock held, an i_mmap lock (truncation), or inside pm_rcu_read_lock().
 */
pm_entry_t *pm__pmd_lookup(struct pm_mm *mm, unsigned long addr)
{
	pm_entry_t *pud, *pmd;

	walk_assert_held(mm);
	pud = next_table(mm_pgtables(mm)->m, &mm_pgtables(mm)->pgd[pgd_index(addr)]);
	if (!pud)
		return NULL;
	pmd = next_table(mm_pgtables(mm)->m, &pud[pud_index(addr)]);
	if (!pmd)
		return NULL;
	return &pmd[pmd_index(addr)];
}

/*
 * Populate @slot (a PGD or PUD entry) with a new table of @level if it is empty. Linux's way
 * re-checks and stores under mm->page_table_lock. With mm->upper_cas (the range design) the
 * store is a compare-and-swap from empty instead, so the first faults of two ranges share no
 * lock word: nothing else writes these slots before the teardown (pm__free_pgd_range keeps
 * the tables there), so a CAS from empty can neither overwrite a table nor be overwritten by
 * one.
 * The CAS is SC: it publishes the zeroed table as the release store does.
 */
/*
 * Used PMD tables. Every slot of a PMD table becomes non-empty only through pm__pmd_alloc()
 * (faults, fork's and mremap's copies, THP and hugetlb alike: everything else rewrites a slot
 * that is not empty already), which marks the table first when it finds the slot empty; and
 * the marks are cleared only where the table is found all empty and wiped (free_range()). So
 * a table without a mark holds nothing, and the walks and the munmap of the range design's
 * eager tables - mmap1's - skip it instead of reading its 512 slots.
 * The mark is a byte per class of CPUs (the CPU number % 8, xtable_used[]), each tested
 * before it is set, and a reader tests all eight at once (xtable_used_any): so the first
 * faults of two CPUs in different 2 MiB blocks of one fresh 1 GiB span write different bytes,
 * and neither reads the other's. Set before the slot, with a full barrier, and read with acquire: a walker
 * that finds no mark saw the table empty, as it would have by reading each slot. The byte
 * stores and the word load are atomics of two sizes on one location, which C11 leaves
 * undefined; the hardware orders them as any accesses to one line (as for xref_map).
 */
static void table_mark_used(struct pm_machine *m, pm_entry_t *pmd)
{
	_Atomic uint8_t *mark = &table_page(m, pmd)->xtable_used[pm_cpu_index(8)];

	if (!atomic_load_relaxed(mark))
		atomic_store_mb(mark, 1);
}

static bool table_used(struct pm_machine *m, pm_entry_t *pmd)
{
	return atomic_load_acquire(&table_page(m, pmd)->xtable_used_any) != 0;
}

static pm_entry_t *populate_upper(struct pm_mm *mm, pm_entry_t *slot, int level)
{
	pm_entry_t *table = next_table(mm_pgtables(mm)->m, slot), *new;
	uint64_t val, empty = 0;

	if (table)
		return table;
	new = table_alloc(mm_pgtables(mm)->m, level);
	if (!new)
		return NULL;
	val = (virt_to_pfn(mm_pgtables(mm)->m, new) << PAGE_SHIFT) | _PAGE_TABLE;
	if (mm_upper_cas(mm)) {
		if (atomic_cas_strong_mb(slot, &empty, val))
			return new;
		table_free_now(mm_pgtables(mm)->m, new);
		return next_table(mm_pgtables(mm)->m, slot);
	}
	pm_spin_lock(mm_page_table_lock(mm));
	table = next_table(mm_pgtables(mm)->m, slot);
	if (!table) {
		atomic_store_release(slot, val);
		table = new;
		new = NULL;
	}
	pm_spin_unlock(mm_page_table_lock(mm));
	if (new)
		table_free_now(mm_pgtables(mm)->m, new);
	return table;
}

/**
 * pm__pmd_span() - the PMD slot covering @addr, and in *@next where the walk of [@addr, @end)
 * goes on after it: the end of this PMD's span, or - when there is no PMD table - of the
 * missing table's whole span, which the caller skips.
 * Context: as pm__pmd_lookup().
 */
pm_entry_t *pm__pmd_span(struct pm_mm *mm, unsigned long addr, unsigned long end,
			 unsigned long *next)
{
	pm_entry_t *pmdp = pm__pmd_lookup(mm, addr);

	*next = span_end(addr, end, pmdp ? PMD_SIZE : PUD_SIZE);
	return pmdp;
}

/**
 * pm__pmd_span_mapped() - pm__pmd_span() for a walk that acts on no empty slot: the first slot
 * from *@addr on, before @end, that is not empty, with *@addr moved to its span's start and
 * *@next to its end; NULL when there is none before *@next (the end of a missing table's span,
 * or @end). A slot read empty may be filled meanwhile: as for the caller's own read of it.
 * Context: as pm__pmd_lookup().
 */
pm_entry_t *pm__pmd_span_mapped(struct pm_mm *mm, unsigned long *addr, unsigned long end,
				unsigned long *next)
{
	unsigned long a = *addr;

	for (;;) {
		pm_entry_t *pmdp = pm__pmd_lookup(mm, a);
		unsigned long table_end = span_end(a, end, PUD_SIZE);

		if (!pmdp || !table_used(mm_pgtables(mm)->m, pmdp)) {
			*next = table_end;
			return NULL;
		}
		for (; a < table_end; a = span_end(a, end, PMD_SIZE), pmdp++) {
			if (!pmd_none(pmdp_get(pmdp))) {
				*addr = a;
				*next = span_end(a, end, PMD_SIZE);
				return pmdp;
			}
		}
		if (a >= end) {
			*next = end;
			return NULL;
		}
	}
}

/**
 * pm__pmd_alloc() - the PMD slot for @addr, allocating the PUD and PMD tables on the way; a
 * slot left empty gets _PAGE_TABLE_USED, as Linux's table would now exist.
 * Context: mmap_lock held (read or write), or the faulting VMA's read lock.
 * Return: the slot, or NULL when memory ran out.
 */
pm_entry_t *pm__pmd_alloc(struct pm_mm *mm, unsigned long addr)
{
	pm_entry_t *pud, *pmd, *slot;
	uint64_t none = 0;

	pgtable_populate_assert_held(mm);
	pud = populate_upper(mm, &mm_pgtables(mm)->pgd[pgd_index(addr)], 3);
	if (!pud)
		return NULL;
	pmd = populate_upper(mm, &pud[pud_index(addr)], 2);
	if (!pmd)
		return NULL;
	slot = &pmd[pmd_index(addr)];
	/* Linux would have this table now: mark the slot if nothing else is there. A fault
	 * writes the slot anyway; a failed CAS means another writer (a PTE table, a leaf, the
	 * mark) came first, and every one of them marks the table as well. The table's marks
	 * are set only here: a slot that is not empty was handed out by a call that found it
	 * empty and marked the table, which stays marked while the slot is not empty (Used
	 * PMD tables above), so the faults that follow never read the table's descriptor. */
	if (!atomic_load_relaxed(slot)) {
		table_mark_used(mm_pgtables(mm)->m, pmd);
		atomic_cas_strong_mb(slot, &none, _PAGE_TABLE_USED);
	}
	return slot;
}

/**
 * pm__pmd_table_used() - would Linux have the PMD table that holds *@pmdp? Yes when one of its
 * entries is not 0: a mapping, a PTE table, or _PAGE_TABLE_USED (see pmd_none()). A table
 * the range design's mmap made early reads as missing until then.
 * Context: as pm__pmd_lookup(); a racing fault may mark it meanwhile, as a racing fault in
 * Linux may allocate it.
 */
bool pm__pmd_table_used(struct pm_mm *mm, pm_entry_t *pmdp)
{
	pm_entry_t *table = (pm_entry_t *)((uintptr_t)pmdp & ~(uintptr_t)(PAGE_SIZE - 1));

	if (!table_used(mm_pgtables(mm)->m, table))
		return false;
	for (unsigned i = 0; i < PTRS_PER_TABLE; i++)
		if (atomic_load_relaxed(&table[i]))
			return true;
	return false;
}

/*
 * A mapping over more than this many 1 GiB spans gets its PMD tables at its faults, as in
 * Linux: an mmap's own cost and memory stay bounded, whatever it reserves.
 */
#define EAGER_PMD_TABLES 8

/**
 * pm__upper_tables_prepare() - the range design's mmap (policy->eager_upper): fill the PGD
 * entries over [@start, @end) (a PUD table per 512 GiB range, at most one per range of the
 * address space) and, for a mapping of at most EAGER_PMD_TABLES spans, the PUD entries (a PMD
 * table per 1 GiB), so that the first faults and pins of a new mapping only read them, where
 * each would otherwise find an entry empty and one would write what the other reads (RadixVM
 * fills its radix nodes at mmap for the same reason). Its PMD tables are not marked: to
 * mincore() they are missing until a fault marks one (pmd_none(), _PAGE_TABLE_USED). Best
 * effort: without memory the faults fill what they need, as Linux's do. The tables stay
 * until the teardown (pm__free_pgd_range).
 * Context: mmap_lock (W) over the span.
 */
void pm__upper_tables_prepare(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	bool pmds = ((end - 1) >> PUD_SHIFT) - (start >> PUD_SHIFT) < EAGER_PMD_TABLES;
	pm_entry_t *pud;

	mmap_assert_write_locked(mm);
	/* Most mappings lie in one 1 GiB span whose PMD table an earlier one left: one walk. */
	if (!((start ^ (end - 1)) >> PUD_SHIFT) && pm__pmd_lookup(mm, start))
		return;
	for (unsigned long a = start; a < end; a = span_end(a, end, PGDIR_SIZE)) {
		pud = populate_upper(mm, &mm_pgtables(mm)->pgd[pgd_index(a)], 3);
		if (!pud)
			return;
		for (unsigned long u = a; pmds && u < span_end(a, end, PGDIR_SIZE);
		     u = span_end(u, end, PUD_SIZE))
			if (!populate_upper(mm, &pud[pud_index(u)], 2))
				return;
	}
}

struct pm_spinlock *pm__pmd_lockptr(struct pm_mm *mm, pm_entry_t *pmdp)
{
	return &table_page(mm_pgtables(mm)->m, pmdp)->ptl;
}

/*
 * pm__ptl_wait_readers() - the holder of @ptl, whose table has reader slots, waits until no
 * lockless reader copies through it ((R1)). A copy is at most a page: it spins, and yields
 * if the reader's thread is off its CPU. Context: @ptl held.
 */
void pm__ptl_wait_readers(struct pm_spinlock *ptl)
{
	struct pm_page *table = ptl_table_page(ptl);
	struct pm_machine *m = page_machine(table);
	struct pm_reader_slot *r;

	pm_assert_locked(ptl);
	r = atomic_load_acquire(&atomic_load_acquire(&m->xtable_readers)[table - m->pages]);
	for (unsigned i = 0; i < m->table_reader_slots; i++) {
		unsigned spins = 0;

		while (atomic_load_mb(&r[i].xin)) {
			if (++spins < PM_SPIN_BEFORE_YIELD)
				cpu_relax();
			else
				sched_yield();
		}
	}
}

/*
 * pm__table_readers_attach() - give the table that maps @addr in @mm its reader slots ((R2)),
 * if it has none: the index first, then the slots, are allocated here, outside any lock and
 * read section; they are published under the table's lock. A table unlinked meanwhile gets
 * them all the same, inside the read section, and its free frees them. Best effort: without
 * memory, copies through it take the lock, as before. Called outside any lock and read
 * section (it allocates).
 */
void pm__table_readers_attach(struct pm_mm *mm, unsigned long addr)
{
	struct pm_machine *m = mm_pgtables(mm)->m;
	struct pm_reader_slot *_Atomic *index = atomic_load_acquire(&m->xtable_readers);
	size_t size = m->table_reader_slots * sizeof(struct pm_reader_slot);
	struct pm_reader_slot *r = NULL;
	struct pm_spinlock *ptl = NULL;
	pm_entry_t *pmdp;

	if (!index) {
		size_t len = m->nr_pages * sizeof(*index);
		struct pm_reader_slot *_Atomic *none = NULL;

		if (pm__should_fail(m))
			return;
		index = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (index == MAP_FAILED)
			return;
		if (!atomic_cas_strong_mb(&m->xtable_readers, &none, index)) {
			munmap(index, len);
			index = none;
		} else {
			pm__trace_object(index, len, "pm_table_readers index");
		}
	}
	if (pm__should_fail(m) || posix_memalign((void **)&r, PM_CACHELINE, size))
		return;
	memset(r, 0, size);
	pm_rcu_read_lock();
	pmdp = pm__pmd_lookup(mm, addr);
	if (pmdp)
		ptl = pmd_walk_lock(m, pmdp, pmdp_get(pmdp));
	if (ptl) {
		struct pm_page *table = ptl_table_page(ptl);

		pm__ptl_lock(ptl);
		if (!(atomic_load_relaxed(&table->xaccess_threads) & TABLE_READERS)) {
			pm__trace_object(r, size, "pm_table_readers");
			atomic_store_release(&index[table - m->pages], r);
			atomic_or_mb(&table->xaccess_threads, TABLE_READERS);
			r = NULL;
		}
		pm_spin_unlock(ptl);
	}
	pm_rcu_read_unlock();
	free(r);
}

/* pm_machine_destroy(): every table is freed, and its slots with it; the index goes. */
void pm__table_readers_exit(struct pm_machine *m)
{
	struct pm_reader_slot *_Atomic *index = atomic_load_relaxed(&m->xtable_readers);

	if (!index)
		return;
	pm__trace_object_gone(index);
	munmap(index, m->nr_pages * sizeof(*index));
	m->xtable_readers = NULL;
}

/**
 * pm__pte_alloc() - make sure *@pmdp points to a PTE table, allocating it outside any lock.
 * @lockless: publish it by compare-and-swap without the PMD lock (the range design's
 *	lockless PTE installs, pgtable/pte_cas.h's pte_lockless()), so that the first faults of
 *	two 2 MiB blocks of one PMD table share no lock word; otherwise under the PMD lock, as
 *	Linux's pmd_install(). Either way the install is pmd_install_none(), as a THP leaf's is
 *	(fault/anon.c), so the two never both succeed; the table, zeroed while private, is
 *	published by the CAS as by populate_upper()'s.
 * Context: mmap_lock held, or the faulting VMA's read lock.
 * Return: 0 (a table is there, or a THP leaf is: the caller re-reads), -ENOMEM.
 */
int pm__pte_alloc(struct pm_mm *mm, pm_entry_t *pmdp, bool lockless)
{
	struct pm_spinlock *pml = NULL;
	pm_entry_t *new;
	pmd_t table;

	pgtable_populate_assert_held(mm);
	if (!pmd_none(pmdp_get(pmdp)))
		return 0;
	new = table_alloc(mm_pgtables(mm)->m, 1);
	if (!new)
		return -ENOMEM;
	table = (pmd_t){ (virt_to_pfn(mm_pgtables(mm)->m, new) << PAGE_SHIFT) | _PAGE_TABLE };
	if (!lockless) {
		pml = pm__pmd_lockptr(mm, pmdp);
		pm__ptl_lock(pml);
	}
	if (pmd_install_none(pmdp, table))
		new = NULL;
	if (pml)
		pm_spin_unlock(pml);
	if (new)
		table_free_now(mm_pgtables(mm)->m, new);
	return 0;
}

/**
 * pm__pte_offset_map_lock() - lock the PTE table under *@pmdp and return @addr's slot in it.
 *
 * Re-reads the PMD after taking the PTL and retries if it changed, so the caller never works
 * in a table that was unlinked meanwhile.
 * Context: as pm__pmd_lookup(): mmap_lock held, an i_mmap lock, or pm_rcu_read_lock().
 * Return: the slot with *@ptlp locked, or NULL if *@pmdp is not a PTE table.
 */
pm_entry_t *pm__pte_offset_map_lock(struct pm_mm *mm, pm_entry_t *pmdp, unsigned long addr,
				    struct pm_spinlock **ptlp)
{
	walk_assert_held(mm);
	for (;;) {
		pmd_t pmd = pmdp_get(pmdp);
		pm_entry_t *table;
		struct pm_spinlock *ptl;

		if (!pmd_table(pmd))
			return NULL;
		table = entry_table(mm_pgtables(mm)->m, pmd.val);
		ptl = &table_page(mm_pgtables(mm)->m, table)->ptl;
		pm__ptl_lock(ptl);
		if (likely(pmd_same(pmd, pmdp_get(pmdp)))) {
			*ptlp = ptl;
			return &table[pte_index(addr)];
		}
		pm_spin_unlock(ptl);
	}
}

/* Nothing in @table but 0 and marks (_PAGE_TABLE_USED, PMD tables only). */
static bool table_empty(pm_entry_t *table)
{
	for (unsigned i = 0; i < PTRS_PER_TABLE; i++)
		if (atomic_load_relaxed(&table[i]) & ~_PAGE_TABLE_USED)
			return false;
	return true;
}

/* What a PMD table holds besides empty slots, from one branch-free pass: a kept table is
 * looked at by every munmap that empties its span, mmap1's included. */
enum { TABLE_EMPTY, TABLE_MARKS, TABLE_USED };

static int pmd_table_contents(pm_entry_t *table)
{
	uint64_t all = 0;

	/* Eight entries a step: the loop is most of an empty munmap, and four independent ORs
	 * keep it from waiting on one chain. */
	_Static_assert(PTRS_PER_TABLE % 8 == 0, "whole steps");
	for (unsigned i = 0; i < PTRS_PER_TABLE; i += 8) {
		uint64_t a = atomic_load_relaxed(&table[i]) | atomic_load_relaxed(&table[i + 1]);
		uint64_t b = atomic_load_relaxed(&table[i + 2]) | atomic_load_relaxed(&table[i + 3]);
		uint64_t c = atomic_load_relaxed(&table[i + 4]) | atomic_load_relaxed(&table[i + 5]);
		uint64_t d = atomic_load_relaxed(&table[i + 6]) | atomic_load_relaxed(&table[i + 7]);

		all |= (a | b) | (c | d);
	}
	return all & ~_PAGE_TABLE_USED ? TABLE_USED : all ? TABLE_MARKS : TABLE_EMPTY;
}

/* Linux frees this PMD table: clear its marks, before it is freed or, in the range design,
 * kept, reading as missing (all 0). */
static void pmd_table_wipe(pm_entry_t *table)
{
	for (unsigned i = 0; i < PTRS_PER_TABLE; i++)
		if (atomic_load_relaxed(&table[i]))
			atomic_store_relaxed(&table[i], 0);
}

/*
 * May the table covering [@s, @s + @size) go? Only if its whole span lies in [@floor, @ceiling),
 * the gap between the VMAs around the freed range (@ceiling 0: no VMA above).
 */
static bool span_free(unsigned long s, unsigned long size, unsigned long floor,
		      unsigned long ceiling)
{
	return s >= floor && (!ceiling || s + size - 1 <= ceiling - 1);
}

/* Free the PTE tables under one PMD table whose 2 MiB span lies in the gap. */
static void free_pte_tables(struct pm_mm *mm, pm_entry_t *pmdt, unsigned long start,
			    unsigned long end, unsigned long floor, unsigned long ceiling)
{
	struct pm_spinlock *pml = &table_page(mm_pgtables(mm)->m, pmdt)->ptl;

	if (!table_used(mm_pgtables(mm)->m, pmdt))
		return; /* no slot of it was ever handed out: no PTE table in it */
	for (unsigned long a = start; a < end; a = span_end(a, end, PMD_SIZE)) {
		pm_entry_t *pmdp = &pmdt[pmd_index(a)];
		pmd_t pmd = pmdp_get(pmdp);
		pm_entry_t *pte;
		struct pm_spinlock *ptl;

		if (!pmd_table(pmd) || !span_free(a & PMD_MASK, PMD_SIZE, floor, ceiling))
			continue;
		pte = entry_table(mm_pgtables(mm)->m, pmd.val);
		ptl = &table_page(mm_pgtables(mm)->m, pte)->ptl;
		pm__ptl_lock(pml);
		pm__ptl_lock(ptl);
		set_pmd(pmdp, (pmd_t){ _PAGE_TABLE_USED }); /* the PMD table stays */
		pm_spin_unlock(ptl);
		pm_spin_unlock(pml);
		table_free_rcu(mm_pgtables(mm)->m, pte);
	}
}

/* Unlink and free an empty upper-level table from @slot (a PGD or PUD entry). */
static void free_upper(struct pm_mm *mm, pm_entry_t *slot, pm_entry_t *table)
{
	pm_spin_lock(mm_page_table_lock(mm));
	atomic_store_release(slot, 0);
	pm_spin_unlock(mm_page_table_lock(mm));
	table_free_rcu(mm_pgtables(mm)->m, table);
}

static void free_range(struct pm_mm *mm, unsigned long start, unsigned long end,
		       unsigned long floor, unsigned long ceiling, bool keep_upper)
{
	struct pm_machine *m = mm_pgtables(mm)->m;

	for (unsigned long g = start; g < end; g = span_end(g, end, PGDIR_SIZE)) {
		pm_entry_t *pgdp = &mm_pgtables(mm)->pgd[pgd_index(g)];
		pm_entry_t *pud = next_table(m, pgdp);
		unsigned long gend = span_end(g, end, PGDIR_SIZE);

		if (!pud)
			continue;
		for (unsigned long u = g; u < gend; u = span_end(u, gend, PUD_SIZE)) {
			pm_entry_t *pudp = &pud[pud_index(u)];
			pm_entry_t *pmd = next_table(m, pudp);
			int contents;

			if (!pmd)
				continue;
			free_pte_tables(mm, pmd, u, span_end(u, gend, PUD_SIZE), floor, ceiling);
			if (!span_free(u & PUD_MASK, PUD_SIZE, floor, ceiling))
				continue;
			contents = table_used(m, pmd) ? pmd_table_contents(pmd) : TABLE_EMPTY;
			if (contents == TABLE_USED)
				continue;
			pm_assert(!table_page(m, pmd)->huge_ptes);
			pm_assert(table_used(m, pmd) || pmd_table_contents(pmd) == TABLE_EMPTY);
			if (contents == TABLE_MARKS)
				pmd_table_wipe(pmd);
			if (table_used(m, pmd)) /* all empty now */
				atomic_store_release(&table_page(m, pmd)->xtable_used_any, 0);
			if (!keep_upper)
				free_upper(mm, pudp, pmd);
		}
		if (!keep_upper && span_free(g & PGDIR_MASK, PGDIR_SIZE, floor, ceiling) &&
		    table_empty(pud))
			free_upper(mm, pgdp, pud);
	}
}

/**
 * pm__free_pgd_range() - free the page tables in [@start, @end) that no VMA needs any more.
 * @floor, @ceiling: the end of the VMA below the range (0 if none) and the start of the VMA
 *	above it (0 if none); the mm layer finds them (Linux's free_pgtables/free_pgd_range).
 *
 * A table is freed when the whole span it covers (2 MiB for a PTE table, 1 GiB for a PMD
 * table, 512 GiB for a PUD table) lies in [@floor, @ceiling); its entries were zapped with the
 * VMAs. The page-table layer thus never looks at VMAs. With upper_cas (the range design) the
 * PUD and PMD tables stay until pm__free_pgtables(), a PMD table wiped to read as missing
 * (pm__pmd_table_used): mmap fills those entries anyway (pm__upper_tables_prepare), so
 * freeing them would only make the next mmap there allocate them again, and a PGD or PUD
 * entry is then written once in the mm's life. What is kept is bounded by the address space
 * the mm has mapped: a table per 1 GiB, none for spans no mapping ever reached.
 * Context: mmap_lock held (for read: downgraded by the writer that emptied the gap), no VMA
 * left in [@floor, @ceiling).
 */
void pm__free_pgd_range(struct pm_mm *mm, unsigned long start, unsigned long end,
			unsigned long floor, unsigned long ceiling)
{
	mmap_assert_locked(mm);
	free_range(mm, start, end, floor, ceiling, mm_upper_cas(mm));
}

/**
 * pm__pgd_range_has_tables() - could pm__free_pgd_range() over [@start, @end) free or wipe a
 * table, whatever the bounds? Without upper_cas, yes where a PUD table is reached. With it,
 * only a PMD table marked used can hold anything that goes (a PTE table, a mark):
 * the upper tables stay, and free_range() skips an unmarked table unread. So a munmap of
 * memory no fault reached does not look up the gap's bounds at all.
 * Context: as pm__free_pgd_range().
 */
bool pm__pgd_range_has_tables(struct pm_mm *mm, unsigned long start, unsigned long end)
{
	struct pm_machine *m = mm_pgtables(mm)->m;

	mmap_assert_locked(mm);
	for (unsigned long g = start; g < end; g = span_end(g, end, PGDIR_SIZE)) {
		pm_entry_t *pud = next_table(m, &mm_pgtables(mm)->pgd[pgd_index(g)]);
		unsigned long gend = span_end(g, end, PGDIR_SIZE);

		if (!pud)
			continue;
		if (!mm_upper_cas(mm))
			return true;
		for (unsigned long u = g; u < gend; u = span_end(u, gend, PUD_SIZE)) {
			pm_entry_t *pmd = next_table(m, &pud[pud_index(u)]);

			if (pmd && table_used(m, pmd))
				return true;
		}
	}
	return false;
}

/**
 * pm__free_pgtables() - the teardown's: free every table under the PGD.
 * Context: the mm is unreachable and has no VMA left.
 */
void pm__free_pgtables(struct pm_mm *mm)
{
	free_range(mm, 0, PM_TASK_SIZE, 0, 0, false);
}
