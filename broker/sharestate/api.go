package sharestate

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share coordinator RPCs on the Coordinator: each answers every share
// partition of the request from this coordinator (those of partitions it
// does not own get NOT_COORDINATOR), in the request's version, and never
// returns an error: *Coordinator is a Persister of its own partitions.

var _ Persister = (*Coordinator)(nil)

// errMessage is a Kafka error's message for a response, nil for none.
func errMessage(e *kerr.Error) (int16, *string) {
	if e == nil {
		return 0, nil
	}
	m := e.Description
	return e.Code, &m
}

// InitializeShareGroupState implements Persister.
func (c *Coordinator) InitializeShareGroupState(_ context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error) {
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessage(c.Initialize(Key{req.GroupID, t.TopicID, p.Partition}, p.StateEpoch, p.StartOffset))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// ReadShareGroupState implements Persister.
func (c *Coordinator) ReadShareGroupState(_ context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error) {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			st, e := c.Read(Key{req.GroupID, t.TopicID, p.Partition}, p.LeaderEpoch, false)
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
	return resp, nil
}

// WriteShareGroupState implements Persister.
func (c *Coordinator) WriteShareGroupState(_ context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error) {
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			w := WriteState{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
			if req.Version >= 1 {
				w.DeliveryCompleteCount = p.DeliveryCompleteCount
			}
			for _, b := range p.StateBatches {
				w.Batches = append(w.Batches, StateBatch{First: b.FirstOffset, Last: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
			}
			rp.ErrorCode, rp.ErrorMessage = errMessage(c.Write(Key{req.GroupID, t.TopicID, p.Partition}, w))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// DeleteShareGroupState implements Persister.
func (c *Coordinator) DeleteShareGroupState(_ context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessage(c.Delete(Key{req.GroupID, t.TopicID, p.Partition}))
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// ReadShareGroupStateSummary implements Persister.
func (c *Coordinator) ReadShareGroupStateSummary(_ context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error) {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition = p.Partition
			st, e := c.Read(Key{req.GroupID, t.TopicID, p.Partition}, p.LeaderEpoch, true)
			rp.ErrorCode, rp.ErrorMessage = errMessage(e)
			if e == nil {
				rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = st.StateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
