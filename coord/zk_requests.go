package coord

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// ControlledShutdown implements Coordinator: an ephemeral sequential
// request znode under admin/controller_requests, left in place until the
// session ends.
func (z *ZK) ControlledShutdown(ctx context.Context, brokerID int32) ([]TopicPartition, error) {
	z.mu.Lock()
	reg := z.mu.reg
	z.mu.Unlock()
	if reg == nil || reg.ID != brokerID {
		return nil, fmt.Errorf("%w: broker %d", ErrNotRegistered, brokerID)
	}
	ans, err := z.request(ctx, wireRequest{Version: znodeVersion, Kind: RequestControlledShutdown, BrokerID: brokerID}, false)
	if err != nil {
		return nil, err
	}
	return ans.Remaining, nil
}

// ReportOfflineReplicas implements Coordinator: an ephemeral sequential
// request znode under admin/controller_requests, left in place until the
// session ends (Kafka's log_dir_event_notification, carrying the
// replicas).
func (z *ZK) ReportOfflineReplicas(ctx context.Context, brokerID int32, partitions []TopicPartition) ([]TopicPartition, error) {
	z.mu.Lock()
	reg := z.mu.reg
	z.mu.Unlock()
	if reg == nil || reg.ID != brokerID {
		return nil, fmt.Errorf("%w: broker %d", ErrNotRegistered, brokerID)
	}
	ans, err := z.request(ctx, wireRequest{Version: znodeVersion, Kind: RequestOfflineReplicas, BrokerID: brokerID, Partitions: partitions}, false)
	if err != nil {
		return nil, err
	}
	return ans.Remaining, nil
}

// ElectPreferredLeaders implements Coordinator; the request znode is
// deleted once answered.
func (z *ZK) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) ([]ElectionResult, error) {
	ans, err := z.request(ctx, wireRequest{Version: znodeVersion, Kind: RequestPreferredElection, Partitions: partitions}, true)
	if err != nil {
		return nil, err
	}
	return ans.Results, nil
}

// request creates a request znode and waits for the controller's answer
// in it.
func (z *ZK) request(ctx context.Context, w wireRequest, remove bool) (RequestAnswer, error) {
	dir := z.path(zRequests)
	var p string
	err := z.call(ctx, "create", dir, func() (err error) {
		p, err = z.conn.Create(dir+"/"+zRequestPrefix, encodeZ(w), zk.FlagEphemeral|zk.FlagSequence, worldACL)
		return err
	})
	if err != nil {
		return RequestAnswer{}, err
	}
	if remove {
		defer func() {
			// The answer is read; a request znode left behind is
			// harmless (the next request with this path replaces it),
			// so a failed delete is only logged.
			if err := z.call(context.Background(), "delete", p, func() error { return z.conn.Delete(p, -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				z.log.Warn("coord: answered request znode not deleted", "path", p, "err", err)
			}
		}()
	}
	for {
		var data []byte
		var ch <-chan zk.Event
		err := z.call(ctx, "get", p, func() (err error) {
			data, _, ch, err = z.conn.GetW(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return RequestAnswer{}, fmt.Errorf("%w: request %s vanished (session expired?)", ErrUnavailable, p)
		}
		if err != nil {
			return RequestAnswer{}, err
		}
		var got wireRequest
		if err := decodeZ(p, data, &got); err != nil {
			return RequestAnswer{}, err
		}
		if got.Answer != nil {
			return got.Answer.answer(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return RequestAnswer{}, fmt.Errorf("coord: waiting for the controller: %w", ctx.Err())
		case <-z.closing:
			return RequestAnswer{}, ErrClosed
		}
	}
}
