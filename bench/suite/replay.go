package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

// The replay measurement behind scenarios 4 and 5, in one run:
//
//   - MinIO (its own directory, free port, one bucket; with a store link,
//     in a network namespace behind a shaped link) and one broker tiering
//     to it;
//   - a topic of replayPartitions partitions (remote.storage.enable,
//     segment.bytes replaySegmentBytes, local.retention.bytes=1,
//     local.retention.ms=1000) filled with the replay's bytes of 1 KiB
//     records by loadgen (acks=1); then segment.ms is lowered so the
//     active segments roll too, and the run waits until the manifests in
//     the bucket cover the whole log and the local directories hold
//     nothing but the empty active segments: every byte is remote;
//   - raw limit: parallel ranged GETs of the same .log objects with
//     minio-go, before and after the replays, and the same GETs forwarded
//     over loopback TCP;
//   - cold replay from offset 0 (broker restarted with an empty
//     remote.cache.dir): loadgen -mode fetch (bare Fetch) and -mode
//     consume (franz-go), each from its own cold start;
//   - warm replay: the same again on the broker whose cache
//     (remote.cache.bytes sized above the data) now holds it;
//   - loadgen -mode verify from a cold cache: every record in order and
//     byte-identical;
//   - tail latency: loadgen at replayTailRate records/s with a consumer at
//     the end of another topic, alone and while cold replays run back to
//     back, at the broker's default remote fetch quota and then at each
//     of replayOptions.quotas (the cold and warm replays above run with
//     no quota: they measure what a replay can do).
//
// Results go to <out>/<name>/: replay.md, replay.json and series/ (each
// fetch replay's throughput over time).

const (
	replayBucket       = "strata-replay"
	replayTopic        = "replay"
	tailTopic          = "tail"
	replayRecordSize   = 1024
	replayPartitions   = 3
	replaySegmentBytes = 64 << 20
	// replayTailCache is remote.cache.bytes of the broker of the tail runs:
	// below the data, so the replays beside the tail stay cold.
	replayTailCache   = 256 << 20
	replayTailRate    = 1000
	replayStepTimeout = 3 * time.Minute
)

// replayRanges are the sizes of a ranged GET of the raw limit (one pass
// each with each concurrency, the best is the limit; the broker's
// read-ahead GETs are 4 to 16 MiB).
var replayRanges = []int64{4 << 20, 16 << 20}

// replayOptions are one replay run's settings.
type replayOptions struct {
	name      string // results under <out>/<name>/, labels of its loadgen runs
	bytes     int64  // record-value bytes to produce
	repeat    int    // runs of each cold and warm replay
	consume   bool   // also replay with franz-go's consumer
	tailTime  time.Duration
	getConns  string   // concurrent ranged GETs of the raw limit, comma-separated
	storeLink string   // rate of MinIO's shaped link (tc syntax); empty: loopback
	perfOut   string   // perf record of the broker during the first cold fetch
	traceOut  string   // Go execution trace of the broker beside the tail
	quotas    []string // remote fetch quotas of the tail-latency curve ("unlimited" or bytes/s)
	overrides []string
}

// replayRun is one replay from offset 0 (or the sum of the replays beside
// the tail).
type replayRun struct {
	Label       string  `json:"label,omitempty"`
	Mode        string  `json:"mode"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Partitions  int     `json:"partitions"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	Requests    int64   `json:"requests,omitempty"`
	Conns       int     `json:"conns,omitempty"`
	// BrokerCPUSPerGB is the broker's user+system CPU seconds per 10^9
	// bytes moved.
	BrokerCPUSPerGB float64 `json:"broker_cpu_s_per_gb,omitempty"`
	// MinIOCPUSPerGB is MinIO's, over the same run.
	MinIOCPUSPerGB float64 `json:"minio_cpu_s_per_gb,omitempty"`
	// ClientCPUSPerGB is loadgen's.
	ClientCPUSPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	// HostBusy is the fraction of all CPUs' time the host spent busy
	// (not idle or iowait) during the run.
	HostBusy float64 `json:"host_busy"`
	// OtherCores is the CPU (in cores) the host spent on processes other
	// than the broker, MinIO, loadgen and the suite during the run: load
	// from elsewhere that skews the figures.
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
	// ClientCPUSPerGB is the suite's (the minio-go client's).
	ClientCPUSPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	HostBusy        float64 `json:"host_busy"`
	OtherCores      float64 `json:"other_cores"`
}

// tailRun is one tail-latency run: end-to-end latency of the consumer at
// the end of the tail topic, and the producer's acknowledgements.
type tailRun struct {
	Label   string  `json:"label"`
	Rate    int     `json:"rate"`
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	// AckP99Ms and AckMaxMs are the tail producer's Produce-to-ack latency.
	AckP99Ms float64 `json:"ack_p99_ms"`
	AckMaxMs float64 `json:"ack_max_ms"`
	// Replay is the concurrent replays, if any.
	Replay *replayRun `json:"replay,omitempty"`
	// Curve is the percentile curve of the end-to-end latency.
	Curve []point `json:"curve,omitempty"`
	// Quota is the remote fetch quota of the replays beside the tail
	// ("unlimited" or bytes/s), empty for the broker's default.
	Quota string `json:"quota,omitempty"`
}

// remoteFetchQuotaKey is the broker's remote fetch quota setting.
const remoteFetchQuotaKey = "remote.log.manager.fetch.max.bytes.per.second"

// quotaLabel is the part of a replay's label that names its quota.
func quotaLabel(quota string) string {
	if quota == "" {
		return ""
	}
	return "quota " + quota + " "
}

// replayReport is everything one replay run measured (replay.json).
type replayReport struct {
	Date         string       `json:"date"`
	Command      string       `json:"command"`
	Machine      string       `json:"machine"`
	Partitions   int          `json:"partitions"`
	SegmentBytes int64        `json:"segment_bytes"`
	CacheBytes   int64        `json:"remote_cache_bytes"`
	Produce      *lgSide      `json:"produce"`
	Records      int64        `json:"records"`
	RemoteBytes  int64        `json:"remote_bytes"`
	RemoteSegs   int          `json:"remote_segments"`
	LocalBytes   int64        `json:"local_bytes_after_trim"`
	TierWaitS    float64      `json:"tier_wait_s"`
	StoreLink    string       `json:"store_link,omitempty"` // rate of MinIO's shaped link; empty: loopback
	Raw          []*rawResult `json:"raw"`
	Replays      []*replayRun `json:"replays"`
	Tail         []*tailRun   `json:"tail"`
	Verified     string       `json:"verified,omitempty"`
	Errors       []string     `json:"errors,omitempty"`
}

// replay runs the replay measurement and writes its results. A report
// comes back whenever the run got as far as starting; its error lists the
// steps that failed.
func (r *runner) replay(ctx context.Context, s *scenario, o replayOptions) (*replayReport, error) {
	out := filepath.Join(r.out, o.name)
	seriesDir := filepath.Join(out, "series")
	if err := os.RemoveAll(seriesDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(seriesDir, 0o755); err != nil {
		return nil, err
	}
	rep := &replayReport{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Command:      strings.TrimSpace("go -C bench run ./suite " + r.rep.Args),
		Machine:      r.rep.Machine,
		Partitions:   replayPartitions,
		SegmentBytes: replaySegmentBytes,
		StoreLink:    o.storeLink,
	}
	if err := r.replaySteps(ctx, s, o, rep, seriesDir); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		logf("  replay: %v", err)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "replay.json"), append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "replay.md"), []byte(replayMarkdown(rep)), 0o644); err != nil {
		return nil, err
	}
	logf("  wrote %s", filepath.Join(out, "replay.md"))
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("%d error(s): %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

// replaySteps does the work of replay; a step that fails without
// invalidating the rest is added to rep.Errors, one that stops the run is
// returned.
func (r *runner) replaySteps(ctx context.Context, s *scenario, o replayOptions, rep *replayReport, seriesDir string) error {
	dir := filepath.Join(r.tmp, "s4", o.name)
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
	}
	mp, maddr, err := startMinIO(minioBin, filepath.Join(dir, "minio"), link)
	if err != nil {
		return err
	}
	defer mp.stop()
	mc, err := minio.New(maddr, &minio.Options{Creds: credentials.NewStaticV4(minioUser, minioSecret, "")})
	if err != nil {
		return err
	}
	if err := mc.MakeBucket(ctx, replayBucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("make bucket: %w", err)
	}
	logf("  minio on %s, bucket %s", maddr, replayBucket)

	pprofAddr, err := freeAddr()
	if err != nil {
		return err
	}
	// The cache holds the whole replay, so the warm run reads it all from
	// local disk.
	rep.CacheBytes = o.bytes + o.bytes/4 + 256<<20
	cacheN := 0
	settings := func(cacheBytes int64) []string {
		cacheN++
		set := []string{
			"remote.storage.s3.endpoint=http://" + maddr,
			"remote.storage.s3.bucket=" + replayBucket,
			"remote.cache.dir=" + filepath.Join(dir, fmt.Sprintf("cache-%d", cacheN)), // empty: a cold cache
			"remote.cache.bytes=" + strconv.FormatInt(cacheBytes, 10),
			"log.retention.check.interval.ms=1000",
			"strata.remote.poll.interval.ms=500",
			"log.segment.delete.delay.ms=1000",
		}
		if o.traceOut != "" {
			set = append(set, "strata.pprof.listener="+pprofAddr)
		}
		if cacheBytes != replayTailCache {
			// Scenario 4 measures what a replay can do: no remote
			// fetch quota. The tail runs keep the broker's default.
			set = append(set, remoteFetchQuotaKey+"="+strconv.FormatInt(math.MaxInt64, 10))
		}
		return append(set, o.overrides...) // after the suite's own, so they win
	}
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(dir, "data"), minioEnv(), settings(rep.CacheBytes)...)
	if err != nil {
		return err
	}
	defer func() { b.stop() }()

	// read runs one loadgen read and measures the CPU of the broker, MinIO,
	// loadgen and the host over it.
	read := func(args ...string) (*replayRun, error) {
		bBefore, err1 := cpuSeconds(b.Pid())
		mBefore, err2 := cpuSeconds(mp.Pid())
		busy0, total0 := hostCPU()
		self0 := selfCPU()
		t0 := time.Now()
		rd, client, err := r.readTopic(ctx, replayStepTimeout, b.addr, args...)
		wall := time.Since(t0).Seconds()
		busy1, total1 := hostCPU()
		self1 := selfCPU()
		bAfter, err3 := cpuSeconds(b.Pid())
		mAfter, err4 := cpuSeconds(mp.Pid())
		if err != nil {
			return nil, err
		}
		run := &replayRun{Records: rd.Records, Bytes: rd.Bytes, Partitions: rd.Partitions, Seconds: rd.Seconds,
			RecordsPerS: rd.RecordsPerS, MBPerS: rd.MBPerS, Requests: rd.Requests, Conns: rd.Conns}
		if total1 > total0 {
			run.HostBusy = float64(busy1-busy0) / float64(total1-total0)
		}
		if rd.Bytes > 0 {
			gb := float64(rd.Bytes) / 1e9
			run.ClientCPUSPerGB = client / gb
			if errors.Join(err1, err3) == nil {
				run.BrokerCPUSPerGB = (bAfter - bBefore) / gb
			}
			if errors.Join(err2, err4) == nil {
				run.MinIOCPUSPerGB = (mAfter - mBefore) / gb
			}
			ours := (run.BrokerCPUSPerGB+run.MinIOCPUSPerGB)*gb + client + (self1 - self0)
			if wall > 0 {
				run.OtherCores = max(0, float64(busy1-busy0)/100-ours) / wall
			}
		}
		return run, nil
	}

	records := o.bytes / replayRecordSize
	res, err := r.loadgen(ctx, s, o.name+"-fill", b.addr, "-topic", replayTopic, "-create",
		"-partitions", strconv.Itoa(replayPartitions), "-size", strconv.Itoa(replayRecordSize),
		"-records", strconv.FormatInt(records, 10), "-acks", "1",
		"-topic-config", "remote.storage.enable=true",
		"-topic-config", "segment.bytes="+strconv.Itoa(replaySegmentBytes),
		// Kafka's size rule never deletes the last sealed segment when the
		// active one is empty (size - retention.bytes < that segment), so
		// local time retention trims it.
		"-topic-config", "local.retention.bytes=1",
		"-topic-config", "local.retention.ms=1000")
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	rep.Produce = res.Produce

	adm, err := newAdmin(b.addr)
	if err != nil {
		return err
	}
	defer adm.Close()
	// Roll the active segments too, so that the whole log goes remote.
	if err := setTopicConfig(ctx, adm, replayTopic, map[string]string{"segment.ms": "1000"}); err != nil {
		return fmt.Errorf("set segment.ms: %w", err)
	}
	logf("  waiting until the bucket holds the whole log and local logs are trimmed")
	t0 := time.Now()
	ms, local, err := waitTiered(ctx, adm, mc, tieredTopic{replayBucket, replayTopic, replayPartitions}, b.dir, records, replayStepTimeout)
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
			keys = append(keys, objRef{key: m.SegmentKey(&m.Segments[i], tiering.SuffixLog), size: m.Segments[i].Size})
		}
	}
	logf("  after %.1fs: %d segments, %d bytes remote, %d bytes of local .log files", rep.TierWaitS, rep.RemoteSegs, rep.RemoteBytes, local)
	// Segment rolling by time must not leave records behind.
	if rep.Records != records {
		return fmt.Errorf("manifests cover %d records, produced %d", rep.Records, records)
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
			logf("  raw ranged GETs (%s): %d conns, %d B ranges", label, n, size)
			mBefore, _ := cpuSeconds(mp.Pid())
			self0 := selfCPU()
			busy0, total0 := hostCPU()
			raw, err := rawGets(ctx, mc, keys, n, size, forward)
			busy1, total1 := hostCPU()
			self1 := selfCPU()
			if mAfter, err := cpuSeconds(mp.Pid()); err == nil && raw != nil && raw.Bytes > 0 {
				raw.MinIOCPUSPerGB = (mAfter - mBefore) / (float64(raw.Bytes) / 1e9)
				raw.ClientCPUSPerGB = (self1 - self0) / (float64(raw.Bytes) / 1e9)
				if total1 > total0 {
					raw.HostBusy = float64(busy1-busy0) / float64(total1-total0)
				}
				raw.OtherCores = max(0, float64(busy1-busy0)/100-(mAfter-mBefore)-(self1-self0)) / raw.Seconds
			}
			if err != nil {
				rep.Errors = append(rep.Errors, "raw "+label+": "+err.Error())
				logf("    %v", err)
				continue
			}
			raw.Label = label
			logf("    %.1f MB/s, MinIO %.2f CPU s/GB", raw.MBPerS, raw.MinIOCPUSPerGB)
			rep.Raw = append(rep.Raw, raw)
		}
	}
	// MinIO writes with O_DIRECT: the first read of its files comes from
	// disk. That pass is reported but is no limit of anything.
	rawPass("first read of the objects", "8", false, replayRanges[0])
	rawPass("before replays", o.getConns, false, replayRanges...)
	rawPass("GET and forward over loopback TCP", o.getConns, true, replayRanges...)

	conns := strconv.Itoa(replayPartitions)
	replayOnce := func(label string, restart bool, mode string) *replayRun {
		if restart {
			if err := b.restart(settings(rep.CacheBytes)...); err != nil {
				rep.Errors = append(rep.Errors, label+": restart: "+err.Error())
				return nil
			}
		}
		args := []string{"-mode", mode, "-topic", replayTopic}
		if mode == "fetch" {
			args = append(args, "-conns", conns)
			if !strings.Contains(label, "beside") {
				args = append(args, "-series", filepath.Join(seriesDir, seriesName(label)))
			}
		}
		logf("  %s: loadgen %s", label, strings.Join(args, " "))
		var rec *exec.Cmd
		if o.perfOut != "" && label == "cold fetch #1" {
			rec = exec.Command("perf", "record", "-F", "999", "-g", "-o", o.perfOut, "-p", strconv.Itoa(b.Pid()))
			if err := rec.Start(); err != nil {
				logf("    perf: %v", err)
				rec = nil
			} else {
				time.Sleep(500 * time.Millisecond)
			}
		}
		run, err := read(args...)
		if rec != nil {
			// perf writes its file on SIGINT; Wait's error is its exit
			// status from that signal.
			_ = rec.Process.Signal(syscall.SIGINT)
			_ = rec.Wait()
		}
		if err != nil {
			rep.Errors = append(rep.Errors, label+": "+err.Error())
			logf("    %v", err)
			return nil
		}
		run.Label, run.Mode = label, mode
		if run.Records != records {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: read %d records, want %d", label, run.Records, records))
		}
		logf("    %d records, %.1f MB/s, broker %.2f, MinIO %.2f CPU s/GB", run.Records, run.MBPerS, run.BrokerCPUSPerGB, run.MinIOCPUSPerGB)
		rep.Replays = append(rep.Replays, run)
		return run
	}
	modes := []string{"fetch"}
	if o.consume {
		modes = append(modes, "consume")
	}
	for _, mode := range modes {
		for i := range o.repeat {
			replayOnce(fmt.Sprintf("cold %s #%d", mode, i+1), true, mode)
			if !b.Alive() {
				return errors.New("broker did not restart")
			}
			for j := range o.repeat {
				replayOnce(fmt.Sprintf("warm %s #%d.%d", mode, i+1, j+1), false, mode)
			}
		}
	}

	// Content check, from a cold cache: every record of every partition,
	// in order, with the value loadgen produced.
	if err := b.restart(settings(rep.CacheBytes)...); err != nil {
		return err
	}
	logf("  verify: loadgen -mode verify from offset 0, cold cache, every record's value")
	vstart := time.Now()
	if rd, _, err := r.readTopic(ctx, replayStepTimeout, b.addr, "-mode", "verify", "-topic", replayTopic, "-size", strconv.Itoa(replayRecordSize)); err != nil {
		rep.Errors = append(rep.Errors, "verify: "+err.Error())
		logf("    %v", err)
	} else if rd.Records != records {
		rep.Errors = append(rep.Errors, fmt.Sprintf("verify: read %d records, want %d", rd.Records, records))
	} else {
		rep.Verified = fmt.Sprintf("%d records, byte-identical, in order, cold cache, %.1f s", records, time.Since(vstart).Seconds())
		logf("    %s", rep.Verified)
	}

	rawPass("after replays", o.getConns, false, replayRanges...)

	// Tail latency: alone, then with cold replays beside it.
	if err := b.restart(settings(replayTailCache)...); err != nil {
		return err
	}
	tailArgs := []string{"-topic", tailTopic, "-partitions", "1", "-size", strconv.Itoa(replayRecordSize), "-acks", "1",
		"-rate", strconv.Itoa(replayTailRate), "-duration", o.tailTime.String(), "-consumers", "1"}
	logf("  tail latency alone: %d records/s for %v", replayTailRate, o.tailTime)
	alone, err := r.loadgen(ctx, s, o.name+"-tail-alone", b.addr, append(tailArgs, "-create", "-topic-config", "remote.storage.enable=true")...)
	if err != nil {
		rep.Errors = append(rep.Errors, "tail alone: "+err.Error())
	} else {
		rep.Tail = append(rep.Tail, tailFrom("alone", alone, nil))
	}
	logf("  tail latency during replays (remote.cache.bytes %d MiB, below the data: each pass reads the bucket)", replayTailCache>>20)
	// beside runs the tail producer and consumer with cold replays back
	// to back beside them, for as long as the tail runs.
	beside := func(label, quota string) {
		type tailDone struct {
			res *lgResult
			err error
		}
		done := make(chan tailDone, 1)
		go func() {
			res, err := r.loadgen(ctx, s, o.name+"-tail-"+strings.TrimSuffix(seriesName(label), ".csv"), b.addr, tailArgs...)
			done <- tailDone{res, err}
		}()
		if o.traceOut != "" && quota == "" {
			go func() {
				time.Sleep(2 * time.Second) // into the first replay
				if err := fetchTrace("http://"+pprofAddr+"/debug/pprof/trace?seconds=5", o.traceOut); err != nil {
					logf("    trace: %v", err)
				} else {
					logf("    wrote the broker's execution trace to %s", o.traceOut)
				}
			}()
		}
		sum := &replayRun{Mode: "fetch", Label: "replays beside tail"}
		var td tailDone
	replays:
		for i := 1; ; i++ {
			run := replayOnce(fmt.Sprintf("fetch beside tail %s#%d", quotaLabel(quota), i), false, "fetch")
			if run == nil {
				td = <-done
				break
			}
			sum.Records += run.Records
			sum.Bytes += run.Bytes
			sum.Seconds += run.Seconds
			sum.Conns = i
			select {
			case td = <-done:
				break replays
			default:
			}
		}
		if sum.Seconds > 0 {
			sum.MBPerS = float64(sum.Bytes) / sum.Seconds / 1e6
		}
		if td.err != nil {
			rep.Errors = append(rep.Errors, label+": "+td.err.Error())
			return
		}
		t := tailFrom(label, td.res, sum)
		t.Quota = quota
		rep.Tail = append(rep.Tail, t)
	}
	beside("during replays from offset 0", "")
	// The curve: the same at other remote fetch quotas, set at run time
	// (a dynamic broker config), each after a tail run alone of its own:
	// the host's load moves meanwhile, so each point's ratio is to the
	// run just before it.
	aloneRun := func(label, quota string) {
		res, err := r.loadgen(ctx, s, o.name+"-tail-"+strings.TrimSuffix(seriesName(label), ".csv"), b.addr, tailArgs...)
		if err != nil {
			rep.Errors = append(rep.Errors, label+": "+err.Error())
			return
		}
		t := tailFrom(label, res, nil)
		t.Quota = quota
		rep.Tail = append(rep.Tail, t)
	}
	for _, q := range o.quotas {
		v := q
		if q == "unlimited" {
			v = strconv.FormatInt(math.MaxInt64, 10)
		}
		if err := setBrokerConfig(ctx, adm, remoteFetchQuotaKey, &v); err != nil {
			rep.Errors = append(rep.Errors, "set "+remoteFetchQuotaKey+": "+err.Error())
			break
		}
		logf("  tail latency alone, then during replays, %s=%s", remoteFetchQuotaKey, q)
		aloneRun("alone before quota "+q, q)
		beside("during replays, quota "+q, q)
	}
	if len(o.quotas) > 0 {
		if err := setBrokerConfig(ctx, adm, remoteFetchQuotaKey, nil); err != nil {
			rep.Errors = append(rep.Errors, "delete "+remoteFetchQuotaKey+": "+err.Error())
		}
	}
	if !b.Alive() {
		rep.Errors = append(rep.Errors, "broker exited during the run:\n"+b.Tail(4000))
	}
	return nil
}

// tailFrom is a tail run as loadgen measured it.
func tailFrom(label string, res *lgResult, beside *replayRun) *tailRun {
	p, c := res.Produce, res.Consume
	t := &tailRun{Label: label, Rate: replayTailRate, Records: c.Records, Seconds: p.Seconds,
		P50Ms: c.Latency.P50Ms, P99Ms: c.Latency.P99Ms, P999Ms: c.Latency.P999Ms, MaxMs: c.Latency.MaxMs,
		AckP99Ms: p.Latency.P99Ms, AckMaxMs: p.Latency.MaxMs, Replay: beside, Curve: c.Latency.Curve}
	logf("    tail %s: p50 %.2f p99 %.2f max %.2f ms", label, t.P50Ms, t.P99Ms, t.MaxMs)
	return t
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

// tieredTopic names a topic whose whole log is to be in a bucket.
type tieredTopic struct {
	bucket, topic string
	partitions    int32
}

// waitTiered waits until every partition's manifest ends at its log end
// offset (everything uploaded, the active segment empty), the remote log
// starts at 0, ListOffsets earliest says 0, and the partition's local
// directory holds one .log file (the active segment). It returns the
// manifests and the bytes of local .log files.
func waitTiered(ctx context.Context, adm *kadm.Client, mc *minio.Client, tt tieredTopic, dataDir string, records int64, timeout time.Duration) ([]*tiering.Manifest, int64, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ms, local, why, err := tieredState(ctx, adm, mc, tt, dataDir, records)
		if err != nil {
			return nil, 0, err
		}
		if why == "" {
			return ms, local, nil
		}
		if why != last {
			logf("    %s", why)
			last = why
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("not tiered after %v: %s", timeout, why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// tieredState reads the topic's manifests and offsets; why says what is
// not tiered yet (empty when everything is).
func tieredState(ctx context.Context, adm *kadm.Client, mc *minio.Client, tt tieredTopic, dataDir string, records int64) (ms []*tiering.Manifest, local int64, why string, err error) {
	earliest, err := listOffsets(ctx, adm, tt.topic, false)
	if err != nil {
		return nil, 0, "", err
	}
	latest, err := listOffsets(ctx, adm, tt.topic, true)
	if err != nil {
		return nil, 0, "", err
	}
	md, err := adm.Metadata(ctx, tt.topic)
	if err != nil {
		return nil, 0, "", err
	}
	topicID := coord.TopicID(md.Topics[tt.topic].ID).String()
	var sum int64
	for _, v := range latest {
		sum += v
	}
	if sum != records {
		return nil, 0, "", fmt.Errorf("log end offsets sum to %d, produced %d", sum, records)
	}
	var whys []string
	for p := range tt.partitions {
		obj, err := mc.GetObject(ctx, tt.bucket, tiering.ManifestKey(tt.topic, topicID, p), minio.GetObjectOptions{})
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
	logs := localLogs(dataDir, tt.topic)
	for p := range tt.partitions {
		if n := logs.files[p]; n != 1 {
			whys = append(whys, fmt.Sprintf("p%d: %d local .log files", p, n))
		}
	}
	return ms, logs.bytes, strings.Join(whys, ", "), nil
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
