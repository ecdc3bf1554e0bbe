#!/bin/sh
# commuter.sh - a tiny run of build/pinmm-commuter (make check-commuter, run by make
# check-trace): the summary lines' form, the JSON keys of every case, and three conflicts the
# checker must find or must not find, and --model's figures for the report. TAP on stdout.
COMMUTER=${1:-build/pinmm-commuter}
OUT=$(mktemp -d -t commuter.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
n=0
fail=0
t() { # t OK DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi
}

"$COMMUTER" --design both --quick --only pin_fast --out "$OUT" > "$OUT/stdout" 2> "$OUT/stderr"
t $? "pinmm-commuter --design both --quick --only pin_fast exits 0"

tail -n 4 "$OUT/stdout" > "$OUT/summary"
bad=$(grep -cvE '^commuter: (linux|range) (C1|C64): [0-9]+ of [0-9]+ commutative cases conflict-free$' "$OUT/summary")
t $([ "$bad" = 0 ] && [ "$(wc -l < "$OUT/summary")" = 4 ] && echo 0 || echo 1) \
	"the last four lines are the summary lines, in the contract's form"
for d in linux range; do for l in C1 C64; do
	grep -q "^commuter: $d $l: " "$OUT/summary"
	t $? "a summary line for $d $l"
done; done

J="$OUT/cases.jsonl"
t $([ -s "$J" ] && echo 0 || echo 1) "cases.jsonl was written"
for k in design knobs a b placement state commutes c1 c64 rmw_a rmw_b; do
	missing=$(grep -cv "\"$k\":" "$J")
	t $([ "$missing" = 0 ] && echo 0 || echo 1) "every case has the key \"$k\""
done
grep -q '"c1":\[{"label":"[^"]*","src":"src/[^"]*:[0-9]*"' "$J"
t $? "a conflict carries a label and a symbolized source line"

# pins of one page (one folio) conflict on its refcount, in Linux's design
grep '"design":"linux"' "$J" | grep '"a":"pin_fast","b":"pin_fast","placement":"same_page","state":"anon/faulted"' |
	grep -q '"c1":\[{"label":"[^"]*refcount'
t $? "linux: pin_fast x pin_fast of one page conflict on its refcount"
# different ranges of the range design: conflict-free
grep '"design":"range"' "$J" | grep '"placement":"different_ranges"' | grep '"commutes":true' |
	grep -v '"c1":\[\]' > "$OUT/range_diff"
t $([ ! -s "$OUT/range_diff" ] && echo 0 || echo 1) \
	"range: no C1 conflict between operations in different ranges"
[ -s "$OUT/range_diff" ] && head -3 "$OUT/range_diff" | sed 's/^/#   /'
# --model: the report's scaling model's figures; 2021's has-pinned line before, none after
"$COMMUTER" --model "$OUT/model.tsv" > "$OUT/model.out" 2>&1
t $? "--model wrote the trace's figures"
grep -q "^pin_fast	before	[1-9]" "$OUT/model.tsv"
t $? "model: pin_fast before has a conflicting line"
grep -q "^pin_fast	after	0	" "$OUT/model.tsv"
t $? "model: pin_fast after has none"
# a thread's mmap loop in its own range, once the thread's first mmap is behind it
grep -q "^mmap1	range	0	" "$OUT/model.tsv"
t $? "model: mmap1 in the range design has none"
# slow GUP's per-page PTE-table lock, a critical section both tasks take (its label taken
# while the machine lives: reading it after the teardown crashed)
grep -q "^model gup_fast_nochurn  *before .*critical section [1-9][0-9]*% (struct pm_page\[pfn [0-9]*\]\.ptl" \
	"$OUT/model.out"
t $? "model: slow GUP's pages share their PTE table's lock"
# visits that read a line and then CAS it, priced apart: a shared pin's refcount is one,
# the has-pinned flag's plain store is not
awk -F'\t' '$1 == "pin_hot_same" && $2 == "before" && $9 > 0 { f = 1 } END { exit !f }' \
	"$OUT/model.tsv"
t $? "model: pin_hot before reads its count, then CASes it"
awk -F'\t' '$1 == "pin_fast" && $2 == "before" && $9 == 0 { f = 1 } END { exit !f }' \
	"$OUT/model.tsv"
t $? "model: pin_fast before's flag store is no read-then-RMW visit"
# a lock taken again after its release is a new visit: the slow walk's 64-page call visits
# its PTE table's lock once per page, mmap_lock twice in all
awk -F'\t' '$1 == "gup_fast_nochurn" && $2 == "before" && $4 >= 64 && $4 < 70 { f = 1 }
	END { exit !f }' "$OUT/model.tsv"
t $? "model: a 64-page slow pin visits its table's lock once per page"
# frames written whole: an anonymous fault clears its page; page_fault3's fault finds its
# page in the page cache and clears none
awk -F'\t' '$1 == "page_fault1" && $2 == "after" && $10 == 1 { f = 1 } END { exit !f }' \
	"$OUT/model.tsv"
t $? "model: page_fault1's fault clears one frame"
awk -F'\t' '$1 == "page_fault3" && $2 == "after" && $10 == 0 { f = 1 } END { exit !f }' \
	"$OUT/model.tsv"
t $? "model: page_fault3's fault of a cached page clears none"
echo "1..$n"
exit $fail
