#!/bin/sh
# layers.sh - the structure of src/ that docs/architecture.md promises, checked (TAP on stdout).
#
#  1. Layers call only down. From the symbol tables of $O/src/*/*.o: every undefined symbol of
#     an object that another object of src/ defines is a call (or a reference) from the first
#     file's directory to the second's; it must go to a lower layer (or stay in its directory).
#     Ranks: lib 0 < mem 1 < pgtable, shmem 2 (siblings: neither calls the other) < mm 3 <
#     fault 4 < gup 5 < consumers 6; debug/ (the checker) may look at everything. Allowed
#     upward calls, as Linux: mm/access.c -> pm_fault (a CPU takes a fault), mm/mmap.c ->
#     pm__gup_slow (MAP_POPULATE).
#  2. Lock assertions: the number of call sites of assertions named *assert*_locked( or
#     *assert*_held( in src/ is at least the number of comment lines in src/ that name a lock
#     the caller holds ("Context: ... lock/held/PTL/RCU", "Caller holds ..."; not "Context: any").
#   O   build directory holding src/*/*.o (run.sh sets it; default build/asan)
set -u
O=${O:-build/asan}
SRC=${SRC:-src}
. "$(dirname "$0")/../lib/tap.sh"

objs=$(ls "$O"/src/*/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	echo "1..0 # SKIP no objects in $O/src (build first)"
	exit 0
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
	if ($1 == "mm/mmap" && sym == "pm__gup_slow") next
	if (rank(from) < 0 || rank(to) < 0 || rank(to) >= rank(from))
		printf "%s.c -> %s (%s/)\n", $1, sym, to
}' "$tmp/defs" "$tmp/uses" | sort -u >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
	ok 1 "layers call only down"
	sed 's/^/#   /' "$tmp/bad"
else
	ok 0 "layers call only down ($(wc -l <"$tmp/uses") symbol uses in $(echo "$objs" | wc -w) objects)"
fi

# Lock assertions against the comments that name a lock the caller holds.
comments=$(grep -rnE 'Context:|Caller holds' "$SRC" | grep -E 'lock|held|PTL|RCU' |
	   grep -vE 'Context: any|no spinlock|"Context:"' | wc -l)
asserts=$(grep -rnE '[a-z_]*assert[a-z_]*(_locked|_held)\(' "$SRC" | grep -vE '#define|^[^:]*:[0-9]+: *\*|\/\*' |
	  grep -oE '[a-z_]*assert[a-z_]*(_locked|_held)\(' | wc -l)
if [ "$asserts" -ge "$comments" ]; then
	ok 0 "lock assertions ($asserts) >= comments naming a lock the caller holds ($comments)"
else
	ok 1 "lock assertions ($asserts) >= comments naming a lock the caller holds ($comments)"
fi

tap_done
