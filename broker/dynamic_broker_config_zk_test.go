package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDynamicBrokerConfigsZK: three brokers on a real ZooKeeper. A
// cluster default (log.retention.ms, the default of every topic without
// an override) and a per-broker setting (broker 3's
// leader.replication.throttled.rate) set through kadm's
// IncrementalAlterConfigs reach every broker (polled); broker 2's
// properties file sets log.retention.ms too, which the dynamic default
// overrides, and DescribeConfigs lists the synonyms in Kafka's order
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG); a broker id that is not live is
// accepted; a setting that is not dynamic is INVALID_REQUEST with
// Kafka's message; after a restart broker 3 runs with its stored
// settings from the start.
func TestDynamicBrokerConfigsZK(t *testing.T) {
	zks := zktest.Start(t)
	connect := zks.ConnectString(fmt.Sprintf("/strata-dyncfg-%d", time.Now().UnixNano()))
	dirs := map[int]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	props := func(id int) map[string]string {
		p := map[string]string{
			"broker.id":                        strconv.Itoa(id),
			"zookeeper.connect":                connect,
			"offsets.topic.replication.factor": "1",
			"log.dirs":                         dirs[id],
		}
		if id == 2 {
			p["log.retention.ms"] = "3600000"
		}
		return p
	}
	srv := map[int]*Server{}
	for id := 1; id <= 3; id++ {
		srv[id] = startServer(t, props(id))
	}
	cl := newClient(t, srv[1])
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "dyn", []int32{1, 2, 3}, nil)
	ctx := testCtx(t)

	retention := func(s *Server) int64 {
		ts := s.topic("dyn")
		if ts == nil {
			return 0
		}
		return ts.cfg.seg.RetentionMs
	}
	waitFor(t, "every broker hosting dyn", func() bool {
		return retention(srv[1]) != 0 && retention(srv[2]) == 3600000 && retention(srv[3]) != 0
	})

	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kmsg.StringPtr(v)}
	}
	start := time.Now()
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "7200000")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter the default: %v %+v", err, res)
	}
	res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("leader.replication.throttled.rate", "1000000")}, 3)
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter broker 3: %v %+v", err, res)
	}
	waitFor(t, "the default retention on every broker and broker 3's rate", func() bool {
		l3, _ := srv[3].repl.ThrottledRates()
		l1, _ := srv[1].repl.ThrottledRates()
		return retention(srv[1]) == 7200000 && retention(srv[2]) == 7200000 && retention(srv[3]) == 7200000 &&
			l3 == 1000000 && l1 == replica.Unthrottled
	})
	t.Logf("dynamic configs applied on every broker after %v", time.Since(start))

	// A broker id that is not live: stored for when it comes.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "9"
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{setOp("log.cleaner.backoff.ms", "1000")}
	req.Resources = append(req.Resources, rr)
	raw, err := cl.Broker(1).Request(ctx, req) // kgo would route it to broker 9
	if err != nil || raw.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != 0 {
		t.Fatalf("alter broker 9: %v %+v", err, raw)
	}
	if got := srv[1].coord.EntityConfigs("brokers")["9"]["log.cleaner.backoff.ms"]; got != "1000" {
		t.Fatalf("broker 9's entity: %q", got)
	}
	// Not dynamic: Kafka's INVALID_REQUEST.
	res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("num.partitions", "3")}, 1)
	if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) || !strings.Contains(res[0].ErrMessage, "Cannot update these configs dynamically: Set(num.partitions)") {
		t.Fatalf("non-dynamic: %v %+v", err, res)
	}
	// A bad value: INVALID_CONFIG, nothing stored.
	res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "soon")})
	if err != nil || !errors.Is(res[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v %+v", err, res)
	}

	// Synonyms in Kafka's order on broker 2, with a per-broker value too.
	res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "600000")}, 2)
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter broker 2: %v %+v", err, res)
	}
	waitFor(t, "broker 2's own retention", func() bool { return retention(srv[2]) == 600000 && retention(srv[1]) == 7200000 })
	described, err := adm.DescribeBrokerConfigs(ctx, 2)
	if err != nil || described[0].Err != nil {
		t.Fatalf("describe broker 2: %v %+v", err, described)
	}
	var got []string
	for _, c := range described[0].Configs {
		if c.Key != "log.retention.ms" {
			continue
		}
		got = append(got, fmt.Sprintf("%s=%s", c.Source, c.MaybeValue()))
		for _, s := range c.Synonyms {
			got = append(got, fmt.Sprintf("%s:%s=%s", s.Source, s.Key, *s.Value))
		}
	}
	want := []string{"DYNAMIC_BROKER_CONFIG=600000",
		"DYNAMIC_BROKER_CONFIG:log.retention.ms=600000", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000",
		"STATIC_BROKER_CONFIG:log.retention.ms=3600000", "DEFAULT_CONFIG:log.retention.ms=" + strconv.FormatInt(segDefaults.RetentionMs, 10)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("log.retention.ms on broker 2:\n got %v\nwant %v", got, want)
	}
	// The default resource: the dynamic defaults only.
	described, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil || described[0].Err != nil || len(described[0].Configs) != 1 || described[0].Configs[0].Key != "log.retention.ms" ||
		described[0].Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("describe the default: %v %+v", err, described)
	}
	// Its synonyms: the default's value, then whichever broker answered
	// has in its file (broker 2: STATIC_BROKER_CONFIG) and Kafka's
	// default; never a broker's own value.
	syn := described[0].Configs[0].Synonyms
	if len(syn) < 2 || syn[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || *syn[0].Value != "7200000" ||
		syn[len(syn)-1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("the default's synonyms: %+v", syn)
	}
	for _, sy := range syn {
		if sy.Source == kmsg.ConfigSourceDynamicBrokerConfig {
			t.Fatalf("the default's synonyms hold a broker's own value: %+v", syn)
		}
	}
	// The topic's retention.ms comes from the dynamic default on broker 1.
	tc, err := adm.DescribeTopicConfigs(ctx, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tc[0].Configs {
		if c.Key == "retention.ms" && (c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.MaybeValue() != "7200000") {
			t.Fatalf("topic retention.ms: %s %s", c.Source, c.MaybeValue())
		}
	}

	// Restart broker 3: its rate is in force from the start, before any
	// change notification.
	shutdown(t, srv[3])
	srv[3] = startServer(t, props(3))
	if l, _ := srv[3].repl.ThrottledRates(); l != 1000000 {
		t.Fatalf("after restart: broker 3's leader rate %d", l)
	}
	waitFor(t, "broker 3's topic with the default retention after restart", func() bool { return retention(srv[3]) == 7200000 })

	// DELETE of the default: back to the properties file's value.
	res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("delete the default: %v %+v", err, res)
	}
	waitFor(t, "the default gone on every broker", func() bool {
		return retention(srv[1]) == segDefaults.RetentionMs && retention(srv[3]) == segDefaults.RetentionMs && retention(srv[2]) == 600000
	})
}

// TestDynamicBrokerConfigsEmbeddedRestart: on a single node (the
// embedded coordinator) a per-broker and a default dynamic config are
// kept in the coordinator's file: after a restart the broker runs with
// them from the start (the cleaner's backoff, the topic default).
func TestDynamicBrokerConfigsEmbeddedRestart(t *testing.T) {
	props := map[string]string{"log.dirs": t.TempDir()}
	s := startServer(t, props)
	cl := newClient(t, s)
	if code := brokerAlter(t, cl, "0", setOp("log.cleaner.backoff.ms", "1234")); code != 0 {
		t.Fatalf("per-broker: error %d", code)
	}
	if code := brokerAlter(t, cl, "", setOp("log.segment.bytes", "1048576")); code != 0 {
		t.Fatalf("default: error %d", code)
	}
	if got := s.cleaner.config().Backoff; got != 1234*time.Millisecond {
		t.Fatalf("backoff before the restart: %v", got)
	}
	cl.Close()
	shutdown(t, s)
	s = startServer(t, props)
	if got := s.cleaner.config().Backoff; got != 1234*time.Millisecond {
		t.Fatalf("backoff after the restart: %v", got)
	}
	if got := s.topicDefaults()["segment.bytes"]; got != "1048576" {
		t.Fatalf("segment.bytes default after the restart: %q", got)
	}
}
