package segment

import (
	"errors"
	"math"
	"testing"
)

func TestSegmentFileNameRoundTrip(t *testing.T) {
	for i, base := range []int64{0, 1, 123456789, math.MaxInt64} {
		for _, suffix := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			name := SegmentFileName(base, suffix)
			if len(name) != 20+len(suffix) {
				t.Errorf("#%d: %q is not 20 digits and %s", i, name, suffix)
			}
			gotBase, gotSuffix, err := ParseSegmentFileName(name)
			if err != nil || gotBase != base || gotSuffix != suffix {
				t.Errorf("#%d: %q parsed as %d, %q, %v; want %d, %q", i, name, gotBase, gotSuffix, err, base, suffix)
			}
		}
	}
	if got := SegmentFileName(42, LogSuffix); got != "00000000000000000042.log" {
		t.Errorf("got %q, want 00000000000000000042.log", got)
	}
}

func TestParseSegmentFileNameRejects(t *testing.T) {
	for i, name := range []string{
		"",
		"segment.log",
		"00000000000000000000",
		"00000000000000000000.txt",
		"00000000000000000000.snapshot",    // a producer snapshot, not a segment file
		"00000000000000000000.log.tmp",     // a leftover temporary file
		"0000000000000000000.log",          // 19 digits
		"000000000000000000000.log",        // 21 digits
		"+0000000000000000001.log",         // a sign
		"-0000000000000000001.index",       // a sign
		"0000000000000000000a.timeindex",   // not a digit
		"99999999999999999999.log",         // beyond int64
		"00000000000000000000.foo.log",     // the stem is not only digits
		"leader-epoch-checkpoint",          // a checkpoint
		"recovery-point-offset-checkpoint", // a checkpoint
	} {
		base, suffix, err := ParseSegmentFileName(name)
		if !errors.Is(err, ErrNotSegmentFile) {
			t.Errorf("#%d %q: got %d, %q, %v; want ErrNotSegmentFile", i, name, base, suffix, err)
		}
	}
}

func TestSnapshotFileName(t *testing.T) {
	for i, off := range []int64{0, 50, math.MaxInt64} {
		name := SnapshotFileName(off)
		got, ok := ParseSnapshotFileName(name)
		if !ok || got != off {
			t.Errorf("#%d: %q parsed as %d, %v; want %d", i, name, got, ok, off)
		}
	}
	if got := SnapshotFileName(50); got != "00000000000000000050.snapshot" {
		t.Errorf("got %q, want 00000000000000000050.snapshot", got)
	}
	for i, name := range []string{
		"00000000000000000050.snapshot.tmp",
		"00000000000000000050.log",
		"50.snapshot",
		"+0000000000000000050.snapshot",
		".snapshot",
	} {
		if off, ok := ParseSnapshotFileName(name); ok {
			t.Errorf("#%d %q: got offset %d, want not a snapshot", i, name, off)
		}
	}
}

func TestPartitionDirNameRoundTrip(t *testing.T) {
	tests := []struct {
		topic     string
		partition int32
		name      string
	}{
		{"orders", 0, "orders-0"},
		{"my-topic", 12, "my-topic-12"},
		{"t.x_y", 3, "t.x_y-3"},
		{"ends-", 1, "ends--1"},
		{"a", math.MaxInt32, "a-2147483647"},
	}
	for i, tt := range tests {
		if got := PartitionDirName(tt.topic, tt.partition); got != tt.name {
			t.Errorf("#%d: got %q, want %q", i, got, tt.name)
		}
		topic, p, ok := ParsePartitionDirName(tt.name)
		if !ok || topic != tt.topic || p != tt.partition {
			t.Errorf("#%d: %q parsed as %q, %d, %v; want %q, %d", i, tt.name, topic, p, ok, tt.topic, tt.partition)
		}
	}
}

func TestParsePartitionDirNameRejects(t *testing.T) {
	for i, name := range []string{
		"",
		"orders",
		"-0",
		"orders-",
		"orders-x",
		"orders-1a",
		"orders-+1",
		"orders- 1",
		"orders-2147483648", // beyond int32
		"objects",
		"remote-cache",
	} {
		if topic, p, ok := ParsePartitionDirName(name); ok {
			t.Errorf("#%d %q: got %q, %d; want not a partition directory", i, name, topic, p)
		}
	}
	// Leading zeros are read as Kafka's parser reads them (PartitionDirName
	// never writes them).
	if topic, p, ok := ParsePartitionDirName("orders-07"); !ok || topic != "orders" || p != 7 {
		t.Errorf("orders-07: got %q, %d, %v; want orders, 7", topic, p, ok)
	}
}

// FuzzFileNames: the name parsers never panic, and a name they accept is
// the one the matching formatter gives (for a partition directory, up to
// leading zeros in the partition, which parse back to the same pair).
func FuzzFileNames(f *testing.F) {
	for _, s := range []string{"00000000000000000000.log", "00000000000000000042.timeindex", "00000000000000000050.snapshot", "orders-0", "my-topic-12", "orders-07", "x.log"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if base, suffix, err := ParseSegmentFileName(name); err == nil {
			if got := SegmentFileName(base, suffix); got != name {
				t.Fatalf("%q parsed as %d, %q, which formats as %q", name, base, suffix, got)
			}
		} else if !errors.Is(err, ErrNotSegmentFile) {
			t.Fatalf("%q: error %v is not ErrNotSegmentFile", name, err)
		}
		if off, ok := ParseSnapshotFileName(name); ok && SnapshotFileName(off) != name {
			t.Fatalf("%q parsed as snapshot %d, which formats as %q", name, off, SnapshotFileName(off))
		}
		if topic, p, ok := ParsePartitionDirName(name); ok {
			if topic == "" || p < 0 {
				t.Fatalf("%q parsed as %q, %d", name, topic, p)
			}
			t2, p2, ok := ParsePartitionDirName(PartitionDirName(topic, p))
			if !ok || t2 != topic || p2 != p {
				t.Fatalf("%q parsed as %q, %d, whose name parses as %q, %d, %v", name, topic, p, t2, p2, ok)
			}
		}
	})
}
