# mk/commuter.mk - build/pinmm-commuter, the conflict checker (issue 27, docs/commuter.md).
#
#   make commuter		build/pinmm-commuter: tools/commuter/, not instrumented, linked
#				with the trace build (mk/trace.mk), so it needs clang. `make`
#				builds it when clang is installed and skips it otherwise.
#   make commuter-report	the last run's summary and heatmaps (results/commuter/), when
#				there is one; `make bench` prints it after its report.
#   make commuter-model	the trace's figures for the report's scaling model
#				($(COMMUTER_OUT)/model.tsv); make bench runs it first.
#   make check-commuter		a tiny --only run, its JSON keys and summary lines checked
#				(tests/trace/commuter.sh); make check-trace runs it.

# mk/*.mk are read in name order, this file before trace.mk: prerequisites name the trace
# build's paths themselves (recipes may use trace.mk's variables, which are expanded late).
COMMUTER := build/pinmm-commuter
COMMUTER_TO := build/trace
COMMUTER_SRCS := $(sort $(wildcard tools/commuter/*.c))
COMMUTER_OBJS := $(COMMUTER_SRCS:%.c=$(COMMUTER_TO)/%.o)
COMMUTER_OUT ?= results/commuter

.PHONY: commuter commuter-report commuter-model check-commuter

commuter: $(COMMUTER)

ifneq ($(shell command -v $(or $(TRACE_CC),clang) 2>/dev/null),)
all: $(COMMUTER)
endif

$(COMMUTER_TO)/tools/commuter/%.o: tools/commuter/%.c tools/commuter/model.h | $(COMMUTER_TO)/.deps-ok
	@mkdir -p $(@D)
	$(TRACE_CC) $(TRACE_CPPFLAGS) $(TRACE_CFLAGS) -c $< -o $@

$(COMMUTER): $(COMMUTER_OBJS) $(COMMUTER_TO)/libpinmm-trace.a
	@mkdir -p $(@D)
	$(TRACE_CC) $(COMMUTER_OBJS) $(TRACE_LIBA) -o $@ $(TRACE_LDFLAGS) $(TRACE_LIBS)

commuter-report:
	@if [ -f $(COMMUTER_OUT)/summary.txt ]; then \
		echo "== the conflict checker (build/pinmm-commuter; docs/commuter.md) =="; \
		grep -E '^commuter: ' $(COMMUTER_OUT)/summary.txt; \
		ls $(COMMUTER_OUT)/*.png 2>/dev/null | sed 's/^/heatmap: /'; \
		echo "matrices and fields: $(COMMUTER_OUT)/summary.txt"; \
	else \
		echo "commuter: no results in $(COMMUTER_OUT) (run build/pinmm-commuter)"; \
	fi

# The report's scaling model reads the trace's figures from here (bench/report_model.c).
commuter-model:
	@if [ -x $(COMMUTER) ]; then mkdir -p $(COMMUTER_OUT) && \
		$(COMMUTER) --model $(COMMUTER_OUT)/model.tsv; \
	else echo "model: no $(COMMUTER) (needs clang): the report skips the model"; fi

check-commuter: $(COMMUTER)
	@sh tests/trace/commuter.sh $(COMMUTER)

check-trace: check-commuter

-include $(wildcard $(COMMUTER_OBJS:.o=.d))
