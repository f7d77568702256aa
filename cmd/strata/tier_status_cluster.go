package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/tiering"
)

// `strata tier status --bootstrap-server` reads every figure from the
// cluster, each partition from the broker that leads it:
//
//   - ListOffsets earliest-local (-4, KIP-1005) and latest: LOCAL START
//     and LOG END (the high watermark);
//   - DescribeLogDirs: LOCAL BYTES;
//   - DescribeTieredStorage (Strata's own API, package strataapi): the
//     committed manifest's figures (REMOTE START, REMOTE END, REMOTE
//     BYTES, segments, its epoch, LAST UPLOAD), the local segment count,
//     PENDING and OLDEST PENDING, and the chunk cache's counters.
//
// The remote figures come from the manifest as one snapshot rather than
// from ListOffsets earliest / latest-tiered: those answer the log start
// (local or remote, whichever is lower) and the last tiered offset below
// the high watermark, which are not the manifest's start and end while
// an upload is committed ahead of the high watermark or nothing is remote.

// tierStatusCluster is status in cluster mode.
func tierStatusCluster(c *clientCmd, topic, format string) int {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	sess, ctx, err := c.connect(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer sess.close()
	rep := tierStatusReport{Mode: "cluster", BootstrapServers: strings.Join(sess.seeds, ","), Partitions: []tierPartitionStatus{}, Errors: []tierStatusError{}}
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	md, err := sess.adm.Metadata(ctx, topics...)
	if err != nil {
		return c.fail(err)
	}
	addrs := map[int32]string{}
	for _, b := range md.Brokers {
		addrs[b.NodeID] = brokerAddr(b.Host, b.Port)
	}
	// Which broker leads what we ask it: the partitions of topic, or
	// (no topic) every tiered partition each broker says it leads.
	answers := map[int32]*strataapi.DescribeTieredStorageResponse{}
	if topic != "" {
		td := md.Topics[topic]
		if td.Err != nil {
			rep.Errors = append(rep.Errors, tierStatusError{Topic: topic, Partition: -1, Error: td.Err.Error()})
		}
		byLeader := map[int32][]int32{}
		for _, pd := range td.Partitions.Sorted() {
			if pd.Leader < 0 || addrs[pd.Leader] == "" {
				rep.Errors = append(rep.Errors, tierStatusError{Topic: topic, Partition: pd.Partition, Error: kerr.LeaderNotAvailable.Error()})
				continue
			}
			byLeader[pd.Leader] = append(byLeader[pd.Leader], pd.Partition)
		}
		for id, parts := range byLeader {
			resp, err := describeTieredStorage(ctx, addrs[id], c.sec, []strataapi.DescribeTieredStorageRequestTopic{{Topic: topic, Partitions: parts}})
			if err != nil {
				return c.fail(err)
			}
			answers[id] = resp
		}
	} else {
		for id, addr := range addrs {
			resp, err := describeTieredStorage(ctx, addr, c.sec, nil)
			if err != nil {
				return c.fail(err)
			}
			answers[id] = resp
		}
	}

	var cache *tierCacheStatus
	for _, id := range sortedKeys(answers) {
		resp := answers[id]
		if resp.CacheHits >= 0 {
			if cache == nil {
				cache = &tierCacheStatus{}
			}
			cache.Hits += resp.CacheHits
			cache.InflightJoins += resp.CacheJoins
			cache.Misses += resp.CacheMisses
			cache.Evictions += resp.CacheEvictions
		}
		rows, errs, err := leaderRows(ctx, sess, id, resp)
		if err != nil {
			return c.fail(fmt.Errorf("broker %d: %w", id, err))
		}
		rep.Partitions = append(rep.Partitions, rows...)
		rep.Errors = append(rep.Errors, errs...)
	}
	if cache != nil {
		cache.HitRatio = tiering.ReadCounts{Hits: cache.Hits, InflightJoins: cache.InflightJoins, Misses: cache.Misses}.HitRatio()
		rep.Cache = cache
	}
	slices.SortFunc(rep.Partitions, func(a, b tierPartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	slices.SortFunc(rep.Errors, func(a, b tierStatusError) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	status := 0
	for _, e := range rep.Errors {
		fmt.Fprintf(c.stderr, "strata tier status: %s\n", e)
		status = 1
	}
	return printTierReport(c.stdout, c.stderr, &rep, format, topic == "", status)
}

// leaderRows joins one broker's DescribeTieredStorage answer with its
// ListOffsets (-4, latest) and DescribeLogDirs answers for the same
// partitions.
func leaderRows(ctx context.Context, sess *session, id int32, resp *strataapi.DescribeTieredStorageResponse) ([]tierPartitionStatus, []tierStatusError, error) {
	var rows []tierPartitionStatus
	var errs []tierStatusError
	type tp struct {
		t string
		p int32
	}
	at := map[tp]int{}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			errs = append(errs, tierStatusError{Topic: rt.Topic, Partition: -1, Error: kerr.ErrorForCode(rt.ErrorCode).Error()})
			continue
		}
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				errs = append(errs, tierStatusError{Topic: rt.Topic, Partition: p.Partition, Error: kerr.ErrorForCode(p.ErrorCode).Error()})
				continue
			}
			at[tp{rt.Topic, p.Partition}] = len(rows)
			rows = append(rows, wireRow(rt.Topic, p))
		}
	}
	if len(rows) == 0 {
		return nil, errs, nil
	}
	br := sess.cl.Broker(int(id))
	for _, spec := range []int64{-4 /* earliest local */, -1 /* latest */} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		byTopic := map[string]int{}
		for _, r := range rows {
			i, ok := byTopic[r.Topic]
			if !ok {
				i = len(req.Topics)
				byTopic[r.Topic] = i
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = r.Topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = r.Partition, spec
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		lresp, err := req.RequestWith(ctx, br)
		if err != nil {
			return nil, nil, fmt.Errorf("ListOffsets: %w", err)
		}
		for _, lt := range lresp.Topics {
			for _, lp := range lt.Partitions {
				i, ok := at[tp{lt.Topic, lp.Partition}]
				if !ok || lp.ErrorCode != 0 {
					continue // left unknown: the partition moved since DescribeTieredStorage
				}
				if spec == -4 {
					rows[i].LocalLogStart = ptr(lp.Offset)
				} else {
					rows[i].LogEnd = ptr(lp.Offset)
				}
			}
		}
	}
	dreq := kmsg.NewPtrDescribeLogDirsRequest()
	for _, r := range rows {
		if n := len(dreq.Topics); n == 0 || dreq.Topics[n-1].Topic != r.Topic {
			dt := kmsg.NewDescribeLogDirsRequestTopic()
			dt.Topic = r.Topic
			dreq.Topics = append(dreq.Topics, dt)
		}
		dreq.Topics[len(dreq.Topics)-1].Partitions = append(dreq.Topics[len(dreq.Topics)-1].Partitions, r.Partition)
	}
	dresp, err := dreq.RequestWith(ctx, br)
	if err != nil {
		return nil, nil, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	if err := kerr.ErrorForCode(dresp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	for _, d := range dresp.Dirs {
		for _, dt := range d.Topics {
			for _, dp := range dt.Partitions {
				if i, ok := at[tp{dt.Topic, dp.Partition}]; ok && !dp.IsFuture {
					rows[i].LocalBytes = ptr(dp.Size)
				}
			}
		}
	}
	return rows, errs, nil
}

// wireRow is a row from a DescribeTieredStorage partition: -1 is unknown.
func wireRow(topic string, p strataapi.DescribeTieredStoragePartition) tierPartitionStatus {
	row := tierPartitionStatus{Topic: topic, Partition: p.Partition}
	if p.RemoteLogStart >= 0 {
		row.RemoteLogStart, row.RemoteLogEnd = ptr(p.RemoteLogStart), ptr(p.RemoteLogEnd)
		row.RemoteBytes, row.RemoteSegments = ptr(p.RemoteBytes), ptr(int(p.RemoteSegments))
		row.LeaderEpoch = ptr(p.ManifestEpoch)
	}
	if p.LastUploadMs >= 0 {
		row.LastUpload = ptr(msTime(p.LastUploadMs))
	}
	if p.LocalSegments >= 0 {
		row.LocalSegments = ptr(int(p.LocalSegments))
	}
	if p.PendingSegments >= 0 {
		row.PendingSegments, row.PendingBytes = ptr(int(p.PendingSegments)), ptr(p.PendingBytes)
		row.OldestPendingSeconds = ptr(float64(p.OldestPendingMs) / 1000)
	}
	if p.CacheHits >= 0 {
		rc := tiering.ReadCounts{Hits: p.CacheHits, InflightJoins: p.CacheJoins, Misses: p.CacheMisses}
		row.CacheReads = ptr(rc.Reads())
		if rc.Reads() > 0 {
			row.CacheHitRatio = ptr(rc.HitRatio())
		}
	}
	return row
}

// tierStatusError is a partition (or, with partition -1, a topic) that
// could not be shown.
type tierStatusError struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"`
}

func (e tierStatusError) String() string {
	if e.Partition < 0 {
		return fmt.Sprintf("%s: %s", e.Topic, e.Error)
	}
	return fmt.Sprintf("%s/%d: %s", e.Topic, e.Partition, e.Error)
}

// printTierReport writes rep as format says and returns status, or 1 when
// the JSON cannot be written.
func printTierReport(stdout, stderr io.Writer, rep *tierStatusReport, format string, all bool, status int) int {
	if format == "json" {
		if err := writeTierJSON(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "strata tier status: %v\n", err)
			return 1
		}
		return status
	}
	printTierStatus(stdout, rep, all)
	return status
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeTierJSON writes v indented.
func writeTierJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// hasBootstrapFlag reports whether args give --bootstrap-server (cluster
// mode).
func hasBootstrapFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "bootstrap-server" {
			return true
		}
	}
	return false
}

const tierStatusClusterUsage = `Usage: strata tier status --bootstrap-server HOST:PORT [TOPIC | --topic TOPIC] [--format text|json]

Tiered storage per partition, read from the cluster: each partition from
the broker that leads it (ListOffsets, DescribeLogDirs, and Strata's own
DescribeTieredStorage API). See 'strata tier --help' for the columns; the
offline mode (no --bootstrap-server) reads the object store and a data
directory instead.
`

const tierStatusClusterExample = `
Example:
  strata tier status --bootstrap-server 127.0.0.1:9092 --topic orders --format json
`

// runTierStatusCluster parses cluster mode's flags and runs it.
func runTierStatusCluster(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("tier status", tierStatusClusterUsage, tierStatusClusterExample, stdout, stderr)
	topicFlag := c.fs.String("topic", "", "the topic to show (or give it as TOPIC); default every tiered partition")
	format := c.fs.String("format", "text", "output: text or json")
	pos, status, ok := c.parse(args)
	if !ok {
		return status
	}
	topic := *topicFlag
	switch {
	case len(pos) > 1:
		return c.usageError("at most one TOPIC")
	case len(pos) == 1 && topic != "" && pos[0] != topic:
		return c.usageError("TOPIC %q and --topic %q differ", pos[0], topic)
	case len(pos) == 1:
		topic = pos[0]
	}
	if *format != "text" && *format != "json" {
		return c.usageError("--format is text or json, not %q", *format)
	}
	return tierStatusCluster(c, topic, *format)
}
