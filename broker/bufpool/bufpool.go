// Package bufpool keeps byte buffers for reuse, in size classes of powers
// of two from 1 KiB to 16 MiB, and hands them out without zeroing them:
// the caller overwrites what it uses. A buffer taken from a class that
// served an earlier request saves the zeroing of a fresh one, the faults
// of new heap pages and the garbage collection they cause. On a 1 KiB
// produce load the allocation of request buffers was a third of the
// broker's CPU (bench/RESULTS.md, "Pooled request frames"); gRPC's own
// pool zeroes every buffer it hands out, which the replication path paid
// for every frame it read.
//
// A buffer is given back with Put only by its owner, once nothing can
// read it or any slice of it any more. A reused buffer holds an earlier
// user's bytes beyond what the new user writes: a user must only read
// bytes it has written.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Size classes: powers of two from 1<<minShift to 1<<maxShift. Larger
// buffers are allocated and dropped.
const (
	minShift = 10
	maxShift = 24
)

var pools [maxShift - minShift + 1]sync.Pool

// class is the index in pools of the class holding buffers of at least n
// bytes, and false when n is larger than the largest class.
func class(n int) (int, bool) {
	shift := minShift
	if n > 1<<minShift {
		shift = bits.Len(uint(n - 1))
	}
	if shift > maxShift {
		return 0, false
	}
	return shift - minShift, true
}

// Get returns a buffer of length n whose contents are arbitrary, of the
// capacity of its class.
func Get(n int) []byte {
	c, ok := class(n)
	if !ok {
		return make([]byte, n)
	}
	if p, _ := pools[c].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minShift))
}

// Put gives b back for reuse. The caller must not use b, or any slice of
// it, afterwards. Buffers whose capacity is not a class's are dropped.
func Put(b []byte) {
	c := cap(b)
	i, ok := class(c)
	if !ok || c != 1<<(i+minShift) {
		return
	}
	b = b[:c]
	pools[i].Put(&b)
}

// GRPC is a gRPC buffer pool (mem.BufferPool, for
// experimental.WithBufferPool and experimental.BufferPool) over the same
// classes, whose buffers are not zeroed: gRPC reads every frame into a
// buffer of the frame's exact length and overwrites it whole.
type GRPC struct{}

var _ mem.BufferPool = GRPC{}

// Get implements mem.BufferPool.
func (GRPC) Get(n int) *[]byte {
	b := Get(n)
	return &b
}

// Put implements mem.BufferPool.
func (GRPC) Put(b *[]byte) { Put(*b) }
