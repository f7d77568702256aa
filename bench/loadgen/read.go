package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readRun is modes consume, fetch and verify: a read of every partition of
// c.Topic from its start to the end offsets it had when the run began.
func readRun(ctx context.Context, c config, adm *kadm.Client) (*result, error) {
	ends, err := topicEnds(ctx, adm, c.Topic)
	if err != nil {
		return nil, err
	}
	res := &result{Config: c, Start: time.Now().UTC().Format(time.RFC3339)}
	var rd *readSide
	switch c.Mode {
	case "consume":
		rd, err = consume(ctx, c, ends, nil)
	case "fetch":
		rd, err = fetch(ctx, c, ends)
	case "verify":
		if c.Size < indexEnd {
			return nil, fmt.Errorf("-size %d: verify mode needs the size produced, at least %d", c.Size, indexEnd)
		}
		rd, err = consume(ctx, c, ends, newValues(c.Size))
	}
	if err != nil {
		return nil, err
	}
	res.Read = rd
	return res, nil
}

// consume reads every partition from offset 0 to ends with franz-go's
// consumer. With check set (verify mode), each record must sit at the next
// offset of its partition and carry the value produce mode gave that
// offset's record (value.go).
func consume(ctx context.Context, c config, ends map[int32]int64, check *values) (*readSide, error) {
	offsets := map[int32]kgo.Offset{}
	var want int64
	for p, end := range ends {
		if end > 0 {
			offsets[p] = kgo.NewOffset().At(0)
			want += end
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: offsets}),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(16<<20),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	partitions := int64(len(ends))
	next := map[int32]int64{}
	var n, bytes int64
	var bad error
	start := time.Now()
	for n < want && bad == nil {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %d of %d records: %w", n, want, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetch %s/%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if bad != nil || r.Offset >= ends[r.Partition] {
				return
			}
			if check != nil {
				p := r.Partition
				if r.Offset != next[p] {
					bad = fmt.Errorf("partition %d: offset %d, want %d", p, r.Offset, next[p])
					return
				}
				next[p]++
				if err := check.check(r.Value, r.Offset*partitions+int64(p)); err != nil {
					bad = fmt.Errorf("partition %d offset %d: %w", p, r.Offset, err)
					return
				}
			}
			n++
			bytes += int64(len(r.Value) + len(r.Key))
		})
	}
	if bad != nil {
		return nil, fmt.Errorf("verify: %w (after %d good records)", bad, n)
	}
	rd := &readSide{side: side{Records: n, Bytes: bytes, Seconds: time.Since(start).Seconds()}, Partitions: len(ends)}
	rd.fill()
	return rd, nil
}

// fetchVersion is the Fetch version the bare fetcher speaks: the newest
// without flexible encoding, served by Kafka since 2.3 and by Strata.
const fetchVersion = 11

// clientID is the client id of the bare fetcher's requests.
const clientID = "loadgen"

// fetched counts the record-batch bytes fetch mode has read so far, for
// the -series sampler.
var fetched atomic.Int64

// fetch reads every partition from the start to ends with bare Fetch v11
// requests, its partitions spread over c.Conns connections of its own, each
// connection asking for all of its partitions at once, reading each
// response into one reused buffer and walking batch headers in place: one
// copy from the socket, as bench/loopback's receiver does, so that the
// figure is the broker's, not the client's decoding.
func fetch(ctx context.Context, c config, ends map[int32]int64) (*readSide, error) {
	conns := max(1, min(c.Conns, len(ends)))
	shares := make([]map[int32]int64, conns)
	for i := range shares {
		shares[i] = map[int32]int64{}
	}
	i := 0
	for p, end := range ends {
		shares[i%conns][p] = end
		i++
	}
	type tally struct {
		records, bytes, requests int64
		err                      error
	}
	tallies := make(chan tally, conns)
	start := time.Now()
	if c.Series != "" {
		stop := sampleSeries(c.Series, start)
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "loadgen: -series: %v\n", err)
			}
		}()
	}
	for _, share := range shares {
		go func() {
			var t tally
			for range max(1, c.Passes) {
				r, b, q, err := fetchConn(ctx, c.seeds()[0], c.Topic, share)
				t.records, t.bytes, t.requests = t.records+r, t.bytes+b, t.requests+q
				if t.err = err; err != nil {
					break
				}
			}
			tallies <- t
		}()
	}
	res := &readSide{Partitions: len(ends), Conns: conns, Passes: max(1, c.Passes)}
	var errs []error
	for range conns {
		t := <-tallies
		res.Records += t.records
		res.Bytes += t.bytes
		res.Requests += t.requests
		errs = append(errs, t.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.fill()
	return res, nil
}

// fetchConn fetches the partitions in ends, from offset 0 to their end, on
// one connection.
func fetchConn(ctx context.Context, addr, topic string, ends map[int32]int64) (records, bytes, requests int64, err error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return 0, 0, 0, err
		}
	}
	next := map[int32]int64{}
	for p := range ends {
		next[p] = 0
	}
	var (
		req, buf []byte
		size     [4]byte
	)
	for corr := int32(1); ; corr++ {
		fr := kmsg.NewPtrFetchRequest()
		fr.Version = fetchVersion
		fr.ReplicaID = -1
		fr.MaxWaitMillis = 100
		fr.MinBytes = 1
		fr.MaxBytes = 64 << 20
		fr.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, off := range next {
			if off < ends[p] {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 32<<20
				rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		if len(rt.Partitions) == 0 {
			break
		}
		fr.Topics = append(fr.Topics, rt)

		// Request header v1: key, version, correlation id, client id.
		req = append(req[:0], 0, 0, 0, 0)
		req = binary.BigEndian.AppendUint16(req, 1)
		req = binary.BigEndian.AppendUint16(req, fetchVersion)
		req = binary.BigEndian.AppendUint32(req, uint32(corr))
		req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
		req = append(req, clientID...)
		req = fr.AppendTo(req)
		binary.BigEndian.PutUint32(req, uint32(len(req)-4))
		if _, err := conn.Write(req); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch: %w", err)
		}
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > 1<<30 {
			return 0, 0, 0, fmt.Errorf("fetch response size %d", n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		requests++
		if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
			return 0, 0, 0, fmt.Errorf("fetch response: correlation id %d, want %d", got, corr)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = fetchVersion
		if err := resp.UnsafeReadFrom(buf[4:]); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch: %w", err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return 0, 0, 0, fmt.Errorf("fetch %s/%d at %d: %w", t.Topic, p.Partition, next[p.Partition], err)
				}
				n, last, count := walkBatches(p.RecordBatches)
				if last >= 0 {
					next[p.Partition] = last + 1
				}
				bytes += int64(n)
				records += count
				fetched.Add(int64(n))
			}
		}
	}
	return records, bytes, requests, nil
}

// walkBatches returns the bytes of whole record batches at the start of b,
// the last offset of the last whole batch (-1 if none) and the records they
// hold, from the v2 batch header: base offset (8), length (4), epoch (4),
// magic (1), crc (4), attributes (2), last offset delta (4), timestamps
// (16), producer (14), record count (4).
func walkBatches(b []byte) (n int, last int64, records int64) {
	last = -1
	for len(b[n:]) >= 61 {
		h := b[n:]
		size := 12 + int(int32(binary.BigEndian.Uint32(h[8:])))
		if size < 61 || size > len(h) {
			break
		}
		last = int64(binary.BigEndian.Uint64(h)) + int64(int32(binary.BigEndian.Uint32(h[23:])))
		records += int64(int32(binary.BigEndian.Uint32(h[57:])))
		n += size
	}
	return n, last, records
}

// sampleSeries writes the fetched byte count every 100 ms to path until the
// returned function is called, which writes the last sample and closes the
// file.
func sampleSeries(path string, start time.Time) func() error {
	f, err := os.Create(path)
	if err != nil {
		return func() error { return err }
	}
	fmt.Fprintln(f, "seconds,bytes,mb_per_s")
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		prevT, prevB := 0.0, int64(0)
		sample := func() {
			now, b := time.Since(start).Seconds(), fetched.Load()
			// A last interval much shorter than the period would be
			// mostly noise.
			if now-prevT >= 0.05 {
				fmt.Fprintf(f, "%.3f,%d,%.1f\n", now, b, float64(b-prevB)/(now-prevT)/1e6)
			}
			prevT, prevB = now, b
		}
		for {
			select {
			case <-t.C:
				sample()
			case <-done:
				sample()
				return
			}
		}
	}()
	return func() error {
		close(done)
		<-finished
		return f.Close()
	}
}
