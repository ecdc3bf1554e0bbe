/* SPDX-License-Identifier: MIT */
/*
 * trace.h - the tracer: what a thread of the trace build reads and writes between two markers,
 * what each address is, and where two such logs conflict (docs/tracer.md).
 *
 * The trace build (make trace: build/trace/libpinmm-trace.a) is src/ compiled with clang's
 * ThreadSanitizer instrumentation and linked with this runtime instead of libtsan, as the
 * kernel's KCSAN links its own (kernel/kcsan/core.c). The runtime performs every access the
 * instrumentation hands it and, between pm_trace_begin() and pm_trace_end() on a thread,
 * appends it to that thread's log. Nothing on that path writes memory another thread uses.
 *
 * The question the logs answer is the Scalable Commutativity Rule's: two operations are
 * conflict-free when neither writes a byte the other reads or writes (C1), or, as the hardware
 * moves memory, a 64-byte line (C64). A log holds the accesses of one operation on one thread.
 *
 * Link with TRACE_LDFLAGS (mk/trace.mk): -Wl,--wrap= for memset, memcpy and memmove, which
 * clang 14's instrumentation leaves as plain calls, and for pthread_mutex_lock, _trylock and
 * _unlock, whose lock words libc writes; the runtime records them there.
 */
#ifndef PM_TRACE_TRACE_H
#define PM_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PM_TRACE_API __attribute__((visibility("default")))

/* What an access did. A read has none of WRITE; an RMW or a CAS is a write. */
enum {
	PM_TRACE_WRITE = 1u << 0,
	PM_TRACE_ATOMIC = 1u << 1,	/* a __tsan_atomic* entry point */
	PM_TRACE_RMW = 1u << 2,		/* exchange, fetch-op, compare-and-swap, or a pthread
					 * mutex's lock or unlock: a locked RMW */
	PM_TRACE_CAS_FAILED = 1u << 3,	/* a compare-and-swap that found another value, or a
					 * pthread_mutex_trylock that failed */
	PM_TRACE_MEMFN = 1u << 4,	/* memset, memcpy or memmove */
};

struct pm_trace_access {
	uintptr_t addr;
	uintptr_t pc;		/* the instrumented site (a return address into it) */
	uint32_t size;		/* bytes; a memset/memcpy larger than 4 GiB is cut there */
	uint32_t flags;		/* PM_TRACE_* */
};

/* A lock taken or let go, as the library's lock primitives mark it (src/lib/trace.h). */
enum {
	PM_TRACE_LOCK_ACQUIRE = 1u << 0,
	PM_TRACE_LOCK_RELEASE = 1u << 1,
	PM_TRACE_LOCK_EXCL = 1u << 2,	/* an acquisition that excludes every other holder */
};

struct pm_trace_lock_event {
	uintptr_t lock;		/* the lock's address */
	size_t pos;		/* the log's access count at the event: acc[pos] comes after it */
	unsigned flags;		/* PM_TRACE_LOCK_* */
};

struct pm_trace_log {
	struct pm_trace_access *acc;	/* in program order */
	size_t n;
	size_t dropped;		/* accesses past the buffer (PINMM_TRACE_ENTRIES): not in acc */
	size_t fences;		/* atomic_thread_fence calls (seq_cst and weaker) */
	uint64_t gen;		/* the label registry's generation at pm_trace_begin() */
	struct pm_trace_lock_event *locks;	/* in program order, beside acc */
	size_t nlocks;		/* events kept (at most PM_TRACE_LOCK_EVENTS; more are dropped) */
};

#define PM_TRACE_LOCK_EVENTS 4096

/* Start recording this thread's accesses (a new, empty log). */
PM_TRACE_API void pm_trace_begin(void);
/* Stop, and hand this thread's log to @out (free it with pm_trace_log_free). */
PM_TRACE_API void pm_trace_end(struct pm_trace_log *out);
PM_TRACE_API void pm_trace_log_free(struct pm_trace_log *log);

/* ---- conflicts ---- */

enum pm_trace_level {
	PM_TRACE_C1,	/* a byte one log writes and the other reads or writes */
	PM_TRACE_C64,	/* the same for a 64-byte line: false sharing included */
};

/* One conflicting 64-byte line of two logs. */
struct pm_trace_conflict {
	uintptr_t line;		/* the line's address */
	uint64_t mask;		/* its conflicting bytes (bit i: line + i); C64: all it touched */
	uintptr_t addr;		/* the first of them */
	struct pm_trace_access a, b;	/* an access of each log that makes the conflict */
};

/*
 * pm_trace_conflicts() - the lines where @a and @b conflict at @level, in address order, in
 * *@out (free() it). Return: their number, or -1 without memory.
 */
PM_TRACE_API long pm_trace_conflicts(const struct pm_trace_log *a, const struct pm_trace_log *b,
				     enum pm_trace_level level, struct pm_trace_conflict **out);

/* Print each conflict with its label and both sites; return how many there were. */
PM_TRACE_API long pm_trace_report(FILE *f, const struct pm_trace_log *a,
				  const struct pm_trace_log *b, enum pm_trace_level level);

/* ---- labels ---- */

/* A field of a type: FIELD(struct s, member) fills one from offsetof and sizeof. */
struct pm_trace_field {
	const char *name;
	size_t off, size;
	size_t elem;		/* an array's element size, else 0 */
	const char *type;	/* a registered type that the field is (its fields nest), or NULL */
};
#define PM_TRACE_FIELD(T, member) \
	{ #member, offsetof(T, member), sizeof(((T *)0)->member), 0, NULL }
#define PM_TRACE_FIELD_ARRAY(T, member) \
	{ #member, offsetof(T, member), sizeof(((T *)0)->member), \
	  sizeof(((T *)0)->member[0]), NULL }
#define PM_TRACE_FIELD_OF(T, member, subtype) \
	{ #member, offsetof(T, member), sizeof(((T *)0)->member), 0, subtype }
#define PM_TRACE_FIELD_ARRAY_OF(T, member, subtype) \
	{ #member, offsetof(T, member), sizeof(((T *)0)->member), \
	  sizeof(((T *)0)->member[0]), subtype }

struct pm_trace_type {
	const char *name;	/* what pm_trace_register() and the library's hooks pass */
	const char *display;	/* what a label says: "struct pm_page", "PTE table" */
	size_t size;		/* of one element */
	const struct pm_trace_field *fields;
	size_t nr_fields;
	/* Optional: what the object is now, for the label's parentheses ("pfn 12, head of an
	 * order-9 folio"); @index is the element's index in its region. */
	void (*describe)(const void *obj, size_t index, char *buf, size_t len);
};

/* Add a type (kept by pointer: static storage). Return: 0, or -1 if the name is taken. */
PM_TRACE_API int pm_trace_type_register(const struct pm_trace_type *t);
/* Name @n bytes at @p: an object, or an array, of type @type (the library's hooks call this). */
PM_TRACE_API void pm_trace_register(const void *p, size_t n, const char *type);
/* The object at @p is gone: no longer the label of an access after now. */
PM_TRACE_API void pm_trace_unregister(const void *p);
/* The registry's generation: it grows with every register and unregister. */
PM_TRACE_API uint64_t pm_trace_generation(void);

/*
 * pm_trace_label() - what the @size bytes at @addr are, into @buf: the smallest registered
 * object around them that was alive at some point after generation @gen (a log's gen), else a
 * global of the program's symbol tables, else "unlabelled". Return: the label's length.
 */
PM_TRACE_API size_t pm_trace_label(uintptr_t addr, size_t size, uint64_t gen, char *buf,
				   size_t len);

/*
 * pm_trace_symbolize() - the source line of each of @n sites (return addresses, as an access
 * records them), "function file:line" with inlined callers after " < ", into out[i] (free()
 * each). Runs addr2line over the binary once per object file: not on the recording path.
 * Return: 0, or -1 when addr2line could not run (out[i] then holds the bare address).
 */
PM_TRACE_API int pm_trace_symbolize(const uintptr_t *pcs, size_t n, char **out);

#endif /* PM_TRACE_TRACE_H */
