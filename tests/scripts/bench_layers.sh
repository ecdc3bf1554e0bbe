#!/bin/sh
# bench_layers.sh - pinmm-bench's files call only down (TAP on stdout).
#
# Reads the symbol tables of the bench objects ($O/bench/*.o, $O/bench/cases/*.o) with nm:
# file A uses file B when A has an undefined symbol that B defines. Checks that
#   - no two bench files use each other, and there is no longer cycle either: the files form
#     layers (tsort finds an order);
#   - a case (bench/cases/*.c) uses only the case-facing API, the functions and objects that
#     bench/bench.h declares, and never another case;
#   - the files that implement that API use nothing but each other: the harness (driver,
#     command lines, report) sits above them, never below.
# On failure the offending uses are printed as "# A -> B (symbol)".
#   O   build directory holding bench/*.o (run.sh sets it; default build/asan)
#   NM  the nm to use (default nm)
set -u
O=${O:-build/asan}
NM=${NM:-nm}
API=${BENCH_API_HEADER:-bench/bench.h}
. "$(dirname "$0")/../lib/tap.sh"

objs=$(ls "$O"/bench/*.o "$O"/bench/cases/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	echo "not ok 1 - no bench objects under $O/bench (build them: make SAN=... tests)"
	echo "1..1"
	exit 1
fi

# "file def sym" and "file use sym", file relative to $O (bench/x.o, bench/cases/y.o).
# shellcheck disable=SC2086
$NM -A -g $objs >"$tmp/nm" 2>"$tmp/nm.err"
nmrc=$?
awk -v o="$O/" '
	{
		i = index($0, ":"); file = substr($0, 1, i - 1); rest = substr($0, i + 1)
		if (index(file, o) == 1) file = substr(file, length(o) + 1)
		nf = split(rest, f, " ")
		if (nf == 2 && (f[1] == "U" || f[1] == "w")) print file, "use", f[2]
		else if (nf == 3 && f[2] != "U" && f[2] != "w") print file, "def", f[3]
	}' "$tmp/nm" >"$tmp/syms"
[ $nmrc -eq 0 ] && [ -s "$tmp/syms" ] && grep -q " def " "$tmp/syms"
ok $? "nm reads the symbol tables of $(echo "$objs" | wc -l) bench objects"
[ -s "$tmp/nm.err" ] && sed 's/^/# /' "$tmp/nm.err"

# Every use of a symbol another bench file defines: "user definer symbol".
awk '
	$2 == "def" { def[$3] = $1; next }
	$2 == "use" { use[++nu] = $1 " " $3 }
	END {
		for (k = 1; k <= nu; k++) {
			split(use[k], u, " ")
			if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]], u[2]
		}
	}' "$tmp/syms" | sort -u >"$tmp/uses"

# 1. No two files that use each other.
awk '{ e[$1 " " $2] = $3 } END {
	for (k in e) {
		split(k, p, " ")
		if ((p[2] " " p[1]) in e && p[1] < p[2])
			print "# " p[1] " -> " p[2] " (" e[k] ") and back (" e[p[2] " " p[1]] ")"
	}
}' "$tmp/uses" | sort >"$tmp/mutual"
[ ! -s "$tmp/mutual" ]
ok $? "no two bench files use each other"
cat "$tmp/mutual"

# 2. No cycle at all: the files form layers.
awk '{ print $1, $2 }' "$tmp/uses" | sort -u >"$tmp/edges"
awk '{ print $1, $1 }' "$tmp/syms" | sort -u >>"$tmp/edges"
tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/tsort.err"
[ ! -s "$tmp/tsort.err" ]
ok $? "the bench files form layers (no cycle of uses)"
sed 's/^/# /' "$tmp/tsort.err"

# The case-facing API: every identifier bench.h declares.
if [ -r "$API" ]; then
	tr -c 'A-Za-z0-9_' '\n' <"$API" | grep -E '^[A-Za-z_]' | sort -u >"$tmp/api"
else
	: >"$tmp/api"
fi
[ -s "$tmp/api" ]
ok $? "read the case-facing API from $API"

# 3. Cases use the case-facing API only.
awk 'NR == FNR { api[$1] = 1; next }
	$1 ~ /^bench\/cases\// && (!($3 in api) || $2 ~ /^bench\/cases\//) {
		print "# " $1 " -> " $2 " (" $3 ")"
	}' "$tmp/api" "$tmp/uses" >"$tmp/cases"
[ ! -s "$tmp/cases" ]
ok $? "cases use only what bench.h declares, never another case"
cat "$tmp/cases"

# 4. The files that implement the API use only each other.
awk 'NR == FNR { api[$1] = 1; next }
	$2 == "def" && ($3 in api) && $1 !~ /^bench\/cases\// { print $1 }' \
	"$tmp/api" "$tmp/syms" | sort -u >"$tmp/apifiles"
awk 'NR == FNR { lib[$1] = 1; next }
	($1 in lib) && !($2 in lib) { print "# " $1 " -> " $2 " (" $3 ")" }' \
	"$tmp/apifiles" "$tmp/uses" >"$tmp/updeps"
[ -s "$tmp/apifiles" ] && [ ! -s "$tmp/updeps" ]
ok $? "the case-facing files ($(tr '\n' ' ' <"$tmp/apifiles" | sed 's/ $//')) use nothing above them"
cat "$tmp/updeps"

tap_done
