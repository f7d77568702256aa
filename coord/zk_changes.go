package coord

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka's change notifications (ZkNodeChangeNotificationListener): a
// writer adds a sequential child to a changes znode in the same
// transaction as its change; every broker watches that znode's children,
// reloads its cache when they change (and every resync period, for a
// writer that left no notification), and deletes the notifications older
// than zChangeExpiry. The entity configs (zk_config.go) and the delegation
// tokens (zk_tokens.go) are kept this way.

// changeWatch is one cache kept up to date by change notifications.
type changeWatch struct {
	dir    string        // the changes znode, under the chroot
	prefix string        // the notifications' name prefix
	resync time.Duration // reload this often without a notification too
	what   string        // the cache, in log lines
	reload func(context.Context) error
}

// watchChanges runs w until the coordinator closes, then closes done: it
// watches w.dir's children, reloads after each change and each resync
// period, purges old notifications, and retries a failed read with
// backoff.
func (z *ZK) watchChanges(w changeWatch, done chan struct{}) {
	defer close(done)
	backoff := 100 * time.Millisecond
	for {
		var ch <-chan zk.Event
		p := z.path(w.dir)
		var children []string
		err := z.call(bg, "watch", p, func() (err error) {
			children, _, ch, err = z.conn.ChildrenW(p)
			return err
		})
		if err == nil {
			err = w.reload(bg)
		}
		if err == nil {
			z.purgeChanges(w, children)
			backoff = 100 * time.Millisecond
		} else {
			if errors.Is(err, ErrClosed) {
				return
			}
			z.log.Debug("coord: "+w.what+" not reloaded; retrying", "err", err)
			ch = nil
		}
		wait := time.NewTimer(w.resync)
		if ch == nil {
			wait.Reset(backoff)
			backoff = min(2*backoff, 2*time.Second)
		}
		select {
		case <-ch:
		case <-wait.C:
		case <-z.closing:
			wait.Stop()
			return
		}
		wait.Stop()
	}
}

// purgeChanges deletes w's notifications older than Kafka's 15 minutes.
func (z *ZK) purgeChanges(w changeWatch, children []string) {
	now := time.Now()
	for _, c := range children {
		if !strings.HasPrefix(c, w.prefix) {
			continue
		}
		p := z.path(w.dir + "/" + c)
		var st *zk.Stat
		if err := z.call(bg, "exists", p, func() (err error) {
			_, st, err = z.conn.Exists(p)
			return err
		}); err != nil || st == nil || st.Ctime == 0 {
			continue
		}
		if now.Sub(time.UnixMilli(st.Ctime)) > zChangeExpiry {
			_ = z.call(bg, "delete", p, func() error { return z.conn.Delete(p, -1) })
		}
	}
}
