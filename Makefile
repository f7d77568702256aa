# Strata's build. `make run` starts a single broker; `make test` runs the whole
# suite, installing what it needs first.

GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
BIN       := strata
PKGS      := ./...
# bench/ is a module of its own (its plotting dependencies stay out of the
# product's go.mod), so ./... above does not reach it; the targets that
# build, vet, check and test code run in it too.
BENCH_MOD := bench
# Each fuzz target runs this many executions in `make test`. A count, not a
# duration: with a duration, go1.26's fuzz coordinator can report a spurious
# "context deadline exceeded" when the deadline races a busy worker (Go issue
# 75804, fixed in go1.27). FuzzRecovery opens a real log per input (about 100
# inputs a second under coverage) and gets a smaller count.
# Longer runs: make fuzz FUZZTIME=10m (duration-based, may hit that flake).
FUZZTIME      ?= 50000x
FUZZTIME_SLOW ?= 1500x
FUZZ_SLOW     ?= FuzzRecovery
STATICCHECK_VERSION := v0.8.2

.PHONY: all build run test test-repeat unit slow-checks e2e fuzz fuzz-smoke chaos chaos-short lint vet fmt-check staticcheck bench bench-quick deps proto clean cluster cluster-status cluster-stop cluster-clean test-cluster

all: build

build:
	$(GO) build -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo devel) -X main.commit=$$(git rev-parse HEAD 2>/dev/null)" -o $(BIN) ./cmd/strata

run: build
	@echo "Starting a single Strata broker on 127.0.0.1:9092 (data in ./data)."
	@echo "In another terminal, in this directory:"
	@printf '%s\n' "  produce:  printf 'key1:hello\\nkey2:world\\n' | ./$(BIN) produce demo --key-separator :"
	@echo "  consume:  ./$(BIN) consume demo --from-beginning --max-messages 2 --print-key"
	@echo "Metrics: http://127.0.0.1:9404/metrics, probes /healthz and /readyz (docs/monitoring.md)."
	@echo "Stop it with Ctrl-C."
	./$(BIN) broker

# deps installs what the tests need (Debian packages, Go modules), idempotently.
deps:
	@bash deploy/scripts/install-test-deps.sh
	$(GO) mod download
	$(GO) -C $(BENCH_MOD) mod download

test: deps lint unit slow-checks

# slow-checks runs fuzz-smoke, test-cluster and chaos-short at once
# (deploy/scripts/run-parallel.sh): the fuzzers use the CPU while the
# cluster script and the chaos run mostly wait on processes and timeouts.
slow-checks: build
	@bash deploy/scripts/run-parallel.sh "$(MAKE) --no-print-directory fuzz-smoke" "bash deploy/local/test-cluster.sh" "$(CHAOS_SHORT_CMD)"

# test-repeat runs `make test` N times in a row in a fresh clone of HEAD
# (deploy/scripts/test-repeat.sh), run HOG of them beside a CPU hog
# (stress-ng --cpu 2, from Debian), stops at the first failure and prints
# each run's wall time. HOG=0 runs none beside the hog.
N   ?= 3
HOG ?= 2
test-repeat:
	@bash deploy/scripts/test-repeat.sh $(N) $(HOG)

# The race detector runs on every package but coord: go-zookeeper/zk v1.0.4
# has an unsynchronized lastZxid between its send and receive loops when it
# reconnects (upstream issue go-zookeeper/zk#35, open), which the ZooKeeper
# outage tests trigger. The embedded coordinator still runs under the race
# detector inside the broker tests; coord's ZooKeeper code does not, nor
# cmd/strata's TestReassignRetriesZooKeeperStall (in-process brokers whose
# ZooKeeper is paused, so they reconnect): it skips itself under -race and
# runs after coord without it.
#
# The end-to-end tests (broker/e2e) run without -race: the code they test
# is the strata binary, a process of its own built without the race
# detector (the broker's code runs under it in the broker package's
# tests), and under -race the test process's own franz-go, sarama and
# kafka-go clients cost several times the CPU, which slowed every shard
# and made the tests that move many records the slowest of make test.
# They mostly wait (ZooKeeper sessions,
# replica lag, restarts) and leave the CPU idle, so they run as two shards
# beside the other packages and coord (deploy/scripts/run-parallel.sh);
# each test starts its own processes on its own ports and directories.
# E2E_SHARD_A names the longer half (about half of the e2e wall time;
# the transaction tests, TestTxn*, all run there);
# every other test, a new one too, runs in the second shard.
RACE_PKGS = $(shell $(GO) list ./... | grep -v '/coord' | grep -v '/broker/e2e$$')
E2E_SHARD_A := ^(TestTxn[A-Za-z]*|TestTieringCompactedClusterFailover|TestLegacyClients|TestNetFaults|TestDeployListeners|TestTieringS3Faults|TestClusterZooKeeperOutage|TestClusterSessionExpiry|TestReplicationMinInsyncReplicas|TestTieringUncleanElectionMinIO|TestReplicationLaggingFollower|TestKillDuringGroupAndIdempotentProduce|TestBrokerUnderAbuse|TestClientQuotasCluster|TestTierStatusWire[A-Za-z]*|TestConsumerGroupProtocol[A-Za-z]*)$$
unit: build
	@bash deploy/scripts/run-parallel.sh \
	  "$(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)" \
	  "$(GO) test -count=1 -timeout 10m ./coord/... && $(GO) test -count=1 -timeout 5m -run '^TestReassignRetriesZooKeeperStall$$' ./cmd/strata" \
	  "$(GO) test -count=1 -timeout 15m ./broker/e2e -run '$(E2E_SHARD_A)'" \
	  "$(GO) test -count=1 -timeout 15m ./broker/e2e -skip '$(E2E_SHARD_A)'"
	$(GO) -C $(BENCH_MOD) test -race -count=1 -timeout 5m ./...

# fuzz-smoke runs every fuzz target briefly (deploy/scripts/fuzz-smoke.sh:
# one instrumented test binary per package); the corpus in testdata/fuzz
# is replayed by `unit` too.
fuzz-smoke:
	@GO=$(GO) bash deploy/scripts/fuzz-smoke.sh "$(FUZZTIME)" "$(FUZZTIME_SLOW)" "$(FUZZ_SLOW)"

fuzz: FUZZTIME=5m
fuzz: fuzz-smoke

# chaos runs TestChaos (broker/e2e/chaos_test.go) for CHAOS: three brokers
# and ZooKeeper under random kill -9, SIGSTOP/SIGCONT, SIGTERM and
# ZooKeeper outages while idempotent acks=all producers and a consumer
# group run; then the history checker (broker/e2e/history) holds every
# acknowledgement, read and commit against the log. The seed is logged;
# replay a fault schedule with make chaos CHAOS_SEED=N. CHAOS_TIMEOUT must
# exceed CHAOS by 10 minutes. It first runs TestBrokerUnderAbuse's long
# form (CHAOS_ABUSE_CONNS idle connections, oversized and crafted frames,
# a per-address flood). It also runs TestNetFaults
# (broker/e2e/netfault_test.go) in its long form: network faults between
# hosts in network namespaces (broker/e2e/netlab), a minute of flapping
# link, longer latency windows; its short form runs in every go test.
# Then it runs TestTieringS3Faults (broker/e2e/tiering_s3fault_test.go)
# with the object store down for S3_OUTAGE in the middle of a replay (20 s
# in make test), and TestReassignment (broker/e2e/reassign_test.go) with
# CHAOS_REASSIGN_ROUNDS more rounds of moves, the controller killed in each.
# Before all that it runs the cleaner's property test (segment) over
# CHAOS_CLEAN_SEEDS seeds, each with failures injected while cleaning and
# swapping (5 seeds in make test), and TestCompactionKilledWhileCleaning
# (broker/e2e/compaction_test.go) with CHAOS_COMPACT_KILLS kill -9 of a
# broker while it cleans a compacted topic (3 in make test), and
# TestTieringCompactedClusterFailover (broker/e2e/tiering_compact_cluster_test.go)
# with CHAOS_COMPACT_TIER_KILLS kill -9 of the leader of a compacted tiered
# topic in a three-broker cluster (1 in make test). Last, TestTxnChaos
# (broker/e2e/txn_chaos_test.go) runs its exactly-once pipeline under
# random kill -9 and SIGSTOP of transaction coordinators and partition
# leaders for CHAOS_TXN (4 fixed faults in make test); CHAOS_TXN_SEED=N
# replays a schedule.
CHAOS         ?= 5m
CHAOS_SEED    ?=
CHAOS_TIMEOUT ?= 2h
S3_OUTAGE     ?= 10m
CHAOS_ABUSE_CONNS ?= 10000
CHAOS_REASSIGN_ROUNDS ?= 20
CHAOS_CLEAN_SEEDS ?= 200
CHAOS_COMPACT_KILLS ?= 30
CHAOS_COMPACT_TIER_KILLS ?= 10
CHAOS_TXN     ?= 5m
CHAOS_TXN_SEED ?=
chaos: build
	STRATA_CHAOS_CLEAN_SEEDS=$(CHAOS_CLEAN_SEEDS) $(GO) test ./segment -run '^TestCleanProperty$$' -count=1 -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_COMPACT_KILLS=$(CHAOS_COMPACT_KILLS) $(GO) test ./broker/e2e -run '^TestCompactionKilledWhileCleaning$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_COMPACT_TIER_KILLS=$(CHAOS_COMPACT_TIER_KILLS) $(GO) test ./broker/e2e -run '^TestTieringCompactedClusterFailover$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_ABUSE_CONNS=$(CHAOS_ABUSE_CONNS) $(GO) test ./broker/e2e -run '^TestBrokerUnderAbuse$$' -count=1 -v -timeout 30m
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS=$(CHAOS) STRATA_CHAOS_SEED=$(CHAOS_SEED) $(GO) test ./broker/e2e -run '^(TestChaos|TestNetFaults)$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_S3_OUTAGE=$(S3_OUTAGE) $(GO) test ./broker/e2e -run '^TestTieringS3Faults$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_REASSIGN_ROUNDS=$(CHAOS_REASSIGN_ROUNDS) $(GO) test ./broker/e2e -run '^TestReassignment$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)
	STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_TXN=$(CHAOS_TXN) STRATA_CHAOS_TXN_SEED=$(CHAOS_TXN_SEED) $(GO) test ./broker/e2e -run '^TestTxnChaos$$' -count=1 -v -timeout $(CHAOS_TIMEOUT)

# chaos-short is the chaos run of every `make test`: a fixed schedule of
# CHAOS_SHORT_FAULTS faults from seed CHAOS_SHORT_SEED (seed 4's fourteen:
# 3 kill -9, 6 SIGSTOP of 1 to 8 s, some past the 4 s session timeout, 2
# SIGTERM, 2 ZooKeeper outages; every broker hit), two to three minutes,
# ending with the history checker.
CHAOS_SHORT_FAULTS ?= 14
CHAOS_SHORT_SEED   ?= 4
CHAOS_SHORT_CMD = STRATA_BIN=$(CURDIR)/$(BIN) STRATA_CHAOS_FAULTS=$(CHAOS_SHORT_FAULTS) STRATA_CHAOS_SEED=$(CHAOS_SHORT_SEED) $(GO) test ./broker/e2e -run '^TestChaos$$' -count=1 -v -timeout 45m
chaos-short: build
	$(CHAOS_SHORT_CMD)

lint: vet fmt-check staticcheck

# vet also builds the bench module's commands, so that a change to a product
# package they import cannot break them unnoticed.
vet:
	$(GO) vet $(PKGS)
	$(GO) -C $(BENCH_MOD) vet ./...
	$(GO) -C $(BENCH_MOD) build ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$') $$(git ls-files -o --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

staticcheck:
	@if ! [ -x $(GOBIN)/staticcheck ] || ! $(GOBIN)/staticcheck -version 2>/dev/null | grep -q $(STATICCHECK_VERSION:v%=%); then \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || { echo "staticcheck could not be installed; skipping it"; exit 0; }; \
	fi; \
	$(GOBIN)/staticcheck $(PKGS) && \
	cd $(BENCH_MOD) && $(GOBIN)/staticcheck ./...

# bench runs every performance scenario with bench/suite, the benchmarks'
# one orchestrator (at most 30 minutes on a 2-core machine); bench-quick runs
# them all with small sizes (under 5 minutes). Each writes
# bench/results/<date>/ (quick/ under it for bench-quick): summary.md with
# PASS/FAIL against the goals, raw CSV/JSON and PNG plots; bench also
# rewrites the summary section of bench/RESULTS.md.
# NATS JetStream (the peer) is installed by deploy/scripts/install-bench-deps.sh;
# ZooKeeper and MinIO are installed by the suite as the tests do.
# More flags: make bench BENCH_FLAGS='-only 1,2' (go -C bench run ./suite -h;
# relative paths in them are relative to bench/).
BENCH_FLAGS ?=
bench: build
	$(GO) -C $(BENCH_MOD) run ./suite -strata $(CURDIR)/$(BIN) -nats "$$(bash deploy/scripts/install-bench-deps.sh)" $(BENCH_FLAGS)

bench-quick: build
	$(GO) -C $(BENCH_MOD) run ./suite -quick -strata $(CURDIR)/$(BIN) -nats "$$(bash deploy/scripts/install-bench-deps.sh)" $(BENCH_FLAGS)

clean:
	rm -f $(BIN)

# A local cluster on this machine (deploy/local, see deploy/README.md):
# ZooKeeper, MinIO with a bucket, three brokers on 127.0.0.1:9092-9094
# (metrics.listener on 127.0.0.1:9404-9406) tiering to MinIO; everything
# under .cluster/. Running it again is harmless.
# make cluster SECURE=1: the same with TLS and SCRAM (certificates from
# strata certs create, an INTERNAL SSL listener with client certificates,
# an EXTERNAL SASL_SSL listener with SCRAM-SHA-512, .cluster/client.properties;
# docs/security.md's quickstart).
cluster: build
	@bash deploy/local/up.sh

cluster-status:
	@bash deploy/local/status.sh

# Stops ZooKeeper, the brokers, then MinIO (order: deploy/README.md); keeps the data.
cluster-stop:
	@bash deploy/local/down.sh

# Stops the cluster and removes .cluster/.
cluster-clean:
	@bash deploy/local/clean.sh

# Runs the local-cluster scripts end to end (make cluster, a topic, produce,
# consume, cluster-status, cluster again, cluster-stop), then a SECURE=1
# cluster (produce and consume over SASL_SSL with strata and kcat), on free
# ports with temporary CLUSTER_DIRs, so it does not touch .cluster/ or 9092-9094.
test-cluster: build
	@bash deploy/local/test-cluster.sh

# proto regenerates proto/replpb from proto/replication.proto. It installs
# protoc (Debian's protobuf-compiler) and the Go plugins at pinned versions.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
proto:
	@command -v protoc >/dev/null || { echo "installing protobuf-compiler"; apt-get install -y protobuf-compiler >/dev/null || sudo apt-get install -y protobuf-compiler >/dev/null; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(GOBIN):$$PATH" protoc -I proto \
	  --go_out=proto/replpb --go_opt=paths=source_relative \
	  --go-grpc_out=proto/replpb --go-grpc_opt=paths=source_relative \
	  proto/replication.proto
