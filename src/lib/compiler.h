/* SPDX-License-Identifier: MIT */
/*
 * compiler.h - the few compiler helpers every pinmm file uses.
 */
#ifndef PM_LIB_COMPILER_H
#define PM_LIB_COMPILER_H

#include <stddef.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define PM_CACHELINE 64
#define __cacheline_aligned __attribute__((aligned(PM_CACHELINE)))
#define __hidden __attribute__((visibility("hidden")))
#define __maybe_unused __attribute__((unused))
#define __noinline __attribute__((noinline))
#ifndef __always_inline /* glibc's <sys/cdefs.h> has one */
#define __always_inline inline __attribute__((always_inline))
#endif
#define __cold __attribute__((cold))

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define min(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a < _b ? _a : _b; })
#define max(a, b) ({ typeof(a) _a = (a); typeof(b) _b = (b); _a > _b ? _a : _b; })

#define ALIGN_DOWN(x, a) ((x) & ~((typeof(x))(a) - 1))
#define ALIGN_UP(x, a) ALIGN_DOWN((x) + (a) - 1, (a))
#define IS_ALIGNED(x, a) (((x) & ((typeof(x))(a) - 1)) == 0)

/* Debug level (see internal.h); the build passes -DPM_DEBUG, this is the default. */
#ifndef PM_DEBUG
#define PM_DEBUG 0
#endif

/*
 * Sanitizer detection, for the few places that must behave differently under them. A build
 * may set PM_TSAN itself: the trace build (mk/trace.mk) compiles with TSan's instrumentation
 * but its own runtime, and passes -DPM_TSAN=0 so that liburcu and the real fences stay.
 */
#ifndef PM_TSAN
#if defined(__SANITIZE_THREAD__)
#define PM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PM_TSAN 1
#endif
#endif
#endif
#ifndef PM_TSAN
#define PM_TSAN 0
#endif

/* The trace build (lib/trace.h, mk/trace.mk) sets PM_TRACE=1; every other build is 0. */
#ifndef PM_TRACE
#define PM_TRACE 0
#endif

#endif /* PM_LIB_COMPILER_H */
