package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sharePersister is the server's sharestate.Persister: each share
// partition of a request goes, as a request of its own (as Kafka's
// DefaultStatePersister sends them), to the coordinator of its partition
// of __share_group_state: this broker's share coordinator when it leads
// that partition, else the leader's over the ShareGroupState call of the
// Transactions gRPC service on the replication listener. A share
// partition answered NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
// COORDINATOR_NOT_AVAILABLE, or whose coordinator cannot be reached, is
// tried again (backoff 20 ms doubling to 500 ms) until ctx is done; then
// it keeps the last retriable code it got. The call returns an error only
// when no share partition got an answer.
type sharePersister struct{ s *Server }

var _ sharestate.Persister = sharePersister{}

// Backoff of the persister's retries.
const (
	shareRetryBackoff    = 20 * time.Millisecond
	shareRetryMaxBackoff = 500 * time.Millisecond
)

// ErrShareStateUnavailable is wrapped by the persister's error when no
// share coordinator answered in time.
var ErrShareStateUnavailable = errors.New("broker: no share coordinator answered")

// shareCall is one share partition of a persister request.
type shareCall struct {
	topic [16]byte
	key   string       // its coordinator key
	req   kmsg.Request // the request of this share partition alone
}

// retriableShareCode says a share partition's code asks to try again.
func retriableShareCode(code int16) bool {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		return true
	}
	return false
}

// routeAll sends the calls in parallel and returns their responses (nil
// where none came) and, when none came at all, the error.
func (p sharePersister) routeAll(ctx context.Context, calls []shareCall, code func(kmsg.Response) (int16, bool)) ([]kmsg.Response, error) {
	out := make([]kmsg.Response, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = p.route(ctx, c, code)
		}()
	}
	wg.Wait()
	var last error
	for i := range calls {
		if out[i] != nil {
			return out, nil
		}
		last = errs[i]
	}
	if last != nil {
		return nil, fmt.Errorf("%w: %w", ErrShareStateUnavailable, last)
	}
	return out, nil
}

// route sends one share partition's request until it is answered with a
// code that is not retriable or ctx is done.
func (p sharePersister) route(ctx context.Context, c shareCall, code func(kmsg.Response) (int16, bool)) (kmsg.Response, error) {
	s := p.s
	backoff := shareRetryBackoff
	var last kmsg.Response
	var lastErr error
	for {
		b, _, err := s.shareCoordinator(c.key)
		if err == nil {
			var resp kmsg.Response
			if b.ID == s.cfg.BrokerID {
				resp = s.serveShareState(ctx, c.req)
			} else {
				resp, err = s.txnPeers.shareState(ctx, s, b.ID, c.req)
			}
			if err == nil {
				cd, ok := code(resp)
				switch {
				case !ok:
					err = fmt.Errorf("the share coordinator on broker %d answered no partition", b.ID)
				case !retriableShareCode(cd):
					return resp, nil
				default:
					last = resp
				}
			}
		}
		if err != nil {
			lastErr = err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return last, nil
			}
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return nil, fmt.Errorf("share partition %s: %w (%w)", c.key, lastErr, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, shareRetryMaxBackoff)
	}
}

// serveShareState answers a share coordinator request from this broker's
// share coordinator.
func (s *Server) serveShareState(ctx context.Context, req kmsg.Request) kmsg.Response {
	return s.shareCoord.Serve(ctx, req)
}

// shareState sends a share coordinator request to broker id.
func (tp *txnPeers) shareState(ctx context.Context, s *Server, id int32, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind()
	err := tp.call(ctx, s, id, req, resp, replpb.TransactionsClient.ShareGroupState)
	return resp, err
}

// ShareGroupState answers another broker's persister from this broker's
// share coordinator, and a group coordinator's ListOffsets (latest) for
// the lag of DescribeShareGroupOffsets from this broker's leaders
// (leaderEndOffsets).
func (t txnService) ShareGroupState(ctx context.Context, msg *replpb.KafkaMessage) (*replpb.KafkaMessage, error) {
	key := int16(msg.GetApiKey())
	a := apis[key]
	if (key < 83 || key > 87) && key != listOffsetsKey || a == nil {
		return nil, status.Errorf(codes.InvalidArgument, "api key %d is not a share coordinator request", key)
	}
	req := kmsg.RequestForKey(key)
	if err := t.decode(ctx, msg, req, a.min, a.max); err != nil {
		return nil, err
	}
	if lo, ok := req.(*kmsg.ListOffsetsRequest); ok {
		resp := t.s.leaderEndOffsets(lo)
		return &replpb.KafkaMessage{Version: int32(req.GetVersion()), Body: resp.AppendTo(nil)}, nil
	}
	if t.s.shareCoord == nil {
		return nil, status.Error(codes.Unavailable, "broker starting")
	}
	resp := t.s.serveShareState(ctx, req)
	return &replpb.KafkaMessage{Version: int32(req.GetVersion()), Body: resp.AppendTo(nil)}, nil
}

// shareKey is the coordinator key of a share partition.
func shareKey(group string, topic [16]byte, partition int32) string {
	return sharestate.CoordinatorKey(sharestate.Key{GroupID: group, TopicID: topic, Partition: partition})
}

// collect adds one partition's answer to a response's topics, keeping the
// request's topic order.
func collect[T, P any](topics *[]T, idx map[[16]byte]int, id [16]byte, newTopic func([16]byte) T, parts func(*T) *[]P, p P) {
	i, ok := idx[id]
	if !ok {
		i = len(*topics)
		idx[id] = i
		*topics = append(*topics, newTopic(id))
	}
	ps := parts(&(*topics)[i])
	*ps = append(*ps, p)
}

// InitializeShareGroupState implements sharestate.Persister.
func (p sharePersister) InitializeShareGroupState(ctx context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error) {
	var calls []shareCall
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			one := kmsg.NewPtrInitializeShareGroupStateRequest()
			one.Version, one.GroupID = req.Version, req.GroupID
			ot := t
			ot.Partitions = []kmsg.InitializeShareGroupStateRequestTopicPartition{pt}
			one.Topics = append(one.Topics, ot)
			calls = append(calls, shareCall{topic: t.TopicID, key: shareKey(req.GroupID, t.TopicID, pt.Partition), req: one})
		}
	}
	first := func(r kmsg.Response) (kmsg.InitializeShareGroupStateResponseTopicPartition, bool) {
		x := r.(*kmsg.InitializeShareGroupStateResponse)
		if len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 1 {
			return kmsg.InitializeShareGroupStateResponseTopicPartition{}, false
		}
		return x.Topics[0].Partitions[0], true
	}
	resps, err := p.routeAll(ctx, calls, func(r kmsg.Response) (int16, bool) { rp, ok := first(r); return rp.ErrorCode, ok })
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	idx := map[[16]byte]int{}
	for i, c := range calls {
		rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
		if resps[i] != nil {
			rp, _ = first(resps[i])
		} else {
			rp.Partition = c.req.(*kmsg.InitializeShareGroupStateRequest).Topics[0].Partitions[0].Partition
			rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		collect(&resp.Topics, idx, c.topic, func(id [16]byte) kmsg.InitializeShareGroupStateResponseTopic {
			t := kmsg.NewInitializeShareGroupStateResponseTopic()
			t.TopicID = id
			return t
		}, func(t *kmsg.InitializeShareGroupStateResponseTopic) *[]kmsg.InitializeShareGroupStateResponseTopicPartition {
			return &t.Partitions
		}, rp)
	}
	return resp, nil
}

// ReadShareGroupState implements sharestate.Persister.
func (p sharePersister) ReadShareGroupState(ctx context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error) {
	var calls []shareCall
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			one := kmsg.NewPtrReadShareGroupStateRequest()
			one.Version, one.GroupID = req.Version, req.GroupID
			ot := t
			ot.Partitions = []kmsg.ReadShareGroupStateRequestTopicPartition{pt}
			one.Topics = append(one.Topics, ot)
			calls = append(calls, shareCall{topic: t.TopicID, key: shareKey(req.GroupID, t.TopicID, pt.Partition), req: one})
		}
	}
	first := func(r kmsg.Response) (kmsg.ReadShareGroupStateResponseTopicPartition, bool) {
		x := r.(*kmsg.ReadShareGroupStateResponse)
		if len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 1 {
			return kmsg.ReadShareGroupStateResponseTopicPartition{}, false
		}
		return x.Topics[0].Partitions[0], true
	}
	resps, err := p.routeAll(ctx, calls, func(r kmsg.Response) (int16, bool) { rp, ok := first(r); return rp.ErrorCode, ok })
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	idx := map[[16]byte]int{}
	for i, c := range calls {
		rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
		if resps[i] != nil {
			rp, _ = first(resps[i])
		} else {
			rp.Partition = c.req.(*kmsg.ReadShareGroupStateRequest).Topics[0].Partitions[0].Partition
			rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		collect(&resp.Topics, idx, c.topic, func(id [16]byte) kmsg.ReadShareGroupStateResponseTopic {
			t := kmsg.NewReadShareGroupStateResponseTopic()
			t.TopicID = id
			return t
		}, func(t *kmsg.ReadShareGroupStateResponseTopic) *[]kmsg.ReadShareGroupStateResponseTopicPartition {
			return &t.Partitions
		}, rp)
	}
	return resp, nil
}

// WriteShareGroupState implements sharestate.Persister.
func (p sharePersister) WriteShareGroupState(ctx context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error) {
	var calls []shareCall
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			one := kmsg.NewPtrWriteShareGroupStateRequest()
			one.Version, one.GroupID = req.Version, req.GroupID
			ot := t
			ot.Partitions = []kmsg.WriteShareGroupStateRequestTopicPartition{pt}
			one.Topics = append(one.Topics, ot)
			calls = append(calls, shareCall{topic: t.TopicID, key: shareKey(req.GroupID, t.TopicID, pt.Partition), req: one})
		}
	}
	first := func(r kmsg.Response) (kmsg.WriteShareGroupStateResponseTopicPartition, bool) {
		x := r.(*kmsg.WriteShareGroupStateResponse)
		if len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 1 {
			return kmsg.WriteShareGroupStateResponseTopicPartition{}, false
		}
		return x.Topics[0].Partitions[0], true
	}
	resps, err := p.routeAll(ctx, calls, func(r kmsg.Response) (int16, bool) { rp, ok := first(r); return rp.ErrorCode, ok })
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	idx := map[[16]byte]int{}
	for i, c := range calls {
		rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
		if resps[i] != nil {
			rp, _ = first(resps[i])
		} else {
			rp.Partition = c.req.(*kmsg.WriteShareGroupStateRequest).Topics[0].Partitions[0].Partition
			rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		collect(&resp.Topics, idx, c.topic, func(id [16]byte) kmsg.WriteShareGroupStateResponseTopic {
			t := kmsg.NewWriteShareGroupStateResponseTopic()
			t.TopicID = id
			return t
		}, func(t *kmsg.WriteShareGroupStateResponseTopic) *[]kmsg.WriteShareGroupStateResponseTopicPartition {
			return &t.Partitions
		}, rp)
	}
	return resp, nil
}

// DeleteShareGroupState implements sharestate.Persister.
func (p sharePersister) DeleteShareGroupState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error) {
	var calls []shareCall
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			one := kmsg.NewPtrDeleteShareGroupStateRequest()
			one.Version, one.GroupID = req.Version, req.GroupID
			ot := t
			ot.Partitions = []kmsg.DeleteShareGroupStateRequestTopicPartition{pt}
			one.Topics = append(one.Topics, ot)
			calls = append(calls, shareCall{topic: t.TopicID, key: shareKey(req.GroupID, t.TopicID, pt.Partition), req: one})
		}
	}
	first := func(r kmsg.Response) (kmsg.DeleteShareGroupStateResponseTopicPartition, bool) {
		x := r.(*kmsg.DeleteShareGroupStateResponse)
		if len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 1 {
			return kmsg.DeleteShareGroupStateResponseTopicPartition{}, false
		}
		return x.Topics[0].Partitions[0], true
	}
	resps, err := p.routeAll(ctx, calls, func(r kmsg.Response) (int16, bool) { rp, ok := first(r); return rp.ErrorCode, ok })
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	idx := map[[16]byte]int{}
	for i, c := range calls {
		rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
		if resps[i] != nil {
			rp, _ = first(resps[i])
		} else {
			rp.Partition = c.req.(*kmsg.DeleteShareGroupStateRequest).Topics[0].Partitions[0].Partition
			rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		collect(&resp.Topics, idx, c.topic, func(id [16]byte) kmsg.DeleteShareGroupStateResponseTopic {
			t := kmsg.NewDeleteShareGroupStateResponseTopic()
			t.TopicID = id
			return t
		}, func(t *kmsg.DeleteShareGroupStateResponseTopic) *[]kmsg.DeleteShareGroupStateResponseTopicPartition {
			return &t.Partitions
		}, rp)
	}
	return resp, nil
}

// ReadShareGroupStateSummary implements sharestate.Persister.
func (p sharePersister) ReadShareGroupStateSummary(ctx context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error) {
	var calls []shareCall
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			one := kmsg.NewPtrReadShareGroupStateSummaryRequest()
			one.Version, one.GroupID = req.Version, req.GroupID
			ot := t
			ot.Partitions = []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{pt}
			one.Topics = append(one.Topics, ot)
			calls = append(calls, shareCall{topic: t.TopicID, key: shareKey(req.GroupID, t.TopicID, pt.Partition), req: one})
		}
	}
	first := func(r kmsg.Response) (kmsg.ReadShareGroupStateSummaryResponseTopicPartition, bool) {
		x := r.(*kmsg.ReadShareGroupStateSummaryResponse)
		if len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 1 {
			return kmsg.ReadShareGroupStateSummaryResponseTopicPartition{}, false
		}
		return x.Topics[0].Partitions[0], true
	}
	resps, err := p.routeAll(ctx, calls, func(r kmsg.Response) (int16, bool) { rp, ok := first(r); return rp.ErrorCode, ok })
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	idx := map[[16]byte]int{}
	for i, c := range calls {
		rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
		if resps[i] != nil {
			rp, _ = first(resps[i])
		} else {
			rp.Partition = c.req.(*kmsg.ReadShareGroupStateSummaryRequest).Topics[0].Partitions[0].Partition
			rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		collect(&resp.Topics, idx, c.topic, func(id [16]byte) kmsg.ReadShareGroupStateSummaryResponseTopic {
			t := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			t.TopicID = id
			return t
		}, func(t *kmsg.ReadShareGroupStateSummaryResponseTopic) *[]kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
			return &t.Partitions
		}, rp)
	}
	return resp, nil
}
