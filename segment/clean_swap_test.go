package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// csRun is one cleaning of a copy of a crFixture's directory.
type csRun struct {
	dir    string
	points []string // the hook's points, in the order they came
	err    error
	l      *Log
}

// csConfig is f's configuration with segments up to 7000 bytes: the
// fixture's segments, written with 3000, then make groups of two.
func csConfig(f *crFixture) Config {
	cfg := f.cfg
	cfg.SegmentBytes = 7000
	return cfg
}

// csClean copies f's directory and cleans the copy (csConfig), failing at
// the hook's call number failAt (1-based; 0: never).
func csClean(t *testing.T, f *crFixture, failAt int) *csRun {
	t.Helper()
	r := &csRun{dir: filepath.Join(t.TempDir(), "log")}
	if err := os.CopyFS(r.dir, os.DirFS(f.dir)); err != nil {
		t.Fatal(err)
	}
	r.l = lgOpen(t, r.dir, csConfig(f), WithClock(f.clock.now), withCleanHook(func(p string) error {
		r.points = append(r.points, p)
		if len(r.points) == failAt {
			return fmt.Errorf("injected failure at %s (#%d)", p, failAt)
		}
		return nil
	}))
	_, r.err = r.l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs})
	return r
}

// csRef is a cleaning of a copy of a crFixture's directory without a
// failure, for the tests to compare against.
type csRef struct {
	*csRun
	before, after map[int64][]byte // the segments before and after (csSegments)
	groups        [][]int64        // the cleaning's groups (csGroups)
}

func csReference(t *testing.T, f *crFixture) csRef {
	t.Helper()
	r := csRef{csRun: csClean(t, f, 0), before: csSegments(t, f.dir)}
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.after = csSegments(t, r.dir)
	r.groups = csGroups(r.before, r.after)
	return r
}

// csSegments is what the .log files of dir hold, by base offset.
func csSegments(t *testing.T, dir string) map[int64][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]byte{}
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), LogSuffix)
		if !ok {
			continue
		}
		base, err := parseOffsetStem(stem)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if out[base], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// csGroups derives the groups of a cleaning from the segments before and
// after it: each segment of after that differs from before is a cleaned
// segment, and its sources are the segments of before from its base up to
// the next segment of after.
func csGroups(before, after map[int64][]byte) [][]int64 {
	bases, afterBases := slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after))
	var groups [][]int64
	for i, b := range afterBases {
		if old, ok := before[b]; ok && bytes.Equal(old, after[b]) {
			continue
		}
		var g []int64
		for _, s := range bases {
			if s >= b && (i+1 == len(afterBases) || s < afterBases[i+1]) {
				g = append(g, s)
			}
		}
		groups = append(groups, g)
	}
	return groups
}

// TestCleanBatchSwapCrashAtEveryStep cleans a log whose cleaning swaps
// several cleaned segments in one batch, failing (and then abandoning the
// log as a crash would) at every call of the test hook in turn: every
// point of writing each group, the commit point, and every step of
// completing the swap for each group. Recovery must leave exactly the old
// segments (before the commit point) or exactly the segments a cleaning
// without a failure leaves (from it on), byte for byte, never a mix; no
// .cleaned or .swap file; and every key's latest value.
func TestCleanBatchSwapCrashAtEveryStep(t *testing.T) {
	f := newCrFixture(t, 11)
	ref := csReference(t, f)
	before, after, groups := ref.before, ref.after, ref.groups
	if len(groups) < 3 || !slices.ContainsFunc(groups, func(g []int64) bool { return len(g) > 1 }) {
		t.Fatalf("groups %v: want three or more, one of several sources", groups)
	}
	if n := strings.Count(strings.Join(ref.points, ","), "before-marker"); n != 1 {
		t.Fatalf("%d swaps, want one batch: %v", n, ref.points)
	}
	commit := slices.Index(ref.points, "committed")
	for i := range ref.points {
		t.Run(fmt.Sprintf("%d-%s", i+1, ref.points[i]), func(t *testing.T) {
			r := csClean(t, f, i+1)
			if r.err == nil || !strings.Contains(r.err.Error(), "injected failure") {
				t.Fatalf("Clean: %v, want the injected failure", r.err)
			}
			lgCrash(t, r.l)
			l := lgOpen(t, r.dir, csConfig(f), WithClock(f.clock.now))
			rep := l.Recovery()
			if rep.TruncatedAt >= 0 {
				t.Fatalf("recovery cut the log at %d: %v", rep.TruncatedAt, rep.Reason)
			}
			if left := crLeftovers(t, r.dir); len(left) > 0 {
				t.Fatalf("left after recovery: %v", left)
			}
			committed := i >= commit
			want := before
			if committed {
				want = after
			}
			if got := csSegments(t, r.dir); !maps.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("segments after recovery are neither all old nor all cleaned (committed: %v)", committed)
			}
			if got := len(rep.CompletedSwaps); committed != (got == len(groups)) || (!committed && got > 0) {
				t.Fatalf("completed swaps %v of groups %v (committed: %v)", rep.CompletedSwaps, groups, committed)
			}
			ctCheck(t, l, f.m, false)
		})
	}
}

// TestRecoverOneGroupSwapMarker checks that recovery completes a marker of
// the layout older builds wrote (version 0, one group, a base a line):
// the cleaned files of every group are on disk, fsynced, and the marker
// names only one group of several sources; recovery swaps that group in,
// deletes the other groups' .cleaned files and leaves their sources.
func TestRecoverOneGroupSwapMarker(t *testing.T) {
	f := newCrFixture(t, 12)
	ref := csReference(t, f)
	before, after, groups := ref.before, ref.after, ref.groups
	gi := slices.IndexFunc(groups, func(g []int64) bool { return len(g) > 1 })
	if gi < 0 {
		t.Fatalf("groups %v: want one of several sources", groups)
	}
	g := groups[gi]

	r := csClean(t, f, slices.Index(ref.points, "before-marker")+1)
	if r.err == nil {
		t.Fatal("Clean did not fail")
	}
	lgCrash(t, r.l)
	// The checkpoint an older build gave this group: where its last
	// source ends, the next segment's base.
	bases := slices.Sorted(maps.Keys(before))
	ckpt := bases[slices.Index(bases, g[len(g)-1])+1]
	marker := fmt.Appendf(nil, "0\n%d\n%d\n", len(g)+1, ckpt)
	for _, b := range g {
		marker = fmt.Appendf(marker, "%d\n", b)
	}
	if err := os.WriteFile(filepath.Join(r.dir, swapMarkerName(g[0])), marker, 0o644); err != nil {
		t.Fatal(err)
	}

	l := lgOpen(t, r.dir, csConfig(f), WithClock(f.clock.now))
	rep := l.Recovery()
	if rep.TruncatedAt >= 0 || !slices.Equal(rep.CompletedSwaps, []int64{g[0]}) {
		t.Fatalf("recovery: cut at %d (%v), completed swaps %v; want %d", rep.TruncatedAt, rep.Reason, rep.CompletedSwaps, g[0])
	}
	if left := crLeftovers(t, r.dir); len(left) > 0 {
		t.Fatalf("left after recovery: %v", left)
	}
	want := map[int64][]byte{}
	for b, data := range before {
		if !slices.Contains(g, b) {
			want[b] = data
		}
	}
	want[g[0]] = after[g[0]]
	if got := csSegments(t, r.dir); !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatal("segments after recovery: want the one group swapped in and every other source as it was")
	}
	if got := l.CleanerCheckpoint(); got < ckpt {
		t.Fatalf("cleaner checkpoint %d, want at least the marker's %d", got, ckpt)
	}
	ctCheckLatest(t, f.m, csRecords(t, l, f.m))
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs}); err != nil {
		t.Fatalf("Clean after recovery: %v", err)
	}
	ctCheck(t, l, f.m, false)
}

// csRecords reads the log's records by offset.
func csRecords(t *testing.T, l *Log, m *ctModel) map[int64]Record {
	t.Helper()
	recs, _ := ctRead(t, l, m)
	byOff := map[int64]Record{}
	for _, r := range recs {
		byOff[r.Offset] = r
	}
	return byOff
}

// TestDecodeSwapMarker checks both layouts of the swap marker and the
// rejection of damaged ones.
func TestDecodeSwapMarker(t *testing.T) {
	for i, c := range []struct {
		data string
		want swapMarker // zero: rejected
	}{
		{"0\n3\n250\n100\n180\n", swapMarker{ckpt: 250, groups: [][]int64{{100, 180}}}},
		{"0\n2\n250\n100\n", swapMarker{ckpt: 250, groups: [][]int64{{100}}}},
		{"1\n3\n900\n100 180 260\n400\n", swapMarker{ckpt: 900, groups: [][]int64{{100, 180, 260}, {400}}}},
		{"1\n2\n900\n100\n", swapMarker{ckpt: 900, groups: [][]int64{{100}}}},
		{"1\n1\n900\n", swapMarker{}},               // no group
		{"1\n3\n900\n100\n\n", swapMarker{}},        // an empty group
		{"1\n3\n900\n100 260\n180\n", swapMarker{}}, // groups overlap
		{"1\n2\n900\n180 100\n", swapMarker{}},      // sources out of order
		{"1\n2\n900\n101\n", swapMarker{}},          // does not name the segment
		{"0\n3\n250\n100\n100\n", swapMarker{}},
		{"0\n2\n-1\n100\n", swapMarker{}},
		{"0\n2\n250\nx\n", swapMarker{}},
		{"2\n2\n250\n100\n", swapMarker{}}, // unknown version
		{"1\n3\n900\n100\n", swapMarker{}}, // count
		{"", swapMarker{}},
	} {
		got, err := decodeSwapMarker("m", []byte(c.data), 100)
		switch {
		case c.want.groups == nil && !errors.Is(err, ErrBadCheckpoint):
			t.Errorf("#%d: got %+v, %v; want ErrBadCheckpoint", i, got, err)
		case c.want.groups != nil && (err != nil || got.ckpt != c.want.ckpt || !slices.EqualFunc(got.groups, c.want.groups, slices.Equal)):
			t.Errorf("#%d: got %+v, %v; want %+v", i, got, err, c.want)
		}
	}
	m := swapMarker{ckpt: 7, groups: [][]int64{{100, 150}, {200}, {300, 301, 302}}}
	if got, err := decodeSwapMarker("m", m.encode(), 100); err != nil || got.ckpt != m.ckpt || !slices.EqualFunc(got.groups, m.groups, slices.Equal) {
		t.Fatalf("round trip: got %+v, %v; want %+v", got, err, m)
	}
}

// FuzzDecodeSwapMarker: decodeSwapMarker never panics, and what it
// accepts has groups ascending from the named base and encodes to a
// marker that decodes to the same.
func FuzzDecodeSwapMarker(f *testing.F) {
	for _, s := range []string{"0\n3\n250\n100\n180\n", "1\n3\n900\n100 180 260\n400\n", "1\n2\n0\n100\n", "1\n3\n900\n100 260\n180\n", "0\n1\n5\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSwapMarker("m", data, 100)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v is not ErrBadCheckpoint", err)
			}
			return
		}
		prev := int64(-1)
		for _, g := range m.groups {
			for _, b := range g {
				if (prev < 0 && b != 100) || b <= prev {
					t.Fatalf("groups %v do not ascend from 100", m.groups)
				}
				prev = b
			}
		}
		again, err := decodeSwapMarker("m", m.encode(), 100)
		if err != nil || again.ckpt != m.ckpt || !slices.EqualFunc(again.groups, m.groups, slices.Equal) {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", m, again, err)
		}
	})
}

// TestCleanLastSwapWritesFinalCheckpoint cleans a log whose last dirty
// segment comes out unchanged (every key in it is new), one segment a
// group: the swap of the rewritten groups writes the mapped end as the
// cleaner checkpoint (it is on disk at the swap's "checkpointed" point),
// so that no second checkpoint write follows for the unchanged group.
func TestCleanLastSwapWritesFinalCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := lgOpen(t, dir, lgConfig())
	var biggest int64
	for seg, keys := range [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"x", "y", "z"}} {
		for i := range 4 {
			var recs []Record
			for _, k := range keys {
				if seg == 2 {
					k = fmt.Sprintf("%s%d", k, i) // each once
				}
				recs = append(recs, Record{Timestamp: 1_700_000_000_000, Key: []byte(k), Value: fmt.Appendf(nil, "%s-%d-%d", k, seg, i)})
			}
			b, err := BuildBatch(BatchSpec{Records: recs})
			if err != nil {
				t.Fatal(err)
			}
			lgAppend(t, l, b)
		}
		info, err := l.rollForTest()
		if err != nil {
			t.Fatal(err)
		}
		biggest = max(biggest, info.Size)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := lgConfig()
	cfg.SegmentBytes = biggest // one segment a group
	var atCheckpointed int64 = -1
	l = lgOpen(t, dir, cfg, withCleanHook(func(p string) error {
		if p == "checkpointed" {
			off, ok, err := readOffsetCheckpoint(dir, cleanerOffsetFile)
			if err != nil || !ok {
				return fmt.Errorf("checkpoint at %s: %d, %v, %v", p, off, ok, err)
			}
			atCheckpointed = off
		}
		return nil
	}))
	res, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs})
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsWritten != 2 || res.GroupsSkipped != 1 {
		t.Fatalf("%d segments written, %d groups skipped; want 2 and 1 (the last one, unchanged)", res.SegmentsWritten, res.GroupsSkipped)
	}
	if atCheckpointed != res.MappedEnd || l.CleanerCheckpoint() != res.MappedEnd {
		t.Fatalf("checkpoint %d at the swap's end, %d after the cleaning; want the mapped end %d", atCheckpointed, l.CleanerCheckpoint(), res.MappedEnd)
	}
}
