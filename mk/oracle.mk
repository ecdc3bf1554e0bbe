# mk/oracle.mk - `make oracle`: the host kernel as the oracle (issue 29, tools/oracle/).
#
#   make oracle [ORACLE_SECONDS=60] [ORACLE_SEED=N] [ORACLE_MM=linux|range|both]
#		[ORACLE_STRICT=0: report divergences off the list without failing]
#		[ORACLE_JOBS=N: drivers side by side; default 1.5 per CPU; hugetlb in the first only]
#		[ORACLE_SEQ=N: the sequence numbered N again, with the seed, ORACLE_MM and
#		 ORACLE_JOBS it ran with]
#	builds $(O)/pinmm-oracle (libpinmm linked statically, liburing) and runs seeded random
#	sequences on the host and on pinmm, compared after every operation. Needs root for the
#	full comparison (it says what it skips otherwise) and restores every setting it changes.
#	A divergence not on tools/oracle/known.txt fails the run; its minimal sequence is
#	printed and written as a C test to build/oracle/.

ORACLE_SECONDS ?= 60
ORACLE_SRCS := $(sort $(wildcard tools/oracle/*.c))
ORACLE_OBJS := $(ORACLE_SRCS:%.c=$(O)/%.o)
ORACLE_BIN := $(O)/pinmm-oracle
# --whole-archive: the weak references to calls other branches add (ops.c) resolve to
# them when libpinmm has them; an archive member is not pulled in for a weak reference.

.PHONY: oracle

$(ORACLE_BIN): $(ORACLE_OBJS) $(LIBA)
	$(CC) $(ORACLE_OBJS) -Wl,--whole-archive $(LIBA) -Wl,--no-whole-archive -o $@ $(LDFLAGS) \
		$(LIB_LIBS) -luring

oracle: $(ORACLE_BIN)
	ORACLE_SECONDS=$(ORACLE_SECONDS) $(if $(ORACLE_SEED),ORACLE_SEED=$(ORACLE_SEED)) \
		$(if $(ORACLE_MM),ORACLE_MM=$(ORACLE_MM)) \
		$(if $(ORACLE_STRICT),ORACLE_STRICT=$(ORACLE_STRICT)) \
		$(if $(ORACLE_JOBS),ORACLE_JOBS=$(ORACLE_JOBS)) \
		$(if $(ORACLE_SEQ),ORACLE_SEQ=$(ORACLE_SEQ)) $(ORACLE_BIN)

-include $(wildcard $(ORACLE_OBJS:.o=.d))
