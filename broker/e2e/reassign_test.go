package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment/poll"
)

// TestReassignment moves partitions of a replicated topic (RF 2) between
// three real brokers on real ZooKeeper while an idempotent acks=all
// producer and a consumer group run, and ends with the history checker:
//
//   - partition 0 moves from [1,2] to [2,3] with `strata topic reassign
//     --execute`, listed by `--list` until done; then its replicas and ISR
//     are [2,3] and broker 1 has deleted its directory;
//   - partition 1 moves from [2,3] to [3,1]: its leader, broker 2, is
//     removed, so broker 3 leads at a higher leader epoch;
//   - partition 3 ([K,X], K the controller) is reassigned to [X,Y] while
//     broker Y is paused (so the move stays pending) and cancelled with
//     `--cancel`: it returns to its original replicas;
//   - partition 2 ([K,X]) is reassigned to [X,Y] while Y is paused, the
//     controller K is killed with SIGKILL, Y resumed: the new controller
//     completes the move, and K, restarted, deletes its copy;
//   - partition 3 (back on [K,X]) is reassigned to [X,Y] with the copy to
//     Y throttled (leader.replication.throttled.rate 20 KB/s), and Y, the
//     joining broker, is killed with SIGKILL while it copies: the move
//     stays pending, and completes once Y is restarted and caught up.
//
// The long form (make chaos): STRATA_CHAOS_REASSIGN_ROUNDS=N rounds more,
// each moving every partition to another pair of brokers, the controller
// killed with SIGKILL and restarted while the round's moves are under way.
func TestReassignment(t *testing.T) {
	c := StartCluster(t, 3)
	const topic = "moves"
	k := c.controllerID(t)
	others := slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == k })
	x, y := others[0], others[1]
	t.Logf("controller %d; X=%d Y=%d", k, x, y)
	c.createTopicAssigned(t, topic, [][]int32{{1, 2}, {2, 3}, {k, x}, {k, x}})
	c.waitFullISR(t, 30*time.Second, topic, 4, true)

	all := []int32{0, 1, 2, 3}
	prod := c.startSeqProducer(t, topic, all, 20*time.Millisecond)
	hist := history.New()
	cons := c.startChaosConsumer(t, topic, "reassign-group", hist)
	prod.acks.waitAcks(t, all, time.Time{}, 20, 30*time.Second, "acknowledgements before the moves")

	plan := filepath.Join(t.TempDir(), "plan.json")
	c.reassignWithCLI(t, plan, topic, 0, []int32{2, 3})
	c.waitReassigned(t, topic, 0, []int32{2, 3})
	waitGoneDir(t, c.Broker(1), topic, 0)

	before := c.partitionMeta(t, topic, 1)
	c.alterReassignment(t, topic, 1, []int32{3, 1})
	c.waitReassigned(t, topic, 1, []int32{3, 1})
	after := c.partitionMeta(t, topic, 1)
	if after.Leader != 3 || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("partition 1: leader %d at epoch %d, want 3 above epoch %d", after.Leader, after.LeaderEpoch, before.LeaderEpoch)
	}
	waitGoneDir(t, c.Broker(2), topic, 1)

	c.cancelWhilePending(t, plan, topic, 3, []int32{x, y}, y)
	c.killControllerWhilePending(t, topic, 2, k, x, y)
	c.killJoiningWhileCopying(t, topic, 3, []int32{x, y}, y)
	if n := reassignRounds(t); n > 0 {
		c.reassignRounds(t, topic, 4, n)
	}

	// The end: the producer flushed and stopped, the log checked.
	c.waitFullISR(t, 60*time.Second, topic, 4, false)
	sent := prod.stop(t)
	logs := c.readLog(t, topic, all)
	cons.finish(t, logs)
	addProduces(hist, "franz-go", topic, sent)
	rep := hist.Check(finalLog(topic, logs))
	t.Logf("history: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %s", rep)
	}
}

// cancelWhilePending reassigns partition p to target, which adds broker
// paused, while paused is stopped (SIGSTOP), so that the move cannot
// complete; checks it is listed; cancels it with the CLI; and checks the
// partition is back on its original replicas.
func (c *Cluster) cancelWhilePending(t *testing.T, plan, topic string, p int32, target []int32, paused int32) {
	t.Helper()
	orig := c.partitionMeta(t, topic, p).Replicas
	view := c.without(paused)
	c.alterWhilePaused(t, view, topic, p, target, paused)
	listed := view.listReassignments(t, topic, p)
	if !slices.Contains(listed.AddingReplicas, paused) {
		t.Fatalf("partition %d: listed %+v, want broker %d being added", p, listed, paused)
	}
	writeReassignPlan(t, plan, topic, p, target)
	out := runCmd(t, 30*time.Second, "", strataBin, "topic", "reassign", "--cancel", "--file", plan, "--bootstrap-server", strings.Join(view.LiveAddrs(), ","))
	if !strings.Contains(out, fmt.Sprintf("Successfully cancelled the reassignment of %s-%d.", topic, p)) {
		t.Fatalf("cancel: %q", out)
	}
	view.waitNoReassignment(t, topic, p)
	md := view.partitionMeta(t, topic, p)
	if !sameMembers(md.Replicas, orig) {
		t.Fatalf("partition %d after cancel: replicas %v, want the original %v", p, md.Replicas, orig)
	}
	c.resumeBroker(t, paused)
	c.waitAllSee(t, 60*time.Second, 3)
	c.waitReassigned(t, topic, p, md.Replicas)
	if _, err := os.Stat(partitionDir(c.Broker(paused), topic, p)); err == nil {
		t.Errorf("broker %d has a directory of %s-%d after the cancel", paused, topic, p)
	}
	t.Logf("partition %d: cancelled; back on %v", p, md.Replicas)
}

// killControllerWhilePending reassigns partition p from [k,x] to [x,y]
// with y paused, kills the controller k with SIGKILL, resumes y, and
// checks the next controller completes the move; k, restarted, deletes
// its copy.
func (c *Cluster) killControllerWhilePending(t *testing.T, topic string, p, k, x, y int32) {
	t.Helper()
	view := c.without(y)
	c.alterWhilePaused(t, view, topic, p, []int32{x, y}, y)
	killed := time.Now()
	c.Broker(k).Kill(t)
	live := c.without(y, k)
	live.WaitMetadata(t, 60*time.Second, "a new controller", func(md kadm.Metadata) string {
		if md.Controller < 0 || md.Controller == k {
			return fmt.Sprintf("controller %d", md.Controller)
		}
		return ""
	})
	t.Logf("new controller elected %v after the kill", time.Since(killed).Round(time.Millisecond))
	if l := live.listReassignments(t, topic, p); !slices.Contains(l.AddingReplicas, y) {
		t.Fatalf("reassignment lost in the failover: %+v", l)
	}
	c.resumeBroker(t, y)
	c.without(k).waitReassigned(t, topic, p, []int32{x, y})
	t.Logf("partition %d: moved to [%d %d] by the next controller %v after the kill", p, x, y, time.Since(killed).Round(time.Millisecond))
	c.Broker(k).Restart(t)
	c.waitAllSee(t, 60*time.Second, 3)
	waitGoneDir(t, c.Broker(k), topic, p)
}

// killJoiningWhileCopying reassigns partition p to target, which adds
// broker joining, with the leaders' replication throttled so that the
// copy takes a while; once joining holds part of the partition it is
// killed with SIGKILL: the reassignment stays pending with joining being
// added, and completes after joining restarts (throttle lifted).
func (c *Cluster) killJoiningWhileCopying(t *testing.T, topic string, p int32, target []int32, joining int32) {
	t.Helper()
	orig := c.partitionMeta(t, topic, p).Replicas
	const rate = 20_000 // bytes/s: a few seconds of copy for this partition
	c.setThrottle(t, topic, fmt.Sprint(rate))
	c.alterReassignment(t, topic, p, target)
	dir := partitionDir(c.Broker(joining), topic, p)
	var copied int64
	if !poll.For(60*time.Second, func() bool {
		copied = growDirLogBytes(dir)
		return copied > 0
	}) {
		t.Fatalf("broker %d copied nothing of %s-%d in 60s", joining, topic, p)
	}
	c.Broker(joining).Kill(t)
	t.Logf("partition %d: joining broker %d killed with %d bytes copied", p, joining, copied)
	live := c.without(joining)
	if l := live.listReassignments(t, topic, p); !slices.Contains(l.AddingReplicas, joining) {
		if l.Replicas == nil {
			t.Logf("partition %d: the move completed before the kill (%d bytes copied); nothing pending to resume", p, copied)
		} else {
			t.Fatalf("partition %d: listed %+v after the kill, want broker %d still being added", p, l, joining)
		}
	}
	c.setThrottle(t, topic, "")
	c.Broker(joining).Restart(t)
	c.waitAllSee(t, 60*time.Second, 3)
	c.waitReassigned(t, topic, p, target)
	for _, id := range orig {
		if !slices.Contains(target, id) {
			waitGoneDir(t, c.Broker(id), topic, p)
		}
	}
	t.Logf("partition %d: moved to %v after broker %d's restart", p, target, joining)
}

// setThrottle sets (rate non-empty) or removes every live broker's
// leader.replication.throttled.rate and the topic's
// leader.replication.throttled.replicas=* (Kafka's names and layout).
func (c *Cluster) setThrottle(t *testing.T, topic, rate string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.newClient(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	op, replicas := kadm.SetConfig, "*"
	if rate == "" {
		op, replicas = kadm.DeleteConfig, ""
	}
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "leader.replication.throttled.replicas", Value: &replicas}}, topic)
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("topic throttle %q: %v", replicas, err)
	}
	for i, b := range c.brokers {
		if !b.Alive() {
			continue
		}
		id := int32(i + 1)
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "leader.replication.throttled.rate", Value: &rate}}, id)
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatalf("broker %d throttle %q: %v", id, rate, err)
		}
	}
}

// alterWhilePaused pauses broker paused and reassigns partition p to
// target through view (the brokers still answering). A pause longer than
// the session timeout makes the broker not live and the change refused
// (INVALID_REPLICA_ASSIGNMENT): then it is resumed and tried again, up to
// three times.
func (c *Cluster) alterWhilePaused(t *testing.T, view *Cluster, topic string, p int32, target []int32, paused int32) {
	t.Helper()
	for try := 1; ; try++ {
		c.pauseBroker(t, paused)
		err := view.tryAlterReassignment(t, topic, p, target)
		if err == nil {
			return
		}
		if !errors.Is(err, kerr.InvalidReplicaAssignment) || try == 3 {
			t.Fatalf("reassigning %s-%d to %v with broker %d paused (try %d): %v", topic, p, target, paused, try, err)
		}
		t.Logf("broker %d's session expired before the reassignment was stored (try %d): %v", paused, try, err)
		c.resumeBroker(t, paused)
		c.waitAllSee(t, 60*time.Second, 3)
	}
}

// controllerID returns the current controller.
func (c *Cluster) controllerID(t *testing.T) int32 {
	t.Helper()
	var id int32
	c.WaitMetadata(t, 30*time.Second, "a controller", func(md kadm.Metadata) string {
		id = md.Controller
		if id < 0 {
			return "no controller"
		}
		return ""
	})
	return id
}

// createTopicAssigned creates topic with the given replica assignment.
func (c *Cluster) createTopicAssigned(t *testing.T, topic string, asg [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, reps := range asg {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
}

// reassignWithCLI moves partition p to target with `strata topic
// reassign`: a dry run (checked to show the target), --execute, then
// --list until the partition is no longer listed.
func (c *Cluster) reassignWithCLI(t *testing.T, plan, topic string, p int32, target []int32) {
	t.Helper()
	writeReassignPlan(t, plan, topic, p, target)
	boot := strings.Join(c.LiveAddrs(), ",")
	dry := runCmd(t, 30*time.Second, "", strataBin, "topic", "reassign", "--file", plan, "--bootstrap-server", boot)
	if !strings.Contains(dry, "Proposed partition reassignment configuration") || !strings.Contains(dry, fmt.Sprintf(`"replicas":%s`, idsJSON(target))) {
		t.Fatalf("dry run:\n%s", dry)
	}
	start := time.Now()
	out := runCmd(t, 30*time.Second, "", strataBin, "topic", "reassign", "--file", plan, "--execute", "--bootstrap-server", boot)
	if !strings.Contains(out, fmt.Sprintf("Successfully started partition reassignment of %s-%d.", topic, p)) {
		t.Fatalf("execute:\n%s", out)
	}
	var list string
	if !poll.For(60*time.Second, func() bool {
		list = runCmd(t, 30*time.Second, "", strataBin, "topic", "reassign", "--list", "--bootstrap-server", boot)
		return list == "No partition reassignments found.\n"
	}) {
		t.Fatalf("still listed 60s after --execute:\n%s", list)
	}
	t.Logf("%s-%d -> %v: no longer listed %v after --execute", topic, p, target, time.Since(start).Round(time.Millisecond))
}

func writeReassignPlan(t *testing.T, path, topic string, p int32, target []int32) {
	t.Helper()
	data := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":%d,"replicas":%s}]}`, topic, p, idsJSON(target))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func idsJSON(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// tryAlterReassignment sends one AlterPartitionReassignments and returns
// the partition's error.
func (c *Cluster) tryAlterReassignment(t *testing.T, topic string, p int32, target []int32) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.newClient(t)
	defer cl.Close()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, target)
	res, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	r, ok := res[topic][p]
	if !ok {
		return fmt.Errorf("no answer for %s-%d", topic, p)
	}
	return r.Err
}

func (c *Cluster) alterReassignment(t *testing.T, topic string, p int32, target []int32) {
	t.Helper()
	if err := c.tryAlterReassignment(t, topic, p, target); err != nil {
		t.Fatalf("reassign %s-%d to %v: %v", topic, p, target, err)
	}
}

// listReassignments returns partition p's entry of
// ListPartitionReassignments (zero if not listed).
func (c *Cluster) listReassignments(t *testing.T, topic string, p int32) kadm.ListPartitionReassignmentsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.newClient(t)
	defer cl.Close()
	l, err := kadm.NewClient(cl).ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	return l[topic][p]
}

// waitNoReassignment polls ListPartitionReassignments until partition p
// is no longer listed (60s bound).
func (c *Cluster) waitNoReassignment(t *testing.T, topic string, p int32) {
	t.Helper()
	var last kadm.ListPartitionReassignmentsResponse
	if !poll.For(60*time.Second, func() bool {
		last = c.listReassignments(t, topic, p)
		return last.Replicas == nil
	}) {
		t.Fatalf("%s-%d still being reassigned after 60s: %+v", topic, p, last)
	}
}

// waitReassigned waits until partition p is not being reassigned and its
// replicas are want, in order, with all of them in the ISR and one of
// them leading, as the brokers of c report.
func (c *Cluster) waitReassigned(t *testing.T, topic string, p int32, want []int32) {
	t.Helper()
	c.waitNoReassignment(t, topic, p)
	c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("%s-%d on %v with a full ISR", topic, p, want), func(md kadm.Metadata) string {
		d, ok := md.Topics[topic].Partitions[p]
		if !ok {
			return "partition not listed"
		}
		if !slices.Equal(d.Replicas, want) || !sameMembers(d.ISR, want) || !slices.Contains(want, d.Leader) {
			return fmt.Sprintf("replicas %v isr %v leader %d", d.Replicas, d.ISR, d.Leader)
		}
		return ""
	})
}

func (c *Cluster) partitionMeta(t *testing.T, topic string, p int32) kadm.PartitionDetail {
	t.Helper()
	var d kadm.PartitionDetail
	c.WaitMetadata(t, 30*time.Second, fmt.Sprintf("%s-%d listed", topic, p), func(md kadm.Metadata) string {
		var ok bool
		if d, ok = md.Topics[topic].Partitions[p]; !ok {
			return "not listed"
		}
		return ""
	})
	return d
}

func partitionDir(b *Broker, topic string, p int32) string {
	return filepath.Join(b.Dir, fmt.Sprintf("%s-%d", topic, p))
}

// waitGoneDir waits until broker b no longer has the partition's
// directory.
func waitGoneDir(t *testing.T, b *Broker, topic string, p int32) {
	t.Helper()
	dir := partitionDir(b, topic, p)
	if !poll.For(60*time.Second, func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	}) {
		t.Fatalf("%s still exists 60s after the partition moved away", dir)
	}
}

// reassignRounds is STRATA_CHAOS_REASSIGN_ROUNDS, 0 if unset.
func reassignRounds(t *testing.T) int {
	t.Helper()
	v := os.Getenv("STRATA_CHAOS_REASSIGN_ROUNDS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		t.Fatalf("STRATA_CHAOS_REASSIGN_ROUNDS=%q: want a count from 1 to 1000", v)
	}
	return n
}

// reassignRounds moves every partition of topic to the next pair of
// brokers (in a fixed rotation), n times; in each round the controller is
// killed with SIGKILL right after the moves are submitted and restarted
// once they are done.
func (c *Cluster) reassignRounds(t *testing.T, topic string, partitions int32, n int) {
	t.Helper()
	pairs := [][]int32{{1, 2}, {2, 3}, {3, 1}, {2, 1}, {3, 2}, {1, 3}}
	for round := range n {
		start := time.Now()
		k := c.controllerID(t)
		targets := map[int32][]int32{}
		for p := range partitions {
			cur := c.partitionMeta(t, topic, p).Replicas
			for i := range pairs {
				cand := pairs[(round+int(p)+i)%len(pairs)]
				if !slices.Equal(cand, cur) {
					targets[p] = cand
					break
				}
			}
			c.alterReassignment(t, topic, p, targets[p])
		}
		c.Broker(k).Kill(t)
		live := c.without(k)
		for p := range partitions {
			// A target that includes the killed controller completes
			// once it is back.
			if !slices.Contains(targets[p], k) {
				live.waitReassigned(t, topic, p, targets[p])
			}
		}
		c.Broker(k).Restart(t)
		c.waitAllSee(t, 60*time.Second, 3)
		for p := range partitions {
			c.waitReassigned(t, topic, p, targets[p])
		}
		t.Logf("round %d: every partition moved, controller %d killed and back, in %v", round+1, k, time.Since(start).Round(time.Millisecond))
	}
}
