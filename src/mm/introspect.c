// SPDX-License-Identifier: MIT
/*
 * introspect.c - what /proc shows of an address space: pm_mm_maps() (/proc/PID/maps with
 * smaps' Rss, Anonymous and AnonHugePages), pm_pagemap() (pagemap, kpageflags and kpagecount
 * in one) and pm_mincore() (mincore(2), mm/mincore.c's rules).
 *
 * Locking: the slow GUP's argument (gup/gup.c), for a walker that takes nothing.
 *  1. Each call holds the mm's lock for read over its span (mmap_read_lock_range(): mmap_lock
 *     in Linux's design, the span's ranges in the range design), so every VMA it finds stays as
 *     it is: no mmap, munmap, mprotect or flag-changing madvise runs on it meanwhile.
 *  2. Page tables are walked only inside VMAs found so: a table that a live VMA reaches into
 *     is never freed (pgtable.c); munmap frees tables only in the gap its removed VMAs left.
 *  3. Faults (per-VMA locks), MADV_DONTNEED (a read hold too) and truncation (an i_mmap lock)
 *     still change entries meanwhile. Each entry is read again under the lock its writers
 *     take - a PTE table's PTL (pm__pte_offset_map_lock(), which re-checks the PMD), a 2 MiB
 *     leaf's PMD lock - and the page it maps is looked at before that lock is dropped: still
 *     mapped, so still allocated and still part of the same folio. No reference is taken (a
 *     peek, as /proc's walkers do), so nothing here can keep a page alive or make a fork copy
 *     it, and maybe_pinned reports only real pins.
 *  4. The counts read - mapcounts, pins, flags - may change the moment after (another mm's
 *     fork or fault, a GUP-fast pin, which takes no lock of this mm): a snapshot, as /proc's.
 * pm_mincore()'s page-cache lookups peek under RCU (shmem/cache.c), without a reference too.
 */
#include "mm/range.h"

/*
 * A walk of [start, end) inside one VMA: Linux's mm_walk, cut down to what these calls need.
 * @leaf: each present entry, a PTE (@n 1) or the part of a 2 MiB leaf inside the range, with
 * @ptl - the entry's lock - held. @hole: each stretch without a present entry, missing tables
 * included (@no_table: no PMD table reaches there, Linux's pte_hole). Either may be NULL.
 */
struct walk {
	struct pm_mm *mm;
	struct pm_vma *vma;
	unsigned long start;	/* where the output arrays begin */
	void *out;
	struct pm_spinlock *ptl; /* held while @leaf runs */
	void (*leaf)(struct walk *w, unsigned long addr, unsigned long n, uint64_t e, bool pmd);
	void (*hole)(struct walk *w, unsigned long addr, unsigned long end, bool no_table);
};

static void walk_hole(struct walk *w, unsigned long addr, unsigned long end, bool no_table)
{
	if (w->hole)
		w->hole(w, addr, end, no_table);
}

/* [@addr, @end) inside the PMD span of *@pmdp. Context: the mm's lock held (read). */
static void walk_pmd(struct walk *w, pm_entry_t *pmdp, unsigned long addr, unsigned long end)
{
	struct pm_mm *mm = w->mm;
	pm_entry_t *ptep;
	pmd_t pmd;

	mmap_assert_locked(mm);
	for (;;) {
		pmd = pmdp_get(pmdp);
		if (!pmd_present(pmd)) {
			walk_hole(w, addr, end, false);
			return;
		}
		if (!pmd_leaf(pmd)) {
			ptep = pm__pte_offset_map_lock(mm, pmdp, addr, &w->ptl);
			if (ptep)
				break;
			continue; /* no longer a table: look again */
		}
		w->ptl = pm__pmd_lockptr(mm, pmdp);
		pm__ptl_lock(w->ptl);
		pmd = pmdp_get(pmdp);
		if (pmd_leaf(pmd)) {
			if (w->leaf)
				w->leaf(w, addr, (end - addr) >> PAGE_SHIFT, pmd.val, true);
			pm_spin_unlock(w->ptl);
			return;
		}
		pm_spin_unlock(w->ptl); /* split or zapped meanwhile: look again */
	}
	for (; addr < end; addr += PAGE_SIZE, ptep++) {
		pte_t pte = ptep_get(ptep);

		if (!pte_present(pte))
			walk_hole(w, addr, addr + PAGE_SIZE, false);
		else if (w->leaf)
			w->leaf(w, addr, 1, pte.val, false);
	}
	pm_spin_unlock(w->ptl);
}

/* Walk [@start, @end), which lies inside w->vma. Context: the mm's lock held (read). */
static void walk_range(struct walk *w, unsigned long start, unsigned long end)
{
	mmap_assert_locked(w->mm);
	pm_assert(w->vma->start <= start && end <= w->vma->end);
	for (unsigned long addr = start, next; addr < end; addr = next) {
		pm_entry_t *pmdp = pm__pmd_span(w->mm, addr, end, &next);

		/* A table made early that Linux would not have yet is missing (only hugetlb's
		 * mincore tells the two apart; pgtable.h, _PAGE_TABLE_USED). */
		if (pmdp && is_vm_hugetlb_page(w->vma) && !pm__pmd_table_used(w->mm, pmdp))
			pmdp = NULL;
		if (pmdp)
			walk_pmd(w, pmdp, addr, next);
		else
			walk_hole(w, addr, next, true);
	}
}

/* Does entry @e map a zero page (the 4 KiB one, or a huge one), whose head is @head? */
static bool entry_maps_zero(uint64_t e, struct pm_page *head)
{
	return (e & _PAGE_SPECIAL) || folio_is_zero(page_folio(head));
}

/* ---- pm_mm_maps ---- */

/* smaps' counts: Rss, Anonymous, AnonHugePages. Context: the entry's lock, w->ptl. */
static void smaps_leaf(struct walk *w, unsigned long addr, unsigned long n, uint64_t e,
		       bool pmd)
{
	struct pm_page *page = pfn_to_page(w->mm->m, (e & _PAGE_PFN_MASK) >> PAGE_SHIFT);
	struct pm_map_info *mi = w->out;
	struct pm_folio *folio = page_folio(page);

	pm_assert_locked(w->ptl);
	if (entry_maps_zero(e, page))
		return; /* vm_normal_page() is NULL: not in Rss */
	mi->rss_pages += n;
	if (folio_test_anon(folio)) {
		mi->anon_pages += n;
		if (pmd)
			mi->anon_huge_pages += n;
	}
}

/*
 * smaps' VmFlags that pinmm keeps, with Linux's names. Those that later mapping kinds bring
 * (VM_LOCKED, VM_GROWSDOWN, VM_WIPEONFORK) are shown as soon as the VMA layer defines them.
 */
static const struct {
	unsigned long vm;
	unsigned vmf;
} vmflags_shown[] = {
#ifdef VM_LOCKED
	{ VM_LOCKED, PM_VMF_LOCKED },
#endif
#ifdef VM_GROWSDOWN
	{ VM_GROWSDOWN, PM_VMF_GROWSDOWN },
#endif
#ifdef VM_WIPEONFORK
	{ VM_WIPEONFORK, PM_VMF_WIPEONFORK },
#endif
	{ VM_HUGEPAGE, PM_VMF_HUGEPAGE },
	{ VM_NOHUGEPAGE, PM_VMF_NOHUGEPAGE },
	{ VM_DONTCOPY, PM_VMF_DONTCOPY },
	{ VM_ACCOUNT, PM_VMF_ACCOUNT },
	{ VM_NORESERVE, PM_VMF_NORESERVE },
};

/* One VMA as /proc/PID/maps and smaps show it. Context: the mm's lock held (read). */
static void map_info(struct pm_mm *mm, struct pm_vma *vma, struct pm_map_info *mi)
{
	unsigned long f = vma->flags;
	bool anon = !vma->file || vma->file->internal;
	struct walk w = { .mm = mm, .vma = vma, .out = mi, .leaf = smaps_leaf };

	mmap_assert_locked(mm);
	*mi = (struct pm_map_info){ .start = vma->start, .end = vma->end, .pgoff = vma->pgoff };
	mi->prot = ((f & VM_READ) ? PM_PROT_READ : 0) | ((f & VM_WRITE) ? PM_PROT_WRITE : 0);
	/* The maps letters: 's' is VM_MAYSHARE, as show_map_vma() prints it. */
	mi->flags = (f & VM_MAYSHARE) ? PM_MAP_SHARED : PM_MAP_PRIVATE;
	if (anon)
		mi->flags |= PM_MAP_ANONYMOUS;
	if (f & VM_HUGETLB)
		mi->flags |= PM_MAP_HUGETLB;
	/* The internal object of a private anonymous (hugetlb) mapping is not shown. */
	mi->shmem = anon && !(f & VM_MAYSHARE) ? NULL : vma->file;
	for (unsigned i = 0; i < ARRAY_SIZE(vmflags_shown); i++)
		if (f & vmflags_shown[i].vm)
			mi->vmflags |= vmflags_shown[i].vmf;
#ifdef VM_EXEC
	if (f & VM_EXEC)
		mi->prot |= PM_PROT_EXEC;
#endif
	/* Hugetlb pages are smaps' *_Hugetlb, never Rss: nothing to count. */
	if (!is_vm_hugetlb_page(vma))
		walk_range(&w, vma->start, vma->end);
}

long pm_mm_maps(struct pm_mm *mm, unsigned long start, struct pm_map_info *out, long max)
{
	struct pm_vma *vma;
	long n = 0;

	if (pm__mm_bad(mm) || max < 0)
		return -EINVAL;
	if (!max || start >= PM_TASK_SIZE)
		return 0;
	mmap_read_lock_range(mm, start, PM_TASK_SIZE);
	for (vma = pm__find_vma(mm, start); vma && n < max; vma = pm__vma_next(mm, vma)) {
		if (!out) {
			n = -EFAULT;
			break;
		}
		map_info(mm, vma, &out[n++]);
	}
	mmap_read_unlock(mm);
	return n;
}

/* ---- pm_pagemap ---- */

/*
 * The page @idx pages into what entry @e maps - a PTE's page (@idx 0) or a 2 MiB leaf's head -
 * as pagemap, kpageflags and kpagecount show it. Context: the entry's lock held (@ptl).
 */
static struct pm_page_info page_info(struct pm_machine *m, struct pm_spinlock *ptl, uint64_t e,
				     bool pmd, unsigned long idx)
{
	unsigned long pfn = (e & _PAGE_PFN_MASK) >> PAGE_SHIFT;
	struct pm_page *head = pfn_to_page(m, pfn), *page = head + idx;
	struct pm_folio *folio = page_folio(head);
	struct pm_page_info pi = { .pfn = pfn + idx, .flags = PM_PAGE_PRESENT };
	unsigned mapcount, entire;

	pm_assert_locked(ptl);
	if (e & _PAGE_RW)
		pi.flags |= PM_PAGE_WRITABLE;
	if (entry_maps_zero(e, head)) {
		/* Never mapcounted, never pinned, no folio flags (kpageflags ZERO_PAGE). */
		pi.flags |= PM_PAGE_ZERO;
		if (pmd || folio_test_large(folio))
			pi.flags |= PM_PAGE_THP; /* the huge zero page: ZERO|THP */
		return pi;
	}
	if (folio_test_anon(folio)) {
		pi.flags |= PM_PAGE_ANON;
		/* A PMD mapping keeps AnonExclusive on its head (huge_memory.c). */
		if (page_anon_exclusive(pmd ? head : page))
			pi.flags |= PM_PAGE_ANON_EXCLUSIVE;
	}
	if (folio_test_hugetlb(folio))
		pi.flags |= PM_PAGE_HUGETLB;
	else if (folio_order(folio) >= HPAGE_PMD_ORDER)
		pi.flags |= PM_PAGE_THP;
	if (folio_test(folio, PG_dirty))
		pi.flags |= PM_PAGE_DIRTY;
	if (folio_maybe_dma_pinned(folio))
		pi.flags |= PM_PAGE_MAYBE_PINNED;
	/* folio_precise_page_mapcount(): a hugetlb page has only its folio's PMD mappings. */
	mapcount = (unsigned)atomic_load_relaxed(&page->xmapcount);
	entire = 0;
	if (folio_test_large(folio))
		entire = (unsigned)atomic_load_relaxed(&folio->page.xentire_mapcount);
	pi.mapcount = mapcount + entire; /* kpagecount: the page's own */
	/*
	 * PM_MMAP_EXCLUSIVE. Through a PMD leaf, pagemap_pmd_range asks about the leaf's head page
	 * for every page it covers (__folio_page_mapped_exclusively(folio, pmd_page(pmd)), with
	 * CONFIG_PAGE_MAPCOUNT): a THP that this mm maps whole, with the head also PTE-mapped
	 * elsewhere (a fork's other side that split and copied a page), reads not exclusive on
	 * every page, even one that only this PMD maps.
	 */
	if (pmd && page != head)
		mapcount = (unsigned)atomic_load_relaxed(&head->xmapcount);
	if (mapcount + entire == 1)
		pi.flags |= PM_PAGE_EXCLUSIVE;
	return pi;
}

/* Context: the entry's lock, w->ptl. */
static void pagemap_leaf(struct walk *w, unsigned long addr, unsigned long n, uint64_t e,
			 bool pmd)
{
	struct pm_page_info *out = (struct pm_page_info *)w->out + ((addr - w->start) >> PAGE_SHIFT);
	unsigned long idx = pmd ? (addr & ~PMD_MASK) >> PAGE_SHIFT : 0;

	pm_assert_locked(w->ptl);
	for (unsigned long i = 0; i < n; i++)
		out[i] = page_info(w->mm->m, w->ptl, e, pmd, idx + i);
}

long pm_pagemap(struct pm_mm *mm, unsigned long addr, unsigned long nr, struct pm_page_info *out)
{
	struct walk w = { .mm = mm, .start = addr, .out = out, .leaf = pagemap_leaf };
	struct pm_vma *vma;
	unsigned long end;

	if (pm__mm_bad(mm) || (addr & ~PAGE_MASK))
		return -EINVAL;
	/* Entries stop at the top of the address space, as pagemap's do at task_size. */
	if (addr >= PM_TASK_SIZE)
		return 0;
	nr = min(nr, (PM_TASK_SIZE - addr) >> PAGE_SHIFT);
	if (!nr)
		return 0;
	if (!out)
		return -EFAULT;
	end = addr + (nr << PAGE_SHIFT);
	memset(out, 0, nr * sizeof(*out)); /* holes and pages not present */
	mmap_read_lock_range(mm, addr, end);
	for (vma = pm__find_vma(mm, addr); vma && vma->start < end; vma = pm__vma_next(mm, vma)) {
		w.vma = vma;
		walk_range(&w, max(vma->start, addr), min(vma->end, end));
	}
	mmap_read_unlock(mm);
	return (long)nr;
}

/* ---- pm_mincore ---- */

/* Context: the entry's lock, w->ptl. */
static void mincore_leaf(struct walk *w, unsigned long addr, unsigned long n, uint64_t e,
			 bool pmd)
{
	pm_assert_locked(w->ptl);
	memset((unsigned char *)w->out + ((addr - w->start) >> PAGE_SHIFT), 1, n);
}

/*
 * Not mapped here (mincore_unmapped_range): an object's page is resident if its page cache
 * holds it; anonymous memory is not. A hugetlb mapping counts what it maps (mincore_hugetlb)
 * where a PMD table reaches: a none entry there is 0 whatever the object holds. Where no
 * table does, walk_hugetlb_range finds no entry and calls the pte_hole that every other
 * mapping gets, which asks the page cache, 2 MiB folio by folio (hugetlbfs.c's index): so a
 * fork child, whose shared hugetlb mapping fork did not copy, sees the object's pages as
 * resident until a table is made there.
 */
static void mincore_hole(struct walk *w, unsigned long addr, unsigned long end, bool no_table)
{
	unsigned char *vec = (unsigned char *)w->out + ((addr - w->start) >> PAGE_SHIFT);
	unsigned long n = (end - addr) >> PAGE_SHIFT, index;
	struct pm_vma *vma = w->vma;
	bool huge = is_vm_hugetlb_page(vma);

	if (!vma->file || (huge && !no_table)) {
		memset(vec, 0, n);
		return;
	}
	index = vma_pgoff(vma, addr);
	pm_rcu_read_lock();
	for (unsigned long i = 0; i < n; i++)
		vec[i] = pm__shmem_peek(vma->file, huge ? (index + i) >> HPAGE_PMD_ORDER :
							  index + i) != NULL;
	pm_rcu_read_unlock();
}

int pm_mincore(struct pm_mm *mm, unsigned long addr, unsigned long len, unsigned char *vec)
{
	struct walk w = { .mm = mm, .start = addr, .out = vec, .leaf = mincore_leaf,
			  .hole = mincore_hole };
	unsigned long end;
	int ret = 0;

	if (pm__mm_bad(mm) || (addr & ~PAGE_MASK))
		return -EINVAL;
	/* access_ok(addr, len): the range must end at or below the top, without wrapping. */
	if (addr > PM_TASK_SIZE || len > PM_TASK_SIZE - addr)
		return -ENOMEM;
	if (!len)
		return 0;
	end = ALIGN_UP(addr + len, PAGE_SIZE); /* PM_TASK_SIZE is page aligned: no wrap */
	mmap_read_lock_range(mm, addr, end);
	/* do_mincore(), one VMA at a time: a hole ends the walk with what came before filled. */
	for (unsigned long a = addr; a < end;) {
		struct pm_vma *vma = pm__find_vma(mm, a);

		if (!vma || vma->start > a) {
			ret = -ENOMEM;
			break;
		}
		if (!vec) {
			ret = -EFAULT; /* Linux's copy_to_user of this VMA's bytes fails */
			break;
		}
		w.vma = vma;
		walk_range(&w, a, min(vma->end, end));
		a = min(vma->end, end);
	}
	mmap_read_unlock(mm);
	return ret;
}
