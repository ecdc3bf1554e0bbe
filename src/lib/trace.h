/* SPDX-License-Identifier: MIT */
/*
 * trace.h - what the library tells the tracer about its objects, in the trace build only.
 *
 * The trace build (mk/trace.mk, docs/tracer.md) compiles src/ with PM_TRACE=1 and links it
 * with the tracer's runtime (trace/), which records every access of the instrumented code. A
 * conflict between two operations must read as a field ("struct pm_page.xrefcount",
 * "struct pm_mm_range.lock.xcount"), never as a bare address, so the tracer keeps a registry of
 * typed objects: the library names each object it makes, where it makes it, and says when it
 * goes. The type is a name the tracer's field tables know (trace/fields.h); an object of
 * several elements (the descriptor array, the per-CPU caches) is an array of that type.
 *
 * The lock primitives also mark where each lock is taken and released, so that the tracer can
 * measure a critical section (in accesses) for the report's scaling model.
 *
 * In every other build these are empty macros: no call, no symbol, no cost. They name objects
 * and mark lock sections, nothing else - the tracer learns no state from them - so no build
 * can behave differently because of them. The definitions are the tracer's (trace/registry.c
 * and trace/runtime.c), outside src/, so they add no call between the layers
 * (tests/scripts/layers.sh), and neither file reads a type of src/.
 */
#ifndef PM_LIB_TRACE_H
#define PM_LIB_TRACE_H

#include <stddef.h>
#include "lib/compiler.h"

#if PM_TRACE
/* @p: @n bytes, an object (or an array) of the type the tracer's field tables call @type. */
void pm__trace_object(const void *p, size_t n, const char *type);
/* The object that starts at @p is gone (freed, or back to the allocator). */
void pm__trace_object_gone(const void *p);
/* This thread now holds the lock at @lock (exclusively when @excl), or has let it go: the
 * lock primitives (spinlock.h, rwsem.h) say so, so that the tracer can tell a critical
 * section from the accesses around it. */
void pm__trace_lock(const void *lock, int excl);
void pm__trace_unlock(const void *lock);
#else
#define pm__trace_object(p, n, type) ((void)0)
#define pm__trace_object_gone(p) ((void)0)
#define pm__trace_lock(lock, excl) ((void)0)
#define pm__trace_unlock(lock) ((void)0)
#endif

#endif /* PM_LIB_TRACE_H */
