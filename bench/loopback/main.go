// Command loopback measures the loopback TCP limit of this machine: one
// sender writes -bytes over a 127.0.0.1 connection in -write sized writes,
// one receiver reads it with -read sized reads, both in this process, and
// the rate is reported in MB/s (10^6 bytes). It is the physical ceiling a
// broker's fetch path over loopback is compared against.
//
// With -receiver-process the receiver is a child process (this binary
// with -receive), as a consumer is, and the sender's own CPU seconds
// (user+system, getrusage) per 10^9 bytes sent are reported too: on
// loopback the sender's kernel also runs the receiving side's TCP
// processing, so that is what sending bytes over loopback costs a broker
// at the least. With -sendfile it is the CPU floor of a zero-copy fetch.
//
// Example:
//
//	loopback -bytes 4294967296 -json
//	loopback -sendfile /data/t-0 -receiver-process -json
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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	// ReceiverProcess is set when the receiver ran in a child process;
	// only then is the sender's CPU measured.
	ReceiverProcess bool    `json:"receiver_process,omitempty"`
	SenderUserS     float64 `json:"sender_user_s,omitempty"`
	SenderSystemS   float64 `json:"sender_system_s,omitempty"`
	SenderCPUSPerGB float64 `json:"sender_cpu_s_per_gb,omitempty"`
}

func main() {
	total := flag.Int64("bytes", 4<<30, "bytes to send")
	writeSize := flag.Int("write", 1<<20, "bytes per write")
	readSize := flag.Int("read", 1<<20, "bytes per read")
	jsonOut := flag.Bool("json", false, "print the result as one JSON object")
	sendDir := flag.String("sendfile", "", "send the .log files under these directories (comma-separated) with sendfile(2) instead")
	passes := flag.Int("passes", 1, "with -sendfile: times to send all the files")
	child := flag.Bool("receiver-process", false, "receive in a child process and report the sender's CPU seconds per GB")
	receiveAddr := flag.String("receive", "", "receiver mode (the child process of -receiver-process): read -bytes from this address and exit")
	flag.Parse()
	if *receiveAddr != "" {
		if err := receiveFrom(*receiveAddr, *total, *readSize); err != nil {
			fmt.Fprintf(os.Stderr, "loopback: receiver: %v\n", err)
			os.Exit(1)
		}
		return
	}

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
	res, err := run(*total, *writeSize, *readSize, files, max(1, *passes), *child)
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

// run sends total bytes (or the files, passes times) over one loopback
// connection and measures the rate; with child, the receiver is a child
// process and the sender's CPU is measured too.
func run(total int64, writeSize, readSize int, files []string, passes int, child bool) (*result, error) {
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

	var c *net.TCPConn
	var done <-chan received
	if child {
		c, done, err = childReceiver(l, total, readSize)
	} else {
		c, done, err = goroutineReceiver(l, readSize)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, writeSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	user0, sys0, err := rusage()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	mode := "write"
	if len(files) > 0 {
		mode = "sendfile"
		if sent, err := sendFiles(c, files, passes); err != nil {
			return nil, fmt.Errorf("sendfile after %d bytes: %w", sent, err)
		}
	}
	for sent := int64(0); len(files) == 0 && sent < total; {
		chunk := buf[:min(int64(len(buf)), total-sent)]
		m, err := c.Write(chunk)
		sent += int64(m)
		if err != nil {
			return nil, fmt.Errorf("write after %d bytes: %w", sent, err)
		}
	}
	if err := c.CloseWrite(); err != nil {
		return nil, err
	}
	r := <-done
	user1, sys1, err := rusage()
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, fmt.Errorf("receive after %d bytes: %w", r.n, r.err)
	}
	if r.n != total {
		return nil, fmt.Errorf("received %d bytes, sent %d", r.n, total)
	}
	secs := r.end.Sub(start).Seconds()
	res := &result{Mode: mode, Files: len(files), Bytes: total, WriteSize: writeSize, ReadSize: readSize, Seconds: secs, MBPerS: float64(total) / secs / 1e6}
	res.Throughput = fmt.Sprintf("%.0f MB/s (%s: %d bytes in %.2fs, %d-byte writes, %d-byte reads)", res.MBPerS, mode, total, secs, writeSize, readSize)
	if child {
		res.ReceiverProcess = true
		res.SenderUserS, res.SenderSystemS = user1-user0, sys1-sys0
		res.SenderCPUSPerGB = (res.SenderUserS + res.SenderSystemS) / (float64(total) / 1e9)
		res.Throughput += fmt.Sprintf(", sender %.3f CPU s/GB (receiver in a child process)", res.SenderCPUSPerGB)
	}
	return res, nil
}

// received is what the receiver got, and when it saw the end.
type received struct {
	n   int64
	end time.Time
	err error
}

// goroutineReceiver connects a sender to a receiver goroutine of this
// process, which reads until EOF.
func goroutineReceiver(l net.Listener, readSize int) (*net.TCPConn, <-chan received, error) {
	done := make(chan received, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- received{err: err}
			return
		}
		defer c.Close()
		n, err := readAll(c, readSize)
		done <- received{n: n, end: time.Now(), err: err}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	return c.(*net.TCPConn), done, nil
}

// childReceiver starts this binary with -receive, which dials l and reads
// total bytes; the connection it accepts is the sender's. The receiver is
// done when the child exits, successfully only if it read total bytes.
func childReceiver(l net.Listener, total int64, readSize int) (*net.TCPConn, <-chan received, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, "-receive", l.Addr().String(), "-bytes", strconv.FormatInt(total, 10), "-read", strconv.Itoa(readSize))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		acc <- accepted{c, err}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case a := <-acc:
		if a.err != nil {
			cmd.Process.Kill()
			<-exited
			return nil, nil, a.err
		}
		done := make(chan received, 1)
		go func() {
			err := <-exited
			r := received{n: total, end: time.Now()}
			if err != nil {
				r.n, r.err = 0, fmt.Errorf("receiver process: %w", err)
			}
			done <- r
		}()
		return a.c.(*net.TCPConn), done, nil
	case err := <-exited:
		return nil, nil, fmt.Errorf("receiver process exited before connecting: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return nil, nil, errors.New("receiver process did not connect within 30 s")
	}
}

// receiveFrom is the child's side of -receiver-process: it reads from
// addr until EOF and fails unless that was total bytes.
func receiveFrom(addr string, total int64, readSize int) error {
	if readSize <= 0 {
		return errors.New("-read must be positive")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := readAll(c, readSize)
	if err != nil {
		return fmt.Errorf("after %d bytes: %w", n, err)
	}
	if n != total {
		return fmt.Errorf("received %d bytes, expected %d", n, total)
	}
	return nil
}

// readAll reads c until EOF with readSize reads, returning the bytes read.
func readAll(c net.Conn, readSize int) (int64, error) {
	buf := make([]byte, readSize)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// rusage is this process's user and system CPU seconds so far (its
// children not counted).
func rusage() (user, sys float64, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	return time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds(), nil
}
