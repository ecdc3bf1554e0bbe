// SPDX-License-Identifier: MIT
/*
 * gup_fast.c - get_user_pages_fast / pin_user_pages_fast: their entry points and the lockless
 * page-table walk, inlined into them.
 *
 * The 2008 fast_gup takes references on the pages of the caller's address space without
 * mmap_lock, the way the CPU's own page walker reaches them: entries are read with single
 * atomic loads, and nothing is locked. Whatever it cannot handle - an empty or non-present
 * entry, a missing permission, a zero page (4 KiB or huge), a page that must be unshared
 * first - stops the walk, and the caller continues from there with the slow path, keeping
 * what was taken (so the result is always a contiguous prefix of the range).
 *
 * Why this is safe. Linux's walker disables interrupts, which holds off the IPIs that page
 * table freeing and THP splitting wait for. User space has no such thing, so pinmm uses RCU
 * for the tables and speculative references for the pages:
 *
 *  1. Tables stay valid memory. The walk runs inside pm_rcu_read_lock(). Page-table pages are
 *     freed only through pm_call_rcu() after being unlinked (pgtable.c), so every table the
 *     walker reaches through an entry it loaded stays allocated (maybe stale) until the walk
 *     ends. Tables are published with release stores and loaded with acquire, so a table is
 *     seen initialised or not at all.
 *
 *  2. Pages: add-unless-zero, then re-validate. For a present, user-accessible, permitted,
 *     non-special entry the walker takes a speculative reference on the page's folio with
 *     pm__folio_try_get (a compare-and-swap that refuses a zero count and refuses overflow).
 *     struct pm_page memory is type-stable (never freed while the machine lives), so this is
 *     safe whatever the frame has become meanwhile. Then, with the reference held, it
 *     re-reads the PMD and the PTE (with sequentially consistent loads after the CAS): if
 *     either changed it drops the reference and stops. Cases:
 *     - munmap / MADV_DONTNEED / truncation cleared the PTE (a plain store under the PTL; a
 *       PMD leaf: an exchange under the PMD lock) before our re-read: we see the change and
 *       back off ((B) below). If the page's last reference went with it, our try_get either
 *       failed (count already zero) or our reference kept the folio alive until we dropped
 *       it - and dropping it frees it properly, so nothing leaks.
 *     - The entry was cleared after our re-read: then we took the reference while the page was
 *       still mapped - the pin is simply older than the munmap, which is legal; the page stays
 *       allocated until the pin is released. No page is ever freed under a pin.
 *     - The frame was freed and reused between our load and our try_get: our reference is on
 *       whatever the frame is now; page_folio() is re-checked after try_get and the PTE re-read
 *       shows the change (a cleared or different entry), so we back off. If the very same
 *       value was written back (the frame mapped again at the same address, an ABA), the page
 *       we hold *is* the one mapped there now, which is a correct answer.
 *     - mprotect removed write permission (or access) after our load: the re-read sees the new
 *       value and we back off.
 *     - A THP split replaced the PMD leaf by a PTE table (pgtable/huge_memory.c): the PMD
 *       re-read differs, we back off; the folio is never split, so the reference we dropped
 *       was a valid one. A PTE table freed under us (munmap) shows as a changed PMD, and RCU
 *       kept it readable until then.
 *  3. Pins vs fork. A fork write-protects the parent's anonymous pages so that parent and
 *     child share them, except pages that may be pinned, which it copies (fork.c). Its "may
 *     be pinned" test and our pin race: we could pin a page right after fork tested it and
 *     before it write-protected it. So fork makes mm->write_protect_seq odd while it copies;
 *     a FOLL_PIN walk samples it first (odd: go slow), and after the walk re-reads it with a
 *     sequentially consistent load: if it moved, everything pinned is released and the slow
 *     path - which waits for fork's mmap_lock - redoes the range. Our pin is a sequentially
 *     consistent RMW of the count, ordered before that load as a full barrier would order
 *     them (Linux's value-returning atomics are full barriers for the same reason); it pairs
 *     with fork's full barrier between making the count odd and reading the first refcount
 *     (store-buffering: either fork sees our pin, or we see its count).
 *  4. Read-only pins of anonymous pages must land on exclusive pages (gup_must_unshare): the
 *     AnonExclusive bit is read after the reference is taken and the entry re-validated; a
 *     page that is not exclusive goes to the slow path, which unshares it first.
 *  5. The huge zero folio's PMD leaf is special (fault/anon.c), as Linux 6.18 marks it, and
 *     the walk stops there as gup_fast_pmd_leaf does on pmd_special: the slow path takes the
 *     reference or pin under the PMD lock (gup.c), or unshares first for a read-only
 *     long-term pin. A leaf read just before it was installed is an empty PMD (stop); one
 *     read just before a zap or split is still special (stop): no reference is ever taken
 *     from a stale special leaf, so no interleaving with the fault that installs it, the
 *     write fault that splits it or the DONTNEED that clears it needs more than that test.
 *
 * Nothing here writes shared memory other than the folio's own counts: the counters are
 * per-thread, written once per walk for the pins it keeps (a reference given back inside the
 * walk was never counted), and the has-pinned flag is tested before it is set (gup.c).
 *
 * The two races that matter, side by side (time runs downwards in each column; the other
 * column may interleave anywhere):
 *
 * (A) A pin against fork's write-protect (points 3 and 4):
 *
 *	fork (copy_page_range, fault/fork.c)	pin (pm__gup_fast_walk)
 *	------------------------------------	-----------------------
 *	seq = write_protect_seq + 1 (odd)	s = write_protect_seq; odd? give up
 *	pm_smp_mb()				CAS refcount += 1024 (try_get, seq_cst)
 *	read refcount: maybe pinned?		re-read PMD, PTE (seq_cst)
 *	  yes: copy the page for the child	...
 *	  no:  clear AnonExclusive (after a	read write_protect_seq == s? (seq_cst)
 *	       barrier), write-protect		  no: unpin everything, go slow
 *	write_protect_seq + 2 (even)
 *
 *     Store-buffering: fork stores the sequence and then loads the refcount; the pin stores
 *     the refcount (its CAS) and then loads the sequence. Fork has a full barrier between
 *     its store and load; the pin's store is a seq_cst RMW and its load a seq_cst load, which
 *     the single total order of seq_cst operations and fences keeps in that order, so at
 *     least one load sees the other side's store: fork sees the
 *     pin and copies the page (the pinned page stays the parent's, writable), or the pin sees
 *     the sequence move and gives every page back. A pin that started after fork made the
 *     sequence even again finds the PTE write-protected and, for a write pin, stops; a
 *     read-only pin reads AnonExclusive after its reference (pm__gup_must_unshare, with the
 *     read barrier that pairs with fork's barrier before the clear) and goes slow if clear.
 *
 * (B) A speculative reference against a zap (munmap, MADV_DONTNEED, truncation; point 2):
 *
 *	zap (PTL held, mm/zap.c)		GUP-fast
 *	------------------------		--------
 *	pte = load(PTE); store(PTE, 0)		pte = load(PTE)
 *	(small folio: at once, with the		try_get: CAS refcount + n unless 0
 *	 mapcount; large: a gather, up to	re-read PMD and PTE (seq_cst)
 *	 ZAP_GATHER - 1 PTEs later, maybe
 *	 after the PTL's release)
 *	put: refcount - 1 (seq_cst)
 *	  the last one frees the folio
 *						  changed: put our refs, stop
 *
 *     The zap clears the entry with a plain store (every PTE writer holds the PTL, which it
 *     holds) sequenced before its put, a sequentially consistent RMW of the refcount, however
 *     late the gather makes that put. For a small folio that put is one 8-byte RMW of the word
 *     that holds the refcount and the mapcount (pm__folio_unmap_put): C11 does not describe
 *     atomics of two sizes on one location, but the hardware orders it against our 4-byte CAS
 *     as any two locked instructions on one line, the assumption Linux's lockref makes. Our CAS
 *     is ordered against that put in the refcount's modification order. If it comes after,
 *     it reads from the put's release sequence and synchronises with it, so the store of 0
 *     happens before our re-read, which sees the cleared entry (or a newer one): we back off,
 *     and if the count was zero the CAS failed in the first place. If our CAS comes before
 *     the put, our reference was counted while the mapping's still was: the folio cannot be
 *     freed by that put, and whether or not our re-read sees the clear, the pin is older than
 *     the unmap, which is legal; the page lives until the unpin, and a reference we give
 *     back may be the last and frees the folio properly (nothing leaks).
 *
 * To summarize:
 *  1) Every table the walk reaches stays valid memory until pm_rcu_read_unlock() (RCU).
 *  2) A reference is taken only on a folio whose count is not zero, and kept only if the PMD
 *     and PTE still hold what the walk read after it is taken: a page is returned only if
 *     it was mapped at its address, with the permission asked for, when its reference was.
 *  3) A pin racing with fork is seen by fork (the page is copied for the child) or sees fork
 *     (everything is unpinned and the slow path waits for fork's mmap_lock).
 *  4) A read-only pin keeps an anonymous page only if it is exclusive; anything else goes
 *     to the slow path, which unshares first.
 */
#include "gup/gup.h"
#include "gup/gup_pte.h"

/* Take the page of the entry at @ptep, in the table @pmd (read at *@pmdp) leads to. Return:
 * the page, or NULL where the fast path cannot take it. */
static __always_inline struct pm_page *gup_fast_pte(struct pm_machine *m, pm_entry_t *pmdp,
						    pmd_t pmd, pm_entry_t *ptep, unsigned flags)
{
	pte_t pte = ptep_get(ptep);
	struct pm_folio *folio;
	struct pm_page *page;

	if (!pte_present(pte) || !pte_user(pte) || pte_special(pte))
		return NULL;
	if ((flags & FOLL_WRITE) && !pte_write(pte))
		return NULL;
	page = pfn_to_page(m, pte_pfn(pte));
	folio = try_grab_folio_fast(m, page, 1, flags, true);
	if (!folio)
		return NULL;
	if (unlikely(!pmd_same(pmdp_get_mb(pmdp), pmd) || !pte_same(ptep_get_mb(ptep), pte))) {
		ungrab_folio(m, folio, 1, flags);
		return NULL;
	}
	if (!pte_write(pte) && pm__gup_must_unshare(NULL, flags, page)) {
		ungrab_folio(m, folio, 1, flags);
		return NULL;
	}
	return page;
}

/* Walk one PTE table's entries for [addr, end). Return: pages taken; stops at the first miss. */
static __always_inline unsigned long gup_fast_pte_range(struct pm_machine *m, pm_entry_t *pmdp,
							pmd_t pmd, unsigned long addr,
							unsigned long end, unsigned flags,
							struct pm_page **pages)
{
	pm_entry_t *ptep = &entry_table(m, pmd.val)[pte_index(addr)];
	unsigned long nr = 0;

	for (; addr < end; addr += PAGE_SIZE, ptep++) {
		struct pm_page *page = gup_fast_pte(m, pmdp, pmd, ptep, flags);

		if (!page)
			break;
		pages[nr++] = page;
	}
	return nr;
}

/* A 2 MiB leaf: all its references in one atomic add on the folio. */
static unsigned long gup_fast_pmd_leaf(struct pm_machine *m, pm_entry_t *pmdp, pmd_t pmd,
				       unsigned long addr, unsigned long end, unsigned flags,
				       struct pm_page **pages)
{
	struct pm_page *head = pfn_to_page(m, pmd_pfn(pmd));
	struct pm_page *page = head + ((addr & ~PMD_MASK) >> PAGE_SHIFT);
	int refs = (int)((end - addr) >> PAGE_SHIFT);
	struct pm_folio *folio;

	if (!pmd_user(pmd) || ((flags & FOLL_WRITE) && !pmd_write(pmd)))
		return 0;
	if (pmd_special(pmd))
		return 0; /* the huge zero folio: the slow path takes it (point 5) */
	folio = try_grab_folio_fast(m, head, refs, flags, true);
	if (!folio)
		return 0;
	if (unlikely(!pmd_same(pmdp_get_mb(pmdp), pmd))) {
		ungrab_folio(m, folio, refs, flags);
		return 0;
	}
	if (!pmd_write(pmd) && pm__gup_must_unshare(NULL, flags, head)) {
		ungrab_folio(m, folio, refs, flags);
		return 0;
	}
	for (int i = 0; i < refs; i++)
		pages[i] = page + i;
	return (unsigned long)refs;
}

/* The PMD slot of @addr, through the PGD and PUD entries; NULL if one is not present. */
static __always_inline pm_entry_t *gup_fast_pmdp(struct pm_mm *mm, unsigned long addr)
{
	struct pm_machine *m = mm->m;
	uint64_t e = atomic_load_acquire(&mm->pgd[pgd_index(addr)]);

	if (!(e & _PAGE_PRESENT))
		return NULL;
	e = atomic_load_acquire(&entry_table(m, e)[pud_index(addr)]);
	if (!(e & _PAGE_PRESENT))
		return NULL;
	return &entry_table(m, e)[pmd_index(addr)];
}

/* Walk [start, end) from the PGD; stop at the first thing the fast path cannot take. */
static __always_inline unsigned long gup_fast_walk(struct pm_mm *mm, unsigned long start,
						   unsigned long end, unsigned flags,
						   struct pm_page **pages)
{
	struct pm_machine *m = mm->m;
	unsigned long addr = start, nr = 0;

	while (addr < end) {
		pm_entry_t *pmdp = gup_fast_pmdp(mm, addr);
		unsigned long next, got;
		pmd_t pmd;

		if (!pmdp)
			break;
		pmd = pmdp_get(pmdp);
		next = span_end(addr, end, PMD_SIZE);
		if (pmd_leaf(pmd))
			got = gup_fast_pmd_leaf(m, pmdp, pmd, addr, next, flags, pages + nr);
		else if (pmd_table(pmd))
			got = gup_fast_pte_range(m, pmdp, pmd, addr, next, flags, pages + nr);
		else
			break;
		nr += got;
		if (got != (next - addr) >> PAGE_SHIFT)
			break;
		addr = next;
	}
	return nr;
}

/*
 * gup_fast_walk() for the one page at @addr, the most common call (a driver's pin of one
 * buffer page, pin_fast's loop): the same steps without the loops' bookkeeping.
 */
static __always_inline unsigned long gup_fast_walk_one(struct pm_mm *mm, unsigned long addr,
						       unsigned flags, struct pm_page **pages)
{
	struct pm_machine *m = mm->m;
	pm_entry_t *pmdp = gup_fast_pmdp(mm, addr);
	struct pm_page *page;
	pmd_t pmd;

	if (!pmdp)
		return 0;
	pmd = pmdp_get(pmdp);
	if (pmd_leaf(pmd))
		return gup_fast_pmd_leaf(m, pmdp, pmd, addr, addr + PAGE_SIZE, flags, pages);
	if (!pmd_table(pmd))
		return 0;
	page = gup_fast_pte(m, pmdp, pmd, &entry_table(m, pmd.val)[pte_index(addr)], flags);
	if (!page)
		return 0;
	pages[0] = page;
	return 1;
}

/**
 * gup_fast_range() - take references on the pages mapped at [@start, @end) without
 * mmap_lock, stopping at the first page it cannot take.
 * @flags: FOLL_GET or FOLL_PIN, plus FOLL_WRITE / FOLL_LONGTERM.
 *
 * Counts the pages it returns (gup_fast_pages, and nr_foll_pin_acquired for pins), with one
 * look-up of this thread's counters. PM_KNOB_GUP_FAST_RESTART (the 2008 patch as first
 * posted): a walk that stops short gives everything back, so the slow path redoes the range.
 * Return: the number of pages taken from @start (possibly 0).
 */
static __always_inline unsigned long gup_fast_range(struct pm_mm *mm, unsigned long start,
						    unsigned long end, unsigned flags,
						    struct pm_page **pages)
{
	struct pm_machine *m = mm->m;
	struct pm_stat_block *stats;
	unsigned seq = 0;
	unsigned long nr;

	if (flags & FOLL_PIN) {
		seq = atomic_load_acquire(&mm->xwrite_protect_seq);
		if (seq & 1)
			return 0; /* fork is write-protecting right now */
	}
	/*
	 * A reference given back inside the read section may be a folio's last, and freeing it
	 * counts events, which must not block there: make sure this thread's counter block exists
	 * now (its first use takes machine->lock and allocates).
	 */
	stats = pm__stat_block(m);
	pm_rcu_read_lock();
	if (end - start == PAGE_SIZE)
		nr = gup_fast_walk_one(mm, start, flags, pages);
	else
		nr = gup_fast_walk(mm, start, end, flags, pages);
	pm_rcu_read_unlock();
	if (unlikely(knob(m, PM_KNOB_GUP_FAST_RESTART)) && nr &&
	    nr != (end - start) >> PAGE_SHIFT)
		goto give_back;

	/*
	 * Every pin's count update was a sequentially consistent RMW, and this load is
	 * sequentially consistent too: no fence is needed between them (see (A) above).
	 */
	if ((flags & FOLL_PIN) && nr) {
		if (unlikely(atomic_load_mb(&mm->xwrite_protect_seq) != seq))
			goto give_back;
		count_event_in(m, stats, GUP_FAST_PINS, nr); /* pins, and fast-path pages */
	} else if (nr) {
		count_event_in(m, stats, GUP_FAST_PAGES, nr);
	}
	return nr;

give_back:
	for (unsigned long i = 0; i < nr; i++)
		ungrab_folio(m, page_folio(pages[i]), 1, flags);
	return 0;
}

/* gup_fast_range(), out of line: for tests that drive the walk alone. */
unsigned long pm__gup_fast_walk(struct pm_mm *mm, unsigned long start, unsigned long end,
				unsigned flags, struct pm_page **pages)
{
	return gup_fast_range(mm, start, end, flags, pages);
}

/* ---- the fast entry points ---- */

/*
 * gup_fast_fallback() - the lockless walk, then the slow path for whatever it left.
 * PM_KNOB_NO_GUP_FAST: no lockless walk at all (before 2008). PM_KNOB_GUP_FAST_RESTART (a
 * short walk's pages are dropped and the slow path redoes the whole range) is the walk's.
 * Inlined into the two entry points, as is everything on the way to the walk and the walk
 * itself (which is why the entry points live in this file): a pin of one page is a few dozen
 * instructions besides its two atomic operations, and calls cost as much as they do.
 */
static __always_inline long gup_fast_fallback(struct pm_mm *mm, unsigned long start,
					      unsigned long nr_pages, unsigned flags,
					      struct pm_page **pages)
{
	struct pm_machine *m = mm->m;
	unsigned long nr = 0;
	long ret;

	if (!nr_pages)
		return 0;
	if (flags & FOLL_PIN)
		mm_set_has_pinned(mm);
	if (knob(m, PM_KNOB_NO_GUP_FAST))
		return pm__gup_slow(mm, start, nr_pages, flags, pages);
	/* A long-term pin that may have to leave the movable zone first goes the slow way,
	 * as a page that is not long-term pinnable sends Linux's fast walk there. */
	if (unlikely(pm__gup_longterm_migrates(m, flags)))
		return pm__gup_longterm(mm, start, nr_pages, flags, pages);

	nr = gup_fast_range(mm, start, start + (nr_pages << PAGE_SHIFT), flags, pages);
	if (likely(nr == nr_pages))
		return (long)nr;
	count_event(m, GUP_FAST_FALLBACKS, 1);
	ret = pm__gup_slow(mm, start + (nr << PAGE_SHIFT), nr_pages - nr, flags, pages + nr);
	if (ret < 0)
		return nr ? (long)nr : ret;
	return (long)nr + ret;
}

/* The two fast entry points: checks, the lockless walk, and the slow path for what it left. */
static __always_inline long gup_fast_entry(struct pm_mm *mm, unsigned long start,
					   unsigned long nr_pages, unsigned gup_flags,
					   struct pm_page **pages, unsigned kind)
{
	long err = pm__gup_check_args(mm, start, nr_pages, gup_flags, pages, kind == FOLL_PIN,
				      true);

	if (err)
		return err;
	if (kind == FOLL_PIN)
		kind |= gup_hot_flag(mm);
	return gup_fast_fallback(mm, start & PAGE_MASK, nr_pages, gup_flags | kind, pages);
}

long pm_get_user_pages_fast(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			    unsigned gup_flags, struct pm_page **pages)
{
	return gup_fast_entry(mm, start, nr_pages, gup_flags, pages, FOLL_GET);
}

long pm_pin_user_pages_fast(struct pm_mm *mm, unsigned long start, unsigned long nr_pages,
			    unsigned gup_flags, struct pm_page **pages)
{
	return gup_fast_entry(mm, start, nr_pages, gup_flags, pages, FOLL_PIN);
}
