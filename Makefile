# pinmm - one non-recursive GNU Makefile.
#
#   make                    library (build/libpinmm.{a,so}, build/pinmm.pc), pinmm-bench, tools, examples
#   make experiments        the programs that measure the host without pinmm (experiments/README.md)
#   make check              unit + short stress + bench smoke tests under ASan+UBSan (build/asan)
#   make check SAN=tsan     the same under ThreadSanitizer (build/tsan), smaller loop counts
#   make check-range        make check with every machine of the range design (PINMM_RANGE_MM=1)
#   make bench              the seed report: every experiment, before and after, side by side;
#                           then pinmm-gup-bench (the fast path against its limit loop)
#   make stress             longer randomized stress runs (STRESS_SECONDS, SEED from the environment)
#   make torture            concurrent torture (TORTURE_MINUTES)
#   make fuzz               libFuzzer target over the differential interpreter (clang)
#   make oracle             the host kernel as the oracle: random sequences on Linux and pinmm, compared
#                           (ORACLE_SECONDS, ORACLE_SEED, ORACLE_MM; mk/oracle.mk, docs/linux-differences.md)
#   make trace              the trace build: src/ instrumented, the tracer's runtime (mk/trace.mk)
#   make check-trace        the tracer's tests; make check runs them when clang is installed
#   make commuter           build/pinmm-commuter, the conflict checker (mk/commuter.mk; clang:
#                           make builds it when clang is installed); make bench shows its results
#   make WERROR=1 ...       warnings are errors (CI)
#
# Missing Debian packages are installed by scripts/deps.sh when run as root (apt-get), or it
# prints the exact apt-get line to run.

SAN ?=
O ?= build$(if $(SAN),/$(SAN))
CC ?= cc
PKG_CONFIG ?= pkg-config

WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wformat=2 -Wundef \
	-Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(WERROR),1)
WARN += -Werror
endif

ifeq ($(SAN),asan)
OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
DEBUG ?= 2
else ifeq ($(SAN),tsan)
OPT := -O1 -g -fsanitize=thread
DEBUG ?= 1
else ifeq ($(SAN),)
OPT := -O2 -g
DEBUG ?= 0
else
$(error SAN must be empty, asan or tsan)
endif

CPPFLAGS += -Iinclude -Isrc -D_GNU_SOURCE -DPM_DEBUG=$(DEBUG)
CFLAGS += -std=gnu11 -pthread -fPIC -fvisibility=hidden -fno-strict-aliasing $(OPT) $(WARN) -MMD -MP
LDFLAGS += -pthread $(filter -fsanitize=%,$(OPT))

URCU_LIBS := -lurcu-memb -lurcu-common
LIB_LIBS := $(URCU_LIBS) -lpthread
BENCH_LIBS := -lhwloc -luring -lm

LIB_SRCS := $(sort $(wildcard src/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(O)/%.o)
TEST_LIB_SRCS := $(sort $(wildcard tests/lib/*.c))
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(O)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
STRESS_SRCS := $(sort $(wildcard tests/stress/*.c))
TEST_BINS := $(UNIT_SRCS:%.c=$(O)/%) $(STRESS_SRCS:%.c=$(O)/%)
BENCH_SRCS := $(sort $(wildcard bench/*.c bench/cases/*.c))
BENCH_OBJS := $(BENCH_SRCS:%.c=$(O)/%.o)
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TOOL_BINS := $(patsubst tools/%.c,$(O)/pinmm-%,$(TOOL_SRCS))
# Programs that do not link pinmm: not built by default; make tests builds them for
# cli_strict.sh, which checks their command lines.
EXPERIMENT_SRCS := $(sort $(wildcard experiments/*.c))
EXPERIMENT_BINS := $(patsubst experiments/%.c,$(O)/experiments/pinmm-%,$(EXPERIMENT_SRCS))
# The strict number parser every command line shares (pinmm-bench, the tools, the experiments).
CLI_OBJ := $(O)/tools/lib/cli.o
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:%.c=$(O)/%)
DEPS_STAMP := build/.deps-ok

LIBA := $(O)/libpinmm.a
LIBSO := $(O)/libpinmm.so
PC := $(O)/pinmm.pc
BENCH := $(O)/pinmm-bench

.PHONY: all lib experiments tests check check-range bench bench-quick stress torture fuzz clean deps install contract
.DEFAULT_GOAL := all

all: lib $(if $(BENCH_SRCS),$(BENCH)) $(TOOL_BINS) $(EXAMPLE_BINS)
lib: $(LIBA) $(LIBSO) $(PC)
experiments: $(EXPERIMENT_BINS)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps.sh
	@sh scripts/deps.sh
	@mkdir -p $(@D) && touch $@

$(O)/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBSO): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libpinmm.so -Wl,--as-needed -o $@ $^ $(LDFLAGS) $(LIB_LIBS)

$(PC): Makefile
	@mkdir -p $(@D)
	@printf '%s\n' 'includedir=$(CURDIR)/include' 'libdir=$(CURDIR)/$(O)' '' \
		'Name: pinmm' 'Description: user-space Linux mm core: folios, page tables, GUP and pinning' \
		'Version: 0.1.0' 'Requires.private: liburcu-memb' \
		'Libs: -L$${libdir} -lpinmm -pthread' 'Libs.private: $(LIB_LIBS)' \
		'Cflags: -I$${includedir}' > $@

# Tests link the static archive so that white-box tests may reach internal (hidden) symbols.
$(O)/tests/%: tests/%.c $(TEST_LIB_OBJS) $(LIBA) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $< $(TEST_LIB_OBJS) $(LIBA) -o $@ $(LDFLAGS) $(LIB_LIBS) -lm

$(BENCH_OBJS): CPPFLAGS += -Itools/lib

$(BENCH): $(BENCH_OBJS) $(CLI_OBJ) $(LIBA)
	$(CC) $(BENCH_OBJS) $(CLI_OBJ) $(LIBA) -o $@ $(LDFLAGS) $(LIB_LIBS) $(BENCH_LIBS)

$(O)/pinmm-%: tools/%.c tools/lib/cli.h $(CLI_OBJ) $(LIBA) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itools/lib $(CFLAGS) $< $(CLI_OBJ) $(LIBA) -o $@ $(LDFLAGS) $(LIB_LIBS) -lm

$(O)/experiments/pinmm-%: experiments/%.c tools/lib/cli.h $(CLI_OBJ) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itools/lib $(CFLAGS) $< $(CLI_OBJ) -o $@ $(LDFLAGS) -lm

# Examples build exactly as a user would: public headers, the shared library.
$(O)/examples/%: examples/%.c $(LIBSO) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Iinclude $(OPT) $(WARN) $< -o $@ -L$(O) -l:libpinmm.so -Wl,-rpath,'$$ORIGIN/..' $(LDFLAGS)

tests: lib $(TEST_BINS) $(if $(BENCH_SRCS),$(BENCH)) $(TOOL_BINS) $(EXPERIMENT_BINS) $(EXAMPLE_BINS)

CHECK_SAN := $(if $(SAN),$(SAN),asan)
check:
	@$(MAKE) --no-print-directory SAN=$(CHECK_SAN) tests
	@O=build/$(CHECK_SAN) SAN=$(CHECK_SAN) sh tests/run.sh
	@$(MAKE) --no-print-directory check-trace-if-clang

# The same tests with every machine of the range design (PINMM_RANGE_MM=1, src/mm/range.c).
check-range:
	@$(MAKE) --no-print-directory SAN=$(CHECK_SAN) tests
	@PINMM_RANGE_MM=1 O=build/$(CHECK_SAN) SAN=$(CHECK_SAN) sh tests/run.sh

bench: all
	@$(MAKE) --no-print-directory commuter-model
	$(BENCH) report $(BENCH_ARGS)
	$(O)/pinmm-gup-bench -t 0.5
	@$(MAKE) --no-print-directory commuter-report

bench-quick: all
	@$(MAKE) --no-print-directory commuter-model
	$(BENCH) report --quick $(BENCH_ARGS)

stress:
	@$(MAKE) --no-print-directory SAN=$(CHECK_SAN) tests
	@O=build/$(CHECK_SAN) SAN=$(CHECK_SAN) TIER=stress sh tests/run.sh

torture:
	@$(MAKE) --no-print-directory SAN=$(CHECK_SAN) tests
	@O=build/$(CHECK_SAN) SAN=$(CHECK_SAN) TIER=torture sh tests/run.sh

contract: lib
	../shared/tools/check-contract

PREFIX ?= /usr/local
install: lib
	install -d $(DESTDIR)$(PREFIX)/include/pinmm $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/pinmm/*.h $(DESTDIR)$(PREFIX)/include/pinmm/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|^includedir=.*|includedir=$(PREFIX)/include|' -e 's|^libdir=.*|libdir=$(PREFIX)/lib|' \
		$(PC) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pinmm.pc

clean:
	rm -rf build results

-include $(wildcard mk/*.mk)
-include $(wildcard $(LIB_OBJS:.o=.d) $(BENCH_OBJS:.o=.d) $(TEST_LIB_OBJS:.o=.d) $(CLI_OBJ:.o=.d))
