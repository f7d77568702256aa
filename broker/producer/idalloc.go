package producer

import (
	"fmt"
	"log/slog"
	"sync"
)

// Block is a range [Start, End) of producer ids reserved for one broker.
type Block struct {
	Start, End int64
}

// BlockSource reserves blocks of producer ids.
//
// Reserve returns a block none of whose ids was ever returned before, by
// this source or by any other source sharing its store (the file, for
// FileBlockSource), and it makes the reservation durable before
// returning: after a crash or restart the next block starts past it, used
// or not. An error means no block was reserved; the caller may retry.
// Reserve is called with the allocator's lock held, so implementations
// need not be safe for concurrent use by one allocator.
type BlockSource interface {
	Reserve() (Block, error)
}

// IDAllocator hands out producer ids from the blocks of a BlockSource. It is
// safe for concurrent use.
type IDAllocator struct {
	src BlockSource
	log *slog.Logger

	mu struct {
		sync.Mutex
		next  int64 // next id to hand out
		end   int64 // end of the current block; next == end: none left
		ready bool  // a block has been reserved
	}
}

// NewIDAllocator returns an allocator over src. It reserves its first block
// lazily, on the first Next. A nil logger discards.
func NewIDAllocator(src BlockSource, logger *slog.Logger) *IDAllocator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &IDAllocator{src: src, log: logger}
}

// Next returns a producer id never returned before. When the current block
// is used up it reserves the next one, holding the allocator's lock during
// the source's I/O (InitProducerId is rare; concurrent callers wait for the
// one reservation rather than making their own). An error comes from the
// source; no id was handed out.
func (a *IDAllocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.mu.ready || a.mu.next >= a.mu.end {
		b, err := a.src.Reserve()
		if err != nil {
			return -1, err
		}
		if b.Start < 0 || b.End <= b.Start || (a.mu.ready && b.Start < a.mu.end) {
			return -1, fmt.Errorf("producer: block source returned block [%d, %d) after [.., %d)", b.Start, b.End, a.mu.end)
		}
		a.mu.next, a.mu.end, a.mu.ready = b.Start, b.End, true
		a.log.Info("reserved producer id block", "start", b.Start, "end", b.End)
	}
	id := a.mu.next
	a.mu.next++
	return id, nil
}

// issued reports whether id is below the allocator's next id, so that it
// was handed out by this broker or lies in a block reserved before the
// current one (whose unused ids are never handed out again).
func (a *IDAllocator) issued(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.ready && id >= 0 && id < a.mu.next
}
