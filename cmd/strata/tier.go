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
	"text/tabwriter"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/tiering"
)

func init() {
	register(&command{
		name:    "tier",
		summary: "tiered storage: status of what is in the object store, restore topics from it",
		run:     runTier,
	})
}

const tierUsage = `Usage:
  strata tier status [TOPIC] [--config FILE] [--override key=value]...
  strata tier restore (--topic TOPIC | --all) [--config FILE] [--override key=value]...

The object store is the broker's: --config and --override take the
broker's settings (remote.storage.s3.*, remote.storage.dir, log.dirs);
credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the
rest of the AWS chain. With none of them, the local-directory store
./data/objects.

status   per partition of each topic in the store (or TOPIC): remote log
         start and end, segments, bytes, the leader epoch of the last
         manifest write and the last upload time.
restore  recreates topics from the store in this broker's cluster: same
         topic id, partitions and configs, each partition starting at its
         remote end, so consumers read from offset 0 and producers continue
         after the last remote offset. Run it with the broker's settings
         while that broker is stopped (it runs the broker in-process on a
         free local port, restores, and stops); topics that exist are
         skipped. It prints progress as it goes.

Example:
  strata tier status --config server.properties
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
	fs := flag.NewFlagSet("strata tier "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tierUsage) }
	configFile := fs.String("config", "", "broker settings file")
	var overrides overrideFlag
	fs.Var(&overrides, "override", "broker setting key=value; repeatable")
	topic := fs.String("topic", "", "topic to restore")
	all := fs.Bool("all", false, "restore every topic in the store")
	// Allow TOPIC before the flags.
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	pos = append(pos, fs.Args()...)
	cfg, err := loadBrokerConfig(*configFile, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier: %v\n", err)
		return 2
	}
	switch sub {
	case "status":
		if len(pos) > 1 {
			fmt.Fprintf(stderr, "strata tier status: at most one TOPIC\n")
			return 2
		}
		return tierStatus(cfg, pos, stdout, stderr)
	case "restore":
		if len(pos) > 0 || (*topic == "") == !*all {
			fmt.Fprintf(stderr, "strata tier restore: give --topic TOPIC or --all\n")
			return 2
		}
		return tierRestore(cfg, *topic, stdout, stderr)
	}
	fmt.Fprintf(stderr, "strata tier: unknown subcommand %q\n\n%s", sub, tierUsage)
	return 2
}

func openTierStore(ctx context.Context, cfg broker.Config) (tiering.ObjectStore, string, error) {
	sc := cfg.Tiering.Store
	if sc.Dir == "" {
		sc.Dir = filepath.Join(cfg.LogDir, "objects")
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

func tierStatus(cfg broker.Config, pos []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, what, err := openTierStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier status: %v\n", err)
		return 1
	}
	topics := pos
	if len(topics) == 0 {
		if topics, err = tiering.ListRemoteTopics(ctx, st); err != nil {
			fmt.Fprintf(stderr, "strata tier status: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "object store: %s\n", what)
	if len(topics) == 0 {
		fmt.Fprintln(stdout, "no topics in the object store")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREMOTE START\tREMOTE END\tSEGMENTS\tBYTES\tEPOCH\tLAST UPLOAD")
	status := 0
	for _, name := range topics {
		rt, err := tiering.LoadRemoteTopic(ctx, st, name, nil)
		if err != nil {
			fmt.Fprintf(stderr, "strata tier status: %s: %v\n", name, err)
			status = 1
			continue
		}
		for _, rp := range rt.Partitions {
			m := rp.Manifest
			last := "-"
			if n := len(m.Segments); n > 0 {
				last = m.Segments[n-1].UploadedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", name, rp.Partition, m.LogStartOffset, m.EndOffset(), len(m.Segments), m.Bytes(), m.LeaderEpoch, last)
		}
	}
	_ = tw.Flush()
	return status
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
	cfg.Listen = "127.0.0.1:0"
	cfg.AdvertisedHost, cfg.AdvertisedPort = "", 0
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(stdout, "starting the broker in-process on %s to recreate the topics\n", cfg.LogDir)
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
