#!/usr/bin/env bash
# Runs the tests of every package, as `go test -count=1 ./...` does, but
# prints a line for each package as soon as it finishes (go test prints in
# package order, so one slow package hides the rest for minutes), and the
# whole output of a package that fails. The slowest packages start first,
# so that the two cores are busy to the end. Arguments go to go test
# (e.g. scripts/test.sh -race ./pipeline/).
#
# Exit status: 0 when every package passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}

args=() pkgs=()
for a in "$@"; do
	case $a in
	./* | github.com/*) pkgs+=("$a") ;;
	*) args+=("$a") ;;
	esac
done
((${#pkgs[@]})) || pkgs=(./...)
mapfile -t list < <($GO list "${pkgs[@]}") || exit 1

# The slow ones first (seconds on a 2-core machine, most first); the rest
# in the order go list gives.
slow=(e2e internal/cli packaging tune filters report/clickhouse internal/soak bpf deploy report/export report/ipfix)
ordered=()
for s in "${slow[@]}"; do
	for p in "${list[@]}"; do [[ $p == */flowdedup/$s ]] && ordered+=("$p"); done
done
for p in "${list[@]}"; do
	case " ${ordered[*]} " in *" $p "*) ;; *) ordered+=("$p") ;; esac
done

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export OUT GO
start=$SECONDS
echo "testing ${#ordered[@]} packages, $jobs at a time"
printf '%s\n' "${ordered[@]}" | xargs -P "$jobs" -I{} bash -c '
	pkg=$1; shift
	log=$OUT/${pkg//\//_}
	if $GO test -count=1 "$@" "$pkg" >"$log" 2>&1; then
		tail -n 1 "$log"
	else
		cat "$log"
		echo "$pkg" >"$log.failed"
	fi' _ {} "${args[@]}"
failed=("$OUT"/*.failed)
if [[ -e ${failed[0]} ]]; then
	echo "FAIL: ${#failed[@]} of ${#ordered[@]} packages failed ($((SECONDS - start)) s):"
	for f in "${failed[@]}"; do echo "  $(cat "$f")"; done
	exit 1
fi
echo "ok: ${#ordered[@]} packages passed in $((SECONDS - start)) s"
