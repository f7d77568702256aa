package broker

// groupTxnMarker tells the group coordinator that a marker for producerID
// is durable on partition of __consumer_offsets.
//
// temporary: replaced by i19-offsets at merge
func (s *Server) groupTxnMarker(partition int32, producerID int64, commit bool) {}
