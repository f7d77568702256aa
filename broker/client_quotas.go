package broker

import (
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
)

// Client quotas, as Kafka's ClientQuotaManager with its default quota
// callback (ZooKeeper mode): producer_byte_rate, consumer_byte_rate and
// request_percentage of a user (the authenticated principal's name,
// ANONYMOUS without authentication) and client id, stored in the
// coordinator as Kafka stores them (/config/users/<user>,
// /config/clients/<client id>, /config/users/<user>/clients/<client id>,
// with <default>; names sanitized as Kafka's Sanitizer), written by
// AlterClientQuotas (49_alter_client_quotas.go) and watched by every
// broker.
//
//   - The quota of a request is the first level that sets the key, in
//     Kafka's order: user+client id, user+default client id, user,
//     default user+client id, default user+default client id, default
//     user, client id, default client id. The rate is counted per
//     "metric tags" as Kafka: a level naming a user counts per user, a
//     level naming a client id per client id, so a default quota limits
//     each user or client id on its own.
//   - The rate is Kafka's Rate over quota.window.num samples of
//     quota.window.size.seconds: the sum of the samples over the elapsed
//     window, at least quota.window.num-1 full windows. A request that
//     takes the rate above the quota is throttled for Kafka's
//     (rate-quota)/quota × window; request_percentage's throttle is at
//     most one window (ClientRequestQuotaManager).
//   - Produce counts the request's bytes, Fetch (a consumer's) the
//     response's record bytes; a throttled fetch answers no records and
//     its bytes are taken back, as Kafka (the response's max bytes is at
//     most quota × (quota.window.num-1) × window as well).
//     request_percentage counts the handler's time, in percent of one
//     second per second (100 = one core), for every request except
//     those that wait in the group coordinator (JoinGroup, SyncGroup),
//     whose waiting is not work; Produce and Fetch count their work
//     without their waits for replication and for data.
//   - The throttle goes into the response's throttle_time_ms and the
//     connection then handles nothing for that long (KIP-219: the
//     client backs off by itself) when the response's version throttles
//     client side; an older version's response is delayed instead. An
//     acks=0 produce is throttled without a response.
//   - With no quota of a type set anywhere, nothing is measured: the
//     request path checks one atomic flag.

// quotaType is one of the client quotas.
type quotaType int

const (
	quotaProduce quotaType = iota
	quotaFetch
	quotaRequest
	numQuotaTypes
)

// Kafka's quota config keys (QuotaConfigs).
const (
	quotaKeyProducer   = "producer_byte_rate"
	quotaKeyConsumer   = "consumer_byte_rate"
	quotaKeyRequest    = "request_percentage"
	quotaKeyController = "controller_mutation_rate"
)

var quotaKeys = [numQuotaTypes]string{quotaKeyProducer, quotaKeyConsumer, quotaKeyRequest}

// quotaNames label the throttle metrics (Kafka's quota type names).
var quotaNames = [numQuotaTypes]string{"produce", "fetch", "request"}

// quotaTags are the user and client id a rate is counted for ("" where
// the quota's level does not name that part).
type quotaTags struct{ user, client string }

// quotaLimit is one resolved quota: its tags and bound.
type quotaLimit struct {
	tags  quotaTags
	bound float64
	ok    bool
}

// quotaLevels are the entities' quota values, parsed.
type quotaLevels struct {
	users, clients, userClients map[string]*[numQuotaTypes]float64
	set                         map[*[numQuotaTypes]float64]uint8 // bit per type
	mu                          sync.Mutex
	cache                       map[quotaTags]*[numQuotaTypes]quotaLimit
}

// maxQuotaCache bounds the resolutions kept per configuration.
const maxQuotaCache = 10000

// sensorIdle is how long an unused rate is kept (Kafka's
// InactiveSensorExpirationTimeSeconds).
const sensorIdle = time.Hour

// clientQuotas holds the quotas in force and the measured rates.
type clientQuotas struct {
	log     *slog.Logger
	samples int
	window  time.Duration
	nowFn   func() time.Time
	// active says a quota of the type is set for some entity.
	active [numQuotaTypes]atomic.Bool
	levels atomic.Pointer[quotaLevels]
	mu     sync.Mutex
	rates  [numQuotaTypes]map[quotaTags]*quotaRate
	purged time.Time
	// throttle observes each throttle applied, by quota type.
	throttle [numQuotaTypes]prometheus.Observer
}

func newClientQuotas(log *slog.Logger, samples int32, windowSeconds int32, now func() time.Time) *clientQuotas {
	q := &clientQuotas{log: log, samples: int(samples), window: time.Duration(windowSeconds) * time.Second, nowFn: now}
	for i := range q.rates {
		q.rates[i] = map[quotaTags]*quotaRate{}
	}
	q.levels.Store(&quotaLevels{})
	return q
}

// load replaces the quotas by those of the entity configs (a stored value
// that does not parse is logged and left out).
func (q *clientQuotas) load(users, clients, userClients map[string]map[string]string) {
	lv := &quotaLevels{set: map[*[numQuotaTypes]float64]uint8{}, cache: map[quotaTags]*[numQuotaTypes]quotaLimit{}}
	var any [numQuotaTypes]bool
	parse := func(typ string, ents map[string]map[string]string) map[string]*[numQuotaTypes]float64 {
		out := map[string]*[numQuotaTypes]float64{}
		for name, cfg := range ents {
			var vals [numQuotaTypes]float64
			var bits uint8
			for t, k := range quotaKeys {
				v, ok := cfg[k]
				if !ok {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || math.IsNaN(f) {
					q.log.Warn("stored client quota ignored: not a number", "entity", typ+"/"+name, "config", k, "value", v)
					continue
				}
				vals[t], bits = f, bits|1<<t
				any[t] = true
			}
			if bits != 0 {
				out[name] = &vals
				lv.set[&vals] = bits
			}
		}
		return out
	}
	lv.users = parse(coord.EntityUsers, users)
	lv.clients = parse(coord.EntityClients, clients)
	lv.userClients = parse(coord.EntityUserClients, userClients)
	q.levels.Store(lv)
	for t := range any {
		q.active[t].Store(any[t])
	}
}

// resolve is the quota of type t for a user and client id (Kafka's
// DefaultQuotaCallback: the first level, strongest first, that sets it).
func (lv *quotaLevels) resolve(t quotaType, user, client string) quotaLimit {
	key := quotaTags{user, client}
	lv.mu.Lock()
	r, ok := lv.cache[key]
	lv.mu.Unlock()
	if ok {
		return r[t]
	}
	var out [numQuotaTypes]quotaLimit
	su, sc := coord.SanitizeUser(user), coord.SanitizeUser(client)
	d := coord.DefaultEntity
	type level struct {
		m          map[string]*[numQuotaTypes]float64
		name       string
		tagU, tagC bool
	}
	levels := [...]level{
		{lv.userClients, coord.UserClientEntity(su, sc), true, true},
		{lv.userClients, coord.UserClientEntity(su, d), true, true},
		{lv.users, su, true, false},
		{lv.userClients, coord.UserClientEntity(d, sc), true, true},
		{lv.userClients, coord.UserClientEntity(d, d), true, true},
		{lv.users, d, true, false},
		{lv.clients, sc, false, true},
		{lv.clients, d, false, true},
	}
	for ti := range out {
		for _, l := range levels {
			v := l.m[l.name]
			if v == nil || lv.set[v]&(1<<ti) == 0 {
				continue
			}
			var tags quotaTags
			if l.tagU {
				tags.user = su
			}
			if l.tagC {
				tags.client = client
			}
			out[ti] = quotaLimit{tags: tags, bound: v[ti], ok: true}
			break
		}
	}
	lv.mu.Lock()
	if len(lv.cache) >= maxQuotaCache {
		clear(lv.cache)
	}
	lv.cache[key] = &out
	lv.mu.Unlock()
	return out[t]
}

// quotaRate is Kafka's Rate over a SampledStat: samples+1 slots of a
// window each.
type quotaRate struct {
	slots []rateSample
	cur   int
	last  time.Time // last record, for expiry
}

type rateSample struct {
	start, lastEvent int64 // ms
	value            float64
}

func (r *quotaRate) current(now int64) *rateSample {
	if len(r.slots) == 0 {
		r.slots = append(r.slots, rateSample{start: now, lastEvent: now})
	}
	return &r.slots[r.cur]
}

// record adds value at now (ms) (SampledStat.record).
func (r *quotaRate) record(value float64, now int64, samples int, window int64) {
	s := r.current(now)
	if now-s.start >= window {
		r.cur = (r.cur + 1) % (samples + 1)
		if r.cur >= len(r.slots) {
			r.slots = append(r.slots, rateSample{start: now, lastEvent: now})
		} else {
			r.slots[r.cur] = rateSample{start: now, lastEvent: now}
		}
		s = &r.slots[r.cur]
	}
	s.value += value
	s.lastEvent = now
}

// purge resets the samples without an event in the monitored window.
func (r *quotaRate) purge(now int64, samples int, window int64) {
	for i := range r.slots {
		if now-r.slots[i].lastEvent >= int64(samples)*window {
			r.slots[i] = rateSample{start: now, lastEvent: now}
		}
	}
}

// windowSize is Rate.windowSize in ms.
func (r *quotaRate) windowSize(now int64, samples int, window int64) int64 {
	r.purge(now, samples, window)
	oldest := r.current(now).start
	for _, s := range r.slots {
		oldest = min(oldest, s.start)
	}
	elapsed := now - oldest
	if full := elapsed / window; full < int64(samples-1) {
		elapsed += (int64(samples-1) - full) * window
	}
	return max(elapsed, 1)
}

// measure is the rate per second at now, and the window it is over.
func (r *quotaRate) measure(now int64, samples int, window int64) (rate float64, windowMs int64) {
	r.purge(now, samples, window)
	var sum float64
	for _, s := range r.slots {
		sum += s.value
	}
	w := r.windowSize(now, samples, window)
	return sum / (float64(w) / 1000), w
}

// record counts value for a user and client id on quota t and returns
// the throttle time in ms (0 when within the quota or without one).
func (q *clientQuotas) record(t quotaType, user, client string, value float64) int32 {
	if !q.active[t].Load() {
		return 0
	}
	lim := q.levels.Load().resolve(t, user, client)
	if !lim.ok {
		return 0
	}
	now := q.nowFn()
	ms, window := now.UnixMilli(), q.window.Milliseconds()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.purgeIdleLocked(now)
	r := q.rates[t][lim.tags]
	if r == nil {
		r = &quotaRate{}
		q.rates[t][lim.tags] = r
	}
	r.last = now
	r.record(value, ms, q.samples, window)
	rate, w := r.measure(ms, q.samples, window)
	if rate <= lim.bound {
		return 0
	}
	// QuotaUtils.throttleTime: (O - T) / T × W.
	thr := (rate - lim.bound) / lim.bound * float64(w)
	if t == quotaRequest {
		thr = min(thr, float64(window)) // ClientRequestQuotaManager's bound
	}
	if math.IsNaN(thr) || thr > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(math.Round(thr))
}

// unrecord takes back a value recorded (a throttled fetch sends no
// records).
func (q *clientQuotas) unrecord(t quotaType, user, client string, value float64) {
	lim := q.levels.Load().resolve(t, user, client)
	if !lim.ok {
		return
	}
	now := q.nowFn()
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.rates[t][lim.tags]; r != nil {
		r.record(-value, now.UnixMilli(), q.samples, q.window.Milliseconds())
	}
}

// maxInWindow is the most of quota t a user and client id may use in one
// quota window (ClientQuotaManager.getMaxValueInQuotaWindow); ok false
// without a quota.
func (q *clientQuotas) maxInWindow(t quotaType, user, client string) (float64, bool) {
	if !q.active[t].Load() {
		return 0, false
	}
	lim := q.levels.Load().resolve(t, user, client)
	if !lim.ok {
		return 0, false
	}
	return lim.bound * float64(q.samples-1) * q.window.Seconds(), true
}

func (q *clientQuotas) purgeIdleLocked(now time.Time) {
	if now.Sub(q.purged) < time.Minute {
		return
	}
	q.purged = now
	for t := range q.rates {
		for k, r := range q.rates[t] {
			if now.Sub(r.last) > sensorIdle {
				delete(q.rates[t], k)
			}
		}
	}
}

// quotaUser is the user of a request's quotas: the principal's name.
func (r *request) quotaUser() string {
	p := anonymous
	if r.conn != nil {
		p = r.conn.principal()
	}
	if _, name, ok := strings.Cut(p, ":"); ok {
		return name
	}
	return p
}

func (r *request) quotaClient() string {
	if r.clientID == nil {
		return ""
	}
	return *r.clientID
}

// recordQuota counts value of quota t for r's client and returns the
// throttle time in ms.
func (s *Server) recordQuota(t quotaType, r *request, value float64) int32 {
	q := s.clientQuotas
	if q == nil || !q.active[t].Load() {
		return 0
	}
	return q.record(t, r.quotaUser(), r.quotaClient(), value)
}

// requestQuota counts busy handler time of r on request_percentage and
// returns the throttle time in ms.
func (s *Server) requestQuota(r *request, busy time.Duration) int32 {
	q := s.clientQuotas
	if q == nil || !q.active[quotaRequest].Load() {
		return 0
	}
	// ClientRequestQuotaManager.nanosToPercentage.
	return q.record(quotaRequest, r.quotaUser(), r.quotaClient(), float64(busy.Nanoseconds())*100/1e9)
}

// requestQuotaExempt are the requests whose handling is mostly waiting
// in the group coordinator, not work.
func requestQuotaExempt(key int16) bool { return key == 11 || key == 14 }

// loadClientQuotas reads the quotas from the coordinator's cache.
func (s *Server) loadClientQuotas() {
	if s.clientQuotas == nil {
		return
	}
	s.clientQuotas.load(s.coord.EntityConfigs(coord.EntityUsers), s.coord.EntityConfigs(coord.EntityClients), s.coord.EntityConfigs(coord.EntityUserClients))
}

// throttleWait waits d for a throttled connection, or until it closes.
func (c *conn) throttleWait(ms int32) {
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// applyThrottle is what conn.process does with a throttled reply:
// before reports whether the wait comes before the response (a version
// without client-side throttling) rather than after it (KIP-219: the
// connection is muted after the response).
func (rep *reply) throttleBefore() bool {
	switch {
	case rep.none:
		return false // acks=0: muted without a response
	case rep.raw != nil:
		return !rep.rawClientThrottle
	case rep.msg != nil:
		if tr, ok := rep.msg.(kmsg.ThrottleResponse); ok {
			_, after := tr.Throttle()
			return !after
		}
	}
	return true
}

// addRequestThrottle counts r's handling on request_percentage (but for
// Produce and Fetch, which count their own) and puts the throttle into
// the reply and its response, Kafka's larger of the two.
func (s *Server) addRequestThrottle(r *request, rep *reply, busy time.Duration) {
	if r.key == 0 || r.key == 1 || requestQuotaExempt(r.key) || r.unsupported {
		return
	}
	thr := s.requestQuota(r, busy)
	if thr <= rep.throttleMs {
		return
	}
	rep.throttleMs, rep.throttleType = thr, quotaRequest
	if st, ok := rep.msg.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(thr)
	}
}

// maxThrottle is Kafka's choice between a bandwidth and a request
// throttle: the larger, with its type.
func maxThrottle(bw int32, bwType quotaType, req int32) (int32, quotaType) {
	if req > bw {
		return req, quotaRequest
	}
	return bw, bwType
}

// produceThrottle counts a produce request on the produce and request
// quotas and returns the larger throttle.
func (s *Server) produceThrottle(r *request) (int32, quotaType) {
	q := s.clientQuotas
	if q == nil || (!q.active[quotaProduce].Load() && !q.active[quotaRequest].Load()) {
		return 0, quotaProduce
	}
	bw := s.recordQuota(quotaProduce, r, float64(r.size))
	return maxThrottle(bw, quotaProduce, s.requestQuota(r, time.Since(r.start)))
}

// capFetchToQuota bounds a consumer fetch's bytes to what its quota
// allows in one window (Kafka's maxQuotaWindowBytes).
func (s *Server) capFetchToQuota(r *request, req *kmsg.FetchRequest) {
	q := s.clientQuotas
	if q == nil || !q.active[quotaFetch].Load() {
		return
	}
	if m, ok := q.maxInWindow(quotaFetch, r.quotaUser(), r.quotaClient()); ok && m < float64(req.MaxBytes) {
		req.MaxBytes = int32(max(m, 0))
	}
}

// fetchQuotaReply is a consumer fetch's reply with its quotas: the
// response's record bytes on the fetch quota and its handling (without
// waited) on the request quota; when throttled, the response carries no
// records (their bytes are taken back) and the throttle time.
func (s *Server) fetchQuotaReply(r *request, res *fetchResult, waited time.Duration) reply {
	q := s.clientQuotas
	if q == nil || (!q.active[quotaFetch].Load() && !q.active[quotaRequest].Load()) {
		return s.fetchReply(res)
	}
	var bytes int64
	for i := range res.topics {
		for j := range res.topics[i].parts {
			bytes += res.topics[i].parts[j].size
		}
	}
	bw := s.recordQuota(quotaFetch, r, float64(bytes))
	thr, typ := maxThrottle(bw, quotaFetch, s.requestQuota(r, time.Since(r.start)-waited))
	if thr > 0 {
		if bw > 0 || q.active[quotaFetch].Load() {
			q.unrecord(quotaFetch, r.quotaUser(), r.quotaClient(), float64(bytes))
		}
		res.releaseAll()
		res = &fetchResult{version: res.version, errorCode: res.errorCode, sessionID: res.sessionID, throttleMs: thr}
	}
	rep := s.fetchReply(res)
	rep.throttleMs, rep.throttleType, rep.rawClientThrottle = thr, typ, res.version >= 8
	return rep
}
