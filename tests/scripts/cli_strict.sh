#!/bin/sh
# cli_strict.sh - the command lines refuse what they cannot use (TAP on stdout).
#
# Every number on the command lines of pinmm-bench, the tools and the experiments is read strictly
# (tools/lib/cli.c): each bad command line below must exit 1 and name the argument on stderr
# (and print usage); a working set larger than the host's MemAvailable must be refused at
# once with a message that says so; a large machine (-M) must not be; and a few good command
# lines must still run and exit 0. Every run is tiny: a refusal allocates nothing.
#   O   build directory holding the binaries (run.sh sets it; default build/asan)
set -u
O=${O:-build/asan}
. "$(dirname "$0")/../lib/tap.sh"

# expect WANT_RC PATTERN CMD...: run CMD, stdout and stderr together; WANT_RC is a number or
# "nonzero"; PATTERN (grep -E) must be in the output ("" for none).
expect() {
	want=$1 pat=$2
	shift 2
	timeout 60 "$@" >"$tmp/out" 2>&1
	rc=$?
	label="$(basename "$1")${2:+ $(shift; echo "$*")}"
	case $want in
	nonzero) [ $rc -ne 0 ] ;;
	*) [ $rc -eq "$want" ] ;;
	esac
	good=$?
	if [ $good -eq 0 ] && [ -n "$pat" ] && ! grep -qE -- "$pat" "$tmp/out"; then
		good=1
	fi
	ok $good "$label: exit $rc${pat:+, says /$pat/}"
	if [ $good -ne 0 ]; then
		echo "# wanted exit $want${pat:+ and /$pat/}; got exit $rc:"
		head -20 "$tmp/out" | sed 's/^/#   /'
	fi
}

# refuse PATTERN CMD...: CMD must exit 1 with PATTERN (grep -E) on stderr and nothing on
# stdout, the command line refused before anything ran.
refuse() {
	pat=$1
	shift
	timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	label="$(basename "$1")${2:+ $(shift; echo "$*")}"
	good=1
	if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -qE -- "$pat" "$tmp/err"; then
		good=0
	fi
	ok $good "$label: exit $rc, says /$pat/ on stderr, nothing on stdout"
	if [ $good -ne 0 ]; then
		echo "# wanted exit 1, /$pat/ on stderr and an empty stdout; got exit $rc:"
		head -10 "$tmp/out" | sed 's/^/#   out: /'
		head -10 "$tmp/err" | sed 's/^/#   err: /'
	fi
}

case $O in /*) ;; *) O=$(pwd)/$O ;; esac
GT=$O/pinmm-gup-test
BENCH=$O/pinmm-bench
MM=$O/pinmm-mm-bench
GB=$O/pinmm-gup-bench
IB=$O/experiments/pinmm-interleave-bench
AB=$O/experiments/pinmm-atomic-bench
# runtest writes CASE.title where it runs: here, not in the tree.
cd "$tmp" || exit 1
for b in "$GT" "$BENCH" "$MM" "$GB" "$IB" "$AB"; do
	[ -x "$b" ] && continue
	echo "not ok 1 - $b not built (make SAN=... tests)"
	echo "1..1"
	exit 1
done

# Issue 13 #9: each of these was accepted.
expect 1 "-n 'abc': not a number" "$GT" -n abc
expect 1 "-F 'garbage': not a number" "$GT" -F garbage
expect 1 "-M '-1': not a number" "$GT" -M -1
expect 1 "--size '-1': not a number" "$BENCH" pin_fast --size -1
expect 1 "--size '17179869185G': out of range" "$BENCH" pin_fast --size 17179869185G
expect 1 "unknown benchmark 'bogus'" "$MM" bogus
# More of the same kind.
expect 1 "-n '0': out of range" "$GT" -n 0
expect 1 "-m ' 4': not a number" "$GT" -m " 4"
expect 1 "-j '4x': not a number" "$GT" -j 4x
expect 1 "-k '0x2000': out of range" "$GT" -k 0x2000
expect 1 "-k '0x10000': out of range" "$GT" -k 0x10000
expect 1 "at most 8 page indices" "$GT" -c 0 1 2 3 4 5 6 7 8
expect 1 "Usage:" "$BENCH" pin_fast --size 1Q
expect 1 "-t '1e3': not a number" "$BENCH" pin_fast -t 1e3
expect 1 "-s '99999999999999999999': out of range" "$BENCH" pin_fast -s 99999999999999999999
expect 1 "--interval-ms '0': out of range" "$BENCH" pin_fast --interval-ms 0
expect 1 "bad --knobs '-1'" "$BENCH" pin_fast --knobs -1 -s 1
expect 1 "--mm 'radix': linux or range" "$BENCH" mmap1 --mm radix -s 1
expect 1 "unknown variant 'nope'" "$BENCH" mr_reg --variant nope -s 1
expect 1 "unknown case 'bogus'" "$BENCH" bogus
expect 1 "duration 'abc': not a number" "$BENCH" runtest mmap1 abc
expect 1 "tasks '0': out of range" "$BENCH" runtest mmap1 1 both 0
expect 1 "--tasks 'x': not a number" "$BENCH" report --tasks 1,x --out r
expect 1 "--rounds '0': out of range" "$BENCH" report --rounds 0 --out r
expect 1 "--rounds '10': out of range" "$BENCH" report --rounds 10 --out r
expect 1 "-r '0': out of range" "$MM" -r 0 fault
expect 1 "one benchmark at a time" "$MM" fault shmem
expect 1 "-t 'abc': not a number" "$GB" -t abc
expect 1 "-m '3': not a multiple of 2 MiB" "$GB" -m 3
expect 1 "-t 'abc': not a number" "$IB" -t abc
expect 1 "-r '0': out of range" "$AB" -r 0
expect 1 "-r '2x': not a number" "$AB" -r 2x
expect 1 "-j '1': out of range" "$IB" -j 1
expect 1 "^usage:" "$IB" extra

# Issue 26 #8: report's lists refuse what they cannot use, each item once. Each of these ran
# (unknown and empty items dropped, a repeated task count run twice); the options after the
# list make a report of a few milliseconds, should one start.
small="-s 1 --warmup 0 --interval-ms 1 --no-host --no-plots --out r"
refuse "--only 'bogus': unknown experiment" "$BENCH" report --only pin_fast,bogus --tasks 1 $small
refuse "--only 'pin_fast,pin_fast': 'pin_fast' more than once" \
	"$BENCH" report --only pin_fast,pin_fast --tasks 1 $small
refuse "--only ',pin_fast': an empty item" "$BENCH" report --only ,pin_fast --tasks 1 $small
refuse "--only 'pin_fast,': an empty item" "$BENCH" report --only pin_fast, --tasks 1 $small
refuse "--only '': an empty list" "$BENCH" report --only "" --tasks 1 $small
refuse "--tasks '1,,2': an empty item" "$BENCH" report --tasks 1,,2 --only pin_fast $small
refuse "--tasks ',1': an empty item" "$BENCH" report --tasks ,1 --only pin_fast $small
refuse "--tasks '1,': an empty item" "$BENCH" report --tasks 1, --only pin_fast $small
refuse "--tasks '': an empty list" "$BENCH" report --tasks "" --only pin_fast $small
refuse "--tasks '1,1': '1' more than once" "$BENCH" report --tasks 1,1 --only pin_fast $small
refuse "--tasks '1,0x1': '0x1' more than once" "$BENCH" report --tasks 1,0x1 --only pin_fast $small
refuse "--tasks '1,2,3,4,5,6,7,8,9': more than 8 items" \
	"$BENCH" report --tasks 1,2,3,4,5,6,7,8,9 --only pin_fast $small
refuse "--tasks 'x': not a number" "$BENCH" report --tasks 1,x --only pin_fast $small
# Issue 26 #9: runtest takes --mm as the case form does, and refuses what the case form does.
refuse "--mm 'radix': linux or range" "$BENCH" runtest --mm radix mmap1 1 threads 1
refuse "--mm '': linux or range" "$BENCH" runtest --mm "" mmap1 1 threads 1

# Issue 13 #3: a working set beyond MemAvailable is refused before anything is allocated.
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ -n "$avail_kb" ]; then
	big=$((avail_kb / 1024 + 1024))
	msg="more than the host's available memory"
	expect nonzero "--size: a working set of $big MiB is $msg" "$BENCH" pin_fast -s 1 --size ${big}M
	grep -q '^testcase:' "$tmp/out"
	[ $? -ne 0 ]
	ok $? "pinmm-bench --size ${big}M: refused before the run starts"
	expect nonzero "-m: a working set of $big MiB is $msg" "$GT" -m $big
	expect nonzero "$msg" "$BENCH" runtest --size ${big}M mmap1 1 threads 1
	# The machine is not the working set: a large -M is not refused for MemAvailable.
	timeout 60 "$GT" -M $big -m 1 -U >"$tmp/out" 2>&1
	! grep -q "available memory" "$tmp/out"
	ok $? "pinmm-gup-test -M $big -m 1: the machine size is not checked against MemAvailable"
else
	for k in 1 2 3 4 5; do
		ok 0 "MemAvailable refusal # SKIP no MemAvailable in /proc/meminfo"
	done
fi

# Good command lines still run.
expect 0 "ok 1 ioctl status 0" "$GT" -m 1 -n 0x10 -a -r 1
expect 0 "ok 1 ioctl status 0" "$GT" -m 2 -n -1 -U -M 64 -k 0x2
expect 0 "DUMP_USER_PAGES_TEST: done" "$GT" -m 1 -c -p 0 5 0x10
expect 0 "^average:" "$BENCH" mmap1 -t 1 -s 1 --warmup 0 --interval-ms 100 --size 0x100000
expect 0 "^average:" "$BENCH" pin_fast -t 1 -s 1 --warmup 0 --interval-ms 100 --knobs 0x1
expect 0 "^usage:" "$MM" -h
expect 0 "^usage:" "$GB" -h
expect 0 "^usage:" "$IB" -h
expect 0 "interleaved by 16384 .* [0-9.]+$" "$IB" -t 0.01
expect 0 "\[ *4/4\] pin_fast +after +2 tasks" "$BENCH" report --only pin_fast --tasks 1,2 $small
expect 0 "\[ *2/2\] pin_fast +after +1 task " "$BENCH" report --only pin_fast --tasks 1 $small
# The row's form is checked, not its rate: a one-second run under a sanitizer may finish no
# operation, and make check holds no timing threshold.
row="^1,0,0\.00,[0-9]+,[0-9.]+,[0-9]+$"
expect 0 "$row" "$BENCH" runtest --mm range --warmup 0 --interval-ms 10 mmap1 1 threads 1
expect 0 "$row" "$BENCH" runtest --mm=linux --warmup 0 --interval-ms 10 mmap1 1 threads 1

tap_done
