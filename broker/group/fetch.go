package group

// OffsetFetch: versions 1-9 (v0 is answered the same way).
//
// Behavior:
//   - v8 asks for several groups at once, each answered with its own
//     error; v0-v7 for one group. The empty group id is allowed.
//   - Errors of the group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     ...): v2+ in the group's (top-level) error code, v0-1 on every
//     requested partition.
//   - Partitions without a committed offset, and every partition of an
//     unknown group, answer offset -1, leader epoch -1, metadata "" and no
//     error. Metadata is never null.
//   - Null topics (v2+) ask for every committed offset of the group.
//   - RequireStable (v7+, KIP-447): a partition with a commit still
//     pending (a transactional one waiting for its marker, or a plain one
//     being appended) answers offset -1 and UNSTABLE_OFFSET_COMMIT, which
//     clients retry; without it the last committed offset is answered.
//   - v9 (KIP-848): a group's MemberID and MemberEpoch, when given for a
//     consumer group, must be a member's and its epoch: UNKNOWN_MEMBER_ID,
//     STALE_MEMBER_EPOCH (older), FENCED_MEMBER_EPOCH (newer).

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchedTopic is one topic of an OffsetFetch answer.
type fetchedTopic struct {
	topic      string
	partitions []int32
	entries    []offsetEntry // offset -1 where nothing is committed
	codes      []int16       // per partition: UNSTABLE_OFFSET_COMMIT or 0
}

// OffsetFetch handles an OffsetFetch request. It does not block.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var want []fetchedTopic
			for _, t := range rg.Topics {
				want = append(want, fetchedTopic{topic: t.Topic, partitions: t.Partitions})
			}
			member := fetchMember{id: rg.MemberID, epoch: rg.MemberEpoch}
			if req.Version < 9 {
				member = fetchMember{epoch: -1}
			}
			code, got := c.fetchOffsets(rg.Group, want, rg.Topics == nil, req.RequireStable, member)
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			sg.ErrorCode = code
			for _, ft := range got {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic = ft.topic
				for i, p := range ft.partitions {
					e := ft.entries[i]
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition = p
					sp.Offset = e.offset
					sp.LeaderEpoch = e.leaderEpoch
					sp.Metadata = kmsg.StringPtr(e.metadata)
					sp.ErrorCode = ft.codes[i]
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}

	var want []fetchedTopic
	for _, t := range req.Topics {
		want = append(want, fetchedTopic{topic: t.Topic, partitions: t.Partitions})
	}
	all := req.Topics == nil && req.Version >= 2
	code, got := c.fetchOffsets(req.Group, want, all, req.Version >= 7 && req.RequireStable, fetchMember{epoch: -1})
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		got = unknownOffsets(want)
	}
	for _, ft := range got {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = ft.topic
		for i, p := range ft.partitions {
			e := ft.entries[i]
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition = p
			sp.Offset = e.offset
			sp.LeaderEpoch = e.leaderEpoch
			sp.Metadata = kmsg.StringPtr(e.metadata)
			sp.ErrorCode = code
			if code == 0 {
				sp.ErrorCode = ft.codes[i]
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

var noOffset = offsetEntry{offset: -1, leaderEpoch: -1, expireTime: -1}

func unknownOffsets(want []fetchedTopic) []fetchedTopic {
	out := make([]fetchedTopic, len(want))
	for i, t := range want {
		out[i] = fetchedTopic{topic: t.topic, partitions: t.partitions, entries: make([]offsetEntry, len(t.partitions)), codes: make([]int16, len(t.partitions))}
		for j := range t.partitions {
			out[i].entries[j] = noOffset
		}
	}
	return out
}

// fetchOffsets returns a group error, or the committed offsets of the
// wanted partitions (all of them when all is set); with stable, partitions
// with a pending commit get UNSTABLE_OFFSET_COMMIT instead.
// fetchMember is who fetches: a member of a consumer group (OffsetFetch
// v9+), or nobody in particular (nil id, epoch -1).
type fetchMember struct {
	id    *string
	epoch int32
}

func (c *Coordinator) fetchOffsets(groupID string, want []fetchedTopic, all, stable bool, member fetchMember) (int16, []fetchedTopic) {
	if !validGroupID(groupID, true) {
		return kerr.InvalidGroupID.Code, nil
	}
	g, code := c.lookup(groupID, false)
	if code != 0 {
		return code, nil
	}
	out := unknownOffsets(want)
	if g == nil {
		return 0, out
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == StateDead {
		return 0, out
	}
	if g.consumer != nil && (member.id != nil || member.epoch >= 0) {
		id := ""
		if member.id != nil {
			id = *member.id
		}
		if code := g.consumer.checkMemberEpoch(id, member.epoch); code != 0 {
			return code, nil
		}
	}
	if all {
		topics := make([]string, 0, len(g.offsets))
		for t := range g.offsets {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		out = out[:0]
		for _, t := range topics {
			ft := fetchedTopic{topic: t}
			ps := make([]int32, 0, len(g.offsets[t]))
			for p := range g.offsets[t] {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				ft.partitions = append(ft.partitions, p)
				ft.entries = append(ft.entries, g.offsets[t][p])
				ft.codes = append(ft.codes, 0)
			}
			out = append(out, ft)
		}
	} else {
		for i := range out {
			for j, p := range out[i].partitions {
				if e, ok := g.offsets[out[i].topic][p]; ok {
					out[i].entries[j] = e
				}
			}
		}
	}
	if stable {
		for i := range out {
			for j, p := range out[i].partitions {
				if g.hasPendingLocked(tp{out[i].topic, p}) {
					out[i].entries[j] = noOffset
					out[i].codes[j] = kerr.UnstableOffsetCommit.Code
				}
			}
		}
	}
	return 0, out
}
