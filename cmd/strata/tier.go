package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/tiering"
)

func init() {
	register(&command{
		name:    "tier",
		summary: "tiered storage: status of what is in the object store, restore topics from it",
		run:     runTier,
		// status and restore, parsed by runTier.
		actionNames: []string{"status", "restore"},
	})
}

const tierUsage = `Usage:
  strata tier status [TOPIC | --topic TOPIC] [--format text|json] [--metrics-url URL] [--config FILE] [--override key=value]...
  strata tier status --bootstrap-server HOST:PORT [TOPIC | --topic TOPIC] [--format text|json] [security flags]
  strata tier restore (TOPIC | --topic TOPIC | --all) [--config FILE] [--override key=value]...

Both take the broker's settings: --config and --override read the same
properties as strata broker (remote.storage.s3.*, remote.storage.dir,
log.dirs, metrics.listener); credentials come from AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY or the rest of the AWS chain. With no store
settings, the local-directory store <log.dirs>/objects.

status   one row per partition of each topic in the store (or of TOPIC),
         joined from three sources, each for what only it knows:
           object store (the committed manifests): REMOTE START, REMOTE
             END, REMOTE BYTES, LAST UPLOAD (the newest remote segment's
             commit time);
           this broker's data directory (log.dirs; read only, so the
             broker may be running or stopped): LOCAL START, LOG END
             (after the last complete batch on disk), LOCAL BYTES, PENDING
             (sealed local segments not yet in the manifest) and OLDEST
             PENDING (age of the first of them, by its file's mtime). On
             a follower these are the segments it holds back from
             deletion until the leader uploads them;
           the broker's Prometheus endpoint (metrics.listener, or
             --metrics-url): CACHE HIT, the share of the partition's remote
             reads the chunk cache served without a GET of their own, since
             the broker started. The cache lives in the broker process, so
             with the broker stopped, or no endpoint, it shows "-".
         "-" marks what a source does not have (no local replica, nothing
         remote yet). --format json prints the same as one JSON object,
         with segment counts, pending bytes and the manifest's leader epoch.
         With --bootstrap-server (cluster mode) every column comes from
         the cluster instead, each partition from the broker leading it:
         LOCAL START and LOG END from ListOffsets (earliest-local, latest:
         the high watermark), LOCAL BYTES from DescribeLogDirs, the rest
         from Strata's DescribeTieredStorage API (the leader's committed
         manifest, its pending segments, its chunk cache); no broker
         settings are read. Without TOPIC, every tiered partition the
         brokers lead. The columns and JSON fields are the same in both
         modes; JSON's "mode" says which one ("offline" or "cluster") and
         "errors" lists what could not be shown (an unknown topic, a
         partition without a leader).
restore  recreates topics from the store in this broker's cluster: same
         topic id, partitions and configs, each partition starting at its
         remote end, so consumers read from offset 0 and producers continue
         after the last remote offset. Run it with the broker's settings
         while that broker is stopped (it runs the broker in-process on a
         free local port, restores, and stops); topics that exist are
         skipped. It prints progress as it goes.

Exit status: 0 on success; 1 when the store, a topic, or an explicit
--metrics-url cannot be read (in cluster mode: a broker, or a topic or
partition); 2 for a usage error.

Example:
  strata tier status --config server.properties
  strata tier status orders --format json --metrics-url 127.0.0.1:9100
  strata tier status --bootstrap-server broker1:9092 --topic orders
  strata tier restore --all --config server.properties && strata broker --config server.properties
`

func runTier(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, tierUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	if sub == "status" && hasBootstrapFlag(args) {
		return runTierStatusCluster(args, stdout, stderr)
	}
	fs := flag.NewFlagSet("strata tier "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors reported below
	fs.Usage = func() {}
	configFile := fs.String("config", "", "broker settings file")
	var overrides overrideFlag
	fs.Var(&overrides, "override", "broker setting key=value; repeatable")
	topic := fs.String("topic", "", "the topic (or give it as the argument)")
	all := fs.Bool("all", false, "restore every topic in the store")
	format := addFormatFlag(fs)
	metricsURL := fs.String("metrics-url", "", "status: the broker's Prometheus endpoint (default from metrics.listener)")
	// TOPIC may come before, between or after the flags.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if !reportFlagError(stderr, "tier "+sub, fs, err) {
				fmt.Fprint(stdout, tierUsage)
				return 0
			}
			fmt.Fprintln(stderr, "Run 'strata tier --help' for its flags and an example.")
			return 2
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	cfg, err := loadBrokerConfig(*configFile, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier: %v\n", err)
		return 2
	}
	if err := bindArgs(fs, "topic", pos); err != nil { // TOPIC is --topic
		fmt.Fprintf(stderr, "strata tier %s: %v\n", sub, err)
		return 2
	}
	if *topic != "" {
		pos = []string{*topic}
	}
	switch sub {
	case "status":
		if len(pos) > 1 {
			fmt.Fprintf(stderr, "strata tier status: at most one TOPIC\n")
			return 2
		}
		if *all {
			fmt.Fprintf(stderr, "strata tier status: --all is restore's; without TOPIC, status shows every topic\n")
			return 2
		}
		return tierStatus(cfg, pos, tierStatusOptions{format: format.String(), metricsURL: *metricsURL, metricsNeeded: *metricsURL != ""}, stdout, stderr)
	case "restore":
		if format.json() || *metricsURL != "" {
			fmt.Fprintf(stderr, "strata tier restore: --format and --metrics-url are status's\n")
			return 2
		}
		if (*topic == "") == !*all {
			fmt.Fprintf(stderr, "strata tier restore: give TOPIC (or --topic TOPIC) or --all\n")
			return 2
		}
		return tierRestore(cfg, *topic, stdout, stderr)
	}
	fmt.Fprintf(stderr, "strata tier: unknown subcommand %q%s\n\n%s", sub, didYouMean(sub, []string{"status", "restore"}, ""), tierUsage)
	return 2
}

func openTierStore(ctx context.Context, cfg broker.Config) (tiering.ObjectStore, string, error) {
	sc := cfg.Tiering.Store
	if sc.Dir == "" {
		sc.Dir = filepath.Join(cfg.MetaDir(), "objects")
	}
	what := "directory " + sc.Dir
	if sc.UsesS3() {
		what = fmt.Sprintf("bucket %s at %s", sc.S3.Bucket, sc.S3.Endpoint)
	} else if _, err := os.Stat(sc.Dir); err != nil {
		return nil, what, fmt.Errorf("object store %s: %w", what, err)
	}
	st, err := tiering.OpenStore(ctx, sc)
	if err != nil {
		return nil, what, err
	}
	if err := tiering.CheckStore(ctx, st); err != nil {
		return nil, what, fmt.Errorf("object store %s: %w", what, err)
	}
	return st, what, nil
}

func tierRestore(cfg broker.Config, topic string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	st, what, err := openTierStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier restore: %v\n", err)
		return 1
	}
	topics := []string{topic}
	if topic == "" {
		if topics, err = tiering.ListRemoteTopics(ctx, st); err != nil {
			fmt.Fprintf(stderr, "strata tier restore: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "restoring %d topic(s) from %s\n", len(topics), what)
	// Read what there is first, with progress.
	var found []*tiering.RemoteTopic
	for _, name := range topics {
		rt, err := tiering.LoadRemoteTopic(ctx, st, name, func(done, total int) {
			fmt.Fprintf(stdout, "  %s: manifests %d/%d\n", name, done, total)
		})
		if err != nil {
			fmt.Fprintf(stderr, "strata tier restore: %s: %v\n", name, err)
			continue
		}
		found = append(found, rt)
	}
	if len(found) == 0 {
		fmt.Fprintln(stderr, "strata tier restore: nothing to restore")
		return 1
	}
	cfg.Tiering.Restore = nil
	for _, rt := range found {
		cfg.Tiering.Restore = append(cfg.Tiering.Restore, rt.Name)
	}
	cfg.Listeners = []broker.ListenerAddr{{Name: "PLAINTEXT", Host: "127.0.0.1"}}
	cfg.AdvertisedListeners = nil
	cfg.InterBrokerListener = "PLAINTEXT"
	cfg.ListenerProtocols = map[string]broker.SecurityProtocol{"PLAINTEXT": broker.ProtocolPlaintext}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(stdout, "starting the broker in-process on %s to recreate the topics\n", strings.Join(cfg.LogDirs, ","))
	srv, err := broker.NewServer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier restore: %v\n", err)
		return 1
	}
	status := 0
	for _, rt := range found {
		if !srv.HasTopic(rt.Name) {
			fmt.Fprintf(stderr, "strata tier restore: %s: not restored (see the log above)\n", rt.Name)
			status = 1
			continue
		}
		var records int64
		for _, rp := range rt.Partitions {
			records += rp.Manifest.EndOffset() - rp.Manifest.LogStartOffset
		}
		fmt.Fprintf(stdout, "restored %s: %d partitions (%d with remote data), %d remote records\n", rt.Name, rt.NumPartitions, len(rt.Partitions), records)
	}
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, broker.ErrServerClosed) {
		fmt.Fprintf(stderr, "strata tier restore: stopping the broker: %v\n", err)
		status = 1
	}
	return status
}
