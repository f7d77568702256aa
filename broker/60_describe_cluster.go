package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-1
//
// Behavior:
// * The cluster ID, the controller (-1 while there is none) and every live
//   broker at its advertised address, with its rack, from the metadata
//   cache (see Metadata).
// * Cluster authorized operations, when asked for: the cluster operations
//   the principal is allowed if it may DESCRIBE the cluster, else 0 (all
//   of them without an authorizer), as Kafka answers. No other check.
// * v1: EndpointType must be 1 (brokers); anything else is
//   UNSUPPORTED_ENDPOINT_TYPE.
//
// Version notes:
// * v0: flexible from the start
// * v1: EndpointType (KIP-919)

func init() { register(60, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only the brokers endpoint type (1) is supported"
		resp.ErrorMessage = &msg
		resp.EndpointType = req.EndpointType
		return reply{msg: resp}, nil
	}
	snap := s.coord.Snapshot()
	resp.ClusterID = snap.ClusterID
	resp.ControllerID = snap.Controller.ID
	resp.ClusterAuthorizedOperations = opsNotRequested
	if req.IncludeClusterAuthorizedOperations {
		// Kafka: the cluster's allowed operations for a principal that
		// may DESCRIBE it, else none.
		resp.ClusterAuthorizedOperations = 0
		if s.authorize(r, acl.OpDescribe, acl.Cluster) {
			resp.ClusterAuthorizedOperations = s.authorizedOperations(r, acl.Cluster)
		}
	}
	lis := r.listenerName()
	for _, b := range snap.Brokers {
		host, port, ok := endpointFor(b, lis)
		if !ok {
			continue // not reachable on this listener
		}
		mb := kmsg.NewDescribeClusterResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, host, port, rackOf(b)
		resp.Brokers = append(resp.Brokers, mb)
	}
	return reply{msg: resp}, nil
}
