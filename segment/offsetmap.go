package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
)

// OffsetMap is the cleaner's bounded map from a record key to the latest
// offset the key was seen at, Kafka's SkimpyOffsetMap: a fixed array of
// slots, each holding a 128-bit hash of the key (16 bytes) and an offset
// (8 bytes), so that its memory is exactly what
// log.cleaner.dedupe.buffer.size grants, whatever the keys. Kafka hashes
// with MD5; the hash here is two hash/maphash sums under independent
// random seeds, several times faster, and as good for a table that never
// leaves the process. Two keys with the same 128-bit hash would be taken
// for one, as in Kafka; the chance is negligible for any real key set, and
// the seeds, new in every process, keep it from being engineered.
//
// The table is open-addressed with double hashing over a prime number of
// slots, so a probe sequence visits every slot. It holds at most
// Capacity() entries (the load factor, log.cleaner.io.buffer.load.factor,
// times the slots), which keeps probes short.
//
// The table starts small and grows in place (rehashing within the buffer)
// up to its full size as keys arrive: a compacted log has far fewer keys
// than records, and a table sized for its keys stays in the CPU's caches,
// where one sized for the worst case (every record a new key) makes each
// lookup a miss. Growing changes nothing of what the map holds or when it
// is full.
//
// An OffsetMap is not safe for concurrent use: one cleaner at a time owns
// it. The broker allocates one per cleaner thread and reuses it.
type OffsetMap struct {
	all        []byte // the whole buffer
	loadFactor float64
	slots      []byte // the slots in use: nslots * offsetMapSlot bytes of all
	nslots     uint64
	maxSlots   uint64 // the table's full size (a prime): it grows up to this
	capacity   int    // of the full-size table
	growAt     int    // size at which the table grows (capacity once full-size)
	size       int
	latest     int64        // largest offset put since Clear, -1 if none
	sink       byte         // touch's loads end here, so that they are not optimized away
	scan       []cleanRec   // scratch of MapBatch and Log.Clean's map pass
	cache      recCache     // Log.Clean's map pass's records, for its filter pass (clean_cache.go)
	bufs       cleanBuffers // Log.Clean's scratch memory (clean_filter.go)
}

const (
	offsetMapHash = 16
	// offsetMapSlot is the memory one entry takes: hash, then offset+1
	// (0 marks an empty slot).
	offsetMapSlot = offsetMapHash + 8
)

// ErrMapTooSmall is returned by NewOffsetMap for a buffer that cannot hold
// a useful number of entries, and by Clean when not even one batch of the
// dirty section fits.
var ErrMapTooSmall = errors.New("segment: cleaner offset map too small")

// NewOffsetMap returns a map that takes bytes of memory, filled to at most
// loadFactor of its slots (Kafka's default 0.9). bytes must allow at least
// 16 slots; loadFactor must lie in (0, 1].
func NewOffsetMap(bytes int, loadFactor float64) (*OffsetMap, error) {
	if !(loadFactor > 0 && loadFactor <= 1) {
		return nil, fmt.Errorf("segment: offset map load factor %v outside (0, 1]", loadFactor)
	}
	n := bytes / offsetMapSlot
	if n < 16 {
		return nil, fmt.Errorf("%w: %d bytes hold %d slots of %d bytes, want at least 16", ErrMapTooSmall, bytes, n, offsetMapSlot)
	}
	m := &OffsetMap{all: make([]byte, n*offsetMapSlot), loadFactor: loadFactor}
	m.use(n)
	return m, nil
}

// offsetMapFirstSlots is the size a table starts at (96 KiB) before it
// grows; offsetMapGrowLoad is how full a table below its full size gets
// before it grows (probes stay short; at its full size the load factor
// applies).
const (
	offsetMapFirstSlots = 1 << 12
	offsetMapGrowLoad   = 0.7
)

// offsetMapOld flags an entry not yet moved by grow, in its offset field.
const offsetMapOld = 1 << 63

// use makes the first n slots (rounded down to a prime) the table's full
// size, and the map empty.
func (m *OffsetMap) use(n int) {
	p := uint64(largestPrimeAtMost(n))
	m.maxSlots = p
	m.capacity = max(int(float64(p)*m.loadFactor), 1)
	if uint64(m.capacity) >= p {
		m.capacity = int(p) - 1 // keep one slot free so that a miss ends
	}
	m.size, m.latest = 0, -1
	first := p
	if p > 2*offsetMapFirstSlots {
		first = uint64(largestPrimeAtMost(offsetMapFirstSlots))
	}
	m.resize(first)
	clear(m.slots)
}

// resize makes the first n slots the table (their contents as they are)
// and sets when it grows next: at offsetMapGrowLoad (or the load factor if
// lower) below the full size, at the capacity at it.
func (m *OffsetMap) resize(n uint64) {
	m.nslots = n
	m.slots = m.all[:n*offsetMapSlot]
	m.growAt = m.capacity
	if n < m.maxSlots {
		m.growAt = min(int(float64(n)*min(offsetMapGrowLoad, m.loadFactor)), m.capacity)
	}
}

// grow enlarges the table (about fourfold, at most to its full size) and
// rehashes the entries in place: each entry of the old table is flagged
// old, then taken out and put where it goes in the new table; an old
// entry found on the way is swapped out and placed in turn. A new entry's
// probe path holds only new entries (old ones are taken, never skipped,
// and new ones never move), so lookups find every entry.
func (m *OffsetMap) grow() {
	oldN := m.nslots
	newN := m.maxSlots
	if 4*oldN < m.maxSlots/2 {
		newN = uint64(largestPrimeAtMost(int(4 * oldN)))
	}
	for i := range oldN {
		off := m.all[i*offsetMapSlot+offsetMapHash:]
		if v := binary.LittleEndian.Uint64(off); v != 0 {
			binary.LittleEndian.PutUint64(off, v|offsetMapOld)
		}
	}
	clear(m.all[oldN*offsetMapSlot : newN*offsetMapSlot])
	m.resize(newN)
	for i := range oldN {
		s := m.slots[i*offsetMapSlot : (i+1)*offsetMapSlot]
		v := binary.LittleEndian.Uint64(s[offsetMapHash:])
		if v&offsetMapOld == 0 {
			continue // empty, or new already
		}
		h := keyHash{binary.LittleEndian.Uint64(s[0:8]), binary.LittleEndian.Uint64(s[8:16])}
		v &^= offsetMapOld
		clear(s)
		for { // place (h, v), picking up any old entry it lands on
			idx, step := m.probe(&h)
			for {
				t := m.slots[idx*offsetMapSlot : (idx+1)*offsetMapSlot]
				tv := binary.LittleEndian.Uint64(t[offsetMapHash:])
				if tv == 0 || tv&offsetMapOld != 0 {
					th := keyHash{binary.LittleEndian.Uint64(t[0:8]), binary.LittleEndian.Uint64(t[8:16])}
					binary.LittleEndian.PutUint64(t[0:8], h.a)
					binary.LittleEndian.PutUint64(t[8:16], h.b)
					binary.LittleEndian.PutUint64(t[offsetMapHash:], v)
					h, v = th, tv&^offsetMapOld
					break
				}
				idx += step
				if idx >= m.nslots {
					idx -= m.nslots
				}
			}
			if v == 0 {
				break // landed on an empty slot: nothing picked up
			}
		}
	}
}

// clearFor empties the map for at most keys keys: it uses only as many
// slots as those need at the load factor (all of them if that is more),
// so that a small dirty section probes a small, cache-friendly table.
func (m *OffsetMap) clearFor(keys int64) {
	total := len(m.all) / offsetMapSlot
	want := float64(keys)/m.loadFactor + 16
	if want >= float64(total) {
		m.use(total)
		return
	}
	m.use(max(int(want)+1, 16))
}

// largestPrimeAtMost returns the largest prime <= n (n >= 2), by trial
// division: at most a few thousand divisions for any buffer size.
func largestPrimeAtMost(n int) int {
	for p := n; p > 2; p-- {
		if p%2 == 0 {
			continue
		}
		prime := true
		for d := 3; d*d <= p; d += 2 {
			if p%d == 0 {
				prime = false
				break
			}
		}
		if prime {
			return p
		}
	}
	return 2
}

// Capacity is the number of keys the map holds before it is full (Clean
// may use fewer slots when the dirty section has fewer records).
func (m *OffsetMap) Capacity() int { return m.capacity }

// Size is the number of keys in the map.
func (m *OffsetMap) Size() int { return m.size }

// LatestOffset is the largest offset put since Clear, -1 if none.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// Utilization is Size/Capacity.
func (m *OffsetMap) Utilization() float64 { return float64(m.size) / float64(m.capacity) }

// Clear empties the map, with all its slots in use.
func (m *OffsetMap) Clear() { m.use(len(m.all) / offsetMapSlot) }

var offsetMapSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// keyHash is the 128-bit hash of a key, as two halves: a picks the home
// slot, b the probe step (both together identify the key).
type keyHash struct{ a, b uint64 }

// hashKey is the 128-bit hash of a key.
func hashKey(key []byte) keyHash {
	return keyHash{maphash.Bytes(offsetMapSeeds[0], key), maphash.Bytes(offsetMapSeeds[1], key)}
}

// probe returns where the probe sequence for hash starts and its step:
// the first half of the hash picks the home slot and the second the step
// in [1, nslots-1] (coprime with the prime nslots, so the sequence visits
// every slot), each by a multiply-high rather than a 64-bit division.
func (m *OffsetMap) probe(h *keyHash) (idx, step uint64) {
	idx, _ = bits.Mul64(h.a, m.nslots)
	step, _ = bits.Mul64(h.b, m.nslots-1)
	return idx, step + 1
}

// find returns the slot index for hash: the slot holding it, or the empty
// slot where it would go.
func (m *OffsetMap) find(h *keyHash) (idx uint64, found bool) {
	idx, step := m.probe(h)
	for {
		s := m.slots[idx*offsetMapSlot : (idx+1)*offsetMapSlot]
		if binary.LittleEndian.Uint64(s[offsetMapHash:]) == 0 {
			return idx, false
		}
		if binary.LittleEndian.Uint64(s[0:8]) == h.a && binary.LittleEndian.Uint64(s[8:16]) == h.b {
			return idx, true
		}
		idx += step
		if idx >= m.nslots {
			idx -= m.nslots
		}
	}
}

// touch loads the home slots of the keyed records' hashes, so that the
// cache misses of a batch's lookups overlap (the loads are independent)
// instead of each lookup waiting for its own; the lookups that follow then
// find their first probe cached. It changes nothing.
func (m *OffsetMap) touch(recs []cleanRec) {
	var x byte
	for i := range recs {
		if !recs[i].keyless {
			idx, _ := m.probe(&recs[i].hash)
			x ^= m.slots[idx*offsetMapSlot+offsetMapHash]
		}
	}
	m.sink ^= x
}

// touchHinted is touch for the filter pass: it loads the slot of each
// record's hint (cleanRec.slot) where it has one, the home slot otherwise.
func (m *OffsetMap) touchHinted(recs []cleanRec) {
	var x byte
	for i := range recs {
		if r := &recs[i]; !r.keyless {
			idx := uint64(r.slot) - 1
			if r.slot == 0 || idx >= m.nslots {
				idx, _ = m.probe(&r.hash)
			}
			x ^= m.slots[idx*offsetMapSlot+offsetMapHash]
		}
	}
	m.sink ^= x
}

// Put records offset as the latest for key, keeping the larger of it and
// any offset already held. It returns false, changing nothing, when the key
// is new and the map is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h := hashKey(key)
	_, ok := m.putHash(&h, offset)
	return ok
}

// putHash is Put for a hashed key; it also returns the key's slot.
func (m *OffsetMap) putHash(h *keyHash, offset int64) (uint64, bool) {
	idx, found := m.find(h)
	if !found && m.size >= m.growAt && m.size < m.capacity {
		m.grow()
		idx, found = m.find(h)
	}
	s := m.slots[idx*offsetMapSlot : (idx+1)*offsetMapSlot]
	if !found {
		if m.size >= m.capacity {
			return 0, false
		}
		binary.LittleEndian.PutUint64(s[0:8], h.a)
		binary.LittleEndian.PutUint64(s[8:16], h.b)
		m.size++
	} else if int64(binary.LittleEndian.Uint64(s[offsetMapHash:]))-1 >= offset {
		return idx, true
	}
	binary.LittleEndian.PutUint64(s[offsetMapHash:], uint64(offset+1))
	m.latest = max(m.latest, offset)
	return idx, true
}

// putRecords puts the offset of every keyed record of recs at or above
// from (the map has room: the caller checked the batch's record count).
func (m *OffsetMap) putRecords(recs []cleanRec, from int64) {
	m.touch(recs)
	for i := range recs {
		if r := &recs[i]; r.off >= from && !r.keyless {
			if idx, ok := m.putHash(&r.hash, r.off); ok && idx < math.MaxUint32 {
				r.slot = uint32(idx + 1) // for latestOf
			}
		}
	}
}

// Get returns the latest offset recorded for key, or -1.
func (m *OffsetMap) Get(key []byte) int64 {
	h := hashKey(key)
	return m.getHash(&h)
}

// latestOf is getHash for record r's key, looked up first in the slot the
// map pass put it in (r.slot): entries are unique by hash, so a slot
// holding r's hash is its key's entry, wherever the table grew since.
// Otherwise (the table grew and moved it, or no hint) it probes.
func (m *OffsetMap) latestOf(r *cleanRec) int64 {
	if i := uint64(r.slot); i != 0 && i <= m.nslots {
		s := m.slots[(i-1)*offsetMapSlot : i*offsetMapSlot]
		if v := binary.LittleEndian.Uint64(s[offsetMapHash:]); v != 0 && v&offsetMapOld == 0 &&
			binary.LittleEndian.Uint64(s[0:8]) == r.hash.a && binary.LittleEndian.Uint64(s[8:16]) == r.hash.b {
			return int64(v) - 1
		}
	}
	return m.getHash(&r.hash)
}

// getHash is Get for a hashed key.
func (m *OffsetMap) getHash(h *keyHash) int64 {
	idx, found := m.find(h)
	if !found {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(m.slots[idx*offsetMapSlot+offsetMapHash:])) - 1
}
