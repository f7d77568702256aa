package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// testSegment is a segment at base offset 0: three batches in different
// codecs, the last one a transaction commit marker.
type testSegment struct {
	log       []byte
	positions []int64 // where each batch starts
	bases     []int64
	maxTS     []int64
}

func buildSegment(t *testing.T) testSegment {
	t.Helper()
	specs := []segment.BatchSpec{
		{BaseOffset: 0, Codec: segment.CodecNone, Records: []segment.Record{
			{Timestamp: 1000, Key: []byte("user-1"), Value: []byte("hello"), Headers: []segment.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "n", Value: nil}}},
			{Timestamp: 1005, Key: nil, Value: []byte{0, 0xff, '\n'}},
			{Timestamp: 990, Key: []byte{}, Value: nil},
		}},
		{BaseOffset: 3, Codec: segment.CodecZstd, PartitionLeaderEpoch: 2, Idempotent: true, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0, Transactional: true, Records: []segment.Record{
			{Timestamp: 2000, Key: []byte("k"), Value: bytes.Repeat([]byte("z"), 5000)},
			{Timestamp: 2001, Key: []byte("k"), Value: []byte("v")},
		}},
		{BaseOffset: 5, Codec: segment.CodecNone, PartitionLeaderEpoch: 2, Idempotent: true, ProducerID: 7, ProducerEpoch: 1, BaseSequence: -1, Transactional: true, Control: true, Records: []segment.Record{
			{Timestamp: 1500, Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 3}},
		}},
	}
	var s testSegment
	for _, spec := range specs {
		b, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := segment.ParseHeader(b)
		s.positions = append(s.positions, int64(len(s.log)))
		s.bases = append(s.bases, h.BaseOffset)
		s.maxTS = append(s.maxTS, h.MaxTimestamp)
		s.log = append(s.log, b...)
	}
	return s
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runDumpArgs(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	status = dispatch(append([]string{"dump"}, args...), &out, &errw)
	return status, out.String(), errw.String()
}

func indexFile(entries [][2]uint32, prealloc int) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e[0])
		b = binary.BigEndian.AppendUint32(b, e[1])
	}
	return append(b, make([]byte, prealloc*8)...)
}

type timeEntry struct {
	ts  int64
	rel uint32
}

func timeIndexFile(entries []timeEntry, prealloc int) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return append(b, make([]byte, prealloc*12)...)
}

func TestDumpPrintsBatchesAndRecords(t *testing.T) {
	s := buildSegment(t)
	path := writeFile(t, t.TempDir(), "00000000000000000000.log", s.log)
	status, out, errs := runDumpArgs(t, path, "--print-data") // flags may follow files
	if status != 0 || errs != "" {
		t.Fatalf("got status %d, stderr %q; want 0, empty", status, errs)
	}
	want := []string{
		"Dumping " + path + " (base offset 0, ",
		"baseOffset: 0 lastOffset: 2 count: 3 position: 0 size: ",
		"crcValid: true compression: none producerId: -1 producerEpoch: -1 baseSequence: -1 isTransactional: false isControl: false timestampType: CreateTime baseTimestamp: 1000 maxTimestamp: 1005 partitionLeaderEpoch: 0\n",
		`| offset: 0 timestamp: 1000 keySize: 6 valueSize: 5 key: "user-1" value: "hello" headers: ["trace"="abc" "n"=null]`,
		`| offset: 1 timestamp: 1005 keySize: -1 valueSize: 3 key: null value: "\x00\xff\n" headers: []`,
		`| offset: 2 timestamp: 990 keySize: 0 valueSize: -1 key: "" value: null headers: []`,
		fmt.Sprintf("baseOffset: 3 lastOffset: 4 count: 2 position: %d ", s.positions[1]),
		"compression: zstd producerId: 7 producerEpoch: 1 baseSequence: 0 isTransactional: true isControl: false",
		`| offset: 3 timestamp: 2000 keySize: 1 valueSize: 5000 key: "k" value: "zzzz`,
		"isTransactional: true isControl: true",
		`| offset: 5 timestamp: 1500 keySize: 4 valueSize: 6 control: commit key: "\x00\x00\x00\x01"`,
		fmt.Sprintf("Summary: 3 batches, 6 records, %d valid bytes, offsets 0 to 5\n", len(s.log)),
	}
	for i, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("#%d: output lacks %q; got:\n%s", i, w, out)
		}
	}
	// Without --print-data there are no record lines.
	if _, out, _ := runDumpArgs(t, path); strings.Contains(out, "| offset") {
		t.Errorf("got record lines without --print-data:\n%s", out)
	}
}

func TestDumpProblems(t *testing.T) {
	s := buildSegment(t)
	dir := t.TempDir()
	garbage := []byte("this is a text file, not a segment, and it goes on for a while......")
	crcBad := bytes.Clone(s.log)
	crcBad[s.positions[1]+segment.HeaderSize+3] ^= 0x10
	tests := []struct {
		name       string
		file       string
		data       []byte // nil: do not create the file
		wantOut    []string
		wantStderr string
	}{
		{"garbage", "00000000000000000000.log", garbage, nil, "corrupt tail at position 0"},
		{"wrong name", "segment.log", s.log, nil, "not a segment file"},
		{"wrong extension", "00000000000000000000.txt", s.log, nil, "not a segment file"},
		{"missing", "00000000000000000007.log", nil, nil, "no such file"},
		{"torn tail", "00000000000000000000.log", s.log[:len(s.log)-4],
			[]string{"baseOffset: 0 ", "baseOffset: 3 ", fmt.Sprintf("Summary: 2 batches, 5 records, %d valid bytes", s.positions[2])},
			fmt.Sprintf("corrupt tail at position %d (%d bytes not shown)", s.positions[2], len(s.log)-4-int(s.positions[2]))},
		{"zero-filled tail", "00000000000000000000.log", append(bytes.Clone(s.log), make([]byte, 100)...),
			[]string{"baseOffset: 5 ", "Summary: 3 batches"},
			fmt.Sprintf("corrupt tail at position %d (100 bytes not shown)", len(s.log))},
		{"crc mismatch", "00000000000000000000.log", crcBad,
			[]string{"baseOffset: 3 lastOffset: 4 count: 2 position: " + fmt.Sprint(s.positions[1]), "crcValid: false", "baseOffset: 5 ", "Summary: 3 batches"},
			"crc mismatch"},
	}
	for i, tt := range tests {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, tt.file)
		if tt.data != nil {
			writeFile(t, sub, tt.file, tt.data)
		}
		status, out, errs := runDumpArgs(t, "--print-data", path)
		if status != 1 {
			t.Errorf("#%d %s: got status %d, want 1", i, tt.name, status)
		}
		if !strings.Contains(errs, tt.wantStderr) || !strings.Contains(errs, path) {
			t.Errorf("#%d %s: got stderr %q, want it to name the file and say %q", i, tt.name, errs, tt.wantStderr)
		}
		for _, w := range tt.wantOut {
			if !strings.Contains(out, w) {
				t.Errorf("#%d %s: output lacks %q; got:\n%s", i, tt.name, w, out)
			}
		}
	}
}

func TestDumpManyFilesKeepsGoing(t *testing.T) {
	s := buildSegment(t)
	dir := t.TempDir()
	good := writeFile(t, dir, "00000000000000000000.log", s.log)
	bad := writeFile(t, dir, "notes.txt", []byte("x"))
	status, out, errs := runDumpArgs(t, bad, good)
	if status != 1 || !strings.Contains(errs, "not a segment file") || !strings.Contains(out, "Summary: 3 batches") {
		t.Errorf("got status %d, stderr %q, output:\n%s", status, errs, out)
	}
}

func TestDumpVerifyIndex(t *testing.T) {
	s := buildSegment(t)
	// Good indexes: an entry for each batch after the first, the time index
	// naming the batch with the largest timestamp so far; preallocated tail.
	goodIndex := indexFile([][2]uint32{{3, uint32(s.positions[1])}, {5, uint32(s.positions[2])}}, 10)
	goodTime := timeIndexFile([]timeEntry{{s.maxTS[0], 0}, {s.maxTS[1], 3}}, 10)
	tests := []struct {
		name       string
		index      []byte // nil: no file
		timeindex  []byte
		wantStatus int
		wantOut    []string
		wantStderr []string
	}{
		{"good", goodIndex, goodTime, 0, []string{"Index 00000000000000000000.index: 2 entries, 0 mismatches", "Time index 00000000000000000000.timeindex: 2 entries, 0 mismatches"}, nil},
		{"empty files", []byte{}, []byte{}, 0, []string{"0 entries, 0 mismatches"}, nil},
		{"time index names the indexed batch", goodIndex, timeIndexFile([]timeEntry{{s.maxTS[1], 5}}, 0), 0, []string{"Time index 00000000000000000000.timeindex: 1 entries, 0 mismatches"}, nil},
		{"position not a batch start", indexFile([][2]uint32{{3, uint32(s.positions[1]) + 1}}, 0), goodTime, 1,
			[]string{"1 entries, 1 mismatches"}, []string{"no batch starts at that position"}},
		{"offset of another batch", indexFile([][2]uint32{{5, uint32(s.positions[1])}}, 0), goodTime, 1,
			nil, []string{"the batch there starts at offset 3"}},
		{"last offset, as Kafka writes", indexFile([][2]uint32{{4, uint32(s.positions[1])}}, 0), goodTime, 1,
			nil, []string{"the batch there starts at offset 3"}},
		{"out of order", indexFile([][2]uint32{{5, uint32(s.positions[2])}, {3, uint32(s.positions[1])}}, 0), goodTime, 1,
			nil, []string{"does not follow"}},
		{"partial entry", append(bytes.Clone(goodIndex[:16]), 1, 2, 3), goodTime, 1,
			nil, []string{"not a whole number of 8-byte entries"}},
		{"entry after the end", append(indexFile([][2]uint32{{3, uint32(s.positions[1])}}, 1), indexFile([][2]uint32{{5, uint32(s.positions[2])}}, 0)...), goodTime, 1,
			nil, []string{"entries after the zero entry at byte 8"}},
		{"missing index", nil, goodTime, 1, nil, []string{"00000000000000000000.index: no such file"}},
		{"wrong timestamp", goodIndex, timeIndexFile([]timeEntry{{s.maxTS[1] + 1, 3}}, 0), 1,
			nil, []string{"largest timestamp up to that batch is 2001"}},
		{"timestamp goes back", goodIndex, timeIndexFile([]timeEntry{{s.maxTS[1], 3}, {s.maxTS[0], 0}}, 0), 1,
			nil, []string{"goes back"}},
		{"time entry off a batch", goodIndex, timeIndexFile([]timeEntry{{s.maxTS[1], 4}}, 0), 1,
			nil, []string{"no batch starts at that offset"}},
	}
	for i, tt := range tests {
		dir := t.TempDir()
		path := writeFile(t, dir, "00000000000000000000.log", s.log)
		if tt.index != nil {
			writeFile(t, dir, "00000000000000000000.index", tt.index)
		}
		if tt.timeindex != nil {
			writeFile(t, dir, "00000000000000000000.timeindex", tt.timeindex)
		}
		status, out, errs := runDumpArgs(t, "--verify-index", path)
		if status != tt.wantStatus {
			t.Errorf("#%d %s: got status %d, want %d (stderr %q)", i, tt.name, status, tt.wantStatus, errs)
		}
		if tt.wantStatus == 0 && errs != "" {
			t.Errorf("#%d %s: got stderr %q, want none", i, tt.name, errs)
		}
		for _, w := range tt.wantOut {
			if !strings.Contains(out, w) {
				t.Errorf("#%d %s: output lacks %q; got:\n%s", i, tt.name, w, out)
			}
		}
		for _, w := range tt.wantStderr {
			if !strings.Contains(errs, w) {
				t.Errorf("#%d %s: stderr lacks %q; got %q", i, tt.name, w, errs)
			}
		}
	}
}

func TestDumpIndexFiles(t *testing.T) {
	dir := t.TempDir()
	idx := writeFile(t, dir, "00000000000000000100.index", indexFile([][2]uint32{{3, 4096}, {9, 8200}}, 5))
	tidx := writeFile(t, dir, "00000000000000000100.timeindex", timeIndexFile([]timeEntry{{1700, 3}}, 5))
	status, out, errs := runDumpArgs(t, idx, tidx)
	want := []string{"offset: 103 position: 4096\n", "offset: 109 position: 8200\n", "Summary: 2 entries\n", "timestamp: 1700 offset: 103\n", "Summary: 1 entries\n"}
	if status != 0 || errs != "" {
		t.Fatalf("got status %d, stderr %q", status, errs)
	}
	for i, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("#%d: output lacks %q; got:\n%s", i, w, out)
		}
	}
}

func TestDumpTxnIndex(t *testing.T) {
	dir := t.TempDir()
	b := segment.EncodeAbortedTxn(nil, segment.AbortedTxn{ProducerID: 7, FirstOffset: 101, LastOffset: 105, LastStableOffset: 106})
	b = segment.EncodeAbortedTxn(b, segment.AbortedTxn{ProducerID: 8, FirstOffset: 103, LastOffset: 110, LastStableOffset: 111})
	good := writeFile(t, dir, "00000000000000000100.txnindex", b)
	status, out, errs := runDumpArgs(t, good)
	for _, w := range []string{"version: 0 producerId: 7 firstOffset: 101 lastOffset: 105 lastStableOffset: 106\n", "producerId: 8 firstOffset: 103 lastOffset: 110", "Summary: 2 entries\n"} {
		if status != 0 || errs != "" || !strings.Contains(out, w) {
			t.Fatalf("status %d, stderr %q, output lacks %q:\n%s", status, errs, w, out)
		}
	}
	torn := writeFile(t, t.TempDir(), "00000000000000000100.txnindex", b[:40])
	status, out, errs = runDumpArgs(t, torn)
	if status != 1 || !strings.Contains(errs, "trailing bytes") || !strings.Contains(out, "Summary: 1 entries") {
		t.Fatalf("torn: status %d, stderr %q, output %q", status, errs, out)
	}
}

func TestDumpUsage(t *testing.T) {
	tests := []struct {
		args       []string
		wantStatus int
		inStdout   bool
	}{
		{[]string{"--help"}, 0, true},
		{[]string{"-h"}, 0, true},
		{[]string{"--no-such-flag", "x.log"}, 2, false},
		{nil, 2, false},
	}
	for i, tt := range tests {
		status, out, errs := runDumpArgs(t, tt.args...)
		text := errs
		if tt.inStdout {
			text = out
		}
		if status != tt.wantStatus || !strings.Contains(text, "Usage: strata dump") || !strings.Contains(text, "Example:") || !strings.Contains(text, "-print-data") {
			t.Errorf("#%d %v: got status %d, stdout %q, stderr %q; want status %d and usage with an example", i, tt.args, status, out, errs, tt.wantStatus)
		}
	}
}

// TestDumpDirectories: a partition directory dumps its segments, a data
// directory every partition directory in it; several data directories
// (log.dirs) are dumped in turn.
func TestDumpDirectories(t *testing.T) {
	s := buildSegment(t)
	d1, d2 := t.TempDir(), t.TempDir()
	var want []string
	for _, p := range []string{filepath.Join(d1, "orders-0"), filepath.Join(d1, "orders-2"), filepath.Join(d2, "orders-1")} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, writeFile(t, p, "00000000000000000000.log", s.log))
	}
	if err := os.Mkdir(filepath.Join(d1, "objects"), 0o755); err != nil { // not a partition directory
		t.Fatal(err)
	}
	status, out, errs := runDumpArgs(t, d1, d2)
	if status != 0 || errs != "" {
		t.Fatalf("data directories: status %d, stderr %q", status, errs)
	}
	for i, w := range want {
		if !strings.Contains(out, "Dumping "+w+" ") {
			t.Errorf("#%d: %s not dumped:\n%s", i, w, out)
		}
	}
	if n := strings.Count(out, "Dumping "); n != len(want) {
		t.Errorf("%d files dumped, want %d", n, len(want))
	}
	status, out, _ = runDumpArgs(t, filepath.Join(d2, "orders-1"))
	if status != 0 || strings.Count(out, "Dumping ") != 1 {
		t.Errorf("partition directory: status %d, output:\n%s", status, out)
	}
	if status, _, errs := runDumpArgs(t, t.TempDir()); status != 1 || !strings.Contains(errs, "no partition directories") {
		t.Errorf("an empty directory: status %d, stderr %q; want 1 and the reason", status, errs)
	}
}

// TestDumpCleanedSegment dumps a segment the cleaner rewrote: the batch
// that kept a tombstone shows its delete horizon, and the gap left by the
// removed record is not a problem.
func TestDumpCleanedSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 200 // each batch below fills a segment
	l, err := segment.Open(dir, cfg, segment.WithClock(func() time.Time { return time.UnixMilli(1_000_000) }))
	if err != nil {
		t.Fatal(err)
	}
	for _, recs := range [][]segment.Record{
		{{Timestamp: 10, Key: []byte("a"), Value: []byte("old")}, {Timestamp: 11, Key: []byte("b")}},
		{{Timestamp: 12, Key: []byte("a"), Value: []byte("new")}},
		{{Timestamp: 13, Key: []byte("c"), Value: []byte("active")}},
	} {
		b, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, segment.AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := segment.NewOffsetMap(1<<12, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), segment.CleanConfig{Map: m, DeleteRetentionMs: 500}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	status, out, errs := runDumpArgs(t, filepath.Join(dir, segment.SegmentFileName(0, segment.LogSuffix)), "--print-data")
	if status != 0 || errs != "" {
		t.Fatalf("got status %d, stderr %q; want 0, empty", status, errs)
	}
	for i, w := range []string{
		"baseOffset: 0 lastOffset: 1 count: 1 ",
		"baseTimestamp: 1000500 maxTimestamp: 11 partitionLeaderEpoch: 0 deleteHorizonMs: 1000500\n",
		`| offset: 1 timestamp: 11 keySize: 1 valueSize: -1 key: "b" value: null`,
		"baseOffset: 2 lastOffset: 2 count: 1 ",
		"Summary: 2 batches, 2 records",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("#%d: output lacks %q; got:\n%s", i, w, out)
		}
	}
}
