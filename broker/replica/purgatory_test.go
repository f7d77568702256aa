package replica

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/coord"
)

// TestAwaitResults: each way a wait of Await ends, with the ISR size it
// reports. No case waits on a clock: the deadline is already past, or
// the wait is ended by a channel closed before it starts.
func TestAwaitResults(t *testing.T) {
	const self = int32(1)
	past := time.Unix(1, 0)
	future := time.Now().Add(time.Hour)
	cases := []struct {
		name     string
		epoch    int32
		target   int64
		deadline time.Time
		stopping bool // the broker is shutting down
		cancel   bool // the client went away
		want     WaitResult
	}{
		{name: "high watermark already past the target", epoch: 1, target: 3, deadline: past, want: Replicated},
		{name: "leadership moved to another epoch", epoch: 0, target: 3, deadline: future, want: LeadershipMoved},
		{name: "deadline passed", epoch: 1, target: 10, deadline: past, want: DeadlinePassed},
		{name: "broker shutting down", epoch: 1, target: 10, deadline: future, stopping: true, want: ShuttingDown},
		{name: "client went away", epoch: 1, target: 10, deadline: future, cancel: true, want: Cancelled},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := replicaTestPartition(t, [2]int{0, 5})
			pi := coord.PartitionInfo{Replicas: []int32{1}, Version: 1,
				State: coord.PartitionState{Leader: self, LeaderEpoch: 1, ISR: []int32{1}}}
			p.syncLeadership(pi, time.Unix(1000, 0))
			p.AdvanceHighWatermark() // the ISR is this broker alone: 5
			done := make(chan struct{})
			if tc.stopping {
				close(done)
			}
			m := NewManager(Config{BrokerID: self, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
				Now: time.Now, Done: done}, nil /* host: not used by Await */)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			res, isr := m.Await(ctx, p, tc.epoch, tc.target, tc.deadline)
			if res != tc.want || isr != 1 {
				t.Errorf("#%d: got (%d, isr %d), want (%d, isr 1)", i, res, isr, tc.want)
			}
		})
	}
}
