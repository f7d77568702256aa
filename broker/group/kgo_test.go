package group

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// routeGroupAPIs makes the kfake cluster hand every group API to c, so a
// real client's consumer group runs against this package while kfake
// serves metadata, produce and fetch.
func routeGroupAPIs(t *testing.T, cluster *kfake.Cluster, c *Coordinator) {
	for _, api := range APIs() {
		cluster.ControlKey(api.Key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			if v := req.GetVersion(); v < api.Min || v > api.Max {
				t.Errorf("%s v%d: outside the served versions %d-%d", api.Name, v, api.Min, api.Max)
			}
			ctx := WithClient(context.Background(), Client{ID: "kgo", Host: "/127.0.0.1"})
			var resp kmsg.Response
			done := make(chan struct{})
			go func() {
				defer close(done)
				switch r := req.(type) {
				case *kmsg.OffsetCommitRequest:
					resp = c.OffsetCommit(ctx, r)
				case *kmsg.OffsetFetchRequest:
					resp = c.OffsetFetch(ctx, r)
				case *kmsg.JoinGroupRequest:
					resp = c.JoinGroup(ctx, r)
				case *kmsg.HeartbeatRequest:
					resp = c.Heartbeat(ctx, r)
				case *kmsg.LeaveGroupRequest:
					resp = c.LeaveGroup(ctx, r)
				case *kmsg.SyncGroupRequest:
					resp = c.SyncGroup(ctx, r)
				case *kmsg.DescribeGroupsRequest:
					resp = c.DescribeGroups(ctx, r)
				case *kmsg.ListGroupsRequest:
					resp = c.ListGroups(ctx, r)
				case *kmsg.DeleteGroupsRequest:
					resp = c.DeleteGroups(ctx, r)
				case *kmsg.OffsetDeleteRequest:
					resp = c.OffsetDelete(ctx, r)
				}
			}()
			// Blocking calls must not stall kfake's loop.
			cluster.SleepControl(func() { <-done })
			<-done
			return resp, nil, true
		})
	}
}

// TestFranzGoConsumerGroup runs franz-go consumers (cooperative-sticky,
// autocommit) against the coordinator: a group of two, a third joining, one
// leaving. Every record is consumed and the committed offsets end at the
// log end.
func TestFranzGoConsumerGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clients for several seconds")
	}
	const partitions, perPartition = 6, 50
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	e := newEnv(t, nil)
	routeGroupAPIs(t, cluster, e.c)

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce := func(round int) {
		t.Helper()
		for p := range int32(partitions) {
			for i := range perPartition / 2 {
				r := &kgo.Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("%d-%d-%d", round, p, i))}
				if err := producer.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	produce(0)

	var mu sync.Mutex
	seen := make(map[string]int)
	newConsumer := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cluster.ListenAddrs()...),
			kgo.MaxVersions(kversion.V3_0_0()), // the versions this package serves
			kgo.ClientID(name),
			kgo.ConsumerGroup("g"),
			kgo.ConsumeTopics("t"),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			// Generous: a member is never to expire here (Close leaves).
			kgo.SessionTimeout(45*time.Second),
			kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.RebalanceTimeout(5*time.Second),
			kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				fs := cl.PollFetches(context.Background())
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
			}
		}()
		return cl
	}
	waitSeen := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumed %d distinct records, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	a, b := newConsumer("a"), newConsumer("b")
	waitSeen(partitions * perPartition / 2)
	c := newConsumer("c")
	waitFor(t, "three members", func() bool {
		d := e.describe("g")
		return d.State == "Stable" && len(d.Members) == 3
	})
	a.Close() // leaves the group
	waitFor(t, "two members", func() bool {
		d := e.describe("g")
		return d.State == "Stable" && len(d.Members) == 2
	})
	produce(1)
	waitSeen(partitions * perPartition)
	waitFor(t, "commits to reach the log end", func() bool {
		got, _ := e.fetchAll("g")
		for p := range int32(partitions) {
			if got[tp{"t", p}].Offset != perPartition {
				return false
			}
		}
		return true
	})
	b.Close()
	c.Close()
	e.waitState("g", StateEmpty)

	// Restart: the commits are all there, and the group is Empty with its
	// protocol type and last generation.
	gen := e.describeGeneration("g")
	e.restart()
	if d := e.describe("g"); d.State != "Empty" || d.ProtocolType != "consumer" || e.describeGeneration("g") != gen {
		t.Errorf("group after restart: got %s %q generation %d, want Empty consumer %d", d.State, d.ProtocolType, e.describeGeneration("g"), gen)
	}
	got, _ := e.fetchAll("g")
	for p := range int32(partitions) {
		if got[tp{"t", p}].Offset != perPartition {
			t.Errorf("partition %d after restart: got offset %d, want %d", p, got[tp{"t", p}].Offset, perPartition)
		}
	}
}
