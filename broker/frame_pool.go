package broker

import (
	"math/bits"
	"sync"
)

// Request frame buffers are reused: a produce frame is read into a buffer
// that served an earlier one, so the broker neither zeroes a fresh buffer
// nor faults in new heap pages for every request, and the garbage
// collector sees far less. On a 1 KiB produce load the allocation of
// frame buffers was a third of the broker's CPU (bench/RESULTS.md,
// "Pooled request frames").
//
// A buffer is returned to the pool only by its request's owner once
// nothing can read it any more: readFrameBody's own intermediate buffers
// as it grows one, and conn.processLoop's requests whose API handler keeps
// nothing of the request's bytes (api.reusesFrame). Every other frame is
// left to the garbage collector, as before. A reused buffer holds an
// earlier request's bytes beyond the frame: a frame is always the slice
// of exactly the bytes read into it, so they are never seen.

// Frame buffer size classes: powers of two from 1 KiB to 16 MiB. Larger
// frames are allocated and dropped, as any frame was before the pool.
const (
	framePoolMinShift = 10
	framePoolMaxShift = 24
)

var framePools [framePoolMaxShift - framePoolMinShift + 1]sync.Pool

// frameClass is the index in framePools of the class holding buffers of at
// least n bytes, and false when n is larger than the largest class.
func frameClass(n int) (int, bool) {
	shift := framePoolMinShift
	if n > 1<<framePoolMinShift {
		shift = bits.Len(uint(n - 1))
	}
	if shift > framePoolMaxShift {
		return 0, false
	}
	return shift - framePoolMinShift, true
}

// getFrameBuffer returns a buffer of length n whose contents are
// arbitrary: the caller overwrites all of it.
func getFrameBuffer(n int) []byte {
	class, ok := frameClass(n)
	if !ok {
		return make([]byte, n)
	}
	if p, _ := framePools[class].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(class+framePoolMinShift))
}

// putFrameBuffer gives b back for reuse. The caller must not use b, or
// any slice of it, afterwards. Buffers not from getFrameBuffer's classes
// are dropped.
func putFrameBuffer(b []byte) {
	c := cap(b)
	class, ok := frameClass(c)
	if !ok || c != 1<<(class+framePoolMinShift) {
		return
	}
	b = b[:c]
	framePools[class].Put(&b)
}
