package tiering

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// testOrdersID is the topic id of testManifest's topic.
const testOrdersID = "0a1b2c3d-0000-4000-8000-0000000000b1"

// testManifest returns a valid manifest of n contiguous segments of 100
// offsets from base 100, written at epoch 3.
func testManifest(n int) *Manifest {
	m := NewManifest("orders", testOrdersID, 2)
	m.LeaderEpoch = 3
	m.LogStartOffset = 100
	for i := range n {
		base := int64(100 + 100*i)
		m.Segments = append(m.Segments, RemoteSegment{
			BaseOffset: base, NextOffset: base + 100, Size: 4096, MaxTimestamp: 1000 + base,
			Epoch: 3, ID: "abc" + string(rune('0'+i)),
			LeaderEpochs: []segment.EpochEntry{{Epoch: 3, StartOffset: base}},
			UploadedAt:   time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		})
	}
	m.Configs = map[string]string{"retention.ms": "-1"}
	m.NumPartitions = 4
	m.UpdatedAt = time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	m := testManifest(3)
	b, err := EncodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, m)
	}
	if m.EndOffset() != 400 || m.Bytes() != 3*4096 {
		t.Fatalf("end %d bytes %d", m.EndOffset(), m.Bytes())
	}
}

func TestManifestValidate(t *testing.T) {
	for i, tc := range []struct {
		edit func(m *Manifest)
		ok   bool
		says string
	}{
		{func(m *Manifest) {}, true, ""},
		{func(m *Manifest) { m.Segments = nil; m.LogStartOffset = 777 }, true, ""},
		{func(m *Manifest) { m.LogStartOffset = 150 }, true, ""},
		{func(m *Manifest) { m.Version = 1 }, false, "version"},
		{func(m *Manifest) { m.Version = 2 }, false, "version"}, // decoded as 3
		{func(m *Manifest) { m.Version = 4 }, false, "version"},
		{func(m *Manifest) { m.RemoteCleanerCheckpoint = m.EndOffset() }, true, ""},
		{func(m *Manifest) { m.RemoteCleanerCheckpoint = 150 }, true, ""},
		{func(m *Manifest) { m.RemoteCleanerCheckpoint = m.EndOffset() + 1 }, false, "remote cleaner checkpoint"},
		{func(m *Manifest) { m.RemoteCleanerCheckpoint = -1 }, false, "remote cleaner checkpoint"},
		{func(m *Manifest) { m.TopicID = "" }, false, "topic id"},
		{func(m *Manifest) { m.TopicID = "tid-1" }, false, "topic id"},
		{func(m *Manifest) { m.TopicID = strings.ToUpper(testOrdersID) }, false, "topic id"},
		{func(m *Manifest) { m.LegacyKeys, m.TopicID = true, "" }, true, ""},
		{func(m *Manifest) {
			m.Dropped = []DroppedSegment{{RemoteSegment: m.Segments[0]}}
			m.Segments[0].ID = "other"
		}, true, ""},
		{func(m *Manifest) { m.Dropped = []DroppedSegment{{RemoteSegment: m.Segments[1]}} }, false, "also those of"},
		{func(m *Manifest) {
			m.Dropped = []DroppedSegment{{RemoteSegment: m.Segments[1]}, {RemoteSegment: m.Segments[1]}}
			m.Segments[1].ID = "other"
		}, false, "also those of"},
		{func(m *Manifest) { m.Dropped = []DroppedSegment{{RemoteSegment: m.Segments[1]}}; m.Dropped[0].ID = "" }, false, "dropped segment 0"},
		{func(m *Manifest) { m.Topic = "" }, false, "topic"},
		{func(m *Manifest) { m.Topic = "a/b" }, false, "topic"},
		{func(m *Manifest) { m.Partition = -1 }, false, "partition"},
		{func(m *Manifest) { m.LeaderEpoch = -1 }, false, "leader epoch"},
		{func(m *Manifest) { m.Segments[1].BaseOffset = 210 }, false, "does not follow"},               // gap
		{func(m *Manifest) { m.Segments[1].BaseOffset = 190 }, false, "does not follow"},               // overlap
		{func(m *Manifest) { m.Segments[0], m.Segments[1] = m.Segments[1], m.Segments[0] }, false, ""}, // unsorted
		{func(m *Manifest) { m.Segments[2].NextOffset = m.Segments[2].BaseOffset }, false, "offsets"},
		{func(m *Manifest) { m.Segments[0].Size = 0 }, false, "size"},
		{func(m *Manifest) { m.Segments[0].Epoch = 4 }, false, "uploader epoch"},
		{func(m *Manifest) { m.Segments[0].ID = "../x" }, false, "id"},
		{func(m *Manifest) { m.Segments[0].ID = "" }, false, "id"},
		{func(m *Manifest) { m.LogStartOffset = 99 }, false, "log start"},
		{func(m *Manifest) { m.LogStartOffset = 200 }, false, "log start"}, // first segment wholly below
		{func(m *Manifest) { m.Segments[0].LeaderEpochs[0].StartOffset = 99 }, false, "leader epoch entry"},
		{func(m *Manifest) {
			m.Segments[0].LeaderEpochs = append(m.Segments[0].LeaderEpochs, segment.EpochEntry{Epoch: 2, StartOffset: 150})
		}, false, "leader epoch entry"},
	} {
		m := testManifest(3)
		tc.edit(m)
		err := m.Validate()
		if tc.ok != (err == nil) {
			t.Errorf("#%d: got %v, want ok=%v", i, err, tc.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("#%d: got %v, want ErrBadManifest saying %q", i, err, tc.says)
		}
		if _, eerr := EncodeManifest(m); (eerr == nil) != tc.ok {
			t.Errorf("#%d: encode: %v", i, eerr)
		}
	}
}

func TestDecodeManifestRefuses(t *testing.T) {
	good, err := EncodeManifest(testManifest(1))
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range [][]byte{
		nil,
		[]byte("{"),
		[]byte(`{"version":4,"topic":"x"}`),
		bytes.Replace(good, []byte(`"version":2`), []byte(`"version":2,"remote_cleaner_checkpoint":150`), 1), // a v3 field in v2
		[]byte(`{"version":2,"topic":"x"}`),                                                     // no topic id
		bytes.Replace(good, []byte(`"version":2`), []byte(`"version":2,"extra":true`), 1),       // unknown field
		bytes.Replace(good, []byte(`"version":2`), []byte(`"version":1,"legacy_keys":true`), 1), // a v2 field in v1
		append(bytes.TrimSpace(good), []byte(` {}`)...),                                         // trailing data
		bytes.Replace(good, []byte(`"next_offset":200`), []byte(`"next_offset":100`), 1),        // empty segment
	} {
		if _, err := DecodeManifest(b); !errors.Is(err, ErrBadManifest) {
			t.Errorf("#%d: got %v, want ErrBadManifest", i, err)
		}
	}
}

func TestLeaderEpochEntries(t *testing.T) {
	m := testManifest(3)
	m.Segments[1].LeaderEpochs = []segment.EpochEntry{{Epoch: 3, StartOffset: 200}, {Epoch: 5, StartOffset: 250}}
	m.Segments[2].LeaderEpochs = []segment.EpochEntry{{Epoch: 5, StartOffset: 300}, {Epoch: 6, StartOffset: 310}}
	m.LeaderEpoch = 6
	m.LogStartOffset = 120
	got := m.LeaderEpochEntries()
	want := []segment.EpochEntry{{Epoch: 3, StartOffset: 120}, {Epoch: 5, StartOffset: 250}, {Epoch: 6, StartOffset: 310}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func newTestLocalStore(t *testing.T) *LocalStore {
	t.Helper()
	s, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCommitManifest(t *testing.T) {
	ctx := context.Background()
	s := newTestLocalStore(t)
	if _, _, err := LoadManifest(ctx, s, "orders", testOrdersID, 2); !IsNotFound(err) {
		t.Fatalf("load before any commit: %v", err)
	}
	m := testManifest(1)
	etag, err := CommitManifest(ctx, s, m, "")
	if err != nil {
		t.Fatal(err)
	}
	// A second first-commit loses.
	if _, err := CommitManifest(ctx, s, m, ""); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("second create: %v", err)
	}
	got, getag, err := LoadManifest(ctx, s, "orders", testOrdersID, 2)
	if err != nil || getag != etag || !reflect.DeepEqual(got, m) {
		t.Fatalf("load: %v etag %s/%s", err, getag, etag)
	}
	// The next version, from the current etag.
	m2 := testManifest(2)
	etag2, err := CommitManifest(ctx, s, m2, etag)
	if err != nil {
		t.Fatal(err)
	}
	// A writer still at the first version loses.
	if _, err := CommitManifest(ctx, s, testManifest(3), etag); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("stale etag: %v", err)
	}
	// A newer epoch takes over; the old epoch is fenced, even with the
	// right etag.
	m3 := testManifest(2)
	m3.LeaderEpoch = 4
	etag3, err := CommitManifest(ctx, s, m3, etag2)
	if err != nil {
		t.Fatal(err)
	}
	old := testManifest(3)
	if _, err := CommitManifest(ctx, s, old, etag3); !errors.Is(err, ErrFenced) {
		t.Fatalf("lower epoch: %v, want fenced", err)
	}
	// Another incarnation of the topic writes under its own key and
	// never meets this one.
	other := testManifest(2)
	other.LeaderEpoch, other.TopicID = 9, "0a1b2c3d-0000-4000-8000-0000000000b2"
	if _, err := CommitManifest(ctx, s, other, etag3); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("other topic id, with this one's etag: %v, want a precondition failure", err)
	}
	if _, err := CommitManifest(ctx, s, other, ""); err != nil {
		t.Fatalf("other topic id: %v", err)
	}
	if got, _, err := LoadManifest(ctx, s, "orders", other.TopicID, 2); err != nil || got.LeaderEpoch != 9 {
		t.Fatalf("other incarnation's manifest: %+v, %v", got, err)
	}
	// In the legacy layout two incarnations share the key: the other
	// one's manifest is refused.
	legacy := testManifest(1)
	legacy.LegacyKeys = true
	letag, err := CommitManifest(ctx, s, legacy, "")
	if err != nil {
		t.Fatal(err)
	}
	legacyOther := testManifest(1)
	legacyOther.LegacyKeys, legacyOther.TopicID = true, other.TopicID
	if _, err := CommitManifest(ctx, s, legacyOther, letag); !errors.Is(err, ErrTopicMismatch) {
		t.Fatalf("legacy manifest of another topic id: %v, want ErrTopicMismatch", err)
	}
	// Invalid manifests are never written.
	bad := testManifest(2)
	bad.LeaderEpoch = 5
	bad.Segments[1].BaseOffset++
	if _, err := CommitManifest(ctx, s, bad, etag3); !errors.Is(err, ErrBadManifest) {
		t.Fatalf("invalid: %v", err)
	}
	if _, cur, _ := LoadManifest(ctx, s, "orders", testOrdersID, 2); cur != etag3 {
		t.Fatal("manifest changed by refused commits")
	}
	// A manifest stored under the wrong key is refused on load.
	data, err := EncodeManifest(testManifest(0))
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, ManifestKey("orders", testOrdersID, 3), data, PutCondition{})
	if _, _, err := LoadManifest(ctx, s, "orders", testOrdersID, 3); !errors.Is(err, ErrBadManifest) {
		t.Fatalf("misplaced manifest: %v", err)
	}
}

// TestCommitManifestRace runs writers of two epochs against one manifest,
// each reloading after a lost race: every commit of the newer epoch gets
// in, and no segment of the older epoch follows one of the newer epoch.
func TestCommitManifestRace(t *testing.T) {
	ctx := context.Background()
	s := newTestLocalStore(t)
	if _, err := CommitManifest(ctx, s, testManifest(1), ""); err != nil {
		t.Fatal(err)
	}
	writer := func(epoch int32, rounds int) {
		for range rounds {
			for {
				m, etag, err := LoadManifest(ctx, s, "orders", testOrdersID, 2)
				if err != nil {
					t.Error(err)
					return
				}
				if m.LeaderEpoch > epoch {
					return // fenced, as an archiver finds out on reload
				}
				next := m.Clone()
				next.LeaderEpoch = epoch
				last := next.Segments[len(next.Segments)-1]
				next.Segments = append(next.Segments, RemoteSegment{
					BaseOffset: last.NextOffset, NextOffset: last.NextOffset + 10, Size: 1, MaxTimestamp: -1,
					Epoch: epoch, ID: newObjectID(),
				})
				_, err = CommitManifest(ctx, s, next, etag)
				if errors.Is(err, ErrFenced) {
					return
				}
				if errors.Is(err, ErrPreconditionFailed) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				break
			}
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { writer(3, 20) })
		wg.Go(func() { writer(4, 20) })
	}
	wg.Wait()
	m, _, err := LoadManifest(ctx, s, "orders", testOrdersID, 2)
	if err != nil {
		t.Fatal(err)
	}
	newer := 0
	for i, seg := range m.Segments[1:] {
		switch {
		case seg.Epoch == 4:
			newer++
		case newer > 0:
			t.Fatalf("segment %d of epoch %d after %d of epoch 4", i+1, seg.Epoch, newer)
		}
	}
	if newer != 60 || m.LeaderEpoch != 4 {
		t.Fatalf("%d segments of epoch 4, want 60; manifest epoch %d", newer, m.LeaderEpoch)
	}
}

// FuzzDecodeManifest: decoding never panics, and a manifest that decodes
// encodes to bytes that decode to the same manifest.
func FuzzDecodeManifest(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		b, err := EncodeManifest(testManifest(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"topic":"t","partition":0,"leader_epoch":0,"log_start_offset":0,"segments":[]}`))
	withDropped := testManifest(3)
	withDropped.Dropped = []DroppedSegment{{RemoteSegment: withDropped.Segments[0], DroppedAt: withDropped.UpdatedAt}}
	withDropped.Segments, withDropped.LogStartOffset = withDropped.Segments[1:], 200
	if b, err := EncodeManifest(withDropped); err != nil {
		f.Fatal(err)
	} else {
		f.Add(b)
	}
	if b, err := os.ReadFile("testdata/legacy-bucket/events/1/manifest"); err != nil {
		f.Fatal(err)
	} else {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("error not ErrBadManifest: %v", err)
			}
			return
		}
		enc, err := EncodeManifest(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		m2, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", m, m2)
		}
	})
}

// TestManifestCleanerCheckpointVersions: a manifest without a remote
// cleaner checkpoint is written as version 2 (older brokers read it), one
// with a checkpoint as version 3; both decode to the same manifest.
func TestManifestCleanerCheckpointVersions(t *testing.T) {
	for _, ckpt := range []int64{0, 150} {
		m := testManifest(3)
		m.RemoteCleanerCheckpoint = ckpt
		b, err := EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		want := `"version":2,`
		if ckpt > 0 {
			want = `"version":3,`
		}
		if !bytes.Contains(b, []byte(want)) || bytes.Contains(b, []byte("remote_cleaner_checkpoint")) != (ckpt > 0) {
			t.Errorf("checkpoint %d: encoded %s, want %s", ckpt, b, want)
		}
		got, err := DecodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != ManifestVersion || got.RemoteCleanerCheckpoint != ckpt || m.Version != ManifestVersion {
			t.Errorf("checkpoint %d: decoded version %d checkpoint %d", ckpt, got.Version, got.RemoteCleanerCheckpoint)
		}
	}
}
