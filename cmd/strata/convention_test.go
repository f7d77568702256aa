package main

// Tests of the one CLI convention (main.go, flags.go, positional.go) over
// the command registry: every command and action answers --help, names the
// nearest flag or action for a mistyped one, answers to its alias, and
// takes its resource's name as an argument or with its flag alike.

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// tierActions are the actions of `strata tier`, which parses them itself
// (it has no actions map in the registry).
var tierActions = []string{"status", "restore"}

// leaves returns every command line that reaches a command's flags:
// ["topic" "create"], ["produce"], ... from the registry.
func leaves(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	}) {
		c := commands[name]
		var acts []string
		for a := range c.actions {
			acts = append(acts, a)
		}
		if name == "tier" {
			acts = tierActions
		}
		sort.Strings(acts)
		if c.run != nil && name != "tier" {
			out = append(out, []string{name})
		}
		for _, a := range acts {
			out = append(out, []string{name, a})
		}
	}
	if len(out) < 20 {
		t.Fatalf("got %d command lines from the registry, want the whole CLI: %v", len(out), out)
	}
	return out
}

var (
	helpFlagLine = regexp.MustCompile(`(?m)^ {2,}--?([a-z][a-z0-9-]*[a-z0-9])\b`)
	helpFlagAny  = regexp.MustCompile(`--([a-z][a-z0-9-]*[a-z0-9])\b`)
)

// ownFlag returns the flag of a command to mistype: the longest of those
// its help lists that the client commands do not all share.
func ownFlag(t *testing.T, help string) string {
	t.Helper()
	shared := map[string]bool{"help": true}
	for _, n := range flagNames(newClientCmd("x", "", "", io.Discard, io.Discard).fs) {
		shared[n] = true
	}
	re := helpFlagLine // a table of flags
	if !re.MatchString(help) {
		re = helpFlagAny // flags in the text
	}
	var flags []string
	for _, m := range re.FindAllStringSubmatch(help, -1) {
		if !shared[m[1]] && len(m[1]) >= 4 {
			flags = append(flags, m[1])
		}
	}
	if len(flags) == 0 {
		if strings.Contains(help, "--bootstrap-server") {
			return "bootstrap-server"
		}
		return "" // no flags of its own (strata completion)
	}
	sort.Slice(flags, func(i, j int) bool {
		if len(flags[i]) != len(flags[j]) {
			return len(flags[i]) > len(flags[j])
		}
		return flags[i] < flags[j]
	})
	return flags[0]
}

// typo leaves out the third letter: "topic" becomes "toic".
func typo(s string) string {
	r := []rune(s)
	return string(append(r[:2:2], r[3:]...))
}

func TestConventionHelpAndTypos(t *testing.T) {
	for i, args := range leaves(t) {
		line := strings.Join(args, " ")
		h := cli(t, append(slices.Clone(args), "--help")...)
		if h.code != 0 || h.stdout == "" || h.stderr != "" {
			t.Errorf("#%d strata %s --help: got exit %d, stdout %d bytes, stderr %q; want 0, help, none", i, line, h.code, len(h.stdout), h.stderr)
			continue
		}
		if first, _, _ := strings.Cut(h.stdout, "\n"); len(args) == 1 && strings.Contains(first, "<action>") {
			// Dispatches to actions through runActions in its own run
			// (registered without actions): no flags of its own.
			t.Logf("#%d strata %s: actions not in the registry, flags not tried", i, line)
			continue
		}
		flag := ownFlag(t, h.stdout)
		bad, want := "verbose", "unknown flag --verbose\n" // no flags: nothing to suggest
		if flag != "" {
			bad = typo(flag)
			want = "unknown flag --" + bad + ": did you mean --" + flag + "?"
		}
		r := cli(t, append(slices.Clone(args), "--"+bad)...)
		if r.code != 2 || !strings.Contains(r.stderr, want) || r.stdout != "" {
			t.Errorf("#%d strata %s --%s: got exit %d, stdout %q, stderr:\n%s\nwant exit 2 and %q", i, line, bad, r.code, r.stdout, r.stderr, want)
		}
		if !strings.Contains(r.stderr, "--help") && !strings.Contains(r.stderr, "\nUsage: strata "+args[0]) {
			t.Errorf("#%d strata %s --%s: stderr lacks the --help hint or the usage:\n%s", i, line, bad, r.stderr)
		}
	}
}

func TestConventionActionTypos(t *testing.T) {
	n := 0
	for _, args := range leaves(t) {
		if len(args) != 2 || len(args[1]) < 4 {
			continue
		}
		n++
		bad := args[1][:len(args[1])-1]
		r := cli(t, args[0], bad)
		if r.code != 2 || !strings.Contains(r.stderr, "did you mean "+args[1]+"?") {
			t.Errorf("strata %s %s: got exit %d, stderr:\n%s\nwant exit 2 and did you mean %s?", args[0], bad, r.code, r.stderr, args[1])
		}
	}
	if n == 0 {
		t.Fatal("no action tried")
	}
	for i, tc := range []struct{ typed, want string }{
		{"topci", "topic"},
		{"tpoics", "topics"},
		{"grups", "groups"},
		{"consme", "consume"},
		{"prodcue", "produce"},
		{"brokr", "broker"},
	} {
		r := cli(t, tc.typed)
		if want := `unknown command "` + tc.typed + `": did you mean ` + tc.want + "?"; r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("#%d strata %s: got exit %d, stderr:\n%s\nwant exit 2 and %q", i, tc.typed, r.code, r.stderr, want)
		}
	}
}

func TestConventionAliases(t *testing.T) {
	top := mustCLI(t, "--help").stdout
	n := 0
	for alias, name := range aliases {
		if _, ok := commands[name]; !ok {
			continue // not in this binary
		}
		n++
		if !strings.Contains(top, "  "+name+", "+alias+" ") {
			t.Errorf("strata --help does not show %s with its alias %s:\n%s", name, alias, top)
		}
		a, c := cli(t, alias, "--help"), cli(t, name, "--help")
		if a.code != 0 || a.stdout != c.stdout {
			t.Errorf("strata %s --help: exit %d, and its help differs from strata %s --help:\n%s", alias, a.code, name, a.stdout)
		}
		if commands[name].actions != nil && !strings.Contains(c.stdout, "'strata "+alias+"' is the same command.") {
			t.Errorf("strata %s --help does not name its alias %s:\n%s", name, alias, c.stdout)
		}
	}
	for _, want := range []string{"topic", "groups", "users", "acl"} {
		if aliasOf(want) == "" {
			t.Errorf("resource command %s has no alias", want)
		}
	}
	if n < 4 {
		t.Errorf("got %d aliases of registered commands, want at least 4", n)
	}
}

// TestConventionNames runs each command that names a resource both ways
// against a real broker: as the argument and with the flag, through the
// canonical name and the alias, and compares what they print.
func TestConventionNames(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	run := func(args ...string) result {
		t.Helper()
		start := time.Now()
		defer func() { t.Logf("strata %s: %v", strings.Join(args, " "), time.Since(start)) }()
		return cli(t, append(args, b...)...)
	}
	must := func(args ...string) result {
		t.Helper()
		start := time.Now()
		defer func() { t.Logf("strata %s: %v", strings.Join(args, " "), time.Since(start)) }()
		return mustCLI(t, append(args, b...)...)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Which commands take a name: those whose help says so.
	takesName := map[string]bool{}
	for _, args := range leaves(t) {
		if strings.Contains(cli(t, append(slices.Clone(args), "--help")...).stdout, "may also be given as") {
			takesName[strings.Join(args, " ")] = true
		}
	}
	tried := map[string]bool{}
	// same runs both forms and wants the same exit status and output.
	sameBy := func(norm func(string) string, line string, asArg, asFlag []string) {
		t.Helper()
		tried[line] = true
		p, f := run(asArg...), run(asFlag...)
		if p.code != f.code || norm(p.stdout) != norm(f.stdout) || p.stderr != f.stderr {
			t.Errorf("%s: strata %v and strata %v differ:\nexit %d, stdout:\n%s\nstderr:\n%s\nvs exit %d, stdout:\n%s\nstderr:\n%s",
				line, asArg, asFlag, p.code, p.stdout, p.stderr, f.code, f.stdout, f.stderr)
		}
	}
	same := func(line string, asArg, asFlag []string) {
		t.Helper()
		sameBy(func(s string) string { return s }, line, asArg, asFlag)
	}
	// both runs each form on its own resource; both must succeed.
	both := func(line string, asArg, asFlag []string) {
		t.Helper()
		tried[line] = true
		must(asArg...)
		must(asFlag...)
	}

	both("topic create", []string{"topic", "create", "ta", "--partitions", "1"}, []string{"topics", "create", "--topic", "tf", "--partitions", "1"})
	withStdin(t, "k:v1\nk:v2\n")
	must("produce", "ta", "--key-separator", ":", "--partition", "0")
	withStdin(t, "k:v1\nk:v2\n")
	must("produce", "--topic", "tf", "--key-separator", ":", "--partition", "0")
	tried["produce"] = true
	same("topic describe", []string{"topic", "describe", "ta"}, []string{"topics", "describe", "--topic", "ta"})
	if d := must("topic", "describe", "ta", "tf").stdout; !strings.Contains(d, "Topic: ta") || !strings.Contains(d, "Topic: tf") {
		t.Errorf("topic describe ta tf: want both topics:\n%s", d)
	}
	same("consume", []string{"consume", "ta", "--from-beginning", "--max-messages", "2", "--print-key"},
		[]string{"consume", "--topic", "ta", "--from-beginning", "--max-messages", "2", "--print-key"})
	// Consumed by a group, for the groups commands.
	for _, g := range []string{"ga", "gf"} {
		must("consume", "ta", "--group", g, "--from-beginning", "--max-messages", "2", "--timeout", idleBound.String())
	}
	same("groups describe", []string{"groups", "describe", "ga"}, []string{"group", "describe", "--group", "ga"})
	same("groups reset-offsets", []string{"groups", "reset-offsets", "ga", "--topic", "ta", "--to-earliest"},
		[]string{"group", "reset-offsets", "--group", "ga", "--topic", "ta", "--to-earliest"})
	both("groups delete-offsets", []string{"groups", "delete-offsets", "ga", "--topic", "ta"}, []string{"group", "delete-offsets", "--group", "gf", "--topic", "ta"})
	both("groups delete", []string{"groups", "delete", "ga"}, []string{"group", "delete", "--group", "gf"})
	both("topic alter", []string{"topic", "alter", "ta", "--add-config", "retention.ms=86400000"},
		[]string{"topics", "alter", "--topic", "tf", "--add-config", "retention.ms=86400000"})
	both("topic delete-records", []string{"topic", "delete-records", "ta", "--partition", "0", "--offset", "1"},
		[]string{"topic", "delete-records", "--topic", "tf", "--partition", "0", "--offset", "1"})
	same("topic elect-leaders", []string{"topic", "elect-leaders", "ta"}, []string{"topic", "elect-leaders", "--topic", "ta"})
	// The disk's usable bytes change between two runs: only the
	// partition lines are compared.
	partitionLines := func(s string) string {
		var keep []string
		for l := range strings.Lines(s) {
			if strings.Contains(l, " ta ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "")
	}
	sameBy(partitionLines, "cluster log-dirs", []string{"cluster", "log-dirs", "ta"}, []string{"cluster", "log-dirs", "--topic", "ta"})
	if l := must("cluster", "log-dirs", "ta").stdout; partitionLines(l) == "" {
		t.Errorf("cluster log-dirs ta: no line for ta:\n%s", l)
	}
	same("cluster add-broker", []string{"cluster", "add-broker", "7"}, []string{"cluster", "add-broker", "--broker", "7"})
	same("cluster decommission", []string{"cluster", "decommission", "7"}, []string{"cluster", "decommission", "--broker", "7"})
	both("users create", []string{"users", "create", "ua", "--password-file", pw}, []string{"user", "create", "--user", "uf", "--password-file", pw})
	same("users list", []string{"users", "list", "ua", "uf"}, []string{"user", "list", "--user", "ua", "--user", "uf"})
	if l := must("users", "list", "ua", "uf").stdout; !strings.Contains(l, "ua") || !strings.Contains(l, "uf") {
		t.Errorf("users list ua uf: want both users:\n%s", l)
	}
	both("users delete", []string{"users", "delete", "ua"}, []string{"user", "delete", "--user", "uf"})
	// A token's HMAC: on this PLAINTEXT listener both forms are refused
	// alike (tokens need SASL), after the HMAC was taken from either.
	same("tokens renew", []string{"tokens", "renew", "aG1hYw=="}, []string{"tokens", "renew", "--hmac", "aG1hYw=="})
	same("tokens expire", []string{"tokens", "expire", "aG1hYw=="}, []string{"tokens", "expire", "--hmac", "aG1hYw=="})
	both("topic delete", []string{"topic", "delete", "ta"}, []string{"topics", "delete", "--topic", "tf"})
	if l := must("topic", "list").stdout; strings.Contains(l, "ta\n") || strings.Contains(l, "tf\n") {
		t.Errorf("topic list after deleting ta and tf:\n%s", l)
	}

	// tier reads files (its help is its own): TOPIC or --topic alike.
	logDirs := t.TempDir()
	if err := os.Mkdir(filepath.Join(logDirs, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := cli(t, "tier", "status", "ta", "--override", "log.dirs="+logDirs)
	f := cli(t, "tier", "status", "--topic", "ta", "--override", "log.dirs="+logDirs)
	if p != f || p.code != 1 || !strings.Contains(p.stderr, "ta: not in the object store") {
		t.Errorf("tier status ta and tier status --topic ta: got %+v and %+v, want the same, both about ta", p, f)
	}
	if r := cli(t, "tier", "restore", "ta", "--topic", "tb"); r.code != 2 || !strings.Contains(r.stderr, "the topic is given twice") {
		t.Errorf("tier restore ta --topic tb: got %+v, want exit 2, the topic is given twice", r)
	}

	for line := range takesName {
		if !tried[line] {
			t.Errorf("strata %s takes a name (its help says so) but is not tried both ways here", line)
		}
	}
	for line := range tried {
		if !takesName[line] {
			t.Errorf("strata %s is tried both ways but its help does not say it takes a name", line)
		}
	}
}

func TestEditDistanceAndNearest(t *testing.T) {
	for i, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"topic", "topic", 0}, {"topci", "topic", 1},
		{"kitten", "sitting", 3}, {"ca", "abc", 3}, {"grups", "groups", 1}, {"tpoics", "topics", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("#%d editDistance(%q, %q): got %d, want %d", i, tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("#%d editDistance(%q, %q): got %d, want %d", i, tc.b, tc.a, got, tc.want)
		}
	}
	flags := []string{"bootstrap-server", "partition", "partitions", "topic", "from-beginning", "format"}
	for i, tc := range []struct {
		name, want string // want "": no suggestion
	}{
		{"topci", "topic"}, {"partiton", "partition"}, {"partitons", "partitions"},
		{"boot", "bootstrap-server"}, {"bootstrap-servers", "bootstrap-server"},
		{"from-begining", "from-beginning"}, {"formt", "format"},
		{"x", ""}, {"verbose", ""}, {"part", ""}, // "part" starts two of them
	} {
		got, ok := nearest(tc.name, flags)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("#%d nearest(%q): got %q %v, want %q", i, tc.name, got, ok, tc.want)
		}
	}
}
