package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/stratastream/strata/tiering/s3fault"
)

// Object-store faults under a real broker: a `strata broker` process
// whose S3 endpoint is a fault proxy (tiering/s3fault) in front of a real
// MinIO. An idempotent acks=all producer writes throughout while the
// proxy answers uploads with SlowDown, 500s, resets, lost answers and a
// slow link; then replays from offset 0 run while GETs are reset, cut
// short and refused, and while the store is down for STRATA_S3_OUTAGE
// (20 s by default; make chaos runs 10 minutes). Throughout, the local
// log never starts above what the bucket's manifest holds; at the end the
// history checker holds every acknowledgement and read against the log
// read back in full, and that log is byte for byte what was acknowledged.

// s3OutageEnv sets how long the store is down during a replay.
const s3OutageEnv = "STRATA_S3_OUTAGE"

func s3Outage(t *testing.T) time.Duration {
	v := os.Getenv(s3OutageEnv)
	if v == "" {
		return 20 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", s3OutageEnv, v)
	}
	return d
}

// s3fTP is the partition under test.
var s3fTP = history.TP{Topic: tierTopic, Partition: 0}

func s3fValue(i int) string { return fmt.Sprintf("s3f-%07d-%s", i, strings.Repeat("v", 90)) }

// s3fIndex is the sequence number s3fValue put in v.
func s3fIndex(v string) (int, bool) {
	var i int
	_, err := fmt.Sscanf(v, "s3f-%07d-", &i)
	return i, err == nil && v == s3fValue(i)
}

// s3fProducer produces batches of 20 records to partition 0 until stopped,
// recording each produce and its outcome in the history.
type s3fProducer struct {
	cl   *kgo.Client
	hist *history.History
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	acked    int
	ackedRec map[int64]string // offset -> value of every acknowledged record
	errs     map[string]int
}

func startS3fProducer(t *testing.T, addr string, hist *history.History) *s3fProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	p := &s3fProducer{cl: cl, hist: hist, stop: make(chan struct{}), done: make(chan struct{}), ackedRec: map[int64]string{}, errs: map[string]int{}}
	go p.run()
	t.Cleanup(p.halt)
	return p
}

func (p *s3fProducer) run() {
	defer close(p.done)
	for i := 0; ; i += 20 {
		select {
		case <-p.stop:
			return
		default:
		}
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			v := s3fValue(j)
			p.hist.Sent("producer", s3fTP, v)
			recs = append(recs, &kgo.Record{Topic: tierTopic, Partition: 0, Key: []byte(tierKey(j)), Value: []byte(v)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := p.cl.ProduceSync(ctx, recs...)
		cancel()
		p.mu.Lock()
		for _, r := range res {
			v := string(r.Record.Value)
			if r.Err != nil {
				p.hist.Answered(s3fTP, v, history.Unknown, -1, r.Err.Error())
				p.errs[r.Err.Error()]++
				continue
			}
			p.hist.Answered(s3fTP, v, history.Acked, r.Record.Offset, "")
			p.acked++
			p.ackedRec[r.Record.Offset] = v
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// halt stops the producer and waits for its last produce to be answered.
func (p *s3fProducer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.cl.Close()
}

func (p *s3fProducer) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// checkLocalBehindManifest fails if the broker's local log starts above
// the end of the manifest in the bucket: local data deleted before it was
// committed remotely. The local log is listed first: the manifest only
// grows, so a later read of it covers every deletion already done.
func checkLocalBehindManifest(t *testing.T, b *Broker, srv *miniotest.Server, bucket, topicID string) {
	t.Helper()
	segs := localSegments(t, b)
	if len(segs) == 0 || segs[0] == 0 {
		return
	}
	m := readManifest(t, srv.Client(), bucket, topicID)
	if m == nil || segs[0] > m.EndOffset() {
		end := int64(-1)
		if m != nil {
			end = m.EndOffset()
		}
		t.Fatalf("the local log starts at %d, above the committed remote end %d", segs[0], end)
	}
}

// scrapeSum sums the samples of metric whose labels contain every one of
// labels (`op="put"`, ...), from the broker's /metrics.
func scrapeSum(t *testing.T, addr, metric string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// s3fReplay consumes partition 0 from offset 0 with franz-go until it has
// read every offset below n, recording each read in the history, and
// fails unless the reads come in offset order without a gap or a repeat
// (a consumer that fell back to the start would repeat) and match what
// was acknowledged. Fetch errors that franz-go retries stay inside it;
// any error it hands out fails the test. tick, when set, runs between
// polls with the next offset to read.
func s3fReplay(t *testing.T, addr, reader string, n int64, hist *history.History, acked map[int64]string, deadline time.Duration, tick func(next int64)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(48<<10), kgo.FetchMaxBytes(48<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := time.Now().Add(deadline)
	next := int64(0)
	for next < n {
		if time.Now().After(end) {
			t.Fatalf("%s: read offsets [0, %d) of %d before the deadline", reader, next, n)
		}
		if tick != nil {
			tick(next)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: fetch error handed to the consumer at %d: %v", reader, next, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("%s: record at offset %d, want %d (the replay did not resume where it was)", reader, r.Offset, next)
			}
			hist.Read(reader, s3fTP, r.Offset, string(r.Value))
			if want, ok := acked[r.Offset]; ok && want != string(r.Value) {
				t.Fatalf("%s: offset %d holds %q, acknowledged %q", reader, r.Offset, r.Value, want)
			}
			if i, ok := s3fIndex(string(r.Value)); !ok || string(r.Key) != tierKey(i) {
				t.Fatalf("%s: offset %d holds key %q for value %q", reader, r.Offset, r.Key, r.Value)
			}
			next++
		})
	}
}

// s3fFinalLog reads the whole partition once the store is healthy and
// every produce has its answer.
func s3fFinalLog(t *testing.T, addr string, end int64) []history.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []history.Record
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("final log: read up to %d of %d", len(out), end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("final log: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, history.Record{Offset: r.Offset, Value: string(r.Value)}) })
	}
	return out
}

func TestTieringS3Faults(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	outage := s3Outage(t)
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	proxy, err := s3fault.Start(srv.Endpoint(), 14)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	metricsAddr := freeAddr(t)
	b := StartBroker(t,
		"remote.storage.s3.endpoint="+proxy.URL(),
		"remote.storage.s3.bucket="+bucket,
		"metrics.listener="+metricsAddr,
		"remote.log.storage.system.enable=true",
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000",
		"remote.cache.bytes=65536", // a few chunks: every replay goes to the store
		"offsets.topic.num.partitions=1",
	)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	topicID := createTieredTopic(t, admin)
	admin.Close()
	hist := history.New()
	prod := startS3fProducer(t, b.Addr, hist)
	waitFor(t, tierWait(), "the first segments uploaded", func() bool {
		m := readManifest(t, srv.Client(), bucket, topicID)
		return m != nil && len(m.Segments) >= 2
	})

	// 1. Upload faults while producing.
	puts := []s3fault.Op{s3fault.OpPutObject, s3fault.OpUploadPart, s3fault.OpCompleteUpload}
	for _, ph := range []struct {
		name  string
		dur   time.Duration
		rules []s3fault.Rule
	}{
		// Longer than the S3 client's own retries (four attempts, each
		// after at least the Retry-After), so that SlowDown reaches the
		// archiver.
		{"slowdown", 5 * time.Second, []s3fault.Rule{{Fault: s3fault.SlowDown, Ops: puts, RetryAfter: time.Second}}},
		{"errors, resets and lost answers", 2 * time.Second, []s3fault.Rule{
			{Fault: s3fault.DropResponse, Ops: puts, Key: "/manifest", Limit: 2},
			{Fault: s3fault.Reset, Ops: puts, Key: ".log", Fraction: 0.4, After: 4096},
			{Fault: s3fault.InternalError, Ops: puts, Fraction: 0.4}}},
		{"slow link", 2 * time.Second, []s3fault.Rule{{Fault: s3fault.Delay, Fraction: 0.3, Delay: 200 * time.Millisecond},
			{Fault: s3fault.Throttle, BytesPerSecond: 128 << 10}}},
	} {
		if err := proxy.Set(ph.rules...); err != nil {
			t.Fatal(err)
		}
		ackedBefore := prod.ackedCount()
		// The phase lasts at least ph.dur, until its first fault was
		// injected and 100 more records were acknowledged under it,
		// checking all the while that nothing local went unuploaded.
		phaseStart, injectedBefore := time.Now(), proxy.InjectedTotal(ph.rules[0].Fault)
		waitFor(t, ph.dur+tierWait(), "a fault injected and acknowledged produces during "+ph.name, func() bool {
			checkLocalBehindManifest(t, b, srv, bucket, topicID)
			return time.Since(phaseStart) >= ph.dur && proxy.InjectedTotal(ph.rules[0].Fault) > injectedBefore && prod.ackedCount() > ackedBefore+100
		})
		checkLocalBehindManifest(t, b, srv, bucket, topicID)
		t.Logf("upload phase %s: %d records acknowledged during it; proxy %v", ph.name, prod.ackedCount()-ackedBefore, proxy.Counts())
		proxy.Clear()
	}
	if n := scrapeSum(t, metricsAddr, "strata_tier_upload_throttled_total"); n == 0 {
		t.Error("no throttled upload step counted under SlowDown")
	}
	for _, code := range []string{`code="SlowDown"`, `code="InternalError"`, `code="reset"`} {
		if n := scrapeSum(t, metricsAddr, "strata_tier_store_errors_total", `op="put"`, code); n == 0 {
			t.Errorf("strata_tier_store_errors_total{op=\"put\",%s} is 0", code)
		}
	}
	waitFor(t, tierWait(), "uploads caught up", func() bool {
		checkLocalBehindManifest(t, b, srv, bucket, topicID)
		m := readManifest(t, srv.Client(), bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && len(segs) > 0 && segs[0] > 0 && m.EndOffset() >= segs[len(segs)-1]
	})

	// 2. A replay from 0 while GETs are reset, cut short, answered with
	// 500s and SlowDown.
	prod.mu.Lock()
	acked := make(map[int64]string, len(prod.ackedRec))
	for k, v := range prod.ackedRec {
		acked[k] = v
	}
	prod.mu.Unlock()
	target := readManifest(t, srv.Client(), bucket, topicID).EndOffset()
	gets := []s3fault.Op{s3fault.OpGetObject}
	if err := proxy.Set(
		s3fault.Rule{Fault: s3fault.Reset, Ops: gets, Fraction: 0.1, After: 3000},
		s3fault.Rule{Fault: s3fault.Truncate, Ops: gets, Fraction: 0.1, After: 5000},
		s3fault.Rule{Fault: s3fault.ShortBody, Ops: gets, Fraction: 0.1, After: 7000},
		s3fault.Rule{Fault: s3fault.InternalError, Ops: gets, Fraction: 0.05},
		s3fault.Rule{Fault: s3fault.SlowDown, Ops: gets, Fraction: 0.05},
	); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s3fReplay(t, b.Addr, "replay under GET faults", target, hist, acked, 3*time.Minute, nil)
	getFaults := proxy.Counts()
	t.Logf("replay of [0, %d) under GET faults: %v; %v", target, time.Since(start), getFaults)
	proxy.Clear()
	if n := scrapeSum(t, metricsAddr, "strata_tier_store_errors_total", `op="get"`); n == 0 {
		t.Error("no failed GET counted in strata_tier_store_errors_total")
	}

	// 3. The store down for the outage in the middle of a replay: the
	// consumer waits, then resumes where it was.
	var down, up time.Time
	var reachedAtOutage int64
	s3fReplay(t, b.Addr, "replay across the outage", target, hist, acked, outage+3*time.Minute, func(next int64) {
		if !down.IsZero() && up.IsZero() {
			checkLocalBehindManifest(t, b, srv, bucket, topicID) // the producer goes on; nothing may leave unuploaded
		}
		switch {
		case down.IsZero() && next >= target/2:
			if err := proxy.Set(s3fault.Rule{Fault: s3fault.Refuse}); err != nil {
				t.Fatal(err)
			}
			down, reachedAtOutage = time.Now(), next
		case !down.IsZero() && up.IsZero() && time.Since(down) >= outage:
			proxy.Clear()
			up = time.Now()
			if next >= target {
				t.Fatalf("the replay reached its end during the outage: the outage was not felt")
			}
			t.Logf("outage of %v: the replay stood at %d when the store went down and at %d when it came back (of %d)",
				up.Sub(down), reachedAtOutage, next, target)
		}
	})
	if up.IsZero() {
		t.Fatal("the replay ended before the store came back")
	}
	t.Logf("replay finished %v after the store came back; refused %d requests", time.Since(up), proxy.InjectedTotal(s3fault.Refuse))
	if proxy.InjectedTotal(s3fault.Refuse) == 0 {
		t.Fatal("no request was refused during the outage")
	}

	// 4. The history: every acknowledged record exactly once at its
	// offset, every read consistent with the log, which is byte for byte
	// what was acknowledged.
	prod.halt()
	// The producer went on through the outage: what it sealed then (about
	// a thousand segments in the 10-minute form) is uploaded now, so the
	// bound grows with the outage.
	waitFor(t, tierWait()+outage, "every sealed segment uploaded", func() bool {
		m := readManifest(t, srv.Client(), bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && len(segs) > 0 && m.EndOffset() >= segs[len(segs)-1]
	})
	m := readManifest(t, srv.Client(), bucket, topicID)
	checkBucketAgrees(t, srv.Client(), bucket, m)
	end := b.logEnd(t)
	final := s3fFinalLog(t, b.Addr, end)
	rep := hist.Check(map[history.TP][]history.Record{s3fTP: final})
	t.Logf("S3_FAULT_HISTORY %s", rep)
	t.Logf("producer errors: %v", prod.errs)
	if !rep.OK() || rep.Acknowledged == 0 {
		t.Fatalf("history: %s\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
	prod.mu.Lock()
	defer prod.mu.Unlock()
	for _, r := range final {
		if v, ok := prod.ackedRec[r.Offset]; ok && v != r.Value {
			t.Fatalf("offset %d: the log holds %q, acknowledged %q", r.Offset, r.Value, v)
		}
	}
	t.Logf("store errors counted by the broker: put %v, get %v", scrapeSum(t, metricsAddr, "strata_tier_store_errors_total", `op="put"`),
		scrapeSum(t, metricsAddr, "strata_tier_store_errors_total", `op="get"`))
}

// logEnd asks the broker for partition 0's end offset.
func (b *Broker) logEnd(t *testing.T) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(tierCtx(t), tierTopic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(tierTopic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset: %+v", o)
	}
	return o.Offset
}
