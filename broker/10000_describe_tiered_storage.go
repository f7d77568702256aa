package broker

import (
	"slices"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/tiering"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTieredStorage (Strata's own API, key 10000): v0
//
// The encoding is in package strataapi (doc.go). The key is not listed in
// ApiVersions.
//
// Behavior:
// * Needs DESCRIBE on the cluster, as DescribeLogDirs: denied, the answer
//   is CLUSTER_AUTHORIZATION_FAILED at the top with no topics.
// * Cache*: the chunk cache's counters since the broker started (all -1
//   without tiered storage).
// * Topics null: every partition this broker leads whose topic tiers
//   (remote.storage.enable, or a remote log kept readable after it was
//   turned off), by topic and partition.
// * A listed topic the broker does not know: UNKNOWN_TOPIC_OR_PARTITION on
//   the topic, no partitions. A listed topic with no partitions: every
//   partition of it this broker leads, tiered or not.
// * A listed partition: UNKNOWN_TOPIC_OR_PARTITION when the topic has no
//   such partition, NOT_LEADER_OR_FOLLOWER when this broker does not lead
//   it, KAFKA_STORAGE_ERROR for an offline replica; its figures -1.
// * Per partition: the remote figures from the last manifest known
//   committed (the archiver's, or the one kept while uploads are off; -1
//   when none), the local segment count, the sealed local segments not all
//   remote (pending: count, bytes, age of the oldest by its file's mtime)
//   and the partition's share of the chunk cache's reads.

func init() {
	registerStrata(strataapi.KeyDescribeTieredStorage, 0, 0,
		func() kmsg.Request { return new(strataapi.DescribeTieredStorageRequest) }, handleDescribeTieredStorage)
}

func handleDescribeTieredStorage(s *Server, r *request) (reply, error) {
	req := r.kreq.(*strataapi.DescribeTieredStorageRequest)
	resp := req.ResponseKind().(*strataapi.DescribeTieredStorageResponse)
	resp.CacheHits, resp.CacheJoins, resp.CacheMisses, resp.CacheEvictions, resp.CacheBytes = -1, -1, -1, -1, -1
	if !s.authorize(r, acl.OpDescribe, acl.Cluster) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	var reads map[tiering.PartitionKey]tiering.ReadCounts
	if s.tier != nil && s.tier.reader != nil {
		st := s.tier.reader.Stats().Cache
		resp.CacheHits, resp.CacheJoins, resp.CacheMisses, resp.CacheEvictions, resp.CacheBytes = st.Hits, st.InflightJoins, st.Misses, st.Evictions, st.Bytes
		reads = s.tier.reader.PartitionReadCounts()
	}
	now := time.Now()
	if req.Topics == nil {
		for _, t := range s.topicsSorted() {
			rt := strataapi.DescribeTieredStorageResponseTopic{Topic: t.name}
			for i, p := range t.parts {
				if p == nil || p.tier == nil {
					continue
				}
				if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
					continue
				}
				if p.tier.manifest() == nil && p.tier.archiver() == nil {
					continue
				}
				rt.Partitions = append(rt.Partitions, s.tieredStorageOf(p, int32(i), reads, now))
			}
			if len(rt.Partitions) > 0 {
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return reply{msg: resp}, nil
	}
	for _, qt := range req.Topics {
		rt := strataapi.DescribeTieredStorageResponseTopic{Topic: qt.Topic, Partitions: []strataapi.DescribeTieredStoragePartition{}}
		t := s.topic(qt.Topic)
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		want := qt.Partitions
		if len(want) == 0 {
			for i, p := range t.parts {
				if p == nil {
					continue
				}
				if _, err := p.leaderCheck(s.cfg.BrokerID); err == nil {
					want = append(want, int32(i))
				}
			}
		}
		for _, index := range slices.Compact(slices.Sorted(slices.Values(want))) {
			p, _, err := s.leaderPartition(t, qt.Topic, index)
			if err != nil {
				code, _ := errorCode(err)
				rt.Partitions = append(rt.Partitions, strataapi.NewDescribeTieredStoragePartition(index, code))
				continue
			}
			rt.Partitions = append(rt.Partitions, s.tieredStorageOf(p, index, reads, now))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// tieredStorageOf is the answer for one partition this broker leads.
func (s *Server) tieredStorageOf(p *partition, index int32, reads map[tiering.PartitionKey]tiering.ReadCounts, now time.Time) strataapi.DescribeTieredStoragePartition {
	out := strataapi.NewDescribeTieredStoragePartition(index, 0)
	m := p.tier.manifest()
	if m != nil {
		out.ManifestEpoch = m.LeaderEpoch
		out.RemoteLogStart, out.RemoteLogEnd = m.LogStartOffset, m.EndOffset()
		out.RemoteBytes, out.RemoteSegments = m.Bytes(), int32(len(m.Segments))
		if n := len(m.Segments); n > 0 {
			out.LastUploadMs = m.Segments[n-1].UploadedAt.UnixMilli()
		}
	}
	segs := p.log.Segments()
	out.LocalSegments = int32(len(segs))
	n, bytes, oldest := tiering.Pending(segs, m, now)
	out.PendingSegments, out.PendingBytes, out.OldestPendingMs = int32(n), bytes, oldest.Milliseconds()
	if reads != nil {
		rc := reads[tiering.PartitionKey{Topic: p.topic, Partition: index}]
		out.CacheHits, out.CacheJoins, out.CacheMisses = rc.Hits, rc.InflightJoins, rc.Misses
	}
	return out
}
