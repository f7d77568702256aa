package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/coord/zktest"
)

// TestReassignTieredReplicaRemoteState adds a replica to a tiered
// partition whose older segments are only in the object store (KIP-1023):
// the new replica starts at the leader's local log start, not at 0, and
// takes from the store the leader epochs of the remote part and the
// producer state there, so it knows an idempotent producer whose batches
// are all remote. The leader keeps that producer too once its batches
// left the local log (its log starts in the store).
func TestReassignTieredReplicaRemoteState(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-reassign-tiered")
	store := t.TempDir()
	var srv []*Server
	for id := 1; id <= 2; id++ {
		props := maps.Clone(tieredProps)
		props["broker.id"], props["zookeeper.connect"], props["remote.storage.dir"] = fmt.Sprint(id), connect, store
		srv = append(srv, startServer(t, props))
	}
	waitFor(t, "both brokers registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == 2 })
	const topic = "rt"
	cl := newClient(t, srv[0])
	adm := kadm.NewClient(cl)
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{1})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, topic, 0)
	waitFor(t, "rt-0 on broker 1 alone", func() bool {
		p := partitionInfo(srv[0], topic, 0)
		return slices.Equal(p.Replicas, []int32{1}) && slices.Equal(p.State.ISR, []int32{1}) && srv[0].topic(topic).local(0) != nil
	})

	// Producer A writes the first records and stops; producer B writes
	// many more, so that A's batches leave broker 1's local log.
	const first, total = 100, 1500
	idempotent := func() *kgo.Client {
		c, err := kgo.NewClient(kgo.SeedBrokers(srv[0].Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a := idempotent()
	produceTiered(t, a, topic, 0, first)
	a.Close()
	lp := srv[0].topic(topic).local(0)
	lp.appendMu.Lock()
	ids := lp.producers.ProducerIDs()
	lp.appendMu.Unlock()
	if len(ids) != 1 {
		t.Fatalf("producers after A: %v, want one", ids)
	}
	pidA := ids[0]
	_, aBatches, _ := lp.producers.Producer(pidA)
	aLast := aBatches[len(aBatches)-1]
	produceTiered(t, idempotent(), topic, first, total)
	waitFor(t, "A's batches only in the store", func() bool {
		m := lp.remoteManifest()
		return lp.log.LogStartOffset() > first && m != nil && m.EndOffset() >= lp.log.LogStartOffset()
	})
	srv[0].enforceRetention() // retention trims producers; A must stay
	if _, bs, ok := lp.producers.Producer(pidA); !ok || bs[len(bs)-1] != aLast {
		t.Fatalf("broker 1 forgot producer A (last batch %+v) once its batches were remote: ok %v %+v", aLast, ok, bs)
	}
	// Local retention keeps the leader epochs of what it deleted: they
	// are still the log's, in the store.
	if es := lp.log.Epochs().Entries(); len(es) == 0 || es[0].StartOffset != 0 {
		t.Fatalf("broker 1's leader epochs %v after local retention (log start %d), want them from offset 0", es, lp.log.LogStartOffset())
	}

	leaderStart := lp.log.LogStartOffset()
	req = nil
	req.Assign(topic, 0, []int32{1, 2})
	mustAlter(t, adm, req)
	took := waitNoReassignment(t, adm, topic, 0)
	waitFor(t, "ISR [1 2]", func() bool {
		return len(partitionInfo(srv[0], topic, 0).State.ISR) == 2
	})
	fp := srv[1].topic(topic).local(0)
	start := fp.log.LogStartOffset()
	srv[1].enforceRetention() // its local retention must keep them too
	t.Logf("replica added in %v: broker 2 starts at %d (broker 1's local start was %d when the move began, remote end %d)",
		took, start, leaderStart, lp.remoteManifest().EndOffset())
	if start < leaderStart || start == 0 {
		t.Fatalf("broker 2's log starts at %d, below broker 1's local start %d: it copied remote data", start, leaderStart)
	}
	entries := fp.log.Epochs().Entries()
	if len(entries) == 0 || entries[0].StartOffset != 0 {
		t.Fatalf("broker 2's leader epochs %v do not reach down to offset 0 from its log start %d (the store's epochs were not taken, or were lost)", entries, start)
	}
	if e, _ := fp.log.Epochs().EndOffsetFor(entries[0].Epoch); e != entries[0].Epoch {
		t.Fatalf("EndOffsetFor(%d) on broker 2 = epoch %d", entries[0].Epoch, e)
	}
	fp.appendMu.Lock()
	_, bs, ok := fp.producers.Producer(pidA)
	fp.appendMu.Unlock()
	if !ok || bs[len(bs)-1] != aLast {
		t.Fatalf("broker 2 does not know producer A (last batch %+v), whose batches are all in the store: ok %v %+v", aLast, ok, bs)
	}
	// The leader's local retention moves on: broker 2 follows its local
	// log start as local retention does, keeping the leader epochs of what
	// is now only in the store (it once cut them, when the leader's start
	// moved while the new replica caught up).
	const more = 1000
	produceTiered(t, idempotent(), topic, total, total+more)
	waitFor(t, "broker 2's log start follows the leader's", func() bool { return fp.log.LogStartOffset() > start })
	if es := fp.log.Epochs().Entries(); len(es) == 0 || es[0].StartOffset != 0 {
		t.Fatalf("broker 2's leader epochs %v after following the leader's local log start to %d, want them from offset 0", es, fp.log.LogStartOffset())
	}
	// Everything reads back from offset 0 through the new replica as
	// leader too.
	req = nil
	req.Assign(topic, 0, []int32{2, 1})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, topic, 0)
	if res, err := adm.ElectLeaders(testCtx(t), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}}); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range res[topic] {
			if r.Err != nil && r.ErrMessage != "" {
				t.Logf("elect: %v %s", r.Err, r.ErrMessage)
			}
		}
	}
	waitFor(t, "broker 2 leads", func() bool { return partitionInfo(srv[0], topic, 0).State.Leader == 2 })
	consumeTiered(t, srv[1].Addr().String(), topic, total+more)
}
