package segment

import "fmt"

// Cleaning batches outside a Log.
//
// Log.Clean works on a partition's own segment files. Tiered storage's
// remote cleaner (package tiering) compacts segments held in the object
// store with the same rules: it fills an OffsetMap from the batches of the
// remote dirty range with MapBatch, then passes every batch of the range
// it rewrites through a BatchCleaner, whose Filter is the batch filter
// Log.Clean uses (clean_filter.go): same retention of keys, tombstones,
// delete horizons and producers' last batches.

// MapBatch puts the latest offset of every keyed record of batch b (a
// whole validated batch with header h) at or above from into m, as
// Log.Clean builds its map: records of control and transactional batches
// are not mapped. full is true, and nothing is put, when the batch's
// records might not fit: the caller's mapped range ends at h.BaseOffset.
// maxDecompressed bounds the decompressed records (0: the default).
func (m *OffsetMap) MapBatch(b []byte, h Header, from int64, maxDecompressed int) (full bool, err error) {
	if h.LastOffset() < from || h.Control() || h.Transactional() {
		return false, nil
	}
	if m.Size()+int(h.RecordCount) > m.Capacity() {
		return true, nil
	}
	if maxDecompressed == 0 {
		maxDecompressed = DefaultMaxDecompressed
	}
	rh, data, err := batchRecords(b, h, false, maxDecompressed)
	if err != nil {
		return false, err
	}
	if m.scan, err = scanRecords(&rh, data, m.scan[:0]); err != nil {
		return false, err
	}
	m.putRecords(m.scan, from)
	return false, nil
}

// BatchCleanerConfig configures a BatchCleaner.
type BatchCleanerConfig struct {
	// Map holds the latest offset of every key below MappedEnd (MapBatch).
	Map *OffsetMap
	// MappedEnd is the end of the range the map covers: records at or
	// above it are all kept.
	MappedEnd int64
	// NowMs is the cleaner's clock, for delete horizons.
	NowMs int64
	// DeleteRetentionMs is delete.retention.ms (CleanConfig).
	DeleteRetentionMs int64
	// ProducerLastOffsets maps a producer id to the last offset of its
	// last data batch, which is kept (empty if need be).
	ProducerLastOffsets map[int64]int64
	// MaxDecompressed bounds the decompressed records of one batch (0:
	// DefaultMaxDecompressed).
	MaxDecompressed int
}

// BatchCleaner applies Log.Clean's batch filter to batches fed one at a
// time. It is not safe for concurrent use.
type BatchCleaner struct {
	f     batchFilter
	stats CleanResult
}

// NewBatchCleaner returns a cleaner with cfg, or ErrCleanConfig.
func NewBatchCleaner(cfg BatchCleanerConfig) (*BatchCleaner, error) {
	if cfg.Map == nil {
		return nil, fmt.Errorf("%w: no offset map", ErrCleanConfig)
	}
	if cfg.DeleteRetentionMs < 0 || cfg.MaxDecompressed < 0 {
		return nil, fmt.Errorf("%w: delete.retention.ms %d, max decompressed %d", ErrCleanConfig, cfg.DeleteRetentionMs, cfg.MaxDecompressed)
	}
	if cfg.MaxDecompressed == 0 {
		cfg.MaxDecompressed = DefaultMaxDecompressed
	}
	c := &BatchCleaner{}
	c.f = batchFilter{
		m: cfg.Map, end: cfg.MappedEnd, nowMs: cfg.NowMs, deleteRetentionMs: cfg.DeleteRetentionMs,
		lastOfProducer: cfg.ProducerLastOffsets, maxDecompressed: cfg.MaxDecompressed, stats: &c.stats,
	}
	return c, nil
}

// Filter appends to dst what cleaning keeps of batch b, a whole validated
// batch with header h: b itself, a rewritten batch with the same offsets
// range and producer fields, or nothing.
func (c *BatchCleaner) Filter(dst, b []byte, h Header) ([]byte, error) {
	return c.f.filter(dst, b, h)
}

// Stats returns the record counts so far (RecordsRead, RecordsKept,
// TombstonesRemoved, KeylessDropped, EmptyBatchesKept).
func (c *BatchCleaner) Stats() CleanResult { return c.stats }
