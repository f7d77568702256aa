package e2e

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchV12 pins a Fetch request to v12, the last version that names
// topics, for kgo, which sends a request at the highest version both
// sides know: from v13 topics go by id, and the requests it wraps carry
// names.
type fetchV12 struct{ *kmsg.FetchRequest }

func (fetchV12) MaxVersion() int16 { return 12 }

// RequestWith is kmsg.FetchRequest.RequestWith at v12.
func (f fetchV12) RequestWith(ctx context.Context, r kmsg.Requestor) (*kmsg.FetchResponse, error) {
	resp, err := r.Request(ctx, f)
	fr, _ := resp.(*kmsg.FetchResponse)
	return fr, err
}
