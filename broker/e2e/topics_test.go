package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client returns a franz-go client for the broker, closed when the test ends.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates topic with the given number of partitions through the
// CreateTopics API and waits until Metadata shows a leader for each.
func (b *Broker) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.Client(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("CreateTopics %s: %d topics in response, want 1", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = *resp.Topics[0].ErrorMessage
		}
		t.Fatalf("CreateTopics %s: %v %s", topic, err, msg)
	}
	b.WaitTopic(t, cl, topic, partitions)
}

// WaitTopic waits until Metadata reports topic with the given number of
// partitions, each with a leader.
func (b *Broker) WaitTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last string
	for {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case err != nil:
			last = err.Error()
		case len(resp.Topics) != 1:
			last = fmt.Sprintf("%d topics in metadata", len(resp.Topics))
		case resp.Topics[0].ErrorCode != 0:
			last = kerr.ErrorForCode(resp.Topics[0].ErrorCode).Error()
		case int32(len(resp.Topics[0].Partitions)) != partitions:
			last = fmt.Sprintf("%d partitions, want %d", len(resp.Topics[0].Partitions), partitions)
		default:
			ok := true
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					ok = false
					last = fmt.Sprintf("partition %d: leader %d, %v", p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode))
				}
			}
			if ok {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not ready: %s", topic, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
