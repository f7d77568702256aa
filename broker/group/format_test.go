package group

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

func TestRecordRoundTrip(t *testing.T) {
	entries := []offsetEntry{
		{offset: 0, leaderEpoch: -1, metadata: "", commitTime: 1, expireTime: -1},
		{offset: 1 << 40, leaderEpoch: 12, metadata: "meta\x00data", commitTime: 1767225600000, expireTime: -1},
		{offset: 5, leaderEpoch: -1, metadata: "v1", commitTime: 10, expireTime: 99}, // written as value v1
	}
	for i, want := range entries {
		r, err := decodeRecord(offsetKey("grp", "topic", 3), offsetValue(want))
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if !r.isOffset || r.group != "grp" || r.topic != "topic" || r.partition != 3 || r.offset == nil || *r.offset != want {
			t.Errorf("#%d: got %+v (offset %+v), want %+v", i, r, r.offset, want)
		}
	}
	// Tombstones.
	if r, err := decodeRecord(offsetKey("g", "t", 1), nil); err != nil || !r.isOffset || r.offset != nil {
		t.Errorf("offset tombstone: got %+v, %v", r, err)
	}
	if r, err := decodeRecord(groupKey("g"), nil); err != nil || r.isOffset || r.group != "g" || r.meta != nil {
		t.Errorf("group tombstone: got %+v, %v", r, err)
	}
	// The layout is Kafka's: check the first bytes of a v3 offset value.
	v := offsetValue(offsetEntry{offset: 1, leaderEpoch: 2, metadata: "m", commitTime: 3, expireTime: -1})
	want := []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 0, 3}
	if !bytes.Equal(v, want) {
		t.Errorf("offset value v3: got %x, want %x", v, want)
	}
	if k := groupKey("ab"); !bytes.Equal(k, []byte{0, 2, 0, 2, 'a', 'b'}) {
		t.Errorf("group key: got %x", k)
	}

	errs := []struct {
		key, value []byte
		want       error
	}{
		{[]byte{0}, nil, ErrBadRecord},
		{[]byte{0, 42, 0, 0}, nil, ErrUnknownRecord},
		{[]byte{0, 1, 0, 5, 'a'}, nil, ErrBadRecord},
		{offsetKey("g", "t", 0), []byte{0}, ErrBadRecord},
		{offsetKey("g", "t", 0), []byte{0, 5}, ErrUnknownRecord},
		{groupKey("g"), []byte{0, 3, 0}, ErrBadRecord},
	}
	for i, tt := range errs {
		if _, err := decodeRecord(tt.key, tt.value); !errors.Is(err, tt.want) {
			t.Errorf("#%d: got %v, want %v", i, err, tt.want)
		}
	}
}

func TestBuildBatchIsValid(t *testing.T) {
	b, err := buildBatch(1234, []kv{{key: groupKey("g"), value: nil}, {key: offsetKey("g", "t", 0), value: offsetValue(noOffset)}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := segment.ValidateProduced(b)
	if err != nil || h.RecordCount != 2 || h.Compression() != segment.CodecNone || h.ProducerID != -1 || h.MaxTimestamp != 1234 {
		t.Errorf("got %+v, %v", h, err)
	}
	recs, err := segment.Records(b)
	if err != nil || len(recs) != 2 || recs[0].Value != nil || recs[1].Value == nil {
		t.Errorf("records: got %+v, %v", recs, err)
	}
}

// FuzzDecodeRecord: decodeRecord never panics, and whatever decodes as an
// offset or group value encodes back to bytes that decode the same; a
// share group value re-encodes to bytes that decode and re-encode to
// themselves.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(offsetKey("g", "t", 1), offsetValue(offsetEntry{offset: 7, leaderEpoch: 3, metadata: "x", commitTime: 9, expireTime: -1}))
	f.Add(offsetKey("g", "t", 1), offsetValue(offsetEntry{offset: 7, leaderEpoch: -1, commitTime: 9, expireTime: 11}))
	gv := kmsg.NewGroupMetadataValue()
	gv.Version = 3
	gv.ProtocolType = "consumer"
	gv.Protocol = kmsg.StringPtr("range")
	gv.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m", Subscription: []byte{1}, Assignment: []byte{2}}}
	f.Add(groupKey("g"), gv.AppendTo(nil))
	f.Add([]byte{0, 2}, []byte(nil))
	for _, s := range shareRecordSamples() {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := decodeRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrUnknownRecord) {
				t.Fatalf("error wraps neither sentinel: %v", err)
			}
			return
		}
		switch {
		case r.isOffset && r.offset != nil && len(r.offset.metadata) <= maxStringLen:
			r2, err := decodeRecord(offsetKey(r.group, r.topic, r.partition), offsetValue(*r.offset))
			if err != nil || *r2.offset != *r.offset || r2.group != r.group || r2.topic != r.topic {
				t.Fatalf("offset re-encode: got %+v, %v; want %+v", r2.offset, err, r.offset)
			}
		case r.share != nil && !r.share.tombstone:
			again := reencodeShare(r.share)
			r2, err := decodeRecord(key, again)
			if err != nil || r2.share == nil {
				t.Fatalf("share re-encode does not decode: %v", err)
			}
			if third := reencodeShare(r2.share); !bytes.Equal(again, third) {
				t.Fatalf("share re-encoding is not stable: %x then %x", again, third)
			}
		case !r.isOffset && r.meta != nil:
			r2, err := decodeRecord(groupKey(r.group), r.meta.AppendTo(nil))
			if err != nil || !bytes.Equal(r2.meta.AppendTo(nil), r.meta.AppendTo(nil)) {
				t.Fatalf("group re-encode: %v", err)
			}
		}
	})
}
