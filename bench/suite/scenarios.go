package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering/miniotest"
)

// s1: produce 100 B and 1 KiB, acks=1, against raw disk and JetStream;
// acks=all and lz4 beside them; 1 KiB acks=1 also with 2 and 4
// producers; the broker's CPU per GB produced against the floor.
func (r *runner) s1(ctx context.Context, s *scenario) error {
	r.cpuFloor(ctx, s) // before this scenario's broker starts
	dir := filepath.Join(r.tmp, "s1")
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(dir, "data"), nil)
	if err != nil {
		return err
	}
	defer b.stop()
	sizes := []struct {
		size int
		n    int64
	}{{100, r.o.n100}, {1024, r.o.n1k}}
	// The goals' runs (acks=1, no compression, 1 producer) come first; the
	// others are rows and figures without goals, but for the best of the
	// producer counts.
	type variant struct {
		size        int
		acks, codec string
		producers   int
	}
	kinds := []variant{{acks: "1", codec: "none", producers: 1}, {acks: "all", codec: "none", producers: 1}, {acks: "1", codec: "lz4", producers: 1}}
	// One producer client shares the two cores with the broker; more
	// producers (1 KiB only) show what the broker takes when the client
	// is not the bound.
	producerCounts := []int{1, 2, 4}
	for _, p := range producerCounts[1:] {
		kinds = append(kinds, variant{size: 1024, acks: "1", codec: "none", producers: p})
	}
	// Each side runs -s1-repeat times, alternating, and its median run
	// is the figure: this machine's disk and CPU are shared and wander.
	reps := max(1, r.o.s1Repeat)
	strataRuns := map[variant][]*produceRun{}
	rawRuns := map[int][]*rawWrite{}
	cpuRaw := map[string]*cpuUse{}
	for k := range reps {
		for _, sz := range sizes {
			for _, kind := range kinds {
				if kind.size != 0 && kind.size != sz.size {
					continue
				}
				v := variant{sz.size, kind.acks, kind.codec, kind.producers}
				label, topic := fmt.Sprintf("s1-produce-%dB-%d", sz.size, k+1), fmt.Sprintf("p%d-%d", sz.size, k+1)
				switch {
				case v.acks != "1" || v.codec != "none":
					label = fmt.Sprintf("s1-produce-%dB-acks%s-%s-%d", sz.size, v.acks, v.codec, k+1)
					topic = fmt.Sprintf("p%d-acks%s-%s-%d", sz.size, v.acks, v.codec, k+1)
				case v.producers > 1:
					label = fmt.Sprintf("s1-produce-%dB-%dproducers-%d", sz.size, v.producers, k+1)
					topic = fmt.Sprintf("p%d-%dp-%d", sz.size, v.producers, k+1)
				}
				m := startCPU(b.process)
				res, err := r.loadgen(ctx, s, label, b.addr, "-topic", topic, "-create", "-partitions", "3",
					"-size", strconv.Itoa(sz.size), "-records", strconv.FormatInt(sz.n, 10), "-acks", v.acks, "-compression", v.codec,
					"-producers", strconv.Itoa(v.producers))
				if err != nil {
					s.fail(label, err)
					continue
				}
				run := &produceRun{res: res}
				if run.cpu, err = m.stop(res.clientCPU); err != nil {
					s.fail(label, err)
				}
				logf("    broker %.2f CPU s/GB, %.2f cores; loadgen %.2f cores; other load %.2f cores",
					run.brokerPerGB(), run.cpu.cores(run.cpu.Procs[b.Name]), run.cpu.cores(run.cpu.ClientS), run.cpu.cores(run.cpu.OtherS))
				cpuRaw[label] = run.cpu
				strataRuns[v] = append(strataRuns[v], run)
				if v.acks != "1" || v.codec != "none" || v.producers != 1 {
					continue
				}
				// The same bytes written raw to the same file system.
				total := sz.n * int64(sz.size)
				rw, err := rawDiskWrite(dir, total)
				if err != nil {
					s.fail(fmt.Sprintf("raw write %d B", sz.size), err)
					continue
				}
				logf("  raw sequential write of %d MB: %.0f MB/s with fdatasync, %.0f MB/s page cache only", total/1e6, rw.SyncMBPerS, rw.CacheMBPerS)
				rawRuns[sz.size] = append(rawRuns[sz.size], rw)
			}
		}
	}
	b.stop()
	s.raw("s1-cpu", cpuRaw)
	median := map[variant]*produceRun{}
	for v, runs := range strataRuns {
		slices.SortFunc(runs, func(a, b *produceRun) int { return cmp.Compare(a.res.Produce.MBPerS, b.res.Produce.MBPerS) })
		median[v] = runs[len(runs)/2]
	}
	raw := map[int]*rawWrite{}
	for _, sz := range sizes {
		if m := median[variant{sz.size, "1", "none", 1}]; m != nil {
			s.curve("produce latency", fmt.Sprintf("S1 %d B acks=1, 1 broker", sz.size), m.res.Produce.Latency.Curve)
		}
		if runs := rawRuns[sz.size]; len(runs) > 0 {
			s.raw(fmt.Sprintf("raw-write-%dB", sz.size), runs)
			slices.SortFunc(runs, func(a, b *rawWrite) int { return cmp.Compare(a.SyncMBPerS, b.SyncMBPerS) })
			raw[sz.size] = runs[len(runs)/2]
		}
	}

	// JetStream with the same sizes and counts.
	js := map[int]*natsResult{}
	natsBin, err := findNATS(r.o.natsBin)
	if err != nil {
		s.fail("nats", err)
	} else {
		for _, sz := range sizes {
			res, err := natsBench(ctx, dir, natsBin, sz.size, sz.n, time.Until(s.deadline)-5*time.Second)
			if err != nil {
				s.fail(fmt.Sprintf("JetStream %d B", sz.size), err)
				continue
			}
			logf("  JetStream %d B: %.0f msgs/s, p99 %.2f ms", sz.size, res.RecordsPerS, res.P99Ms)
			js[sz.size] = res
			s.raw(fmt.Sprintf("jetstream-%dB", sz.size), res)
		}
	}

	s.RowHeader = []string{"run", "record", "records/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "broker CPU s/GB", "broker cores", "loadgen cores", "other load, cores"}
	for _, sz := range sizes {
		st, rw, j := median[variant{sz.size, "1", "none", 1}], raw[sz.size], js[sz.size]
		name := fmt.Sprintf("%d B", sz.size)
		if sz.size == 1024 {
			name = "1 KiB"
		}
		var jsGoal, diskGoal *goal
		if sz.size == 100 {
			jsGoal = &goal{">=", 3, onRatio}
		} else {
			diskGoal = &goal{">=", 0.7, onRatio}
		}
		f := s.figure(fmt.Sprintf("produce %s acks=1, records/s ÷ JetStream", name), "records/s", jsGoal)
		if st != nil {
			f.set(st.res.Produce.RecordsPerS)
		}
		if j != nil {
			f.ref(fmt.Sprintf("JetStream file storage, nats bench js pub async, %d × %s", sz.n, name), j.RecordsPerS)
		}
		rawName := fmt.Sprintf("write() 1 MiB + fdatasync, %d MB", sz.n*int64(sz.size)/1e6)
		f = s.figure(fmt.Sprintf("produce %s acks=1, MB/s ÷ raw sequential disk write", name), "MB/s", diskGoal)
		if st != nil {
			f.set(st.res.Produce.MBPerS)
		}
		if rw != nil {
			f.ref(rawName, rw.SyncMBPerS)
		}
		f = s.figure(fmt.Sprintf("produce %s acks=all, records/s ÷ JetStream", name), "records/s", nil)
		if m := median[variant{sz.size, "all", "none", 1}]; m != nil {
			f.set(m.res.Produce.RecordsPerS)
		}
		if j != nil {
			f.ref(fmt.Sprintf("JetStream file storage, nats bench js pub async, %d × %s", sz.n, name), j.RecordsPerS)
		}
		if sz.size == 1024 {
			// The fair produce figure: the best of the producer counts,
			// its broker's share of the busy CPU, and the broker's CPU
			// per GB against the floor.
			best := variant{1024, "1", "none", 1}
			for _, p := range producerCounts {
				v := variant{1024, "1", "none", p}
				if m := median[v]; m != nil && (median[best] == nil || m.res.Produce.MBPerS > median[best].res.Produce.MBPerS) {
					best = v
				}
			}
			bm := median[best]
			f = s.figure(fmt.Sprintf("produce %s acks=1, best of %s producers, MB/s ÷ raw sequential disk write", name, countList(producerCounts)), "MB/s", &goal{">=", 0.7, onRatio})
			if bm != nil {
				f.set(bm.res.Produce.MBPerS)
				s.note(fmt.Sprintf("Best of %s producers (1 KiB, acks=1): %d producers, %.1f MB/s, the broker %.2f cores of the %.2f cores busy on the host (%.0f%%), loadgen %.2f cores.",
					countList(producerCounts), best.producers, bm.res.Produce.MBPerS, bm.cpu.cores(bm.cpu.Procs[b.Name]), bm.cpu.cores(bm.cpu.HostBusyS),
					100*ratioOf(bm.cpu.Procs[b.Name], bm.cpu.HostBusyS), bm.cpu.cores(bm.cpu.ClientS)))
			}
			if rw != nil {
				f.ref(rawName, rw.SyncMBPerS)
			}
			f = s.figure(fmt.Sprintf("produce %s acks=1, best of %s producers, the broker's CPU, cores ÷ the host's busy cores", name, countList(producerCounts)), "cores", nil)
			if bm != nil && bm.cpu != nil {
				f.setIf(bm.cpu.cores(bm.cpu.Procs[b.Name]))
				f.ref("every CPU's busy time over the same run: the ratio is the broker's share", bm.cpu.cores(bm.cpu.HostBusyS))
			}
			r.cpuFigure(ctx, s, fmt.Sprintf("produce %s acks=1 RF 1, 1 producer, the broker", name), st.brokerPerGB(), &goal{"<=", 1.0, onValue})
			r.cpuFigure(ctx, s, fmt.Sprintf("produce %s acks=1 RF 1, best of %s producers, the broker", name, countList(producerCounts)), bm.brokerPerGB(), nil)
		}
		bars := barGroup{Title: "S1 produce " + name, Unit: "MB/s"}
		if st != nil {
			bars.add("Strata", st.res.Produce.MBPerS, false)
		}
		if j != nil {
			bars.add("JetStream", j.MBPerS, true)
		}
		if rw != nil {
			bars.add("raw disk", rw.SyncMBPerS, true)
		}
		s.Bars = append(s.Bars, bars)
		for _, v := range []struct {
			row         string
			acks, codec string
			producers   int
		}{{"Strata", "1", "none", 1}, {"Strata 2 producers", "1", "none", 2}, {"Strata 4 producers", "1", "none", 4}, {"Strata acks=all", "all", "none", 1}, {"Strata lz4", "1", "lz4", 1}} {
			if m := median[variant{sz.size, v.acks, v.codec, v.producers}]; m != nil {
				p := m.res.Produce
				s.row(v.row, name, p.RecordsPerS, p.MBPerS, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Latency.MaxMs,
					m.brokerPerGB(), m.cpu.cores(m.cpu.Procs[b.Name]), m.cpu.cores(m.cpu.ClientS), m.cpu.cores(m.cpu.OtherS))
			}
		}
		if j != nil {
			s.row("JetStream", name, j.RecordsPerS, j.MBPerS, j.P50Ms, j.P99Ms, j.P999Ms, j.MaxMs)
		}
	}
	if len(js) > 0 {
		s.note("JetStream: Debian's nats-server -js, file storage, one stream, `nats bench js pub async` (its latency is per async batch).")
	}
	s.note(fmt.Sprintf("Strata: bench/loadgen, 1 producer client unless the row says more (1 KiB acks=1 also with 2 and 4, in one loadgen process), 3 partitions, idempotence off, linger 0, acks=1 and no compression unless the row says otherwise (acks=all, lz4); latency from Produce call to acknowledgement. Raw disk: the same number of value bytes written in 1 MiB write() calls into one file on the broker's file system, then fdatasync, the time including the fdatasync (the broker itself acknowledges from the page cache, as Kafka does). Strata (each kind) and raw disk: median of %d runs each, alternating (every run in summary.json and loadgen.csv); JetStream: one run.", reps))
	s.note("CPU: the broker's user+system seconds from /proc/<pid>/stat (10 ms ticks) over the whole loadgen run (its connections, metadata and topic creation included) per 10^9 bytes of record values produced, of the median run; cores are CPU seconds over the run's wall time; loadgen's from its rusage; other load is the host's busy CPU (/proc/stat) that neither the broker, loadgen nor the suite spent.")
	return nil
}

// produceRun is one loadgen produce run with the CPU spent over it.
type produceRun struct {
	res *lgResult
	cpu *cpuUse
}

// brokerPerGB is the broker's CPU seconds per 10^9 bytes produced (zero
// when not measured).
func (p *produceRun) brokerPerGB() float64 {
	if p == nil || p.res == nil || p.res.Produce == nil {
		return 0
	}
	return p.cpu.perGB("broker", p.res.Produce.Bytes)
}

// countList is "1, 2 and 4".
func countList(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// ratioOf is a ÷ b, zero when b is not positive.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// rawWrite is a raw sequential write of a number of bytes.
type rawWrite struct {
	Bytes       int64   `json:"bytes"`
	SyncMBPerS  float64 `json:"sync_mb_per_s"`
	CacheMBPerS float64 `json:"page_cache_mb_per_s"`
}

// rawDiskWrite writes total bytes in 1 MiB writes into a new file in dir,
// twice: timed to the end of an fdatasync, and timed without it (page
// cache). The file is removed after each.
func rawDiskWrite(dir string, total int64) (*rawWrite, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i/13)
	}
	one := func(sync bool) (float64, error) {
		p := filepath.Join(dir, "raw-write")
		f, err := os.Create(p)
		if err != nil {
			return 0, err
		}
		defer os.Remove(p)
		start := time.Now()
		for n := int64(0); n < total; {
			m, err := f.Write(buf[:min(int64(len(buf)), total-n)])
			n += int64(m)
			if err != nil {
				f.Close()
				return 0, err
			}
		}
		if sync {
			if err := f.Sync(); err != nil {
				f.Close()
				return 0, err
			}
		}
		secs := time.Since(start).Seconds()
		if err := f.Close(); err != nil {
			return 0, err
		}
		if !sync {
			syncAll()
		}
		return float64(total) / secs / 1e6, nil
	}
	syncAll()
	s, err := one(true)
	if err != nil {
		return nil, err
	}
	c, err := one(false)
	if err != nil {
		return nil, err
	}
	return &rawWrite{Bytes: total, SyncMBPerS: s, CacheMBPerS: c}, nil
}

// natsResult is one `nats bench js pub async` run.
type natsResult struct {
	Size        int     `json:"size"`
	Records     int64   `json:"records"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
}

// natsBench starts a fresh JetStream server with file storage and runs
// one asynchronous publisher benchmark against it.
func natsBench(ctx context.Context, dir, natsBin string, size int, n int64, timeout time.Duration) (*natsResult, error) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		return nil, fmt.Errorf("nats-server not installed (apt-get install nats-server): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	sd := filepath.Join(dir, fmt.Sprintf("jetstream-%d", size))
	logf("  nats-server -js on %s; nats bench js pub async: %d × %d B", addr, n, size)
	p, err := start("nats-server", "nats-server", []string{"-js", "-sd", sd, "-p", port, "-a", "127.0.0.1"}, nil,
		func(out string) bool { return strings.Contains(out, "Server is ready") })
	if err != nil {
		return nil, err
	}
	defer p.stop()
	defer os.RemoveAll(sd)
	csvPath := filepath.Join(dir, fmt.Sprintf("nats-%d.csv", size))
	if _, _, err := runTool(ctx, timeout, natsBin, "--server", "nats://"+addr, "bench", "js", "pub", "async", "bench.strata",
		"--create", "--storage=file", "--msgs", strconv.FormatInt(n, 10), "--size", strconv.Itoa(size),
		"--no-progress", "--csv", csvPath); err != nil {
		return nil, err
	}
	f, err := os.Open(csvPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", csvPath, err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("%s: no data row", csvPath)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimPrefix(h, "#")] = i
	}
	var errs []error
	field := func(name string) float64 {
		i, ok := col[name]
		if !ok || i >= len(rows[1]) {
			errs = append(errs, fmt.Errorf("%s: no column %s", csvPath, name))
			return 0
		}
		v, err := strconv.ParseFloat(rows[1][i], 64)
		errs = append(errs, err)
		return v
	}
	r := &natsResult{Size: size, Records: n}
	r.RecordsPerS = field("MsgsPerSec")
	r.MBPerS = r.RecordsPerS * float64(size) / 1e6
	r.P50Ms = field("P50LatencyMicroSecs") / 1e3
	r.P99Ms = field("P99LatencyMicroSecs") / 1e3
	r.P999Ms = field("P99.9LatencyMicroSecs") / 1e3
	r.MaxMs = field("MaxLatencyMicroSecs") / 1e3
	return r, errors.Join(errs...)
}

// lbResult is what bench/loopback prints with -json.
type lbResult struct {
	Mode   string  `json:"mode"`
	Files  int     `json:"files"`
	Bytes  int64   `json:"bytes"`
	MBPerS float64 `json:"mb_per_s"`
	// SenderCPUSPerGB is the sender's CPU per 10^9 bytes, measured when
	// the receiver ran in a child process (-receiver-process).
	SenderCPUSPerGB float64 `json:"sender_cpu_s_per_gb,omitempty"`
}

// pageCacheRead is one read of scenario 2's topic and the broker's CPU
// seconds per 10^9 bytes it moved.
type pageCacheRead struct {
	*lgRead
	Mode            string  `json:"mode"`
	CopyingBroker   bool    `json:"copying_broker,omitempty"`
	BrokerCPUSPerGB float64 `json:"broker_cpu_s_per_gb"`
}

// s2: consume from the page cache against loopback and raw sendfile, and
// the broker's CPU per GB fetched with zero copy against a broker that
// copies.
func (r *runner) s2(ctx context.Context, s *scenario) error {
	r.cpuFloor(ctx, s) // before this scenario's broker starts (once a run)
	dir := filepath.Join(r.tmp, "s2")
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(dir, "data"), nil)
	if err != nil {
		return err
	}
	defer func() { b.stop() }()
	const topic = "c1k"
	if _, err := r.loadgen(ctx, s, "s2-load-1KiB", b.addr, "-topic", topic, "-create", "-partitions", "3",
		"-size", "1024", "-records", strconv.FormatInt(r.o.n1k, 10), "-acks", "1"); err != nil {
		return err
	}
	step := time.Until(s.deadline) / 12
	passes := strconv.Itoa(r.o.fetchPasses)
	copying := false
	// read runs one read, kept in summary.json as raw s2-<name>.
	read := func(name string, args ...string) *pageCacheRead {
		logf("  %s from the page cache: loadgen %s", name, strings.Join(args, " "))
		before, err1 := cpuSeconds(b.Pid())
		rd, _, err := r.readTopic(ctx, step, b.addr, append([]string{"-topic", topic}, args...)...)
		after, err2 := cpuSeconds(b.Pid())
		if err != nil {
			s.fail(name, err)
			return nil
		}
		pr := &pageCacheRead{lgRead: rd, Mode: args[1], CopyingBroker: copying}
		if errors.Join(err1, err2) == nil && rd.Bytes > 0 {
			pr.BrokerCPUSPerGB = (after - before) / (float64(rd.Bytes) / 1e9)
		}
		logf("    %.0f MB/s, broker %.2f CPU s/GB", rd.MBPerS, pr.BrokerCPUSPerGB)
		s.raw("s2-"+name, pr)
		return pr
	}
	fetchArgs := func(conns int) []string {
		return []string{"-mode", "fetch", "-conns", strconv.Itoa(conns), "-passes", passes}
	}
	var fetch, cons lgRead
	// cpu is the lowest broker CPU s/GB (the least disturbed run) by
	// connections and copying.
	type cpuKey struct {
		conns   int
		copying bool
	}
	cpu := map[cpuKey]float64{}
	lowCPU := func(pr *pageCacheRead, conns int) {
		if pr == nil || pr.BrokerCPUSPerGB <= 0 {
			return
		}
		k := cpuKey{conns, pr.CopyingBroker}
		if v, ok := cpu[k]; !ok || pr.BrokerCPUSPerGB < v {
			cpu[k] = pr.BrokerCPUSPerGB
		}
	}
	for i := range 2 {
		if pr := read(fmt.Sprintf("fetch-3-conns-%d", i+1), fetchArgs(3)...); pr != nil {
			lowCPU(pr, 3)
			if pr.MBPerS > fetch.MBPerS {
				fetch = *pr.lgRead
			}
		}
	}
	lowCPU(read("fetch-1-conn", fetchArgs(1)...), 1)
	if pr := read("consume-franz-go", "-mode", "consume"); pr != nil {
		cons = *pr.lgRead
	}
	// The same fetches from a broker that copies records through user
	// space: the zero-copy path's CPU saving is the difference.
	copying = true
	if err := b.restart("strata.fetch.zero.copy=false"); err != nil {
		s.fail("restart with strata.fetch.zero.copy=false", err)
	} else {
		lowCPU(read("copying-fetch-1-conn", fetchArgs(1)...), 1)
		lowCPU(read("copying-fetch-3-conns", fetchArgs(3)...), 3)
	}
	b.stop()

	var loop, sendf lbResult
	logf("  loopback TCP limit, %d bytes", r.o.loopback)
	if err := runJSON(ctx, step, &loop, r.bins["loopback"], "-json", "-bytes", strconv.FormatInt(r.o.loopback, 10)); err != nil {
		s.fail("loopback", err)
	} else {
		logf("    %.0f MB/s", loop.MBPerS)
		s.raw("s2-loopback", loop)
	}
	var dirs []string
	for p := range int32(3) {
		dirs = append(dirs, filepath.Join(b.dir, segment.PartitionDirName(topic, p)))
	}
	// Raw sendfile to a reader in another process, as the broker's
	// fetches are: its best rate, and the sender's least CPU per GB, the
	// floor of a zero-copy fetch (on loopback the sending kernel also
	// runs the receiving side's TCP processing, as the broker's does).
	// The sender's cost depends on how the reader reads: 64 KiB reads
	// cost it less than 1 MiB reads here, so both are run, twice.
	var sendCPU float64
	for i, read := range []string{"65536", "1048576", "65536", "1048576"} {
		logf("  raw sendfile of the topic's segment files, %s passes, to a reader process (%s-byte reads)", passes, read)
		var sf lbResult
		if err := runJSON(ctx, step, &sf, r.bins["loopback"], "-json", "-sendfile", strings.Join(dirs, ","), "-passes", passes, "-receiver-process", "-read", read); err != nil {
			s.fail("sendfile", err)
			continue
		}
		logf("    %.0f MB/s, sender %.3f CPU s/GB", sf.MBPerS, sf.SenderCPUSPerGB)
		s.raw(fmt.Sprintf("s2-sendfile-%d-read-%s", i+1, read), sf)
		if sf.MBPerS > sendf.MBPerS {
			sendf = sf
		}
		if sf.SenderCPUSPerGB > 0 && (sendCPU == 0 || sf.SenderCPUSPerGB < sendCPU) {
			sendCPU = sf.SenderCPUSPerGB
		}
	}

	f := s.figure("consume from page cache (bare Fetch, 3 connections), MB/s ÷ loopback TCP", "MB/s", &goal{">=", 0.5, onRatio})
	f.setIf(fetch.MBPerS)
	f.ref("loopback TCP, one Go sender and receiver, 1 MiB writes", loop.MBPerS)
	f = s.figure("consume from page cache (bare Fetch, 3 connections), MB/s ÷ raw sendfile", "MB/s", nil)
	f.setIf(fetch.MBPerS)
	f.ref("sendfile(2) of the topic's .log files over loopback, 1 connection, to a reader process (best of 4: 64 KiB and 1 MiB reads, twice)", sendf.MBPerS)
	f = s.figure("consume from page cache (franz-go consumer, records decoded), MB/s ÷ loopback TCP", "MB/s", nil)
	f.setIf(cons.MBPerS)
	f.ref("loopback TCP", loop.MBPerS)
	for _, conns := range []int{1, 3} {
		what := fmt.Sprintf("%d connections", conns)
		if conns == 1 {
			what = "1 connection"
		}
		f := s.figure("broker CPU s per GB fetched, copying broker ÷ zero copy, "+what, "CPU s/GB", nil)
		f.setIf(cpu[cpuKey{conns, true}])
		f.ref("the same fetch from the zero-copy broker (sendfile)", cpu[cpuKey{conns, false}])
		f = s.figure("consume from page cache (bare Fetch, "+what+", zero copy), the broker, CPU s/GB ÷ raw sendfile's sender", "CPU s/GB", nil)
		f.setIf(cpu[cpuKey{conns, false}])
		f.ref("sendfile(2) of the same .log files over loopback, 1 connection, to a reader process, the sender's user+system CPU (getrusage), least of 4 (64 KiB and 1 MiB reads, twice)", sendCPU)
	}
	r.cpuFigure(ctx, s, "consume from page cache (bare Fetch, 3 connections, zero copy), the broker", cpu[cpuKey{3, false}], &goal{"<=", 0.15, onValue})
	bars := barGroup{Title: "S2 consume from page cache", Unit: "MB/s"}
	bars.add("bare Fetch", fetch.MBPerS, false)
	bars.add("franz-go", cons.MBPerS, false)
	bars.add("loopback", loop.MBPerS, true)
	bars.add("sendfile", sendf.MBPerS, true)
	s.Bars = append(s.Bars, bars)
	s.note(fmt.Sprintf("The 1 KiB topic (%d records, 3 partitions) read %s times from offset 0 by bench/loadgen -mode fetch (bare Fetch v11, one reused buffer, batches not decoded; best of 2 with 3 connections) and once by franz-go's consumer (loadgen -mode consume, MB/s of record values). Fetch MB/s counts record-batch bytes.", r.o.n1k, passes))
	s.note("Zero copy against copying: the broker's user+system CPU seconds (from /proc) per 10^9 bytes fetched, lowest run of each; the copying broker is the same binary restarted on the same data with strata.fetch.zero.copy=false, so record bytes pass through user space instead of going from the segment file to the socket with sendfile(2).")
	return nil
}

// s3: three brokers with ZooKeeper, RF 3 acks=all against RF 1.
func (r *runner) s3(ctx context.Context, s *scenario) error {
	r.cpuFloor(ctx, s) // before this scenario's servers start (once a run)
	dir := filepath.Join(r.tmp, "s3")
	zk, zkAddr, err := startZooKeeper(filepath.Join(dir, "zk"))
	if err != nil {
		return err
	}
	defer zk.stop()
	logf("  zookeeper on %s", zkAddr)
	var brokers []*broker
	defer func() {
		for _, b := range brokers {
			b.stop()
		}
	}()
	var addrs []string
	for id := 1; id <= 3; id++ {
		b, err := startBroker(r.bins["strata"], fmt.Sprintf("broker-%d", id), filepath.Join(dir, fmt.Sprintf("broker-%d", id)), nil,
			fmt.Sprintf("broker.id=%d", id), "zookeeper.connect="+zkAddr+"/strata-bench",
			"zookeeper.session.timeout.ms=18000", "offsets.topic.replication.factor=3")
		if err != nil {
			return err
		}
		brokers = append(brokers, b)
		addrs = append(addrs, b.addr)
	}
	seeds := strings.Join(addrs, ",")
	if err := waitBrokers(ctx, seeds, 3, 60*time.Second); err != nil {
		return err
	}
	n := strconv.FormatInt(r.o.rfRecords, 10)
	peak := map[int]*lgResult{}
	half := map[int]*lgResult{}
	for _, rf := range []int{1, 3} {
		label := fmt.Sprintf("s3-rf%d-peak", rf)
		topic := fmt.Sprintf("rf%d", rf)
		res, err := r.loadgen(ctx, s, label, seeds, "-topic", topic, "-create", "-replication-factor", strconv.Itoa(rf),
			"-topic-config", "min.insync.replicas="+strconv.Itoa(min(rf, 2)),
			"-partitions", "3", "-size", "1024", "-records", n, "-acks", "all")
		if err != nil {
			s.fail(fmt.Sprintf("RF %d acks=all peak", rf), err)
			continue
		}
		peak[rf] = res
		rate := strconv.FormatFloat(res.Produce.RecordsPerS/2, 'f', 0, 64)
		label = fmt.Sprintf("s3-rf%d-half-rate", rf)
		res, err = r.loadgen(ctx, s, label, seeds, "-topic", topic, "-partitions", "3", "-size", "1024",
			"-duration", r.o.halfRateTime.String(), "-rate", rate, "-acks", "all")
		if err != nil {
			s.fail(fmt.Sprintf("RF %d acks=all at half peak rate", rf), err)
			continue
		}
		half[rf] = res
		s.curve("produce latency", fmt.Sprintf("S3 RF %d acks=all, half peak rate", rf), res.Produce.Latency.Curve)
	}
	// acks=1 on the same topics, for the replication comparison: RF 1 acks=1,
	// RF 3 acks=1 and RF 3 acks=all against the RF 1 acks=1 figure.
	acks1 := map[int]*lgResult{}
	for _, rf := range []int{1, 3} {
		res, err := r.loadgen(ctx, s, fmt.Sprintf("s3-rf%d-acks1-peak", rf), seeds, "-topic", fmt.Sprintf("rf%d", rf),
			"-partitions", "3", "-size", "1024", "-records", n, "-acks", "1")
		if err != nil {
			s.fail(fmt.Sprintf("RF %d acks=1 peak", rf), err)
			continue
		}
		acks1[rf] = res
	}
	// Each follower's CPU per GB: a topic that broker 1 leads on every
	// partition, so that brokers 2 and 3 only follow (the topics above
	// spread their leaders).
	const oneLeader = "rf3-one-leader"
	leaderRun := r.s3OneLeader(ctx, s, seeds, brokers, oneLeader, n)
	for _, topic := range []string{"rf1", "rf3", oneLeader} {
		if d, err := describeTopic(ctx, seeds, topic); err != nil {
			s.note(fmt.Sprintf("Topic %s: metadata: %v.", topic, err))
		} else {
			s.note(fmt.Sprintf("Topic %s after the runs (Metadata): %s.", topic, d))
		}
	}
	for _, b := range brokers {
		if !b.Alive() {
			s.fail(b.Name, fmt.Errorf("exited during the run: %s", b.Tail(800)))
		}
	}
	f := s.figure("RF 3 acks=all, MB/s ÷ RF 1 acks=all (3 brokers, 1 KiB)", "MB/s", &goal{">=", 0.5, onRatio})
	if n := runtime.NumCPU(); n < len(brokers)+1 {
		// Each broker appends every byte and the producer sends it: with
		// fewer cores than those four processes, RF 3 shares the CPU that
		// RF 1 has to itself, whatever the code does. Each follower's CPU
		// per GB (below) is the goal this machine can measure.
		f.Unmeasurable = fmt.Sprintf("3 brokers, ZooKeeper and the producer on %d CPUs; the follower CPU s/GB goal replaces it", n)
	}
	if p := peak[3]; p != nil {
		f.set(p.Produce.MBPerS)
	}
	if p := peak[1]; p != nil {
		f.ref("RF 1, same cluster and load", p.Produce.MBPerS)
	}
	f = s.figure("RF 3 acks=all, p99 produce latency at half of its peak rate", "ms", &goal{"<=", 20, onValue})
	if h := half[3]; h != nil {
		f.set(h.Produce.Latency.P99Ms)
	}
	if h := half[1]; h != nil {
		f.ref("RF 1 at half of its peak rate", h.Produce.Latency.P99Ms)
	}
	for _, c := range []struct {
		name string
		res  *lgResult
	}{{"RF 3 acks=1, MB/s ÷ RF 1 acks=1 (3 brokers, 1 KiB)", acks1[3]}, {"RF 3 acks=all, MB/s ÷ RF 1 acks=1 (3 brokers, 1 KiB)", peak[3]}} {
		f := s.figure(c.name, "MB/s", nil)
		if c.res != nil {
			f.set(c.res.Produce.MBPerS)
		}
		if p := acks1[1]; p != nil {
			f.ref("RF 1 acks=1, same cluster and load", p.Produce.MBPerS)
		}
	}
	var leaderCPU, followerCPU float64
	if leaderRun != nil {
		leaderCPU = leaderRun.cpu.perGB(brokers[0].Name, leaderRun.res.Produce.Bytes)
		var per []string
		for i, b := range brokers {
			c := leaderRun.cpu.perGB(b.Name, leaderRun.res.Produce.Bytes)
			if i > 0 {
				followerCPU = max(followerCPU, c)
			}
			role := "follower"
			if i == 0 {
				role = "leader"
			}
			per = append(per, fmt.Sprintf("%s (%s) %.2f CPU s/GB, %.2f cores", b.Name, role, c, leaderRun.cpu.cores(leaderRun.cpu.Procs[b.Name])))
		}
		p := leaderRun.res.Produce
		s.note(fmt.Sprintf("CPU per GB replicated: topic %s, 3 partitions all on replicas [1, 2, 3] (broker 1 leads each; checked in the metadata before the run and at its end, which waits until both followers are in the ISR), min.insync.replicas 2, %s records of 1 KiB, 1 producer, acks=all: %.1f MB/s; %s; the host busy %.2f cores, load from elsewhere %.2f cores. Each broker's user+system CPU seconds from /proc over the loadgen run, per 10^9 bytes of record values produced (each follower stores all of them).",
			oneLeader, n, p.MBPerS, strings.Join(per, "; "), leaderRun.cpu.cores(leaderRun.cpu.HostBusyS), leaderRun.cpu.cores(leaderRun.cpu.OtherS)))
	}
	r.cpuFigure(ctx, s, "RF 3 acks=all, each follower (the higher of two), the broker", followerCPU, &goal{"<=", 0.6, onValue})
	r.cpuFigure(ctx, s, "RF 3 acks=all, the leader, the broker", leaderCPU, nil)
	bars := barGroup{Title: "S3 3 brokers, acks=all", Unit: "MB/s"}
	for _, rf := range []int{3, 1} {
		if p := peak[rf]; p != nil {
			bars.add(fmt.Sprintf("RF %d", rf), p.Produce.MBPerS, rf == 1)
		}
	}
	s.Bars = append(s.Bars, bars)
	for _, rf := range []int{1, 3} {
		if p := peak[rf]; p != nil {
			l := p.Produce.Latency
			s.row(fmt.Sprintf("RF %d peak", rf), "1 KiB", p.Produce.RecordsPerS, p.Produce.MBPerS, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
		}
		if h := half[rf]; h != nil {
			l := h.Produce.Latency
			s.row(fmt.Sprintf("RF %d at half peak", rf), "1 KiB", h.Produce.RecordsPerS, h.Produce.MBPerS, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
		}
		if a := acks1[rf]; a != nil {
			l := a.Produce.Latency
			s.row(fmt.Sprintf("RF %d acks=1 peak", rf), "1 KiB", a.Produce.RecordsPerS, a.Produce.MBPerS, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
		}
	}
	s.note(fmt.Sprintf("Three brokers on this machine with ZooKeeper; topics of 3 partitions, min.insync.replicas = min(RF, 2); peak: %s records of 1 KiB, 1 producer, acks=all (and acks=1 for the acks=1 rows); half rate: %v at half the peak records/s of the same topic.", n, r.o.halfRateTime))
	return nil
}

// s3OneLeader produces n records of 1 KiB with acks=all to a new RF 3
// topic that brokers[0] leads on every partition, measuring each broker's
// CPU over the run; nil if a step failed (recorded in s).
func (r *runner) s3OneLeader(ctx context.Context, s *scenario, seeds string, brokers []*broker, topic, n string) *produceRun {
	replicas := []int32{1, 2, 3} // brokers[i] has broker.id i+1
	if err := createOnReplicas(ctx, seeds, topic, 3, replicas, map[string]string{"min.insync.replicas": "2"}); err != nil {
		s.fail("RF 3 topic led by one broker", err)
		return nil
	}
	var procs []*process
	for _, b := range brokers {
		procs = append(procs, b.process)
	}
	adm, err := newAdmin(seeds)
	if err != nil {
		s.fail("RF 3 acks=all, one leader", err)
		return nil
	}
	defer adm.Close()
	m := startCPU(procs...)
	res, err := r.loadgen(ctx, s, "s3-rf3-one-leader", seeds, "-topic", topic, "-partitions", "3", "-size", "1024", "-records", n, "-acks", "all")
	if err != nil {
		s.fail("RF 3 acks=all, one leader", err)
		return nil
	}
	// A follower that left the ISR during the run copies the rest after
	// it: the measurement ends when both are back in the ISR, with the
	// leader unchanged.
	lerr := waitLedBy(ctx, adm, topic, 3, replicas, 30*time.Second)
	run := &produceRun{res: res}
	run.cpu, err = m.stop(res.clientCPU)
	s.raw("s3-rf3-one-leader-cpu", run.cpu)
	if err = errors.Join(err, lerr); err != nil {
		s.fail("RF 3 acks=all, one leader", err)
		return nil
	}
	for _, b := range brokers {
		logf("    %s: %.2f CPU s/GB", b.Name, run.cpu.perGB(b.Name, res.Produce.Bytes))
	}
	return run
}

// runReplay runs the replay measurement once for scenarios 4 and 5.
func (r *runner) runReplay(ctx context.Context, s *scenario) (*replayReport, error) {
	if r.ranRep {
		return r.replayRep, r.replayErr
	}
	r.ranRep = true
	r.replayRep, r.replayErr = r.replay(ctx, s, r.replayOptions("replay"))
	return r.replayRep, r.replayErr
}

// replayOptions are the replay settings of this run's flags, with results
// under name.
func (r *runner) replayOptions(name string) replayOptions {
	var quotas []string
	for _, q := range strings.Split(r.o.replayQuotas, ",") {
		if q = strings.TrimSpace(q); q != "" {
			quotas = append(quotas, q)
		}
	}
	return replayOptions{name: name, bytes: r.o.replayBytes, repeat: r.o.replayRepeat, consume: r.o.replayCons,
		tailTime: r.o.tailTime, getConns: r.o.getConns, perfOut: r.o.replayPerf, traceOut: r.o.replayTrace,
		overrides: r.o.replayOverrides, quotas: quotas}
}

// replayFigures are the best raw and replay rates of one replay run. fwd
// is the best GET-and-forward pass (rawGets). coldCPU and warmCPU are the
// broker's least CPU s/GB of the cold and warm bare Fetch replays.
type replayFigures struct {
	raw, fwd, cold, warm, coldCons, warmCons float64
	coldCPU, warmCPU                         float64
}

// lowest is the least of v and x > 0 (v zero: none yet).
func lowest(v, x float64) float64 {
	if x > 0 && (v == 0 || x < v) {
		return x
	}
	return v
}

func (rep *replayReport) figures() replayFigures {
	var f replayFigures
	for _, x := range rep.Raw {
		if x.Forward {
			f.fwd = max(f.fwd, x.MBPerS)
		} else {
			f.raw = max(f.raw, x.MBPerS)
		}
	}
	for _, x := range rep.Replays {
		switch {
		case strings.HasPrefix(x.Label, "cold fetch"):
			f.cold = max(f.cold, x.MBPerS)
			f.coldCPU = lowest(f.coldCPU, x.BrokerCPUSPerGB)
		case strings.HasPrefix(x.Label, "warm fetch"):
			f.warm = max(f.warm, x.MBPerS)
			f.warmCPU = lowest(f.warmCPU, x.BrokerCPUSPerGB)
		case strings.HasPrefix(x.Label, "cold consume"):
			f.coldCons = max(f.coldCons, x.MBPerS)
		case strings.HasPrefix(x.Label, "warm consume"):
			f.warmCons = max(f.warmCons, x.MBPerS)
		}
	}
	return f
}

// s4: replay from MinIO, cold and warm, against raw ranged GETs.
func (r *runner) s4(ctx context.Context, s *scenario) error {
	r.cpuFloor(ctx, s) // before this scenario's servers start (once a run)
	rep, err := r.runReplay(ctx, s)
	if rep == nil {
		return err
	}
	if err != nil {
		s.fail("replay", err)
	}
	fig := rep.figures()
	raw, cold, warm, coldCons, warmCons := fig.raw, fig.cold, fig.warm, fig.coldCons, fig.warmCons
	rawName := fmt.Sprintf("raw parallel ranged GETs of the same objects (best of 4 and 16 MiB ranges, %s concurrent)", r.o.getConns)
	f := s.figure("replay from offset 0, cold cache (bare Fetch), MB/s ÷ raw GETs", "MB/s", &goal{">=", 0.8, onRatio})
	f.setIf(cold)
	f.ref(rawName, raw)
	f = s.figure("replay from offset 0, cold cache (bare Fetch), MB/s ÷ GET and forward over loopback", "MB/s", nil)
	f.setIf(cold)
	f.ref("the same GETs, each body written to a loopback TCP connection and read back (the least work of any server passing the bytes on)", fig.fwd)
	f = s.figure("replay from offset 0, warm cache (bare Fetch), MB/s ÷ raw GETs", "MB/s", nil)
	f.setIf(warm)
	f.ref(rawName, raw)
	if r.o.replayCons {
		f = s.figure("replay from offset 0, cold cache (franz-go consumer), MB/s ÷ raw GETs", "MB/s", nil)
		f.setIf(coldCons)
		f.ref(rawName, raw)
		f = s.figure("replay from offset 0, warm cache (franz-go consumer), MB/s ÷ raw GETs", "MB/s", nil)
		f.setIf(warmCons)
		f.ref(rawName, raw)
	}
	r.cpuFigure(ctx, s, "replay from offset 0, cold cache (bare Fetch), the broker alone", fig.coldCPU, &goal{"<=", 1.0, onValue})
	r.cpuFigure(ctx, s, "replay from offset 0, warm cache (bare Fetch), the broker alone", fig.warmCPU, nil)
	bars := barGroup{Title: "S4 replay from MinIO", Unit: "MB/s"}
	bars.add("cold", cold, false)
	bars.add("warm", warm, false)
	bars.add("raw GETs", raw, true)
	s.Bars = append(s.Bars, bars)
	// Throughput over time of the first cold and warm fetch replays.
	for _, name := range []string{"cold-fetch-1.csv", "warm-fetch-1.1.csv"} {
		if ser, err := readSeries(filepath.Join(r.out, "replay", "series", name)); err == nil {
			ser.Name = strings.TrimSuffix(name, ".csv")
			s.Series = append(s.Series, ser)
		}
	}
	s.note(fmt.Sprintf("MinIO and one broker; %d MiB of 1 KiB records in 3 partitions, every segment offloaded and deleted locally before the replays; cold = broker restarted with an empty chunk cache; best of %d runs each (broker CPU s/GB: the broker's user+system seconds from /proc over each loadgen read per 10^9 bytes fetched, MinIO's and the consumer's not counted, least of the runs). Every record verified in order from a cold cache: %s. Full table: replay/replay.md.",
		r.o.replayBytes>>20, r.o.replayRepeat, orDash(rep.Verified)))
	if r.o.storeLink == "" {
		return nil
	}
	// The same with MinIO across a network link, as a bucket is: the
	// link, not the two shared cores, is then the store's limit.
	lo := r.replayOptions("replay-link")
	lo.storeLink, lo.consume, lo.tailTime = r.o.storeLink, false, 5*time.Second
	// The profiles, if asked for, are of the loopback replay.
	lo.perfOut, lo.traceOut = "", ""
	linked, lerr := r.replay(ctx, s, lo)
	r.linkRep = linked
	if linked == nil {
		return fmt.Errorf("replay with MinIO behind a %s link: %w", r.o.storeLink, lerr)
	}
	if lerr != nil {
		s.fail("replay behind the link", lerr)
	}
	lf := linked.figures()
	linkRaw := fmt.Sprintf("raw parallel ranged GETs over the same %s link (best of 4 and 16 MiB ranges, %s concurrent)", r.o.storeLink, r.o.getConns)
	f = s.figure(fmt.Sprintf("replay from offset 0, MinIO behind a %s link, cold cache (bare Fetch), MB/s ÷ raw GETs over the link", r.o.storeLink), "MB/s", &goal{">=", 0.8, onRatio})
	f.setIf(lf.cold)
	f.ref(linkRaw, lf.raw)
	f = s.figure(fmt.Sprintf("replay from offset 0, MinIO behind a %s link, warm cache (bare Fetch), MB/s ÷ raw GETs over the link", r.o.storeLink), "MB/s", nil)
	f.setIf(lf.warm)
	f.ref(linkRaw, lf.raw)
	bars = barGroup{Title: "S4 replay, MinIO behind a " + r.o.storeLink + " link", Unit: "MB/s"}
	bars.add("cold", lf.cold, false)
	bars.add("raw GETs", lf.raw, true)
	s.Bars = append(s.Bars, bars)
	s.note(fmt.Sprintf("The same replay with MinIO in a network namespace of its own behind a veth link shaped to %s (tc tbf), as a bucket across a network is; the raw GETs cross the same link. On loopback MinIO, the broker and the consumer share the two cores, and the replay moves every byte twice where the raw GETs move it once. Verified: %s. Full table: replay-link/replay.md.",
		r.o.storeLink, orDash(linked.Verified)))
	return nil
}

// s5: tail latency during scenario 4's replays against alone, and its
// curve against the replay rate at several remote fetch quotas.
func (r *runner) s5(ctx context.Context, s *scenario) error {
	rep, err := r.runReplay(ctx, s)
	if rep == nil {
		return err
	}
	var alone, during *float64
	var mbps float64
	for _, t := range rep.Tail {
		p99 := t.P99Ms
		switch {
		case t.Label == "alone":
			alone = &p99
			s.curve("tail consumer end-to-end latency", "S5 tail alone", t.Curve)
		case t.Replay != nil && t.Quota == "":
			during = &p99
			s.curve("tail consumer end-to-end latency", "S5 tail during cold replays", t.Curve)
			mbps = t.Replay.MBPerS
		}
	}
	if alone == nil || during == nil {
		return errors.Join(errors.New("the replay measured no tail latency"), err)
	}
	f := s.figure("tail consumer p99 end-to-end latency during cold replays ÷ alone", "ms", &goal{"<=", 2, onRatio})
	f.set(*during)
	f.ref("the same tail consumer with no replay", *alone)
	s.RowHeader = []string{"MinIO", "run", "replay MB/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "p99 ÷ alone"}
	s.quotaCurve("loopback", rep)
	if r.linkRep != nil {
		s.quotaCurve("behind a "+r.o.storeLink+" link", r.linkRep)
	}
	s.note(fmt.Sprintf("A producer at 1,000 records/s of 1 KiB and a consumer at the end of another topic of the same broker, %v each; during: cold replays of scenario 4's topic back to back (%.0f MB/s at the broker's default remote fetch quota), with a chunk cache smaller than the data so each replay reads the bucket. The curve: the same with remote.log.manager.fetch.max.bytes.per.second set at run time to each of -replay-quotas (quota.png: p99 during ÷ p99 of the tail run alone just before, against the replay rate), each point after a tail run alone of its own.", r.o.tailTime, mbps))
	return nil
}

// quotaCurve adds the rows and the plotted curve of one replay run's
// tail latency against the replay rate at each quota.
func (s *scenario) quotaCurve(where string, rep *replayReport) {
	alone := 0.0 // the last tail run alone, the reference of the runs after it
	c := tradeoff{Name: "MinIO " + where}
	for _, t := range rep.Tail {
		if t.Replay == nil {
			alone = t.P99Ms
		}
		ratio := "—"
		if alone > 0 {
			ratio = strconv.FormatFloat(t.P99Ms/alone, 'f', 2, 64)
		}
		replay := "—"
		if t.Replay != nil {
			replay = num(t.Replay.MBPerS)
			label := t.Quota
			if label == "" {
				label = "default"
			} else if v, err := strconv.ParseFloat(label, 64); err == nil {
				label = num(v/1e6) + " MB/s"
			}
			if alone > 0 {
				c.Points = append(c.Points, tradeoffPoint{Label: label, X: t.Replay.MBPerS, Y: t.P99Ms / alone})
			}
		}
		s.Rows = append(s.Rows, []string{where, t.Label, replay, num(t.P50Ms), num(t.P99Ms), num(t.P999Ms), num(t.MaxMs), ratio})
	}
	if len(c.Points) > 0 {
		s.Tradeoffs = append(s.Tradeoffs, c)
	}
}

// s6: produce and tail latency at growing retained size.
func (r *runner) s6(ctx context.Context, s *scenario) error {
	var levels []float64
	for _, f := range strings.Split(r.o.scaleLevels, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("-scale-levels %q: bad level %q", r.o.scaleLevels, f)
		}
		levels = append(levels, v)
	}
	asked := append([]float64(nil), levels...)
	dir := filepath.Join(r.tmp, "s6")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Room on disk: the bucket keeps everything; leave 15 GiB spare for
	// the rest of the machine (the disk is shared).
	free := freeBytes(dir)
	top := levels[len(levels)-1]
	if room := (float64(free) - 15*(1<<30)) / 1.1 / (1 << 30); room < top {
		scale := max(room, 0.1) / top
		for i := range levels {
			levels[i] = math.Round(levels[i]*scale*100) / 100
		}
		s.note(fmt.Sprintf("Retained sizes scaled down from %v GiB to %v GiB to fit the %.1f GiB free on the disk.", asked, levels, float64(free)/(1<<30)))
	}

	minioBin, err := miniotest.Binary()
	if err != nil {
		return err
	}
	mp, maddr, err := startMinIO(minioBin, filepath.Join(dir, "minio"), nil /* on loopback */)
	if err != nil {
		return err
	}
	defer mp.stop()
	mc, err := minio.New(maddr, &minio.Options{Creds: credentials.NewStaticV4(minioUser, minioSecret, "")})
	if err != nil {
		return err
	}
	const bucket = "strata-scale"
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("make bucket: %w", err)
	}
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(dir, "data"), minioEnv(),
		"remote.storage.s3.endpoint=http://"+maddr, "remote.storage.s3.bucket="+bucket,
		"remote.cache.dir="+filepath.Join(dir, "cache"), "log.retention.check.interval.ms=1000",
		"log.segment.delete.delay.ms=1000")
	if err != nil {
		return err
	}
	defer b.stop()
	const topic = "scale"
	cfg := []string{"-topic-config", "remote.storage.enable=true", "-topic-config", "segment.bytes=" + strconv.FormatInt(r.o.scaleSegment, 10),
		"-topic-config", "local.retention.bytes=1", "-topic-config", "local.retention.ms=1000"}
	common := []string{"-topic", topic, "-partitions", "3", "-size", "1024", "-acks", "1"}

	var produced int64 // value bytes in the topic
	type level struct {
		GiB        float64 `json:"retained_gib"`
		BucketGiB  float64 `json:"bucket_gib"`
		LocalGiB   float64 `json:"local_gib"`
		Peak       *lgResult
		Tail       *lgResult
		FillMBPerS float64 `json:"fill_mb_per_s"`
		CatchUpS   float64 `json:"archiver_catch_up_s"`
	}
	var done []*level
	created := false
	fillRate := 0.0 // MB/s measured so far
	for i, lv := range levels {
		target := int64(lv * (1 << 30))
		// Grow in steps, stopping early when the rest would not fit the
		// scenario's bound (reserving time for the measurements of this
		// and the later levels).
		for target-produced >= 1<<20 { // whole records; a remainder under 1 MiB is close enough
			chunk := min(target-produced, 4<<30)
			left := time.Until(s.deadline) - time.Duration(len(levels)-i)*(r.o.scaleTail+time.Duration(max(1, r.o.scaleRepeat))*20*time.Second+30*time.Second)
			if fillRate > 0 && time.Duration(float64(chunk)/1e6/fillRate*float64(time.Second)) > left {
				s.note(fmt.Sprintf("Stopped growing at %.2f GiB retained (level %v GiB asked): the scenario's time bound would not fit the rest at the %.0f MB/s fill rate measured.", float64(produced)/(1<<30), lv, fillRate))
				target = produced
				break
			}
			args := append([]string{"-records", strconv.FormatInt(chunk/1024, 10)}, common...)
			if !created {
				args = append(append(args, "-create"), cfg...)
				created = true
			}
			res, err := r.loadgen(ctx, s, fmt.Sprintf("s6-fill-to-%.2fGiB", float64(produced+chunk)/(1<<30)), b.addr, args...)
			if res != nil && res.Produce != nil {
				produced += res.Produce.Bytes
				fillRate = res.Produce.MBPerS
			}
			if err != nil {
				return err
			}
		}
		if target == produced && len(done) > 0 && float64(produced)/(1<<30) <= done[len(done)-1].GiB {
			break
		}
		catchUp := func() float64 {
			// Let the archiver catch up (bounded), so that every
			// measurement starts from the same state: the sealed
			// segments in the bucket, at most two .log files per
			// partition left locally.
			t0 := time.Now()
			for time.Since(t0) < 90*time.Second && time.Until(s.deadline) > 30*time.Second {
				if localLogs(b.dir, topic).nonEmpty <= 2*3 {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			return time.Since(t0).Seconds()
		}
		l := &level{GiB: float64(produced) / (1 << 30), FillMBPerS: fillRate, CatchUpS: catchUp()}
		l.BucketGiB = float64(bucketBytes(ctx, mc, bucket)) / (1 << 30)
		l.LocalGiB = float64(localLogs(b.dir, topic).bytes) / (1 << 30)
		tag := fmt.Sprintf("%.2fGiB", l.GiB)
		logf("  retained %.2f GiB produced, %.2f GiB in the bucket, %.2f GiB local", l.GiB, l.BucketGiB, l.LocalGiB)
		for k := range max(1, r.o.scaleRepeat) {
			if k > 0 {
				catchUp()
			}
			res, err := r.loadgen(ctx, s, fmt.Sprintf("s6-peak-at-%s-%d", tag, k+1), b.addr, append([]string{"-records", strconv.FormatInt(r.o.scaleMeasure, 10)}, common...)...)
			if err != nil {
				return err
			}
			produced += res.Produce.Bytes
			if l.Peak == nil || res.Produce.MBPerS > l.Peak.Produce.MBPerS {
				l.Peak = res
			}
		}
		catchUp()
		res, err := r.loadgen(ctx, s, "s6-tail-at-"+tag, b.addr, append([]string{"-duration", r.o.scaleTail.String(), "-rate", "1000", "-consumers", "1"}, common...)...)
		if err != nil {
			return err
		}
		l.Tail = res
		produced += res.Produce.Bytes
		done = append(done, l)
		s.curve("tail consumer end-to-end latency", fmt.Sprintf("S6 tail at %.2f GiB retained", l.GiB), res.Consume.Latency.Curve)
	}
	s.raw("s6-levels", done)
	if len(done) == 0 {
		return errors.New("no level measured")
	}
	first, last := done[0], done[len(done)-1]
	f := s.figure(fmt.Sprintf("produce MB/s at %.2f GiB retained ÷ at %.2f GiB", last.GiB, first.GiB), "MB/s", &goal{">=", 0.9, onRatio})
	f.set(last.Peak.Produce.MBPerS)
	f.ref(fmt.Sprintf("the same produce at %.2f GiB retained", first.GiB), first.Peak.Produce.MBPerS)
	f = s.figure(fmt.Sprintf("tail consumer p99 end-to-end latency at %.2f GiB retained ÷ at %.2f GiB", last.GiB, first.GiB), "ms", nil)
	f.set(last.Tail.Consume.Latency.P99Ms)
	f.ref(fmt.Sprintf("at %.2f GiB", first.GiB), first.Tail.Consume.Latency.P99Ms)
	bars := barGroup{Title: "S6 produce vs retained size", Unit: "MB/s"}
	for i, l := range done {
		bars.add(fmt.Sprintf("%.2f GiB", l.GiB), l.Peak.Produce.MBPerS, i == 0)
		p, t := l.Peak.Produce, l.Tail.Consume.Latency
		s.row(fmt.Sprintf("%.2f GiB retained (%.2f in bucket, %.2f local)", l.GiB, l.BucketGiB, l.LocalGiB), "1 KiB",
			p.RecordsPerS, p.MBPerS, p.Latency.P50Ms, p.Latency.P99Ms, t.P50Ms, t.P99Ms)
	}
	s.Bars = append(s.Bars, bars)
	s.RowHeader = []string{"run", "record", "records/s", "MB/s", "produce p50 ms", "produce p99 ms", "tail e2e p50 ms", "tail e2e p99 ms"}
	if top := asked[len(asked)-1]; last.GiB < top*0.95 {
		s.note(fmt.Sprintf("SMALLER THAN ASKED: the largest retained size measured is %.2f GiB, not the %v GiB of -scale-levels (levels asked: %v GiB).", last.GiB, top, asked))
	}
	s.note(fmt.Sprintf("One broker tiering to MinIO; topic with remote.storage.enable, segment.bytes %d MiB, local.retention.bytes=1, local.retention.ms=1000, so the local disk keeps about one segment per partition while the bucket keeps everything. The topic is filled to each level with loadgen (acks=1); the run then waits (at most 90 s) until the archiver has uploaded the fill and local retention trimmed it (at most 2 .log files per partition left), and measures %d records of 1 KiB at full speed (acks=1, 1 producer, linger 0; best of %d runs, each after such a wait), then %v at 1,000 records/s with a consumer at the end of the same topic. Retained counts record values produced; the bucket figure is the objects' bytes at the start of the measurement.", r.o.scaleSegment>>20, r.o.scaleMeasure, max(1, r.o.scaleRepeat), r.o.scaleTail))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// bucketBytes sums the sizes of every object in bucket (0 on error).
func bucketBytes(ctx context.Context, mc *minio.Client, bucket string) int64 {
	var n int64
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return n
		}
		n += o.Size
	}
	return n
}

// logFiles are the segment .log files of one topic's partitions on a
// broker's disk.
type logFiles struct {
	files    map[int32]int // .log files by partition
	nonEmpty int           // of all partitions, the .log files holding data
	bytes    int64         // of all of them
}

// localLogs counts the segment .log files of topic's partition directories
// (<topic>-<partition>) under dataDir.
func localLogs(dataDir, topic string) logFiles {
	l := logFiles{files: map[int32]int{}}
	dirs, _ := os.ReadDir(dataDir) // a missing directory holds no files
	for _, d := range dirs {
		t, p, ok := segment.ParsePartitionDirName(d.Name())
		if !ok || t != topic || !d.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(dataDir, d.Name())) // deleted since: no files
		for _, f := range files {
			if _, suffix, err := segment.ParseSegmentFileName(f.Name()); err != nil || suffix != segment.LogSuffix {
				continue
			}
			fi, err := f.Info()
			if err != nil {
				continue // deleted by retention since the listing
			}
			l.files[p]++
			if fi.Size() > 0 {
				l.nonEmpty++
				l.bytes += fi.Size()
			}
		}
	}
	return l
}

// readSeries reads a loadgen -series CSV (cumulative bytes every 100 ms)
// and returns the throughput over windows of 250 ms: one Fetch response
// carries up to 32 MiB per partition, so 100 ms samples mostly show when
// responses happened to land.
func readSeries(path string) (series, error) {
	var s series
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return s, err
	}
	const window = 0.25
	prevT, prevB := 0.0, 0.0
	for i, row := range rows[min(1, len(rows)):] {
		if len(row) < 2 {
			continue
		}
		t, err1 := strconv.ParseFloat(row[0], 64)
		b, err2 := strconv.ParseFloat(row[1], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if t-prevT >= window-0.01 || i == len(rows)-2 {
			s.T = append(s.T, t)
			s.MBPerS = append(s.MBPerS, (b-prevB)/(t-prevT)/1e6)
			prevT, prevB = t, b
		}
	}
	return s, nil
}
