package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stratastream/strata/broker"
)

func init() {
	register(&command{
		name:    "broker",
		summary: "run a broker: a single node, or one broker of a ZooKeeper cluster",
		run:     runBroker,
	})
}

// shutdownGrace bounds how long SIGTERM waits for in-flight requests
// before closing connections forcibly; the logs are closed cleanly either
// way.
const shutdownGrace = 30 * time.Second

// overrideFlag collects repeated --override key=value.
type overrideFlag [][2]string

func (o *overrideFlag) String() string { return "" }

func (o *overrideFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	*o = append(*o, [2]string{strings.TrimSpace(k), val})
	return nil
}

// brokerUsage prints the help of `strata broker`. The settings, their
// defaults and the topic configs come from the broker's settings registry
// (broker.BrokerSettingsReference, broker.TopicConfigsReference); the prose
// names settings but never their defaults.
func brokerUsage(w io.Writer) {
	def := broker.DefaultConfig()
	fmt.Fprintf(w, `Usage: strata broker [--config FILE] [--override key=value]... [--log-level LEVEL] [--log-format text|json]

Runs a Strata broker that speaks the Kafka protocol. With no flags it is a
single node with the embedded coordinator, listening on %s
with its data in %s. With zookeeper.connect it is one broker of a
cluster whose membership, controller and topic metadata live in ZooKeeper
(see docs/cluster.md). It prints "strata broker listening on HOST:PORT"
(the first of its listeners; then one line per listener if there are
several) once it accepts connections, and on SIGTERM or Ctrl-C it moves its
partition leadership to other brokers (controlled.shutdown.enable), stops
accepting, finishes the requests in flight and closes its logs cleanly. It
exits with status 1 if it cannot start (another live broker has registered
its broker.id, ZooKeeper cannot be reached within
zookeeper.connection.timeout.ms, the data directory belongs to another
cluster or broker), or if it loses its registration for good.
`, broker.FormatListeners(def.Listeners), strings.Join(def.LogDirs, ","))
	fmt.Fprint(w, `
Flags:
  --config FILE         broker settings in Java properties format (key=value
                        or key: value; # and ! comments; \ continues a line)
  --override key=value  a setting that wins over the file; repeatable
  --log-level LEVEL     debug, info, warn or error (default info); logs go
                        to stderr, one line per state change (leadership,
                        controller, uploads, retention), nothing per request
                        below debug
  --log-format FORMAT   text (the default, key=value) or json (one JSON
                        object per line, log/slog's JSON handler)

Settings (Kafka's names; an unknown key or a bad value stops the broker
with exit status 2 and a message naming it):
`)
	for _, d := range broker.BrokerSettingsReference() {
		fmt.Fprintf(w, "  %-36s %s\n", d.Name, settingHelp(d))
	}
	fmt.Fprint(w, `
Topic configs (per topic through CreateTopics, AlterConfigs and
IncrementalAlterConfigs; the settings above marked "broker default of
topic config" give their defaults; docs/configuration.md has the details):
`)
	var names []string
	for _, d := range broker.TopicConfigsReference() {
		names = append(names, d.Name)
	}
	fmt.Fprint(w, wrapList(names, "  ", 76))
	fmt.Fprint(w, `
Tiered storage (remote.storage.enable on a topic, or
remote.log.storage.system.enable for all): sealed segments are uploaded to
the object store (S3/MinIO with remote.storage.s3.*, else the directory
remote.storage.dir); local segments are deleted by local.retention.* only
once uploaded; fetches below the local log start are served from the store
through the chunk cache in remote.cache.dir.
An unreachable store is logged at start and retried; local data is served
meanwhile.

Cluster (zookeeper.connect set):
  Every broker registers in ZooKeeper and campaigns for the controller
  role; the controller assigns replicas (rack-aware), elects a new leader
  from the in-sync replicas within about zookeeper.session.timeout.ms of a
  broker's death, and moves leadership back to the preferred replica
  (auto.leader.rebalance.enable). Clients are told NOT_LEADER_OR_FOLLOWER
  by brokers that do not lead a partition and follow the metadata to the
  leader. While ZooKeeper is unreachable the brokers keep serving produce
  and fetch for the partitions they lead. Followers replicate from the
  leader over gRPC (replication.port, 0 = a free port, published in
  ZooKeeper), with Kafka's ISR, high watermark and leader epochs: acks=all
  answers once the in-sync replicas have the batch (min.insync.replicas),
  a follower lagging past replica.lag.time.max.ms leaves the ISR, and a
  broker that comes back truncates what it alone had and catches up.

Metrics and profiling:
  metrics.listener (default 127.0.0.1:9404; empty serves none) serves
  Prometheus metrics at /metrics and the /healthz (alive) and /readyz
  (registered and serving) probes: requests, errors and latency per API,
  bytes in and out per topic, connections per listener, the active
  controller, under-replicated and offline partitions, ISR shrinks and
  expands, per-partition sizes and offsets, upload lag, remote fetches,
  chunk cache, groups and consumer lag (docs/monitoring.md lists them,
  with the Grafana dashboard and alert rules in deploy/). A broker that
  cannot bind it does not start. strata.pprof.listener=127.0.0.1:6060
  serves Go's pprof at
  /debug/pprof/ on its own listener; keep it on a loopback address.

Consumer groups:
  A group's coordinator is the leader of its partition of the internal
  topic __consumer_offsets, which holds committed offsets and group state.
  It is created with offsets.topic.num.partitions partitions and
  min(offsets.topic.replication.factor, live brokers) replicas: by a single
  node at its first start, in a cluster by the first FindCoordinator. It is
  compacted (cleanup.policy=compact: the log cleaner keeps the latest
  commit of each key; log.cleaner.*), with no retention by time or size.
  Clients may read it but not produce to it, delete it, add partitions or
  limit its retention. Transactions are not supported.

Examples:
  strata broker --override listeners=PLAINTEXT://127.0.0.1:0 \
      --override log.dirs=/tmp/strata-data --override num.partitions=3
  kcat -b 127.0.0.1:9092 -P -t demo -K: <<< 'k1:hello'
  kcat -b 127.0.0.1:9092 -C -t demo -o beginning -e

  # one of three brokers of a cluster (ids 1-3, ports 9092-9094)
  strata broker --override broker.id=1 \
      --override listeners=PLAINTEXT://127.0.0.1:9092 \
      --override log.dirs=/tmp/strata-1 \
      --override zookeeper.connect=127.0.0.1:2181/strata
`)
}

// settingHelp is a broker setting's help line: its text, then its type,
// accepted values and default.
func settingHelp(d broker.SettingDoc) string {
	var meta []string
	if d.TopicConfig != "" {
		meta = append(meta, "broker default of topic config "+d.TopicConfig)
	}
	typ := d.Type
	if d.Valid != "" {
		typ += ", " + d.Valid
	}
	meta = append(meta, typ)
	switch {
	case !d.HasDefault:
		meta = append(meta, "if unset: "+d.Unset)
	case d.Default == "":
		meta = append(meta, "default empty")
	default:
		meta = append(meta, "default "+d.Default)
	}
	return d.Doc + " (" + strings.Join(meta, "; ") + ")"
}

// wrapList joins names with ", " into lines of at most width columns, each
// starting with indent.
func wrapList(names []string, indent string, width int) string {
	var b, line strings.Builder
	for i, n := range names {
		item := n
		if i < len(names)-1 {
			item += ","
		}
		if line.Len() > 0 && line.Len()+1+len(item) > width {
			b.WriteString(line.String() + "\n")
			line.Reset()
		}
		if line.Len() == 0 {
			line.WriteString(indent + item)
		} else {
			line.WriteString(" " + item)
		}
	}
	if line.Len() > 0 {
		b.WriteString(line.String() + "\n")
	}
	return b.String()
}

func runBroker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors reported below
	fs.Usage = func() {}     // printed below: to stdout for --help, stderr otherwise
	configFile := fs.String("config", "", "properties file")
	logLevel := fs.String("log-level", "info", "log level")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	var overrides overrideFlag
	fs.Var(&overrides, "override", "key=value")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			brokerUsage(stdout)
			return 0
		}
		reportFlagError(stderr, "broker", fs, err)
		fmt.Fprintln(stderr, "Run 'strata broker --help' for the flags and settings.")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata broker: unexpected argument %q (settings go in --override key=value)\n", fs.Arg(0))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "strata broker: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	if *logFormat != "text" && *logFormat != "json" {
		fmt.Fprintf(stderr, "strata broker: --log-format %q: want text or json\n", *logFormat)
		return 2
	}

	cfg, err := loadBrokerConfig(*configFile, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "strata broker: %v\n", err)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	logger := slog.New(handler)
	cfg.Logger = logger

	srv, err := broker.NewServer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata broker: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	addr := srv.Addr().String()
	logger.Info("strata broker listening on "+addr, "broker_id", cfg.BrokerID, "cluster_id", srv.ClusterID(), "log_dirs", strings.Join(cfg.LogDirs, ","), "zero_copy", cfg.ZeroCopy)
	if a := srv.MetricsAddr(); a != nil {
		logger.Info("serving metrics on http://" + a.String() + "/metrics")
	}
	fmt.Fprintf(stdout, "strata broker listening on %s\n", addr)
	if ls := srv.Listeners(); len(ls) > 1 {
		for _, l := range ls {
			logger.Info("listener "+l.Name, "protocol", l.Protocol, "bound", l.Addr.String(), "advertised", l.Advertised.HostPort())
			fmt.Fprintf(stdout, "  listener %s (%s) on %s, advertised as %s\n", l.Name, l.Protocol, l.Addr, l.Advertised.HostPort())
		}
	}

	status := 0
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-served:
		logger.Error("serving failed", "err", err)
		status = 1
	case err := <-srv.Fatal():
		logger.Error("stopping", "err", err)
		fmt.Fprintf(stderr, "strata broker: %v\n", err)
		status = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, broker.ErrServerClosed) {
		logger.Error("shutdown", "err", err)
		status = 1
	}
	stats := srv.Stats().Map()
	var attrs []any
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		attrs = append(attrs, k, stats[k])
	}
	logger.Info("strata broker stopped", attrs...)
	return status
}
