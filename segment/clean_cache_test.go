package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCleanRecordCacheSameOutput cleans copies of the same random log
// (keys, keyless records, tombstones, every codec, idempotent producers,
// many segments) with the map pass's record cache off, holding a part of
// the dirty section, and holding all of it, over several rounds of
// producing and cleaning: every round's files (log, index, time index,
// checkpoints) and CleanResult are the same byte for byte.
func TestCleanRecordCacheSameOutput(t *testing.T) {
	defer func(n int) { recCacheLimit = n }(recCacheLimit)
	limits := []int{0, 37, recCacheLimit}
	rng := rand.New(rand.NewPCG(5, 28))
	cfg := ctConfig(rng)
	base := t.TempDir()
	dirs := make([]string, len(limits))
	logs := make([]*Log, len(limits))
	clocks := make([]*ctClock, len(limits))
	for i := range limits {
		dirs[i] = filepath.Join(base, string(rune('a'+i)))
		clocks[i] = &ctClock{t: time.UnixMilli(1_700_000_000_000)}
		logs[i] = lgOpen(t, dirs[i], cfg, WithClock(clocks[i].now))
	}
	for round := range 6 {
		// The same batches into each log: same seed, same clock.
		for i := range limits {
			r := rand.New(rand.NewPCG(uint64(round), 99))
			ctProduce(t, logs[i], newCtModel(), r, clocks[i], 40+round*20, 30, true)
		}
		var results []CleanResult
		for i, limit := range limits {
			recCacheLimit = limit
			res, err := logs[i].Clean(context.Background(), CleanConfig{Map: ctMap(t, 24*(20+30*(round%3))), DeleteRetentionMs: ctRetentionMs, IOBufferBytes: 700})
			if err != nil {
				t.Fatalf("round %d, cache limit %d: Clean: %v", round, limit, err)
			}
			res.Duration, res.MapDuration = 0, 0
			results = append(results, res)
			clocks[i].advance(ctRetentionMs * time.Millisecond * 3 / 4)
		}
		for i := 1; i < len(limits); i++ {
			if !ctSameResult(results[0], results[i]) {
				t.Fatalf("round %d: cache limit %d gives\n%+v\nlimit 0 gives\n%+v", round, limits[i], results[i], results[0])
			}
			ctSameFiles(t, dirs[0], dirs[i])
		}
		t.Logf("round %d: %d segments read, %d records kept of %d, map full %v; files identical", round, results[0].SegmentsRead, results[0].RecordsKept, results[0].RecordsRead, results[0].MapFull)
	}
}

func ctSameResult(a, b CleanResult) bool {
	if !slices.Equal(a.AbortedTxnsDone, b.AbortedTxnsDone) {
		return false
	}
	a.AbortedTxnsDone, b.AbortedTxnsDone = nil, nil
	return reflect.DeepEqual(a, b)
}

// ctSameFiles fails unless dirs a and b hold the same segment files with
// the same bytes.
func ctSameFiles(t *testing.T, a, b string) {
	t.Helper()
	list := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, LogSuffix) || strings.HasSuffix(n, IndexSuffix) || strings.HasSuffix(n, TimeIndexSuffix) {
				names = append(names, n)
			}
		}
		return names
	}
	na, nb := list(a), list(b)
	if !slices.Equal(na, nb) {
		t.Fatalf("files differ: %v against %v", nb, na)
	}
	for _, n := range na {
		ba, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		bb, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba, bb) {
			t.Fatalf("%s differs (%d bytes against %d)", n, len(bb), len(ba))
		}
	}
}

// TestCleanByteFlippedBetweenPasses flips one byte of a dirty segment's
// records after the map pass walked them (the "mapped" hook), in the first
// batch or in one in the middle of the segment, read in one chunk or in
// chunks of 600 bytes (the batch then in a later chunk): whatever the record cache holds, the filter pass finds the batch
// corrupt (its CRC), the cleaning fails with a corruption error naming the
// batch's position, and no segment changes.
func TestCleanByteFlippedBetweenPasses(t *testing.T) {
	defer func(n int) { recCacheLimit = n }(recCacheLimit)
	for _, limit := range []int{0, recCacheLimit} {
		for _, chunk := range []int{0, 600} {
			for _, middle := range []bool{false, true} {
				ctFlipRun(t, limit, chunk, middle)
			}
		}
	}
}

func ctFlipRun(t *testing.T, limit, chunk int, middle bool) {
	recCacheLimit = limit
	dir := t.TempDir()
	var flipAt string
	var batchAt int64
	hook := func(point string) error {
		if point != "mapped" {
			return nil
		}
		f, err := os.OpenFile(flipAt, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var b [1]byte
		at := batchAt + HeaderSize + 2 // inside the batch's first record
		if _, err := f.ReadAt(b[:], at); err != nil {
			return err
		}
		b[0] ^= 0x10
		_, err = f.WriteAt(b[:], at)
		return err
	}
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	l := lgOpen(t, dir, cfg, withCleanHook(hook))
	rng := rand.New(rand.NewPCG(1, 1))
	clock := &ctClock{t: time.UnixMilli(1_700_000_000_000)}
	ctProduce(t, l, newCtModel(), rng, clock, 60, 10, false)
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	flipAt = filepath.Join(dir, segmentName(segs[0].BaseOffset)+LogSuffix)
	if middle {
		data, err := os.ReadFile(flipAt)
		if err != nil {
			t.Fatal(err)
		}
		var starts []int64
		for pos := int64(0); pos < int64(len(data)); {
			h, err := ParseHeader(data[pos:])
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, pos)
			pos += int64(h.Size())
		}
		batchAt = starts[len(starts)/2]
	}
	_, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<20), IOBufferBytes: chunk})
	if !IsCorrupt(err) || !strings.Contains(err.Error(), fmt.Sprintf(" at %d: ", batchAt)) {
		t.Fatalf("cache limit %d, chunk %d, batch at %d: Clean after a flipped byte: got %v, want a corruption error at %d", limit, chunk, batchAt, err, batchAt)
	}
	if got := l.Segments(); !reflect.DeepEqual(got, segs) {
		t.Fatalf("cache limit %d: segments changed: %v, were %v", limit, got, segs)
	}
	if errors.Is(err, ErrPoisoned) {
		t.Fatalf("cache limit %d: log poisoned: %v", limit, err)
	}
	t.Logf("cache limit %d, chunk %d: %v", limit, chunk, err)
}

// TestOffsetMapSlotHints puts records batch by batch through every growth
// of the table, as the map pass does, and then looks each record's key up
// through its slot hint (latestOf), as the filter pass does: the answer is
// Get's for every record, whether its hint is current, stale (the table
// grew after it was put), missing or wrong.
func TestOffsetMapSlotHints(t *testing.T) {
	m := ctMap(t, 24*200_000)
	m.clearFor(150_000)
	rng := rand.New(rand.NewPCG(9, 28))
	var recs []cleanRec
	var keys [][]byte
	startSlots := m.nslots
	for off := int64(0); off < 150_000; off += 10 {
		batch := make([]cleanRec, 10)
		for i := range batch {
			k := fmt.Appendf(nil, "key-%d", rng.IntN(40_000))
			batch[i] = cleanRec{hash: hashKey(k), off: off + int64(i)}
			keys = append(keys, k)
		}
		m.putRecords(batch, 0)
		recs = append(recs, batch...)
	}
	if m.nslots == startSlots {
		t.Fatalf("the table never grew (%d slots)", m.nslots)
	}
	stale := 0
	for i := range recs {
		r := &recs[i]
		if r.slot == 0 {
			t.Fatalf("record %d has no hint", i)
		}
		want := m.Get(keys[i])
		if got := m.latestOf(r); got != want {
			t.Fatalf("record %d (hint %d): latestOf %d, Get %d", i, r.slot, got, want)
		}
		if idx, found := m.find(&r.hash); !found || idx+1 != uint64(r.slot) {
			stale++
		}
		for _, hint := range []uint32{0, 1, uint32(m.nslots), uint32(m.nslots) + 1, uint32(rng.IntN(int(m.nslots)) + 1)} {
			h := *r
			h.slot = hint
			if got := m.latestOf(&h); got != want {
				t.Fatalf("record %d with hint %d: latestOf %d, Get %d", i, hint, got, want)
			}
		}
	}
	if stale == 0 || stale == len(recs) {
		t.Fatalf("%d of %d hints stale: want some of both", stale, len(recs))
	}
	t.Logf("%d records, %d keys, %d slots; %d hints stale", len(recs), m.Size(), m.nslots, stale)
}

// TestCleanReusedMapSameOutput cleans two copies of the same random log,
// one with a fresh offset map and one with a map (and so its buffers,
// cleanBuffers) that first cleaned another log with larger I/O buffers:
// the files and results are the same byte for byte, over several rounds.
func TestCleanReusedMapSameOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1))
	cfg := ctConfig(rng)
	base := t.TempDir()
	other := lgOpen(t, filepath.Join(base, "other"), cfg)
	ctProduce(t, other, newCtModel(), rng, &ctClock{t: time.UnixMilli(1_700_000_000_000)}, 200, 10, true)
	reused := ctMap(t, 24*4000)
	if _, err := other.Clean(context.Background(), CleanConfig{Map: reused, DeleteRetentionMs: ctRetentionMs, IOBufferBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(base, "fresh"), filepath.Join(base, "reused")}
	var logs []*Log
	var clocks []*ctClock
	for _, d := range dirs {
		clocks = append(clocks, &ctClock{t: time.UnixMilli(1_700_000_000_000)})
		logs = append(logs, lgOpen(t, d, cfg, WithClock(clocks[len(clocks)-1].now)))
	}
	for round := range 4 {
		var results []CleanResult
		for i := range logs {
			ctProduce(t, logs[i], newCtModel(), rand.New(rand.NewPCG(uint64(round), 7)), clocks[i], 60, 25, true)
			m := reused
			if i == 0 {
				m = ctMap(t, 24*4000)
			}
			res, err := logs[i].Clean(context.Background(), CleanConfig{Map: m, DeleteRetentionMs: ctRetentionMs, IOBufferBytes: 900})
			if err != nil {
				t.Fatalf("round %d, log %d: Clean: %v", round, i, err)
			}
			res.Duration, res.MapDuration = 0, 0
			results = append(results, res)
			clocks[i].advance(ctRetentionMs * time.Millisecond * 3 / 4)
		}
		if !ctSameResult(results[0], results[1]) {
			t.Fatalf("round %d: the reused map gives\n%+v\na fresh one\n%+v", round, results[1], results[0])
		}
		ctSameFiles(t, dirs[0], dirs[1])
		if results[0].RecordsKept == results[0].RecordsRead {
			t.Fatalf("round %d: nothing removed (%d records): the test exercises no rewrite", round, results[0].RecordsRead)
		}
	}
}
