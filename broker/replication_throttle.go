package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Replication throttling (KIP-73), the broker's part: the settings, the
// topic configs naming the throttled replicas, and the run-time change of
// the two rates. The quotas themselves are in package replica
// (throttle.go).
//
//   - leader.replication.throttled.rate and
//     follower.replication.throttled.rate: bytes per second, dynamic
//     broker configs (dynamic_broker_config.go: set per broker or as the
//     cluster default, stored in the coordinator, kept across restarts,
//     applied by every broker through replica.Manager.SetThrottledRates).
//   - leader.replication.throttled.replicas and
//     follower.replication.throttled.replicas: topic configs, "*" or a
//     list of partition:brokerId, as Kafka's
//     ThrottledReplicaListValidator. A broker applies an entry whose
//     brokerId is its own (Kafka's ConfigHandler.parseThrottledPartitions):
//     in the leader list, as the leader of that partition; in the
//     follower list, as a follower of it.

// throttleSettings are the registry entries of replication throttling.
var throttleSettings = []setting{
	{name: "leader.replication.throttled.rate", typ: typeLong, def: strconv.FormatInt(math.MaxInt64, 10), valid: atLeast(0), dynamicBroker: true,
		field: func(c *Config) any { return &c.LeaderReplicationThrottledRate },
		doc:   "Bytes per second this broker sends, as a leader, of the replicas leader.replication.throttled.replicas lists to followers outside the ISR (in-sync followers are never slowed, but their bytes count) (9223372036854775807: unthrottled). A dynamic broker config."},
	{name: "follower.replication.throttled.rate", typ: typeLong, def: strconv.FormatInt(math.MaxInt64, 10), valid: atLeast(0), dynamicBroker: true,
		field: func(c *Config) any { return &c.FollowerReplicationThrottledRate },
		doc:   "Bytes per second this broker fetches, as a follower, of the replicas follower.replication.throttled.replicas lists while they are behind the leader's high watermark (9223372036854775807: unthrottled). A dynamic broker config."},
	{topic: "leader.replication.throttled.replicas", typ: typeList, def: "", dynamic: true, check: checkThrottledReplicas,
		topicSet: func(tc *topicConfig, v string) error { return tc.leaderThrottled.parse(v) },
		doc:      `Replicas throttled on the leader side, as partition:brokerId pairs separated by commas (the broker that leads the partition), or "*" for all: what that leader sends of them counts against its leader.replication.throttled.rate.`},
	{topic: "follower.replication.throttled.replicas", typ: typeList, def: "", dynamic: true, check: checkThrottledReplicas,
		topicSet: func(tc *topicConfig, v string) error { return tc.followerThrottled.parse(v) },
		doc:      `Replicas throttled on the follower side, as partition:brokerId pairs separated by commas (the follower broker), or "*" for all: what that follower fetches of them counts against its follower.replication.throttled.rate.`},
}

// throttledReplicas is a parsed leader/follower.replication.throttled.replicas.
type throttledReplicas struct {
	all bool
	// replicas are the partition:brokerId pairs.
	replicas []throttledReplica
}

type throttledReplica struct{ partition, broker int32 }

// parse reads v ("", "*", or "p:b,p:b,..."; spaces around entries
// allowed). An error leaves r unchanged.
func (r *throttledReplicas) parse(v string) error {
	v = strings.TrimSpace(v)
	var out throttledReplicas
	switch v {
	case "":
	case "*":
		out.all = true
	default:
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue // Kafka's validator accepts empty entries
			}
			ps, bs, ok := strings.Cut(e, ":")
			p, perr := strconv.ParseInt(ps, 10, 32)
			b, berr := strconv.ParseInt(bs, 10, 32)
			if !ok || perr != nil || berr != nil || p < 0 || b < 0 || !digits(ps) || !digits(bs) {
				return fmt.Errorf(`value %q must be the literal "*" or a list of replicas in the format partitionId:brokerId,partitionId:brokerId (comma-separated)`, v)
			}
			out.replicas = append(out.replicas, throttledReplica{int32(p), int32(b)})
		}
	}
	*r = out
	return nil
}

// digits says s is a non-empty run of ASCII digits (Kafka's [0-9]+: no
// sign).
func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// covers says partition's replica on broker is throttled.
func (r throttledReplicas) covers(partition, broker int32) bool {
	if r.all {
		return true
	}
	for _, e := range r.replicas {
		if e.partition == partition && e.broker == broker {
			return true
		}
	}
	return false
}

// checkThrottledReplicas validates a throttled replicas list.
func checkThrottledReplicas(v string) error {
	var r throttledReplicas
	return r.parse(v)
}

// applyThrottledReplicas tells a partition's replication whether it is
// throttled under the topic's configs.
func (s *Server) applyThrottledReplicas(p *partition, tc topicConfig) {
	if p == nil || p.repl == nil {
		return
	}
	self := s.cfg.BrokerID
	p.repl.SetThrottled(tc.leaderThrottled.covers(p.index, self), tc.followerThrottled.covers(p.index, self))
}
