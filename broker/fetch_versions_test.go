package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchByID is a Fetch (no wait) of the given partitions of one topic id
// per entry of ids, at version v, filled as a v15+ consumer fills it
// (ReplicaState -1) and, at v17, with a ReplicaDirectoryId, which the
// broker ignores.
func fetchByID(v int16, ids [][16]byte, partitions []int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MaxBytes = 1 << 20
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = -1, -1
	for _, id := range ids {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
			rp.ReplicaDirectoryID = [16]byte{0xd1, 0x7, 15: byte(p)}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// countRecords returns the records in a fetched partition's batches.
func countRecords(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	if err := segment.SplitBatches(b, func(h segment.Header, _ []byte) error { n += int(h.RecordCount); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFetchTopicIDVersions sends Fetch v13-v17 over a raw connection:
// topics named by id in the request and the response, records as at v12,
// UNKNOWN_TOPIC_ID for an id no topic has (the zero id too), per-partition
// errors as before; and a long poll by id woken by a produce.
func TestFetchTopicIDVersions(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "ids", 2, nil)
	if p := produceRaw(t, cl, "ids", 0, buildBatch(t, segment.CodecNone, 5)); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	id := [16]byte(s.topic("ids").id)
	unknown := [16]byte{0xba, 0xd, 15: 1}
	rc := dialRaw(t, s)
	for v := int16(13); v <= 17; v++ {
		req := fetchByID(v, [][16]byte{id, unknown, {}}, []int32{0, 1, 9}, 0)
		resp := rc.request(int32(v), req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 3 {
			t.Fatalf("v%d: error %v, %d topics, want NONE and 3", v, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
		}
		known := resp.Topics[0]
		if known.TopicID != id || len(known.Partitions) != 3 {
			t.Fatalf("v%d: first topic id %x with %d partitions, want %x with 3", v, known.TopicID, len(known.Partitions), id)
		}
		p0, p1, p9 := known.Partitions[0], known.Partitions[1], known.Partitions[2]
		if p0.ErrorCode != 0 || p0.HighWatermark != 5 || countRecords(t, p0.RecordBatches) != 5 {
			t.Errorf("v%d partition 0: error %v, high watermark %d, %d records; want NONE, 5, 5", v, kerr.ErrorForCode(p0.ErrorCode), p0.HighWatermark, countRecords(t, p0.RecordBatches))
		}
		if p1.ErrorCode != 0 || p1.HighWatermark != 0 || len(p1.RecordBatches) != 0 {
			t.Errorf("v%d partition 1: error %v, high watermark %d, %d bytes; want NONE, 0, none", v, kerr.ErrorForCode(p1.ErrorCode), p1.HighWatermark, len(p1.RecordBatches))
		}
		if p9.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d partition 9: %v, want UNKNOWN_TOPIC_OR_PARTITION", v, kerr.ErrorForCode(p9.ErrorCode))
		}
		for i, want := range [][16]byte{unknown, {}} {
			rt := resp.Topics[1+i]
			if rt.TopicID != want || len(rt.Partitions) != 3 {
				t.Fatalf("v%d topic %d: id %x with %d partitions, want %x with 3", v, 1+i, rt.TopicID, len(rt.Partitions), want)
			}
			for _, p := range rt.Partitions {
				if p.ErrorCode != kerr.UnknownTopicID.Code || p.HighWatermark != -1 || len(p.RecordBatches) != 0 {
					t.Errorf("v%d id %x partition %d: %v, high watermark %d; want UNKNOWN_TOPIC_ID, -1", v, want, p.Partition, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
				}
				if v >= 16 && (p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1) {
					t.Errorf("v%d id %x: current leader %+v on UNKNOWN_TOPIC_ID", v, want, p.CurrentLeader)
				}
			}
		}
		if len(resp.Brokers) != 0 {
			t.Errorf("v%d: node endpoints %+v without a leader error", v, resp.Brokers)
		}
	}

	// A long poll by id waits for data and is woken by an append.
	req := fetchByID(17, [][16]byte{id}, []int32{0}, 5)
	req.MaxWaitMillis, req.MinBytes = 20000, 1
	rc.send(100, req)
	waitFetchesWaiting(t, s, 1)
	start := time.Now()
	if p := produceRaw(t, cl, "ids", 0, buildBatch(t, segment.CodecNone, 3)); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	corr, body, err := rc.readFrame()
	if err != nil || corr != 100 {
		t.Fatalf("long poll: corr %d err %v", corr, err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	decodeResponse(t, resp, body)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || countRecords(t, p.RecordBatches) != 3 {
		t.Fatalf("long poll by id: error %v, %d records, want NONE and 3", kerr.ErrorForCode(p.ErrorCode), countRecords(t, p.RecordBatches))
	}
	t.Logf("long poll by id answered %v after the produce", time.Since(start))
}

// versionSpy is a connection that records the highest version of each
// API key the client writes (request frames: size, key, version, ...).
type versionSpy struct {
	net.Conn
	mu   *sync.Mutex
	max  map[int16]int16
	buf  []byte
	need int
}

func (c *versionSpy) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.buf = append(c.buf, b...)
	for {
		if c.need == 0 {
			if len(c.buf) < 8 {
				break
			}
			c.need = 4 + int(binary.BigEndian.Uint32(c.buf))
			key, v := int16(binary.BigEndian.Uint16(c.buf[4:])), int16(binary.BigEndian.Uint16(c.buf[6:]))
			if old, ok := c.max[key]; !ok || v > old {
				c.max[key] = v
			}
		}
		if len(c.buf) < c.need {
			c.need -= len(c.buf)
			c.buf = c.buf[:0]
			break
		}
		c.buf = c.buf[c.need:]
		c.need = 0
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// TestFetchFranzGoTopicIDs consumes a topic with franz-go, which fetches
// by topic id (Fetch v13+) when the broker advertises it: every record
// arrives, in order, and the client's own writes show the Fetch version
// it used.
func TestFetchFranzGoTopicIDs(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	const topic, n = "kgo-ids", 300
	createTopic(t, cl, topic, 3, nil)
	for i := 0; i < n; i += 50 {
		var rs []*kgo.Record
		for j := i; j < i+50; j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(j % 3)), Value: []byte(fmt.Sprintf("r%04d", j))})
		}
		if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	versions := map[int16]int16{}
	var d net.Dialer
	consumer := newClient(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return &versionSpy{Conn: c, mu: &mu, max: versions}, nil
		}))
	ctx := testCtx(t)
	seen := map[string]bool{}
	last := map[int32]int64{0: -1, 1: -1, 2: -1}
	for len(seen) < n {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(seen), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != last[r.Partition]+1 {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, last[r.Partition])
			}
			last[r.Partition] = r.Offset
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	mu.Lock()
	v := versions[1]
	mu.Unlock()
	t.Logf("franz-go fetched at v%d", v)
	if v < 13 {
		t.Fatalf("franz-go fetched at v%d, want v13+ (topic ids)", v)
	}
}

// TestFetchLeaderDiscovery: on two brokers on ZooKeeper, a Fetch v16+
// (KIP-951) to the broker that does not lead the partition answers
// NOT_LEADER_OR_FOLLOWER with the current leader and its epoch, and the
// leader's address in NodeEndpoints; FENCED_LEADER_EPOCH on the leader
// carries them too; v15 carries neither.
func TestFetchLeaderDiscovery(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-fetch-leader")
	var srv []*Server
	for id := 1; id <= 2; id++ {
		srv = append(srv, startServer(t, map[string]string{"broker.id": fmt.Sprint(id), "zookeeper.connect": connect}))
	}
	waitFor(t, "both brokers registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == 2 })
	const topic = "moved"
	adm := kadm.NewClient(newClient(t, srv[0]))
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var leader, other *Server
	waitFor(t, "a leader both brokers know", func() bool {
		l := partitionInfo(srv[1], topic, 0).State.Leader
		if partitionInfo(srv[0], topic, 0).State.Leader != l || srv[0].topic(topic) == nil || srv[1].topic(topic) == nil {
			return false
		}
		for _, s := range srv {
			if s.cfg.BrokerID == l {
				leader = s
			} else {
				other = s
			}
		}
		return leader != nil && other != nil && leader.topic(topic).local(0) != nil
	})
	epoch := partitionInfo(leader, topic, 0).State.LeaderEpoch
	id := [16]byte(leader.topic(topic).id)
	addr := leader.Addr().(*net.TCPAddr)

	check := func(s *Server, v int16, currentEpoch int32, wantCode int16) {
		t.Helper()
		req := fetchByID(v, [][16]byte{id}, []int32{0}, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = currentEpoch
		resp := dialRaw(t, s).request(1, req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != wantCode {
			t.Fatalf("v%d to broker %d: %v, want %v", v, s.cfg.BrokerID, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(wantCode))
		}
		if v < 16 || wantCode == 0 {
			if p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || len(resp.Brokers) != 0 {
				t.Fatalf("v%d: current leader %+v, endpoints %+v; want none before v16 or without an error", v, p.CurrentLeader, resp.Brokers)
			}
			return
		}
		if p.CurrentLeader.LeaderID != leader.cfg.BrokerID || p.CurrentLeader.LeaderEpoch != epoch {
			t.Fatalf("v%d to broker %d: current leader %d epoch %d, want %d epoch %d", v, s.cfg.BrokerID, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch, leader.cfg.BrokerID, epoch)
		}
		if len(resp.Brokers) != 1 {
			t.Fatalf("v%d: node endpoints %+v, want the leader's", v, resp.Brokers)
		}
		if b := resp.Brokers[0]; b.NodeID != leader.cfg.BrokerID || b.Host != addr.IP.String() || b.Port != int32(addr.Port) || b.Rack != nil {
			t.Fatalf("v%d: node endpoint %d %s:%d rack %v, want %d %s:%d no rack", v, b.NodeID, b.Host, b.Port, b.Rack, leader.cfg.BrokerID, addr.IP, addr.Port)
		}
	}
	// An epoch older than the leader's is fenced (-1 alone means "no
	// epoch": below epoch 1, -2).
	older := epoch - 1
	if older == -1 {
		older = -2
	}
	for v := int16(15); v <= 17; v++ {
		check(other, v, -1, kerr.NotLeaderForPartition.Code)
		check(leader, v, older, kerr.FencedLeaderEpoch.Code)
	}
	check(leader, 17, epoch, 0)
}
