package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// defaultRegisterGrace is added to the session timeout when Register
// waits for a dead broker's registration to go: ZooKeeper expires a
// session up to one tick after its timeout, and the dead session was last
// heard from before it died.
const defaultRegisterGrace = 2 * time.Second

// Register implements Coordinator: an ephemeral brokers/ids/<id> znode
// owned by this session; the broker epoch is its czxid. It waits up to the
// session timeout plus 2s for another session's registration to go.
func (z *ZK) Register(ctx context.Context, b BrokerInfo) (int64, error) {
	z.mu.Lock()
	prev := z.mu.reg
	z.mu.Unlock()
	if prev != nil && prev.ID != b.ID {
		if err := z.Deregister(ctx); err != nil {
			return 0, err
		}
	}
	epoch, err := z.register(ctx, b, z.cfg.SessionTimeout+z.registerGrace)
	if err != nil {
		return 0, err
	}
	b.Epoch = epoch
	z.mu.Lock()
	z.mu.reg = &b
	z.mu.Unlock()
	z.refresh(ctx, "register broker "+fmt.Sprint(b.ID), func(c *zkCache) error { return c.loadBrokers() })
	return epoch, nil
}

// register creates the registration, waiting up to wait for another
// session's registration of the id to go away.
func (z *ZK) register(ctx context.Context, b BrokerInfo, wait time.Duration) (int64, error) {
	p := z.path(zBroker(b.ID))
	reg := zBrokerData{Version: znodeVersion, Host: b.Host, Port: b.Port, ReplicationPort: b.ReplicationPort,
		Rack: b.Rack, Timestamp: time.Now().UTC().Format(time.RFC3339Nano)}
	reg.encodeEndpoints(b.Endpoints)
	data := encodeZ(reg)
	deadline := time.Now().Add(wait)
	for {
		err := z.call(ctx, "create", p, func() error {
			_, err := z.conn.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return 0, err
		}
		var cur []byte
		var stat *zk.Stat
		var ch <-chan zk.Event
		gerr := z.call(ctx, "get", p, func() (err error) {
			cur, stat, ch, err = z.conn.GetW(p)
			return err
		})
		if errors.Is(gerr, zk.ErrNoNode) {
			continue // the other registration just went away
		}
		if gerr != nil {
			return 0, gerr
		}
		if stat.EphemeralOwner == z.conn.SessionID() {
			if err == nil {
				return stat.Czxid, nil
			}
			// Ours already (a retried Register): update the info.
			serr := z.call(ctx, "set", p, func() error {
				_, err := z.conn.Set(p, data, stat.Version)
				return err
			})
			if serr != nil && !errors.Is(serr, zk.ErrBadVersion) {
				return 0, serr
			}
			return stat.Czxid, nil
		}
		if time.Now().After(deadline) {
			var d zBrokerData
			_ = decodeZ(p, cur, &d) // for the message only: an undecodable registration still holds the id
			return 0, fmt.Errorf("%w: broker id %d is registered by another live broker at %s:%d (ZooKeeper session 0x%x, registered %s); "+
				"give this broker another broker.id, or stop the other one", ErrBrokerIDInUse, b.ID, d.Host, d.Port, stat.EphemeralOwner, d.Timestamp)
		}
		// Maybe the registration of a broker that just died: wait for its
		// session to expire.
		t := time.NewTimer(min(time.Until(deadline)+10*time.Millisecond, time.Second))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-z.closing:
			t.Stop()
			return 0, ErrClosed
		}
		t.Stop()
	}
}

// renewRegistration registers again after a session expiry (from the
// cache loop). A short wait only: the old session's znode is gone by now.
func (z *ZK) renewRegistration() error {
	z.mu.Lock()
	reg := z.mu.reg
	z.mu.Unlock()
	if reg == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), z.cfg.SessionTimeout)
	defer cancel()
	epoch, err := z.register(ctx, *reg, 2*time.Second)
	if err != nil {
		return err
	}
	z.mu.Lock()
	if z.mu.reg != nil && z.mu.reg.ID == reg.ID {
		z.mu.reg.Epoch = epoch
	}
	z.mu.Unlock()
	z.log.Info("coord: broker registered again", "broker", reg.ID, "broker_epoch", epoch)
	return nil
}

// Deregister implements Coordinator.
func (z *ZK) Deregister(ctx context.Context) error {
	z.mu.Lock()
	reg := z.mu.reg
	z.mu.Unlock()
	if reg == nil {
		return nil
	}
	p := z.path(zBroker(reg.ID))
	var stat *zk.Stat
	err := z.call(ctx, "exists", p, func() (err error) {
		var ok bool
		ok, stat, err = z.conn.Exists(p)
		if err == nil && !ok {
			stat = nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if stat != nil && stat.EphemeralOwner == z.conn.SessionID() {
		err = z.call(ctx, "delete", p, func() error { return z.conn.Delete(p, stat.Version) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	z.mu.Lock()
	z.mu.reg = nil
	z.mu.Unlock()
	z.refresh(ctx, "deregister broker "+fmt.Sprint(reg.ID), func(c *zkCache) error { return c.loadBrokers() })
	return nil
}
