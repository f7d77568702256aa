package broker

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"
)

// TestCleanerConfigsAtRunTime changes the log cleaner's dynamic broker
// configs on a running broker and observes each take effect without a
// restart: the thread count (the strata_log_cleaner_threads gauge), the
// throttle's rate and burst (the limiter and its gauge), the backoff and
// map size of the new threads; DescribeConfigs shows the run-time values
// as DYNAMIC_BROKER_CONFIG; bad values and Kafka's thread bounds are
// refused and change nothing; DELETE and AlterConfigs go back to the
// properties file's values. A throttled cleaning in progress is canceled
// by the change (Kafka's reconfigure restarts the threads) and the
// partition is then cleaned under the new, unthrottled rate.
func TestCleanerConfigsAtRunTime(t *testing.T) {
	const (
		threadsKey = "log.cleaner.threads"
		ioKey      = "log.cleaner.io.max.bytes.per.second"
		bufKey     = "log.cleaner.io.buffer.size"
		backoffKey = "log.cleaner.backoff.ms"
		dedupeKey  = "log.cleaner.dedupe.buffer.size"
	)
	s := startServer(t, map[string]string{
		threadsKey: "2",
		ioKey:      "1024",
		bufKey:     "1024",
		backoffKey: "50",
	})
	cl := newClient(t, s)
	threads := func() float64 { return gaugeValue(t, s, "strata_log_cleaner_threads") }
	waitFor(t, "2 cleaner threads", func() bool { return threads() == 2 })
	if l := s.cleaner.limiter.Limit(); l != 1024 {
		t.Fatalf("limiter at start %v, want 1024", l)
	}
	if v, src, ro := describedRate(t, cl, threadsKey); v != "2" || src != kmsg.ConfigSourceStaticBrokerConfig || ro {
		t.Fatalf("described %s=%s source %v read-only %v", threadsKey, v, src, ro)
	}

	// A cleaning throttled to 1 KiB/s is running when the rate changes.
	events := onCleaned(t, s)
	createTopic(t, cl, "dyn", 1, compactedConfigs(nil))
	produceKeyed(t, cl, "dyn", 10, 10, nil)
	p := s.topic("dyn").local(0)
	waitFor(t, "a throttled cleaning of dyn to run", func() bool {
		s.cleaner.mu.Lock()
		defer s.cleaner.mu.Unlock()
		return s.cleaner.mu.running[p] != nil
	})

	if code := brokerAlter(t, cl, "0", setOp(threadsKey, "4"), setOp(ioKey, "1e12"), setOp(bufKey, "4096"), setOp(backoffKey, "60000")); code != 0 {
		t.Fatalf("SET: error %d", code)
	}
	if l, b := s.cleaner.limiter.Limit(), s.cleaner.limiter.Burst(); l != 1e12 || b != 4096 {
		t.Fatalf("limiter after SET: rate %v burst %d, want 1e12, 4096", l, b)
	}
	if g := gaugeValue(t, s, "strata_log_cleaner_io_max_bytes_per_second"); g != 1e12 {
		t.Fatalf("io gauge after SET %v", g)
	}
	waitFor(t, "4 cleaner threads", func() bool { return threads() == 4 })
	if cfg := s.cleaner.config(); cfg.Threads != 4 || cfg.Backoff != time.Minute || cfg.IOBufferSize != 4096 {
		t.Fatalf("cleaner config after SET %+v", cfg)
	}
	s.cleaner.reconfMu.Lock()
	g := s.cleaner.gen
	s.cleaner.reconfMu.Unlock()
	if g == nil || g.mapSize != int(s.cfg.Cleaner.DedupeBufferSize/4) || g.cfg.Backoff != time.Minute {
		t.Fatalf("new generation %+v, want a quarter of the dedupe buffer each and the new backoff", g)
	}
	for _, k := range []string{threadsKey, ioKey, bufKey, backoffKey} {
		if _, src, ro := describedRate(t, cl, k); src != kmsg.ConfigSourceDynamicBrokerConfig || ro {
			t.Errorf("described %s after SET: source %v read-only %v", k, src, ro)
		}
	}
	// The throttled cleaning was canceled; the partition is cleaned again,
	// now unthrottled (the wait is bounded by waitCleaned, not measured).
	sawCancel := false
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case e := <-events:
			switch {
			case e.p != p:
			case errors.Is(e.err, context.Canceled):
				sawCancel = true
			case e.err != nil:
				t.Fatalf("cleaning failed: %v", e.err)
			case e.res.Cleaned:
				done = true
			}
		case <-deadline:
			t.Fatal("dyn was not cleaned after the throttle was lifted")
		}
	}
	if !sawCancel {
		t.Error("the throttled cleaning was not canceled by the reconfiguration")
	}

	for i, bad := range [][]kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{setOp(threadsKey, "9")},  // more than double 4
		{setOp(threadsKey, "1")},  // less than half 4
		{setOp(threadsKey, "0")},  // at least 1
		{setOp(threadsKey, "65")}, // out of range
		{setOp(ioKey, "fast")},
		{setOp(ioKey, "0")},
		{setOp(backoffKey, "-1")},
		{setOp(dedupeKey, "1023")},                       // below its range
		{setOp(backoffKey, "1"), setOp(threadsKey, "x")}, // all or nothing
		{func() kmsg.IncrementalAlterConfigsRequestResourceConfig {
			c := setOp(threadsKey, "3")
			c.Op = kmsg.IncrementalAlterConfigOpAppend
			return c
		}()},
		{func() kmsg.IncrementalAlterConfigsRequestResourceConfig {
			c := setOp(threadsKey, "3")
			c.Value = nil
			return c
		}()},
		{setOp(threadsKey, "3"), setOp(threadsKey, "2")},
		{setOp(threadsKey, "3"), setOp("log.cleaner.enable", "false")}, // not dynamic
	} {
		if code := brokerAlter(t, cl, "0", bad...); code == 0 {
			t.Errorf("#%d: accepted", i)
		}
	}
	if cfg := s.cleaner.config(); cfg.Threads != 4 || cfg.Backoff != time.Minute {
		t.Fatalf("after refused changes: %+v", cfg)
	}

	// ValidateOnly changes nothing.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = true
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	rr.Configs = append(rr.Configs, setOp(threadsKey, "3"))
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(testCtx(t), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("validate only: %v %+v", err, resp)
	}
	if n := s.cleaner.config().Threads; n != 4 {
		t.Fatalf("validate only changed threads to %d", n)
	}

	// DELETE goes back to the properties file's value.
	if code := brokerAlter(t, cl, "0", deleteOp(ioKey), deleteOp(threadsKey)); code != 0 {
		t.Fatalf("DELETE: error %d", code)
	}
	waitFor(t, "2 cleaner threads again", func() bool { return threads() == 2 })
	if l := s.cleaner.limiter.Limit(); l != 1024 {
		t.Fatalf("limiter after DELETE %v, want the file's 1024", l)
	}
	if v, src, _ := describedRate(t, cl, ioKey); v != "1024" || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("described %s after DELETE: %s source %v", ioKey, v, src)
	}

	// AlterConfigs replaces the run-time values: those not named go back.
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = threadsKey, kmsg.StringPtr("3")
	ar.Configs = append(ar.Configs, c)
	areq.Resources = append(areq.Resources, ar)
	if resp, err := areq.RequestWith(testCtx(t), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	waitFor(t, "3 cleaner threads", func() bool { return threads() == 3 })
	if cfg := s.cleaner.config(); cfg.Backoff != 50*time.Millisecond || cfg.IOBufferSize != 1024 {
		t.Fatalf("after AlterConfigs: %+v, want the file's backoff and buffer", cfg)
	}
	if _, src, _ := describedRate(t, cl, backoffKey); src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("described %s after AlterConfigs: source %v", backoffKey, src)
	}
}

// TestCleanerUnthrottledAtRunTime lifts and sets the throttle of a broker
// started unthrottled: the limiter goes from rate.Inf to a rate and back.
func TestCleanerUnthrottledAtRunTime(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	if l := s.cleaner.limiter.Limit(); l != rate.Inf {
		t.Fatalf("limiter at start %v", l)
	}
	if code := brokerAlter(t, cl, "0", setOp("log.cleaner.io.max.bytes.per.second", "5000")); code != 0 {
		t.Fatalf("SET: %d", code)
	}
	if l := s.cleaner.limiter.Limit(); l != 5000 {
		t.Fatalf("limiter after SET %v", l)
	}
	if code := brokerAlter(t, cl, "0", setOp("log.cleaner.io.max.bytes.per.second", "1.7976931348623157e+308")); code != 0 {
		t.Fatalf("SET max: %d", code)
	}
	if l := s.cleaner.limiter.Limit(); l != rate.Inf || gaugeValue(t, s, "strata_log_cleaner_io_max_bytes_per_second") != math.MaxFloat64 {
		t.Fatalf("limiter after SET of the largest double %v", l)
	}
}
