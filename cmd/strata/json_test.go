package main

// TestConventionJSON holds --format json to the command registry: every
// command that prints data has it (and no other), and each answers it
// against a real broker with valid JSON, its documented fields present.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// printsData are the command lines that print data, each with
// --format text|json.
var printsData = map[string]bool{
	"topic list": true, "topic describe": true,
	"groups list": true, "groups describe": true,
	"users list": true, "acl list": true,
	"cluster": true, "cluster log-dirs": true, "cluster rebalance": true, "cluster add-broker": true, "cluster decommission": true,
	"consume": true, "dump": true, "tier status": true, "version": true,
	"configs describe": true, "tokens describe": true,
}

func TestConventionJSON(t *testing.T) {
	// The registry's commands with --format are those that print data.
	seen := map[string]bool{}
	for _, args := range leaves(t) {
		line := strings.Join(args, " ")
		help := cli(t, append(slices.Clone(args), "--help")...).stdout
		has := strings.Contains(help, "--format")
		seen[line] = true
		switch {
		case printsData[line] && !has:
			t.Errorf("strata %s prints data but its help has no --format", line)
		case !printsData[line] && has && line != "tier restore":
			t.Errorf("strata %s has --format but is not in printsData: add it there, and to the runs below", line)
		}
	}
	for line := range printsData {
		if !seen[line] {
			t.Errorf("printsData names strata %s, which the registry does not have", line)
		}
	}

	_, addr := startBrokerProps(t, map[string]string{
		"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
		"super.users":           "User:ANONYMOUS",
	})
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "js", "--partitions", "2"}, b...)...)
	withStdin(t, "k1:v1\nk2:v2\n")
	mustCLI(t, append([]string{"produce", "js", "--key-separator", ":"}, b...)...)
	mustCLI(t, append([]string{"consume", "js", "-e", "--group", "jg", "--from-beginning"}, b...)...)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, append([]string{"users", "create", "ju", "--password-file", pw}, b...)...)
	mustCLI(t, append([]string{"acl", "add", "--allow-principal", "User:ju", "--operation", "Read", "--topic", "js"}, b...)...)
	logDirs := t.TempDir()
	if err := os.Mkdir(filepath.Join(logDirs, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	seg := writeFile(t, t.TempDir(), "00000000000000000000.log", buildSegment(t).log)

	type run struct {
		args  []string
		lines bool     // an object a line
		want  []string // fields of the (first) object
		// fails is the error both formats end with, where a single
		// broker cannot give the data (decommission of the only broker;
		// its plan prints as rebalance's and add-broker's, one function).
		fails string
	}
	runs := map[string]run{
		"topic list":           {args: []string{"topic", "list"}, want: []string{"topics"}},
		"topic describe":       {args: []string{"topic", "describe", "js"}, want: []string{"topics"}},
		"groups list":          {args: []string{"groups", "list"}, want: []string{"groups"}},
		"groups describe":      {args: []string{"groups", "describe", "jg"}, want: []string{"group_id", "state", "partitions", "members"}},
		"users list":           {args: []string{"users", "list"}, want: []string{"users"}},
		"acl list":             {args: []string{"acl", "list"}, want: []string{"acls"}},
		"cluster":              {args: []string{"cluster"}, want: []string{"cluster_id", "controller", "brokers"}},
		"cluster log-dirs":     {args: []string{"cluster", "log-dirs"}, want: []string{"brokers", "version"}},
		"cluster rebalance":    {args: []string{"cluster", "rebalance"}, want: []string{"replica_moves", "partitions_changed", "changes", "current_assignment", "proposed_assignment"}},
		"cluster add-broker":   {args: []string{"cluster", "add-broker", "0"}, want: []string{"replica_moves", "changes"}},
		"cluster decommission": {args: []string{"cluster", "decommission", "0"}, fails: "cannot decommission broker 0"},
		"consume":              {args: []string{"consume", "js", "-e", "--from-beginning"}, lines: true, want: []string{"topic", "partition", "offset", "timestamp", "key", "value", "headers"}},
		"dump":                 {args: []string{"dump", seg, "--print-data"}, lines: true, want: []string{"type", "file", "base_offset", "size", "kind"}},
		"tier status":          {args: []string{"tier", "status", "--override", "log.dirs=" + logDirs}, want: []string{"object_store", "partitions"}},
		"version":              {args: []string{"version"}, want: []string{"version", "commit", "go_version", "os", "arch"}},
		"configs describe":     {args: []string{"configs", "describe", "--entity-type", "topics", "--entity-name", "js"}, want: []string{"entities"}},
		// Tokens need a SASL connection: on this PLAINTEXT listener
		// both formats end with the same refusal.
		"tokens describe": {args: []string{"tokens", "describe"}, fails: "DELEGATION_TOKEN"},
	}
	local := map[string]bool{"dump": true, "tier status": true, "version": true}
	for line := range printsData {
		r, ok := runs[line]
		if !ok {
			t.Errorf("strata %s: no --format json run here", line)
			continue
		}
		args := append(slices.Clone(r.args), "--format", "json")
		if !local[line] {
			args = append(args, b...)
		}
		res := cli(t, args...)
		if r.fails != "" {
			text := cli(t, append(slices.Clone(r.args), b...)...)
			if res.code != 1 || text.code != 1 || !strings.Contains(res.stderr, r.fails) || res.stderr != text.stderr || res.stdout != "" {
				t.Errorf("strata %v: got exit %d, stdout %q, stderr %q; want exit 1 with %q, as the text gives: %q", args, res.code, res.stdout, res.stderr, r.fails, text.stderr)
			}
			t.Logf("strata %v: %s (one broker)", args, r.fails)
			continue
		}
		if res.code != 0 {
			t.Errorf("strata %v: exit %d\n%s%s", args, res.code, res.stdout, res.stderr)
			continue
		}
		docs := []string{res.stdout}
		if r.lines {
			docs = slices.Collect(strings.Lines(res.stdout))
		}
		if len(docs) == 0 || strings.TrimSpace(docs[0]) == "" {
			t.Errorf("strata %v: no output", args)
			continue
		}
		for i, doc := range docs {
			var v map[string]any
			if err := json.Unmarshal([]byte(doc), &v); err != nil {
				t.Errorf("strata %v: document %d is not a JSON object: %v\n%s", args, i, err, doc)
				break
			}
			if i > 0 {
				continue
			}
			for _, f := range r.want {
				if _, ok := v[f]; !ok {
					t.Errorf("strata %v: no field %q in %s", args, f, doc)
				}
			}
		}
		// text stays the default, and is what --format text prints.
		text := slices.Clone(r.args)
		if !local[line] {
			text = append(text, b...)
		}
		if d, e := cli(t, text...), cli(t, append(slices.Clone(text), "--format", "text")...); d.code != 0 || d.stdout != e.stdout && line != "cluster log-dirs" && line != "tier status" {
			t.Errorf("strata %v: the default and --format text differ (exit %d):\n%s\nvs\n%s", text, d.code, d.stdout, e.stdout)
		}
	}

	// Some values, to hold the fields to what the text says.
	var td jsonTopics
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"topic", "describe", "js", "--format", "json"}, b...)...).stdout), &td); err != nil {
		t.Fatal(err)
	}
	if len(td.Topics) != 1 || td.Topics[0].Name != "js" || td.Topics[0].PartitionCount != 2 || len(td.Topics[0].Partitions) != 2 || td.Topics[0].Partitions[0].Leader < 0 {
		t.Errorf("topic describe js --format json: %+v", td)
	}
	var gd jsonGroup
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"groups", "describe", "jg", "--format", "json"}, b...)...).stdout), &gd); err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, p := range gd.Partitions {
		if p.CurrentOffset != nil {
			committed += *p.CurrentOffset
		}
		if p.Lag == nil || *p.Lag != 0 {
			t.Errorf("groups describe jg --format json: partition %d lag %v, want 0", p.Partition, p.Lag)
		}
	}
	if gd.GroupID != "jg" || committed != 2 {
		t.Errorf("groups describe jg --format json: group %q, %d committed, want jg and 2: %+v", gd.GroupID, committed, gd)
	}
	var ad jsonACLs
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"acl", "list", "--format", "json"}, b...)...).stdout), &ad); err != nil {
		t.Fatal(err)
	}
	if len(ad.ACLs) != 1 || ad.ACLs[0].Principal != "User:ju" || ad.ACLs[0].ResourceName != "js" {
		t.Errorf("acl list --format json: %+v", ad)
	}
	var ud jsonUsers
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"users", "list", "--format", "json"}, b...)...).stdout), &ud); err != nil {
		t.Fatal(err)
	}
	if len(ud.Users) != 1 || ud.Users[0].User != "ju" || len(ud.Users[0].Credentials) == 0 {
		t.Errorf("users list --format json: %+v", ud)
	}
}

func TestDumpJSON(t *testing.T) {
	path := writeFile(t, t.TempDir(), "00000000000000000000.log", buildSegment(t).log)
	status, out, errs := runDumpArgs(t, path, "--print-data", "--format", "json")
	if status != 0 || errs != "" {
		t.Fatalf("got status %d, stderr %q", status, errs)
	}
	var types []string
	var records []map[string]any
	for l := range strings.Lines(out) {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, v["type"].(string))
		if v["type"] == "record" {
			records = append(records, v)
		}
	}
	if types[0] != "file" || types[len(types)-1] != "log_summary" || len(records) != 6 {
		t.Fatalf("got types %v, %d records; want file first, log_summary last, 6 records", types, len(records))
	}
	if r := records[0]; r["key"] != "user-1" || r["value"] != "hello" || r["offset"] != 0.0 {
		t.Errorf("record 0: %v", r)
	}
	if r := records[1]; r["key"] != nil || r["value"] != "AP8K" || r["value_base64"] != true {
		t.Errorf("record 1 (null key, bytes not UTF-8): %v", r)
	}
	if r := records[5]; r["control"] != "commit" {
		t.Errorf("record 5: %v, want control commit", r)
	}
}
