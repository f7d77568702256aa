package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratastream/strata/segment"
)

// replayReadBytes is how much Load asks of the log per read.
const replayReadBytes = 1 << 20

// ErrLoad wraps every error of Load.
var ErrLoad = errors.New("txn: loading __transaction_state failed")

// LoadReport says what Load found in a partition.
type LoadReport struct {
	Partition int
	// Records is how many records were replayed; Skipped how many did
	// not decode and were left out, each logged.
	Records, Skipped int
	// Transactions is how many transactional ids the partition holds;
	// Completing how many of them were found in PrepareCommit or
	// PrepareAbort, whose markers Load sends again.
	Transactions, Completing int
	Bytes                    int64
	Duration                 time.Duration
}

// Load makes the coordinator own a partition of __transaction_state at
// coordinator epoch epoch (the partition's leader epoch, which the markers
// carry): it replays log from its start to its end (last record per id
// wins; a tombstone deletes), and serves the ids of the partition from then
// on, appending to log. During the replay they get
// COORDINATOR_LOAD_IN_PROGRESS. A transaction found in PrepareCommit or
// PrepareAbort is completed: its markers are sent again (partitions that
// have them already keep one: a marker of an ended transaction changes
// nothing) and CompleteCommit or CompleteAbort is written. An ongoing one
// is left to its timeout.
//
// On error the partition stays unowned and the error wraps ErrLoad.
// Records that do not decode are skipped, logged and counted. Load and
// Unload of one partition must not run concurrently.
func (c *Coordinator) Load(partitionID int, epoch int32, log Log) (LoadReport, error) {
	began := time.Now()
	rep := LoadReport{Partition: partitionID}
	if partitionID < 0 || partitionID >= c.cfg.NumPartitions {
		return rep, fmt.Errorf("%w: partition %d of %d: %w", ErrLoad, partitionID, c.cfg.NumPartitions, ErrBadPartition)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &partition{id: partitionID, epoch: epoch, loading: true, log: log, ctx: ctx, cancel: cancel}
	c.mu.Lock()
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		cancel()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrClosed)
	case c.mu.partitions[partitionID] != nil:
		c.mu.Unlock()
		cancel()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrAlreadyLoaded)
	}
	c.mu.partitions[partitionID] = p
	c.mu.Unlock()

	found, order, err := c.replay(partitionID, log, &rep)
	c.mu.Lock()
	if err != nil || c.mu.closed || c.mu.partitions[partitionID] != p {
		if c.mu.partitions[partitionID] == p {
			delete(c.mu.partitions, partitionID)
		}
		c.mu.Unlock()
		cancel()
		if err == nil {
			err = ErrClosed
		}
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, err)
	}
	var completing []*entry
	for _, id := range order {
		md := found[id]
		if md == nil {
			continue
		}
		if want := c.PartitionFor(id); want != partitionID {
			c.cfg.Logger.Warn("txn: transactional id found in the wrong partition of __transaction_state (was transaction.state.log.num.partitions changed?); ignored",
				"transactional_id", id, "partition", partitionID, "belongs", want)
			continue
		}
		e := &entry{md: *md, p: p, pending: noPending}
		c.mu.txns[id] = e
		rep.Transactions++
		if md.State == PrepareCommit || md.State == PrepareAbort {
			completing = append(completing, e)
		}
	}
	p.loading = false
	rep.Completing = len(completing)
	for _, e := range completing {
		c.completeAsync(e, e.md.clone())
	}
	c.mu.Unlock()
	rep.Duration = time.Since(began)
	c.cfg.Logger.Info("txn: loaded partition", "partition", partitionID, "coordinator_epoch", epoch,
		"records", rep.Records, "skipped", rep.Skipped, "bytes", rep.Bytes, "transactions", rep.Transactions,
		"completing", rep.Completing, "took", rep.Duration)
	return rep, nil
}

// replay reads log from its start offset to its end offset (a compacted
// log has gaps, which the reads skip) and returns the last metadata of
// each id (nil: deleted) and the ids in order of first appearance.
func (c *Coordinator) replay(partitionID int, log Log, rep *LoadReport) (map[string]*Metadata, []string, error) {
	found := map[string]*Metadata{}
	var order []string
	n, err := segment.Replay(log, replayReadBytes, func(rec segment.Record) error {
		// A broker that shuts down does not wait for the replay of a
		// partition it will not serve (asked every 1,024 records).
		if rep.Records%1024 == 0 && c.closedNow() {
			return ErrClosed
		}
		rep.Records++
		id, md, err := DecodeRecord(rec.Key, rec.Value)
		if err != nil {
			rep.Skipped++
			c.cfg.Logger.Warn("txn: skipping record of __transaction_state", "partition", partitionID, "offset", rec.Offset, "err", err)
			return nil
		}
		if _, seen := found[id]; !seen {
			order = append(order, id)
		}
		found[id] = md
		return nil
	})
	rep.Bytes += n
	if err != nil {
		return nil, nil, err
	}
	return found, order, nil
}
