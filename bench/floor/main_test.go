package main

import (
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"testing"
)

// TestReadLoop checks that the measured loop writes every byte received
// into its file and checksums exactly those bytes, and removes the file.
func TestReadLoop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const total, chunk = 3<<20 + 123, 64 << 10 // a partial last chunk
	sent := make(chan error, 1)
	go func() { sent <- sender(l.Addr().String(), total, 1<<20) }()
	dir := t.TempDir()
	r, err := readLoop(l, dir, total, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// The sender repeats a 1 MiB pattern.
	p := pattern(1 << 20)
	var want uint32
	for off := 0; off < total; off += len(p) {
		want = crc32.Update(want, castagnoli, p[:min(len(p), total-off)])
	}
	if r.FileBytes != total || r.ChecksumHex != fmt.Sprintf("%08x", want) {
		t.Errorf("got %d bytes, CRC-32C %s; want %d, %08x", r.FileBytes, r.ChecksumHex, total, want)
	}
	if r.CPUSPerGB < 0 || r.UserS < 0 || r.SystemS < 0 {
		t.Errorf("negative CPU: %+v", r)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left in %s: %v", dir, left)
	}
}
