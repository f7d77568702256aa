package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// Load-time benchmark of a partition of __consumer_offsets after a long
// run of commits, before and after compaction:
//
//	go test ./broker/group -run '^$' -bench BenchmarkLoadCompacted -benchtime 5x
//
// The partition receives benchCommits commits to benchKeys keys (100
// groups of 10 partitions, each OffsetCommit one batch of 10 records, as
// a consumer group commits its partitions together), rolled at
// benchSegmentBytes. "before" loads it as it is, "after" once Log.Clean has
// compacted it; "read" reads the same log through ReadCopy without
// decoding a record (the page-cache limit of a replay, from the same run).
// b.SetBytes is the log's size, so MB/s is the replay rate.
const (
	benchGroups       = 100
	benchPartitions   = 10
	benchKeys         = benchGroups * benchPartitions
	benchCommits      = 1_000_000
	benchSegmentBytes = 8 << 20
)

func BenchmarkLoadCompacted(b *testing.B) {
	dir := b.TempDir()
	scfg := segment.DefaultConfig()
	scfg.SegmentBytes = benchSegmentBytes
	scfg.RetentionMs, scfg.RetentionBytes = -1, -1
	l, err := segment.Open(filepath.Join(dir, Topic+"-0"), scfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	began := time.Now()
	if err := appendCommits(l, benchCommits); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d commits to %d keys: %d bytes in %d segments in %v",
		benchCommits, benchKeys, logBytes(l), len(l.Segments()), time.Since(began).Round(time.Millisecond))

	var before, raw time.Duration
	b.Run("read", func(b *testing.B) { raw = benchRead(b, l) })
	b.Run("before", func(b *testing.B) { before = benchLoad(b, l) })
	if raw > 0 {
		b.Logf("load before compaction against the raw read: %.1f%% of its rate", 100*float64(raw)/float64(before))
	}
	m, err := segment.NewOffsetMap(16<<20, 0.9) // a cleaner thread's share of the default log.cleaner.dedupe.buffer.size
	if err != nil {
		b.Fatal(err)
	}
	bytesBefore := logBytes(l)
	res, err := l.Clean(context.Background(), segment.CleanConfig{Map: m, DeleteRetentionMs: 24 * time.Hour.Milliseconds()})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("cleaned in %v: %d segments read, %d written, %d bytes -> %d (records %d -> %d)",
		res.Duration.Round(time.Millisecond), res.SegmentsRead, res.SegmentsWritten, bytesBefore, logBytes(l), res.RecordsRead, res.RecordsKept)
	var after time.Duration
	b.Run("after", func(b *testing.B) { after = benchLoad(b, l) })
	if after > 0 {
		b.Logf("load time before/after compaction: %v / %v = %.1fx; log bytes %d / %d = %.1fx",
			before, after, float64(before)/float64(after), bytesBefore, logBytes(l), float64(bytesBefore)/float64(logBytes(l)))
	}
}

// benchLoad loads l b.N times into fresh coordinators and returns the
// mean time of one Load.
func benchLoad(b *testing.B, l *segment.Log) time.Duration {
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	cfg.OffsetsRetentionCheckInterval = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b.SetBytes(logBytes(l))
	b.ReportAllocs()
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		c, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		rep, err := c.Load(0, l)
		total += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Offsets != benchKeys {
			b.Fatalf("loaded %d offsets, want %d", rep.Offsets, benchKeys)
		}
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(logBytes(l)), "log-bytes")
	return total / time.Duration(b.N)
}

// benchRead reads l from start to end b.N times, splitting the batches
// (no record decoded), and returns the mean time of one pass.
func benchRead(b *testing.B, l *segment.Log) time.Duration {
	b.SetBytes(logBytes(l))
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		off, end := l.LogStartOffset(), l.LogEndOffset()
		for off < end {
			buf, err := l.ReadCopy(off, replayReadBytes, end)
			if err != nil {
				b.Fatal(err)
			}
			if len(buf) == 0 {
				break
			}
			if err := segment.SplitBatches(buf, func(h segment.Header, _ []byte) error {
				off = h.NextOffset()
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return time.Since(t0) / time.Duration(b.N)
}

// appendCommits appends n offset commits round-robin over benchKeys keys,
// benchPartitions records per batch and many batches per Append.
func appendCommits(l *segment.Log, n int) error {
	const batchesPerAppend = 64
	ts := time.Now().UnixMilli()
	var buf []byte
	recs := make([]kv, benchPartitions)
	for i := 0; i < n/benchPartitions; i++ {
		g := fmt.Sprintf("group-%03d", i%benchGroups)
		for p := range benchPartitions {
			e := offsetEntry{offset: int64(i), leaderEpoch: 3, commitTime: ts, expireTime: -1}
			recs[p] = kv{key: offsetKey(g, "topic", int32(p)), value: offsetValue(e)}
		}
		batch, err := buildBatch(ts, recs)
		if err != nil {
			return err
		}
		buf = append(buf, batch...)
		if (i+1)%batchesPerAppend == 0 {
			if _, err := l.Append(buf, segment.AppendOptions{LeaderEpoch: 3}); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := l.Append(buf, segment.AppendOptions{LeaderEpoch: 3}); err != nil {
			return err
		}
	}
	return l.Sync()
}
