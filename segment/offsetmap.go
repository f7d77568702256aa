package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
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
// An OffsetMap is not safe for concurrent use: one cleaner at a time owns
// it. The broker allocates one per cleaner thread and reuses it.
type OffsetMap struct {
	all        []byte // the whole buffer
	loadFactor float64
	slots      []byte // the slots in use: nslots * offsetMapSlot bytes of all
	nslots     uint64
	capacity   int
	size       int
	latest     int64 // largest offset put since Clear, -1 if none
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

// use makes the first n slots (rounded down to a prime) the table, empty.
func (m *OffsetMap) use(n int) {
	p := uint64(largestPrimeAtMost(n))
	m.nslots = p
	m.slots = m.all[:p*offsetMapSlot]
	clear(m.slots)
	m.capacity = max(int(float64(p)*m.loadFactor), 1)
	if uint64(m.capacity) >= p {
		m.capacity = int(p) - 1 // keep one slot free so that a miss ends
	}
	m.size, m.latest = 0, -1
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

// hashKey is the 128-bit hash of a key.
func hashKey(key []byte) [offsetMapHash]byte {
	var h [offsetMapHash]byte
	binary.LittleEndian.PutUint64(h[0:8], maphash.Bytes(offsetMapSeeds[0], key))
	binary.LittleEndian.PutUint64(h[8:16], maphash.Bytes(offsetMapSeeds[1], key))
	return h
}

// find returns the slot index for hash: the slot holding it, or the empty
// slot where it would go.
func (m *OffsetMap) find(h *[offsetMapHash]byte) (idx uint64, found bool) {
	a := binary.LittleEndian.Uint64(h[0:8])
	b := binary.LittleEndian.Uint64(h[8:16])
	idx = a % m.nslots
	step := 1 + b%(m.nslots-1) // in [1, p-1]: coprime with the prime p
	for {
		s := m.slots[idx*offsetMapSlot : (idx+1)*offsetMapSlot]
		if binary.LittleEndian.Uint64(s[offsetMapHash:]) == 0 {
			return idx, false
		}
		if [offsetMapHash]byte(s[:offsetMapHash]) == *h {
			return idx, true
		}
		idx += step
		if idx >= m.nslots {
			idx -= m.nslots
		}
	}
}

// Put records offset as the latest for key, keeping the larger of it and
// any offset already held. It returns false, changing nothing, when the key
// is new and the map is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h := hashKey(key)
	return m.putHash(&h, offset)
}

func (m *OffsetMap) putHash(h *[offsetMapHash]byte, offset int64) bool {
	idx, found := m.find(h)
	s := m.slots[idx*offsetMapSlot : (idx+1)*offsetMapSlot]
	if !found {
		if m.size >= m.capacity {
			return false
		}
		copy(s, h[:])
		m.size++
	} else if int64(binary.LittleEndian.Uint64(s[offsetMapHash:]))-1 >= offset {
		return true
	}
	binary.LittleEndian.PutUint64(s[offsetMapHash:], uint64(offset+1))
	m.latest = max(m.latest, offset)
	return true
}

// Get returns the latest offset recorded for key, or -1.
func (m *OffsetMap) Get(key []byte) int64 {
	h := hashKey(key)
	return m.getHash(&h)
}

// getHash is Get for a hashed key.
func (m *OffsetMap) getHash(h *[offsetMapHash]byte) int64 {
	idx, found := m.find(h)
	if !found {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(m.slots[idx*offsetMapSlot+offsetMapHash:])) - 1
}
