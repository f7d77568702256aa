package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stratastream/strata/segment"
)

func init() {
	register(&command{
		name:    "dump",
		summary: "print the batches, records and indexes of segment files",
		run:     runDump,
	})
}

const dumpUsage = `Usage: strata dump [flags] FILE|DIR...

Prints segment files of a partition directory, like Kafka's DumpLogSegments.
A DIR is a partition directory (topic-N: its .log files, oldest first) or a
data directory, one of log.dirs (every partition directory in it); give
each directory of log.dirs to dump them all.
A .log file gives a line per record batch: offsets, position, size, CRC
check, codec, producer, flags, timestamps and leader epoch (and, for a
batch the log cleaner kept a tombstone in, its delete horizon); in a
compacted partition, a line with the cleaner checkpoint (the directory's
cleaner-offset-checkpoint) and whether the segment is cleaned. A .index,
.timeindex or .txnindex (aborted transactions) file gives its entries.
Files are named by their 20-digit base
offset. Flags may come before or after the files.

--format json prints an object a line instead, each with "type" and
"file": file, batch, record (--print-data), log_summary,
cleaner_checkpoint, index_entry, time_index_entry, index_summary,
index_check (--verify-index), aborted_txn; docs/cli.md lists the fields.

A corrupt or torn tail of a .log is reported on stderr with its position;
the valid prefix is printed first.

Exit status: 0 when every file is intact; 1 when a file cannot be read, is
not a segment file, has a corrupt batch or tail, or (with --verify-index)
an index disagrees with the log; 2 for a usage error.

Flags:
`

const dumpExample = `
Example:
  strata dump --print-data --verify-index /var/lib/strata/orders-0/00000000000000000000.log
`

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors reported below
	printData := fs.Bool("print-data", false, "also print each record: offset, timestamp, key, value, headers (non-printable bytes escaped)")
	verifyIndex := fs.Bool("verify-index", false, "check the .index and .timeindex next to each .log against the log")
	format := addFormatFlag(fs)
	fs.Usage = func() {} // printed below, to stdout for --help
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, dumpUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprint(w, dumpExample)
	}

	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout)
				return 0
			}
			reportFlagError(stderr, "dump", fs, err)
			printUsage(stderr)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "strata dump: no files given\n\n")
		printUsage(stderr)
		return 2
	}

	out := bufio.NewWriter(stdout)
	status := 0
	files, ok := expandDumpArgs(files, stderr)
	if !ok {
		status = 1
	}
	for _, path := range files {
		d := &dumper{path: path, out: out, stderr: stderr, printData: *printData, json: format.json()}
		if !d.dumpFile(*verifyIndex) {
			status = 1
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "strata dump: %v\n", err)
		return 1
	}
	return status
}

// expandDumpArgs replaces each directory argument by the .log files it
// holds: a partition directory's segments, oldest first, or for a data
// directory those of every partition directory in it, by name. ok is
// false when a directory could not be read (reported on stderr).
func expandDumpArgs(args []string, stderr io.Writer) (files []string, ok bool) {
	ok = true
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			files = append(files, a) // dumpFile reports what is wrong
			continue
		}
		partDirs := []string{a}
		if _, _, isPart := segment.ParsePartitionDirName(filepath.Base(filepath.Clean(a))); !isPart {
			ents, err := os.ReadDir(a)
			if err != nil {
				fmt.Fprintf(stderr, "strata dump: %v\n", err)
				ok = false
				continue
			}
			partDirs = partDirs[:0]
			for _, e := range ents {
				if _, _, isPart := segment.ParsePartitionDirName(e.Name()); isPart && e.IsDir() {
					partDirs = append(partDirs, filepath.Join(a, e.Name()))
				}
			}
			if len(partDirs) == 0 {
				fmt.Fprintf(stderr, "strata dump: %s: no partition directories (topic-N) in it\n", a)
				ok = false
			}
		}
		for _, dir := range partDirs {
			segs, err := segment.ListSegments(dir)
			if err != nil {
				fmt.Fprintf(stderr, "strata dump: %v\n", err)
				ok = false
				continue
			}
			for _, sg := range segs {
				files = append(files, sg.LogPath)
			}
		}
	}
	return files, ok
}

// dumper prints one file. Problems go to stderr, after flushing what was
// printed before them so that a terminal shows them in place.
type dumper struct {
	path      string
	out       *bufio.Writer
	stderr    io.Writer
	printData bool
	json      bool // --format json: an object a line, see emit
	problems  int
	// nextOffset is the offset after the last batch dumpLog framed (the
	// base offset if none).
	nextOffset int64
}

// emit writes one --format json line: {"type": typ, "file": path,
// kv's pairs...}; names snake_case (docs/cli.md).
func (d *dumper) emit(typ string, kv ...any) {
	m := map[string]any{"type": typ, "file": d.path}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	enc := json.NewEncoder(d.out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // a write error shows at the final Flush
}

// jsonValue is b as consume's JSON has it: the string when valid UTF-8,
// else base64 with base64 true; nil for null.
func jsonValue(b []byte) (v any, base64 bool) {
	s, b64 := jsonBytes(b)
	if s == nil {
		return nil, false
	}
	return *s, b64
}

func (d *dumper) problem(format string, args ...any) {
	d.problems++
	d.out.Flush()
	fmt.Fprintf(d.stderr, "strata dump: %s: %s\n", d.path, fmt.Sprintf(format, args...))
}

// dumpFile prints one file and reports whether it was intact.
func (d *dumper) dumpFile(verifyIndex bool) bool {
	if base, ok := segment.ParseTxnIndexFileName(filepath.Base(d.path)); ok {
		return d.dumpTxnIndex(base)
	}
	base, suffix, err := segment.ParseSegmentFileName(filepath.Base(d.path))
	if err != nil {
		d.problem("%v", err)
		return false
	}
	f, err := os.Open(d.path)
	if err != nil {
		d.problem("%v", err)
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		d.problem("%v", err)
		return false
	}
	if !st.Mode().IsRegular() {
		d.problem("not a regular file")
		return false
	}
	if d.json {
		d.emit("file", "base_offset", base, "size", st.Size(), "kind", strings.TrimPrefix(suffix, "."))
	} else {
		fmt.Fprintf(d.out, "Dumping %s (base offset %d, %d bytes)\n", d.path, base, st.Size())
	}
	switch suffix {
	case segment.LogSuffix:
		batches := d.dumpLog(f, st.Size(), base)
		d.printCleaned(filepath.Dir(d.path), base)
		if verifyIndex {
			dir := filepath.Dir(d.path)
			d.verifyOffsetIndex(filepath.Join(dir, segment.SegmentFileName(base, segment.IndexSuffix)), base, batches)
			d.verifyTimeIndex(filepath.Join(dir, segment.SegmentFileName(base, segment.TimeIndexSuffix)), base, batches)
		}
	case segment.IndexSuffix:
		d.printOffsetIndex(base)
	case segment.TimeIndexSuffix:
		d.printTimeIndex(base)
	}
	return d.problems == 0
}

// dumpLog prints every batch of a .log file up to the first one that cannot
// be framed, and returns the batches it framed.
func (d *dumper) dumpLog(f *os.File, size, base int64) []segment.BatchStart {
	var (
		batches []segment.BatchStart
		buf     []byte
		pos     int64
		next    = base // offset the next batch must not start below
		records int64
	)
	for pos < size {
		n := min(size-pos, segment.HeaderSize)
		buf = grow(buf, int(n))
		if _, err := f.ReadAt(buf, pos); err != nil {
			d.problem("read at position %d: %v", pos, err)
			return batches
		}
		h, err := segment.ParseHeader(buf)
		if err == nil && int64(h.Size()) > size-pos {
			err = fmt.Errorf("%w: batch of %d bytes, %d remain in the file", segment.ErrTruncated, h.Size(), size-pos)
		}
		if err != nil {
			d.problem("corrupt tail at position %d (%d bytes not shown): %v", pos, size-pos, err)
			break
		}
		buf = grow(buf, h.Size())
		if _, err := f.ReadAt(buf, pos); err != nil {
			d.problem("read at position %d: %v", pos, err)
			return batches
		}
		_, verr := segment.ValidateBatch(buf)
		d.printBatch(h, pos, verr)
		switch {
		case verr != nil:
			d.problem("batch at position %d (base offset %d): %v", pos, h.BaseOffset, verr)
		case h.BaseOffset < next:
			d.problem("batch at position %d starts at offset %d, below %d", pos, h.BaseOffset, next)
		}
		if verr == nil && d.printData {
			d.printRecords(buf, h, pos)
		}
		batches = append(batches, segment.BatchStart{Position: pos, BaseOffset: h.BaseOffset, MaxTimestamp: h.MaxTimestamp})
		records += int64(h.RecordCount)
		next = max(next, h.NextOffset())
		pos += int64(h.Size())
	}
	d.nextOffset = max(next, base)
	if d.json {
		first, last := any(nil), any(nil)
		if len(batches) > 0 {
			first, last = batches[0].BaseOffset, next-1
		}
		d.emit("log_summary", "batches", len(batches), "records", records, "valid_bytes", pos, "first_offset", first, "last_offset", last)
		return batches
	}
	fmt.Fprintf(d.out, "Summary: %d batches, %d records, %d valid bytes", len(batches), records, pos)
	if len(batches) > 0 {
		fmt.Fprintf(d.out, ", offsets %d to %d", batches[0].BaseOffset, next-1)
	}
	fmt.Fprintln(d.out)
	return batches
}

// printCleaned prints, for a segment of a compacted partition (one whose
// directory has a cleaner checkpoint), the checkpoint and whether the
// segment lies below it: cleaned (every batch below the checkpoint: its
// superseded records removed, tombstones kept until their delete
// horizon), partly (the checkpoint falls inside it), or dirty.
func (d *dumper) printCleaned(dir string, base int64) {
	ckpt, ok, err := segment.ReadCleanerCheckpoint(dir)
	switch {
	case err != nil:
		d.problem("cleaner checkpoint: %v", err)
		return
	case !ok:
		return // not a compacted partition, or never cleaned
	}
	state := "dirty (at or above it)"
	switch {
	case d.nextOffset <= ckpt:
		state = "cleaned (below it)"
	case base < ckpt:
		state = "partly cleaned (it falls inside the segment)"
	}
	if d.json {
		d.emit("cleaner_checkpoint", "checkpoint", ckpt, "base_offset", base, "next_offset", d.nextOffset, "state", strings.Fields(state)[0])
		return
	}
	fmt.Fprintf(d.out, "Cleaner checkpoint: %d; this segment [%d, %d) is %s\n", ckpt, base, d.nextOffset, state)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func (d *dumper) printBatch(h segment.Header, pos int64, verr error) {
	tsType := "CreateTime"
	if h.LogAppendTime() {
		tsType = "LogAppendTime"
	}
	if d.json {
		kv := []any{"base_offset", h.BaseOffset, "last_offset", h.LastOffset(), "count", h.RecordCount, "position", pos, "size", h.Size(),
			"crc_valid", !errors.Is(verr, segment.ErrCRCMismatch), "compression", fmt.Sprint(h.Compression()),
			"producer_id", h.ProducerID, "producer_epoch", h.ProducerEpoch, "base_sequence", h.BaseSequence,
			"is_transactional", h.Transactional(), "is_control", h.Control(), "timestamp_type", tsType,
			"base_timestamp", h.BaseTimestamp, "max_timestamp", h.MaxTimestamp, "partition_leader_epoch", h.PartitionLeaderEpoch}
		if ms, ok := h.DeleteHorizon(); ok {
			kv = append(kv, "delete_horizon_ms", ms)
		}
		d.emit("batch", kv...)
		return
	}
	fmt.Fprintf(d.out, "baseOffset: %d lastOffset: %d count: %d position: %d size: %d crcValid: %t compression: %s"+
		" producerId: %d producerEpoch: %d baseSequence: %d isTransactional: %t isControl: %t"+
		" timestampType: %s baseTimestamp: %d maxTimestamp: %d partitionLeaderEpoch: %d",
		h.BaseOffset, h.LastOffset(), h.RecordCount, pos, h.Size(), !errors.Is(verr, segment.ErrCRCMismatch), h.Compression(),
		h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.Transactional(), h.Control(),
		tsType, h.BaseTimestamp, h.MaxTimestamp, h.PartitionLeaderEpoch)
	if ms, ok := h.DeleteHorizon(); ok {
		// A cleaned batch that kept a tombstone: its base timestamp is
		// the delete horizon (KIP-534).
		fmt.Fprintf(d.out, " deleteHorizonMs: %d", ms)
	}
	fmt.Fprintln(d.out)
}

func (d *dumper) printRecords(batch []byte, h segment.Header, pos int64) {
	it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
	if err != nil {
		d.problem("records of batch at position %d: %v", pos, err)
		return
	}
	for {
		r, ok, err := it.Next()
		if err != nil {
			d.problem("records of batch at position %d: %v", pos, err)
			return
		}
		if !ok {
			return
		}
		if d.json {
			key, kb := jsonValue(r.Key)
			val, vb := jsonValue(r.Value)
			hs := []map[string]any{}
			for _, hd := range r.Headers {
				hv, hb := jsonValue(hd.Value)
				jh := map[string]any{"key": hd.Key, "value": hv}
				if hb {
					jh["value_base64"] = true
				}
				hs = append(hs, jh)
			}
			kv := []any{"offset", r.Offset, "timestamp", r.Timestamp, "key_size", nullableLen(r.Key), "value_size", nullableLen(r.Value), "key", key, "value", val, "headers", hs}
			if kb {
				kv = append(kv, "key_base64", true)
			}
			if vb {
				kv = append(kv, "value_base64", true)
			}
			if h.Control() {
				kv = append(kv, "control", controlType(r.Key))
			}
			d.emit("record", kv...)
			continue
		}
		fmt.Fprintf(d.out, "| offset: %d timestamp: %d keySize: %d valueSize: %d", r.Offset, r.Timestamp, nullableLen(r.Key), nullableLen(r.Value))
		if h.Control() {
			fmt.Fprintf(d.out, " control: %s", controlType(r.Key))
		}
		fmt.Fprintf(d.out, " key: %s value: %s headers: [", quote(r.Key), quote(r.Value))
		for i, hd := range r.Headers {
			if i > 0 {
				d.out.WriteByte(' ')
			}
			fmt.Fprintf(d.out, "%s=%s", strconv.Quote(hd.Key), quote(hd.Value))
		}
		d.out.WriteString("]\n")
	}
}

func nullableLen(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// quote shows bytes as a Go string literal, escaping what is not printable
// UTF-8, and null as null.
func quote(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

// controlType names a control record from its key: int16 version, int16
// type (0 abort, 1 commit).
func controlType(key []byte) string {
	if len(key) < 4 {
		return "unknown"
	}
	switch t := int16(binary.BigEndian.Uint16(key[2:])); t {
	case 0:
		return "abort"
	case 1:
		return "commit"
	default:
		return fmt.Sprintf("type(%d)", t)
	}
}

// readIndex reads an index file as written (segment.ReadOffsetIndexFile
// or ReadTimeIndexFile) and reports its problems; ok is false when it
// cannot be read.
func readIndex[T ~[]byte](d *dumper, path string, read func(string) (T, []string, error)) (T, bool) {
	ix, problems, err := read(path)
	if err != nil {
		d.problem("%v", err)
		return nil, false
	}
	for _, p := range problems {
		d.problem("%s: %s", filepath.Base(path), p)
	}
	return ix, true
}

func (d *dumper) printOffsetIndex(base int64) {
	ix, ok := readIndex(d, d.path, segment.ReadOffsetIndexFile)
	if !ok {
		return
	}
	for i := range ix.Len() {
		e := ix.Entry(i)
		if d.json {
			d.emit("index_entry", "offset", base+int64(e.RelOffset), "position", e.Position)
			continue
		}
		fmt.Fprintf(d.out, "offset: %d position: %d\n", base+int64(e.RelOffset), e.Position)
	}
	d.indexSummary(ix.Len())
}

func (d *dumper) printTimeIndex(base int64) {
	ix, ok := readIndex(d, d.path, segment.ReadTimeIndexFile)
	if !ok {
		return
	}
	for i := range ix.Len() {
		e := ix.Entry(i)
		if d.json {
			d.emit("time_index_entry", "timestamp", e.Timestamp, "offset", base+int64(e.RelOffset))
			continue
		}
		fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", e.Timestamp, base+int64(e.RelOffset))
	}
	d.indexSummary(ix.Len())
}

// verifyOffsetIndex checks the .index at path against the log's batches
// (segment.CheckOffsetIndex). Strata's entries name a batch's base offset;
// Kafka's name its last offset, so Kafka's tool and this one disagree on
// each other's files.
func (d *dumper) verifyOffsetIndex(path string, base int64, batches []segment.BatchStart) {
	ix, ok := readIndex(d, path, segment.ReadOffsetIndexFile)
	if !ok {
		return
	}
	mismatches := segment.CheckOffsetIndex(ix, base, batches)
	for _, m := range mismatches {
		d.problem("%s: %s", filepath.Base(path), m)
	}
	if d.json {
		d.emit("index_check", "index", filepath.Base(path), "entries", ix.Len(), "mismatches", len(mismatches))
		return
	}
	fmt.Fprintf(d.out, "Index %s: %d entries, %d mismatches\n", filepath.Base(path), ix.Len(), len(mismatches))
}

// verifyTimeIndex checks the .timeindex at path against the log's batches
// (segment.CheckTimeIndex).
func (d *dumper) verifyTimeIndex(path string, base int64, batches []segment.BatchStart) {
	ix, ok := readIndex(d, path, segment.ReadTimeIndexFile)
	if !ok {
		return
	}
	mismatches := segment.CheckTimeIndex(ix, base, batches)
	for _, m := range mismatches {
		d.problem("%s: %s", filepath.Base(path), m)
	}
	if d.json {
		d.emit("index_check", "index", filepath.Base(path), "entries", ix.Len(), "mismatches", len(mismatches))
		return
	}
	fmt.Fprintf(d.out, "Time index %s: %d entries, %d mismatches\n", filepath.Base(path), ix.Len(), len(mismatches))
}

// dumpTxnIndex prints the aborted transactions of a .txnindex file, as
// Kafka's DumpLogSegments does, and reports whether it was intact.
func (d *dumper) dumpTxnIndex(base int64) bool {
	b, err := os.ReadFile(d.path)
	if err != nil {
		d.problem("%v", err)
		return false
	}
	ents, _, err := segment.DecodeTxnIndex(b, base)
	if d.json {
		d.emit("file", "base_offset", base, "size", len(b), "kind", "txnindex")
		for _, e := range ents {
			d.emit("aborted_txn", "producer_id", e.ProducerID, "first_offset", e.FirstOffset, "last_offset", e.LastOffset, "last_stable_offset", e.LastStableOffset)
		}
	} else {
		fmt.Fprintf(d.out, "Dumping %s (base offset %d, %d bytes)\n", d.path, base, len(b))
		for _, e := range ents {
			fmt.Fprintf(d.out, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n", e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
		}
	}
	d.indexSummary(len(ents))
	if err != nil {
		d.problem("%v", err)
	}
	return d.problems == 0
}

func (d *dumper) indexSummary(n int) {
	if d.json {
		d.emit("index_summary", "entries", n)
		return
	}
	fmt.Fprintf(d.out, "Summary: %d entries\n", n)
}
