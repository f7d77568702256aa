package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
)

// wireReport is the part of `strata tier status --format json` these
// tests read.
type wireReport struct {
	Mode       string            `json:"mode"`
	Partitions []wireRow         `json:"partitions"`
	Errors     []json.RawMessage `json:"errors"`
	Cache      *struct {
		Misses int64 `json:"misses"`
	} `json:"cache"`
}

// wireRow holds the figures both modes know, compared as they are.
type wireRow struct {
	Topic           string     `json:"topic"`
	Partition       int32      `json:"partition"`
	LocalLogStart   *int64     `json:"local_log_start_offset"`
	RemoteLogStart  *int64     `json:"remote_log_start_offset"`
	RemoteLogEnd    *int64     `json:"remote_log_end_offset"`
	LogEnd          *int64     `json:"log_end_offset"`
	LocalBytes      *int64     `json:"local_bytes"`
	RemoteBytes     *int64     `json:"remote_bytes"`
	LocalSegments   *int       `json:"local_segments"`
	RemoteSegments  *int       `json:"remote_segments"`
	PendingSegments *int       `json:"pending_segments"`
	PendingBytes    *int64     `json:"pending_bytes"`
	LastUpload      *time.Time `json:"last_upload"`
	LeaderEpoch     *int32     `json:"manifest_leader_epoch"`
}

func (r wireRow) String() string {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return string(b)
}

// tierStatusJSON runs `strata tier status --format json args...` and
// returns its report and exit status.
func tierStatusJSON(t *testing.T, args ...string) (wireReport, error) {
	t.Helper()
	out, errOut, err := tryCmd(60*time.Second, "", strataBin, append([]string{"tier", "status", "--format", "json"}, args...)...)
	var rep wireReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("strata tier status %v: %v (exit: %v)\nstdout:\n%s\nstderr:\n%s", args, jerr, err, out, errOut)
	}
	return rep, err
}

const wireTopic = "tier-wire"

// TestTierStatusWire: `strata tier status --bootstrap-server` against a
// real broker tiering to MinIO shows remote segments, and once uploads
// settle (nothing pending, uploaded segments deleted locally) the same figures as the offline mode reading the bucket and the
// broker's data directory; an unknown topic and an unknown partition are
// errors; the API is not in ApiVersions.
func TestTierStatusWire(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	s3 := []string{"remote.storage.s3.endpoint=" + srv.Endpoint(), "remote.storage.s3.bucket=" + bucket}
	b := StartBroker(t, append(s3, "log.retention.check.interval.ms=200", "strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000", "offsets.topic.num.partitions=1")...)
	cl := wireClient(t, b.Addr)
	createWireTopic(t, cl, 2, 1)
	produceWire(t, cl, []int32{0, 1}, 600)

	wire := []string{"--bootstrap-server", b.Addr}
	offline := []string{"--override", "log.dirs=" + b.Dir}
	for _, kv := range s3 {
		offline = append(offline, "--override", kv)
	}
	var w, o wireReport
	settled := func() string {
		w, _ = tierStatusJSON(t, append([]string{wireTopic}, wire...)...)
		o, _ = tierStatusJSON(t, append([]string{wireTopic}, offline...)...)
		if len(w.Partitions) != 2 {
			return fmt.Sprintf("cluster mode shows %d partitions", len(w.Partitions))
		}
		for i, r := range w.Partitions {
			if r.RemoteSegments == nil || *r.RemoteSegments == 0 || r.PendingSegments == nil || *r.PendingSegments != 0 ||
				r.LocalLogStart == nil || *r.LocalLogStart == 0 {
				return "partition " + r.String() + " not tiered and settled"
			}
			if i >= len(o.Partitions) || !reflect.DeepEqual(r, o.Partitions[i]) {
				return fmt.Sprintf("cluster %s, offline %v", r, o.Partitions)
			}
		}
		return ""
	}
	start := time.Now()
	var last string
	if !poll.For(2*time.Minute, func() bool { last = settled(); return last == "" }) {
		t.Fatalf("the modes did not agree on settled uploads within 2 minutes: %s", last)
	}
	t.Logf("modes agree after %v: %s", time.Since(start).Round(time.Millisecond), w.Partitions[0])
	if w.Mode != "cluster" || o.Mode != "offline" || len(w.Errors) != 0 {
		t.Fatalf("modes %q and %q, cluster errors %s", w.Mode, o.Mode, w.Errors)
	}

	// Every tiered partition without a topic; the text form's columns.
	if all, err := tierStatusJSON(t, wire...); err != nil || len(all.Partitions) != 2 || all.Cache == nil {
		t.Fatalf("every partition: %v, %+v", err, all)
	}
	out := runCmd(t, 60*time.Second, "", strataBin, "tier", "status", "--bootstrap-server", b.Addr, "--topic", wireTopic)
	if !strings.Contains(out, "cluster: "+b.Addr) || !strings.Contains(out, "REMOTE BYTES") || strings.Count(out, wireTopic+" ") != 2 {
		t.Fatalf("text form:\n%s", out)
	}

	// An unknown topic: exit 1, the error in the report.
	rep, err := tierStatusJSON(t, "--bootstrap-server", b.Addr, "--topic", "no-such-topic")
	if err == nil || len(rep.Errors) != 1 || !strings.Contains(string(rep.Errors[0]), kerr.UnknownTopicOrPartition.Message) {
		t.Fatalf("unknown topic: exit %v, errors %s", err, rep.Errors)
	}

	// describeAPI is checked below; the stopped broker last.
	checkDescribeTieredStorage(t, cl, b.Addr)

	// The broker stopped: offline mode shows what cluster mode showed.
	b.Stop(t)
	if o, err = tierStatusJSON(t, append([]string{wireTopic}, offline...)...); err != nil || !reflect.DeepEqual(o.Partitions, w.Partitions) {
		t.Fatalf("offline after stop (%v): %v, cluster mode before: %v", err, o.Partitions, w.Partitions)
	}
}

// checkDescribeTieredStorage: the API's per-partition and per-topic
// errors, and the key not listed in ApiVersions.
func checkDescribeTieredStorage(t *testing.T, cl *kgo.Client, addr string) {
	t.Helper()
	// The API itself: per-partition and per-topic errors, and not listed
	// in ApiVersions.
	resp := describeTiered(t, addr, []strataapi.DescribeTieredStorageRequestTopic{
		{Topic: wireTopic, Partitions: []int32{1, 7}}, {Topic: "no-such-topic"}})
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 2 ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].RemoteSegments <= 0 ||
		resp.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeTieredStorage answer %+v", resp)
	}
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range av.ApiKeys {
		if k.ApiKey == strataapi.KeyDescribeTieredStorage {
			t.Fatalf("ApiVersions lists key %d", k.ApiKey)
		}
	}
}

// TestTierStatusWireCluster: three brokers, each leading one partition;
// cluster mode shows all three from their leaders, and a broker asked for
// a partition another leads answers NOT_LEADER_OR_FOLLOWER.
func TestTierStatusWireCluster(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	c := StartCluster(t, 3, "remote.storage.s3.endpoint="+srv.Endpoint(), "remote.storage.s3.bucket="+bucket,
		"log.retention.check.interval.ms=200", "strata.remote.poll.interval.ms=100", "strata.remote.retry.max.ms=1000",
		"auto.leader.rebalance.enable=false")
	cl := c.Client(t)
	createWireTopic(t, cl, 3, 1)
	var leaders map[int32]int32
	c.WaitMetadata(t, 60*time.Second, "a leader per partition on three brokers", func(md kadm.Metadata) string {
		leaders = leadersOf(md, wireTopic)
		seen := map[int32]bool{}
		for _, l := range leaders {
			if l >= 0 {
				seen[l] = true
			}
		}
		if len(leaders) != 3 || len(seen) != 3 {
			return fmt.Sprintf("leaders %v", leaders)
		}
		return ""
	})
	produceWire(t, cl, []int32{0, 1, 2}, 600)

	seed := c.Broker(1).Addr
	var rep wireReport
	if !poll.For(2*time.Minute, func() bool {
		rep, _ = tierStatusJSON(t, "--bootstrap-server", seed)
		n := 0
		for _, r := range rep.Partitions {
			if r.Topic == wireTopic && r.RemoteSegments != nil && *r.RemoteSegments > 0 && r.LocalBytes != nil && r.LogEnd != nil && *r.LogEnd == 600 {
				n++
			}
		}
		return n == 3
	}) {
		t.Fatalf("three partitions with remote segments not shown within 2 minutes: %+v", rep.Partitions)
	}
	// Partition 0 asked of a broker that does not lead it.
	other := leaders[1]
	resp := describeTiered(t, c.Broker(other).Addr, []strataapi.DescribeTieredStorageRequestTopic{{Topic: wireTopic, Partitions: []int32{0}}})
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("partition 0 led by %d asked of %d: %+v", leaders[0], other, resp)
	}
}

func wireClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createWireTopic creates wireTopic, tiered, with small segments that
// leave local disk once uploaded.
func createWireTopic(t *testing.T, cl *kgo.Client, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := func(s string) *string { return &s }
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, rf, map[string]*string{
		"remote.storage.enable": v("true"), "segment.bytes": v("8192"), "local.retention.bytes": v("1"), "file.delete.delay.ms": v("0"),
	}, wireTopic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create %s: %v", wireTopic, err)
	}
}

// produceWire produces n records of 100 bytes to each partition.
func produceWire(t *testing.T, cl *kgo.Client, partitions []int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for _, p := range partitions {
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: wireTopic, Partition: p, Value: []byte(fmt.Sprintf("%04d-%096d", i, i))})
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchMaxBytes(2048))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if err := cl2.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// describeTiered sends DescribeTieredStorage to the broker at addr on a
// connection of its own.
func describeTiered(t *testing.T, addr string, topics []strataapi.DescribeTieredStorageRequestTopic) *strataapi.DescribeTieredStorageResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := &strataapi.DescribeTieredStorageRequest{Topics: topics}
	resp := req.ResponseKind().(*strataapi.DescribeTieredStorageResponse)
	if err := strataapi.RoundTrip(conn, "e2e", 1, req, resp); err != nil {
		t.Fatalf("DescribeTieredStorage to %s: %v", addr, err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("DescribeTieredStorage to %s: error %d", addr, resp.ErrorCode)
	}
	return resp
}

// TestTierStatusWireSASL: cluster mode on a SASL_SSL listener (SCRAM over
// TLS) reaches DescribeTieredStorage on its own connection, authenticated
// as franz-go's are; a wrong password is an error.
func TestTierStatusWireSASL(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	b := startSecBroker(t)
	cl := wireClient(t, b.addrs["PLAINTEXT"])
	createWireTopic(t, cl, 2, 1)
	produceWire(t, cl, []int32{0, 1}, 50)
	args := func(pass string) []string {
		return []string{"--bootstrap-server", b.addrs["SASL_SSL"], "--topic", wireTopic, "--security-protocol", "SASL_SSL",
			"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice", "--sasl-password", pass,
			"--ssl-truststore-location", b.certs.truststore}
	}
	rep, err := tierStatusJSON(t, args(b.alicePass)...)
	if err != nil || len(rep.Partitions) != 2 || rep.Partitions[1].LogEnd == nil || *rep.Partitions[1].LogEnd != 50 || rep.Partitions[1].PendingSegments == nil {
		t.Fatalf("over SASL_SSL: %v, %+v", err, rep.Partitions)
	}
	if out, errOut, err := tryCmd(60*time.Second, "", strataBin, append([]string{"tier", "status"}, args("wrong")...)...); err == nil {
		t.Fatalf("a wrong password: exit 0\n%s\n%s", out, errOut)
	}
}
