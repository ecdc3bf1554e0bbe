/* SPDX-License-Identifier: MIT */
/*
 * trace_ops.h - test-only operations for the tracer's tests (test_trace.c). trace_ops.c is
 * compiled like src/ in the trace build (instrumented); the harness that calls it is not, so
 * what a log holds is what these functions did.
 *
 * struct tto_obj puts each kind of access on its own 64-byte line, so that a C64 conflict on
 * one test cannot come from another's line.
 */
#ifndef PM_TESTS_TRACE_OPS_H
#define PM_TESTS_TRACE_OPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct tto_obj {
	long shared;			/* line 0: the planted write, and the read-read test */
	long pad0[7];
	_Atomic long word;		/* line 1: compare-and-swap that fails */
	long pad1[7];
	struct {
		long v;
		long pad[7];
	} own[2];			/* lines 2, 3: one per thread */
	long near[8];			/* line 4: one word per thread, one line */
	unsigned char buf[64];		/* line 5: memset by one, memcpy source of the other */
	unsigned char dst[2][64];	/* lines 6, 7: memcpy destinations */
	_Atomic long counter;		/* line 8: every atomic operation, performed */
	long pad2[7];
	pthread_mutex_t mutex __attribute__((aligned(64))); /* line 9: a libc lock */
} __attribute__((aligned(64)));

void tto_write_shared(struct tto_obj *o, long v);
extern const int tto_write_shared_line;	/* the source line of its store */
long tto_read_shared(struct tto_obj *o);
void tto_write_own(struct tto_obj *o, int t, long v);
void tto_write_near(struct tto_obj *o, int t, long v);
bool tto_cas_fail(struct tto_obj *o);
void tto_memset(struct tto_obj *o, int c);
void tto_memcpy(struct tto_obj *o, int t);
void tto_fill(long *a, int n);
long tto_stack_only(int n);
long tto_atomics(struct tto_obj *o);
void tto_lock(struct tto_obj *o);
/* A write to the thread's own line, two (to two words) inside the mutex's section, one after
 * it. */
void tto_lock_section(struct tto_obj *o, int t, long v);

#endif /* PM_TESTS_TRACE_OPS_H */
