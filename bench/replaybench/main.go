// Command replaybench runs the issue-7 tiered-storage benchmark in one go
// and writes a Markdown table of figures and ratios:
//
//   - MinIO (its own temporary directory, free port, one bucket) and a
//     Strata broker (built from ./cmd/strata) tiering to it;
//   - a topic (-partitions, remote.storage.enable=true, segment.bytes
//     -segment-bytes, local.retention.bytes=1, local.retention.ms=1000) loaded with -bytes of 1 KiB
//     records by bench/kafkaperf (acks=1, no compression); then segment.ms is
//     lowered so the active segments roll too, and the run waits until the
//     manifests in the bucket cover the whole log and the local directories
//     hold nothing but the empty active segments: every byte is remote;
//   - raw limit: parallel ranged GETs (-get-conns, -range-bytes) of the
//     same .log objects with minio-go, before and after the replays;
//   - cold-cache replay from offset 0 (broker restarted with an empty
//     remote.cache.dir): kafkaperf fetch (bare Fetch requests) and kafkaperf
//     consume (franz-go), each from its own cold start;
//   - warm-cache replay: the same again on the broker whose cache
//     (remote.cache.bytes sized above the data) now holds it;
//   - tail latency: a producer at -tail-rate records/s and a consumer at the
//     end of another topic, end-to-end latency (produce timestamp → poll)
//     p50/p99/max, alone and while a cold replay runs.
//
// Run it from the repository root (bench/run-replay.sh does). Results go to
// bench/results/<date>/replay.md (and replay.json) and to stdout.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"

	"github.com/stratastream/strata/bench/internal/benchutil"
)

const (
	accessKey = "strata-bench"
	secretKey = "strata-bench-secret"
	bucket    = "strata-replay"
)

// perf is what bench/kafkaperf prints with -json.
type perf struct {
	Mode        string  `json:"mode"`
	Topic       string  `json:"topic"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Partitions  int     `json:"partitions"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	Requests    int64   `json:"requests,omitempty"`
	Conns       int     `json:"conns,omitempty"`
	// Label says which replay this is (cold/warm, fetch/consume).
	Label string `json:"label,omitempty"`
	// BrokerCPUSPerGB is the broker's user+system CPU seconds per 10^9
	// bytes moved.
	BrokerCPUSPerGB float64 `json:"broker_cpu_s_per_gb,omitempty"`
	// MinIOCPUSPerGB is MinIO's, over the same run.
	MinIOCPUSPerGB float64 `json:"minio_cpu_s_per_gb,omitempty"`
	// ClientCPUSPerGB is kafkaperf's.
	ClientCPUSPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	// HostBusy is the fraction of all CPUs' time the host spent busy
	// (not idle or iowait) during the run.
	HostBusy float64 `json:"host_busy"`
	// OtherCores is the CPU (in cores) the host spent on processes other
	// than the broker, MinIO, kafkaperf and this driver during the run:
	// load from elsewhere that skews the figures.
	OtherCores float64 `json:"other_cores"`
}

// rawResult is one parallel ranged-GET pass over the .log objects.
type rawResult struct {
	Label string `json:"label"`
	Conns int    `json:"conns"`
	Range int64  `json:"range_bytes"`
	// Forward: the bytes were passed on over loopback TCP (see rawGets),
	// not discarded; such a pass is not the raw limit.
	Forward bool    `json:"forward,omitempty"`
	Objects int     `json:"objects"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MBPerS  float64 `json:"mb_per_s"`
	// MinIOCPUSPerGB is MinIO's user+system CPU seconds per 10^9 bytes.
	MinIOCPUSPerGB float64 `json:"minio_cpu_s_per_gb,omitempty"`
	// ClientCPUSPerGB is this process's (the minio-go client's).
	ClientCPUSPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	HostBusy        float64 `json:"host_busy"`
	OtherCores      float64 `json:"other_cores"`
}

// latency is one tail-consumer run.
type latency struct {
	Label   string  `json:"label"`
	Rate    int     `json:"rate"`
	Records int     `json:"records"`
	Seconds float64 `json:"seconds"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	// AckP99Ms and AckMaxMs are the tail producer's Produce-to-ack latency.
	AckP99Ms float64 `json:"ack_p99_ms"`
	AckMaxMs float64 `json:"ack_max_ms"`
	// Replay is the concurrent replay, if any.
	Replay *perf `json:"replay,omitempty"`
	// Curve is the percentile curve of the end-to-end latency.
	Curve []curvePoint `json:"curve,omitempty"`
}

// curvePoint is one point of a latency percentile curve.
type curvePoint struct {
	Quantile float64 `json:"q"`
	Ms       float64 `json:"ms"`
}

type report struct {
	Date         string       `json:"date"`
	Command      string       `json:"command"`
	Machine      string       `json:"machine"`
	Partitions   int          `json:"partitions"`
	SegmentBytes int64        `json:"segment_bytes"`
	CacheBytes   int64        `json:"remote_cache_bytes"`
	Produce      *perf        `json:"produce"`
	Records      int64        `json:"records"`
	RemoteBytes  int64        `json:"remote_bytes"`
	RemoteSegs   int          `json:"remote_segments"`
	LocalBytes   int64        `json:"local_bytes_after_trim"`
	TierWaitS    float64      `json:"tier_wait_s"`
	StoreLink    string       `json:"store_link,omitempty"` // rate of MinIO's shaped link; empty: loopback
	Raw          []*rawResult `json:"raw"`
	Replays      []*perf      `json:"replays"`
	Tail         []*latency   `json:"tail"`
	Verified     string       `json:"verified,omitempty"`
	Errors       []string     `json:"errors,omitempty"`
}

type options struct {
	out          string
	bytes        int64
	size         int
	partitions   int
	segmentBytes int64
	getConns     string
	repeat       int
	tailCache    int64
	perfOut      string
	ranges       string
	tailRate     int
	tailTime     time.Duration
	strataBin    string
	stepTimeout  time.Duration
	seriesDir    string
	consume      bool
	storeLink    string
	traceOut     string
	overrides    overrideFlags
}

// overrideFlags collects repeated -override k=v flags.
type overrideFlags []string

func (f *overrideFlags) String() string { return strings.Join(*f, ",") }

func (f *overrideFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want key=value", v)
	}
	*f = append(*f, v)
	return nil
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02")), "directory for replay.md and replay.json")
	flag.Int64Var(&o.bytes, "bytes", 2<<30, "record-value bytes to produce (1 KiB records)")
	flag.IntVar(&o.size, "size", 1024, "record value size")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of the replayed topic")
	flag.Int64Var(&o.segmentBytes, "segment-bytes", 64<<20, "segment.bytes of the replayed topic")
	flag.StringVar(&o.getConns, "get-conns", "4,8,16", "concurrent ranged GETs of the raw limit (comma-separated: one pass each, the best is the limit)")
	flag.IntVar(&o.repeat, "repeat", 2, "runs of each cold and warm replay")
	flag.Int64Var(&o.tailCache, "tail-cache-bytes", 256<<20, "remote.cache.bytes of the broker of the tail run (below the data, so the concurrent replays stay cold)")
	flag.StringVar(&o.ranges, "range-bytes", "4194304,16777216", "sizes of a ranged GET of the raw limit (comma-separated: one pass each with each -get-conns, the best is the limit; the broker's read-ahead GETs are 4 to 16 MiB)")
	flag.IntVar(&o.tailRate, "tail-rate", 1000, "records/s of the tail producer (1 KiB)")
	flag.DurationVar(&o.tailTime, "tail-time", 15*time.Second, "duration of each tail run (the one with replays runs replays back to back for at least this long)")
	flag.StringVar(&o.perfOut, "perf", "", "record the broker with perf (Linux perf record -g) during the first cold fetch into this file")
	flag.StringVar(&o.strataBin, "strata", "", "prebuilt strata binary (default: build ./cmd/strata)")
	flag.DurationVar(&o.stepTimeout, "step-timeout", 5*time.Minute, "bound on each step")
	flag.StringVar(&o.seriesDir, "series-dir", "", "write each fetch replay's throughput over time (kafkaperf -series) to a CSV file in this directory")
	flag.BoolVar(&o.consume, "consume", true, "also replay with franz-go's consumer (not only bare Fetch)")
	flag.Var(&o.overrides, "override", "broker setting key=value added to the broker's command line, after the driver's own (repeatable), e.g. -override remote.cache.readahead.threads=4")
	flag.StringVar(&o.traceOut, "trace", "", "write a 5 s Go execution trace of the broker, taken while the tail consumer runs beside replays, into this file (go tool trace -pprof=sched FILE: where goroutines waited for a CPU)")
	flag.StringVar(&o.storeLink, "store-link", "", "run MinIO in a network namespace of its own behind a veth link shaped to this rate (tc syntax, e.g. 2gbit), as a bucket across a network; needs root, ip and tc. Empty: MinIO on loopback")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "replaybench: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "replaybench %s: "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func run(o options) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (go.mod not found)")
	}
	tmp, err := os.MkdirTemp("", "strata-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rep := &report{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Command:      strings.Join(append([]string{"bench/run-replay.sh"}, os.Args[1:]...), " "),
		Machine:      machine(),
		Partitions:   o.partitions,
		SegmentBytes: o.segmentBytes,
	}
	logf("building tools")
	bins := map[string]string{"kafkaperf": "./bench/kafkaperf"}
	if o.strataBin == "" {
		bins["strata"] = "./cmd/strata"
	}
	for name, pkg := range bins {
		out, err := exec.Command("go", "build", "-o", filepath.Join(tmp, name), pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("building %s: %v\n%s", pkg, err, out)
		}
	}
	if o.strataBin == "" {
		o.strataBin = filepath.Join(tmp, "strata")
	}
	kafkaperf := filepath.Join(tmp, "kafkaperf")

	benchErr := bench(o, tmp, kafkaperf, rep)
	if benchErr != nil {
		rep.Errors = append(rep.Errors, benchErr.Error())
		logf("error: %v", benchErr)
	}

	md := markdown(o, rep)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "replay.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "replay.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s", filepath.Join(o.out, "replay.md"))
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d error(s): %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return nil
}

func bench(o options, tmp, kafkaperf string, rep *report) error {
	ctx := context.Background()
	if o.seriesDir != "" {
		if err := os.MkdirAll(o.seriesDir, 0o755); err != nil {
			return err
		}
	}

	// MinIO.
	minioBin, err := miniotest.Binary()
	if err != nil {
		return err
	}
	var link *storeLink
	if o.storeLink != "" {
		if link, err = newStoreLink(o.storeLink); err != nil {
			return err
		}
		defer link.close()
		rep.StoreLink = o.storeLink
	}
	mio, err := startMinIO(minioBin, filepath.Join(tmp, "minio"), link)
	if err != nil {
		return err
	}
	defer mio.stop()
	mc, err := minio.New(mio.addr, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, "")})
	if err != nil {
		return err
	}
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("make bucket: %w", err)
	}
	logf("minio on %s, bucket %s", mio.addr, bucket)

	// Broker.
	addr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	pprofAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	dataDir := filepath.Join(tmp, "strata-data")
	// The cache holds the whole replay, so the warm run reads it all from
	// local disk.
	rep.CacheBytes = o.bytes + o.bytes/4 + 256<<20
	cacheN := 0
	startBroker := func(cacheBytes int64) (*process, error) {
		cacheN++
		cacheDir := filepath.Join(tmp, fmt.Sprintf("cache-%d", cacheN))
		logf("starting strata broker on %s, empty cache %s", addr, cacheDir)
		args := []string{"broker",
			"--override", "listeners=PLAINTEXT://" + addr,
			"--override", "log.dirs=" + dataDir,
			"--override", "remote.storage.s3.endpoint=http://" + mio.addr,
			"--override", "remote.storage.s3.bucket=" + bucket,
			"--override", "remote.cache.dir=" + cacheDir,
			"--override", fmt.Sprintf("remote.cache.bytes=%d", cacheBytes),
			"--override", "log.retention.check.interval.ms=1000",
			"--override", "strata.remote.poll.interval.ms=500",
			"--override", "log.segment.delete.delay.ms=1000",
		}
		if o.traceOut != "" {
			args = append(args, "--override", "strata.pprof.listener="+pprofAddr)
		}
		for _, kv := range o.overrides {
			args = append(args, "--override", kv)
		}
		env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey)
		return start(o.strataBin, args, env, func(out string) bool { return strings.Contains(out, "strata broker listening on") })
	}
	broker, err := startBroker(rep.CacheBytes)
	if err != nil {
		return err
	}
	defer func() {
		if broker != nil {
			broker.Stop()
		}
	}()

	perfRun := func(args ...string) (*perf, error) {
		var r perf
		args = append([]string{"-brokers", addr, "-json", "-timeout", o.stepTimeout.String()}, args...)
		before, err1 := cpuSeconds(broker.Pid())
		mbefore, err3 := cpuSeconds(mio.p.Pid())
		busy0, total0 := hostCPU()
		self0 := selfCPU()
		t0 := time.Now()
		client, err := runJSONCPU(o.stepTimeout+10*time.Second, &r, kafkaperf, args...)
		busy1, total1 := hostCPU()
		wall := time.Since(t0).Seconds()
		self1 := selfCPU()
		if total1 > total0 {
			r.HostBusy = float64(busy1-busy0) / float64(total1-total0)
		}
		defer func() {
			// After the broker and MinIO figures are in.
			if r.Bytes > 0 && wall > 0 {
				gb := float64(r.Bytes) / 1e9
				ours := (r.BrokerCPUSPerGB+r.MinIOCPUSPerGB)*gb + client + (self1 - self0)
				r.OtherCores = max(0, float64(busy1-busy0)/100-ours) / wall
			}
		}()
		if err == nil && r.Bytes > 0 {
			r.ClientCPUSPerGB = client / (float64(r.Bytes) / 1e9)
		}
		after, err2 := cpuSeconds(broker.Pid())
		mafter, err4 := cpuSeconds(mio.p.Pid())
		if err == nil && err1 == nil && err2 == nil && r.Bytes > 0 {
			r.BrokerCPUSPerGB = (after - before) / (float64(r.Bytes) / 1e9)
		}
		if err == nil && err3 == nil && err4 == nil && r.Bytes > 0 {
			r.MinIOCPUSPerGB = (mafter - mbefore) / (float64(r.Bytes) / 1e9)
		}
		return &r, err
	}

	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer adm.Close()
	const topic = "replay"
	if err := createTopic(ctx, adm, topic, o.partitions, map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.FormatInt(o.segmentBytes, 10),
		// Kafka's size rule never deletes the last sealed segment when the
		// active one is empty (size - retention.bytes < that segment), so
		// local time retention trims it.
		"local.retention.bytes": "1",
		"local.retention.ms":    "1000",
	}); err != nil {
		return err
	}
	records := o.bytes / int64(o.size)
	logf("produce %d records of %d B to %s", records, o.size, topic)
	pr, err := perfRun("-mode", "produce", "-topic", topic, "-records", fmt.Sprint(records), "-size", fmt.Sprint(o.size),
		"-partitions", fmt.Sprint(o.partitions), "-acks", "1", "-compression", "none")
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	rep.Produce = pr
	logf("  %.1f MB/s, p99 %.2f ms", pr.MBPerS, pr.P99Ms)

	// Roll the active segments too, so that the whole log goes remote.
	if err := alterTopic(ctx, adm, topic, map[string]string{"segment.ms": "1000"}); err != nil {
		return fmt.Errorf("set segment.ms: %w", err)
	}
	logf("waiting until the bucket holds the whole log and local logs are trimmed")
	t0 := time.Now()
	ms, local, err := waitTiered(ctx, adm, mc, dataDir, topic, o.partitions, records, o.stepTimeout)
	if err != nil {
		return err
	}
	rep.TierWaitS = time.Since(t0).Seconds()
	rep.LocalBytes = local
	var keys []objRef
	for _, m := range ms {
		rep.RemoteBytes += m.Bytes()
		rep.RemoteSegs += len(m.Segments)
		rep.Records += m.EndOffset() - m.LogStartOffset
		for i := range m.Segments {
			keys = append(keys, objRef{key: tiering.SegmentKey(topic, m.Partition, &m.Segments[i], tiering.SuffixLog), size: m.Segments[i].Size})
		}
	}
	logf("  after %.1fs: %d segments, %d bytes remote, %d bytes of local .log files", rep.TierWaitS, rep.RemoteSegs, rep.RemoteBytes, local)
	// Segment rolling by time must not leave records behind.
	if rep.Records != records {
		return fmt.Errorf("manifests cover %d records, produced %d", rep.Records, records)
	}

	var ranges []int64
	for _, f := range strings.Split(o.ranges, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("-range-bytes %q: bad size %q", o.ranges, f)
		}
		ranges = append(ranges, n)
	}
	rawPass := func(label, conns string, forward bool, ranges ...int64) {
		type pass struct {
			conns int
			size  int64
		}
		var passes []pass
		for _, f := range strings.Split(conns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				rep.Errors = append(rep.Errors, fmt.Sprintf("-get-conns %q: bad count", f))
				continue
			}
			for _, size := range ranges {
				passes = append(passes, pass{n, size})
			}
		}
		for _, ps := range passes {
			n, size := ps.conns, ps.size
			logf("raw ranged GETs (%s): %d conns, %d B ranges", label, n, size)
			mbefore, _ := cpuSeconds(mio.p.Pid())
			self0 := selfCPU()
			busy0, total0 := hostCPU()
			r, err := rawGets(ctx, mc, keys, n, size, forward)
			busy1, total1 := hostCPU()
			self1 := selfCPU()
			if mafter, err := cpuSeconds(mio.p.Pid()); err == nil && r != nil && r.Bytes > 0 {
				r.MinIOCPUSPerGB = (mafter - mbefore) / (float64(r.Bytes) / 1e9)
				r.ClientCPUSPerGB = (self1 - self0) / (float64(r.Bytes) / 1e9)
				if total1 > total0 {
					r.HostBusy = float64(busy1-busy0) / float64(total1-total0)
				}
				r.OtherCores = max(0, float64(busy1-busy0)/100-(mafter-mbefore)-(self1-self0)) / r.Seconds
			}
			if err != nil {
				rep.Errors = append(rep.Errors, "raw "+label+": "+err.Error())
				logf("  %v", err)
				continue
			}
			r.Label = label
			logf("  %.1f MB/s, MinIO %.2f CPU s/GB", r.MBPerS, r.MinIOCPUSPerGB)
			rep.Raw = append(rep.Raw, r)
		}
	}
	// MinIO writes with O_DIRECT: the first read of its files comes from
	// disk. That pass is reported but is no limit of anything.
	rawPass("first read of the objects", strconv.Itoa(8), false, ranges[0])
	rawPass("before replays", o.getConns, false, ranges...)
	rawPass("GET and forward over loopback TCP", o.getConns, true, ranges...)

	conns := fmt.Sprint(o.partitions)
	replay := func(label string, restart bool, args ...string) *perf {
		if restart {
			broker.Stop()
			var err error
			if broker, err = startBroker(rep.CacheBytes); err != nil {
				rep.Errors = append(rep.Errors, label+": restart: "+err.Error())
				return nil
			}
		}
		logf("%s: kafkaperf %s", label, strings.Join(args, " "))
		var rec *exec.Cmd
		if o.perfOut != "" && label == "cold fetch #1" {
			rec = exec.Command("perf", "record", "-F", "999", "-g", "-o", o.perfOut, "-p", strconv.Itoa(broker.Pid()))
			if err := rec.Start(); err != nil {
				logf("  perf: %v", err)
				rec = nil
			} else {
				time.Sleep(500 * time.Millisecond)
			}
		}
		if o.seriesDir != "" && slices.Contains(args, "fetch") && !strings.Contains(label, "beside") {
			args = append(args, "-series", filepath.Join(o.seriesDir, seriesName(label)))
		}
		r, err := perfRun(append(args, "-topic", topic)...)
		if rec != nil {
			_ = rec.Process.Signal(syscall.SIGINT)
			_ = rec.Wait()
		}
		if err != nil {
			rep.Errors = append(rep.Errors, label+": "+err.Error())
			logf("  %v", err)
			return nil
		}
		r.Label = label
		if r.Records != records {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: read %d records, want %d", label, r.Records, records))
		}
		logf("  %d records, %.1f MB/s, broker %.2f, MinIO %.2f CPU s/GB", r.Records, r.MBPerS, r.BrokerCPUSPerGB, r.MinIOCPUSPerGB)
		rep.Replays = append(rep.Replays, r)
		return r
	}
	if broker == nil {
		return errors.New("no broker")
	}
	for i := range o.repeat {
		replay(fmt.Sprintf("cold fetch #%d", i+1), true, "-mode", "fetch", "-conns", conns)
		if broker == nil {
			return errors.New("broker did not restart")
		}
		for j := range o.repeat {
			replay(fmt.Sprintf("warm fetch #%d.%d", i+1, j+1), false, "-mode", "fetch", "-conns", conns)
		}
	}
	for i := range o.repeat {
		if !o.consume {
			break
		}
		replay(fmt.Sprintf("cold consume #%d", i+1), true, "-mode", "consume")
		if broker == nil {
			return errors.New("broker did not restart")
		}
		for j := range o.repeat {
			replay(fmt.Sprintf("warm consume #%d.%d", i+1, j+1), false, "-mode", "consume")
		}
	}
	// Content check, from a cold cache: every record of every partition,
	// in order, with the value kafkaperf produced.
	broker.Stop()
	if broker, err = startBroker(rep.CacheBytes); err != nil {
		return err
	}
	logf("verify: franz-go from offset 0, cold cache, every record's value")
	vstart := time.Now()
	if err := verify(ctx, addr, topic, o.partitions, o.size, records, o.stepTimeout); err != nil {
		rep.Errors = append(rep.Errors, "verify: "+err.Error())
		logf("  %v", err)
	} else {
		rep.Verified = fmt.Sprintf("%d records, byte-identical, in order, cold cache, %.1f s", records, time.Since(vstart).Seconds())
		logf("  %s", rep.Verified)
	}

	rawPass("after replays", o.getConns, false, ranges...)

	// Tail latency: alone, then with a cold replay beside it.
	const tailTopic = "tail"
	if err := createTopic(ctx, adm, tailTopic, 1, map[string]string{"remote.storage.enable": "true"}); err != nil {
		return err
	}
	broker.Stop()
	if broker, err = startBroker(o.tailCache); err != nil {
		return err
	}
	logf("tail latency alone: %d records/s for %v", o.tailRate, o.tailTime)
	if l, err := tail(ctx, addr, tailTopic, o.size, o.tailRate, func() *perf { time.Sleep(o.tailTime); return nil }); err != nil {
		rep.Errors = append(rep.Errors, "tail alone: "+err.Error())
	} else {
		l.Label = "alone"
		logf("  p50 %.2f p99 %.2f max %.2f ms", l.P50Ms, l.P99Ms, l.MaxMs)
		rep.Tail = append(rep.Tail, l)
	}
	logf("tail latency during replays (remote.cache.bytes %d MiB, below the data: each pass reads the bucket)", o.tailCache>>20)
	l, err := tail(ctx, addr, tailTopic, o.size, o.tailRate, func() *perf {
		// Replays back to back for at least tail-time.
		sum := &perf{Mode: "fetch", Label: "replays beside tail"}
		if o.traceOut != "" {
			go func() {
				time.Sleep(2 * time.Second) // into the first replay
				if err := fetchTrace("http://"+pprofAddr+"/debug/pprof/trace?seconds=5", o.traceOut); err != nil {
					logf("  trace: %v", err)
				} else {
					logf("  wrote the broker's execution trace to %s", o.traceOut)
				}
			}()
		}
		t0 := time.Now()
		for i := 1; i == 1 || time.Since(t0) < o.tailTime; i++ {
			r := replay(fmt.Sprintf("fetch beside tail #%d", i), false, "-mode", "fetch", "-conns", conns)
			if r == nil {
				break
			}
			sum.Records += r.Records
			sum.Bytes += r.Bytes
			sum.Seconds += r.Seconds
			sum.Conns = i
		}
		if sum.Seconds > 0 {
			sum.MBPerS = float64(sum.Bytes) / sum.Seconds / 1e6
		}
		return sum
	})
	if err != nil {
		rep.Errors = append(rep.Errors, "tail with replay: "+err.Error())
	} else {
		l.Label = "during replays from offset 0"
		logf("  p50 %.2f p99 %.2f max %.2f ms", l.P50Ms, l.P99Ms, l.MaxMs)
		rep.Tail = append(rep.Tail, l)
	}
	if !broker.Alive() {
		rep.Errors = append(rep.Errors, "broker exited during the run:\n"+broker.Tail(4000))
	}
	return nil
}

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
				obj, err := mc.GetObject(ctx, bucket, j.key, opts)
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

// fetchTrace saves the body of a GET of url (a pprof trace) to path.
func fetchTrace(url, path string) error {
	resp, err := (&http.Client{Timeout: time.Minute}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tail produces rate records/s to topic while a consumer at its end measures
// the time from the producer's timestamp (in the value) to the poll that
// returned the record, for as long as during runs.
func tail(ctx context.Context, addr, topic string, size, rate int, during func() *perf) (*latency, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	// Make sure the consumer sits at the end before producing.
	cons.PollFetches(ctxTimeout(ctx, time.Second))

	var (
		lat      []time.Duration
		got      atomic.Int64
		consErr  error
		consDone = make(chan struct{})
		stopProd atomic.Bool
		sent     atomic.Int64
		prodErr  atomic.Value
		ackMu    sync.Mutex
		acks     []time.Duration
	)
	go func() {
		defer close(consDone)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			for _, e := range fs.Errors() {
				if !errors.Is(e.Err, context.Canceled) {
					consErr = fmt.Errorf("tail fetch: %w", e.Err)
					return
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) >= 8 {
					lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
					got.Add(1)
				}
			})
		}
	}()
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for !stopProd.Load() {
			<-tick.C
			v := make([]byte, size)
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			sent.Add(1)
			t0 := time.Now()
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: v}, func(_ *kgo.Record, err error) {
				ackMu.Lock()
				acks = append(acks, time.Since(t0))
				ackMu.Unlock()
				if err != nil && !errors.Is(err, context.Canceled) {
					prodErr.CompareAndSwap(nil, err)
				}
			})
		}
	}()
	start := time.Now()
	r := during()
	secs := time.Since(start).Seconds()
	stopProd.Store(true)
	<-prodDone
	_ = prod.Flush(ctxTimeout(ctx, 10*time.Second))
	// Let the consumer catch up, then stop it.
	want := int(sent.Load())
	for deadline := time.Now().Add(10 * time.Second); got.Load() < int64(want) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-consDone
	if consErr != nil {
		return nil, consErr
	}
	if e, ok := prodErr.Load().(error); ok && e != nil {
		return nil, fmt.Errorf("tail produce: %w", e)
	}
	if len(lat) == 0 {
		return nil, errors.New("tail consumer got nothing")
	}
	if len(lat) < want {
		return nil, fmt.Errorf("tail consumer got %d of %d records", len(lat), want)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6 }
	l := &latency{Rate: rate, Records: len(lat), Seconds: secs, P50Ms: pct(0.5), P99Ms: pct(0.99), P999Ms: pct(0.999),
		MaxMs: float64(lat[len(lat)-1]) / 1e6, Replay: r}
	for _, q := range []float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1} {
		if q > 0 && q < 1 && 1/(1-q) > float64(len(lat)) {
			continue
		}
		l.Curve = append(l.Curve, curvePoint{q, pct(q)})
	}
	ackMu.Lock()
	defer ackMu.Unlock()
	if len(acks) > 0 {
		slices.Sort(acks)
		l.AckP99Ms = float64(acks[min(len(acks)-1, int(0.99*float64(len(acks))))]) / 1e6
		l.AckMaxMs = float64(acks[len(acks)-1]) / 1e6
	}
	return l, nil
}

func ctxTimeout(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	_ = cancel // released when it expires
	return c
}

// waitTiered waits until every partition's manifest ends at its log end
// offset (everything uploaded, the active segment empty), the remote log
// starts at 0, ListOffsets earliest says 0, and the partition's local
// directory holds one .log file (the active segment). It returns the
// manifests and the bytes of local .log files.
func waitTiered(ctx context.Context, adm *kgo.Client, mc *minio.Client, dataDir, topic string, partitions int, records int64, timeout time.Duration) ([]*tiering.Manifest, int64, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ms, local, why, err := tieredState(ctx, adm, mc, dataDir, topic, partitions, records)
		if err != nil {
			return nil, 0, err
		}
		if why == "" {
			return ms, local, nil
		}
		if why != last {
			logf("  %s", why)
			last = why
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("not tiered after %v: %s", timeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tieredState(ctx context.Context, adm *kgo.Client, mc *minio.Client, dataDir, topic string, partitions int, records int64) ([]*tiering.Manifest, int64, string, error) {
	earliest, err := listOffsets(ctx, adm, topic, partitions, -2)
	if err != nil {
		return nil, 0, "", err
	}
	latest, err := listOffsets(ctx, adm, topic, partitions, -1)
	if err != nil {
		return nil, 0, "", err
	}
	var sum int64
	for _, v := range latest {
		sum += v
	}
	if sum != records {
		return nil, 0, "", fmt.Errorf("log end offsets sum to %d, produced %d", sum, records)
	}
	var ms []*tiering.Manifest
	var whys []string
	for p := int32(0); p < int32(partitions); p++ {
		obj, err := mc.GetObject(ctx, bucket, tiering.ManifestKey(topic, p), minio.GetObjectOptions{})
		var b []byte
		if err == nil {
			b, err = io.ReadAll(obj)
			obj.Close()
		}
		if err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchKey" {
				whys = append(whys, fmt.Sprintf("p%d: no manifest yet", p))
				continue
			}
			return nil, 0, "", fmt.Errorf("manifest %d: %w", p, err)
		}
		m, err := tiering.DecodeManifest(b)
		if err != nil {
			return nil, 0, "", fmt.Errorf("manifest %d: %w", p, err)
		}
		ms = append(ms, m)
		if m.EndOffset() != latest[p] || m.LogStartOffset != 0 {
			whys = append(whys, fmt.Sprintf("p%d: remote %d-%d of %d", p, m.LogStartOffset, m.EndOffset(), latest[p]))
		}
		if earliest[p] != 0 {
			whys = append(whys, fmt.Sprintf("p%d: ListOffsets earliest %d", p, earliest[p]))
		}
	}
	logs, local, err := localLogs(dataDir, topic)
	if err != nil {
		return nil, 0, "", err
	}
	for p := int32(0); p < int32(partitions); p++ {
		if n := logs[p]; n != 1 {
			whys = append(whys, fmt.Sprintf("p%d: %d local .log files", p, n))
		}
	}
	return ms, local, strings.Join(whys, ", "), nil
}

// localLogs counts the .log files of each partition directory
// <topic>-<partition> under dataDir and sums their sizes.
func localLogs(dataDir, topic string) (map[int32]int, int64, error) {
	counts := map[int32]int{}
	var total int64
	err := filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		dir := filepath.Base(filepath.Dir(path))
		rest, ok := strings.CutPrefix(dir, topic+"-")
		if !ok {
			return nil
		}
		p, err := strconv.Atoi(rest)
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		counts[int32(p)]++
		total += fi.Size()
		return nil
	})
	return counts, total, err
}

func listOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s/%d: %w", t.Topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

func alterTopic(ctx context.Context, cl *kgo.Client, topic string, configs map[string]string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for k, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("%s: %w (%s)", r.ResourceName, err, deref(r.ErrorMessage))
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// minioServer is the MinIO process of the run.
type minioServer struct {
	p    *process
	addr string
}

// startMinIO starts MinIO on a free loopback port, or, with a link, on its
// namespace's address (the namespace is the run's alone, so fixed ports).
func startMinIO(bin, dir string, link *storeLink) (*minioServer, error) {
	var addr, console string
	if link != nil {
		addr, console = net.JoinHostPort(link.nsIP, "9000"), net.JoinHostPort(link.nsIP, "9001")
	} else {
		var err error
		if addr, err = benchutil.FreeAddr(); err != nil {
			return nil, err
		}
		if console, err = benchutil.FreeAddr(); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(), "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	name, args := bin, []string{"server", filepath.Join(dir, "data"), "--address", addr, "--console-address", console,
		"--certs-dir", filepath.Join(dir, "certs"), "--quiet"}
	if link != nil {
		name, args = link.command(name, args)
	}
	p, err := start(name, args, env, nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if !p.Alive() {
			return nil, fmt.Errorf("minio exited at start:\n%s", p.Tail(4000))
		}
		resp, err := hc.Get("http://" + addr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &minioServer{p: p, addr: addr}, nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("minio not ready after 60s:\n%s", p.Tail(4000))
		}
	}
}

func (m *minioServer) stop() { m.p.Stop() }

// process is a server started for the benchmark.
type process = benchutil.Process

// start runs a server and, if ready is set, waits until ready reports true
// for its output so far (bounded).
func start(name string, args, env []string, ready func(out string) bool) (*process, error) {
	return benchutil.Start(filepath.Base(name), name, args, env, ready, nil)
}

// runJSONCPU is runJSON that also returns the command's CPU seconds.
func runJSONCPU(timeout time.Duration, v any, name string, args ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return cpu, json.Unmarshal(out.Bytes(), v)
}

// hostCPU returns the busy and total jiffies of all CPUs from /proc/stat
// (busy: all but idle and iowait).
func hostCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, x := range f[1:] {
		n, _ := strconv.ParseInt(x, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}

// selfCPU returns this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// cpuSeconds returns the user+system CPU time of pid from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	k, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (u + k) / 100, nil
}

func machine() string {
	kernel := benchutil.KernelRelease()
	return fmt.Sprintf("%d CPUs, %s/%s, Linux %s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, kernel, runtime.Version())
}

func markdown(o options, rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Tiered-storage replay benchmark (issue 7)\n\n")
	fmt.Fprintf(&b, "%s, %s. Reproduce: `%s`\n\n", rep.Date, rep.Machine, rep.Command)
	where := "over loopback"
	if rep.StoreLink != "" {
		where = "MinIO in a network namespace of its own, behind a veth link shaped to " + rep.StoreLink + " (tc tbf): every byte MinIO sends, to the raw GETs and to the broker alike, crosses that link; broker and consumers on loopback"
	}
	fmt.Fprintf(&b, "MinIO (single drive, local disk) and one Strata broker on the same host, %s. Topic: %d partitions, "+
		"segment.bytes %d MiB, local.retention.bytes 1 and local.retention.ms 1000, %d B records, acks=1, no compression; segment.ms lowered after "+
		"the load so the active segments roll too. remote.cache.bytes %d MiB, chunks 4 MiB and read-ahead GETs of up to 4 chunks (the defaults). MB = 10^6 bytes.\n\n",
		where, rep.Partitions, rep.SegmentBytes>>20, o.size, rep.CacheBytes>>20)
	if p := rep.Produce; p != nil {
		fmt.Fprintf(&b, "Load: %d records, %.1f MB of values in %.1f s (%.1f MB/s). Tiered after a further %.1f s: "+
			"%d remote segments, %.1f MB of .log objects, %d bytes of local .log files left (the empty active segments).\n\n",
			p.Records, float64(p.Bytes)/1e6, p.Seconds, p.MBPerS, rep.TierWaitS, rep.RemoteSegs, float64(rep.RemoteBytes)/1e6, rep.LocalBytes)
	}
	var raw, rawEff, fwd float64 // best raw MB/s; raw MB per CPU second; best GET-and-forward MB/s
	for _, r := range rep.Raw {
		if r.Forward {
			fwd = max(fwd, r.MBPerS)
			continue
		}
		raw = max(raw, r.MBPerS)
		if c := r.MinIOCPUSPerGB + r.ClientCPUSPerGB; c > 0 {
			rawEff = max(rawEff, 1000/c)
		}
	}
	eff := func(c float64) string {
		if c <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f (%s)", 1000/c, ratio(1000/c, rawEff))
	}
	fmt.Fprintf(&b, "| measurement | MB | s | MB/s | ratio to raw | ratio to GET+forward | broker CPU s/GB | MinIO CPU s/GB | client CPU s/GB | CPU s/GB, all three | MB per CPU s, ratio to raw | host CPU busy | other load (cores) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Raw {
		what := "raw ranged GET, minio-go"
		if r.Forward {
			what = "ranged GET, minio-go, each body written to a loopback TCP connection and read back"
		}
		fmt.Fprintf(&b, "| %s, %d concurrent, %d MiB ranges (%s) | %.1f | %.2f | %.1f | %s | %s | | %.2f | %.2f | %.2f | %s | %.0f%% | %.2f |\n",
			what, r.Conns, r.Range>>20, r.Label, float64(r.Bytes)/1e6, r.Seconds, r.MBPerS, ratio(r.MBPerS, raw), ratio(r.MBPerS, fwd), r.MinIOCPUSPerGB, r.ClientCPUSPerGB,
			r.MinIOCPUSPerGB+r.ClientCPUSPerGB, eff(r.MinIOCPUSPerGB+r.ClientCPUSPerGB), 100*r.HostBusy, r.OtherCores)
	}
	for _, r := range rep.Replays {
		what := "bare Fetch v11 (kafkaperf fetch, batch bytes)"
		if r.Mode == "consume" {
			what = "franz-go consumer (kafkaperf consume, value bytes)"
		}
		fmt.Fprintf(&b, "| %s replay from offset 0, %s, %d records | %.1f | %.2f | %.1f | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %.0f%% | %.2f |\n",
			r.Label, what, r.Records, float64(r.Bytes)/1e6, r.Seconds, r.MBPerS, ratio(r.MBPerS, raw), ratio(r.MBPerS, fwd), r.BrokerCPUSPerGB, r.MinIOCPUSPerGB, r.ClientCPUSPerGB,
			r.BrokerCPUSPerGB+r.MinIOCPUSPerGB+r.ClientCPUSPerGB, eff(r.BrokerCPUSPerGB+r.MinIOCPUSPerGB+r.ClientCPUSPerGB), 100*r.HostBusy, r.OtherCores)
	}
	fmt.Fprintf(&b, "\nRatios are to the best raw pass (%.1f MB/s; GET and forward: %.1f MB/s). Goal for the cold replay: ≥ 0.8 of raw. "+
		"GET and forward is the least work any server that passes the bucket's bytes on to a consumer over TCP can do: the replay cannot pass it, and where the host's CPUs are saturated it, not the raw GET, is the physical limit of a replay through a broker on this host. Cold: broker restarted with an empty remote.cache.dir before the run; warm: the same broker again right after. "+
		"CPU s/GB are user+system seconds of the broker, MinIO and the client (kafkaperf, or this driver's minio-go for raw) per 10^9 bytes moved; "+
		"\"MB per CPU s\" is 1000 / their sum, with its ratio to the best raw pass: on a host whose CPUs are saturated (host CPU busy) it is the throughput ratio to expect, independent of load from elsewhere "+
		"(\"other load\": cores used by other processes during the step).\n\n", raw, fwd)
	if rep.Verified != "" {
		fmt.Fprintf(&b, "Content check (franz-go, separate cold start): %s.\n\n", rep.Verified)
	}
	if len(rep.Tail) > 0 {
		fmt.Fprintf(&b, "Tail consumer: one producer at %d records/s of %d B (acks=1, linger 0) to a 1-partition topic, a franz-go consumer at its end; latency from the producer's timestamp in the value to the poll that returned the record.\n\n", o.tailRate, o.size)
		fmt.Fprintf(&b, "| tail latency | records | s | p50 ms | p99 ms | p99.9 ms | max ms | p99 ratio to alone | produce ack p99 ms | produce ack max ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		base := rep.Tail[0].P99Ms
		for _, l := range rep.Tail {
			label := l.Label
			if l.Replay != nil {
				label += fmt.Sprintf(" (%d back-to-back bare-fetch replays, %.1f MB/s, %s of raw)", l.Replay.Conns, l.Replay.MBPerS, ratio(l.Replay.MBPerS, raw))
			}
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f |\n", label, l.Records, l.Seconds, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, ratio(l.P99Ms, base), l.AckP99Ms, l.AckMaxMs)
		}
		b.WriteString("\n")
	}
	if len(rep.Errors) > 0 {
		b.WriteString("Errors:\n\n")
		for _, e := range rep.Errors {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func ratio(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x/base)
}

// verify consumes every partition of topic from offset 0 and checks each
// record's offset and value against what kafkaperf produce wrote: record i
// went to partition i % partitions with value = i (8 bytes, big endian)
// then kafkaperf's filler.
func verify(ctx context.Context, addr, topic string, partitions, size int, records int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	filler := make([]byte, size)
	for i := range filler {
		filler[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7+i/13)%36]
	}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	next := make([]int64, partitions)
	var n int64
	var bad error
	for n < records && bad == nil {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("verified %d of %d records: %w", n, records, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return fmt.Errorf("fetch %s/%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			p := r.Partition
			if r.Offset != next[p] {
				bad = fmt.Errorf("partition %d: offset %d, want %d", p, r.Offset, next[p])
				return
			}
			next[p]++
			n++
			want := uint64(r.Offset)*uint64(partitions) + uint64(p)
			if len(r.Value) != size || binary.BigEndian.Uint64(r.Value) != want || !bytes.Equal(r.Value[8:], filler[8:]) {
				bad = fmt.Errorf("partition %d offset %d: value of %d bytes starting %x, want record %d of %d bytes", p, r.Offset, len(r.Value), r.Value[:min(8, len(r.Value))], want, size)
			}
		})
	}
	return bad
}

// seriesName is the file name of a replay's throughput series.
func seriesName(label string) string {
	var b strings.Builder
	for _, r := range label {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
		case r == ' ' || r == '#':
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	return strings.TrimSuffix(b.String(), "-") + ".csv"
}
