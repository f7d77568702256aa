package main

import (
	"bufio"
	"encoding/binary"
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

const dumpUsage = `Usage: strata dump [flags] FILE...

Prints segment files of a partition directory, like Kafka's DumpLogSegments.
A .log file gives a line per record batch: offsets, position, size, CRC
check, codec, producer, flags, timestamps and leader epoch. A .index or
.timeindex file gives its entries. Files are named by their 20-digit base
offset. Flags may come before or after the files.

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
	fs.SetOutput(stderr)
	printData := fs.Bool("print-data", false, "also print each record: offset, timestamp, key, value, headers (non-printable bytes escaped)")
	verifyIndex := fs.Bool("verify-index", false, "check the .index and .timeindex next to each .log against the log")
	fs.Usage = func() {} // printed below, to stdout for --help
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, dumpUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		fmt.Fprint(w, dumpExample)
	}

	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout)
				return 0
			}
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
	for _, path := range files {
		d := &dumper{path: path, out: out, stderr: stderr, printData: *printData}
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

// dumper prints one file. Problems go to stderr, after flushing what was
// printed before them so that a terminal shows them in place.
type dumper struct {
	path      string
	out       *bufio.Writer
	stderr    io.Writer
	printData bool
	problems  int
}

func (d *dumper) problem(format string, args ...any) {
	d.problems++
	d.out.Flush()
	fmt.Fprintf(d.stderr, "strata dump: %s: %s\n", d.path, fmt.Sprintf(format, args...))
}

// segmentName splits a segment file name into its base offset and
// extension, or explains why it is not one.
func segmentName(path string) (base int64, ext string, err error) {
	name := filepath.Base(path)
	ext = filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	switch ext {
	case ".log", ".index", ".timeindex":
	default:
		return 0, "", fmt.Errorf("not a segment file: want <20-digit base offset>.log, .index or .timeindex")
	}
	if len(stem) != 20 || strings.Trim(stem, "0123456789") != "" {
		return 0, "", fmt.Errorf("not a segment file: %q is not a 20-digit base offset", stem)
	}
	base, err = strconv.ParseInt(stem, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("not a segment file: base offset %s: %v", stem, err)
	}
	return base, ext, nil
}

// dumpFile prints one file and reports whether it was intact.
func (d *dumper) dumpFile(verifyIndex bool) bool {
	base, ext, err := segmentName(d.path)
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
	fmt.Fprintf(d.out, "Dumping %s (base offset %d, %d bytes)\n", d.path, base, st.Size())
	switch ext {
	case ".log":
		batches := d.dumpLog(f, st.Size(), base)
		if verifyIndex {
			stem := strings.TrimSuffix(d.path, ext)
			d.verifyOffsetIndex(stem+".index", base, batches)
			d.verifyTimeIndex(stem+".timeindex", base, batches)
		}
	case ".index":
		d.printIndex(f, base, indexEntrySize)
	case ".timeindex":
		d.printIndex(f, base, timeIndexEntrySize)
	}
	return d.problems == 0
}

// batchInfo is what index verification needs to know of a batch.
type batchInfo struct {
	pos          int64
	baseOffset   int64
	maxTimestamp int64
}

// dumpLog prints every batch of a .log file up to the first one that cannot
// be framed, and returns the batches it framed.
func (d *dumper) dumpLog(f *os.File, size, base int64) []batchInfo {
	var (
		batches []batchInfo
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
		batches = append(batches, batchInfo{pos: pos, baseOffset: h.BaseOffset, maxTimestamp: h.MaxTimestamp})
		records += int64(h.RecordCount)
		next = max(next, h.NextOffset())
		pos += int64(h.Size())
	}
	fmt.Fprintf(d.out, "Summary: %d batches, %d records, %d valid bytes", len(batches), records, pos)
	if len(batches) > 0 {
		fmt.Fprintf(d.out, ", offsets %d to %d", batches[0].baseOffset, next-1)
	}
	fmt.Fprintln(d.out)
	return batches
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
	fmt.Fprintf(d.out, "baseOffset: %d lastOffset: %d count: %d position: %d size: %d crcValid: %t compression: %s"+
		" producerId: %d producerEpoch: %d baseSequence: %d isTransactional: %t isControl: %t"+
		" timestampType: %s baseTimestamp: %d maxTimestamp: %d partitionLeaderEpoch: %d\n",
		h.BaseOffset, h.LastOffset(), h.RecordCount, pos, h.Size(), !errors.Is(verr, segment.ErrCRCMismatch), h.Compression(),
		h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.Transactional(), h.Control(),
		tsType, h.BaseTimestamp, h.MaxTimestamp, h.PartitionLeaderEpoch)
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

// Index entry sizes: Kafka's formats, which segment/index.go writes.
// Wire format: never change.
const (
	indexEntrySize     = 8  // relative offset u32, position u32
	timeIndexEntrySize = 12 // timestamp i64, relative offset u32
)

// readEntries reads an index file and returns its entries up to the first
// all-zero one (the preallocated, unused part of an active segment's index).
func (d *dumper) readEntries(path string, size int) ([][]byte, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem("%v", err)
		return nil, false
	}
	if len(data)%size != 0 {
		d.problem("%s: %d bytes is not a whole number of %d-byte entries", filepath.Base(path), len(data), size)
		data = data[:len(data)/size*size]
	}
	var entries [][]byte
	for at := 0; at < len(data); at += size {
		e := data[at : at+size]
		if allZero(e) {
			if !allZero(data[at:]) {
				d.problem("%s: entries after the zero entry at byte %d", filepath.Base(path), at)
			}
			break
		}
		entries = append(entries, e)
	}
	return entries, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (d *dumper) printIndex(f *os.File, base int64, size int) {
	entries, ok := d.readEntries(f.Name(), size)
	if !ok {
		return
	}
	for _, e := range entries {
		if size == indexEntrySize {
			fmt.Fprintf(d.out, "offset: %d position: %d\n", base+int64(binary.BigEndian.Uint32(e)), binary.BigEndian.Uint32(e[4:]))
		} else {
			fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", int64(binary.BigEndian.Uint64(e)), base+int64(binary.BigEndian.Uint32(e[8:])))
		}
	}
	fmt.Fprintf(d.out, "Summary: %d entries\n", len(entries))
}

// verifyOffsetIndex checks each .index entry against the log. Strata's
// convention (segment/index.go): an entry is (base offset of a batch minus
// the segment's base offset, position where that batch starts). Kafka's own
// index records the batch's last offset instead, so Kafka's tool and this
// one disagree on each other's files. Entries strictly increase in both
// columns.
func (d *dumper) verifyOffsetIndex(path string, base int64, batches []batchInfo) {
	entries, ok := d.readEntries(path, indexEntrySize)
	if !ok {
		return
	}
	atPos := make(map[int64]int64, len(batches)) // position -> base offset
	for _, b := range batches {
		atPos[b.pos] = b.baseOffset
	}
	bad := 0
	mismatch := func(format string, args ...any) {
		bad++
		d.problem("%s: %s", filepath.Base(path), fmt.Sprintf(format, args...))
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i, e := range entries {
		rel, pos := int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
		if rel <= prevRel || pos <= prevPos {
			mismatch("entry %d (offset %d, position %d) does not follow (offset %d, position %d)", i, base+rel, pos, base+prevRel, prevPos)
		}
		prevRel, prevPos = rel, pos
		off, found := atPos[pos]
		switch {
		case !found:
			mismatch("entry %d (offset %d, position %d): no batch starts at that position", i, base+rel, pos)
		case off != base+rel:
			mismatch("entry %d (offset %d, position %d): the batch there starts at offset %d", i, base+rel, pos, off)
		}
	}
	fmt.Fprintf(d.out, "Index %s: %d entries, %d mismatches\n", filepath.Base(path), len(entries), bad)
}

// verifyTimeIndex checks each .timeindex entry against the log. An entry is
// (largest timestamp in the segment so far, base offset of a batch minus the
// segment's base offset), so its timestamp must equal the largest max
// timestamp of the batches up to and including that batch, whether the
// writer names the batch that holds the largest timestamp or the batch it
// was indexing. Both columns never decrease.
func (d *dumper) verifyTimeIndex(path string, base int64, batches []batchInfo) {
	entries, ok := d.readEntries(path, timeIndexEntrySize)
	if !ok {
		return
	}
	maxSoFar := make(map[int64]int64, len(batches)) // base offset -> largest timestamp up to it
	running := int64(-1 << 63)
	for _, b := range batches {
		running = max(running, b.maxTimestamp)
		maxSoFar[b.baseOffset] = running
	}
	bad := 0
	mismatch := func(format string, args ...any) {
		bad++
		d.problem("%s: %s", filepath.Base(path), fmt.Sprintf(format, args...))
	}
	prevTS, prevRel := int64(-1<<63), int64(-1)
	for i, e := range entries {
		ts, rel := int64(binary.BigEndian.Uint64(e)), int64(binary.BigEndian.Uint32(e[8:]))
		if ts < prevTS || rel < prevRel {
			mismatch("entry %d (timestamp %d, offset %d) goes back from (timestamp %d, offset %d)", i, ts, base+rel, prevTS, base+prevRel)
		}
		prevTS, prevRel = ts, rel
		want, found := maxSoFar[base+rel]
		switch {
		case !found:
			mismatch("entry %d (timestamp %d, offset %d): no batch starts at that offset", i, ts, base+rel)
		case ts != want:
			mismatch("entry %d (timestamp %d, offset %d): largest timestamp up to that batch is %d", i, ts, base+rel, want)
		}
	}
	fmt.Fprintf(d.out, "Time index %s: %d entries, %d mismatches\n", filepath.Base(path), len(entries), bad)
}
