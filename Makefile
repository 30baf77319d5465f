# Orrery — make help lists the targets.
GO       ?= go
DATA     ?= ./data
RUNS     ?= 2
# make chaos: how long faults are injected, the seed (empty: a random one, printed first), the silos.
DURATION ?= 5m
SEED     ?=
SILOS    ?= 3
GAPS     ?=
# Packages whose tests start protoactor clusters run without -race: protoactor-go's cluster code
# has data races of its own (the cluster package doc names them), which would fail every run.
CLUSTER_PKGS_RE := /(cluster|silo|cmd/silo|cmd/orrery|examples|chaos|bench)(/|$$)
RACE_PKGS    = $(shell $(GO) list ./... | grep -Ev '$(CLUSTER_PKGS_RE)')
CLUSTER_PKGS = $(shell $(GO) list ./... | grep -E '$(CLUSTER_PKGS_RE)')
# The slowest of them, chaos, takes about 13 minutes on 2 cores, and the machine's speed drifts
# up to 2×: the per-package bound leaves room for that (make test as a whole stays near 15-17
# minutes).
CLUSTER_TIMEOUT := 30m

.PHONY: help run cluster walkthrough quickstart bench-short bench-peers test test-race test-cluster ui-deps chaos-deps cluster-test chaos bench proto verify fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

run: ## build and start one development silo (--insecure-dev): data under ./data, loopback ports 7381/7382, admin on 127.0.0.1:7380
	$(GO) build -o bin/silo ./cmd/silo
	./bin/silo --data $(DATA) --insecure-dev

cluster: ## build and start three development silos (--insecure-dev) on loopback: data under ./data/silo1..3, admin on 127.0.0.1:7380/7390/7400, Ctrl-C stops them
	$(GO) build -o bin/silo ./cmd/silo
	./scripts/cluster.sh $(DATA)

walkthrough: ## drive the deterministic core end to end in memory, with simulated time
	$(GO) run ./cmd/walkthrough

quickstart: ## the README's example: an embedded silo, a schedule every 2 s and a saga timing out
	$(GO) run ./examples/quickstart

test: verify test-race test-cluster bench-short ## the whole test suite (the CI gate)

test-race: ## pure, storage and tool packages, with the race detector
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

# The chaos package's TestChaosShortRun is make chaos in short (75 s of faults, about two minutes).
test-cluster: ui-deps chaos-deps ## packages that start protoactor clusters (no -race: protoactor's own races), make chaos's short run included; the UI test needs chromium, the silo isolation tests nft
	@if [ -n "$(CLUSTER_PKGS)" ]; then ORRERY_UI_BROWSER_REQUIRED=1 ORRERY_NETCUT_REQUIRED=1 $(GO) test -count=1 -timeout $(CLUSTER_TIMEOUT) $(CLUSTER_PKGS); fi

# The web UI's browser test (silo/ui) drives Debian's headless chromium through chromedriver; under
# test-cluster it fails, never skips, when they are missing.
ui-deps: ## install Debian's chromium and chromium-driver with apt-get (as root, or through sudo) when missing
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "ui-deps: installing chromium and chromium-driver with apt-get"; \
	  { $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } >/dev/null \
	    || echo "ui-deps: could not install chromium and chromium-driver (no apt-get, no root, or offline): the silo/ui browser test will fail"; \
	fi

# The chaos tests that isolate a silo at the network level (chaos/netcut.go) need root, cgroup v2
# and nft; under test-cluster and cluster-test they fail, never skip, when one is missing.
chaos-deps: ## install Debian's nftables (nft) with apt-get (as root, or through sudo) when missing
	@if ! command -v nft >/dev/null && [ ! -x /usr/sbin/nft ] && [ ! -x /sbin/nft ]; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "chaos-deps: installing nftables with apt-get"; \
	  { $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables; } >/dev/null \
	    || echo "chaos-deps: could not install nftables (no apt-get, no root, or offline): the chaos tests that isolate a silo will fail"; \
	fi

cluster-test: chaos-deps ## the cluster tests at full length (ORRERY_CLUSTER_FULL=1): kills, pauses, network partitions, isolated silos, lost hosts and disks, removed silos, rolling restarts, saturated cores
	ORRERY_CLUSTER_FULL=1 ORRERY_NETCUT_REQUIRED=1 $(GO) test -count=1 -v -timeout 60m ./chaos
	ORRERY_CLUSTER_FULL=1 ORRERY_NETCUT_REQUIRED=1 $(GO) test -count=1 -v -timeout 10m -run 'TestNoElectionWhileTheCoresAreSaturated|TestASiloWhoseDiskWasLostRejoinsAsANewSilo' ./silo

chaos: chaos-deps ## a seeded nemesis (kills, pauses, network isolation, 2/3 splits, wiped disks, rolling restarts, failpoints, clock skew, other zone rules, full disks, several at once) against SILOS real silos for DURATION, then the history checkers; SEED replays a run; the last line is CHAOS RESULT
	$(GO) run ./chaos/cmd/chaos -duration $(DURATION) -silos $(SILOS) $(if $(SEED),-seed $(SEED)) $(if $(GAPS),-gap-min $(word 1,$(subst -, ,$(GAPS))) -gap-max $(word 2,$(subst -, ,$(GAPS))))

bench: ## benchmarks at full scale (several minutes), figures via b.ReportMetric
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

bench-short: ## the silo benchmarks scaled down (-short), so make test keeps them working
	$(GO) test -short -count=1 -run '^$$' -bench . -benchtime 1x -timeout 10m ./bench

bench-peers: ## Orrery beside River (PostgreSQL) on workloads A, B, C: medians of RUNS runs, ratios and server memory
	cd bench/peers && $(GO) run . -runs $(RUNS)

fuzz: ## run each fuzz target for FUZZTIME (default 10m); then scripts/fuzz-corpus.sh PKG TARGET keeps the grown corpus in testdata/fuzz
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $${FUZZTIME:-10m} ./grains/schedule/cron
	$(GO) test -run '^$$' -fuzz FuzzValidateDefinition -fuzztime $${FUZZTIME:-10m} ./grains/schedule
	$(GO) test -run '^$$' -fuzz FuzzApplyCommand -fuzztime $${FUZZTIME:-10m} ./grains/batch
	$(GO) test -run '^$$' -fuzz FuzzEngineRequests -fuzztime $${FUZZTIME:-10m} ./grains/engine
	$(GO) test -run '^$$' -fuzz FuzzSnapshotDecoder -fuzztime $${FUZZTIME:-10m} ./persistence
	$(GO) test -run '^$$' -fuzz FuzzGossipDecoders -fuzztime $${FUZZTIME:-10m} ./cluster
	$(GO) test -run '^$$' -fuzz FuzzClientBatch -fuzztime $${FUZZTIME:-10m} ./cluster/transportauth
	$(GO) test -run '^$$' -fuzz FuzzAdminRequest -fuzztime $${FUZZTIME:-10m} ./silo

proto: ## regenerate api/v1 from the .proto files (needs protoc: apt-get install protobuf-compiler)
	./scripts/gen-proto.sh

verify: ## gofmt, go vet (bench/peers too), go mod tidy diff, stale generated code
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench/peers && $(GO) vet ./... && $(GO) test -count=1 ./... # its own module (River, pgx): built and tested here so it keeps up with the client
	@cp go.mod /tmp/orrery-go.mod.$$$$ && cp go.sum /tmp/orrery-go.sum.$$$$ && $(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed go.mod/go.sum: commit the tidy result"; git --no-pager diff -- go.mod go.sum | head -40; \
	    cp /tmp/orrery-go.mod.$$$$ go.mod; cp /tmp/orrery-go.sum.$$$$ go.sum; rm -f /tmp/orrery-go.*.$$$$; exit 1; fi; rm -f /tmp/orrery-go.*.$$$$
	$(GO) test -count=1 -run TestGeneratedCodeIsFresh ./api/v1
