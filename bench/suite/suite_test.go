package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestModulePath(t *testing.T) {
	for i, tc := range []struct{ gomod, want string }{
		{"module github.com/stratastream/strata\n\ngo 1.26.0\n", "github.com/stratastream/strata"},
		{"// comment\nmodule \"github.com/stratastream/strata/bench\"\n", "github.com/stratastream/strata/bench"},
		{"go 1.26.0\n", ""},
	} {
		if got := modulePath([]byte(tc.gomod)); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}

func TestLocalLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scale-0/00000000000000000000.log", 100)
	write("scale-0/00000000000000000042.log", 0)
	write("scale-0/00000000000000000000.index", 10)
	write("scale-2/00000000000000000000.log", 7)
	write("scale-x/00000000000000000000.log", 1000)  // not a partition
	write("scale2-0/00000000000000000000.log", 1000) // another topic
	l := localLogs(dir, "scale")
	if l.files[0] != 2 || l.files[1] != 0 || l.files[2] != 1 || len(l.files) != 2 {
		t.Errorf("got files %v, want partition 0: 2, partition 2: 1", l.files)
	}
	if l.nonEmpty != 2 || l.bytes != 107 {
		t.Errorf("got %d non-empty, %d bytes; want 2, 107", l.nonEmpty, l.bytes)
	}
}

func TestSeriesName(t *testing.T) {
	for i, tc := range []struct{ label, want string }{
		{"cold fetch #1", "cold-fetch-1.csv"},
		{"warm fetch #1.2", "warm-fetch-1.2.csv"},
	} {
		if got := seriesName(tc.label); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}

func TestMetricSample(t *testing.T) {
	text := "# HELP x\n" +
		`strata_replication_throttled_bytes_total{direction="leader"} 5` + "\n" +
		`strata_replication_throttled_bytes_total{direction="follower"} 1.2345e+08` + "\n" +
		`strata_replication_throttled_bytes_total_other{direction="follower"} 9` + "\n"
	for i, tc := range []struct {
		series string
		want   float64
		ok     bool
	}{
		{catchupCounter, 1.2345e8, true},
		{`strata_replication_throttled_bytes_total{direction="leader"}`, 5, true},
		{`strata_replication_throttled_bytes_total{direction="none"}`, 0, false},
	} {
		if got, ok := metricSample(text, tc.series); got != tc.want || ok != tc.ok {
			t.Errorf("#%d: got %v %v, want %v %v", i, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCountLogLines(t *testing.T) {
	out := `time=2026-12-01T19:30:04.256Z level=INFO msg="replication: leader refused the fetch" error="OFFSET_OUT_OF_RANGE: x"
time=2026-12-01T19:30:14.520Z level=INFO msg="replication: leader refused the fetch" error="OFFSET_OUT_OF_RANGE: x"
time=2026-12-01T19:30:15.000Z level=INFO msg="ISR expanded"
not a log line OFFSET_OUT_OF_RANGE`
	since, _ := time.Parse(time.RFC3339Nano, "2026-12-01T19:30:14.5204Z") // the line's stamp is truncated to the ms
	if got := countLogLines(out, "OFFSET_OUT_OF_RANGE", since); got != 1 {
		t.Errorf("got %d lines, want 1", got)
	}
	if got := countLogLines(out, "OFFSET_OUT_OF_RANGE", time.Time{}); got != 2 {
		t.Errorf("got %d lines since the zero time, want 2", got)
	}
}

func TestCatchupPhases(t *testing.T) {
	p := catchupPhases{Replica: 0.1, First: 0.3, Copied: 1.3, ISR: 1.5}
	md, st, cp, isr := p.durations()
	for i, tc := range []struct{ got, want float64 }{{md, 0.1}, {st, 0.2}, {cp, 1.0}, {isr, 0.2}} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("#%d: got %v, want %v", i, tc.got, tc.want)
		}
	}
	if _, _, cp, isr := (catchupPhases{Replica: 0.1, First: 0.3}).durations(); cp != -1 || isr != -1 {
		t.Errorf("unseen phases: got copy %v ISR %v, want -1 -1", cp, isr)
	}
	joins := []*catchupJoin{{Phases: catchupPhases{ISR: 3}}, {Phases: catchupPhases{}}, {Phases: catchupPhases{ISR: 1}}, {Phases: catchupPhases{ISR: 2}}}
	if m := medianJoin(joins); m != joins[3] {
		t.Errorf("median of ISR 3, -, 1, 2: got %+v, want the join of 2 s", m)
	}
	if m := medianJoin([]*catchupJoin{{}}); m != nil {
		t.Errorf("median of no join that reached the ISR: got %+v, want nil", m)
	}
}

func TestFitCatchup(t *testing.T) {
	sz := catchupSizes{bucket: 10 << 30, local: 256 << 20, segment: 64 << 20}
	if got, ok := fitCatchup(sz, 60<<30); !ok || got != sz {
		t.Errorf("60 GiB free: got %+v %v, want the sizes unchanged", got, ok)
	}
	got, ok := fitCatchup(sz, 25<<30)
	if ok || got.bucket >= sz.bucket || got.local < sz.segment {
		t.Errorf("25 GiB free: got %+v %v, want smaller sizes, local at least a segment", got, ok)
	}
	if need := float64(2*(got.bucket+got.local)) * 1.1; need > 10<<30 {
		t.Errorf("25 GiB free: the sizes need %.0f bytes, more than the 10 GiB left after the spare", need)
	}
}

func TestCatchupFigures(t *testing.T) {
	tiered := &catchupRun{Label: "tiered", BucketBytes: 10e9, LeaderLocalBytes: 300e6, Joins: []*catchupJoin{
		{CopiedDirBytes: 300e6, CopiedCounterBytes: 310e6, Phases: catchupPhases{Replica: 0.1, First: 0.2, Copied: 1.2, ISR: 1.5}},
		{CopiedDirBytes: 300e6, CopiedCounterBytes: -1, Phases: catchupPhases{Replica: 0.1, First: 0.2, Copied: 1, ISR: 1.2}},
		{CopiedDirBytes: 900e6, Phases: catchupPhases{Replica: 0.1}}, // never joined: not counted
	}}
	full := &catchupRun{Label: "full copy", LeaderLocalBytes: 10.3e9, Joins: []*catchupJoin{
		{CopiedDirBytes: 10.3e9, CopiedCounterBytes: 10.3e9, CopyMBPerS: 300, Phases: catchupPhases{ISR: 40}},
	}}
	s := &scenario{ID: 7}
	catchupFigures(s, tiered, full, 2000, &rawWrite{Bytes: 2e9, SyncMBPerS: 500})
	s.judge()
	want := []struct {
		ratio   float64
		verdict string
	}{
		{310.0 / 300, "PASS"}, // the larger count of the join that copied most
		{1.5 / 40, "PASS"},
		{310e6 / 10.3e9, ""},
		{300.0 / 500, ""}, // the disk write, below loopback, bounds the copy
	}
	if len(s.Figures) != len(want) {
		t.Fatalf("got %d figures, want %d", len(s.Figures), len(want))
	}
	for i, w := range want {
		if f := s.Figures[i]; math.Abs(f.Ratio-w.ratio) > 1e-9 || f.Verdict != w.verdict {
			t.Errorf("#%d %s: got ratio %v %q, want %v %q", i, f.Name, f.Ratio, f.Verdict, w.ratio, w.verdict)
		}
	}
	if len(s.Rows) != 4 || !strings.Contains(s.Rows[0][0], "median") || strings.Contains(s.Rows[1][0], "median") {
		t.Errorf("rows: got %v, want four joins, the first tiered one marked median", s.Rows)
	}

	// A run whose joins never reached the ISR: the goals fail as not measured.
	s = &scenario{ID: 7}
	catchupFigures(s, &catchupRun{LeaderLocalBytes: 1, Joins: []*catchupJoin{{}}}, full, 2000, nil)
	s.judge()
	if v := s.Figures[1].Verdict; !strings.HasPrefix(v, "FAILED") {
		t.Errorf("no join: got verdict %q, want FAILED", v)
	}
}

func TestUpdateScenarioResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	intro := "# Results\n\n" + beginMark + "\nall scenarios\n" + endMark + "\n\n## How\n"
	if err := os.WriteFile(path, []byte(intro), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := func(mode, value string) *report {
		s := &scenario{ID: 7, Title: "Add a replica", ran: true}
		s.note("note " + value)
		s.judge()
		return &report{Mode: mode, Date: value, Scenarios: []*scenario{s}}
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := updateScenarioResults(path, sc("full", "first"), []int{7}); err != nil {
		t.Fatal(err)
	}
	got := read()
	if !strings.Contains(got, endMark+"\n\n"+scenarioBeginMark(7)) || !strings.Contains(got, "note first") || !strings.Contains(got, "all scenarios") {
		t.Fatalf("after the first run, want the section after the all-scenario one:\n%s", got)
	}
	if err := updateScenarioResults(path, sc("quick", "quick"), []int{7}); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Contains(got, "note quick") {
		t.Errorf("a quick run replaced a full one:\n%s", got)
	}
	if err := updateScenarioResults(path, sc("full", "second"), []int{7}); err != nil {
		t.Fatal(err)
	}
	got = read()
	if strings.Contains(got, "note first") || strings.Count(got, scenarioBeginMark(7)) != 1 || !strings.Contains(got, "note second") || !strings.HasSuffix(got, "## How\n") {
		t.Errorf("after the second run, want one section with its note, the rest unchanged:\n%s", got)
	}
}

func TestMergeEarlier(t *testing.T) {
	dir := t.TempDir()
	old := &report{Mode: "quick", Date: "earlier", Args: "-quick", Scenarios: []*scenario{{ID: 1, Title: "one"}, {ID: 7, Title: "old seven"}, {ID: 3, Title: "three"}}}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &report{Mode: "quick", Scenarios: []*scenario{{ID: 7, Title: "new seven", ran: true}}}
	if err := mergeEarlier(rep, dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range rep.Scenarios {
		got = append(got, s.Title)
	}
	if strings.Join(got, ",") != "one,three,new seven" || !strings.Contains(rep.Merged, "scenarios 1, 3") || scenarioList(rep, true) != "7" {
		t.Errorf("got %v, merged %q; want one,three,new seven from scenarios 1, 3", got, rep.Merged)
	}
	full := &report{Mode: "full", Scenarios: []*scenario{{ID: 7}}}
	if err := mergeEarlier(full, dir); err != nil || len(full.Scenarios) != 1 {
		t.Errorf("a full run merged a quick one: %v, %d scenarios", err, len(full.Scenarios))
	}
}

func TestDropLoadgenRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loadgen.csv")
	if err := os.WriteFile(path, []byte("label,topic\ns1-produce,p\ns7-fill-tiered,catchup\nreplay-fill,replay\ns7-fill-full,catchup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dropLoadgenRows(path, []int{7}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "label,topic\ns1-produce,p\nreplay-fill,replay\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	if err := dropLoadgenRows(filepath.Join(t.TempDir(), "none.csv"), []int{7}); err != nil {
		t.Errorf("missing file: %v", err)
	}
}
