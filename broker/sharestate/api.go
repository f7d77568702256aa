package sharestate

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share coordinator RPCs on the Coordinator: each answers every share
// partition of the request from this coordinator (those of partitions it
// does not own get NOT_COORDINATOR), in the request's version, and never
// returns an error: *Coordinator is a Persister of its own partitions.
// Each response is built by one function per API that asks a callback
// for each share partition's answer, which ErrorResponse shares.

var _ Persister = (*Coordinator)(nil)

// errMessage is a Kafka error's code and message for a response.
func errMessage(e *kerr.Error) (int16, *string) {
	if e == nil {
		return 0, nil
	}
	m := e.Description
	return e.Code, &m
}

func initializeResponse(req *kmsg.InitializeShareGroupStateRequest, fn func(Key, kmsg.InitializeShareGroupStateRequestTopicPartition) *kerr.Error) *kmsg.InitializeShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessage(fn(Key{req.GroupID, t.TopicID, p.Partition}, p))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func readResponse(req *kmsg.ReadShareGroupStateRequest, fn func(Key, kmsg.ReadShareGroupStateRequestTopicPartition) (State, *kerr.Error)) *kmsg.ReadShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			st, e := fn(Key{req.GroupID, t.TopicID, p.Partition}, p)
			rp.ErrorCode, rp.ErrorMessage = errMessage(e)
			if e == nil {
				rp.StateEpoch, rp.StartOffset = st.StateEpoch, st.StartOffset
				rp.StateBatches = []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{}
				for _, b := range st.Batches {
					sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
					sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, b.DeliveryState, b.DeliveryCount
					rp.StateBatches = append(rp.StateBatches, sb)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func writeResponse(req *kmsg.WriteShareGroupStateRequest, fn func(Key, kmsg.WriteShareGroupStateRequestTopicPartition) *kerr.Error) *kmsg.WriteShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessage(fn(Key{req.GroupID, t.TopicID, p.Partition}, p))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func deleteResponse(req *kmsg.DeleteShareGroupStateRequest, fn func(Key) *kerr.Error) *kmsg.DeleteShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessage(fn(Key{req.GroupID, t.TopicID, p.Partition}))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func summaryResponse(req *kmsg.ReadShareGroupStateSummaryRequest, fn func(Key, kmsg.ReadShareGroupStateSummaryRequestTopicPartition) (State, *kerr.Error)) *kmsg.ReadShareGroupStateSummaryResponse {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition = p.Partition
			st, e := fn(Key{req.GroupID, t.TopicID, p.Partition}, p)
			rp.ErrorCode, rp.ErrorMessage = errMessage(e)
			if e == nil {
				rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = st.StateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// ErrorResponse answers every share partition of a share coordinator
// request (APIs 83-87) with e. It panics on another request type.
func ErrorResponse(req kmsg.Request, e *kerr.Error) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		return initializeResponse(r, func(Key, kmsg.InitializeShareGroupStateRequestTopicPartition) *kerr.Error { return e })
	case *kmsg.ReadShareGroupStateRequest:
		return readResponse(r, func(Key, kmsg.ReadShareGroupStateRequestTopicPartition) (State, *kerr.Error) { return State{}, e })
	case *kmsg.WriteShareGroupStateRequest:
		return writeResponse(r, func(Key, kmsg.WriteShareGroupStateRequestTopicPartition) *kerr.Error { return e })
	case *kmsg.DeleteShareGroupStateRequest:
		return deleteResponse(r, func(Key) *kerr.Error { return e })
	case *kmsg.ReadShareGroupStateSummaryRequest:
		return summaryResponse(r, func(Key, kmsg.ReadShareGroupStateSummaryRequestTopicPartition) (State, *kerr.Error) {
			return State{}, e
		})
	}
	panic(fmt.Sprintf("sharestate: %T is not a share coordinator request", req))
}

// Serve answers a share coordinator request (APIs 83-87) from this
// coordinator. It panics on another request type.
func (c *Coordinator) Serve(ctx context.Context, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		resp, _ := c.InitializeShareGroupState(ctx, r)
		return resp
	case *kmsg.ReadShareGroupStateRequest:
		resp, _ := c.ReadShareGroupState(ctx, r)
		return resp
	case *kmsg.WriteShareGroupStateRequest:
		resp, _ := c.WriteShareGroupState(ctx, r)
		return resp
	case *kmsg.DeleteShareGroupStateRequest:
		resp, _ := c.DeleteShareGroupState(ctx, r)
		return resp
	case *kmsg.ReadShareGroupStateSummaryRequest:
		resp, _ := c.ReadShareGroupStateSummary(ctx, r)
		return resp
	}
	panic(fmt.Sprintf("sharestate: %T is not a share coordinator request", req))
}

// InitializeShareGroupState implements Persister.
func (c *Coordinator) InitializeShareGroupState(_ context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error) {
	return initializeResponse(req, func(k Key, p kmsg.InitializeShareGroupStateRequestTopicPartition) *kerr.Error {
		return c.Initialize(k, p.StateEpoch, p.StartOffset)
	}), nil
}

// ReadShareGroupState implements Persister.
func (c *Coordinator) ReadShareGroupState(_ context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error) {
	return readResponse(req, func(k Key, p kmsg.ReadShareGroupStateRequestTopicPartition) (State, *kerr.Error) {
		return c.Read(k, p.LeaderEpoch, false)
	}), nil
}

// WriteShareGroupState implements Persister.
func (c *Coordinator) WriteShareGroupState(_ context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error) {
	return writeResponse(req, func(k Key, p kmsg.WriteShareGroupStateRequestTopicPartition) *kerr.Error {
		w := WriteState{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
		if req.Version >= 1 {
			w.DeliveryCompleteCount = p.DeliveryCompleteCount
		}
		for _, b := range p.StateBatches {
			w.Batches = append(w.Batches, StateBatch{First: b.FirstOffset, Last: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
		}
		return c.Write(k, w)
	}), nil
}

// DeleteShareGroupState implements Persister.
func (c *Coordinator) DeleteShareGroupState(_ context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error) {
	return deleteResponse(req, c.Delete), nil
}

// ReadShareGroupStateSummary implements Persister.
func (c *Coordinator) ReadShareGroupStateSummary(_ context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error) {
	return summaryResponse(req, func(k Key, p kmsg.ReadShareGroupStateSummaryRequestTopicPartition) (State, *kerr.Error) {
		return c.Read(k, p.LeaderEpoch, true)
	}), nil
}
