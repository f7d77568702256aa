package broker

import (
	"context"
	"crypto/rand"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
)

// TestQuotaRateKafka: the rate and throttle time are Kafka's (Rate over
// SampledStat, QuotaUtils.throttleTime), on a clock the test moves:
// QuotaUtilsTest's case (twice the quota over 3 samples of 1 s: 2000 ms),
// a rate within the quota (0), old samples forgotten after the window,
// and request_percentage bounded by one window.
func TestQuotaRateKafka(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	q := newClientQuotas(slog.Default(), 3, 1, func() time.Time { return now })
	q.load(nil, map[string]map[string]string{
		"fast": {quotaKeyProducer: "200"},
		"slow": {quotaKeyProducer: "50", quotaKeyRequest: "10.0"},
	}, nil)
	// 200 bytes at once: 100 B/s over the minimum window of 2 s.
	if thr := q.record(quotaProduce, "ANONYMOUS", "fast", 200); thr != 0 {
		t.Fatalf("within the quota: throttle %d", thr)
	}
	if thr := q.record(quotaProduce, "ANONYMOUS", "slow", 200); thr != 2000 {
		t.Fatalf("twice the quota: throttle %d, want Kafka's 2000", thr)
	}
	now = now.Add(10 * time.Second) // every sample is obsolete
	if thr := q.record(quotaProduce, "ANONYMOUS", "slow", 1); thr != 0 {
		t.Fatalf("after the window: throttle %d", thr)
	}
	if thr := q.record(quotaProduce, "ANONYMOUS", "nobody", 1e9); thr != 0 {
		t.Fatalf("client without a quota: throttle %d", thr)
	}
	// 5 s of handler time at 10%: bounded by one window (1000 ms).
	if thr := q.record(quotaRequest, "ANONYMOUS", "slow", 500); thr != 1000 {
		t.Fatalf("request quota: throttle %d, want the 1000 ms bound", thr)
	}
	if thr := q.record(quotaFetch, "ANONYMOUS", "slow", 1e9); thr != 0 || q.active[quotaFetch].Load() {
		t.Fatalf("no fetch quota anywhere: throttle %d active %v", thr, q.active[quotaFetch].Load())
	}
	if m, ok := q.maxInWindow(quotaProduce, "ANONYMOUS", "slow"); !ok || m != 100 {
		t.Fatalf("max in window %v %v, want 50 × 2 samples", m, ok)
	}
}

// TestQuotaPrecedence: the quota of a user and client id is the first of
// Kafka's eight levels that sets the key, counted per Kafka's tags.
func TestQuotaPrecedence(t *testing.T) {
	d := coord.DefaultEntity
	users := map[string]map[string]string{"al%20ice": {}, d: {}}
	clients := map[string]map[string]string{"app": {}, d: {}}
	uc := map[string]map[string]string{"al%20ice/app": {}, "al%20ice/" + d: {}, d + "/app": {}, d + "/" + d: {}}
	levels := []struct {
		m    map[string]map[string]string
		name string
		tags quotaTags
	}{
		{uc, "al%20ice/app", quotaTags{"al%20ice", "app"}},
		{uc, "al%20ice/" + d, quotaTags{"al%20ice", "app"}},
		{users, "al%20ice", quotaTags{"al%20ice", ""}},
		{uc, d + "/app", quotaTags{"al%20ice", "app"}},
		{uc, d + "/" + d, quotaTags{"al%20ice", "app"}},
		{users, d, quotaTags{"al%20ice", ""}},
		{clients, "app", quotaTags{"", "app"}},
		{clients, d, quotaTags{"", "app"}},
	}
	for i, l := range levels {
		l.m[l.name] = map[string]string{quotaKeyProducer: strings.Repeat("1", i+1)}
	}
	q := newClientQuotas(slog.Default(), 11, 1, time.Now)
	for i, l := range levels {
		q.load(users, clients, uc)
		got := q.levels.Load().resolve(quotaProduce, "al ice", "app")
		want := float64(0)
		for range i + 1 {
			want = want*10 + 1
		}
		if !got.ok || got.bound != want || got.tags != l.tags {
			t.Fatalf("level %d (%s): got %+v, want bound %v tags %+v", i+1, l.name, got, want, l.tags)
		}
		delete(l.m, l.name) // the next level decides
		// A level with another key only does not count.
		l.m[l.name] = map[string]string{quotaKeyConsumer: "5"}
	}
	q.load(users, clients, uc)
	if got := q.levels.Load().resolve(quotaProduce, "al ice", "app"); got.ok {
		t.Fatalf("no producer quota left: %+v", got)
	}
	if got := q.levels.Load().resolve(quotaFetch, "bob", "web"); !got.ok || got.bound != 5 || got.tags != (quotaTags{"bob", "web"}) {
		t.Fatalf("bob/web takes <default>/<default>'s consumer quota: %+v", got)
	}
}

func strp(s string) *string { return &s }

// TestClientQuotasAPI: AlterClientQuotas and DescribeClientQuotas with
// kadm against a broker: every entity kind, Kafka's validation and
// messages, validateOnly, match types and strict, a user's SCRAM
// credential kept beside its quota.
func TestClientQuotasAPI(t *testing.T) {
	s := startServer(t, nil)
	kcl := newClient(t, s)
	adm := kadm.NewClient(kcl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.coord.AlterScramCredentials(ctx, "alice", coord.ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": "salt=AA,stored_key=BB,server_key=CC,iterations=4096"}}); err != nil {
		t.Fatal(err)
	}
	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	set := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }
	alter := func(validate bool, entity kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) (string, error) {
		t.Helper()
		f := adm.AlterClientQuotas
		if validate {
			f = adm.ValidateAlterClientQuotas
		}
		res, err := f(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			t.Fatalf("%d results", len(res))
		}
		return res[0].ErrMessage, res[0].Err
	}
	ok := func(entity kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) {
		t.Helper()
		if msg, err := alter(false, entity, ops...); err != nil {
			t.Fatalf("alter %v: %v %s", entity, err, msg)
		}
	}
	ok(kadm.ClientQuotaEntity{user(strp("alice"))}, set(quotaKeyProducer, 1048576), set(quotaKeyRequest, 50))
	ok(kadm.ClientQuotaEntity{client(strp("app"))}, set(quotaKeyConsumer, 2048))
	ok(kadm.ClientQuotaEntity{client(nil)}, set(quotaKeyProducer, 4096))
	ok(kadm.ClientQuotaEntity{user(strp("alice")), client(strp("app"))}, set(quotaKeyProducer, 512))
	ok(kadm.ClientQuotaEntity{user(nil), client(nil)}, set(quotaKeyConsumer, 8192))
	ok(kadm.ClientQuotaEntity{user(nil)}, set(quotaKeyRequest, 12.5))

	stored := s.coord.EntityConfigs(coord.EntityUsers)["alice"]
	if stored[quotaKeyProducer] != "1048576" || stored[quotaKeyRequest] != "50.0" || stored["SCRAM-SHA-256"] == "" {
		t.Fatalf("alice's znode config: %v", stored)
	}
	if got := s.coord.EntityConfigs(coord.EntityUserClients); got["alice/app"][quotaKeyProducer] != "512" || got["<default>/<default>"][quotaKeyConsumer] != "8192" {
		t.Fatalf("user-client entities: %v", got)
	}

	for _, tc := range []struct {
		entity kadm.ClientQuotaEntity
		op     kadm.AlterClientQuotaOp
		msg    string
	}{
		{kadm.ClientQuotaEntity{user(strp("bob"))}, set("nosuch", 1), "Invalid configuration key nosuch"},
		{kadm.ClientQuotaEntity{user(strp("bob"))}, set(quotaKeyController, 1), "Invalid configuration key controller_mutation_rate"},
		{kadm.ClientQuotaEntity{user(strp("bob"))}, set("SCRAM-SHA-256", 1), "Invalid configuration key SCRAM-SHA-256"},
		{kadm.ClientQuotaEntity{user(strp("bob"))}, set(quotaKeyProducer, 1.5), "Configuration producer_byte_rate must be a LONG value"},
		{kadm.ClientQuotaEntity{}, set(quotaKeyProducer, 1), "Invalid empty client quota entity"},
		{kadm.ClientQuotaEntity{user(strp(""))}, set(quotaKeyProducer, 1), "Empty user not supported"},
		{kadm.ClientQuotaEntity{{Type: "group", Name: strp("g")}}, set(quotaKeyProducer, 1), "Unhandled client quota entity type: group"},
		{kadm.ClientQuotaEntity{{Type: "ip", Name: strp("1.2.3.4")}, user(strp("bob"))}, set(quotaKeyProducer, 1), "Invalid quota entity combination, IP entity should not be used with user/client ID entity."},
	} {
		for _, validate := range []bool{true, false} {
			msg, err := alter(validate, tc.entity, tc.op)
			if err != kerr.InvalidRequest || msg != tc.msg {
				t.Fatalf("%v %v (validate %v): %v %q, want INVALID_REQUEST %q", tc.entity, tc.op, validate, err, msg, tc.msg)
			}
		}
	}
	if msg, err := alter(true, kadm.ClientQuotaEntity{user(strp("bob"))}, set(quotaKeyProducer, 100)); err != nil {
		t.Fatalf("validate only: %v %s", err, msg)
	}
	if _, ok := s.coord.EntityConfigs(coord.EntityUsers)["bob"]; ok {
		t.Fatal("validate only wrote bob")
	}

	describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
		t.Helper()
		res, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range res {
			var parts []string
			for _, c := range e.Entity {
				parts = append(parts, c.String())
			}
			for _, v := range e.Values {
				parts = append(parts, v.String())
			}
			out = append(out, strings.Join(parts, " "))
		}
		slices.Sort(out)
		return out
	}
	exact := func(typ string, n *string) kadm.DescribeClientQuotaComponent {
		if n == nil {
			return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1}
		}
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 0, MatchName: n}
	}
	anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2}
	}
	for _, tc := range []struct {
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{false, nil, []string{
			"client-id=<default> producer_byte_rate=4096.000000",
			"client-id=app consumer_byte_rate=2048.000000",
			"user=<default> client-id=<default> consumer_byte_rate=8192.000000",
			"user=<default> request_percentage=12.500000",
			"user=alice client-id=app producer_byte_rate=512.000000",
			"user=alice producer_byte_rate=1048576.000000 request_percentage=50.000000",
		}},
		{true, nil, nil},
		{false, []kadm.DescribeClientQuotaComponent{exact("user", strp("alice"))}, []string{
			"user=alice client-id=app producer_byte_rate=512.000000",
			"user=alice producer_byte_rate=1048576.000000 request_percentage=50.000000",
		}},
		{true, []kadm.DescribeClientQuotaComponent{exact("user", strp("alice"))}, []string{
			"user=alice producer_byte_rate=1048576.000000 request_percentage=50.000000",
		}},
		{true, []kadm.DescribeClientQuotaComponent{exact("user", nil)}, []string{"user=<default> request_percentage=12.500000"}},
		{true, []kadm.DescribeClientQuotaComponent{anyOf("client-id")}, []string{
			"client-id=<default> producer_byte_rate=4096.000000",
			"client-id=app consumer_byte_rate=2048.000000",
		}},
		{true, []kadm.DescribeClientQuotaComponent{anyOf("user"), exact("client-id", strp("app"))}, []string{
			"user=alice client-id=app producer_byte_rate=512.000000",
		}},
		{false, []kadm.DescribeClientQuotaComponent{exact("client-id", nil)}, []string{
			"client-id=<default> producer_byte_rate=4096.000000",
			"user=<default> client-id=<default> consumer_byte_rate=8192.000000",
		}},
		{true, []kadm.DescribeClientQuotaComponent{exact("user", strp("nobody"))}, nil},
	} {
		if got := describe(tc.strict, tc.comps...); !slices.Equal(got, tc.want) {
			t.Errorf("describe strict=%v %v:\n got %q\nwant %q", tc.strict, tc.comps, got, tc.want)
		}
	}
	// Kafka's errors on the whole response.
	for _, tc := range []struct {
		comps []kadm.DescribeClientQuotaComponent
		err   error
	}{
		{[]kadm.DescribeClientQuotaComponent{anyOf("user"), anyOf("user")}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{anyOf("")}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{anyOf("group")}, kerr.UnsupportedVersion},
		{[]kadm.DescribeClientQuotaComponent{anyOf("ip"), anyOf("user")}, kerr.InvalidRequest},
	} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		for _, c := range tc.comps {
			rc := kmsg.NewDescribeClientQuotasRequestComponent()
			rc.EntityType, rc.MatchType, rc.Match = c.Type, c.MatchType, c.MatchName
			req.Components = append(req.Components, rc)
		}
		resp, err := req.RequestWith(ctx, kcl)
		if err != nil {
			t.Fatal(err)
		}
		if got := kerr.ErrorForCode(resp.ErrorCode); got != tc.err {
			t.Errorf("describe %v: %v, want %v", tc.comps, got, tc.err)
		}
	}

	// Removing alice's quotas keeps her credential; removing the last
	// key of a clients entity removes it.
	rm := func(k string) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Remove: true} }
	ok(kadm.ClientQuotaEntity{user(strp("alice"))}, rm(quotaKeyProducer), rm(quotaKeyRequest))
	ok(kadm.ClientQuotaEntity{client(strp("app"))}, rm(quotaKeyConsumer))
	if got := s.coord.EntityConfigs(coord.EntityUsers)["alice"]; len(got) != 1 || got["SCRAM-SHA-256"] == "" {
		t.Fatalf("alice after removal: %v", got)
	}
	if _, ok := s.coord.EntityConfigs(coord.EntityClients)["app"]; ok {
		t.Fatal("clients/app still kept without a key")
	}
	if _, ok := s.coord.ScramUsers()["alice"]; !ok {
		t.Fatal("alice lost her credential")
	}
}

// TestClientQuotaThrottle: a producer and a consumer over their client
// id's quotas get throttle times (franz-go's throttle hook sees them and
// backs off), the consumer still reads everything, and a client id
// without a quota is never throttled. Windows of 1 s over 2 samples keep
// the throttles short.
func TestClientQuotaThrottle(t *testing.T) {
	s := startServer(t, map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"})
	admin := newClient(t, s)
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, admin, "q", 1, nil)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("slow-p")}}, Ops: []kadm.AlterClientQuotaOp{{Key: quotaKeyProducer, Value: 2000}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("slow-c")}}, Ops: []kadm.AlterClientQuotaOp{{Key: quotaKeyConsumer, Value: 4000}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	type hook struct{ throttled, max atomic.Int64 }
	newHook := func() *hook { return &hook{} }
	throttleHook := func(h *hook) kgo.Opt {
		return kgo.WithHooks(throttleObserver(func(d time.Duration) {
			if d > 0 {
				h.throttled.Add(1)
				if ms := d.Milliseconds(); ms > h.max.Load() {
					h.max.Store(ms)
				}
			}
		}))
	}
	slowH, fastH := newHook(), newHook()
	slow := newClient(t, s, kgo.ClientID("slow-p"), throttleHook(slowH), kgo.DefaultProduceTopic("q"), kgo.ProducerLinger(0))
	fast := newClient(t, s, kgo.ClientID("fast"), throttleHook(fastH), kgo.DefaultProduceTopic("q"), kgo.ProducerLinger(0))
	val := make([]byte, 1500)
	_, _ = rand.Read(val) // not compressible
	const n = 4
	start := time.Now()
	for i := range n {
		if err := slow.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatalf("slow produce %d: %v", i, err)
		}
		if err := fast.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatalf("fast produce %d: %v", i, err)
		}
	}
	t.Logf("produced %d × 2 records of %d B in %v; slow producer throttled %d times (max %d ms)", n, len(val), time.Since(start), slowH.throttled.Load(), slowH.max.Load())
	if slowH.throttled.Load() == 0 {
		t.Fatal("producer over its quota never throttled")
	}
	if fastH.throttled.Load() != 0 {
		t.Fatalf("producer without a quota throttled %d times", fastH.throttled.Load())
	}

	consH := newHook()
	cons := newClient(t, s, kgo.ClientID("slow-c"), throttleHook(consH), kgo.ConsumeTopics("q"), kgo.FetchMaxWait(100*time.Millisecond))
	got := 0
	for got < 2*n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	t.Logf("consumer read %d records; throttled %d times (max %d ms)", got, consH.throttled.Load(), consH.max.Load())
	if got != 2*n {
		t.Fatalf("consumer read %d of %d records", got, 2*n)
	}
	if consH.throttled.Load() == 0 {
		t.Fatal("consumer over its quota never throttled")
	}
	if v := histogramCount(t, s, "strata_broker_client_quota_throttle_seconds", "produce"); v == 0 {
		t.Fatal("no produce throttle in the metrics")
	}
}

// throttleObserver is a franz-go hook that sees every throttle.
type throttleObserver func(time.Duration)

func (f throttleObserver) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) { f(d) }

// histogramCount is the sample count of a histogram with the label value.
func histogramCount(t *testing.T, s *Server, name, label string) uint64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestClientQuotaThrottleVersions: a Produce v5 (before client-side
// throttling) over its quota is answered with its throttle time (the
// broker delays the response rather than muting after it); an acks=0
// produce over the quota gets no response and the connection stays open
// (Kafka mutes it without answering): the next request's answer is the
// next frame.
func TestClientQuotaThrottleVersions(t *testing.T) {
	s := startServer(t, map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"})
	admin := newClient(t, s)
	createTopic(t, admin, "qv", 1, nil)
	res, err := kadm.NewClient(admin).AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("raw")}}, Ops: []kadm.AlterClientQuotaOp{{Key: quotaKeyProducer, Value: 100}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	batch := buildBatch(t, 0, 2)
	rc := dialRaw(t, s)
	req := produceRequest("qv", 0, batch)
	req.Version, req.Acks = 5, 1
	rc.send(1, req)
	corr, body, err := rc.readFrame()
	if err != nil || corr != 1 {
		t.Fatalf("v5 answer: corr %d %v", corr, err)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	decodeResponse(t, resp, body)
	t.Logf("v5 produce of %d bytes: throttle %d ms", len(batch), resp.ThrottleMillis)
	if resp.ThrottleMillis <= 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("v5 over the quota: throttle %d, error %d", resp.ThrottleMillis, resp.Topics[0].Partitions[0].ErrorCode)
	}
	noAck := produceRequest("qv", 0, batch)
	noAck.Version, noAck.Acks = 9, 0
	rc.send(2, noAck)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	rc.send(3, meta)
	corr, _, err = rc.readFrame()
	if err != nil || corr != 3 {
		t.Fatalf("after a throttled acks=0 produce: frame corr %d (%v), want the metadata answer 3", corr, err)
	}
	if v := histogramCount(t, s, "strata_broker_client_quota_throttle_seconds", "produce"); v < 2 {
		t.Fatalf("produce throttles counted %d, want 2", v)
	}
}
