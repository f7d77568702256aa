package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
)

// `strata tier status` joins three sources, each for what only it knows:
//
//   - the object store: each partition's committed manifest (remote log
//     start and end, remote bytes and segments, the epoch that wrote it,
//     the last upload time), the truth about what is remote;
//   - the broker's data directory (log.dirs), read without locks or
//     writes by tiering.InspectLocal: local log start and end, local
//     bytes, and the sealed segments not in the manifest (pending upload)
//     with the age of the oldest. Works with the broker stopped too;
//   - the broker's Prometheus endpoint (metrics.listener, or
//     --metrics-url): the chunk cache's reads per partition. The cache
//     and its counters live in the broker process only, so without the
//     endpoint the hit ratio is not shown.

// tierStatusOptions are status's flags.
type tierStatusOptions struct {
	format        string // text or json
	metricsURL    string // explicit --metrics-url, "" to derive it
	metricsNeeded bool   // --metrics-url given: failing to read it is an error
}

// tierStatusReport is the JSON output of `strata tier status --format json`.
type tierStatusReport struct {
	// Mode is "offline" (the object store and this machine's data
	// directory) or "cluster" (--bootstrap-server: the brokers).
	Mode string `json:"mode"`
	// BootstrapServers is --bootstrap-server in cluster mode.
	BootstrapServers string `json:"bootstrap_servers,omitempty"`
	// ObjectStore and DataDir are what offline mode read ("" in cluster
	// mode).
	ObjectStore  string `json:"object_store"`
	DataDir      string `json:"data_dir"`
	DataDirFound bool   `json:"data_dir_found"`
	// MetricsURL is the broker endpoint read, null when none is known.
	MetricsURL   *string `json:"metrics_url"`
	MetricsError string  `json:"metrics_error,omitempty"`
	// Cache is the whole chunk cache's counters since the broker started
	// (in cluster mode, summed over the brokers), null without metrics
	// (offline) or tiered storage.
	Cache      *tierCacheStatus      `json:"cache"`
	Partitions []tierPartitionStatus `json:"partitions"`
	// Errors are the topics and partitions that could not be shown.
	Errors []tierStatusError `json:"errors"`
}

type tierCacheStatus struct {
	Hits          int64   `json:"hits"`
	InflightJoins int64   `json:"inflight_joins"`
	Misses        int64   `json:"misses"`
	Evictions     int64   `json:"evictions"`
	HitRatio      float64 `json:"hit_ratio"`
}

// tierPartitionStatus is one partition. A null field is not known: no
// local replica in the data directory (local fields), no manifest (remote
// fields), or no metrics (cache fields).
type tierPartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`

	LocalLogStart  *int64 `json:"local_log_start_offset"`
	RemoteLogStart *int64 `json:"remote_log_start_offset"`
	RemoteLogEnd   *int64 `json:"remote_log_end_offset"`
	LogEnd         *int64 `json:"log_end_offset"`
	LocalBytes     *int64 `json:"local_bytes"`
	RemoteBytes    *int64 `json:"remote_bytes"`
	LocalSegments  *int   `json:"local_segments"`
	RemoteSegments *int   `json:"remote_segments"`

	PendingSegments      *int     `json:"pending_segments"`
	PendingBytes         *int64   `json:"pending_bytes"`
	OldestPendingSeconds *float64 `json:"oldest_pending_seconds"`

	LastUpload  *time.Time `json:"last_upload"`
	LeaderEpoch *int32     `json:"manifest_leader_epoch"`

	CacheReads    *int64   `json:"cache_reads"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"`
}

func tierStatus(cfg broker.Config, pos []string, opts tierStatusOptions, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, what, err := openTierStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata tier status: %v\n", err)
		return 1
	}
	status := 0
	rep := tierStatusReport{Mode: "offline", ObjectStore: what, DataDir: strings.Join(cfg.LogDirs, ","), Partitions: []tierPartitionStatus{}, Errors: []tierStatusError{}}
	var found []string // the directories of log.dirs that exist
	for _, d := range cfg.LogDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			found = append(found, d)
		}
	}
	rep.DataDirFound = len(found) > 0

	// The broker's metrics, when there is an endpoint to read.
	var bm *brokerTierMetrics
	if url := tierMetricsURL(cfg, opts.metricsURL); url != "" {
		rep.MetricsURL = &url
		bm, err = scrapeTierMetrics(ctx, url)
		if err != nil {
			rep.MetricsError = err.Error()
			if opts.metricsNeeded {
				fmt.Fprintf(stderr, "strata tier status: %v\n", err)
				status = 1
			} else {
				fmt.Fprintf(stderr, "strata tier status: cache hit ratio not shown: %v (is the broker running?)\n", err)
			}
		} else {
			rep.Cache = &bm.cache
		}
	}

	topics := pos
	if len(topics) == 0 {
		if topics, err = tiering.ListRemoteTopics(ctx, st); err != nil {
			fmt.Fprintf(stderr, "strata tier status: %v\n", err)
			return 1
		}
		if bm != nil {
			// Tiered topics this broker archives that uploaded nothing yet.
			for k := range bm.archived {
				topics = append(topics, k.Topic)
			}
			slices.Sort(topics)
			topics = slices.Compact(topics)
		}
	}
	now := time.Now()
	for _, name := range topics {
		rows, err := topicTierStatus(ctx, st, found, name, bm, now)
		if err != nil {
			fmt.Fprintf(stderr, "strata tier status: %s: %v\n", name, err)
			rep.Errors = append(rep.Errors, tierStatusError{Topic: name, Partition: -1, Error: err.Error()})
			status = 1
		}
		rep.Partitions = append(rep.Partitions, rows...)
	}

	return printTierReport(stdout, stderr, &rep, opts.format, len(pos) == 0, status)
}

// topicTierStatus returns the rows of one topic's partitions: those with
// a manifest, a local directory, or an archiver the metrics report.
func topicTierStatus(ctx context.Context, st tiering.ObjectStore, logDirs []string, topic string, bm *brokerTierMetrics, now time.Time) ([]tierPartitionStatus, error) {
	manifests := map[int32]*tiering.Manifest{}
	rt, err := tiering.LoadRemoteTopic(ctx, st, topic, nil)
	switch {
	case err == nil:
		for _, rp := range rt.Partitions {
			manifests[rp.Partition] = rp.Manifest
		}
	case !tiering.IsNotFound(err):
		return nil, err
	}
	parts := map[int32]bool{}
	for p := range manifests {
		parts[p] = true
	}
	local, err := localPartitions(logDirs, topic)
	if err != nil {
		return nil, err
	}
	for p := range local {
		parts[p] = true
	}
	if bm != nil {
		for k := range bm.archived {
			if k.Topic == topic {
				parts[k.Partition] = true
			}
		}
	}
	if len(parts) == 0 {
		return nil, errors.New("not in the object store, and no partition of it in the data directory")
	}
	var rows []tierPartitionStatus
	var firstErr error
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		row := tierPartitionStatus{Topic: topic, Partition: p}
		m := manifests[p]
		if m != nil {
			row.RemoteLogStart, row.RemoteLogEnd = ptr(m.LogStartOffset), ptr(m.EndOffset())
			row.RemoteBytes, row.RemoteSegments = ptr(m.Bytes()), ptr(len(m.Segments))
			row.LeaderEpoch = ptr(m.LeaderEpoch)
			if n := len(m.Segments); n > 0 {
				// Milliseconds, as DescribeTieredStorage carries it.
				row.LastUpload = ptr(m.Segments[n-1].UploadedAt.UTC().Truncate(time.Millisecond))
			}
		}
		if dir, ok := local[p]; ok {
			ls, err := tiering.InspectLocal(dir, m, now)
			switch {
			case err == nil:
				row.LocalLogStart, row.LogEnd = ptr(ls.LogStart), ptr(ls.LogEnd)
				row.LocalBytes, row.LocalSegments = ptr(ls.Bytes), ptr(ls.Segments)
				row.PendingSegments, row.PendingBytes = ptr(ls.SegmentsPending), ptr(ls.BytesPending)
				row.OldestPendingSeconds = ptr(ls.OldestPending.Seconds())
			case !errors.Is(err, fs.ErrNotExist) && firstErr == nil:
				firstErr = err
			}
		}
		if bm != nil {
			rc := bm.reads[tiering.PartitionKey{Topic: topic, Partition: p}]
			row.CacheReads = ptr(rc.Reads())
			if rc.Reads() > 0 {
				row.CacheHitRatio = ptr(rc.HitRatio())
			}
		}
		rows = append(rows, row)
	}
	return rows, firstErr
}

// printTierStatus writes the text form.
func printTierStatus(w io.Writer, rep *tierStatusReport, all bool) {
	if rep.Mode == "cluster" {
		printTierClusterHeader(w, rep)
	} else {
		printTierOfflineHeader(w, rep)
	}
	if len(rep.Partitions) == 0 {
		if all && rep.Mode == "cluster" {
			fmt.Fprintln(w, "no tiered partitions")
		} else if all {
			fmt.Fprintln(w, "no topics in the object store")
		}
		return
	}
	printTierRows(w, rep.Partitions)
}

// printTierClusterHeader writes the lines above cluster mode's rows.
func printTierClusterHeader(w io.Writer, rep *tierStatusReport) {
	fmt.Fprintf(w, "cluster: %s (each partition from the broker that leads it)\n", rep.BootstrapServers)
	if c := rep.Cache; c != nil {
		fmt.Fprintf(w, "chunk cache since the brokers started: %s, %d hits, %d joined GETs, %d misses, %d evictions\n",
			ratioText(c.HitRatio, c.Hits+c.InflightJoins+c.Misses), c.Hits, c.InflightJoins, c.Misses, c.Evictions)
	} else {
		fmt.Fprintln(w, "chunk cache: none (no broker has tiered storage)")
	}
}

// printTierOfflineHeader writes the lines above offline mode's rows.
func printTierOfflineHeader(w io.Writer, rep *tierStatusReport) {
	fmt.Fprintf(w, "object store: %s\n", rep.ObjectStore)
	if rep.DataDirFound {
		fmt.Fprintf(w, "data directory: %s (local columns: this broker's replicas)\n", rep.DataDir)
	} else {
		fmt.Fprintf(w, "data directory: %s not found (local columns not shown)\n", rep.DataDir)
	}
	switch {
	case rep.MetricsURL == nil:
		fmt.Fprintln(w, "broker metrics: none (set metrics.listener or --metrics-url for the cache hit ratio)")
	case rep.Cache == nil:
		fmt.Fprintf(w, "broker metrics: %s not readable (cache hit ratio not shown)\n", *rep.MetricsURL)
	default:
		c := rep.Cache
		fmt.Fprintf(w, "broker metrics: %s\n", *rep.MetricsURL)
		fmt.Fprintf(w, "chunk cache since the broker started: %s, %d hits, %d joined GETs, %d misses, %d evictions\n",
			ratioText(c.HitRatio, c.Hits+c.InflightJoins+c.Misses), c.Hits, c.InflightJoins, c.Misses, c.Evictions)
	}
}

// printTierRows writes the table, the same columns in both modes.
func printTierRows(w io.Writer, rows []tierPartitionStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOCAL START\tREMOTE START\tREMOTE END\tLOG END\tLOCAL BYTES\tREMOTE BYTES\tPENDING\tOLDEST PENDING\tLAST UPLOAD\tCACHE HIT")
	for _, r := range rows {
		last := "-"
		if r.LastUpload != nil {
			last = r.LastUpload.Format(time.RFC3339)
		}
		oldest := "-"
		if r.OldestPendingSeconds != nil && r.PendingSegments != nil && *r.PendingSegments > 0 {
			oldest = (time.Duration(*r.OldestPendingSeconds * float64(time.Second))).Round(time.Second).String()
		}
		hit := "-"
		if r.CacheHitRatio != nil {
			hit = fmt.Sprintf("%.1f%%", 100**r.CacheHitRatio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition,
			optText(r.LocalLogStart), optText(r.RemoteLogStart), optText(r.RemoteLogEnd), optText(r.LogEnd),
			optText(r.LocalBytes), optText(r.RemoteBytes), optText(r.PendingSegments), oldest, last, hit)
	}
	_ = tw.Flush()
}

// ratioText is "87.5% of 16 reads".
func ratioText(ratio float64, reads int64) string {
	if reads == 0 {
		return "no reads"
	}
	return fmt.Sprintf("%.1f%% of %s", 100*ratio, plural(reads, "read"))
}

func optText[T int | int32 | int64](v *T) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(int64(*v), 10)
}

func ptr[T any](v T) *T { return &v }

// localPartitions returns the partitions of topic that have a directory
// (topic-N) in one of logDirs, with its path.
func localPartitions(logDirs []string, topic string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, logDir := range logDirs {
		ents, err := os.ReadDir(logDir)
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		for _, e := range ents {
			if t, p, ok := segment.ParsePartitionDirName(e.Name()); ok && t == topic && e.IsDir() {
				if other, dup := out[p]; dup {
					return nil, fmt.Errorf("partition %s is in two log directories: %s and %s", e.Name(), other, filepath.Join(logDir, e.Name()))
				}
				out[p] = filepath.Join(logDir, e.Name())
			}
		}
	}
	return out, nil
}

// tierMetricsURL is the broker's metrics URL: --metrics-url, else
// metrics.listener (a wildcard host read on the loopback address), else "".
func tierMetricsURL(cfg broker.Config, flagURL string) string {
	v := strings.TrimSpace(flagURL)
	if v == "" {
		host, port, err := net.SplitHostPort(cfg.MetricsListen)
		if err != nil || port == "0" {
			return "" // not set, or a port picked at start that we cannot know
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		v = net.JoinHostPort(host, port)
	}
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	if rest := v[strings.Index(v, "://")+3:]; !strings.Contains(rest, "/") {
		v += "/metrics"
	}
	return v
}

// brokerTierMetrics is what status reads from the broker's metrics.
type brokerTierMetrics struct {
	cache tierCacheStatus
	reads map[tiering.PartitionKey]tiering.ReadCounts
	// archived holds the partitions whose archiver the broker runs as
	// leader (they export strata_tier_upload_pending_segments).
	archived map[tiering.PartitionKey]bool
}

// scrapeTierMetrics reads the broker's tiering metrics at url.
func scrapeTierMetrics(ctx context.Context, url string) (*brokerTierMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("broker metrics %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("broker metrics %s: %w", url, err)
	}
	defer resp.Body.Close() // read-only: nothing to lose
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("broker metrics %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("broker metrics %s: %w", url, err)
	}
	if fams["strata_tier_cache_hits_total"] == nil {
		return nil, fmt.Errorf("broker metrics %s: no strata_tier_cache_* metrics (not a Strata broker, or no tiered storage)", url)
	}
	bm := &brokerTierMetrics{reads: map[tiering.PartitionKey]tiering.ReadCounts{}, archived: map[tiering.PartitionKey]bool{}}
	total := func(name string) int64 {
		if f := fams[name]; f != nil && len(f.Metric) > 0 {
			return int64(metricNumber(f.Metric[0]))
		}
		return 0
	}
	bm.cache = tierCacheStatus{
		Hits: total("strata_tier_cache_hits_total"), InflightJoins: total("strata_tier_cache_inflight_joins_total"),
		Misses: total("strata_tier_cache_misses_total"), Evictions: total("strata_tier_cache_evictions_total"),
	}
	bm.cache.HitRatio = tiering.ReadCounts{Hits: bm.cache.Hits, InflightJoins: bm.cache.InflightJoins, Misses: bm.cache.Misses}.HitRatio()
	if f := fams["strata_tier_cache_reads_total"]; f != nil {
		for _, m := range f.Metric {
			k, ok := partitionLabels(m)
			if !ok {
				continue
			}
			rc := bm.reads[k]
			n := int64(metricNumber(m))
			switch label(m, "result") {
			case "hit":
				rc.Hits = n
			case "join":
				rc.InflightJoins = n
			case "miss":
				rc.Misses = n
			}
			bm.reads[k] = rc
		}
	}
	if f := fams["strata_tier_upload_pending_segments"]; f != nil {
		for _, m := range f.Metric {
			if k, ok := partitionLabels(m); ok {
				bm.archived[k] = true
			}
		}
	}
	return bm, nil
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.Label {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func partitionLabels(m *dto.Metric) (tiering.PartitionKey, bool) {
	n, err := strconv.ParseInt(label(m, "partition"), 10, 32)
	t := label(m, "topic")
	if err != nil || t == "" {
		return tiering.PartitionKey{}, false
	}
	return tiering.PartitionKey{Topic: t, Partition: int32(n)}, true
}

func metricNumber(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
