package broker

import (
	"math"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/stratastream/strata/broker/replica"
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
//     burst of full-speed reading at every start. Strata's quota is the
//     token bucket of its replication throttles instead (replica.Throttle:
//     at most one second's worth banked), and the GETs are paced with a
//     burst of remotePacerBurst of the rate, so the rate holds from the
//     first read. The window settings are accepted and ignored
//     (kafka_settings.go).
//   - Unset, the quota is remoteQuotaPerCPU bytes per second for each CPU
//     of the host (runtime.NumCPU), which bench/RESULTS.md ("Remote fetch
//     quota") derives from the measured curve of a tail consumer's latency
//     against the replay rate. Kafka's unlimited default is
//     9223372036854775807 (Long.MAX_VALUE), which turns the quota off here
//     too.
//   - It is a dynamic broker config (dynamic_broker_config.go), per
//     broker or as the cluster default, applied at once.

// remotePacerBurst is how much of a second's quota a GET may read at once.
const remotePacerBurst = 50 * time.Millisecond

// remoteQuotaPerCPU is the unset quota per CPU of the host, bytes/s.
const remoteQuotaPerCPU = 150 << 20

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

// remoteQuota is the remote fetch quota: a replica.Throttle (the token
// bucket of the replication throttles) over the bytes served, and the
// pacer of the reader's GETs at the same rate.
type remoteQuota struct {
	bucket *replica.Throttle
	// pacer paces the reader's GET bodies (tiering.ReaderConfig.Pacer).
	pacer *rate.Limiter
}

func newRemoteQuota(bytesPerSecond int64, now func() time.Time) *remoteQuota {
	q := &remoteQuota{bucket: replica.NewThrottle(replica.Unthrottled, now), pacer: rate.NewLimiter(rate.Inf, remotePacerMinBurst)}
	q.set(bytesPerSecond)
	return q
}

// remotePacerMinBurst is the least burst of the GET pacer: one paced
// read's bytes (tiering's pacedReadMax) and then some.
const remotePacerMinBurst = 2 << 20

// set changes the rate; remoteFetchUnlimited (or more, or 0) turns the
// quota off.
func (q *remoteQuota) set(bytesPerSecond int64) {
	if bytesPerSecond <= 0 || bytesPerSecond >= remoteFetchUnlimited {
		q.bucket.SetRate(replica.Unthrottled)
		q.pacer.SetLimit(rate.Inf)
		return
	}
	q.bucket.SetRate(bytesPerSecond)
	q.pacer.SetBurst(max(int(float64(bytesPerSecond)*remotePacerBurst.Seconds()), remotePacerMinBurst))
	q.pacer.SetLimit(rate.Limit(bytesPerSecond))
}

// rate is the quota in bytes/s, 0 when unlimited.
func (q *remoteQuota) rate() float64 {
	if r := q.bucket.Limit(); r != replica.Unthrottled {
		return float64(r)
	}
	return 0
}

// throttle is how long a remote read must wait (0: it may start now).
func (q *remoteQuota) throttle() time.Duration {
	_, d := q.bucket.Exceeded()
	return d
}

// record counts n bytes read from the remote log.
func (q *remoteQuota) record(n int64) { q.bucket.Record(int(n)) }
