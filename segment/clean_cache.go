package segment

import "unsafe"

// The map pass's records, kept for the filter pass. Both passes of a
// cleaning walk every record of the dirty section; the second walk (and the
// second hashing of every key) is the same work on the same bytes. So the
// map pass keeps what it walked (each record's cleanRec, with its key's
// hash, offset, timestamp, flags and where its bytes lie) in a recCache of
// bounded memory, and the filter pass uses those records for a batch
// instead of walking it again when the batch is the one the map pass
// walked: same position in the offsets (base offset), same length, same
// record count and same CRC. The filter pass still reads every batch and
// checks its CRC as it reads it (batchScanner), so a batch whose bytes
// changed between the passes fails that check as before, and one that
// changed into another valid batch has another CRC and is walked afresh.
//
// Once the cache's budget is used up the remaining batches are walked in
// the filter pass as before: what is kept does not depend on the cache.

// recCacheBytes bounds a cleaning's record cache: 524,288 records of
// cleanRecSize (64) bytes. It is memory beside the offset map
// (log.cleaner.dedupe.buffer.size), held by the map (one per cleaner
// thread) and reused from cleaning to cleaning.
const recCacheBytes = 32 << 20

const cleanRecSize = int(unsafe.Sizeof(cleanRec{}))

// recCacheLimit is the most records a cache holds: recCacheBytes' worth
// (tests lower it to exercise the fallback).
var recCacheLimit = recCacheBytes / cleanRecSize

// recCache is the map pass's records, batch by batch in offset order.
type recCache struct {
	recs    []cleanRec
	batches []cachedBatch
	full    bool // a batch did not fit: no later batch is cached
	next    int  // the filter pass's position in batches
}

// cachedBatch is one batch walked by the map pass: its records are
// recs[first : first+n].
type cachedBatch struct {
	base     int64
	crc      uint32
	size     int32
	first, n int32
}

// reset empties the cache for a cleaning of a dirty section of at most
// records records (its offset span), within recCacheLimit.
func (c *recCache) reset(records int64) {
	want := int(min(max(records, 0), int64(recCacheLimit)))
	if cap(c.recs) < want {
		c.recs = make([]cleanRec, 0, want)
	}
	c.recs, c.batches, c.full, c.next = c.recs[:0], c.batches[:0], false, 0
}

// room returns the slice the map pass scans batch h's records into: the
// cache's tail when they fit (cached is true), else scratch.
func (c *recCache) room(h *Header, scratch []cleanRec) (dst []cleanRec, cached bool) {
	if !c.full && h.RecordCount >= 0 && int(h.RecordCount) <= cap(c.recs)-len(c.recs) {
		return c.recs, true
	}
	c.full = true
	return scratch[:0], false
}

// add records that recs (the cache's slice as room returned it, with
// batch h's records appended) holds batch h.
func (c *recCache) add(h *Header, recs []cleanRec) {
	first := len(c.recs)
	c.recs = recs
	c.batches = append(c.batches, cachedBatch{base: h.BaseOffset, crc: h.CRC, size: int32(h.Size()), first: int32(first), n: int32(len(recs) - first)})
}

// lookup returns the records the map pass walked for batch h, or false
// when it did not walk this batch (or another one stood there). Batches
// are looked up in offset order.
func (c *recCache) lookup(h *Header) ([]cleanRec, bool) {
	if c == nil {
		return nil, false
	}
	for c.next < len(c.batches) && c.batches[c.next].base < h.BaseOffset {
		c.next++
	}
	if c.next == len(c.batches) {
		return nil, false
	}
	cb := c.batches[c.next]
	if cb.base != h.BaseOffset || cb.crc != h.CRC || int(cb.size) != h.Size() || cb.n != h.RecordCount {
		return nil, false
	}
	c.next++
	return c.recs[cb.first : cb.first+cb.n : cb.first+cb.n], true
}
