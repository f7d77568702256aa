# Strata's build. `make run` starts a single broker; `make test` runs the whole
# suite, installing what it needs first.

GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
BIN       := bin/strata
PKGS      := ./...
# Each fuzz target runs this long in `make test`; longer runs: make fuzz FUZZTIME=10m
FUZZTIME  ?= 10s
STATICCHECK_VERSION := v0.8.2

.PHONY: all build run test unit e2e fuzz fuzz-smoke lint vet fmt-check staticcheck bench bench-quick deps proto clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/strata

run: build
	@echo "Starting a single Strata broker on 127.0.0.1:9092 (data in ./data)."
	@echo "In another terminal:"
	@echo "  produce:  echo 'key1:hello' | kcat -P -b 127.0.0.1:9092 -t demo -K:"
	@echo "  consume:  kcat -C -b 127.0.0.1:9092 -t demo -o beginning -e -f '%p %o %k %s\n'"
	@echo "Stop it with Ctrl-C."
	./$(BIN) broker

# deps installs what the tests need (Debian packages, Go modules), idempotently.
deps:
	@bash deploy/scripts/install-test-deps.sh
	$(GO) mod download

test: deps lint unit fuzz-smoke

unit: build
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# fuzz-smoke runs every fuzz target briefly; the corpus in testdata/fuzz is
# replayed by `unit` too.
fuzz-smoke:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

fuzz: FUZZTIME=5m
fuzz: fuzz-smoke

lint: vet fmt-check staticcheck

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$') $$(git ls-files -o --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

staticcheck:
	@if ! [ -x $(GOBIN)/staticcheck ] || ! $(GOBIN)/staticcheck -version 2>/dev/null | grep -q $(STATICCHECK_VERSION:v%=%); then \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || { echo "staticcheck could not be installed; skipping it"; exit 0; }; \
	fi; \
	$(GOBIN)/staticcheck $(PKGS)

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./segment/ ./broker/
	$(GO) run ./bench/segbench
	bash deploy/scripts/install-bench-deps.sh
	bash bench/run-issue3.sh

bench-quick: build
	$(GO) test -run '^$$' -bench . -benchtime 200ms ./segment/
	$(GO) run ./bench/segbench -bytes 268435456

clean:
	rm -rf bin
