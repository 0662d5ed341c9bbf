#!/usr/bin/env bash
# Runs the tests of every package, as `go test -count=1 ./...` does, in two
# steps that print as they go:
#
#  1. one `go test -c` compiles and links every package's test binary, so
#     that each package is compiled once, with the go command's own
#     parallelism (a go test per package, several at once from an empty
#     build cache, compiled the same packages side by side and linked
#     each test binary twice). Without go test's vet pass (-vet=off):
#     make lint runs go vet over every package (CI runs it before the
#     tests), and go test's pass computed vet's facts for every
#     dependency, the standard library's too, more than half of the
#     compile's work from an empty build cache. Linked without DWARF
#     (-ldflags=-w): nothing reads a test binary's debug information, and
#     writing it was about a third of a link (internal/cli's: 4.8 CPU-s,
#     3.2 without), 40 links in all. TEST_BUILD_FLAGS replaces these
#     two (TEST_BUILD_FLAGS= keeps go test's vet and DWARF);
#     FLOWDEDUP_TEST_BIN_BUILD, when set, names the flowdedup command to
#     build right after (make test's bin/test/flowdedup, for the tests that
#     run it as a process): every package it needs is compiled by then,
#     so that build is one link, and the two builds are one go command's
#     work instead of two one after the other, the cores idle at each
#     one's tail;
#  2. the test binaries run, TEST_JOBS (twice the number of cores) at a
#     time, the
#     slowest first so that the cores are busy to the end, each in its
#     package's directory as go test runs it; a line for each package as
#     soon as it finishes, and the whole output of one that fails.
#
# Each test binary gets an explicit -test.timeout (TEST_TIMEOUT, 30m): a
# limit for a test that hangs, far above any package's time on a loaded
# 2-core machine, never a limit a slow machine reaches.
#
# Arguments are go test's: build flags (-race, -tags=...) go to the
# compile, the others to the test binaries (-run X, -v, -short, -count=N;
# e.g. scripts/test.sh -race -run TestX ./pipeline/). Packages default to
# ./... .
#
# Exit status: 0 when every package passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Twice the cores: most packages' tests wait more than they compute (on
# the processes and servers they start: flowdedup, tshark, ClickHouse,
# nfcapd, qemu-user; measured on 2 cores, the five slowest packages run
# one after the other kept a core busy about half the time), so one test
# binary a core left the cores idle half the time.
jobs=${TEST_JOBS:-$((2 * $(nproc 2>/dev/null || echo 1)))}
timeout=${TEST_TIMEOUT:-30m}

# Word-split on purpose: flags without spaces in their values.
# shellcheck disable=SC2206
build=(${TEST_BUILD_FLAGS--vet=off -ldflags=-w}) run=() pkgs=()
for a in "$@"; do
	case $a in
	./* | github.com/*) pkgs+=("$a") ;;
	-race | -tags=* | -cover | -covermode=* | -vet=* | -ldflags=*) build+=("$a") ;;
	-test.*) run+=("$a") ;;
	-*) run+=("-test.${a#-}") ;;
	*) run+=("$a") ;; # a flag's value (-run X)
	esac
done
((${#pkgs[@]})) || pkgs=(./...)
# Each package with tests: its import path and directory.
# go list takes the build flags but -vet.
listflags=()
for b in "${build[@]}"; do [[ $b == -vet=* ]] || listflags+=("$b"); done
mapfile -t list < <($GO list "${listflags[@]}" -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${pkgs[@]}" | grep .) || exit 1

# The slow ones first (the longest first, as measured on a 2-core machine:
# over 10 s each, from internal/cli's and e2e's minute or more to
# collect/sflow's 10 s), so that the cores are busy to the end and no
# long package starts last; the rest in the order go list gives.
slow=(e2e internal/cli packaging tune filters bpf export/clickhouse capture/pcapfilter export pipeline capture/pcapfile
	flow report deploy export/ipfix internal/soak capture/afxdp capture/xdp collect collect/sflow)
ordered=()
for s in "${slow[@]}"; do
	for p in "${list[@]}"; do [[ ${p%% *} == */flowdedup/$s ]] && ordered+=("$p"); done
done
for p in "${list[@]}"; do
	case " ${ordered[*]} " in *" $p "*) ;; *) ordered+=("$p") ;; esac
done

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
start=$SECONDS
echo "compiling the tests of ${#ordered[@]} packages (from an empty build cache, a few minutes on 2 cores)"
paths=()
for p in "${ordered[@]}"; do paths+=("${p%% *}"); done
if ! scripts/progress.sh "compiling the tests" $GO test -c -o "$OUT/bin/" "${build[@]}" "${paths[@]}"; then
	echo "FAIL: the tests do not compile ($((SECONDS - start)) s)"
	exit 1
fi
if [[ -n ${FLOWDEDUP_TEST_BIN_BUILD:-} ]]; then
	mkdir -p "$(dirname "$FLOWDEDUP_TEST_BIN_BUILD")"
	if ! scripts/progress.sh "building $FLOWDEDUP_TEST_BIN_BUILD" $GO build -o "$FLOWDEDUP_TEST_BIN_BUILD" ./cmd/flowdedup; then
		echo "FAIL: flowdedup does not build ($((SECONDS - start)) s)"
		exit 1
	fi
fi
built=""
[[ -n ${FLOWDEDUP_TEST_BIN_BUILD:-} ]] && built=" and $FLOWDEDUP_TEST_BIN_BUILD"
echo "compiled the tests$built in $((SECONDS - start)) s; testing ${#ordered[@]} packages, $jobs at a time"

export OUT timeout
printf '%s\n' "${ordered[@]}" | xargs -P "$jobs" -I{} bash -c '
	pkg=${1%% *} dir=${1#* }; shift
	bin=$OUT/bin/${pkg##*/}.test
	log=$OUT/${pkg//\//_}
	t0=${EPOCHREALTIME/./}
	if (cd "$dir" && "$bin" -test.paniconexit0 -test.timeout="$timeout" "$@") >"$log" 2>&1; then
		status=ok
	else
		cat "$log"
		status=FAIL
		echo "$pkg" >"$log.failed"
	fi
	ds=$(((${EPOCHREALTIME/./} - t0) / 100000))
	printf "%s\t%s\t%d.%ds\n" "$status" "$pkg" $((ds / 10)) $((ds % 10))' _ {} "${run[@]}"
failed=("$OUT"/*.failed)
nfail=0
[[ -e ${failed[0]} ]] && nfail=${#failed[@]}
echo "packages: $((${#ordered[@]} - nfail)) passed, $nfail failed"
if ((nfail)); then
	echo "FAIL: $nfail of ${#ordered[@]} packages failed ($((SECONDS - start)) s):"
	for f in "${failed[@]}"; do echo "  $(cat "$f")"; done
	exit 1
fi
echo "ok: ${#ordered[@]} packages passed in $((SECONDS - start)) s"
