package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratastream/strata/tiering"
)

// The remote read pool: Fetch's reads of the remote log run on a bounded
// set of goroutines, as Kafka's RemoteLogReader thread pool
// (remote.log.reader.threads) with its bounded task queue
// (remote.log.reader.max.pending.tasks).
//
//   - A fetch hands each remote read to the pool and waits for it at most
//     until its remote deadline (remote.fetch.max.wait.ms from the start
//     of the read pass, Kafka's DelayedRemoteFetch). A read not done by
//     then is abandoned: the partition answers no records (no error) and
//     the read's result, when it comes, is released at once; its chunks
//     stay in the cache for the fetch that asks again. A queued read that
//     is abandoned never runs.
//   - A full queue rejects the read: the partition answers no records.
//     Kafka answers UNKNOWN_SERVER_ERROR there (RejectedExecutionException),
//     which consumers do not retry; an empty answer makes them fetch again.
//   - Local reads never enter the pool: they run on the connection's
//     goroutine as before, so a fetch of local data never waits behind
//     remote work, and a fetch mixing both waits for its remote part only
//     up to the remote deadline.
//   - The bytes of remote slices handed out and not yet released (sent or
//     dropped) are counted: the pool's bytes in flight.

// remoteReadFunc is one remote read, run on a pool goroutine.
type remoteReadFunc func(ctx context.Context) (tiering.RemoteSlice, error)

// Outcomes of remoteReadPool.read other than a finished read.
var (
	// errRemoteReadRejected: the pool's queue was full.
	errRemoteReadRejected = errors.New("broker: remote read queue full")
	// errRemoteReadExpired: the read was not done by the deadline.
	errRemoteReadExpired = errors.New("broker: remote read not done by remote.fetch.max.wait.ms")
)

// Job states: a job is finished by the worker or abandoned by its waiter,
// whichever comes first.
const (
	jobPending int32 = iota
	jobFinished
	jobAbandoned
)

type remoteReadJob struct {
	read  remoteReadFunc
	state atomic.Int32
	done  chan struct{} // closed when the worker has stored the result
	rs    tiering.RemoteSlice
	err   error
}

// remoteReadPool runs remote reads on at most threads goroutines with at
// most pending reads waiting.
type remoteReadPool struct {
	jobs chan *remoteReadJob
	ctx  context.Context // cancelled by close; the reads' context
	stop context.CancelFunc
	wg   sync.WaitGroup

	queued   atomic.Int64 // jobs in the queue
	running  atomic.Int64 // jobs being read
	inFlight atomic.Int64 // bytes of remote slices handed out, not released
	rejected atomic.Int64
	expired  atomic.Int64
	// throttles and throttleNanos count the reads the quota held back
	// and the waits it asked of them.
	throttles, throttleNanos atomic.Int64
}

// throttled counts a read the quota held back for d.
func (p *remoteReadPool) throttled(d time.Duration) {
	p.throttles.Add(1)
	p.throttleNanos.Add(int64(d))
}

// Defaults of the pool, Kafka's.
const (
	defaultRemoteReaderThreads = 10
	defaultRemoteReaderPending = 100
	defaultRemoteFetchMaxWait  = 500 * time.Millisecond
)

// newRemoteReadPool starts threads workers with a queue of pending jobs
// (0: the defaults).
func newRemoteReadPool(threads, pending int) *remoteReadPool {
	if threads <= 0 {
		threads = defaultRemoteReaderThreads
	}
	if pending <= 0 {
		pending = defaultRemoteReaderPending
	}
	p := &remoteReadPool{jobs: make(chan *remoteReadJob, pending)}
	p.ctx, p.stop = context.WithCancel(context.Background())
	for range threads {
		p.wg.Add(1)
		go p.worker()
	}
	return p
}

// close stops the workers after their current reads (whose context it
// cancels); queued jobs are failed with ErrReaderClosed.
func (p *remoteReadPool) close() {
	p.stop()
	p.wg.Wait()
	for {
		select {
		case j := <-p.jobs:
			p.queued.Add(-1)
			p.finish(j, tiering.RemoteSlice{}, tiering.ErrReaderClosed)
		default:
			return
		}
	}
}

func (p *remoteReadPool) worker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.jobs:
			p.queued.Add(-1)
			if j.state.Load() == jobAbandoned {
				continue // its fetch has answered already
			}
			p.running.Add(1)
			rs, err := j.read(p.ctx)
			p.running.Add(-1)
			p.finish(j, rs, err)
		}
	}
}

// finish hands the result to the waiter, or releases it when the waiter
// is gone.
func (p *remoteReadPool) finish(j *remoteReadJob, rs tiering.RemoteSlice, err error) {
	j.rs, j.err = rs, err
	if !j.state.CompareAndSwap(jobPending, jobFinished) {
		rs.Release()
		return
	}
	close(j.done)
}

// read runs fn on the pool and waits for it until ctx is done. On success
// the slice is counted in flight until the returned release runs (once,
// however often it is called). Errors: errRemoteReadRejected (queue
// full), errRemoteReadExpired (ctx done first), or fn's.
func (p *remoteReadPool) read(ctx context.Context, fn remoteReadFunc) (tiering.RemoteSlice, func(), error) {
	j := &remoteReadJob{read: fn, done: make(chan struct{})}
	p.queued.Add(1)
	select {
	case p.jobs <- j:
	default:
		p.queued.Add(-1)
		p.rejected.Add(1)
		return tiering.RemoteSlice{}, nil, errRemoteReadRejected
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobPending, jobAbandoned) {
			p.expired.Add(1)
			return tiering.RemoteSlice{}, nil, errRemoteReadExpired
		}
		<-j.done // finished meanwhile: take it
	}
	if j.err != nil {
		return tiering.RemoteSlice{}, nil, j.err
	}
	rs := j.rs
	p.inFlight.Add(rs.Size)
	var once atomic.Bool
	release := func() {
		if once.CompareAndSwap(false, true) {
			rs.Release()
			p.inFlight.Add(-rs.Size)
		}
	}
	return rs, release, nil
}

// remoteReadCollector exports the pool and the quota (Kafka's
// RemoteLogReaderTaskQueueSize and remote-fetch-throttle-time metrics).
type remoteReadCollector struct{ s *Server }

var (
	descRemoteQueue = prometheus.NewDesc("strata_tier_remote_read_queue_depth",
		"Remote reads of fetches waiting for a remote.log.reader.threads goroutine.", nil, nil)
	descRemoteRunning = prometheus.NewDesc("strata_tier_remote_read_running",
		"Remote reads of fetches running.", nil, nil)
	descRemoteInFlight = prometheus.NewDesc("strata_tier_remote_fetch_bytes_in_flight",
		"Bytes read from the remote log for fetch responses not yet sent or dropped.", nil, nil)
	descRemoteRejected = prometheus.NewDesc("strata_tier_remote_read_rejected_total",
		"Remote reads turned away because remote.log.reader.max.pending.tasks were waiting (the partition answered no records).", nil, nil)
	descRemoteExpired = prometheus.NewDesc("strata_tier_remote_read_expired_total",
		"Remote reads not done within remote.fetch.max.wait.ms (the partition answered no records).", nil, nil)
	descRemoteThrottled = prometheus.NewDesc("strata_tier_remote_fetch_throttled_total",
		"Remote reads held back by remote.log.manager.fetch.max.bytes.per.second.", nil, nil)
	descRemoteThrottleTime = prometheus.NewDesc("strata_tier_remote_fetch_throttle_seconds_total",
		"Sum of the waits the remote fetch quota asked of the reads it held back (divided by strata_tier_remote_fetch_throttled_total: Kafka's remote-fetch-throttle-time-avg).", nil, nil)
	descRemoteQuota = prometheus.NewDesc("strata_tier_remote_fetch_quota_bytes_per_second",
		"The remote fetch quota in force, 0 when unlimited.", nil, nil)
)

func (c remoteReadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRemoteQueue, descRemoteRunning, descRemoteInFlight, descRemoteRejected,
		descRemoteExpired, descRemoteThrottled, descRemoteThrottleTime, descRemoteQuota} {
		ch <- d
	}
}

func (c remoteReadCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.s.started.Load() || c.s.tier == nil {
		return
	}
	p, q := c.s.tier.reads, c.s.tier.quota
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descRemoteQueue, float64(p.queued.Load()))
	gauge(descRemoteRunning, float64(p.running.Load()))
	gauge(descRemoteInFlight, float64(p.inFlight.Load()))
	counter(descRemoteRejected, float64(p.rejected.Load()))
	counter(descRemoteExpired, float64(p.expired.Load()))
	counter(descRemoteThrottled, float64(p.throttles.Load()))
	counter(descRemoteThrottleTime, time.Duration(p.throttleNanos.Load()).Seconds())
	gauge(descRemoteQuota, q.rate())
}
