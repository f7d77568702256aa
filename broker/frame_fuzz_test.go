package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/strataapi"
)

// FuzzRequestFrame feeds arbitrary bytes to the frame reader and the
// request header and body decoder.
//
// Invariants:
//   - readFrame and parseRequest never panic and never allocate more than
//     the size limit allows;
//   - a frame that parses re-encodes (header plus kmsg body) into a frame
//     that parses to the same key, version, correlation id and body
//     encoding.
func FuzzRequestFrame(f *testing.F) {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	seed := func(req kmsg.Request) { f.Add(fmtr.AppendRequest(nil, req, 7)) }
	for _, a := range servedAPIs() {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			seed(req)
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	seed(meta)
	seed(&strataapi.DescribeTieredStorageRequest{})
	seed(&strataapi.DescribeTieredStorageRequest{Topics: []strataapi.DescribeTieredStorageRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}})
	seed(&strataapi.DescribeSharePartitionsRequest{GroupID: "g"})
	seed(&strataapi.DescribeSharePartitionsRequest{GroupID: "g", Topics: []strataapi.DescribeSharePartitionsRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}})
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 3, 0, 3, 0})

	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, _, err := readFrame(bytes.NewReader(data), make([]byte, 4), limit)
		if err != nil {
			return
		}
		if len(frame) > limit {
			t.Fatalf("frame of %d bytes above the limit", len(frame))
		}
		r, err := parseRequest(frame)
		if err != nil || r.unsupported {
			return
		}
		again := fmtr.AppendRequest(nil, r.kreq, r.corr)
		frame2, _, err := readFrame(bytes.NewReader(again), make([]byte, 4), 1<<30)
		if err != nil {
			t.Fatalf("re-encoded frame unreadable: %v", err)
		}
		r2, err := parseRequest(frame2)
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if r2.key != r.key || r2.version != r.version || r2.corr != r.corr {
			t.Fatalf("header changed: %d/%d/%d -> %d/%d/%d", r.key, r.version, r.corr, r2.key, r2.version, r2.corr)
		}
		if b1, b2 := r.kreq.AppendTo(nil), r2.kreq.AppendTo(nil); !bytes.Equal(b1, b2) {
			t.Fatalf("body re-encodes differently:\n%x\n%x", b1, b2)
		}
	})
}
