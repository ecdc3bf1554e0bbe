# mk/fuzz.mk - `make fuzz`: libFuzzer over the differential interpreter (issue 9).
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_ARGS='-jobs=4 -workers=4']
#	builds the library sources, tests/lib/{model,interp*}.c and fuzz/fuzz_interp.c with
#	clang -fsanitize=fuzzer,address,undefined into build/fuzz/fuzz_interp, then fuzzes for
#	FUZZ_SECONDS starting from the seed corpus fuzz/corpus (read only). New inputs go to
#	build/fuzz/corpus, crashes to build/fuzz/crash-*; replay one with its trace:
#	$(O)/tests/unit/test_differential -f build/fuzz/crash-...
#   make fuzz-corpus
#	regenerates fuzz/corpus from test_differential's scenarios and a few random sequences.
#
# Needs clang and its libFuzzer runtime: on Debian 12 the clang and libclang-rt-14-dev packages
# (for another clang version N: libclang-rt-N-dev). Without them the target prints the exact
# apt-get line and fails.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_O := build/fuzz
FUZZ_BIN := $(FUZZ_O)/fuzz_interp
FUZZ_SRCS := $(LIB_SRCS) tests/lib/model.c $(sort $(wildcard tests/lib/interp*.c)) \
	fuzz/fuzz_interp.c
FUZZ_HDRS := $(wildcard include/pinmm/*.h src/*.h src/lib/*.h tests/lib/*.h)
# The library's warnings are gcc-checked; under clang they are shown but never fatal here.
FUZZ_CFLAGS := -std=gnu11 -pthread -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Iinclude -Isrc -Itests -D_GNU_SOURCE -DPM_DEBUG=2 $(filter-out -Werror,$(WARN))
FUZZ_CLANG_MAJOR = $(shell $(FUZZ_CC) --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
FUZZ_APT = sudo apt-get install -y clang libclang-rt-$(or $(FUZZ_CLANG_MAJOR),14)-dev

.PHONY: fuzz-corpus

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_O)/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=2561 \
		-artifact_prefix=$(FUZZ_O)/ -print_final_stats=1 $(FUZZ_ARGS) \
		$(FUZZ_O)/corpus fuzz/corpus

$(FUZZ_BIN): $(FUZZ_SRCS) $(FUZZ_HDRS)
	@mkdir -p $(@D)
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || \
		{ echo "fuzz: $(FUZZ_CC) not found. Run:"; echo "  $(FUZZ_APT)"; exit 1; }
	@printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
		> $(@D)/probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined $(@D)/probe.c -o $(@D)/probe 2>$(@D)/probe.log || \
		{ echo "fuzz: $(FUZZ_CC) cannot link libFuzzer (see $(@D)/probe.log). Run:"; \
		  echo "  $(FUZZ_APT)"; exit 1; }
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SRCS) -o $@ $(LIB_LIBS) -lm

fuzz-corpus: $(O)/tests/unit/test_differential
	rm -f fuzz/corpus/*.bin
	$(O)/tests/unit/test_differential -c fuzz/corpus
