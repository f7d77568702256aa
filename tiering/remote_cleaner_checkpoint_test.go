package tiering

import (
	"testing"
	"time"

	"github.com/stratastream/strata/tiering/miniotest"
)

// TestRemoteCleanerCheckpointSurvivesLeaderChange runs the remote cleaner
// of a compacted partition against a real MinIO until it covers the
// remote log, then hands the partition to a new leader (a new archiver,
// a higher leader epoch, nothing but the bucket in common: a leader
// change, or the broker restarted) and, later, to a third one. The
// checkpoint is in the stored manifest (version 3); each next leader
// reads it there and its first round starts where the last one ended,
// not at offset 0; the rounds' swaps keep moving it; the remote log read
// from 0 keeps Kafka's guarantee.
func TestRemoteCleanerCheckpointSurvivesLeaderChange(t *testing.T) {
	mc := miniotest.Start(t)
	store, _ := newS3Store(t, mc, nil)
	cl := newCompactLog(t, 50)
	cfg := compactArchiverConfig(t, cl, store)

	var last RemoteCleanStats
	for epoch := int32(1); epoch <= 3; epoch++ {
		cl.produce(200)
		want := cl.cleanedEnd(cl.clean())
		stored, _, err := LoadManifest(testCtx(t), store, testTopic, testTopicID, testPartition)
		var storedCkpt int64
		switch {
		case epoch == 1 && err == nil:
			t.Fatalf("a manifest before the first leader: %+v", stored)
		case epoch > 1 && err != nil:
			t.Fatal(err)
		case epoch > 1:
			storedCkpt = stored.RemoteCleanerCheckpoint
			if storedCkpt != last.CheckpointOffset || storedCkpt == 0 {
				t.Fatalf("epoch %d: stored checkpoint %d, the last leader's %d", epoch, storedCkpt, last.CheckpointOffset)
			}
		}

		a := newCompactArchiver(t, cfg, cl.gate, false, nil)
		a.BecomeLeader(epoch)
		waitUploaded(t, a, want)
		waitFor(t, 60*time.Second, "the remote cleaner to cover the remote log", func() bool {
			st := a.RemoteCleanStats()
			return st.Rounds > 0 && st.CheckpointOffset >= a.Manifest().EndOffset()
		})
		st := a.RemoteCleanStats()
		t.Logf("epoch %d: stored checkpoint %d, first round from %d, %d rounds, checkpoint now %d, remote end %d",
			epoch, storedCkpt, st.LastDirtyStart, st.Rounds, st.CheckpointOffset, a.Manifest().EndOffset())
		if epoch > 1 && st.Rounds == 1 && st.LastDirtyStart != storedCkpt {
			t.Errorf("epoch %d: the new leader's round started at %d, want the stored checkpoint %d", epoch, st.LastDirtyStart, storedCkpt)
		}
		if epoch > 1 && st.LastDirtyStart < storedCkpt {
			t.Errorf("epoch %d: a round started at %d, below the stored checkpoint %d: the remote log was cleaned again from there", epoch, st.LastDirtyStart, storedCkpt)
		}
		if st.CheckpointOffset <= storedCkpt {
			t.Errorf("epoch %d: the checkpoint did not move on from %d", epoch, storedCkpt)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		last = st
	}

	m, _, err := LoadManifest(testCtx(t), store, testTopic, testTopicID, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	if m.RemoteCleanerCheckpoint != last.CheckpointOffset || m.LeaderEpoch != 3 {
		t.Fatalf("stored manifest epoch %d checkpoint %d, want 3 and %d", m.LeaderEpoch, m.RemoteCleanerCheckpoint, last.CheckpointOffset)
	}
	r := newTestReader(t, store, ReaderConfig{ChunkBytes: 1024})
	recs, _ := readRemote(t, r, m, 0, m.EndOffset())
	checkCompacted(t, cl, recs, m.EndOffset(), false)
}
