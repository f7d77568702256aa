package tiering

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"github.com/stratastream/strata/segment"
)

// fixtureOpts shapes a remote log built by buildFixture.
type fixtureOpts struct {
	batches       int
	segmentBytes  int64
	indexInterval int
	maxRecords    int // records per batch, 1..maxRecords
	maxValue      int // value bytes per record, 0..maxValue
	bigEvery      int // every bigEvery-th batch carries bigValue-byte values (0: never)
	bigValue      int
	appendTime    int // every appendTime-th batch gets LogAppendTime (0: never)
	seed          uint64
}

func defaultFixtureOpts() fixtureOpts {
	return fixtureOpts{
		batches: 600, segmentBytes: 48 << 10, indexInterval: 512,
		maxRecords: 6, maxValue: 300, bigEvery: 37, bigValue: 3000, appendTime: 11, seed: 1,
	}
}

// fixtureBatch is one batch of the fixture's remote log.
type fixtureBatch struct {
	seg        int   // index in the manifest
	pos        int64 // position in the segment's .log
	base, last int64
	size       int64
}

type fixtureRecord struct{ offset, ts int64 }

// remoteFixture is a partition whose segments are all in a memStore, with
// what the tests need to check reads: every batch and record, and each
// segment's .log bytes.
type remoteFixture struct {
	store   *memStore
	key     PartitionKey
	m       *Manifest
	logs    [][]byte // .log bytes per manifest segment
	batches []fixtureBatch
	records []fixtureRecord
}

// buildFixture writes batches into a real segment.Log with small segments,
// closes it and uploads every segment's files to a memStore under a
// manifest.
func buildFixture(t testing.TB, o fixtureOpts) *remoteFixture {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = o.segmentBytes
	cfg.IndexIntervalBytes = o.indexInterval
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l, err := segment.Open(t.TempDir(), cfg, segment.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(o.seed, 7))
	ts := int64(1_700_000_000_000)
	for i := range o.batches {
		n := 1 + rng.IntN(o.maxRecords)
		recs := make([]segment.Record, n)
		for j := range recs {
			vs := rng.IntN(o.maxValue + 1)
			if o.bigEvery > 0 && i%o.bigEvery == o.bigEvery-1 {
				vs = o.bigValue
			}
			v := make([]byte, vs)
			for k := range v {
				v[k] = byte(rng.Uint32())
			}
			ts += int64(rng.IntN(20))
			recs[j] = segment.Record{Timestamp: ts - int64(rng.IntN(50)), Value: v, Key: []byte{byte(i), byte(j)}}
		}
		b, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		ao := segment.AppendOptions{LeaderEpoch: 3}
		if o.appendTime > 0 && i%o.appendTime == o.appendTime-1 {
			ao.LogAppendTime = ts + 5
		}
		if _, err := l.Append(b, ao); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f := &remoteFixture{store: newMemStore(), key: PartitionKey{Topic: "events", Partition: 2}}
	f.m = NewManifest(f.key.Topic, testTopicID, f.key.Partition)
	f.m.LeaderEpoch = 3
	for _, si := range l.Segments() {
		if si.Size == 0 {
			continue
		}
		rs := RemoteSegment{
			BaseOffset: si.BaseOffset, NextOffset: si.NextOffset, Size: si.Size,
			MaxTimestamp: si.MaxTimestamp, Epoch: 3, ID: "abc", LeaderEpochs: si.LeaderEpochs,
		}
		logBytes := mustRead(t, si.LogPath)
		f.store.put(f.m.SegmentKey(&rs, SuffixLog), logBytes)
		f.store.put(f.m.SegmentKey(&rs, SuffixIndex), mustRead(t, si.IndexPath))
		f.store.put(f.m.SegmentKey(&rs, SuffixTimeIndex), mustRead(t, si.TimeIndexPath))
		segIdx := len(f.m.Segments)
		f.m.Segments = append(f.m.Segments, rs)
		f.logs = append(f.logs, logBytes)
		pos := int64(0)
		err := segment.SplitBatches(logBytes, func(h segment.Header, batch []byte) error {
			f.batches = append(f.batches, fixtureBatch{seg: segIdx, pos: pos, base: h.BaseOffset, last: h.LastOffset(), size: int64(len(batch))})
			pos += int64(len(batch))
			recs, err := segment.Records(batch)
			for _, r := range recs {
				ts := r.Timestamp
				if h.LogAppendTime() {
					ts = h.MaxTimestamp
				}
				f.records = append(f.records, fixtureRecord{r.Offset, ts})
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f.m.LogStartOffset = f.m.Segments[0].BaseOffset
	if len(f.m.Segments) < 3 {
		t.Fatalf("fixture has %d segments, want several", len(f.m.Segments))
	}
	return f
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchFor returns the index of the batch holding offset.
func (f *remoteFixture) batchFor(offset int64) int {
	return sort.Search(len(f.batches), func(i int) bool { return f.batches[i].last >= offset })
}

// allLogBytes is every segment's .log, concatenated.
func (f *remoteFixture) allLogBytes() []byte {
	return bytes.Join(f.logs, nil)
}

func (f *remoteFixture) logKey(seg int) string {
	return f.m.SegmentKey(&f.m.Segments[seg], SuffixLog)
}

// newTestReader opens a RemoteReader over store with a cache in a temp
// dir, closed by cleanup.
func newTestReader(t testing.TB, store ObjectStore, cfg ReaderConfig) *RemoteReader {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = t.TempDir()
	}
	r, err := NewRemoteReader(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// replay reads the whole remote log from offset from, in reads of maxBytes,
// and returns the bytes.
func replay(t testing.TB, r *RemoteReader, f *remoteFixture, from int64, maxBytes int) []byte {
	t.Helper()
	return replayEach(t, r, f, from, maxBytes, nil)
}

// replayEach is replay that calls after, when not nil, after each read.
func replayEach(t testing.TB, r *RemoteReader, f *remoteFixture, from int64, maxBytes int, after func()) []byte {
	t.Helper()
	var out []byte
	for off := from; off < f.m.EndOffset(); {
		rs, err := r.Read(context.Background(), f.key, f.m, off, maxBytes)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		if rs.NextOffset <= off {
			t.Fatalf("read at %d: next offset %d does not advance", off, rs.NextOffset)
		}
		out = append(out, b...)
		off = rs.NextOffset
		if after != nil {
			after()
		}
	}
	return out
}
