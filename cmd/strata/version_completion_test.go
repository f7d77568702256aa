package main

// Tests of strata --version and strata completion, with the real binary
// (the test binary run as strata, see TestMain).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// runBinary runs the test binary as strata with args.
func runBinary(t *testing.T, args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), runAsStrata+"=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code <= 0 {
		t.Fatalf("strata %v: %v", args, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^strata \S+\ncommit: \S+( \(modified\))?\ngo: ` + regexp.QuoteMeta(runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) + "\n$")
	var texts []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := runBinary(t, args...)
		if r.code != 0 || !want.MatchString(r.stdout) || r.stderr != "" {
			t.Errorf("strata %v: got exit %d, stdout %q, stderr %q; want 0 and %s", args, r.code, r.stdout, r.stderr, want)
		}
		texts = append(texts, r.stdout)
		j := runBinary(t, append(args, "--format", "json")...)
		var v map[string]any
		if err := json.Unmarshal([]byte(j.stdout), &v); j.code != 0 || err != nil {
			t.Fatalf("strata %v --format json: exit %d, %v:\n%s%s", args, j.code, err, j.stdout, j.stderr)
		}
		if v["go_version"] != runtime.Version() || v["os"] != runtime.GOOS || v["arch"] != runtime.GOARCH {
			t.Errorf("strata %v --format json: got %v, want go_version %s, os %s, arch %s", args, v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
		for _, k := range []string{"version", "commit"} {
			if s, _ := v[k].(string); s == "" {
				t.Errorf("strata %v --format json: no %s in %v", args, k, v)
			}
		}
		if _, ok := v["modified"].(bool); !ok {
			t.Errorf("strata %v --format json: no modified in %v", args, v)
		}
	}
	if texts[0] != texts[1] {
		t.Errorf("strata --version and strata version differ:\n%s\n%s", texts[0], texts[1])
	}
	if r := runBinary(t, "version", "--format", "yaml"); r.code != 2 || !strings.Contains(r.stderr, "want text or json") {
		t.Errorf("strata version --format yaml: got %+v, want exit 2 naming text and json", r)
	}
}

func TestCompletion(t *testing.T) {
	checks := map[string][]string{
		"bash": {"bash", "-n"},
		"zsh":  {"zsh", "-n"},
		"fish": {"fish", "--no-execute"},
	}
	tree := completionTree()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := runBinary(t, "completion", shell)
		if r.code != 0 || r.stderr != "" || r.stdout == "" {
			t.Errorf("strata completion %s: got exit %d, stderr %q, %d bytes", shell, r.code, r.stderr, len(r.stdout))
			continue
		}
		// Every registered command and alias, every action, each flag.
		for name := range commands {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(r.stdout) {
				t.Errorf("strata completion %s lacks command %s", shell, name)
			}
		}
		for alias, name := range aliases {
			if _, ok := commands[name]; ok && !regexp.MustCompile(`\b`+regexp.QuoteMeta(alias)+`\b`).MatchString(r.stdout) {
				t.Errorf("strata completion %s lacks alias %s of %s", shell, alias, name)
			}
		}
		for _, c := range tree {
			for _, a := range c.actions {
				if !strings.Contains(r.stdout, a.name) {
					t.Errorf("strata completion %s lacks action %s %s", shell, c.name, a.name)
				}
			}
		}
		for _, flag := range []string{"from-beginning", "partitions", "bootstrap-server", "exclude-internal", "password-file"} {
			if !strings.Contains(r.stdout, flag) {
				t.Errorf("strata completion %s lacks flag --%s", shell, flag)
			}
		}
		check := checks[shell]
		if _, err := exec.LookPath(check[0]); err != nil {
			t.Logf("%s is not installed (make deps installs it): its syntax check is skipped", check[0])
			continue
		}
		f := filepath.Join(t.TempDir(), "strata."+shell)
		if err := os.WriteFile(f, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(check[0], append(check[1:], f)...).CombinedOutput()
		if err != nil {
			t.Errorf("%v on strata completion %s: %v\n%s", check, shell, err, out)
		}
	}
	// The tree holds the flags of commands and actions, from their help.
	flagsOf := map[string][]string{}
	for _, c := range tree {
		flagsOf[c.name] = c.flags
		for _, a := range c.actions {
			flagsOf[c.name+" "+a.name] = a.flags
		}
	}
	for line, want := range map[string]string{"consume": "from-beginning", "topic create": "partitions", "tier status": "metrics-url", "dump": "print-data", "broker": "config"} {
		if !strings.Contains(" "+strings.Join(flagsOf[line], " ")+" ", " "+want+" ") {
			t.Errorf("completion tree: strata %s has flags %v, want %s among them", line, flagsOf[line], want)
		}
	}
	// bash completes as a user would see it.
	if _, err := exec.LookPath("bash"); err == nil {
		script := runBinary(t, "completion", "bash").stdout
		f := filepath.Join(t.TempDir(), "strata.bash")
		if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		for words, want := range map[string]string{
			"strata topi":                 "topic topics",
			"strata topics cr":            "create",
			"strata topic create --parti": "--partitions",
			"strata grou":                 "groups group",
		} {
			w := strings.Fields(words)
			prog := `source "$1"; COMP_WORDS=(` + words + `); COMP_CWORD=` + strconv.Itoa(len(w)-1) + `; _strata; echo "${COMPREPLY[*]}"`
			out, err := exec.Command("bash", "-c", prog, "bash", f).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != want {
				t.Errorf("bash completion of %q: got %q (%v), want %q", words, out, err, want)
			}
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "ksh"}, {"completion", "bash", "zsh"}} {
		r := runBinary(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "bash, zsh or fish") {
			t.Errorf("strata %v: got exit %d, stderr %q; want 2 naming bash, zsh and fish", args, r.code, r.stderr)
		}
	}
}
