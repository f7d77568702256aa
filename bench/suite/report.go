package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// report is everything one run measured; summary.json holds it.
type report struct {
	Date    string  `json:"date"`
	Mode    string  `json:"mode"`
	Command string  `json:"command"`
	Args    string  `json:"args"`
	Machine string  `json:"machine"`
	Out     string  `json:"out"`
	Seconds float64 `json:"seconds"`
	// Merged says which scenarios come from an earlier run (a run of
	// some scenarios, -only, keeps the others': mergeEarlier).
	Merged string `json:"merged,omitempty"`
	// Floor is the CPU floor of this run, the reference of its CPU s/GB
	// figures (cpuFloor).
	Floor *floorResult `json:"floor,omitempty"`
	// PageCache is the page cache fill made before scenario 1
	// (fillPageCache).
	PageCache *pageCacheFill `json:"page_cache,omitempty"`
	Scenarios []*scenario    `json:"scenarios"`
}

// scenario is one scenario's figures, details and failures.
type scenario struct {
	ID        int                `json:"id"`
	Title     string             `json:"title"`
	Seconds   float64            `json:"seconds"`
	Figures   []*figure          `json:"figures"`
	Failures  []string           `json:"failures,omitempty"`
	Notes     []string           `json:"notes,omitempty"`
	RowHeader []string           `json:"row_header,omitempty"`
	Rows      [][]string         `json:"rows,omitempty"`
	Raw       map[string]any     `json:"raw,omitempty"`
	Bars      []barGroup         `json:"bars,omitempty"`
	Curves    map[string][]curve `json:"curves,omitempty"`
	Series    []series           `json:"series,omitempty"`
	Tradeoffs []tradeoff         `json:"tradeoffs,omitempty"`
	deadline  time.Time
	ran       bool // measured by this run (not merged from an earlier one)
}

// goalOn says what a goal bounds: the ratio to the reference or the
// figure itself.
type goalOn int

const (
	onRatio goalOn = iota
	onValue
)

// goal is one of the benchmark's goals (expectedGoals lists them).
type goal struct {
	Op    string  `json:"op"` // ">=" or "<="
	Bound float64 `json:"bound"`
	On    goalOn  `json:"on"` // 0 ratio, 1 value
}

func (g *goal) String() string {
	op := "≥"
	if g.Op == "<=" {
		op = "≤"
	}
	if g.On == onRatio {
		return fmt.Sprintf("ratio %s %g", op, g.Bound)
	}
	return fmt.Sprintf("%s %g", op, g.Bound)
}

func (g *goal) met(x float64) bool {
	if g.Op == "<=" {
		return x <= g.Bound
	}
	return x >= g.Bound
}

// figure is one measured figure beside its reference from the same run.
type figure struct {
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Value    float64 `json:"value"`
	HasValue bool    `json:"has_value"`
	Ref      string  `json:"reference"`
	RefValue float64 `json:"reference_value"`
	HasRef   bool    `json:"has_reference"`
	Goal     *goal   `json:"goal,omitempty"`
	// Unmeasurable, when set, says why this machine cannot measure the
	// goal whatever the code does: the figure is kept and judged, but
	// counted apart from the goals met and missed.
	Unmeasurable string  `json:"unmeasurable,omitempty"`
	Verdict      string  `json:"verdict"`
	Ratio        float64 `json:"ratio,omitempty"`
}

func (f *figure) set(v float64) { f.Value, f.HasValue = v, true }

// goalText is the figure's goal as the tables print it.
func (f *figure) goalText() string {
	if f.Goal == nil {
		return ""
	}
	if f.Unmeasurable != "" {
		return f.Goal.String() + " (not measurable on this machine: " + f.Unmeasurable + ")"
	}
	return f.Goal.String()
}

// setIf sets a value that is zero when it was not measured.
func (f *figure) setIf(v float64) {
	if v > 0 {
		f.set(v)
	}
}

func (f *figure) ref(name string, v float64) {
	f.Ref = name
	if v > 0 {
		f.RefValue, f.HasRef = v, true
	}
}

// barGroup is one panel of throughput.png: a figure's bars beside its
// references'.
type barGroup struct {
	Title  string    `json:"title"`
	Unit   string    `json:"unit"`
	Labels []string  `json:"labels"`
	Values []float64 `json:"values"`
	IsRef  []bool    `json:"is_reference"`
}

func (b *barGroup) add(label string, v float64, isRef bool) {
	if v <= 0 {
		return
	}
	b.Labels, b.Values, b.IsRef = append(b.Labels, label), append(b.Values, v), append(b.IsRef, isRef)
}

// curve is a latency percentile curve.
type curve struct {
	Name   string  `json:"name"`
	Points []point `json:"points"`
}

// tradeoff is a curve of one figure against another, a labelled point
// per setting (scenario 5: tail p99 against the replay rate, per quota).
type tradeoff struct {
	Name   string          `json:"name"`
	Points []tradeoffPoint `json:"points"`
}

type tradeoffPoint struct {
	Label string  `json:"label"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
}

// series is a throughput over time.
type series struct {
	Name   string    `json:"name"`
	T      []float64 `json:"t_s"`
	MBPerS []float64 `json:"mb_per_s"`
}

func (s *scenario) figure(name, unit string, g *goal) *figure {
	f := &figure{Name: name, Unit: unit, Goal: g}
	s.Figures = append(s.Figures, f)
	return f
}

func (s *scenario) fail(part string, err error) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if len(msg) > 700 {
		msg = msg[:700] + "..."
	}
	s.Failures = append(s.Failures, part+": "+msg)
	logf("  FAILED: %s: %s", part, msg)
}

func (s *scenario) note(n string) { s.Notes = append(s.Notes, n) }

func (s *scenario) raw(name string, v any) {
	if s.Raw == nil {
		s.Raw = map[string]any{}
	}
	s.Raw[name] = v
}

func (s *scenario) curve(panel, name string, pts []point) {
	if len(pts) == 0 {
		return
	}
	if s.Curves == nil {
		s.Curves = map[string][]curve{}
	}
	s.Curves[panel] = append(s.Curves[panel], curve{name, pts})
}

// row adds a line to the scenario's details table (zeros print as "—").
func (s *scenario) row(name, record string, nums ...float64) {
	r := []string{name, record}
	for i, v := range nums {
		switch {
		case v == 0:
			r = append(r, "—")
		case i == 0:
			r = append(r, strconv.FormatFloat(v, 'f', 0, 64))
		case i == 1:
			r = append(r, strconv.FormatFloat(v, 'f', 1, 64))
		default:
			r = append(r, strconv.FormatFloat(v, 'f', 2, 64))
		}
	}
	s.Rows = append(s.Rows, r)
}

func (s *scenario) status() string {
	if len(s.Failures) == 0 {
		return "ok"
	}
	return "FAILED: " + strings.Join(s.Failures, "; ")
}

// judge fills in each figure's ratio and verdict.
func (s *scenario) judge() {
	for _, f := range s.Figures {
		if f.HasValue && f.HasRef {
			f.Ratio = f.Value / f.RefValue
		}
		switch {
		case f.Goal == nil:
			f.Verdict = ""
		case !f.HasValue || (f.Goal.On == onRatio && !f.HasRef):
			why := "not measured"
			if len(s.Failures) > 0 {
				why = s.Failures[0]
				if len(why) > 300 {
					why = why[:300] + "..."
				}
			}
			f.Verdict = "FAILED: " + why
		case f.Goal.On == onRatio && f.Goal.met(f.Ratio), f.Goal.On == onValue && f.Goal.met(f.Value):
			f.Verdict = "PASS"
		default:
			f.Verdict = "FAIL"
		}
		if f.Goal != nil && f.Unmeasurable != "" && (f.Verdict == "PASS" || f.Verdict == "FAIL") {
			f.Verdict = unmeasurablePrefix + f.Verdict
		}
	}
}

func num(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// goalsTable is the table of every figure with its reference, ratio and
// verdict.
func goalsTable(rep *report) string {
	var b strings.Builder
	b.WriteString("| # | figure | value | reference (same run) | reference value | ratio | goal | result |\n|---|---|---:|---|---:|---:|---|---|\n")
	for _, s := range rep.Scenarios {
		if len(s.Figures) == 0 {
			fmt.Fprintf(&b, "| %d | %s | | | | | | %s |\n", s.ID, s.Title, esc(s.status()))
			continue
		}
		for _, f := range s.Figures {
			val, ref, ratio := "not measured", "not measured", "—"
			if f.HasValue {
				val = num(f.Value) + " " + f.Unit
			}
			if f.HasRef {
				ref = num(f.RefValue) + " " + f.Unit
			}
			if f.Ratio > 0 {
				ratio = strconv.FormatFloat(f.Ratio, 'f', 2, 64)
			}
			g, verdict := "—", "—"
			if f.Goal != nil {
				g = f.goalText()
				verdict = "**" + esc(f.Verdict) + "**"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", s.ID, esc(f.Name), val, esc(f.Ref), ref, ratio, g, verdict)
		}
	}
	return b.String()
}

// scenarioList lists the numbers of rep's scenarios this run measured
// (ran) or not.
func scenarioList(rep *report, ran bool) string {
	var ids []string
	for _, s := range rep.Scenarios {
		if s.ran == ran {
			ids = append(ids, strconv.Itoa(s.ID))
		}
	}
	return strings.Join(ids, ", ")
}

func esc(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

// unmeasurablePrefix begins the verdict of a goal this machine cannot
// measure (goal.Unmeasurable), before its PASS or FAIL.
const unmeasurablePrefix = "NOT MEASURABLE HERE: "

// verdictLine counts the goals met and missed, and those this machine
// cannot measure apart.
func verdictLine(rep *report) string {
	var pass, fail, failed, unmeasurable []string
	for _, s := range rep.Scenarios {
		for _, f := range s.Figures {
			if f.Goal == nil {
				continue
			}
			name := fmt.Sprintf("%d: %s", s.ID, f.Name)
			switch {
			case strings.HasPrefix(f.Verdict, unmeasurablePrefix):
				unmeasurable = append(unmeasurable, name+": "+strings.TrimPrefix(f.Verdict, unmeasurablePrefix))
			case f.Verdict == "PASS":
				pass = append(pass, name)
			case f.Verdict == "FAIL":
				fail = append(fail, name)
			default:
				failed = append(failed, name)
			}
		}
	}
	out := fmt.Sprintf("Goals met: %d. Goals missed: %d", len(pass), len(fail))
	if len(fail) > 0 {
		out += " (" + strings.Join(fail, "; ") + ")"
	}
	out += fmt.Sprintf(". Goals not measured because a step failed: %d", len(failed))
	if len(failed) > 0 {
		out += " (" + strings.Join(failed, "; ") + ")"
	}
	if len(unmeasurable) > 0 {
		out += fmt.Sprintf(". Goals kept as figures but not measurable on this machine (not counted above): %d (%s)", len(unmeasurable), strings.Join(unmeasurable, "; "))
	}
	return out + "."
}

func summary(rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Strata benchmark, %s run of %s\n\n", rep.Mode, rep.Date)
	fmt.Fprintf(&b, "Machine: %s.\n\nCommand: `%s` (runs `go -C bench run ./suite %s`), %.0f s in all. MB is 10^6 bytes. Every reference was measured in this run on this machine; the ratio is figure ÷ reference.\n\n",
		rep.Machine, rep.Command, rep.Args, rep.Seconds)
	if rep.Merged != "" {
		ran := scenarioList(rep, true)
		what := "scenarios " + ran
		if !strings.Contains(ran, ",") {
			what = "scenario " + ran
		}
		fmt.Fprintf(&b, "This run measured %s only; %s.\n\n", what, rep.Merged)
	}
	b.WriteString(verdictLine(rep) + "\n\n")
	b.WriteString(floorLine(rep.Floor))
	b.WriteString(pageCacheLine(rep.PageCache))
	b.WriteString(goalsTable(rep))
	b.WriteString("\nPlots: [throughput.png](throughput.png) (figures in blue beside their references in grey), [latency.png](latency.png) (latency percentile curves), [replay.png](replay.png) (replay throughput over time), [quota.png](quota.png) (tail latency against replay rate per remote fetch quota). Raw data: summary.json, figures.csv, loadgen.csv, raw/, replay/.\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "\n## Scenario %d: %s\n\nStatus: %s (%.0f s).\n\n", s.ID, s.Title, s.status(), s.Seconds)
		if len(s.Rows) > 0 {
			h := s.RowHeader
			if h == nil {
				h = []string{"run", "record", "records/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms"}
			}
			b.WriteString("| " + strings.Join(h, " | ") + " |\n|" + strings.Repeat("---|", len(h)) + "\n")
			for _, r := range s.Rows {
				b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			}
			b.WriteString("\n")
		}
		for _, n := range s.Notes {
			b.WriteString(n + "\n\n")
		}
	}
	return b.String()
}

// write writes every output file and the RESULTS.md section.
func (r *runner) write() error {
	rep := r.rep
	for _, s := range rep.Scenarios {
		s.ran = true
	}
	if r.o.only != "" {
		if err := mergeEarlier(rep, r.out); err != nil {
			logf("keeping the earlier run's other scenarios: %v", err)
		}
	}
	for _, s := range rep.Scenarios {
		s.judge()
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.out, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(r.out, "figures.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scenario", "figure", "unit", "value", "reference", "reference_value", "ratio", "goal", "result"})
	for _, s := range rep.Scenarios {
		for _, fg := range s.Figures {
			g := fg.goalText()
			_ = w.Write([]string{strconv.Itoa(s.ID), fg.Name, fg.Unit, strconv.FormatFloat(fg.Value, 'f', 3, 64), fg.Ref,
				strconv.FormatFloat(fg.RefValue, 'f', 3, 64), strconv.FormatFloat(fg.Ratio, 'f', 4, 64), g, fg.Verdict})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := plots(rep, r.out); err != nil {
		logf("plots: %v", err)
	}
	md := summary(rep)
	if err := os.WriteFile(filepath.Join(r.out, "summary.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s", filepath.Join(r.out, "summary.md"))
	switch {
	case r.o.results == "":
	case r.o.only != "":
		if err := updateScenarioResults(r.o.results, rep, onlyIDs(r.o.only)); err != nil {
			return err
		}
	default:
		if err := updateResults(r.o.results, r.out, rep); err != nil {
			return err
		}
	}
	return nil
}

const (
	beginMark = "<!-- make bench: begin (written by bench/suite; edits inside are overwritten) -->"
	endMark   = "<!-- make bench: end -->"
)

// updateResults replaces the marked section of RESULTS.md with this run's
// summary (a quick run does not replace a full one).
func updateResults(path, outDir string, rep *report) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if rep.Mode == "quick" && i >= 0 && j > i && strings.Contains(s[i:j], "full run") {
		logf("%s holds a full run; the quick run is only in %s", path, rep.Out)
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## All figures in one command: latest %s run\n\n", beginMark, rep.Mode)
	fmt.Fprintf(&b, "Commands: `make bench` (at most 30 minutes here; `go -C bench run ./suite -nats $(bash deploy/scripts/install-bench-deps.sh)`) or `make bench-quick` (under 5 minutes, smaller sizes; `go -C bench run ./suite -quick ...`). Each writes `bench/results/<date>/` (`quick/` under it for the quick run): summary.md, summary.json, figures.csv, loadgen.csv, raw/, replay/ and the plots.\n\n")
	fmt.Fprintf(&b, "This run: %s %s, `%s`, %.0f s, results in `%s/`. Machine: %s.\n\n", rep.Mode, rep.Date, rep.Command, rep.Seconds, rep.Out, rep.Machine)
	b.WriteString(verdictLine(rep) + "\n\n")
	b.WriteString(floorLine(rep.Floor))
	b.WriteString(pageCacheLine(rep.PageCache))
	b.WriteString(goalsTable(rep))
	for _, sc := range rep.Scenarios {
		for _, n := range sc.Notes {
			if strings.Contains(n, "SMALLER THAN ASKED") || strings.Contains(n, "scaled down") || strings.Contains(n, "Stopped growing") {
				fmt.Fprintf(&b, "\nScenario %d: %s\n", sc.ID, n)
			}
		}
	}
	fmt.Fprintf(&b, "\n![throughput](%s) ![latency](%s) ![replay](%s) ![quota](%s)\n%s",
		rel(path, outDir, "throughput.png"), rel(path, outDir, "latency.png"), rel(path, outDir, "replay.png"), rel(path, outDir, "quota.png"), endMark)
	if i >= 0 && j > i {
		s = s[:i] + b.String() + s[j+len(endMark):]
	} else {
		// After the introduction, before the first section.
		k := strings.Index(s, "\n## ")
		if k < 0 {
			k = len(s)
		}
		s = s[:k] + "\n\n" + b.String() + "\n" + s[k:]
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// rel is dir/file relative to the directory of from (a link in from).
func rel(from, dir, file string) string {
	target := filepath.Join(dir, file)
	absFrom, err1 := filepath.Abs(filepath.Dir(from))
	absTarget, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return target
	}
	p, err := filepath.Rel(absFrom, absTarget)
	if err != nil {
		return target
	}
	return p
}

// machine describes this host: CPU model and count, memory, the disk
// holding dir, kernel, Go.
func machine(dir string) string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, model, _ = strings.Cut(l, ":")
				model = strings.TrimSpace(model)
				break
			}
		}
	}
	var si syscall.Sysinfo_t
	mem := "?"
	if syscall.Sysinfo(&si) == nil {
		mem = fmt.Sprintf("%.0f GiB", float64(si.Totalram)*float64(si.Unit)/(1<<30))
	}
	kernel := kernelRelease()
	var st syscall.Statfs_t
	disk := "?"
	if syscall.Statfs(dir, &st) == nil {
		disk = fmt.Sprintf("%.0f GiB file system, %.0f GiB free at the start", float64(st.Blocks)*float64(st.Bsize)/(1<<30), float64(st.Bavail)*float64(st.Bsize)/(1<<30))
	}
	return fmt.Sprintf("%d CPUs (%s), %s RAM, %s, Linux %s, %s; the machine is shared, so absolute figures move between runs and the same-run ratios are what count",
		runtime.NumCPU(), model, mem, disk, kernel, runtime.Version())
}

func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// syncAll flushes every dirty page so that one run's writeback does
// not land in the next.
func syncAll() { syscall.Sync() }

// kernelRelease is the running kernel's release (uname -r), "?" if it
// cannot be read.
func kernelRelease() string {
	var uts syscall.Utsname
	if syscall.Uname(&uts) != nil {
		return "?"
	}
	var b []byte
	for _, c := range uts.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
