# flowdedup: see README.md. Every target works on a fresh clone with Go 1.26.
GO ?= go
PKGS := ./...
BIN := bin/flowdedup

# The version make stamps into flowdedup (--version) and names the packages
# with: packaging/version.sh derives it from `git describe` (see
# docs/install.md); outside a git checkout give it: make VERSION=1.2.0.
ifneq ($(origin VERSION),command line)
VERSION := $(shell packaging/version.sh 2>/dev/null)
endif
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/flowdedup/flowdedup/internal/cli.stampedVersion=$(VERSION) -X github.com/flowdedup/flowdedup/internal/cli.stampedCommit=$(COMMIT)

# Packages (docs/install.md). make package: a Debian package per
# architecture, dist/flowdedup_VERSION_ARCH.deb; make dist: an archive per
# router platform, dist/flowdedup_VERSION_linux_ARCH.tar.gz, and
# SHA256SUMS. Both are reproducible: the binaries are built with -trimpath
# and -buildvcs=false (the version and commit are stamped instead), and
# every file's time is SOURCE_DATE_EPOCH, the commit's time unless given.
# Each architecture's binary is built once per make run and shared by its
# package and its archive (armhf = armv7, i386 = 386). The builds for
# 32-bit x86 and MIPS use soft float: many MIPS routers have no FPU, and
# Debian's i386 baseline and the Geode boards have no SSE2.
DIST ?= dist
PKGBUILD ?= bin/pkg
MAINTAINER ?= flowdedup maintainers <maintainers@flowdedup.invalid>
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
DIST_ARCHES := amd64 arm64 armv7 386 mips mipsle mips64 riscv64
DEB_ARCHES := amd64 arm64 armhf i386
goenv.amd64 := GOARCH=amd64
goenv.arm64 := GOARCH=arm64
goenv.armv7 := GOARCH=arm GOARM=7
goenv.386 := GOARCH=386 GO386=softfloat
goenv.mips := GOARCH=mips GOMIPS=softfloat
goenv.mipsle := GOARCH=mipsle GOMIPS=softfloat
goenv.mips64 := GOARCH=mips64 GOMIPS64=softfloat
goenv.riscv64 := GOARCH=riscv64
binarch.amd64 := amd64
binarch.arm64 := arm64
binarch.armhf := armv7
binarch.i386 := 386
DEBS := $(foreach a,$(DEB_ARCHES),$(DIST)/flowdedup_$(VERSION)_$(a).deb)
ARCHIVES := $(foreach a,$(DIST_ARCHES),$(DIST)/flowdedup_$(VERSION)_linux_$(a).tar.gz)

.PHONY: test-simd test-bins test-release stress package dist cross test-32bit soak bench-replay all build test test-race bench bench-tune fuzz lint generate check-generate demo eval-demo clean

all: lint build test

build:
	scripts/progress.sh 'building $(BIN)' $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/flowdedup

# The test command README gives and CI runs: every package's tests, a line
# for each package as it finishes (scripts/test.sh: one go test compiles
# the test binaries and runs each as soon as it is linked, while the
# others compile; go test ./... alone would print in package order,
# silent behind the slowest). flowdedup itself, which the tests of e2e,
# internal/cli, deploy and soak run as a process, is built once for all of
# them to share, by scripts/test.sh before the tests
# (FLOWDEDUP_TEST_BIN_BUILD).
#
# The release artifacts are tested apart, by make test-release (CI runs
# both): the release binaries of TEST_ARCHES (amd64, and the routers'
# ARMv7 and big-endian MIPS, run under qemu-user and compared with this
# machine's answers), the Debian packages and archives made of them, and
# lintian, dpkg -i and reproducibility on those. They compile the whole
# tree once per architecture and the packaging tools (nfpm): most of the
# time of a first make test from an empty build cache, for tests of the
# packaging rather than of flowdedup's answers. Those tests are behind
# the build tag "release" (packaging/*_test.go), so that go test ./...
# and make test leave them out by build, not by a skip.
# TEST_ARCHES=all (CI) makes and checks all of DIST_ARCHES.
TEST_ARCHES ?= amd64 armv7 mips
ifeq ($(TEST_ARCHES),all)
override TEST_ARCHES := $(DIST_ARCHES)
endif
TEST_BIN := bin/test/flowdedup
TEST_ENV = FLOWDEDUP_TEST_BIN=$(abspath $(TEST_BIN)) FLOWDEDUP_TEST_PKGBUILD=$(abspath $(PKGBUILD)) \
	FLOWDEDUP_TEST_ARCHES='$(TEST_ARCHES)' GO=$(GO)
test:
	@echo "make test: building $(TEST_BIN), then compiling and running the tests (from an empty build cache, about five minutes on 2 cores)"
	$(TEST_ENV) FLOWDEDUP_TEST_BIN_BUILD=$(TEST_BIN) scripts/test.sh $(PKGS)

test-bins:
	@echo "make test-release: building flowdedup for the packaging tests (from an empty build cache, about a minute on 2 cores)"
	scripts/progress.sh 'building $(TEST_BIN)' $(GO) build -o $(TEST_BIN) ./cmd/flowdedup

test-release: test-bins
	@echo "make test-release: building the release binaries for $(TEST_ARCHES) and the packaging tools (from an empty build cache, several minutes on 2 cores)"
	@$(MAKE) --no-print-directory -j$(shell nproc 2>/dev/null || echo 2) $(foreach a,$(TEST_ARCHES),$(PKGBUILD)/linux_$(a)/flowdedup) $(PKGBUILD)/mkpkg $(PKGBUILD)/nfpm
	$(TEST_ENV) scripts/test.sh -tags=release ./packaging/

# Routers run 32-bit ARM, MIPS (big-endian too) and arm64; users replay
# captures on macOS and FreeBSD. flowdedup must build for all of them, and
# vet clean, tests included, for a 32-bit and a big-endian Linux (CI runs
# this; make test-release's TestRouterPlatformsGiveTheSameAnswers runs the mips and arm
# builds under qemu-user and compares their output with this machine's).
# The Linux builds are the release binaries of make dist (below), so that
# CI compiles each platform once for cross and the package tests.
CROSS := darwin/arm64 darwin/amd64 freebsd/amd64
cross: $(foreach a,$(DIST_ARCHES),$(PKGBUILD)/linux_$(a)/flowdedup)
	@for t in $(CROSS); do echo "go build $$t"; GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -o /dev/null ./cmd/flowdedup || exit 1; done
	GOARCH=386 $(GO) vet $(PKGS)
	GOARCH=mips $(GO) vet $(PKGS)

# The packages whose arithmetic depends on the width of int, and the CLI
# over them, run as 32-bit binaries (int is 32 bits, as on ARM and MIPS
# routers): they found overflows that made fpbits=32 and 32-bit BDBF
# counters fail on 32-bit platforms. collect too: its recvmmsg(2) headers
# are laid out by the width of a pointer. They run as ARMv7 binaries, the
# routers' own CPU, under qemu-arm (go test -exec) on every machine, in
# -short mode (qemu-user is 10-30 times slower: the heaviest tests check a
# smaller matrix there, and the whole one in make test), and
# also as 386 binaries where this machine's kernel executes them: amd64
# kernels built without IA-32 emulation, as on some VMs, answer "exec
# format error", and qemu-i386 cannot run Go's 386 runtime ("morestack on
# gsignal"), so there the 386 run is left out, saying why.
TEST32_PKGS := ./collect/... ./flow/ ./filters/ ./sketch/ ./netwide/ ./pipeline/ ./report/ ./export/ ./report/outfile/ ./mix/ ./units/ ./capture/pcapfile/ ./tune/ ./internal/cli/
test-32bit:
	GOARCH=arm GOARM=7 $(GO) test -count=1 -short -timeout 30m -exec qemu-arm $(TEST32_PKGS)
	@probe=$$(mktemp -d) && printf 'package main\n\nfunc main() {}\n' >$$probe/main.go && \
	GOARCH=386 $(GO) build -o $$probe/probe $$probe/main.go && \
	if err=$$($$probe/probe 2>&1); then rm -rf $$probe; \
		echo "GOARCH=386 $(GO) test -count=1 -timeout 30m $(TEST32_PKGS)"; \
		GOARCH=386 $(GO) test -count=1 -timeout 30m $(TEST32_PKGS); \
	else rm -rf $$probe; echo "test-32bit: no 386 run: this kernel does not execute 386 binaries ($$err); the ARMv7 run above is the 32-bit one"; fi

# Every package's tests STRESS_COUNT (20) times over, one package at a
# time, to find the tests that fail only now and then; it goes on past a
# failing package and names them all at the end. Not in CI: it takes hours
# on a small machine. make stress STRESS_PKGS=./export/ STRESS_COUNT=50
# runs one package; STRESS_FLAGS=-race adds the race detector.
STRESS_COUNT ?= 20
STRESS_PKGS ?= $(PKGS)
STRESS_FLAGS ?=
stress:
	@failed=""; for p in $$($(GO) list $(STRESS_PKGS)); do \
		echo "== $$p"; \
		$(GO) test $(STRESS_FLAGS) -timeout 4h -count=$(STRESS_COUNT) $$p || failed="$$failed $$p"; \
	done; \
	if [ -n "$$failed" ]; then echo "make stress: failed:$$failed"; exit 1; fi

# The vector kernels of internal/simd in the build that has them
# (GOEXPERIMENT=simd; amd64 with AVX-512 takes the vector paths, other
# machines their scalar twins) and the packages that call them: the tests
# compare each kernel with its scalar twin bit for bit, and flow's
# HashKeys with HashKey. make test runs the same tests in the default
# build, the release build's, which has no vector path
# (docs/decisions/no-simd.md). CI runs both.
test-simd:
	GOEXPERIMENT=simd $(GO) test -count=1 ./internal/simd/ ./flow/ ./filters/

# The concurrent packages under the race detector (CI runs this too).
test-race:
	$(GO) test -count=1 -race ./pipeline/ ./report/... ./export/... ./capture/... ./collect/...

# Benchmarks: every filter's Observe at 64 KiB, 1 MiB and 64 MiB of state,
# one hash at a time and batched (ObserveBatch: one and batch run back to
# back, and tabulated side by side at the end, in ns per key), the memory
# floor under the 64 MiB figures (RandomLines), packet parsing and key
# hashing, the pipeline, and the BoomFilters comparison.
bench: SHELL := /bin/bash
bench:
	@mkdir -p bin
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -count 1 ./filters/ | tee bin/bench-filters.txt
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./flow/ ./pipeline/ ./capture/... ./bpf/
	@awk -f filters/benchtable.awk bin/bench-filters.txt

# tune's budget (issue 11): `flowdedup tune` on a generated 1M-packet capture
# (5-tuple keys, 1-minute windows, 64 KiB per shard) must finish within 60 s
# with nothing cut; it reports the seconds of each phase.
bench-tune:
	$(GO) test -run '^$$' -bench Tune1M -benchtime 1x ./tune/

# A short fuzzing pass over every parser (longer: FUZZTIME=10m make fuzz).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./flow/
	$(GO) test -run '^$$' -fuzz '^FuzzHash$$' -fuzztime $(FUZZTIME) ./flow/
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./capture/pcapfile/
	$(GO) test -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME) ./capture/pcapfilter/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePattern$$' -fuzztime $(FUZZTIME) ./report/outfile/
	$(GO) test -run '^$$' -fuzz '^FuzzSpoolFile$$' -fuzztime $(FUZZTIME) ./export/
	$(GO) test -run '^$$' -fuzz '^FuzzSummaryReader$$' -fuzztime $(FUZZTIME) ./report/
	$(GO) test -run '^$$' -fuzz '^FuzzParseServerError$$' -fuzztime $(FUZZTIME) ./export/clickhouse/
	$(GO) test -run '^$$' -fuzz '^FuzzParseURL$$' -fuzztime $(FUZZTIME) ./export/clickhouse/
	$(GO) test -run '^$$' -fuzz '^FuzzSplitRows$$' -fuzztime $(FUZZTIME) ./export/clickhouse/
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalBinary$$' -fuzztime $(FUZZTIME) ./sketch/
	$(GO) test -run '^$$' -fuzz '^FuzzParseObjective$$' -fuzztime $(FUZZTIME) ./tune/
	$(GO) test -run '^$$' -fuzz '^FuzzMessages$$' -fuzztime $(FUZZTIME) ./collect/netflow/
	$(GO) test -run '^$$' -fuzz '^FuzzDatagrams$$' -fuzztime $(FUZZTIME) ./collect/sflow/
	$(GO) test -run '^$$' -fuzz '^FuzzDatagramToKey$$' -fuzztime $(FUZZTIME) ./collect/

# staticcheck is pinned as a tool in go.mod (go get -tool ...@version), so
# it comes through the module proxy at the version the tree was checked with.
lint:
	$(GO) vet $(PKGS)
	$(GO) vet -tags release ./packaging/
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool staticcheck -tags release ./packaging/

# Rebuilds the BPF objects and their Go bindings (bpf2go, pinned as a tool in
# go.mod) from bpf/*.c; needs clang, llvm and libbpf-dev. The output is
# committed, and CI fails when it is stale (check-generate).
generate:
	$(GO) generate ./bpf/

check-generate: generate
	@git diff --exit-code --stat -- bpf/ || { echo "bpf/: generated files are stale: run 'make generate' and commit them"; exit 1; }
	@out=$$(git status --porcelain -- bpf/); if [ -n "$$out" ]; then echo "bpf/: generate made untracked files:"; echo "$$out"; exit 1; fi

# The main job on input shipped in the repo (see README): distinct sources
# of a 5-minute capture, with a summary per 1-minute window on stderr.
# Both build $(BIN) first, saying so: from an empty build cache that
# compiles every dependency, minutes in which go run printed nothing.
demo:
	@echo "building $(BIN) (the first build compiles every dependency and takes a few minutes; later ones seconds)..."
	@$(MAKE) --no-print-directory build
	@echo "running: $(BIN) replay --key src --window 1m --format text --summary - testdata/pcaps/zipf.pcap.gz"
	@$(BIN) replay --key src --window 1m --format text --summary - testdata/pcaps/zipf.pcap.gz

# Filters compared on a synthetic stream.
eval-demo:
	@echo "building $(BIN) (the first build compiles every dependency and takes a few minutes; later ones seconds)..."
	@$(MAKE) --no-print-directory build
	@echo "running: $(BIN) eval (4 filters of 64 KiB on 10^6 keys, a few seconds)"
	@$(BIN) eval --seed 1 \
		--filter qht:mem=64KiB --filter sbf:mem=64KiB,fps=0.1 --filter bloom:mem=64KiB --filter lru:mem=64KiB \
		--stream uniform:n=1000000,universe=1048576

clean:
	rm -rf bin $(DIST)

# The long soaks (internal/soak): 30 days of hourly windows streamed into
# replay, then 10 minutes of live capture on a veth pair (root). make test
# runs the short replay soak only.
soak:
	FLOWDEDUP_SOAK=long FLOWDEDUP_REQUIRE_PRIVILEGED=1 $(GO) test -count=1 -timeout 30m -v ./internal/soak/

# replay with 1 and 2 workers (and 2 with --parsers 0) against cat and
# tcpdump's copy of the same file, interleaved: wall and CPU time, and their
# ratios within each round (docs/benchmarks.md, "Replay").
bench-replay: build
	$(BIN) gen --packets 2000000 --flows 200000 --zipf 1.0 --ipv6 0.2 --seed 9 -o /tmp/flowdedup-2m.pcap
	flock /tmp/flowdedup-bench.lock scripts/replay-vs-tcpdump.sh -b $(BIN) -k src /tmp/flowdedup-2m.pcap

.PHONY: package dist release-check FORCE
.PRECIOUS: $(PKGBUILD)/linux_%/flowdedup
package: release-check $(DEBS)
dist: release-check $(ARCHIVES)
	cd $(DIST) && sha256sum $(notdir $(ARCHIVES)) > SHA256SUMS

release-check:
	@[ -n "$(VERSION)" ] || { echo "no version: not a git checkout? run make $(MAKECMDGOALS) VERSION=..."; exit 1; }
	@[ -n "$(SOURCE_DATE_EPOCH)" ] || { echo "no time for the files: run make $(MAKECMDGOALS) SOURCE_DATE_EPOCH=..."; exit 1; }
	@mkdir -p $(DIST)

# The packaging tools, -trimpath so that a build in another directory finds
# them in the build cache; nfpm is the version go.mod pins as a tool.
$(PKGBUILD)/mkpkg: FORCE
	$(GO) build -trimpath -o $@ ./packaging/mkpkg
$(PKGBUILD)/nfpm: FORCE
	$(GO) build -trimpath -o $@ github.com/goreleaser/nfpm/v2/cmd/nfpm

$(PKGBUILD)/linux_%/flowdedup: FORCE
	CGO_ENABLED=0 GOOS=linux $(goenv.$*) $(GO) build -trimpath -buildvcs=false -ldflags '-s -w $(LDFLAGS)' -o $@ ./cmd/flowdedup

# Man pages, completions and the changelog: the same for every architecture.
$(PKGBUILD)/share/.done: $(PKGBUILD)/mkpkg
	rm -rf $(PKGBUILD)/share
	$(PKGBUILD)/mkpkg docs -version '$(VERSION)' -commit '$(COMMIT)' -date '$(SOURCE_DATE_EPOCH)' -maintainer '$(MAINTAINER)' -out $(PKGBUILD)/share
	touch $@

# release-check makes $(DIST); the packages and archives wait for it
# (order-only), so that make -j does not write them before it.
.SECONDEXPANSION:
$(DIST)/flowdedup_$(VERSION)_%.deb: $(PKGBUILD)/linux_$$(binarch.$$*)/flowdedup $(PKGBUILD)/share/.done $(PKGBUILD)/mkpkg $(PKGBUILD)/nfpm | release-check
	$(PKGBUILD)/mkpkg notices -bin $< -out $(<D)/THIRD-PARTY-NOTICES.gz
	VERSION='$(VERSION)' DEB_ARCH=$* MAINTAINER='$(MAINTAINER)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
	PKG_BIN=$< PKG_SHARE=$(PKGBUILD)/share PKG_NOTICES=$(<D)/THIRD-PARTY-NOTICES.gz \
		$(PKGBUILD)/nfpm package --config packaging/nfpm.yaml --packager deb --target $@

# An archive holds what the package installs, to be put in place by hand
# (docs/install.md), under one directory named as the archive.
$(DIST)/flowdedup_$(VERSION)_linux_%.tar.gz: $(PKGBUILD)/linux_%/flowdedup $(PKGBUILD)/share/.done $(PKGBUILD)/mkpkg | release-check
	rm -rf $(PKGBUILD)/stage/$*
	mkdir -p $(PKGBUILD)/stage/$*/man $(PKGBUILD)/stage/$*/completions
	install -m 0755 $< $(PKGBUILD)/stage/$*/flowdedup
	$(PKGBUILD)/mkpkg notices -bin $< -out $(PKGBUILD)/stage/$*/THIRD-PARTY-NOTICES
	install -m 0644 deploy/flowdedup.service deploy/flowdedup.env LICENSE README.md $(PKGBUILD)/stage/$*/
	install -m 0644 $(PKGBUILD)/share/man/*.1.gz $(PKGBUILD)/stage/$*/man/
	install -m 0644 $(PKGBUILD)/share/completions/* $(PKGBUILD)/stage/$*/completions/
	$(PKGBUILD)/mkpkg tar -date $(SOURCE_DATE_EPOCH) -prefix flowdedup_$(VERSION)_linux_$* -out $@ $(PKGBUILD)/stage/$*
