package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseShareAutoOffsetReset(t *testing.T) {
	for i, c := range []struct {
		in   string
		want ShareAutoOffsetReset
		bad  bool
	}{
		{in: "latest", want: ShareAutoOffsetReset{Strategy: ShareResetLatest}},
		{in: "EARLIEST", want: ShareAutoOffsetReset{Strategy: ShareResetEarliest}},
		{in: "by_duration:PT1H", want: ShareAutoOffsetReset{Strategy: ShareResetByDuration, Duration: time.Hour}},
		{in: "by_duration:P1DT2H3M4.5S", want: ShareAutoOffsetReset{Strategy: ShareResetByDuration, Duration: 26*time.Hour + 3*time.Minute + 4500*time.Millisecond}},
		{in: "by_duration:pt30m", want: ShareAutoOffsetReset{Strategy: ShareResetByDuration, Duration: 30 * time.Minute}},
		{in: "by_duration:P0D", want: ShareAutoOffsetReset{Strategy: ShareResetByDuration}},
		{in: "by_duration:-PT1H", bad: true},
		{in: "by_duration:PT-1S", bad: true},
		{in: "by_duration:P1DT", bad: true},
		{in: "by_duration:PT", bad: true},
		{in: "by_duration:1h", bad: true},
		{in: "by_duration:", bad: true},
		{in: "none", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseShareAutoOffsetReset(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("#%d: %q: got %+v, want an error", i, c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("#%d: %q: got %+v, %v, want %+v", i, c.in, got, err, c.want)
		}
	}
}

// groupConfigOp is a SET (value non-nil) or DELETE of a group config.
type groupConfigOp struct {
	name  string
	value *string
	op    kmsg.IncrementalAlterConfigOp
}

func setGroupOp(name, v string) groupConfigOp {
	return groupConfigOp{name: name, value: kmsg.StringPtr(v), op: kmsg.IncrementalAlterConfigOpSet}
}

// alterGroupConfig sends IncrementalAlterConfigs of one GROUP resource
// (as franz-go's share tests do) and returns its error code and message.
func alterGroupConfig(t *testing.T, cl *kgo.Client, group string, ops ...groupConfigOp) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = o.name, o.value, o.op
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	r := resp.Resources[0]
	var msg string
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// describeGroupConfig returns a GROUP resource's configs by name.
func describeGroupConfig(t *testing.T, cl *kgo.Client, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("DescribeConfigs: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("DescribeConfigs of group %q: %v", group, err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestGroupConfigsEmbedded: group configs on one broker with the embedded
// coordinator. A SET as franz-go's setShareAutoOffsetReset sends it is
// stored, described with source GROUP_CONFIG (the others DEFAULT_CONFIG
// from the broker settings, one set in the properties file), and in force
// through groupConfig; Kafka's validation errors are INVALID_CONFIG;
// AlterConfigs replaces; the configs survive a restart.
func TestGroupConfigsEmbedded(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": dir, "group.share.record.lock.duration.ms": "20000"}
	s := startServer(t, props)
	cl := newClient(t, s)

	if code, msg := alterGroupConfig(t, cl, "g/1", setGroupOp("share.auto.offset.reset", "earliest"), setGroupOp("share.heartbeat.interval.ms", "6000")); code != 0 {
		t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
	}
	d := describeGroupConfig(t, cl, "g/1")
	if c := d["share.auto.offset.reset"]; *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig || c.IsDefault {
		t.Errorf("share.auto.offset.reset: got %s source %v", *c.Value, c.Source)
	}
	if c := d["share.record.lock.duration.ms"]; *c.Value != "20000" || c.Source != kmsg.ConfigSourceDefaultConfig ||
		len(c.ConfigSynonyms) != 1 || c.ConfigSynonyms[0].Name != "group.share.record.lock.duration.ms" {
		t.Errorf("share.record.lock.duration.ms: got %s source %v synonyms %+v", *c.Value, c.Source, c.ConfigSynonyms)
	}
	if len(d) != len(groupConfigKeys) {
		t.Errorf("described %d configs, want %d", len(d), len(groupConfigKeys))
	}
	g := s.groupConfig("g/1")
	if g.ShareAutoOffsetReset.Strategy != ShareResetEarliest || g.ShareHeartbeatInterval != 6*time.Second ||
		g.ShareRecordLockDuration != 20*time.Second || g.ConsumerSessionTimeout != 45*time.Second || g.ShareReadCommitted {
		t.Errorf("groupConfig: got %+v", g)
	}
	if g := s.groupConfig("other"); g.ShareAutoOffsetReset.Strategy != ShareResetLatest {
		t.Errorf("another group: got %+v", g)
	}

	for i, c := range []struct {
		ops  []groupConfigOp
		code int16
		msg  string
	}{
		{[]groupConfigOp{setGroupOp("no.such.config", "1")}, kerr.InvalidConfig.Code, "Unknown group config name: no.such.config"},
		{[]groupConfigOp{setGroupOp("share.auto.offset.reset", "none")}, kerr.InvalidConfig.Code, "share.auto.offset.reset"},
		{[]groupConfigOp{setGroupOp("share.auto.offset.reset", "by_duration:-PT1H")}, kerr.InvalidConfig.Code, "negative"},
		{[]groupConfigOp{setGroupOp("share.isolation.level", "serializable")}, kerr.InvalidConfig.Code, "share.isolation.level"},
		{[]groupConfigOp{setGroupOp("share.record.lock.duration.ms", "70000")}, kerr.InvalidConfig.Code, "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"},
		{[]groupConfigOp{setGroupOp("consumer.session.timeout.ms", "1000")}, kerr.InvalidConfig.Code, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{[]groupConfigOp{setGroupOp("share.heartbeat.interval.ms", "x")}, kerr.InvalidConfig.Code, "not an int"},
		{[]groupConfigOp{setGroupOp("streams.num.standby.replicas", "3")}, kerr.InvalidConfig.Code, "group.streams.max.standby.replicas"},
		{[]groupConfigOp{{name: "share.isolation.level", value: kmsg.StringPtr("read_committed"), op: kmsg.IncrementalAlterConfigOpAppend}}, kerr.InvalidConfig.Code, "append"},
		{[]groupConfigOp{setGroupOp("share.isolation.level", "read_committed"), setGroupOp("share.isolation.level", "read_committed")}, kerr.InvalidRequest.Code, "duplicate"},
	} {
		code, msg := alterGroupConfig(t, cl, "g/1", c.ops...)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("#%d: got %v %q, want %v containing %q", i, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(c.code), c.msg)
		}
	}
	if code, _ := alterGroupConfig(t, cl, "", setGroupOp("share.isolation.level", "read_committed")); code != kerr.InvalidRequest.Code {
		t.Errorf("empty group id: got %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if g := s.groupConfig("g/1"); g.ShareAutoOffsetReset.Strategy != ShareResetEarliest || g.ShareReadCommitted {
		t.Errorf("after the refused changes: got %+v", g)
	}

	// DELETE goes back to the default; AlterConfigs replaces the whole set.
	if code, msg := alterGroupConfig(t, cl, "g/1", groupConfigOp{name: "share.heartbeat.interval.ms", op: kmsg.IncrementalAlterConfigOpDelete}); code != 0 {
		t.Fatalf("delete: %v %s", kerr.ErrorForCode(code), msg)
	}
	if g := s.groupConfig("g/1"); g.ShareHeartbeatInterval != 5*time.Second || g.ShareAutoOffsetReset.Strategy != ShareResetEarliest {
		t.Errorf("after DELETE: got %+v", g)
	}
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g/1"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.isolation.level", kmsg.StringPtr("read_committed")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	if g := s.groupConfig("g/1"); !g.ShareReadCommitted || g.ShareAutoOffsetReset.Strategy != ShareResetLatest {
		t.Errorf("after AlterConfigs: got %+v", g)
	}

	// A restart reads them back from the coordinator's file.
	shutdown(t, s)
	s2 := startServer(t, props)
	if g := s2.groupConfig("g/1"); !g.ShareReadCommitted {
		t.Errorf("after a restart: got %+v", g)
	}
}

// TestGroupConfigsZK: two brokers on a real ZooKeeper; a group config
// set through broker 1 is stored as /config/groups/<sanitized id> and
// reaches broker 2 by the change notification (polled).
func TestGroupConfigsZK(t *testing.T) {
	zks := zktest.Start(t)
	connect := zks.ConnectString(fmt.Sprintf("/strata-groupcfg-%d", time.Now().UnixNano()))
	srv := map[int]*Server{}
	for id := 1; id <= 2; id++ {
		srv[id] = startServer(t, map[string]string{"broker.id": strconv.Itoa(id), "zookeeper.connect": connect, "offsets.topic.replication.factor": "1"})
	}
	cl := newClient(t, srv[1])
	if code, msg := alterGroupConfig(t, cl, "shared group", setGroupOp("share.auto.offset.reset", "by_duration:PT10M"), setGroupOp("share.record.lock.duration.ms", "45000")); code != 0 {
		t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
	}
	if !poll.For(30*time.Second, func() bool {
		g := srv[2].groupConfig("shared group")
		return g.ShareAutoOffsetReset.Duration == 10*time.Minute && g.ShareRecordLockDuration == 45*time.Second
	}) {
		t.Fatalf("broker 2: got %+v", srv[2].groupConfig("shared group"))
	}
	if got := srv[2].coord.EntityConfigs("groups")["shared%20group"]["share.auto.offset.reset"]; got != "by_duration:PT10M" {
		t.Errorf("stored entity shared%%20group: got %q", got)
	}
	d := describeGroupConfig(t, newClient(t, srv[2]), "shared group")
	if c := d["share.record.lock.duration.ms"]; *c.Value != "45000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("described by broker 2: got %s source %v", *c.Value, c.Source)
	}
}
