package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestFindCoordinatorCreatesOffsetsTopic: in a cluster without
// __consumer_offsets, the FindCoordinator that creates it answers
// COORDINATOR_NOT_AVAILABLE, as Kafka, so the client asks again instead of
// going to a leader that may not have loaded its partition yet (which
// answers NOT_COORDINATOR, not retried by every client for every API);
// asking again names a live broker.
func TestFindCoordinatorCreatesOffsetsTopic(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-find-coordinator")
	var srv []*Server
	for id := 1; id <= 2; id++ {
		srv = append(srv, startServer(t, map[string]string{"broker.id": fmt.Sprint(id), "zookeeper.connect": connect}))
	}
	waitFor(t, "both brokers registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == 2 })
	if _, ok := srv[0].coord.Snapshot().Topic(group.Topic); ok {
		t.Fatalf("%s exists before the first FindCoordinator", group.Topic)
	}
	rc := dialRaw(t, srv[0])
	corr := int32(0)
	ask := func() *kmsg.FindCoordinatorResponse {
		t.Helper()
		corr++
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = 3, "g"
		rc.send(corr, req)
		got, body, err := rc.readFrame()
		if err != nil || got != corr {
			t.Fatalf("corr %d: got %d, err %v", corr, got, err)
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		decodeResponse(t, resp, body)
		return resp
	}
	if resp := ask(); resp.ErrorCode != kerr.CoordinatorNotAvailable.Code || resp.NodeID != -1 {
		t.Fatalf("first FindCoordinator: error %d node %d, want COORDINATOR_NOT_AVAILABLE and node -1", resp.ErrorCode, resp.NodeID)
	}
	if _, ok := srv[0].coord.Snapshot().Topic(group.Topic); !ok {
		t.Fatalf("the first FindCoordinator did not create %s", group.Topic)
	}
	var resp *kmsg.FindCoordinatorResponse
	poll.Until(t, 20*time.Second, "FindCoordinator names a coordinator", func() bool {
		resp = ask()
		return resp.ErrorCode == 0
	})
	if resp.NodeID != 1 && resp.NodeID != 2 {
		t.Fatalf("coordinator %d, want broker 1 or 2", resp.NodeID)
	}
}
