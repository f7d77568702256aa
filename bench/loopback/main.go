// Command loopback measures the loopback TCP limit of this machine: one
// sender writes -bytes over a 127.0.0.1 connection in -write sized writes,
// one receiver reads it with -read sized reads, both in this process, and
// the rate is reported in MB/s (10^6 bytes). It is the physical ceiling a
// broker's fetch path over loopback is compared against.
//
// Example:
//
//	loopback -bytes 4294967296 -json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

type result struct {
	Bytes      int64   `json:"bytes"`
	WriteSize  int     `json:"write_size"`
	ReadSize   int     `json:"read_size"`
	Seconds    float64 `json:"seconds"`
	MBPerS     float64 `json:"mb_per_s"`
	Throughput string  `json:"throughput"`
}

func main() {
	total := flag.Int64("bytes", 4<<30, "bytes to send")
	writeSize := flag.Int("write", 1<<20, "bytes per write")
	readSize := flag.Int("read", 1<<20, "bytes per read")
	jsonOut := flag.Bool("json", false, "print the result as one JSON object")
	flag.Parse()

	res, err := run(*total, *writeSize, *readSize)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loopback: %v\n", err)
		os.Exit(1)
	}
	if *jsonOut {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			fmt.Fprintf(os.Stderr, "loopback: %v\n", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("loopback TCP: %s\n", res.Throughput)
}

func run(total int64, writeSize, readSize int) (*result, error) {
	if total <= 0 || writeSize <= 0 || readSize <= 0 {
		return nil, errors.New("sizes must be positive")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()

	type received struct {
		n   int64
		end time.Time
		err error
	}
	done := make(chan received, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- received{err: err}
			return
		}
		defer c.Close()
		buf := make([]byte, readSize)
		var n int64
		for {
			m, err := c.Read(buf)
			n += int64(m)
			if err == io.EOF {
				done <- received{n: n, end: time.Now()}
				return
			}
			if err != nil {
				done <- received{n: n, err: err}
				return
			}
		}
	}()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return nil, err
	}
	buf := make([]byte, writeSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for sent := int64(0); sent < total; {
		chunk := buf[:min(int64(len(buf)), total-sent)]
		m, err := c.Write(chunk)
		sent += int64(m)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("write after %d bytes: %w", sent, err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return nil, err
	}
	r := <-done
	c.Close()
	if r.err != nil {
		return nil, fmt.Errorf("receive after %d bytes: %w", r.n, r.err)
	}
	if r.n != total {
		return nil, fmt.Errorf("received %d bytes, sent %d", r.n, total)
	}
	secs := r.end.Sub(start).Seconds()
	res := &result{Bytes: total, WriteSize: writeSize, ReadSize: readSize, Seconds: secs, MBPerS: float64(total) / secs / 1e6}
	res.Throughput = fmt.Sprintf("%.0f MB/s (%d bytes in %.2fs, %d-byte writes, %d-byte reads)", res.MBPerS, total, secs, writeSize, readSize)
	return res, nil
}
