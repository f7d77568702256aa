package broker

import "context"

// verifyTxnPartition reports whether the partition is part of the
// producer's ongoing transaction (KIP-890 verification).
// temporary: replaced by i19-coordinator at merge
func (s *Server) verifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, epoch int16, topic string, partition int32) error {
	return nil
}
