// Package e2e holds Strata's end-to-end tests: each test builds nothing
// itself but starts a real `strata broker` process (the binary is built once
// per `go test` run, in TestMain), drives it with real Kafka clients (kcat,
// librdkafka through python3-confluent-kafka, franz-go, sarama, kafka-go)
// and raw TCP, kills and restarts it, and checks what comes back. The
// cluster tests (cluster_test.go) run a real ZooKeeper (coord/zktest,
// Debian's package) with three broker processes and kill brokers, the
// controller and ZooKeeper itself.
//
// The package has no code of its own outside its tests; the harness lives in
// harness_test.go, the history checker the chaos run ends with in the
// sub-package history, and the network namespaces of the network fault
// tests in the sub-package netlab. Tools that are missing (kcat, the
// Debian Python module, strace, root for a tmpfs, network namespaces)
// skip the tests that need them, except
// in CI (CI=true, as .ci/run sets it), where make test has installed them
// (deploy/scripts/install-test-deps.sh) and their absence is a failure.
// Every test fails if a broker it started logged a panic, recovered
// (broker.PanicMarker) or not, or a data race.
//
// TestChaos is the chaos run: a fixed schedule of fourteen faults in every make
// test (make chaos-short), a long random one with make chaos.
//
// TestNetFaults (netfault_test.go) runs ZooKeeper, MinIO and three
// brokers each on a host of its own, a network namespace made by the
// sub-package netlab (netcluster_harness_test.go starts the cluster
// there), and cuts, delays and heals the links between them; make chaos
// runs its long form.
//
// Run: go test ./broker/e2e/ (about two minutes once built, of which the
// cluster tests take 45 s; -v shows the figures each test logs;
// -run TestCluster for the cluster tests alone). Set STRATA_BIN to a prebuilt strata binary to skip the
// build; with -short the tests skip.
package e2e
