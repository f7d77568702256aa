package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLegacyClients runs old clients against one broker, behind a proxy
// that answers ApiVersions as the old Kafka release would
// (legacy_proxy_test.go) and proves the old formats were on the wire:
//   - kcat with api.version.request=false and broker.version.fallback
//     0.8.2, 0.9.0 (Produce v0 and v1, magic 0; Fetch v0-v1; ListOffsets v0),
//     0.10.0 and 0.10.2 (Produce v2, magic 1; Fetch v2-v3), producing with
//     each codec and consuming from the beginning: byte-identical values,
//     keys, offsets 0, 1, 2, ...;
//   - sarama with Version 0.8.2, 0.10.0 and 0.11.0 producing (at the
//     acknowledged offsets) and consuming;
//   - the old-format data read back by franz-go, and data franz-go wrote
//     (record batches v2 with headers) read by kcat 0.8.2 and 0.10.2 and by
//     sarama 0.8.2.
func TestLegacyClients(t *testing.T) {
	requireKcat(t)
	px := startVersionProxy(t)
	b := StartBroker(t, "advertised.listeners=PLAINTEXT://"+px.addr(), "num.partitions=1")
	px.setTarget(b.Addr)
	addr := px.addr()

	start := time.Now()
	t.Run("kcat", func(t *testing.T) { legacyKcat(t, px, addr) })
	t.Logf("kcat: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	t.Run("sarama", func(t *testing.T) { legacySarama(t, px, addr) })
	t.Logf("sarama: %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	t.Run("cross", func(t *testing.T) { legacyCross(t, px, addr) })
	t.Logf("cross: %v", time.Since(start).Round(time.Millisecond))
	b.RequireAlive(t)
}

var legacyCodecs = []string{"none", "gzip", "snappy", "lz4"}

// codecNumber is the attributes' codec number of a codec name.
func codecNumber(name string) int {
	for i, c := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		if c == name {
			return i
		}
	}
	return -1
}

// legacyRelease is what a client configured for an old Kafka release
// sends: Produce version and message magic, the highest Fetch version.
type legacyRelease struct {
	fallback        string
	produceV, magic int
	fetchMax        int
	proxyProfile    string // ApiVersions answered as this release ("": none asked)
}

var kcatReleases = []legacyRelease{
	{"0.8.2", 0, 0, 1, ""},
	{"0.9.0", 1, 0, 1, ""},
	{"0.10.0", 2, 1, 2, "0.10.0"},
	{"0.10.2", 2, 1, 3, "0.10.2"},
}

func kcatLegacyArgs(r legacyRelease) []string {
	return []string{"-X", "api.version.request=false", "-X", "broker.version.fallback=" + r.fallback}
}

// legacyLines are n kcat input lines "key:value" for one run, and the
// records they must come back as, from offset base.
func legacyLines(tag string, n int, base int64) (string, []kcatRecord) {
	var in strings.Builder
	var want []kcatRecord
	for i := range n {
		k := fmt.Sprintf("%s-k%d", tag, i)
		v := tag + "-" + string(recordValue(i, 120)) // compressible: 27 symbols
		fmt.Fprintf(&in, "%s:%s\n", k, v)
		want = append(want, kcatRecord{0, base + int64(i), k, v})
	}
	return in.String(), want
}

func legacyKcat(t *testing.T, px *versionProxy, addr string) {
	const n = 40
	for _, r := range kcatReleases {
		topic := "legacy-kcat-" + r.fallback
		var want []kcatRecord
		for _, codec := range legacyCodecs {
			px.setProfile(r.proxyProfile)
			in, recs := legacyLines(r.fallback+"-"+codec, n, int64(len(want)))
			args := append([]string{"-P", "-b", addr, "-t", topic, "-K:", "-z", codec, "-X", "linger.ms=50"}, kcatLegacyArgs(r)...)
			runCmd(t, 30*time.Second, in, "kcat", args...)
			want = append(want, recs...)
			wantWire := fmt.Sprintf("Produce v%d magic %d codec %d", r.produceV, r.magic, codecNumber(codec))
			if !px.saw(wantWire) {
				t.Errorf("kcat %s -z %s: no %q on the wire; saw %v", r.fallback, codec, wantWire, px.seen())
			}
		}
		px.setProfile(r.proxyProfile)
		args := append([]string{"-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%p %o %k %s\n`}, kcatLegacyArgs(r)...)
		got := parseKcatLines(t, runCmd(t, 30*time.Second, "", "kcat", args...))
		checkRecords(t, 0, got[0], want)
		checkFetchVersions(t, px, "kcat "+r.fallback, r.fetchMax)
		if r.produceV == 0 && !px.saw("ListOffsets v0") {
			t.Errorf("kcat %s: no ListOffsets v0 on the wire; saw %v", r.fallback, px.seen())
		}
	}
}

// checkFetchVersions fails unless every Fetch seen is of a version that
// reads the old format, at most fetchMax, and there was one.
func checkFetchVersions(t *testing.T, px *versionProxy, who string, fetchMax int) {
	t.Helper()
	fetches := 0
	for _, s := range px.seen() {
		var v int
		if _, err := fmt.Sscanf(s, "Fetch v%d", &v); err != nil {
			continue
		}
		fetches++
		if v > fetchMax || (fetchMax <= 1) != (v <= 1) {
			t.Errorf("%s: %s, want Fetch v%d or a version reading the same format", who, s, fetchMax)
		}
	}
	if fetches == 0 {
		t.Errorf("%s: no Fetch seen: %v", who, px.seen())
	}
}

// parseKcatLines parses `%p %o %k %s` lines.
func parseKcatLines(t *testing.T, out string) map[int32][]kcatRecord {
	t.Helper()
	got := map[int32][]kcatRecord{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r kcatRecord
		if _, err := fmt.Sscanf(line, "%d %d %s %s", &r.Partition, &r.Offset, &r.Key, &r.Value); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		got[r.Partition] = append(got[r.Partition], r)
	}
	return got
}

type saramaRelease struct {
	version  sarama.KafkaVersion
	produceV int
	magic    int
	fetchMax int
	codecs   []sarama.CompressionCodec
}

var saramaReleases = []saramaRelease{
	{sarama.V0_8_2_0, 0, 0, 0, []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy}},
	{sarama.V0_10_0_0, 2, 1, 2, []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4}},
	{sarama.V0_11_0_0, 3, 2, 5, []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4}},
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "strata-e2e-legacy"
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

// saramaMessage is record i of a sarama run: key, value and (for magic 1
// and up) timestamp.
func saramaMessage(tag string, i int) (key, value []byte, ts time.Time) {
	return []byte(fmt.Sprintf("%s-k%d", tag, i)), append([]byte(tag+"-"), recordValue(i, 150)...), time.UnixMilli(1_700_000_000_000 + int64(i)*1000)
}

func legacySarama(t *testing.T, px *versionProxy, addr string) {
	const n = 30
	for _, r := range saramaReleases {
		topic := "legacy-sarama-" + r.version.String()
		px.setProfile("")
		cfg := saramaConfig(r.version)
		total := 0
		for _, codec := range r.codecs {
			cfg.Producer.Compression = codec
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("sarama %s: NewSyncProducer: %v", r.version, err)
			}
			var msgs []*sarama.ProducerMessage
			for i := total; i < total+n; i++ {
				k, v, ts := saramaMessage(r.version.String(), i)
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(k), Value: sarama.ByteEncoder(v), Timestamp: ts})
			}
			err = prod.SendMessages(msgs)
			prod.Close()
			if err != nil {
				t.Fatalf("sarama %s %s: SendMessages: %v", r.version, codec, err)
			}
			for j, m := range msgs {
				if m.Offset != int64(total+j) {
					t.Fatalf("sarama %s %s: message %d acknowledged at %d", r.version, codec, total+j, m.Offset)
				}
			}
			total += n
			wantWire := fmt.Sprintf("Produce v%d magic %d codec %d", r.produceV, r.magic, int(codec))
			if !px.saw(wantWire) {
				t.Errorf("sarama %s %s: no %q on the wire; saw %v", r.version, codec, wantWire, px.seen())
			}
		}
		px.setProfile("")
		saramaConsume(t, addr, r.version, topic, total, func(i int) ([]byte, []byte, time.Time) { return saramaMessage(r.version.String(), i) }, r.magic >= 1)
		checkFetchVersions(t, px, "sarama "+r.version.String(), r.fetchMax)
	}
}

// saramaConsume reads topic's partition 0 from the start with sarama at
// version v and checks n messages against want (timestamps when checkTS).
func saramaConsume(t *testing.T, addr string, v sarama.KafkaVersion, topic string, n int, want func(i int) ([]byte, []byte, time.Time), checkTS bool) {
	t.Helper()
	cons, err := sarama.NewConsumer([]string{addr}, saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama %s: NewConsumer: %v", v, err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama %s: ConsumePartition: %v", v, err)
	}
	defer pc.Close()
	timeout := time.After(60 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			k, val, ts := want(i)
			if m.Offset != int64(i) || !bytes.Equal(m.Key, k) || !bytes.Equal(m.Value, val) {
				t.Fatalf("sarama %s %s: got offset %d key %q value %.40q, want %d %q %.40q", v, topic, m.Offset, m.Key, m.Value, i, k, val)
			}
			if checkTS && !m.Timestamp.Equal(ts) {
				t.Fatalf("sarama %s %s offset %d: timestamp %v, want %v", v, topic, i, m.Timestamp, ts)
			}
		case err := <-pc.Errors():
			t.Fatalf("sarama %s %s at %d: %v", v, topic, i, err)
		case <-timeout:
			t.Fatalf("sarama %s %s: timed out waiting for offset %d", v, topic, i)
		}
	}
}

// legacyCross reads the old-format topics with franz-go, and a topic
// franz-go writes with kcat 0.8.2 and 0.10.2 and sarama 0.8.2.
func legacyCross(t *testing.T, px *versionProxy, addr string) {
	px.setProfile("")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Old-format data, new client: kcat 0.8.2 (magic 0: no timestamps) and
	// sarama 0.10.0 (magic 1: timestamps kept).
	for _, r := range kcatReleases[:1] {
		_, want := legacyLinesAll(r.fallback)
		got := franzConsume(t, ctx, addr, "legacy-kcat-"+r.fallback, len(want))
		for i, rec := range got {
			if rec.Offset != want[i].Offset || string(rec.Key) != want[i].Key || string(rec.Value) != want[i].Value {
				t.Fatalf("franz-go reading kcat %s #%d: offset %d key %q, want %d %q", r.fallback, i, rec.Offset, rec.Key, want[i].Offset, want[i].Key)
			}
		}
	}
	v := sarama.V0_10_0_0
	got := franzConsume(t, ctx, addr, "legacy-sarama-"+v.String(), 4*30)
	for i, rec := range got {
		k, val, ts := saramaMessage(v.String(), i)
		if rec.Offset != int64(i) || !bytes.Equal(rec.Key, k) || !bytes.Equal(rec.Value, val) || !rec.Timestamp.Equal(ts) {
			t.Fatalf("franz-go reading sarama %s #%d: offset %d key %q ts %v, want %d %q %v", v, i, rec.Offset, rec.Key, rec.Timestamp, i, k, ts)
		}
	}

	// New-format data (batches with headers, lz4), old clients.
	const topic, n = "legacy-new", 50
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []kcatRecord
	for i := range n {
		k, val, ts := saramaMessage("new", i)
		rec := &kgo.Record{Topic: topic, Key: k, Value: val, Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("dropped for old readers")}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("franz-go produce %d: %v", i, err)
		}
		want = append(want, kcatRecord{0, int64(i), string(k), string(val)})
	}
	for _, r := range []legacyRelease{kcatReleases[0], kcatReleases[3]} {
		px.setProfile(r.proxyProfile)
		args := append([]string{"-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%p %o %k %s\n`}, kcatLegacyArgs(r)...)
		got := parseKcatLines(t, runCmd(t, 30*time.Second, "", "kcat", args...))
		checkRecords(t, 0, got[0], want)
		checkFetchVersions(t, px, "kcat "+r.fallback+" reading franz-go", r.fetchMax)
	}
	px.setProfile("")
	saramaConsume(t, addr, sarama.V0_8_2_0, topic, n, func(i int) ([]byte, []byte, time.Time) { return saramaMessage("new", i) }, false)
	saramaConsume(t, addr, sarama.V0_10_0_0, topic, n, func(i int) ([]byte, []byte, time.Time) { return saramaMessage("new", i) }, true)
}

// legacyLinesAll is what legacyKcat sent to one release's topic.
func legacyLinesAll(fallback string) (string, []kcatRecord) {
	var all []kcatRecord
	for _, codec := range legacyCodecs {
		_, recs := legacyLines(fallback+"-"+codec, 40, int64(len(all)))
		all = append(all, recs...)
	}
	return "", all
}

// franzConsume reads n records of topic's partition 0 from the start.
func franzConsume(t *testing.T, ctx context.Context, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go reading %s: %d of %d records: %v", topic, len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("franz-go reading %s: %v", topic, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("franz-go reading %s: %d records, want %d", topic, len(got), n)
	}
	return got
}
