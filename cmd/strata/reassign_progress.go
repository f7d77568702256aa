package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file measures the progress of partition moves in bytes: per
// moving partition the bytes to copy (its leader's local size, once per
// replica being added), the bytes copied (the adding replicas' local
// sizes, each capped at the leader's), the rate over the last samples
// and the time left at that rate.

// progressInterval is how often `strata cluster ... --execute` prints
// the progress of the moves on stderr; tests shorten it.
var progressInterval = 5 * time.Second

// rateWindow is how many samples the rate is taken over.
const rateWindow = 6

// movingPartition is a partition being reassigned, as
// ListPartitionReassignments lists it, with its leader.
type movingPartition struct {
	Topic     string
	Partition int32
	Leader    int32 // -1 if it has none or it is not known
	// Replicas is the full set while it moves (target first, then the
	// replicas leaving); Adding and Removing the replicas being added and
	// removed.
	Replicas, Adding, Removing []int32
}

// listReassignments returns the partitions being reassigned, sorted by
// name, with their leaders from a Metadata request.
func listReassignments(ctx context.Context, s *session) ([]movingPartition, error) {
	rctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req := kmsg.NewPtrListPartitionReassignmentsRequest() // Topics nil: all of them
	resp, err := req.RequestWith(rctx, s.cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, kafkaError(err, derefString(resp.ErrorMessage))
	}
	var out []movingPartition
	topics := map[string]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, movingPartition{Topic: t.Topic, Partition: p.Partition, Leader: -1,
				Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
			topics[t.Topic] = true
		}
	}
	slices.SortFunc(out, func(a, b movingPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if len(out) == 0 {
		return out, nil
	}
	md, err := s.adm.Metadata(rctx, slices.Sorted(maps.Keys(topics))...)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if p, ok := md.Topics[out[i].Topic].Partitions[out[i].Partition]; ok && p.Err == nil {
			out[i].Leader = p.Leader
		}
	}
	return out, nil
}

func (m movingPartition) name() string { return fmt.Sprintf("%s-%d", m.Topic, m.Partition) }

// moveState is the bytes of one moving partition at one sample.
type moveState struct {
	Name   string
	Adding []int32
	// ToCopy is the leader's local size times the replicas being added,
	// Copied the adding replicas' local sizes (each at most the
	// leader's); -1 when a size is unknown.
	ToCopy, Copied int64
}

// measureMoves asks src for the sizes of the moving partitions on their
// leaders and adding replicas and returns their states, in the order
// given. An error of src leaves the sizes it could not learn unknown and
// is returned along with the states.
func measureMoves(ctx context.Context, src sizeSource, moving []movingPartition) ([]moveState, error) {
	brokers := map[int32]bool{}
	set := kadm.TopicsSet{}
	for _, m := range moving {
		if m.Leader >= 0 {
			brokers[m.Leader] = true
		}
		for _, a := range m.Adding {
			brokers[a] = true
		}
		set.Add(m.Topic, m.Partition)
	}
	sizes, err := src(ctx, slices.Sorted(maps.Keys(brokers)), set)
	out := make([]moveState, 0, len(moving))
	for _, m := range moving {
		st := moveState{Name: m.name(), Adding: m.Adding, ToCopy: -1, Copied: -1}
		leaderSize, ok := sizes.of(m.Leader, m.name())
		if ok && m.Leader >= 0 {
			st.ToCopy = leaderSize * int64(len(m.Adding))
			st.Copied = 0
			for _, a := range m.Adding {
				n, ok := sizes.of(a, m.name())
				if !ok {
					st.ToCopy, st.Copied = -1, -1
					break
				}
				st.Copied += min(n, leaderSize)
			}
		}
		out = append(out, st)
	}
	return out, err
}

// progressSample is the bytes copied at one time.
type progressSample struct {
	at     time.Time
	copied int64
}

// progressTracker follows moves over samples.
type progressTracker struct {
	order []string             // partitions in the order first seen
	last  map[string]moveState // the latest state of each
	done  map[string]bool
	hist  map[string][]progressSample
	total []progressSample
}

func newProgressTracker() *progressTracker {
	return &progressTracker{last: map[string]moveState{}, done: map[string]bool{}, hist: map[string][]progressSample{}}
}

// observe records the states of the partitions still moving at now;
// partitions seen before and not in states are done: their copy is
// complete (copied = to copy).
func (pt *progressTracker) observe(now time.Time, states []moveState) {
	still := map[string]bool{}
	for _, st := range states {
		still[st.Name] = true
		if _, seen := pt.last[st.Name]; !seen {
			pt.order = append(pt.order, st.Name)
		}
		pt.last[st.Name] = st
		if st.Copied >= 0 {
			pt.hist[st.Name] = appendSample(pt.hist[st.Name], progressSample{now, st.Copied})
		}
	}
	for _, name := range pt.order {
		if !still[name] && !pt.done[name] {
			pt.done[name] = true
			st := pt.last[name]
			if st.ToCopy >= 0 {
				st.Copied = st.ToCopy
			}
			pt.last[name] = st
		}
	}
	toCopy, copied := pt.totals()
	if toCopy >= 0 {
		pt.total = appendSample(pt.total, progressSample{now, copied})
	}
}

func appendSample(s []progressSample, x progressSample) []progressSample {
	s = append(s, x)
	if len(s) > rateWindow {
		s = s[len(s)-rateWindow:]
	}
	return s
}

// totals returns the bytes to copy and copied of every partition seen,
// or -1, -1 if one is unknown.
func (pt *progressTracker) totals() (toCopy, copied int64) {
	for _, name := range pt.order {
		st := pt.last[name]
		if st.ToCopy < 0 || st.Copied < 0 {
			return -1, -1
		}
		toCopy += st.ToCopy
		copied += st.Copied
	}
	return toCopy, copied
}

// rate returns the bytes per second over samples, and whether there are
// enough to tell.
func rate(samples []progressSample) (float64, bool) {
	if len(samples) < 2 {
		return 0, false
	}
	first, last := samples[0], samples[len(samples)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0, false
	}
	return float64(last.copied-first.copied) / dt, true
}

// describeProgress renders one line: "4.0 MiB of 16.0 MiB copied (25%),
// 1.3 MiB/s, ETA 9s"; without samples (nil: one look, no rate) only the
// bytes.
func describeProgress(toCopy, copied int64, samples []progressSample) string {
	if toCopy < 0 || copied < 0 {
		return "size unknown"
	}
	var b strings.Builder
	pct := 100.0
	if toCopy > 0 {
		pct = 100 * float64(copied) / float64(toCopy)
	}
	fmt.Fprintf(&b, "%s of %s copied (%.0f%%)", formatBytes(copied), formatBytes(toCopy), pct)
	r, ok := rate(samples)
	switch {
	case samples == nil:
	case !ok:
		b.WriteString(", rate -, ETA -")
	case copied >= toCopy:
		fmt.Fprintf(&b, ", %s/s", formatBytes(int64(r)))
	case r <= 0:
		fmt.Fprintf(&b, ", %s/s, ETA -", formatBytes(max(int64(r), 0)))
	default:
		eta := time.Duration(float64(toCopy-copied) / r * float64(time.Second))
		fmt.Fprintf(&b, ", %s/s, ETA %v", formatBytes(int64(r)), eta.Round(time.Second))
	}
	return b.String()
}

// print writes the progress: a total line, then one line per partition
// still moving.
func (pt *progressTracker) print(w io.Writer) {
	moving := 0
	for _, name := range pt.order {
		if !pt.done[name] {
			moving++
		}
	}
	toCopy, copied := pt.totals()
	fmt.Fprintf(w, "Progress: %s moving, %d done: %s\n", plural(int64(moving), "partition"), len(pt.done), describeProgress(toCopy, copied, pt.total))
	for _, name := range pt.order {
		if pt.done[name] {
			continue
		}
		st := pt.last[name]
		fmt.Fprintf(w, "  %s to %s: %s\n", name, joinIDs(st.Adding), describeProgress(st.ToCopy, st.Copied, pt.hist[name]))
	}
}
