package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newAdmin returns an admin client for the comma-separated seed brokers;
// closing it closes its kgo client.
func newAdmin(seeds string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// waitBrokers waits (bounded) until the cluster's metadata lists n brokers.
func waitBrokers(ctx context.Context, seeds string, n int, timeout time.Duration) error {
	adm, err := newAdmin(seeds)
	if err != nil {
		return err
	}
	defer adm.Close()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		brokers, err := adm.ListBrokers(rctx)
		cancel()
		if err == nil && len(brokers) >= n {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d brokers", len(brokers))
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("metadata did not list %d brokers within %v (last: %s)", n, timeout, last)
}

// describeTopic returns each partition's leader, replicas and ISR as the
// cluster's metadata gives them.
func describeTopic(ctx context.Context, seeds, topic string) (string, error) {
	adm, err := newAdmin(seeds)
	if err != nil {
		return "", err
	}
	defer adm.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(rctx, topic)
	if err != nil {
		return "", err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return "", fmt.Errorf("topic %s not in the metadata", topic)
	}
	if td.Err != nil {
		return "", td.Err
	}
	var parts []string
	for _, p := range td.Partitions.Sorted() {
		parts = append(parts, fmt.Sprintf("partition %d leader %d replicas %v ISR %v", p.Partition, p.Leader, p.Replicas, p.ISR))
	}
	return strings.Join(parts, "; "), nil
}

// setTopicConfig sets topic configs with an incremental alter.
func setTopicConfig(ctx context.Context, adm *kadm.Client, topic string, configs map[string]string) error {
	var alter []kadm.AlterConfig
	for k, v := range configs {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	resps, err := adm.AlterTopicConfigs(ctx, alter, topic)
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// listOffsets returns the start (earliest) or end offset of every partition
// of topic.
func listOffsets(ctx context.Context, adm *kadm.Client, topic string, end bool) (map[int32]int64, error) {
	list := adm.ListStartOffsets
	if end {
		list = adm.ListEndOffsets
	}
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets %s: %w", topic, err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// setBrokerConfig sets a dynamic broker config as the cluster default
// (every broker), or deletes it when v is nil.
func setBrokerConfig(ctx context.Context, adm *kadm.Client, key string, v *string) error {
	op := kadm.SetConfig
	if v == nil {
		op = kadm.DeleteConfig
	}
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: v}})
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", key, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// createOnReplicas creates topic with every partition on replicas, in
// that order (the first is each partition's preferred leader), and waits
// (bounded) until the metadata shows each partition led by replicas[0]
// with all of them in its ISR.
func createOnReplicas(ctx context.Context, seeds, topic string, partitions int, replicas []int32, configs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	for p := range int32(partitions) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, replicas
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	resp, err := req.RequestWith(rctx, cl)
	cancel()
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			msg := ""
			if rt.ErrorMessage != nil {
				msg = *rt.ErrorMessage
			}
			return fmt.Errorf("create %s: %w (%s)", topic, err, msg)
		}
	}
	return waitLedBy(ctx, adm, topic, partitions, replicas, 30*time.Second)
}

// waitLedBy waits, at most timeout, until topicLedBy holds.
func waitLedBy(ctx context.Context, adm *kadm.Client, topic string, partitions int, replicas []int32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := topicLedBy(ctx, adm, topic, partitions, replicas)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topicLedBy checks that the metadata shows topic's partitions led by
// replicas[0], each with all of replicas in its ISR.
func topicLedBy(ctx context.Context, adm *kadm.Client, topic string, partitions int, replicas []int32) error {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(mctx, topic)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td := md.Topics[topic]
	if td.Err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, td.Err)
	}
	if len(td.Partitions) != partitions {
		return fmt.Errorf("%s: %d partitions in the metadata, want %d", topic, len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions.Sorted() {
		if p.Leader != replicas[0] || len(p.ISR) != len(replicas) {
			return fmt.Errorf("%s: partition %d leader %d ISR %v, want leader %d and ISR %v", topic, p.Partition, p.Leader, p.ISR, replicas[0], replicas)
		}
	}
	return nil
}
