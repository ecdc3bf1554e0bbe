#!/bin/sh
# bench_smoke.sh - pinmm-bench bit-rot check for `make check` (TAP on stdout).
#
# Runs every case once for about a second (2 tasks, small working sets: nothing is timed) and
# checks that what pinmm-bench prints is will-it-scale's format byte for byte:
#   per-case output:  testcase:<desc> / warmup / W x "min:N max:N total:N" / measurement /
#                     S x "min:N max:N total:N" / average:N, with min <= max <= total and
#                     average = (sum of the measured totals) / S; -v adds "%4d -> %llu" lines
#   runtest CSV:      the header, the 0,0,100,0,100,0 row, one "%d,%d,%0.2f,%d,%0.2f,%d" row
#                     per task count, linear = tasks x max(processes, threads) at 1 task, and
#                     <case>.title holding the description
# A host case the kernel cannot run must say "not available", print nothing on stdout and exit 0:
# TAP "# SKIP". A pinmm case saying "not available" fails.
#   O   build directory holding pinmm-bench (run.sh sets it; default build/asan)
set -u
O=${O:-build/asan}
BENCH=${BENCH:-$O/pinmm-bench}
case $BENCH in /*) ;; *) BENCH=$(pwd)/$BENCH ;; esac
. "$(dirname "$0")/../lib/tap.sh"

diag() {
	sed 's/^/# /' "$@"
}

# check_output FILE WARMUP SAMPLES VERBOSE_TASKS: 0 when FILE is exactly will-it-scale's format.
check_output() {
	awk -v warmup="$2" -v samples="$3" -v vt="$4" '
	function fail(msg) { print "# line " NR ": " msg ": [" $0 "]"; bad = 1; exit 1 }
	function sample() {
		if ($0 !~ /^min:[0-9]+ max:[0-9]+ total:[0-9]+$/) fail("not a sample line")
		split($0, f, /[: ]/)
		if (f[2] + 0 > f[4] + 0 || f[4] + 0 > f[6] + 0) fail("min <= max <= total broken")
		if (vt && vsum != f[6]) fail("total is not the sum of the task lines")
		if (vt && vcount != vt) fail("wrong number of task lines")
		vsum = 0; vcount = 0
		return f[6]
	}
	NR == 1 { if ($0 !~ /^testcase:[^:]+$/) fail("first line is not testcase:"); next }
	NR == 2 { if ($0 != "warmup") fail("second line is not warmup"); next }
	/^ *[0-9]+ -> [0-9]+$/ {
		if (!vt) fail("task line without -v")
		if (substr($0, 5, 4) != " -> ") fail("task index not printed as %4d")
		vsum += $3; vcount++; next
	}
	{
		if (seen_avg) fail("output after average:")
		if (warm < warmup) { sample(); warm++; next }
		if (!seen_meas) { if ($0 != "measurement") fail("measurement missing"); seen_meas = 1; next }
		if (meas < samples) { sum += sample(); meas++; next }
		if ($0 !~ /^average:[0-9]+$/) fail("average: line missing")
		split($0, a, ":")
		if (a[2] != int(sum / samples)) fail("average is not sum/S: " int(sum / samples))
		seen_avg = 1
	}
	END {
		if (bad) exit 1
		if (!seen_avg) { print "# no average: line"; exit 1 }
	}' "$1"
}

# run_case NAME ARGS...: one short run, then the format check.
run_case() {
	name=$1
	shift
	label="$name${*:+ $*}"
	out=$tmp/$name.out
	err=$tmp/$name.err
	"$BENCH" "$name" -t 2 -s 1 --warmup 1 --interval-ms 500 "$@" >"$out" 2>"$err"
	rc=$?
	if grep -q "not available" "$err"; then
		# Only a host case may find the kernel lacking; it says so, prints nothing on
		# stdout and exits 0. That is a skip, not a pass: nothing was checked.
		why=$(sed -n 's/.*not available[^:]*: //p' "$err" | head -1)
		case $name in
		host_*)
			if [ $rc -eq 0 ] && [ ! -s "$out" ]; then
				n=$((n + 1))
				echo "ok $n - $label # SKIP not available on this kernel: $why"
				return
			fi
			ok 1 "$label: not available: exit 0 and nothing on stdout"
			;;
		*)
			ok 1 "$label: a pinmm case is always available"
			;;
		esac
		echo "# exit status $rc"
		diag "$out" "$err"
		return
	fi
	check_output "$out" 1 1 0 >"$tmp/check" 2>&1
	crc=$?
	[ $rc -eq 0 ] && [ $crc -eq 0 ]
	ok $? "$label: runs, output in will-it-scale's format"
	if [ $rc -ne 0 ] || [ $crc -ne 0 ]; then
		echo "# exit status $rc"
		diag "$tmp/check" "$out" "$err"
	fi
}

if [ ! -x "$BENCH" ]; then
	echo "1..0 # SKIP $BENCH not built"
	exit 0
fi

# Every case, with its seed's "before" too where it has one; small working sets.
small=16M
run_case pin_fast
run_case pin_fast --knobs before
run_case gup_fast
run_case gup_fast --knobs before --variant nochurn
run_case mr_reg --size 32M
run_case mr_reg --size 32M --knobs before --variant 4k
run_case mr_reg --size 32M --variant thp-batch
run_case shmem_fault --size "$small"
run_case shmem_fault --size "$small" --knobs before --variant whole
for c in page_fault1 page_fault2 page_fault3 mmap1 mmap2; do
	run_case $c --size "$small"
done
run_case page_fault2 --size "$small" --mode processes
run_case mmap1 --size "$small" --mm range
run_case page_fault1 --size "$small" --mm range
run_case gup_fast --mm range
run_case migrate_gup
run_case migrate_gup --mm range
run_case longterm_frag -t 1
run_case longterm_frag -t 1 --knobs before
run_case pin_hot
run_case pin_hot --variant spread --mm range
run_case host_pin_fast
run_case host_gup_fast
run_case host_gup_fast --variant nochurn --mode processes
run_case host_mr_reg --size 32M --variant thp
run_case host_mr_reg --size 32M --variant 4k
run_case host_shmem_fault --size "$small"
run_case host_shmem_fault --size "$small" --variant whole --mode processes
for c in host_page_fault1 host_page_fault2 host_page_fault3 host_mmap1 host_mmap2; do
	run_case $c --size "$small"
done
run_case host_mmap1 --size "$small" --mode processes

# The exact upstream shape: 6 warm-up samples by default, -v task lines.
"$BENCH" mmap1_threads -t 2 -s 2 -v --interval-ms 100 --size "$small" >"$tmp/v.out" 2>"$tmp/v.err"
rc=$?
check_output "$tmp/v.out" 6 2 2 >"$tmp/check" 2>&1
crc=$?
[ $rc -eq 0 ] && [ $crc -eq 0 ]
ok $? "mmap1_threads -t 2 -s 2 -v: 6 warm-up samples, task lines, average"
[ -s "$tmp/check" ] && diag "$tmp/check" "$tmp/v.out"

# Usage errors as will-it-scale: usage on stdout, exit 1.
"$BENCH" mmap1 -n -m >"$tmp/u.out" 2>&1
[ $? -eq 1 ] && grep -q "^Usage:" "$tmp/u.out"
ok $? "-n with -m is a usage error (exit 1)"
"$BENCH" mmap1 -t 2049 >"$tmp/u.out" 2>&1
[ $? -eq 1 ] && grep -qx "tasks cannot exceed 2048" "$tmp/u.out"
ok $? "-t 2049: tasks cannot exceed 2048"

# list names every case.
"$BENCH" list >"$tmp/list" 2>&1
missing=0
for c in pin_fast gup_fast mr_reg shmem_fault page_fault1 page_fault2 page_fault3 mmap1 mmap2 \
	migrate_gup longterm_frag pin_hot \
	host_pin_fast host_gup_fast host_mr_reg host_shmem_fault host_page_fault1 \
	host_page_fault2 host_page_fault3 host_mmap1 host_mmap2; do
	grep -q "^$c " "$tmp/list" || missing=$((missing + 1))
done
ok $missing "list shows every case"

# runtest: LKP's form, then the CSV checked line by line.
check_csv() {
	awk -F, -v want_rows="$2" -v procs="$3" -v threads="$4" '
	function fail(msg) { print "# line " NR ": " msg ": [" $0 "]"; bad = 1; exit 1 }
	NR == 1 {
		if ($0 != "tasks,processes,processes_idle,threads,threads_idle,linear") fail("header")
		next
	}
	NR == 2 { if ($0 != "0,0,100,0,100,0") fail("origin row"); next }
	{
		if ($0 !~ /^[0-9]+,-?[0-9]+,[0-9]+\.[0-9][0-9],-?[0-9]+,[0-9]+\.[0-9][0-9],-?[0-9]+$/)
			fail("row format")
		if (!procs && ($2 != "0" || $3 != "0.00")) fail("unselected processes not 0,0.00")
		if (!threads && ($4 != "0" || $5 != "0.00")) fail("unselected threads not 0,0.00")
		if (procs && $2 <= 0) fail("no processes figure")
		if (threads && $4 <= 0) fail("no threads figure")
		if ($1 == 1) base = ($2 > $4 ? $2 : $4)
		if ($6 != $1 * base) fail("linear is not tasks x max at 1 task")
		rows++
	}
	END { if (!bad && rows != want_rows) { print "# " rows " rows"; exit 1 } exit bad }' "$1"
}

(cd "$tmp" && "$BENCH" runtest --warmup 1 --interval-ms 200 --size 16M mmap1 1 both 1 2 \
	>rt.csv 2>rt.err)
rc=$?
check_csv "$tmp/rt.csv" 2 1 1 >"$tmp/check" 2>&1
crc=$?
[ $rc -eq 0 ] && [ $crc -eq 0 ]
ok $? "runtest mmap1 1 both 1 2: the runtest CSV"
[ -s "$tmp/check" ] && diag "$tmp/check" "$tmp/rt.csv" "$tmp/rt.err"
printf 'Anonymous memory mmap/munmap of 128MB\n' | cmp -s - "$tmp/mmap1.title"
ok $? "runtest writes mmap1.title like runtest.py"

(cd "$tmp" && "$BENCH" runtest --warmup 0 --interval-ms 200 host_mmap1 1 thread 2 \
	>rt2.csv 2>rt2.err)
rc=$?
check_csv "$tmp/rt2.csv" 1 0 1 >"$tmp/check" 2>&1
crc=$?
[ $rc -eq 0 ] && [ $crc -eq 0 ]
ok $? "runtest host_mmap1 1 thread 2: processes column 0,0.00, linear 0 without 1 task"
[ -s "$tmp/check" ] && diag "$tmp/check" "$tmp/rt2.csv" "$tmp/rt2.err"

tap_done
