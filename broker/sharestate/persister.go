package sharestate

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Persister stores share-partition state durably (KIP-932's share coordinator).
// Each method sends the request to the share coordinator of its partitions and
// returns its response, or an error when no coordinator could answer in time
// (then nothing is known to be written). Per-partition errors are in the response.
type Persister interface {
	InitializeShareGroupState(ctx context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error)
	ReadShareGroupState(ctx context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error)
	WriteShareGroupState(ctx context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error)
	DeleteShareGroupState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error)
	ReadShareGroupStateSummary(ctx context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error)
}
