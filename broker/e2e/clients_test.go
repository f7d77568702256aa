package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

// TestSarama produces with sarama's SyncProducer (its default protocol
// version, snappy, acks all, manual partitions) and consumes each partition
// with sarama's partition consumer: same keys and values, in order, at the
// acknowledged offsets.
func TestSarama(t *testing.T) {
	const (
		topic      = "sarama"
		partitions = 3
		n          = 6000
		size       = 200
	)
	b := StartBroker(t)
	b.CreateTopic(t, topic, partitions)

	cfg := sarama.NewConfig()
	cfg.ClientID = "strata-e2e-sarama"
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionSnappy
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	t.Logf("sarama protocol version %s", cfg.Version)

	prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	prodClosed := false
	defer func() {
		if !prodClosed {
			prod.Close()
		}
	}()
	for start := 0; start < n; start += 500 {
		var msgs []*sarama.ProducerMessage
		for i := start; i < min(n, start+500); i++ {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic:     topic,
				Partition: int32(i % partitions),
				Key:       sarama.ByteEncoder(recordKey(i)),
				Value:     sarama.ByteEncoder(recordValue(i, size)),
			})
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatalf("SendMessages %d..: %v", start, err)
		}
		for _, m := range msgs {
			i := int(binary.BigEndian.Uint64(m.Key.(sarama.ByteEncoder)))
			if want := int64(i / partitions); m.Offset != want || m.Partition != int32(i%partitions) {
				t.Fatalf("record %d acknowledged at %d/%d, want %d/%d", i, m.Partition, m.Offset, i%partitions, want)
			}
		}
	}
	prodClosed = true
	if err := prod.Close(); err != nil {
		t.Errorf("closing producer: %v", err)
	}

	cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer cons.Close()
	timeout := time.After(60 * time.Second)
	for p := range int32(partitions) {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition %d: %v", p, err)
		}
		for off := int64(0); int(off)*partitions+int(p) < n; off++ {
			i := int(off)*partitions + int(p)
			select {
			case m := <-pc.Messages():
				if m.Offset != off || !bytes.Equal(m.Key, recordKey(i)) || !bytes.Equal(m.Value, recordValue(i, size)) {
					t.Fatalf("partition %d: got offset %d key %x value %.30q, want offset %d key %x value %.30q", p, m.Offset, m.Key, m.Value, off, recordKey(i), recordValue(i, size))
				}
			case err := <-pc.Errors():
				t.Fatalf("partition %d at offset %d: %v", p, off, err)
			case <-timeout:
				t.Fatalf("partition %d: timed out waiting for offset %d", p, off)
			}
		}
		if err := pc.Close(); err != nil {
			t.Errorf("closing partition consumer %d: %v", p, err)
		}
	}
}

// TestKafkaGo produces with segmentio/kafka-go's Writer (zstd, acks all, a
// balancer that picks the partition from the key) and reads each partition
// with a partition Reader (no group): same keys and values, in order.
func TestKafkaGo(t *testing.T) {
	const (
		topic      = "kafka-go"
		partitions = 3
		n          = 6000
		size       = 200
	)
	b := StartBroker(t)
	b.CreateTopic(t, topic, partitions)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	w := &kafka.Writer{
		Addr:  kafka.TCP(b.Addr),
		Topic: topic,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, ps ...int) int {
			return ps[int(binary.BigEndian.Uint64(m.Key))%len(ps)]
		}),
		RequiredAcks: kafka.RequireAll,
		Compression:  kafka.Zstd,
		BatchSize:    500,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
	}
	defer w.Close()
	for start := 0; start < n; start += 500 {
		var msgs []kafka.Message
		for i := start; i < min(n, start+500); i++ {
			msgs = append(msgs, kafka.Message{Key: recordKey(i), Value: recordValue(i, size)})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			var werrs kafka.WriteErrors
			if errors.As(err, &werrs) {
				t.Fatalf("WriteMessages %d..: %d of %d failed: %v", start, werrs.Count(), len(msgs), err)
			}
			t.Fatalf("WriteMessages %d..: %v", start, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Errorf("closing writer: %v", err)
	}

	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{b.Addr},
			Topic:     topic,
			Partition: p,
			MinBytes:  1,
			MaxBytes:  8 << 20,
			MaxWait:   500 * time.Millisecond,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatalf("SetOffset: %v", err)
		}
		for off := int64(0); int(off)*partitions+p < n; off++ {
			i := int(off)*partitions + p
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: reading offset %d: %v", p, off, err)
			}
			if m.Partition != p || m.Offset != off || !bytes.Equal(m.Key, recordKey(i)) || !bytes.Equal(m.Value, recordValue(i, size)) {
				t.Fatalf("partition %d: got %d/%d key %x value %.30q, want offset %d key %x value %.30q", p, m.Partition, m.Offset, m.Key, m.Value, off, recordKey(i), recordValue(i, size))
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("closing reader %d: %v", p, err)
		}
	}
}
