package segment

import (
	"context"
	"fmt"
	"testing"
)

// TestRetentionKeepsEmptiedSegment: a segment the cleaner emptied still
// holds its offsets up to the next segment's base, so retention does not
// take it for one below the log start (which would move the log start,
// and no veto would be asked): with a veto refusing everything, nothing
// goes and the log start stays.
func TestRetentionKeepsEmptiedSegment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.RetentionMs, cfg.RetentionBytes = -1, 1
	l, err := Open(t.TempDir(), cfg, WithDeleteVeto(func(SegmentInfo) bool { return false }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	for i := range 60 {
		b, err := BuildBatch(BatchSpec{Records: []Record{{Key: []byte(fmt.Sprintf("k%d", i%3)), Value: []byte(fmt.Sprintf("value %d of some length", i))}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	om, err := NewOffsetMap(1<<16, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanConfig{Map: om}); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if segs[0].Size != 0 || segs[0].NextOffset != segs[0].BaseOffset {
		t.Fatalf("first segment after cleaning: %+v, want emptied", segs[0])
	}
	deleted, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("retention under a veto deleted %d segments, log start %d", len(deleted), l.LogStartOffset())
	}
	// Nor at reopen, nor when the log start is moved to its base.
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, cfg, WithDeleteVeto(func(SegmentInfo) bool { return false })); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); l.LogStartOffset() != 0 || len(got) != len(segs) {
		t.Fatalf("reopened: log start %d, %d segments, want 0 and %d", l.LogStartOffset(), len(got), len(segs))
	}
	if err := l.SetLogStartOffset(segs[0].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); got[0].BaseOffset != segs[0].BaseOffset {
		t.Fatalf("log start at the emptied segment's base deleted it: first segment now %d", got[0].BaseOffset)
	}
}
