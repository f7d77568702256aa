// Command brokerbench runs the issue-3 broker benchmark in one go and writes
// a Markdown table of figures and ratios:
//
//   - the loopback TCP limit (bench/loopback);
//   - a Strata broker (built from ./cmd/strata, started on a free port with a
//     temporary data directory) loaded with bench/kafkaperf: produce at 100 B
//     and 1 KiB, acks=1 and all, no compression and lz4; then consume the
//     1 KiB topic from the page cache, as franz-go records and as bare Fetch
//     requests, with the broker's CPU seconds per GB fetched;
//   - NATS JetStream (Debian's nats-server -js, file storage) loaded with
//     natscli's `nats bench js pub async` at the same sizes and counts.
//
// Run it from the repository root (bench/run-issue3.sh does). Results go to
// bench/results/<date>/results.md (and results.json) and to stdout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratastream/strata/bench/internal/benchutil"
)

// perf is what bench/kafkaperf prints with -json.
type perf struct {
	Mode        string  `json:"mode"`
	Topic       string  `json:"topic"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Size        int     `json:"size,omitempty"`
	Partitions  int     `json:"partitions"`
	Acks        string  `json:"acks,omitempty"`
	Compression string  `json:"compression,omitempty"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	P999Ms      float64 `json:"p999_ms,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	Requests    int64   `json:"requests,omitempty"`
	Conns       int     `json:"conns,omitempty"`
	Passes      int     `json:"passes,omitempty"`
	// BrokerCPUSPerGB is the broker's user+system CPU seconds per 10^9
	// bytes moved, for consume and fetch runs.
	BrokerCPUSPerGB float64 `json:"broker_cpu_s_per_gb,omitempty"`
	// CopyPath marks fetch runs against a broker started with
	// strata.fetch.zero.copy=false (records copied through user space).
	CopyPath bool `json:"copy_path,omitempty"`
}

// loopbackResult is what bench/loopback prints with -json.
type loopbackResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MBPerS  float64 `json:"mb_per_s"`
}

// natsResult is one `nats bench js pub async` run.
type natsResult struct {
	Size        int     `json:"size"`
	Records     int     `json:"records"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	Error       string  `json:"error,omitempty"`
}

// report is everything one run measured.
type report struct {
	Date     string            `json:"date"`
	Command  string            `json:"command"`
	Machine  string            `json:"machine"`
	Loopback []*loopbackResult `json:"loopback"`
	Produce  []*perf           `json:"produce"`
	Consume  []*perf           `json:"consume"`
	NATS     []*natsResult     `json:"nats"`
	Errors   []string          `json:"errors,omitempty"`
}

type options struct {
	out           string
	records100    int
	records1k     int
	partitions    int
	loopbackBytes int64
	strataBin     string
	natsBin       string
	skipNATS      bool
	stepTimeout   time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", filepath.Join("bench", "results", time.Now().Format("2006-01-02")), "directory for results.md and results.json")
	flag.IntVar(&o.records100, "records100", 1_000_000, "records per 100 B run (Strata and JetStream)")
	flag.IntVar(&o.records1k, "records1k", 500_000, "records per 1 KiB run (Strata and JetStream)")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions per Strata topic")
	flag.Int64Var(&o.loopbackBytes, "loopback-bytes", 4<<30, "bytes for the loopback TCP limit")
	flag.StringVar(&o.strataBin, "strata", "", "prebuilt strata binary (default: build ./cmd/strata)")
	flag.StringVar(&o.natsBin, "nats", "", "natscli binary (default: nats on PATH or in $(go env GOPATH)/bin)")
	flag.BoolVar(&o.skipNATS, "skip-nats", false, "skip the JetStream comparison")
	flag.DurationVar(&o.stepTimeout, "step-timeout", 3*time.Minute, "bound on each benchmark step")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "brokerbench: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (go.mod not found)")
	}
	tmp, err := os.MkdirTemp("", "strata-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rep := &report{
		Date:    time.Now().Format(time.RFC3339),
		Command: reproduceCommand(os.Args[1:]),
		Machine: machine(),
	}
	logf("building tools")
	bins := map[string]string{"kafkaperf": "./bench/kafkaperf", "loopback": "./bench/loopback"}
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

	// The loopback limit is measured before and after the brokers; the
	// best of the two is the limit (this machine's rate wanders).
	loopback := func() error {
		logf("loopback TCP limit (%d bytes)", o.loopbackBytes)
		var lb loopbackResult
		if err := runJSON(o.stepTimeout, &lb, filepath.Join(tmp, "loopback"), "-json", "-bytes", fmt.Sprint(o.loopbackBytes)); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
		logf("  %.0f MB/s", lb.MBPerS)
		rep.Loopback = append(rep.Loopback, &lb)
		return nil
	}
	if err := loopback(); err != nil {
		return err
	}

	if err := benchStrata(o, tmp, kafkaperf, rep); err != nil {
		rep.Errors = append(rep.Errors, "strata: "+err.Error())
		logf("strata: %v", err)
	}
	if !o.skipNATS {
		benchNATS(o, tmp, rep)
	}
	if err := loopback(); err != nil {
		return err
	}

	md := markdown(rep)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s", filepath.Join(o.out, "results.md"))
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d step(s) failed: %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return nil
}

// reproduceCommand is the command line that repeats this run, without the
// -nats path that bench/run-issue3.sh fills in.
func reproduceCommand(args []string) string {
	cmd := []string{"bench/run-issue3.sh"}
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-nats" || args[i] == "--nats":
			i++
		case strings.HasPrefix(args[i], "-nats=") || strings.HasPrefix(args[i], "--nats="):
		default:
			cmd = append(cmd, args[i])
		}
	}
	return strings.Join(cmd, " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "brokerbench: "+format+"\n", args...)
}

func machine() string {
	kernel := benchutil.KernelRelease()
	return fmt.Sprintf("%d CPUs, %s/%s, Linux %s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, kernel, runtime.Version())
}

// runJSON runs a command with a bound and decodes its stdout as JSON.
func runJSON(timeout time.Duration, v any, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return json.Unmarshal(out.Bytes(), v)
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// process is a server started for the benchmark.
type process struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
}

// start runs a server and waits until ready reports true (bounded).
func start(name string, args []string, ready func(out string) bool) (*process, error) {
	cmd := exec.Command(name, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, out: &bytes.Buffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 64)
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			select {
			case lines <- s.Text():
			default: // nobody waits any more; keep draining
			}
		}
	}()
	go func() {
		_ = cmd.Wait() // its status is reported by the caller through exited
		pw.Close()
		close(p.exited)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-lines:
			p.out.WriteString(l + "\n")
			if ready(p.out.String()) {
				return p, nil
			}
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before it was ready:\n%s", filepath.Base(name), p.out.String())
		case <-deadline:
			p.stop()
			return nil, fmt.Errorf("%s not ready within 30s:\n%s", filepath.Base(name), p.out.String())
		}
	}
}

// stop sends SIGTERM, then SIGKILL after 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// cpuSeconds returns the user+system CPU time of pid from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks (100 per second on Linux).
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

func benchStrata(o options, tmp, kafkaperf string, rep *report) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	dir := filepath.Join(tmp, "strata-data")
	startBroker := func(extra ...string) (*process, error) {
		logf("starting strata broker on %s %s", addr, strings.Join(extra, " "))
		args := []string{"broker", "--override", "listeners=PLAINTEXT://" + addr, "--override", "log.dirs=" + dir}
		return start(o.strataBin, append(args, extra...), func(out string) bool { return strings.Contains(out, "strata broker listening on") })
	}
	p, err := startBroker()
	if err != nil {
		return err
	}
	defer func() { p.stop() }()

	perfRun := func(args ...string) (*perf, error) {
		var r perf
		args = append([]string{"-brokers", addr, "-json", "-timeout", o.stepTimeout.String()}, args...)
		err := runJSON(o.stepTimeout+10*time.Second, &r, kafkaperf, args...)
		return &r, err
	}
	var fetchTopic string
	for _, size := range []int{100, 1024} {
		n := o.records100
		if size == 1024 {
			n = o.records1k
		}
		for _, acks := range []string{"1", "all"} {
			for _, comp := range []string{"none", "lz4"} {
				topic := fmt.Sprintf("bench-%d-%s-%s", size, acks, comp)
				logf("strata produce %s: %d records", topic, n)
				r, err := perfRun("-mode", "produce", "-create", "-topic", topic, "-records", fmt.Sprint(n),
					"-size", fmt.Sprint(size), "-partitions", fmt.Sprint(o.partitions), "-acks", acks, "-compression", comp)
				if err != nil {
					rep.Errors = append(rep.Errors, "produce "+topic+": "+err.Error())
					logf("  %v", err)
					continue
				}
				logf("  %.0f records/s, %.1f MB/s, p99 %.2f ms", r.RecordsPerS, r.MBPerS, r.P99Ms)
				rep.Produce = append(rep.Produce, r)
				if size == 1024 && acks == "1" && comp == "none" {
					fetchTopic = topic
				}
			}
		}
	}
	if fetchTopic == "" {
		return errors.New("no 1 KiB uncompressed topic to consume")
	}
	conns := fmt.Sprint(o.partitions)
	runs := [][]string{
		{"-mode", "fetch", "-conns", "1", "-passes", "4"},
		{"-mode", "fetch", "-conns", conns, "-passes", "4"},
		{"-mode", "consume"},
		{"-mode", "fetch", "-conns", "1", "-passes", "4"},
		{"-mode", "fetch", "-conns", conns, "-passes", "4"},
		// The same fetches from a broker that copies records through user
		// space: the zero-copy path's CPU saving is the difference.
		{"copy", "-mode", "fetch", "-conns", "1", "-passes", "4"},
		{"copy", "-mode", "fetch", "-conns", conns, "-passes", "4"},
	}
	for _, run := range runs {
		copyPath := run[0] == "copy"
		if copyPath {
			run = run[1:]
			if !strings.Contains(strings.Join(p.cmd.Args, " "), "zero.copy=false") {
				p.stop()
				if p, err = startBroker("--override", "strata.fetch.zero.copy=false"); err != nil {
					return err
				}
			}
		}
		what := strings.Join(run, " ")
		logf("strata %s on %s from the page cache", what, fetchTopic)
		before, err1 := cpuSeconds(p.cmd.Process.Pid)
		r, err := perfRun(append(run, "-topic", fetchTopic)...)
		after, err2 := cpuSeconds(p.cmd.Process.Pid)
		if err != nil {
			rep.Errors = append(rep.Errors, what+" "+fetchTopic+": "+err.Error())
			logf("  %v", err)
			continue
		}
		if err1 == nil && err2 == nil && r.Bytes > 0 {
			r.BrokerCPUSPerGB = (after - before) / (float64(r.Bytes) / 1e9)
		}
		r.CopyPath = copyPath
		logf("  %.0f records/s, %.1f MB/s, broker %.2f CPU s/GB", r.RecordsPerS, r.MBPerS, r.BrokerCPUSPerGB)
		rep.Consume = append(rep.Consume, r)
	}
	return nil
}

func benchNATS(o options, tmp string, rep *report) {
	natsBin, err := benchutil.FindNATS(o.natsBin)
	if err != nil {
		rep.Errors = append(rep.Errors, "nats: "+err.Error())
		return
	}
	for _, size := range []int{100, 1024} {
		n := o.records100
		if size == 1024 {
			n = o.records1k
		}
		r := &natsResult{Size: size, Records: n}
		if err := natsRun(o, tmp, natsBin, r); err != nil {
			r.Error = err.Error()
			rep.Errors = append(rep.Errors, fmt.Sprintf("nats %d B: %v", size, err))
			logf("  %v", err)
		} else {
			logf("  %.0f msgs/s, %.1f MB/s, p99 %.2f ms", r.RecordsPerS, r.MBPerS, r.P99Ms)
		}
		rep.NATS = append(rep.NATS, r)
	}
}

// natsRun starts a fresh JetStream server with file storage and runs one
// asynchronous publisher benchmark against it.
func natsRun(o options, tmp, natsBin string, r *natsResult) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir := filepath.Join(tmp, fmt.Sprintf("jetstream-%d", r.Size))
	logf("nats-server -js on %s; nats bench js pub async: %d x %d B", addr, r.Records, r.Size)
	p, err := start("nats-server", []string{"-js", "-sd", dir, "-p", port, "-a", "127.0.0.1"},
		func(out string) bool { return strings.Contains(out, "Server is ready") })
	if err != nil {
		return err
	}
	defer p.stop()
	csvPath := filepath.Join(tmp, fmt.Sprintf("nats-%d.csv", r.Size))
	ctx, cancel := context.WithTimeout(context.Background(), o.stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, natsBin, "--server", "nats://"+addr, "bench", "js", "pub", "async", "bench.strata",
		"--create", "--storage=file", "--msgs", fmt.Sprint(r.Records), "--size", fmt.Sprint(r.Size),
		"--no-progress", "--csv", csvPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nats bench: %v\n%s", err, out)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("reading %s: %w", csvPath, err)
	}
	if len(rows) < 2 {
		return fmt.Errorf("%s: no data row", csvPath)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimPrefix(h, "#")] = i
	}
	get := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok || i >= len(rows[1]) {
			return 0, fmt.Errorf("%s: no column %s", csvPath, name)
		}
		return strconv.ParseFloat(rows[1][i], 64)
	}
	var errs []error
	field := func(name string) float64 {
		v, err := get(name)
		errs = append(errs, err)
		return v
	}
	r.RecordsPerS = field("MsgsPerSec")
	r.MBPerS = r.RecordsPerS * float64(r.Size) / 1e6
	r.P50Ms = field("P50LatencyMicroSecs") / 1e3
	r.P99Ms = field("P99LatencyMicroSecs") / 1e3
	r.P999Ms = field("P99.9LatencyMicroSecs") / 1e3
	r.MaxMs = field("MaxLatencyMicroSecs") / 1e3
	return errors.Join(errs...)
}

func markdown(rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Broker benchmark (issue 3), %s\n\n", rep.Date)
	fmt.Fprintf(&b, "Machine: %s. Reproduce: `%s`.\n\n", rep.Machine, rep.Command)
	fmt.Fprintf(&b, "MB is 10^6 bytes. Produce MB/s counts record values. Latency is from the client's Produce call to the acknowledgement, client-side queueing included (as `nats bench` measures it).\n\n")

	fmt.Fprintf(&b, "## Produce\n\n| system | record | records | acks | compression | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Produce {
		fmt.Fprintf(&b, "| strata (franz-go) | %d B | %d | %s | %s | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f |\n",
			r.Size, r.Records, r.Acks, r.Compression, r.RecordsPerS, r.MBPerS, r.P50Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	}
	for _, r := range rep.NATS {
		if r.Error != "" {
			fmt.Fprintf(&b, "| JetStream (nats bench) | %d B | %d | puback | none | failed | | | | | |\n", r.Size, r.Records)
			continue
		}
		fmt.Fprintf(&b, "| JetStream file, async publish | %d B | %d | puback | none | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f |\n",
			r.Size, r.Records, r.RecordsPerS, r.MBPerS, r.P50Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	}

	fmt.Fprintf(&b, "\n## Consume from the page cache\n\n| path | records | MB | records/s | MB/s | broker CPU s/GB |\n|---|---|---|---|---|---|\n")
	limit := 0.0
	for i, lb := range rep.Loopback {
		when := "before"
		if i > 0 {
			when = "after"
		}
		fmt.Fprintf(&b, "| loopback TCP limit (bench/loopback), %s the brokers | | %.0f | | %.0f | |\n", when, float64(lb.Bytes)/1e6, lb.MBPerS)
		limit = max(limit, lb.MBPerS)
	}
	for _, r := range rep.Consume {
		what := "franz-go consumer (records decoded)"
		if r.Mode == "fetch" {
			what = fmt.Sprintf("bare Fetch v11, %d connection(s), %d passes (reused buffer, batches not decoded)", r.Conns, r.Passes)
			if r.CopyPath {
				what += ", broker copying (zero copy off)"
			}
		}
		fmt.Fprintf(&b, "| %s, %s | %d | %.0f | %.0f | %.0f | %.2f |\n", what, r.Topic, r.Records, float64(r.Bytes)/1e6, r.RecordsPerS, r.MBPerS, r.BrokerCPUSPerGB)
	}

	fmt.Fprintf(&b, "\n## Ratios\n\n| ratio | value | goal |\n|---|---|---|\n")
	for _, size := range []int{100, 1024} {
		var js *natsResult
		for _, r := range rep.NATS {
			if r.Size == size && r.Error == "" {
				js = r
			}
		}
		for _, r := range rep.Produce {
			if js == nil || r.Size != size || r.Compression != "none" {
				continue
			}
			goal := ""
			if size == 100 {
				goal = ">= 3"
			}
			fmt.Fprintf(&b, "| strata acks=%s ÷ JetStream records/s at %d B | %.2f | %s |\n", r.Acks, size, r.RecordsPerS/js.RecordsPerS, goal)
		}
	}
	if limit > 0 {
		best := map[string]float64{}
		for _, r := range rep.Consume {
			if !r.CopyPath {
				best[r.Mode] = max(best[r.Mode], r.MBPerS)
			}
		}
		if v, ok := best["fetch"]; ok {
			fmt.Fprintf(&b, "| fetch MB/s ÷ loopback MB/s (bare Fetch, best run ÷ best loopback) | %.2f | >= 0.5 |\n", v/limit)
		}
		if v, ok := best["consume"]; ok {
			fmt.Fprintf(&b, "| consume MB/s ÷ loopback MB/s (franz-go consumer ÷ best loopback) | %.2f | |\n", v/limit)
		}
	}
	// Broker CPU per GB fetched, zero copy against copying, matched by
	// connection count (the lowest figure of each, the least disturbed).
	cpu := map[[2]int]float64{} // {conns, copy 0/1}
	for _, r := range rep.Consume {
		if r.Mode != "fetch" || r.BrokerCPUSPerGB <= 0 {
			continue
		}
		k := [2]int{r.Conns, 0}
		if r.CopyPath {
			k[1] = 1
		}
		if v, ok := cpu[k]; !ok || r.BrokerCPUSPerGB < v {
			cpu[k] = r.BrokerCPUSPerGB
		}
	}
	var connCounts []int
	for k := range cpu {
		if k[1] == 0 && !slices.Contains(connCounts, k[0]) {
			connCounts = append(connCounts, k[0])
		}
	}
	slices.Sort(connCounts)
	for _, c := range connCounts {
		zc, ok1 := cpu[[2]int{c, 0}]
		cp, ok2 := cpu[[2]int{c, 1}]
		if ok1 && ok2 && zc > 0 {
			fmt.Fprintf(&b, "| broker CPU s/GB fetched, copying ÷ zero copy, %d connection(s) | %.2f (%.2f ÷ %.2f) | > 1 |\n", c, cp/zc, cp, zc)
		}
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(&b, "\n## Failed steps\n\n")
		for _, e := range rep.Errors {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
	}
	return b.String()
}
