package segment

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTxnIndexRemove: Remove drops the named entries (by producer and
// marker offset, ignoring unknown ones) from memory and from their files:
// a file keeping some entries is rewritten, one keeping none is deleted,
// the others are untouched; a reopen loads the same entries; later
// Appends and TruncateTo work on the result.
func TestTxnIndexRemove(t *testing.T) {
	dir := t.TempDir()
	x, _, err := OpenTxnIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents := []struct {
		seg int64
		AbortedTxn
	}{
		{0, AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 3}},
		{0, AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 5}},
		{10, AbortedTxn{ProducerID: 1, FirstOffset: 8, LastOffset: 12}},
		{20, AbortedTxn{ProducerID: 3, FirstOffset: 20, LastOffset: 21}},
		{20, AbortedTxn{ProducerID: 1, FirstOffset: 22, LastOffset: 24}},
	}
	for _, e := range ents {
		if err := x.Append(e.seg, e.AbortedTxn); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	file20, err := os.ReadFile(filepath.Join(dir, TxnIndexFileName(20)))
	if err != nil {
		t.Fatal(err)
	}
	// Remove the first of segment 0 and segment 10's only entry; an
	// unknown one (right producer, wrong marker) is ignored.
	if err := x.Remove([]AbortedTxn{ents[0].AbortedTxn, ents[2].AbortedTxn, {ProducerID: 3, LastOffset: 22}}); err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{ents[1].AbortedTxn, ents[3].AbortedTxn, ents[4].AbortedTxn}
	if got := x.Entries(); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, TxnIndexFileName(10))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 10's file after its only entry went: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, TxnIndexFileName(0))); err != nil || len(b) != TxnIndexEntrySize {
		t.Fatalf("segment 0's file: %d bytes, %v; want one entry", len(b), err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, TxnIndexFileName(20))); err != nil || string(b) != string(file20) {
		t.Fatalf("segment 20's file changed: %v", err)
	}
	if got := x.CollectAborted(0, 100); !slices.Equal(got, want) {
		t.Fatalf("CollectAborted %v, want %v", got, want)
	}
	reopened, warns, err := OpenTxnIndex(dir)
	if err != nil || len(warns) > 0 {
		t.Fatalf("reopen: %v %v", err, warns)
	}
	if got := reopened.Entries(); !slices.Equal(got, want) {
		t.Fatalf("reopened entries %v, want %v", got, want)
	}
	if err := x.Remove(nil); err != nil {
		t.Fatal(err)
	}
	// The index goes on: an append, a truncation into segment 20.
	next := AbortedTxn{ProducerID: 2, FirstOffset: 30, LastOffset: 31}
	if err := x.Append(30, next); err != nil {
		t.Fatal(err)
	}
	if err := x.TruncateTo(22); err != nil {
		t.Fatal(err)
	}
	want = want[:2]
	if got := x.Entries(); !slices.Equal(got, want) {
		t.Fatalf("after append and truncation: %v, want %v", got, want)
	}
	reopened, warns, err = OpenTxnIndex(dir)
	if err != nil || len(warns) > 0 {
		t.Fatalf("reopen: %v %v", err, warns)
	}
	if got := reopened.Entries(); !slices.Equal(got, want) {
		t.Fatalf("reopened after truncation: %v, want %v", got, want)
	}
}
