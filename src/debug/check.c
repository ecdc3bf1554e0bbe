// SPDX-License-Identifier: MIT
/*
 * check.c - pm_machine_check(): walk a quiescent machine and verify the invariants of
 * internal.h against what the page tables, page caches and free lists actually hold.
 *
 *  (T) every frame is exactly one of: free (buddy block or per-CPU cache), a page table
 *      reachable from some address space, part of an allocated folio, the zero page;
 *  (Z) special entries map only the zero pages: a PTE the 4 KiB one, a PMD leaf (in a private
 *      anonymous VMA of an address space that holds a use of it) the machine's huge zero
 *      folio, whose mapcounts stay 0 and whose refcount covers its pins plus one while it is
 *      current; it is current exactly while the users the machine counts, as many as the
 *      address spaces flagged, are more than none;
 *  (F) the free frames found equal pm_machine_free_pages();
 *  (M) each page's mapcount equals the PTEs found mapping it, each large folio's
 *      entire_mapcount the PMD leaves found;
 *  (R) refcount >= mappings + page-cache reference, and for a large folio the rest covers the
 *      pincount; for a small folio the rest is gets + 1024 * pins (not checkable separately);
 *  (X) a page mapped writable by a private mapping is anonymous and AnonExclusive, and an
 *      AnonExclusive page (or PMD-mapped THP) is mapped by one address space only;
 *  (C) every folio in a shmem page cache carries PG_shmem, points back to its object and index,
 *      and the cache's page count matches;
 *  (D) each 2 MiB THP leaf has exactly one empty deposited PTE table, on its PMD table or
 *      parked on its folio (hugetlb leaves have none);
 *  (H) the hugetlb pool: its free pages are whole order-9 PG_hugetlb folios with refcount 0,
 *      as many as it counts; free + in use = total; reserved <= free; hugetlb folios are
 *      mapped only at PMD level, in hugetlb VMAs, and only hugetlb VMAs map at PMD level
 *      without a deposit;
 *  (V) every VMA is page aligned and not empty, and a hugetlb VMA's start, end and file offset
 *      are 2 MiB aligned (else a PMD leaf reaches outside it); each address space holds as
 *      many VMAs as its count says (mm_map_count(): the range design's units, exact), none of
 *      them left uncharged.
 * Deferred frees are flushed first (pm_rcu_barrier), so RCU-pending tables count as free.
 *
 * Cost: in proportion to the memory ever used, not to the machine's size. Only the frames
 * below the allocator's frontier have been handed out (page_alloc.c); the per-frame arrays
 * cover those, the frame walk stops there, and the never-used frames above it count as free
 * by arithmetic. An entry that maps a frame above the frontier is an error.
 */
#include "gup/gup.h"

struct check {
	struct pm_machine *m;
	unsigned long nr;     /* frames below the frontier: the arrays' length */
	int *ptes;	      /* PTE mappings found, per pfn */
	int *pmds;	      /* PMD leaves found, per head pfn */
	struct pm_mm **owner; /* the address space that mapped the pfn first */
	uint8_t *table;	      /* 1 = reachable page table */
	int *cache;	      /* page-cache references found, per head pfn */
	long errors;
};

#define complain(c, ...) \
	do { \
		if ((c)->errors++ < 20) { \
			fprintf(stderr, "pinmm: check: " __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static void note_owner(struct check *c, unsigned long pfn, struct pm_mm *mm, bool exclusive)
{
	if (!c->owner[pfn])
		c->owner[pfn] = mm;
	else if (c->owner[pfn] != mm && exclusive)
		complain(c, "AnonExclusive pfn %lu mapped by two address spaces", pfn);
}

/* Note a reachable page table; false (after complaining) if it cannot be one. */
static bool mark_table(struct check *c, unsigned long pfn)
{
	if (pfn >= c->nr) {
		complain(c, "page table pfn %lu was never allocated", pfn);
		return false;
	}
	if (pfn_in_movable_zone(c->m, pfn))
		complain(c, "page table pfn %lu in the movable zone", pfn);
	c->table[pfn] = 1;
	return true;
}

static void check_leaf(struct check *c, struct pm_mm *mm, struct pm_vma *vma,
		       unsigned long addr, uint64_t e, bool pmd)
{
	unsigned long pfn = (e & _PAGE_PFN_MASK) >> PAGE_SHIFT;
	struct pm_page *page;
	struct pm_folio *folio;
	bool excl;

	if (is_migration_entry((pte_t){ e })) {
		/* Every migration ends before the call that began it: none may be left (a PMD
		 * one is a hugetlb page's, mm/migrate.c). */
		complain(c, "%s migration entry at %#lx (pfn %lu) on a quiescent machine",
			 pmd ? "PMD" : "PTE", addr, pfn);
		return;
	}
	if (!(e & _PAGE_PRESENT)) {
		complain(c, "non-present entry %#lx of no known kind at %#lx", (unsigned long)e,
			 addr);
		return;
	}
	if (pfn >= c->m->nr_pages) {
		complain(c, "entry at %#lx maps pfn %lu beyond memory", addr, pfn);
		return;
	}
	if (pfn >= c->nr) {
		complain(c, "entry at %#lx maps pfn %lu, never allocated", addr, pfn);
		return;
	}
	page = pfn_to_page(c->m, pfn);
	if (e & _PAGE_SPECIAL) {
		/* (Z): a PTE maps the 4 KiB zero page, a PMD leaf the huge zero folio's head;
		 * neither counts a mapping. */
		if (!pmd && !page_test(page, PG_zero))
			complain(c, "special entry at %#lx does not map the zero page", addr);
		if (pmd && (!atomic_load_relaxed(&mm->xhuge_zero) ||
			    (struct pm_folio *)page != atomic_load_relaxed(&c->m->xhuge_zero_folio) ||
			    !page_test(page, PG_huge_zero)))
			complain(c, "special PMD leaf at %#lx does not map the huge zero folio of a "
				    "user", addr);
		if (pmd && (!vma || !vma_is_anonymous(vma) || (vma->flags & VM_SHARED)))
			complain(c, "huge zero folio mapped at %#lx outside a private anonymous VMA",
				 addr);
		if (e & _PAGE_RW)
			complain(c, "zero page mapped writable at %#lx", addr);
		return;
	}
	folio = page_folio(page);
	if (folio_ref_count(folio) <= 0) {
		complain(c, "entry at %#lx maps pfn %lu whose folio is free", addr, pfn);
		return;
	}
	if (vma && folio_test_hugetlb(folio) != is_vm_hugetlb_page(vma))
		complain(c, "entry at %#lx: %s folio in a%s VMA", addr,
			 folio_test_hugetlb(folio) ? "hugetlb" : "non-hugetlb",
			 is_vm_hugetlb_page(vma) ? " hugetlb" : " non-hugetlb");
	if (folio_test_hugetlb(folio) && !pmd)
		complain(c, "hugetlb pfn %lu mapped by a PTE at %#lx", pfn, addr);
	if (!vma) {
		complain(c, "entry at %#lx outside every VMA", addr);
	} else if ((e & _PAGE_RW) && !(vma->flags & VM_SHARED)) {
		if (!folio_test_anon(folio) || !page_anon_exclusive(page))
			complain(c, "pfn %lu mapped writable at %#lx but not exclusive anon", pfn,
				 addr);
	}
	excl = folio_test_anon(folio) && page_anon_exclusive(page);
	if (pmd) {
		if (folio_order(folio) != HPAGE_PMD_ORDER || page != &folio->page)
			complain(c, "PMD leaf at %#lx does not map a whole THP", addr);
		c->pmds[pfn]++;
		note_owner(c, pfn, mm, excl);
	} else {
		c->ptes[pfn]++;
		note_owner(c, pfn, mm, excl);
	}
}

/* A deposited table: allocated, a table nobody else holds, empty. Return: false if unusable. */
static bool check_deposit(struct check *c, struct pm_page *p)
{
	unsigned long pfn = page_to_pfn(c->m, p);
	pm_entry_t *t = page_address(c->m, p);

	if (pfn >= c->nr) {
		complain(c, "deposited table pfn %lu was never allocated", pfn);
		return false;
	}
	if (!page_test(p, PG_table) || c->table[pfn])
		complain(c, "deposited table pfn %lu is not a free-standing table", pfn);
	c->table[pfn] = 1;
	for (unsigned i = 0; i < PTRS_PER_TABLE; i++)
		if (atomic_load_relaxed(&t[i])) {
			complain(c, "deposited table pfn %lu is not empty", pfn);
			break;
		}
	return true;
}

/*
 * A PMD table's 2 MiB leaves each have one deposit: parked on the leaf's folio, or on the
 * table's list (pgtable/huge_memory.c, "Deposit").
 */
static void check_deposits(struct check *c, pm_entry_t *pmd)
{
	struct pm_machine *m = c->m;
	unsigned leaves = 0, deposits = 0;

	for (unsigned d = 0; d < PTRS_PER_TABLE; d++) {
		pmd_t e = { atomic_load_relaxed(&pmd[d]) };
		struct pm_folio *folio;

		if (!pmd_leaf(e) || pmd_pfn(e) >= c->nr)
			continue;
		folio = page_folio(pfn_to_page(m, pmd_pfn(e)));
		if (folio_test_hugetlb(folio))
			continue;
		if (folio_page(folio, 1)->thp_deposit)
			check_deposit(c, folio_page(folio, 1)->thp_deposit);
		else
			leaves++;
	}
	for (struct pm_page *p = table_page(m, pmd)->huge_ptes; p && deposits <= leaves;
	     p = p->deposit_next, deposits++)
		if (!check_deposit(c, p))
			break;
	if (deposits != leaves)
		complain(c, "PMD table with %u leaves without a deposit on their folio holds %u "
			 "deposited tables", leaves, deposits);
}

static void check_vmas(struct check *c, struct pm_mm *mm)
{
	for (struct pm_vma *vma = pm__find_vma(mm, 0); vma; vma = pm__vma_next(mm, vma)) {
		if (vma->start >= vma->end || ((vma->start | vma->end) & ~PAGE_MASK))
			complain(c, "VMA [%#lx, %#lx) is empty or not page aligned", vma->start,
				 vma->end);
		else if ((vma->flags & VM_HUGETLB) &&
			 (((vma->start | vma->end) & ~PMD_MASK) ||
			  (vma->pgoff & (HPAGE_PMD_NR - 1))))
			complain(c, "hugetlb VMA [%#lx, %#lx) pgoff %lu is not 2 MiB aligned",
				 vma->start, vma->end, vma->pgoff);
	}
}

static void check_mm(struct check *c, struct pm_mm *mm)
{
	struct pm_machine *m = c->m;

	check_vmas(c, mm);
	if (!mark_table(c, virt_to_pfn(m, mm->pgd)))
		return;
	for (unsigned g = 0; g < PTRS_PER_TABLE; g++) {
		uint64_t ge = atomic_load_relaxed(&mm->pgd[g]);
		pm_entry_t *pud;

		if (!ge)
			continue;
		pud = entry_table(m, ge);
		if (!mark_table(c, virt_to_pfn(m, pud)))
			continue;
		for (unsigned u = 0; u < PTRS_PER_TABLE; u++) {
			uint64_t ue = atomic_load_relaxed(&pud[u]);
			pm_entry_t *pmd;

			if (!ue)
				continue;
			pmd = entry_table(m, ue);
			if (!mark_table(c, virt_to_pfn(m, pmd)))
				continue;
			check_deposits(c, pmd);
			for (unsigned d = 0; d < PTRS_PER_TABLE; d++) {
				uint64_t de = atomic_load_relaxed(&pmd[d]);
				unsigned long base = ((unsigned long)g << PGDIR_SHIFT) |
						     ((unsigned long)u << PUD_SHIFT) |
						     ((unsigned long)d << PMD_SHIFT);
				pm_entry_t *pte;

				if (pmd_none((pmd_t){ de }))
					continue;
				if ((de & _PAGE_PSE) || is_pmd_migration_entry((pmd_t){ de })) {
					struct pm_vma *vma = pm__find_vma_intersection(mm, base,
										       base + 1);
					if (vma && (vma->start > base || vma->end < base + PMD_SIZE))
						complain(c, "PMD leaf at %#lx straddles a VMA", base);
					check_leaf(c, mm, vma, base, de, true);
					continue;
				}
				pte = entry_table(m, de);
				if (!mark_table(c, virt_to_pfn(m, pte)))
					continue;
				if (!page_test(table_page(m, pte), PG_table))
					complain(c, "PTE table at %#lx lacks PG_table", base);
				for (unsigned t = 0; t < PTRS_PER_TABLE; t++) {
					uint64_t te = atomic_load_relaxed(&pte[t]);
					unsigned long a = base | ((unsigned long)t << PAGE_SHIFT);

					if (te)
						check_leaf(c, mm, pm__find_vma_intersection(mm, a, a + 1),
							   a, te, false);
				}
			}
		}
	}
}

static void check_shmem(struct check *c, struct pm_shmem *f)
{
	/* The pages the size covers, a partial last page included (as shmem.c counts them);
	 * a hugetlb object's cache is indexed in 2 MiB pages. */
	unsigned long found = 0,
		      size = f->hugetlb ? atomic_load_relaxed(&f->xsize) >> PMD_SHIFT :
					  (atomic_load_relaxed(&f->xsize) + PAGE_SIZE - 1) >> PAGE_SHIFT;

	/* Every index up to the size, and a little beyond (nothing may be there). */
	for (unsigned long i = 0; i < size + 64; i++) {
		struct pm_folio *folio = NULL;

		pm_spin_lock(&f->tree_lock);
		folio = pm__shmem_peek(f, i);
		pm_spin_unlock(&f->tree_lock);
		if (!folio)
			continue;
		found++;
		if (i >= size)
			complain(c, "shmem page at index %lu beyond size %lu", i, size);
		if (!page_test(&folio->page, PG_shmem) || folio->page.mapping != f ||
		    folio->page.index != i)
			complain(c, "shmem page at index %lu has wrong identity", i);
		if (folio_test_hugetlb(folio) != f->hugetlb)
			complain(c, "shmem page at index %lu: hugetlb %d in an object of hugetlb %d",
				 i, folio_test_hugetlb(folio), f->hugetlb);
		if (page_to_pfn(c->m, &folio->page) >= c->nr)
			complain(c, "shmem page at index %lu was never allocated", i);
		else
			c->cache[page_to_pfn(c->m, &folio->page)]++;
	}
	if (found != pm__shmem_nr_pages(f))
		complain(c, "shmem object holds %lu pages, counts %lu", found,
			 pm__shmem_nr_pages(f));
}

static void check_frames(struct check *c)
{
	struct pm_machine *m = c->m;
	unsigned long free_found = 0, pool_free = 0, pool_used = 0;

	for (unsigned long pfn = 0; pfn < c->nr;) {
		struct pm_page *page = pfn_to_page(m, pfn);
		unsigned long unused_end = pm__frames_unused_end(m, pfn);
		struct pm_folio *folio;
		unsigned order;
		long maps = 0;
		int ref;

		if (unused_end != pfn) { /* a zone's never-used frames: free */
			unused_end = min(unused_end, c->nr);
			free_found += unused_end - pfn;
			pfn = unused_end;
			continue;
		}
		if (pm__frame_is_free(page, &order)) {
			free_found += 1UL << order;
			pfn += 1UL << order;
			continue;
		}
		if (page_test(page, PG_table)) {
			if (!c->table[pfn])
				complain(c, "page table pfn %lu is reachable from no address space",
					 pfn);
			pfn++;
			continue;
		}
		if (page_test(page, PG_zero)) {
			pfn++;
			continue;
		}
		folio = (struct pm_folio *)page;
		ref = folio_ref_count(folio);
		if (folio_test_hugetlb(folio)) {
			if (folio_order(folio) != HPAGE_PMD_ORDER || pfn + HPAGE_PMD_NR > c->nr) {
				complain(c, "hugetlb pfn %lu is not a whole 2 MiB folio", pfn);
				pfn++;
				continue;
			}
			if (ref == 0) { /* free in the pool */
				if (c->pmds[pfn] || c->cache[pfn] ||
				    atomic_load_relaxed(&page->xpincount))
					complain(c, "free hugetlb pfn %lu is mapped, cached or pinned",
						 pfn);
				pool_free++;
				pfn += HPAGE_PMD_NR;
				continue;
			}
			pool_used++;
		}
		if (ref <= 0 || (atomic_load_relaxed(&page->xcompound_head) & 1) ||
		    folio_order(folio) > PM_MAX_ORDER || pfn + folio_nr_pages(folio) > c->nr) {
			complain(c, "pfn %lu is neither free, a table, nor a folio (leaked?)", pfn);
			pfn++;
			continue;
		}
		for (unsigned long i = 0; i < folio_nr_pages(folio); i++) {
			struct pm_page *p = folio_page(folio, i);

			if (i && atomic_load_relaxed(&p->xcompound_head) != ((uintptr_t)folio | 1))
				complain(c, "tail pfn %lu does not point to its head", pfn + i);
			if (atomic_load_relaxed(&p->xmapcount) != c->ptes[pfn + i])
				complain(c, "pfn %lu mapcount %d, %d PTEs map it", pfn + i,
					 atomic_load_relaxed(&p->xmapcount), c->ptes[pfn + i]);
			maps += c->ptes[pfn + i];
		}
		if (folio_hot(folio)) {
			/* mem/folio_hot.c: the bias is held, a state serves it, and (H3) a folio
			 * that no page table maps has left hot mode. */
			struct pm_folio_hot *_Atomic *t = atomic_load_relaxed(&m->xhot);

			if (atomic_load_relaxed(&page->xrefcount) < PM_HOT_BIAS || !t ||
			    !atomic_load_relaxed(&t[pfn]))
				complain(c, "hot folio pfn %lu without its bias or state (refcount %d, "
					    "flags %#lx, state %p)", pfn,
					 atomic_load_relaxed(&page->xrefcount),
					 atomic_load_relaxed(&page->xflags),
					 t ? (void *)atomic_load_relaxed(&t[pfn]) : NULL);
			else if (!maps && !c->pmds[pfn])
				complain(c, "hot folio pfn %lu is not mapped (its bias leaked)", pfn);
		}
		if (is_huge_zero_folio(folio)) {
			int cur = folio == atomic_load_relaxed(&m->xhuge_zero_folio);

			/* Not the current one: only GUP's references keep it (a pin that
			 * outlived every user). */
			if (folio_order(folio) != HPAGE_PMD_ORDER || folio_test_anon(folio) ||
			    ref < cur + atomic_load_relaxed(&page->xpincount))
				complain(c, "huge zero folio pfn %lu: order %u, refcount %d < %d + "
					    "pins %d", pfn, folio_order(folio), ref, cur,
					 atomic_load_relaxed(&page->xpincount));
		}
		if (folio_test_large(folio)) {
			int entire = atomic_load_relaxed(&page->xentire_mapcount);
			int pins = pm__folio_hot_pincount(folio);

			if (entire != c->pmds[pfn])
				complain(c, "THP pfn %lu entire_mapcount %d, %d PMDs map it", pfn,
					 entire, c->pmds[pfn]);
			maps += c->pmds[pfn];
			if (pins < 0 || ref < maps + c->cache[pfn] + pins)
				complain(c, "THP pfn %lu refcount %d < maps %ld + cache %d + pins %d",
					 pfn, ref, maps, c->cache[pfn], pins);
		} else if (ref < maps + c->cache[pfn]) {
			complain(c, "pfn %lu refcount %d < maps %ld + cache %d", pfn, ref, maps,
				 c->cache[pfn]);
		}
		if (page_test(page, PG_shmem) && !c->cache[pfn])
			complain(c, "pfn %lu flagged in a page cache but in none", pfn);
		pfn += folio_nr_pages(folio);
	}
	pm__hugetlb_lock_exact(m);
	if (pool_free != m->hugetlb_nr_free || pool_free + pool_used != m->hugetlb_total ||
	    m->hugetlb_resv > (long)m->hugetlb_nr_free)
		complain(c, "hugetlb pool: found %lu free + %lu in use; counts %lu free of %lu, "
			    "%ld reserved", pool_free, pool_used, m->hugetlb_nr_free,
			 m->hugetlb_total, m->hugetlb_resv);
	pm__hugetlb_unlock_exact(m);
	free_found += m->nr_pages - c->nr; /* never used: free */
	if (free_found != pm__nr_free_frames(m))
		complain(c, "found %lu free frames, the allocator counts %zu", free_found,
			 pm__nr_free_frames(m));
}

static void check_vma_count(struct check *c, struct pm_mm *mm)
{
	unsigned long n = 0, count = mm_map_count(mm);

	for (struct pm_vma *vma = pm__find_vma(mm, 0); vma; vma = pm__vma_next(mm, vma)) {
		n++;
		if (vma->uncounted)
			complain(c, "VMA [%#lx, %#lx) left uncharged", vma->start, vma->end);
	}
	if (n != count)
		complain(c, "address space holds %lu VMAs, counts %lu", n, count);
}

int pm_machine_check(struct pm_machine *m)
{
	struct check c = { .m = m };
	unsigned long users = 0;
	struct pm_list *pos;

	if (unlikely(!m))
		return -EINVAL;
	pm_rcu_barrier();
	c.nr = pm__frames_touched(m);
	c.ptes = calloc(c.nr + 1, sizeof(*c.ptes));
	c.pmds = calloc(c.nr + 1, sizeof(*c.pmds));
	c.cache = calloc(c.nr + 1, sizeof(*c.cache));
	c.owner = calloc(c.nr + 1, sizeof(*c.owner));
	c.table = calloc(c.nr + 1, 1);
	if (!c.ptes || !c.pmds || !c.cache || !c.owner || !c.table) {
		fprintf(stderr, "pinmm: check: out of memory\n");
		c.errors = 1;
		goto out;
	}
	pthread_mutex_lock(&m->lock);
	pm_list_for_each(pos, &m->mms) {
		struct pm_mm *mm = pm_list_entry(pos, struct pm_mm, link);

		check_mm(&c, mm);
		check_vma_count(&c, mm);
		users += atomic_load_relaxed(&mm->xhuge_zero);
	}
	/* (Z) the huge zero folio is current exactly while some address space uses it. */
	if (users != m->huge_zero_users || !users != !atomic_load_relaxed(&m->xhuge_zero_folio))
		complain(&c, "huge zero folio: %lu address spaces use it, %lu counted, %s", users,
			 m->huge_zero_users,
			 atomic_load_relaxed(&m->xhuge_zero_folio) ? "made" : "none");
	pm_list_for_each(pos, &m->shmems)
		check_shmem(&c, pm_list_entry(pos, struct pm_shmem, link));
	pthread_mutex_unlock(&m->lock);
	check_frames(&c);
out:
	free(c.ptes);
	free(c.pmds);
	free(c.cache);
	free(c.owner);
	free(c.table);
	if (c.errors) {
		fprintf(stderr, "pinmm: check: %ld problem%s\n", c.errors, c.errors > 1 ? "s" : "");
		return -EUCLEAN;
	}
	return 0;
}
