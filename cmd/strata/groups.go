package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	register(&command{
		name:    "groups",
		summary: "list, describe, delete consumer and share groups; reset or delete their offsets",
		actions: groupsActions,
		help:    groupsHelp,
	})
}

var groupsActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"list":           runGroupsList,
	"describe":       runGroupsDescribe,
	"reset-offsets":  runGroupsResetOffsets,
	"delete-offsets": runGroupsDeleteOffsets,
	"delete":         runGroupsDelete,
}

const groupsHelp = `Usage: strata groups <action> [flags]

Manages consumer groups and share groups (KIP-932) through the Kafka
group APIs, like kafka-consumer-groups.sh and kafka-share-groups.sh.

Actions:
  list            print the groups with their type and state
  describe        print a group's committed offsets, log end offsets, lag
                  and members; for a share group its start offsets, lag,
                  records in flight and members
  reset-offsets   move a group's committed offsets, or a share group's
                  start offsets (a dry run unless --execute)
  delete-offsets  delete a group's offsets for a topic
  delete          delete a group and its offsets

Run 'strata groups <action> --help' for its flags and an example.

Example:
  strata groups describe billing
  strata groups reset-offsets billing --topic orders --to-earliest --execute
`

func unknownGroup(group string) error {
	return withHint(fmt.Errorf("consumer group %q does not exist", group),
		"List the groups with 'strata groups list'; a group exists once a consumer joined it or offsets were committed for it.")
}

// groupTypes are the group types ListGroups v5 filters by, as
// kafka-groups.sh --group-type spells them.
var groupTypes = []string{"classic", "consumer", "share"}

func runGroupsList(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups list", `Usage: strata groups list [flags]

Prints the groups, sorted by name, with their type (classic: the
JoinGroup protocol; consumer: KIP-848's; share: a share group, KIP-932)
and state, as kafka-groups.sh --list does. A share group without members
is listed Empty until it is deleted ('strata groups delete G').
`, `
Example:
  strata groups list
  strata groups list --type share
`, stdout, stderr)
	format := c.formatFlag()
	groupType := c.fs.String("type", "", "list only the groups of `TYPE`: classic, consumer or share (default all)")
	c.fs.StringVar(groupType, "group-type", "", "the same as --type (kafka-groups.sh --group-type)")
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	var types []string
	if *groupType != "" {
		t := strings.ToLower(*groupType)
		if !slices.Contains(groupTypes, t) {
			return c.usageError("--type %q: want one of %s", *groupType, strings.Join(groupTypes, ", "))
		}
		types = []string{t}
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		groups, err := s.adm.ListGroupsByType(ctx, types)
		if err != nil {
			return c.fail(err)
		}
		if format.json() {
			out := jsonGroupList{Groups: []jsonListedGroup{}}
			for _, g := range groups.Sorted() {
				out.Groups = append(out.Groups, jsonListedGroup{GroupID: g.Group, GroupType: g.GroupType, ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator})
			}
			return c.printJSON(out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE")
		for _, g := range groups.Sorted() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, dashIfEmpty(g.GroupType), dashIfEmpty(g.State))
		}
		if err := tw.Flush(); err != nil {
			return c.fail(err)
		}
		return 0
	})
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runGroupsDescribe(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups describe", `Usage: strata groups describe GROUP [flags]

Prints a consumer group as kafka-consumer-groups.sh --describe does: its
state, then a line per partition it has committed offsets for or is
assigned, with the committed offset (CURRENT-OFFSET, - when none), the log
end offset, the lag between them and the member consuming it; then its
members with their assignments.

A share group is printed as kafka-share-groups.sh --describe does, with
its state, group epoch and coordinator, then a line per partition it has
state for or is assigned: START-OFFSET and LAG from the share coordinator
(DescribeShareGroupOffsets), then the records in flight on the
partition's leader: IN-FLIGHT (the window from the start offset to the
last record delivered), and of those AVAILABLE, ACQUIRED (locked to a
member), ACKNOWLEDGED, ARCHIVING (on their way to the dead-letter topic)
and ARCHIVED. They show - when the leader holds no current state of the
share partition in memory (no member used it there since that broker
became its leader, or the group's last share session there closed, so
the state is read again from the share coordinator on its next use) or
the leader could not be asked; never a made-up 0. Then the members.
`, `
Example:
  strata groups describe billing
  strata groups describe workers --format json
`, stdout, stderr)
	group := c.fs.String("group", "", "the consumer or share `GROUP` (required)")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, "group"); !ok {
		return status
	}
	if *group == "" {
		return c.missingName()
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		lags, err := s.adm.Lag(ctx, *group)
		if err != nil {
			return c.fail(err)
		}
		l, ok := lags[*group]
		switch {
		case !ok:
			return c.fail(fmt.Errorf("the broker's answer does not mention group %s", *group))
		case l.State == "Dead" || errors.Is(l.Error(), kerr.GroupIDNotFound):
			// Not a classic or consumer group: a share group (whose
			// offsets OffsetFetch refuses, GROUP_ID_NOT_FOUND, as
			// Kafka's), or none.
			sg, ok, err := lookupShareGroup(ctx, s, *group)
			switch {
			case err != nil:
				return c.fail(err)
			case !ok:
				return c.fail(unknownGroup(*group))
			}
			return c.describeShareGroup(ctx, s, sg, format.json())
		case l.Error() != nil:
			return c.fail(fmt.Errorf("consumer group %s: %w", *group, l.Error()))
		}

		if format.json() {
			return c.groupJSON(l)
		}
		fmt.Fprintf(stdout, "Group %s: state %s", *group, l.State)
		if l.Protocol != "" {
			fmt.Fprintf(stdout, ", protocol %s", l.Protocol)
		}
		fmt.Fprintf(stdout, ", coordinator %d, %s\n\n", l.Coordinator.NodeID, plural(int64(len(l.Members)), "member"))

		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		var lagErr error
		for _, m := range l.Lag.Sorted() {
			member, host, client := "-", "-", "-"
			if m.Member != nil {
				member, host, client = m.Member.MemberID, m.Member.ClientHost, m.Member.ClientID
			}
			end := "-"
			if m.End.Err == nil {
				end = strconv.FormatInt(m.End.Offset, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Topic, m.Partition, offsetOrDash(m.Commit.At), end, offsetOrDash(m.Lag), member, host, client)
			if m.Err != nil && lagErr == nil {
				lagErr = fmt.Errorf("partition %s-%d: %w", m.Topic, m.Partition, m.Err)
			}
		}
		if err := tw.Flush(); err != nil {
			return c.fail(err)
		}

		if len(l.Members) == 0 {
			fmt.Fprintf(stdout, "\nConsumer group %s has no active members.\n", *group)
		} else {
			fmt.Fprintln(stdout, "\nMEMBERS")
			tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CONSUMER-ID\tHOST\tCLIENT-ID\tASSIGNMENT")
			for _, m := range l.Members {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientHost, m.ClientID, assignment(m))
			}
			if err := tw.Flush(); err != nil {
				return c.fail(err)
			}
		}
		if lagErr != nil {
			return c.fail(lagErr)
		}
		return 0
	})
}

// groupJSON prints groups describe --format json; exit 1 when a
// partition's lag is unknown for an error, as the text does.
func (c *clientCmd) groupJSON(l kadm.DescribedGroupLag) int {
	out := jsonGroup{GroupID: l.Group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol, Coordinator: l.Coordinator.NodeID,
		Partitions: []jsonGroupOffset{}, Members: []jsonGroupMember{}}
	var lagErr error
	for _, m := range l.Lag.Sorted() {
		j := jsonGroupOffset{Topic: m.Topic, Partition: m.Partition, CurrentOffset: nonNeg(m.Commit.At), Lag: nonNeg(m.Lag), Error: errString(m.Err)}
		if m.End.Err == nil {
			j.LogEndOffset = nonNeg(m.End.Offset)
		}
		if m.Member != nil {
			j.ConsumerID, j.Host, j.ClientID = &m.Member.MemberID, &m.Member.ClientHost, &m.Member.ClientID
		}
		if m.Err != nil && lagErr == nil {
			lagErr = fmt.Errorf("partition %s-%d: %w", m.Topic, m.Partition, m.Err)
		}
		out.Partitions = append(out.Partitions, j)
	}
	for _, m := range l.Members {
		out.Members = append(out.Members, jsonGroupMember{ConsumerID: m.MemberID, InstanceID: m.InstanceID, Host: m.ClientHost, ClientID: m.ClientID, Assignment: memberAssignment(m)})
	}
	if status := c.printJSON(out); status != 0 {
		return status
	}
	if lagErr != nil {
		return c.fail(lagErr)
	}
	return 0
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// assignment formats a member's assigned partitions as topic:0,1,2.
func assignment(m kadm.DescribedGroupMember) string {
	ca, ok := m.Assigned.AsConsumer()
	if !ok || len(ca.Topics) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		parts = append(parts, t.Topic+":"+joinIDs(ps))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func runGroupsResetOffsets(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups reset-offsets", `Usage: strata groups reset-offsets GROUP --topic T <target> [--execute]

Moves the committed offsets of group G for topic T (all its partitions, or
one with --partition) to a target: --to-earliest, --to-latest,
--to-offset N (kept within the log's start and end) or --to-datetime T
(the first record at or after T; the end of the log when there is none).
It prints each partition's current and new offset; without --execute that
is all it does (a dry run). The group must have no active members: stop
its consumers first.

For a share group (kafka-share-groups.sh --reset-offsets) the offsets are
its share partitions' start offsets, set with AlterShareGroupOffsets: the
next member reads from there. A group id nobody used yet is reset as a
consumer group (its offsets committed), or with --type share as a share
group (its state created in the share coordinator, so that its first
member starts there).
`, `
Example:
  strata groups reset-offsets billing --topic orders --to-datetime 2024-05-01T00:00:00Z
  strata groups reset-offsets billing --topic orders --to-datetime 2024-05-01T00:00:00Z --execute
`, stdout, stderr)
	group := c.fs.String("group", "", "the consumer or share `GROUP` (required)")
	topic := c.fs.String("topic", "", "the topic `T` whose offsets move (required)")
	partition := c.fs.Int("partition", -1, "move only partition `P` (default: all)")
	groupType := c.fs.String("type", "", "the group's `TYPE`, consumer or share: what a group nobody used yet becomes (default consumer); a group of the other type is refused")
	toEarliest := c.fs.Bool("to-earliest", false, "target: the first offset still in the log")
	toLatest := c.fs.Bool("to-latest", false, "target: the end of the log (skip everything there)")
	toOffset := c.fs.Int64("to-offset", -1, "target: offset `N`")
	toDatetime := c.fs.String("to-datetime", "", "target: the first record at or after `T` (RFC 3339 or Unix milliseconds)")
	c.fs.Bool("dry-run", true, "only print the new offsets; on unless --execute")
	execute := c.fs.Bool("execute", false, "commit the new offsets")
	if status, ok := c.parseFlagsOnly(args, "group"); !ok {
		return status
	}
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	targets := 0
	for _, t := range []string{"to-earliest", "to-latest", "to-offset", "to-datetime"} {
		if set[t] {
			targets++
		}
	}
	var afterMilli int64
	*groupType = strings.ToLower(*groupType)
	switch {
	case *group == "":
		return c.missingName()
	case *topic == "":
		return c.usageError("--topic is required")
	case *groupType != "" && *groupType != "consumer" && *groupType != "classic" && *groupType != "share":
		return c.usageError("--type %q: want consumer or share", *groupType)
	case targets != 1:
		return c.usageError("give exactly one target: --to-earliest, --to-latest, --to-offset N or --to-datetime T")
	case set["dry-run"] && *execute:
		return c.usageError("--dry-run and --execute cannot go together")
	case set["to-offset"] && *toOffset < 0:
		return c.usageError("--to-offset %d: want an offset (0 or more)", *toOffset)
	case *partition < -1:
		return c.usageError("--partition %d: want a partition number", *partition)
	case *toDatetime != "":
		ms, err := parseTime(*toDatetime)
		if err != nil {
			return c.usageError("--to-datetime %q: %v", *toDatetime, err)
		}
		afterMilli = ms
	}

	return c.withAdmin(func(ctx context.Context, s *session) int {
		described, err := s.adm.DescribeGroups(ctx, *group)
		if err != nil {
			return c.fail(err)
		}
		var share *shareGroup // a share group's offsets move with AlterShareGroupOffsets
		d, found := described[*group]
		if found && d.Err != nil {
			return c.fail(fmt.Errorf("consumer group %s: %w", *group, d.Err))
		}
		switch {
		case found && d.State == "Empty":
		case !found || d.State == "Dead": // no classic or consumer group: a share group, or none yet
			sg, ok, err := lookupShareGroup(ctx, s, *group)
			switch {
			case err != nil:
				return c.fail(err)
			case ok && len(sg.members) > 0:
				return c.failf(shareGroupHint(*group), "share group %s has active members (state %s): offsets can only be reset while it has none", *group, sg.state)
			case ok || *groupType == "share":
				share = &sg
			}
		default:
			return c.failf("Stop the group's consumers, wait for 'strata groups describe --group "+*group+"' to show no active members, then try again.",
				"consumer group %s has active members (state %s): offsets can only be reset while it has none", *group, d.State)
		}
		switch {
		case share != nil && *groupType != "" && *groupType != "share":
			return c.failf("Leave out --type, or name another group.", "group %s is a share group, not a %s group", *group, *groupType)
		case share == nil && *groupType == "share":
			return c.failf("Leave out --type, or name another group.", "group %s is a consumer group, not a share group", *group)
		}
		if err := checkTopic(ctx, s, *topic, int32(*partition)); err != nil {
			return c.fail(err)
		}
		offsets, err := resetTargets(ctx, s, *topic, int32(*partition), resetTarget{earliest: *toEarliest, latest: *toLatest,
			offset: *toOffset, byOffset: set["to-offset"], afterMilli: afterMilli, byTime: set["to-datetime"]})
		if err != nil {
			return c.fail(err)
		}
		current := map[int32]int64{}
		if share != nil {
			for p, o := range share.offsets[*topic] {
				if o.Err == nil {
					current[p] = o.StartOffset
				}
			}
		} else {
			committed, err := s.adm.FetchOffsetsForTopics(ctx, *group, *topic)
			if err != nil {
				return c.fail(fmt.Errorf("fetching the committed offsets of group %s: %w", *group, err))
			}
			for _, o := range offsets.Sorted() {
				if r, ok := committed.Lookup(o.Topic, o.Partition); ok && r.Err == nil {
					current[o.Partition] = r.At
				}
			}
		}

		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
		for _, o := range offsets.Sorted() {
			cur, ok := current[o.Partition]
			if !ok {
				cur = -1
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", *group, o.Topic, o.Partition, offsetOrDash(cur), o.At)
		}
		if err := tw.Flush(); err != nil {
			return c.fail(err)
		}
		if !*execute {
			fmt.Fprintln(stdout, "\nDry run: nothing was changed. Add --execute to commit these offsets.")
			return 0
		}
		if share != nil {
			return c.alterShareOffsets(ctx, s, *group, offsets)
		}
		resps, err := s.adm.CommitOffsets(ctx, *group, offsets)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			hint := hintFor(err)
			if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
				hint = "A consumer joined the group meanwhile: stop the group's consumers and try again."
			}
			return c.fail(withHint(fmt.Errorf("committing the offsets of group %s: %w", *group, err), hint))
		}
		fmt.Fprintf(stdout, "\nCommitted the new offsets of group %s.\n", *group)
		return 0
	})
}

// resetTarget is the target of groups reset-offsets: one of earliest,
// latest, byOffset (offset) or byTime (afterMilli).
type resetTarget struct {
	earliest, latest, byOffset, byTime bool
	offset, afterMilli                 int64
}

// resetTargets are the new offsets of topic's partitions (one with
// partition >= 0) for target, kept within each log's start and end.
func resetTargets(ctx context.Context, s *session, topic string, partition int32, target resetTarget) (kadm.Offsets, error) {
	starts, err := s.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets of %s: %w", topic, err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	var byTime kadm.ListedOffsets
	if target.byTime {
		byTime, err = s.adm.ListOffsetsAfterMilli(ctx, target.afterMilli, topic)
		if err == nil {
			err = byTime.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the offsets of %s by time: %w", topic, err)
		}
	}
	var offsets kadm.Offsets
	for _, p := range slices.Sorted(maps.Keys(ends[topic])) {
		if partition >= 0 && p != partition {
			continue
		}
		start, end := starts[topic][p].Offset, ends[topic][p].Offset
		var at int64
		switch {
		case target.earliest:
			at = start
		case target.latest:
			at = end
		case target.byOffset:
			at = min(max(target.offset, start), end)
		default:
			at = byTime[topic][p].Offset
			if at < 0 {
				at = end
			}
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	return offsets, nil
}

// alterShareOffsets sets a share group's start offsets (reset-offsets
// --execute of a share group).
func (c *clientCmd) alterShareOffsets(ctx context.Context, s *session, group string, offsets kadm.Offsets) int {
	resps, err := s.adm.AlterShareGroupOffsets(ctx, group, offsets)
	if err == nil {
		err = resps.Error()
	}
	switch {
	case errors.Is(err, kerr.NonEmptyGroup):
		return c.failf(shareGroupHint(group), "share group %s has active members: a share consumer joined it meanwhile", group)
	case err != nil:
		return c.fail(withHint(fmt.Errorf("altering the start offsets of share group %s: %w", group, err), hintFor(err)))
	}
	fmt.Fprintf(c.stdout, "\nSet the new start offsets of share group %s.\n", group)
	return 0
}

func runGroupsDelete(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups delete", `Usage: strata groups delete GROUP... [flags]

Deletes consumer groups and their committed offsets, and share groups and
their state in the share coordinator (a share consumer that joins later
starts by share.auto.offset.reset). A group must have no active members.
`, `
Example:
  strata groups delete billing
`, stdout, stderr)
	var groups stringsFlag
	c.fs.Var(&groups, "group", "a consumer or share `GROUP` to delete (required); repeatable")
	if status, ok := c.parseFlagsOnly(args, "group"); !ok {
		return status
	}
	if len(groups) == 0 {
		return c.missingName()
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		// Which of them are share groups, for the messages only: a
		// broker that cannot tell leaves them all called consumer
		// groups, so its error is not reported.
		kind := map[string]string{}
		if offs, err := s.adm.DescribeShareGroupOffsets(ctx, groups...); err == nil {
			for g, o := range offs {
				if o.Err == nil {
					kind[g] = "share group"
				}
			}
		}
		resps, err := s.adm.DeleteGroups(ctx, groups...)
		if err != nil {
			return c.fail(err)
		}
		status := 0
		for _, g := range groups {
			what := cmp.Or(kind[g], "consumer group")
			r, ok := resps[g]
			switch {
			case !ok:
				status = c.fail(fmt.Errorf("the broker's answer does not mention group %s", g))
			case errors.Is(r.Err, kerr.GroupIDNotFound):
				status = c.fail(unknownGroup(g))
			case errors.Is(r.Err, kerr.NonEmptyGroup) && kind[g] != "":
				status = c.fail(withHint(fmt.Errorf("share group %s has active members", g), shareGroupHint(g)))
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				status = c.fail(withHint(fmt.Errorf("consumer group %s has active members", g), "Stop the group's consumers first."))
			case r.Err != nil:
				status = c.fail(fmt.Errorf("%s %s: %w", what, g, r.Err))
			default:
				fmt.Fprintf(stdout, "Deleted %s %s.\n", what, g)
			}
		}
		return status
	})
}

func runGroupsDeleteOffsets(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups delete-offsets", `Usage: strata groups delete-offsets GROUP --topic T [--partition P] [flags]

Deletes a group's offsets for topic T, as kafka-consumer-groups.sh
--delete-offsets and kafka-share-groups.sh --delete-offsets do:

  consumer group  its committed offsets of T's partitions (or of one with
                  --partition), with OffsetDelete; refused while a member
                  of the group is subscribed to T. A consumer that reads T
                  afterwards starts by auto.offset.reset.
  share group     its share partitions' state for T in the share
                  coordinator, with DeleteShareGroupOffsets (every
                  partition of T); the group must have no members. A
                  member that reads T afterwards starts by
                  share.auto.offset.reset.
`, `
Example:
  strata groups delete-offsets billing --topic orders
  strata groups delete-offsets workers --topic jobs
`, stdout, stderr)
	group := c.fs.String("group", "", "the consumer or share `GROUP` (required)")
	topic := c.fs.String("topic", "", "the topic `T` whose offsets go (required)")
	partition := c.fs.Int("partition", -1, "delete only partition `P`'s offset (consumer groups; default: all)")
	if status, ok := c.parseFlagsOnly(args, "group"); !ok {
		return status
	}
	switch {
	case *group == "":
		return c.missingName()
	case *topic == "":
		return c.usageError("--topic is required")
	case *partition < -1:
		return c.usageError("--partition %d: want a partition number", *partition)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		described, err := s.adm.DescribeGroups(ctx, *group)
		if err != nil {
			return c.fail(err)
		}
		if d, ok := described[*group]; ok && d.Err != nil {
			return c.fail(fmt.Errorf("consumer group %s: %w", *group, d.Err))
		} else if !ok || d.State == "Dead" {
			sg, ok, err := lookupShareGroup(ctx, s, *group)
			switch {
			case err != nil:
				return c.fail(err)
			case !ok:
				return c.fail(unknownGroup(*group))
			case *partition >= 0:
				return c.usageError("--partition: a share group's offsets are deleted for the whole topic")
			}
			return c.deleteShareOffsets(ctx, s, sg, *topic)
		}
		if err := checkTopic(ctx, s, *topic, int32(*partition)); err != nil {
			return c.fail(err)
		}
		md, err := s.adm.Metadata(ctx, *topic)
		if err != nil {
			return c.fail(err)
		}
		set := kadm.TopicsSet{}
		for _, p := range md.Topics[*topic].Partitions.Numbers() {
			if *partition < 0 || p == int32(*partition) {
				set.Add(*topic, p)
			}
		}
		resps, err := s.adm.DeleteOffsets(ctx, *group, set)
		if err == nil {
			err = resps.Error()
		}
		switch {
		case errors.Is(err, kerr.GroupSubscribedToTopic):
			return c.failf("Stop the group's consumers of "+*topic+" (or subscribe them elsewhere), then try again.",
				"consumer group %s has members subscribed to %s: their offsets stay", *group, *topic)
		case errors.Is(err, kerr.GroupIDNotFound):
			return c.fail(unknownGroup(*group))
		case err != nil:
			return c.fail(fmt.Errorf("deleting the offsets of consumer group %s for %s: %w", *group, *topic, err))
		}
		fmt.Fprintf(stdout, "Deleted the offsets of consumer group %s for topic %s.\n", *group, *topic)
		return 0
	})
}

// deleteShareOffsets deletes a share group's state for topic.
func (c *clientCmd) deleteShareOffsets(ctx context.Context, s *session, g shareGroup, topic string) int {
	if len(g.members) > 0 {
		return c.failf(shareGroupHint(g.id), "share group %s has active members: its offsets can only be deleted while it has none", g.id)
	}
	resps, err := s.adm.DeleteShareGroupOffsets(ctx, g.id, topic)
	if err == nil {
		err = resps.Error()
	}
	switch {
	case errors.Is(err, kerr.NonEmptyGroup):
		return c.failf(shareGroupHint(g.id), "share group %s has active members: a share consumer joined it meanwhile", g.id)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return c.failf("'strata groups describe "+g.id+"' lists the topics it has offsets for.",
			"share group %s has no offsets for topic %s", g.id, topic)
	case err != nil:
		return c.fail(fmt.Errorf("deleting the offsets of share group %s for %s: %w", g.id, topic, err))
	}
	fmt.Fprintf(c.stdout, "Deleted the offsets of share group %s for topic %s.\n", g.id, topic)
	return 0
}
