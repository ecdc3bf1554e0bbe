#!/bin/sh
# Checks that the Debian packages pinmm builds with are present. As root with apt-get, installs
# what is missing; otherwise prints the exact command to run and fails.
#   liburcu-dev   RCU for the lockless page-table walk and page-cache lookups (the library)
#   libhwloc-dev  CPU placement in pinmm-bench, as will-it-scale does
#   liburing-dev  io_uring fixed-buffer registration: the host_mr_reg benchmark case
#   gnuplot-nox   the plots of `make bench`
#   pkg-config    locating the above
# With the argument "trace", also what the trace build needs (mk/trace.mk, make trace):
#   clang         its compiler: -fsanitize=thread's instrumentation without libtsan
#   binutils      addr2line, which the tracer runs to name source lines
set -u
missing=""
have_header() { [ -f "/usr/include/$1" ] || [ -f "/usr/include/$(gcc -print-multiarch 2>/dev/null)/$1" ]; }
have_header urcu/urcu-memb.h || missing="$missing liburcu-dev"
have_header hwloc.h || missing="$missing libhwloc-dev"
have_header liburing.h || missing="$missing liburing-dev"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if [ "${1:-}" = trace ]; then
	command -v clang >/dev/null 2>&1 || missing="$missing clang"
	command -v addr2line >/dev/null 2>&1 || missing="$missing binutils"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	# One install at a time: parallel makes may each find something missing, and apt-get
	# refuses to run beside another (its lock). flock is util-linux's, on every Debian.
	lock=""
	command -v flock >/dev/null 2>&1 && lock="flock /run/lock/pinmm-deps.lock"
	$lock sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null" && exit 0
	echo "deps: apt-get failed" >&2
	exit 1
fi
echo "deps: missing Debian packages. Run:" >&2
echo "  sudo apt-get install -y$missing" >&2
exit 1
