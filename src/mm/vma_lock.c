// SPDX-License-Identifier: MIT
/*
 * vma_lock.c - per-VMA locks (Linux 6.4): faults that never touch mmap_lock.
 *
 * A fault finds its VMA in the RCU-readable tree (vma_tree.c), read-locks that one VMA and
 * handles the fault under it; writers that change a VMA (mmap, munmap, mprotect, madvise that
 * changes flags, fork, teardown) hold mmap_lock for write and write-lock each VMA they change,
 * remove or create. A fault on any other VMA goes on undisturbed.
 *
 * The lock. xvm_refcnt counts readers and has two flag bits: WRITER (a writer is draining
 * readers) and WAITER (it sleeps on the word). A VMA is write-locked while its xvm_lock_seq
 * equals the lock sequence of its range (mm/range.c: the whole mm's in Linux's design, its
 * mm_lock_seq); mmap_write_unlock() bumps the sequence of each range it held, which unlocks
 * every VMA write-locked in that section at once, so the writer pays no atomic per VMA.
 *
 *	reader (vma_start_read)			writer (vma_start_write, mmap_lock W held)
 *	-----------------------			------------------------------------------
 *	seq = mm_lock_seq (acquire)		refcnt |= WRITER (mb)
 *	vm_lock_seq == seq? fail		wait until readers(refcnt) == 0 (acquire)
 *	refcnt += 1 (mb)			vm_lock_seq = mm_lock_seq
 *	WRITER set? undo, fail			refcnt &= ~(WRITER|WAITER) (release)
 *	vm_lock_seq == mm_lock_seq? undo, fail	... change the VMA ...
 *	... fault ...				mm_lock_seq++ (release), at mmap_write_unlock
 *	refcnt -= 1 (release); wake if last
 *	and a writer sleeps
 *
 * Why it excludes: the reader's increment and the writer's "refcnt |= WRITER" are RMWs of one
 * word, so one comes first. (a) The increment: the writer sees the reader and waits for its
 * release, which publishes everything the fault did. (b) The WRITER bit: the reader sees it and
 * backs out - or, if the writer already cleared it again, the reader's increment read the
 * writer's release and so sees its vm_lock_seq store, finds it equal to mm_lock_seq (the section
 * is still open) and backs out. A reader that finds the two different after its increment either
 * came before the writer (case a) or after the writer's section closed: its acquire of the new
 * mm_lock_seq then shows it every change the writer made, because the writer bumped it with a
 * release after making them.
 *
 * Why a VMA found under RCU is safe to lock: VMAs that leave the tree are reused or freed only a
 * grace period later (pm__vma_set_flush() at mmap_write_unlock), and lock_vma_under_rcu()
 * takes the read lock inside the read section. After locking it checks what the lockless lookup could not:
 * that the VMA still covers the address (a split may have shrunk it) and is still attached (a
 * munmap may have removed it: VMA_LOCK_MISS, look again). Everything the fault then reads of
 * the VMA - bounds, flags, file - is stable until vma_end_read(), because changing it takes the
 * write lock, which waits for us. What the VMA owns (page tables, folios, its shmem object's
 * reference) stays too: munmap detaches and write-locks the VMA before it zaps and frees.
 *
 * What a fault under a VMA lock may not rely on: any other VMA (merging neighbours, the tree).
 * pinmm's faults never look at another VMA, and never drop their lock, so none asks to be
 * retried; the retry plumbing (vma_lock_retry) is there for the paths that will.
 *
 * A miss without the lock (the range design, policy->lockless_miss; pm__vma_absent()). Where
 * no VMA covers the address, Linux's fault and slow GUP take mmap_lock for read to be sure, and
 * its reader count is a word that every such miss writes. Here the miss is confirmed by reads
 * alone, as a seqlock reader would:
 *
 *	s = range's lock sequence (acquire)	down_write(range): WRITER set (mb)
 *	WRITER set? give up			... change the range's tree ...
 *	lookup(addr) under RCU: none		lock sequence++ (release)
 *	rmb; WRITER set? give up		up_write: WRITER cleared (mb)
 *	lock sequence still s? a miss
 *
 * Every write hold of a range bumps its sequence before it ends (mmap_write_downgrade() and
 * mmap_unlock(), range.c for longer runs). If the lookup overlapped a write section, either one
 * of the two reads of the lock word saw WRITER, or the second came after the section ended: it
 * read the unlock, which follows the bump, so the sequence read after it is no longer s. If
 * neither, no section overlapped the lookup, and the tree it read (vma_tree.c: a consistent
 * version of each node) was the tree between two sections, where no VMA covered the address:
 * the miss is the answer the locked path would have given at that moment. A fault below a
 * VM_GROWSDOWN VMA would grow it (dispatch.c), which may be in another range, so a fault misses
 * without the lock only in an mm that never had such a VMA (mm->xgrowsdown, set before the
 * entry is stored, so a lookup that could find the VMA is ordered after it). Slow GUP does not
 * grow stacks (Linux 6.5), so it needs no such test.
 */
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mm/vma_lock.h"

#define VMA_LOCK_SPINS 256
/* Read locks taken while another reader held the VMA, before it gets per-CPU counts. */
#define VMA_PCPU_AFTER 64

/*
 * Per-CPU reader counts. Threads of one mm that fault in one VMA - will-it-scale's page_fault
 * tasks map side by side, and their regions merge into one VMA, as in Linux - would bounce the
 * VMA's xvm_refcnt line on every fault. Once a VMA has been read-locked VMA_PCPU_AFTER times
 * while another reader held it, readers count in per-CPU slots instead (a percpu rw semaphore
 * made lazily, per VMA): a reader adds one to its slot and then reads the WRITER bit; a writer
 * sets the WRITER bit and then waits for the central count and the sum of the slots to reach
 * zero. Both sides' write-then-read are sequentially consistent, so either the reader sees the
 * bit (and backs out) or the writer sees the reader's count (and waits for it).
 * PM_KNOB_VMA_LOCK_SHARED_COUNT keeps every VMA on its central count, as Linux does.
 * The counts (struct pm_vma_pcpu) are in mm/vma_lock.h, for a fault's inline test of its own
 * slot (pm__vma_read_slot_of()).
 */

static __thread int vma_cpu = -1;		 /* this thread's slot, chosen once */
__thread _Atomic long *pm__vma_read_slot;	 /* the slot of the read lock held, or NULL */

static _Atomic long *this_slot(struct pm_vma_pcpu *pc)
{
	if (unlikely(vma_cpu < 0)) {
		int cpu = pm_cpu_now();

		vma_cpu = cpu < 0 ? 0 : cpu;
	}
	return &pc->slot[(unsigned)vma_cpu & pc->mask].xreaders;
}

/*
 * Is @vma write-locked? Its lock sequence against the sequence of the range it was locked
 * under (a VMA never locked: no source yet).
 */
static bool vma_write_locked(struct pm_vma *vma)
{
	_Atomic unsigned long *seq = atomic_load_acquire(&vma->xlock_seqp);

	return seq && atomic_load_acquire(&vma->xvm_lock_seq) == atomic_load_acquire(seq);
}

static void vma_read_drop(struct pm_vma *vma)
{
	unsigned old = atomic_sub_release(&vma->xvm_refcnt, 1);

	if (unlikely(old & VMA_LOCK_WAITER) && (old & VMA_LOCK_READERS) == 1)
		syscall(SYS_futex, (unsigned *)&vma->xvm_refcnt, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
			0);
}

/*
 * Once the slot is down, the writer may see no reader, retire the VMA and, a grace period
 * later, reuse it and its per-CPU counts: the look at the waiter bit and the wake-up that
 * follow run inside an RCU read-side section begun before the drop, so that grace period
 * waits for them (Linux wakes the mm's rcuwait, under RCU too).
 */
static void vma_pcpu_drop(struct pm_vma *vma, struct pm_vma_pcpu *pc, _Atomic long *slot)
{
	pm_rcu_read_lock();
	atomic_sub_mb(slot, 1);
	if (unlikely(atomic_load_mb(&vma->xvm_refcnt) & VMA_LOCK_WAITER)) {
		atomic_add_mb(&pc->xwake, 1);
		syscall(SYS_futex, (unsigned *)&pc->xwake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	pm_rcu_read_unlock();
}

/* A reader found the VMA held by another: after enough of that, give it per-CPU counts. */
static void vma_note_contention(struct pm_vma *vma)
{
	unsigned nr = 1;
	struct pm_vma_pcpu *pc, *none = NULL;

	/* Linux's vma_start_read keeps one shared count (the rwsem until 6.14, vm_refcnt from
	 * 6.15): every reader writes its line, for ever. */
	if (knob(vma->mm->m, PM_KNOB_VMA_LOCK_SHARED_COUNT))
		return;
	if (atomic_add_relaxed(&vma->xcontended, 1) != VMA_PCPU_AFTER)
		return;
	while (nr < vma->mm->m->nr_cpus)
		nr *= 2;
	if (posix_memalign((void **)&pc, PM_CACHELINE, sizeof(*pc) + nr * sizeof(pc->slot[0])))
		return; /* no memory: stay central */
	memset(pc, 0, sizeof(*pc) + nr * sizeof(pc->slot[0]));
	pc->mask = nr - 1;
	pm__trace_object(pc, sizeof(*pc) + nr * sizeof(pc->slot[0]), "pm_vma_pcpu");
	if (!atomic_compare_exchange_strong_explicit(&vma->xpcpu, &none, pc, memory_order_seq_cst,
						     memory_order_relaxed)) {
		pm__trace_object_gone(pc);
		free(pc);
	}
}

/* A stamp for a first fault (vma.c, pm__vma_anon_prepare): monotonic across threads, strictly increasing in each. */
unsigned long pm__vma_anon_clock(void)
{
	static __thread unsigned long last;
	struct timespec ts;
	unsigned long t;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t = (unsigned long)ts.tv_sec * 1000000000UL + (unsigned long)ts.tv_nsec;
	last = t > last ? t : last + 1;
	return last;
}

/*
 * The VMA's first anonymous page, under a per-CPU read lock (vma.c, pm__vma_anon_prepare):
 * stamp the reader's own slot with the time, tested before set, instead of the VMA's shared
 * word. Return: false if this thread holds no per-CPU read lock of @vma (the caller uses the
 * shared word).
 */
bool pm__vma_anon_mark_pcpu(struct pm_vma *vma)
{
	struct pm_vma_pcpu_slot *slot = pm__vma_read_slot_of(vma);

	if (!slot)
		return false;
	if (!atomic_load_relaxed(&slot->xanon))
		atomic_store_relaxed(&slot->xanon, pm__vma_anon_clock());
	return true;
}

/*
 * When did a fault first mark a slot of @vma (pm__vma_anon_mark_pcpu)? The earliest stamp, or
 * 0 if none did. Clear the marks if @clear.
 */
unsigned long pm__vma_anon_marked(struct pm_vma *vma, bool clear)
{
	struct pm_vma_pcpu *pc = atomic_load_acquire(&vma->xpcpu);
	unsigned long first = 0;

	for (unsigned i = 0; pc && i <= pc->mask; i++) {
		unsigned long t = atomic_load_relaxed(&pc->slot[i].xanon);

		if (!t)
			continue;
		if (!first || t < first)
			first = t;
		if (clear)
			atomic_store_relaxed(&pc->slot[i].xanon, 0);
	}
	return first;
}

/* Free the per-CPU counts of a VMA no reader can reach any more. */
void pm__vma_free_pcpu(struct pm_vma *vma)
{
	pm__trace_object_gone(atomic_load_relaxed(&vma->xpcpu));
	free(atomic_load_relaxed(&vma->xpcpu));
	atomic_store_relaxed(&vma->xpcpu, NULL);
}

bool pm__vma_start_read(struct pm_vma *vma)
{
	struct pm_vma_pcpu *pc;
	unsigned old;

	pm_assert(!pm__vma_read_slot); /* one VMA read lock per thread at a time */
	if (vma_write_locked(vma))
		return false;
	pc = atomic_load_mb(&vma->xpcpu);
	if (pc) {
		_Atomic long *slot = this_slot(pc);

		atomic_add_mb(slot, 1);
		if (unlikely(atomic_load_mb(&vma->xvm_refcnt) & VMA_LOCK_WRITER) ||
		    unlikely(vma_write_locked(vma))) {
			vma_pcpu_drop(vma, pc, slot);
			return false;
		}
		pm__vma_read_slot = slot;
	} else {
		old = atomic_add_mb(&vma->xvm_refcnt, 1);
		if (unlikely(old & VMA_LOCK_WRITER) || unlikely(vma_write_locked(vma))) {
			vma_read_drop(vma);
			return false;
		}
		if (unlikely(old & VMA_LOCK_READERS))
			vma_note_contention(vma);
	}
#if PM_DEBUG >= 1
	pm__vma_read_held++;
#endif
	return true;
}

void pm__vma_end_read(struct pm_vma *vma)
{
	_Atomic long *slot = pm__vma_read_slot;

	assert_vma_read_locked(vma);
#if PM_DEBUG >= 1
	pm__vma_read_held--;
#endif
	if (slot) {
		pm__vma_read_slot = NULL;
		vma_pcpu_drop(vma, atomic_load_relaxed(&vma->xpcpu), slot);
	} else {
		vma_read_drop(vma);
	}
}

/* Sum of the per-CPU reader counts. */
static long pcpu_readers(struct pm_vma_pcpu *pc)
{
	long sum = 0;

	for (unsigned i = 0; i <= pc->mask; i++)
		sum += atomic_load_mb(&pc->slot[i].xreaders);
	return sum;
}

/*
 * pm__vma_start_write() - exclude every fault from @vma until mmap_write_unlock(): waits for
 * the faults that hold it now. Context: mmap_lock held for write.
 */
void pm__vma_start_write(struct pm_vma *vma)
{
	_Atomic unsigned long *seq;
	struct pm_vma_pcpu *pc;
	unsigned c, w;

	mmap_assert_write_locked(vma->mm);
	if (vma_write_locked(vma))
		return; /* already, in this section */
	c = atomic_or_mb(&vma->xvm_refcnt, VMA_LOCK_WRITER) | VMA_LOCK_WRITER;
	for (unsigned tries = 0; c & VMA_LOCK_READERS; tries++) {
		if (tries < VMA_LOCK_SPINS) {
			cpu_relax();
		} else if (c & VMA_LOCK_WAITER ||
			   atomic_cas_strong_mb(&vma->xvm_refcnt, &c, c | VMA_LOCK_WAITER)) {
			/* Sleep until the last reader leaves; it wakes us (vma_end_read). */
			syscall(SYS_futex, (unsigned *)&vma->xvm_refcnt, FUTEX_WAIT_PRIVATE,
				c | VMA_LOCK_WAITER, NULL, NULL, 0);
		}
		/* Only an acquire load ends the loop: it orders the readers' critical sections
		 * (their release in vma_end_read) before what we change next. */
		c = atomic_load_acquire(&vma->xvm_refcnt);
	}
	pc = atomic_load_mb(&vma->xpcpu);
	for (unsigned tries = 0; pc && pcpu_readers(pc); tries++) {
		if (tries < VMA_LOCK_SPINS) {
			cpu_relax();
			continue;
		}
		/* Sleep until a leaving reader sees WAITER and bumps xwake (vma_pcpu_drop). */
		w = atomic_load_mb(&pc->xwake);
		atomic_or_mb(&vma->xvm_refcnt, VMA_LOCK_WAITER);
		if (pcpu_readers(pc))
			syscall(SYS_futex, (unsigned *)&pc->xwake, FUTEX_WAIT_PRIVATE, w, NULL,
				NULL, 0);
	}
	seq = vma_lock_seq_source(vma);
	atomic_store_relaxed(&vma->xlock_seqp, seq);
	atomic_store_relaxed(&vma->xvm_lock_seq, atomic_load_relaxed(seq));
	atomic_and_release(&vma->xvm_refcnt, ~(VMA_LOCK_WRITER | VMA_LOCK_WAITER));
}

/*
 * pm__lock_vma_under_rcu() - the VMA covering @addr, read-locked, or NULL (vma_lock_abort):
 * the caller then takes mmap_lock. Context: any; takes no lock but the VMA's.
 */
struct pm_vma *pm__lock_vma_under_rcu(struct pm_mm *mm, unsigned long addr)
{
	struct pm_vma *vma;

	pm_rcu_read_lock();
	for (;;) {
		vma = pm__vt_lookup(&mm->ranges[range_of(mm, addr)].set.vmt, addr);
		if (!vma || !pm__vma_start_read(vma))
			break;
		if (unlikely(addr < vma->start || addr >= vma->end)) {
			pm__vma_end_read(vma);
			break;
		}
		if (unlikely(atomic_load_relaxed(&vma->xdetached))) {
			/* Removed or replaced after we found it: look again. */
			pm__vma_end_read(vma);
			count_event(mm->m, VMA_LOCK_MISS, 1);
			continue;
		}
		pm_rcu_read_unlock();
		return vma;
	}
	pm_rcu_read_unlock();
	count_event(mm->m, VMA_LOCK_ABORT, 1);
	return NULL;
}

/*
 * pm__vma_absent() - no VMA covers @addr, found with reads only (see the top of this file);
 * @fault: for a fault, which would grow a VM_GROWSDOWN VMA above @addr. False means "not sure":
 * the caller takes the range's lock and looks again. Context: any; takes no lock.
 */
bool pm__vma_absent(struct pm_mm *mm, unsigned long addr, bool fault)
{
	struct pm_mm_range *rg = &mm->ranges[range_of(mm, addr)];
	unsigned long seq;
	bool found;

	if (!mm->policy->lockless_miss)
		return false;
	seq = atomic_load_acquire(&rg->xlock_seq);
	if (atomic_load_acquire(&rg->lock.xcount) & PM_RWSEM_WRITER)
		return false;
	if (fault && atomic_load_acquire(&mm->xgrowsdown))
		return false;
	pm_rcu_read_lock();
	found = pm__vt_lookup(&rg->set.vmt, addr);
	pm_rcu_read_unlock();
	pm_smp_rmb(); /* the lookup's loads before the re-checks */
	return !found && !(atomic_load_acquire(&rg->lock.xcount) & PM_RWSEM_WRITER) &&
	       atomic_load_acquire(&rg->xlock_seq) == seq;
}

/* ---- reusing what left the tree ---- */

static void vma_chain_free(struct pm_vma *vma)
{
	while (vma) {
		struct pm_vma *next = vma->retire_next;

		pm__vma_free_pcpu(vma);
		pm__trace_object_gone(vma);
		free(vma);
		vma = next;
	}
}

static void vma_cache_put(struct pm_vma_cache *c)
{
	if (atomic_sub_mb(&c->xrefs, 1) == 1) {
		vma_chain_free(atomic_xchg_acquire(&c->xreclaimed, NULL));
		free(c);
	}
}

/* A grace period after a batch left the tree: hand it back to its mm for reuse. */
static void vmas_reclaim_cb(struct pm_rcu_head *head)
{
	struct pm_vma *first = container_of(head, struct pm_vma, rcu), *tail = first->batch_tail;
	struct pm_vma_cache *c = first->rcache;
	struct pm_vma *old = atomic_load_relaxed(&c->xreclaimed);

	/* The batch's tail was recorded when it was retired: walking a batch of VMAs that other
	 * CPUs wrote last would cost the grace-period thread a cache miss each. */
	do
		tail->retire_next = old;
	while (!atomic_compare_exchange_weak_explicit(&c->xreclaimed, &old, first,
						      memory_order_release, memory_order_relaxed));
	vma_cache_put(c);
}


/*
 * The cache a set's VMAs come back to: the range's own, made at its first flush, so that a
 * thread's VMAs circulate on its own CPU instead of migrating to whichever thread empties a
 * shared cache next (without memory: the mm's).
 */
static struct pm_vma_cache *set_cache(struct pm_mm *mm, struct pm_vma_set *set)
{
	if (!set->vcache) {
		set->vcache = calloc(1, sizeof(*set->vcache));
		if (set->vcache)
			atomic_store_relaxed(&set->vcache->xrefs, 1);
	}
	return set->vcache ? set->vcache : mm->vcache;
}

/*
 * pm__vma_set_flush() - hand the VMAs and tree nodes that left @set's tree to RCU, one
 * callback for each kind, once PM_RETIRE_BATCH of them wait (or @all): call_rcu and the
 * grace-period thread's wake-up cost far more than a VMA change, so they are paid once per
 * batch (the batch's size: docs/perf-log.md, 2026-12-03, "VMA retire batches").
 * Context: @set's writer (mmap_lock or the range held for write, or downgraded by it).
 */
void pm__vma_set_flush(struct pm_mm *mm, struct pm_vma_set *set, bool all)
{
	mmap_assert_locked(mm);
	if (!all && set->nr_retired_vmas + set->vmt.nr_retired < PM_RETIRE_BATCH)
		return;
	pm__vt_retire_flush(&set->vmt);
	if (set->retired_vmas) {
		struct pm_vma_cache *c = set_cache(mm, set);

		atomic_add_relaxed(&c->xrefs, 1);
		set->retired_vmas->rcache = c;
		set->retired_vmas->batch_tail = set->retired_tail;
		pm_call_rcu(&set->retired_vmas->rcu, vmas_reclaim_cb);
		set->retired_vmas = NULL;
		set->nr_retired_vmas = 0;
	}
}

/*
 * pm__vma_set_here() - the set this thread's change of @mm retires VMAs to and reuses them
 * from: that of the lowest range it holds (Linux's design: the one).
 */
struct pm_vma_set *pm__vma_set_here(struct pm_mm *mm)
{
	struct pm_rwsem_run *h = pm__range_hold(mm);

	pm_bug_on(!h);
	return &mm->ranges[h->lo].set;
}

/*
 * pm__vma_cache_get() - a VMA to reuse, or NULL: one whose grace period has passed.
 * Context: mmap_lock held for write (or ranges, in the range design).
 */
struct pm_vma *pm__vma_cache_get(struct pm_mm *mm)
{
	struct pm_vma_set *set = pm__vma_set_here(mm);
	struct pm_vma *vma = set->free_vmas;

	mmap_assert_write_locked(mm);
	for (unsigned i = 0; !vma && i < 2; i++) {
		struct pm_vma_cache *c = i ? mm->vcache : set->vcache;

		if (c && atomic_load_relaxed(&c->xreclaimed))
			vma = atomic_xchg_acquire(&c->xreclaimed, NULL);
	}
	if (vma)
		set->free_vmas = vma->retire_next;
	return vma;
}

/* Free at once what @set has waiting for a grace period or for reuse, and drop its share of
 * its own cache (batches in flight keep theirs). */
void pm__vma_set_free_now(struct pm_vma_set *set)
{
	pm__vt_retire_free_now(&set->vmt);
	vma_chain_free(set->retired_vmas);
	set->retired_vmas = NULL;
	set->nr_retired_vmas = 0;
	vma_chain_free(set->free_vmas);
	set->free_vmas = NULL;
	if (set->vcache) {
		vma_cache_put(set->vcache);
		set->vcache = NULL;
	}
}

/* Free at once what waits for a grace period, and drop the mm's share of the cache: the mm is
 * going away and nobody can look it up any more. */
void pm__mm_retire_free_now(struct pm_mm *mm)
{
	for (unsigned r = 0; r < mm->nr_ranges; r++)
		pm__vma_set_free_now(&mm->ranges[r].set);
	vma_cache_put(mm->vcache);
	mm->vcache = NULL;
}
