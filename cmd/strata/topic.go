package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(&command{
		name:    "topic",
		summary: "create, list, describe, alter and delete topics; elect leaders; reassign partitions",
		actions: topicActions,
		help:    topicHelp,
	})
}

var topicActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"create":         runTopicCreate,
	"list":           runTopicList,
	"describe":       runTopicDescribe,
	"delete":         runTopicDelete,
	"delete-records": runTopicDeleteRecords,
	"alter":          runTopicAlter,
	"elect-leaders":  runTopicElectLeaders,
	"reassign":       runTopicReassign,
}

const topicHelp = `Usage: strata topic <action> [flags]

Manages topics through the Kafka admin APIs, like kafka-topics.sh.

Actions:
  create         create a topic
  list           print the topic names
  describe       print topics with their partitions, leaders, replicas, ISR
  alter          change topic configs or add partitions
  delete         delete a topic and its data
  delete-records delete the records below an offset (kafka-delete-records.sh)
  elect-leaders  elect partition leaders (preferred or unclean)
  reassign       move partitions to other brokers (Kafka's reassignment JSON)

Run 'strata topic <action> --help' for its flags and an example.

Example:
  strata topic create orders --partitions 3 --config retention.ms=86400000
  strata topic describe orders
`

// topicIDString formats a topic ID as Kafka's tools do: URL-safe base64
// without padding.
func topicIDString(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func unknownTopic(topic string) error {
	return withHint(fmt.Errorf("topic %q does not exist", topic),
		"List the topics with 'strata topic list', or create it with 'strata topic create --topic "+topic+"'.")
}

func configMap(kvs keyValueFlag) map[string]*string {
	m := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kadm.StringPtr(kv[1])
	}
	return m
}

func runTopicCreate(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic create", `Usage: strata topic create TOPIC [flags]

Creates a topic. Partitions and replication factor default to the broker's
num.partitions and default.replication.factor. Configs use Kafka's topic
config names ('strata broker --help' lists those the broker accepts).
`, `
Example:
  strata topic create orders --partitions 3 --replication-factor 1 \
      --config retention.ms=86400000 --config segment.bytes=104857600
`, stdout, stderr)
	topic := c.fs.String("topic", "", "the `TOPIC` to create (required)")
	partitions := c.fs.Int("partitions", -1, "number of partitions `N` (-1: the broker's num.partitions)")
	rf := c.fs.Int("replication-factor", -1, "copies `N` of each partition (-1: the broker's default.replication.factor)")
	var configs keyValueFlag
	c.fs.Var(&configs, "config", "topic config `KEY=VALUE`; repeatable")
	ifNotExists := c.fs.Bool("if-not-exists", false, "succeed without changes if the topic exists")
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	switch {
	case *topic == "":
		return c.missingName()
	case *partitions == 0 || *partitions < -1 || *partitions > 1<<20:
		return c.usageError("--partitions %d: want a positive number, or -1 for the broker's default", *partitions)
	case *rf == 0 || *rf < -1 || *rf > 1<<14:
		return c.usageError("--replication-factor %d: want a positive number, or -1 for the broker's default", *rf)
	}

	return c.withAdmin(func(ctx context.Context, s *session) int {
		resps, err := s.adm.CreateTopics(ctx, int32(*partitions), int16(*rf), configMap(configs), *topic)
		err = topicAnswer(resps, err, *topic, func(r kadm.CreateTopicResponse) error { return kafkaError(r.Err, r.ErrMessage) })
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists) && *ifNotExists:
			fmt.Fprintf(stdout, "Topic %s already exists.\n", *topic)
			return 0
		case errors.Is(err, kerr.TopicAlreadyExists):
			return c.fail(withHint(err, "Describe it with 'strata topic describe --topic "+*topic+"', or add --if-not-exists."))
		case errors.Is(err, kerr.InvalidReplicationFactor):
			return c.fail(withHint(err, "The replication factor cannot exceed the number of live brokers ('strata cluster' lists them)."))
		case err != nil:
			return c.fail(err)
		}
		resp := resps[*topic]
		fmt.Fprintf(stdout, "Created topic %s: %d partitions, replication factor %d, topic id %s.\n",
			resp.Topic, resp.NumPartitions, resp.ReplicationFactor, topicIDString(resp.ID))
		return 0
	})
}

func runTopicList(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic list", `Usage: strata topic list [flags]

Prints the names of the topics, one a line, sorted.
`, `
Example:
  strata topic list --bootstrap-server 127.0.0.1:9092 --exclude-internal
`, stdout, stderr)
	excludeInternal := c.fs.Bool("exclude-internal", false, "leave out internal topics such as __consumer_offsets")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		topics, err := s.adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return c.fail(err)
		}
		if *excludeInternal {
			topics.FilterInternal()
		}
		if format.json() {
			out := jsonTopicList{Topics: []jsonTopicName{}}
			for _, t := range topics.Sorted() {
				out.Topics = append(out.Topics, jsonTopicName{Name: t.Topic, Internal: t.IsInternal})
			}
			return c.printJSON(out)
		}
		for _, name := range topics.Names() {
			fmt.Fprintln(stdout, name)
		}
		return 0
	})
}

func runTopicDescribe(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic describe", `Usage: strata topic describe [TOPIC]... [flags]

Prints each topic (all of them when none is named) as kafka-topics.sh
--describe does: a line with the topic id, partition count, replication
factor and the configs set on the topic (those that differ from the
broker's defaults), then a line per partition with its leader, replicas
and in-sync replicas (Isr). A partition without a leader shows Leader: none.
`, `
Example:
  strata topic describe orders payments
`, stdout, stderr)
	var topics stringsFlag
	c.fs.Var(&topics, "topic", "a `TOPIC` to describe; repeatable (default: all)")
	excludeInternal := c.fs.Bool("exclude-internal", false, "leave out internal topics such as __consumer_offsets")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		md, err := s.adm.Metadata(ctx, topics...)
		if err != nil {
			return c.fail(err)
		}
		for _, t := range topics {
			if !md.Topics.Has(t) {
				return c.fail(unknownTopic(t))
			}
		}
		if *excludeInternal {
			md.Topics.FilterInternal()
		}
		names := md.Topics.Names()
		configs := map[string][]string{}
		if len(names) > 0 {
			rcs, err := s.adm.DescribeTopicConfigs(ctx, names...)
			if err != nil {
				return c.fail(err)
			}
			for _, rc := range rcs {
				if rc.Err != nil {
					return c.fail(fmt.Errorf("configs of topic %q: %w", rc.Name, kafkaError(rc.Err, rc.ErrMessage)))
				}
				for _, cfg := range rc.Configs {
					if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
						configs[rc.Name] = append(configs[rc.Name], cfg.Key+"="+cfg.MaybeValue())
					}
				}
				slices.Sort(configs[rc.Name])
			}
		}
		if format.json() {
			return c.topicsJSON(md.Topics.Sorted(), configs)
		}
		failed := false
		for _, t := range md.Topics.Sorted() {
			if t.Err != nil {
				fmt.Fprintf(stdout, "Topic: %s\tError: %v\n", t.Topic, t.Err)
				failed = true
				continue
			}
			fmt.Fprintf(stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				t.Topic, topicIDString(t.ID), len(t.Partitions), t.Partitions.NumReplicas(), strings.Join(configs[t.Topic], ","))
			for _, p := range t.Partitions.Sorted() {
				fmt.Fprintf(stdout, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", t.Topic, p.Partition, brokerID(p.Leader), joinIDs(p.Replicas), joinIDs(p.ISR))
				if len(p.OfflineReplicas) > 0 {
					fmt.Fprintf(stdout, "\tOffline: %s", joinIDs(p.OfflineReplicas))
				}
				if p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable) {
					fmt.Fprintf(stdout, "\tError: %v", p.Err)
				}
				fmt.Fprintln(stdout)
			}
		}
		if failed {
			return 1
		}
		return 0
	})
}

// topicsJSON prints topic describe --format json; exit 1 when a topic
// has an error, as the text does.
func (c *clientCmd) topicsJSON(topics []kadm.TopicDetail, configs map[string][]string) int {
	out := jsonTopics{Topics: []jsonTopic{}}
	failed := false
	for _, t := range topics {
		j := jsonTopic{Name: t.Topic, Internal: t.IsInternal, Configs: map[string]string{}, Partitions: []jsonPartition{}, Error: errString(t.Err)}
		if t.Err != nil {
			failed = true
			out.Topics = append(out.Topics, j)
			continue
		}
		j.TopicID, j.PartitionCount, j.ReplicationFactor = topicIDString(t.ID), len(t.Partitions), t.Partitions.NumReplicas()
		for _, kv := range configs[t.Topic] {
			k, v, _ := strings.Cut(kv, "=")
			j.Configs[k] = v
		}
		for _, p := range t.Partitions.Sorted() {
			jp := jsonPartition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: ids(p.Replicas), ISR: ids(p.ISR), OfflineReplicas: ids(p.OfflineReplicas)}
			if p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable) {
				jp.Error = p.Err.Error()
			}
			j.Partitions = append(j.Partitions, jp)
		}
		out.Topics = append(out.Topics, j)
	}
	if status := c.printJSON(out); status != 0 || !failed {
		return status
	}
	return 1
}

func brokerID(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func runTopicDelete(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic delete", `Usage: strata topic delete TOPIC [flags]

Deletes a topic and all its data. There is no undo.
`, `
Example:
  strata topic delete orders
`, stdout, stderr)
	topic := c.fs.String("topic", "", "the `TOPIC` to delete (required)")
	ifExists := c.fs.Bool("if-exists", false, "succeed if the topic does not exist")
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	if *topic == "" {
		return c.missingName()
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		resps, err := s.adm.DeleteTopics(ctx, *topic)
		err = topicAnswer(resps, err, *topic, func(r kadm.DeleteTopicResponse) error { return kafkaError(r.Err, r.ErrMessage) })
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition) && *ifExists:
			fmt.Fprintf(stdout, "Topic %s does not exist.\n", *topic)
			return 0
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return c.fail(unknownTopic(*topic))
		case err != nil:
			return c.fail(err)
		}
		fmt.Fprintf(stdout, "Deleted topic %s.\n", *topic)
		return 0
	})
}

func runTopicAlter(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic alter", `Usage: strata topic alter TOPIC [flags]

Changes a topic: sets or removes topic configs (IncrementalAlterConfigs;
a removed config falls back to the broker's default) and adds partitions
(CreatePartitions: a topic never shrinks). Configs are changed first.
`, `
Example:
  strata topic alter orders --add-config retention.ms=3600000 \
      --delete-config segment.bytes --partitions 6
`, stdout, stderr)
	topic := c.fs.String("topic", "", "the `TOPIC` to change (required)")
	var add keyValueFlag
	c.fs.Var(&add, "add-config", "set a topic config `KEY=VALUE`; repeatable")
	var del stringsFlag
	c.fs.Var(&del, "delete-config", "remove the topic's `KEY` config; repeatable")
	partitions := c.fs.Int("partitions", 0, "grow the topic to `N` partitions")
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	switch {
	case *topic == "":
		return c.missingName()
	case len(add) == 0 && len(del) == 0 && *partitions == 0:
		return c.usageError("nothing to change: give --add-config, --delete-config or --partitions")
	case *partitions < 0 || *partitions > 1<<20:
		return c.usageError("--partitions %d: want the new, larger partition count", *partitions)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		md, err := s.adm.Metadata(ctx, *topic)
		if err != nil {
			return c.fail(err)
		}
		if !md.Topics.Has(*topic) {
			return c.fail(unknownTopic(*topic))
		}
		have := len(md.Topics[*topic].Partitions)
		if *partitions > 0 && *partitions < have {
			return c.failf("A topic's partitions can only be added, never removed: give --partitions above "+strconv.Itoa(have)+".",
				"topic %s has %d partitions, more than --partitions %d", *topic, have, *partitions)
		}

		if len(add) > 0 || len(del) > 0 {
			var alters []kadm.AlterConfig
			var done []string
			for _, kv := range add {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: kadm.StringPtr(kv[1])})
				done = append(done, "set "+kv[0]+"="+kv[1])
			}
			for _, k := range del {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
				done = append(done, "removed "+k)
			}
			resps, err := s.adm.AlterTopicConfigs(ctx, alters, *topic)
			if err != nil {
				return c.fail(err)
			}
			for _, r := range resps {
				if r.Err != nil {
					return c.fail(fmt.Errorf("configs of topic %s: %w", *topic, kafkaError(r.Err, r.ErrMessage)))
				}
			}
			fmt.Fprintf(stdout, "Altered configs of topic %s: %s.\n", *topic, strings.Join(done, ", "))
		}

		if *partitions > 0 {
			if *partitions == have {
				fmt.Fprintf(stdout, "Topic %s already has %d partitions.\n", *topic, have)
				return 0
			}
			resps, err := s.adm.UpdatePartitions(ctx, *partitions, *topic)
			if err != nil {
				return c.fail(err)
			}
			r, err := resps.On(*topic, nil)
			if err == nil {
				err = kafkaError(r.Err, r.ErrMessage)
			}
			if err != nil {
				return c.fail(fmt.Errorf("partitions of topic %s: %w", *topic, err))
			}
			fmt.Fprintf(stdout, "Topic %s now has %d partitions (was %d).\n", *topic, *partitions, have)
		}
		return 0
	})
}

// apiElectLeaders is the Kafka API key of ElectLeaders.
const apiElectLeaders = 43

func runTopicElectLeaders(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic elect-leaders", `Usage: strata topic elect-leaders [TOPIC] [flags]

Asks the controller to elect partition leaders (ElectLeaders), like
kafka-leader-election.sh. A preferred election moves leadership back to
each partition's first replica when it is in sync; an unclean election
picks any live replica for a partition that has no leader, and may lose
acknowledged records. Without a topic, every partition is elected.
`, `
Example:
  strata topic elect-leaders orders --election-type preferred --partition 0
`, stdout, stderr)
	how := c.fs.String("election-type", "preferred", "`TYPE`: preferred or unclean")
	topic := c.fs.String("topic", "", "the `TOPIC` (default: all topics)")
	partition := c.fs.Int("partition", -1, "elect only partition `P` (default: all of the topic)")
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	var election kadm.ElectLeadersHow
	switch *how {
	case "preferred":
		election = kadm.ElectPreferredReplica
	case "unclean":
		election = kadm.ElectLiveReplica
	default:
		return c.usageError("--election-type %q: want preferred or unclean", *how)
	}
	if *partition >= 0 && *topic == "" {
		return c.usageError("--partition needs --topic")
	}

	return c.withAdmin(func(ctx context.Context, s *session) int {
		if !s.supports(apiElectLeaders) {
			return c.failf("Strata's controller moves leaders by itself when brokers leave and return; on-demand election needs a broker version that serves ElectLeaders.",
				"the broker at %s does not support leader election on demand (Kafka API ElectLeaders, key %d, is not among the APIs it serves)", strings.Join(s.seeds, ","), apiElectLeaders)
		}

		var set kadm.TopicsSet // nil: all partitions
		if *topic != "" {
			md, err := s.adm.Metadata(ctx, *topic)
			if err != nil {
				return c.fail(err)
			}
			if !md.Topics.Has(*topic) {
				return c.fail(unknownTopic(*topic))
			}
			set = kadm.TopicsSet{}
			if *partition >= 0 {
				if _, ok := md.Topics[*topic].Partitions[int32(*partition)]; !ok {
					return c.failf("'strata topic describe --topic "+*topic+"' lists its partitions.", "topic %s has no partition %d", *topic, *partition)
				}
				set.Add(*topic, int32(*partition))
			} else {
				set.Add(*topic, md.Topics[*topic].Partitions.Numbers()...)
			}
		}
		results, err := s.adm.ElectLeaders(ctx, election, set)
		if err != nil {
			return c.fail(err)
		}
		var elected, notNeeded, failed []string
		var firstErr error
		for _, t := range slices.Sorted(maps.Keys(results)) {
			for _, p := range slices.Sorted(maps.Keys(results[t])) {
				r := results[t][p]
				tp := fmt.Sprintf("%s-%d", t, p)
				switch {
				case r.Err == nil:
					elected = append(elected, tp)
				case errors.Is(r.Err, kerr.ElectionNotNeeded):
					notNeeded = append(notNeeded, tp)
				default:
					failed = append(failed, tp)
					fmt.Fprintf(stderr, "strata topic elect-leaders: %s: %v\n", tp, kafkaError(r.Err, r.ErrMessage))
					if firstErr == nil {
						firstErr = r.Err
					}
				}
			}
		}
		if len(elected) > 0 {
			fmt.Fprintf(stdout, "Elected leaders (%s) for partitions %s.\n", *how, strings.Join(elected, ", "))
		}
		if len(notNeeded) > 0 {
			fmt.Fprintf(stdout, "Partitions already led by the right replica: %s.\n", strings.Join(notNeeded, ", "))
		}
		if len(failed) > 0 {
			fmt.Fprintf(stderr, "Election failed for %d partitions.\n", len(failed))
			if h := hintFor(firstErr); h != "" {
				fmt.Fprintln(stderr, h)
			}
			return 1
		}
		return 0
	})
}

// topicAnswer is the outcome for topic of an admin request answered per
// topic: the request's error, else the topic's own (answerErr), else an
// error when the answer does not mention it.
func topicAnswer[R any](resps map[string]R, err error, topic string, answerErr func(R) error) error {
	if err != nil {
		return err
	}
	resp, ok := resps[topic]
	if !ok {
		return fmt.Errorf("the broker's answer does not mention topic %s", topic)
	}
	return answerErr(resp)
}
