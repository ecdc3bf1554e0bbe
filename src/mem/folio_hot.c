// SPDX-License-Identifier: MIT
/*
 * mem/folio_hot.c - hot folios: per-CPU pin counts for a folio that several CPUs pin at once
 * (the range design; PM_KNOB_FOLIO_SHARED_PINS, and Linux's design, keep every pin on the
 * folio's own counts). The models are Linux's percpu_ref and RadixVM's Refcache.
 *
 * Shape. A folio is hot while PG_hot is set on its head. It then holds PM_HOT_BIAS references
 * of its own on xrefcount (the bias), and its pins and unpins go to a struct pm_folio_hot
 * found by head pfn in the machine's table m->xhot: one slot per CPU, a line each, holding
 * the net pins taken on that CPU, n, which may be negative (an unpin on another CPU than its
 * pin, or of a pin taken before the folio was hot). A hot pin or unpin is one locked add to
 * its slot, inside an RCU read section, and writes no other shared byte. A pin of a page is
 * GUP_PIN_COUNTING_BIAS references of a small folio, or one reference and one pincount of a
 * large one, so
 *
 *	refcount = xrefcount - PM_HOT_BIAS + sum(n) * (1024 small, 1 large)
 *	pincount = xpincount + sum(n)	(large)
 *
 * exact at quiescence, which is what the debug checks read. The public queries
 * (pm_folio_ref_count(), pm_folio_pincount()) leave hot mode and read the shared counts.
 * No decision is taken on such a sum: whatever compares or freezes counts leaves hot mode
 * first (pm__folio_cool: fork's copy decision, COW's reuse, migration, maybe_dma_pinned), and
 * while a folio is hot the bias makes every comparison with an expected count fail, which is the
 * conservative answer (copy, refuse, retry), never the wrong one.
 *
 * Entering (pm__folio_hot_enter), under m->hot_lock: a shared pin that finds another pin
 * already outstanding asks for it, unless the last such pin was its own thread's
 * (pm__folio_pin_contended: one thread's many pins share no line). A state is taken (one past
 * its grace period, or a new one: at most hot_max states per machine); the bias is added; the
 * state is published in the table; PG_hot is set by a full-barrier RMW; then the folio's
 * mapcounts are read.
 *
 * Leaving (pm__folio_leave_hot), by whoever wins one compare-and-swap of the flags from PG_hot
 * to PG_hot_leave: exchange each slot with HOT_FOLDED, add what they held to the shared
 * counts, clear the table entry and PG_hot_leave, retire the state (pm_call_rcu), and drop
 * the bias, which frees the folio if that was all that held it. It waits for nothing but a
 * leave already in progress, never sleeps, and takes no lock, so it may be called anywhere,
 * page-table locks and read sections included.
 *
 * Why the counts are never lost (each pair is a store-buffering pattern with a full barrier
 * on both sides, so at least one side sees the other):
 *  (H1) A hot pin or unpin is one sequentially consistent add to its CPU's slot, and the value
 *       the add returns decides. The adds to a slot and the leaver's exchange are ordered,
 *       as RMWs of one word are: an add before the exchange is folded into the shared counts
 *       (counted: done), an add after it returns a folded value and was not counted, so the
 *       operation goes to the shared counts instead; what it added stays in the retired
 *       state, which is reset before its next use. Nobody takes an add back, so no fold can
 *       catch half of an operation, and the leaver has nothing to wait for.
 *  (H2) An unpin that goes to the shared counts waits until PG_hot_leave is clear: the pin it
 *       releases may still sit in a slot that is not folded yet, and the shared pincount
 *       would refuse the release as an underflow until the fold.
 *  (H3) The bias is never leaked. The bias is taken before PG_hot is set; after setting it
 *       (full barrier) the enterer reads the mapcounts, and leaves at once if the folio is
 *       unmapped. Every unmap drops its mapcount, then its mapping's reference with a
 *       full-barrier RMW, then reads the flags, and a hot folio that is no longer mapped
 *       leaves hot mode there (pm__folio_hot_unmapped, called by the puts). So the last unmap
 *       and the enter cannot miss each other; and a pin needs a mapping, so an unmapped folio
 *       never enters.
 *  (H4) GUP-fast's ordering is kept. A hot pin's slot update is a sequentially consistent
 *       RMW, as the shared count's is, so the re-read of the entry that follows it, and the
 *       re-read of write_protect_seq after the walk, pair with munmap and fork exactly as they
 *       do for a shared pin (gup_fast.c, (A) and (B)). An add that counted found the slot
 *       not folded, so the leave had not dropped the bias yet: the folio was alive.
 *  (H5) A state serves one hot period of one folio. An operation loads the table entry and
 *       adds to the state inside one RCU read section; the leaver clears the entry after the
 *       fold and retires the state with pm_call_rcu, and only after that grace period may
 *       the state be reset and serve another period. So no add meant for one period lands
 *       in another's slots. A state's memory lives as long as the machine.
 *
 * Questions that need an exact answer leave hot mode rather than read a sum: a sum read while
 * pins come and go on other CPUs can miss a pin that is held throughout (read slot A before a
 * pin lands there, slot B after its thread's unpin of another pin left it). So
 * folio_maybe_dma_pinned() of a hot folio folds it first, and answers Linux's answer; no
 * pinned mark is needed, and none can linger as a false positive (extra fork copies).
 */
#include <sys/mman.h>

#include "mem/folio_hot.h"

/* The grace period after a leave has passed: the state may serve another period ((H5)). */
static void hot_state_retired(struct pm_rcu_head *head)
{
	struct pm_folio_hot *h = container_of(head, struct pm_folio_hot, rcu);
	struct pm_machine *m = h->m;

	if (unlikely(m->fork_busy))
		return; /* queued by a fork parent: hot_lock may be held for ever (machine.c) */
	pm_spin_lock(&m->hot_lock);
	h->free = m->hot_free;
	m->hot_free = h;
	pm_spin_unlock(&m->hot_lock);
}

/* A hot unpin found the folio not hot: a fold in progress may still hold its pin ((H2)). */
void pm__folio_hot_put_wait(struct pm_folio *folio)
{
	while (atomic_load_acquire(&folio->page.xflags) & PGF(PG_hot_leave))
		cpu_relax();
}

/* Is any page of @folio mapped (its mapcounts; the bias aside, as it holds none)? */
static bool folio_mapped_any(struct pm_folio *folio)
{
	unsigned long n = folio_nr_pages(folio);

	if (n > 1 && atomic_load_mb(&folio->page.xentire_mapcount) > 0)
		return true;
	for (unsigned long i = 0; i < n; i++)
		if (atomic_load_mb(&folio_page(folio, i)->xmapcount) > 0)
			return true;
	return false;
}

/*
 * pm__folio_leave_hot() - end hot mode, or wait for the leave in progress to end. On return
 * @folio's shared counts hold every pin and reference (it may be hot again by then only if a
 * new pin made it so). Context: any; the caller keeps the folio alive (the bias drop here may
 * free it otherwise, which only the unmap path relies on, (H3)).
 */
void pm__folio_leave_hot(struct pm_folio *folio)
{
	struct pm_machine *m = page_machine(&folio->page);
	unsigned long flags = atomic_load_relaxed(&folio->page.xflags);
	struct pm_folio_hot *h;
	long refs = 0, pins = 0;

	do {
		if (flags & PGF(PG_hot_leave)) {
			while (atomic_load_acquire(&folio->page.xflags) & PGF(PG_hot_leave))
				cpu_relax();
			return;
		}
		if (!(flags & PGF(PG_hot)))
			return;
	} while (!atomic_cas_mb(&folio->page.xflags, &flags,
				(flags & ~PGF(PG_hot)) | PGF(PG_hot_leave)));

	h = atomic_load_acquire(folio_hot_entry(m, folio));
	pm_assert(h);
	for (unsigned cpu = 0; cpu < m->nr_cpus; cpu++) {
		int64_t v = atomic_xchg_mb(&h->slot[cpu].xv, HOT_FOLDED); /* (H1) */

		pm_assert(!hot_folded(v));
		pins += v;
	}
	atomic_store_release(folio_hot_entry(m, folio), NULL);
	if (folio_test_large(folio))
		refs = pins;
	else
		refs = pins * GUP_PIN_COUNTING_BIAS, pins = 0;
	if (pins)
		atomic_add_mb(&folio->page.xpincount, (int)pins);
	atomic_add_mb(&folio->page.xrefcount, (int)refs);
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xrefcount), >=, PM_HOT_BIAS);
	pm_assert_cmp(atomic_load_relaxed(&folio->page.xpincount), >=, 0);
	atomic_and_release(&folio->page.xflags, ~PGF(PG_hot_leave));
	folio_put_refs(folio, PM_HOT_BIAS);
	/* Last: no one waits on this leave any more, should a callback run here ((H5)). */
	pm_call_rcu(&h->rcu, hot_state_retired);
}

/*
 * pm__folio_hot_unmapped() - a put found PG_hot: if no page of @folio is mapped any more,
 * leave hot mode ((H3)). The caller's reference may have been its last but the bias, and the
 * frame may even be another folio by now; a speculative reference makes either safe.
 */
void pm__folio_hot_unmapped(struct pm_folio *folio)
{
	if (!pm__folio_try_get(folio, 1, INT_MAX))
		return;
	if (folio_hot(folio) && !folio_mapped_any(folio))
		pm__folio_leave_hot(folio);
	/* Not folio_put(): while still hot and mapped, it would call us again. */
	if (atomic_sub_mb(&folio->page.xrefcount, 1) == 1)
		pm__folio_free(folio);
}

/* A state for a new hot period: one past its grace period, reset, or a new one. */
static struct pm_folio_hot *hot_state_get(struct pm_machine *m)
{
	struct pm_folio_hot *h = m->hot_free;

	pm_assert(pm_spin_is_locked(&m->hot_lock));
	if (h) {
		/* No operation holds it any more ((H5)): plain resets will do. */
		m->hot_free = h->free;
		for (unsigned cpu = 0; cpu < m->nr_cpus; cpu++)
			atomic_store_relaxed(&h->slot[cpu].xv, 0);
		return h;
	}
	if (m->hot_nr < m->hot_max) {
		size_t size = sizeof(*h) + m->nr_cpus * sizeof(struct pm_hot_slot);

		if (pm__should_fail(m) || posix_memalign((void **)&h, PM_CACHELINE, size))
			return NULL; /* the pins stay shared */
		memset(h, 0, size);
		pm__trace_object(h, size, "pm_folio_hot");
		h->m = m;
		h->next = m->hot_list;
		m->hot_list = h;
		m->hot_nr++;
	}
	return h; /* NULL: every state is in use or waits for its grace period */
}

/*
 * pm__folio_hot_enter() - make @folio hot: a shared pin found another pin outstanding on it.
 * The caller has a reference on @folio, and may be inside any other lock: hot_lock is taken
 * last.
 * Failing to enter (no memory, every state in use) is not an error: pins stay shared.
 */
void pm__folio_hot_enter(struct pm_folio *folio)
{
	struct pm_machine *m = page_machine(&folio->page);
	struct pm_folio_hot *_Atomic *table = atomic_load_acquire(&m->xhot);
	struct pm_folio_hot *_Atomic *entry;
	struct pm_folio_hot *h;
	unsigned long flags;

	if (folio_is_zero(folio) || is_huge_zero_folio(folio))
		return;
	if (!table) {
		size_t size = m->nr_pages * sizeof(*table);

		if (pm__should_fail(m))
			return; /* the pins stay shared */
		table = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (table == MAP_FAILED)
			return;
		struct pm_folio_hot *_Atomic *none = NULL;

		if (!atomic_cas_strong_mb(&m->xhot, &none, table)) {
			munmap(table, size);
			table = none;
		} else {
			pm__trace_object(table, size, "pm_folio_hot table");
		}
	}
	pm_spin_lock(&m->hot_lock);
	flags = atomic_load_acquire(&folio->page.xflags); /* a leave's entry clear before it */
	if (flags & (PGF(PG_hot) | PGF(PG_hot_leave)))
		goto out;
	entry = &table[page_to_pfn(m, &folio->page)];
	pm_assert(!atomic_load_relaxed(entry));
	h = hot_state_get(m);
	if (!h)
		goto out;
	atomic_add_mb(&folio->page.xrefcount, PM_HOT_BIAS);
	atomic_store_release(entry, h);
	atomic_or_mb(&folio->page.xflags, PGF(PG_hot));
	pm_spin_unlock(&m->hot_lock);
	if (!folio_mapped_any(folio)) /* (H3) */
		pm__folio_leave_hot(folio);
	return;
out:
	pm_spin_unlock(&m->hot_lock);
}

/* The net slot deltas of a hot @folio (racy; exact at quiescence). */
static void hot_sum(struct pm_folio *folio, long *refs, long *pins)
{
	struct pm_machine *m = page_machine(&folio->page);
	struct pm_folio_hot *_Atomic *entry = folio_hot_entry(m, folio);
	struct pm_folio_hot *h = entry ? atomic_load_acquire(entry) : NULL;
	long n = 0;

	*refs = *pins = 0;
	if (!h)
		return;
	for (unsigned cpu = 0; cpu < m->nr_cpus; cpu++) {
		int64_t v = atomic_load_relaxed(&h->slot[cpu].xv);

		if (!hot_folded(v))
			n += (long)v;
	}
	if (folio_test_large(folio))
		*refs = *pins = n;
	else
		*refs = n * GUP_PIN_COUNTING_BIAS;
}

/*
 * The counts of a folio that is (or was just) hot: the shared counts, less the bias, plus the
 * slots. The flags are read again after the sum, so that a leave (or an enter) in between is
 * never read half done: a bias counted once and dropped, or slots read after their fold.
 * Racy all the same while pins come and go (hot_sum()); for the debug checks, at quiescence.
 */
static int hot_counts(const struct pm_folio *folio, int *pincount)
{
	struct pm_folio *f = (struct pm_folio *)folio;

	for (;;) {
		unsigned long flags = atomic_load_mb(&f->page.xflags);
		int shared = atomic_load_mb(&f->page.xrefcount);
		int spins = atomic_load_mb(&f->page.xpincount);
		long refs, pins;

		if (!(flags & (PGF(PG_hot) | PGF(PG_hot_leave)))) {
			if (atomic_load_mb(&f->page.xflags) != flags)
				continue;
			*pincount = spins;
			return shared;
		}
		hot_sum(f, &refs, &pins);
		if (atomic_load_mb(&f->page.xflags) != flags)
			continue;
		*pincount = (int)(spins + pins);
		return (int)(shared - PM_HOT_BIAS + refs);
	}
}

int pm__folio_hot_ref_count(const struct pm_folio *folio)
{
	int pins;

	return hot_counts(folio, &pins);
}

int pm__folio_hot_pincount(const struct pm_folio *folio)
{
	int pins;

	hot_counts(folio, &pins);
	return pins;
}

/*
 * pm__folio_counts_exact() - @folio's refcount (and pincount) as Linux would read them, for
 * the public queries. A sum of slots read while pins come and go on other CPUs is no answer
 * (a held reference can read as none), so a hot folio leaves hot mode first, as for
 * folio_maybe_dma_pinned(), and the counts are read under hot_lock, where no enter can add
 * its bias before setting PG_hot; if a pin made it hot again in between, it leaves again.
 * A small folio whose refcount, read between two reads of its flags that find it cold, is
 * below a bias was cold at that moment (the bias comes before PG_hot and goes after it): one
 * count, read at one moment, is exact without the lock. Free descriptors are read so too.
 */
int pm__folio_counts_exact(struct pm_folio *folio, int *pincount)
{
	const unsigned long hot = PGF(PG_hot) | PGF(PG_hot_leave);
	struct pm_machine *m;

	if (!folio_test_large(folio)) {
		unsigned long f1 = atomic_load_mb(&folio->page.xflags);
		int refs = atomic_load_mb(&folio->page.xrefcount);

		if (!((f1 | atomic_load_mb(&folio->page.xflags)) & hot) && refs < PM_HOT_BIAS) {
			*pincount = 0;
			return refs;
		}
	}
	m = pm__page_machine_any(&folio->page);
	for (;;) {
		pm__folio_cool(folio);
		pm_spin_lock(&m->hot_lock);
		if (!folio_hot(folio)) {
			int refs = atomic_load_relaxed(&folio->page.xrefcount);

			*pincount = atomic_load_relaxed(&folio->page.xpincount);
			pm_spin_unlock(&m->hot_lock);
			return refs;
		}
		pm_spin_unlock(&m->hot_lock);
	}
}

/* pm_machine_destroy(): every folio is gone, so no state is in use. */
void pm__machine_hot_exit(struct pm_machine *m)
{
	struct pm_folio_hot *h = m->hot_list, *next;

	for (; h; h = next) {
		next = h->next;
		pm__trace_object_gone(h);
		free(h);
	}
	m->hot_list = NULL;
	if (m->xhot) {
		pm__trace_object_gone(m->xhot);
		munmap(m->xhot, m->nr_pages * sizeof(*m->xhot));
	}
}

/* ---- public accessors: exact counts ---- */

bool pm_folio_maybe_dma_pinned(struct pm_folio *folio)
{
	return folio_maybe_dma_pinned(folio);
}

int pm_folio_ref_count(struct pm_folio *folio)
{
	int pins;

	if (folio_is_zero(folio))
		return folio_ref_count(folio);
	return pm__folio_counts_exact(folio, &pins);
}

int pm_folio_pincount(struct pm_folio *folio)
{
	int pins;

	if (!folio_test_large(folio))
		return 0;
	pm__folio_counts_exact(folio, &pins);
	return pins;
}
