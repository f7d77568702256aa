package broker

import (
	"cmp"
	"path/filepath"
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v0-4
//
// Behavior (Kafka's KafkaApis.handleDescribeLogDirsRequest and
// ReplicaManager.describeLogDirs):
// * Needs DESCRIBE on the cluster. Denied: no directories, and from v3
//   CLUSTER_AUTHORIZATION_FAILED at the top (v0-v2 have no top-level
//   error: an empty answer).
// * One result per directory of log.dirs, in its order, with the
//   directory's absolute path. An offline directory (logdirs.go) is
//   KAFKA_STORAGE_ERROR with no partitions.
// * Per partition hosted in the directory: PartitionSize is the bytes of
//   its local segment (.log) files, as Kafka's log.size; OffsetLag is
//   max(high watermark - log end offset, 0) for the current replica, and
//   for a future replica (a move by AlterReplicaLogDirs in progress,
//   logdir_move.go) the current replica's log end offset minus the
//   future's; IsFutureKey marks the future replica.
// * Topics null: every partition hosted here. Listed partitions this
//   broker does not host (or whose replica is offline) are left out, as
//   in Kafka, and a topic with none left is left out too.
// * v4: TotalBytes and UsableBytes of the directory's file system
//   (statfs; -1 where the platform has none, or it fails).
//
// Version notes:
// * v0: KIP-113
// * v1: same as v0 (throttle after the response)
// * v2: flexible
// * v3: top-level ErrorCode
// * v4: TotalBytes, UsableBytes (KIP-827)

func init() { register(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorize(r, acl.OpDescribe, acl.Cluster) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	var want map[string]map[int32]bool // nil: every partition
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if want[t.Topic] == nil {
				want[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	byDir := map[*logDir][]logDirReplica{}
	for _, rep := range s.logDirReplicas() {
		if want == nil || want[rep.topic][rep.index] {
			byDir[rep.ldir] = append(byDir[rep.ldir], rep)
		}
	}
	for _, d := range s.dirs.dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = absPath(d.path)
		if d.offline.Load() {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		rd.TotalBytes, rd.UsableBytes = diskSpace(d.path)
		reps := byDir[d]
		slices.SortFunc(reps, func(a, b logDirReplica) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.index, b.index), cmp.Compare(boolInt(a.future), boolInt(b.future)))
		})
		for _, rep := range reps {
			if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != rep.topic {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = rep.topic
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = rep.index, rep.size, rep.lag, rep.future
			rt := &rd.Topics[len(rd.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return reply{msg: resp}, nil
}

// logDirReplica is one local replica as DescribeLogDirs shows it.
type logDirReplica struct {
	topic  string
	index  int32
	ldir   *logDir
	size   int64 // bytes of its segment files
	lag    int64
	future bool
}

// logDirReplicas lists the open replicas, and the future replicas of the
// moves in progress (logdir_move.go).
func (s *Server) logDirReplicas() []logDirReplica {
	var out []logDirReplica
	for _, p := range s.allPartitions() {
		ld := p.logDir()
		if ld == nil {
			continue
		}
		l := p.log
		leo := l.LogEndOffset()
		out = append(out, logDirReplica{topic: p.topic, index: p.index, ldir: ld,
			size: logSize(l.Segments()), lag: max(l.HighWatermark()-leo, 0)})
		if f := p.futureReplica(); f != nil && f.dest != ld {
			var size int64
			end := l.LogStartOffset()
			if m := f.mover.Load(); m != nil {
				size, end = m.Bytes(), m.Offset()
			}
			out = append(out, logDirReplica{topic: p.topic, index: p.index, ldir: f.dest,
				size: size, lag: max(leo-end, 0), future: true})
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// absPath is path made absolute (Kafka reports log directories by their
// absolute paths); path itself if that fails.
func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

// logSize is the bytes of a log's segment (.log) files, as Kafka's
// UnifiedLog.size.
func logSize(segs []segment.SegmentInfo) int64 {
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}
