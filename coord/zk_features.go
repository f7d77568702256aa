package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka's /feature znode (FeatureZNode V2). Never change these: Kafka's
// brokers and tools read and write it.
const (
	zFeature        = "feature"
	zFeatureVersion = 2
	zFeatureEnabled = 1
	// zFeatureResync re-reads the znode even without a watch event.
	zFeatureResync = time.Minute
)

type zFeatureLevel struct {
	MaxVersionLevel int16 `json:"max_version_level"`
}

type zFeatureData struct {
	Version  int                      `json:"version"`
	Status   int                      `json:"status"`
	Features map[string]zFeatureLevel `json:"features"`
}

func encodeFeatures(fs map[string]int16) []byte {
	d := zFeatureData{Version: zFeatureVersion, Status: zFeatureEnabled, Features: map[string]zFeatureLevel{}}
	for name, level := range fs {
		d.Features[name] = zFeatureLevel{MaxVersionLevel: level}
	}
	return encodeZ(d)
}

func decodeFeatures(path string, data []byte) (map[string]int16, error) {
	var d zFeatureData
	if err := json.Unmarshal(data, &d); err != nil { // its own versions: not decodeZ
		return nil, fmt.Errorf("coord: znode %s: %w", path, err)
	}
	if d.Version < 1 || d.Version > zFeatureVersion {
		return nil, fmt.Errorf("coord: znode %s has version %d, this build reads 1 and %d", path, d.Version, zFeatureVersion)
	}
	out := map[string]int16{}
	if d.Status != zFeatureEnabled {
		return out, nil // disabled: nothing finalized, as Kafka
	}
	for name, l := range d.Features {
		if l.MaxVersionLevel >= 1 {
			out[name] = l.MaxVersionLevel
		}
	}
	return out, nil
}

// zkFeatures is the ZK coordinator's cache of /feature, kept current by
// a watch (and a resync every zFeatureResync).
type zkFeatures struct {
	z        *ZK
	done     chan struct{}
	watchers entityWatchers
	mu       struct {
		sync.Mutex
		features map[string]int16
		epoch    int64
	}
}

// startFeatures loads /feature and starts its watch loop (ended by Close).
func (z *ZK) startFeatures(ctx context.Context) error {
	f := &zkFeatures{z: z, done: make(chan struct{})}
	f.mu.features, f.mu.epoch = map[string]int16{}, -1
	if _, err := f.read(ctx, false); err != nil {
		return err
	}
	z.features = f
	go f.loop()
	return nil
}

// read reads /feature into the cache, with a watch when watch is set
// (the channel then fires at the next change, or nil if none was set).
func (f *zkFeatures) read(ctx context.Context, watch bool) (<-chan zk.Event, error) {
	z := f.z
	p := z.path(zFeature)
	var data []byte
	var stat *zk.Stat
	var ch <-chan zk.Event
	err := z.call(ctx, "get", p, func() (err error) {
		if watch {
			data, stat, ch, err = z.conn.GetW(p)
		} else {
			data, stat, err = z.conn.Get(p)
		}
		return err
	})
	fs, epoch := map[string]int16{}, int64(-1)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if watch {
			err = z.call(ctx, "exists", p, func() (err error) {
				var ok bool
				ok, _, ch, err = z.conn.ExistsW(p)
				if err == nil && ok {
					err = errRetryRead
				}
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	case err != nil:
		return nil, err
	default:
		if fs, err = decodeFeatures(p, data); err != nil {
			return ch, err
		}
		epoch = int64(stat.Version)
	}
	f.mu.Lock()
	changed := epoch != f.mu.epoch || !maps.Equal(fs, f.mu.features)
	f.mu.features, f.mu.epoch = fs, epoch
	f.mu.Unlock()
	if changed {
		f.watchers.notify()
	}
	return ch, nil
}

// errRetryRead: /feature appeared between the get and the exists.
var errRetryRead = errors.New("coord: znode appeared; read again")

func (f *zkFeatures) loop() {
	defer close(f.done)
	for {
		ch, err := f.read(context.Background(), true)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return
			}
			if !errors.Is(err, errRetryRead) {
				f.z.log.Debug("coord: reading the finalized features failed; retrying", "err", err)
			}
		}
		t := time.NewTimer(zFeatureResync)
		if ch == nil || err != nil {
			t.Reset(time.Second)
		}
		select {
		case <-f.z.closing:
			t.Stop()
			return
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// FinalizedFeatures implements FeatureStore.
func (z *ZK) FinalizedFeatures() (map[string]int16, int64) {
	f := z.features
	f.mu.Lock()
	defer f.mu.Unlock()
	return copyFeatures(f.mu.features), f.mu.epoch
}

// WatchFeatures implements FeatureStore.
func (z *ZK) WatchFeatures() (<-chan struct{}, func()) { return z.features.watchers.watch() }

// AlterFinalizedFeatures implements FeatureStore: a read of /feature and
// a set (or create) at the version read.
func (z *ZK) AlterFinalizedFeatures(ctx context.Context, fn func(cur map[string]int16) (map[string]int16, error)) error {
	p := z.path(zFeature)
	for attempt := 0; attempt < 20; attempt++ {
		var data []byte
		var stat *zk.Stat
		err := z.call(ctx, "get", p, func() (err error) {
			data, stat, err = z.conn.Get(p)
			return err
		})
		exists := err == nil
		cur := map[string]int16{}
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return err
		default:
			if cur, err = decodeFeatures(p, data); err != nil {
				return err
			}
		}
		next, err := fn(maps.Clone(cur))
		if err != nil {
			return err
		}
		body := encodeFeatures(cleanFeatures(next))
		if exists {
			err = z.call(ctx, "set", p, func() error {
				_, err := z.conn.Set(p, body, stat.Version)
				return err
			})
		} else {
			err = z.call(ctx, "create", p, func() error {
				_, err := z.conn.Create(p, body, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
				return err
			})
		}
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = z.features.read(ctx, false)
		return err
	}
	return fmt.Errorf("%w: %s: writers kept conflicting", ErrVersionConflict, p)
}
