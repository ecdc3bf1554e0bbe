# tap.sh - the TAP helpers the shell tests in tests/scripts/ share (sourced, not run):
#   ok STATUS DESCRIPTION   one test: "ok N - ..." when STATUS is 0, else "not ok N - ..."
#   tap_done                the plan line, and the exit status: 0 only if every test passed
# It also makes $tmp, a scratch directory removed on exit.
n=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
	fi
}

tap_done() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
}
