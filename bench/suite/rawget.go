package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// objRef is one object of the bucket and its size.
type objRef struct {
	key  string
	size int64
}

// rawGets reads every object in keys in ranges of rangeBytes with conns
// concurrent GETs, discarding the bytes. With forward, each GET's body is
// instead written to a loopback TCP connection (one per worker) whose
// other end, in this process too, reads and discards it: the least work
// any server that passes bucket bytes on to a consumer over TCP can do.
func rawGets(ctx context.Context, mc *minio.Client, keys []objRef, conns int, rangeBytes int64, forward bool) (*rawResult, error) {
	type job struct {
		key      string
		off, end int64 // inclusive end
	}
	var jobs []job
	var total int64
	for _, k := range keys {
		for off := int64(0); off < k.size; off += rangeBytes {
			jobs = append(jobs, job{k.key, off, min(off+rangeBytes, k.size) - 1})
		}
		total += k.size
	}
	// Interleave the objects as a multi-partition replay would: round
	// robin over the jobs in order is close enough; the objects are read
	// front to back.
	ch := make(chan job)
	var (
		got   atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	var sinks []net.Conn
	var sinkWG sync.WaitGroup
	if forward {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		for range conns {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return nil, err
			}
			r, err := ln.Accept()
			if err != nil {
				c.Close()
				return nil, err
			}
			sinks = append(sinks, c)
			sinkWG.Add(1)
			go func() {
				defer sinkWG.Done()
				defer r.Close()
				_, _ = io.CopyBuffer(io.Discard, r, make([]byte, 1<<20))
			}()
		}
	}
	start := time.Now()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst io.Writer = io.Discard
			buf := make([]byte, 1<<20)
			if forward {
				dst = sinks[w]
			}
			for j := range ch {
				opts := minio.GetObjectOptions{}
				if err := opts.SetRange(j.off, j.end); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					continue
				}
				obj, err := mc.GetObject(ctx, replayBucket, j.key, opts)
				if err == nil {
					var n int64
					// Wrapped so that neither side's ReadFrom/WriteTo
					// replaces buf with a small buffer of its own.
					n, err = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{obj}, buf)
					obj.Close()
					got.Add(n)
					if err == nil && n != j.end-j.off+1 {
						err = fmt.Errorf("%s: got %d bytes of range %d-%d", j.key, n, j.off, j.end)
					}
				}
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	for _, c := range sinks {
		c.Close()
	}
	sinkWG.Wait()
	if first != nil {
		return nil, first
	}
	secs := time.Since(start).Seconds()
	return &rawResult{Conns: conns, Range: rangeBytes, Forward: forward, Objects: len(keys), Bytes: got.Load(), Seconds: secs, MBPerS: float64(total) / secs / 1e6}, nil
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}
