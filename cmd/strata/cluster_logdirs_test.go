package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// TestClusterLogDirs: `strata cluster log-dirs` on a broker with two log
// directories lists both and the partitions in each with their sizes on
// disk; --json is kafka-log-dirs.sh's JSON; --topic narrows it.
func TestClusterLogDirs(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	_, addr := startBrokerProps(t, map[string]string{"log.dirs": d1 + "," + d2})
	mustCLI(t, "topic", "create", "--topic", "ld", "--partitions", "2", "--bootstrap-server", addr)
	mustCLI(t, "topic", "create", "--topic", "other", "--partitions", "1", "--bootstrap-server", addr)
	produceLines(t, addr, "ld", 20)

	r := mustCLI(t, "cluster", "log-dirs", "--bootstrap-server", addr, "--json", "--topic", "ld")
	var out logDirsJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v in:\n%s", err, r.stdout)
	}
	if out.Version != 1 || len(out.Brokers) != 1 || out.Brokers[0].Broker != 0 || len(out.Brokers[0].LogDirs) != 2 {
		t.Fatalf("JSON: %s", r.stdout)
	}
	seen := map[string]string{}
	for _, d := range out.Brokers[0].LogDirs {
		if d.Error != nil {
			t.Errorf("%s: error %s", d.LogDir, *d.Error)
		}
		for _, p := range d.Partitions {
			seen[p.Partition] = d.LogDir
			if strings.HasPrefix(p.Partition, "other-") {
				t.Errorf("--topic ld listed %s", p.Partition)
			}
			var onDisk int64
			ents, _ := os.ReadDir(filepath.Join(d.LogDir, p.Partition))
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".log") {
					fi, _ := e.Info()
					onDisk += fi.Size()
				}
			}
			if p.Size != onDisk || p.IsFuture || p.OffsetLag != 0 {
				t.Errorf("%s in %s: %+v, want size %d", p.Partition, d.LogDir, p, onDisk)
			}
		}
	}
	if len(seen) != 2 || seen["ld-0"] == "" || seen["ld-1"] == "" {
		t.Errorf("partitions described: %v", seen)
	}
	if _, err := os.Stat(filepath.Join(seen["ld-0"], "ld-0")); err != nil {
		t.Errorf("ld-0 is not where it was described: %v", err)
	}

	r = mustCLI(t, "cluster", "log-dirs", "--bootstrap-server", addr, "--broker", "0")
	for _, want := range []string{d1, d2, "online", "ld", "other", "OFFSET LAG"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := cli(t, "cluster", "log-dirs", "--bootstrap-server", addr, "--topic", "nope"); r.code != 1 {
		t.Errorf("unknown topic: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := cli(t, "cluster", "log-dirs", "--bootstrap-server", addr, "--broker", "-5"); r.code != 2 {
		t.Errorf("--broker -5: exit %d", r.code)
	}
}

// TestTopicReassignLogDirs: `strata topic reassign --execute` with a
// log_dirs path moves the replica into that directory of its broker
// (AlterReplicaLogDirs), as kafka-reassign-partitions.sh does; a path
// that is not one of the broker's log.dirs fails before the
// reassignment starts.
func TestTopicReassignLogDirs(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	_, addr := startBrokerProps(t, map[string]string{"log.dirs": d1 + "," + d2})
	mustCLI(t, "topic", "create", "--topic", "lm", "--partitions", "1", "--bootstrap-server", addr)
	produceLines(t, addr, "lm", 50)
	where := func() (cur string, n int) {
		r := mustCLI(t, "cluster", "log-dirs", "--bootstrap-server", addr, "--json", "--topic", "lm")
		var out logDirsJSON
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v in:\n%s", err, r.stdout)
		}
		for _, d := range out.Brokers[0].LogDirs {
			for _, p := range d.Partitions {
				n++
				if p.Partition == "lm-0" && !p.IsFuture {
					cur = d.LogDir
				}
			}
		}
		return cur, n
	}
	from, _ := where()
	to := map[string]string{d1: d2, d2: d1}[from]
	plan := filepath.Join(t.TempDir(), "plan.json")
	write := func(dir string) {
		if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"lm","partition":0,"replicas":[0],"log_dirs":["`+dir+`"]}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(to, "nope"))
	if r := cli(t, "topic", "reassign", "--file", plan, "--execute", "--bootstrap-server", addr); r.code != 1 || !strings.Contains(r.stderr, "LOG_DIR_NOT_FOUND") || strings.Contains(r.stdout, "Successfully started") {
		t.Fatalf("unknown dir: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	write(to)
	r := mustCLI(t, "topic", "reassign", "--file", plan, "--execute", "--bootstrap-server", addr)
	if !strings.Contains(r.stdout, "Moving the replica of lm-0 on broker 0 to log directory "+to) {
		t.Errorf("execute:\n%s", r.stdout)
	}
	if !poll.For(30*time.Second, func() bool { cur, n := where(); return cur == to && n == 1 }) {
		cur, n := where()
		t.Fatalf("lm-0 in %s (%d replicas listed), want %s only", cur, n, to)
	}
	if _, err := os.Stat(filepath.Join(from, "lm-0")); !os.IsNotExist(err) && !poll.For(30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(from, "lm-0"))
		return os.IsNotExist(err)
	}) {
		t.Errorf("lm-0 still in %s", from)
	}
	r = mustCLI(t, "consume", "lm", "--from-beginning", "--max-messages", "50", "--bootstrap-server", addr)
	if strings.Count(r.stdout, "\n") != 50 {
		t.Errorf("after the move consumed:\n%s", r.stdout)
	}
}
