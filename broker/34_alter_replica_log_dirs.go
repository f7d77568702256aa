package broker

import (
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterReplicaLogDirs: v0-2
//
// Behavior (Kafka's KafkaApis.handleAlterReplicaLogDirsRequest and
// ReplicaManager.alterReplicaLogDirs):
// * Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED on
//   every partition.
// * Each partition is moved to the directory named (compared by absolute
//   path) among this broker's log.dirs; the move runs in the background
//   (logdir_move.go) and the answer says it started. DescribeLogDirs
//   shows the future replica while it copies.
// * Errors per partition: LOG_DIR_NOT_FOUND for a path not in log.dirs;
//   KAFKA_STORAGE_ERROR for an offline destination, an offline replica,
//   or (as Kafka, which creates no future log then) while any directory
//   is offline; UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster
//   does not have; REPLICA_NOT_AVAILABLE for one this broker does not
//   host, whose destination is remembered: the replica is created there
//   if this broker comes to host it (a reassignment), as Kafka does;
//   INVALID_TOPIC_EXCEPTION for a topic name whose future directory name
//   would pass 255 bytes.
// * The directory the replica is in already: success, nothing moves (a
//   move elsewhere in progress is stopped). The destination of a move in
//   progress: success. Another destination: the move in progress stops,
//   the new one starts.
// * A partition named twice: the last path wins, answered once.
//
// Version notes:
// * v0: KIP-113
// * v1: same as v0 (throttle after the response)
// * v2: flexible

func init() { register(34, 0, 2, handleAlterReplicaLogDirs) }

func handleAlterReplicaLogDirs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	type tp struct {
		topic string
		index int32
	}
	dest := map[tp]string{}
	var order []tp
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				k := tp{t.Topic, p}
				if _, ok := dest[k]; !ok {
					order = append(order, k)
				}
				dest[k] = d.Dir
			}
		}
	}
	allowed := s.authorize(r, acl.OpAlter, acl.Cluster)
	results := map[string]int{} // topic → index in resp.Topics
	for _, k := range order {
		var code int16
		if !allowed {
			code = kerr.ClusterAuthorizationFailed.Code
		} else {
			code = s.alterReplicaLogDir(k.topic, k.index, dest[k])
		}
		i, ok := results[k.topic]
		if !ok {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = k.topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			results[k.topic] = i
		}
		rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = k.index, code
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return reply{msg: resp}, nil
}

// alterReplicaLogDir starts moving topic's partition index to the log
// directory path and returns the Kafka error code.
func (s *Server) alterReplicaLogDir(topic string, index int32, path string) int16 {
	name := segment.PartitionDirName(topic, index)
	if len(name)+len(".")+32+len(futureSuffix) > 255 {
		return kerr.InvalidTopicException.Code
	}
	abs := absPath(path)
	i := slices.IndexFunc(s.dirs.dirs, func(d *logDir) bool { return absPath(d.path) == abs })
	if i < 0 {
		return kerr.LogDirNotFound.Code
	}
	d := s.dirs.dirs[i]
	if d.offline.Load() {
		return kerr.KafkaStorageError.Code
	}
	if s.offlineError(topic, index) != nil {
		return kerr.KafkaStorageError.Code
	}
	t := s.topic(topic)
	if t == nil || !t.hasPartition(index) {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := t.local(index)
	if p == nil {
		if _, ok := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: topic, Partition: index}); !ok {
			return kerr.UnknownTopicOrPartition.Code
		}
		if !s.dirs.prefer(name, d) {
			s.log.Warn("AlterReplicaLogDirs: too many preferred log directories of replicas not hosted here; not remembered", "partition", name)
		}
		return kerr.ReplicaNotAvailable.Code
	}
	if p.logDir() != d && len(s.dirs.online()) < len(s.dirs.dirs) {
		return kerr.KafkaStorageError.Code
	}
	code, _ := errorCode(s.moveReplica(p, d))
	return code
}
