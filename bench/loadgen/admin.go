package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newAdmin returns an admin client for the seed brokers; closing it closes
// its kgo client.
func newAdmin(seeds []string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	// A topic with three replicas can take longer than kadm's default
	// 15 s on a loaded machine.
	adm.SetTimeoutMillis(30_000)
	return adm, nil
}

// createTopic creates c.Topic with c.Partitions, c.RF and c.TopicConfig; a
// topic that already exists is used as it is.
func createTopic(ctx context.Context, adm *kadm.Client, c config) error {
	configs := map[string]*string{}
	for k, v := range c.TopicConfig {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, int32(c.Partitions), int16(c.RF), configs, c.Topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		msg := ""
		if resp.ErrMessage != "" {
			msg = ": " + resp.ErrMessage
		}
		return fmt.Errorf("create topic %s (RF %d): %w%s", c.Topic, c.RF, err, msg)
	}
	return nil
}

// topicEnds returns the end offset of every partition of topic.
func topicEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) == 0 {
		return nil, fmt.Errorf("list offsets %s: no partitions", topic)
	}
	return ends, nil
}

// waitEndOffsets returns the end offsets of partitions 0..n-1 of topic,
// retrying (bounded by ctx and 30 s) while a new topic's leaders are
// elected.
func waitEndOffsets(ctx context.Context, adm *kadm.Client, topic string, n int) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := topicEnds(ctx, adm, topic)
		if err == nil {
			for p := range int32(n) {
				if _, ok := ends[p]; !ok {
					err = fmt.Errorf("list offsets %s: partition %d not listed (%d partitions listed)", topic, p, len(ends))
					break
				}
			}
		}
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return ends, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
