package sharestate

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stratastream/strata/segment"
)

// BenchmarkWrite: acknowledged writes of one share partition (one state
// batch each) to one coordinator over a real segment log, without fsync
// (flushMessages 0) and with an fsync per write (1), snapshots every 500
// updates.
func BenchmarkWrite(b *testing.B) {
	for _, flush := range []int64{0, 1} {
		b.Run("flush.messages="+strconv.FormatInt(flush, 10), func(b *testing.B) {
			cfg := segment.DefaultConfig()
			cfg.FlushMessages = flush
			l, err := segment.Open(filepath.Join(b.TempDir(), Topic+"-0"), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := l.Close(); err != nil {
					b.Error(err)
				}
			}()
			c, err := New(Config{NumPartitions: 1, UpdatesPerSnapshot: 500})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Load(0, l); err != nil {
				b.Fatal(err)
			}
			k := key("bench", 0)
			b.ResetTimer()
			for i := range int64(b.N) {
				w := WriteState{StateEpoch: 1, LeaderEpoch: 1, StartOffset: i, DeliveryCompleteCount: -1,
					Batches: []StateBatch{{First: i, Last: i + 9, DeliveryState: Acked, DeliveryCount: 1}}}
				if e := c.Write(k, w); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
