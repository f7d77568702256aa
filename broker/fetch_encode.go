package broker

import (
	"os"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file writes the Fetch response body (v0-v17) by hand, because its
// record bytes are not in memory: they are ranges of segment files that
// the connection sends with sendfile. Everything else is the byte layout
// kmsg.FetchResponse.AppendTo produces, field for field, using kbin's
// primitives; fetch_encode_test.go checks the two agree for every served
// version. The layout (fields in order; "flexible" is v12+, where arrays
// and strings carry uvarint length+1, and each struct ends in tagged
// fields, here always empty: one 0 byte):
//
//	ThrottleMillis int32                 (v1+)
//	ErrorCode int16                      (v7+)
//	SessionID int32                      (v7+)
//	Topics [
//	  Topic string                       (v0-v12)
//	  TopicID uuid (16 bytes)            (v13+)
//	  Partitions [
//	    Partition int32
//	    ErrorCode int16
//	    HighWatermark int64
//	    LastStableOffset int64           (v4+)
//	    LogStartOffset int64             (v5+)
//	    AbortedTransactions nullable [ProducerID int64, FirstOffset int64,
//	                        tagged fields (flexible)] (v4+)
//	    PreferredReadReplica int32       (v11+)
//	    Records bytes                    <- file ranges go here
//	    tagged fields                    (flexible; tag 1 CurrentLeader
//	                                      [LeaderID int32, LeaderEpoch
//	                                      int32, tagged fields] when not
//	                                      -1/-1: set from v16, KIP-951)
//	  ]
//	  tagged fields                      (flexible)
//	]
//	tagged fields                        (flexible; tag 0 NodeEndpoints
//	                                      [NodeID int32, Host string,
//	                                      Port int32, Rack nullable string,
//	                                      tagged fields] when not empty:
//	                                      set from v16)

// fetchResult is a Fetch response whose records are file ranges.
type fetchResult struct {
	version   int16
	errorCode int16
	sessionID int32
	// throttleMs is the client quota throttle (client_quotas.go).
	throttleMs int32
	topics     []fetchTopicResult
	// nodeEndpoints are the brokers the partitions' currentLeader name
	// (v16+), ordered by node id.
	nodeEndpoints []kmsg.FetchResponseBroker
	// remote is the read pass's remote reads (fetch_remote.go).
	remote remotePass
}

type fetchTopicResult struct {
	// topic is the name, sent before v13 and used for metrics; empty for
	// an unknown topic id.
	topic string
	// id is the topic id, sent from v13.
	id    [16]byte
	parts []fetchPartResult
}

type fetchPartResult struct {
	partition        int32
	errorCode        int16
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
	// leaderSet says leaderID and leaderEpoch are the CurrentLeader
	// tagged field, set on NOT_LEADER_OR_FOLLOWER and
	// FENCED_LEADER_EPOCH at v16+; sent unless both are -1 (Kafka's
	// defaults, which are not sent).
	leaderSet             bool
	leaderID, leaderEpoch int32
	// emptyAborted sends an aborted-transactions array (empty unless
	// aborted holds entries) instead of null: read_committed, as Kafka
	// does.
	emptyAborted bool
	// aborted are the aborted transactions overlapping the records
	// (read_committed).
	aborted []segment.AbortedTxn
	// ranges are the record bytes, in order; inline bytes (no file) are
	// allowed.
	ranges []recordRange
	size   int64
	// nextOffset is the offset after the last batch in ranges.
	nextOffset int64
	// releases unpin the remote chunks the records come from
	// (fetch_remote.go); encodeFetch hands them to the body.
	releases []func()
}

// recordRange is a byte range of a file, or inline bytes when file is nil.
type recordRange struct {
	file      *os.File
	pos, size int64
	inline    []byte
}

func (p *fetchPartResult) add(r recordRange) {
	p.ranges = append(p.ranges, r)
	if r.file != nil {
		p.size += r.size
	} else {
		p.size += int64(len(r.inline))
	}
}

// fetchReply counts a Fetch response's bytes per topic and its error
// codes in the broker's metrics, and encodes it. The handler calls it, so
// these are counted before the response is written.
func (s *Server) fetchReply(res *fetchResult) reply {
	m := s.metrics
	m.countError(1, res.errorCode)
	for i := range res.topics {
		t := &res.topics[i]
		var n int64
		for j := range t.parts {
			n += t.parts[j].size
			m.countError(1, t.parts[j].errorCode)
		}
		if n > 0 {
			m.topic(t.topic).out.Add(float64(n))
		}
	}
	return reply{raw: encodeFetch(res)}
}

// encodeFetch lays out the response body around its file ranges.
func encodeFetch(res *fetchResult) *rawBody {
	v := res.version
	flexible := v >= 12
	var b rawBuilder
	arrayLen := func(n int) {
		if flexible {
			b.buf = kbin.AppendCompactArrayLen(b.buf, n)
		} else {
			b.buf = kbin.AppendArrayLen(b.buf, n)
		}
	}
	tags := func() {
		if flexible {
			b.buf = append(b.buf, 0)
		}
	}
	if v >= 1 {
		b.buf = kbin.AppendInt32(b.buf, res.throttleMs)
	}
	if v >= 7 {
		b.buf = kbin.AppendInt16(b.buf, res.errorCode)
		b.buf = kbin.AppendInt32(b.buf, res.sessionID)
	}
	arrayLen(len(res.topics))
	for i := range res.topics {
		t := &res.topics[i]
		switch {
		case v >= 13:
			b.buf = append(b.buf, t.id[:]...)
		case flexible:
			b.buf = kbin.AppendCompactString(b.buf, t.topic)
		default:
			b.buf = kbin.AppendString(b.buf, t.topic)
		}
		arrayLen(len(t.parts))
		for j := range t.parts {
			p := &t.parts[j]
			b.buf = kbin.AppendInt32(b.buf, p.partition)
			b.buf = kbin.AppendInt16(b.buf, p.errorCode)
			b.buf = kbin.AppendInt64(b.buf, p.highWatermark)
			if v >= 4 {
				b.buf = kbin.AppendInt64(b.buf, p.lastStableOffset)
			}
			if v >= 5 {
				b.buf = kbin.AppendInt64(b.buf, p.logStartOffset)
			}
			if v >= 4 { // AbortedTransactions: none before v4
				if flexible {
					b.buf = kbin.AppendCompactNullableArrayLen(b.buf, len(p.aborted), !p.emptyAborted)
				} else {
					b.buf = kbin.AppendNullableArrayLen(b.buf, len(p.aborted), !p.emptyAborted)
				}
				for _, a := range p.aborted {
					b.buf = kbin.AppendInt64(b.buf, a.ProducerID)
					b.buf = kbin.AppendInt64(b.buf, a.FirstOffset)
					tags()
				}
			}
			if v >= 11 {
				b.buf = kbin.AppendInt32(b.buf, -1) // preferred read replica
			}
			if flexible {
				b.buf = kbin.AppendUvarint(b.buf, uint32(p.size+1))
			} else {
				b.buf = kbin.AppendInt32(b.buf, int32(p.size))
			}
			for _, r := range p.ranges {
				if r.file != nil {
					b.file(r.file, r.pos, r.size)
				} else {
					b.inline(r.inline)
				}
			}
			if flexible && p.leaderSet && (p.leaderID != -1 || p.leaderEpoch != -1) {
				b.buf = append(b.buf, 1, 1, 9) // one tag: 1, 9 bytes
				b.buf = kbin.AppendInt32(b.buf, p.leaderID)
				b.buf = kbin.AppendInt32(b.buf, p.leaderEpoch)
				b.buf = append(b.buf, 0) // its tagged fields
			} else {
				tags()
			}
		}
		tags()
	}
	if flexible && len(res.nodeEndpoints) > 0 {
		var nb []byte
		nb = kbin.AppendCompactArrayLen(nb, len(res.nodeEndpoints))
		for _, n := range res.nodeEndpoints {
			nb = kbin.AppendInt32(nb, n.NodeID)
			nb = kbin.AppendCompactString(nb, n.Host)
			nb = kbin.AppendInt32(nb, n.Port)
			nb = kbin.AppendCompactNullableString(nb, n.Rack)
			nb = append(nb, 0) // its tagged fields
		}
		b.buf = append(b.buf, 1, 0) // one tag: 0
		b.buf = kbin.AppendUvarint(b.buf, uint32(len(nb)))
		b.buf = append(b.buf, nb...)
	} else {
		tags()
	}
	body := b.finish(flexible)
	if res.hasReleases() {
		body.release = res.releaseAll
	}
	return body
}
