package broker

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// keyedTxnBatch is a transactional batch of pid/epoch at sequence seq
// with one record per key, values "<key>-<tag>".
func keyedTxnBatch(t *testing.T, pid int64, epoch int16, seq int32, tag string, keys ...string) []byte {
	t.Helper()
	spec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	for _, k := range keys {
		spec.Records = append(spec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Key: []byte(k), Value: []byte(k + "-" + tag)})
	}
	b, err := segment.BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plainKeyed is a batch of one plain record.
func plainKeyed(t *testing.T, key, value string) []byte {
	t.Helper()
	b, err := segment.BuildBatch(segment.BatchSpec{Records: []segment.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte(key), Value: []byte(value)}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logContent reads l whole: the offsets of its markers, and the latest
// value of each key of its data batches.
func logContent(t *testing.T, l *segment.Log) (markers []int64, values map[string]string) {
	t.Helper()
	values = map[string]string{}
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		buf, err := l.ReadCopy(off, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			break
		}
		err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
			off = h.NextOffset()
			if h.Control() {
				markers = append(markers, h.BaseOffset)
				return nil
			}
			recs, err := segment.Records(batch)
			for _, r := range recs {
				values[string(r.Key)] = string(r.Value)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return markers, values
}

// TestTxnMarkersCleaned: on a compacted topic with delete.retention.ms 0,
// the broker's log cleaner removes an aborted transaction's records, then
// its ABORT marker and .txnindex entry, and the COMMIT marker of a
// transaction whose only record a later value superseded; the markers of
// the producers' last transactions stay (their batches are the producers'
// last). A read_committed fetch gets every record left and no aborted
// transaction, before and after a restart on the same directory.
func TestTxnMarkersCleaned(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": dir, "log.cleaner.backoff.ms": "50", "log.cleaner.min.cleanable.ratio": "0.01", "transaction.partition.verification.enable": "false"}
	s := startServer(t, props)
	cl := newClient(t, s)
	createTopic(t, cl, "ctx", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0"})
	pidA, epA := initProducerID(t, cl)
	pidB, epB := initProducerID(t, cl)

	mustProduce(t, cl, "ctx", keyedTxnBatch(t, pidA, epA, 0, "aborted", "x", "y"), 0) // 0-1
	if code := writeMarker(t, s, "ctx", 0, pidA, epA, false, 0); code != 0 {          // 2
		t.Fatalf("abort A: %d", code)
	}
	mustProduce(t, cl, "ctx", keyedTxnBatch(t, pidB, epB, 0, "txn", "b"), 3) // 3
	if code := writeMarker(t, s, "ctx", 0, pidB, epB, true, 0); code != 0 {  // 4
		t.Fatalf("commit B: %d", code)
	}
	mustProduce(t, cl, "ctx", plainKeyed(t, "b", "b-plain"), 5)                    // 5: supersedes B's 3
	mustProduce(t, cl, "ctx", keyedTxnBatch(t, pidA, epA, 2, "committed", "a"), 6) // 6
	if code := writeMarker(t, s, "ctx", 0, pidA, epA, true, 0); code != 0 {        // 7
		t.Fatalf("commit A: %d", code)
	}
	mustProduce(t, cl, "ctx", keyedTxnBatch(t, pidB, epB, 1, "committed", "c"), 8) // 8
	if code := writeMarker(t, s, "ctx", 0, pidB, epB, true, 0); code != 0 {        // 9
		t.Fatalf("commit B again: %d", code)
	}
	p := s.topic("ctx").local(0)
	if got := p.txns.Entries(); len(got) != 1 {
		t.Fatalf("index before cleaning: %v, want A's aborted transaction", got)
	}

	want := map[string]string{"a": "a-committed", "b": "b-plain", "c": "c-committed"}
	start := time.Now()
	next := int64(10)
	var markers []int64
	var values map[string]string
	done := poll.For(time.Minute, func() bool {
		// Plain records of other keys roll segments and keep the log dirty.
		mustProduce(t, cl, "ctx", plainKeyed(t, fmt.Sprintf("f%d", next%4), "filler"), next)
		next++
		s.cleaner.kick()
		markers, values = logContent(t, p.log)
		delete(values, "f0")
		delete(values, "f1")
		delete(values, "f2")
		delete(values, "f3")
		return reflect.DeepEqual(markers, []int64{7, 9}) && len(p.txns.Entries()) == 0
	})
	if !done {
		t.Fatalf("after a minute of cleaning: markers %v, index %v; want markers [7 9] and no index entry", markers, p.txns.Entries())
	}
	t.Logf("markers 2 and 4 removed after %v (%d filler records), cleaner checkpoint %d", time.Since(start), next-10, p.log.CleanerCheckpoint())
	if !reflect.DeepEqual(values, want) {
		t.Fatalf("values %v, want %v", values, want)
	}

	check := func(when string) {
		t.Helper()
		hw := p.log.LogEndOffset()
		fp, offs := fetchIsolation(t, cl, "ctx", 0, 0, 1)
		if fp.ErrorCode != 0 || fp.LastStableOffset != hw || len(fp.AbortedTransactions) != 0 {
			t.Fatalf("%s: read_committed: error %d lso %d (log end %d) aborted %v", when, fp.ErrorCode, fp.LastStableOffset, hw, abortedList(fp))
		}
		_, all := fetchIsolation(t, cl, "ctx", 0, 0, 0)
		if !reflect.DeepEqual(offs, all) {
			t.Fatalf("%s: read_committed offsets %v, read_uncommitted %v", when, offs, all)
		}
	}
	check("after cleaning")

	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, props)
	cl = newClient(t, s)
	p = s.topic("ctx").local(0)
	if got := p.txns.Entries(); len(got) != 0 {
		t.Fatalf("index after a restart: %v, want none", got)
	}
	check("after a restart")
}
