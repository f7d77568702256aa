package coord

import (
	"context"
	"maps"
)

// Finalized features (KIP-584): the cluster-wide levels of features such
// as transaction.version, kept in ZooKeeper in Kafka's /feature znode
// ({"version":2,"status":1,"features":{"<name>":{"max_version_level":N}}},
// its epoch the znode's version, as Kafka's FeatureZNode) and in the
// embedded coordinator's file. Every session watches them; UpdateFeatures
// changes them on the controller.
//
// A cluster created by this build starts with NewClusterFeatures; a
// cluster created before it has no /feature znode (epoch -1) and keeps
// the levels its readers give an absent feature until an upgrade.

// NewClusterFeatures are the finalized features a new cluster starts
// with: transaction.version 1, the transaction protocol of Kafka 3.x that
// every client speaks. (Kafka 4.x finalizes 2 in a new cluster; here
// version 2 is an UpdateFeatures away, `strata features upgrade` or
// kafka-features.sh.)
var NewClusterFeatures = map[string]int16{"transaction.version": 1}

// FeatureStore keeps the finalized features (see above).
type FeatureStore interface {
	// FinalizedFeatures returns the finalized feature levels (a copy;
	// a feature at level 0 is absent) and their epoch, which grows at
	// every change; -1 when the cluster never had them written.
	FinalizedFeatures() (map[string]int16, int64)

	// AlterFinalizedFeatures replaces the finalized features by what fn
	// returns for the current ones, as a compare-and-set (fn may run
	// again after a concurrent write); an error of fn aborts and is
	// returned as is. Levels below 1 are dropped. Errors:
	// ErrUnavailable, ErrVersionConflict after repeated conflicts.
	// After it returns nil FinalizedFeatures shows the change.
	AlterFinalizedFeatures(ctx context.Context, fn func(cur map[string]int16) (map[string]int16, error)) error

	// WatchFeatures returns a channel that receives (one pending
	// signal at most) after the finalized features changed, and a
	// function that stops the watch.
	WatchFeatures() (<-chan struct{}, func())
}

// cleanFeatures copies fs without the levels below 1.
func cleanFeatures(fs map[string]int16) map[string]int16 {
	out := make(map[string]int16, len(fs))
	for name, level := range fs {
		if level >= 1 {
			out[name] = level
		}
	}
	return out
}

// copyFeatures is maps.Clone that never returns nil.
func copyFeatures(fs map[string]int16) map[string]int16 {
	if fs == nil {
		return map[string]int16{}
	}
	return maps.Clone(fs)
}
