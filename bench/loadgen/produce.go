package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// checkProduce checks the settings of produce mode.
func (c config) checkProduce() error {
	switch {
	case c.Size < sentAtEnd:
		return fmt.Errorf("-size %d: want at least %d", c.Size, sentAtEnd)
	case c.Producers < 1 || c.Partitions < 1 || c.Consumers < 0:
		return errors.New("-producers and -partitions must be at least 1")
	case c.Records <= 0 && c.Duration <= 0:
		return errors.New("want -records or -duration")
	}
	if _, err := parseAcks(c.Acks); err != nil {
		return err
	}
	_, err := parseCodec(c.Compression)
	return err
}

// produceRun is produce mode: producers, and consumers at the end of the
// partitions for end-to-end latency.
func produceRun(ctx context.Context, c config, adm *kadm.Client) (*result, error) {
	acks, _ := parseAcks(c.Acks) // checked by checkProduce
	codec, _ := parseCodec(c.Compression)
	seeds := c.seeds()
	ends, err := waitEndOffsets(ctx, adm, c.Topic, c.Partitions)
	if err != nil {
		return nil, err
	}

	res := &result{Config: c, Start: time.Now().UTC().Format(time.RFC3339)}
	g := &gen{c: c, values: newValues(c.Size), prodLat: newHistogram(), e2eLat: newHistogram()}

	// Consumers first, positioned at the end offsets, so that they see
	// every record produced.
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	var consWG sync.WaitGroup
	consErrs := make(chan error, c.Consumers)
	for i := range c.Consumers {
		offs := map[int32]kgo.Offset{}
		for p := i; p < c.Partitions; p += c.Consumers {
			offs[int32(p)] = kgo.NewOffset().At(ends[int32(p)])
		}
		if len(offs) == 0 {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: offs}),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			if err := g.consume(consCtx, cl); err != nil {
				consErrs <- err
			}
		}()
	}

	prog := newProgress(c)
	var prodWG sync.WaitGroup
	prodErrs := make(chan error, c.Producers)
	start := time.Now()
	g.start = start
	for i := range c.Producers {
		opts := []kgo.Opt{
			kgo.SeedBrokers(seeds...),
			kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(acks),
			kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.MaxBufferedRecords(max(10_000, 4<<20/c.Size)),
			kgo.MaxProduceRequestsInflightPerBroker(5),
			kgo.ProduceRequestTimeout(30 * time.Second),
			kgo.RecordDeliveryTimeout(min(c.Timeout, 2*time.Minute)),
		}
		opts = append(opts, kgo.ProducerLinger(c.Linger))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			if err := g.produce(ctx, cl, i); err != nil {
				prodErrs <- err
			}
		}()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	prodDone := make(chan struct{})
	go func() { prodWG.Wait(); close(prodDone) }()
wait:
	for {
		select {
		case <-tick.C:
			prog.show(g, time.Since(start))
		case <-prodDone:
			break wait
		}
	}
	prodSecs := g.lastAck.Load().Sub(start).Seconds()
	sent := g.acked.Load()
	res.Produce = &side{Records: sent, Bytes: sent * int64(c.Size), Seconds: prodSecs, Latency: g.prodLat.summary()}
	res.Produce.fill()
	res.Errors = g.failed.Load()
	var errs []error
	close(prodErrs)
	for err := range prodErrs {
		errs = append(errs, err)
	}
	if n := g.failed.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d records failed; first: %v", n, g.firstErr.Load()))
	}

	if c.Consumers > 0 {
		deadline := time.Now().Add(c.Drain)
		for g.consumed.Load() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
			prog.show(g, time.Since(start))
			time.Sleep(50 * time.Millisecond)
		}
		stopCons()
		consWG.Wait()
		close(consErrs)
		for err := range consErrs {
			errs = append(errs, err)
		}
		got := g.consumed.Load()
		if got < sent {
			errs = append(errs, fmt.Errorf("consumers got %d of %d records within -drain %v", got, sent, c.Drain))
		}
		var secs float64
		if f, l := g.firstCons.Load(), g.lastCons.Load(); f != nil && l != nil {
			secs = l.Sub(start).Seconds()
		}
		res.Consume = &side{Records: got, Bytes: got * int64(c.Size), Seconds: secs, Latency: g.e2eLat.summary()}
		res.Consume.fill()
	}
	prog.done(g, time.Since(start))
	return res, errors.Join(errs...)
}

// gen is the state the producers and consumers share.
type gen struct {
	c        config
	values   *values
	start    time.Time
	prodLat  *histogram
	e2eLat   *histogram
	sent     atomic.Int64
	acked    atomic.Int64
	failed   atomic.Int64
	consumed atomic.Int64
	firstErr atomic.Value
	lastAck  atomicTime
	// firstCons and lastCons bound the consumers' activity.
	firstCons, lastCons atomicTime
}

type atomicTime struct{ p atomic.Pointer[time.Time] }

func (a *atomicTime) Store(t time.Time) { a.p.Store(&t) }
func (a *atomicTime) Load() *time.Time  { return a.p.Load() }
func (a *atomicTime) Sub(t time.Time) time.Duration {
	if p := a.p.Load(); p != nil {
		return p.Sub(t)
	}
	return 0
}

// produce is producer number idx: records idx, idx+P, ... until its share
// of -records is sent or -duration has passed, paced to its share of -rate.
func (g *gen) produce(ctx context.Context, cl *kgo.Client, idx int) error {
	c := g.c
	var interval time.Duration
	if c.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(c.Producers) / c.Rate)
	}
	end := g.start.Add(c.Duration)
	var wg sync.WaitGroup
	for k := int64(0); ; k++ {
		i := k*int64(c.Producers) + int64(idx)
		if c.Records > 0 && i >= c.Records {
			break
		}
		now := time.Now()
		if c.Records <= 0 && now.After(end) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if interval > 0 {
			if due := g.start.Add(time.Duration(k) * interval); due.Sub(now) > time.Millisecond {
				time.Sleep(due.Sub(now))
			}
		}
		t0 := time.Now()
		r := &kgo.Record{Topic: c.Topic, Partition: int32(i % int64(c.Partitions)), Value: g.values.build(t0, i)}
		wg.Add(1)
		g.sent.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			now := time.Now()
			if err != nil {
				if g.failed.Add(1) == 1 {
					g.firstErr.Store(err.Error())
				}
			} else {
				g.prodLat.record(now.Sub(t0))
				g.acked.Add(1)
				g.lastAck.Store(now)
			}
			wg.Done()
		})
	}
	err := cl.Flush(ctx)
	wg.Wait()
	return err
}

// consume polls until ctx ends, recording each record's end-to-end latency.
func (g *gen) consume(ctx context.Context, cl *kgo.Client) error {
	local := newHistogram()
	defer g.e2eLat.merge(local)
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.Canceled) {
				return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if t, ok := sentAt(r.Value); ok {
				local.record(now.Sub(t))
			}
			n++
		})
		if n > 0 {
			if g.firstCons.Load() == nil {
				g.firstCons.Store(now)
			}
			g.lastCons.Store(now)
			g.consumed.Add(int64(n))
		}
	}
}
