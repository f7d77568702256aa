package broker

import (
	"maps"

	"github.com/stratastream/strata/broker/txn"
)

// This file holds the features (KIP-584) the broker supports and the
// cluster's finalized levels, which the coordinator keeps cluster-wide
// (coord.FeatureStore: ZooKeeper's /feature znode, watched by every
// broker). ApiVersions advertises both; UpdateFeatures changes the
// finalized levels.

// transactionVersionFeature is the feature that selects the transaction
// protocol (KIP-890 part 2, KIP-1022): 1 as Kafka 3.x, 2 with an epoch
// bump per transaction (EndTxn v5, Produce v12 and TxnOffsetCommit v5
// add partitions implicitly).
const transactionVersionFeature = "transaction.version"

// supportedFeature is one feature the broker supports, with the levels
// it can run at.
type supportedFeature struct {
	name     string
	min, max int16
}

// supportedFeatures are the features this broker supports.
var supportedFeatures = []supportedFeature{
	{name: transactionVersionFeature, min: txn.TransactionVersion0, max: txn.TransactionVersion2},
}

// supportedFeatureByName returns a supported feature.
func supportedFeatureByName(name string) (supportedFeature, bool) {
	for _, f := range supportedFeatures {
		if f.name == name {
			return f, true
		}
	}
	return supportedFeature{}, false
}

// legacyFinalizedFeatures are the levels of a cluster that has never had
// its features written (created before features were kept): it keeps
// running transactions as it did, at transaction.version 1, until an
// UpdateFeatures upgrades it.
var legacyFinalizedFeatures = map[string]int16{transactionVersionFeature: txn.TransactionVersion1}

// finalizedFeatures returns the cluster's finalized feature levels and
// their epoch, from the coordinator's watched copy: for a cluster that
// has none written, legacyFinalizedFeatures at epoch 0.
func (s *Server) finalizedFeatures() (map[string]int16, int64) {
	fs, epoch := s.coord.FinalizedFeatures()
	if epoch < 0 {
		return maps.Clone(legacyFinalizedFeatures), 0
	}
	return fs, epoch
}

// transactionVersion is the finalized transaction.version.
func (s *Server) transactionVersion() int16 {
	fs, _ := s.finalizedFeatures()
	return fs[transactionVersionFeature]
}

// transactionsV2 reports whether transaction version 2 is finalized.
func (s *Server) transactionsV2() bool { return s.transactionVersion() >= txn.TransactionVersion2 }
