package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// clusterActions are the actions of `strata cluster ACTION`; without one,
// `strata cluster` describes the cluster.
var clusterActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"rebalance": func(args []string, stdout, stderr io.Writer) int {
		return runRebalance(modeRebalance, args, stdout, stderr)
	},
	"add-broker": func(args []string, stdout, stderr io.Writer) int {
		return runRebalance(modeAddBroker, args, stdout, stderr)
	},
	"decommission": func(args []string, stdout, stderr io.Writer) int {
		return runRebalance(modeDecommission, args, stdout, stderr)
	},
}

// Topic and broker configs of replication throttling (KIP-73).
const (
	leaderThrottledRate      = "leader.replication.throttled.rate"
	followerThrottledRate    = "follower.replication.throttled.rate"
	leaderThrottledReplicas  = "leader.replication.throttled.replicas"
	followerThrottledReplica = "follower.replication.throttled.replicas"
)

// pollInterval is how often --execute asks for the reassignments in
// progress.
var pollInterval = time.Second

var rebalanceCommon = fmt.Sprintf(`
The plan keeps every partition's replication factor and places at most
one replica of a partition on a broker; with broker.rack set on every
broker, a partition's replicas are spread over as many racks as possible
(on distinct racks when there are enough). It moves as few replicas as it
can: the replica count per broker ends within one of each other where the
racks allow it, then preferred leaders (each partition's first replica)
are evened out by reordering replica lists, which copies nothing. Local
bytes (each partition's size on its leader, from DescribeLogDirs: for a
tiered partition only its local tail) never add a move, but choose among
the moves the counts need: replicas go to the broker with the fewest
bytes among those with the fewest replicas, and of the replicas that may
leave a broker, the largest that does not overshoot the difference in
bytes moves (else the smallest, so that the least is copied).

The plan is printed (each changed partition, current -> target, and the
bytes it copies; replicas, preferred leaders and local bytes per broker,
before and after; the total to copy), then the current and the proposed
assignment as Kafka's reassignment JSON: keep the current one to move
back. --output FILE writes the proposed one, for 'strata topic reassign
--file FILE' or kafka-reassign-partitions.sh.

Without --execute nothing changes (a dry run). --execute refuses to start
while another reassignment is in progress, then starts the reassignment
(AlterPartitionReassignments), prints the partitions still moving until
none is (at most --timeout), checks that every partition has its target
replicas, prints the bytes each new replica holds and the total copied,
and runs a preferred leader election for the changed partitions so
leadership follows the new first replicas.

While it waits, every %v it prints the progress on stderr: per moving
partition and in total the bytes to copy (the leader's local size), the
bytes copied (the new replicas' local sizes), the rate over the last
samples and the time left at that rate. A broker answering
REQUEST_TIMED_OUT (ZooKeeper unreachable) or NOT_CONTROLLER is retried
with a growing backoff for at most %v (or --timeout, if shorter), for
the reassignment and the throttle configs alike; any other error fails
at once.

--throttle BYTES_PER_SEC first sets leader.replication.throttled.rate and
follower.replication.throttled.rate on every broker taking part, and the
topic configs leader.replication.throttled.replicas (the current
replicas) and follower.replication.throttled.replicas (the new ones) of
the moving partitions; all four are removed at the end, also after a
failure or a timeout (the moves then go on unthrottled: follow them with
'strata topic reassign --list'). Existing throttled-replicas configs of
those topics are replaced, then removed.
`, progressInterval, retryBound)

func runRebalance(mode planMode, args []string, stdout, stderr io.Writer) int {
	var name, usage, example string
	switch mode {
	case modeRebalance:
		name = "cluster rebalance"
		usage = `Usage: strata cluster rebalance [--output FILE] [--execute [--throttle BYTES_PER_SEC]]

Plans a balanced assignment of every partition over the live brokers and,
with --execute, moves the partitions there.
` + rebalanceCommon
		example = `
Example:
  strata cluster rebalance --output plan.json
  strata cluster rebalance --execute --throttle 10000000
`
	case modeAddBroker:
		name = "cluster add-broker"
		usage = `Usage: strata cluster add-broker N [--output FILE] [--execute [--throttle BYTES_PER_SEC]]

Fills broker N, a new broker that is already running and registered
('strata cluster' lists it), up to its share of the replicas, taking them
from the most loaded brokers; N also takes its share of preferred leaders,
and a broker whose preferred replica moved to N gets a leadership back
(partitions may be reordered for both, which copies nothing). Nothing
else moves: 'strata cluster rebalance' also evens out the others.
` + rebalanceCommon
		example = `
Example:
  strata cluster add-broker 4
  strata cluster add-broker 4 --execute --throttle 10000000
`
	case modeDecommission:
		name = "cluster decommission"
		usage = `Usage: strata cluster decommission N [--output FILE] [--execute [--throttle BYTES_PER_SEC]]

Moves every replica off broker N to the least loaded other brokers, so N
can be stopped for good. Refuses when a partition has more replicas than
the brokers that would remain, or when the racks left could no longer hold
a partition's replicas on distinct racks (--disable-rack-aware plans
anyway). At the end, with --execute, it checks that N holds no replica.
` + rebalanceCommon
		example = `
Example:
  strata cluster decommission 1
  strata cluster decommission --broker 1 --execute --throttle 10000000
`
	}
	c := newClientCmd(name, usage, example, stdout, stderr)
	brokerFlag := c.fs.Int("broker", -1, "the broker `ID` to add (add-broker) or drain (decommission)")
	output := c.fs.String("output", "", "write the proposed assignment as Kafka's reassignment JSON to `FILE`")
	execute := c.fs.Bool("execute", false, "apply the plan (default: a dry run that prints it)")
	throttle := c.fs.Int64("throttle", -1, "with --execute, limit the replication of the moves to `BYTES_PER_SEC` per broker (leader and follower side)")
	timeout := c.fs.Duration("timeout", time.Hour, "with --execute, how long to wait for the moves to finish")
	noRack := c.fs.Bool("disable-rack-aware", false, "ignore broker racks")
	format := c.formatFlag()
	nameFlag := "broker" // add-broker N, decommission N: the broker id
	if mode == modeRebalance {
		nameFlag = ""
	}
	if status, ok := c.parseFlagsOnly(args, nameFlag); !ok {
		return status
	}
	broker := int32(*brokerFlag)
	switch {
	case mode == modeRebalance && *brokerFlag >= 0:
		return c.usageError("rebalance takes no --broker (see add-broker and decommission)")
	case mode != modeRebalance && broker < 0:
		return c.usageError("which broker? give its id: 'strata %s N' or --broker N", name)
	case *throttle == 0 || *throttle < -1:
		return c.usageError("--throttle %d: want a rate in bytes per second > 0", *throttle)
	case *throttle > 0 && !*execute:
		return c.usageError("--throttle needs --execute")
	case *timeout <= 0:
		return c.usageError("--timeout %v: want a duration > 0", *timeout)
	case format.json() && *execute:
		return c.usageError("--format json prints the plan of a dry run: leave out --execute")
	}

	sctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, *timeout+4*adminTimeout)
	defer cancel()
	s, ctx, err := c.connect(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()

	brokers, current, err := readAssignment(ctx, s)
	if err != nil {
		return c.fail(err)
	}
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	sizesKnown := true
	if err := readSizes(ctx, s, logDirSizes(s), ids, current); err != nil {
		sizesKnown = false
		fmt.Fprintf(stderr, "strata %s: local sizes (DescribeLogDirs): %v; partitions of unknown size are planned as 0 bytes.\n", name, err)
	}
	plan, err := planReassignment(brokers, current, mode, broker, !*noRack)
	if err != nil {
		return c.failf("'strata cluster' lists the brokers and their racks; 'strata topic describe' the replicas.", "%v", err)
	}
	changed := plan.Changed()
	if format.json() {
		return c.planJSON(plan, changed, *output)
	}
	if len(changed) == 0 {
		if mode == modeDecommission {
			fmt.Fprintf(stdout, "Broker %d holds no replica: nothing to move; it can be stopped.\n", broker)
		} else {
			fmt.Fprintln(stdout, "The assignment is already balanced: nothing to move.")
		}
		return 0
	}
	var cur, tgt []reassignPartition
	tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\t\tTARGET\tCOPIES")
	var toCopy int64
	for _, i := range changed {
		p, t := plan.Current[i], plan.Target[i]
		n := plan.Copies(t.name())
		if n < 0 || toCopy < 0 {
			toCopy = -1
		} else {
			toCopy += n
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t->\t%s\t%s\n", p.Topic, p.Partition, joinIDs(p.Replicas), joinIDs(t.Replicas), describeBytes(n))
		cur = append(cur, reassignPartition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
		tgt = append(tgt, reassignPartition{Topic: t.Topic, Partition: t.Partition, Replicas: t.Replicas})
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, describeCounts(plan, ids, sizesKnown))
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	copyNote := describeBytes(toCopy) + " to copy"
	if toCopy < 0 {
		copyNote = "bytes to copy unknown"
	}
	fmt.Fprintf(stdout, "\n%s, %s changed, %s.\n", plural(int64(plan.Moves), "replica move"), plural(int64(len(changed)), "partition"), copyNote)
	fmt.Fprintf(stdout, "\nCurrent partition replica assignment\n\n%s\n\nSave this to use as the --file option during rollback\n", marshalPlan(cur))
	fmt.Fprintf(stdout, "\nProposed partition reassignment configuration\n\n%s\n", marshalPlan(tgt))
	if *output != "" {
		if err := os.WriteFile(*output, []byte(marshalPlan(tgt)+"\n"), 0o644); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stdout, "\nWrote the proposed assignment to %s.\n", *output)
	}
	if !*execute {
		fmt.Fprintln(stdout, "\nDry run: nothing was changed. Add --execute to apply the plan (and --throttle to limit replication).")
		return 0
	}
	for _, key := range []int16{apiAlterPartitionReassignments, apiListPartitionReassignments, apiElectLeaders} {
		if !s.supports(key) {
			return c.failf("Upgrade the brokers to a version that serves partition reassignment.",
				"the broker at %s does not serve Kafka API key %d, which --execute needs", strings.Join(s.seeds, ","), key)
		}
	}
	ex := &rebalanceRun{c: c, s: s, plan: plan, changed: changed, timeout: *timeout, sizes: logDirSizes(s)}
	code := ex.run(ctx, *throttle, *timeout)
	if code == 0 && mode == modeDecommission {
		_, after, err := readAssignment(ctx, s)
		if err != nil {
			return c.fail(err)
		}
		for _, p := range after {
			if slices.Contains(p.Replicas, broker) {
				return c.failf("Run the decommission again: partitions created meanwhile may have been placed on it.", "broker %d still holds a replica of %s", broker, p.name())
			}
		}
		fmt.Fprintf(stdout, "Broker %d holds no replica: it can be stopped.\n", broker)
	}
	return code
}

// readAssignment returns the live brokers and every partition's replicas,
// sorted by topic and partition (Bytes unknown: see readSizes).
func readAssignment(ctx context.Context, s *session) ([]planBroker, []planPartition, error) {
	md, err := s.adm.Metadata(ctx)
	if err != nil {
		return nil, nil, err
	}
	var brokers []planBroker
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, planBroker{ID: b.NodeID, Rack: rack})
	}
	slices.SortFunc(brokers, func(a, b planBroker) int { return int(a.ID - b.ID) })
	var parts []planPartition
	for _, t := range slices.Sorted(maps.Keys(md.Topics)) {
		td := md.Topics[t]
		if td.Err != nil {
			return nil, nil, fmt.Errorf("topic %s: %w", t, td.Err)
		}
		for _, p := range slices.Sorted(maps.Keys(td.Partitions)) {
			parts = append(parts, planPartition{Topic: t, Partition: p, Replicas: slices.Clone(td.Partitions[p].Replicas), Bytes: -1})
		}
	}
	return brokers, parts, nil
}

// readSizes sets the Bytes of parts to their leaders' local sizes from
// src (a leaderless partition: its largest replica's). It returns src's
// error, if any, after setting what it learnt.
func readSizes(ctx context.Context, s *session, src sizeSource, ids []int32, parts []planPartition) error {
	md, err := s.adm.Metadata(ctx)
	if err != nil {
		return err
	}
	sizes, err := src(ctx, ids, nil) // nil: every partition
	for i := range parts {
		p := &parts[i]
		leader := int32(-1)
		if pd, ok := md.Topics[p.Topic].Partitions[p.Partition]; ok {
			leader = pd.Leader
		}
		if n, ok := sizes.of(leader, p.name()); ok {
			p.Bytes = n
			continue
		}
		for _, r := range p.Replicas {
			if n, ok := sizes.of(r, p.name()); ok {
				p.Bytes = max(p.Bytes, n)
			}
		}
	}
	return err
}

// rebalanceRun executes a plan.
type rebalanceRun struct {
	c       *clientCmd
	s       *session
	plan    *rebalancePlan
	changed []int
	timeout time.Duration // --timeout: also bounds the retries
	sizes   sizeSource    // the local sizes of replicas

	sizeWarned bool // a failure of sizes was reported
}

func (r *rebalanceRun) run(ctx context.Context, throttle int64, timeout time.Duration) int {
	c, out := r.c, r.c.stdout
	inProgress, err := r.reassigning(ctx, false)
	if err != nil {
		return c.fail(err)
	}
	if len(inProgress) > 0 {
		return c.failf("Wait for them ('strata topic reassign --list') or cancel them ('strata topic reassign --cancel --file ...') first.",
			"%s already being reassigned: %s", plural(int64(len(inProgress)), "partition is"), strings.Join(inProgress, ", "))
	}
	if throttle > 0 {
		if err := r.setThrottles(ctx, throttle); err != nil {
			r.clearThrottles()
			return c.fail(err)
		}
		fmt.Fprintf(out, "\nThrottled replication of the moves to %d bytes/s per broker.\n", throttle)
		defer func() {
			if err := r.clearThrottles(); err != nil {
				fmt.Fprintf(c.stderr, "strata %s: removing the throttles: %v\n", c.name, err)
			} else {
				fmt.Fprintln(out, "Removed the replication throttles.")
			}
		}()
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, i := range r.changed {
		t := r.plan.Target[i]
		req.Assign(t.Topic, t.Partition, t.Replicas)
	}
	if code := c.reassignAnswer(ctx, r.s, req, "started partition reassignment", timeout); code != 0 {
		return code
	}
	start := time.Now()
	last := -1
	progress := newProgressTracker()
	var printed time.Time
	for {
		parts, err := r.reassigningParts(ctx, true)
		if err != nil {
			return c.fail(err)
		}
		left := make([]string, len(parts))
		for i, p := range parts {
			left[i] = p.name()
		}
		r.sample(ctx, progress, parts)
		if len(parts) > 0 && time.Since(printed) >= progressInterval {
			progress.print(c.stderr)
			printed = time.Now()
		}
		if len(left) != last {
			if len(left) > 0 {
				fmt.Fprintf(out, "Still reassigning %s: %s\n", plural(int64(len(left)), "partition"), strings.Join(left, ", "))
			}
			last = len(left)
		}
		if len(left) == 0 {
			break
		}
		if time.Since(start) > timeout {
			return c.failf("The moves go on: follow them with 'strata topic reassign --list'.", "%s still reassigning after %v", plural(int64(len(left)), "partition"), timeout)
		}
		select {
		case <-ctx.Done():
			return c.fail(ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "Reassignment done in %v.\n", elapsed.Round(time.Millisecond))
	// Verify: every changed partition has its target replicas. The
	// brokers' metadata follows the controller's last write shortly
	// after the reassignment is done: ask again for a while.
	var wrong []string
	set := kadm.TopicsSet{}
	for verifyEnd := time.Now().Add(adminTimeout); ; {
		_, now, err := readAssignment(ctx, r.s)
		if err != nil {
			return c.fail(err)
		}
		byName := map[string][]int32{}
		for _, p := range now {
			byName[p.name()] = p.Replicas
		}
		wrong = wrong[:0]
		for _, i := range r.changed {
			t := r.plan.Target[i]
			if got := byName[t.name()]; !slices.Equal(got, t.Replicas) {
				wrong = append(wrong, fmt.Sprintf("%s has replicas %s, not %s", t.name(), joinIDs(got), joinIDs(t.Replicas)))
			}
			set.Add(t.Topic, t.Partition)
		}
		if len(wrong) == 0 || time.Now().After(verifyEnd) {
			break
		}
		select {
		case <-ctx.Done():
			return c.fail(ctx.Err())
		case <-time.After(pollInterval / 4):
		}
	}
	if len(wrong) > 0 {
		return c.failf("A reassignment was cancelled or changed meanwhile; plan again.", "verify: %s", strings.Join(wrong, "; "))
	}
	fmt.Fprintf(out, "Verified: %s have their target replicas.\n", plural(int64(len(r.changed)), "partition"))
	if err := r.summary(ctx, elapsed); err != nil {
		fmt.Fprintf(c.stderr, "strata %s: the bytes copied: %v\n", c.name, err)
	}
	res, err := r.s.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return c.fail(err)
	}
	elected, already, failed := 0, 0, 0
	for _, t := range slices.Sorted(maps.Keys(res)) {
		for _, p := range slices.Sorted(maps.Keys(res[t])) {
			switch e := res[t][p]; {
			case e.Err == nil:
				elected++
			case errors.Is(e.Err, kerr.ElectionNotNeeded):
				already++
			default:
				failed++
				fmt.Fprintf(c.stderr, "strata %s: preferred leader election of %s-%d: %v\n", c.name, t, p, kafkaError(e.Err, e.ErrMessage))
			}
		}
	}
	fmt.Fprintf(out, "Preferred leader election: %s moved to the first replica, %d already there.\n", plural(int64(elected), "leader"), already)
	if failed > 0 {
		fmt.Fprintln(c.stderr, "Retry it with 'strata topic elect-leaders --election-type preferred'.")
		return 1
	}
	return 0
}

// reassigning lists the partitions being reassigned: all of them, or
// (ours) only those of the plan.
func (r *rebalanceRun) reassigning(ctx context.Context, ours bool) ([]string, error) {
	moving, err := r.reassigningParts(ctx, ours)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(moving))
	for i, m := range moving {
		out[i] = m.name()
	}
	return out, nil
}

// reassigningParts is reassigning with the replicas being added.
func (r *rebalanceRun) reassigningParts(ctx context.Context, ours bool) ([]movingPartition, error) {
	all, err := listReassignments(ctx, r.s)
	if err != nil || !ours {
		return all, err
	}
	mine := map[string]bool{}
	for _, i := range r.changed {
		mine[r.plan.Target[i].name()] = true
	}
	return slices.DeleteFunc(all, func(m movingPartition) bool { return !mine[m.name()] }), nil
}

// throttleTargets returns the brokers taking part in the moves and, per
// topic, the leader and follower throttled-replicas lists (Kafka's
// rule: leader = the current replicas, follower = the new ones).
func (r *rebalanceRun) throttleTargets() (brokers []int32, leader, follower map[string][]string) {
	leader, follower = map[string][]string{}, map[string][]string{}
	seen := map[int32]bool{}
	for _, i := range r.changed {
		cur, tgt := r.plan.Current[i], r.plan.Target[i]
		moving := false
		for _, b := range tgt.Replicas {
			if !slices.Contains(cur.Replicas, b) {
				moving = true
				follower[tgt.Topic] = append(follower[tgt.Topic], fmt.Sprintf("%d:%d", tgt.Partition, b))
				seen[b] = true
			}
		}
		if !moving {
			continue // a new order only: nothing is copied
		}
		for _, b := range cur.Replicas {
			leader[cur.Topic] = append(leader[cur.Topic], fmt.Sprintf("%d:%d", cur.Partition, b))
			seen[b] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), leader, follower
}

func (r *rebalanceRun) setThrottles(ctx context.Context, rate int64) error {
	brokers, leader, follower := r.throttleTargets()
	v := strconv.FormatInt(rate, 10)
	retry := r.c.newRetrier("IncrementalAlterConfigs", r.timeout)
	if len(brokers) > 0 {
		if err := retry.alterConfigs(ctx, r.s.adm, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: leaderThrottledRate, Value: &v},
			{Op: kadm.SetConfig, Name: followerThrottledRate, Value: &v},
		}, brokers, nil); err != nil {
			return err
		}
	}
	for _, t := range slices.Sorted(maps.Keys(leader)) {
		l, f := strings.Join(leader[t], ","), strings.Join(follower[t], ",")
		if err := retry.alterConfigs(ctx, r.s.adm, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: leaderThrottledReplicas, Value: &l},
			{Op: kadm.SetConfig, Name: followerThrottledReplica, Value: &f},
		}, nil, []string{t}); err != nil {
			return err
		}
	}
	return nil
}

// clearThrottles deletes what setThrottles set, with a context of its own
// (the run's may be done).
func (r *rebalanceRun) clearThrottles() error {
	retry := r.c.newRetrier("IncrementalAlterConfigs", r.timeout)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout+retry.bound)
	defer cancel()
	brokers, leader, _ := r.throttleTargets()
	var errs []error
	if len(brokers) > 0 {
		errs = append(errs, retry.alterConfigs(ctx, r.s.adm, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledRate},
			{Op: kadm.DeleteConfig, Name: followerThrottledRate},
		}, brokers, nil))
	}
	for _, t := range slices.Sorted(maps.Keys(leader)) {
		errs = append(errs, retry.alterConfigs(ctx, r.s.adm, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas},
			{Op: kadm.DeleteConfig, Name: followerThrottledReplica},
		}, nil, []string{t}))
	}
	return errors.Join(errs...)
}

// jsonPlan is the dry run of rebalance, add-broker and decommission with
// --format json. Wire format of the CLI: only add fields.
type jsonPlan struct {
	ReplicaMoves       int              `json:"replica_moves"`
	PartitionsChanged  int              `json:"partitions_changed"`
	BytesToCopy        *int64           `json:"bytes_to_copy"` // null: unknown
	Changes            []jsonPlanChange `json:"changes"`
	CurrentAssignment  json.RawMessage  `json:"current_assignment"`  // kafka-reassign-partitions.sh's JSON
	ProposedAssignment json.RawMessage  `json:"proposed_assignment"` // the same, to apply
}

type jsonPlanChange struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Current     []int32 `json:"current"`
	Target      []int32 `json:"target"`
	BytesToCopy *int64  `json:"bytes_to_copy"` // null: unknown
}

// planJSON prints the plan as jsonPlan, and writes --output as the text
// does.
func (c *clientCmd) planJSON(plan *rebalancePlan, changed []int, output string) int {
	out := jsonPlan{ReplicaMoves: plan.Moves, PartitionsChanged: len(changed), Changes: []jsonPlanChange{}}
	var cur, tgt []reassignPartition
	var toCopy int64
	for _, i := range changed {
		p, t := plan.Current[i], plan.Target[i]
		n := plan.Copies(t.name())
		if n < 0 || toCopy < 0 {
			toCopy = -1
		} else {
			toCopy += n
		}
		out.Changes = append(out.Changes, jsonPlanChange{Topic: p.Topic, Partition: p.Partition, Current: ids(p.Replicas), Target: ids(t.Replicas), BytesToCopy: nonNeg(n)})
		cur = append(cur, reassignPartition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
		tgt = append(tgt, reassignPartition{Topic: t.Topic, Partition: t.Partition, Replicas: t.Replicas})
	}
	out.BytesToCopy = nonNeg(toCopy)
	out.CurrentAssignment, out.ProposedAssignment = json.RawMessage(marshalPlan(cur)), json.RawMessage(marshalPlan(tgt))
	if output != "" && len(changed) > 0 {
		if err := os.WriteFile(output, []byte(marshalPlan(tgt)+"\n"), 0o644); err != nil {
			return c.fail(err)
		}
	}
	return c.printJSON(out)
}
