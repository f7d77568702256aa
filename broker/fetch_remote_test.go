package broker

import (
	"maps"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/stratastream/strata/tiering/s3fault"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// remoteFetchServer starts MinIO behind an S3 fault proxy and a broker
// tiering to it through the proxy, with props added, and fills topic
// "cold" (tiered: everything but the tail only in the bucket) and topic
// "hot" (local).
func remoteFetchServer(t *testing.T, props map[string]string) (*Server, *kgo.Client, *s3fault.Proxy) {
	t.Helper()
	mio := miniotest.Start(t)
	bucket := mio.NewBucket(t)
	proxy, err := s3fault.Start(mio.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	all := maps.Clone(tieredProps)
	all["remote.storage.s3.endpoint"], all["remote.storage.s3.bucket"] = proxy.URL(), bucket
	maps.Copy(all, props)
	s := startServer(t, all)
	cl := newClient(t, s)
	configs := maps.Clone(tieredTopicConfigs)
	configs["file.delete.delay.ms"] = "60000" // local retention races the fetches
	createTopic(t, cl, "cold", 1, configs)
	produceTiered(t, cl, "cold", 0, 2000)
	waitTiered(t, s, "cold")
	createTopic(t, cl, "hot", 1, nil)
	produceTiered(t, cl, "hot", 0, 20)
	return s, cl, proxy
}

// fetchBoth fetches partition 0 of each topic from offset 0 in one
// request (v12, MaxWait 0) and returns the partitions by topic.
func fetchBoth(t *testing.T, cl *kgo.Client, topics ...string) map[string]kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchRequest(topics[0], 0, 0, 1<<20)
	req.MaxBytes = 4 << 20
	for _, tp := range topics[1:] {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tp
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.Broker(0).Request(testCtx(t), fetchV12{req})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.FetchResponseTopicPartition{}
	for _, rt := range resp.(*kmsg.FetchResponse).Topics {
		out[rt.Topic] = rt.Partitions[0]
	}
	return out
}

// TestRemoteFetchLocalNotBehindHeldRemote: with the one remote reader
// goroutine held on a GET that MinIO never answers (the proxy stalls
// it), a fetch of local data is answered at once, a fetch of both
// answers the local part and no records of the remote one (after
// remote.fetch.max.wait.ms), and a remote read beyond the full queue is
// turned away; none is an error.
func TestRemoteFetchLocalNotBehindHeldRemote(t *testing.T) {
	s, cl, proxy := remoteFetchServer(t, map[string]string{
		"remote.log.reader.threads": "1", "remote.log.reader.max.pending.tasks": "1", "remote.fetch.max.wait.ms": "200",
	})
	if err := proxy.Set(s3fault.Rule{Fault: s3fault.Stall, Ops: []s3fault.Op{s3fault.OpGetObject}, Key: ".log"}); err != nil {
		t.Fatal(err)
	}
	pool := s.tier.reads

	// 1. A remote read that cannot finish: the fetch answers no records
	// once its remote wait is over; the read stays on the GET.
	if p := fetchBoth(t, cl, "cold")["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("cold fetch with its GET held: error %d, %d bytes; want no error, no records", p.ErrorCode, len(p.RecordBatches))
	}
	poll.Until(t, 10*time.Second, "remote read held on its GET", func() bool { return pool.running.Load() == 1 })

	// 2. Local data is served while the remote read is held.
	if p := fetchRaw(t, cl, "hot", 0, 0, 1<<20); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("local fetch beside a held remote read: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	// 3. Both in one fetch: the local part, and no records of the remote
	// part, whose read waits in the queue behind the held one.
	both := fetchBoth(t, cl, "hot", "cold")
	if p := both["hot"]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("mixed fetch, local part: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if p := both["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("mixed fetch, remote part: error %d, %d bytes; want no error, no records", p.ErrorCode, len(p.RecordBatches))
	}
	if n := pool.expired.Load(); n < 2 {
		t.Fatalf("expired remote reads %d, want 2", n)
	}

	// 4. The queue still holds the abandoned read (its worker is
	// held): the next remote read is turned away at once.
	if p := fetchBoth(t, cl, "cold")["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("cold fetch with the queue full: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if n := pool.rejected.Load(); n != 1 {
		t.Fatalf("rejected remote reads %d, want 1", n)
	}
	// The held GET ends with the server: closing the pool cancels it.
}

// TestRemoteFetchQuotaDynamic: remote.log.manager.fetch.max.bytes.per.second
// set at run time holds remote reads back once a read has taken the
// quota (the partition answers no records, no error) while local reads
// go on, and lifting it lets them through.
func TestRemoteFetchQuotaDynamic(t *testing.T) {
	s, cl, _ := remoteFetchServer(t, nil)
	q, pool := s.tier.quota, s.tier.reads
	if got, want := q.rate(), float64(remoteFetchRate(0, runtime.NumCPU())); got != want {
		t.Fatalf("quota at start %v, want the default %v", got, want)
	}
	if code := brokerAlter(t, cl, "", setOp(remoteFetchQuotaSetting, "1")); code != 0 {
		t.Fatalf("set the quota: error %d", code)
	}
	if got := q.rate(); got != 1 {
		t.Fatalf("quota after the alter %v, want 1", got)
	}
	// The first read may start (the bucket is not in debt); it takes
	// the quota over.
	if p := fetchBoth(t, cl, "cold")["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("first remote fetch under the quota: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	both := fetchBoth(t, cl, "cold", "hot")
	if p := both["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("remote fetch over the quota: error %d, %d bytes; want no error, no records", p.ErrorCode, len(p.RecordBatches))
	}
	if p := both["hot"]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("local part beside the throttled remote one: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if n := pool.throttles.Load(); n == 0 {
		t.Fatal("no remote read counted as throttled")
	}
	unlimited := strconv.FormatInt(remoteFetchUnlimited, 10)
	if code := brokerAlter(t, cl, "", setOp(remoteFetchQuotaSetting, unlimited)); code != 0 {
		t.Fatalf("lift the quota: error %d", code)
	}
	if got := q.rate(); got != 0 {
		t.Fatalf("quota after lifting %v, want 0 (unlimited)", got)
	}
	if p := fetchBoth(t, cl, "cold")["cold"]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("remote fetch with the quota lifted: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	// Deleted, the default applies again.
	if code := brokerAlter(t, cl, "", deleteOp(remoteFetchQuotaSetting)); code != 0 {
		t.Fatalf("delete the quota: error %d", code)
	}
	if got, want := q.rate(), float64(remoteFetchRate(0, runtime.NumCPU())); got != want {
		t.Fatalf("quota after delete %v, want the default %v", got, want)
	}
}
