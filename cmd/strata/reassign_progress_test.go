package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeSizes is a sizeSource answering from a table; brokers not in it
// fail.
func fakeSizes(table replicaSizes) sizeSource {
	return func(_ context.Context, brokers []int32, _ kadm.TopicsSet) (replicaSizes, error) {
		out := replicaSizes{}
		var errs []error
		for _, b := range brokers {
			if m, ok := table[b]; ok {
				out[b] = m
			} else {
				errs = append(errs, errors.New("broker down"))
			}
		}
		return out, errors.Join(errs...)
	}
}

func TestMeasureMoves(t *testing.T) {
	moving := []movingPartition{
		{Topic: "t", Partition: 0, Leader: 1, Adding: []int32{3}},
		{Topic: "t", Partition: 1, Leader: 2, Adding: []int32{3, 4}}, // two new replicas
		{Topic: "t", Partition: 2, Leader: 1, Adding: []int32{5}},    // broker 5 does not answer
		{Topic: "t", Partition: 3, Leader: -1, Adding: []int32{3}},   // no leader
	}
	src := fakeSizes(replicaSizes{
		1: {"t-0": 1000, "t-2": 10},
		2: {"t-1": 500},
		3: {"t-0": 400, "t-1": 600}, // t-1 above the leader's: capped
		4: {},                       // t-1 not created yet
	})
	states, err := measureMoves(context.Background(), src, moving)
	if err == nil {
		t.Error("no error for broker 5")
	}
	want := []moveState{
		{Name: "t-0", ToCopy: 1000, Copied: 400},
		{Name: "t-1", ToCopy: 1000, Copied: 500},
		{Name: "t-2", ToCopy: -1, Copied: -1},
		{Name: "t-3", ToCopy: -1, Copied: -1},
	}
	for i, w := range want {
		if g := states[i]; g.Name != w.Name || g.ToCopy != w.ToCopy || g.Copied != w.Copied {
			t.Errorf("#%d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestProgressTracker feeds samples at made-up times and checks the
// rate, the time left, the totals and that a partition no longer listed
// counts as copied.
func TestProgressTracker(t *testing.T) {
	pt := newProgressTracker()
	t0 := time.Unix(1000, 0)
	pt.observe(t0, []moveState{{Name: "a-0", Adding: []int32{4}, ToCopy: 1000, Copied: 0}, {Name: "b-0", Adding: []int32{4}, ToCopy: 3000, Copied: 0}})
	var out bytes.Buffer
	pt.print(&out)
	if got, want := out.String(), "Progress: 2 partitions moving, 0 done: 0 B of 3.9 KiB copied (0%), rate -, ETA -\n"+
		"  a-0 to 4: 0 B of 1000 B copied (0%), rate -, ETA -\n"+
		"  b-0 to 4: 0 B of 2.9 KiB copied (0%), rate -, ETA -\n"; got != want {
		t.Errorf("first sample:\ngot  %q\nwant %q", got, want)
	}
	pt.observe(t0.Add(5*time.Second), []moveState{{Name: "a-0", Adding: []int32{4}, ToCopy: 1000, Copied: 500}, {Name: "b-0", Adding: []int32{4}, ToCopy: 3000, Copied: 1000}})
	out.Reset()
	pt.print(&out)
	if got, want := out.String(), "Progress: 2 partitions moving, 0 done: 1.5 KiB of 3.9 KiB copied (38%), 300 B/s, ETA 8s\n"+
		"  a-0 to 4: 500 B of 1000 B copied (50%), 100 B/s, ETA 5s\n"+
		"  b-0 to 4: 1000 B of 2.9 KiB copied (33%), 200 B/s, ETA 10s\n"; got != want {
		t.Errorf("second sample:\ngot  %q\nwant %q", got, want)
	}
	// a-0 is done: it counts as copied in full.
	pt.observe(t0.Add(10*time.Second), []moveState{{Name: "b-0", Adding: []int32{4}, ToCopy: 3000, Copied: 2000}})
	if toCopy, copied := pt.totals(); toCopy != 4000 || copied != 3000 {
		t.Errorf("totals: got %d of %d, want 3000 of 4000", copied, toCopy)
	}
	out.Reset()
	pt.print(&out)
	if !strings.HasPrefix(out.String(), "Progress: 1 partition moving, 1 done: 2.9 KiB of 3.9 KiB copied (75%), 300 B/s, ETA 3s\n") || strings.Contains(out.String(), "a-0") {
		t.Errorf("after a-0 is done:\n%s", out.String())
	}
	// Unknown sizes say so.
	pt.observe(t0.Add(15*time.Second), []moveState{{Name: "b-0", Adding: []int32{4}, ToCopy: -1, Copied: -1}})
	out.Reset()
	pt.print(&out)
	if !strings.Contains(out.String(), "b-0 to 4: size unknown") {
		t.Errorf("unknown size:\n%s", out.String())
	}
}

func TestFormatBytes(t *testing.T) {
	for i, tc := range []struct {
		n    int64
		want string
	}{{-1, "-"}, {0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {2 << 40, "2.0 TiB"}, {5000 << 40, "5000.0 TiB"}} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}

// TestRetrier checks the retry loop on its own: retriable answers are
// retried until they succeed or the bound is spent; nothing else is.
func TestRetrier(t *testing.T) {
	oldFirst, oldMax := retryFirstBackoff, retryMaxBackoff
	retryFirstBackoff, retryMaxBackoff = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { retryFirstBackoff, retryMaxBackoff = oldFirst, oldMax })
	var stderr bytes.Buffer
	c := &clientCmd{name: "test", stderr: &stderr}

	tries := 0
	err := c.newRetrier("Op", time.Minute).do(context.Background(), func(context.Context) ([]string, error) {
		if tries++; tries < 3 {
			return []string{"t-0"}, kerr.RequestTimedOut
		}
		return nil, nil
	})
	if err != nil || tries != 3 || strings.Count(stderr.String(), "retrying in") != 2 || !strings.Contains(stderr.String(), "Op succeeded after 3 attempts") {
		t.Errorf("retried: err %v, %d tries, stderr %q", err, tries, stderr.String())
	}

	tries = 0
	err = c.newRetrier("Op", 20*time.Millisecond).do(context.Background(), func(context.Context) ([]string, error) {
		tries++
		return []string{"t-0"}, kerr.NotController
	})
	if !errors.Is(err, kerr.NotController) || tries < 2 || !strings.Contains(err.Error(), "the retry bound") {
		t.Errorf("bound: err %v after %d tries", err, tries)
	}
	for _, e := range []error{kerr.RequestTimedOut, kerr.NotController, &kadm.ErrAndMessage{Err: kerr.RequestTimedOut}} {
		if !retriableAdminErr(e) {
			t.Errorf("%v: not retriable", e)
		}
	}
	for _, e := range []error{kerr.InvalidReplicaAssignment, kerr.InvalidConfig, kerr.UnknownTopicOrPartition, context.DeadlineExceeded} {
		if retriableAdminErr(e) {
			t.Errorf("%v: retriable", e)
		}
	}
}
