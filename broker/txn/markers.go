package txn

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file completes transactions: once PrepareCommit or PrepareAbort is
// in the log, a sender goroutine writes the markers to every partition of
// the transaction through Config.Markers (Kafka's
// TransactionMarkerChannelManager), retrying with backoff the partitions
// whose leader is moving or unavailable, and then writes CompleteCommit or
// CompleteAbort. As in Kafka's TransactionMarkerRequestCompletionHandler:
//   - a partition that no longer exists (deleted) is dropped;
//   - UNSUPPORTED_FOR_MESSAGE_FORMAT and UNSUPPORTED_VERSION drop the
//     partition (it cannot take markers);
//   - INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED stop the
//     sender: a newer coordinator (or producer epoch) owns the
//     transaction, and this coordinator is about to lose the partition;
//   - every other error is retried until the partition is unloaded.

// completeAsync starts the sender of e's transaction, prepared as md;
// done is closed once the sender stops (the transaction completed, or its
// partition was unloaded).
func (c *Coordinator) completeAsync(e *entry, md Metadata) (done <-chan struct{}) {
	md = md.clone() // e.md's partitions shrink as markers are written
	ch := make(chan struct{})
	c.wg.Add(1)
	c.senders.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.senders.Add(-1)
		defer close(ch)
		c.complete(e, md)
	}()
	return ch
}

func (c *Coordinator) complete(e *entry, md Metadata) {
	ctx := e.p.ctx
	commit := md.State == PrepareCommit
	log := c.cfg.Logger.With("transactional_id", md.TransactionalID, "producer_id", md.ProducerID, "producer_epoch", md.ProducerEpoch, "commit", commit)
	left := md.SortedPartitions()
	backoff := c.cfg.MarkerBackoff
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, c.cfg.MaxMarkerBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for attempt := 0; len(left) > 0; attempt++ {
		res := c.cfg.Markers.WriteMarkers(ctx, MarkerBatch{
			ProducerID: md.ProducerID, ProducerEpoch: md.ProducerEpoch, Commit: commit,
			CoordinatorEpoch: e.p.epoch, Partitions: left, TransactionVersion: int8(min(md.ClientVersion, TransactionVersion2)),
		})
		var retry, done []TopicPartition
		var codes []string
		for _, tp := range left {
			r, ok := res[tp]
			switch {
			case !ok:
				retry = append(retry, tp)
				continue
			case r.Gone:
				log.Info("txn: partition no longer exists; its marker is dropped", "partition", tp.String())
			case r.Code == 0:
			case r.Code == kerr.UnsupportedForMessageFormat.Code || r.Code == kerr.UnsupportedVersion.Code:
				log.Warn("txn: partition cannot take a marker; dropped", "partition", tp.String(), "code", r.Code)
			case r.Code == kerr.InvalidProducerEpoch.Code || r.Code == kerr.TransactionCoordinatorFenced.Code:
				log.Warn("txn: a newer coordinator or producer epoch owns the transaction; this coordinator stops sending its markers",
					"partition", tp.String(), "error", kerr.ErrorForCode(r.Code))
				return
			default:
				retry = append(retry, tp)
				codes = append(codes, tp.String()+":"+kerr.ErrorForCode(r.Code).Error())
				continue
			}
			done = append(done, tp)
		}
		// As Kafka, the partitions that have their marker leave the
		// transaction in memory (DescribeTransactions shows the rest);
		// the log keeps them all until CompleteCommit/CompleteAbort.
		c.mu.Lock()
		if c.currentLocked(e) {
			for _, tp := range done {
				delete(e.md.Partitions, tp)
			}
		}
		c.mu.Unlock()
		left = retry
		if len(left) == 0 {
			break
		}
		if attempt%20 == 0 {
			log.Info("txn: retrying markers", "partitions", len(left), "errors", strings.Join(codes, ","), "attempt", attempt)
		}
		if !wait() {
			return
		}
	}

	next := md.clone()
	next.State = CompleteAbort
	if commit {
		next.State = CompleteCommit
	}
	next.Partitions = map[TopicPartition]struct{}{}
	if md.ClientVersion >= TransactionVersion2 {
		// Kafka's prepareComplete: the epoch the EndTxn bumped becomes
		// the last one, and an overflowed epoch hands over to the next
		// producer id.
		next.LastProducerEpoch = md.ProducerEpoch
		if md.hasNextProducerID() {
			next.ProducerID, next.ProducerEpoch, next.LastProducerID, next.NextProducerID = md.NextProducerID, 0, md.ProducerID, -1
		}
	}
	for {
		c.mu.Lock()
		if !c.currentLocked(e) {
			c.mu.Unlock()
			return
		}
		next.LastUpdateMs = c.nowMs()
		e.pending = next.State
		c.mu.Unlock()
		ke := c.commit(e, next)
		if ke == nil {
			log.Debug("txn: transaction completed", "state", next.State)
			return
		}
		if ke == kerr.NotCoordinator {
			return
		}
		if !wait() {
			return
		}
	}
}

func sortByID(ms []Metadata) {
	slices.SortFunc(ms, func(a, b Metadata) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
}
