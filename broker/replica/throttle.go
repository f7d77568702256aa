package replica

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file is replication throttling (KIP-73), Kafka's two
// ReplicationQuotaManagers: one quota for what this broker sends as a
// leader (leader.replication.throttled.rate), one for what it fetches as
// a follower (follower.replication.throttled.rate). Which replicas are
// throttled is a topic config (leader.replication.throttled.replicas,
// follower.replication.throttled.replicas) that the broker parses and
// hands to each Partition (SetThrottled). Kafka's rules, followed here:
//
//   - Leader (ReplicaManager.shouldLeaderThrottle): the bytes sent of
//     every throttled partition count against the rate, to any follower;
//     data is held back only for a follower that is not in the ISR, and
//     only while the rate is exceeded. A follower in the ISR is never
//     slowed.
//   - Follower (RemoteLeaderEndPoint.shouldFollowerThrottle): the bytes
//     fetched of every throttled partition count; a partition whose log
//     end is behind the leader's high watermark is held back while the
//     rate is exceeded. Here "held back" means its PROGRESS report waits:
//     the leader sends at most streamWindow messages ahead of the
//     reports, so the partition's stream stalls without being dropped.
//
// Client produce and fetch never pass through a quota. A held stream
// stays open (gRPC keepalives, the other partitions' messages); a held
// follower outside the ISR is merely slow, and one inside it lags like
// any other and leaves the ISR after replica.lag.time.max.ms, as in
// Kafka.
//
// Kafka measures a sampled rate over replication.quota.window.num (11)
// windows of one second, which lets a fresh quota pass ten seconds'
// worth of bytes in a burst. Strata holds back with a token bucket
// instead (the rate per second, at most one second's worth banked), so
// the long-run rate is the configured one from the first second; the
// rate it reports (Rate, the metrics) is measured over windows as
// Kafka's.

// Unthrottled is the rate of a quota that never holds anything back,
// Kafka's default of both rates (Long.MAX_VALUE).
const Unthrottled = math.MaxInt64

// Throttle directions, the direction label of the metrics.
const (
	DirectionLeader   = "leader"
	DirectionFollower = "follower"
)

// rateWindows and rateWindow are the measured rate's sampling: the bytes
// of the last rateWindows windows of rateWindow each.
const (
	rateWindows = 10
	rateWindow  = time.Second
)

// Throttle is one direction's replication quota: a token bucket over
// bytes, and the measured rate. Its methods are safe for concurrent use.
type Throttle struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		rate   int64 // bytes per second; Unthrottled is none
		tokens float64
		last   time.Time
		// windows are bytes recorded per rateWindow, ring-indexed by
		// the window's start (in rateWindow units since the epoch).
		windows [rateWindows]int64
		starts  [rateWindows]int64
		first   time.Time // when the first window was opened
	}
	bytes atomic.Int64 // recorded in all
	holds atomic.Int64
}

// NewThrottle returns a quota of rate bytes per second (Unthrottled or
// negative: none; 0 holds back everything after the first message, as
// Kafka's quota of 0) over the clock now.
func NewThrottle(rate int64, now func() time.Time) *Throttle {
	t := &Throttle{now: now}
	t.SetRate(rate)
	return t
}

// limited says the rate holds anything back.
func limited(rate int64) bool { return rate >= 0 && rate != Unthrottled }

// SetRate changes the rate; the bucket starts full (one second's worth).
func (t *Throttle) SetRate(rate int64) {
	if rate < 0 {
		rate = Unthrottled
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.rate == rate {
		return
	}
	t.mu.rate = rate
	t.mu.tokens = float64(rate)
	t.mu.last = t.now()
}

// Limit is the configured rate, Unthrottled if none.
func (t *Throttle) Limit() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.rate
}

// refillLocked adds the tokens earned since the last call. Caller holds
// t.mu.
func (t *Throttle) refillLocked(now time.Time) {
	if !limited(t.mu.rate) {
		return
	}
	if d := now.Sub(t.mu.last); d > 0 {
		t.mu.tokens = min(t.mu.tokens+d.Seconds()*float64(t.mu.rate), float64(t.mu.rate))
		t.mu.last = now
	}
}

// Record counts n bytes of a throttled replica against the rate (even if
// it is exceeded: the bytes were already read or received, as Kafka's
// record).
func (t *Throttle) Record(n int) {
	if n <= 0 {
		return
	}
	now := t.now()
	t.bytes.Add(int64(n))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refillLocked(now)
	if limited(t.mu.rate) {
		t.mu.tokens -= float64(n)
	}
	w := now.UnixNano() / int64(rateWindow)
	i := int(w % rateWindows)
	if t.mu.starts[i] != w {
		t.mu.starts[i], t.mu.windows[i] = w, 0
	}
	t.mu.windows[i] += int64(n)
	if t.mu.first.IsZero() {
		t.mu.first = now
	}
}

// Exceeded says whether a throttled replica must be held back now, and
// if so for how long at least (until the bucket is out of debt).
func (t *Throttle) Exceeded() (bool, time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !limited(t.mu.rate) {
		return false, 0
	}
	t.refillLocked(now)
	if t.mu.tokens >= 0 {
		return false, 0
	}
	if t.mu.rate == 0 {
		return true, time.Second
	}
	wait := time.Duration(min(-t.mu.tokens/float64(t.mu.rate), 3600) * float64(time.Second))
	return true, max(wait, time.Millisecond)
}

// noteHold counts a replica held back, for the metrics.
func (t *Throttle) noteHold() { t.holds.Add(1) }

// Bytes is the total recorded.
func (t *Throttle) Bytes() int64 { return t.bytes.Load() }

// Rate is the measured rate in bytes per second: the bytes recorded in
// the last rateWindows windows (the current one included) over the time
// they span, or over the time since the first byte if that is shorter
// (at least one window, so a first message does not read as a huge
// rate).
func (t *Throttle) Rate() float64 {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.first.IsZero() {
		return 0
	}
	cur := now.UnixNano() / int64(rateWindow)
	var sum int64
	for i := range rateWindows {
		if w := t.mu.starts[i]; w > cur-rateWindows && w <= cur {
			sum += t.mu.windows[i]
		}
	}
	span := time.Duration(rateWindows-1)*rateWindow + time.Duration(now.UnixNano()%int64(rateWindow))
	span = max(min(span, now.Sub(t.mu.first)), rateWindow)
	return float64(sum) / span.Seconds()
}

// throttleMetrics registers the metrics of the two quotas.
func throttleMetrics(reg prometheus.Registerer, leader, follower *Throttle) {
	for _, q := range []struct {
		dir string
		t   *Throttle
	}{{DirectionLeader, leader}, {DirectionFollower, follower}} {
		t := q.t
		labels := prometheus.Labels{"direction": q.dir}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "strata_replication_throttled_bytes_total",
				Help:        "Bytes of throttled replicas (leader/follower.replication.throttled.replicas) replicated, which count against the direction's replication.throttled.rate.",
				ConstLabels: labels,
			}, func() float64 { return float64(t.Bytes()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "strata_replication_throttled_rate_bytes",
				Help:        "Measured rate of throttled replication in bytes per second, over the last 10 s.",
				ConstLabels: labels,
			}, t.Rate),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "strata_replication_throttled_limit_bytes",
				Help:        "The direction's replication.throttled.rate in bytes per second (9223372036854775807: unthrottled).",
				ConstLabels: labels,
			}, func() float64 { return float64(t.Limit()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "strata_replication_throttled_holds_total",
				Help:        "Times a throttled replica's data was held back because the direction's rate was exceeded.",
				ConstLabels: labels,
			}, func() float64 { return float64(t.holds.Load()) }),
		)
	}
}
