package broker

import (
	"cmp"
	"os"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets v0 (Kafka 0.8 clients, and lag monitors that still send
// it) asks for up to MaxNumOffsets offsets "before" a timestamp and gets
// OldStyleOffsets, as Kafka's handleListOffsetRequestV0 and
// UnifiedLog.legacyFetchOffsetsBefore answer it: the candidates are the
// base offset of every local segment, each with the segment file's
// modification time, and the log end offset with the current time (when
// the last segment holds data). Latest (-1) starts from the last
// candidate, earliest (-2) from the first, another timestamp from the
// last candidate whose time is at or before it; from there up to
// MaxNumOffsets candidates are returned going back, newest first. As for
// a consumer in Kafka, offsets above the high watermark are replaced by
// the high watermark. Two differences: the first candidate is the log
// start offset of the whole log, remote part included, so that "earliest"
// agrees with v1+; and a MaxNumOffsets below 1 returns no offsets (Kafka
// fails the request). Errors are those of v1+.

// listOffsetV0 answers one partition of a ListOffsets v0 request.
func (s *Server) listOffsetV0(p *partition, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	type candidate struct{ offset, mtime int64 }
	segs := p.log.Segments()
	start := p.logStart()
	cands := make([]candidate, 0, len(segs)+1)
	for _, seg := range segs {
		var mtime int64
		if fi, err := os.Stat(seg.LogPath); err == nil {
			mtime = fi.ModTime().UnixMilli()
		} // a segment deleted meanwhile: time 0, never after a timestamp asked for
		cands = append(cands, candidate{max(seg.BaseOffset, start), mtime})
	}
	if len(cands) > 0 {
		cands[0].offset = start
	}
	if len(segs) == 0 || segs[len(segs)-1].Size > 0 {
		cands = append(cands, candidate{p.log.LogEndOffset(), s.nowFn().UnixMilli()})
	}
	var from int
	switch rp.Timestamp {
	case listLatest:
		from = len(cands) - 1
	case listEarliest:
		from = 0
	default:
		from = len(cands) - 1
		for from >= 0 && cands[from].mtime > rp.Timestamp {
			from--
		}
	}
	n := max(min(int(rp.MaxNumOffsets), from+1), 0)
	offsets := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		offsets = append(offsets, cands[from-i].offset)
	}
	slices.SortFunc(offsets, func(a, b int64) int { return cmp.Compare(b, a) })
	if hw := p.log.HighWatermark(); len(offsets) > 0 && offsets[0] > hw {
		i := 0
		for i < len(offsets) && offsets[i] > hw {
			i++
		}
		offsets = append([]int64{hw}, offsets[i:]...)
	}
	sp.OldStyleOffsets = offsets
}
