package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/broker/e2e/netlab"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNetFaults runs ZooKeeper and three brokers each on a host of its own
// (netlab: a network namespace with its own address; each broker
// advertises a proxy's address on its host, so clients and replication
// follow advertised.listeners), with a topic of netPartitions partitions,
// RF 3 and min.insync.replicas=2, written without pause by an idempotent
// acks=all franz-go producer. It cuts links between hosts, one case after
// the other on the same cluster, healing and waiting for a healthy
// cluster (every partition led by its preferred replica with a full ISR,
// writes acknowledged again) after each:
//
//	LeaderCutFromFollowers  a leader cut from both followers, not from
//	                        ZooKeeper: its ISR shrinks to itself, and no
//	                        write sent after the cut is acknowledged
//	                        until the link heals (min.insync.replicas)
//	LeaderCutFromZooKeeper  a leader (not the controller) cut from
//	                        ZooKeeper only: its session expires, a new
//	                        leader is elected, producers move on to it
//	FollowerCutAndHealed    a follower cut from its leader: it leaves the
//	                        ISR, writes go on, it comes back after healing
//	Asymmetric              the leader's packets to its followers vanish,
//	                        theirs reach it: as LeaderCutFromFollowers
//	ControllerIsolated      the controller cut from ZooKeeper and the
//	                        other brokers: another takes over, its
//	                        partitions get new leaders
//	FlappingLink            a leader-follower link cut and healed every
//	                        0.1 to 2.5 s for netFlapShort (a minute with
//	                        STRATA_CHAOS, as make chaos sets)
//	LossyLinks              jitter, lost chunks and connection resets on
//	                        every broker-to-broker connection (the
//	                        proxies) for netLossyShort (longer with
//	                        STRATA_CHAOS)
//	SlowFollower            with STRATA_CHAOS only: a follower's incoming
//	                        bandwidth limited (tc tbf) below the write
//	                        rate: it leaves the ISRs, and catches up and
//	                        rejoins once the limit is lifted
//	Latency                 200 ms each way between every two brokers
//	                        (the proxies): throughput and ack latency
//	                        logged against the same without latency
//
// With STRATA_NETFAULT_LOGS set (or on failure) every broker's whole
// output and ZooKeeper's log are saved under $TMPDIR/strata-netfault-SEED.
//
// At the end the producer is stopped and flushed, the partitions read
// back, and the history checker holds every acknowledgement against the
// log (nothing lost, duplicated, reordered or inconsistent); every
// replica's log files must be byte-for-byte the same, and the segments in
// the bucket the start of that log; every leader
// change the ZooKeeper watch saw must have elected a member of the ISR it
// replaced; and the proxies must have carried the clients' and the
// replication traffic. Times are logged as NETFAULT lines, not asserted.
func TestNetFaults(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	lab := netlab.New(t)
	e := startNetEnv(t, lab)
	cases := []struct {
		name string
		run  func(*testing.T, *netEnv)
	}{
		{"LeaderCutFromFollowers", netLeaderCutFromFollowers},
		{"LeaderCutFromZooKeeper", netLeaderCutFromZooKeeper},
		{"FollowerCutAndHealed", netFollowerCutAndHealed},
		{"Asymmetric", netAsymmetric},
		{"ControllerIsolated", netControllerIsolated},
		{"FlappingLink", netFlappingLink},
		{"LossyLinks", netLossyLinks},
		{"SlowFollower", netSlowFollower},
		{"Latency", netLatency},
	}
	for _, tc := range cases {
		start := time.Now()
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
		settled := e.settle(t)
		t.Logf("NETFAULT case=%s took_ms=%d healthy_after_ms=%d", tc.name, time.Since(start).Milliseconds(), settled.Milliseconds())
	}
	e.finish(t)
}

const (
	netPartitions = 3
	// netLag is replica.lag.time.max.ms.
	netLag = 2 * time.Second
	// netInterval is the producer's send interval per partition.
	netInterval = 10 * time.Millisecond
	// netBound bounds each wait for a condition (ISR change, election,
	// acknowledgements).
	netBound = 60 * time.Second
	// netFlapShort and netFlapLong are how long the link flaps.
	netFlapShort = 6 * time.Second
	netFlapLong  = time.Minute
	// netSegmentBytes is the topic's segment.bytes: small, so that
	// sealed segments are uploaded to the bucket during the run.
	netSegmentBytes = 64 << 10
	// netLossyShort and netLossyLong are how long the links are lossy.
	netLossyShort = 4 * time.Second
	netLossyLong  = 45 * time.Second
	// netSlowRate is the slow follower's incoming bandwidth, bit/s:
	// below what the producer writes to the partitions it follows.
	netSlowRate = 32 << 10
	// netLatencyAdded is the one-way latency of the Latency case.
	netLatencyAdded = 200 * time.Millisecond
)

// netEnv is what the cases share.
type netEnv struct {
	c     *Cluster
	lab   *netlab.Lab
	zw    *zkWatch
	prod  *seqProducer
	hist  *history.History // the burst producer's records; the rest at the end
	topic string
	parts []int32
	// long is set by STRATA_CHAOS (make chaos): the longer forms.
	long bool
	rng  *rand.Rand
	seed int64
	// elections counts the leader changes the cases forced and saw.
	elections int
}

func startNetEnv(t *testing.T, lab *netlab.Lab) *netEnv {
	t.Helper()
	c := StartNetCluster(t, lab, 3, fmt.Sprintf("replica.lag.time.max.ms=%d", netLag.Milliseconds()))
	e := &netEnv{c: c, lab: lab, topic: "netfaults", hist: history.New(), long: os.Getenv("STRATA_CHAOS") != ""}
	e.seed = time.Now().UnixNano()
	e.rng = rand.New(rand.NewSource(e.seed))
	t.Logf("NETFAULT seed=%d long=%v", e.seed, e.long)
	for p := range int32(netPartitions) {
		e.parts = append(e.parts, p)
	}
	c.createTopicWith(t, e.topic, netPartitions, 3, map[string]string{
		"min.insync.replicas":   "2",
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.Itoa(netSegmentBytes),
	})
	c.checkAdvertised(t)
	e.zw = c.watchZK(t, e.topic, netPartitions)
	// Registered after the brokers' cleanups: runs before they stop.
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("STRATA_NETFAULT_LOGS") != "" {
			t.Logf("NETFAULT states: %s", e.zw.allStates())
			c.saveLogs(t, fmt.Sprintf("strata-netfault-%d", e.seed))
		}
	})
	e.prod = c.startSeqProducer(t, e.topic, e.parts, netInterval)
	e.prod.acks.waitAcks(t, e.parts, time.Time{}, 20, netBound, "at the start")
	e.settle(t)
	return e
}

// settle heals every link and waits until the cluster is healthy: every
// broker agrees on a full ISR for every partition, each led by its
// preferred replica, and every partition acknowledges writes sent after
// that. It returns how long that took.
func (e *netEnv) settle(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	e.lab.HealAll()
	if _, msg := e.c.waitHealthy(t, 90*time.Second, e.topic, netPartitions); msg != "" {
		t.Fatalf("the cluster did not recover within 90s of healing: %s", msg)
	}
	e.c.waitFullISR(t, netBound, e.topic, netPartitions, true)
	e.zw.waitFor(t, netBound, "ZooKeeper to show a full ISR on every partition", func() string {
		for _, p := range e.parts {
			if st, ok := e.zw.state(p); !ok || len(st.ISR) != 3 || st.Leader < 1 {
				return fmt.Sprintf("partition %d: %+v", p, st)
			}
		}
		return ""
	})
	e.prod.acks.waitAcks(t, e.parts, time.Now(), 5, netBound, "after healing")
	return time.Since(start)
}

// leader is partition p's leader, from ZooKeeper.
func (e *netEnv) leader(t *testing.T, p int32) int32 {
	t.Helper()
	st, ok := e.zw.state(p)
	if !ok || st.Leader < 1 {
		t.Fatalf("partition %d has no leader in ZooKeeper: %+v", p, st)
	}
	return st.Leader
}

// others lists the broker ids other than id.
func (e *netEnv) others(id int32) []int32 {
	var out []int32
	for _, b := range e.c.IDs() {
		if b != id {
			out = append(out, b)
		}
	}
	return out
}

// ledBy lists the partitions broker id leads, from ZooKeeper.
func (e *netEnv) ledBy(id int32) []int32 {
	var out []int32
	for _, p := range e.parts {
		if st, ok := e.zw.state(p); ok && st.Leader == id {
			out = append(out, p)
		}
	}
	return out
}

// sentSince counts the records sent (on any partition) after since.
func (e *netEnv) sentSince(since time.Time) int {
	e.prod.acks.mu.Lock()
	defer e.prod.acks.mu.Unlock()
	n := 0
	for _, outs := range e.prod.acks.recs {
		for _, o := range outs {
			if o.sentAt.After(since) {
				n++
			}
		}
	}
	return n
}

// hold keeps the faults in place until at least d has passed and at
// least records records were sent since it began (so that traffic
// crossed them however slow the machine is), bounded by netBound.
func (e *netEnv) hold(t *testing.T, what string, d time.Duration, records int) {
	t.Helper()
	from := time.Now()
	poll.Until(t, d+netBound, what, func() bool {
		return time.Since(from) >= d && e.sentSince(from) >= records
	})
}

// ackedSentAfter counts the records of p sent after since and
// acknowledged before until.
func (e *netEnv) ackedSentAfter(p int32, since, until time.Time) int {
	e.prod.acks.mu.Lock()
	defer e.prod.acks.mu.Unlock()
	n := 0
	for _, o := range e.prod.acks.recs[p] {
		if o.acked && o.sentAt.After(since) && o.doneAt.Before(until) {
			n++
		}
	}
	return n
}

// lastAckAfter is when the last acknowledgement of p that came after
// since came (zero if none).
func (e *netEnv) lastAckAfter(p int32, since time.Time) time.Time {
	e.prod.acks.mu.Lock()
	defer e.prod.acks.mu.Unlock()
	var last time.Time
	for _, o := range e.prod.acks.recs[p] {
		if o.acked && o.doneAt.After(since) && o.doneAt.After(last) {
			last = o.doneAt
		}
	}
	return last
}

// sinceMs is t-from in milliseconds, -1 for a zero t.
func sinceMs(from, t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.Sub(from).Milliseconds()
}

// isLeaderAlone is a state whose ISR is its leader l alone.
func isLeaderAlone(l int32) func(partState) bool {
	return func(st partState) bool { return st.Leader == l && slices.Equal(st.ISR, []int32{l}) }
}

// cutLeaderAway is the body of LeaderCutFromFollowers and Asymmetric:
// cut (one way or both) partition p's leader from its followers, wait
// until its ISR is the leader alone, check that the followers' own
// partitions go on taking writes, hold the cut until they have, and
// check that no record of p sent after the cut was acknowledged before
// the link healed.
func (e *netEnv) cutLeaderAway(t *testing.T, name string, p int32, cut func(l int32, fs []int32)) {
	l := e.leader(t, p)
	fs := e.others(l)
	cutAt := time.Now()
	cut(l, fs)
	cutDone := time.Now()
	shrunk := e.zw.waitState(t, netBound, p, fmt.Sprintf("ISR [%d], the leader alone", l), isLeaderAlone(l))
	var theirs []int32
	for _, f := range fs {
		theirs = append(theirs, e.ledBy(f)...)
	}
	if len(theirs) > 0 {
		e.prod.acks.waitAcks(t, theirs, time.Now(), 5, netBound, "on the partitions the followers lead, during the cut")
	}
	healAt := time.Now()
	if n := e.ackedSentAfter(p, cutDone, healAt); n > 0 {
		t.Errorf("partition %d: %d records sent after the leader was cut from its followers were acknowledged (acks=all, min.insync.replicas=2) before the link healed", p, n)
	}
	lastAck := e.lastAckAfter(p, cutAt)
	if !lastAck.Before(healAt) {
		lastAck = time.Time{}
	}
	e.lab.HealAll()
	rejoined := e.zw.waitState(t, netBound, p, "a full ISR after healing", func(st partState) bool { return len(st.ISR) == 3 })
	e.prod.acks.waitAcks(t, []int32{p}, time.Now(), 5, netBound, "after healing")
	t.Logf("NETFAULT case=%s states since the cut: %s", name, e.zw.statesSince(p, cutAt))
	t.Logf("NETFAULT case=%s partition=%d leader=%d last_ack_after_cut_ms=%d isr_shrunk_ms=%d cut_held_ms=%d isr_full_after_heal_ms=%d",
		name, p, l, sinceMs(cutAt, lastAck), (cutDone.Sub(cutAt) + shrunk).Milliseconds(), time.Since(cutAt).Milliseconds()-rejoined.Milliseconds(), rejoined.Milliseconds())
}

// netLeaderCutFromFollowers: partition 0's leader cut from both
// followers (both ways), still talking to ZooKeeper and the clients.
func netLeaderCutFromFollowers(t *testing.T, e *netEnv) {
	e.cutLeaderAway(t, "leader-cut-from-followers", 0, func(l int32, fs []int32) {
		e.lab.Isolate(e.c.host(l), e.c.brokerHosts(fs...)...)
	})
}

// netAsymmetric: partition 2's leader hears its followers, they do not
// hear it.
func netAsymmetric(t *testing.T, e *netEnv) {
	e.cutLeaderAway(t, "asymmetric", 2, func(l int32, fs []int32) {
		for _, f := range fs {
			e.lab.Cut(e.c.host(l), e.c.host(f))
		}
	})
}

// netLeaderCutFromZooKeeper: a leader that is not the controller loses
// ZooKeeper but keeps its clients and followers: its session expires, the
// controller elects a new leader from the ISR, and the producer's writes
// are acknowledged again (by the new leader).
func netLeaderCutFromZooKeeper(t *testing.T, e *netEnv) {
	ctl := e.zw.controller()
	var l int32
	var p int32 = -1
	for _, b := range e.c.IDs() {
		if led := e.ledBy(b); b != ctl && len(led) > 0 {
			l, p = b, led[0]
			break
		}
	}
	if p < 0 {
		t.Fatalf("no broker but the controller (%d) leads a partition", ctl)
	}
	e.lab.Partition(e.c.host(l), e.c.net.zk)
	expired := e.zw.waitFor(t, netBound, fmt.Sprintf("broker %d's registration to go", l), func() string {
		if r := e.zw.registered(); slices.Contains(r, l) {
			return fmt.Sprintf("registered %v", r)
		}
		return ""
	})
	elected := e.zw.waitState(t, netBound, p, fmt.Sprintf("a leader other than %d", l), func(st partState) bool { return st.Leader > 0 && st.Leader != l })
	electedAt := time.Now()
	e.elections++
	e.prod.acks.waitAcks(t, []int32{p}, electedAt, 5, netBound, "from the new leader")
	movedOn := time.Since(electedAt)
	st, _ := e.zw.state(p)
	e.lab.HealAll()
	back := e.zw.waitFor(t, netBound, fmt.Sprintf("broker %d to register again", l), func() string {
		if r := e.zw.registered(); !slices.Contains(r, l) {
			return fmt.Sprintf("registered %v", r)
		}
		return ""
	})
	t.Logf("NETFAULT case=leader-cut-from-zookeeper partition=%d leader=%d new_leader=%d session_expired_ms=%d new_leader_ms=%d acks_from_new_leader_after_ms=%d registered_again_after_heal_ms=%d",
		p, l, st.Leader, expired.Milliseconds(), (expired + elected).Milliseconds(), movedOn.Milliseconds(), back.Milliseconds())
}

// netFollowerCutAndHealed: a follower of partition 1 cut from its
// leader (both ways): it leaves that partition's ISR, which keeps
// min.insync.replicas with the other follower, so writes go on; after
// healing it catches up and rejoins.
func netFollowerCutAndHealed(t *testing.T, e *netEnv) {
	const p = 1
	l := e.leader(t, p)
	f := e.others(l)[0]
	cutAt := time.Now()
	e.lab.Partition(e.c.host(f), e.c.host(l))
	left := e.zw.waitState(t, netBound, p, fmt.Sprintf("ISR without broker %d", f), func(st partState) bool {
		return st.Leader == l && len(st.ISR) == 2 && !slices.Contains(st.ISR, f)
	})
	shrunkAt := time.Now()
	e.prod.acks.waitAcks(t, []int32{p}, shrunkAt, 5, netBound, "with the follower out of the ISR")
	writesOn := time.Since(shrunkAt)
	healAt := time.Now()
	e.lab.HealAll()
	rejoined := e.zw.waitState(t, netBound, p, fmt.Sprintf("broker %d back in the ISR", f), func(st partState) bool { return slices.Contains(st.ISR, f) })
	t.Logf("NETFAULT case=follower-cut partition=%d leader=%d follower=%d left_isr_ms=%d acks_without_it_after_ms=%d cut_held_ms=%d rejoined_after_heal_ms=%d",
		p, l, f, left.Milliseconds(), writesOn.Milliseconds(), healAt.Sub(cutAt).Milliseconds(), rejoined.Milliseconds())
}

// netControllerIsolated: the controller cut from ZooKeeper and the other
// brokers. Another broker becomes controller, the isolated one's
// partitions get new leaders, and every partition takes writes.
func netControllerIsolated(t *testing.T, e *netEnv) {
	ctl := e.zw.controller()
	if ctl < 1 {
		t.Fatalf("no controller in ZooKeeper")
	}
	led := e.ledBy(ctl)
	cutAt := time.Now()
	e.lab.Isolate(e.c.host(ctl), append(e.c.brokerHosts(e.others(ctl)...), e.c.net.zk)...)
	moved := e.zw.waitFor(t, netBound, "another controller", func() string {
		if c := e.zw.controller(); c > 0 && c != ctl {
			return ""
		}
		return fmt.Sprintf("controller %d", e.zw.controller())
	})
	newCtl := e.zw.controller()
	for _, p := range led {
		e.zw.waitState(t, netBound, p, fmt.Sprintf("a leader other than %d", ctl), func(st partState) bool { return st.Leader > 0 && st.Leader != ctl })
		e.elections++
	}
	electedAt := time.Now()
	e.prod.acks.waitAcks(t, e.parts, electedAt, 5, netBound, "with the controller isolated")
	t.Logf("NETFAULT case=controller-isolated controller=%d new_controller=%d its_partitions=%v new_controller_ms=%d new_leaders_ms=%d acks_everywhere_after_ms=%d",
		ctl, newCtl, led, moved.Milliseconds(), electedAt.Sub(cutAt).Milliseconds(), time.Since(electedAt).Milliseconds())
}

// netFlappingLink: partition 0's leader and one follower, the link
// between them cut and healed over and over (each state held 0.1 to
// 2.5 s) for netFlapShort, or netFlapLong with STRATA_CHAOS.
func netFlappingLink(t *testing.T, e *netEnv) {
	const p = 0
	l := e.leader(t, p)
	f := e.others(l)[0]
	dur := netFlapShort
	if e.long {
		dur = netFlapLong
	}
	start := time.Now()
	until := start.Add(dur)
	flaps := 0
	// Some holds are past replica.lag.time.max.ms (the follower leaves
	// the ISR), most are not; the last is cut short at the end.
	hold := func() {
		d := min(time.Duration(100+e.rng.Intn(2400))*time.Millisecond, max(time.Until(until), 0))
		e.hold(t, "a record sent across the flapping link's state", d, 1)
	}
	for time.Now().Before(until) && flaps < 1000 {
		e.lab.Partition(e.c.host(l), e.c.host(f))
		hold()
		e.lab.Heal(e.c.host(l), e.c.host(f))
		hold()
		flaps++
	}
	end := time.Now()
	e.zw.mu.Lock()
	changes := 0
	for _, st := range e.zw.mu.states[p] {
		if st.at.After(start) {
			changes++
		}
	}
	e.zw.mu.Unlock()
	t.Logf("NETFAULT case=flapping partition=%d leader=%d follower=%d flaps=%d flapping_ms=%d acks_during=%d state_changes=%d",
		p, l, f, flaps, end.Sub(start).Milliseconds(), e.prod.acks.acksBetween(p, start, end), changes)
}

// brokerFaults sets f on every broker's proxy for the connections from
// every other broker (the replication streams).
func (e *netEnv) brokerFaults(f netlab.Faults) {
	for i, px := range e.c.net.proxies {
		for j, h := range e.c.net.hosts {
			if i != j {
				px.Set(h, f)
			}
		}
	}
}

// resets sums the connection resets the proxies made.
func (e *netEnv) resets() int {
	n := 0
	for _, px := range e.c.net.proxies {
		for _, st := range px.Stats() {
			n += st.Resets
		}
	}
	return n
}

// netLossyLinks: every broker-to-broker connection gets 20 ± 15 ms of
// delay, 2% of its chunks held back as if lost and
// retransmitted, and a reset with probability 0.2% per chunk, while the
// producer writes; then the links are clean again (settle checks that
// the cluster recovers).
func netLossyLinks(t *testing.T, e *netEnv) {
	dur := netLossyShort
	if e.long {
		dur = netLossyLong
	}
	resets0 := e.resets()
	start := time.Now()
	e.brokerFaults(netlab.Faults{Latency: 20 * time.Millisecond, Jitter: 15 * time.Millisecond, Loss: 0.02, Reset: 0.002})
	e.hold(t, "records sent across the lossy links", dur, 20)
	end := time.Now()
	e.brokerFaults(netlab.Faults{})
	acked := 0
	for _, p := range e.parts {
		acked += e.prod.acks.acksBetween(p, start, end)
	}
	t.Logf("NETFAULT case=lossy duration_ms=%d acks_during=%d resets=%d", end.Sub(start).Milliseconds(), acked, e.resets()-resets0)
}

// netSlowFollower: broker 3's incoming bandwidth limited to netSlowRate
// (tc tbf on its link), below the producer's rate: it falls out of the
// ISRs of the partitions it follows, writes go on with the two others,
// and once the limit is lifted it catches up and rejoins (settle). Only
// with STRATA_CHAOS.
func netSlowFollower(t *testing.T, e *netEnv) {
	if !e.long {
		t.Skip("the slow follower case runs with STRATA_CHAOS (make chaos)")
	}
	const slow = 3
	var followed []int32
	for _, p := range e.parts {
		if e.leader(t, p) != slow {
			followed = append(followed, p)
		}
	}
	start := time.Now()
	e.lab.LimitIngress(e.c.host(slow), netSlowRate)
	for _, p := range followed {
		e.zw.waitState(t, 2*netBound, p, fmt.Sprintf("ISR without the slow broker %d", slow), func(st partState) bool {
			return len(st.ISR) == 2 && !slices.Contains(st.ISR, slow)
		})
	}
	left := time.Since(start)
	e.prod.acks.waitAcks(t, followed, time.Now(), 5, netBound, "without the slow follower")
	e.lab.ClearLimits(e.c.host(slow))
	lifted := time.Now()
	for _, p := range followed {
		e.zw.waitState(t, 2*netBound, p, fmt.Sprintf("the slow broker %d back in the ISR", slow), func(st partState) bool { return slices.Contains(st.ISR, slow) })
	}
	t.Logf("NETFAULT case=slow-follower broker=%d rate_bit_s=%d partitions=%v left_isr_ms=%d rejoined_after_lift_ms=%d",
		slow, netSlowRate, followed, left.Milliseconds(), time.Since(lifted).Milliseconds())
}

// netLatency measures the producer with and without netLatencyAdded
// between every two brokers (the proxies delay what each broker's host
// sends to another broker's, both ways; the clients' traffic is not
// delayed): the steady producer's throughput and ack latency over a
// window, and a burst of 1 KiB records to partition 0.
func netLatency(t *testing.T, e *netEnv) {
	window, burst := 3*time.Second, 1000
	if e.long {
		window, burst = 20*time.Second, 5000
	}
	base := e.measure(t, "none", window, burst)
	e.brokerFaults(netlab.Faults{Latency: netLatencyAdded})
	slow := e.measure(t, netLatencyAdded.String(), window, burst)
	e.brokerFaults(netlab.Faults{})
	t.Logf("NETFAULT case=latency added=none %s", base)
	t.Logf("NETFAULT case=latency added=%v %s", netLatencyAdded, slow)
}

// measure is one window of the steady producer and one burst.
func (e *netEnv) measure(t *testing.T, label string, window time.Duration, n int) string {
	t.Helper()
	from := time.Now()
	e.hold(t, "records sent in the "+label+" window", window, 20)
	to := time.Now()
	// Wait (bounded) for the records sent in the window to be answered;
	// the last count is reported either way.
	var lats []time.Duration
	acked, sent := 0, 0
	poll.For(netBound, func() bool {
		lats, acked, sent = nil, 0, 0
		pending := false
		for _, outs := range e.prod.acks.snapshot() {
			for _, o := range outs {
				if o.sentAt.Before(from) || !o.sentAt.Before(to) {
					continue
				}
				sent++
				switch {
				case o.acked:
					acked++
					lats = append(lats, o.doneAt.Sub(o.sentAt))
				case !o.done:
					pending = true
				}
			}
		}
		return !pending
	})
	steady := fmt.Sprintf("steady_sent=%d steady_acked=%d steady_acks_per_s=%.0f steady_p50_ms=%d steady_p99_ms=%d",
		sent, acked, float64(acked)/to.Sub(from).Seconds(), pct(lats, 50).Milliseconds(), pct(lats, 99).Milliseconds())
	return steady + " " + e.burst(t, label, n)
}

// burst produces n records of 1 KiB to partition 0 through a client of
// its own (idempotent, acks=all), recorded in the history, and describes
// its throughput and ack latency.
func (e *netEnv) burst(t *testing.T, label string, n int) string {
	t.Helper()
	// Uncompressed, so that the bytes replicated are the bytes produced.
	cl := e.c.newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	tp := history.TP{Topic: e.topic, Partition: 0}
	producer := "burst " + label
	pad := strings.Repeat("x", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*netBound)
	defer cancel()
	lats := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	start := time.Now()
	for i := range n {
		v := fmt.Sprintf("burst-%s-%06d-%s", label, i, pad)
		e.hist.Sent(producer, tp, v)
		sentAt := time.Now()
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: e.topic, Partition: 0, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				e.hist.Answered(tp, v, history.Unknown, -1, err.Error())
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			e.hist.Answered(tp, v, history.Acked, r.Offset, "")
			lats[i] = time.Since(sentAt)
		})
	}
	wg.Wait()
	took := time.Since(start)
	if failed > 0 {
		t.Errorf("burst %s: %d of %d records failed", label, failed, n)
	}
	return fmt.Sprintf("burst_records=%d burst_ms=%d burst_mib_per_s=%.2f burst_p50_ms=%d burst_p99_ms=%d",
		n, took.Milliseconds(), float64(n)*float64(len(pad)+20)/took.Seconds()/(1<<20), pct(lats, 50).Milliseconds(), pct(lats, 99).Milliseconds())
}

// pct is the q-th percentile of ds (0 if empty).
func pct(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*q/100)]
}

// finish stops the producer, reads the topic back and checks it: the
// history, the replicas' bytes, the elections and the proxies' traffic.
func (e *netEnv) finish(t *testing.T) {
	t.Helper()
	sent := e.prod.stop(t)
	logs := e.c.readLog(t, e.topic, e.parts)
	addProduces(e.hist, "franz-go", e.topic, sent)
	rep := e.hist.Check(finalLog(e.topic, logs))
	t.Logf("NETFAULT_HISTORY %s", rep)
	if !rep.OK() {
		t.Errorf("the history checker found %s; first problems:\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
	if final := failedErrors(sent); len(final) > 0 {
		t.Errorf("produces failed (%s); the idempotent producer (unlimited retries) should have retried them to success", fmtCounts(final))
	}
	sizes := e.c.compareReplicas(t, e.topic, e.parts, 30*time.Second)
	remote, uploaded := e.c.compareRemote(t, e.topic, e.parts, netBound)
	checked, unseen := e.zw.checkElections(t)
	if checked+unseen < e.elections {
		// A watch that saw fewer leader changes than the cases made
		// saw nothing.
		t.Errorf("the ZooKeeper watch saw %d leader changes, want at least the %d elections of the cases", checked+unseen, e.elections)
	}
	t.Logf("NETFAULT_END replicas_identical_bytes=%v remote_bytes_identical=%v uploads_caught_up_ms=%d leader_changes_checked=%d leader_changes_between_unseen_versions=%d",
		sizes, remote, uploaded.Milliseconds(), checked, unseen)
	t.Logf("NETFAULT_PROXIES %s", e.c.proxyTraffic(t))
	st := e.c.chaosBrokerStats(e.topic)
	t.Logf("NETFAULT_BROKERS %s", st.summary)
	if len(st.panics) > 0 {
		t.Errorf("brokers logged panics (recovered or not) or data races: %v", st.panics)
	}
}
