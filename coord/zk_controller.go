package coord

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Campaign implements Coordinator. Election is Kafka's: read
// controller_epoch, then in one transaction create the ephemeral
// controller znode and set controller_epoch to epoch+1 conditional on the
// version read. A taken controller znode means waiting for its deletion.
func (z *ZK) Campaign(ctx context.Context, brokerID int32) (Leadership, error) {
	ctrl, epochPath := z.path(zController), z.path(zControllerEpoch)
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var data []byte
		var stat *zk.Stat
		err := z.call(ctx, "get", epochPath, func() (err error) {
			data, stat, err = z.conn.Get(epochPath)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			err = z.call(ctx, "create", epochPath, func() error {
				_, err := z.conn.Create(epochPath, encodeZ(zControllerEpochData{Version: znodeVersion}), zk.FlagPersistent, zk.WorldACL(zk.PermAll))
				if errors.Is(err, zk.ErrNodeExists) {
					return nil
				}
				return err
			})
			if err == nil {
				continue
			}
		}
		if err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return nil, err
			}
			if !z.pause(ctx, 200*time.Millisecond) {
				return nil, ctxOrClosed(ctx)
			}
			continue
		}
		var ed zControllerEpochData
		if err := decodeZ(epochPath, data, &ed); err != nil {
			return nil, err
		}
		epoch := ed.Epoch + 1
		cd := zControllerData{Version: znodeVersion, BrokerID: brokerID, Epoch: epoch, Timestamp: time.Now().UTC().Format(time.RFC3339Nano)}
		sid := z.conn.SessionID()
		_, failed, err := z.multi(ctx, "elect",
			&zk.CreateRequest{Path: ctrl, Data: encodeZ(cd), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: epochPath, Data: encodeZ(zControllerEpochData{Version: znodeVersion, Epoch: epoch}), Version: stat.Version})
		switch {
		case err == nil:
			l := &zkLeadership{term: term{epoch: epoch, done: make(chan struct{})}, z: z, epochVersion: stat.Version + 1, session: sid}
			z.mu.Lock()
			if z.mu.closed {
				z.mu.Unlock()
				return nil, ErrClosed
			}
			if z.mu.lead != nil {
				z.mu.lead.end()
			}
			z.mu.lead = l
			z.mu.Unlock()
			z.refresh(ctx, fmt.Sprintf("controller election of broker %d, epoch %d", brokerID, epoch), func(c *zkCache) error { return c.loadController() })
			return l, nil
		case failed == 0 && errors.Is(err, zk.ErrNodeExists):
			// Someone is controller: wait until the znode goes.
			var ok bool
			var ch <-chan zk.Event
			err := z.call(ctx, "exists", ctrl, func() (err error) {
				ok, _, ch, err = z.conn.ExistsW(ctrl)
				return err
			})
			if err == nil && ok {
				select {
				case <-ch:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-z.closing:
					return nil, ErrClosed
				}
			}
		case failed == 1 && errors.Is(err, zk.ErrBadVersion):
			// Another election bumped the epoch between our read and write.
		default:
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return nil, ctxOrClosed(ctx)
			}
			if !z.pause(ctx, 200*time.Millisecond) {
				return nil, ctxOrClosed(ctx)
			}
		}
	}
}

func ctxOrClosed(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ErrClosed
}

// pause waits d, or less if ctx ends or the coordinator closes (false).
func (z *ZK) pause(ctx context.Context, d time.Duration) bool { return sleepCtx(ctx, d, z.closing) }

// zkLeadership is a won election. Every write is a transaction whose first
// operation checks that controller_epoch still has the version this
// election gave it: a later election changes it, and the write fails.
type zkLeadership struct {
	term
	z            *ZK
	epochVersion int32
	session      int64
}

var _ Leadership = (*zkLeadership)(nil)

func (l *zkLeadership) check() error {
	select {
	case <-l.done:
		return fmt.Errorf("%w: leadership of epoch %d ended", ErrNotController, l.epoch)
	default:
	}
	if l.z.conn.SessionID() != l.session {
		l.end()
		return fmt.Errorf("%w: session of epoch %d expired", ErrNotController, l.epoch)
	}
	return nil
}

func (l *zkLeadership) fence() *zk.CheckVersionRequest {
	return &zk.CheckVersionRequest{Path: l.z.path(zControllerEpoch), Version: l.epochVersion}
}

// fenced runs ops in one transaction behind the epoch check and maps a
// failed check to ErrNotController (ending the leadership). failed is
// the index in ops of the failing operation, -1 if none or unknown.
func (l *zkLeadership) fenced(ctx context.Context, what string, ops ...any) ([]zk.MultiResponse, int, error) {
	if err := l.check(); err != nil {
		return nil, -1, err
	}
	res, failed, err := l.z.multi(ctx, what, append([]any{l.fence()}, ops...)...)
	if failed == 0 {
		l.end()
		return res, -1, fmt.Errorf("%w: controller epoch %d was superseded: %w", ErrNotController, l.epoch, err)
	}
	if len(res) > 0 {
		res = res[1:]
	}
	return res, failed - 1, err
}

// UpdatePartitionStates implements Leadership: one fenced transaction per
// update, up to 16 in flight.
func (l *zkLeadership) UpdatePartitionStates(ctx context.Context, updates []StateUpdate) ([]StateResult, error) {
	results := make([]StateResult, len(updates))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, u := range updates {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p := l.z.path(zState(u.Topic, u.Partition))
			data := encodeZ(zStateData{Version: znodeVersion, PartitionState: u.State})
			res, failed, err := l.fenced(ctx, p, &zk.SetDataRequest{Path: p, Data: data, Version: u.Version})
			switch {
			case err == nil:
				results[i].Version = res[0].Stat.Version
			case failed == 0:
				results[i].Err = l.z.stateErr(ctx, u.TopicPartition, err)
			default:
				results[i].Err = err
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if errors.Is(r.Err, ErrNotController) || errors.Is(r.Err, ErrUnavailable) {
			return results, r.Err
		}
	}
	l.z.refresh(ctx, fmt.Sprintf("%d partition state updates by controller epoch %d", len(updates), l.epoch), func(c *zkCache) error {
		for _, u := range updates {
			if err := c.loadState(u.Topic, u.Partition); err != nil {
				return err
			}
		}
		return nil
	})
	return results, nil
}

// PendingRequests implements Leadership.
func (l *zkLeadership) PendingRequests(ctx context.Context) ([]ControllerRequest, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	z := l.z
	dir := z.path(zRequests)
	var kids []string
	err := z.call(ctx, "children", dir, func() (err error) {
		kids, _, err = z.conn.Children(dir)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(kids)
	out := make([]ControllerRequest, 0, len(kids))
	for _, k := range kids {
		if !strings.HasPrefix(k, zRequestPrefix) {
			continue
		}
		p := dir + "/" + k
		var data []byte
		err := z.call(ctx, "get", p, func() (err error) {
			data, _, err = z.conn.Get(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var w wireRequest
		if err := decodeZ(p, data, &w); err != nil {
			z.log.Error("coord: ignoring controller request", "err", err)
			continue
		}
		out = append(out, ControllerRequest{ID: k, Kind: w.Kind, BrokerID: w.BrokerID, Partitions: w.Partitions, Answered: w.Answer != nil})
	}
	return out, nil
}

// Answer implements Leadership.
func (l *zkLeadership) Answer(ctx context.Context, req ControllerRequest, ans RequestAnswer) error {
	z := l.z
	p := z.path(zRequests + "/" + req.ID)
	w := wireRequest{Version: znodeVersion, Kind: req.Kind, BrokerID: req.BrokerID, Partitions: req.Partitions, Answer: answerToWire(l.epoch, ans)}
	_, failed, err := l.fenced(ctx, p, &zk.SetDataRequest{Path: p, Data: encodeZ(w), Version: -1})
	if failed == 0 && errors.Is(err, zk.ErrNoNode) {
		return nil // the requester is gone
	}
	return err
}

// FinishTopicDeletion implements Leadership.
func (l *zkLeadership) FinishTopicDeletion(ctx context.Context, topic string) error {
	if err := l.check(); err != nil {
		return err
	}
	if err := l.z.deleteTopicTree(ctx, topic); err != nil {
		return err
	}
	marker := l.z.path(zDeleteMarker(topic))
	_, failed, err := l.fenced(ctx, marker, &zk.DeleteRequest{Path: marker, Version: -1})
	if failed == 0 && errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	if err != nil {
		return err
	}
	return l.z.inLoop(ctx, func(c *zkCache) error { return c.loadPending() })
}

// Resign implements Leadership.
func (l *zkLeadership) Resign(ctx context.Context) error {
	ctrl := l.z.path(zController)
	_, failed, err := l.fenced(ctx, ctrl, &zk.DeleteRequest{Path: ctrl, Version: -1})
	if failed == 0 && errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	l.end()
	l.z.mu.Lock()
	if l.z.mu.lead == l {
		l.z.mu.lead = nil
	}
	l.z.mu.Unlock()
	if err == nil {
		l.z.refresh(ctx, fmt.Sprintf("resignation of controller epoch %d", l.epoch), func(c *zkCache) error { return c.loadController() })
	}
	return err
}
