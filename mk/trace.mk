# mk/trace.mk - `make trace`: the trace build of the library (issue 27, docs/tracer.md).
#
#   make trace
#	builds build/trace/libpinmm-trace.a: src/ compiled by clang with -fsanitize=thread's
#	instrumentation, -mno-avx (no access escapes it as an AVX move) and PM_TSAN=0 (the
#	project's own TSan mode would replace liburcu and the fences), PM_TRACE=1 (the object
#	names of lib/trace.h), together with the tracer's runtime trace/*.c, compiled without
#	instrumentation. Programs link it with $(TRACE_LDFLAGS) and $(TRACE_LIBS); the
#	--wrap flags are not optional (the runtime calls __real_memset and
#	__real_pthread_mutex_lock).
#   make check-trace
#	the tracer's own tests (tests/trace/), TAP on stdout.
#   make check-trace-suite
#	every unit and stress test against the trace build (build/trace-suite: src/ instrumented,
#	with assertions), in both designs; CI runs it where clang is installed.
#   `make check` runs check-trace when clang is installed and says it skipped it otherwise.
#
# Needs clang (Debian's clang package: 14 on Debian 12) and addr2line (binutils); `sh
# scripts/deps.sh trace` installs them as root or prints the apt-get line, as for the other
# dependencies. TRACE_DEBUG=1 or 2 builds src/ with its assertions.

TRACE_CC ?= clang
TRACE_O := build/trace
TRACE_DEBUG ?= 0
TRACE_LIBA := $(TRACE_O)/libpinmm-trace.a
TRACE_DEPS := $(TRACE_O)/.deps-ok
# The library's warnings are gcc-checked; under clang they are shown but never fatal here.
TRACE_CPPFLAGS := -Iinclude -Isrc -I. -D_GNU_SOURCE -DPM_DEBUG=$(TRACE_DEBUG) -DPM_TSAN=0 \
	-DPM_TRACE=1
TRACE_CFLAGS := -std=gnu11 -pthread -fPIC -fvisibility=hidden -fno-strict-aliasing -O2 -g \
	-fno-omit-frame-pointer $(filter-out -Werror,$(WARN)) -MMD -MP
TRACE_INSTR := -fsanitize=thread -mno-avx
TRACE_LDFLAGS := -pthread -Wl,--wrap=memset,--wrap=memcpy,--wrap=memmove \
	-Wl,--wrap=pthread_mutex_lock,--wrap=pthread_mutex_trylock,--wrap=pthread_mutex_unlock
TRACE_LIBS := $(LIB_LIBS) -lm

TRACE_LIB_OBJS := $(LIB_SRCS:%.c=$(TRACE_O)/%.o)
TRACE_RT_SRCS := $(sort $(wildcard trace/*.c))
TRACE_RT_OBJS := $(TRACE_RT_SRCS:%.c=$(TRACE_O)/%.o)
TRACE_TEST := $(TRACE_O)/tests/trace/test_trace
# The test's operations are instrumented like src/; its harness is not.
TRACE_TEST_OPS := $(TRACE_O)/tests/trace/trace_ops.o

# The trace suite: every unit and stress test linked with the library compiled as the trace
# build compiles it (instrumented; every atomic and every memset/memcpy goes through
# trace/runtime.c), with assertions (PM_DEBUG=2). Tests and tests/lib are not instrumented:
# they are the harness. It proves the runtime performs what it records: a wrong order, a
# lost RMW or a wrapped call that misbehaves fails the tests, as a broken library would.
TSUITE_O := build/trace-suite
TSUITE_CPPFLAGS := $(subst -DPM_DEBUG=$(TRACE_DEBUG),-DPM_DEBUG=2,$(TRACE_CPPFLAGS))
TSUITE_LIB_OBJS := $(LIB_SRCS:%.c=$(TSUITE_O)/%.o)
TSUITE_RT_OBJS := $(TRACE_RT_SRCS:%.c=$(TSUITE_O)/%.o)
TSUITE_LIBA := $(TSUITE_O)/libpinmm-trace.a
TSUITE_TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(TSUITE_O)/%.o)
TSUITE_BINS := $(UNIT_SRCS:%.c=$(TSUITE_O)/%) $(STRESS_SRCS:%.c=$(TSUITE_O)/%) \
	$(patsubst tools/%.c,$(TSUITE_O)/pinmm-%,$(TOOL_SRCS))

.PHONY: trace check-trace check-trace-if-clang check-trace-suite check-trace-suite-if-clang

trace: $(TRACE_LIBA)

# After the library's own check: two apt-get runs at once fail on dpkg's lock (make -j).
$(TRACE_DEPS): scripts/deps.sh | $(DEPS_STAMP)
	@sh scripts/deps.sh trace
	@mkdir -p $(@D) && touch $@

$(TRACE_O)/src/%.o: src/%.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TRACE_CPPFLAGS) $(TRACE_CFLAGS) $(TRACE_INSTR) -c $< -o $@

$(TRACE_O)/trace/%.o: trace/%.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TRACE_CPPFLAGS) $(TRACE_CFLAGS) -c $< -o $@

$(TRACE_LIBA): $(TRACE_LIB_OBJS) $(TRACE_RT_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

$(TRACE_TEST_OPS): tests/trace/trace_ops.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TRACE_CPPFLAGS) -Itests $(TRACE_CFLAGS) $(TRACE_INSTR) -c $< -o $@

$(TRACE_TEST): tests/trace/test_trace.c tests/trace/trace_ops.h $(TRACE_TEST_OPS) $(TRACE_LIBA)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TRACE_CPPFLAGS) -Itests $(TRACE_CFLAGS) $< $(TRACE_TEST_OPS) $(TRACE_LIBA) \
		-o $@ $(TRACE_LDFLAGS) $(TRACE_LIBS)

check-trace: $(TRACE_TEST)
	@$(TRACE_TEST) > $(TRACE_O)/test_trace.log 2>&1; rc=$$?; \
	grep -E '^(not ok|#   |Bail out)' $(TRACE_O)/test_trace.log | head -40; \
	p=$$(grep -c '^ok ' $(TRACE_O)/test_trace.log); f=$$(grep -c '^not ok ' $(TRACE_O)/test_trace.log); \
	echo "check-trace: $$p passed, $$f failed (log: $(TRACE_O)/test_trace.log)"; \
	[ $$rc -eq 0 ] && [ $$f -eq 0 ]

$(TSUITE_O)/src/%.o: src/%.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) $(TRACE_CFLAGS) $(TRACE_INSTR) -c $< -o $@

$(TSUITE_O)/trace/%.o: trace/%.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) $(TRACE_CFLAGS) -c $< -o $@

$(TSUITE_LIBA): $(TSUITE_LIB_OBJS) $(TSUITE_RT_OBJS)
	rm -f $@ && $(AR) rcs $@ $^

$(TSUITE_O)/tests/lib/%.o: tests/lib/%.c | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) -Itests $(TRACE_CFLAGS) -c $< -o $@

$(TSUITE_O)/tests/%: tests/%.c $(TSUITE_TEST_LIB_OBJS) $(TSUITE_LIBA)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) -Itests $(TRACE_CFLAGS) $< $(TSUITE_TEST_LIB_OBJS) \
		$(TSUITE_LIBA) -o $@ $(TRACE_LDFLAGS) $(TRACE_LIBS)

# The tools some tests run (test_gup_test runs pinmm-gup-test from the tests' build).
$(TSUITE_O)/tools/lib/cli.o: tools/lib/cli.c tools/lib/cli.h | $(TRACE_DEPS)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) -Itools/lib $(TRACE_CFLAGS) -c $< -o $@

$(TSUITE_O)/pinmm-%: tools/%.c $(TSUITE_O)/tools/lib/cli.o $(TSUITE_LIBA)
	@mkdir -p $(@D)
	$(TRACE_CC) $(TSUITE_CPPFLAGS) -Itools/lib $(TRACE_CFLAGS) $< $(TSUITE_O)/tools/lib/cli.o \
		$(TSUITE_LIBA) -o $@ $(TRACE_LDFLAGS) $(TRACE_LIBS)

# Both designs; the tests' own design cases run in each.
check-trace-suite: $(TSUITE_BINS)
	@echo "check-trace-suite: Linux's design"
	@O=$(TSUITE_O) SAN= SCRIPTS=0 sh tests/run.sh
	@echo "check-trace-suite: the range design"
	@PINMM_RANGE_MM=1 O=$(TSUITE_O) SAN= SCRIPTS=0 sh tests/run.sh

-include $(wildcard $(TSUITE_LIB_OBJS:.o=.d) $(TSUITE_RT_OBJS:.o=.d) $(TSUITE_TEST_LIB_OBJS:.o=.d))

check-trace-suite-if-clang:
	@if command -v $(TRACE_CC) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory check-trace-suite; \
	else \
		echo "check-trace-suite: skipped: $(TRACE_CC) not found (the trace build needs it: sh scripts/deps.sh trace)"; \
	fi

check-trace-if-clang:
	@if command -v $(TRACE_CC) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory check-trace; \
	else \
		echo "check-trace: skipped: $(TRACE_CC) not found (the trace build needs it: sh scripts/deps.sh trace)"; \
	fi

-include $(wildcard $(TRACE_LIB_OBJS:.o=.d) $(TRACE_RT_OBJS:.o=.d) $(TRACE_TEST_OPS:.o=.d) \
	$(TRACE_TEST).d)
