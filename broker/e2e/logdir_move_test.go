package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment/poll"
)

// TestLogDirMoveKill: a real `strata broker` with two log directories;
// an idempotent acks=all producer writes to two partitions while
// partition 0's replica is moved to the other directory
// (AlterReplicaLogDirs) and the broker is killed with SIGKILL a random
// moment (0-40 ms) after the request, three times, then moved once more
// to the end. After every restart the partition is whole in exactly one
// directory with nothing of the move left, and the producer goes on; at
// the end the history checker finds nothing acknowledged lost,
// duplicated or inconsistent. Logs where each kill landed.
func TestLogDirMoveKill(t *testing.T) {
	const topic = "mvkill"
	d1, d2 := t.TempDir(), t.TempDir()
	b := StartBroker(t, "broker.id=1", "log.dirs="+d1+","+d2, "log.segment.bytes=65536",
		"num.partitions=2", "offsets.topic.num.partitions=1")
	c := &Cluster{brokers: []*Broker{b}}
	b.CreateTopic(t, topic, 2)
	parts := []int32{0, 1}
	prod := c.startSeqProducer(t, topic, parts, time.Millisecond)
	prod.acks.waitAcks(t, parts, time.Time{}, 2000, 60*time.Second, "before the first move")

	other := map[string]string{d1: d2, d2: d1}
	name := topic + "-0"
	// whereIs returns the directory holding the partition, failing on
	// two copies or leftovers of a move.
	whereIs := func(when string) string {
		t.Helper()
		var in []string
		for _, d := range []string{d1, d2} {
			ents, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				switch {
				case e.Name() == name:
					in = append(in, d)
					if _, err := os.Stat(filepath.Join(d, name, ".strata-moved")); err == nil {
						t.Errorf("%s: move marker left in %s", when, d)
					}
				case strings.HasPrefix(e.Name(), name+".") && strings.HasSuffix(e.Name(), "-future"):
					t.Errorf("%s: future replica left: %s", when, filepath.Join(d, e.Name()))
				}
			}
		}
		if len(in) != 1 {
			t.Fatalf("%s: %s is in %v, want exactly one directory", when, name, in)
		}
		return in[0]
	}
	move := func(to string) {
		t.Helper()
		cl := c.newClient(t)
		defer cl.Close()
		var req kadm.AlterReplicaLogDirsReq
		var ts kadm.TopicsSet
		ts.Add(topic, 0)
		req.Add(to, ts)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resps, err := kadm.NewClient(cl).AlterBrokerReplicaLogDirs(ctx, 1, req)
		if err != nil {
			t.Fatalf("AlterReplicaLogDirs: %v", err)
		}
		resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				t.Fatalf("AlterReplicaLogDirs %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
			}
		})
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range 3 {
		from := whereIs("before the move")
		to := other[from]
		move(to)
		delay := time.Duration(rng.IntN(40)) * time.Millisecond
		// The kill lands at a random point: the fault's timing, not a wait
		// for a condition (any point must leave the log whole).
		killAt := time.NewTimer(delay)
		<-killAt.C
		b.Kill(t)
		var onDisk []string
		for _, d := range []string{d1, d2} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), name) {
					onDisk = append(onDisk, filepath.Join(filepath.Base(d), e.Name()))
				}
			}
		}
		b.Restart(t)
		got := whereIs("after the restart")
		landed := "before the switch: the old replica kept"
		if got == to {
			landed = "after the switch: the new replica kept"
		}
		t.Logf("round %d: killed %v after the request, on disk %v; %s", round, delay, onDisk, landed)
		prod.acks.waitAcks(t, parts, time.Now(), 300, 60*time.Second, "after the restart")
	}

	// One move to the end.
	from := whereIs("before the last move")
	move(other[from])
	if !poll.For(60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(from, name))
		return os.IsNotExist(err)
	}) {
		t.Fatalf("the last move did not finish: %s still in %s", name, from)
	}
	if got := whereIs("after the last move"); got != other[from] {
		t.Fatalf("after the last move %s is in %s", name, got)
	}
	prod.acks.waitAcks(t, parts, time.Now(), 300, 60*time.Second, "after the last move")

	sent := prod.stop(t)
	logs := c.readLog(t, topic, parts)
	hist := history.New()
	addProduces(hist, "franz-go", topic, sent)
	rep := hist.Check(finalLog(topic, logs))
	t.Logf("LOGDIR_MOVE_KILL history: %s", rep)
	if !rep.OK() || rep.Lost+rep.Inconsistent+rep.Duplicated != 0 {
		t.Errorf("the history checker found %s; first problems:\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
	if rep.Acknowledged == 0 {
		t.Error("nothing was acknowledged")
	}
}
