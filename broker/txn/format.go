package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record versions of __transaction_state: Kafka's TransactionLogKey v0 and
// TransactionLogValue v0 (written for transactions of transaction version
// 0 and 1, as Kafka 3.9 writes them) and v1 (flexible: written for a
// transaction of version 2, whose tagged fields hold the previous and next
// producer ids and the client's transaction version). Stored data
// depends on them: never change them.
const (
	keyVersion     int16 = 0
	valueVersion   int16 = 0
	maxValueVerson int16 = 1
)

// Transaction versions (Kafka's TransactionVersion, the levels of the
// transaction.version feature) as Metadata.ClientVersion records them:
// version 2 bumps the producer epoch at every EndTxn (KIP-890 part 2).
// Stored in TransactionLogValue v1: never change them.
const (
	TransactionVersion0 int16 = 0
	TransactionVersion1 int16 = 1
	TransactionVersion2 int16 = 2
)

// Errors of DecodeRecord.
var (
	// ErrUnknownRecord is a record whose key or value version this code
	// does not know.
	ErrUnknownRecord = errors.New("txn: unknown record version in __transaction_state")
	// ErrBadRecord is a record that does not decode.
	ErrBadRecord = errors.New("txn: malformed record in __transaction_state")
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Metadata is one transactional id's state as __transaction_state stores
// it (plus the previous producer id and epoch, which only memory keeps, as
// in Kafka 3.9).
type Metadata struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// LastProducerID and LastProducerEpoch are the id and epoch before
	// the last InitProducerId (KIP-360 retries); -1 when unknown.
	LastProducerID    int64
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	Partitions        map[TopicPartition]struct{}
	StartMs           int64 // when the transaction began, -1 when none
	LastUpdateMs      int64
	// NextProducerID is the producer id that takes over once a
	// transaction of version 2 whose epoch overflowed completes; -1
	// when none.
	NextProducerID int64
	// ClientVersion is the transaction version of the client's
	// transaction (Kafka's clientTransactionVersion): with
	// TransactionVersion2 its EndTxn bumped the epoch.
	ClientVersion int16
}

// hasNextProducerID reports whether m is a transaction of version 2
// whose epoch overflowed: NextProducerID takes over once it completes.
func (m Metadata) hasNextProducerID() bool {
	return m.ClientVersion >= TransactionVersion2 && m.NextProducerID >= 0
}

// clone returns a copy that shares nothing with m.
func (m Metadata) clone() Metadata {
	m.Partitions = maps.Clone(m.Partitions)
	return m
}

// SortedPartitions returns the partitions ordered by topic and partition.
func (m Metadata) SortedPartitions() []TopicPartition {
	out := slices.Collect(maps.Keys(m.Partitions))
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

// EncodeKey returns the record key of a transactional id.
func EncodeKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// EncodeValue returns the record value of m: TransactionLogValue v0, or
// v1 for a transaction of version 2 (with its tagged previous and next
// producer ids and client transaction version). An Empty transaction has
// a null partition list, as Kafka writes it.
func EncodeValue(m Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	if m.ClientVersion >= TransactionVersion2 {
		v.Version = 1
		v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = m.LastProducerID, m.NextProducerID, m.ClientVersion
	}
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = m.ProducerID, m.ProducerEpoch, m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp, v.StartTimestamp = m.LastUpdateMs, m.StartMs
	if m.State != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{} // not null
		for _, tp := range m.SortedPartitions() {
			if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
				v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
		}
	}
	return v.AppendTo(nil)
}

// DecodeRecord decodes one record of __transaction_state: the
// transactional id and its metadata, or nil metadata for a tombstone
// (value nil). Errors wrap ErrUnknownRecord or ErrBadRecord.
func DecodeRecord(key, value []byte) (string, *Metadata, error) {
	if len(key) < 2 {
		return "", nil, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != keyVersion {
		return "", nil, fmt.Errorf("%w: key version %d", ErrUnknownRecord, v)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	if len(value) < 2 {
		return k.TransactionalID, nil, fmt.Errorf("%w: value of %d bytes", ErrBadRecord, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > maxValueVerson {
		return k.TransactionalID, nil, fmt.Errorf("%w: value version %d", ErrUnknownRecord, v)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return k.TransactionalID, nil, fmt.Errorf("%w: value of %q: %v", ErrBadRecord, k.TransactionalID, err)
	}
	st := State(v.State)
	if !st.valid() || st == PrepareEpochFence {
		return k.TransactionalID, nil, fmt.Errorf("%w: value of %q: state %d", ErrBadRecord, k.TransactionalID, v.State)
	}
	m := &Metadata{
		TransactionalID: k.TransactionalID,
		ProducerID:      v.ProducerID, ProducerEpoch: v.ProducerEpoch,
		LastProducerID: -1, LastProducerEpoch: -1,
		TimeoutMs: v.TimeoutMillis, State: st,
		Partitions: map[TopicPartition]struct{}{},
		StartMs:    v.StartTimestamp, LastUpdateMs: v.LastUpdateTimestamp,
		NextProducerID: -1,
	}
	if v.Version >= 1 {
		m.LastProducerID, m.NextProducerID, m.ClientVersion = v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion
	}
	if st != Empty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.Partitions[TopicPartition{t.Topic, p}] = struct{}{}
			}
		}
	}
	return k.TransactionalID, m, nil
}
