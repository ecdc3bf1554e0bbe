#!/bin/sh
# Runs pinmm's test binaries and sums their TAP results.
#   O      build directory holding tests/unit and tests/stress (default build/asan)
#   SAN    asan | tsan: under tsan loops shrink (PM_TEST_SCALE) and ASLR is turned off
#   TIER   check (default): unit tests, short stress runs, bench smoke
#          stress: stress tests for PM_STRESS_SECONDS (default 60) each
#          torture: torture tests for TORTURE_MINUTES (default 10)
#   Shell tests in tests/scripts/*.sh run in the check tier too, with O and SAN exported
#          (SCRIPTS=0: not; they check the default build's programs, not O's tests).
#   T      per-binary timeout in seconds (default 300; multiplied under tsan)
# Prints one line per binary and a final "N passed, N failed" (tests, not binaries).
set -u
export O SAN
O=${O:-build/asan}
SAN=${SAN:-asan}
TIER=${TIER:-check}
T=${T:-300}
setarch_cmd=""
if [ "$SAN" = tsan ]; then
	export PM_TEST_SCALE=${PM_TEST_SCALE:-0.1}
	export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
	T=$((T * 3))
	setarch -R true 2>/dev/null && setarch_cmd="setarch $(uname -m) -R"
else
	export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi
case "$TIER" in
check)
	export PM_STRESS_SECONDS=${PM_STRESS_SECONDS:-2}
	bins="$(ls "$O"/tests/unit/* "$O"/tests/stress/* 2>/dev/null | grep -v '\.d$' | grep -v '\.o$')"
	[ "${SCRIPTS:-1}" = 0 ] || bins="$bins $(ls tests/scripts/*.sh 2>/dev/null)"
	;;
stress)
	export PM_STRESS_SECONDS=${PM_STRESS_SECONDS:-60}
	bins="$(ls "$O"/tests/stress/* 2>/dev/null | grep -v '\.[do]$')"
	T=$((T + PM_STRESS_SECONDS * 4))
	;;
torture)
	export TORTURE_MINUTES=${TORTURE_MINUTES:-10}
	export PM_STRESS_SECONDS=$((TORTURE_MINUTES * 60))
	bins="$(ls "$O"/tests/stress/torture* 2>/dev/null | grep -v '\.[do]$')"
	T=$((T + PM_STRESS_SECONDS * 2))
	;;
*) echo "run.sh: unknown TIER $TIER" >&2; exit 2 ;;
esac
log_dir="$O/test-logs"
mkdir -p "$log_dir"
pass=0; fail=0; bad_bins=""
for b in $bins; do
	[ -x "$b" ] || continue
	name=$(basename "$b")
	log="$log_dir/$name.log"
	start=$(date +%s)
	timeout "$T" $setarch_cmd "$b" >"$log" 2>&1
	rc=$?
	end=$(date +%s)
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed, timed out or bailed out: count the binary as one failure
	fi
	pass=$((pass + p)); fail=$((fail + f))
	if [ $rc -eq 0 ] && [ "$f" -eq 0 ]; then
		printf '%-32s ok    %4d tests  %3ss\n' "$name" "$p" $((end - start))
	else
		printf '%-32s FAIL  rc=%d  %d passed, %d failed  (log: %s)\n' "$name" $rc "$p" "$f" "$log"
		grep -E '^(not ok|#   |Bail out)' "$log" | head -20 | sed 's/^/    /'
		tail -n 15 "$log" | grep -vE '^(ok|not ok)' | sed 's/^/    | /'
		bad_bins="$bad_bins $name"
	fi
done
# The first sanitizer report of a log, whole but without addresses and library frames (a
# CI log keeps only its tail, and a report's tail names neither access); else the log's tail.
report_excerpt() {
	if grep -qE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: )' "$1"; then
		awk '/^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: )/ { on = 1 }
		     on && /libsanitizer|libtsan|libasan|libubsan/ { next }
		     on { sub(/ \([^ ]*\+0x[0-9a-f]+\)$/, ""); print }
		     on && /^SUMMARY: / { exit }' "$1" | grep -v '^ *$' | head -n 60
	else
		tail -n 25 "$1" | grep -vE '^(ok|not ok)'
	fi
}
# The failures again, last: a CI log is often read from its tail.
for name in $bad_bins; do
	echo "FAILED: $name (log: $log_dir/$name.log)"
	grep -E '^(not ok|#   |Bail out)' "$log_dir/$name.log" | head -10 | sed 's/^/    /'
	report_excerpt "$log_dir/$name.log" | sed 's/^/    | /'
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ -n "$bins" ]
