package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// lgPositions returns where each batch starts in a log of whole batches
// laid out back to back.
func lgPositions(batches [][]byte) []int64 {
	var pos []int64
	var p int64
	for _, b := range batches {
		pos = append(pos, p)
		p += int64(len(b))
	}
	return pos
}

func TestRecoveryTornTail(t *testing.T) {
	var batches [][]byte
	for i := range 10 {
		batches = append(batches, lgBatch(2, int64(i), 100+30*i, byte(i)))
	}
	pos := lgPositions(batches)
	total := pos[9] + int64(len(batches[9]))
	tests := []struct {
		cut         int64 // file length after the tear
		wantBatches int
	}{
		{total, 10},
		{total - 1, 9},
		{pos[9] + HeaderSize, 9},
		{pos[9] + 10, 9}, // inside the header
		{pos[9], 9},      // exactly at a boundary: nothing torn
		{pos[3] + 70, 3},
		{1, 0},
		{0, 0},
	}
	for i, tt := range tests {
		dir := t.TempDir()
		l := lgOpen(t, dir, lgConfig())
		for _, b := range batches {
			lgAppend(t, l, b)
		}
		lgCrash(t, l)
		if err := os.Truncate(filepath.Join(dir, segmentName(0)+".log"), tt.cut); err != nil {
			t.Fatal(err)
		}
		l = lgOpen(t, dir, lgConfig())
		rep := l.Recovery()
		kept := int64(0)
		if tt.wantBatches > 0 {
			kept = pos[tt.wantBatches-1] + int64(len(batches[tt.wantBatches-1]))
		}
		torn := tt.cut > kept
		wantAt, wantDropped, wantN := int64(-1), int64(0), 0
		if torn {
			wantAt, wantDropped, wantN = int64(2*tt.wantBatches), tt.cut-kept, 1
		}
		if rep.TruncatedAt != wantAt || rep.DroppedBytes != wantDropped || rep.DroppedBatches != wantN {
			t.Errorf("#%d: got truncated at %d, %d bytes, %d batches; want %d, %d, %d", i, rep.TruncatedAt, rep.DroppedBytes, rep.DroppedBatches, wantAt, wantDropped, wantN)
		}
		if torn != errors.Is(rep.Reason, ErrTruncated) {
			t.Errorf("#%d: got reason %v, want ErrTruncated: %v", i, rep.Reason, torn)
		}
		if got := l.LogEndOffset(); got != int64(2*tt.wantBatches) {
			t.Errorf("#%d: got log end %d, want %d", i, got, 2*tt.wantBatches)
		}
		if got := l.RecoveryPoint(); got != l.LogEndOffset() {
			t.Errorf("#%d: got recovery point %d, want the log end", i, got)
		}
		lgSameBatches(t, lgReadAll(t, l), batches[:tt.wantBatches])
		if fi, _ := os.Stat(filepath.Join(dir, segmentName(0)+".log")); fi.Size() != kept {
			t.Errorf("#%d: log file is %d bytes, want %d", i, fi.Size(), kept)
		}
		more := lgBatch(1, 0, 1, 0)
		lgAppend(t, l, more)
		lgSameBatches(t, lgReadAll(t, l), append(slices.Clone(batches[:tt.wantBatches]), more))
	}
}

func TestRecoveryBitFlip(t *testing.T) {
	var batches [][]byte
	for i := range 10 {
		batches = append(batches, lgBatch(3, int64(i), 200, byte(i)))
	}
	pos := lgPositions(batches)
	tests := []struct {
		at          int64 // byte flipped (xor 0x10)
		wantBatches int
		wantErr     error
	}{
		{pos[5] + 100, 5, ErrCRCMismatch},
		{pos[5] + int64(len(batches[5])) - 1, 5, ErrCRCMismatch},
		{pos[5] + offCRC, 5, ErrCRCMismatch},
		{pos[5] + offAttributes, 5, ErrCRCMismatch},
		{pos[5] + offMagic, 5, ErrBadMagic},
		{pos[5] + offBaseOffset + 7, 5, ErrCorrupt}, // base offset does not follow
		{pos[5] + offBatchLength + 3, 5, ErrCorrupt},
		{pos[0] + 70, 0, ErrCRCMismatch},
		{pos[9] + 70, 9, ErrCRCMismatch},
		{pos[5] + offLeaderEpoch, 10, nil}, // outside the CRC: undetectable
	}
	for i, tt := range tests {
		dir := t.TempDir()
		l := lgOpen(t, dir, lgConfig())
		for _, b := range batches {
			lgAppend(t, l, b)
		}
		lgCrash(t, l)
		path := filepath.Join(dir, segmentName(0)+".log")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[tt.at] ^= 0x10
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l = lgOpen(t, dir, lgConfig())
		rep := l.Recovery()
		if !errors.Is(rep.Reason, tt.wantErr) || (tt.wantErr == nil) != (rep.Reason == nil) {
			t.Errorf("#%d: got reason %v, want %v", i, rep.Reason, tt.wantErr)
		}
		if tt.wantErr != nil {
			if want := int64(len(data)) - pos[tt.wantBatches]; rep.DroppedBytes != want {
				t.Errorf("#%d: dropped %d bytes, want %d", i, rep.DroppedBytes, want)
			}
			if rep.TruncatedAt != int64(3*tt.wantBatches) {
				t.Errorf("#%d: truncated at %d, want %d", i, rep.TruncatedAt, 3*tt.wantBatches)
			}
		}
		got := lgReadAll(t, l)
		if len(got) != tt.wantBatches {
			t.Fatalf("#%d: recovered %d batches, want %d", i, len(got), tt.wantBatches)
		}
		for j := range got {
			if !bytes.Equal(got[j], data[pos[j]:pos[j]+int64(len(batches[j]))]) {
				t.Errorf("#%d: batch %d differs from the file's", i, j)
			}
		}
	}
}

func TestRecoveryDamageInEarlierSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	one := len(lgBatch(2, 0, 100, 0))
	cfg.SegmentBytes = int64(3 * one)
	l := lgOpen(t, dir, cfg, withCheckpointInterval(time.Hour))
	batches := lgFill(t, l, 11, 2, 100, 0) // segments 0, 6, 12, 18 (2 batches)
	lgCrash(t, l)
	seg1 := filepath.Join(dir, segmentName(6)+".log")
	data, _ := os.ReadFile(seg1)
	data[one+80] ^= 1 // batch 4, the second of segment 6
	if err := os.WriteFile(seg1, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, cfg)
	rep := l.Recovery()
	if rep.ScannedSegments != 2 || rep.TruncatedAt != 8 || rep.DroppedBatches != 2+3+2 || rep.DroppedBytes != int64(7*one) {
		t.Errorf("got %+v; want 2 segments scanned, cut at 8, 7 batches of %d bytes dropped", rep, one)
	}
	wantDropped := []string{filepath.Join(dir, segmentName(12)+".log"), filepath.Join(dir, segmentName(18)+".log")}
	if !slices.Equal(rep.DroppedSegments, wantDropped) {
		t.Errorf("dropped segments: got %v, want %v", rep.DroppedSegments, wantDropped)
	}
	lgSameBatches(t, lgReadAll(t, l), batches[:4])
	if got := lgSegmentBases(l); !slices.Equal(got, []int64{0, 6}) {
		t.Errorf("segments: got %v, want [0 6]", got)
	}
	more := lgFill(t, l, 3, 2, 100, 0)
	lgSameBatches(t, lgReadAll(t, l), append(slices.Clone(batches[:4]), more...))
}

func TestRecoveryTrustsBelowRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	l := lgOpen(t, dir, cfg, withCheckpointInterval(0))
	want := lgFill(t, l, 20, 2, 300, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	nsegs, end := len(l.Segments()), l.LogEndOffset()
	lgCrash(t, l) // waits for the flusher, which writes the checkpoint after the fsync
	if rp, _, _ := readOffsetCheckpoint(dir, recoveryPointFile); rp != end {
		t.Fatalf("recovery point checkpoint %d, want %d", rp, end)
	}
	l = lgOpen(t, dir, cfg)
	if rep := l.Recovery(); rep.Clean || rep.ScannedSegments != 1 || rep.Reason != nil {
		t.Errorf("got %+v; want only the last of %d segments scanned", rep, nsegs)
	}
	lgSameBatches(t, lgReadAll(t, l), want)
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	l := lgOpen(t, dir, cfg)
	want := lgFill(t, l, 30, 2, 200, 1000)
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	orig := map[string][]byte{}
	for _, s := range segs {
		for _, p := range []string{s.IndexPath, s.TimeIndexPath} {
			orig[p], _ = os.ReadFile(p)
		}
	}
	// Segment 0 loses its index, segment 1 its time index, and the last
	// index entry of segment 2 names the wrong offset.
	if err := os.Remove(segs[0].IndexPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segs[1].TimeIndexPath); err != nil {
		t.Fatal(err)
	}
	idx := slices.Clone(orig[segs[2].IndexPath])
	n := len(idx)
	binary.BigEndian.PutUint32(idx[n-8:], binary.BigEndian.Uint32(idx[n-8:])+1)
	if err := os.WriteFile(segs[2].IndexPath, idx, 0o644); err != nil {
		t.Fatal(err)
	}
	// Leftovers: a checkpoint temp file and an orphan index.
	for _, name := range []string{recoveryPointFile + tmpSuffix, segmentName(999) + ".index"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	l = lgOpen(t, dir, cfg)
	rep := l.Recovery()
	wantRebuilt := []string{segs[0].IndexPath, segs[1].TimeIndexPath, segs[2].IndexPath}
	if !rep.Clean || !slices.Equal(rep.RebuiltIndexes, wantRebuilt) {
		t.Errorf("rebuilt: got %v, want %v", rep.RebuiltIndexes, wantRebuilt)
	}
	slices.Sort(rep.RemovedFiles)
	if want := []string{segmentName(999) + ".index", recoveryPointFile + tmpSuffix}; !slices.Equal(rep.RemovedFiles, want) {
		t.Errorf("removed: got %v, want %v", rep.RemovedFiles, want)
	}
	for _, name := range rep.RemovedFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still exists", name)
		}
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for p, want := range orig {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s: rebuilt index differs from the original", filepath.Base(p))
		}
	}
}

// lgFuzzTemplate is a log of valid batches over four segments, built once.
var lgFuzzTemplate = sync.OnceValues(func() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "strata-fuzz-recovery-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	l, err := Open(dir, lgFuzzConfig())
	if err != nil {
		return nil, err
	}
	for i := range 16 {
		if _, err := l.Append(lgBatch(1+i%3, int64(i), 20+17*i, byte(i)), AppendOptions{LeaderEpoch: 0}); err != nil {
			return nil, err
		}
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Name() == cleanShutdownFile || e.Name() == recoveryPointFile {
			continue // recovered as after a crash, scanning everything
		}
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	return files, nil
})

func lgFuzzConfig() Config {
	cfg := lgConfig()
	cfg.SegmentBytes = 1200
	cfg.IndexIntervalBytes = 150
	return cfg
}

// FuzzRecovery damages a log of valid batches (truncating one segment file
// and flipping bits anywhere) and checks that Open never panics, recovers
// exactly the batches before the first damaged one, byte for byte, reports
// what it dropped, and takes appends again.
//
// Input: byte 0 picks the segment file to cut (>= 0x80: none), bytes 1-4
// the cut length (modulo the file size + 1); then up to 8 groups of 5
// bytes: a position in the concatenated .log files and the bit to flip.
// Flips inside a partition leader epoch field are skipped: Kafka's CRC does
// not cover it, so that damage is undetectable by design.
func FuzzRecovery(f *testing.F) {
	f.Add([]byte{0x80})
	f.Add([]byte{3, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 1, 0})
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 2, 100, 3})
	f.Add([]byte{2, 0, 0, 0, 61, 0, 0, 0, 10, 7})
	f.Fuzz(func(t *testing.T, in []byte) {
		tmpl, err := lgFuzzTemplate()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var logs []string // .log names in order
		for name, data := range tmpl {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(name, ".log") {
				logs = append(logs, name)
			}
		}
		slices.Sort(logs)

		// The batches of the template, in order, with where they live.
		type loc struct {
			file    int
			pos     int64
			size    int64
			next    int64
			damaged bool
		}
		var locs []loc
		files := make([][]byte, len(logs))
		for i, name := range logs {
			files[i] = slices.Clone(tmpl[name])
			for p := int64(0); p < int64(len(files[i])); {
				h, err := ValidateBatch(files[i][p:])
				if err != nil {
					t.Fatal(err)
				}
				locs = append(locs, loc{file: i, pos: p, size: int64(h.Size()), next: h.NextOffset()})
				p += int64(h.Size())
			}
		}

		// Damage the files.
		if len(in) >= 5 && in[0] < 0x80 {
			fi := int(in[0]) % len(files)
			cut := int64(binary.BigEndian.Uint32(in[1:5]) % uint32(len(files[fi])+1))
			files[fi] = files[fi][:cut]
			for i := range locs {
				if locs[i].file == fi && locs[i].pos+locs[i].size > cut {
					locs[i].damaged = true
				}
			}
		}
		var total int64
		for _, b := range files {
			total += int64(len(b))
		}
		for rest := in[min(len(in), 5):]; len(rest) >= 5 && total > 0; rest = rest[5:] {
			at := int64(binary.BigEndian.Uint32(rest) % uint32(total))
			fi := 0
			for at >= int64(len(files[fi])) {
				at -= int64(len(files[fi]))
				fi++
			}
			files[fi][at] ^= 1 << (rest[4] % 8)
		}
		// A batch is damaged when cut or changed anywhere but in its leader
		// epoch (flipping a bit twice restores it).
		for i, l := range locs {
			f, orig := files[l.file], tmpl[logs[l.file]][l.pos:l.pos+l.size]
			if l.damaged {
				continue
			}
			got := f[l.pos : l.pos+l.size]
			if !bytes.Equal(got[:offLeaderEpoch], orig[:offLeaderEpoch]) || !bytes.Equal(got[offLeaderEpoch+4:], orig[offLeaderEpoch+4:]) {
				locs[i].damaged = true
			}
		}
		for i, name := range logs {
			if err := os.WriteFile(filepath.Join(dir, name), files[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}

		// What must survive: the batches before the first damaged one.
		var want [][]byte
		wantNext := int64(0)
		for _, l := range locs {
			if l.damaged {
				break
			}
			want = append(want, files[l.file][l.pos:l.pos+l.size])
			wantNext = l.next
		}
		var kept int64
		for _, b := range want {
			kept += int64(len(b))
		}

		l := lgOpen(t, dir, lgFuzzConfig())
		rep := l.Recovery()
		lgSameBatches(t, lgReadAll(t, l), want)
		if got := l.LogEndOffset(); got != wantNext {
			t.Fatalf("log end %d, want %d", got, wantNext)
		}
		if rep.DroppedBytes != total-kept {
			t.Errorf("dropped %d bytes, want %d (report %+v)", rep.DroppedBytes, total-kept, rep)
		}
		if damaged := total > kept; damaged != (rep.TruncatedAt >= 0) || damaged && (rep.TruncatedAt != wantNext || !IsCorrupt(rep.Reason)) {
			t.Errorf("report %+v; want truncation at %d: %v", rep, wantNext, damaged)
		}
		more := lgBatch(2, 7, 33, 9)
		if _, err := l.Append(more, AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
		lgSameBatches(t, lgReadAll(t, l), append(want, more))
	})
}
