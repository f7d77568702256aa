package broker

import (
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// TestMetricsPartitionsAndConnections checks the per-partition log
// metrics against the log, and the per-listener connection counts as a
// raw connection opens and closes.
func TestMetricsPartitionsAndConnections(t *testing.T) {
	s := startServer(t, map[string]string{"metrics.listener": "127.0.0.1:0"})
	cl := newClient(t, s)
	const topic = "sized"
	createTopic(t, cl, topic, 2, nil)
	for range 3 {
		if r := produceRaw(t, cl, topic, 1, buildBatch(t, segment.CodecNone, 10)); r.ErrorCode != 0 {
			t.Fatalf("produce: error %d", r.ErrorCode)
		}
	}
	p := s.topic(topic).local(1)
	poll.Until(t, 30*time.Second, "high watermark at 30", func() bool { return p.log.HighWatermark() == 30 })
	fams := scrape(t, s)
	part := func(i string) []string { return []string{"topic", topic, "partition", i} }
	for _, c := range []struct {
		name string
		want float64
	}{
		{"strata_log_end_offset", 30},
		{"strata_log_high_watermark_offset", 30},
		{"strata_log_start_offset", 0},
		{"strata_log_local_start_offset", 0},
		{"strata_log_size_bytes", float64(logSize(p.log.Segments()))},
	} {
		if v := mustValue(t, fams, c.name, part("1")...); v != c.want {
			t.Errorf("%s of partition 1: %v, want %v", c.name, v, c.want)
		}
	}
	if v := mustValue(t, fams, "strata_log_size_bytes", part("1")...); v <= 0 {
		t.Errorf("partition 1 size %v after 30 records", v)
	}
	if v := mustValue(t, fams, "strata_log_end_offset", part("0")...); v != 0 {
		t.Errorf("empty partition 0 log end %v", v)
	}
	if _, ok := metricValue(fams, "strata_log_remote_size_bytes", part("1")...); ok {
		t.Error("remote size exported for a topic that is not tiered")
	}
	// Embedded coordinator: the single node is the controller, and ready.
	if v := mustValue(t, fams, "strata_controller_active"); v != 1 {
		t.Errorf("strata_controller_active %v on a single node", v)
	}
	if ok, why := s.Ready(); !ok {
		t.Errorf("single node not ready while serving: %s", why)
	} else if v := mustValue(t, scrape(t, s), "strata_broker_ready"); v != 1 {
		t.Errorf("strata_broker_ready %v while Ready", v)
	}

	// Connections on the PLAINTEXT listener: the client's, then a raw one
	// more, then that one closed.
	conns := func() (open, accepted, closed float64) {
		f := scrape(t, s)
		return mustValue(t, f, "strata_broker_listener_connections", "listener", "PLAINTEXT"),
			mustValue(t, f, "strata_broker_listener_connections_accepted_total", "listener", "PLAINTEXT"),
			mustValue(t, f, "strata_broker_listener_connections_closed_total", "listener", "PLAINTEXT")
	}
	open0, acc0, closed0 := conns()
	if open0 < 1 || acc0 < open0 || acc0-closed0 != open0 {
		t.Fatalf("with a client: open %v accepted %v closed %v", open0, acc0, closed0)
	}
	raw := dialRaw(t, s)
	raw.barrier() // answered: the connection is counted
	open1, acc1, closed1 := conns()
	// The client may open connections of its own meanwhile: the raw one
	// is at least one more, and open is always accepted minus closed.
	if acc1 < acc0+1 || open1 != acc1-closed1 || open1 < 2 {
		t.Errorf("after one more connection: open %v accepted %v closed %v (before: %v %v %v)", open1, acc1, closed1, open0, acc0, closed0)
	}
	_ = raw.c.Close()
	poll.Until(t, 30*time.Second, "the raw connection counted closed", func() bool {
		open, acc, closed := conns()
		return closed >= closed1+1 && open == acc-closed
	})
}
