#!/bin/sh
# layers.sh - the structure of src/ that docs/architecture.md promises, checked (TAP on stdout).
#
#  1. Layers call only down. From the symbol tables of $O/src/*/*.o: every undefined symbol of
#     an object that another object of src/ defines is a call (or a reference) from the first
#     file's directory to the second's; it must go to a lower layer (or stay in its directory).
#     Ranks: lib 0 < mem 1 < pgtable, shmem 2 (siblings: neither calls the other) < mm 3 <
#     fault 4 < gup 5 < consumers 6; debug/ (the checker) may look at everything. Two
#     upward calls are allowed, as Linux makes them: mm/access.c -> pm_fault (a CPU takes a
#     fault) and mm/populate.c -> pm__populate (GUP's walk faults a range in: MAP_POPULATE,
#     MAP_LOCKED, a locked VMA made writable or grown, MADV_POPULATE_*).
#  2. Lock assertions, per function: a function whose comment names a lock its caller holds
#     ("Context: ... lock/held/PTL/RCU", "Caller holds ..."; not "Context: any") asserts one
#     in its body (*assert*_locked( or *assert*_held(), as Linux puts lockdep_assert_held()
#     beside every "caller holds".
#  3. One address space, two policies: no file branches on the design but the policy table
#     (mm/range.c) and the mm's creation (mm/lifecycle.c, from the machine's flag, mem/machine.c).
#     Outside those, no line names the machine's flag (range_mm), a policy table
#     (linux_policy, range_policy), a policy's name, or compares the number of ranges - but
#     mm_one_range() in mm/mm.h, the geometry query of the one-range fast paths.
#  4. Headers are included only down. From the compiler's dependency files $O/src/*/*.d (-MMD,
#     so every header a file reaches, through other headers too): no file of a layer reaches a
#     header of a higher layer or of a sibling (pgtable/ and shmem/); debug/ may reach any.
#     Headers in src/ itself (internal.h) belong to no layer. No .d files is a failure.
#   O   build directory holding src/*/*.o (run.sh sets it; default build/asan)
set -u
O=${O:-build/asan}
SRC=${SRC:-src}
. "$(dirname "$0")/../lib/tap.sh"

objs=$(ls "$O"/src/*/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	echo "Bail out! no objects in $O/src: build first (make SAN=asan tests)"
	exit 1
fi

# "symbol dir" for every global symbol src/ defines; "dir/file symbol" for every use.
for o in $objs; do
	d=$(basename "$(dirname "$o")")
	f=$(basename "$o" .o)
	nm --defined-only -g "$o" | awk -v d="$d" 'NF == 3 { print $3, d }' >>"$tmp/defs"
	nm -u "$o" | awk -v df="$d/$f" '{ print df, $NF }' >>"$tmp/uses"
done

awk '
function rank(d) {
	if (d == "lib") return 0
	if (d == "mem") return 1
	if (d == "pgtable" || d == "shmem") return 2
	if (d == "mm") return 3
	if (d == "fault") return 4
	if (d == "gup") return 5
	if (d == "consumers") return 6
	if (d == "debug") return 7
	return -1
}
NR == FNR { def[$1] = $2; next }
{
	split($1, p, "/"); from = p[1]; sym = $2
	if (!(sym in def)) next
	to = def[sym]
	if (to == from) next
	if ($1 == "mm/access" && sym == "pm_fault") next
	if ($1 == "mm/populate" && sym == "pm__populate") next
	if (rank(from) < 0 || rank(to) < 0 || rank(to) >= rank(from))
		printf "%s.c -> %s (%s/)\n", $1, sym, to
}' "$tmp/defs" "$tmp/uses" | sort -u >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
	ok 1 "layers call only down"
	sed 's/^/#   /' "$tmp/bad"
else
	ok 0 "layers call only down ($(wc -l <"$tmp/uses") symbol uses in $(echo "$objs" | wc -w) objects)"
fi

# Lock assertions: each function whose comment says its caller holds a lock asserts one.
# A comment is the function's when the function follows it; any other top-level line between
# them (a #define, a declaration) ends it.
awk '
FNR == 1 { pending = 0; infn = 0 }
!infn && /Context:|Caller holds/ && /lock|held|PTL|RCU/ &&
	!/Context: any|no spinlock|"Context:"/ { pending = 1; ncomments++ }
!infn && pending && /^[A-Za-z_#]/ && !(/^[a-z_].*\(/ && !/;[ \t]*$/) { pending = 0 }
!infn && pending && /^[a-z_].*\(/ && !/;[ \t]*$/ {
	name = $0; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n]
	infn = 1; start = FNR; found = 0
	if ($0 ~ /\{.*\}[ \t]*$/) infn = 2
}
infn && /[a-z_]*assert[a-z_]*(_locked|_held)\(/ { found = 1 }
infn && (/^\}/ || infn == 2) {
	if (pending && !found)
		printf "%s:%d: %s()\n", FILENAME, start, name
	else if (pending)
		nfound++
	infn = 0; pending = 0
}
END { printf "%d\n", nfound > "/dev/stderr" }
' $(ls "$SRC"/*.h "$SRC"/*/*.h "$SRC"/*/*.c) >"$tmp/unasserted" 2>"$tmp/asserted"
if [ -s "$tmp/unasserted" ]; then
	ok 1 "every function whose caller holds a lock asserts it"
	sed 's/^/#   no assertion: /' "$tmp/unasserted"
else
	ok 0 "every function whose caller holds a lock asserts it ($(cat "$tmp/asserted") functions)"
fi

# One address space, two policies.
grep -rnE '(->|\.)range_mm|(linux|range)_policy|policy->name|nr_ranges *(==|!=|>|<)|mm_range_design' \
	"$SRC" --include=*.c --include=*.h |
	grep -vE '^[^:]*/(mm/range\.c|mm/lifecycle\.c|mem/machine\.c):' |
	grep -vE '^[^:]*/mm/mm\.h:[0-9]+:	return mm->nr_ranges == 1;$' |
	grep -vE '^[^:]*:[0-9]+: *(/?\*|//)' >"$tmp/design" || true
if [ -s "$tmp/design" ]; then
	ok 1 "no branch on the design outside the policy table and the mm's creation"
	sed 's/^/#   /' "$tmp/design"
else
	ok 0 "no branch on the design outside the policy table and the mm's creation"
fi

# Headers included only down, as the compiler saw them (-MMD dependency files).
deps=$(ls "$O"/src/*/*.d 2>/dev/null)
if [ -z "$deps" ]; then
	ok 1 "headers are included only down (no dependency files in $O/src: build with -MMD)"
else
	# The first rule of each .d file: "obj.o: src.c hdr.h ..."; -MP's phony rules follow it.
	for d in $deps; do
		awk -v df="$(basename "$(dirname "$d")")/$(basename "$d" .d)" '
		{ more = sub(/\\$/, ""); for (i = 1; i <= NF; i++) if ($i !~ /:$/) print df, $i }
		!more { exit }' "$d"
	done | awk '
	function rank(d) {
		if (d == "lib") return 0
		if (d == "mem") return 1
		if (d == "pgtable" || d == "shmem") return 2
		if (d == "mm") return 3
		if (d == "fault") return 4
		if (d == "gup") return 5
		if (d == "consumers") return 6
		if (d == "debug") return 7
		return -1
	}
	$2 ~ /\.h$/ {
		nh++
		split($1, p, "/"); from = p[1]
		h = $2; while (sub(/[^\/]+\/\.\.\//, "", h)) ;
		if (h !~ /(^|\/)src\/[^\/]+\/[^\/]+\.h$/) next
		n = split(h, q, "/"); to = q[n - 1]
		if (to == from || from == "debug") next
		hh = q[n - 1] "/" q[n]
		if (rank(from) >= 0 && rank(to) >= 0 && rank(to) < rank(from))
			next
		printf "%s.c includes %s (%s/)\n", $1, hh, to
	}
	END { printf "%d header uses\n", nh > "/dev/stderr" }' 2>"$tmp/nincl" | sort -u >"$tmp/upinc"
	if [ -s "$tmp/upinc" ]; then
		ok 1 "headers are included only down"
		sed 's/^/#   /' "$tmp/upinc"
	else
		ok 0 "headers are included only down ($(cat "$tmp/nincl"), in $(echo "$deps" | wc -w) files)"
	fi
fi

tap_done
