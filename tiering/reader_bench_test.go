package tiering

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// BenchmarkRemoteReplay replays a ~70 MiB remote log from its first offset
// through RemoteReader (reads of 1 MiB, each slice's bytes read back from
// the cached chunk file as sendfile would), cold (a fresh 32 MiB cache per
// replay) and warm (everything cached), and compares it with the physical
// limit measured in the same run: raw ranged GETs of the same .log objects
// into memory, in 4 MiB ranges, as many in parallel as the reader keeps
// ahead of a sequential reader (ReadAheadChunks, 4). Stores: in memory, a local directory (LocalStore), and
// an S3-like in-memory store with 10 ms first-byte latency and 40 MB/s per
// GET.
func BenchmarkRemoteReplay(b *testing.B) {
	o := fixtureOpts{batches: 8192, segmentBytes: 8 << 20, indexInterval: 4096, maxRecords: 16, maxValue: 2000, seed: 9}
	f := buildFixture(b, o)
	var total int64
	for _, s := range f.m.Segments {
		total += s.Size
	}
	local, err := NewLocalStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	objects, err := f.store.List(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	for _, oi := range objects {
		rc, err := f.store.Get(context.Background(), oi.Key, 0, -1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := local.Put(context.Background(), oi.Key, rc, oi.Size, PutCondition{}); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
	slow := newMemStore()
	slow.objects = f.store.objects
	slow.latency, slow.bytesPerSec = 10*time.Millisecond, 40e6

	const chunk, ahead = 4 << 20, 4
	stores := []struct {
		name  string
		store ObjectStore
	}{{"mem", f.store}, {"localdir", local}, {"s3sim", slow}}
	for _, st := range stores {
		b.Run("store="+st.name+"/raw-get", func(b *testing.B) {
			b.SetBytes(total)
			for range b.N {
				rawParallelGet(b, st.store, f, chunk, ahead)
			}
		})
		b.Run("store="+st.name+"/replay-cold", func(b *testing.B) {
			b.SetBytes(total)
			var hits, joins, misses int64
			for range b.N {
				b.StopTimer()
				r, err := NewRemoteReader(st.store, ReaderConfig{CacheDir: b.TempDir(), CacheBytes: 32 << 20, ChunkBytes: chunk, ReadAheadChunks: ahead})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				benchReplay(b, r, f)
				b.StopTimer()
				s := r.Stats().Cache
				hits, joins, misses = hits+s.Hits, joins+s.InflightJoins, misses+s.Misses
				r.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(misses)/float64(b.N), "misses/op")
			b.ReportMetric(float64(joins)/float64(b.N), "joins/op")
		})
		b.Run("store="+st.name+"/replay-warm", func(b *testing.B) {
			r, err := NewRemoteReader(st.store, ReaderConfig{CacheDir: b.TempDir(), CacheBytes: 2 * total, ChunkBytes: chunk, ReadAheadChunks: ahead})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			benchReplay(b, r, f)
			b.SetBytes(total)
			b.ResetTimer()
			for range b.N {
				benchReplay(b, r, f)
			}
		})
	}
}

// benchReplay reads the whole remote log in 1 MiB reads, reading each
// slice's bytes from its file.
func benchReplay(b *testing.B, r *RemoteReader, f *remoteFixture) {
	buf := make([]byte, 1<<20+64<<10)
	ctx := context.Background()
	for off := f.m.LogStartOffset; off < f.m.EndOffset(); {
		rs, err := r.Read(ctx, f.key, f.m, off, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		if rs.Size > int64(len(buf)) {
			buf = make([]byte, rs.Size)
		}
		if _, err := rs.File.ReadAt(buf[:rs.Size], rs.Pos); err != nil {
			b.Fatal(err)
		}
		rs.Release()
		off = rs.NextOffset
	}
}

// rawParallelGet GETs every .log object of f in ranges of chunk bytes,
// par at a time, in order.
func rawParallelGet(b *testing.B, store ObjectStore, f *remoteFixture, chunk int64, par int) {
	type rng struct {
		key      string
		off, len int64
	}
	work := make(chan rng, par)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunk)
			for w := range work {
				rc, err := store.Get(context.Background(), w.key, w.off, w.len)
				if err != nil {
					b.Error(err)
					continue
				}
				n, err := io.ReadFull(rc, buf[:w.len])
				rc.Close()
				if err != nil || int64(n) != w.len {
					b.Error(fmt.Errorf("get %s: %d bytes, %v", w.key, n, err))
				}
			}
		}()
	}
	for i := range f.m.Segments {
		s := &f.m.Segments[i]
		for off := int64(0); off < s.Size; off += chunk {
			work <- rng{f.m.SegmentKey(s, SuffixLog), off, min(chunk, s.Size-off)}
		}
	}
	close(work)
	wg.Wait()
}
