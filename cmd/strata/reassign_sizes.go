package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

// This file holds where the reassignment commands learn how many bytes a
// move copies: the local size of each partition replica, as Kafka's
// DescribeLogDirs (API 35) reports it (the bytes of the replica's local
// segment files). A tiered partition's move copies only its local tail,
// which is what that size is.

// apiDescribeLogDirs is Kafka's DescribeLogDirs API key.
const apiDescribeLogDirs = 35

// replicaSizes is the local size in bytes of partition replicas:
// [broker][topic-partition]. A broker that answered has an entry (maybe
// empty: it holds none of the partitions asked for); a partition missing
// from a broker that answered is not there (0 bytes); a broker missing
// is unknown.
type replicaSizes map[int32]map[string]int64

// of returns the size of partition tp on broker b, and whether it is
// known.
func (rs replicaSizes) of(b int32, tp string) (int64, bool) {
	m, ok := rs[b]
	if !ok {
		return 0, false
	}
	return m[tp], true
}

// sizeSource returns the local sizes of the partitions of topics on the
// brokers. It returns what it learnt even when some brokers fail, with
// an error naming them.
type sizeSource func(ctx context.Context, brokers []int32, topics kadm.TopicsSet) (replicaSizes, error)

// logDirSizes is the sizeSource of a session: one DescribeLogDirs per
// broker. Log directories that are offline are skipped (their replicas
// are unknown: they count as missing); a replica being moved between a
// broker's directories (a future replica) is not counted.
func logDirSizes(s *session) sizeSource {
	return func(ctx context.Context, brokers []int32, topics kadm.TopicsSet) (replicaSizes, error) {
		out := replicaSizes{}
		if !s.supports(apiDescribeLogDirs) {
			return out, errors.New("the brokers do not serve DescribeLogDirs (Kafka API key 35): sizes unknown")
		}
		var errs []error
		for _, b := range slices.Sorted(slices.Values(brokers)) {
			dirs, err := s.adm.DescribeBrokerLogDirs(ctx, b, topics)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d: DescribeLogDirs: %w", b, err))
				continue
			}
			m := map[string]int64{}
			dirs.EachPartition(func(p kadm.DescribedLogDirPartition) {
				if !p.IsFuture {
					m[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] += p.Size
				}
			})
			out[b] = m
		}
		return out, errors.Join(errs...)
	}
}

// formatBytes renders n bytes for people: "512 B", "1.5 KiB", "3.0 GiB".
func formatBytes(n int64) string {
	if n < 0 {
		return "-"
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || unit == "TiB" {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	panic("unreachable")
}
