package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scenario 8: share groups (KIP-932) on one partition. Throughput is the
// records/s a share group of 1, 4 and 16 consumers accepts, each beside
// a classic group's one consumer reading the same topic (a classic group
// cannot use more than one consumer per partition). Every consumer does
// the same fixed work per record, a wait of -share-work per record it
// got (as a consumer calling out to another service would), so more
// share consumers can help until the partition's leader is the bound.
// Redelivery latency is the time from a record's lock expiry to its
// delivery to another consumer, against the lock duration. The cold
// replay (sharereplay.go) drains a topic whose history is only in MinIO
// with share groups of 1 and 4, against a classic consumer from offset
// 0, each from a cold chunk cache.

// shareBatch is the records a share consumer acquires per fetch. With
// ShareMaxRecordsStrict it fetches only when it polls, so it holds at
// most this many: with franz-go's defaults (500, fetching ahead) one
// consumer's fetches fill the partition's in-flight window
// (group.share.partition.max.record.locks, 2000) and the others wait.
const shareBatch = 100

// shareResult is one throughput run.
type shareResult struct {
	Label       string  `json:"label"`
	Group       string  `json:"group"` // "classic" or "share"
	Consumers   int     `json:"consumers"`
	Records     int     `json:"records"`
	Deliveries  int64   `json:"deliveries"`
	Bytes       int64   `json:"bytes"`   // keys and values of the distinct records
	Seconds     float64 `json:"seconds"` // from the first record polled
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	// FirstRecordS is the time from the clients' creation to the first
	// record polled.
	FirstRecordS float64 `json:"first_record_s"`
	// CacheMisses is the broker's chunk cache misses for the topic over
	// the run (the cold replay's; zero otherwise).
	CacheMisses int64 `json:"cache_misses,omitempty"`
}

// redeliveryResult is the redelivery measurement.
type redeliveryResult struct {
	LockMs        int64     `json:"lock_ms"`
	Rounds        int       `json:"rounds"`
	LatenciesMs   []float64 `json:"latencies_ms"` // each record's, sorted
	FetchRTTMsP50 float64   `json:"fetch_rtt_ms_p50"`
}

func (r *runner) s8(ctx context.Context, s *scenario) error {
	lock := r.o.shareLock
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(r.tmp, "s8", "data"), nil,
		"group.share.min.record.lock.duration.ms=1000",
		"group.share.record.lock.duration.ms="+strconv.FormatInt(lock.Milliseconds(), 10),
		"group.share.min.heartbeat.interval.ms=500", "group.share.heartbeat.interval.ms=1000")
	if err != nil {
		return err
	}
	defer b.stop()
	n := int(r.o.shareRecords)
	const topic = "s8-queue"
	if err := shareProduce(ctx, b.addr, topic, 0, n, shareRecordSize, nil); err != nil {
		return err
	}
	for i, consumers := range []int{1, 4, 16} {
		classic, err := classicConsume(ctx, b.addr, topic, fmt.Sprintf("s8-classic-%d", i), n, r.o.shareWork)
		if err != nil {
			s.fail(fmt.Sprintf("classic group beside %d share consumers", consumers), err)
			continue
		}
		s.raw(fmt.Sprintf("s8-classic-%d", i+1), classic)
		shared, err := shareConsume(ctx, b.addr, topic, fmt.Sprintf("s8-share-%d", consumers), consumers, n, shareBatch, r.o.shareWork)
		if err != nil {
			s.fail(fmt.Sprintf("share group of %d", consumers), err)
			continue
		}
		s.raw(fmt.Sprintf("s8-share-%d", consumers), shared)
		logf("  %d share consumers: %.0f records/s accepted; classic group's one consumer %.0f records/s", consumers, shared.RecordsPerS, classic.RecordsPerS)
		f := s.figure(fmt.Sprintf("share group, %d consumer(s) on one partition, records/s accepted ÷ a classic group's one consumer", consumers), "records/s", nil)
		f.setIf(shared.RecordsPerS)
		f.ref("a classic group's one consumer of the same topic, the same work per record, in the same run", classic.RecordsPerS)
		s.row(fmt.Sprintf("share, %d consumer(s)", consumers), fmt.Sprintf("%d records, %d deliveries", shared.Records, shared.Deliveries), shared.RecordsPerS, shared.MBPerS, shared.Seconds)
		s.row("classic, 1 consumer", fmt.Sprintf("%d records", classic.Records), classic.RecordsPerS, classic.MBPerS, classic.Seconds)
	}
	s.RowHeader = []string{"group", "records", "records/s", "MB/s", "seconds"}

	r.s8ColdReplay(ctx, s)

	red, err := shareRedelivery(ctx, b.addr, "s8-redeliver", lock, r.o.shareRounds)
	if err != nil {
		s.fail("redelivery", err)
	} else {
		s.raw("s8-redelivery", red)
		lockMs := float64(lock.Milliseconds())
		for _, q := range []float64{0.5, 0.99} {
			v := percentile(red.LatenciesMs, q)
			logf("  redelivery after lock expiry p%.0f: %.1f ms (lock %v)", q*100, v, lock)
			f := s.figure(fmt.Sprintf("redelivery to another consumer after a lock timeout, p%.0f from the lock's expiry ÷ the lock duration", q*100), "ms", nil)
			f.setIf(v)
			f.ref(fmt.Sprintf("group.share.record.lock.duration.ms (%d records over %d rounds)", len(red.LatenciesMs), red.Rounds), lockMs)
		}
		s.note(fmt.Sprintf("Redelivery: each round produces 10 records, consumer A acquires them (ShareMaxRecordsStrict, 10) and holds them unacknowledged; consumer B (same group, not polling until then) then polls and accepts them. The latency of a record is the time B's poll returned it minus (the time A's poll returned it + the lock duration); A's acquisition was before its poll returned, so the figure overstates the broker's latency by up to A's fetch round trip (median %.1f ms) and includes B's own fetch. The broker sweeps expired locks every 100 ms.", red.FetchRTTMsP50))
	}
	s.note(fmt.Sprintf("One broker, one partition, %d records of 100 B produced first (acks=all, batches of at most 16 KiB: a share fetch acquires whole batches); each run is a new group reading from the log start (share.auto.offset.reset=earliest for the share groups). Every consumer waits %v per record it got (one wait per poll: records × %v), standing in for a consumer's own work; share consumers accept every record (acknowledgements flushed with the next fetch; the run ends when every record was delivered and the acknowledgements flushed). Share consumers fetch at most %d records each and only when they poll (ShareMaxRecords %d, ShareMaxRecordsStrict): with franz-go's defaults (500, fetching ahead) one consumer fills the partition's in-flight window of 2000 records (group.share.partition.max.record.locks) and the others wait, so 4 and 16 consumers measured no faster than one. The classic group's consumer is franz-go's group consumer; it commits nothing.", n, r.o.shareWork, r.o.shareWork, shareBatch, shareBatch))
	return nil
}

// shareRecordSize is the value size of the throughput runs' records.
const shareRecordSize = 100

// shareProduce produces n records of size bytes (the value is the
// record's number, padded with zeros) to a new one-partition topic
// (created with configs when from is 0) with acks=all, in batches of at
// most 16 KiB (the Java producer's batch.size): a share fetch acquires
// whole batches, so one batch of the whole topic would go to one
// consumer.
func shareProduce(ctx context.Context, addr, topic string, from, n, size int, configs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(16384))
	if err != nil {
		return err
	}
	defer cl.Close()
	if from == 0 {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
		for k, v := range configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
	}
	val := make([]byte, size)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := from; i < from+n; i++ {
		v := slices.Clone(val)
		copy(v, strconv.Itoa(i))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// work waits for records × per, the consumers' stand-in for work.
func work(records int, per time.Duration) {
	if per > 0 && records > 0 {
		time.Sleep(time.Duration(records) * per)
	}
}

// classicConsume reads n records of topic with one classic group
// consumer from the start; with no group, with a consumer of partition 0
// from offset 0 (no group to join).
func classicConsume(ctx context.Context, addr, topic, group string, n int, per time.Duration) (*shareResult, error) {
	consume := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}
	if group == "" {
		consume = []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}})}
	}
	cl, err := kgo.NewClient(append(consume, kgo.SeedBrokers(addr), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	got := 0
	var bytes int64
	var start time.Time
	began := time.Now()
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("classic group: %d of %d records: %w", got, n, ctx.Err())
		}
		k := fs.NumRecords()
		if k > 0 && start.IsZero() {
			start = time.Now()
		}
		got += k
		fs.EachRecord(func(r *kgo.Record) { bytes += int64(len(r.Key) + len(r.Value)) })
		work(k, per)
	}
	secs := time.Since(start).Seconds()
	label := group
	if label == "" {
		label = "partition consumer of " + topic
	}
	return &shareResult{Label: label, Group: "classic", Consumers: 1, Records: got, Deliveries: int64(got), Bytes: bytes, Seconds: secs,
		RecordsPerS: float64(got) / secs, MBPerS: float64(bytes) / secs / 1e6, FirstRecordS: start.Sub(began).Seconds()}, nil
}

// setShareEarliest sets share.auto.offset.reset=earliest on group.
func setShareEarliest(ctx context.Context, cl *kgo.Client, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
}

// shareConsume accepts the n records of topic with a share group of
// consumers members, each fetching at most batch records and only when
// it polls, and measures from the first record polled until every
// record was delivered and every member's acknowledgements were flushed.
func shareConsume(ctx context.Context, addr, topic, group string, consumers, n int, batch int32, per time.Duration) (*shareResult, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := setShareEarliest(ctx, admin, group); err != nil {
		return nil, fmt.Errorf("share.auto.offset.reset on %s: %w", group, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		mu         sync.Mutex
		seen       = make([]bool, n)
		distinct   int
		deliveries int64
		bytes      int64
		start      time.Time
		all        = make(chan struct{})
	)
	var wg sync.WaitGroup
	clients := make([]*kgo.Client, consumers)
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ShareMaxRecords(batch), kgo.ShareMaxRecordsStrict())
		if err != nil {
			return nil, err
		}
		clients[i] = cl
		defer cl.Close()
	}
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	began := time.Now()
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, 0)
				recs := fs.Records()
				mu.Lock()
				if len(recs) > 0 && start.IsZero() {
					start = time.Now()
				}
				for _, r := range recs {
					deliveries++
					if i, err := strconv.Atoi(string(trimZeros(r.Value))); err == nil && i >= 0 && i < n && !seen[i] {
						seen[i] = true
						distinct++
						bytes += int64(len(r.Key) + len(r.Value))
						if distinct == n {
							close(all)
						}
					}
				}
				mu.Unlock()
				work(len(recs), per)
				for _, r := range recs {
					r.Ack(kgo.AckAccept)
				}
			}
		}()
	}
	select {
	case <-all:
	case <-ctx.Done():
		stop()
		wg.Wait()
		return nil, fmt.Errorf("share group of %d: %d of %d records delivered: %w", consumers, distinct, n, ctx.Err())
	}
	stop()
	wg.Wait()
	for _, cl := range clients {
		if err := cl.FlushAcks(ctx); err != nil {
			return nil, fmt.Errorf("flushing acknowledgements: %w", err)
		}
	}
	secs := time.Since(start).Seconds()
	return &shareResult{Label: group, Group: "share", Consumers: consumers, Records: n, Deliveries: deliveries, Bytes: bytes, Seconds: secs,
		RecordsPerS: float64(n) / secs, MBPerS: float64(bytes) / secs / 1e6, FirstRecordS: start.Sub(began).Seconds()}, nil
}

// trimZeros cuts a value at its first NUL byte.
func trimZeros(v []byte) []byte {
	if i := slices.Index(v, 0); i >= 0 {
		return v[:i]
	}
	return v
}

// shareRedelivery measures, over rounds, the time from the lock expiry
// of records consumer A holds to their delivery to consumer B.
func shareRedelivery(ctx context.Context, addr, topic string, lock time.Duration, rounds int) (*redeliveryResult, error) {
	const group, per = "s8-redeliver", 10
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := setShareEarliest(ctx, admin, group); err != nil {
		return nil, err
	}
	if err := shareProduce(ctx, addr, topic, 0, 0, shareRecordSize, nil); err != nil {
		return nil, err
	}
	newConsumer := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(per), kgo.ShareMaxRecordsStrict(), kgo.FetchMaxWait(200*time.Millisecond))
	}
	a, err := newConsumer()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	bc, err := newConsumer()
	if err != nil {
		return nil, err
	}
	defer bc.Close()
	out := &redeliveryResult{LockMs: lock.Milliseconds(), Rounds: rounds}
	var rtts []float64
	for round := range rounds {
		if err := shareProduce(ctx, addr, topic, round*per+1, per, shareRecordSize, nil); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second+2*lock)
		held := map[string]time.Time{}
		for len(held) < per && rctx.Err() == nil {
			began := time.Now()
			fs := a.PollRecords(rctx, per)
			at := time.Now()
			if fs.NumRecords() > 0 {
				rtts = append(rtts, float64(at.Sub(began).Microseconds())/1000)
			}
			for _, r := range fs.Records() {
				held[string(r.Value)] = at
			}
		}
		got := 0
		for got < len(held) && rctx.Err() == nil {
			fs := bc.PollRecords(rctx, per)
			at := time.Now()
			for _, r := range fs.Records() {
				if t, ok := held[string(r.Value)]; ok {
					out.LatenciesMs = append(out.LatenciesMs, float64(at.Sub(t.Add(lock)).Microseconds())/1000)
					got++
				}
				r.Ack(kgo.AckAccept)
			}
			if err := bc.FlushAcks(rctx); err != nil {
				cancel()
				return nil, err
			}
		}
		err := rctx.Err()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("round %d: A held %d records, B got %d of them: %w", round+1, len(held), got, err)
		}
	}
	slices.Sort(out.LatenciesMs)
	slices.Sort(rtts)
	out.FetchRTTMsP50 = percentile(rtts, 0.5)
	return out, nil
}

// percentile is the q-quantile of sorted values (nearest rank); 0 for
// none.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
