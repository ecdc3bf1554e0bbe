// SPDX-License-Identifier: MIT
/*
 * runtime.c - the __tsan_* entry points of the trace build, and the per-thread logs.
 *
 * clang's -fsanitize=thread turns every load and store of the instrumented code into a call
 * (__tsan_read4(addr) before a 4-byte load), every atomic into a call that must perform it
 * (__tsan_atomic64_fetch_add(addr, v, order)), and every memset/memcpy/memmove into a plain
 * call to the libc function. libtsan would check those for races; this runtime, like the
 * kernel's KCSAN (kernel/kcsan/core.c), performs them and, on a thread between
 * pm_trace_begin() and pm_trace_end(), writes each into the thread's log. The entry points are
 * exactly what clang 14 emits for src/ (nm -u of the objects) plus the rest of the family it
 * can emit (unaligned, volatile, range, vptr, the other atomic sizes and operations), so that
 * a change to src/ does not fail to link for want of one. 128-bit atomics are left out: src/
 * has none, and without -mcx16 clang would call libatomic for one, which the trace link does
 * not have, so it fails to link instead of hiding the access.
 *
 * The decisions:
 *  - Atomics are performed here with the __atomic builtins, at the order they were passed
 *    (a switch over the constant orders: the builtins take a non-constant order as seq_cst,
 *    which would be correct but not what the code asked for). An invalid order for the
 *    operation (a release load) cannot come from C11 code; it is taken as seq_cst.
 *  - An atomic load is a read. Every exchange, fetch-op and compare-and-swap is a write, a
 *    failed compare-and-swap too: it takes the line exclusive just like a successful one,
 *    which is what the Scalable Commutativity Rule's conflict and the hardware both count.
 *  - memset, memcpy and memmove reach the runtime as plain calls that the trace link wraps
 *    (-Wl,--wrap=memset,...): __wrap_memset records and calls the real one. Only calls made
 *    while an instrumented function is on this thread's stack are recorded (the depth that
 *    __tsan_func_entry/exit keep): the harness's own memsets, and the runtime's, are not the
 *    operation's.
 *  - pthread mutexes (the machine's registry lock, a shmem object's i_mmap_lock and
 *    truncate_lock, the hugetlb fault mutexes) are libc's, so their lock word is written where
 *    no instrumentation sees it. The link wraps pthread_mutex_lock, _trylock and _unlock the
 *    same way; each is recorded as a read-modify-write of the mutex's first 16 bytes, where
 *    glibc keeps the lock word, the owner and the user count that every lock and unlock
 *    writes.
 *  - Lock sections: the library's spinlocks and rwsems call pm__trace_lock()/_unlock() (its
 *    src/lib/trace.h hooks) once held and before release, and the mutex wrappers do the same;
 *    each becomes an event beside the log (the lock, the log's length then, shared or
 *    exclusive), so that a reader of the log can tell which accesses a critical section made.
 *    Events are kept in a second fixed buffer of this thread (PM_TRACE_LOCK_EVENTS).
 *  - Left out: the thread's own stack (pthread_getattr_np's bounds), which no other thread
 *    reads, and the log buffer. The harness is not instrumented, so it never calls in.
 *  - The recording path writes only this thread's log: a TLS flag test, two range tests and
 *    a 24-byte append to a buffer of fixed size (PINMM_TRACE_ENTRIES entries, default 2^20),
 *    with accesses past its end counted, not kept. A thread's first pm_trace_begin() maps the
 *    buffer; thread exit unmaps it.
 *  - Nothing here is instrumented (this file is compiled without -fsanitize=thread), so the
 *    runtime's own accesses are never seen.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trace/trace.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define RA() ((uintptr_t)__builtin_return_address(0))
#define DEFAULT_ENTRIES (1UL << 20)
#define RMW_FLAGS (PM_TRACE_WRITE | PM_TRACE_ATOMIC | PM_TRACE_RMW)

struct thread_log {
	struct pm_trace_access *buf;
	struct pm_trace_lock_event *ev;
	size_t n, cap, dropped, fences, nev;
	uintptr_t stack_lo, stack_size;	/* this thread's stack: never recorded */
	uint64_t gen;
	int on;				/* between pm_trace_begin() and pm_trace_end() */
	int depth;			/* instrumented frames on this thread's stack */
};

static __thread struct thread_log tl __attribute__((tls_model("initial-exec")));
static pthread_key_t log_key;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static __attribute__((always_inline)) inline void record(const volatile void *p, size_t size,
							  unsigned flags, uintptr_t pc)
{
	struct thread_log *t = &tl;
	uintptr_t a = (uintptr_t)p;
	struct pm_trace_access *e;

	if (likely(!t->on))
		return;
	if (a - t->stack_lo < t->stack_size ||
	    a - (uintptr_t)t->buf < t->cap * sizeof(*t->buf))
		return;
	if (unlikely(t->n == t->cap)) {
		t->dropped++;
		return;
	}
	e = &t->buf[t->n++];
	e->addr = a;
	e->pc = pc;
	e->size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	e->flags = flags;
}

/* ---- markers and logs ---- */

static void log_thread_exit(void *arg)
{
	struct thread_log *t = &tl;

	t->on = 0;
	if (t->buf)
		munmap(t->buf, t->cap * sizeof(*t->buf));
	free(t->ev);
	t->ev = NULL;
	t->buf = NULL;
	t->cap = 0;
}

static void log_key_init(void)
{
	if (pthread_key_create(&log_key, log_thread_exit))
		abort();
}

static void thread_log_init(struct thread_log *t)
{
	const char *env = getenv("PINMM_TRACE_ENTRIES");
	size_t cap = env ? strtoul(env, NULL, 0) : 0;
	pthread_attr_t attr;
	void *lo;
	size_t size;
	void *buf;

	pthread_once(&log_once, log_key_init);
	if (!cap)
		cap = DEFAULT_ENTRIES;
	buf = mmap(NULL, cap * sizeof(*t->buf), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf == MAP_FAILED) {
		buf = NULL;
		cap = 0;
	}
	t->buf = buf;
	t->cap = cap;
	t->ev = malloc(PM_TRACE_LOCK_EVENTS * sizeof(*t->ev));
	t->stack_lo = t->stack_size = 0;
	if (!pthread_getattr_np(pthread_self(), &attr)) {
		if (!pthread_attr_getstack(&attr, &lo, &size)) {
			t->stack_lo = (uintptr_t)lo;
			t->stack_size = size;
		}
		pthread_attr_destroy(&attr);
	}
	pthread_setspecific(log_key, (void *)1);
}

void pm_trace_begin(void)
{
	struct thread_log *t = &tl;

	t->on = 0;
	if (!t->buf)
		thread_log_init(t);
	t->n = t->dropped = t->fences = t->nev = 0;
	t->gen = pm_trace_generation();
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->on = 1;
}

void pm_trace_end(struct pm_trace_log *out)
{
	struct thread_log *t = &tl;

	t->on = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	out->n = t->n;
	out->dropped = t->dropped;
	out->fences = t->fences;
	out->gen = t->gen;
	out->nlocks = 0;
	out->locks = malloc((t->nev ? t->nev : 1) * sizeof(*out->locks));
	if (out->locks && t->ev) {
		memcpy(out->locks, t->ev, t->nev * sizeof(*out->locks));
		out->nlocks = t->nev;
	}
	out->acc = malloc((t->n ? t->n : 1) * sizeof(*out->acc));
	if (!out->acc) {
		out->dropped += out->n;
		out->n = 0;
		return;
	}
	memcpy(out->acc, t->buf, t->n * sizeof(*out->acc));
}

void pm_trace_log_free(struct pm_trace_log *log)
{
	free(log->acc);
	free(log->locks);
	log->acc = NULL;
	log->locks = NULL;
	log->n = 0;
	log->nlocks = 0;
}

/* ---- what the instrumentation calls ---- */

/* Every entry point is declared right before it is defined (-Wmissing-prototypes). */
#define TSAN_FN(ret, name, ...) \
	PM_TRACE_API ret name(__VA_ARGS__); \
	PM_TRACE_API ret name(__VA_ARGS__)

TSAN_FN(void, __tsan_init, void)
{
}

TSAN_FN(void, __tsan_func_entry, void *call_pc)
{
	tl.depth++;
}

TSAN_FN(void, __tsan_func_exit, void)
{
	tl.depth--;
}

#define ACCESS(name, size, flags) \
	TSAN_FN(void, name, void *p) \
	{ \
		record(p, size, flags, RA()); \
	}
#define ACCESS_SIZES(prefix, flags) \
	ACCESS(prefix##1, 1, flags) \
	ACCESS(prefix##2, 2, flags) \
	ACCESS(prefix##4, 4, flags) \
	ACCESS(prefix##8, 8, flags) \
	ACCESS(prefix##16, 16, flags)

ACCESS_SIZES(__tsan_read, 0)
ACCESS_SIZES(__tsan_write, PM_TRACE_WRITE)
ACCESS_SIZES(__tsan_volatile_read, 0)
ACCESS_SIZES(__tsan_volatile_write, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_read2, 2, 0)
ACCESS(__tsan_unaligned_read4, 4, 0)
ACCESS(__tsan_unaligned_read8, 8, 0)
ACCESS(__tsan_unaligned_read16, 16, 0)
ACCESS(__tsan_unaligned_write2, 2, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_write4, 4, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_write8, 8, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_write16, 16, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_volatile_read2, 2, 0)
ACCESS(__tsan_unaligned_volatile_read4, 4, 0)
ACCESS(__tsan_unaligned_volatile_read8, 8, 0)
ACCESS(__tsan_unaligned_volatile_read16, 16, 0)
ACCESS(__tsan_unaligned_volatile_write2, 2, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_volatile_write4, 4, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_volatile_write8, 8, PM_TRACE_WRITE)
ACCESS(__tsan_unaligned_volatile_write16, 16, PM_TRACE_WRITE)

TSAN_FN(void, __tsan_read_range, void *p, unsigned long size)
{
	record(p, size, 0, RA());
}

TSAN_FN(void, __tsan_write_range, void *p, unsigned long size)
{
	record(p, size, PM_TRACE_WRITE, RA());
}

TSAN_FN(void, __tsan_vptr_read, void **p)
{
	record(p, sizeof(*p), 0, RA());
}

TSAN_FN(void, __tsan_vptr_update, void **p, void *v)
{
	record(p, sizeof(*p), PM_TRACE_WRITE, RA());
}

/* ---- memset, memcpy, memmove ---- */

void *__real_memset(void *d, int c, size_t n);
void *__real_memcpy(void *d, const void *s, size_t n);
void *__real_memmove(void *d, const void *s, size_t n);

static __attribute__((always_inline)) inline void record_memfn(void *d, const void *s, size_t n,
								uintptr_t pc, bool wrapped)
{
	if (likely(!tl.on) || !n || (wrapped && tl.depth <= 0))
		return;
	if (s)
		record(s, n, PM_TRACE_MEMFN, pc);
	record(d, n, PM_TRACE_WRITE | PM_TRACE_MEMFN, pc);
}

TSAN_FN(void *, __tsan_memset, void *d, int c, size_t n)
{
	record_memfn(d, NULL, n, RA(), false);
	return __real_memset(d, c, n);
}

TSAN_FN(void *, __tsan_memcpy, void *d, const void *s, size_t n)
{
	record_memfn(d, s, n, RA(), false);
	return __real_memcpy(d, s, n);
}

TSAN_FN(void *, __tsan_memmove, void *d, const void *s, size_t n)
{
	record_memfn(d, s, n, RA(), false);
	return __real_memmove(d, s, n);
}

TSAN_FN(void *, __wrap_memset, void *d, int c, size_t n)
{
	record_memfn(d, NULL, n, RA(), true);
	return __real_memset(d, c, n);
}

TSAN_FN(void *, __wrap_memcpy, void *d, const void *s, size_t n)
{
	record_memfn(d, s, n, RA(), true);
	return __real_memcpy(d, s, n);
}

TSAN_FN(void *, __wrap_memmove, void *d, const void *s, size_t n)
{
	record_memfn(d, s, n, RA(), true);
	return __real_memmove(d, s, n);
}

/* ---- lock sections ---- */

static void lock_event(const void *lock, unsigned flags)
{
	struct thread_log *t = &tl;

	if (likely(!t->on) || !t->ev || t->nev == PM_TRACE_LOCK_EVENTS)
		return;
	t->ev[t->nev++] = (struct pm_trace_lock_event){ (uintptr_t)lock, t->n, flags };
}

/* The library's hooks (src/lib/trace.h): not on its layers' call graph, like registry.c's. */
void pm__trace_lock(const void *lock, int excl);
void pm__trace_unlock(const void *lock);

void pm__trace_lock(const void *lock, int excl)
{
	lock_event(lock, PM_TRACE_LOCK_ACQUIRE | (excl ? PM_TRACE_LOCK_EXCL : 0));
}

void pm__trace_unlock(const void *lock)
{
	lock_event(lock, PM_TRACE_LOCK_RELEASE);
}

/* ---- pthread mutexes ---- */

int __real_pthread_mutex_lock(pthread_mutex_t *mu);
int __real_pthread_mutex_trylock(pthread_mutex_t *mu);
int __real_pthread_mutex_unlock(pthread_mutex_t *mu);

#define MUTEX_BYTES 16

static __attribute__((always_inline)) inline void record_mutex(pthread_mutex_t *mu, uintptr_t pc,
								bool failed)
{
	if (likely(!tl.on) || tl.depth <= 0)
		return;
	record(mu, MUTEX_BYTES, RMW_FLAGS | (failed ? PM_TRACE_CAS_FAILED : 0), pc);
}

TSAN_FN(int, __wrap_pthread_mutex_lock, pthread_mutex_t *mu)
{
	int err;

	record_mutex(mu, RA(), false);
	err = __real_pthread_mutex_lock(mu);
	if (!err && tl.depth > 0)
		lock_event(mu, PM_TRACE_LOCK_ACQUIRE | PM_TRACE_LOCK_EXCL);
	return err;
}

TSAN_FN(int, __wrap_pthread_mutex_trylock, pthread_mutex_t *mu)
{
	int err = __real_pthread_mutex_trylock(mu);

	record_mutex(mu, RA(), err != 0);
	if (!err && tl.depth > 0)
		lock_event(mu, PM_TRACE_LOCK_ACQUIRE | PM_TRACE_LOCK_EXCL);
	return err;
}

TSAN_FN(int, __wrap_pthread_mutex_unlock, pthread_mutex_t *mu)
{
	record_mutex(mu, RA(), false);
	if (tl.depth > 0)
		lock_event(mu, PM_TRACE_LOCK_RELEASE);
	return __real_pthread_mutex_unlock(mu);
}

/* ---- atomics ---- */

/*
 * The orders, as clang passes them (__tsan_memory_order: relaxed 0, consume 1, acquire 2,
 * release 3, acq_rel 4, seq_cst 5, the values of __ATOMIC_*), turned into constants: X(order)
 * runs with the one that was passed, or with seq_cst where the operation cannot take it.
 */
#define WITH_LOAD_ORDER(mo, X) \
	switch (mo) { \
	case __ATOMIC_RELAXED: X(__ATOMIC_RELAXED); break; \
	case __ATOMIC_CONSUME: X(__ATOMIC_CONSUME); break; \
	case __ATOMIC_ACQUIRE: X(__ATOMIC_ACQUIRE); break; \
	default: X(__ATOMIC_SEQ_CST); break; \
	}
#define WITH_STORE_ORDER(mo, X) \
	switch (mo) { \
	case __ATOMIC_RELAXED: X(__ATOMIC_RELAXED); break; \
	case __ATOMIC_RELEASE: X(__ATOMIC_RELEASE); break; \
	default: X(__ATOMIC_SEQ_CST); break; \
	}
#define WITH_RMW_ORDER(mo, X) \
	switch (mo) { \
	case __ATOMIC_RELAXED: X(__ATOMIC_RELAXED); break; \
	case __ATOMIC_CONSUME: X(__ATOMIC_CONSUME); break; \
	case __ATOMIC_ACQUIRE: X(__ATOMIC_ACQUIRE); break; \
	case __ATOMIC_RELEASE: X(__ATOMIC_RELEASE); break; \
	case __ATOMIC_ACQ_REL: X(__ATOMIC_ACQ_REL); break; \
	default: X(__ATOMIC_SEQ_CST); break; \
	}
/* A compare-and-swap's failure order is a load's, and no stronger than its success order
 * (C11 7.17.7.4): a stronger one is taken down to the strongest allowed. */
#define WITH_CAS_ORDERS(mo, fmo, X) \
	switch (mo) { \
	case __ATOMIC_RELAXED: X(__ATOMIC_RELAXED, __ATOMIC_RELAXED); break; \
	case __ATOMIC_CONSUME: \
		if (fmo == __ATOMIC_RELAXED) X(__ATOMIC_CONSUME, __ATOMIC_RELAXED) \
		else X(__ATOMIC_CONSUME, __ATOMIC_CONSUME) \
		break; \
	case __ATOMIC_ACQUIRE: \
		if (fmo == __ATOMIC_RELAXED) X(__ATOMIC_ACQUIRE, __ATOMIC_RELAXED) \
		else if (fmo == __ATOMIC_CONSUME) X(__ATOMIC_ACQUIRE, __ATOMIC_CONSUME) \
		else X(__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE) \
		break; \
	case __ATOMIC_RELEASE: X(__ATOMIC_RELEASE, __ATOMIC_RELAXED); break; \
	case __ATOMIC_ACQ_REL: \
		if (fmo == __ATOMIC_RELAXED) X(__ATOMIC_ACQ_REL, __ATOMIC_RELAXED) \
		else if (fmo == __ATOMIC_CONSUME) X(__ATOMIC_ACQ_REL, __ATOMIC_CONSUME) \
		else X(__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) \
		break; \
	default: \
		if (fmo == __ATOMIC_RELAXED) X(__ATOMIC_SEQ_CST, __ATOMIC_RELAXED) \
		else if (fmo == __ATOMIC_CONSUME) X(__ATOMIC_SEQ_CST, __ATOMIC_CONSUME) \
		else if (fmo == __ATOMIC_ACQUIRE) X(__ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE) \
		else X(__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) \
		break; \
	}

#define ATOMIC_RMW(N, T, op) \
	TSAN_FN(T, __tsan_atomic##N##_##op, volatile T *a, T v, int mo) \
	{ \
		T old; \
		record(a, sizeof(T), RMW_FLAGS, RA()); \
		WITH_RMW_ORDER(mo, DO_##op) \
		return old; \
	}
#define DO_exchange(o) old = __atomic_exchange_n(a, v, o)
#define DO_fetch_add(o) old = __atomic_fetch_add(a, v, o)
#define DO_fetch_sub(o) old = __atomic_fetch_sub(a, v, o)
#define DO_fetch_and(o) old = __atomic_fetch_and(a, v, o)
#define DO_fetch_or(o) old = __atomic_fetch_or(a, v, o)
#define DO_fetch_xor(o) old = __atomic_fetch_xor(a, v, o)
#define DO_fetch_nand(o) old = __atomic_fetch_nand(a, v, o)

#define ATOMIC_FAMILY(N, T) \
	TSAN_FN(T, __tsan_atomic##N##_load, const volatile T *a, int mo) \
	{ \
		T v; \
		record(a, sizeof(T), PM_TRACE_ATOMIC, RA()); \
		WITH_LOAD_ORDER(mo, LOAD_##N) \
		return v; \
	} \
	TSAN_FN(void, __tsan_atomic##N##_store, volatile T *a, T v, int mo) \
	{ \
		record(a, sizeof(T), PM_TRACE_WRITE | PM_TRACE_ATOMIC, RA()); \
		WITH_STORE_ORDER(mo, STORE_##N) \
	} \
	ATOMIC_RMW(N, T, exchange) \
	ATOMIC_RMW(N, T, fetch_add) \
	ATOMIC_RMW(N, T, fetch_sub) \
	ATOMIC_RMW(N, T, fetch_and) \
	ATOMIC_RMW(N, T, fetch_or) \
	ATOMIC_RMW(N, T, fetch_xor) \
	ATOMIC_RMW(N, T, fetch_nand) \
	TSAN_FN(int, __tsan_atomic##N##_compare_exchange_strong, volatile T *a, T *c, T v, int mo, \
		int fmo) \
	{ \
		bool ok; \
		T *cp = c; \
		WITH_CAS_ORDERS(mo, fmo, CAS_STRONG_##N) \
		record(a, sizeof(T), RMW_FLAGS | (ok ? 0 : PM_TRACE_CAS_FAILED), RA()); \
		return ok; \
	} \
	TSAN_FN(int, __tsan_atomic##N##_compare_exchange_weak, volatile T *a, T *c, T v, int mo, \
		int fmo) \
	{ \
		bool ok; \
		T *cp = c; \
		WITH_CAS_ORDERS(mo, fmo, CAS_WEAK_##N) \
		record(a, sizeof(T), RMW_FLAGS | (ok ? 0 : PM_TRACE_CAS_FAILED), RA()); \
		return ok; \
	} \
	TSAN_FN(T, __tsan_atomic##N##_compare_exchange_val, volatile T *a, T c, T v, int mo, \
		int fmo) \
	{ \
		bool ok; \
		T *cp = &c; \
		WITH_CAS_ORDERS(mo, fmo, CAS_STRONG_##N) \
		record(a, sizeof(T), RMW_FLAGS | (ok ? 0 : PM_TRACE_CAS_FAILED), RA()); \
		return c; \
	}

/* The statement macros, one set per size only so that each names its own pointer type. */
#define LOAD_GENERIC(o) v = __atomic_load_n(a, o)
#define STORE_GENERIC(o) __atomic_store_n(a, v, o)
#define CAS_GENERIC(weak, s, f) ok = __atomic_compare_exchange_n(a, cp, v, weak, s, f);
#define LOAD_8 LOAD_GENERIC
#define LOAD_16 LOAD_GENERIC
#define LOAD_32 LOAD_GENERIC
#define LOAD_64 LOAD_GENERIC
#define STORE_8 STORE_GENERIC
#define STORE_16 STORE_GENERIC
#define STORE_32 STORE_GENERIC
#define STORE_64 STORE_GENERIC
#define CAS_STRONG_8(s, f) CAS_GENERIC(false, s, f)
#define CAS_STRONG_16(s, f) CAS_GENERIC(false, s, f)
#define CAS_STRONG_32(s, f) CAS_GENERIC(false, s, f)
#define CAS_STRONG_64(s, f) CAS_GENERIC(false, s, f)
#define CAS_WEAK_8(s, f) CAS_GENERIC(true, s, f)
#define CAS_WEAK_16(s, f) CAS_GENERIC(true, s, f)
#define CAS_WEAK_32(s, f) CAS_GENERIC(true, s, f)
#define CAS_WEAK_64(s, f) CAS_GENERIC(true, s, f)

ATOMIC_FAMILY(8, uint8_t)
ATOMIC_FAMILY(16, uint16_t)
ATOMIC_FAMILY(32, uint32_t)
ATOMIC_FAMILY(64, uint64_t)

TSAN_FN(void, __tsan_atomic_thread_fence, int mo)
{
	if (tl.on)
		tl.fences++;
	WITH_RMW_ORDER(mo, __atomic_thread_fence)
}

TSAN_FN(void, __tsan_atomic_signal_fence, int mo)
{
	WITH_RMW_ORDER(mo, __atomic_signal_fence)
}
