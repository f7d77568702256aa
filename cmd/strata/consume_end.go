package main

// strata consume --exit-at-end and the progress of a consume.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errAtEnd ends a poll once every partition reached its end.
var errAtEnd = errors.New("every partition reached its end")

type startKind int

const (
	startLatest startKind = iota
	startEarliest
	startTime
	startExact
)

// startSpec is where consumption of a partition without a committed offset
// begins: the consume's --from-beginning, --from-time or --offset.
type startSpec struct {
	start kgo.Offset
	kind  startKind
	ms    int64 // startTime
	exact int64 // startExact, already within the log
}

// partitionEnd is where a partition's consumption begins and the high
// watermark it had then.
type partitionEnd struct {
	partition  int32
	start, end int64
}

// positions returns where each partition of topic (parts; nil: all)
// begins and its high watermark now: the group's committed offset when it
// has one, else the spec. err is set when the cluster did not tell.
func (sp startSpec) positions(ctx context.Context, adm *kadm.Client, topic string, parts []int32, group string) ([]partitionEnd, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("the end offsets of %s: %w", topic, err)
	}
	if parts == nil {
		for p := range ends[topic] {
			parts = append(parts, p)
		}
	}
	var starts kadm.ListedOffsets
	switch sp.kind {
	case startEarliest:
		starts, err = adm.ListStartOffsets(ctx, topic)
	case startTime:
		starts, err = adm.ListOffsetsAfterMilli(ctx, sp.ms, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("the start offsets of %s: %w", topic, err)
	}
	var committed kadm.OffsetResponses
	if group != "" {
		if committed, err = adm.FetchOffsets(ctx, group); err != nil {
			return nil, fmt.Errorf("the offsets group %s committed: %w", group, err)
		}
	}
	var out []partitionEnd
	for _, p := range parts {
		e, ok := ends.Lookup(topic, p)
		if !ok || e.Err != nil {
			return nil, fmt.Errorf("the end offset of %s-%d: %v", topic, p, e.Err)
		}
		pe := partitionEnd{partition: p, end: e.Offset, start: e.Offset}
		if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
			pe.start = o.At
		} else {
			switch sp.kind {
			case startExact:
				pe.start = sp.exact
			case startEarliest, startTime:
				st, ok := starts.Lookup(topic, p)
				if !ok || st.Err != nil {
					return nil, fmt.Errorf("the start offset of %s-%d: %v", topic, p, st.Err)
				}
				if st.Offset >= 0 { // -1: no record at or after --from-time
					pe.start = st.Offset
				}
			}
		}
		out = append(out, pe)
	}
	return out, nil
}

// endTracker follows --exit-at-end: the partitions consumed, each with the
// high watermark it had when its consumption began, and whether it got
// there.
type endTracker struct {
	mu      sync.Mutex
	targets map[int32]int64 // partitions being consumed, done or not
	open    map[int32]bool  // those not at their end yet
	err     error
	done    chan struct{} // closed when finished
	closed  bool
}

func newEndTracker() *endTracker {
	return &endTracker{targets: map[int32]int64{}, open: map[int32]bool{}, done: make(chan struct{})}
}

// addAll starts tracking partitions, or records err (which finishes).
func (e *endTracker) addAll(ps []partitionEnd, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		e.finishLocked()
		return
	}
	for _, p := range ps {
		e.targets[p.partition] = p.end
		if p.start < p.end {
			e.open[p.partition] = true
		} else {
			delete(e.open, p.partition)
		}
	}
	if len(e.targets) > 0 && len(e.open) == 0 {
		e.finishLocked()
	}
}

// remove stops tracking revoked partitions.
func (e *endTracker) remove(parts []int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range parts {
		delete(e.targets, p)
		delete(e.open, p)
	}
	if len(e.targets) > 0 && len(e.open) == 0 {
		e.finishLocked() // what is left is at its end
	}
}

func (e *endTracker) finishLocked() {
	if !e.closed {
		e.closed = true
		close(e.done)
	}
}

// take reports whether r is before its partition's end, to be printed,
// and marks the partition done when r is its last record before it.
// Without --exit-at-end (nil) every record is taken.
func (e *endTracker) take(r *kgo.Record) bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	target, ok := e.targets[r.Partition]
	if !ok || r.Offset >= target || e.closed {
		return false
	}
	if r.Offset+1 >= target {
		delete(e.open, r.Partition)
		if len(e.open) == 0 {
			e.finishLocked()
		}
	}
	return true
}

// finished reports whether every partition reached its end (false
// without --exit-at-end).
func (e *endTracker) finished() bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (e *endTracker) error() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// progressEvery is the shortest time between two progress lines.
const progressEvery = 250 * time.Millisecond

// consumeProgress prints records, MB/s and the position against the end
// of the partitions seen to stderr.
type consumeProgress struct {
	w        io.Writer
	tty      bool // redraw one line; else a line each time
	start    time.Time
	last     time.Time
	records  int64
	bytes    int64
	pos, hwm map[int32]int64
	printed  bool
}

func newConsumeProgress(w io.Writer, tty bool) *consumeProgress {
	now := time.Now()
	return &consumeProgress{w: w, tty: tty, start: now, last: now, pos: map[int32]int64{}, hwm: map[int32]int64{}}
}

// fetched takes the high watermarks of a poll.
func (p *consumeProgress) fetched(f kgo.Fetches) {
	if p == nil {
		return
	}
	f.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Err == nil && fp.HighWatermark > 0 {
			p.hwm[fp.Partition] = fp.HighWatermark
		}
	})
}

// record counts a printed record.
func (p *consumeProgress) record(r *kgo.Record) {
	if p == nil {
		return
	}
	p.records++
	p.bytes += int64(len(r.Key) + len(r.Value))
	p.pos[r.Partition] = r.Offset + 1
}

// tick prints a line if progressEvery passed since the last one, or when
// final.
func (p *consumeProgress) tick(final bool) {
	if p == nil {
		return
	}
	now := time.Now()
	if !final && now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	var pos, end int64
	for part, h := range p.hwm {
		end += h
		pos += min(p.pos[part], h)
	}
	secs := now.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.bytes) / 1e6 / secs
	}
	line := fmt.Sprintf("strata consume: %s, %.2f MB/s, at %d of %d (%d behind the end)", plural(p.records, "record"), rate, pos, end, end-pos)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.printed = true
}

// finish prints the last line.
func (p *consumeProgress) finish() {
	if p == nil {
		return
	}
	p.tick(true)
	if p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}
