package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka API keys of partition reassignment.
const (
	apiAlterPartitionReassignments = 45
	apiListPartitionReassignments  = 46
)

// reassignPlan is Kafka's reassignment JSON, as kafka-reassign-partitions.sh
// reads and writes it.
type reassignPlan struct {
	Version    int                 `json:"version"`
	Partitions []reassignPartition `json:"partitions"`
}

type reassignPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// anyLogDir is the log_dirs entry that leaves the directory to the broker.
const anyLogDir = "any"

// parseReassignPlan reads and checks a plan: version 1, at least one
// partition, each named once, with a topic, a partition number >= 0 and
// (unless forCancel) replicas that are non-empty, non-negative and
// without duplicates; log_dirs, if given, one per replica, each "any" or
// an absolute path (cluster_logdirs.go sends those).
func parseReassignPlan(data []byte, forCancel bool) (*reassignPlan, error) {
	var p reassignPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a reassignment JSON file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a reassignment JSON file: more after the JSON object")
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("version %d: only version 1 is known", p.Version)
	}
	if len(p.Partitions) == 0 {
		return nil, errors.New(`no partitions listed ("partitions" is empty)`)
	}
	seen := map[string]bool{}
	for i, rp := range p.Partitions {
		tp := fmt.Sprintf("%s-%d", rp.Topic, rp.Partition)
		switch {
		case rp.Topic == "":
			return nil, fmt.Errorf("partitions[%d]: no topic", i)
		case rp.Partition < 0:
			return nil, fmt.Errorf("partitions[%d]: partition %d", i, rp.Partition)
		case seen[tp]:
			return nil, fmt.Errorf("partition %s is listed twice", tp)
		}
		seen[tp] = true
		if forCancel {
			continue
		}
		if len(rp.Replicas) == 0 {
			return nil, fmt.Errorf("partition %s: no replicas", tp)
		}
		for j, r := range rp.Replicas {
			if r < 0 {
				return nil, fmt.Errorf("partition %s: broker id %d", tp, r)
			}
			if slices.Contains(rp.Replicas[:j], r) {
				return nil, fmt.Errorf("partition %s: broker %d is listed twice", tp, r)
			}
		}
		if rp.LogDirs != nil {
			if len(rp.LogDirs) != len(rp.Replicas) {
				return nil, fmt.Errorf("partition %s: %d log_dirs for %d replicas", tp, len(rp.LogDirs), len(rp.Replicas))
			}
			for _, d := range rp.LogDirs {
				if d != anyLogDir && !filepath.IsAbs(d) {
					return nil, fmt.Errorf("partition %s: log_dirs entry %q: want an absolute path or \"any\"", tp, d)
				}
			}
		}
	}
	return &p, nil
}

// marshalPlan renders partitions as Kafka's reassignment JSON on one
// line, sorted by topic and partition, with log_dirs "any" unless they
// have their own.
func marshalPlan(parts []reassignPartition) string {
	out := reassignPlan{Version: 1, Partitions: slices.Clone(parts)}
	slices.SortFunc(out.Partitions, func(a, b reassignPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for i := range out.Partitions {
		p := &out.Partitions[i]
		if len(p.LogDirs) == len(p.Replicas) {
			continue // the plan's own
		}
		p.LogDirs = make([]string, len(p.Replicas))
		for j := range p.LogDirs {
			p.LogDirs[j] = anyLogDir
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("strata: encode reassignment plan: " + err.Error()) // only our own types
	}
	return string(b)
}

func runTopicReassign(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic reassign", `Usage: strata topic reassign --file PLAN.json [--execute]
       strata topic reassign --verify --file PLAN.json
       strata topic reassign --cancel --file PLAN.json
       strata topic reassign --list

Moves partitions to other brokers (Kafka's AlterPartitionReassignments,
like kafka-reassign-partitions.sh). PLAN.json is Kafka's reassignment JSON:

  {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}

log_dirs is optional; an entry other than "any" is a log directory of that
replica's broker, which --execute asks to hold it (AlterReplicaLogDirs,
see 'strata cluster log-dirs'). The first replica
of each list is the partition's preferred leader.

Without --execute, prints the current assignment of the partitions in the
plan (save it: it is the plan that moves them back) and the proposed one,
and changes nothing. With --execute, starts the reassignment: each new
replica copies the partition from its leader and joins the ISR; then the
leader moves if it is being removed, the removed replicas stop and delete
their copy, and the partition's replicas become the plan's. --list shows
the reassignments in progress (it is empty once all are done), each with
the bytes its new replicas hold of the leader's local size (from
DescribeLogDirs; for a tiered partition only its local tail is copied),
and the total. --verify tells, for each partition of the plan, whether
its reassignment is completed, still in progress (with the bytes copied)
or over with other replicas; it exits 1 unless all are completed. --cancel
stops the reassignments of the partitions in the plan and returns them to
their original replicas (the replicas lists in the file are ignored).

A broker answers REQUEST_TIMED_OUT while it cannot reach ZooKeeper, and
NOT_CONTROLLER while the controller moves: --execute and --cancel retry
those partitions with a growing backoff for at most --timeout, saying so
on stderr. Any other error (INVALID_REPLICA_ASSIGNMENT, ...) fails at once.

Not supported here: --throttle (strata cluster rebalance, add-broker and
decommission take --throttle; or set leader/follower.replication.throttled.rate
and the topic's *.replication.throttled.replicas yourself, docs/cluster.md);
--verify does not remove throttles.
`, `
Example:
  strata topic reassign --file move.json                # dry run
  strata topic reassign --file move.json --execute
  strata topic reassign --list
  strata topic reassign --verify --file move.json
  strata topic reassign --cancel --file move.json
`, stdout, stderr)
	var file string
	c.fs.StringVar(&file, "file", "", "the reassignment JSON `PLAN.json` (Kafka's format)")
	c.fs.StringVar(&file, "reassignment-json-file", "", "`PLAN.json`, the same as --file (kafka-reassign-partitions.sh's name)")
	execute := c.fs.Bool("execute", false, "start the reassignment (default: a dry run that prints the current and proposed assignment)")
	cancel := c.fs.Bool("cancel", false, "cancel the reassignments of the partitions in --file")
	verify := c.fs.Bool("verify", false, "report whether the reassignments of the partitions in --file are complete, with the bytes copied of those in progress")
	list := c.fs.Bool("list", false, "list the reassignments in progress")
	timeout := c.fs.Duration("timeout", retryBound, "how long to retry a request the brokers answer with REQUEST_TIMED_OUT or NOT_CONTROLLER (ZooKeeper unreachable, a controller change)")
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	modes := 0
	for _, on := range []bool{*cancel, *list, *verify} {
		if on {
			modes++
		}
	}
	switch {
	case modes > 1:
		return c.usageError("--cancel, --list and --verify are exclusive")
	case *verify && *execute:
		return c.usageError("--verify takes no --execute")
	case *list && (file != "" || *execute):
		return c.usageError("--list takes no --file or --execute")
	case *cancel && *execute:
		return c.usageError("--cancel takes no --execute")
	case !*list && file == "":
		return c.usageError("--file is required (or --list)")
	case *timeout <= 0:
		return c.usageError("--timeout %v: want a duration > 0", *timeout)
	}
	var plan *reassignPlan
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return c.fail(err)
		}
		if plan, err = parseReassignPlan(data, *cancel); err != nil {
			return c.fail(withHint(fmt.Errorf("%s: %w", file, err), "'strata topic reassign --help' shows the format."))
		}
	}

	return c.withAdminFor(adminTimeout+*timeout, func(ctx context.Context, s *session) int {
		for _, key := range []int16{apiAlterPartitionReassignments, apiListPartitionReassignments} {
			if !s.supports(key) {
				return c.failf("Upgrade the brokers to a version that serves partition reassignment.",
					"the broker at %s does not serve partition reassignment (Kafka API key %d)", strings.Join(s.seeds, ","), key)
			}
		}
		switch {
		case *list:
			return c.reassignList(ctx, s)
		case *cancel:
			return c.reassignCancel(ctx, s, plan, *timeout)
		case *verify:
			return c.reassignVerify(ctx, s, plan)
		}
		return c.reassignExecute(ctx, s, plan, *execute, *timeout)
	})
}

// metadata reads the metadata of the plan's topics.
func (plan *reassignPlan) metadata(ctx context.Context, s *session) (kadm.Metadata, error) {
	topics := map[string]bool{}
	for _, p := range plan.Partitions {
		topics[p.Topic] = true
	}
	return s.adm.Metadata(ctx, slices.Sorted(maps.Keys(topics))...)
}

// reassignExecute prints the current and proposed assignments and, with
// execute, submits the plan.
func (c *clientCmd) reassignExecute(ctx context.Context, s *session, plan *reassignPlan, execute bool, timeout time.Duration) int {
	md, err := plan.metadata(ctx, s)
	if err != nil {
		return c.fail(err)
	}
	var current []reassignPartition
	for _, p := range plan.Partitions {
		td, ok := md.Topics[p.Topic]
		if !ok || td.Err != nil {
			return c.fail(unknownTopic(p.Topic))
		}
		pd, ok := td.Partitions[p.Partition]
		if !ok {
			return c.failf("'strata topic describe --topic "+p.Topic+"' lists its partitions.", "topic %s has no partition %d", p.Topic, p.Partition)
		}
		current = append(current, reassignPartition{Topic: p.Topic, Partition: p.Partition, Replicas: pd.Replicas})
	}
	fmt.Fprintf(c.stdout, "Current partition replica assignment\n\n%s\n\nSave this to use as the --file option during rollback\n", marshalPlan(current))
	if !execute {
		fmt.Fprintf(c.stdout, "\nProposed partition reassignment configuration\n\n%s\n\nDry run: nothing was changed. Add --execute to start the reassignment.\n", marshalPlan(plan.Partitions))
		return 0
	}
	if status, ok := c.sendLogDirMoves(ctx, s, plan); !ok {
		return status
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range plan.Partitions {
		req.Assign(p.Topic, p.Partition, p.Replicas)
	}
	return c.reassignAnswer(ctx, s, req, "started partition reassignment", timeout)
}

// reassignCancel cancels the plan's partitions' reassignments.
func (c *clientCmd) reassignCancel(ctx context.Context, s *session, plan *reassignPlan, timeout time.Duration) int {
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range plan.Partitions {
		req.CancelAssign(p.Topic, p.Partition)
	}
	return c.reassignAnswer(ctx, s, req, "cancelled the reassignment", timeout)
}

// reassignAnswer sends req, retrying what the brokers answer with
// REQUEST_TIMED_OUT or NOT_CONTROLLER for at most retryBound (or limit,
// if shorter and > 0), and reports each partition's outcome.
func (c *clientCmd) reassignAnswer(ctx context.Context, s *session, req kadm.AlterPartitionAssignmentsReq, done string, limit time.Duration) int {
	res, err := c.newRetrier("AlterPartitionReassignments", limit).alterReassignments(ctx, s.adm, req)
	if err != nil {
		return c.fail(err)
	}
	var ok []string
	failed := 0
	var firstErr error
	for _, r := range res {
		tp := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		if r.Err == nil {
			ok = append(ok, tp)
			continue
		}
		failed++
		fmt.Fprintf(c.stderr, "strata %s: %s: %v\n", c.name, tp, kafkaError(r.Err, r.ErrMessage))
		if firstErr == nil {
			firstErr = r.Err
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(c.stdout, "Successfully %s of %s.\n", done, strings.Join(ok, ", "))
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "%d partitions failed.\n", failed)
		switch {
		case errors.Is(firstErr, kerr.InvalidReplicaAssignment):
			fmt.Fprintln(c.stderr, "Every new replica must be on a live broker ('strata cluster' lists them), once per list.")
		case errors.Is(firstErr, kerr.NoReassignmentInProgress):
			fmt.Fprintln(c.stderr, "'strata topic reassign --list' shows the reassignments in progress.")
		default:
			if h := hintFor(firstErr); h != "" {
				fmt.Fprintln(c.stderr, h)
			}
		}
		return 1
	}
	return 0
}

// reassignList prints every reassignment in progress, with the bytes
// its new replicas have copied of their leader's local size.
func (c *clientCmd) reassignList(ctx context.Context, s *session) int {
	moving, err := listReassignments(ctx, s)
	if err != nil {
		return c.fail(err)
	}
	if len(moving) == 0 {
		fmt.Fprintln(c.stdout, "No partition reassignments found.")
		return 0
	}
	states, serr := measureMoves(ctx, logDirSizes(s), moving)
	if serr != nil {
		fmt.Fprintf(c.stderr, "strata %s: sizes: %v\n", c.name, serr)
	}
	fmt.Fprintln(c.stdout, "Current partition reassignments:")
	var toCopy, copied int64
	for i, m := range moving {
		st := states[i]
		fmt.Fprintf(c.stdout, "%s: replicas: %s. adding: %s. removing: %s. %s.\n", m.name(),
			joinIDs(m.Replicas), joinIDs(m.Adding), joinIDs(m.Removing), describeProgress(st.ToCopy, st.Copied, nil))
		if st.ToCopy < 0 || st.Copied < 0 || toCopy < 0 {
			toCopy, copied = -1, -1
		} else {
			toCopy, copied = toCopy+st.ToCopy, copied+st.Copied
		}
	}
	fmt.Fprintf(c.stdout, "Total: %s.\n", describeProgress(toCopy, copied, nil))
	return 0
}

// reassignVerify prints, for every partition of the plan, whether its
// reassignment is complete, in progress (with the bytes copied) or over
// with other replicas than the plan's, as kafka-reassign-partitions.sh
// --verify does. It removes no throttles (the cluster commands remove
// theirs). Exit status 0 when every partition has its plan's replicas, 1
// when one does not (in progress included).
func (c *clientCmd) reassignVerify(ctx context.Context, s *session, plan *reassignPlan) int {
	moving, err := listReassignments(ctx, s)
	if err != nil {
		return c.fail(err)
	}
	byName := map[string]movingPartition{}
	for _, m := range moving {
		byName[m.name()] = m
	}
	md, err := plan.metadata(ctx, s)
	if err != nil {
		return c.fail(err)
	}
	var inProgress []movingPartition
	for _, p := range plan.Partitions {
		tp := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if m, ok := byName[tp]; ok {
			inProgress = append(inProgress, m)
		}
	}
	states, serr := measureMoves(ctx, logDirSizes(s), inProgress)
	if serr != nil && len(inProgress) > 0 {
		fmt.Fprintf(c.stderr, "strata %s: sizes: %v\n", c.name, serr)
	}
	stateOf := map[string]moveState{}
	for _, st := range states {
		stateOf[st.Name] = st
	}
	fmt.Fprintln(c.stdout, "Status of partition reassignment:")
	done := 0
	for _, p := range plan.Partitions {
		tp := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if st, ok := stateOf[tp]; ok {
			fmt.Fprintf(c.stdout, "Reassignment of partition %s is still in progress: %s.\n", tp, describeProgress(st.ToCopy, st.Copied, nil))
			continue
		}
		td, ok := md.Topics[p.Topic]
		if !ok || td.Err != nil {
			fmt.Fprintf(c.stdout, "Partition %s: the topic does not exist.\n", tp)
			continue
		}
		pd, ok := td.Partitions[p.Partition]
		switch {
		case !ok:
			fmt.Fprintf(c.stdout, "Partition %s does not exist.\n", tp)
		case slices.Equal(pd.Replicas, p.Replicas):
			fmt.Fprintf(c.stdout, "Reassignment of partition %s is completed.\n", tp)
			done++
		default:
			fmt.Fprintf(c.stdout, "There is no active reassignment of partition %s, but replica set is %s rather than %s.\n", tp, joinIDs(pd.Replicas), joinIDs(p.Replicas))
		}
	}
	if done != len(plan.Partitions) {
		return 1
	}
	return 0
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
