package tiering

import (
	"fmt"
	"time"

	"github.com/stratastream/strata/segment"
)

// RemoteSegment is one sealed segment held in the bucket, as the manifest
// records it. Its objects are, under the manifest's Prefix,
//
//	<BaseOffset>-<Epoch>-<ID>.log
//	<BaseOffset>-<Epoch>-<ID>.index
//	<BaseOffset>-<Epoch>-<ID>.timeindex
//	<BaseOffset>-<Epoch>-<ID>.snapshot (producer state at NextOffset, optional)
//	<BaseOffset>-<Epoch>-<ID>.txnindex (aborted transactions, optional)
//
// where Epoch is the leader epoch of the uploading leader and ID a random
// token, so a retried or concurrent upload never overwrites an object a
// manifest already references.
//
// The entry may claim less than its .log object holds: after an unclean
// leader election the segment holding the divergence point is cut there
// (NextOffset lowered, LeaderEpochs clamped, HasSnapshot cleared, Size
// still the object's), and readers never return a batch at or beyond
// NextOffset.
type RemoteSegment struct {
	BaseOffset   int64                `json:"base_offset"`
	NextOffset   int64                `json:"next_offset"` // offset after the segment's last record
	Size         int64                `json:"size"`        // bytes of the .log object
	MaxTimestamp int64                `json:"max_timestamp"`
	Epoch        int32                `json:"epoch"` // leader epoch of the uploader
	ID           string               `json:"id"`
	LeaderEpochs []segment.EpochEntry `json:"leader_epochs"` // epochs whose start falls in or before the segment, clamped to BaseOffset
	HasSnapshot  bool                 `json:"has_snapshot,omitempty"`
	// HasTxnIndex says the segment has a .txnindex object: the
	// transactions aborted by markers in it (read_committed fetches).
	HasTxnIndex bool      `json:"has_txn_index,omitempty"`
	UploadedAt  time.Time `json:"uploaded_at"`
}

// ObjectName is the object base name (without extension) of the segment.
func (s RemoteSegment) ObjectName() string {
	return fmt.Sprintf("%020d-%d-%s", s.BaseOffset, s.Epoch, s.ID)
}

// DroppedSegment is a segment that left the remote log (remote retention,
// DeleteRecords, a gap, a diverged lineage superseded) but whose objects
// are still in the store: readers that resolved an older manifest may be
// reading them. The leader deletes them once it has seen them dropped for
// the delete delay (RemoteRetention.DeleteDelay), then commits a manifest
// without them; until then the sweeper counts them as referenced.
type DroppedSegment struct {
	RemoteSegment
	DroppedAt time.Time `json:"dropped_at"` // wall clock of the dropping writer, for operators only
}

// Manifest is the source of truth for what of one partition is remote.
// It is stored at Key() (<topic>/<topic id>/<partition>/manifest, or the
// legacy <topic>/<partition>/manifest) and replaced only with a
// conditional put. Segments are sorted by BaseOffset, contiguous (each
// NextOffset is the next BaseOffset) and never overlap.
type Manifest struct {
	Version   int    `json:"version"` // format version, ManifestVersion
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	// LegacyKeys: the partition's objects and manifest are in the legacy
	// layout, without the topic id in their keys (layout.go). Version 1
	// manifests are decoded with it set.
	LegacyKeys bool `json:"legacy_keys,omitempty"`
	// LeaderEpoch is the leader epoch of the broker that wrote this
	// manifest. A writer whose epoch is lower must not replace it.
	LeaderEpoch int32 `json:"leader_epoch"`
	// LogStartOffset is the first offset still readable remotely (moved
	// by remote retention and DeleteRecords); it may fall inside the
	// first segment.
	LogStartOffset int64           `json:"log_start_offset"`
	Segments       []RemoteSegment `json:"segments"`
	// Dropped are segments out of the remote log whose objects are not
	// deleted yet (DroppedSegment). Readers never use them.
	Dropped []DroppedSegment `json:"dropped,omitempty"`
	// Configs are the topic's config overrides at the time of writing,
	// so a restore can recreate the topic.
	Configs       map[string]string `json:"configs,omitempty"`
	NumPartitions int32             `json:"num_partitions,omitempty"`
	UpdatedAt     time.Time         `json:"updated_at"`
}

// EndOffset is the offset after the last remote record, or
// LogStartOffset when no segment is remote.
func (m *Manifest) EndOffset() int64 {
	if len(m.Segments) == 0 {
		return m.LogStartOffset
	}
	return m.Segments[len(m.Segments)-1].NextOffset
}

// SegmentFor returns the index of the remote segment that holds offset,
// or -1 if none does.
func (m *Manifest) SegmentFor(offset int64) int {
	lo, hi := 0, len(m.Segments)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Segments[mid].NextOffset <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(m.Segments) && m.Segments[lo].BaseOffset <= offset && offset >= m.LogStartOffset {
		return lo
	}
	return -1
}

// EpochsBefore returns the leader epochs of m's remote segments that
// began below offset, oldest first, as a leader-epoch cache holds them
// (epochs and start offsets strictly increasing).
func (m *Manifest) EpochsBefore(offset int64) []segment.EpochEntry {
	var out []segment.EpochEntry
	for _, s := range m.Segments {
		if s.BaseOffset >= offset {
			break
		}
		for _, e := range s.LeaderEpochs {
			if e.StartOffset >= offset {
				break
			}
			if n := len(out); n > 0 && (e.Epoch <= out[n-1].Epoch || e.StartOffset <= out[n-1].StartOffset) {
				continue // the same epoch carried into the next segment
			}
			out = append(out, e)
		}
	}
	return out
}
