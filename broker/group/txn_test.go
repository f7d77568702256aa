package group

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// txnReq is a TxnOffsetCommit of n partitions of topic, offsets base+i.
func txnReq(version int16, group string, pid int64, epoch int16, topic string, n int32, base int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID = "txn-" + group
	req.Group = group
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.Generation = -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p := range n {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = base + int64(p)
		rp.LeaderEpoch = 4
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func txnCodes(resp *kmsg.TxnOffsetCommitResponse) []int16 {
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// txnCommit commits transactionally and fails the test unless every
// partition answers want.
func (e *env) txnCommit(req *kmsg.TxnOffsetCommitRequest, verify TxnVerifier, want int16) {
	e.t.Helper()
	for i, code := range txnCodes(e.c.TxnOffsetCommit(context.Background(), req, verify)) {
		if code != want {
			e.t.Fatalf("txn commit of %s, partition #%d: got %s, want %s", req.Group, i, errName(code), errName(want))
		}
	}
}

// marker appends the producer's COMMIT or ABORT marker to the group's
// partition, as WriteTxnMarkers does, then tells the coordinator.
func (e *env) marker(group string, pid int64, epoch int16, commit bool) {
	e.t.Helper()
	appendMarker(e.t, e.logOf(group), pid, epoch, commit)
	e.c.TxnMarker(PartitionFor(group, e.cfg.NumPartitions), pid, commit)
}

func appendMarker(t *testing.T, l Log, pid int64, epoch int16, commit bool) {
	t.Helper()
	b := segment.ControlBatch(pid, epoch, commit, 1 /* coordinator epoch */, 1 /* timestamp */)
	if _, err := l.Append(b, segment.AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatalf("append marker: %v", err)
	}
}

// fetchOne returns the offset and code of one partition from OffsetFetch v7
// (require_stable as given).
func (e *env) fetchOne(group, topic string, partition int32, stable bool) (int64, int16) {
	e.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.RequireStable = stable
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := e.c.OffsetFetch(context.Background(), req)
	if resp.ErrorCode != 0 {
		e.t.Fatalf("fetch %s: group error %s", group, errName(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// wantOffset checks what OffsetFetch answers without and with
// require_stable.
func (e *env) wantOffset(what, group, topic string, partition int32, offset int64, unstable bool) {
	e.t.Helper()
	if got, code := e.fetchOne(group, topic, partition, false); got != offset || code != 0 {
		e.t.Errorf("%s: fetch of %s/%d: got %d %s, want %d NONE", what, topic, partition, got, errName(code), offset)
	}
	got, code := e.fetchOne(group, topic, partition, true)
	switch {
	case unstable && (code != kerr.UnstableOffsetCommit.Code || got != -1):
		e.t.Errorf("%s: stable fetch of %s/%d: got %d %s, want -1 UNSTABLE_OFFSET_COMMIT", what, topic, partition, got, errName(code))
	case !unstable && (code != 0 || got != offset):
		e.t.Errorf("%s: stable fetch of %s/%d: got %d %s, want %d NONE", what, topic, partition, got, errName(code), offset)
	}
}

func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	e := newEnv(t, nil)
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 2, 100), nil, 0)
	e.wantOffset("before the marker", "g", "t", 0, -1, true)
	e.wantOffset("before the marker", "g", "t", 1, -1, true)
	// Another producer's marker changes nothing.
	e.marker("g", 11, 0, true)
	e.wantOffset("after another producer's marker", "g", "t", 0, -1, true)
	e.marker("g", 10, 0, true)
	e.wantOffset("after the commit", "g", "t", 0, 100, false)
	e.wantOffset("after the commit", "g", "t", 1, 101, false)

	// An abort drops the next transaction's offsets; the committed stay.
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 1, 500), nil, 0)
	e.wantOffset("second transaction", "g", "t", 0, 100, true)
	e.marker("g", 10, 0, false)
	e.wantOffset("after the abort", "g", "t", 0, 100, false)

	// Everything agrees with a load of the same log.
	e.restart()
	e.wantOffset("after restart", "g", "t", 0, 100, false)
	e.wantOffset("after restart", "g", "t", 1, 101, false)
}

// TestTxnOffsetCommitLogOrder: a completed transactional offset replaces
// the committed one only if it is newer in log order (Kafka's
// completePendingTxnOffsetCommit).
func TestTxnOffsetCommitLogOrder(t *testing.T) {
	e := newEnv(t, nil)
	// Transactional commit first, plain commit after it: the plain wins.
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 1, 100), nil, 0)
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, "t", 1, 200, nil))); codes[0] != 0 {
		t.Fatalf("plain commit: got %s", errName(codes[0]))
	}
	e.wantOffset("plain after txn, before marker", "g", "t", 0, 200, true)
	e.marker("g", 10, 0, true)
	e.wantOffset("plain after txn, after marker", "g", "t", 0, 200, false)

	// Plain commit first, transactional after it: the transaction wins.
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 1, 300), nil, 0)
	e.marker("g", 10, 0, true)
	e.wantOffset("txn after plain", "g", "t", 0, 300, false)

	e.restart()
	e.wantOffset("after restart", "g", "t", 0, 300, false)
}

func TestTxnOffsetCommitMemberChecks(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, session: 30 * time.Second, instance: "static-",
		meta: func(string) []byte { return consumerMeta("t") }}
	ids, gen := e.stableGroup(spec, 1)
	inst := "static-0" // specsOf numbers the instance ids
	member := func(gen int32, memberID string, instance *string) *kmsg.TxnOffsetCommitRequest {
		r := txnReq(3, "g", 10, 0, "t", 1, 7)
		r.Generation, r.MemberID, r.InstanceID = gen, memberID, instance
		return r
	}
	other := "static-2"
	cases := []struct {
		req  *kmsg.TxnOffsetCommitRequest
		want int16
	}{
		{member(gen, ids[0], &inst), 0},
		{member(gen+1, ids[0], &inst), kerr.IllegalGeneration.Code},
		{member(gen, "nobody", nil), kerr.UnknownMemberID.Code},
		{member(gen, "nobody", &inst), kerr.FencedInstanceID.Code},
		{member(gen, ids[0], &other), kerr.UnknownMemberID.Code},
		// v0-v2 clients name no member; Kafka accepts them in any group.
		{member(-1, "", nil), 0},
	}
	for i, c := range cases {
		if got := txnCodes(e.c.TxnOffsetCommit(context.Background(), c.req, nil)); got[0] != c.want {
			t.Errorf("#%d: got %s, want %s", i, errName(got[0]), errName(c.want))
		}
	}
	// An empty group id is invalid for TxnOffsetCommit, unlike OffsetCommit.
	if got := txnCodes(e.c.TxnOffsetCommit(context.Background(), txnReq(3, "", 10, 0, "t", 1, 7), nil)); got[0] != kerr.InvalidGroupID.Code {
		t.Errorf("empty group: got %s, want INVALID_GROUP_ID", errName(got[0]))
	}
}

func TestTxnOffsetCommitVerification(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct {
		version int16
		err     error
		want    int16
	}{
		{3, fmt.Errorf("verify: %w", kerr.InvalidTxnState), kerr.InvalidTxnState.Code},
		{3, kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
		{3, kerr.NotEnoughReplicas, kerr.CoordinatorNotAvailable.Code},
		{3, kerr.NetworkException, kerr.CoordinatorLoadInProgress.Code},
		{1, kerr.NetworkException, kerr.CoordinatorNotAvailable.Code}, // v0-v1 cannot retry LOAD_IN_PROGRESS
		{3, errors.New("connection reset"), kerr.CoordinatorLoadInProgress.Code},
	}
	l := e.logOf("g")
	for i, c := range cases {
		before := l.appends()
		var asked int
		verify := func(_ context.Context, partition int) error {
			if partition != PartitionFor("g", testPartitions) {
				t.Errorf("#%d: verified partition %d", i, partition)
			}
			asked++
			return c.err
		}
		got := txnCodes(e.c.TxnOffsetCommit(context.Background(), txnReq(c.version, "g", 10, 0, "t", 2, 7), verify))
		for _, code := range got {
			if code != c.want {
				t.Errorf("#%d: got %s, want %s", i, errName(code), errName(c.want))
			}
		}
		if asked != 1 || l.appends() != before {
			t.Errorf("#%d: verifier asked %d times, %d appends: want 1 and none", i, asked, l.appends()-before)
		}
	}
	e.wantOffset("after failed verifications", "g", "t", 0, -1, false)
	// A verified commit is written.
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 1, 7), func(context.Context, int) error { return nil }, 0)
	e.wantOffset("verified", "g", "t", 0, -1, true)
}

// TestTxnOffsetCommitBatch: the records are a transactional batch of the
// producer with base sequence -1, as Kafka's coordinator writes them.
func TestTxnOffsetCommitBatch(t *testing.T) {
	e := newEnv(t, nil)
	e.txnCommit(txnReq(3, "g", 42, 3, "t", 2, 7), nil, 0)
	l := e.logOf("g")
	l.mu.Lock()
	b := l.mu.batches[len(l.mu.batches)-1]
	l.mu.Unlock()
	h, err := segment.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Transactional() || h.Control() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.RecordCount != 2 {
		t.Errorf("batch: got transactional %v control %v producer %d epoch %d sequence %d records %d, want true false 42 3 -1 2",
			h.Transactional(), h.Control(), h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.RecordCount)
	}
}

func TestTxnOffsetCommitFailedAppend(t *testing.T) {
	e := newEnv(t, nil)
	l := e.logOf("g")
	l.setFail(kerr.NotLeaderForPartition)
	e.txnCommit(txnReq(3, "g", 10, 0, "t", 1, 7), nil, kerr.NotCoordinator.Code)
	l.setFail(nil)
	// Nothing stays pending, and the marker finds nothing to apply.
	e.wantOffset("after a failed append", "g", "t", 0, -1, false)
	e.marker("g", 10, 0, true)
	e.wantOffset("after the marker", "g", "t", 0, -1, false)
}

// TestLoadTransactionalOffsets replays a log holding plain and
// transactional commits of several producers with their markers
// interleaved, and one producer whose marker is not written yet.
func TestLoadTransactionalOffsets(t *testing.T) {
	e := newEnv(t, nil)
	commit := func(topic string, off int64) {
		t.Helper()
		if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, topic, 1, off, nil))); codes[0] != 0 {
			t.Fatalf("plain commit: got %s", errName(codes[0]))
		}
	}
	l := e.logOf("g")
	commit("a", 1)                                            // a: plain 1
	e.txnCommit(txnReq(3, "g", 1, 0, "a", 1, 10), nil, 0)     // a: producer 1 -> 10 (committed below)
	e.txnCommit(txnReq(3, "g", 2, 0, "b", 1, 20), nil, 0)     // b: producer 2 -> 20 (aborted below)
	e.txnCommit(txnReq(3, "g", 3, 0, "c", 1, 30), nil, 0)     // c: producer 3 -> 30 (no marker)
	commit("d", 4)                                            // d: plain 4
	e.txnCommit(txnReq(3, "g", 4, 0, "d", 1, 40), nil, 0)     // d: producer 4 -> 40 before the plain below
	commit("d", 5)                                            // d: plain 5, newer than producer 4's
	appendMarker(t, l, 2, 0, false)                           // abort 2
	appendMarker(t, l, 1, 0, true)                            // commit 1
	appendMarker(t, l, 4, 0, true)                            // commit 4: older than plain 5
	e.txnCommit(txnReq(3, "other", 1, 0, "a", 1, 99), nil, 0) // another group in another partition: no marker there

	e.restart()
	e.wantOffset("a: committed transaction", "g", "a", 0, 10, false)
	e.wantOffset("b: aborted transaction", "g", "b", 0, -1, false)
	e.wantOffset("c: open transaction", "g", "c", 0, -1, true)
	e.wantOffset("d: plain commit newer than the transaction's", "g", "d", 0, 5, false)
	e.wantOffset("other group", "other", "a", 0, -1, true)

	// The open transaction completes after the load.
	e.marker("g", 3, 0, true)
	e.wantOffset("c: committed after the load", "g", "c", 0, 30, false)
	e.restart()
	e.wantOffset("c: after a second restart", "g", "c", 0, 30, false)
	e.wantOffset("a: after a second restart", "g", "a", 0, 10, false)
}

// TestTxnMarkerDuringLoad: a marker that arrives while the partition is
// being replayed is applied when the load ends.
func TestTxnMarkerDuringLoad(t *testing.T) {
	e := newEnv(t, nil)
	e.txnCommit(txnReq(3, "g", 7, 0, "t", 1, 70), nil, 0)
	e.c.Close()

	p := PartitionFor("g", testPartitions)
	bl := &blockingReadLog{memLog: e.logs[p], release: make(chan struct{})}
	c, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	loaded := make(chan error, 1)
	go func() {
		_, err := c.Load(p, bl)
		loaded <- err
	}()
	waitFor(t, "the load to read", bl.reading.Load)
	// The marker lands in the log after the replay's end and the hook
	// runs during the load.
	appendMarker(t, e.logs[p], 7, 0, true)
	c.TxnMarker(p, 7, true)
	close(bl.release)
	if err := recv(t, loaded); err != nil {
		t.Fatal(err)
	}
	e.wantOffset("marker during load", "g", "t", 0, 70, false)
}

// TestTxnOffsetsDeletedGroup: deleting a group drops its pending
// transactional offsets, in memory and when the log is replayed.
func TestTxnOffsetsDeletedGroup(t *testing.T) {
	e := newEnv(t, nil)
	e.txnCommit(txnReq(3, "g", 7, 0, "t", 1, 70), nil, 0)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	if r := e.c.DeleteGroups(context.Background(), del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: got %s", errName(r.Groups[0].ErrorCode))
	}
	e.marker("g", 7, 0, true)
	e.wantOffset("deleted group", "g", "t", 0, -1, false)
	e.restart()
	e.wantOffset("deleted group after restart", "g", "t", 0, -1, false)
}

// TestTxnOffsetCommitUnknownPartition: partitions that do not exist are
// answered first; a request of only those is not verified or written.
func TestTxnOffsetCommitUnknownPartition(t *testing.T) {
	e := newEnv(t, func(cfg *Config) {
		cfg.PartitionExists = func(topic string, _ int32) bool { return topic != "gone" }
	})
	l := e.logOf("g")
	before := l.appends()
	verify := func(context.Context, int) error {
		t.Error("verifier asked for a request with no existing partition")
		return nil
	}
	if got := txnCodes(e.c.TxnOffsetCommit(context.Background(), txnReq(3, "g", 10, 0, "gone", 2, 7), verify)); got[0] != kerr.UnknownTopicOrPartition.Code || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown partitions: got %s %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(got[0]), errName(got[1]))
	}
	if l.appends() != before {
		t.Errorf("%d appends for a request of unknown partitions, want none", l.appends()-before)
	}
	// With an existing partition beside them, that one is committed.
	req := txnReq(3, "g", 10, 0, "t", 1, 7)
	req.Topics = append(req.Topics, txnReq(3, "g", 10, 0, "gone", 1, 7).Topics...)
	got := txnCodes(e.c.TxnOffsetCommit(context.Background(), req, nil))
	if got[0] != 0 || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("mixed: got %s %s, want NONE UNKNOWN_TOPIC_OR_PARTITION", errName(got[0]), errName(got[1]))
	}
	e.wantOffset("mixed", "g", "t", 0, -1, true)
}

// txnState is what OffsetFetch answers for partitions 0-3 of topic t of a
// group, without and with require_stable.
func (e *env) txnState(group string) map[int32][3]int64 {
	e.t.Helper()
	out := map[int32][3]int64{}
	for p := range int32(4) {
		off, _ := e.fetchOne(group, "t", p, false)
		stableOff, code := e.fetchOne(group, "t", p, true)
		out[p] = [3]int64{off, stableOff, int64(code)}
	}
	return out
}

// TestLoadTransactionalOffsetsSegmentLog: random interleavings of plain
// commits, transactional commits of five producers and their COMMIT and
// ABORT markers on segment logs of 4 KiB segments (the records and
// markers spread over many segments, uncleaned); the coordinator's answers
// before a restart (logs closed and recovered, partitions replayed) and
// after it agree, open transactions included; completing those after the
// restart and restarting again agrees too.
func TestLoadTransactionalOffsetsSegmentLog(t *testing.T) {
	e := newSegEnv(t)
	rng := rand.New(rand.NewPCG(19, 447))
	groups := []string{"g1", "g2", "g3"}
	open := map[int64]bool{}
	part := func(g string) Log { return e.logs[PartitionFor(g, e.cfg.NumPartitions)] }
	producerGroup := func(pid int64) string { return groups[int(pid)%len(groups)] }
	ops := 0
	for i := range 400 {
		pid := int64(100 + rng.IntN(5))
		g := producerGroup(pid)
		p := int32(rng.IntN(4))
		switch r := rng.IntN(10); {
		case r < 4:
			e.txnCommit(txnReq(3, g, pid, 0, "t", p+1, int64(i)*10), nil, 0) // partitions 0..p
			open[pid] = true
		case r < 7 && open[pid]:
			commit := rng.IntN(3) != 0
			appendMarker(t, part(g), pid, 0, commit)
			e.c.TxnMarker(PartitionFor(g, e.cfg.NumPartitions), pid, commit)
			delete(open, pid)
		default:
			req := commitReq(8, g, "", -1, "t", p+1, int64(i)*1000, nil)
			if codes := commitCodes(e.c.OffsetCommit(context.Background(), req)); codes[0] != 0 {
				t.Fatalf("plain commit: %s", errName(codes[0]))
			}
		}
		ops++
	}
	before := map[string]map[int32][3]int64{}
	for _, g := range groups {
		before[g] = e.txnState(g)
	}
	e.reload(true)
	for _, g := range groups {
		if got := e.txnState(g); fmt.Sprint(got) != fmt.Sprint(before[g]) {
			t.Errorf("group %s after restart: got %v, want %v", g, got, before[g])
		}
	}
	segs := 0
	for _, l := range e.logs {
		segs += len(l.Segments())
	}
	t.Logf("%d operations in %d segments, %d transactions open at the restart; states %v", ops, segs, len(open), before)
	if segs < 2*len(e.logs) {
		t.Errorf("%d segments in %d logs: the test means to spread the transactions over several", segs, len(e.logs))
	}

	for pid := range open {
		g := producerGroup(pid)
		appendMarker(t, part(g), pid, 0, true)
		e.c.TxnMarker(PartitionFor(g, e.cfg.NumPartitions), pid, true)
	}
	for _, g := range groups {
		before[g] = e.txnState(g)
		for p, st := range before[g] {
			if st[2] != 0 {
				t.Errorf("group %s partition %d still unstable after every marker: %v", g, p, st)
			}
		}
	}
	e.reload(true)
	for _, g := range groups {
		if got := e.txnState(g); fmt.Sprint(got) != fmt.Sprint(before[g]) {
			t.Errorf("group %s after the second restart: got %v, want %v", g, got, before[g])
		}
	}
}

// TestTxnOffsetCommitNoProducer: a request without a producer id or epoch
// is refused before anything is verified or written.
func TestTxnOffsetCommitNoProducer(t *testing.T) {
	e := newEnv(t, nil)
	verify := func(context.Context, int) error {
		t.Error("verifier asked for a request without a producer")
		return nil
	}
	for i, c := range []struct {
		pid   int64
		epoch int16
		want  int16
	}{
		{-1, 0, kerr.InvalidProducerIDMapping.Code},
		{5, -1, kerr.InvalidProducerEpoch.Code},
	} {
		if got := txnCodes(e.c.TxnOffsetCommit(context.Background(), txnReq(3, "g", c.pid, c.epoch, "t", 1, 7), verify)); got[0] != c.want {
			t.Errorf("#%d: got %s, want %s", i, errName(got[0]), errName(c.want))
		}
	}
	if n := e.logOf("g").appends(); n != 0 {
		t.Errorf("%d appends, want none", n)
	}
}
