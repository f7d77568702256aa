// Package benchutil holds the small pieces the benchmark tools under
// bench/ share: parsing of Kafka producer flags, the machine description
// printed with results, and the servers they start (process.go).
package benchutil

import (
	"fmt"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Acks parses a -acks flag: 0, 1, all (or -1).
func Acks(s string) (kgo.Acks, error) {
	switch s {
	case "0":
		return kgo.NoAck(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("-acks %q: want 0, 1 or all", s)
}

// Codec parses a -compression flag: none, gzip, snappy, lz4, zstd.
func Codec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("-compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// KernelRelease is the running kernel's release (uname -r), "?" if it
// cannot be read.
func KernelRelease() string {
	var uts syscall.Utsname
	if syscall.Uname(&uts) != nil {
		return "?"
	}
	var b []byte
	for _, c := range uts.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
