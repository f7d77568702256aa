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
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratastream/strata/segment"
)

type result struct {
	Mode       string  `json:"mode"`
	Files      int     `json:"files,omitempty"`
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
	sendDir := flag.String("sendfile", "", "send the .log files under these directories (comma-separated) with sendfile(2) instead")
	passes := flag.Int("passes", 1, "with -sendfile: times to send all the files")
	flag.Parse()

	var files []string
	if *sendDir != "" {
		for _, d := range strings.Split(*sendDir, ",") {
			fs, err := logFiles(d)
			if err != nil {
				fmt.Fprintf(os.Stderr, "loopback: %v\n", err)
				os.Exit(1)
			}
			files = append(files, fs...)
		}
	}
	res, err := run(*total, *writeSize, *readSize, files, max(1, *passes))
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

// logFiles lists the non-empty segment log files under dir.
func logFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		_, suffix, nerr := segment.ParseSegmentFileName(d.Name())
		if fi, err := d.Info(); err == nil && !d.IsDir() && nerr == nil && suffix == segment.LogSuffix && fi.Size() > 0 {
			files = append(files, p)
		}
		return nil
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no .log files under %s", dir)
	}
	return files, err
}

// sendFiles sends files over c passes times with sendfile(2), returning
// the bytes sent.
func sendFiles(c *net.TCPConn, files []string, passes int) (int64, error) {
	var sent int64
	for range passes {
		for _, p := range files {
			f, err := os.Open(p)
			if err != nil {
				return sent, err
			}
			n, err := c.ReadFrom(f) // sendfile(2) from a regular file
			sent += n
			f.Close()
			if err != nil {
				return sent, err
			}
		}
	}
	return sent, nil
}

func run(total int64, writeSize, readSize int, files []string, passes int) (*result, error) {
	if len(files) > 0 {
		total = 0
		for _, p := range files {
			fi, err := os.Stat(p)
			if err != nil {
				return nil, err
			}
			total += fi.Size()
		}
		total *= int64(passes)
	}
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
	mode := "write"
	if len(files) > 0 {
		mode = "sendfile"
		if sent, err := sendFiles(c.(*net.TCPConn), files, passes); err != nil {
			c.Close()
			return nil, fmt.Errorf("sendfile after %d bytes: %w", sent, err)
		}
	}
	for sent := int64(0); len(files) == 0 && sent < total; {
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
	res := &result{Mode: mode, Files: len(files), Bytes: total, WriteSize: writeSize, ReadSize: readSize, Seconds: secs, MBPerS: float64(total) / secs / 1e6}
	res.Throughput = fmt.Sprintf("%.0f MB/s (%s: %d bytes in %.2fs, %d-byte writes, %d-byte reads)", res.MBPerS, mode, total, secs, writeSize, readSize)
	return res, nil
}
