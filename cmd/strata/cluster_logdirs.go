package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// `strata cluster log-dirs`: kafka-log-dirs.sh --describe.

func init() { clusterActions["log-dirs"] = runClusterLogDirs }

func runClusterLogDirs(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("cluster log-dirs", `Usage: strata cluster log-dirs [TOPIC[,TOPIC...]] [--broker N] [--json]

Describes the log directories (log.dirs) of every live broker, or of broker
N (DescribeLogDirs): each directory's state (online, or its error:
KAFKA_STORAGE_ERROR for a failed disk), its file system's total and usable
bytes, and the partitions in it with their size in bytes (local segment
files), offset lag and whether the replica is a future one (a move between
directories in progress, see 'Moving replicas between data directories' in
docs/cluster.md). --topic lists only those topics' partitions.

--format json (or --json) prints kafka-log-dirs.sh --describe's JSON instead:
{"version":1,"brokers":[{"broker":N,"logDirs":[{"logDir":...,"error":null,
"partitions":[{"partition":"T-P","size":...,"offsetLag":...,"isFuture":false}]}]}]}
`, `
Example:
  strata cluster log-dirs orders --broker 1
  strata cluster log-dirs --json
`, stdout, stderr)
	brokerFlag := c.fs.Int("broker", -1, "describe only broker `ID`")
	topicFlag := c.fs.String("topic", "", "only the partitions of `TOPICS` (comma-separated)")
	jsonOut := c.fs.Bool("json", false, "print kafka-log-dirs.sh's JSON (as --format json)")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	if format.json() {
		*jsonOut = true
	}
	if *brokerFlag < -1 || *brokerFlag > 1<<31-1 {
		return c.usageError("--broker %d: want a broker id >= 0", *brokerFlag)
	}
	var topics []string
	if *topicFlag != "" {
		for _, t := range strings.Split(*topicFlag, ",") {
			if t = strings.TrimSpace(t); t == "" {
				return c.usageError("--topic %q: an empty topic name", *topicFlag)
			}
			topics = append(topics, t)
		}
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		var set kadm.TopicsSet // nil: every partition
		if len(topics) > 0 {
			tds, err := s.adm.ListTopics(ctx, topics...)
			if err != nil {
				return c.fail(err)
			}
			set = kadm.TopicsSet{}
			for _, t := range topics {
				td, ok := tds[t]
				if !ok || td.Err != nil {
					err := td.Err
					if err == nil {
						err = kerr.UnknownTopicOrPartition
					}
					return c.fail(fmt.Errorf("topic %s: %w", t, err))
				}
				for p := range td.Partitions {
					set.Add(t, p)
				}
			}
		}
		all := kadm.DescribedAllLogDirs{}
		if *brokerFlag >= 0 {
			dirs, err := s.adm.DescribeBrokerLogDirs(ctx, int32(*brokerFlag), set)
			if err != nil {
				return c.fail(fmt.Errorf("broker %d: %w", *brokerFlag, err))
			}
			all[int32(*brokerFlag)] = dirs
		} else {
			var err error
			if all, err = s.adm.DescribeAllLogDirs(ctx, set); err != nil {
				return c.fail(err)
			}
		}
		if *jsonOut {
			return c.printLogDirsJSON(stdout, all)
		}
		return c.printLogDirs(stdout, all)
	})
}

// sortedLogDirs lists the described directories by broker, then path.
func sortedLogDirs(all kadm.DescribedAllLogDirs) []kadm.DescribedLogDir {
	var out []kadm.DescribedLogDir
	for _, dirs := range all {
		for _, d := range dirs {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b kadm.DescribedLogDir) int {
		if a.Broker != b.Broker {
			return int(a.Broker - b.Broker)
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	return out
}

func (c *clientCmd) printLogDirs(w io.Writer, all kadm.DescribedAllLogDirs) int {
	dirs := sortedLogDirs(all)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tLOG DIR\tSTATE\tTOTAL BYTES\tUSABLE BYTES\tPARTITIONS\tSIZE")
	for _, d := range dirs {
		state := "online"
		if d.Err != nil {
			state = errorName(d.Err)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", d.Broker, d.Dir, state, bytesOrUnknown(d.TotalBytes), bytesOrUnknown(d.UsableBytes),
			len(d.Topics.Sorted()), d.Size())
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BROKER\tLOG DIR\tTOPIC\tPARTITION\tSIZE\tOFFSET LAG\tFUTURE")
	for _, d := range dirs {
		for _, p := range d.Topics.Sorted() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%t\n", d.Broker, d.Dir, p.Topic, p.Partition, p.Size, p.OffsetLag, p.IsFuture)
		}
	}
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	return 0
}

func bytesOrUnknown(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// errorName is a Kafka error's name (KAFKA_STORAGE_ERROR), or the error.
func errorName(err error) string {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Message
	}
	return err.Error()
}

// kafkaExceptions are the Java exception classes kafka-log-dirs.sh prints
// for the errors a log directory can have.
var kafkaExceptions = map[int16]string{
	kerr.KafkaStorageError.Code:          "org.apache.kafka.common.errors.KafkaStorageException",
	kerr.ClusterAuthorizationFailed.Code: "org.apache.kafka.common.errors.ClusterAuthorizationException",
	kerr.UnknownServerError.Code:         "org.apache.kafka.common.errors.UnknownServerException",
}

type logDirsJSON struct {
	Version int                 `json:"version"`
	Brokers []logDirsBrokerJSON `json:"brokers"`
}

type logDirsBrokerJSON struct {
	Broker  int32            `json:"broker"`
	LogDirs []logDirJSONItem `json:"logDirs"`
}

type logDirJSONItem struct {
	LogDir     string                `json:"logDir"`
	Error      *string               `json:"error"`
	Partitions []logDirPartitionJSON `json:"partitions"`
}

type logDirPartitionJSON struct {
	Partition string `json:"partition"`
	Size      int64  `json:"size"`
	OffsetLag int64  `json:"offsetLag"`
	IsFuture  bool   `json:"isFuture"`
}

func (c *clientCmd) printLogDirsJSON(w io.Writer, all kadm.DescribedAllLogDirs) int {
	out := logDirsJSON{Version: 1, Brokers: []logDirsBrokerJSON{}}
	for _, d := range sortedLogDirs(all) {
		if n := len(out.Brokers); n == 0 || out.Brokers[n-1].Broker != d.Broker {
			out.Brokers = append(out.Brokers, logDirsBrokerJSON{Broker: d.Broker, LogDirs: []logDirJSONItem{}})
		}
		item := logDirJSONItem{LogDir: d.Dir, Partitions: []logDirPartitionJSON{}}
		if d.Err != nil {
			name := errorName(d.Err)
			if ke, ok := d.Err.(*kerr.Error); ok {
				if ex, ok := kafkaExceptions[ke.Code]; ok {
					name = ex
				}
			}
			item.Error = &name
		}
		for _, p := range d.Topics.Sorted() {
			item.Partitions = append(item.Partitions, logDirPartitionJSON{
				Partition: fmt.Sprintf("%s-%d", p.Topic, p.Partition), Size: p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture})
		}
		b := &out.Brokers[len(out.Brokers)-1]
		b.LogDirs = append(b.LogDirs, item)
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(out); err != nil {
		return c.fail(err)
	}
	return 0
}

// sendLogDirMoves sends AlterReplicaLogDirs to each broker for the plan's
// log_dirs entries that are not "any", before the reassignment starts (as
// kafka-reassign-partitions.sh --execute moves replicas between log
// directories): a replica the broker hosts starts moving to the
// directory; one it does not host yet answers REPLICA_NOT_AVAILABLE and
// the broker creates it in that directory when the reassignment adds it.
// Any other error fails the command before the reassignment. ok is false
// with the exit status.
func (c *clientCmd) sendLogDirMoves(ctx context.Context, s *session, plan *reassignPlan) (status int, ok bool) {
	byBroker := map[int32]kadm.AlterReplicaLogDirsReq{}
	for _, p := range plan.Partitions {
		for i, d := range p.LogDirs {
			if d == anyLogDir {
				continue
			}
			req := byBroker[p.Replicas[i]]
			var ts kadm.TopicsSet
			ts.Add(p.Topic, p.Partition)
			req.Add(d, ts)
			byBroker[p.Replicas[i]] = req
		}
	}
	for _, b := range slices.Sorted(maps.Keys(byBroker)) {
		resps, err := s.adm.AlterBrokerReplicaLogDirs(ctx, b, byBroker[b])
		if err != nil {
			return c.fail(fmt.Errorf("AlterReplicaLogDirs to broker %d: %w", b, err)), false
		}
		for _, r := range resps.Sorted() {
			switch {
			case r.Err == nil:
				fmt.Fprintf(c.stdout, "Moving the replica of %s-%d on broker %d to log directory %s\n", r.Topic, r.Partition, b, r.Dir)
			case errors.Is(r.Err, kerr.ReplicaNotAvailable):
				fmt.Fprintf(c.stdout, "Broker %d will create its replica of %s-%d in log directory %s\n", b, r.Topic, r.Partition, r.Dir)
			default:
				return c.fail(fmt.Errorf("moving the replica of %s-%d on broker %d to log directory %s: %w", r.Topic, r.Partition, b, r.Dir, r.Err)), false
			}
		}
	}
	return 0, true
}
