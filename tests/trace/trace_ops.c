// SPDX-License-Identifier: MIT
/*
 * trace_ops.c - the test-only operations of trace_ops.h, instrumented as src/ is in the trace
 * build. Each one does exactly the accesses its test is about, and no more.
 */
#include <string.h>

#include "trace/trace_ops.h"

void tto_write_shared(struct tto_obj *o, long v)
{
	o->shared = v;
}
const int tto_write_shared_line = __LINE__ - 2;

long tto_read_shared(struct tto_obj *o)
{
	return o->shared;
}

void tto_write_own(struct tto_obj *o, int t, long v)
{
	o->own[t].v = v;
}

void tto_write_near(struct tto_obj *o, int t, long v)
{
	o->near[t] = v;
}

/* Expects a value the word never holds: the swap fails, on every thread. */
bool tto_cas_fail(struct tto_obj *o)
{
	long expected = -1;

	return atomic_compare_exchange_strong(&o->word, &expected, 1);
}

void tto_memset(struct tto_obj *o, int c)
{
	memset(o->buf, c, sizeof(o->buf));
}

void tto_memcpy(struct tto_obj *o, int t)
{
	memcpy(o->dst[t], o->buf, sizeof(o->buf));
}

/* One store per element: not inlined, so that a stack array passed here escapes, and its
 * stores are instrumented like any other. */
__attribute__((noinline)) void tto_fill(long *a, int n)
{
	for (int i = 0; i < n; i++)
		((volatile long *)a)[i] = i;
}

/* Touches nothing but its own stack. */
long tto_stack_only(int n)
{
	long a[16];
	long s = 0;

	tto_fill(a, 16);
	for (int i = 0; i < 16; i++)
		s += a[i] * n;
	return s;
}

/*
 * One of each atomic operation on o->counter, starting from 0; the result folds every value
 * they returned, so that an operation the runtime did not perform, or performed wrongly,
 * changes it. Expected: see test_trace.c.
 */
long tto_atomics(struct tto_obj *o)
{
	long r = 0, e;

	atomic_store_explicit(&o->counter, 10, memory_order_release);		/* 10 */
	r += atomic_load_explicit(&o->counter, memory_order_acquire);		/* r 10 */
	r += atomic_fetch_add_explicit(&o->counter, 5, memory_order_relaxed);	/* r 20, 15 */
	r += atomic_fetch_sub(&o->counter, 3);					/* r 35, 12 */
	r += atomic_fetch_or_explicit(&o->counter, 0x30, memory_order_acq_rel);	/* r 47, 60 */
	r += atomic_fetch_and(&o->counter, 0x1c);				/* r 107, 28 */
	r += atomic_fetch_xor(&o->counter, 1);					/* r 135, 29 */
	r += atomic_exchange(&o->counter, 100);					/* r 164, 100 */
	e = 100;
	r += atomic_compare_exchange_strong(&o->counter, &e, 7) ? 1000 : 0;	/* r 1164, 7 */
	e = 100;
	r += atomic_compare_exchange_weak_explicit(&o->counter, &e, 8, memory_order_acquire,
						   memory_order_relaxed) ? 0 : e;	/* r 1171 */
	atomic_thread_fence(memory_order_seq_cst);
	return r * 1000 + atomic_load(&o->counter);				/* 1171007 */
}

/* A critical section under a pthread mutex: libc writes its lock word. */
void tto_lock(struct tto_obj *o)
{
	pthread_mutex_lock(&o->mutex);
	pthread_mutex_unlock(&o->mutex);
}

void tto_lock_section(struct tto_obj *o, int t, long v)
{
	o->own[t].v = v;
	pthread_mutex_lock(&o->mutex);
	o->own[t].v = v + 1;
	o->own[t].pad[0] = v + 2;
	pthread_mutex_unlock(&o->mutex);
	o->own[t].pad[1] = v + 3;
}
