package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ctClock is a settable clock for delete horizons and compaction lag.
type ctClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ctClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *ctClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// ctModel is what was produced: every record by offset, the latest offset
// of each key and the last batch of each producer.
type ctModel struct {
	recs      map[int64]Record
	latest    map[string]int64
	lastBatch map[int64]Header
	seq       map[int64]int32
}

func newCtModel() *ctModel {
	return &ctModel{recs: map[int64]Record{}, latest: map[string]int64{}, lastBatch: map[int64]Header{}, seq: map[int64]int32{}}
}

var ctCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// ctProduce appends n random batches: keys from a pool of nkeys (some
// keyless), tombstones, random codecs, some from idempotent producers.
func ctProduce(t *testing.T, l *Log, m *ctModel, rng *rand.Rand, clock *ctClock, n, nkeys int, keyless bool) {
	t.Helper()
	for range n {
		clock.advance(time.Duration(rng.IntN(50)) * time.Millisecond)
		ts := clock.now().UnixMilli()
		recs := make([]Record, 1+rng.IntN(5))
		for i := range recs {
			r := Record{Timestamp: ts + int64(i)}
			if !keyless || rng.IntN(40) != 0 {
				r.Key = fmt.Appendf(nil, "key-%03d", rng.IntN(nkeys))
			}
			if rng.IntN(7) != 0 {
				r.Value = bytes.Repeat(fmt.Appendf(nil, "v%d,", rng.Uint32()), 1+rng.IntN(20))
			}
			if rng.IntN(5) == 0 {
				r.Headers = []RecordHeader{{Key: "h", Value: []byte{byte(i)}}}
			}
			recs[i] = r
		}
		spec := BatchSpec{Codec: ctCodecs[rng.IntN(len(ctCodecs))], Records: recs}
		if rng.IntN(2) == 0 {
			pid := int64(1 + rng.IntN(3))
			spec.Idempotent, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, pid, 2, m.seq[pid]
			m.seq[pid] += int32(len(recs))
		}
		b, err := BuildBatch(spec)
		if err != nil {
			t.Fatalf("BuildBatch: %v", err)
		}
		res := lgAppend(t, l, b)
		for i, r := range recs {
			off := res.BaseOffset + int64(i)
			r.Offset = off
			m.recs[off] = r
			if r.Key != nil {
				m.latest[string(r.Key)] = off
			}
		}
		if spec.Idempotent {
			h, _ := ParseHeader(b)
			m.lastBatch[spec.ProducerID] = h
		}
	}
}

// ctRead reads the whole log through Read, checking every batch (CRC,
// offsets strictly increasing) and every record against what was produced.
func ctRead(t *testing.T, l *Log, m *ctModel) (recs []Record, headers []Header) {
	t.Helper()
	prev := int64(-1)
	for _, b := range lgReadAll(t, l) {
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
		if h.BaseOffset <= prev {
			t.Fatalf("batch at %d after offset %d", h.BaseOffset, prev)
		}
		headers = append(headers, h)
		rs, err := Records(b)
		if err != nil {
			t.Fatalf("records of batch %d: %v", h.BaseOffset, err)
		}
		for _, r := range rs {
			if r.Offset <= prev {
				t.Fatalf("record at %d after %d", r.Offset, prev)
			}
			prev = r.Offset
			want, ok := m.recs[r.Offset]
			if !ok || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) ||
				(r.Value == nil) != (want.Value == nil) || r.Timestamp != want.Timestamp || len(r.Headers) != len(want.Headers) {
				t.Fatalf("record at %d: got key %q value %q ts %d, produced key %q value %q ts %d (found %v)",
					r.Offset, r.Key, r.Value, r.Timestamp, want.Key, want.Value, want.Timestamp, ok)
			}
			recs = append(recs, r)
		}
		prev = max(prev, h.LastOffset())
	}
	return recs, headers
}

// ctCheck checks Kafka's guarantee on the log. Always: every key's latest
// non-tombstone value is at its offset; below the cleaner checkpoint no
// keyless record remains and no record older than its key's latest when
// that is below the checkpoint too; from the checkpoint on every record
// produced is there; each producer's last batch keeps its id, epoch and
// sequence. With tombstonesGone, no tombstone remains below the
// checkpoint.
func ctCheck(t *testing.T, l *Log, m *ctModel, tombstonesGone bool) {
	t.Helper()
	recs, headers := ctRead(t, l, m)
	ckpt, start := l.CleanerCheckpoint(), l.LogStartOffset()
	byOff := map[int64]Record{}
	for _, r := range recs {
		byOff[r.Offset] = r
		switch {
		case r.Offset >= ckpt:
		case r.Key == nil:
			t.Fatalf("keyless record at %d below the cleaner checkpoint %d", r.Offset, ckpt)
		case m.latest[string(r.Key)] < ckpt && m.latest[string(r.Key)] != r.Offset:
			t.Fatalf("record at %d of key %s below the checkpoint %d, its latest is at %d", r.Offset, r.Key, ckpt, m.latest[string(r.Key)])
		case tombstonesGone && r.Value == nil:
			t.Fatalf("tombstone at %d below the checkpoint %d after delete.retention.ms", r.Offset, ckpt)
		}
	}
	ctCheckLatest(t, m, byOff)
	for off := range m.recs {
		if off >= max(ckpt, start) {
			if _, ok := byOff[off]; !ok {
				t.Fatalf("record at %d, above the cleaner checkpoint %d, is gone", off, ckpt)
			}
		}
	}
	for pid, want := range m.lastBatch {
		i := slices.IndexFunc(headers, func(h Header) bool { return h.LastOffset() == want.LastOffset() })
		if i < 0 {
			t.Fatalf("last batch of producer %d (offsets %d..%d) is gone", pid, want.BaseOffset, want.LastOffset())
		}
		if h := headers[i]; h.ProducerID != pid || h.ProducerEpoch != want.ProducerEpoch || h.BaseSequence != want.BaseSequence || h.BaseOffset != want.BaseOffset {
			t.Fatalf("last batch of producer %d: pid %d epoch %d seq %d base %d, want epoch %d seq %d base %d",
				pid, h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.BaseOffset, want.ProducerEpoch, want.BaseSequence, want.BaseOffset)
		}
	}
}

// ctCheckLatest checks that every key's latest record that is not a
// tombstone is among the records read (by offset).
func ctCheckLatest(t *testing.T, m *ctModel, byOff map[int64]Record) {
	t.Helper()
	for key, off := range m.latest {
		if m.recs[off].Value == nil {
			continue
		}
		if _, ok := byOff[off]; !ok {
			t.Fatalf("latest value of %s at %d is gone", key, off)
		}
	}
}

// TestCleanConfigRejected checks CleanConfig validation.
func TestCleanConfigRejected(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	m := ctMap(t, 1<<12)
	for i, cc := range []CleanConfig{
		{},
		{Map: m, DeleteRetentionMs: -1},
		{Map: m, MinCompactionLagMs: -1},
		{Map: m, UncleanableFrom: -1},
		{Map: m, IOBufferBytes: -1},
		{Map: m, MaxDecompressed: -1},
	} {
		if _, err := l.Clean(context.Background(), cc); !errors.Is(err, ErrCleanConfig) {
			t.Errorf("#%d: got %v, want ErrCleanConfig", i, err)
		}
	}
	if _, err := l.Cleanable(CleanConfig{MinCompactionLagMs: -1}); !errors.Is(err, ErrCleanConfig) {
		t.Errorf("Cleanable: got %v, want ErrCleanConfig", err)
	}
}

func ctConfig(rng *rand.Rand) Config {
	cfg := lgConfig()
	cfg.SegmentBytes = int64(2048 + rng.IntN(8192))
	cfg.IndexIntervalBytes = rng.IntN(2048)
	return cfg
}

func ctMap(t *testing.T, bytes int) *OffsetMap {
	t.Helper()
	m, err := NewOffsetMap(bytes, 0.9)
	if err != nil {
		t.Fatalf("NewOffsetMap: %v", err)
	}
	return m
}

// ctCrashPoints are the points of a cleaning where the property test
// injects a failure and then abandons the log as a crash would.
var ctCrashPoints = []string{"mapped", "written", "before-marker", "committed", "sources-removed",
	"renamed.log", "renamed.index", "renamed.timeindex", "checkpointed"}

const ctRetentionMs = 10_000

// TestCleanProperty (STRATA_CHAOS_CLEAN_SEEDS seeds, default 5) produces random keys, values and tombstones over many
// segments, cleans with random map sizes, failing at random points of
// cleaning and swapping and reopening the directory after each failure,
// and checks the guarantee after every step; it ends with cleanings past
// delete.retention.ms and checks the tombstones are gone.
func TestCleanProperty(t *testing.T) {
	seeds := 5
	if v := os.Getenv("STRATA_CHAOS_CLEAN_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_CHAOS_CLEAN_SEEDS=%q: want a positive count", v)
		}
		seeds = n
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { ctPropertyRun(t, uint64(seed)) })
	}
}

func ctPropertyRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 18))
	clock := &ctClock{t: time.UnixMilli(1_700_000_000_000)}
	dir := t.TempDir()
	cfg := ctConfig(rng)
	m := newCtModel()
	nkeys := 5 + rng.IntN(60)
	crashAt, crashN, seen := "", 0, 0
	hook := func(point string) error {
		if point == crashAt {
			seen++
			if seen == crashN {
				return fmt.Errorf("injected failure at %s", point)
			}
		}
		return nil
	}
	open := func() *Log { return lgOpen(t, dir, cfg, WithClock(clock.now), withCleanHook(hook)) }
	l := open()
	crashes := 0
	for round := range 10 {
		ctProduce(t, l, m, rng, clock, 20+rng.IntN(60), nkeys, true)
		cc := CleanConfig{Map: ctMap(t, 24*(16+rng.IntN(200))), DeleteRetentionMs: ctRetentionMs, IOBufferBytes: 512 + rng.IntN(8192)}
		crashAt, crashN, seen = "", 0, 0
		if rng.IntN(2) == 0 {
			crashAt, crashN = ctCrashPoints[rng.IntN(len(ctCrashPoints))], 1+rng.IntN(2)
		}
		res, err := l.Clean(context.Background(), cc)
		switch {
		case err != nil && crashAt != "" && seen == crashN:
			crashes++
			lgCrash(t, l)
			l = open()
			if rep := l.Recovery(); rep.TruncatedAt >= 0 {
				t.Fatalf("round %d: recovery after a failure at %s cut the log at %d: %v", round, crashAt, rep.TruncatedAt, rep.Reason)
			}
		case err != nil:
			t.Fatalf("round %d: Clean: %v", round, err)
		default:
			t.Logf("round %d: dirty [%d, %d) mapped to %d, %d segments into %d, %d records kept of %d", round,
				res.FirstDirty, res.FirstUncleanable, res.MappedEnd, res.SegmentsRead, res.SegmentsWritten, res.RecordsKept, res.RecordsRead)
		}
		ctCheck(t, l, m, false)
		clock.advance(time.Duration(rng.IntN(2*ctRetentionMs)) * time.Millisecond)
	}
	crashAt = ""
	big := CleanConfig{Map: ctMap(t, 1<<20), DeleteRetentionMs: ctRetentionMs}
	for range 3 {
		if _, err := l.Clean(context.Background(), big); err != nil {
			t.Fatalf("final Clean: %v", err)
		}
		clock.advance(ctRetentionMs*time.Millisecond + time.Millisecond)
	}
	ctCheck(t, l, m, true)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l = open()
	ctCheck(t, l, m, true)
	t.Logf("%d crashes injected; %d segments, checkpoint %d, log end %d", crashes, len(l.Segments()), l.CleanerCheckpoint(), l.LogEndOffset())
}

// TestCleanConcurrentReadersAndAppends reads the log over and over while it
// is cleaned and, at the same time, appended to: every read succeeds, every record read is the
// one produced at its offset, and a full pass sees every key's latest value
// as of the pass's start, or a newer one.
func TestCleanConcurrentReadersAndAppends(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	clock := &ctClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	cfg.FileDeleteDelayMs = 60_000 // readers keep the files they hold
	l := lgOpen(t, t.TempDir(), cfg, WithClock(clock.now))
	var mu sync.RWMutex // guards m against the appender; a waiting appender goes before new readers
	m := newCtModel()
	ctProduce(t, l, m, rng, clock, 200, 30, false)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := 0; ctx.Err() == nil && pass < 10_000; pass++ {
				if err := ctReadPass(l, m, &mu); err != nil {
					errs <- fmt.Errorf("reader %d pass %d: %w", r, pass, err)
					return
				}
				select { // leave the appender and the cleaner some CPU
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
			}
		}()
	}
	// Each round the cleaner hands the appender a budget of batches and
	// cleans while the appender spends it, so appends and cleaning overlap
	// and the dirty section stays a few segments long.
	budget := make(chan int)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(budget)
		cm, err := NewOffsetMap(24*64, 0.9)
		if err != nil {
			errs <- err
			return
		}
		for i := range 8 {
			budget <- 40
			res, err := l.Clean(context.Background(), CleanConfig{Map: cm, DeleteRetentionMs: ctRetentionMs})
			if err != nil {
				errs <- fmt.Errorf("Clean %d: %w", i, err)
				return
			}
			t.Logf("clean %d: dirty [%d, %d), %d segments into %d, %d of %d records kept, took %v",
				i, res.FirstDirty, res.FirstUncleanable, res.SegmentsRead, res.SegmentsWritten, res.RecordsKept, res.RecordsRead, res.Duration)
		}
	}()
	for n := range budget {
		for range n {
			mu.Lock()
			ctProduce(t, l, m, rng, clock, 1, 30, false)
			mu.Unlock()
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	ctCheck(t, l, m, false)
}

// ctReadPass reads the log once from its start and checks what it read.
func ctReadPass(l *Log, m *ctModel, mu *sync.RWMutex) error {
	mu.RLock()
	want := map[string]int64{}
	for k, off := range m.latest {
		if m.recs[off].Value != nil {
			want[k] = off
		}
	}
	mu.RUnlock()
	// Read to the log end as it moves: a value may be cleaned away by a
	// newer one appended after the pass began, which the pass then reads.
	seen := map[string]int64{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		end := l.LogEndOffset()
		buf, err := l.ReadCopy(off, 1<<16, end)
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return fmt.Errorf("empty read at %d below %d", off, end)
		}
		err = SplitBatches(buf, func(h Header, b []byte) error {
			rs, err := Records(b)
			if err != nil {
				return err
			}
			mu.RLock()
			defer mu.RUnlock()
			for _, r := range rs {
				p := m.recs[r.Offset]
				if !bytes.Equal(p.Key, r.Key) || !bytes.Equal(p.Value, r.Value) {
					return fmt.Errorf("record at %d is not the one produced", r.Offset)
				}
				seen[string(r.Key)] = max(seen[string(r.Key)], r.Offset)
			}
			off = h.NextOffset()
			return nil
		})
		if err != nil {
			return err
		}
	}
	for k, off := range want {
		if seen[k] < off {
			return fmt.Errorf("key %s: latest value at %d not seen (saw up to %d)", k, off, seen[k])
		}
	}
	return nil
}

// TestCleanCompressedAndIdempotent cleans batches of every codec and checks
// the rewritten batches keep codec, attributes and producer fields, and
// that a producer's last batch survives empty.
func TestCleanCompressedAndIdempotent(t *testing.T) {
	for _, codec := range ctCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			cfg := lgConfig()
			cfg.SegmentBytes = 1 << 20
			l := lgOpen(t, t.TempDir(), cfg)
			mk := func(pid int64, seq int32, keys ...string) []byte {
				var recs []Record
				for _, k := range keys {
					recs = append(recs, Record{Timestamp: 1000 + int64(len(recs)), Key: []byte(k), Value: []byte("value of " + k + fmt.Sprint(seq))})
				}
				b, err := BuildBatch(BatchSpec{Codec: codec, Idempotent: true, ProducerID: pid, ProducerEpoch: 3, BaseSequence: seq, Records: recs})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			lgAppend(t, l, mk(7, 0, "a", "b", "c")) // 0..2: b stays
			lgAppend(t, l, mk(8, 0, "a", "c"))      // 3..4: superseded wholly, producer 8's last batch
			lgAppend(t, l, mk(7, 3, "a", "c"))      // 5..6
			if _, err := l.rollForTest(); err != nil {
				t.Fatal(err)
			}
			lgAppend(t, l, mk(9, 0, "z")) // active
			res, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16)})
			if err != nil {
				t.Fatal(err)
			}
			if res.EmptyBatchesKept != 1 || res.SegmentsWritten != 1 {
				t.Fatalf("got %d empty batches kept, %d segments written; want 1, 1", res.EmptyBatchesKept, res.SegmentsWritten)
			}
			batches := lgReadAll(t, l)
			if len(batches) != 4 {
				t.Fatalf("got %d batches, want 4", len(batches))
			}
			want := []struct {
				base, last int64
				pid        int64
				seq        int32
				keys       string
				codec      Codec
			}{{0, 2, 7, 0, "b", codec}, {3, 4, 8, 0, "", CodecNone}, {5, 6, 7, 3, "ac", codec}, {7, 7, 9, 0, "z", codec}}
			for i, b := range batches {
				h, _ := ValidateBatch(b)
				rs, err := Records(b)
				if err != nil {
					t.Fatal(err)
				}
				var keys string
				for _, r := range rs {
					keys += string(r.Key)
				}
				w := want[i]
				if h.BaseOffset != w.base || h.LastOffset() != w.last || h.ProducerID != w.pid || h.BaseSequence != w.seq ||
					h.ProducerEpoch != 3 || keys != w.keys || h.Compression() != w.codec {
					t.Fatalf("#%d: got base %d last %d pid %d seq %d epoch %d keys %q codec %s, want %+v",
						i, h.BaseOffset, h.LastOffset(), h.ProducerID, h.BaseSequence, h.ProducerEpoch, keys, h.Compression(), w)
				}
				if i == 0 && (h.MaxTimestamp != 1001 || h.BaseTimestamp != 1001) {
					t.Fatalf("#0: timestamps base %d max %d, want 1001 1001 (recomputed)", h.BaseTimestamp, h.MaxTimestamp)
				}
			}
			// Once producer 8 writes again, its empty batch goes.
			lgAppend(t, l, mk(8, 2, "q"))
			if _, err := l.rollForTest(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16)}); err != nil {
				t.Fatal(err)
			}
			for _, b := range lgReadAll(t, l) {
				if h, _ := ValidateBatch(b); h.BaseOffset == 3 {
					t.Fatalf("empty batch of producer 8 kept after its later batch: %+v", h)
				}
			}
		})
	}
}

// TestCleanTombstoneHorizon checks KIP-534: the first cleaning that keeps a
// tombstone sets its batch's delete horizon; a cleaning after the horizon
// drops it, and record timestamps survive the rewrite.
func TestCleanTombstoneHorizon(t *testing.T) {
	clock := &ctClock{t: time.UnixMilli(5_000_000)}
	l := lgOpen(t, t.TempDir(), lgConfig(), WithClock(clock.now))
	b, _ := BuildBatch(BatchSpec{Records: []Record{
		{Timestamp: 100, Key: []byte("a"), Value: []byte("1")},
		{Timestamp: 200, Key: []byte("a")}, // tombstone
		{Timestamp: 300, Key: []byte("b"), Value: []byte("2")},
	}})
	lgAppend(t, l, b)
	if _, err := l.rollForTest(); err != nil {
		t.Fatal(err)
	}
	cc := CleanConfig{Map: ctMap(t, 1<<12), DeleteRetentionMs: 1000}
	if _, err := l.Clean(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
	got := lgReadAll(t, l)
	h, _ := ValidateBatch(got[0])
	hz, ok := h.DeleteHorizon()
	if !ok || hz != 5_001_000 {
		t.Fatalf("delete horizon %d, %v; want 5001000", hz, ok)
	}
	rs, _ := Records(got[0])
	if len(rs) != 2 || rs[0].Offset != 1 || rs[0].Value != nil || rs[0].Timestamp != 200 || rs[1].Timestamp != 300 || h.MaxTimestamp != 300 {
		t.Fatalf("after the first cleaning: %+v, max timestamp %d", rs, h.MaxTimestamp)
	}
	clock.advance(999 * time.Millisecond)
	if _, err := l.Clean(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
	if rs, _ := Records(lgReadAll(t, l)[0]); len(rs) != 2 {
		t.Fatalf("tombstone dropped before its horizon: %+v", rs)
	}
	info, err := l.Cleanable(cc)
	if err != nil || info.EarliestDeleteHorizon != 5_001_000 {
		t.Fatalf("Cleanable: %+v, %v", info, err)
	}
	clock.advance(time.Millisecond)
	res, err := l.Clean(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := Records(lgReadAll(t, l)[0]); len(rs) != 1 || string(rs[0].Key) != "b" || res.TombstonesRemoved != 1 {
		t.Fatalf("after the horizon: %+v, %d tombstones removed", rs, res.TombstonesRemoved)
	}
}

// TestCleanMapFullAndLag checks that a full map cleans only up to where it
// got, that min.compaction.lag.ms ends the dirty section, and the dirty
// ratio.
func TestCleanMapFullAndLag(t *testing.T) {
	clock := &ctClock{t: time.UnixMilli(1_000_000)}
	cfg := lgConfig()
	cfg.SegmentBytes = 1 << 20
	l := lgOpen(t, t.TempDir(), cfg, WithClock(clock.now))
	for seg := range 4 {
		for i := range 10 {
			var recs []Record
			for k := range 5 {
				recs = append(recs, Record{Timestamp: clock.now().UnixMilli(), Key: fmt.Appendf(nil, "k%d", (seg*50+i*5+k)%40), Value: []byte("v")})
			}
			b, _ := BuildBatch(BatchSpec{Records: recs})
			lgAppend(t, l, b)
		}
		if _, err := l.rollForTest(); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Minute)
	}
	// Segments at 0, 50, 100, 150; the active one at 200. The last sealed
	// one is within a 90 s lag.
	cc := CleanConfig{Map: ctMap(t, 1<<16), MinCompactionLagMs: 90_000}
	info, err := l.Cleanable(cc)
	if err != nil || info.FirstDirty != 0 || info.FirstUncleanable != 150 || info.DirtyRatio != 1 {
		t.Fatalf("Cleanable: %+v, %v", info, err)
	}
	small := ctMap(t, 24*40) // 37 slots, 33 keys: six batches of five
	cc.Map = small
	res, err := l.Clean(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if !res.MapFull || res.MappedEnd != 30 || l.CleanerCheckpoint() != 30 {
		t.Fatalf("got map full %v, mapped end %d, checkpoint %d; want true, 30, 30", res.MapFull, res.MappedEnd, l.CleanerCheckpoint())
	}
	cc.Map = ctMap(t, 1<<16)
	if res, err = l.Clean(context.Background(), cc); err != nil || res.MappedEnd != 150 {
		t.Fatalf("second Clean: mapped end %d, %v; want 150", res.MappedEnd, err)
	}
	info, err = l.Cleanable(cc)
	if err != nil || info.FirstDirty != 150 || info.DirtyBytes != 0 {
		t.Fatalf("Cleanable after: %+v, %v", info, err)
	}
	tiny, _ := NewOffsetMap(24*16, 0.3) // 13 slots, 3 keys
	if _, err := l.Clean(context.Background(), CleanConfig{Map: tiny}); !errors.Is(err, ErrMapTooSmall) {
		t.Fatalf("Clean with a map smaller than a batch: %v, want ErrMapTooSmall", err)
	}
}

// rollForTest seals the active segment (for tests that need a sealed
// segment regardless of size).
func (l *Log) rollForTest() (SegmentInfo, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.rollLocked(l.config(), l.opts.now())
}

// TestCleanTransactionalNotMapped checks the conservative rule for
// transactions: records of transactional batches are not mapped, so they
// never remove older values (an aborted one must not), while a later
// plain record still supersedes them; control batches are kept whole.
func TestCleanTransactionalNotMapped(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	for _, spec := range []BatchSpec{
		{Records: []Record{{Timestamp: 1, Key: []byte("a"), Value: []byte("plain")}}},                                                                                         // 0
		{Idempotent: true, ProducerID: 5, ProducerEpoch: 0, Transactional: true, Records: []Record{{Timestamp: 2, Key: []byte("a"), Value: []byte("txn")}}},                   // 1
		{Idempotent: true, ProducerID: 5, ProducerEpoch: 0, BaseSequence: -1, Transactional: true, Control: true, Records: []Record{{Timestamp: 3, Key: []byte{0, 0, 0, 0}}}}, // 2: abort marker
		{Idempotent: true, ProducerID: 6, ProducerEpoch: 0, Transactional: true, Records: []Record{{Timestamp: 4, Key: []byte("b"), Value: []byte("txn")}}},                   // 3
		{Records: []Record{{Timestamp: 5, Key: []byte("b"), Value: []byte("plain")}}},                                                                                         // 4
	} {
		b, err := BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		lgAppend(t, l, b)
	}
	if _, err := l.rollForTest(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<12), ProducerLastOffsets: map[int64]int64{}}); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, b := range lgReadAll(t, l) {
		rs, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			offsets = append(offsets, r.Offset)
		}
	}
	if want := []int64{0, 1, 2, 4}; !slices.Equal(offsets, want) {
		t.Fatalf("offsets kept %v, want %v", offsets, want)
	}
}
