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
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// apiDeleteRecords is the Kafka API key of DeleteRecords.
const apiDeleteRecords = 21

// deleteRecordsFile is kafka-delete-records.sh's offset JSON file.
type deleteRecordsFile struct {
	Partitions []struct {
		Topic     *string `json:"topic"`
		Partition *int32  `json:"partition"`
		Offset    *int64  `json:"offset"`
	} `json:"partitions"`
	Version *int `json:"version"`
}

// parseDeleteRecordsJSON reads kafka-delete-records.sh's offset JSON, as
// its DeleteRecordsCommand does: version 1 (the default), every entry
// with a topic, a partition and an offset (-1: the high watermark), no
// partition twice.
func parseDeleteRecordsJSON(data []byte) (kadm.Offsets, error) {
	var f deleteRecordsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("the offset JSON file is not valid: %w", err)
	}
	if f.Version != nil && *f.Version != 1 {
		return nil, fmt.Errorf("not supported version field value %d (want 1)", *f.Version)
	}
	if len(f.Partitions) == 0 {
		return nil, errors.New(`the offset JSON file lists no partitions (want {"partitions":[{"topic":"t","partition":0,"offset":10}],"version":1})`)
	}
	offs := kadm.Offsets{}
	for i, p := range f.Partitions {
		switch {
		case p.Topic == nil || *p.Topic == "":
			return nil, fmt.Errorf("partitions[%d]: topic is missing", i)
		case p.Partition == nil || *p.Partition < 0:
			return nil, fmt.Errorf("partitions[%d]: partition is missing or negative", i)
		case p.Offset == nil || *p.Offset < -1:
			return nil, fmt.Errorf("partitions[%d]: offset is missing or below -1", i)
		}
		if _, dup := offs.Lookup(*p.Topic, *p.Partition); dup {
			return nil, fmt.Errorf("the offset JSON file contains duplicate topic partitions: %s-%d", *p.Topic, *p.Partition)
		}
		offs.Add(kadm.Offset{Topic: *p.Topic, Partition: *p.Partition, At: *p.Offset, LeaderEpoch: -1})
	}
	return offs, nil
}

func runTopicDeleteRecords(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("topic delete-records", `Usage: strata topic delete-records (--offset-json-file FILE | TOPIC --partition P --offset N) [flags]

Deletes the records of partitions below an offset (DeleteRecords), like
kafka-delete-records.sh: each partition's log start offset moves up to
the offset (-1: the high watermark), on every replica and in tiered
storage, and what lies below is deleted. There is no undo. Each
partition's new low watermark is printed when all its live replicas have
it (or the request times out).

The offset JSON file is kafka-delete-records.sh's:
  {"partitions":[{"topic":"orders","partition":0,"offset":10}],"version":1}
`, `
Example:
  strata topic delete-records orders --partition 0 --offset 1000
  strata topic delete-records --offset-json-file offsets.json
`, stdout, stderr)
	file := c.fs.String("offset-json-file", "", "`FILE` with the partitions and offsets (kafka-delete-records.sh's JSON)")
	topic := c.fs.String("topic", "", "the `TOPIC` (instead of --offset-json-file)")
	partition := c.fs.Int("partition", -1, "partition `P` of --topic")
	offset := c.fs.Int64("offset", -2, "delete the records below offset `N` (-1: the high watermark)")
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return status
	}
	var offs kadm.Offsets
	switch {
	case *file != "" && (*topic != "" || *partition != -1 || *offset != -2):
		return c.usageError("--offset-json-file and --topic/--partition/--offset are exclusive")
	case *file != "":
		data, err := os.ReadFile(*file)
		if err != nil {
			return c.fail(err)
		}
		if offs, err = parseDeleteRecordsJSON(data); err != nil {
			return c.fail(err)
		}
	case *topic == "":
		return c.usageError("--offset-json-file or --topic is required")
	case *partition < 0:
		return c.usageError("--partition is required with --topic (0 or more)")
	case *offset < -1:
		return c.usageError("--offset is required with --topic (an offset, or -1 for the high watermark)")
	default:
		offs = kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: *topic, Partition: int32(*partition), At: *offset, LeaderEpoch: -1})
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		if !s.supports(apiDeleteRecords) {
			return c.failf("", "the broker does not serve DeleteRecords (Kafka API key %d)", apiDeleteRecords)
		}
		fmt.Fprintln(stdout, "Executing records delete operation")
		res, err := s.adm.DeleteRecords(ctx, offs)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(stdout, "Records delete operation completed:")
		failed := 0
		for _, t := range slices.Sorted(maps.Keys(offs)) {
			for _, p := range slices.Sorted(maps.Keys(offs[t])) {
				r, ok := res.Lookup(t, p)
				switch {
				case !ok:
					failed++
					fmt.Fprintf(stdout, "partition: %s-%d\terror: no answer for the partition\n", t, p)
				case r.Err != nil:
					failed++
					fmt.Fprintf(stdout, "partition: %s-%d\terror: %v\n", t, p, kafkaError(r.Err, ""))
				default:
					fmt.Fprintf(stdout, "partition: %s-%d\tlow_watermark: %d\n", t, p, r.LowWatermark)
				}
			}
		}
		if failed > 0 {
			fmt.Fprintf(stderr, "strata topic delete-records: %d of the partitions failed\n", failed)
			return 1
		}
		return 0
	})
}
