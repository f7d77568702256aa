package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratastream/strata/broker"
)

// The deploy files (deploy/docker, deploy/k8s, deploy/systemd) hold broker
// settings in three forms: properties files, properties embedded in a
// Kubernetes ConfigMap, and --override key=value arguments. This test finds
// all of them and checks each with the code path of `strata broker
// --config FILE --override k=v`: broker.ParseProperties, then
// broker.ConfigFromProperties. So a renamed or removed setting, or a value
// the broker refuses, fails here rather than at deploy time.

const deployDir = "../../deploy"

// settingsSource is one set of settings a broker would start with.
type settingsSource struct {
	where string            // file (and part of it) the settings come from
	props map[string]string // key -> value, templates already replaced
}

// templateRE matches shell and Kubernetes substitutions in values:
// ${VAR}, ${VAR##*-}, $(VAR), $VAR.
var templateRE = regexp.MustCompile(`\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*`)

// detemplate replaces each substitution with "0", a placeholder that is a
// valid integer, host name and port, so only the literal parts of a value
// are judged.
func detemplate(v string) string { return templateRE.ReplaceAllString(v, "0") }

// overrideRE matches --override key=value in shell lines, systemd
// ExecStart, JSON/YAML argument lists ("--override", "k=v" or
// - --override / - k=v) and --override=k=v.
var overrideRE = regexp.MustCompile(`--override(?:=|["']?\s*,?\s*(?:-\s+)?["']?)([A-Za-z0-9_.\-]+)=([^\s"'\\]*)`)

func findOverrides(text string) [][2]string {
	var out [][2]string
	for _, m := range overrideRE.FindAllStringSubmatch(text, -1) {
		out = append(out, [2]string{m[1], detemplate(m[2])})
	}
	return out
}

// configMapProperties returns, for every ConfigMap document of a YAML
// file, each data entry whose name ends in .properties, as text. It reads
// the block scalar by indentation (no YAML library in go.mod): the entry
// is `  name.properties: |` and its text is the lines indented deeper.
func configMapProperties(text string) (map[string]string, error) {
	out := map[string]string{}
	docs := regexp.MustCompile(`(?m)^---[ \t]*$`).Split(text, -1)
	kindRE := regexp.MustCompile(`(?m)^kind:\s*ConfigMap\s*$`)
	entryRE := regexp.MustCompile(`^(\s+)([A-Za-z0-9_.\-]+\.properties):\s*(\S*)\s*$`)
	for di, doc := range docs {
		if !kindRE.MatchString(doc) {
			continue
		}
		lines := strings.Split(doc, "\n")
		for i := 0; i < len(lines); i++ {
			m := entryRE.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			if !strings.HasPrefix(m[3], "|") {
				return nil, fmt.Errorf("document %d: %s: want a literal block (|), got %q", di+1, m[2], m[3])
			}
			indent := len(m[1])
			var body []string
			blockIndent := -1
			for i+1 < len(lines) {
				l := lines[i+1]
				if strings.TrimSpace(l) == "" {
					body = append(body, "")
					i++
					continue
				}
				n := len(l) - len(strings.TrimLeft(l, " "))
				if n <= indent {
					break
				}
				if blockIndent < 0 {
					blockIndent = n
				}
				if n < blockIndent {
					return nil, fmt.Errorf("document %d: %s: line %q is less indented than the block", di+1, m[2], l)
				}
				body = append(body, l[blockIndent:])
				i++
			}
			out[fmt.Sprintf("ConfigMap data %s", m[2])] = strings.Join(body, "\n")
		}
	}
	return out, nil
}

func parsePropsText(text string) (map[string]string, error) {
	props, err := broker.ParseProperties(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	for k, v := range props {
		props[k] = detemplate(v)
	}
	return props, nil
}

// deploySources walks deploy/ (but not deploy/local and deploy/scripts,
// whose shell scripts write their properties at run time and are tested by
// the cluster test) and returns every set of broker settings it holds.
func deploySources(t *testing.T) []settingsSource {
	t.Helper()
	var out []settingsSource
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(deployDir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "local" || rel == "scripts" {
				return filepath.SkipDir
			}
			return nil
		}
		name := "deploy/" + rel
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		ext := filepath.Ext(path)
		switch {
		case ext == ".properties":
			props, err := parsePropsText(text)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return nil
			}
			out = append(out, settingsSource{where: name, props: props})
		case ext == ".yaml" || ext == ".yml":
			cms, err := configMapProperties(text)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return nil
			}
			overrides := findOverrides(text)
			// A file with a ConfigMap and --override arguments (the
			// StatefulSet) starts brokers with both: check them merged,
			// as `--config FILE --override k=v` would see them.
			for _, part := range slices.Sorted(maps.Keys(cms)) {
				props, err := parsePropsText(cms[part])
				if err != nil {
					t.Errorf("%s: %s: %v", name, part, err)
					continue
				}
				src := settingsSource{where: name + ": " + part, props: props}
				if len(overrides) > 0 {
					src.where += " + --override arguments"
					for _, kv := range overrides {
						src.props[kv[0]] = kv[1]
					}
				}
				out = append(out, src)
			}
			if len(cms) == 0 && len(overrides) > 0 {
				out = append(out, overrideSource(name, overrides))
			}
		case ext == ".service" || strings.HasPrefix(filepath.Base(path), "Dockerfile") || ext == ".sh":
			if o := findOverrides(text); len(o) > 0 {
				out = append(out, overrideSource(name, o))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", deployDir, err)
	}
	return out
}

func overrideSource(name string, overrides [][2]string) settingsSource {
	src := settingsSource{where: name + ": --override arguments", props: map[string]string{}}
	for _, kv := range overrides {
		src.props[kv[0]] = kv[1]
	}
	return src
}

// checkSettings returns one error per refused setting: every unknown key
// or bad value, each named (ConfigFromProperties stops at the first, so
// the keys are also checked one by one to report them all).
func checkSettings(props map[string]string) []error {
	_, err := broker.ConfigFromProperties(props)
	if err == nil {
		return nil
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if _, e := broker.ConfigFromProperties(map[string]string{k: props[k]}); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, err) // a combination of settings is refused
	}
	return errs
}

func TestDeployFilesUseAcceptedSettings(t *testing.T) {
	sources := deploySources(t)
	// Not vacuous: each deploy folder contributes settings, and the
	// StatefulSet's per-pod --override arguments were found.
	for _, want := range []string{"deploy/docker/", "deploy/k8s/", "deploy/systemd/"} {
		if !slices.ContainsFunc(sources, func(s settingsSource) bool { return strings.HasPrefix(s.where, want) }) {
			t.Errorf("no broker settings found under %s", want)
		}
	}
	if !slices.ContainsFunc(sources, func(s settingsSource) bool { return strings.Contains(s.where, "ConfigMap") }) {
		t.Errorf("no ConfigMap with a .properties entry found under deploy/k8s")
	}
	if !slices.ContainsFunc(sources, func(s settingsSource) bool { return strings.Contains(s.where, "--override") }) {
		t.Errorf("no --override arguments found in the deploy files")
	}
	for _, s := range sources {
		if len(s.props) == 0 {
			t.Errorf("%s: no settings", s.where)
			continue
		}
		for _, err := range checkSettings(s.props) {
			var ce *broker.ConfigError
			if errors.As(err, &ce) {
				t.Errorf("%s: setting %q: %v", s.where, ce.Key, err)
			} else {
				t.Errorf("%s: %v", s.where, err)
			}
		}
		t.Logf("%s: %d settings accepted", s.where, len(s.props))
	}
}

// The checker itself refuses what the broker refuses, and the parsers
// find settings in each form, so the test above cannot pass by missing
// them.
func TestDeployFilesChecker(t *testing.T) {
	if errs := checkSettings(map[string]string{"broker.id": "1", "no.such.setting": "x"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no.such.setting") {
		t.Errorf("unknown key: got %v", errs)
	}
	if errs := checkSettings(map[string]string{"num.partitions": "many"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "num.partitions") {
		t.Errorf("bad value: got %v", errs)
	}
	got := findOverrides(`exec strata broker --config /etc/strata/server.properties \
  --override broker.id=${ORDINAL} --override=log.dirs=/data
command: ["strata", "broker", "--override", "listeners=PLAINTEXT://0.0.0.0:$(PORT)"]
  - --override
  - num.partitions=3
`)
	want := [][2]string{{"broker.id", "0"}, {"log.dirs", "/data"}, {"listeners", "PLAINTEXT://0.0.0.0:0"}, {"num.partitions", "3"}}
	if !slices.Equal(got, want) {
		t.Errorf("findOverrides = %q, want %q", got, want)
	}
	cms, err := configMapProperties(`apiVersion: v1
kind: Service
data:
  ignored.properties: |
    x=1
---
apiVersion: v1
kind: ConfigMap
data:
  server.properties: |
    broker.id=1

    # comment
    log.dirs=/d
  other: y
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) != 1 || cms["ConfigMap data server.properties"] != "broker.id=1\n\n# comment\nlog.dirs=/d" {
		t.Errorf("configMapProperties = %q", cms)
	}
}

// The compose file mounts each broker's properties file; they must exist.
func TestDeployComposeMountsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "docker", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	mounts := regexp.MustCompile(`\./config/[A-Za-z0-9_.\-]+\.properties`).FindAllString(string(b), -1)
	if len(mounts) == 0 {
		t.Fatal("docker-compose.yml mounts no properties file")
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(deployDir, "docker", m)); err != nil {
			t.Errorf("docker-compose.yml mounts %s: %v", m, err)
		}
	}
}
