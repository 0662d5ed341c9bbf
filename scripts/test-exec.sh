#!/usr/bin/env bash
# go test -exec for scripts/test.sh: runs one package's test binary
# (go test gives its path and flags, in the package's directory), its
# output to a log, and appends to TEST_OUT/progress, the moment it ends,
# a line with its result and time, and the whole log of one that fails.
# The exit status is the binary's, so that go test knows it too.
set -uo pipefail
bin=$1
shift
pkg=$TEST_MODULE/${PWD#"$TEST_ROOT"/}
name=${pkg//\//_}
log=$TEST_OUT/$name.log
t0=${EPOCHREALTIME/./}
"$bin" "$@" >"$log" 2>&1
status=$?
ds=$(((${EPOCHREALTIME/./} - t0) / 100000))
line=$(printf "%s\t%s\t%d.%ds" "$([[ $status == 0 ]] && echo ok || echo FAIL)" "$pkg" $((ds / 10)) $((ds % 10)))
(
	flock 9
	((status == 0)) || cat "$log" >>"$TEST_OUT/progress"
	echo "$line" >>"$TEST_OUT/progress"
) 9>"$TEST_OUT/progress.lock"
if ((status == 0)); then echo "$pkg" >"$TEST_OUT/$name.ok"; else echo "$pkg" >"$TEST_OUT/$name.failed"; fi
exit "$status"
