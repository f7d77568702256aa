// Command floor measures the CPU floor of taking bytes in: the least work a
// broker does for every byte produced to it, one read from a TCP socket
// into a buffer, one pwrite(2) of the buffer into a file and CRC-32C
// (Castagnoli, as a record batch's) of the same bytes. A child process (this
// binary with -send) writes -bytes over a 127.0.0.1 connection; this
// process reads them -chunk bytes at a time, writes each chunk at the
// file's end with pwrite and checksums it, and reports its own user+system
// CPU seconds (getrusage) per 10^9 bytes over the read loop. The sender's
// CPU is not counted, as a producer's is not counted in a broker's.
//
// The file is new each run, in -dir, written to the page cache (no fsync,
// as a broker acknowledging acks=1 does not wait for one) and removed
// after the run. -repeat runs; the least CPU per GB is the floor (another
// process's load only adds to it). The CRC-32C alone over the same bytes
// from memory is reported beside it.
//
// Example:
//
//	floor -dir /tmp -bytes 2147483648 -json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// run is one measurement of the read, pwrite and CRC loop.
type run struct {
	Seconds     float64 `json:"seconds"`
	MBPerS      float64 `json:"mb_per_s"`
	UserS       float64 `json:"user_s"`
	SystemS     float64 `json:"system_s"`
	CPUSPerGB   float64 `json:"cpu_s_per_gb"`
	FileBytes   int64   `json:"file_bytes"`
	ChecksumHex string  `json:"crc32c"`
}

// result is what -json prints.
type result struct {
	Bytes     int64   `json:"bytes"`
	Chunk     int     `json:"chunk"`
	Runs      []run   `json:"runs"`
	CPUSPerGB float64 `json:"cpu_s_per_gb"` // the least of Runs'
	// CRCOnlyCPUSPerGB is CRC-32C alone over a buffer in memory: the part
	// of the floor that is computation, not system calls.
	CRCOnlyCPUSPerGB float64 `json:"crc32c_only_cpu_s_per_gb"`
}

func main() {
	total := flag.Int64("bytes", 1<<30, "bytes to send and receive per run")
	chunk := flag.Int("chunk", 1<<20, "bytes per buffer: each is read from the socket, written with one pwrite and checksummed")
	dir := flag.String("dir", os.TempDir(), "directory of the file written")
	repeat := flag.Int("repeat", 3, "runs (the least CPU per GB is the floor)")
	jsonOut := flag.Bool("json", false, "print the result as one JSON object")
	send := flag.String("send", "", "sender mode (the child process): write -bytes to this address and exit")
	flag.Parse()
	if *total <= 0 || *chunk <= 0 || *repeat <= 0 {
		fail(errors.New("-bytes, -chunk and -repeat must be positive"))
	}
	if *send != "" {
		fail(sender(*send, *total, *chunk))
		return
	}
	res := &result{Bytes: *total, Chunk: *chunk}
	for range *repeat {
		r, err := receive(*dir, *total, *chunk)
		if err != nil {
			fail(err)
		}
		res.Runs = append(res.Runs, *r)
		if res.CPUSPerGB == 0 || r.CPUSPerGB < res.CPUSPerGB {
			res.CPUSPerGB = r.CPUSPerGB
		}
	}
	res.CRCOnlyCPUSPerGB = crcOnly(*total, *chunk)
	if *jsonOut {
		fail(json.NewEncoder(os.Stdout).Encode(res))
		return
	}
	for i, r := range res.Runs {
		fmt.Printf("run %d: %.0f MB/s, %.3f CPU s/GB (user %.2f s, system %.2f s)\n", i+1, r.MBPerS, r.CPUSPerGB, r.UserS, r.SystemS)
	}
	fmt.Printf("floor: %.3f CPU s/GB (socket read + pwrite + CRC-32C, %d B chunks); CRC-32C alone %.3f CPU s/GB\n", res.CPUSPerGB, res.Chunk, res.CRCOnlyCPUSPerGB)
}

func fail(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}

// sender writes total bytes to addr in chunk sized writes.
func sender(addr string, total int64, chunk int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	buf := pattern(chunk)
	for sent := int64(0); sent < total; {
		m, err := c.Write(buf[:min(int64(len(buf)), total-sent)])
		sent += int64(m)
		if err != nil {
			c.Close()
			return fmt.Errorf("write after %d bytes: %w", sent, err)
		}
	}
	return c.Close()
}

// pattern is n bytes that do not repeat within a cache line.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/13)
	}
	return b
}

// receive runs one measurement: a sender child process, and the read,
// pwrite and CRC loop over what it sends.
func receive(dir string, total int64, chunk int) (*run, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	child := exec.Command(self, "-send", l.Addr().String(), "-bytes", fmt.Sprint(total), "-chunk", fmt.Sprint(chunk))
	child.Stderr = os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := child.Start(); err != nil {
		return nil, err
	}
	r, err := readLoop(l, dir, total, chunk)
	if werr := child.Wait(); werr != nil && err == nil {
		err = fmt.Errorf("sender: %w", werr)
	}
	return r, err
}

// readLoop accepts the sender's connection and reads, writes and
// checksums everything it sends, timing and measuring the CPU of this
// process over the loop.
func readLoop(l net.Listener, dir string, total int64, chunk int) (*run, error) {
	c, err := l.Accept()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	f, err := os.CreateTemp(dir, "floor-*.bin")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, chunk)
	var crc uint32
	var off int64
	u0, s0, err := rusage()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for off < total {
		n, err := io.ReadFull(c, buf[:min(int64(chunk), total-off)])
		if err != nil {
			return nil, fmt.Errorf("read after %d bytes: %w", off+int64(n), err)
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return nil, err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += int64(n)
	}
	secs := time.Since(start).Seconds()
	u1, s1, err := rusage()
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() != total {
		return nil, fmt.Errorf("%s holds %d bytes, %d received", f.Name(), fi.Size(), total)
	}
	user, sys := u1-u0, s1-s0
	return &run{Seconds: secs, MBPerS: float64(total) / secs / 1e6, UserS: user, SystemS: sys,
		CPUSPerGB: (user + sys) / (float64(total) / 1e9), FileBytes: fi.Size(), ChecksumHex: fmt.Sprintf("%08x", crc)}, nil
}

// crcOnly returns the CPU seconds per 10^9 bytes of CRC-32C over a chunk
// sized buffer in memory, total bytes in all.
func crcOnly(total int64, chunk int) float64 {
	buf := pattern(chunk)
	u0, s0, err := rusage()
	if err != nil {
		return 0
	}
	for off := int64(0); off < total; off += int64(chunk) {
		crc32.Update(0, castagnoli, buf[:min(int64(chunk), total-off)])
	}
	u1, s1, err := rusage()
	if err != nil {
		return 0
	}
	return (u1 - u0 + s1 - s0) / (float64(total) / 1e9)
}

// rusage returns this process's user and system CPU seconds.
func rusage() (user, sys float64, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	return time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds(), nil
}
