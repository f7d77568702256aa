package broker

import "sync/atomic"

// Stats is a snapshot of the server's counters. Counters only grow, except
// ConnectionsOpen. A request is counted before its response is written, so
// a client that has its answer sees it counted; the exceptions are
// FetchZeroCopyBytes and FetchCopiedBytes, counted once the bytes are sent,
// which can be after the client has the response: they include it by the
// time a later request on the same connection is answered.
type Stats struct {
	// ConnectionsAccepted counts accepted TCP connections.
	ConnectionsAccepted int64
	// ConnectionsOpen is the number of connections open now.
	ConnectionsOpen int64
	// Requests counts requests decoded and handled.
	Requests int64
	// RequestsRejected counts frames that closed their connection: too
	// large, malformed, unknown key or unsupported version.
	RequestsRejected int64
	// ProduceBatches and ProduceBytes count record batches appended by
	// Produce.
	ProduceBatches int64
	ProduceBytes   int64
	// FetchZeroCopyBytes counts record bytes sent by sendfile(2) from
	// segment files, never entering user space.
	FetchZeroCopyBytes int64
	// FetchCopiedBytes counts record bytes sent by copying through user
	// space (zero copy disabled, or a connection that is not TCP).
	FetchCopiedBytes int64
	// ProduceConvertedRecords and FetchConvertedRecords count records
	// converted between message formats: up from magic 0 and 1 for
	// Produce v0-v2, down to them for Fetch v0-v3 (Kafka's
	// ProduceMessageConversionsPerSec and FetchMessageConversionsPerSec).
	ProduceConvertedRecords int64
	FetchConvertedRecords   int64
}

// stats holds the live counters behind Stats.
type stats struct {
	connectionsAccepted atomic.Int64
	connectionsOpen     atomic.Int64
	requests            atomic.Int64
	requestsRejected    atomic.Int64
	produceBatches      atomic.Int64
	produceBytes        atomic.Int64
	fetchZeroCopyBytes  atomic.Int64
	fetchCopiedBytes    atomic.Int64
	produceConverted    atomic.Int64
	fetchDownConverted  atomic.Int64
}

func (s *stats) snapshot() Stats {
	return Stats{
		ConnectionsAccepted:     s.connectionsAccepted.Load(),
		ConnectionsOpen:         s.connectionsOpen.Load(),
		Requests:                s.requests.Load(),
		RequestsRejected:        s.requestsRejected.Load(),
		ProduceBatches:          s.produceBatches.Load(),
		ProduceBytes:            s.produceBytes.Load(),
		FetchZeroCopyBytes:      s.fetchZeroCopyBytes.Load(),
		FetchCopiedBytes:        s.fetchCopiedBytes.Load(),
		ProduceConvertedRecords: s.produceConverted.Load(),
		FetchConvertedRecords:   s.fetchDownConverted.Load(),
	}
}

// Map returns the counters under their exported metric names
// (strata_broker_...), for logging and expvar.
func (st Stats) Map() map[string]int64 {
	return map[string]int64{
		"strata_broker_connections_accepted_total":      st.ConnectionsAccepted,
		"strata_broker_connections_open":                st.ConnectionsOpen,
		"strata_broker_requests_total":                  st.Requests,
		"strata_broker_requests_rejected_total":         st.RequestsRejected,
		"strata_broker_produce_batches_total":           st.ProduceBatches,
		"strata_broker_produce_bytes_total":             st.ProduceBytes,
		"strata_broker_fetch_zero_copy_bytes_total":     st.FetchZeroCopyBytes,
		"strata_broker_fetch_copied_bytes_total":        st.FetchCopiedBytes,
		"strata_broker_produce_converted_records_total": st.ProduceConvertedRecords,
		"strata_broker_fetch_converted_records_total":   st.FetchConvertedRecords,
	}
}

// progress shows that background work has happened, for the tests that
// must know a loop ran (or is waiting) rather than sleep and hope. Nothing
// else reads it.
type progress struct {
	// retentionPasses counts the retention loop's completed passes over
	// every partition.
	retentionPasses atomic.Int64
	// fetchesWaiting is the number of long-polling fetches waiting for an
	// append now (in waitForAppend).
	fetchesWaiting atomic.Int64
}
