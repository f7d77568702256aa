package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKcatByPartition produces keyed lines with kcat to explicit partitions
// of an auto-created topic, in several rounds, and reads them back with kcat:
// every partition must hold exactly its lines, in the order sent, at offsets
// 0, 1, 2, ...
func TestKcatByPartition(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t, "num.partitions=3")
	const topic = "kcat-by-partition"

	want := map[int32][]kcatRecord{}
	round := func(r int, p int32, n int, valueLen int) {
		var in strings.Builder
		for i := range n {
			k := fmt.Sprintf("key-%d-%d-%d", p, r, i)
			v := fmt.Sprintf("value-%d-%d-%d-", p, r, i)
			v += strings.Repeat(string(rune('a'+i%26)), max(0, valueLen-len(v)))
			fmt.Fprintf(&in, "%s:%s\n", k, v)
			want[p] = append(want[p], kcatRecord{p, int64(len(want[p])), k, v})
		}
		runCmd(t, 30*time.Second, in.String(), "kcat", "-P", "-b", b.Addr, "-t", topic, "-K:", "-p", fmt.Sprint(p))
	}
	round(0, 0, 200, 20)
	round(0, 1, 300, 100)
	round(0, 2, 50, 20000) // larger values: several batches per request
	round(1, 0, 100, 1)
	round(1, 2, 10, 0)
	round(2, 0, 1, 5)

	got := kcatConsume(t, b.Addr, topic)
	for p := int32(0); p < 3; p++ {
		checkRecords(t, p, got[p], want[p])
	}
	if len(got) != 3 {
		t.Errorf("got records in %d partitions, want 3", len(got))
	}
	b.RequireAlive(t)
}

// checkRecords compares one partition's records in order.
func checkRecords(t *testing.T, p int32, got, want []kcatRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("partition %d: got %d records, want %d", p, len(got), len(want))
	}
	bad := 0
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("partition %d #%d: got %+v, want %+v", p, i, short(got[i]), short(want[i]))
			if bad++; bad == 5 {
				t.Errorf("partition %d: stopping after 5 mismatches", p)
				return
			}
		}
	}
}

func short(r kcatRecord) kcatRecord {
	if len(r.Value) > 40 {
		r.Value = r.Value[:40] + fmt.Sprintf("...(%d bytes)", len(r.Value))
	}
	return r
}

// TestKcatSpreadByKey lets librdkafka's partitioner spread keyed lines over
// three partitions: every line comes back exactly once, each key stays in one
// partition, and within a partition lines keep the order they were sent in.
func TestKcatSpreadByKey(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t, "num.partitions=3")
	const topic = "kcat-spread"
	const n = 3000

	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "k%d:%d\n", i%17, i)
	}
	runCmd(t, 30*time.Second, in.String(), "kcat", "-P", "-b", b.Addr, "-t", topic, "-K:")

	got := kcatConsume(t, b.Addr, topic)
	seen := make([]bool, n)
	keyPart := map[string]int32{}
	total := 0
	for p, recs := range got {
		last := -1
		for i, r := range recs {
			total++
			if r.Offset != int64(i) {
				t.Fatalf("partition %d #%d: offset %d, want %d", p, i, r.Offset, i)
			}
			var v int
			if _, err := fmt.Sscan(r.Value, &v); err != nil || v < 0 || v >= n {
				t.Fatalf("partition %d offset %d: value %q is not one that was sent", p, r.Offset, r.Value)
			}
			if seen[v] {
				t.Fatalf("partition %d offset %d: value %d read twice", p, r.Offset, v)
			}
			seen[v] = true
			if want := fmt.Sprintf("k%d", v%17); r.Key != want {
				t.Fatalf("partition %d offset %d: key %q with value %d, want key %q", p, r.Offset, r.Key, v, want)
			}
			if v <= last {
				t.Fatalf("partition %d offset %d: value %d after %d; order within the partition not kept", p, r.Offset, v, last)
			}
			last = v
			if q, ok := keyPart[r.Key]; ok && q != p {
				t.Fatalf("key %s in partitions %d and %d", r.Key, q, p)
			}
			keyPart[r.Key] = p
		}
	}
	if total != n {
		t.Fatalf("read %d records, want %d", total, n)
	}
	if len(got) < 2 {
		t.Errorf("all %d records landed in %d partition(s); the partitioner should have spread 17 keys over 3", n, len(got))
	}
}

// kcatMetadataJSON is the part of `kcat -L -J` output the tests check.
type kcatMetadataJSON struct {
	OriginatingBroker struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Error     string `json:"error"`
			Leader    int32  `json:"leader"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcatMetadata checks `kcat -L`: one broker at the listener address, and
// a created topic with its partitions led by that broker.
func TestKcatMetadata(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t, "broker.id=7")
	b.CreateTopic(t, "meta-a", 4)
	b.CreateTopic(t, "meta-b", 1)

	kcatMetadataOK(t, b.Addr)
	out := runCmd(t, 30*time.Second, "", "kcat", "-L", "-J", "-b", b.Addr)
	var md kcatMetadataJSON
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 7 || md.Brokers[0].Name != b.Addr {
		t.Errorf("brokers = %+v, want one: id 7 at %s", md.Brokers, b.Addr)
	}
	parts := map[string]int{}
	for _, tp := range md.Topics {
		if tp.Error != "" {
			t.Errorf("topic %s: error %s", tp.Topic, tp.Error)
		}
		parts[tp.Topic] = len(tp.Partitions)
		for _, p := range tp.Partitions {
			if p.Error != "" || p.Leader != 7 || len(p.Replicas) != 1 || p.Replicas[0].ID != 7 || len(p.ISRs) != 1 || p.ISRs[0].ID != 7 {
				t.Errorf("topic %s partition %d: %+v, want leader, replicas and ISR [7] with no error", tp.Topic, p.Partition, p)
			}
		}
	}
	if parts["meta-a"] != 4 || parts["meta-b"] != 1 {
		t.Errorf("partitions per topic = %v, want meta-a:4 meta-b:1", parts)
	}
}
