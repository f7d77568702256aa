package broker

import (
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicsRaw sends a CreateTopics v7 of the given topics (name,
// partitions; replication factor -1) and returns the per-topic codes and
// messages.
func createTopicsRaw(t *testing.T, rc *rawConn, corr int32, validateOnly bool, topics map[string]int32) map[string]kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 30000
	req.ValidateOnly = validateOnly
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
		req.Topics = append(req.Topics, rt)
	}
	resp := rc.request(corr, req).(*kmsg.CreateTopicsResponse)
	out := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = rt
	}
	return out
}

func createPartitionsRaw(t *testing.T, rc *rawConn, corr int32, topic string, count int32, assignment [][]int32) kmsg.CreatePartitionsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	for _, reps := range assignment {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = reps
		rt.Assignment = append(rt.Assignment, a)
	}
	req.Topics = append(req.Topics, rt)
	return rc.request(corr, req).(*kmsg.CreatePartitionsResponse).Topics[0]
}

func msgOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestPartitionLimits holds CreateTopics, CreatePartitions and
// auto-creation to strata.max.partitions.per.request (10 here) and
// strata.max.broker.partitions (43 on this single broker, of which
// __consumer_offsets takes 3 from the start): over either, the
// request is refused with POLICY_VIOLATION and a message naming the
// setting, even for counts (2^31-1) that could not be allocated, and
// nothing is created.
func TestPartitionLimits(t *testing.T) {
	s := startServer(t, map[string]string{
		"strata.max.partitions.per.request": "10",
		"strata.max.broker.partitions":      "43",
		"num.partitions":                    "4",
	})
	rc := dialRaw(t, s)
	refused := func(what string, code int16, msg, setting string) {
		t.Helper()
		if code != kerr.PolicyViolation.Code || !strings.Contains(msg, setting) {
			t.Fatalf("%s: code %d %q, want POLICY_VIOLATION naming %s", what, code, msg, setting)
		}
	}
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	// Per request, over all topics: 6 + 6 > 10, both refused; one alone
	// passes.
	for _, validateOnly := range []bool{true, false} {
		got := createTopicsRaw(t, rc, next(), validateOnly, map[string]int32{"a": 6, "b": 6})
		for _, name := range []string{"a", "b"} {
			refused("two topics of 6", got[name].ErrorCode, msgOf(got[name].ErrorMessage), "strata.max.partitions.per.request")
		}
	}
	got := createTopicsRaw(t, rc, next(), false, map[string]int32{"huge": math.MaxInt32})
	refused("2^31-1 partitions", got["huge"].ErrorCode, msgOf(got["huge"].ErrorMessage), "strata.max.partitions.per.request")
	if got := createTopicsRaw(t, rc, next(), false, map[string]int32{"a": 10}); got["a"].ErrorCode != 0 {
		t.Fatalf("10 partitions: code %d %q", got["a"].ErrorCode, msgOf(got["a"].ErrorMessage))
	}

	// CreatePartitions: the added partitions count.
	if r := createPartitionsRaw(t, rc, next(), "a", math.MaxInt32, nil); true {
		refused("adding 2^31-11 partitions", r.ErrorCode, msgOf(r.ErrorMessage), "strata.max.partitions.per.request")
	}
	if r := createPartitionsRaw(t, rc, next(), "a", 21, nil); true {
		refused("adding 11 partitions", r.ErrorCode, msgOf(r.ErrorMessage), "strata.max.partitions.per.request")
	}
	if r := createPartitionsRaw(t, rc, next(), "a", 20, nil); r.ErrorCode != 0 {
		t.Fatalf("adding 10 partitions: code %d %q", r.ErrorCode, msgOf(r.ErrorMessage))
	}

	// Per broker: 23 replicas here; 10 + 10 more reach 43, then no room.
	if got := createTopicsRaw(t, rc, next(), false, map[string]int32{"b": 10}); got["b"].ErrorCode != 0 {
		t.Fatalf("b: code %d %q", got["b"].ErrorCode, msgOf(got["b"].ErrorMessage))
	}
	if r := createPartitionsRaw(t, rc, next(), "b", 20, [][]int32{{0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}}); r.ErrorCode != 0 {
		t.Fatalf("b to 20 by assignment: code %d %q", r.ErrorCode, msgOf(r.ErrorMessage))
	}
	got = createTopicsRaw(t, rc, next(), false, map[string]int32{"c": 1})
	refused("a 44th replica", got["c"].ErrorCode, msgOf(got["c"].ErrorMessage), "strata.max.broker.partitions")
	if r := createPartitionsRaw(t, rc, next(), "b", 21, [][]int32{{0}}); true {
		refused("a 44th replica by assignment", r.ErrorCode, msgOf(r.ErrorMessage), "strata.max.broker.partitions")
	}
	md := metadataFor(t, s, 12, true, "auto")
	if code := md.Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("auto-creation past the limit: code %d", code)
	}
	for _, name := range []string{"c", "auto", "huge"} {
		if s.topic(name) != nil {
			t.Fatalf("refused topic %q exists", name)
		}
	}
	if n := len(s.topic("a").parts) + len(s.topic("b").parts); n != 40 {
		t.Fatalf("%d partitions, want 40", n)
	}
}
