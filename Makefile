# Leasehold: build, run, test. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := build

GO       ?= go
PKG      := github.com/leasehold/leasehold
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X $(PKG)/pkg/server.Version=$(VERSION)
BIN      := bin/leasehold
# The staticcheck `make lint` runs (.ci/run installs it when missing).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# make run: listen addresses and database.
LISTEN           ?= 127.0.0.1:1234
PLACEMENT_LISTEN ?= 127.0.0.1:8778
DATABASE         ?= sqlite:///leasehold.db
# make image: the tag of the container image.
IMAGE            ?= leasehold:$(VERSION)

# make fuzz: requests, time bound, seed (0: from the clock) and senders of the HTTP fuzzer.
FUZZ_N        ?= 1000000
FUZZ_DURATION ?= 45m
FUZZ_SEED     ?= 0
FUZZ_WORKERS  ?= 2

.PHONY: help build image run test fuzz bench bench-api bench-placement lint conformance conformance-mysql fmt clean mariadb-start mariadb-stop deps

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

build: ## static binary bin/leasehold (CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/leasehold

image: ## container image from Containerfile with podman (or docker); needs a container registry for the golang builder image
	@eng="$$(command -v podman || command -v docker || true)"; \
	if [ -z "$$eng" ]; then echo "image: neither podman nor docker is installed"; exit 1; fi; \
	echo "image: $$eng build -t $(IMAGE) (pulls the golang builder image: needs a container registry)"; \
	"$$eng" build -f Containerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .

run: build ## build and serve on SQLite leasehold.db (Blazar+Placement on :1234, Placement also on :8778)
	@scripts/run.sh $(BIN) $(LISTEN) $(PLACEMENT_LISTEN) $(DATABASE)

test: ## ALL tests: go test -race on SQLite, on MariaDB, Placement conformance on both
	@scripts/test.sh

fuzz: ## HTTP fuzzer: FUZZ_N (10^6) generated requests over both APIs to one server, bounded by FUZZ_DURATION; prints counts, statuses, 5xx
	LEASEHOLD_HTTPFUZZ_N=$(FUZZ_N) LEASEHOLD_HTTPFUZZ_DURATION=$(FUZZ_DURATION) LEASEHOLD_HTTPFUZZ_SEED=$(FUZZ_SEED) \
	LEASEHOLD_HTTPFUZZ_WORKERS=$(FUZZ_WORKERS) $(GO) test -count=1 -v -timeout 0 -run '^TestHTTPFuzz$$' ./tests/httpfuzz/

bench: ## Go benchmarks, saved in bench-results/ (compared with benchstat when installed)
	@scripts/bench.sh

bench-api: build ## HTTP load test with wrk on SQLite and MariaDB (GET provider, PUT allocations)
	@scripts/bench-api.sh

bench-placement: ## GET /allocation_candidates under load (perfload flat/nested/wide) vs the real Placement 8.0.0, p50/p99/q/s and ratios
	@scripts/bench-placement.sh

lint: ## gofmt, go vet, staticcheck (required under CI=true, else skipped when missing); runs all, fails if any failed
	@rc=0; out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$out"; rc=1; else echo "gofmt: clean"; fi; \
	echo "$(GO) vet ./..."; $(GO) vet ./... || rc=1; \
	sc="$$(command -v staticcheck || true)"; [ -z "$$sc" ] && [ -x "$$($(GO) env GOPATH)/bin/staticcheck" ] && sc="$$($(GO) env GOPATH)/bin/staticcheck"; \
	if [ -n "$$sc" ]; then echo "staticcheck ./..."; "$$sc" ./... || rc=1; \
	elif [ "$${CI:-}" = true ]; then echo "lint: FAILED: staticcheck not installed (go install $(STATICCHECK))"; rc=1; \
	else echo "lint: staticcheck not installed, skipped (go install $(STATICCHECK))"; fi; \
	exit $$rc

conformance: ## Placement conformance on SQLite (CONFORMANCE_DB=mysql for MariaDB; args: ARGS='-vv file.yaml')
	@scripts/conformance.sh $(ARGS)

conformance-mysql: ## Placement conformance on the throw-away MariaDB
	@CONFORMANCE_DB=mysql scripts/conformance.sh $(ARGS)

mariadb-start: ## start the throw-away MariaDB on 127.0.0.1:3307 and print its URL
	@scripts/mariadb-throwaway.sh start

mariadb-stop: ## stop the throw-away MariaDB
	@scripts/mariadb-throwaway.sh stop

deps: ## install the Debian packages the tests need (root + apt)
	@scripts/deps.sh

fmt: ## gofmt -w every Go file
	gofmt -w .

clean: ## remove build and test outputs (not leasehold.db)
	rm -rf bin/ bench-results/
	$(GO) clean -testcache
