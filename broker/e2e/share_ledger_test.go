package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the queue-semantics checker of the share-group fault
// tests: a ledger of what real share consumers were given and what the
// broker answered to their acknowledgements, and the checks over it.
//
// Times are the consumers' (one machine, one clock, as the brokers'). A
// consumer polls with MaxConcurrentFetches 0 (ShareMaxRecordsStrict), so
// a record it is given was acquired by the broker no earlier than the
// start of its poll before the one that returned it (notBefore) and no
// later than that poll's return (at). Its hold ends at the earliest of
// its lock's expiry (no earlier than notBefore + the lock duration), its
// acknowledgement (no earlier than when the consumer made it), a moment
// its consumer may have lost its locks (a share session opened or
// closed, a leave, a closed connection, a kill of its process: seen on
// its own wire) and a broker kill (a lock does not outlive its leader).
// Every such bound is on the early side, so the checks below can only
// miss a violation, never invent one.

// shareAckOutcome is what a consumer learned of one acknowledgement.
type shareAckOutcome int8

const (
	ackNone      shareAckOutcome = iota // not acknowledged, or no answer yet
	ackConfirmed                        // the broker answered its partition without error: applied
	ackRefused                          // the broker (or the client, not sending it) answered an error
	ackUnknown                          // no clear answer (no response, or errors and successes mixed)
)

// shareDelivery is one delivery of a record to a consumer.
type shareDelivery struct {
	consumer  string
	value     string
	partition int32
	count     int32 // the broker's delivery count
	// notBefore and at bound when the broker acquired it.
	notBefore, at time.Time
	ack           kgo.AckStatus // 0: never acknowledged
	ackSent       time.Time     // when the consumer acknowledged it
	outcome       shareAckOutcome
	answered      time.Time // when the answer came (with outcome)
}

// shareKill is a kill -9 of a broker and the partitions of the topic it
// led.
type shareKill struct {
	at         time.Time // just before the signal
	broker     int32
	partitions []int32
}

// shareLedger collects the deliveries of all consumers of a share group.
type shareLedger struct {
	lock  time.Duration
	limit int32
	mu    struct {
		sync.Mutex
		recs  map[string][]*shareDelivery
		ends  map[string][]time.Time // by consumer: moments it may have lost its locks
		kills []shareKill
		// discards are the moments a client threw away records the
		// broker had acquired for it (shareDiscardLog): deliveries no
		// consumer saw, which still count.
		discards []time.Time
	}
}

func newShareLedger(lock time.Duration, limit int32) *shareLedger {
	l := &shareLedger{lock: lock, limit: limit}
	l.mu.recs = map[string][]*shareDelivery{}
	l.mu.ends = map[string][]time.Time{}
	return l
}

func (l *shareLedger) delivered(ds []*shareDelivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		l.mu.recs[d.value] = append(l.mu.recs[d.value], d)
	}
}

// acking notes that the consumer acknowledges ds with status now.
func (l *shareLedger) acking(ds []*shareDelivery, status kgo.AckStatus, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		d.ack, d.ackSent = status, now
	}
}

func (l *shareLedger) answered(ds []*shareDelivery, outcomes []shareAckOutcome, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range ds {
		d.outcome, d.answered = outcomes[i], at
	}
}

func (l *shareLedger) event(consumer string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.ends[consumer] = append(l.mu.ends[consumer], at)
}

func (l *shareLedger) discarded(_ string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.discards = append(l.mu.discards, at)
}

func (l *shareLedger) killed(k shareKill) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.kills = append(l.mu.kills, k)
}

// accepted counts the records with a confirmed ACCEPT.
func (l *shareLedger) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ds := range l.mu.recs {
		if slices.ContainsFunc(ds, func(d *shareDelivery) bool { return d.ack == kgo.AckAccept && d.outcome == ackConfirmed }) {
			n++
		}
	}
	return n
}

// deliveredTo reports whether one of values was delivered to a consumer
// other than not.
func (l *shareLedger) deliveredTo(values []string, not string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range values {
		if slices.ContainsFunc(l.mu.recs[v], func(d *shareDelivery) bool { return d.consumer != not }) {
			return true
		}
	}
	return false
}

// byPartition summarizes the deliveries by partition, for a failure.
func (l *shareLedger) byPartition() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type sum struct {
		n, accepted int
		last        time.Time
		consumers   map[string]int
	}
	sums := map[int32]*sum{}
	for _, ds := range l.mu.recs {
		for _, d := range ds {
			s := sums[d.partition]
			if s == nil {
				s = &sum{consumers: map[string]int{}}
				sums[d.partition] = s
			}
			s.n++
			s.consumers[d.consumer]++
			if d.ack == kgo.AckAccept && d.outcome == ackConfirmed {
				s.accepted++
			}
			if d.at.After(s.last) {
				s.last = d.at
			}
		}
	}
	var b strings.Builder
	for p, s := range sums {
		fmt.Fprintf(&b, "partition %d: %d deliveries, %d accepted, the last at %v, by consumer %v; ", p, s.n, s.accepted, s.last.Format(time.StampMilli), s.consumers)
	}
	for _, k := range l.mu.kills {
		fmt.Fprintf(&b, "broker %d (leader of %v) killed at %v", k.broker, k.partitions, k.at.Format(time.StampMilli))
	}
	return b.String()
}

// dump lists the deliveries of the records from..to-1 of partition p,
// for a failure.
func (l *shareLedger) dump(p int32, from, to int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for seq := from; seq < to; seq++ {
		v := seqValue(p, seq)
		fmt.Fprintf(&b, "\n%s:", v)
		b.WriteString(describeDeliveries(l.mu.recs[v]))
	}
	return b.String()
}

// earliestEndLocked is the earliest moment d's hold may have ended.
func (l *shareLedger) earliestEndLocked(d *shareDelivery) time.Time {
	end := d.notBefore.Add(l.lock)
	if d.ack != 0 && d.ackSent.Before(end) {
		end = d.ackSent
	}
	for _, e := range l.mu.ends[d.consumer] {
		if !e.Before(d.notBefore) && e.Before(end) {
			end = e
		}
	}
	for _, k := range l.mu.kills {
		if !k.at.Before(d.notBefore) && k.at.Before(end) {
			end = k.at
		}
	}
	return end
}

// eraLocked is how many kills of d's partition's leader came before d
// was acquired; ok is false when one came while it may have been.
func (l *shareLedger) eraLocked(d *shareDelivery) (era int, ok bool) {
	for _, k := range l.mu.kills {
		if !slices.Contains(k.partitions, d.partition) {
			continue
		}
		switch {
		case k.at.Before(d.notBefore):
			era++
		case !k.at.After(d.at):
			return 0, false
		}
	}
	return era, true
}

// unseenDeliveryLocked reports whether a record finished without an
// ACCEPT or REJECT the consumers saw may have been archived at the
// delivery limit after a delivery none of them saw. There are two such
// deliveries:
//   - one lost in a leader's kill: the last delivery seen had count
//     limit-1 and came from a leader killed after it, which may have
//     acquired the record once more for a ShareFetch whose answer the
//     kill lost, and persisted the count with a later write of the
//     window (acquired records are written as available with their
//     counts); the next leader then archives it at the limit, as
//     Kafka's would;
//   - one a client threw away after the last delivery seen: franz-go
//     drops the records of a ShareFetch answer whose share session it
//     reset while the request was in flight (it logs "share fetch
//     session was reset mid-flight"); the broker counted the delivery
//     and archives the record when its lock expires.
func (l *shareLedger) unseenDeliveryLocked(ds []*shareDelivery) bool {
	last := ds[len(ds)-1]
	for _, k := range l.mu.kills {
		if last.count == l.limit-1 && slices.Contains(k.partitions, last.partition) && k.at.After(last.at) {
			return true
		}
	}
	return slices.ContainsFunc(l.mu.discards, func(at time.Time) bool { return at.After(last.notBefore) })
}

// describeDeliveries is a record's deliveries, for a violation.
func describeDeliveries(ds []*shareDelivery) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, " [%s count %d at %v ack %v sent %v outcome %d answered %v]", d.consumer, d.count, d.at.Format(time.StampMilli), d.ack,
			d.ackSent.Format(time.StampMilli), d.outcome, d.answered.Format(time.StampMilli))
	}
	return b.String()
}

// shareCounts are the checker's figures.
type shareCounts struct {
	produced, deliveries, redelivered             int
	accepted, acceptedUnanswered, rejected        int
	archivedAtLimit, unseenArchived, discards     int
	crashedHeld, staleRefused, inFlightAtKill     int
	holdsCompared, staleAcksSent, acksRefusedElse int
}

func (c shareCounts) String() string {
	return fmt.Sprintf("%d records produced, %d deliveries (%d redeliveries): %d accepted (%d more whose ACCEPT answer was lost), %d rejected, %d archived at the delivery limit (%d more after a delivery no consumer saw; %d answers thrown away by clients); "+
		"%d held by the killed consumer process, %d in flight on the killed leader's partitions, %d late acknowledgements after a lock expiry (%d refused), %d other acknowledgements refused; %d pairs of holds compared",
		c.produced, c.deliveries, c.redelivered, c.accepted, c.acceptedUnanswered, c.rejected, c.archivedAtLimit, c.unseenArchived, c.discards,
		c.crashedHeld, c.inFlightAtKill, c.staleAcksSent, c.staleRefused, c.acksRefusedElse, c.holdsCompared)
}

// check checks the queue semantics over the ledger for the produced
// records (every one acknowledged by the brokers), once the group's
// state says every record is finished:
//   - every produced record was delivered, and nothing else was;
//   - no record was accepted twice, and none was delivered after an
//     ACCEPT or REJECT of it was confirmed;
//   - every delivery count is in [1, limit], and the deliveries of a
//     record by one leader have distinct counts (a leader killed
//     loses the counts of acquisitions it did not persist: allowed);
//   - no two holds of a record overlap (a hold lasts until its lock
//     expires unless something ended it earlier);
//   - no acknowledgement of a hold whose record was since given to
//     another consumer was applied;
//   - a record never accepted was rejected, delivered limit times, had
//     an ACCEPT or REJECT whose answer was an error or lost, or was
//     may have had a delivery no consumer saw (unseenDeliveryLocked).
func (l *shareLedger) check(t *testing.T, produced []string) shareCounts {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := shareCounts{discards: len(l.mu.discards)}
	c.produced = len(produced)
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	want := map[string]bool{}
	for _, v := range produced {
		want[v] = true
		if len(l.mu.recs[v]) == 0 {
			fail("%s: produced, never delivered", v)
		}
	}
	for v, ds := range l.mu.recs {
		if !want[v] {
			fail("%s: delivered, never produced", v)
			continue
		}
		c.deliveries += len(ds)
		c.redelivered += len(ds) - 1
		l.checkRecordLocked(v, ds, &c, fail)
	}
	for _, k := range l.mu.kills {
		for _, ds := range l.mu.recs {
			for _, d := range ds {
				if slices.Contains(k.partitions, d.partition) && d.at.Before(k.at) && (d.ack == 0 || !d.answered.Before(k.at)) && d.consumer != "crashed" {
					c.inFlightAtKill++
				}
			}
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		t.Errorf("%d violations of the queue semantics (first 30):\n%s", len(errs), strings.Join(errs[:min(len(errs), 30)], "\n"))
	}
	return c
}

// checkRecordLocked checks the deliveries ds of the record v.
func (l *shareLedger) checkRecordLocked(v string, ds []*shareDelivery, c *shareCounts, fail func(string, ...any)) {
	var terminal *shareDelivery // a confirmed ACCEPT or REJECT
	maybe := false              // an ACCEPT or REJECT whose answer was not a success
	atLimit := false
	counts := map[[2]int]*shareDelivery{} // era, count
	for _, d := range ds {
		if d.count < 1 || d.count > l.limit {
			fail("%s: delivered to %s with delivery count %d, outside [1, %d]", v, d.consumer, d.count, l.limit)
		}
		if d.count == l.limit {
			atLimit = true
		}
		if d.consumer == "crashed" {
			c.crashedHeld++
		}
		if era, ok := l.eraLocked(d); ok {
			k := [2]int{era, int(d.count)}
			if o := counts[k]; o != nil {
				fail("%s: delivery count %d given twice by one leader (to %s at %v and %s at %v)", v, d.count, o.consumer, o.at.Format(time.StampMilli), d.consumer, d.at.Format(time.StampMilli))
			}
			counts[k] = d
		}
		final := d.ack == kgo.AckAccept || d.ack == kgo.AckReject
		switch {
		case final && d.outcome == ackConfirmed:
			if terminal != nil {
				fail("%s: finished twice: %v by %s and %v by %s", v, terminal.ack, terminal.consumer, d.ack, d.consumer)
			}
			terminal = d
		case final:
			maybe = true
		}
		if d.outcome == ackRefused && !l.staleLocked(d, ds) {
			c.acksRefusedElse++
		}
	}
	if terminal != nil {
		for _, d := range ds {
			if d != terminal && d.notBefore.After(terminal.answered) {
				fail("%s: delivered to %s (count %d, at %v) after its %v by %s was confirmed at %v", v, d.consumer, d.count, d.at.Format(time.StampMilli), terminal.ack, terminal.consumer, terminal.answered.Format(time.StampMilli))
			}
		}
	}
	switch {
	case terminal != nil && terminal.ack == kgo.AckAccept:
		c.accepted++
	case terminal != nil:
		c.rejected++
	case atLimit:
		c.archivedAtLimit++
	case maybe:
		c.acceptedUnanswered++
	case l.unseenDeliveryLocked(ds):
		c.unseenArchived++
	default:
		fail("%s: finished without a reason: never accepted or rejected, %d deliveries, the last with count %d:%s", v, len(ds), ds[len(ds)-1].count, describeDeliveries(ds))
	}
	l.checkHoldsLocked(v, ds, c, fail)
}

// checkHoldsLocked checks that no two holds of record v overlap and
// that no acknowledgement of a stale hold was applied.
func (l *shareLedger) checkHoldsLocked(v string, ds []*shareDelivery, c *shareCounts, fail func(string, ...any)) {
	for i, a := range ds {
		endA := l.earliestEndLocked(a)
		for _, b := range ds[i+1:] {
			endB := l.earliestEndLocked(b)
			if !a.at.Before(endA) || !b.at.Before(endB) {
				continue // a hold that may have ended before its consumer saw it
			}
			c.holdsCompared++
			if a.at.Before(endB) && b.at.Before(endA) {
				fail("%s: held by %s (count %d, from %v until at least %v) and by %s (count %d, from %v until at least %v) at once",
					v, a.consumer, a.count, a.at.Format(time.StampMilli), endA.Format(time.StampMilli),
					b.consumer, b.count, b.at.Format(time.StampMilli), endB.Format(time.StampMilli))
			}
		}
		if l.staleLocked(a, ds) {
			c.staleAcksSent++
			switch a.outcome {
			case ackConfirmed:
				fail("%s: %s's %v (delivery count %d) applied after the record was given to another consumer", v, a.consumer, a.ack, a.count)
			case ackRefused:
				c.staleRefused++
			}
		}
	}
}

// staleLocked reports whether d was acknowledged after the record was
// given to another consumer that acquired it after d's own acquisition.
func (l *shareLedger) staleLocked(d *shareDelivery, ds []*shareDelivery) bool {
	if d.ack == 0 {
		return false
	}
	return slices.ContainsFunc(ds, func(e *shareDelivery) bool {
		return e.consumer != d.consumer && e.notBefore.After(d.at) && e.at.Before(d.ackSent)
	})
}

// shareWatch is a share consumer's dialer that notes every moment the
// broker may release the records the consumer holds before their locks
// expire: a share session opened again (epoch 0 on a broker it fetched
// from before: the old session's records are released) or closed (-1),
// a leave heartbeat, a connection closed. Requests are seen as franz-go
// writes them, one request per Write.
type shareWatch struct {
	note func(time.Time)
	mu   struct {
		sync.Mutex
		fetched map[string]bool // broker addresses a ShareFetch went to
	}
}

// shareDiscardLog is a franz-go logger that notes when the client threw
// away records the broker had acquired for it: the answer to a
// ShareFetch whose share session was reset while it was in flight, or
// records it releases unseen.
type shareDiscardLog struct{ note func(time.Time) }

func (shareDiscardLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l shareDiscardLog) Log(level kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, "reset mid-flight") || level == kgo.LogLevelWarn && strings.Contains(msg, "releasing") {
		l.note(time.Now())
	}
}

func newShareWatch(note func(time.Time)) *shareWatch {
	w := &shareWatch{note: note}
	w.mu.fetched = map[string]bool{}
	return w
}

func (w *shareWatch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: conn, w: w, host: host}, nil
}

// first reports whether this is the first ShareFetch to host.
func (w *shareWatch) first(host string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.mu.fetched[host]
	w.mu.fetched[host] = true
	return !seen
}

type watchedConn struct {
	net.Conn
	w    *shareWatch
	host string
}

func (c *watchedConn) Write(p []byte) (int, error) {
	if key, releases := releasesShareRecords(p); releases && !(key == 78 && c.w.first(c.host)) {
		c.w.note(time.Now())
	} else if key == 78 {
		c.w.first(c.host)
	}
	return c.Conn.Write(p)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.w.note(time.Now())
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.w.note(time.Now())
	return c.Conn.Close()
}

// releasesShareRecords reports whether the request frame (size, header
// v2, body) may make the broker release records the client holds: a
// ShareFetch or ShareAcknowledge that opens or closes a share session,
// or a leave ShareGroupHeartbeat; key is the request's API key. A
// share request it cannot read counts.
func releasesShareRecords(frame []byte) (key int16, releases bool) {
	if len(frame) < 14 {
		return -1, false
	}
	key = int16(binary.BigEndian.Uint16(frame[4:]))
	if key != 76 && key != 78 && key != 79 {
		return key, false
	}
	return key, shareRequestReleases(key, frame)
}

// shareRequestReleases is releasesShareRecords for a frame of a share
// request.
func shareRequestReleases(key int16, frame []byte) bool {
	version := int16(binary.BigEndian.Uint16(frame[6:]))
	b := frame[12:] // after size, key, version, correlation id
	idLen := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if idLen > 0 {
		if idLen > len(b) {
			return true
		}
		b = b[idLen:]
	}
	tags, n := binary.Uvarint(b) // the header's tagged fields
	if n <= 0 {
		return true
	}
	b = b[n:]
	for range tags {
		if _, n = binary.Uvarint(b); n <= 0 {
			return true
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return true
		}
		b = b[n+int(size):]
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if err := req.ReadFrom(b); err != nil {
		return true
	}
	switch r := req.(type) {
	case *kmsg.ShareFetchRequest:
		return r.ShareSessionEpoch <= 0
	case *kmsg.ShareAcknowledgeRequest:
		return r.ShareSessionEpoch <= 0
	case *kmsg.ShareGroupHeartbeatRequest:
		return r.MemberEpoch < 0
	}
	return true
}

// ackOutcomes classifies the acknowledgements of ds from the callback
// results that came for them (flushErr: FlushAcks's own error).
func ackOutcomes(ds []*shareDelivery, results []kgo.ShareAckResult, flushErr error) []shareAckOutcome {
	byPart := map[int32][]error{}
	for _, r := range results {
		byPart[r.Partition] = append(byPart[r.Partition], r.Err)
	}
	out := make([]shareAckOutcome, len(ds))
	for i, d := range ds {
		errs, ok := byPart[d.partition]
		switch {
		case d.ack == 0:
			out[i] = ackNone
		case !ok || flushErr != nil:
			out[i] = ackUnknown
		case !slices.ContainsFunc(errs, func(e error) bool { return e != nil }):
			out[i] = ackConfirmed
		case !slices.ContainsFunc(errs, func(e error) bool { var ke *kerr.Error; return e == nil || !errors.As(e, &ke) }):
			out[i] = ackRefused
		default:
			out[i] = ackUnknown
		}
	}
	return out
}
