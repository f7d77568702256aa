package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kmsg"
	yaml "go.yaml.in/yaml/v3"

	"github.com/stratastream/strata/segment"
)

// The Grafana dashboard and the Prometheus alert rules in deploy/ must
// name only metrics the broker exports (docs/monitoring.md).
const (
	dashboardFile = "../deploy/grafana/strata-dashboard.json"
	alertsFile    = "../deploy/prometheus/strata-alerts.yml"
)

// metricNameRE finds the metric names in a PromQL expression: every
// strata_ identifier (label names are never strata_).
var metricNameRE = regexp.MustCompile(`\bstrata_[a-z0-9_]+`)

// alertRules is the rule file as Prometheus reads it; unknown fields are
// refused by the decoder.
type alertRules struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlertRules decodes and checks the structure of the rules file: what
// Prometheus requires (groups with unique names, each rule an alert with
// an expression, durations it parses) and what ours always carry (a
// severity, a summary and a description).
func readAlertRules(t *testing.T) (exprs map[string]string) {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f alertRules
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	if len(f.Groups) == 0 {
		t.Fatalf("%s: no groups", alertsFile)
	}
	exprs = map[string]string{}
	groups := map[string]bool{}
	for gi, g := range f.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("group #%d: name %q empty or repeated", gi, g.Name)
		}
		groups[g.Name] = true
		if g.Interval != "" {
			if _, err := model.ParseDuration(g.Interval); err != nil {
				t.Errorf("group %s: interval %q: %v", g.Name, g.Interval, err)
			}
		}
		if len(g.Rules) == 0 {
			t.Errorf("group %s: no rules", g.Name)
		}
		for ri, r := range g.Rules {
			where := fmt.Sprintf("group %s rule #%d (%s)", g.Name, ri, r.Alert)
			switch {
			case r.Record != "":
				t.Errorf("%s: a recording rule; this file holds alerts", where)
			case !regexp.MustCompile(`^Strata[A-Z][A-Za-z0-9]+$`).MatchString(r.Alert):
				t.Errorf("%s: alert name not StrataCamelCase", where)
			case exprs[r.Alert] != "":
				t.Errorf("%s: alert name repeated", where)
			case strings.TrimSpace(r.Expr) == "":
				t.Errorf("%s: no expr", where)
			}
			exprs[r.Alert] = r.Expr
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q, want critical, warning or info", where, s)
			}
			for _, k := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s annotation", where, k)
				}
			}
		}
	}
	return exprs
}

// dashboardExprs returns every PromQL expression of the dashboard: panel
// targets (rows' nested panels included) and query variables, keyed by
// where they are.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title, UID string
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name, Type string
				Query      json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q uid %q, %d panels", dashboardFile, d.Title, d.UID, len(d.Panels))
	}
	out := map[string]string{}
	type panel struct {
		ID      int
		Title   string
		Type    string
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		}
		Panels []json.RawMessage
	}
	ids := map[int]bool{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboardFile, err)
			}
			if ids[p.ID] {
				t.Errorf("panel %q: id %d repeated", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q: no targets", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s: no expr", p.Title, tg.RefID)
				}
				out[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if json.Unmarshal(v.Query, &s) != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			q.Query = s
		}
		out["variable "+v.Name] = q.Query
	}
	return out
}

// TestDeployDashboardAndAlertsUseExportedMetrics starts a broker tiering
// to a local directory, gives it traffic that makes its metrics appear
// (tiered uploads, a remote read and a cache hit, an error code, a group
// commit, a connection), scrapes /metrics, and checks that every metric
// the dashboard's and the alert rules' expressions name is exported. A
// name with no series in this run (an error that did not happen) must
// still be one the broker's registry describes; it is logged. With
// promtool installed (deploy/scripts/install-test-deps.sh) the rules and
// every dashboard expression are also parsed by Prometheus itself.
func TestDeployDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	alerts := readAlertRules(t)
	dash := dashboardExprs(t)

	props := map[string]string{"metrics.listener": "127.0.0.1:0"}
	for k, v := range tieredProps {
		props[k] = v
	}
	s := startServer(t, props)
	cl := newClient(t, s)
	const topic = "tiered"
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, 300)
	waitTiered(t, s, topic)
	for range 2 { // a remote read, then a cache hit
		if fp := fetchRaw(t, cl, topic, 0, 0, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at 0: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
		}
	}
	if r := produceRaw(t, cl, topic, 7, buildBatch(t, segment.CodecNone, 1)); r.ErrorCode == 0 {
		t.Fatal("produce to a partition that does not exist succeeded")
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "dash", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 100
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if cresp, err := commit.RequestWith(testCtx(t), cl); err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, cresp)
	}

	fams := scrape(t, s)
	described := describedNames(t, s.Registry())
	check := func(where, expr string) {
		names := metricNameRE.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: no strata_ metric in %q", where, expr)
		}
		for _, n := range names {
			if exported(fams, n) {
				continue
			}
			if described[baseName(n)] {
				t.Logf("%s: %s is described by the broker but has no series in this run", where, n)
				continue
			}
			t.Errorf("%s: %s is not a metric the broker exports", where, n)
		}
	}
	for _, k := range sortedKeys(alerts) {
		check("alert "+k, alerts[k])
	}
	for _, k := range sortedKeys(dash) {
		check("dashboard "+k, dash[k])
	}
	t.Logf("checked %d alert rules and %d dashboard expressions against %d exported families", len(alerts), len(dash), len(fams))

	t.Run("promtool", func(t *testing.T) {
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("promtool is required in CI (deploy/scripts/install-test-deps.sh installs Debian's prometheus): %v", err)
			}
			t.Skipf("promtool not installed (%v); run deploy/scripts/install-test-deps.sh", err)
		}
		promtoolCheck(t, promtool, alertsFile)
		// The dashboard's expressions as recording rules, Grafana's
		// variables replaced by values Prometheus accepts.
		var rules strings.Builder
		rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
		repl := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
		for i, k := range sortedKeys(dash) {
			e := dash[k]
			if strings.HasPrefix(e, "label_values(") {
				continue // a Grafana function, not PromQL
			}
			b, _ := json.Marshal(repl.Replace(e)) // a JSON string is a YAML string
			fmt.Fprintf(&rules, "      - record: dashboard:expr%d\n        expr: %s\n", i, b)
		}
		f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
		if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		promtoolCheck(t, promtool, f)
	})
}

func promtoolCheck(t *testing.T, promtool, file string) {
	t.Helper()
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", file, err, out)
	}
	t.Logf("promtool check rules %s: %s", filepath.Base(file), strings.TrimSpace(string(out)))
}

// exported finds name among the scraped families: as a family, or as the
// _bucket, _sum or _count series of a histogram or summary family.
func exported(fams map[string]*dto.MetricFamily, name string) bool {
	if f, ok := fams[name]; ok && len(f.Metric) > 0 {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		f, ok := fams[base]
		if !ok || len(f.Metric) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suf != "_bucket"
		}
	}
	return false
}

// baseName strips a histogram series suffix.
func baseName(n string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(n, suf); ok {
			return b
		}
	}
	return n
}

// describedNames are the metric names the registry's collectors describe.
func describedNames(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("the registry describes no metrics")
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
