// Command suite is Strata's benchmark orchestrator: it runs every
// performance scenario in one go, each beside its reference measured in the
// same run, and writes bench/results/<date>/ (or -out): summary.md (every
// figure, its reference, the ratio and PASS/FAIL against the goals),
// summary.json and figures.csv (everything measured), loadgen.csv (one row
// per load generator run), the raw JSON of every load generator run under
// raw/, replay/ and replay-link/ (the replay measurement's own tables), and
// PNG plots (throughput.png, latency.png, replay.png, quota.png). It also rewrites the
// section of bench/RESULTS.md between its markers. Scenario 7 also keeps
// its brokers' logs under catchup/.
//
// It is the only program under bench/ that starts servers (brokers,
// ZooKeeper, MinIO, nats-server); the load itself comes from bench/loadgen,
// the loopback limit from bench/loopback and the CPU floor from
// bench/floor, which it builds and runs.
//
// Scenarios:
//
//  1. produce 100 B and 1 KiB, acks=1, one broker: against a raw sequential
//     disk write of the same bytes and NATS JetStream (nats bench); acks=all
//     and lz4 beside them, and 1 KiB with 2 and 4 producers (the best
//     against the raw write, with the broker's share of the CPU);
//  2. consume from the page cache: against loopback TCP and a raw sendfile
//     of the segment files; the broker's CPU per GB fetched with zero copy
//     against a broker that copies;
//  3. three brokers with ZooKeeper, RF 3 acks=all: against RF 1; each
//     follower's CPU per GB on a topic one broker leads;
//  4. replay from offset 0 out of MinIO, cold and warm cache: against raw
//     parallel ranged GETs, on loopback and with MinIO behind a shaped link
//     (replay.go);
//  5. a tail consumer's latency during scenario 4's replays, against alone;
//  6. produce and tail latency at growing retained sizes (tiny local
//     retention, the rest in MinIO);
//  7. adding a replica to a partition mostly in the bucket: bytes copied
//     against the leader's local tail, time to join the ISR against the
//     same with tiering off (a full copy) (catchup.go);
//  8. share groups of 1, 4 and 16 consumers on one partition: records/s
//     accepted against a classic group's one consumer, and redelivery
//     latency after a lock timeout against the lock (sharequeue.go); a
//     cold replay of a topic whose history is only in MinIO by share
//     groups of 1 and 4 against a classic consumer from offset 0
//     (sharereplay.go).
//
// Broker CPU seconds per GB (user+system from /proc over the measured
// run) of produce RF 1, each RF 3 follower, the page-cache consume and the
// cold and warm replays are figures against the CPU floor of the same
// run: bench/floor, one loopback socket read, one pwrite and CRC-32C of
// the same bytes (floor.go), run once before the first scenario that
// needs it.
//
// A run of some scenarios (-only) keeps the other scenarios of the
// results directory's earlier run of the same mode in its summary, and
// writes a section of its own per scenario into bench/RESULTS.md (only.go).
//
// A scenario that fails is recorded as "FAILED: <reason>" and the run goes
// on. Every server runs on 127.0.0.1 with free ports and a temporary
// directory, and is killed at the end (and on SIGINT/SIGTERM).
//
// Run it from anywhere in the repository:
//
//	go -C bench run ./suite -quick     # make bench-quick, under 5 minutes
//	go -C bench run ./suite -nats $(bash deploy/scripts/install-bench-deps.sh)   # make bench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the sizes of a run; -quick gives smaller defaults to every
// flag not set on the command line.
type options struct {
	root         string // the repository (the module github.com/stratastream/strata)
	quick        bool
	out          string
	only         string
	tmp          string
	strataBin    string
	natsBin      string
	results      string
	n100, n1k    int64
	s1Repeat     int
	fetchPasses  int
	loopback     int64
	rfRecords    int64
	halfRateTime time.Duration
	replayBytes  int64
	replayRepeat int
	replayCons   bool
	tailTime     time.Duration
	getConns     string
	storeLink    string
	scaleLevels  string
	scaleMeasure int64
	scaleRepeat  int
	scaleTail    time.Duration
	scaleSegment int64
	budget       time.Duration

	catchupBucket  int64
	catchupLocal   int64
	catchupSegment int64
	catchupRepeat  int
	// scenario 8 (sharequeue.go)
	shareRecords int64
	shareWork    time.Duration
	shareLock    time.Duration
	shareRounds  int
	// shareReplayBytes is the size of the cold replay's topic
	// (sharereplay.go).
	shareReplayBytes int64

	floorBytes  int64
	floorRepeat int

	// fillPageCache runs fillPageCache before scenario 1
	// (pagecache.go).
	fillPageCache bool

	replayPerf      string
	replayTrace     string
	replayOverrides overrideFlags
	replayQuotas    string
}

// overrideFlags collects repeated -replay-override k=v flags.
type overrideFlags []string

func (f *overrideFlags) String() string { return strings.Join(*f, ",") }

func (f *overrideFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want key=value", v)
	}
	*f = append(*f, v)
	return nil
}

// quickDefaults are the -quick values of flags not set explicitly.
var quickDefaults = map[string]string{
	"records-100": "500000", "records-1k": "200000", "s1-repeat": "3", "fetch-passes": "2", "loopback-bytes": "1073741824",
	"rf-records": "200000", "half-rate-time": "5s",
	"replay-bytes": "268435456", "replay-repeat": "1", "replay-consume": "false", "tail-time": "5s", "get-conns": "8",
	"replay-quotas": "unlimited",
	"scale-levels":  "0.25,0.5,1", "scale-measure": "300000", "scale-repeat": "2", "scale-tail": "4s", "scale-segment-bytes": "16777216",
	"catchup-bucket-bytes": "1073741824", "catchup-local-bytes": "67108864", "catchup-segment-bytes": "16777216", "catchup-repeat": "2",
	"share-records": "20000", "share-rounds": "5", "share-replay-bytes": "33554432",
	"floor-bytes": "1073741824", "budget": "4m30s",
}

// expectedGoals are the goals by scenario, listed as failed when a
// scenario ends before it measured anything.
var expectedGoals = map[int][]struct {
	name, unit string
	goal       *goal
}{
	1: {{"produce 100 B acks=1, records/s ÷ JetStream", "records/s", &goal{">=", 3, onRatio}},
		{"produce 1 KiB acks=1, MB/s ÷ raw sequential disk write", "MB/s", &goal{">=", 0.7, onRatio}},
		{"produce 1 KiB acks=1, best of 1, 2 and 4 producers, MB/s ÷ raw sequential disk write", "MB/s", &goal{">=", 0.7, onRatio}},
		{"produce 1 KiB acks=1 RF 1, 1 producer, the broker, CPU s/GB ÷ floor", "CPU s/GB", &goal{"<=", 1.0, onValue}}},
	2: {{"consume from page cache (bare Fetch, 3 connections), MB/s ÷ loopback TCP", "MB/s", &goal{">=", 0.5, onRatio}},
		{"consume from page cache (bare Fetch, 3 connections, zero copy), the broker, CPU s/GB ÷ floor", "CPU s/GB", &goal{"<=", 0.15, onValue}}},
	3: {{"RF 3 acks=all, MB/s ÷ RF 1 acks=all (3 brokers, 1 KiB)", "MB/s", &goal{">=", 0.5, onRatio}},
		{"RF 3 acks=all, p99 produce latency at half of its peak rate", "ms", &goal{"<=", 20, onValue}},
		{"RF 3 acks=all, each follower (the higher of two), the broker, CPU s/GB ÷ floor", "CPU s/GB", &goal{"<=", 0.6, onValue}}},
	4: {{"replay from offset 0, cold cache (bare Fetch), MB/s ÷ raw GETs", "MB/s", &goal{">=", 0.8, onRatio}},
		{"replay from offset 0, MinIO behind a shaped link, cold cache (bare Fetch), MB/s ÷ raw GETs over the link", "MB/s", &goal{">=", 0.8, onRatio}},
		{"replay from offset 0, cold cache (bare Fetch), the broker alone, CPU s/GB ÷ floor", "CPU s/GB", &goal{"<=", 1.0, onValue}}},
	5: {{"tail consumer p99 end-to-end latency during cold replays ÷ alone", "ms", &goal{"<=", 2, onRatio}}},
	6: {{"produce MB/s at the largest retained size ÷ at the smallest", "MB/s", &goal{">=", 0.9, onRatio}}},
	7: {{"add a replica, tiered: bytes copied ÷ the leader's local tail", "MB", &goal{"<=", 1.1, onRatio}},
		{"add a replica, time to join the ISR, tiered ÷ full copy", "s", &goal{"<=", 0.1, onRatio}}},
}

// terminal is whether stderr is a terminal (progress bars shown).
var terminal bool

func main() {
	var o options
	date := time.Now().UTC().Format("2006-01-02")
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "suite: %v\n", err)
		os.Exit(1)
	}
	o.root = root
	flag.BoolVar(&o.quick, "quick", false, "small sizes (make bench-quick, under 5 minutes); explicit flags still win")
	flag.StringVar(&o.out, "out", "", "results directory (default <repository>/bench/results/<date>, or .../<date>/quick with -quick)")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario numbers to run (default all)")
	flag.StringVar(&o.tmp, "tmp", "", "parent of the run's temporary directory (default $TMPDIR); it must have room for -scale-levels")
	flag.StringVar(&o.strataBin, "strata", "", "prebuilt strata binary (default: build the repository's ./cmd/strata)")
	flag.StringVar(&o.natsBin, "nats", "", "natscli binary (default: nats on PATH or in $(go env GOPATH)/bin)")
	flag.StringVar(&o.results, "results-md", filepath.Join(root, "bench", "RESULTS.md"), "file whose marked section gets the summary (empty: none)")
	flag.Int64Var(&o.n100, "records-100", 2_000_000, "scenario 1: records of 100 B (Strata and JetStream)")
	flag.Int64Var(&o.n1k, "records-1k", 1_000_000, "scenario 1: records of 1 KiB (Strata and JetStream); scenario 2 reads this topic")
	flag.IntVar(&o.s1Repeat, "s1-repeat", 3, "scenario 1: Strata and raw-disk runs per size (the median is the figure)")
	flag.IntVar(&o.fetchPasses, "fetch-passes", 4, "scenario 2: passes over the 1 KiB topic per fetch run")
	flag.Int64Var(&o.loopback, "loopback-bytes", 4<<30, "scenario 2: bytes of the loopback TCP limit")
	flag.Int64Var(&o.rfRecords, "rf-records", 1_000_000, "scenario 3: 1 KiB records of each peak run")
	flag.DurationVar(&o.halfRateTime, "half-rate-time", 20*time.Second, "scenario 3: length of the half-peak-rate latency runs")
	flag.Int64Var(&o.replayBytes, "replay-bytes", 2<<30, "scenario 4: bytes replayed from MinIO")
	flag.IntVar(&o.replayRepeat, "replay-repeat", 2, "scenario 4: runs of each cold and warm replay")
	flag.BoolVar(&o.replayCons, "replay-consume", true, "scenario 4: also replay with franz-go's consumer")
	flag.DurationVar(&o.tailTime, "tail-time", 15*time.Second, "scenario 5: length of each tail-latency run")
	flag.StringVar(&o.getConns, "get-conns", "4,8,16", "scenario 4: concurrent ranged GETs of the raw limit (best is the reference)")
	flag.StringVar(&o.storeLink, "store-link", "4gbit", "scenario 4: also replay with MinIO in a network namespace behind a veth link shaped to this rate (tc syntax; needs root, ip and tc); empty: only the loopback replay")
	flag.StringVar(&o.replayPerf, "replay-perf", "", "scenario 4: record the broker with perf (Linux perf record -g) during the first cold fetch into this file")
	flag.StringVar(&o.replayTrace, "replay-trace", "", "scenario 5: write a 5 s Go execution trace of the broker, taken while the tail consumer runs beside replays, into this file (go tool trace -pprof=sched FILE: where goroutines waited for a CPU)")
	flag.Var(&o.replayOverrides, "replay-override", "scenarios 4 and 5: broker setting key=value added after the suite's own (repeatable), e.g. -replay-override remote.cache.readahead.threads=4")
	flag.StringVar(&o.replayQuotas, "replay-quotas", "unlimited,100000000,200000000,400000000", "scenario 5: remote.log.manager.fetch.max.bytes.per.second values (bytes/s or unlimited) of the tail-latency curve, besides the broker's default; empty: the default only")
	flag.StringVar(&o.scaleLevels, "scale-levels", "1,10,50", "scenario 6: retained GiB at which produce is measured (scaled down to fit the disk and -budget)")
	flag.Int64Var(&o.scaleMeasure, "scale-measure", 1_000_000, "scenario 6: 1 KiB records of each peak produce measurement")
	flag.IntVar(&o.scaleRepeat, "scale-repeat", 3, "scenario 6: peak produce runs per level (the best is reported)")
	flag.DurationVar(&o.scaleTail, "scale-tail", 10*time.Second, "scenario 6: length of each tail-latency measurement")
	flag.Int64Var(&o.scaleSegment, "scale-segment-bytes", 64<<20, "scenario 6: segment.bytes of the topic")
	flag.Int64Var(&o.catchupBucket, "catchup-bucket-bytes", 10<<30, "scenario 7: bytes of the partition in the bucket when the replica is added (the full copy copies these plus -catchup-local-bytes; scaled down to fit the disk)")
	flag.Int64Var(&o.catchupLocal, "catchup-local-bytes", 256<<20, "scenario 7: local.retention.bytes of the tiered topic: the leader's local tail")
	flag.Int64Var(&o.catchupSegment, "catchup-segment-bytes", 64<<20, "scenario 7: segment.bytes of the topic")
	flag.IntVar(&o.catchupRepeat, "catchup-repeat", 3, "scenario 7: joins per run (the replica is removed again between them; the median is the figure)")
	flag.Int64Var(&o.shareRecords, "share-records", 100_000, "scenario 8: records of 100 B each throughput run consumes")
	flag.DurationVar(&o.shareWork, "share-work", 100*time.Microsecond, "scenario 8: every consumer's wait per record it got (its stand-in for work)")
	flag.DurationVar(&o.shareLock, "share-lock", 2*time.Second, "scenario 8: group.share.record.lock.duration.ms of the redelivery rounds")
	flag.IntVar(&o.shareRounds, "share-rounds", 10, "scenario 8: redelivery rounds of 10 records")
	flag.Int64Var(&o.shareReplayBytes, "share-replay-bytes", 512<<20, "scenario 8: bytes of 1 KiB records in the cold replay's topic (all in MinIO), drained by a classic consumer and by share groups of 1 and 4")
	flag.BoolVar(&o.fillPageCache, "fill-page-cache", true, "before scenario 1, fill the free memory with a file kept to the end, so log data reclaims page cache as on a long-running broker (bench/suite/pagecache.go)")
	flag.Int64Var(&o.floorBytes, "floor-bytes", 2<<30, "bytes of each run of the CPU floor (bench/floor: socket read + pwrite + CRC-32C), the reference of the CPU s/GB figures")
	flag.IntVar(&o.floorRepeat, "floor-repeat", 3, "runs of the CPU floor (the least CPU per GB is the floor)")
	flag.DurationVar(&o.budget, "budget", 29*time.Minute, "bound on the whole run; scenario 6 stops growing early to fit it")
	flag.Parse()
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickDefaults {
			if !set[name] {
				if err := flag.Set(name, v); err != nil {
					panic(err)
				}
			}
		}
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results", date)
		if o.quick {
			o.out = filepath.Join(o.out, "quick")
		}
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		terminal = true
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), o.budget+2*time.Minute)
	go func() {
		s := <-sig
		logf("%v: stopping every process", s)
		cancel()
		killAll()
	}()
	err = run(ctx, o)
	cancel()
	killAll()
	if err != nil {
		fmt.Fprintf(os.Stderr, "suite: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "suite %s: "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// runner holds what the scenarios share.
type runner struct {
	o     options
	tmp   string
	out   string
	raw   string
	bins  map[string]string
	start time.Time
	rep   *report
	// The replay measurement, run once for scenarios 4 and 5.
	replayRep *replayReport
	// linkRep is the same behind the shaped link (scenario 4), for
	// scenario 5's curve.
	linkRep   *replayReport
	replayErr error
	ranRep    bool
	// floor is the CPU floor, measured once (cpuFloor).
	floor *floorResult
}

func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp(o.tmp, "strata-suite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &runner{o: o, tmp: tmp, out: o.out, raw: filepath.Join(o.out, "raw"), bins: map[string]string{}, start: time.Now()}
	if err := os.MkdirAll(r.raw, 0o755); err != nil {
		return err
	}
	if o.only == "" {
		for _, f := range []string{"loadgen.csv", "figures.csv"} {
			_ = os.Remove(filepath.Join(o.out, f)) // rows of an earlier run
		}
	} else if err := dropLoadgenRows(filepath.Join(o.out, "loadgen.csv"), onlyIDs(o.only)); err != nil {
		// figures.csv is written whole from the merged summary.
		return err
	}
	r.rep = &report{
		Date: time.Now().UTC().Format(time.RFC3339), Mode: "full", Machine: machine(tmp),
		Command: "make bench", Args: strings.Join(os.Args[1:], " "), Out: o.display(o.out),
	}
	if o.quick {
		r.rep.Mode, r.rep.Command = "quick", "make bench-quick"
	}
	if o.only != "" {
		r.rep.Command += " BENCH_FLAGS='-only " + o.only + "'"
	}

	logf("building tools")
	// Each package is built in its own module: the tools in bench's, the
	// broker in the repository's.
	pkgs := []struct{ name, dir, pkg string }{
		{"loadgen", "bench", "./loadgen"},
		{"loopback", "bench", "./loopback"},
		{"floor", "bench", "./floor"},
	}
	if o.strataBin == "" {
		pkgs = append(pkgs, struct{ name, dir, pkg string }{"strata", ".", "./cmd/strata"})
	} else {
		r.bins["strata"] = o.strataBin
	}
	for _, p := range pkgs {
		bin := filepath.Join(tmp, "bin", p.name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, p.pkg)
		cmd.Dir = filepath.Join(o.root, p.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s in %s: %v\n%s", p.pkg, cmd.Dir, err, out)
		}
		r.bins[p.name] = bin
	}

	if o.fillPageCache {
		r.rep.PageCache = fillPageCache(ctx, tmp)
	}

	type scen struct {
		id    int
		title string
		share float64 // of -budget
		fn    func(context.Context, *scenario) error
	}
	all := []scen{
		{1, "Produce, one broker, acks=1, against raw disk write and NATS JetStream", 0.08, r.s1},
		{2, "Consume from the page cache, against loopback TCP and raw sendfile; zero copy against a copying broker", 0.05, r.s2},
		{3, "Three brokers, RF 3 acks=all, against RF 1", 0.12, r.s3},
		{4, "Replay from offset 0 out of MinIO, cold and warm cache, against raw parallel ranged GETs", 0.55, r.s4},
		{5, "Tail-consumer latency during the replays of scenario 4, against no replay", 0.02, r.s5},
		{6, "Produce and tail latency at growing retained size (tiny local retention, the rest in MinIO)", 0.40, r.s6},
		{7, "Adding a replica to a partition mostly in the bucket, against a full copy with tiering off", 0.35, r.s7},
		{8, "Share groups on one partition: 1, 4 and 16 consumers against a classic group's one; redelivery after a lock timeout; cold replay from MinIO against a classic consumer", 0.10, r.s8},
	}
	for _, sc := range all {
		if o.only != "" && !slices.Contains(strings.Split(o.only, ","), strconv.Itoa(sc.id)) {
			continue
		}
		s := &scenario{ID: sc.id, Title: sc.title}
		r.rep.Scenarios = append(r.rep.Scenarios, s)
		if ctx.Err() != nil {
			s.fail("run", errors.New("the run's time budget ran out before this scenario"))
			continue
		}
		limit := max(time.Duration(float64(o.budget)*sc.share), 2*time.Minute)
		logf("scenario %d: %s (bound %v)", sc.id, sc.title, limit.Round(time.Second))
		t0 := time.Now()
		func() {
			sctx, cancel := context.WithTimeout(ctx, limit)
			s.deadline, _ = sctx.Deadline()
			defer cancel()
			defer func() {
				if p := recover(); p != nil {
					s.fail("panic", fmt.Errorf("%v\n%s", p, debug.Stack()))
				}
			}()
			if err := sc.fn(sctx, s); err != nil {
				if sctx.Err() != nil && ctx.Err() == nil {
					err = fmt.Errorf("%w (scenario bound %v reached)", err, limit.Round(time.Second))
				}
				s.fail("scenario", err)
			}
		}()
		killAll()
		// Free the scenario's disk space for the next ones (scenario 6
		// sizes itself to what is free).
		if err := os.RemoveAll(filepath.Join(tmp, fmt.Sprintf("s%d", sc.id))); err != nil {
			logf("removing scenario %d's files: %v", sc.id, err)
		}
		if len(s.Figures) == 0 {
			// The goals stay in the table, marked failed.
			for _, g := range expectedGoals[sc.id] {
				s.figure(g.name, g.unit, g.goal)
			}
		}
		s.Seconds = time.Since(t0).Seconds()
		logf("scenario %d: %s in %.0fs", sc.id, s.status(), s.Seconds)
	}
	r.rep.Seconds = time.Since(r.start).Seconds()
	return r.write()
}

// repoRoot finds the repository: the nearest directory at or above the
// working directory whose go.mod declares the module
// github.com/stratastream/strata.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == "github.com/stratastream/strata" {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside the Strata repository (no go.mod of github.com/stratastream/strata at or above it)", dir)
		}
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod []byte) string {
	for _, l := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// display returns path relative to the repository, for the reports.
func (o options) display(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(o.root, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return abs
}
