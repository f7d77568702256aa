package broker

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The remote fetch quota (KIP-956's remote.log.manager.fetch.max.bytes.per.second):
// a bound on the bytes per second this broker serves to Fetch from the
// remote log, for all partitions and clients together. It keeps a replay
// from the bucket from taking the CPU that fetches of the local tail need:
// on a small host the replay's GETs, CRC checks and chunk copies compete
// with every other request (bench/RESULTS.md, "Tail latency during a
// replay").
//
//   - The reader's GETs are paced at the same rate (tiering's
//     ReaderConfig.Pacer): the store sends no faster, and the work of a
//     read-ahead run (copy, CRC check, chunk file write) is spread over
//     time instead of taking both cores for the run's length.
//   - As in Kafka the quota is checked before a remote read and the bytes
//     read are counted after it: a read starts while the quota is not
//     exceeded, so one read may take it over (by at most one partition's
//     max bytes per concurrent read). A partition whose read the quota
//     holds back answers no records and no error, as Kafka's
//     ReplicaManager does; the fetch then waits within its MaxWait, and is
//     read again when the quota allows (Kafka waits out MaxWait).
//   - Kafka measures the rate over remote.log.manager.fetch.quota.window.num
//     windows of .window.size.seconds (11 of 1 s): a replay then runs
//     unthrottled until ten seconds' worth of the quota has been read, a
//     burst of full-speed reading at every start. Strata's quota is a
//     token bucket instead, whose burst is remoteQuotaBurst of the rate:
//     the rate holds from the first read. The window settings are
//     accepted and ignored (kafka_settings.go).
//   - Unset, the quota is remoteQuotaPerCPU bytes per second for each CPU
//     of the host (runtime.NumCPU), which bench/RESULTS.md ("Remote fetch
//     quota") derives from the measured curve of a tail consumer's latency
//     against the replay rate. Kafka's unlimited default is
//     9223372036854775807 (Long.MAX_VALUE), which turns the quota off here
//     too.
//   - It is a dynamic broker config (dynamic_broker_config.go), per
//     broker or as the cluster default, applied at once.

// remoteQuotaBurst is how much of a second's quota may be read at once.
const remoteQuotaBurst = 50 * time.Millisecond

// remoteQuotaPerCPU is the unset quota per CPU of the host, bytes/s.
const remoteQuotaPerCPU = 200 << 20

// remoteFetchQuotaSetting is the quota's setting.
const remoteFetchQuotaSetting = "remote.log.manager.fetch.max.bytes.per.second"

// remoteFetchUnlimited is Kafka's default: no quota.
const remoteFetchUnlimited = math.MaxInt64

// RemoteFetchConfig holds the settings of remote reads for Fetch.
type RemoteFetchConfig struct {
	// MaxBytesPerSecond is remote.log.manager.fetch.max.bytes.per.second
	// (0: remoteQuotaPerCPU per CPU; remoteFetchUnlimited: none).
	MaxBytesPerSecond int64
	// ReaderThreads is remote.log.reader.threads.
	ReaderThreads int
	// ReaderMaxPending is remote.log.reader.max.pending.tasks.
	ReaderMaxPending int
	// MaxWait is remote.fetch.max.wait.ms.
	MaxWait time.Duration
}

// remoteFetchSettings are the registry entries of remote reads for Fetch.
var remoteFetchSettings = []setting{
	{name: remoteFetchQuotaSetting, typ: typeLong, valid: atLeast(1), dynamicBroker: true,
		unset: strconv.Itoa(remoteQuotaPerCPU) + " per CPU of the host",
		field: func(c *Config) any { return &c.Tiering.RemoteFetch.MaxBytesPerSecond },
		doc:   "Bytes per second this broker serves to Fetch from the remote log (object store and chunk cache), all partitions together; a partition held back answers no records and is read again when the quota allows (9223372036854775807: unlimited)."},
	{name: "remote.log.reader.threads", typ: typeInt, def: strconv.Itoa(defaultRemoteReaderThreads), valid: between(1, 1024),
		field: func(c *Config) any { return &c.Tiering.RemoteFetch.ReaderThreads },
		doc:   "Goroutines that run the remote reads of fetches; reads of local segments never wait for them."},
	{name: "remote.log.reader.max.pending.tasks", typ: typeInt, def: strconv.Itoa(defaultRemoteReaderPending), valid: between(1, 1<<20),
		field: func(c *Config) any { return &c.Tiering.RemoteFetch.ReaderMaxPending },
		doc:   "Remote reads that may wait for a remote.log.reader.threads goroutine; a read beyond them answers no records at once."},
	{name: "remote.fetch.max.wait.ms", typ: typeInt, def: msString(defaultRemoteFetchMaxWait), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Tiering.RemoteFetch.MaxWait }, unit: time.Millisecond,
		doc: "How long a fetch waits for its remote reads; a partition whose read is not done by then answers no records (the read goes on and fills the chunk cache)."},
}

// remoteFetchRate is the quota in force for a configured value.
func remoteFetchRate(v int64, cpus int) int64 {
	if v <= 0 {
		return int64(remoteQuotaPerCPU) * int64(max(cpus, 1))
	}
	return v
}

// remoteQuota is the token bucket of the remote fetch quota. Tokens are
// bytes; a read takes its bytes after it ran, so the bucket may go into
// debt, and no read starts while it is in debt.
type remoteQuota struct {
	now func() time.Time
	// pacer paces the reader's GET bodies at the same rate
	// (tiering.ReaderConfig.Pacer).
	pacer *rate.Limiter
	mu    struct {
		sync.Mutex
		rate   float64 // bytes/s; 0: unlimited
		tokens float64
		last   time.Time
	}
}

func newRemoteQuota(bytesPerSecond int64, now func() time.Time) *remoteQuota {
	q := &remoteQuota{now: now, pacer: rate.NewLimiter(rate.Inf, remotePacerMinBurst)}
	q.set(bytesPerSecond)
	return q
}

// set changes the rate; remoteFetchUnlimited (or more) turns the quota
// off. The bucket starts full.
func (q *remoteQuota) set(bytesPerSecond int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := float64(bytesPerSecond)
	if bytesPerSecond >= remoteFetchUnlimited || bytesPerSecond <= 0 {
		r = 0
	}
	if r == q.mu.rate {
		return
	}
	q.mu.rate = r
	q.mu.tokens = q.burstLocked()
	q.mu.last = q.now()
	if r == 0 {
		q.pacer.SetLimit(rate.Inf)
		return
	}
	q.pacer.SetBurst(max(int(q.burstLocked()), remotePacerMinBurst))
	q.pacer.SetLimit(rate.Limit(r))
}

// remotePacerMinBurst is the least burst of the GET pacer: one paced
// read's bytes (tiering's pacedReadMax) and then some.
const remotePacerMinBurst = 256 << 10

// rate is the quota in bytes/s, 0 when unlimited.
func (q *remoteQuota) rate() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.rate
}

func (q *remoteQuota) burstLocked() float64 { return q.mu.rate * remoteQuotaBurst.Seconds() }

func (q *remoteQuota) refillLocked() {
	now := q.now()
	if d := now.Sub(q.mu.last).Seconds(); d > 0 {
		q.mu.tokens = min(q.burstLocked(), q.mu.tokens+d*q.mu.rate)
	}
	q.mu.last = now
}

// throttle is how long a remote read must wait (0: it may start now).
func (q *remoteQuota) throttle() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.rate == 0 {
		return 0
	}
	q.refillLocked()
	if q.mu.tokens >= 0 {
		return 0
	}
	return time.Duration(-q.mu.tokens / q.mu.rate * float64(time.Second))
}

// record counts n bytes read from the remote log.
func (q *remoteQuota) record(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.rate == 0 {
		return
	}
	q.refillLocked()
	q.mu.tokens -= float64(n)
}
