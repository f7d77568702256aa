package main

// Share groups (KIP-932) in `strata groups`, as kafka-share-groups.sh
// shows them. Where each figure comes from:
//
//   - ShareGroupDescribe (kadm DescribeShareGroups): state (Stable, or
//     Empty without members), group epoch, coordinator, members and
//     their assignments. A share group id with state in the share
//     coordinator but no group (GROUP_ID_NOT_FOUND here) is shown Empty
//     too.
//   - DescribeShareGroupOffsets v1 (kadm DescribeShareGroupOffsets):
//     each share partition's START-OFFSET and LAG, from its state in the
//     share coordinator.
//   - DescribeSharePartitions (Strata's own API, package strataapi), sent
//     to each partition's leader, where share partitions live: the
//     records in flight by state. A share partition no member used on
//     that leader yet has no such state: "-", as when the leader cannot
//     be asked.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/broker/strataapi"
)

// shareGroup is what the coordinator says of a share group.
type shareGroup struct {
	id          string
	state       string // Stable with members, Empty without
	epoch       int32  // -1 when it has no members (not known)
	coordinator int32
	members     []kadm.ShareGroupMember
	offsets     kadm.ShareOffsets
}

// lookupShareGroup returns group as a share group; ok false when no
// share group has that id (neither members nor state in the share
// coordinator).
func lookupShareGroup(ctx context.Context, s *session, group string) (g shareGroup, ok bool, err error) {
	g = shareGroup{id: group, epoch: -1, coordinator: -1}
	described, err := s.adm.DescribeShareGroups(ctx, group)
	if err != nil {
		return g, false, fmt.Errorf("describing share group %s: %w", group, err)
	}
	d, members := described[group]
	if members {
		g.coordinator = d.Coordinator.NodeID
		switch {
		case d.Err == nil:
			g.state, g.epoch, g.members = d.GroupState, d.GroupEpoch, d.Members
		case errors.Is(d.Err, kerr.GroupIDNotFound):
			members = false
		default:
			return g, false, fmt.Errorf("share group %s: %w", group, d.Err)
		}
	}
	offs, err := s.adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return g, false, fmt.Errorf("describing the offsets of share group %s: %w", group, err)
	}
	o, found := offs[group]
	switch {
	case found && o.Err == nil:
		g.offsets = o.Offsets
	case found && errors.Is(o.Err, kerr.GroupIDNotFound), !found:
		if !members {
			return g, false, nil
		}
	default:
		return g, false, fmt.Errorf("share group %s offsets: %w", group, o.Err)
	}
	if !members {
		g.state = "Empty"
	}
	return g, true, nil
}

// sharePartitionRow is one partition of a share group's describe.
type sharePartitionRow struct {
	topic     string
	partition int32
	start     int64 // -1: no state in the share coordinator
	lag       int64 // -1: unknown
	err       error // DescribeShareGroupOffsets' error for the partition
	leader    int32
	inflight  *strataapi.DescribeSharePartition // nil: unknown or not loaded
}

// shareRows are the partitions of g: those with state in the share
// coordinator and those assigned to a member, sorted.
func (g shareGroup) rows() []*sharePartitionRow {
	byTP := map[string]map[int32]*sharePartitionRow{}
	var out []*sharePartitionRow
	add := func(topic string, p int32) *sharePartitionRow {
		if byTP[topic] == nil {
			byTP[topic] = map[int32]*sharePartitionRow{}
		}
		r := byTP[topic][p]
		if r == nil {
			r = &sharePartitionRow{topic: topic, partition: p, start: -1, lag: -1, leader: -1}
			byTP[topic][p] = r
			out = append(out, r)
		}
		return r
	}
	for _, o := range g.offsets.Sorted() {
		r := add(o.Topic, o.Partition)
		r.start, r.lag, r.err = o.StartOffset, o.Lag, o.Err
	}
	for _, m := range g.members {
		for t, ps := range m.Assignment {
			for p := range ps {
				add(t, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b *sharePartitionRow) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return out
}

// fillInFlight asks each partition's leader for the share partitions of
// rows (DescribeSharePartitions) and sets what they answer. It returns a
// note for each leader that could not tell, for stderr: those rows keep
// "-".
func (c *clientCmd) fillInFlight(ctx context.Context, s *session, group string, rows []*sharePartitionRow) []string {
	var topics []string
	for _, r := range rows {
		topics = append(topics, r.topic)
	}
	topics = slices.Compact(topics) // rows are sorted by topic
	if len(topics) == 0 {
		return nil
	}
	md, err := s.adm.Metadata(ctx, topics...)
	if err != nil {
		return []string{fmt.Sprintf("in-flight records unknown: metadata: %v", err)}
	}
	addrs := map[int32]string{}
	for _, b := range md.Brokers {
		addrs[b.NodeID] = brokerAddr(b.Host, b.Port)
	}
	byLeader := map[int32][]*sharePartitionRow{}
	for _, r := range rows {
		if pd, ok := md.Topics[r.topic].Partitions[r.partition]; ok && pd.Err == nil && pd.Leader >= 0 {
			r.leader = pd.Leader
			byLeader[r.leader] = append(byLeader[r.leader], r)
		}
	}
	var notes []string
	for _, id := range slices.Sorted(maps.Keys(byLeader)) {
		rs := byLeader[id]
		var req []strataapi.DescribeSharePartitionsRequestTopic
		for _, r := range rs {
			if n := len(req); n == 0 || req[n-1].Topic != r.topic {
				req = append(req, strataapi.DescribeSharePartitionsRequestTopic{Topic: r.topic})
			}
			t := &req[len(req)-1]
			t.Partitions = append(t.Partitions, r.partition)
		}
		resp, err := describeSharePartitions(ctx, addrs[id], c.sec, group, req)
		if err != nil {
			notes = append(notes, fmt.Sprintf("in-flight records of the partitions broker %d leads unknown: %v", id, err))
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.ErrorCode != 0 || p.ErrorCode != 0 || !p.Loaded {
					continue
				}
				for _, r := range rs {
					if r.topic == t.Topic && r.partition == p.Partition {
						r.inflight = &p
					}
				}
			}
		}
	}
	return notes
}

// describeSharePartitions asks the broker at addr for group's share
// partitions of topics.
func describeSharePartitions(ctx context.Context, addr string, sec *clientSecurity, group string, topics []strataapi.DescribeSharePartitionsRequestTopic) (*strataapi.DescribeSharePartitionsResponse, error) {
	c, err := dialStrata(ctx, addr, sec)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	defer c.close()
	req := &strataapi.DescribeSharePartitionsRequest{GroupID: group, Topics: topics}
	resp := req.ResponseKind().(*strataapi.DescribeSharePartitionsResponse)
	if err := c.roundTrip(req, resp); err != nil {
		return nil, fmt.Errorf("broker %s: DescribeSharePartitions: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("broker %s: DescribeSharePartitions: %w", addr, err)
	}
	return resp, nil
}

// describeShareGroup prints g for groups describe; exit 1 when a
// partition's lag is unknown for an error, as for consumer groups.
func (c *clientCmd) describeShareGroup(ctx context.Context, s *session, g shareGroup, json bool) int {
	rows := g.rows()
	notes := c.fillInFlight(ctx, s, g.id, rows)
	var lagErr error
	for _, r := range rows {
		if r.err != nil && lagErr == nil {
			lagErr = fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, r.err)
		}
	}
	var status int
	if json {
		status = c.shareGroupJSON(g, rows)
	} else {
		status = c.shareGroupText(g, rows)
	}
	if status != 0 {
		return status
	}
	for _, n := range notes {
		fmt.Fprintf(c.stderr, "strata %s: %s\n", c.name, n)
	}
	if lagErr != nil {
		return c.fail(lagErr)
	}
	return 0
}

func (c *clientCmd) shareGroupText(g shareGroup, rows []*sharePartitionRow) int {
	w := c.stdout
	fmt.Fprintf(w, "Share group %s: state %s", g.id, g.state)
	if g.epoch >= 0 {
		fmt.Fprintf(w, ", group epoch %d", g.epoch)
	}
	fmt.Fprintf(w, ", coordinator %d, %s\n\n", g.coordinator, plural(int64(len(g.members)), "member"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tLAG\tIN-FLIGHT\tAVAILABLE\tACQUIRED\tACKNOWLEDGED\tARCHIVING\tARCHIVED")
	for _, r := range rows {
		inflight := []string{"-", "-", "-", "-", "-", "-"}
		if f := r.inflight; f != nil {
			inflight = []string{strconv.FormatInt(f.EndOffset-f.StartOffset, 10), itoa32(f.Available), itoa32(f.Acquired),
				itoa32(f.Acknowledged), itoa32(f.Archiving), itoa32(f.Archived)}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.topic, r.partition, offsetOrDash(r.start), offsetOrDash(r.lag), strings.Join(inflight, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	if len(g.members) == 0 {
		fmt.Fprintf(w, "\nShare group %s has no active members.\n", g.id)
		return 0
	}
	fmt.Fprintln(w, "\nMEMBERS")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER-ID\tHOST\tCLIENT-ID\tASSIGNMENT")
	for _, m := range g.members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientHost, m.ClientID, shareAssignment(m.Assignment))
	}
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	return 0
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }

// shareAssignment formats a member's assigned partitions as topic:0,1,2.
func shareAssignment(a kadm.TopicsSet) string {
	var parts []string
	for _, t := range a.Sorted() {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		parts = append(parts, t.Topic+":"+joinIDs(ps))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func (c *clientCmd) shareGroupJSON(g shareGroup, rows []*sharePartitionRow) int {
	out := jsonShareGroup{GroupID: g.id, GroupType: "share", State: g.state, GroupEpoch: nonNeg(int64(g.epoch)), Coordinator: g.coordinator,
		Partitions: []jsonSharePartition{}, Members: []jsonShareMember{}}
	for _, r := range rows {
		j := jsonSharePartition{Topic: r.topic, Partition: r.partition, StartOffset: nonNeg(r.start), Lag: nonNeg(r.lag),
			Leader: r.leader, Error: errString(r.err)}
		if f := r.inflight; f != nil {
			j.InFlight = &jsonShareInFlight{StartOffset: f.StartOffset, EndOffset: f.EndOffset,
				Available: f.Available, Acquired: f.Acquired, Acknowledged: f.Acknowledged, Archiving: f.Archiving, Archived: f.Archived,
				AcquiredTotal: f.AcquiredTotal, RedeliveredTotal: f.RedeliveredTotal, ArchivedTotal: f.ArchivedTotal}
		}
		out.Partitions = append(out.Partitions, j)
	}
	for _, m := range g.members {
		jm := jsonShareMember{ConsumerID: m.MemberID, Host: m.ClientHost, ClientID: m.ClientID, Assignment: []jsonTopicPartition{}}
		for _, t := range m.Assignment.Sorted() {
			ps := slices.Clone(t.Partitions)
			slices.Sort(ps)
			jm.Assignment = append(jm.Assignment, jsonTopicPartition{Topic: t.Topic, Partitions: ids(ps)})
		}
		out.Members = append(out.Members, jm)
	}
	return c.printJSON(out)
}

// shareGroupHint is the next step after NON_EMPTY_GROUP from a share
// group's offsets or deletion.
func shareGroupHint(group string) string {
	return "Stop the group's share consumers (closing them ends their share sessions), check that 'strata groups describe " + group +
		"' shows no active members, then try again."
}
