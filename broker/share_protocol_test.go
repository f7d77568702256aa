package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareRaw sends share requests for one member on a raw connection.
type shareRaw struct {
	t      *testing.T
	rc     *rawConn
	corr   int32
	group  string
	member string
	topic  [16]byte
	epoch  int32 // the session epoch the next request carries
}

func (c *shareRaw) send(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.corr++
	return c.rc.request(c.corr, req)
}

// heartbeat joins (epoch 0) or heartbeats.
func (c *shareRaw) heartbeat(epoch int32) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = c.group, c.member, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = []string{"q"}
	}
	return c.send(req).(*kmsg.ShareGroupHeartbeatResponse)
}

// fetch sends a ShareFetch of partition 0 at the session epoch, with
// acks when given.
func (c *shareRaw) fetch(maxWait int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &c.group, &c.member
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = c.epoch, maxWait, 1<<20, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = c.topic
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.send(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		c.epoch++
	}
	return resp
}

// ack sends a ShareAcknowledge of partition 0 at the session epoch.
func (c *shareRaw) ack(first, last int64, typ int8) *kmsg.ShareAcknowledgeResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &c.group, &c.member, c.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = c.topic
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{typ}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.send(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode == 0 && c.epoch > 0 {
		c.epoch++
	}
	return resp
}

// acquired returns the acquired ranges of partition 0 in resp.
func acquired(resp *kmsg.ShareFetchResponse) []share.AcquiredRange {
	var out []share.AcquiredRange
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				out = append(out, share.AcquiredRange{First: a.FirstOffset, Last: a.LastOffset, DeliveryCount: a.DeliveryCount})
			}
		}
	}
	return out
}

// shareProtocolSetup starts a server with one partition of five records
// and returns raw share clients of members m1 and m2, joined.
func shareProtocolSetup(t *testing.T, change func(*Config)) (*Server, *share.MemPersister, *shareRaw, *shareRaw) {
	t.Helper()
	s, mp := startShareServerWith(t, time.Second, nil, change)
	cl := newClient(t, s)
	createTopic(t, cl, "q", 1, nil)
	var rs []*kgo.Record
	for range 5 {
		rs = append(rs, kgo.StringRecord("x"))
	}
	for _, r := range rs {
		r.Topic = "q"
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id := [16]byte(s.topic("q").id)
	var out []*shareRaw
	for _, m := range []string{"m1", "m2"} {
		c := &shareRaw{t: t, rc: dialRaw(t, s), group: "pg", member: m, topic: id}
		if hb := c.heartbeat(0); hb.ErrorCode != 0 || hb.MemberEpoch < 1 || hb.Assignment == nil {
			t.Fatalf("%s join: %+v", m, hb)
		}
		out = append(out, c)
	}
	return s, mp, out[0], out[1]
}

func TestShareFetchSessionsAndAcks(t *testing.T) {
	_, mp, m1, m2 := shareProtocolSetup(t, nil)
	if got := acquired(m1.fetch(1000)); len(got) != 1 || got[0] != (share.AcquiredRange{First: 0, Last: 4, DeliveryCount: 1}) {
		t.Fatalf("m1 acquired %v, want 0-4 once", got)
	}
	// m2 finds nothing available and waits out its MaxWait.
	if got := acquired(m2.fetch(10)); len(got) != 0 {
		t.Fatalf("m2 acquired %v of m1's records", got)
	}
	// m2 cannot acknowledge what m1 holds.
	if r := m2.ack(0, 4, share.AckAccept); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("m2's ack: %+v", r)
	}
	// Session errors.
	stale := *m1
	stale.epoch = 7
	if r := stale.ack(0, 0, share.AckAccept); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("stale epoch: %d", r.ErrorCode)
	}
	none := *m1
	none.member = "nobody"
	if r := none.ack(0, 0, share.AckAccept); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %d", r.ErrorCode)
	}
	open := *m1
	open.epoch = 0
	ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 0, []int8{share.AckAccept}
	if r := open.fetch(0, ab); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks at epoch 0: %d", r.ErrorCode)
	}
	// A failed write undoes the acknowledgement.
	mp.Fail = errors.New("share coordinator down")
	if r := m1.ack(0, 1, share.AckAccept); r.Topics[0].Partitions[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("ack with the persister down: %+v", r)
	}
	mp.Fail = nil
	writes := mp.Writes
	// m1 accepts 0-1 (piggybacked on a fetch) and releases 2-4 to m2.
	ab.LastOffset = 1
	if r := m1.fetch(0, ab); r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("accept: %+v", r)
	}
	if r := m1.ack(2, 4, share.AckRelease); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %+v", r)
	}
	if mp.Writes < writes+2 {
		t.Fatalf("%d state writes for 2 acknowledgements", mp.Writes-writes)
	}
	if got := acquired(m2.fetch(1000)); len(got) != 1 || got[0] != (share.AcquiredRange{First: 2, Last: 4, DeliveryCount: 2}) {
		t.Fatalf("m2 acquired %v, want 2-4 delivered twice", got)
	}
}

func TestShareFetchLockExpiryAndDeliveryLimit(t *testing.T) {
	s, _, m1, _ := shareProtocolSetup(t, func(c *Config) { c.Share.DeliveryCountLimit = 2 })
	if got := acquired(m1.fetch(1000)); len(got) != 1 || got[0].DeliveryCount != 1 {
		t.Fatalf("first delivery: %v", got)
	}
	// The lock expires; the records come back, delivered a second time.
	var got []share.AcquiredRange
	poll.Until(t, 10*time.Second, "redelivery after the lock expired", func() bool {
		got = acquired(m1.fetch(500))
		return len(got) > 0
	})
	if got[0] != (share.AcquiredRange{First: 0, Last: 4, DeliveryCount: 2}) {
		t.Fatalf("second delivery: %v", got)
	}
	// At the delivery limit the next expiry archives them: the start
	// offset passes them and nothing more is delivered.
	poll.Until(t, 10*time.Second, "records archived", func() bool {
		for _, p := range s.sharePartitionsOf("pg") {
			if start, _ := p.Offsets(); start == 5 {
				return true
			}
		}
		return false
	})
	if got := acquired(m1.fetch(10)); len(got) != 0 {
		t.Fatalf("archived records delivered again: %v", got)
	}
}

func TestShareGroupHeartbeatErrors(t *testing.T) {
	_, _, m1, _ := shareProtocolSetup(t, nil)
	if r := m1.heartbeat(99); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("fenced epoch: %d", r.ErrorCode)
	}
	unknown := *m1
	unknown.member = "stranger"
	if r := unknown.heartbeat(3); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", r.ErrorCode)
	}
	other := *m1
	other.group = "no-such-group"
	if r := other.heartbeat(3); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
	if r := m1.heartbeat(-1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
}

func TestShareACLs(t *testing.T) {
	s, _ := startShareServerWith(t, 30*time.Second, authzSASLProps([]string{"alice"}, nil), nil)
	admin := newClient(t, s)
	createTopic(t, admin, "q", 1, nil)
	if err := admin.ProduceSync(testCtx(t), &kgo.Record{Topic: "q", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alice := plainClient(t, s, "alice")
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "alice-1", []string{"q"}
	if r := brokerRequest(t, s, alice, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without READ on the group: %d", r.ErrorCode)
	}
	grantAll(t, s, []acl.Binding{binding("User:alice", acl.OpRead, acl.ResourceGroup, "sg")})
	if r := brokerRequest(t, s, alice, hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat with READ on the group: %d", r.ErrorCode)
	}
	fetch := func(epoch int32) kmsg.ShareFetchResponseTopicPartition {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr("alice-1")
		req.ShareSessionEpoch, req.MaxBytes, req.MaxRecords = epoch, 1<<20, 10
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = [16]byte(s.topic("q").id)
		rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		r := brokerRequest(t, s, alice, req).(*kmsg.ShareFetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("share fetch: %+v", r)
		}
		return r.Topics[0].Partitions[0]
	}
	if p := fetch(0); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch without READ on the topic: %d", p.ErrorCode)
	}
	grantAll(t, s, []acl.Binding{binding("User:alice", acl.OpRead, acl.ResourceTopic, "q")})
	if p := fetch(1); p.ErrorCode != 0 || len(p.AcquiredRecords) != 1 {
		t.Fatalf("fetch with READ on the topic: %+v", p)
	}
}
