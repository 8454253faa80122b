# lifecycled: `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := ./bin
# The CHANGELOG's version, with the commit unless HEAD is its tag
# (scripts/version.sh): what `lifecycled version` and the package say.
VERSION ?= $(shell scripts/version.sh)
LDFLAGS := -X github.com/lifecycled/lifecycled/daemon/internal/buildinfo.Version=$(VERSION)
# No cgo (SQLite is modernc's Go, DNS and users Go's): the binaries need
# no shared library, only the dynamic loader, being position-independent
# (-buildmode=pie: ASLR, and what lintian asks of a package's binaries).
# build, test-bins and package compile alike, so they share one compile.
BUILD_ENV := CGO_ENABLED=0
BUILD_FLAGS := -buildmode=pie
PLUGINS := postgres mysql dynamodb redis kafka rabbitmq pgtable
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
TOOLS := $(CURDIR)/.tools/bin
TEST_BIN := bin/test
# nfpm as a library, in a module of its own (packaging/go.mod, outside the
# workspace): the daemon's module does not take on a packager's
# dependencies.
PACKAGING_GO := cd packaging && GOWORK=off $(GO)
# The sdk is a module of its own (sdk/go.mod) in the workspace (go.work):
# ./... from the root does not reach into it. The longest packages come
# first: go test starts packages in this order, two at a time, and one
# started last (the kit's, 160 s) ran alone at the end.
PACKAGES := ./daemon/e2e ./sdk/plugintest ./daemon/internal/store ./daemon/internal/dlq/bulk ./plugins/postgres ./... ./sdk/...
# The end-to-end packages drive the daemon and plugins as built processes
# (bin/test, built without -race): their test process holds only the
# client and the in-process Kafka broker, so they run without the race
# detector, beside the rest (E2E_GOTEST_FLAGS); under it they were the
# slowest package of CI (309 s), for races in a third-party test broker.
E2E_PACKAGES := ./daemon/e2e ./daemon/e2e/console
RACE_PACKAGES = ./sdk/plugintest ./daemon/internal/store ./daemon/internal/dlq/bulk ./plugins/postgres \
	$(shell $(GO) list ./... ./sdk/... | grep -v '/daemon/e2e')
# Every other package is instrumented, modernc.org's SQLite too: leaving it
# out (-gcflags=modernc.org/...=-race=false) made the SQLite tests 8x
# faster but lost happens-before edges elsewhere (false races in
# encoding/json: uninstrumented atomics make no edges).
GOTEST_FLAGS ?= -race -count=1 -timeout 20m
E2E_GOTEST_FLAGS ?= -count=1 -timeout 20m
# The packages whose tests run on both state stores (storetest.Each) run
# their PostgreSQL half under the race detector, with the rest, and their
# SQLite half without it, beside the end-to-end packages
# (LIFECYCLED_TEST_STORES); the tests of dlq, dlq/intake and dlq/bulk reach
# storetest through dlqtest's fixture. SQLite's driver is Go translated from C: under
# the race detector its half took more than half of those packages' time
# (store 139 s of which 77 s, dlq 164 s of which 70 s, run alone), checking
# the driver's own memory, while the code of ours it runs is the same
# sqlstore code the PostgreSQL half runs under the detector; the
# SQLite-only code is the connection set-up and one mutex.
STORE_PACKAGES = $(shell $(GO) list -f '{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}' ./... | \
	awk '/\/(store\/storetest|dlq\/dlqtest)( |$$)/ && $$1 !~ /(storetest|dlqtest)$$/ {print $$1}')

.PHONY: help build run test package test-deps test-bins lint proto proto-python proto-check fuzz fuzz-erasure fuzz-dlq bench demo clean htmx screenshots

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# go build -v names each package it compiles (none when cached): counted
# aloud, so that a first build on 2 cores is not minutes of silence;
# anything else it prints (an error) passes through.
PROGRESS := awk '/^[^ :]+$$/ { if (++n % 25 == 0) { print "    ... " n " packages compiled"; fflush() } next } { print; fflush() }'

build: ## build the daemon and every plugin into ./bin
	@echo "building lifecycled and $(words $(PLUGINS)) plugins into $(BIN) (a first build downloads and compiles the dependencies: a few minutes)"
	@echo "  $(BIN)/lifecycled"
	@set -o pipefail; $(BUILD_ENV) $(GO) build -v $(BUILD_FLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/lifecycled ./daemon 2>&1 | $(PROGRESS)
	@set -o pipefail; for p in $(PLUGINS); do echo "  $(BIN)/lifecycled-plugin-$$p"; $(BUILD_ENV) $(GO) build -v $(BUILD_FLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/lifecycled-plugin-$$p ./plugins/$$p 2>&1 | $(PROGRESS) || exit 1; done

run: build ## build and run the daemon on the embedded default (./config.toml: SQLite, ./var/lifecycled.sock)
	$(BIN)/lifecycled run --config config.toml

test-deps: ## install what the tests need (PostgreSQL server binaries, MariaDB, redis-server, RabbitMQ, node+dynalite, kcat, promtool, protoc, Python gRPC, chromium)
	./scripts/test-deps.sh

# The processes the tests start are built without -race (testsvc.Binary
# says why); the tests themselves run with it.
test-bins: ## build the binaries the tests start, once for all packages
	$(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -o $(TEST_BIN)/lifecycled ./daemon
	@for p in $(PLUGINS); do $(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -o $(TEST_BIN)/lifecycled-plugin-$$p ./plugins/$$p || exit 1; done

test: test-deps lint proto-check test-bins ## run every test against real servers (a throwaway PostgreSQL, see scripts/test-pg.sh), with the race detector (the end-to-end packages and the SQLite halves without it)
	LIFECYCLED_TEST_BIN=$(TEST_BIN) ./scripts/test-pg.sh bash -c 'LIFECYCLED_TEST_STORES=sqlite $(GO) test $(E2E_GOTEST_FLAGS) $(E2E_PACKAGES) $(STORE_PACKAGES) & e2e=$$!; \
		($(PACKAGING_GO) test $(E2E_GOTEST_FLAGS) ./...) & pkg=$$!; \
		LIFECYCLED_TEST_STORES=postgres $(GO) test $(GOTEST_FLAGS) $(RACE_PACKAGES); rest=$$?; wait $$e2e; e2e=$$?; wait $$pkg; pkg=$$?; \
		if [ $$e2e -ne 0 ] || [ $$rest -ne 0 ] || [ $$pkg -ne 0 ]; then echo "FAIL: end-to-end packages and SQLite halves (no -race) exit $$e2e, the others (-race) exit $$rest, the package install test exit $$pkg"; exit 1; fi'

lint: ## go vet, gofmt and promtool on the alert rules
	$(GO) vet $(PACKAGES)
	$(PACKAGING_GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if command -v promtool >/dev/null; then promtool check rules deploy/prometheus/alerts.yml && promtool test rules deploy/prometheus/alerts_test.yml; else echo "promtool missing: run make test-deps"; exit 1; fi

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc ## regenerate sdk/proto Go code with the pinned generators
	PATH=$(TOOLS):$$PATH protoc -I sdk/proto --go_out=sdk/proto --go_opt=paths=source_relative \
		--go-grpc_out=sdk/proto --go-grpc_opt=paths=source_relative sdk/proto/lifecycled/plugin/v1/plugin.proto

PYGEN := sdk/example/python-deleter/plugin/gen

proto-python: ## regenerate the Python example plugin's code (protoc --python_out, python3 -m grpc_tools.protoc)
	rm -rf $(PYGEN) && sdk/example/python-deleter/generate.sh

proto-check: proto proto-python ## fail when the committed generated code (Go and Python) is stale
	@git diff --exit-code -- sdk/proto >/dev/null || { echo "sdk/proto is stale: run make proto and commit"; git diff --stat -- sdk/proto; exit 1; }
	@if [ -n "$$(git status --porcelain -- $(PYGEN))" ]; then echo "$(PYGEN) is stale: run make proto-python and commit"; git status --short -- $(PYGEN); exit 1; fi

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./daemon/internal/config
	$(GO) test -run '^$$' -fuzz '^FuzzScrubNeverLeaksRegisteredSecret$$' -fuzztime $(FUZZTIME) ./sdk
	$(GO) test -run '^$$' -fuzz '^FuzzRouteParams$$' -fuzztime $(FUZZTIME) ./daemon/internal/adminapi
	$(GO) test -run '^$$' -fuzz '^FuzzHeaders$$' -fuzztime $(FUZZTIME) ./daemon/internal/dlq
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalTenantID$$' -fuzztime $(FUZZTIME) ./daemon/internal/deletion
	$(GO) test -run '^$$' -fuzz '^FuzzParseCursor$$' -fuzztime $(FUZZTIME) ./daemon/internal/deletion
	$(GO) test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME) ./daemon/internal/receipt
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./daemon/internal/ledger

SEEDS ?= 10000
fuzz-erasure: test-deps test-bins ## run the schema fuzzer (internal/erasurefuzz) on SEEDS seeds per dialect (default 10000; make test runs 150), FUZZ_FIRST_SEED to move the window
	LIFECYCLED_TEST_BIN=$(TEST_BIN) SEEDS=$(SEEDS) ./scripts/test-pg.sh $(GO) test -count=1 -timeout 0 -v -run '^TestSchemaFuzz(Postgres|MariaDB)$$' ./internal/erasurefuzz/

fuzz-dlq: test-deps test-bins ## run the producer fuzzer (daemon/e2e TestProducerFuzz) on SEEDS seeds (default 10000; make test runs 4), DLQ_FUZZ_FIRST_SEED to move the window, DLQ_FUZZ_SEEDS=a,b for a list
	LIFECYCLED_TEST_BIN=$(TEST_BIN) SEEDS=$(SEEDS) ./scripts/test-pg.sh $(GO) test -count=1 -timeout 0 -v -run '^TestProducerFuzz$$' ./daemon/e2e/

HTMX_VERSION ?= 2.0.4
htmx: ## refresh the web console's vendored htmx (HTMX_VERSION, via npm) and record its sha256 in htmx.lock
	./scripts/vendor-htmx.sh $(HTMX_VERSION)

screenshots: test-bins ## run the console's browser tests and keep their screenshots in docs/console (for docs/console.md)
	LIFECYCLED_SCREENSHOTS=$(CURDIR)/docs/console LIFECYCLED_TEST_BIN=$(TEST_BIN) ./scripts/test-pg.sh $(GO) test -count=1 ./daemon/e2e/console/

bench: build test-deps ## run the benchmarks under bench/ (baselines in the same run); see bench/README.md
	./bench/run.sh

demo: build test-deps ## start a daemon with real PostgreSQL, Redis, dynalite and a Kafka broker, and erase a tenant (DEMO_UI=1: then serve the web console)
	./scripts/demo.sh

DIST ?= $(CURDIR)/dist

# Stripped (lintian: unstripped-binary-or-object), compiled as test-bins
# compiles (CGO_ENABLED=0): after make test-bins only the links are new.
package: ## build $(DIST)/lifecycled_<version>_amd64.deb: the daemon, the bundled plugins, the hardened unit, a default config (packaging/nfpm.yaml)
	@rm -rf $(DIST)/bin && mkdir -p $(DIST)/bin
	@echo "building lifecycled $(VERSION) and its plugins into $(DIST)/bin (minutes on 2 cores when nothing is built yet)"
	$(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -ldflags "-s -w $(LDFLAGS)" -o $(DIST)/bin/lifecycled ./daemon
	@for p in $(PLUGINS); do echo "  plugin $$p"; $(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -ldflags "-s -w $(LDFLAGS)" -o $(DIST)/bin/lifecycled-plugin-$$p ./plugins/$$p || exit 1; done
	$(PACKAGING_GO) run ./cmd/mkdeb -root .. -version "$(VERSION)" -bin $(DIST)/bin -out $(DIST)

clean: ## remove build output and local state
	rm -rf $(BIN) var .tools dist
