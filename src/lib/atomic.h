/* SPDX-License-Identifier: MIT */
/*
 * atomic.h - C11 atomics with the memory order in the name.
 *
 * Every shared access in pinmm goes through these, so that each one shows what it orders.
 * Fields that are accessed concurrently are _Atomic and named with an x prefix (xrefcount).
 * There is deliberately no wrapper that defaults to seq_cst: the few places that need a full
 * barrier say so with _mb / pm_smp_mb() and explain the pairing in a comment.
 */
#ifndef PM_LIB_ATOMIC_H
#define PM_LIB_ATOMIC_H

#include <stdatomic.h>

#define atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define atomic_load_mb(p) atomic_load_explicit((p), memory_order_seq_cst)
#define atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define atomic_store_mb(p, v) atomic_store_explicit((p), (v), memory_order_seq_cst)
#define atomic_xchg_mb(p, v) atomic_exchange_explicit((p), (v), memory_order_seq_cst)
#define atomic_xchg_acquire(p, v) atomic_exchange_explicit((p), (v), memory_order_acquire)
#define atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define atomic_sub_relaxed(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define atomic_add_mb(p, v) atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define atomic_sub_release(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_release)
#define atomic_sub_mb(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_seq_cst)
#define atomic_or_mb(p, v) atomic_fetch_or_explicit((p), (v), memory_order_seq_cst)
#define atomic_or_relaxed(p, v) atomic_fetch_or_explicit((p), (v), memory_order_relaxed)
#define atomic_or_acquire(p, v) atomic_fetch_or_explicit((p), (v), memory_order_acquire)
#define atomic_and_mb(p, v) atomic_fetch_and_explicit((p), (v), memory_order_seq_cst)
#define atomic_and_relaxed(p, v) atomic_fetch_and_explicit((p), (v), memory_order_relaxed)
#define atomic_and_release(p, v) atomic_fetch_and_explicit((p), (v), memory_order_release)
#define atomic_cas_mb(p, oldp, v) \
	atomic_compare_exchange_weak_explicit((p), (oldp), (v), memory_order_seq_cst, \
					      memory_order_relaxed)
#define atomic_cas_strong_mb(p, oldp, v) \
	atomic_compare_exchange_strong_explicit((p), (oldp), (v), memory_order_seq_cst, \
						memory_order_relaxed)
#define atomic_cas_relaxed(p, oldp, v) \
	atomic_compare_exchange_weak_explicit((p), (oldp), (v), memory_order_relaxed, \
					      memory_order_relaxed)
#define atomic_cas_acquire(p, oldp, v) \
	atomic_compare_exchange_weak_explicit((p), (oldp), (v), memory_order_acquire, \
					      memory_order_relaxed)

/* A per-thread counter slot: only its owner writes it, anyone may read it. No RMW needed. */
#define atomic_inc_owned(p, n) atomic_store_relaxed((p), atomic_load_relaxed(p) + (n))

#include "lib/compiler.h"

#if !PM_TSAN
#define pm_smp_mb() atomic_thread_fence(memory_order_seq_cst)
#define pm_smp_rmb() atomic_thread_fence(memory_order_acquire)
#define pm_smp_wmb() atomic_thread_fence(memory_order_release)
#else
/*
 * ThreadSanitizer does not model fences. Every fence pinmm uses pairs with another fence (or
 * a seq_cst RMW) on the other side, so under TSan a seq_cst RMW of one global word gives the
 * same ordering and lets TSan see the edge. Slower, same guarantees.
 */
extern _Atomic unsigned long pm__tsan_fence;
#define pm_smp_mb() ((void)atomic_fetch_add_explicit(&pm__tsan_fence, 0, memory_order_seq_cst))
#define pm_smp_rmb() pm_smp_mb()
#define pm_smp_wmb() pm_smp_mb()
#endif
#define barrier() __asm__ __volatile__("" ::: "memory")

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	barrier();
#endif
}

#endif /* PM_LIB_ATOMIC_H */
