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
// benchSegmentBytes, twice. "before" loads one as it is, "after" the other
// once Log.Clean has compacted it, "ratio" loads them in turn and reports
// the mean of each and their ratio; "read" reads the log through ReadCopy
// without decoding a record (the page-cache limit of a replay, from the
// same run). b.SetBytes is the log's size, so MB/s is the replay rate.
const (
	benchGroups       = 100
	benchPartitions   = 10
	benchKeys         = benchGroups * benchPartitions
	benchCommits      = 1_000_000
	benchSegmentBytes = 8 << 20
)

func BenchmarkLoadCompacted(b *testing.B) {
	dir := b.TempDir()
	// Two identical logs: dirty stays as written, clean is compacted.
	dirty, clean := openBenchLog(b, filepath.Join(dir, "dirty")), openBenchLog(b, filepath.Join(dir, "clean"))
	m, err := segment.NewOffsetMap(16<<20, 0.9) // a cleaner thread's share of the default log.cleaner.dedupe.buffer.size
	if err != nil {
		b.Fatal(err)
	}
	res, err := clean.Clean(context.Background(), segment.CleanConfig{Map: m, DeleteRetentionMs: 24 * time.Hour.Milliseconds()})
	if err != nil {
		b.Fatal(err)
	}
	segs := clean.Segments()
	active := segs[len(segs)-1].Size
	b.Logf("cleaned in %v: %d segments read, %d written, %d bytes -> %d (records %d -> %d): %d bytes in the cleaned segments, %d in the active segment (never cleaned)",
		res.Duration.Round(time.Millisecond), res.SegmentsRead, res.SegmentsWritten, logBytes(dirty), logBytes(clean), res.RecordsRead, res.RecordsKept,
		logBytes(clean)-active, active)

	b.Run("read", func(b *testing.B) { benchRead(b, dirty) })
	b.Run("before", func(b *testing.B) { benchLoad(b, dirty) })
	b.Run("after", func(b *testing.B) { benchLoad(b, clean) })
	// The ratio from loads taken in turn, so that a machine whose load
	// changes during the run slows both alike.
	b.Run("ratio", func(b *testing.B) {
		var before, after time.Duration
		for range b.N {
			before += loadOnce(b, dirty)
			after += loadOnce(b, clean)
		}
		n := float64(b.N)
		b.ReportMetric(before.Seconds()*1000/n, "before-ms")
		b.ReportMetric(after.Seconds()*1000/n, "after-ms")
		b.ReportMetric(float64(before)/float64(after), "before/after")
		b.ReportMetric(float64(logBytes(dirty))/float64(logBytes(clean)), "bytes-before/after")
		b.ReportMetric(0, "ns/op")
	})
}

// openBenchLog opens a log in dir holding benchCommits commits.
func openBenchLog(b *testing.B, dir string) *segment.Log {
	scfg := segment.DefaultConfig()
	scfg.SegmentBytes = benchSegmentBytes
	scfg.RetentionMs, scfg.RetentionBytes = -1, -1
	l, err := segment.Open(dir, scfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	began := time.Now()
	if err := appendCommits(l, benchCommits); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d commits to %d keys: %d bytes in %d segments in %v",
		benchCommits, benchKeys, logBytes(l), len(l.Segments()), time.Since(began).Round(time.Millisecond))
	return l
}

// benchLoad loads l b.N times into fresh coordinators.
func benchLoad(b *testing.B, l *segment.Log) {
	b.SetBytes(logBytes(l))
	b.ReportAllocs()
	b.ReportMetric(float64(logBytes(l)), "log-bytes")
	for range b.N {
		loadOnce(b, l)
	}
}

// loadOnce loads l into a fresh coordinator and returns how long Load
// took; the coordinator's start and close are not timed.
func loadOnce(b *testing.B, l *segment.Log) time.Duration {
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	cfg.OffsetsRetentionCheckInterval = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b.StopTimer()
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	t0 := time.Now()
	rep, err := c.Load(0, l)
	took := time.Since(t0)
	b.StopTimer()
	c.Close()
	b.StartTimer()
	if err != nil {
		b.Fatal(err)
	}
	if rep.Offsets != benchKeys {
		b.Fatalf("loaded %d offsets, want %d", rep.Offsets, benchKeys)
	}
	return took
}

// benchRead reads l from start to end b.N times, splitting the batches
// (no record decoded).
func benchRead(b *testing.B, l *segment.Log) {
	b.SetBytes(logBytes(l))
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
