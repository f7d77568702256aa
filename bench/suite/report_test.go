package main

import (
	"strings"
	"testing"
)

func TestUnmeasurableGoal(t *testing.T) {
	s := &scenario{ID: 3}
	f := s.figure("RF 3 ÷ RF 1", "MB/s", &goal{">=", 0.5, onRatio})
	f.set(100)
	f.ref("RF 1", 400)
	f.Unmeasurable = "3 brokers on 2 CPUs"
	g := s.figure("follower CPU", "CPU s/GB", &goal{"<=", 0.6, onValue})
	g.set(0.5)
	s.judge()
	if want := unmeasurablePrefix + "FAIL"; f.Verdict != want {
		t.Errorf("unmeasurable verdict: got %q, want %q", f.Verdict, want)
	}
	if g.Verdict != "PASS" {
		t.Errorf("follower verdict: got %q, want PASS", g.Verdict)
	}
	if got, want := f.goalText(), "ratio ≥ 0.5 (not measurable on this machine: 3 brokers on 2 CPUs)"; got != want {
		t.Errorf("goal text: got %q, want %q", got, want)
	}
	line := verdictLine(&report{Scenarios: []*scenario{s}})
	for _, want := range []string{"Goals met: 1. Goals missed: 0.", "not measurable on this machine (not counted above): 1 (3: RF 3 ÷ RF 1: FAIL)"} {
		if !strings.Contains(line, want) {
			t.Errorf("verdict line %q: want %q in it", line, want)
		}
	}
	if table := goalsTable(&report{Scenarios: []*scenario{s}}); !strings.Contains(table, "not measurable on this machine: 3 brokers on 2 CPUs") {
		t.Errorf("goals table without the mark:\n%s", table)
	}
}

func TestCPUUse(t *testing.T) {
	u := &cpuUse{Seconds: 2, Procs: map[string]float64{"broker": 0.5}}
	for i, tc := range []struct {
		got, want float64
	}{
		{u.perGB("broker", 1e9), 0.5},
		{u.perGB("broker", 250e6), 2},
		{u.perGB("other", 1e9), 0},
		{u.perGB("broker", 0), 0},
		{(*cpuUse)(nil).perGB("broker", 1e9), 0},
		{u.cores(1.5), 0.75},
		{(*cpuUse)(nil).cores(1), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("#%d: got %g, want %g", i, tc.got, tc.want)
		}
	}
}

func TestCountList(t *testing.T) {
	for i, tc := range []struct {
		ns   []int
		want string
	}{{[]int{1}, "1"}, {[]int{1, 2}, "1 and 2"}, {[]int{1, 2, 4}, "1, 2 and 4"}} {
		if got := countList(tc.ns); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}
