package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kvFlag collects repeated key=value flags.
type kvFlag map[string]string

func (m kvFlag) String() string { return fmt.Sprint(map[string]string(m)) }

func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want key=value", s)
	}
	m[k] = v
	return nil
}

// parseAcks parses -acks: 0, 1, all (or -1).
func parseAcks(s string) (kgo.Acks, error) {
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

// parseCodec parses -compression: none, gzip, snappy, lz4, zstd.
func parseCodec(s string) (kgo.CompressionCodec, error) {
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
