package share

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MemPersister is a sharestate.Persister that keeps share-partition
// state in memory, for tests and a single node that may lose it: nothing
// survives the process. Written state replaces the partition's state
// whole (Manager writes whole windows).
type MemPersister struct {
	mu     sync.Mutex
	states map[Key]memState
	// Writes counts the WriteShareGroupState partitions written.
	Writes int
	// Fail, when set, makes every call return it.
	Fail error
}

type memState struct {
	stateEpoch, leaderEpoch int32
	start                   int64
	batches                 []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch
}

// NewMemPersister returns an empty MemPersister.
func NewMemPersister() *MemPersister { return &MemPersister{states: map[Key]memState{}} }

// InitializeShareGroupState sets each partition's start offset.
func (p *MemPersister) InitializeShareGroupState(_ context.Context, req *kmsg.InitializeShareGroupStateRequest) (*kmsg.InitializeShareGroupStateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return nil, p.Fail
	}
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, tp := range t.Partitions {
			p.states[Key{req.GroupID, t.TopicID, tp.Partition}] = memState{stateEpoch: tp.StateEpoch, start: tp.StartOffset}
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = tp.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// ReadShareGroupState returns each partition's state, or
// UNKNOWN_TOPIC_OR_PARTITION for one never initialized. A leader epoch
// older than one written is FENCED_LEADER_EPOCH.
func (p *MemPersister) ReadShareGroupState(_ context.Context, req *kmsg.ReadShareGroupStateRequest) (*kmsg.ReadShareGroupStateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return nil, p.Fail
	}
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, tp := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = tp.Partition
			k := Key{req.GroupID, t.TopicID, tp.Partition}
			st, ok := p.states[k]
			switch {
			case !ok:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case tp.LeaderEpoch < st.leaderEpoch:
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				st.leaderEpoch = tp.LeaderEpoch
				p.states[k] = st
				rp.StateEpoch, rp.StartOffset, rp.StateBatches = st.stateEpoch, st.start, st.batches
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// WriteShareGroupState replaces each partition's state. A leader epoch
// older than the last read or written is FENCED_LEADER_EPOCH.
func (p *MemPersister) WriteShareGroupState(_ context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return nil, p.Fail
	}
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, tp := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = tp.Partition
			k := Key{req.GroupID, t.TopicID, tp.Partition}
			if st, ok := p.states[k]; ok && tp.LeaderEpoch < st.leaderEpoch {
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			} else {
				st := memState{stateEpoch: tp.StateEpoch, leaderEpoch: tp.LeaderEpoch, start: tp.StartOffset}
				for _, b := range tp.StateBatches {
					st.batches = append(st.batches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
						FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount,
					})
				}
				p.states[k] = st
				p.Writes++
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// DeleteShareGroupState forgets each partition's state.
func (p *MemPersister) DeleteShareGroupState(_ context.Context, req *kmsg.DeleteShareGroupStateRequest) (*kmsg.DeleteShareGroupStateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return nil, p.Fail
	}
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, tp := range t.Partitions {
			delete(p.states, Key{req.GroupID, t.TopicID, tp.Partition})
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = tp.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// ReadShareGroupStateSummary returns each partition's start offset.
func (p *MemPersister) ReadShareGroupStateSummary(_ context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (*kmsg.ReadShareGroupStateSummaryResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Fail != nil {
		return nil, p.Fail
	}
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, tp := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition = tp.Partition
			if st, ok := p.states[Key{req.GroupID, t.TopicID, tp.Partition}]; ok {
				rp.StateEpoch, rp.StartOffset = st.stateEpoch, st.start
			} else {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
