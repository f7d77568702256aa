package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v1-8
//
// Behavior (group/commit.go has the details):
// * Committed by the group coordinator to the group's partition of
//   __consumer_offsets; the answer leaves after the append (fsynced as
//   that partition's flush settings say), and the offsets are visible to
//   OffsetFetch from then on. Metadata is stored as given, "" for null.
// * A partition this broker does not have: UNKNOWN_TOPIC_OR_PARTITION, as
//   Kafka. Metadata longer than offset.metadata.max.bytes:
//   OFFSET_METADATA_TOO_LARGE.
// * Generation -1 with no member id is a "simple" commit, accepted while
//   the group has no members; a member commit must name a current member
//   of the current generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//   FENCED_INSTANCE_ID; REBALANCE_IN_PROGRESS while the group waits for
//   its assignment).
// * The commit is not abandoned when the client disconnects or the server
//   shuts down: the append finishes and the answer goes out if the
//   connection is still there.
//
// Version notes:
// * v2-4: RetentionTimeMillis (sets the offsets' expire time)
// * v5: no retention time
// * v6: committed leader epoch
// * v7: GroupInstanceID
// * v8: flexible versions

func init() { registerGroupAPI(8, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	return reply{msg: s.groups.OffsetCommit(context.WithoutCancel(groupCtx(r)), req)}, nil
}
