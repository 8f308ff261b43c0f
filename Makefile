# kubestore build. Every binary is static (CGO_ENABLED=0), path-independent
# (-trimpath) and stamped with the version of the commit it was built from.

MODULE    := github.com/kubestore/kubestore
# RELEASE is the version this tree prepares (the VERSION file). A build of
# the commit tagged v$(RELEASE), unchanged, is that release; any other build
# is a development build of it, named after its commit:
# $(RELEASE)-dev+<commit>[.dirty], a semantic version that sorts before the
# release.
RELEASE   := $(shell cat VERSION)
VERSION   ?= $(shell if git describe --exact-match --match 'v$(RELEASE)' >/dev/null 2>&1 && git diff --quiet HEAD 2>/dev/null; \
	then echo '$(RELEASE)'; \
	else echo "$(RELEASE)-dev+$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD 2>/dev/null || echo .dirty)"; fi)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit date, not the time of the build, so that two builds of one
# commit are byte-identical.
BUILD_DATE ?= $(shell git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS   := -s -w -buildid= \
	-X $(MODULE)/server.version=$(VERSION) \
	-X $(MODULE)/server.gitCommit=$(COMMIT) \
	-X $(MODULE)/server.buildDate=$(BUILD_DATE)
# Build tags that leave out upstream code kubestore never runs, for every
# build of the binary (docs/PERFORMANCE.md, "The binary, round 3"):
# urfave/cli's man and markdown generators and its "did you mean"
# suggestions (App.Suggest is off), apimachinery's fuzz functions (notest)
# and gRPC's request traces (grpc.EnableTracing is never set).
# nethttpomithttp2 would save 0.5 MB more but embedded etcd serves gRPC
# over TLS through net/http's own HTTP/2.
TAGS      := urfave_cli_no_docs,urfave_cli_no_suggest,notest,grpcnotrace
GOBUILD_BASE := CGO_ENABLED=0 go build -trimpath -tags $(TAGS)
GOBUILD   := $(GOBUILD_BASE) -ldflags "$(LDFLAGS)"
PLATFORMS := linux-amd64 linux-arm64 linux-arm linux-riscv64

# Test settings: the race detector doubles build time on 2 cores, so it is
# opt-in (make test GOTESTFLAGS=-race).
GOTESTFLAGS ?=
TEST_TIMEOUT ?= 45m

.PHONY: fuzz build build-format2 build-symbols run test release-check release-builds vet cross clean generate upstream-bins release-e2e $(addprefix build-,$(PLATFORMS))

build:
	$(GOBUILD) -o bin/kubestore .

# This tree as release 99.0.0 of a newer data format (2) than any release
# has yet (datadir.simulatedFormat): the newer firmware of the update
# tests and of make bench's update section.
build-format2:
	$(GOBUILD_BASE) -ldflags "-s -w -X $(MODULE)/server.version=99.0.0 -X $(MODULE)/datadir.simulatedFormat=2@99.0.0" -o bin/kubestore-format2 .

# Build and serve on the embedded defaults (HTTPS on 127.0.0.1:6443).
run: build
	./bin/kubestore

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...

# The tests every change runs: unit, integration (the whole stack
# in-process) and end-to-end (test/e2e: the binary built here, run as a
# user would, with kubectl); the fuzz targets run their seeds. -count=1
# because go test cannot see that a binary changed. The qemu test skips
# here: it runs in release-check. client-go's cache mutation detector is
# on: the in-process controllers' informers hold the watch cache's own
# objects (docs/CONTROLLERS.md), and one modified fails the test.
# test/e2e, the longest package (about 11 minutes, mostly waiting), is named
# first: go test starts packages in the order given, and last (./...'s
# order) it started after server/ and scripts/bench/ had run, 8 minutes in.
# Its tests wait more than they compute (processes starting, outages,
# elections): three run side by side, not go test's default of the 2
# CPUs (the model checker's schedules added 2.5 minutes to it). So do
# server/ (about 9 minutes) and scripts/bench/ (about 5): three packages
# run at once (-p 3), or those two ran one after the other beside
# test/e2e and were the longest path.
test: vet build build-format2
	KUBESTORE_BIN=$(CURDIR)/bin/kubestore KUBESTORE_NEWER_BIN=$(CURDIR)/bin/kubestore-format2 KUBE_CACHE_MUTATION_DETECTOR=true \
		go test -count=1 -p 3 -parallel 3 $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) ./test/e2e ./...

# The slow checks of a release, on top of make test (.ci/run runs both):
# the arm64, armv7 and riscv64 binaries of make cross run under
# qemu-user-static (test/e2e/qemu_test.go), every fuzz target runs
# briefly, two builds of HEAD must be byte-identical
# (scripts/reproducible), and the node agents (the kubelet and kube-proxy
# of kubemark's hollow node) run on kubestore alone and through the
# mirror of a real cluster (test/e2e/nodeagent_test.go), with the other
# slow suites (release-e2e). Those wait more than they compute: they run
# beside the builds.
release-check: build upstream-bins
	$(MAKE) -j2 --output-sync=target release-builds release-e2e

release-builds: build-linux-arm64 build-linux-arm build-linux-riscv64 fuzz
	KUBESTORE_BIN_ARM64=$(CURDIR)/dist/kubestore-linux-arm64 \
	KUBESTORE_BIN_ARMV7=$(CURDIR)/dist/kubestore-linux-armv7 \
	KUBESTORE_BIN_RISCV64=$(CURDIR)/dist/kubestore-linux-riscv64 \
		go test -count=1 $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) -run '^TestCrossBinariesUnderQEMU$$' ./test/e2e
	scripts/reproducible

# Third-party binaries the node-agent tests run, built from their upstream
# modules at the versions kubestore pins, in the test tree's own module
# (test/upstream/go.mod), never in kubestore's go.mod: kubemark (the hollow
# node), kube-apiserver, kube-controller-manager and etcd; the real node's
# kubelet, kube-proxy, kubectl 1.37 (beside the machine's 1.32), containerd 2.4 (with its runc shim, ctr), runc, crictl and the
# CNI plugins (bridge, host-local, loopback); and CoreDNS, at its own pins
# (test/coredns/go.mod). One go build for the Kubernetes and containerd
# binaries: their shared packages compile once.
UPSTREAM_BIN := $(CURDIR)/bin/upstream
upstream-bins:
	cd test/upstream && CGO_ENABLED=0 go build -trimpath -o $(UPSTREAM_BIN)/ \
		k8s.io/kubernetes/cmd/kubemark k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr \
		github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/main/loopback \
		github.com/containernetworking/plugins/plugins/ipam/host-local sigs.k8s.io/cri-tools/cmd/crictl
	# runc's nsenter is C and its seccomp filters libseccomp's
	# (libseccomp-dev, .ci/run): the one binary built with cgo.
	cd test/upstream && CGO_ENABLED=1 go build -trimpath -tags seccomp -o $(UPSTREAM_BIN)/runc github.com/opencontainers/runc
	cd test/upstream && CGO_ENABLED=0 go build -trimpath -o $(UPSTREAM_BIN)/etcd go.etcd.io/etcd/server/v3
	cd test/coredns && CGO_ENABLED=0 go build -trimpath -o $(UPSTREAM_BIN)/coredns github.com/coredns/coredns

# The slow end-to-end suites of a release (make upstream-bins first): the
# node agents on kubestore and through the mirror of a real cluster, the
# mirror's faults test at its full five minutes of a flapping link, fifty
# first starts with clean logs, an update from OLDER_COMMIT (a release in
# the field: the last one landed) to a newer data format and back,
# twelve power cuts during an update's commit, eight of one member of a
# site of three (while it joins, is promoted, writes, is removed), a
# site's member whose disk fails and a site reset after its quorum is
# lost, the registry's answers to 377 objects compared with
# kube-apiserver's (docs/REGISTRY-DIFFERENCES.md) (KUBESTORE_RELEASE_E2E),
# the mirror's model checker on four schedules against kube-apiserver
# and kube-controller-manager (make test runs three against a kubestore),
# and a real node (the kubelet on containerd running real containers, on
# kubestore alone and through the mirror, with an operator's kubectl
# logs, exec, attach and port-forward; about 5.5 minutes, root).
# They wait more than they compute: three run side by side (go test's
# default is the 2 CPUs). RELEASE_E2E_FLAGS may
# say -short (outages of a minute, two delete races). Its output ends with
# what each failed test logged (scripts/testsummary), its processes'
# logs left above: a log read from its end shows why first.
RELEASE_E2E_FLAGS ?=
OLDER_COMMIT ?= d64fc635805387fbc73dd10d014fefdcf4c714e6
release-e2e: build-format2
	KUBESTORE_BIN=$(CURDIR)/bin/kubestore KUBESTORE_NEWER_BIN=$(CURDIR)/bin/kubestore-format2 KUBESTORE_UPSTREAM_BIN_DIR=$(UPSTREAM_BIN) KUBESTORE_MIRROR_FLAP=5m KUBESTORE_CLEAN_STARTS=50 \
	KUBESTORE_OLDER_COMMIT=$(OLDER_COMMIT) KUBESTORE_UPDATE_CUTS=12 KUBESTORE_SITE_CUTS=8 KUBESTORE_RELEASE_E2E=1 KUBESTORE_MODEL_SCHEDULES=4 \
		go test -count=1 -json -parallel 3 $(RELEASE_E2E_FLAGS) -timeout 40m -run '^(TestNodeAgents|TestMirrorUnderFaults|TestCleanLogsFirstStarts|TestUpdateAcrossReleases|TestPowerCutDuringUpdate|TestSitePowerCutOneMember|TestSiteMemberDiskFault|TestSiteClusterReset|TestRegistryAgainstKubeAPIServer|TestMirrorModelAgainstKubeAPIServer|TestRealNode)' ./test/e2e \
		| go run ./scripts/testsummary

# Measures the built binary: one table on stdout, the figures in bench.json
# (docs/PERFORMANCE.md). BENCHFLAGS adds options, e.g.
# BENCHFLAGS=-serve-arg=--memory-limit=128Mi or BENCHFLAGS=-scale=0.1; the
# idle-flash section idles a server 5 minutes (BENCHFLAGS=-idle-flash=0
# skips it).
.PHONY: bench
bench: build build-format2 build-symbols
	go run ./scripts/bench -bin bin/kubestore -newer-bin bin/kubestore-format2 -symbols-bin bin/kubestore-symbols $(BENCHFLAGS)

# The server CPU per create, update and LIST of this tree beside a commit's,
# BASE=<rev> (issue 39's "nothing slower than 1.1x"): BASE is built by its
# own make build in a temporary worktree, then both run the bench's
# compare section, four rounds that alternate which goes first. One run of
# the store section moves by 10-25 % on a 2-core machine; the rounds are
# what tells a cost from noise (docs/PERFORMANCE.md).
.PHONY: bench-compare
bench-compare: build
	@test -n "$(BASE)" || { echo "make bench-compare: BASE=<commit> is required"; exit 2; }
	@tree=$$(mktemp -d) && git worktree add -q --detach $$tree/base $(BASE) && \
		{ $(MAKE) -C $$tree/base build && cp $$tree/base/bin/kubestore bin/kubestore-base; s=$$?; \
		git worktree remove --force $$tree/base; rm -rf $$tree; exit $$s; }
	go run ./scripts/bench -bin bin/kubestore -compare-bin bin/kubestore-base -only=compare -configmaps=3000 -xz=false -out bench-compare.json $(BENCHFLAGS)

# bin/kubestore with its symbol table (-w without -s): its loaded sections
# are at the addresses of bin/kubestore's, so that make bench can say
# which modules' code and data a running server holds resident.
build-symbols:
	$(GOBUILD_BASE) -ldflags "$(filter-out -s,$(LDFLAGS))" -o bin/kubestore-symbols .

cross: $(addprefix build-,$(PLATFORMS))
	cd dist && sha256sum kubestore-* > SHA256SUMS

build-linux-amd64:
	GOOS=linux GOARCH=amd64 $(GOBUILD) -o dist/kubestore-linux-amd64 .
build-linux-arm64:
	GOOS=linux GOARCH=arm64 $(GOBUILD) -o dist/kubestore-linux-arm64 .
build-linux-arm:
	GOOS=linux GOARCH=arm GOARM=7 $(GOBUILD) -o dist/kubestore-linux-armv7 .
build-linux-riscv64:
	GOOS=linux GOARCH=riscv64 $(GOBUILD) -o dist/kubestore-linux-riscv64 .

# Regenerates the OpenAPI definitions of the served types.
generate:
	scripts/generate

clean:
	rm -rf bin dist

# Every fuzz target of ours, briefly (go test -fuzz runs one target at a
# time); the seeds and any failure found are in testdata/fuzz/<Target>/.
# The budget is a count of executions, not a duration: with a duration, Go
# 1.26's fuzz coordinator can report its own deadline as a failure
# ("context deadline exceeded", no failing input; go.dev/issue/75804, fixed
# in Go 1.27). A count has no deadline to race.
FUZZTIME ?= 20000x
FUZZ_PACKAGES := ./config ./access ./manifests ./server/query
fuzz:
	@set -e; for pkg in $(FUZZ_PACKAGES); do \
		for target in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/kubestore-fuzz.log 2>&1 || { cat /tmp/kubestore-fuzz.log; exit 1; }; \
		done; \
	done
