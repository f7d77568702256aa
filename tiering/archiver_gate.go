package tiering

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/segment"
)

// Gate connects a partition's segment.Log to its Archiver. The log must be
// opened with the gate's options before the archiver (which reads the log)
// exists, and the archiver comes and goes with leadership and with
// remote.storage.enable; the gate is the stable thing in between.
//
//	gate := tiering.NewGate(remoteStorageEnabled)
//	log, err := segment.Open(dir, retention.LocalConfig(cfg, true /* tiered */), gate.SegmentOptions()...)
//	arch, err := tiering.NewArchiver(tiering.ArchiverConfig{Log: log, ...})
//	gate.Attach(arch); arch.Start(); arch.BecomeLeader(epoch)
//
// Its veto, for local retention: with tiering on, a segment may be
// deleted only when the attached archiver's committed manifest holds it
// (none attached yet: nothing is deleted); with tiering off, local
// retention is the only retention and nothing is vetoed.
type Gate struct {
	tiered atomic.Bool
	arch   atomic.Pointer[Archiver]
}

// NewGate returns a gate for a partition whose topic has tiering on or off.
func NewGate(tiered bool) *Gate {
	g := &Gate{}
	g.tiered.Store(tiered)
	return g
}

// SegmentOptions returns the segment.Log options that route retention's
// veto and segment seals through the gate, and keep the leader epochs of
// the segments local retention deletes while tiered (they are still in
// the partition's log, in the store).
func (g *Gate) SegmentOptions() []segment.Option {
	return []segment.Option{segment.WithDeleteVeto(g.CanDeleteLocal), segment.WithOnSeal(g.onSeal), segment.WithKeepEpochs(g.Tiered)}
}

// Attach makes a the partition's archiver (replacing any other).
func (g *Gate) Attach(a *Archiver) { g.arch.Store(a) }

// Detach forgets the archiver, if it is a.
func (g *Gate) Detach(a *Archiver) { g.arch.CompareAndSwap(a, nil) }

// SetTiered records a change of remote.storage.enable. Turning it off
// lifts the veto: local retention then deletes by the topic's total
// retention (apply Retention.LocalConfig with tiering off).
func (g *Gate) SetTiered(on bool) { g.tiered.Store(on) }

// Tiered reports whether tiering is on for the partition.
func (g *Gate) Tiered() bool { return g.tiered.Load() }

// CanDeleteLocal is the segment.WithDeleteVeto function.
func (g *Gate) CanDeleteLocal(si segment.SegmentInfo) bool {
	if !g.tiered.Load() {
		return true
	}
	a := g.arch.Load()
	return a != nil && a.CanDeleteLocal(si)
}

func (g *Gate) onSeal(segment.SegmentInfo) {
	if a := g.arch.Load(); a != nil {
		a.Notify()
	}
}

// Retention is a topic's retention settings, by Kafka's names. With
// tiering on, the local log keeps LocalMs / LocalBytes (deleting only
// uploaded segments, see Gate) and the remote log is cut to Ms / Bytes over
// local and remote data together (RemoteRetention).
type Retention struct {
	Ms         int64 // retention.ms; -1 unlimited
	Bytes      int64 // retention.bytes; -1 unlimited
	LocalMs    int64 // local.retention.ms; -2 means Ms (Kafka's default)
	LocalBytes int64 // local.retention.bytes; -2 means Bytes
	// DeleteDelayMs is file.delete.delay.ms: how long objects dropped from
	// the manifest stay readable (RemoteRetention.DeleteDelay).
	DeleteDelayMs int64
}

// Local returns the limits of the local log of a tiered partition: -2 is
// replaced by the total limit, and a local limit is never looser than the
// total one. -1 is unlimited.
func (r Retention) Local() (ms, bytes int64) {
	return localLimit(r.LocalMs, r.Ms), localLimit(r.LocalBytes, r.Bytes)
}

func localLimit(local, total int64) int64 {
	if local == -2 || local < -2 {
		local = total
	}
	if total >= 0 && (local < 0 || local > total) {
		local = total
	}
	return local
}

// Remote returns the total retention the archiver applies.
func (r Retention) Remote() RemoteRetention {
	delay := time.Duration(min(max(r.DeleteDelayMs, 0), int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
	return RemoteRetention{Ms: r.Ms, Bytes: r.Bytes, DeleteDelay: delay}
}

// LocalConfig returns cfg with the retention the local segment.Log of the
// partition enforces: the local limits when tiered, the total ones when
// not. A limit of 0 (delete as soon as allowed) becomes 1, since
// segment.Config reads 0 as "the default".
func (r Retention) LocalConfig(cfg segment.Config, tiered bool) segment.Config {
	ms, bytes := r.Ms, r.Bytes
	if tiered {
		ms, bytes = r.Local()
	}
	cfg.RetentionMs, cfg.RetentionBytes = nonZero(ms), nonZero(bytes)
	return cfg
}

func nonZero(v int64) int64 {
	if v == 0 {
		return 1
	}
	return v
}
