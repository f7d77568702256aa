package broker

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Health and readiness probes, served on metrics.listener beside /metrics
// (docs/monitoring.md):
//
//   - /healthz answers 200 "ok" while the process serves HTTP at all: a
//     liveness probe. It checks nothing else, so that an orchestrator does
//     not restart a broker that is only waiting for ZooKeeper.
//   - /readyz answers 200 "ready" when the broker can serve clients, else
//     503 with the first reason it is not, one short line of plain text:
//     started (NewServer finished: logs opened, registered, coordinators
//     loaded), accepting on every listener (Serve running), not shutting
//     down (Shutdown, controlled shutdown included, has not begun),
//     registered in the coordinator (a live broker of the cluster) and
//     not cut off from it for longer than zookeeper.session.timeout.ms
//     (after which its session, so its registration, is gone), every
//     partition it leads per the metadata opened here
//     and online, and the __consumer_offsets and __transaction_state
//     partitions it leads loaded into their coordinators.
//
// Both answer GET and HEAD only; the body is never cached.

// handleProbes adds /healthz and /readyz to the metrics listener's mux.
func (s *Server) handleProbes(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		probeReply(w, r, http.StatusOK, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if reason := s.notReady(); reason != "" {
			probeReply(w, r, http.StatusServiceUnavailable, "not ready: "+reason)
			return
		}
		probeReply(w, r, http.StatusOK, "ready")
	})
}

func probeReply(w http.ResponseWriter, r *http.Request, code int, body string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method == http.MethodGet {
		fmt.Fprintln(w, body)
	}
}

// Ready reports whether the broker is ready to serve clients, as /readyz
// answers, and if not why.
func (s *Server) Ready() (bool, string) {
	r := s.notReady()
	return r == "", r
}

// notReady is why the broker is not ready, "" when it is.
func (s *Server) notReady() string {
	if !s.started.Load() {
		return "starting (opening logs, registering, loading coordinators)"
	}
	s.closeMu.Lock()
	done := s.done
	s.closeMu.Unlock()
	if done {
		return "shutting down"
	}
	if n := int(s.accepting.Load()); n < len(s.lns) {
		return fmt.Sprintf("accepting on %d of %d listeners", n, len(s.lns))
	}
	snap := s.coord.Snapshot()
	if snap.Connected {
		s.coordLostAt.Store(0)
	} else {
		// Within the session timeout the registration stands and the
		// broker serves what it leads (cluster.go): a ZooKeeper blip must
		// not take every broker out of the Services at once. Past it the
		// cluster counts the broker gone and leadership moves away.
		lost := s.coordLostAt.Load()
		if lost == 0 {
			lost = s.nowFn().UnixNano()
			s.coordLostAt.CompareAndSwap(0, lost)
		}
		if out := time.Duration(s.nowFn().UnixNano() - lost); out >= s.cfg.ZooKeeperSessionTimeout {
			return fmt.Sprintf("coordinator (ZooKeeper) unreachable for %v, longer than zookeeper.session.timeout.ms: the registration is gone", out.Round(time.Second))
		}
	}
	if !snap.Live(s.cfg.BrokerID) {
		return fmt.Sprintf("broker %d not registered in the coordinator", s.cfg.BrokerID)
	}
	var missing []string
	for _, tp := range snap.LedBy(s.cfg.BrokerID) {
		t := s.topic(tp.Topic)
		var p *partition
		if t != nil {
			p = t.local(tp.Partition)
		}
		if p == nil || s.offlineError(tp.Topic, tp.Partition) != nil {
			missing = append(missing, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%d partitions it leads not open here (%s)", len(missing), abbreviate(missing, 3))
	}
	if n := s.groupLoader.pending(); n > 0 {
		return fmt.Sprintf("loading %d %s partitions", n, s.groupLoader.topic)
	}
	if n := s.txnLoader.pending(); n > 0 {
		return fmt.Sprintf("loading %d %s partitions", n, s.txnLoader.topic)
	}
	if n := s.shareStateLoader.pending(); n > 0 {
		return fmt.Sprintf("loading %d %s partitions", n, s.shareStateLoader.topic)
	}
	return ""
}

// pending counts the partitions the loader is to load (led by this
// broker) and has not loaded yet, as sync sees them.
func (g *coordinatorLoader) pending() int {
	n := g.numPartitions()
	g.mu.Lock()
	defer g.mu.Unlock()
	pending := 0
	for p, e := range g.mu.want {
		if le, ok := g.mu.loaded[p]; (!ok || g.stale(le, e)) && p < n {
			pending++
		}
	}
	return pending
}

// abbreviate joins the first n names and counts the rest.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
