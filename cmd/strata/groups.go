package main

import (
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
		summary: "list, describe, delete consumer groups; reset their offsets",
		actions: groupsActions,
		help:    groupsHelp,
	})
}

var groupsActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"list":          runGroupsList,
	"describe":      runGroupsDescribe,
	"reset-offsets": runGroupsResetOffsets,
	"delete":        runGroupsDelete,
}

const groupsHelp = `Usage: strata groups <action> [flags]

Manages consumer groups through the Kafka group APIs, like
kafka-consumer-groups.sh.

Actions:
  list           print the group names
  describe       print a group's committed offsets, log end offsets, lag
                 and members
  reset-offsets  move a group's committed offsets (a dry run unless
                 --execute)
  delete         delete a group and its committed offsets

Run 'strata groups <action> --help' for its flags and an example.

Example:
  strata groups describe billing
  strata groups reset-offsets billing --topic orders --to-earliest --execute
`

func unknownGroup(group string) error {
	return withHint(fmt.Errorf("consumer group %q does not exist", group),
		"List the groups with 'strata groups list'; a group exists once a consumer joined it or offsets were committed for it.")
}

func runGroupsList(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups list", `Usage: strata groups list [flags]

Prints the names of the consumer groups, one a line, sorted.
`, `
Example:
  strata groups list
`, stdout, stderr)
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		groups, err := s.adm.ListGroups(ctx)
		if err != nil {
			return c.fail(err)
		}
		if format.json() {
			out := jsonGroupList{Groups: []jsonListedGroup{}}
			for _, g := range groups.Sorted() {
				out.Groups = append(out.Groups, jsonListedGroup{GroupID: g.Group, ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator})
			}
			return c.printJSON(out)
		}
		for _, g := range groups.Groups() {
			fmt.Fprintln(stdout, g)
		}
		return 0
	})
}

func runGroupsDescribe(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups describe", `Usage: strata groups describe GROUP [flags]

Prints a consumer group as kafka-consumer-groups.sh --describe does: its
state, then a line per partition it has committed offsets for or is
assigned, with the committed offset (CURRENT-OFFSET, - when none), the log
end offset, the lag between them and the member consuming it; then its
members with their assignments.
`, `
Example:
  strata groups describe billing
`, stdout, stderr)
	group := c.fs.String("group", "", "the consumer `GROUP` (required)")
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
		case l.Error() != nil:
			return c.fail(fmt.Errorf("consumer group %s: %w", *group, l.Error()))
		case l.State == "Dead":
			return c.fail(unknownGroup(*group))
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
`, `
Example:
  strata groups reset-offsets billing --topic orders --to-datetime 2024-05-01T00:00:00Z
  strata groups reset-offsets billing --topic orders --to-datetime 2024-05-01T00:00:00Z --execute
`, stdout, stderr)
	group := c.fs.String("group", "", "the consumer `GROUP` (required)")
	topic := c.fs.String("topic", "", "the topic `T` whose offsets move (required)")
	partition := c.fs.Int("partition", -1, "move only partition `P` (default: all)")
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
	switch {
	case *group == "":
		return c.missingName()
	case *topic == "":
		return c.usageError("--topic is required")
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
		if d, ok := described[*group]; ok {
			if d.Err != nil {
				return c.fail(fmt.Errorf("consumer group %s: %w", *group, d.Err))
			}
			if d.State != "Empty" && d.State != "Dead" {
				return c.failf("Stop the group's consumers, wait for 'strata groups describe --group "+*group+"' to show no active members, then try again.",
					"consumer group %s has active members (state %s): offsets can only be reset while it has none", *group, d.State)
			}
		}
		if err := checkTopic(ctx, s, *topic, int32(*partition)); err != nil {
			return c.fail(err)
		}
		starts, err := s.adm.ListStartOffsets(ctx, *topic)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return c.fail(fmt.Errorf("listing the start offsets of %s: %w", *topic, err))
		}
		ends, err := s.adm.ListEndOffsets(ctx, *topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return c.fail(fmt.Errorf("listing the end offsets of %s: %w", *topic, err))
		}
		var byTime kadm.ListedOffsets
		if set["to-datetime"] {
			byTime, err = s.adm.ListOffsetsAfterMilli(ctx, afterMilli, *topic)
			if err == nil {
				err = byTime.Error()
			}
			if err != nil {
				return c.fail(fmt.Errorf("listing the offsets of %s by time: %w", *topic, err))
			}
		}
		committed, err := s.adm.FetchOffsetsForTopics(ctx, *group, *topic)
		if err != nil {
			return c.fail(fmt.Errorf("fetching the committed offsets of group %s: %w", *group, err))
		}

		var offsets kadm.Offsets
		for _, p := range slices.Sorted(maps.Keys(ends[*topic])) {
			if *partition >= 0 && p != int32(*partition) {
				continue
			}
			start, end := starts[*topic][p].Offset, ends[*topic][p].Offset
			var at int64
			switch {
			case *toEarliest:
				at = start
			case *toLatest:
				at = end
			case set["to-offset"]:
				at = min(max(*toOffset, start), end)
			default:
				at = byTime[*topic][p].Offset
				if at < 0 {
					at = end
				}
			}
			offsets.Add(kadm.Offset{Topic: *topic, Partition: p, At: at, LeaderEpoch: -1})
		}

		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
		for _, o := range offsets.Sorted() {
			cur := int64(-1)
			if r, ok := committed.Lookup(o.Topic, o.Partition); ok && r.Err == nil {
				cur = r.At
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

func runGroupsDelete(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("groups delete", `Usage: strata groups delete GROUP... [flags]

Deletes consumer groups and their committed offsets. A group must have no
active members.
`, `
Example:
  strata groups delete billing
`, stdout, stderr)
	var groups stringsFlag
	c.fs.Var(&groups, "group", "a consumer `GROUP` to delete (required); repeatable")
	if status, ok := c.parseFlagsOnly(args, "group"); !ok {
		return status
	}
	if len(groups) == 0 {
		return c.missingName()
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		resps, err := s.adm.DeleteGroups(ctx, groups...)
		if err != nil {
			return c.fail(err)
		}
		status := 0
		for _, g := range groups {
			r, ok := resps[g]
			switch {
			case !ok:
				status = c.fail(fmt.Errorf("the broker's answer does not mention group %s", g))
			case errors.Is(r.Err, kerr.GroupIDNotFound):
				status = c.fail(unknownGroup(g))
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				status = c.fail(withHint(fmt.Errorf("consumer group %s has active members", g), "Stop the group's consumers first."))
			case r.Err != nil:
				status = c.fail(fmt.Errorf("consumer group %s: %w", g, r.Err))
			default:
				fmt.Fprintf(stdout, "Deleted consumer group %s.\n", g)
			}
		}
		return status
	})
}
