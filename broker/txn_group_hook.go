package broker

// groupTxnMarker completes a producer's transactional offset commits in
// the consumer groups of a partition of __consumer_offsets this broker
// leads: writeTxnMarkers calls it once the producer's COMMIT (commit set)
// or ABORT marker is durably appended to that partition (the high
// watermark passed it). The group coordinator applies the pending offsets
// (unless newer commits are there) or drops them; a partition it has not
// loaded, or is still loading, gets the marker from its replay of the log.
// It does not block on I/O.
func (s *Server) groupTxnMarker(partition int32, producerID int64, commit bool) {
	if s.groups == nil || partition < 0 {
		return
	}
	s.groups.TxnMarker(int(partition), producerID, commit)
}
