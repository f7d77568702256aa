package broker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataFor sends a Metadata request at version over a raw connection
// (kgo would pick the highest version).
func metadataFor(t *testing.T, s *Server, version int16, allowAuto bool, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = allowAuto
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	rc := dialRaw(t, s)
	rc.send(1, req)
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	decodeResponse(t, resp, body)
	return resp
}

func TestMetadataAutoCreate(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		s := startServer(t, map[string]string{"auto.create.topics.enable": map[bool]string{true: "true", false: "false"}[enabled], "num.partitions": "3"})
		for _, tc := range []struct {
			version   int16
			allow     bool
			topic     string
			wantMade  bool
			wantError int16
		}{
			{12, false, "m-noallow", false, kerr.UnknownTopicOrPartition.Code},
			{12, true, "m-allow", enabled, map[bool]int16{true: 0, false: kerr.UnknownTopicOrPartition.Code}[enabled]},
			{3, false, "m-v3", enabled, map[bool]int16{true: 0, false: kerr.UnknownTopicOrPartition.Code}[enabled]},
			{12, true, "bad/name", false, kerr.InvalidTopicException.Code},
		} {
			resp := metadataFor(t, s, tc.version, tc.allow, tc.topic)
			mt := resp.Topics[0]
			if mt.ErrorCode != tc.wantError {
				t.Fatalf("enabled=%v v%d allow=%v %s: got error %d, want %d", enabled, tc.version, tc.allow, tc.topic, mt.ErrorCode, tc.wantError)
			}
			made := s.topic(tc.topic) != nil
			if made != tc.wantMade {
				t.Fatalf("enabled=%v v%d allow=%v %s: created %v, want %v", enabled, tc.version, tc.allow, tc.topic, made, tc.wantMade)
			}
			if made && (len(mt.Partitions) != 3 || (tc.version >= 10 && mt.TopicID == [16]byte{}) || mt.Partitions[0].Leader != 0) {
				t.Fatalf("%s: got %d partitions id %x leader %d", tc.topic, len(mt.Partitions), mt.TopicID, mt.Partitions[0].Leader)
			}
		}
	}
}

func TestMetadataAllVersions(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "mv", 2, nil)
	id := s.topic("mv").id
	for v := int16(0); v <= 12; v++ {
		resp := metadataFor(t, s, v, false)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Port != int32(s.Addr().(*net.TCPAddr).Port) || resp.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d: brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != 0 {
			t.Fatalf("v%d: controller %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != s.ClusterID()) {
			t.Fatalf("v%d: cluster id %v, want %s", v, resp.ClusterID, s.ClusterID())
		}
		var found *kmsg.MetadataResponseTopic
		for i := range resp.Topics {
			if resp.Topics[i].Topic != nil && *resp.Topics[i].Topic == "mv" {
				found = &resp.Topics[i]
			}
		}
		if found == nil || len(found.Partitions) != 2 {
			t.Fatalf("v%d: topic mv missing from %+v", v, resp.Topics)
		}
		if v >= 10 && found.TopicID != id {
			t.Fatalf("v%d: topic id %x, want %x", v, found.TopicID, id)
		}
	}
	// v1+: an empty list (not null) means no topics.
	empty := kmsg.NewPtrMetadataRequest()
	empty.Version = 1
	empty.Topics = []kmsg.MetadataRequestTopic{}
	rc := dialRaw(t, s)
	rc.send(1, empty)
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	er := empty.ResponseKind().(*kmsg.MetadataResponse)
	decodeResponse(t, er, body)
	if len(er.Topics) != 0 || len(er.Brokers) != 1 {
		t.Fatalf("v1 empty list: %d topics, %d brokers; want 0 and 1", len(er.Topics), len(er.Brokers))
	}
	// v12: by topic ID.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = id
	req.Topics = append(req.Topics, rt)
	unknown := kmsg.NewMetadataRequestTopic()
	unknown.TopicID = coord.NewTopicID()
	req.Topics = append(req.Topics, unknown)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "mv" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", resp.Topics)
	}
}

func TestCreateTopicsValidation(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "exists", 1, nil)
	createTopic(t, cl, "dot.ted", 1, nil)
	long := strings.Repeat("x", 250)
	for i, tc := range []struct {
		name    string
		parts   int32
		rf      int16
		configs map[string]string
		want    *kerr.Error
	}{
		{"ok-1", 2, 1, nil, nil},
		{"ok-defaults", -1, -1, map[string]string{"retention.ms": "1000", "cleanup.policy": "delete"}, nil},
		{"", 1, 1, nil, kerr.InvalidTopicException},
		{".", 1, 1, nil, kerr.InvalidTopicException},
		{"..", 1, 1, nil, kerr.InvalidTopicException},
		{"sp ace", 1, 1, nil, kerr.InvalidTopicException},
		{long, 1, 1, nil, kerr.InvalidTopicException},
		{long[:249], 1, 1, nil, nil},
		{"dot_ted", 1, 1, nil, kerr.InvalidTopicException},
		{"exists", 1, 1, nil, kerr.TopicAlreadyExists},
		{"zero-parts", 0, 1, nil, kerr.InvalidPartitions},
		{"rf-two", 1, 2, nil, kerr.InvalidReplicationFactor},
		{"rf-zero", 1, 0, nil, kerr.InvalidReplicationFactor},
		{"bad-config", 1, 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig},
		{"bad-value", 1, 1, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig},
		{"bad-range", 1, 1, map[string]string{"segment.bytes": "3"}, kerr.InvalidConfig},
		{"compact", 1, 1, map[string]string{"cleanup.policy": "compact"}, nil},
		{"tidy", 1, 1, map[string]string{"cleanup.policy": "tidy"}, kerr.InvalidConfig},
		{"bad-ts-type", 1, 1, map[string]string{"message.timestamp.type": "Whenever"}, kerr.InvalidConfig},
	} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.parts, tc.rf
		for k, v := range tc.configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0]
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if got.ErrorCode != want {
			t.Fatalf("#%d %.20q: got error %v (%v), want %v", i, tc.name, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage, tc.want)
		}
		if want == 0 {
			if got.TopicID == [16]byte{} || got.NumPartitions <= 0 || got.ReplicationFactor != 1 || len(got.Configs) == 0 {
				t.Fatalf("#%d %s: response %+v", i, tc.name, got)
			}
			if s.topic(tc.name) == nil {
				t.Fatalf("#%d %s: not created", i, tc.name)
			}
		} else if tc.want != kerr.TopicAlreadyExists && s.topic(tc.name) != nil {
			t.Fatalf("#%d %s: created despite the error", i, tc.name)
		}
	}
	if got := len(s.topic("ok-defaults").parts); got != 1 {
		t.Fatalf("-1 partitions: got %d, want num.partitions 1", got)
	}

	// Validate-only creates nothing; a duplicate in one request is INVALID_REQUEST.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "validate-only", 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 || s.topic("validate-only") != nil {
		t.Fatalf("validate only: %v %+v created=%v", err, resp, s.topic("validate-only") != nil)
	}
	req.ValidateOnly = false
	req.Topics = append(req.Topics, rt)
	resp, err = req.RequestWith(testCtx(t), cl)
	if err != nil || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || resp.Topics[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate: %v %+v", err, resp)
	}
}

func describeTopic(t *testing.T, cl *kgo.Client, topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("describe %s: error %d", topic, c)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

func TestConfigsRoundTrip(t *testing.T) {
	s := startServer(t, map[string]string{"log.retention.hours": "2"})
	cl := newClient(t, s)
	createTopic(t, cl, "cfg", 1, map[string]string{"segment.bytes": "100000"})
	d := describeTopic(t, cl, "cfg")
	check := func(name, value string, source kmsg.ConfigSource) {
		t.Helper()
		c, ok := d[name]
		if !ok || c.Value == nil || *c.Value != value || c.Source != source {
			t.Fatalf("%s: got %v source %v, want %s source %v", name, c.Value, c.Source, value, source)
		}
	}
	check("segment.bytes", "100000", kmsg.ConfigSourceDynamicTopicConfig)
	check("retention.ms", "7200000", kmsg.ConfigSourceStaticBrokerConfig)
	check("max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig)
	if len(d) != len(topicSettings) {
		t.Fatalf("described %d configs, want %d", len(d), len(topicSettings))
	}
	if syn := d["segment.bytes"].ConfigSynonyms; len(syn) != 2 || syn[0].Name != "segment.bytes" || syn[1].Name != "log.segment.bytes" {
		t.Fatalf("synonyms %+v", syn)
	}

	// AlterConfigs replaces the whole set, applied live.
	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "max.message.bytes", kmsg.StringPtr("200")
	ar.Configs = append(ar.Configs, c)
	alter.Resources = append(alter.Resources, ar)
	aresp, err := alter.RequestWith(testCtx(t), cl)
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %v %+v", err, aresp)
	}
	d = describeTopic(t, cl, "cfg")
	check("max.message.bytes", "200", kmsg.ConfigSourceDynamicTopicConfig)
	check("segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig)
	if sp := produceRaw(t, cl, "cfg", 0, buildBatch(t, segment.CodecNone, 20)); sp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("after max.message.bytes=200: got %d, want MESSAGE_TOO_LARGE", sp.ErrorCode)
	}

	// Unknown config: INVALID_CONFIG, nothing changed.
	c.Name = "bogus"
	alter.Resources[0].Configs = []kmsg.AlterConfigsRequestResourceConfig{c}
	aresp, err = alter.RequestWith(testCtx(t), cl)
	if err != nil || aresp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("alter bogus: %v %+v", err, aresp)
	}

	// Incremental: SET, DELETE, APPEND on a list, APPEND on a non-list.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	set := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	set.Name, set.Op, set.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("60000")
	del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	del.Name, del.Op = "max.message.bytes", kmsg.IncrementalAlterConfigOpDelete
	app := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	app.Name, app.Op, app.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("delete")
	ir.Configs = append(ir.Configs, set, del, app)
	inc.Resources = append(inc.Resources, ir)
	iresp, err := inc.RequestWith(testCtx(t), cl)
	if err != nil || iresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("incremental: %v %+v", err, iresp)
	}
	d = describeTopic(t, cl, "cfg")
	check("retention.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)
	check("max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig)
	if sp := produceRaw(t, cl, "cfg", 0, buildBatch(t, segment.CodecNone, 20)); sp.ErrorCode != 0 {
		t.Fatalf("after delete of max.message.bytes: got %d", sp.ErrorCode)
	}
	bad := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	bad.Name, bad.Op, bad.Value = "retention.ms", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("1")
	inc.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{bad}
	iresp, err = inc.RequestWith(testCtx(t), cl)
	if err != nil || iresp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("append to a long: %v %+v", err, iresp)
	}
	inc.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{set, set}
	iresp, err = inc.RequestWith(testCtx(t), cl)
	if err != nil || iresp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate key: %v %+v", err, iresp)
	}

	// Broker resource: readable, not alterable.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	rr.ConfigNames = []string{"log.retention.hours", "num.partitions"}
	dreq.Resources = append(dreq.Resources, rr)
	dresp, err := dreq.RequestWith(testCtx(t), cl)
	if err != nil || dresp.Resources[0].ErrorCode != 0 || len(dresp.Resources[0].Configs) != 2 {
		t.Fatalf("describe broker: %v %+v", err, dresp)
	}
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	alter.Resources = []kmsg.AlterConfigsRequestResource{ar}
	aresp, err = alter.RequestWith(testCtx(t), cl)
	if err != nil || aresp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("alter broker: %v %+v", err, aresp)
	}
}

func TestDeleteTopicsRemovesData(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "del-a", 2, nil)
	createTopic(t, cl, "del-b", 1, nil)
	produceRaw(t, cl, "del-a", 0, buildBatch(t, segment.CodecNone, 3))
	idB := s.topic("del-b").id
	dir := filepath.Join(s.cfg.MetaDir(), "del-a-0")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 5
	req.TopicNames = []string{"del-a", "missing"}
	rc := dialRaw(t, s)
	rc.send(1, req)
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	dr := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	decodeResponse(t, dr, body)
	if dr.Topics[0].ErrorCode != 0 || dr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete by name: %+v", dr.Topics)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
	// v6: by ID.
	req = kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = idB
	req.Topics = append(req.Topics, rt)
	r6, err := req.RequestWith(testCtx(t), cl)
	if err != nil || r6.Topics[0].ErrorCode != 0 || r6.Topics[0].Topic == nil || *r6.Topics[0].Topic != "del-b" {
		t.Fatalf("delete by id: %v %+v", err, r6)
	}
	if ts := s.topicsSorted(); len(ts) != 1 || ts[0].name != "__consumer_offsets" {
		t.Fatalf("%d topics left, want only __consumer_offsets", len(ts))
	}
	// The name can be used again, with a new ID and no old data.
	createTopic(t, cl, "del-a", 1, nil)
	if fp := fetchRaw(t, cl, "del-a", 0, 0, 1<<20); fp.HighWatermark != 0 {
		t.Fatalf("recreated topic has high watermark %d", fp.HighWatermark)
	}
}

func TestCreatePartitions(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "cp", 1, nil)
	for i, tc := range []struct {
		count    int32
		validate bool
		want     int16
		wantN    int
	}{
		{3, true, 0, 1},
		{3, false, 0, 3},
		{3, false, kerr.InvalidPartitions.Code, 3},
		{2, false, kerr.InvalidPartitions.Code, 3},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = tc.validate
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "cp", tc.count
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Topics[0].ErrorCode != tc.want || len(s.topic("cp").parts) != tc.wantN {
			t.Fatalf("#%d: got error %d and %d partitions, want %d and %d", i, resp.Topics[0].ErrorCode, len(s.topic("cp").parts), tc.want, tc.wantN)
		}
	}
	if sp := produceRaw(t, cl, "cp", 2, buildBatch(t, segment.CodecNone, 1)); sp.ErrorCode != 0 {
		t.Fatalf("produce to new partition: %d", sp.ErrorCode)
	}
}

func TestListOffsetsAndLeaderEpochs(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "lo", 1, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := 0; i < 3; i++ {
		b, err := segment.BuildBatch(segment.BatchSpec{Records: []segment.Record{
			{Timestamp: base + int64(i)*1000, Value: []byte("a")},
			{Timestamp: base + int64(i)*1000 + 500, Value: []byte("b")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		produceRaw(t, cl, "lo", 0, b)
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for i, tc := range []struct {
		ts              int64
		wantOff, wantTS int64
		wantEpoch       int32
	}{
		{-1, 6, -1, 0},
		{-2, 0, -1, 0},
		{-3, 5, base + 2500, 0},
		{base, 0, base, 0},
		{base + 1200, 3, base + 1500, 0},
		{base + 2500, 5, base + 2500, 0},
		{base + 9999, -1, -1, -1},
	} {
		p := list(tc.ts)
		if p.ErrorCode != 0 || p.Offset != tc.wantOff || p.Timestamp != tc.wantTS || p.LeaderEpoch != tc.wantEpoch {
			t.Fatalf("#%d ts %d: got error %d offset %d ts %d epoch %d, want offset %d ts %d epoch %d", i, tc.ts, p.ErrorCode, p.Offset, p.Timestamp, p.LeaderEpoch, tc.wantOff, tc.wantTS, tc.wantEpoch)
		}
	}

	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "lo"
	for _, e := range []int32{0, 5} {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, e
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].LeaderEpoch != 0 || ps[0].EndOffset != 6 {
		t.Fatalf("epoch 0: %+v", ps[0])
	}
	if ps[1].LeaderEpoch != -1 || ps[1].EndOffset != -1 {
		t.Fatalf("epoch 5: %+v", ps[1])
	}
}

func TestDescribeCluster(t *testing.T) {
	s := startServer(t, map[string]string{"broker.id": "7"})
	cl := newClient(t, s)
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.ClusterID != s.ClusterID() || resp.ControllerID != 7 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 {
		t.Fatalf("describe cluster: %+v", resp)
	}
}

func TestRestartKeepsTopicsAndData(t *testing.T) {
	dir := t.TempDir()
	cfg, err := ConfigFromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.listener": "", "log.dirs": dir})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s1.Serve() }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s1.Addr().String()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, "keep", 2, map[string]string{"retention.ms": "123456"})
	produceRaw(t, cl, "keep", 1, buildBatch(t, segment.CodecLZ4, 7))
	cl.Close()
	id, cid := s1.topic("keep").id, s1.ClusterID()
	if _, err := NewServer(cfg); err == nil {
		t.Fatal("a second server opened the same data directory")
	}
	if err := s1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A stray partition directory (a deletion cut short) is removed.
	if err := os.MkdirAll(filepath.Join(dir, "gone-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	s2 := startServerConfig(t, cfg)
	if s2.ClusterID() != cid {
		t.Fatalf("cluster id changed: %s -> %s", cid, s2.ClusterID())
	}
	tp := s2.topic("keep")
	if tp == nil || tp.id != id || len(tp.parts) != 2 || tp.overrides["retention.ms"] != "123456" {
		t.Fatalf("topic after restart: %+v", tp)
	}
	if hw := tp.parts[1].log.HighWatermark(); hw != 7 {
		t.Fatalf("high watermark after restart: %d, want 7", hw)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("stray directory kept: %v", err)
	}
}
