package group

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/segment"
)

// Log is one partition of __consumer_offsets, as the server hands it to
// Load. *segment.Log satisfies it.
//
// Append must append the batches at the log end, give them offsets, and
// return only once they are as durable as the partition's flush settings
// promise: the coordinator acknowledges a commit when Append returns nil.
// The batches are uncompressed record batches v2 built by this package,
// appended with AppendOptions.LeaderEpoch -1 ("no epoch"); a server that
// replicates the partition stamps its leader epoch in a wrapper. An error
// means the batches may or may not be in the log; the coordinator then
// answers NOT_COORDINATOR and leaves its memory unchanged.
//
// ReadCopy, LogStartOffset and LogEndOffset are used by Load only, to replay
// the partition; ReadCopy follows segment.Log.ReadCopy: whole batches from
// the one containing offset, at least one, none at or past maxOffset.
type Log interface {
	Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error)
	ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error)
	LogStartOffset() int64
	LogEndOffset() int64
}

// errWriterClosed is what enqueue returns once the partition is unloaded.
var errWriterClosed = errors.New("group: partition writer closed")

// write is one batch waiting to be appended, and what to do once it was:
// done gets the log offset the batch was given (its first record's), or
// the append's error.
type write struct {
	batch []byte
	done  func(base int64, err error)
}

// writer appends one partition's writes in the order they were queued,
// grouping the writes that queue up during an Append into the next one (so
// with flush.messages=1 many commits share one fsync). It calls each
// write's done after its Append returned, in queue order, from its own
// goroutine and with no lock held: the in-memory state changes in done, so
// memory and log always agree on the order of writes.
type writer struct {
	log      Log
	maxBytes int
	logger   *slog.Logger

	mu struct {
		sync.Mutex
		queue  []write
		closed bool
	}
	kick    chan struct{} // capacity 1: "the queue is not empty"
	stopped chan struct{} // closed when run returns
}

func newWriter(log Log, maxBytes int, logger *slog.Logger) *writer {
	w := &writer{
		log:      log,
		maxBytes: maxBytes,
		logger:   logger,
		kick:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
	}
	go w.run()
	return w
}

// enqueue queues batch. It may be called with a group's lock held (lock
// order: group, then writer). done is never called when enqueue fails.
func (w *writer) enqueue(batch []byte, done func(base int64, err error)) error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return errWriterClosed
	}
	w.mu.queue = append(w.mu.queue, write{batch: batch, done: done})
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// close refuses new writes, waits until the queued ones are appended and
// their done calls returned. It must not be called with a group's lock held.
func (w *writer) close() {
	w.mu.Lock()
	w.mu.closed = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	<-w.stopped
}

func (w *writer) run() {
	defer close(w.stopped)
	for {
		w.mu.Lock()
		q, closed := w.mu.queue, w.mu.closed
		w.mu.queue = nil
		w.mu.Unlock()
		if len(q) == 0 {
			if closed {
				return
			}
			<-w.kick
			continue
		}
		for len(q) > 0 {
			n, size := 1, len(q[0].batch)
			for n < len(q) && size+len(q[n].batch) <= w.maxBytes {
				size += len(q[n].batch)
				n++
			}
			w.appendGroup(q[:n], size)
			q = q[n:]
		}
	}
}

// appendGroup appends ws in one Append call and reports the result to each.
func (w *writer) appendGroup(ws []write, size int) {
	buf := ws[0].batch
	if len(ws) > 1 {
		buf = make([]byte, 0, size)
		for _, wr := range ws {
			buf = append(buf, wr.batch...)
		}
	}
	res, err := w.log.Append(buf, segment.AppendOptions{LeaderEpoch: -1 /* no epoch: the server's to set */})
	var ke *kerr.Error
	switch {
	case err == nil:
	case errors.As(err, &ke) && ke.Retriable:
		// Leadership moved or the followers did not replicate in time
		// (a failover): the clients get the code and retry.
		w.logger.Warn("group: offsets not committed to __consumer_offsets; clients will retry", "writes", len(ws), "bytes", size, "err", err)
	default:
		w.logger.Error("group: append to __consumer_offsets failed", "writes", len(ws), "bytes", size, "err", err)
	}
	// The batches are this package's own, without gaps: each takes as
	// many offsets as it has records, in the order they were joined.
	base := res.BaseOffset
	for _, wr := range ws {
		wr.done(base, err)
		if h, perr := segment.ParseHeader(wr.batch); perr == nil {
			base += int64(h.LastOffsetDelta) + 1
		}
	}
}
