#!/usr/bin/env bash
# Runs the tests of every package, as `go test -count=1 ./...` does, and
# prints a line for each package as soon as it finishes:
#
#  1. FLOWDEDUP_TEST_BIN_BUILD, when set, names the flowdedup command to
#     build first (make test's bin/test/flowdedup, which the tests of e2e,
#     internal/cli, deploy and soak run as a process): one go build, which
#     compiles most of the tree for the tests too;
#  2. one go test over every package, TEST_JOBS (twice the number of
#     cores) programs at a time, compiles and links the test binaries and
#     runs each as soon as it is linked, while the others still compile
#     (go test -p): the runs wait on the processes and servers they start
#     (flowdedup, tshark, ClickHouse, nfcapd, network namespaces) and the
#     compiles fill the cores meanwhile. Run one after the other, the two
#     phases left the cores idle at the compile's tail and whenever the
#     tests waited. The slowest packages come first in go test's list, so
#     that they start first and none starts last. Each test binary runs
#     under scripts/test-exec.sh (go test -exec), which prints its line
#     the moment it ends, and the whole output of one that fails; go test
#     itself prints a package's result only after those of every package
#     before it in the list, silent behind the slowest.
#
# The tests compile without go test's vet pass (-vet=off): make lint runs
# go vet over every package (CI runs it before the tests), and go test's
# pass computed vet's facts for every dependency, the standard library's
# too, more than half of the compile's work from an empty build cache.
# They link without DWARF (-ldflags=-w): nothing reads a test binary's
# debug information, and writing it was about a third of a link
# (internal/cli's: 4.8 CPU-s, 3.2 without), 40 links in all.
# TEST_BUILD_FLAGS replaces these two (TEST_BUILD_FLAGS= keeps go test's
# vet and DWARF).
#
# Each test binary gets an explicit timeout (TEST_TIMEOUT, 30m): a limit
# for a test that hangs, far above any package's time on a loaded 2-core
# machine, never a limit a slow machine reaches.
#
# Arguments are go test's: build flags and test flags (-race, -tags=...,
# -run X, -v, -short, -count=N; e.g. scripts/test.sh -race -run TestX
# ./pipeline/). Packages default to ./... .
#
# Exit status: 0 when every package passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Twice the cores: most packages' tests wait more than they compute (on
# the processes and servers they start; measured on 2 cores, the five
# slowest packages run one after the other kept a core busy about half
# the time), so one program a core left the cores idle half the time.
jobs=${TEST_JOBS:-$((2 * $(nproc 2>/dev/null || echo 1)))}
timeout=${TEST_TIMEOUT:-30m}

# Word-split on purpose: flags without spaces in their values.
# shellcheck disable=SC2206
build=(${TEST_BUILD_FLAGS--vet=off -ldflags=-w}) args=() pkgs=() listflags=()
for a in "$@"; do
	case $a in
	./* | github.com/*) pkgs+=("$a") ;;
	-race | -tags=* | -cover | -covermode=* | -ldflags=*) build+=("$a") ;;
	*) args+=("$a") ;;
	esac
done
for b in "${build[@]}"; do [[ $b == -vet=* ]] || listflags+=("$b"); done
((${#pkgs[@]})) || pkgs=(./...)
# The import paths of the packages with tests, as the build's tags see them.
mapfile -t list < <($GO list "${listflags[@]}" -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${pkgs[@]}" | grep .) || exit 1

# The slow ones first (the longest first, as measured on a 2-core machine:
# over 10 s each, from internal/cli's and e2e's minute or more to
# collect/sflow's 10 s), so that the cores are busy to the end and no
# long package starts last; the rest in the order go list gives.
slow=(internal/cli e2e bpf tune export/clickhouse filters pipeline export capture/pcapfilter capture/afxdp capture/pcapfile
	export/ipfix flow deploy internal/soak collect collect/sflow capture/xdp report packaging)
ordered=()
for s in "${slow[@]}"; do
	for p in "${list[@]}"; do [[ $p == */flowdedup/$s ]] && ordered+=("$p"); done
done
for p in "${list[@]}"; do
	case " ${ordered[*]} " in *" $p "*) ;; *) ordered+=("$p") ;; esac
done

TEST_OUT=$(mktemp -d)
trap 'rm -rf "$TEST_OUT"' EXIT
TEST_ROOT=$PWD TEST_MODULE=$($GO list -m)
export TEST_OUT TEST_ROOT TEST_MODULE
start=$SECONDS
if [[ -n ${FLOWDEDUP_TEST_BIN_BUILD:-} ]]; then
	echo "building $FLOWDEDUP_TEST_BIN_BUILD for the tests (from an empty build cache, about two minutes on 2 cores)"
	mkdir -p "$(dirname "$FLOWDEDUP_TEST_BIN_BUILD")"
	# The same go build compiles every other package the test binaries
	# import (the standard library's testing packages, internal/testutil,
	# the modules only tests use) when the tests take go build's own
	# flags: alone, the command's compile is a chain of large packages
	# that kept one core of two idle a third of the time (measured from an
	# empty build cache: 146 CPU-s in 105 s), and these fill it; go test
	# then finds them built. Not the packages under test themselves: go
	# test compiles those again with their tests.
	more=()
	if [[ " ${build[*]} " != *" -race "* && " ${build[*]} " != *" -tags="* && " ${build[*]} " != *" -cover"* ]]; then
		mapfile -t more < <($GO list -deps -test -f '{{if and (not .ForTest) (ne .Name "main")}}{{.ImportPath}}{{end}}' "${ordered[@]}")
	fi
	if ((${#more[@]})) && [[ $(basename "$FLOWDEDUP_TEST_BIN_BUILD") == flowdedup ]]; then
		bincmd=($GO build -o "$(dirname "$FLOWDEDUP_TEST_BIN_BUILD")/" ./cmd/flowdedup "${more[@]}")
	else
		bincmd=($GO build -o "$FLOWDEDUP_TEST_BIN_BUILD" ./cmd/flowdedup)
	fi
	if ! scripts/progress.sh "building $FLOWDEDUP_TEST_BIN_BUILD" "${bincmd[@]}"; then
		echo "FAIL: flowdedup does not build ($((SECONDS - start)) s)"
		exit 1
	fi
	echo "built $FLOWDEDUP_TEST_BIN_BUILD in $((SECONDS - start)) s"
fi
echo "compiling and running the tests of ${#ordered[@]} packages, $jobs programs at a time (each runs as soon as it is linked)"

# scripts/test-exec.sh appends each package's line (and a failing one's
# output) to progress; tail prints them as they come and ends with go test.
: >"$TEST_OUT/progress"
$GO test -p "$jobs" -count=1 -timeout "$timeout" -exec "$TEST_ROOT/scripts/test-exec.sh" \
	"${build[@]}" "${args[@]}" "${ordered[@]}" >"$TEST_OUT/go-test.log" 2>&1 &
gotest=$!
tail -n +1 -f --pid="$gotest" "$TEST_OUT/progress" &
tailer=$!
# Until the first packages end (a minute or more from an empty build
# cache) and between them, a line every PROGRESS_EVERY seconds (30).
(
	every=${PROGRESS_EVERY:-30} n=0
	while kill -0 "$gotest" 2>/dev/null; do
		sleep 1
		n=$((n + 1))
		if ((n % every == 0)) && kill -0 "$gotest" 2>/dev/null; then
			ended=("$TEST_OUT"/*.ok "$TEST_OUT"/*.failed) k=0
			for f in "${ended[@]}"; do [[ -e $f ]] && k=$((k + 1)); done
			echo "  still at work after $((SECONDS - start)) s: $k of ${#ordered[@]} packages ended"
		fi
	done
) &
ticker=$!
wait "$gotest"
status=$?
wait "$tailer" "$ticker"

ran=("$TEST_OUT"/*.ok "$TEST_OUT"/*.failed)
failed=("$TEST_OUT"/*.failed)
nfail=0 nran=0
for f in "${ran[@]}"; do [[ -e $f ]] && nran=$((nran + 1)); done
[[ -e ${failed[0]} ]] && nfail=${#failed[@]}
# A package whose tests did not compile, or that go test did not run,
# has no line of test-exec.sh's: go test's own output says why.
if ((status != 0 && nfail == 0)) || ((nran != ${#ordered[@]})); then
	grep -v '^ok ' "$TEST_OUT/go-test.log"
	echo "FAIL: go test exited $status; $nran of ${#ordered[@]} packages' tests ran ($((SECONDS - start)) s)"
	exit 1
fi
echo "packages: $((${#ordered[@]} - nfail)) passed, $nfail failed"
if ((nfail)); then
	echo "FAIL: $nfail of ${#ordered[@]} packages failed ($((SECONDS - start)) s):"
	for f in "${failed[@]}"; do echo "  $(cat "$f")"; done
	exit 1
fi
echo "ok: ${#ordered[@]} packages passed in $((SECONDS - start)) s"
