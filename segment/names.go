package segment

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the files of a partition directory, and of the directory.
//
// Segment files, and the producer-state snapshots that live beside them,
// are named by an offset in 20 decimal digits (zero-padded) and a suffix:
//
//	00000000000000000000.log        segment at base offset 0: record batches
//	00000000000000000000.index      its offset index (index.go)
//	00000000000000000000.timeindex  its time index (timeindex.go)
//	00000000000000001234.snapshot   producer state as of offset 1234
//	00000000000000000000.log.cleaned  a cleaned replacement being written
//	00000000000000000000.swap       marker of a committed swap (clean_swap.go)
//
// The contents of a .snapshot file belong to the broker's producer package;
// segment only names it, so that everything that reads a partition
// directory (the archiver, the tools) asks one package where a file is.
// The checkpoint files are named in checkpoint.go. A partition's directory
// is Kafka's: <topic>-<partition>, as orders-0.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	SnapshotSuffix  = ".snapshot"
	// TxnIndexSuffix names a segment's aborted-transaction index
	// (txnindex.go), Kafka's .txnindex.
	TxnIndexSuffix = ".txnindex"
	// CleanedSuffix follows a segment file's name while the cleaner writes
	// its replacement: 00000000000000000000.log.cleaned.
	CleanedSuffix = ".cleaned"
	// SwapSuffix names the marker of a committed swap of cleaned segments:
	// 00000000000000000000.swap (clean_swap.go).
	SwapSuffix = ".swap"

	offsetNameDigits = 20
)

// ErrNotSegmentFile is returned by ParseSegmentFileName for a name that is
// not <20-digit base offset>.log, .index or .timeindex.
var ErrNotSegmentFile = errors.New("segment: not a segment file")

// segmentName is the stem shared by the files of the segment at base.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// SegmentFileName returns the name of a file of the segment at base
// offset base: the offset in 20 digits, then suffix (LogSuffix,
// IndexSuffix or TimeIndexSuffix).
func SegmentFileName(base int64, suffix string) string { return segmentName(base) + suffix }

// ParseSegmentFileName returns the base offset and the suffix (LogSuffix,
// IndexSuffix or TimeIndexSuffix) of a segment file's name (without its
// directory). Any other name is ErrNotSegmentFile, wrapped with the
// reason; the error does not repeat the name.
func ParseSegmentFileName(name string) (base int64, suffix string, err error) {
	suffix = filepath.Ext(name)
	switch suffix {
	case LogSuffix, IndexSuffix, TimeIndexSuffix:
	default:
		return 0, "", fmt.Errorf("%w: want <20-digit base offset>.log, .index or .timeindex", ErrNotSegmentFile)
	}
	base, err = parseOffsetStem(strings.TrimSuffix(name, suffix))
	if err != nil {
		return 0, "", fmt.Errorf("%w: %w", ErrNotSegmentFile, err)
	}
	return base, suffix, nil
}

// SnapshotFileName returns the name of the producer-state snapshot at
// offset in a partition directory: the offset in 20 digits, then
// SnapshotSuffix.
func SnapshotFileName(offset int64) string { return segmentName(offset) + SnapshotSuffix }

// ParseSnapshotFileName returns the offset of a producer-state snapshot's
// file name (without its directory); ok is false for any other name.
func ParseSnapshotFileName(name string) (offset int64, ok bool) {
	stem, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok {
		return 0, false
	}
	offset, err := parseOffsetStem(stem)
	return offset, err == nil
}

// TxnIndexFileName returns the name of the aborted-transaction index of
// the segment at base: the offset in 20 digits, then TxnIndexSuffix.
func TxnIndexFileName(base int64) string { return segmentName(base) + TxnIndexSuffix }

// ParseTxnIndexFileName returns the segment base offset of a .txnindex
// file's name; ok is false for any other name.
func ParseTxnIndexFileName(name string) (base int64, ok bool) {
	stem, ok := strings.CutSuffix(name, TxnIndexSuffix)
	if !ok {
		return 0, false
	}
	base, err := parseOffsetStem(stem)
	return base, err == nil
}

// parseOffsetStem parses the 20-digit offset that names a file.
func parseOffsetStem(stem string) (int64, error) {
	if len(stem) != offsetNameDigits || strings.Trim(stem, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a 20-digit base offset", stem)
	}
	off, err := strconv.ParseInt(stem, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("base offset %s: %w", stem, err)
	}
	return off, nil
}

// PartitionDirName returns the name of the directory of a topic's
// partition, Kafka's: topic + "-" + the partition in decimal.
func PartitionDirName(topic string, partition int32) string {
	return topic + "-" + strconv.Itoa(int(partition))
}

// ParsePartitionDirName splits a partition directory's name (without its
// parent) into topic and partition at its last "-". ok is false when
// there is no topic before it or no partition number (decimal digits, at
// most 2^31-1) after it. The topic is not checked against Kafka's naming
// rules; the broker does that.
func ParsePartitionDirName(name string) (topic string, partition int32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 31)
	if err != nil {
		return "", 0, false
	}
	return name[:i], int32(n), true
}
