package broker

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// probe GETs path on s's metrics listener: status code and body.
func probe(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + s.MetricsAddr().String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe polls path until it answers code, and returns the body.
func waitProbe(t *testing.T, s *Server, path string, code int, what string) string {
	t.Helper()
	var got int
	var body string
	start := time.Now()
	poll.Until(t, 90*time.Second, what, func() bool {
		got, body = probe(t, s, path)
		return got == code
	})
	t.Logf("%s after %v: %d %q", what, time.Since(start).Round(time.Millisecond), got, body)
	return body
}

// TestReadyzFollowsRegistrationAndZooKeeper: a broker in a ZooKeeper
// cluster is live (/healthz 200) and not ready (/readyz 503) until it
// accepts connections; ready once it serves; not ready once ZooKeeper has
// been down (the real server killed) for longer than the session timeout,
// ready again once it is back; not ready from the start of Shutdown.
func TestReadyzFollowsRegistrationAndZooKeeper(t *testing.T) {
	zk := zktest.Start(t)
	cfg := testConfig(t, map[string]string{
		"zookeeper.connect":            zk.ConnectString("/readyz"),
		"zookeeper.session.timeout.ms": "6000",
		"metrics.listener":             "127.0.0.1:0",
	})
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		}
	})

	// Registered and loaded, but Serve not called: not accepting yet.
	if code, body := probe(t, s, "/healthz"); code != 200 || body != "ok" {
		t.Fatalf("/healthz before Serve: %d %q", code, body)
	}
	if code, body := probe(t, s, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "accepting on 0 of 1 listeners") {
		t.Fatalf("/readyz before Serve: %d %q, want 503 naming the listeners", code, body)
	}
	go func() { _ = s.Serve() }()
	waitProbe(t, s, "/readyz", 200, "ready once serving")
	if v := mustValue(t, scrape(t, s), "strata_broker_ready"); v != 1 {
		t.Errorf("strata_broker_ready %v while /readyz answers 200", v)
	}
	// The only broker is the active controller.
	poll.Until(t, 30*time.Second, "controller active", func() bool {
		v, _ := metricValue(scrape(t, s), "strata_controller_active")
		return v == 1
	})

	// ZooKeeper down past the session timeout (6 s): not ready; the
	// process stays live.
	zk.Stop()
	body := waitProbe(t, s, "/readyz", http.StatusServiceUnavailable, "not ready with ZooKeeper down")
	if !strings.Contains(body, "unreachable") || !strings.Contains(body, "zookeeper.session.timeout.ms") {
		t.Errorf("/readyz with ZooKeeper down: %q, want the coordinator and the session timeout named", body)
	}
	if v := mustValue(t, scrape(t, s), "strata_broker_ready"); v != 0 {
		t.Errorf("strata_broker_ready %v while ZooKeeper is down", v)
	}
	if code, _ := probe(t, s, "/healthz"); code != 200 {
		t.Errorf("/healthz with ZooKeeper down: %d, want 200 (the process is alive)", code)
	}
	zk.Restart()
	waitProbe(t, s, "/readyz", 200, "ready again with ZooKeeper back")

	// Methods other than GET and HEAD are refused.
	resp, err := http.Post("http://"+s.MetricsAddr().String()+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %s", resp.Status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopped = true
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := s.Ready(); ok || why != "shutting down" {
		t.Errorf("Ready after Shutdown: %v %q", ok, why)
	}
}

// TestMetricsListenerDefaultAndBindFailure: metrics.listener defaults to
// 127.0.0.1:9404, an empty value serves nothing, and a broker whose
// metrics.listener is taken does not start, naming the setting.
func TestMetricsListenerDefaultAndBindFailure(t *testing.T) {
	def, err := ConfigFromProperties(nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.MetricsListen != "127.0.0.1:9404" {
		t.Errorf("default metrics.listener %q, want 127.0.0.1:9404", def.MetricsListen)
	}
	off, err := ConfigFromProperties(map[string]string{"metrics.listener": ""})
	if err != nil || off.MetricsListen != "" {
		t.Errorf("metrics.listener empty: %q %v, want none", off.MetricsListen, err)
	}

	s := startServer(t, map[string]string{"metrics.listener": "127.0.0.1:0"})
	taken := s.MetricsAddr().String()
	cfg := testConfig(t, map[string]string{"metrics.listener": taken})
	if s2, err := NewServer(cfg); err == nil {
		_ = s2.Shutdown(testCtx(t))
		t.Fatalf("a second broker started on the taken metrics.listener %s", taken)
	} else if !strings.Contains(err.Error(), "metrics.listener "+taken) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error %q, want metrics.listener and the address named", err)
	}
}
