package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A run of some scenarios (-only) keeps what an earlier run wrote for the
// others: summary.json, summary.md, figures.csv and the plots of the
// results directory hold the earlier run's other scenarios beside this
// run's (mergeEarlier), loadgen.csv loses only the rows of the scenarios
// run again (dropLoadgenRows), and RESULTS.md gets a marked section per
// scenario run instead of its all-scenario section (updateScenarioResults).

// onlyIDs are the scenario numbers of -only (nil: every scenario).
func onlyIDs(only string) []int {
	var ids []int
	for _, f := range strings.Split(only, ",") {
		if id, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// loadgenPrefixes are the label prefixes of each scenario's loadgen runs
// (scenarios 4 and 5 share the replay measurement's).
var loadgenPrefixes = map[int][]string{
	1: {"s1-"}, 2: {"s2-"}, 3: {"s3-"}, 4: {"replay-"}, 5: {"replay-"}, 6: {"s6-"}, 7: {"s7-"}, 8: {"s8-"},
}

// dropLoadgenRows removes from the loadgen.csv at path the rows of the
// scenarios ids (a missing file is no error).
func dropLoadgenRows(path string, ids []int) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var prefixes []string
	for _, id := range ids {
		prefixes = append(prefixes, loadgenPrefixes[id]...)
	}
	keep := rows[:0]
	for i, r := range rows {
		if i > 0 && len(r) > 0 && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(r[0], p) }) {
			continue
		}
		keep = append(keep, r)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(out)
	if err := w.WriteAll(keep); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mergeEarlier adds to rep the scenarios of the summary.json in dir (an
// earlier run's) that rep does not hold, in scenario order, and says so
// in rep.Merged. An earlier run of the other mode (quick against full) is
// not merged.
func mergeEarlier(rep *report, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var old report
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
	}
	if old.Mode != rep.Mode {
		return nil
	}
	var kept []string
	for _, s := range old.Scenarios {
		if slices.ContainsFunc(rep.Scenarios, func(x *scenario) bool { return x.ID == s.ID }) {
			continue
		}
		rep.Scenarios = append(rep.Scenarios, s)
		kept = append(kept, strconv.Itoa(s.ID))
	}
	if len(kept) == 0 {
		return nil
	}
	slices.SortStableFunc(rep.Scenarios, func(a, b *scenario) int { return cmp.Compare(a.ID, b.ID) })
	when := old.Date
	if old.Merged != "" {
		when += " (itself merged: " + old.Merged + ")"
	}
	rep.Merged = fmt.Sprintf("scenarios %s are from the %s run of %s (`go -C bench run ./suite %s`)", strings.Join(kept, ", "), old.Mode, when, old.Args)
	return nil
}

// Marks of a scenario's own section of RESULTS.md.
func scenarioBeginMark(id int) string {
	return fmt.Sprintf("<!-- make bench scenario %d: begin (written by bench/suite -only; edits inside are overwritten) -->", id)
}

func scenarioEndMark(id int) string { return fmt.Sprintf("<!-- make bench scenario %d: end -->", id) }

// scenarioSection is the RESULTS.md section of one scenario of a run.
func scenarioSection(rep *report, s *scenario) string {
	one := &report{Scenarios: []*scenario{s}}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## Scenario %d: latest %s run\n\n%s.\n\n", scenarioBeginMark(s.ID), s.ID, rep.Mode, s.Title)
	fmt.Fprintf(&b, "This run: %s %s, `go -C bench run ./suite %s`, %.0f s, results in `%s/`. Machine: %s.\n\n", rep.Mode, rep.Date, rep.Args, s.Seconds, rep.Out, rep.Machine)
	b.WriteString(verdictLine(one) + "\n\n")
	b.WriteString(floorLine(rep.Floor))
	b.WriteString(pageCacheLine(rep.PageCache))
	b.WriteString(goalsTable(one))
	if len(s.Rows) > 0 && s.RowHeader != nil {
		b.WriteString("\n| " + strings.Join(s.RowHeader, " | ") + " |\n|" + strings.Repeat("---|", len(s.RowHeader)) + "\n")
		for _, r := range s.Rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
	}
	for _, n := range s.Notes {
		b.WriteString("\n" + n + "\n")
	}
	b.WriteString(scenarioEndMark(s.ID))
	return b.String()
}

// updateScenarioResults writes each scenario of rep into its own marked
// section of RESULTS.md at path: in place of the section it had, else
// after the all-scenario section (else before the first "## " heading).
// A quick run does not replace a full run's section.
func updateScenarioResults(path string, rep *report, ids []int) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	for _, sc := range rep.Scenarios {
		if !slices.Contains(ids, sc.ID) {
			continue
		}
		begin, end := scenarioBeginMark(sc.ID), scenarioEndMark(sc.ID)
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if rep.Mode == "quick" && i >= 0 && j > i && strings.Contains(s[i:j], "latest full run") {
			logf("%s holds a full run of scenario %d; the quick run is only in %s", path, sc.ID, rep.Out)
			continue
		}
		sec := scenarioSection(rep, sc)
		switch {
		case i >= 0 && j > i:
			s = s[:i] + sec + s[j+len(end):]
		case strings.Contains(s, endMark):
			k := strings.Index(s, endMark) + len(endMark)
			s = s[:k] + "\n\n" + sec + s[k:]
		default:
			k := strings.Index(s, "\n## ")
			if k < 0 {
				k = len(s)
			}
			s = s[:k] + "\n\n" + sec + "\n" + s[k:]
		}
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
