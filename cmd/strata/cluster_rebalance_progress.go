package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// sample measures the bytes of the plan's partitions still moving and
// records them in progress. A failure to learn sizes is reported once on
// stderr; the moves are followed anyway.
func (r *rebalanceRun) sample(ctx context.Context, progress *progressTracker, parts []movingPartition) {
	states, err := measureMoves(ctx, r.sizes, parts)
	if err != nil && !r.sizeWarned {
		fmt.Fprintf(r.c.stderr, "strata %s: sizes of the moves: %v\n", r.c.name, err)
		r.sizeWarned = true
	}
	progress.observe(time.Now(), states)
}

// summary prints, once the moves are done, the bytes each new replica
// holds (its local size: what was copied, plus what the partition took
// in meanwhile, less what local retention deleted since), and the total
// with the mean rate over elapsed, next to the plan's estimate.
func (r *rebalanceRun) summary(ctx context.Context, elapsed time.Duration) error {
	var brokers []int32
	set := kadm.TopicsSet{}
	type copied struct {
		name  string
		added []int32
	}
	var moves []copied
	for _, i := range r.changed {
		cur, tgt := r.plan.Current[i], r.plan.Target[i]
		var added []int32
		for _, b := range tgt.Replicas {
			if !slices.Contains(cur.Replicas, b) {
				added = append(added, b)
				if !slices.Contains(brokers, b) {
					brokers = append(brokers, b)
				}
			}
		}
		if len(added) > 0 {
			moves = append(moves, copied{tgt.name(), added})
			set.Add(tgt.Topic, tgt.Partition)
		}
	}
	if len(moves) == 0 {
		return nil // new orders only: nothing was copied
	}
	sizes, err := r.sizes(ctx, brokers, set)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(r.c.stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tNEW REPLICAS\tPLANNED BYTES\tBYTES NOW")
	var total, planned int64
	replicas := 0
	for _, m := range moves {
		var n int64
		for _, b := range m.added {
			sz, _ := sizes.of(b, m.name) // every broker asked answered (err is nil)
			n += sz
		}
		p := r.plan.Copies(m.name)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", m.name, joinIDs(m.added), bytesOrDash(p), n)
		total += n
		planned += max(p, 0)
		replicas += len(m.added)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(r.c.stdout, "Bytes on the %s: %s, %v after the start", plural(int64(replicas), "new replica"), describeBytes(total), elapsed.Round(time.Millisecond))
	if s := elapsed.Seconds(); s > 0 {
		fmt.Fprintf(r.c.stdout, " (%s/s)", formatBytes(int64(float64(total)/s)))
	}
	fmt.Fprintf(r.c.stdout, "; planned: %s.\n", describeBytes(planned))
	return nil
}

// bytesOrDash is n, or "-" when unknown (< 0).
func bytesOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
