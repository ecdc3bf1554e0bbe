/* SPDX-License-Identifier: MIT */
/*
 * pgtable/pgtable.h - page-table entries: their bits (x86-64's layout), how they are read and
 * written (single 64-bit atomics, acquire/release), and the index and span arithmetic of the
 * four levels; what the page-table code sees of an address space (struct pm_pgtables) and the
 * lock assertions it makes; and the functions that allocate, walk, lock and free tables.
 */
#ifndef PM_PGTABLE_PGTABLE_H
#define PM_PGTABLE_PGTABLE_H

#include "mem/mem.h"

typedef _Atomic uint64_t pm_entry_t; /* a slot of a table at any level */

/* Entry bits, x86-64's layout. Upper levels use PRESENT|RW|USER and the table's pfn. */
#define _PAGE_PRESENT (1UL << 0)
#define _PAGE_RW (1UL << 1)
#define _PAGE_USER (1UL << 2) /* cleared for PROT_NONE: present, but no user access */
#define _PAGE_ACCESSED (1UL << 5)
#define _PAGE_DIRTY (1UL << 6)
#define _PAGE_PSE (1UL << 7)	 /* pmd: a 2 MiB leaf */
#define _PAGE_SPECIAL (1UL << 9) /* no counted mapping behind it: the zero page (PTE), the
				  * huge zero folio (PMD leaf) */
#define _PAGE_TABLE_USED (1UL << 58) /* a none PMD entry whose table Linux would have: see
				       * pmd_none() */
#define _PAGE_PFN_MASK 0x000ffffffffff000UL
#define _PAGE_TABLE (_PAGE_PRESENT | _PAGE_RW | _PAGE_USER | _PAGE_ACCESSED)

typedef struct { uint64_t val; } pte_t;
typedef struct { uint64_t val; } pmd_t;

static inline pte_t ptep_get(pm_entry_t *p) { return (pte_t){ atomic_load_acquire(p) }; }
static inline pmd_t pmdp_get(pm_entry_t *p) { return (pmd_t){ atomic_load_acquire(p) }; }
/* A re-check after a speculative reference must be ordered after it: see gup_fast.c. */
static inline pte_t ptep_get_mb(pm_entry_t *p) { return (pte_t){ atomic_load_mb(p) }; }
static inline pmd_t pmdp_get_mb(pm_entry_t *p) { return (pmd_t){ atomic_load_mb(p) }; }
static inline void set_pte(pm_entry_t *p, pte_t v) { atomic_store_release(p, v.val); }
static inline void set_pmd(pm_entry_t *p, pmd_t v) { atomic_store_release(p, v.val); }
/* Clear a PTE whose value the caller read, non-empty, under its PTL: every other PTE writer
 * holds the PTL, or is a lockless install that only fills an empty entry (fault/anon.c). */
static inline void pte_clear(pm_entry_t *p) { atomic_store_release(p, 0); }
/* A cleared PMD entry keeps the mark: its table stays, as Linux's does (_PAGE_TABLE_USED). */
static inline pmd_t pmdp_get_and_clear(pm_entry_t *p)
{
	return (pmd_t){ atomic_xchg_mb(p, _PAGE_TABLE_USED) };
}

static inline bool pte_none(pte_t p) { return p.val == 0; }
static inline bool pte_present(pte_t p) { return p.val & _PAGE_PRESENT; }
static inline bool pte_write(pte_t p) { return p.val & _PAGE_RW; }
static inline bool pte_user(pte_t p) { return p.val & _PAGE_USER; }
static inline bool pte_dirty(pte_t p) { return p.val & _PAGE_DIRTY; }
static inline bool pte_special(pte_t p) { return p.val & _PAGE_SPECIAL; }
static inline unsigned long pte_pfn(pte_t p) { return (p.val & _PAGE_PFN_MASK) >> PAGE_SHIFT; }
static inline bool pte_same(pte_t a, pte_t b) { return a.val == b.val; }
static inline pte_t pte_wrprotect(pte_t p) { return (pte_t){ p.val & ~_PAGE_RW }; }
static inline pte_t pte_mkwrite(pte_t p) { return (pte_t){ p.val | _PAGE_RW | _PAGE_DIRTY }; }
static inline pte_t pfn_pte(unsigned long pfn, uint64_t bits)
{
	return (pte_t){ (pfn << PAGE_SHIFT) | bits };
}

/*
 * The PTE a fault installs for @pfn: present and accessed; user-accessible if @user (the VMA
 * allows some access - a PROT_NONE mapping is present without _PAGE_USER, as mprotect leaves
 * it); writable and dirty as asked. The VMA's side is the caller's: vma_is_accessible().
 */
static inline pte_t mk_pte(unsigned long pfn, bool user, bool writable, bool dirty)
{
	uint64_t bits = _PAGE_PRESENT | _PAGE_ACCESSED;

	if (user)
		bits |= _PAGE_USER;
	if (writable)
		bits |= _PAGE_RW;
	if (dirty)
		bits |= _PAGE_DIRTY;
	return pfn_pte(pfn, bits);
}

/*
 * Migration entries (Linux's swapops.h migration entries): a non-present PTE naming the frame
 * a migration is moving away from (mm/migrate.c). It keeps the bits the mapping had -
 * _PAGE_RW (a writable migration entry), _PAGE_USER, _PAGE_DIRTY - and _PAGE_MIG_EXCL (the
 * page was AnonExclusive), so that the mapping is rebuilt as it was, on the new frame or, when
 * the migration fails, on the old one. The mapping's mapcount and reference went with the
 * unmap: zap clears such an entry and drops nothing. Faults wait for it to go
 * (pm__migration_entry_wait); GUP-fast sees a non-present entry and falls back.
 */
#define _PAGE_MIGRATION (1UL << 10) /* a software bit of x86-64's PTE */
#define _PAGE_MIG_EXCL (1UL << 11)

static inline bool is_migration_entry(pte_t p)
{
	return (p.val & (_PAGE_PRESENT | _PAGE_MIGRATION)) == _PAGE_MIGRATION;
}

static inline pte_t make_migration_entry(pte_t old, bool exclusive)
{
	return (pte_t){ (old.val & (_PAGE_PFN_MASK | _PAGE_RW | _PAGE_USER | _PAGE_DIRTY)) |
			_PAGE_MIGRATION | (exclusive ? _PAGE_MIG_EXCL : 0) };
}

static inline bool is_migration_entry_exclusive(pte_t p) { return p.val & _PAGE_MIG_EXCL; }

/* The present PTE that replaces migration entry @e, mapping @pfn with the bits @e kept. */
static inline pte_t migration_entry_to_pte(pte_t e, unsigned long pfn)
{
	return pfn_pte(pfn, _PAGE_PRESENT | _PAGE_ACCESSED |
			    (e.val & (_PAGE_RW | _PAGE_USER | _PAGE_DIRTY)));
}

/*
 * A hugetlb leaf being migrated (mm/migrate.c, migrate_hugetlb) is replaced by the same
 * migration entry at PMD level (Linux's hugetlb migration entry, a non-present huge PTE): not
 * none, not a leaf, not a table. Only hugetlb VMAs ever hold one - a THP is split first -, and
 * every PMD walker that can meet it knows it: faults and fork wait for it, slow GUP faults,
 * GUP-fast falls back, zap clears it (dropping nothing), mprotect changes its bits.
 */
static inline bool is_pmd_migration_entry(pmd_t p) { return is_migration_entry((pte_t){ p.val }); }

static inline pmd_t make_pmd_migration_entry(pmd_t old, bool exclusive)
{
	return (pmd_t){ make_migration_entry((pte_t){ old.val }, exclusive).val };
}

/*
 * _PAGE_TABLE_USED: a none PMD entry that records that Linux would have this PMD table. Linux
 * makes a PMD table only when something needs a slot in it (a fault, fork's copy, mremap's
 * target) and frees it only when its 1 GiB span is left without a VMA, and the difference is
 * visible: mincore() of a hugetlb mapping reads the page cache where no PMD table reaches, a
 * none entry (0) where one does. The range design makes PMD tables earlier, at mmap
 * (pm__upper_tables_prepare), so that the first faults in one 1 GiB span do not share its PUD
 * entry; pm__pmd_alloc() marks the slot it hands out instead, and a clear leaves the mark, so
 * a table is one Linux would have exactly when an entry in it is not 0 (pm__pmd_table_used).
 * The mark is none to every reader: pmd_none() is true, pmd_present() false. It is a
 * software bit of x86-64's entries, outside the pfn.
 */
static inline bool pmd_none(pmd_t p) { return !(p.val & ~_PAGE_TABLE_USED); }
static inline bool pmd_present(pmd_t p) { return p.val & _PAGE_PRESENT; }

/*
 * Install @v into the PMD entry at @p if it is none (0 or the mark): a compare-and-swap from
 * the none value seen, with a full barrier (it publishes a table or a leaf made while
 * private). Every install into a none PMD entry goes this way, under the PMD lock or, for
 * the range design's PTE tables, without it (pm__pte_alloc), so a lockless install and a
 * locked one never both succeed. Return: false if the entry held something (nothing written).
 */
static inline bool pmd_install_none(pm_entry_t *p, pmd_t v)
{
	uint64_t old = atomic_load_relaxed(p);

	do {
		if (!pmd_none((pmd_t){ old }))
			return false;
	} while (!atomic_cas_mb(p, &old, v.val));
	return true;
}
static inline bool pmd_leaf(pmd_t p) { return (p.val & (_PAGE_PRESENT | _PAGE_PSE)) ==
					    (_PAGE_PRESENT | _PAGE_PSE); }
static inline bool pmd_table(pmd_t p) { return pmd_present(p) && !(p.val & _PAGE_PSE); }
static inline bool pmd_write(pmd_t p) { return p.val & _PAGE_RW; }
static inline bool pmd_user(pmd_t p) { return p.val & _PAGE_USER; }
/* A special leaf maps the huge zero folio: no reference, no mapcount (Linux 6.18 marks it so). */
static inline bool pmd_special(pmd_t p) { return p.val & _PAGE_SPECIAL; }
static inline unsigned long pmd_pfn(pmd_t p) { return (p.val & _PAGE_PFN_MASK) >> PAGE_SHIFT; }
static inline bool pmd_same(pmd_t a, pmd_t b) { return a.val == b.val; }
static inline pmd_t pmd_wrprotect(pmd_t p) { return (pmd_t){ p.val & ~_PAGE_RW }; }
static inline pmd_t pmd_mkwrite(pmd_t p) { return (pmd_t){ p.val | _PAGE_RW | _PAGE_DIRTY }; }
static inline pmd_t pfn_pmd(unsigned long pfn, uint64_t bits)
{
	return (pmd_t){ (pfn << PAGE_SHIFT) | bits | _PAGE_PSE };
}

/* The leaf that replaces PMD migration entry @e, mapping the block at @pfn with @e's bits. */
static inline pmd_t pmd_migration_entry_to_pmd(pmd_t e, unsigned long pfn)
{
	return pfn_pmd(pfn, _PAGE_PRESENT | _PAGE_ACCESSED |
			    (e.val & (_PAGE_RW | _PAGE_USER | _PAGE_DIRTY)));
}

/* The 2 MiB leaf a fault installs for the block at @pfn, THP or hugetlb: as mk_pte(), but
 * always dirty (zap reads the dirty bit of PTEs only). */
static inline pmd_t mk_huge_pmd(unsigned long pfn, bool user, bool writable)
{
	uint64_t bits = _PAGE_PRESENT | _PAGE_ACCESSED | _PAGE_DIRTY;

	if (user)
		bits |= _PAGE_USER;
	if (writable)
		bits |= _PAGE_RW;
	return pfn_pmd(pfn, bits);
}

/* The leaf that maps the huge zero folio at @pfn: read-only, clean, special (set_huge_zero_folio). */
static inline pmd_t mk_huge_zero_pmd(unsigned long pfn, bool user)
{
	return pfn_pmd(pfn, _PAGE_PRESENT | _PAGE_ACCESSED | _PAGE_SPECIAL | (user ? _PAGE_USER : 0));
}

static inline unsigned pgd_index(unsigned long a) { return (a >> PGDIR_SHIFT) & 511; }
static inline unsigned pud_index(unsigned long a) { return (a >> PUD_SHIFT) & 511; }
static inline unsigned pmd_index(unsigned long a) { return (a >> PMD_SHIFT) & 511; }
static inline unsigned pte_index(unsigned long a) { return (a >> PAGE_SHIFT) & 511; }

/* End of the span of size @size containing @addr, clamped to @end (the kernel's pXd_addr_end). */
static inline unsigned long span_end(unsigned long addr, unsigned long end, unsigned long size)
{
	unsigned long boundary = (addr + size) & ~(size - 1);

	return boundary - 1 < end - 1 ? boundary : end;
}

/* The descriptor of the table page that holds slot @p. */
static inline struct pm_page *table_page(struct pm_machine *m, pm_entry_t *p)
{
	return pfn_to_page(m, virt_to_pfn(m, p));
}

/* The table an upper-level entry or a PMD table entry points to. */
static inline pm_entry_t *entry_table(struct pm_machine *m, uint64_t val)
{
	return pfn_to_virt(m, (val & _PAGE_PFN_MASK) >> PAGE_SHIFT);
}

/* ------------------------------------------------------------------------------------------
 * What pgtable/ knows of an address space (struct pm_mm is mm/mm.h's, a layer above).
 */
struct pm_mm;

/*
 * struct pm_pgtables - the fields of an address space that the page-table code reads: struct
 * pm_mm's first member, which names them in place too (mm/mm.h), so that mm_pgtables() is a
 * conversion to the first member. Its page_table_lock and upper_cas start the mm's second
 * cache line: mm_page_table_lock() and mm_upper_cas() find them there (mm/mm.h checks the
 * offsets).
 */
struct pm_pgtables {
	struct pm_machine *m;
	pm_entry_t *pgd;
};

#define PM_MM_PAGE_TABLE_LOCK_OFFSET PM_CACHELINE
#define PM_MM_UPPER_CAS_OFFSET (PM_CACHELINE + sizeof(struct pm_spinlock))

static inline struct pm_pgtables *mm_pgtables(struct pm_mm *mm)
{
	return (struct pm_pgtables *)mm;
}

static inline struct pm_spinlock *mm_page_table_lock(struct pm_mm *mm)
{
	return (struct pm_spinlock *)((char *)mm + PM_MM_PAGE_TABLE_LOCK_OFFSET);
}

static inline bool mm_upper_cas(const struct pm_mm *mm)
{
	return *(const bool *)((const char *)mm + PM_MM_UPPER_CAS_OFFSET);
}

/* What this thread holds of @mm: a run of its ranges (lib/rwsem.h's per-thread records, which
 * every layer's lock assertions read), or NULL. */
static inline struct pm_rwsem_run *pm__range_hold(const struct pm_mm *mm)
{
	if (pm__rwsem_runs[0].owner == mm)
		return &pm__rwsem_runs[0];
	if (pm__rwsem_runs[1].owner == mm)
		return &pm__rwsem_runs[1];
	return NULL;
}

/* Does this thread hold @mm's lock - some of its ranges, mmap_lock in Linux's design? */
static inline bool mm_locked(struct pm_mm *mm)
{
	return pm__range_hold(mm) != NULL;
}

static inline bool mm_write_locked(struct pm_mm *mm)
{
	const struct pm_rwsem_run *h = pm__range_hold(mm);

	return h && h->write && !h->downgraded;
}

/*
 * The lock assertions of page-table code (internal.h's list): they read only lib/rwsem.h's
 * per-thread records, so they sit at the lowest layer that asserts them.
 */
#define mmap_assert_locked(mm) pm_assert(mm_locked(mm))
#define mmap_assert_write_locked(mm) pm_assert(mm_write_locked(mm))
/*
 * Page-table walks: mmap_lock, an RCU read section (tables are freed through RCU), a VMA's read
 * lock (a fault: the tables under a live VMA are not freed), or - for truncation's zaps of
 * other mms - an i_mmap lock, which keeps the VMA and its tables.
 */
#define walk_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm_rcu_read_ongoing() || \
		  pm__i_mmap_held > 0 || (PM_DEBUG >= 1 && pm__vma_read_held_here()))
/* Populating page tables: mmap_lock, or a fault's VMA read lock (the tables under a live VMA
 * are never freed, and populating takes the parent table's lock). */
#define pgtable_populate_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__vma_read_held_here())
/* Splitting a PMD leaf: mmap_lock, a COW fault's VMA lock, or truncation's i_mmap lock. */
#define split_assert_held(mm) \
	pm_assert(mm_locked(mm) || pm__i_mmap_held > 0 || \
		  pm__vma_read_held_here())

/* // pgtable/pgtable.c */
__hidden pm_entry_t *pm__pgd_alloc(struct pm_machine *m);
__hidden void pm__pgd_free(struct pm_machine *m, pm_entry_t *pgd);
__hidden pm_entry_t *pm__pmd_lookup(struct pm_mm *mm, unsigned long addr);
__hidden pm_entry_t *pm__pmd_span(struct pm_mm *mm, unsigned long addr, unsigned long end,
				  unsigned long *next);
__hidden pm_entry_t *pm__pmd_span_mapped(struct pm_mm *mm, unsigned long *addr,
					 unsigned long end, unsigned long *next);
/*
 * Walk [@start, @end) of @mm one PMD span at a time, declaring @addr and @next: the body runs
 * for each span whose PMD slot is not empty (pmd_none), with @pmdp that slot; spans without
 * a PMD table, and empty slots, are skipped - so a kept table that no fault reached costs a
 * load per slot, not a walk. The body may set @next = @addr to look at the same span again.
 */
#define for_each_pmd_span(mm, addr, next, start, end, pmdp) \
	for (unsigned long addr = (start), next; addr < (end); addr = next) \
		if (!((pmdp) = pm__pmd_span_mapped((mm), &addr, (end), &next))) \
			continue; \
		else
__hidden pm_entry_t *pm__pmd_alloc(struct pm_mm *mm, unsigned long addr);
__hidden void pm__upper_tables_prepare(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden bool pm__pmd_table_used(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden int pm__pte_alloc(struct pm_mm *mm, pm_entry_t *pmdp, bool lockless);
__hidden pm_entry_t *pm__pte_alloc_one(struct pm_machine *m);
__hidden void pm__pte_free_now(struct pm_machine *m, pm_entry_t *table);
__hidden pm_entry_t *pm__pte_offset_map_lock(struct pm_mm *mm, pm_entry_t *pmdp,
					     unsigned long addr, struct pm_spinlock **ptlp);
__hidden struct pm_spinlock *pm__pmd_lockptr(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__ptl_wait_readers(struct pm_spinlock *ptl);
__hidden void pm__table_readers_attach(struct pm_mm *mm, unsigned long addr);
__hidden void pm__table_readers_exit(struct pm_machine *m);
__hidden void pm__free_pgd_range(struct pm_mm *mm, unsigned long start, unsigned long end,
				 unsigned long floor, unsigned long ceiling);
__hidden bool pm__pgd_range_has_tables(struct pm_mm *mm, unsigned long start, unsigned long end);
__hidden void pm__free_pgtables(struct pm_mm *mm);

/* // pgtable/huge_memory.c */
__hidden void pm__pgtable_deposit(struct pm_mm *mm, pm_entry_t *pmdp, pm_entry_t *table);
__hidden void pm__pgtable_deposit_folio(struct pm_machine *m, struct pm_folio *folio,
				       pm_entry_t *table);
__hidden void pm__pgtable_deposit_unfold(struct pm_mm *mm, pm_entry_t *pmdp,
					struct pm_folio *folio);
__hidden pm_entry_t *pm__pgtable_withdraw(struct pm_mm *mm, pm_entry_t *pmdp,
					  struct pm_folio *folio);
__hidden void pm__split_huge_pmd(struct pm_mm *mm, pm_entry_t *pmdp);
__hidden void pm__split_huge_pmd_folio(struct pm_mm *mm, pm_entry_t *pmdp,
				       const struct pm_folio *folio);
__hidden void pm__split_huge_pmd_at(struct pm_mm *mm, unsigned long addr);

/*
 * ---- A table lock and its lockless readers (the argument: pgtable.c, "Lockless readers") ----
 */
#define TABLE_READERS 0x8000 /* xaccess_threads: the table has reader slots */

/*
 * The lock of the table that @pmd, the entry at @pmdp, leads a walk to: a leaf's PMD lock
 * (pm__pmd_lockptr), a PTE table's PTL, or NULL for an empty entry.
 */
static inline struct pm_spinlock *pmd_walk_lock(struct pm_machine *m, pm_entry_t *pmdp, pmd_t pmd)
{
	if (pmd_leaf(pmd))
		return &table_page(m, pmdp)->ptl;
	if (pmd_table(pmd))
		return &table_page(m, entry_table(m, pmd.val))->ptl;
	return NULL;
}

/* The table whose PTL (or PMD lock) @ptl is: the lock lives in the table page's descriptor. */
static inline struct pm_page *ptl_table_page(struct pm_spinlock *ptl)
{
	return container_of(ptl, struct pm_page, ptl);
}

/*
 * pm__ptl_lock() - take a PTE table's PTL or a PMD table's lock, as every writer of the
 * table's entries does; then, if the table has lockless readers, wait for those inside.
 */
static inline void pm__ptl_lock(struct pm_spinlock *ptl)
{
	pm_spin_lock(ptl); /* sequentially consistent (spinlock.h) */
	if (unlikely(atomic_load_relaxed(&ptl_table_page(ptl)->xaccess_threads) & TABLE_READERS))
		pm__ptl_wait_readers(ptl);
}

/*
 * pm__ptl_read_begin() - copy through the table of @ptl without taking the lock, as a CPU
 * does through its TLB: if the table has reader slots, mark this CPU's and check that no
 * writer holds the lock. The caller then re-reads the entries it acts on, copies, and ends
 * with pm__ptl_read_end(*@slot).
 * Context: pm_rcu_read_lock() (the table and its slots stay memory); nothing else is taken
 * until the end.
 * Return: false: take the lock instead (no slots yet, a writer holds the lock, or another
 * thread of this CPU's class is inside).
 */
static inline bool pm__ptl_read_begin(struct pm_machine *m, struct pm_spinlock *ptl,
				      struct pm_reader_slot **slot)
{
	struct pm_page *table = ptl_table_page(ptl);
	struct pm_reader_slot *s;
	unsigned long none = 0;

	rcu_assert_held();
	if (!(atomic_load_acquire(&table->xaccess_threads) & TABLE_READERS))
		return false;
	s = atomic_load_acquire(&atomic_load_acquire(&m->xtable_readers)[table - m->pages]);
	s += pm__this_cpu(m) % m->table_reader_slots;
	if (!atomic_cas_mb(&s->xin, &none, 1))
		return false;
	if (unlikely(atomic_load_mb(&ptl->xlocked))) { /* (R1) */
		atomic_store_release(&s->xin, 0);
		return false;
	}
	*slot = s;
	return true;
}

static inline void pm__ptl_read_end(struct pm_reader_slot *slot)
{
	atomic_store_release(&slot->xin, 0);
}

/* This thread's bit among a table's copiers (xaccess_threads): one of its pin tag's. */
static inline unsigned pm__ptl_reader_bit(void)
{
	return 1u << (pm__this_pin_tag() & 7);
}

/*
 * pm__ptl_mark_reader() - a copy under @ptl: note this thread among the table's copiers, a
 * bit of its pin tag standing for it (cheaper than asking for the CPU on every copy; two
 * threads that share a bit count as one, and their table keeps the lock).
 * Context: @ptl held. Return: true if a second thread copies through a table without reader
 * slots: the caller attaches them once it has left the lock and its read section.
 */
static inline bool pm__ptl_mark_reader(struct pm_spinlock *ptl)
{
	struct pm_page *table = ptl_table_page(ptl);
	unsigned bit = pm__ptl_reader_bit();
	unsigned seen = atomic_load_relaxed(&table->xaccess_threads);

	pm_assert_locked(ptl);
	if (likely(seen & bit))
		return false;
	seen |= bit;
	atomic_store_relaxed(&table->xaccess_threads, (uint16_t)seen);
	return !(seen & TABLE_READERS) && (seen & (seen - 1));
}

#endif /* PM_PGTABLE_PGTABLE_H */
