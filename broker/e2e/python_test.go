package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"
)

// pythonProducer is run by Debian's Python: it produces n keyed messages with
// confluent_kafka's Producer in its default settings (librdkafka 2.0.2: acks
// all, idempotence off, consistent_random partitioner, batching with linger)
// and prints the delivery reports as JSON.
const pythonProducer = `
import json, sys
import confluent_kafka
from confluent_kafka import Producer

addr, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({'bootstrap.servers': addr})
acked, errors = [], []

def report(err, msg):
    if err is not None:
        errors.append(str(err))
    else:
        acked.append([msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()])

for i in range(n):
    while True:
        try:
            p.produce(topic, key='key%d' % (i % 23), value='value-%d-%s' % (i, 'x' * (i % 300)), on_delivery=report)
            break
        except BufferError:
            p.poll(0.1)
    p.poll(0)
left = p.flush(60)
json.dump({'librdkafka': confluent_kafka.libversion()[0], 'left': left,
           'acked': acked, 'errors': errors[:20], 'nerrors': len(errors)}, sys.stdout)
`

// TestPythonConfluentProducer produces with librdkafka's default producer
// (through Debian's python3-confluent-kafka) and reads back with kcat: every
// delivery report's partition and offset holds its key and value, in send
// order per partition, and nothing else is there.
func TestPythonConfluentProducer(t *testing.T) {
	requireConfluentKafka(t)
	requireKcat(t)
	b := StartBroker(t, "num.partitions=3")
	const topic, n = "python-default", 5000

	out := runCmd(t, 90*time.Second, "", debianPython, "-c", pythonProducer, b.Addr, topic, fmt.Sprint(n))
	var res struct {
		Librdkafka string  `json:"librdkafka"`
		Left       int     `json:"left"`
		Acked      [][]any `json:"acked"`
		Errors     []string
		NErrors    int `json:"nerrors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("producer output: %v\n%s", err, tailString(out, 4096))
	}
	t.Logf("librdkafka %s: %d acknowledged, %d errors, %d left in queue", res.Librdkafka, len(res.Acked), res.NErrors, res.Left)
	if res.NErrors > 0 || res.Left > 0 || len(res.Acked) != n {
		t.Fatalf("producer: %d acknowledged of %d, %d left unsent, %d errors, first: %v", len(res.Acked), n, res.Left, res.NErrors, res.Errors)
	}

	want := map[int32][]kcatRecord{}
	for _, a := range res.Acked {
		r := kcatRecord{int32(a[0].(float64)), int64(a[1].(float64)), a[2].(string), a[3].(string)}
		want[r.Partition] = append(want[r.Partition], r)
	}
	for p, rs := range want {
		// Delivery reports come in offset order per partition; sort anyway
		// so that a report-order quirk is not taken for a broker bug.
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		last := -1
		for i, r := range rs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: acknowledged offsets %d..., want 0, 1, 2, ... (gap or duplicate at #%d: %d)", p, rs[0].Offset, i, r.Offset)
			}
			var seq int
			if _, err := fmt.Sscanf(r.Value, "value-%d-", &seq); err != nil || seq <= last {
				t.Fatalf("partition %d offset %d: value %.20q after send #%d; send order not kept", p, r.Offset, r.Value, last)
			}
			last = seq
		}
	}
	got := kcatConsume(t, b.Addr, topic)
	for p := range int32(3) {
		checkRecords(t, p, got[p], want[p])
	}
	if len(want) < 2 {
		t.Errorf("librdkafka put all records in %d partition(s); 23 keys over 3 partitions should spread", len(want))
	}
}
