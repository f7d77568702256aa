package tiering

import (
	"testing"

	"github.com/stratastream/strata/segment"
)

func TestRetentionLocal(t *testing.T) {
	for i, tc := range []struct {
		r             Retention
		ms, bytes     int64
		cfgMs, cfgByt int64 // LocalConfig, tiered
	}{
		{Retention{Ms: 604800000, Bytes: -1, LocalMs: -2, LocalBytes: -2}, 604800000, -1, 604800000, -1},
		{Retention{Ms: 604800000, Bytes: -1, LocalMs: 3600000, LocalBytes: 1 << 30}, 3600000, 1 << 30, 3600000, 1 << 30},
		{Retention{Ms: 1000, Bytes: 5000, LocalMs: 2000, LocalBytes: 9000}, 1000, 5000, 1000, 5000}, // never looser
		{Retention{Ms: 1000, Bytes: 5000, LocalMs: -1, LocalBytes: -1}, 1000, 5000, 1000, 5000},
		{Retention{Ms: -1, Bytes: -1, LocalMs: -1, LocalBytes: -1}, -1, -1, -1, -1},
		{Retention{Ms: -1, Bytes: -1, LocalMs: 0, LocalBytes: 0}, 0, 0, 1, 1},
	} {
		ms, bytes := tc.r.Local()
		if ms != tc.ms || bytes != tc.bytes {
			t.Errorf("#%d: Local() = %d, %d; want %d, %d", i, ms, bytes, tc.ms, tc.bytes)
		}
		cfg := tc.r.LocalConfig(segment.DefaultConfig(), true)
		if cfg.RetentionMs != tc.cfgMs || cfg.RetentionBytes != tc.cfgByt {
			t.Errorf("#%d: LocalConfig = %d, %d; want %d, %d", i, cfg.RetentionMs, cfg.RetentionBytes, tc.cfgMs, tc.cfgByt)
		}
		if cfg := tc.r.LocalConfig(segment.DefaultConfig(), false); cfg.RetentionMs != nonZero(tc.r.Ms) || cfg.RetentionBytes != nonZero(tc.r.Bytes) {
			t.Errorf("#%d: untiered LocalConfig = %d, %d", i, cfg.RetentionMs, cfg.RetentionBytes)
		}
	}
}

func TestGateVeto(t *testing.T) {
	si := segment.SegmentInfo{BaseOffset: 0, NextOffset: 10, Sealed: true}
	g := NewGate(true)
	if g.CanDeleteLocal(si) {
		t.Error("tiered without an archiver: deletion allowed")
	}
	g.SetTiered(false)
	if !g.CanDeleteLocal(si) {
		t.Error("untiered: deletion vetoed")
	}
	g.SetTiered(true)
	a := &Archiver{}
	g.Attach(a)
	if g.CanDeleteLocal(si) {
		t.Error("archiver without a manifest: deletion allowed")
	}
	m := NewManifest("t", "", 0)
	m.LogStartOffset = 10 // an empty remote log ending at 10 holds [0, 10)
	a.mu.manifest = m
	if !g.CanDeleteLocal(si) || g.CanDeleteLocal(segment.SegmentInfo{BaseOffset: 10, NextOffset: 11}) {
		t.Error("veto does not follow the manifest")
	}
	g.Detach(&Archiver{}) // not the attached one
	if g.arch.Load() != a {
		t.Error("detached another archiver")
	}
	g.Detach(a)
	g.onSeal(si) // no archiver: nothing to wake
}
