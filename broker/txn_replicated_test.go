package broker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment"
)

// TestTxnPartitionReplicated runs transactions on a partition replicated
// to three in-process brokers on ZooKeeper: two producers' transactional
// batches and the leader's markers (writeTxnMarkers) over small segments;
// every follower ends with the leader's aborted-transaction index and
// open transactions. Then the leader stops (the fault): the new leader
// serves read_committed with the same aborted transactions, a franz-go
// read_committed consumer reads exactly the committed records, and the
// history checker holds every acknowledged record in the final log.
func TestTxnPartitionReplicated(t *testing.T) {
	srv := reassignClusterWith(t, 3, noTxnVerification)
	const topic = "rtx"
	cl := newClient(t, srv[0])
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(testCtx(t), 1, 3, map[string]*string{"segment.bytes": kmsg.StringPtr("1024"), "min.insync.replicas": kmsg.StringPtr("2")}, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "rtx-0 with an ISR of three", func() bool {
		p := partitionInfo(srv[0], topic, 0)
		if len(p.State.ISR) != 3 {
			return false
		}
		for _, s := range srv {
			if s.topic(topic) == nil || s.topic(topic).local(0) == nil {
				return false
			}
		}
		return true
	})
	leaderID := partitionInfo(srv[0], topic, 0).State.Leader
	leader := srv[leaderID-1]
	rc := dialRaw(t, leader)
	initPID := func() int64 {
		resp := rc.request(1, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp.ProducerID
	}
	pids := []int64{initPID(), initPID()}
	seq := map[int64]int32{}
	tp := history.TP{Topic: topic, Partition: 0}
	h := history.New()
	var committed []string
	var wantAborted []segment.AbortedTxn
	start := time.Now()
	for txn := range 24 {
		pid := pids[txn%2]
		var values []string
		var first int64 = -1
		for b := range 1 + txn%3 {
			n := 1 + (txn+b)%3
			batch := txnBatch(t, pid, 0, seq[pid], n, fmt.Sprintf("t%d-b%d-", txn, b))
			seq[pid] += int32(n)
			for i := range n {
				h.Sent(fmt.Sprintf("p%d", pid), tp, fmt.Sprintf("t%d-b%d-%d", txn, b, i))
			}
			resp := rc.request(2, rawTxnProduceRequest(topic, 0, batch)).(*kmsg.ProduceResponse)
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("txn %d batch %d: %v", txn, b, kerr.ErrorForCode(sp.ErrorCode))
			}
			if first < 0 {
				first = sp.BaseOffset
			}
			for i := range n {
				v := fmt.Sprintf("t%d-b%d-%d", txn, b, i)
				h.Answered(tp, v, history.Acked, sp.BaseOffset+int64(i), "")
				values = append(values, v)
			}
		}
		commit := txn%3 != 1
		if code := writeMarker(t, leader, topic, 0, pid, 0, commit, 0); code != 0 {
			t.Fatalf("txn %d marker: %v", txn, kerr.ErrorForCode(code))
		}
		if commit {
			committed = append(committed, values...)
		} else {
			end := leader.topic(topic).local(0).log.LogEndOffset()
			wantAborted = append(wantAborted, segment.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: end - 1, LastStableOffset: end})
		}
	}
	t.Logf("24 transactions with markers on 3 replicas in %v", time.Since(start))
	lp := leader.topic(topic).local(0)
	end := lp.log.LogEndOffset()
	if got := lp.txns.Entries(); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("leader's index %+v, want %+v", got, wantAborted)
	}
	if n := len(lp.log.Segments()); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	for _, s := range srv {
		p := s.topic(topic).local(0)
		waitFor(t, fmt.Sprintf("broker %d at the log end", s.cfg.BrokerID), func() bool {
			return p.log.LogEndOffset() == end && p.log.HighWatermark() == end
		})
		if got := p.txns.Entries(); !reflect.DeepEqual(got, wantAborted) {
			t.Fatalf("broker %d's index %+v, want the leader's %+v", s.cfg.BrokerID, got, wantAborted)
		}
		if got := p.lastStableOffset(); got != end {
			t.Fatalf("broker %d: LSO %d, want %d", s.cfg.BrokerID, got, end)
		}
		for _, pi := range p.producers.Describe() {
			if pi.TxnStartOffset != -1 {
				t.Fatalf("broker %d: producer %d still has a transaction from %d", s.cfg.BrokerID, pi.ProducerID, pi.TxnStartOffset)
			}
		}
	}

	// The fault: the leader stops.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := leader.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	rest := slices.DeleteFunc(slices.Clone(srv), func(s *Server) bool { return s == leader })
	var next *Server
	waitFor(t, "a new leader", func() bool {
		l := partitionInfo(rest[0], topic, 0).State.Leader
		for _, s := range rest {
			if s.cfg.BrokerID == l {
				if _, err := s.topic(topic).local(0).leaderCheck(l); err == nil {
					next = s
					return true
				}
			}
		}
		return false
	})
	nrc := dialRaw(t, next)
	req := fetchRequest(topic, 0, 0, 1<<20)
	req.IsolationLevel = 1
	var fp kmsg.FetchResponseTopicPartition
	waitFor(t, "the new leader's high watermark at the end", func() bool {
		fp = nrc.request(3, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		return fp.ErrorCode == 0 && fp.HighWatermark == end
	})
	var got []segment.AbortedTxn
	for _, a := range fp.AbortedTransactions {
		got = append(got, segment.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	var want []segment.AbortedTxn
	for _, a := range wantAborted {
		want = append(want, segment.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	if fp.LastStableOffset != end || !reflect.DeepEqual(got, want) {
		t.Fatalf("new leader read_committed: lso %d aborted %+v, want %d %+v", fp.LastStableOffset, got, end, want)
	}

	consume := func(level kgo.IsolationLevel, n int) []kgo.Record {
		c := newClient(t, next, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(level))
		var out []kgo.Record
		ctx := testCtx(t)
		for len(out) < n && ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, *r) })
		}
		return out
	}
	var values []string
	for _, r := range consume(kgo.ReadCommitted(), len(committed)) {
		values = append(values, string(r.Value))
	}
	if !reflect.DeepEqual(values, committed) {
		t.Fatalf("read_committed consumer: %d records %v, want %d %v", len(values), values, len(committed), committed)
	}
	// Everything acknowledged (committed or aborted) is in the log.
	var final []history.Record
	all := 0
	for _, n := range seq {
		all += int(n)
	}
	for _, r := range consume(kgo.ReadUncommitted(), all) {
		final = append(final, history.Record{Offset: r.Offset, Value: string(r.Value)})
	}
	rep := h.Check(map[history.TP][]history.Record{tp: final})
	t.Logf("history: %v", rep)
	if !rep.OK() || rep.Acknowledged != all {
		t.Fatalf("history: %v %v", rep, rep.Problems)
	}
}
