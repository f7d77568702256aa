package broker

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replication throttling (KIP-73), the broker's part: the settings, the
// topic configs naming the throttled replicas, and the run-time change of
// the two rates. The quotas themselves are in package replica
// (throttle.go).
//
//   - leader.replication.throttled.rate and
//     follower.replication.throttled.rate: bytes per second, read from
//     the properties file at start; IncrementalAlterConfigs SET / DELETE
//     (or AlterConfigs) on this broker's resource changes them at run
//     time, as Kafka's dynamic broker configs. A run-time value is kept
//     in memory only: after a restart the properties file's value (or
//     the default, unthrottled) applies again. DescribeConfigs reports a
//     run-time value with source DYNAMIC_BROKER_CONFIG.
//   - leader.replication.throttled.replicas and
//     follower.replication.throttled.replicas: topic configs, "*" or a
//     list of partition:brokerId, as Kafka's
//     ThrottledReplicaListValidator. A broker applies an entry whose
//     brokerId is its own (Kafka's ConfigHandler.parseThrottledPartitions):
//     in the leader list, as the leader of that partition; in the
//     follower list, as a follower of it.

// throttleSettings are the registry entries of replication throttling.
var throttleSettings = []setting{
	{name: "leader.replication.throttled.rate", typ: typeLong, def: strconv.FormatInt(math.MaxInt64, 10), valid: atLeast(0),
		field: func(c *Config) any { return &c.LeaderReplicationThrottledRate },
		doc:   "Bytes per second this broker sends, as a leader, of the replicas leader.replication.throttled.replicas lists to followers outside the ISR (in-sync followers are never slowed, but their bytes count) (9223372036854775807: unthrottled). Also changeable at run time on the broker resource (IncrementalAlterConfigs), not persisted across a restart."},
	{name: "follower.replication.throttled.rate", typ: typeLong, def: strconv.FormatInt(math.MaxInt64, 10), valid: atLeast(0),
		field: func(c *Config) any { return &c.FollowerReplicationThrottledRate },
		doc:   "Bytes per second this broker fetches, as a follower, of the replicas follower.replication.throttled.replicas lists while they are behind the leader's high watermark (9223372036854775807: unthrottled). Also changeable at run time on the broker resource (IncrementalAlterConfigs), not persisted across a restart."},
	{topic: "leader.replication.throttled.replicas", typ: typeList, def: "", dynamic: true, check: checkThrottledReplicas,
		topicSet: func(tc *topicConfig, v string) error { return tc.leaderThrottled.parse(v) },
		doc:      `Replicas throttled on the leader side, as partition:brokerId pairs separated by commas (the broker that leads the partition), or "*" for all: what that leader sends of them counts against its leader.replication.throttled.rate.`},
	{topic: "follower.replication.throttled.replicas", typ: typeList, def: "", dynamic: true, check: checkThrottledReplicas,
		topicSet: func(tc *topicConfig, v string) error { return tc.followerThrottled.parse(v) },
		doc:      `Replicas throttled on the follower side, as partition:brokerId pairs separated by commas (the follower broker), or "*" for all: what that follower fetches of them counts against its follower.replication.throttled.rate.`},
}

// throttleRateKeys are the broker settings changeable at run time.
var throttleRateKeys = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"}

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

// dynamicThrottle holds the rates set at run time on the broker
// resource, nil where none is (the properties file's value applies).
type dynamicThrottle struct {
	mu       sync.Mutex
	leader   *int64
	follower *int64
}

// throttleRateOp is one change of a rate: a value, or nil to delete the
// run-time value.
type throttleRateOp struct {
	key   string
	value *int64
}

// isThrottleRate says key is one of the rates changeable at run time.
func isThrottleRate(key string) bool { return slices.Contains(throttleRateKeys, key) }

// parseThrottleRate checks a SET of a rate (v nil: a DELETE, back to the
// properties file's value).
func parseThrottleRate(key string, v *string, del bool) (throttleRateOp, error) {
	if del {
		return throttleRateOp{key: key}, nil
	}
	if v == nil {
		return throttleRateOp{}, newKafkaError(kerr.InvalidConfig, "broker config %s: null value", key)
	}
	if err := brokerSettingByName[key].validate(*v); err != nil {
		return throttleRateOp{}, newKafkaError(kerr.InvalidConfig, "broker config %s: %v", key, err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(*v), 10, 64)
	return throttleRateOp{key: key, value: &n}, nil
}

// applyThrottleRates applies checked rate changes and hands the rates in
// force to replication.
func (s *Server) applyThrottleRates(ops []throttleRateOp) {
	if len(ops) == 0 {
		return
	}
	d := &s.dynThrottle
	d.mu.Lock()
	for _, op := range ops {
		dst := &d.leader
		if op.key == throttleRateKeys[1] {
			dst = &d.follower
		}
		if (*dst == nil) == (op.value == nil) && (op.value == nil || **dst == *op.value) {
			continue // unchanged
		}
		*dst = op.value
		if op.value == nil {
			s.log.Info("replication throttle rate set back to the properties file's", "config", op.key)
		} else {
			s.log.Info("replication throttle rate set at run time (not persisted)", "config", op.key, "bytes_per_second", *op.value)
		}
	}
	leader, follower := s.throttleRatesLocked()
	d.mu.Unlock()
	if s.repl != nil {
		s.repl.SetThrottledRates(leader, follower)
	}
}

// throttleRatesLocked are the rates in force: the run-time values, else
// the properties file's. Caller holds s.dynThrottle.mu.
func (s *Server) throttleRatesLocked() (leader, follower int64) {
	leader, follower = s.cfg.LeaderReplicationThrottledRate, s.cfg.FollowerReplicationThrottledRate
	if v := s.dynThrottle.leader; v != nil {
		leader = *v
	}
	if v := s.dynThrottle.follower; v != nil {
		follower = *v
	}
	return leader, follower
}

// withDynamicThrottle marks the rate entries of a broker DescribeConfigs
// answer as changeable, with the run-time values where set.
func (s *Server) withDynamicThrottle(entries []configEntry) []configEntry {
	d := &s.dynThrottle
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		var v *int64
		switch e.name {
		case throttleRateKeys[0]:
			v = d.leader
		case throttleRateKeys[1]:
			v = d.follower
		default:
			continue
		}
		e.readOnly = false
		if v != nil {
			e.value, e.source = strconv.FormatInt(*v, 10), kmsg.ConfigSourceDynamicBrokerConfig
			e.synonyms = append([]configSynonym{{name: e.name, value: e.value, source: e.source}}, e.synonyms...)
		}
	}
	return entries
}
