package producer

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID versions served. v5 only says the client handles
// TRANSACTION_ABORTABLE (KIP-890), which Kafka 3.9 never answers here: it
// is served as v4.
const (
	InitProducerIDMinVersion = 0
	InitProducerIDMaxVersion = 5
)

// epochExhausted is Kafka's limit: an epoch at or above it is not bumped,
// the producer gets a new id (ProducerIdAndEpoch.isEpochExhausted).
const epochExhausted = math.MaxInt16 - 1

// InitProducerID answers an InitProducerId request (versions 0 to 5); the
// rules are in the package documentation. Failures are Kafka error codes in
// the response, with producer id and epoch -1; it never fails otherwise.
// The caller checks the version range before calling.
func (a *IDAllocator) InitProducerID(req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	fail := func(ke *kerr.Error) *kmsg.InitProducerIDResponse {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = ke.Code, -1, -1
		return resp
	}

	// v0-v2 carry no producer id or epoch: whatever the struct holds is
	// not from the client.
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	given := pid != -1 || epoch != -1
	if given && (pid < 0 || epoch < 0) {
		return fail(kerr.InvalidRequest)
	}
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			return fail(kerr.InvalidRequest)
		}
		return fail(kerr.CoordinatorNotAvailable) // the transaction coordinator's
	}

	if given && epoch < epochExhausted && a.issued(pid) {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch+1
		return resp
	}
	id, err := a.Next()
	if err != nil {
		a.log.Error("InitProducerId: no producer id available", "err", err)
		return fail(kerr.CoordinatorLoadInProgress)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
