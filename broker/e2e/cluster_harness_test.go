package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterSessionTimeout is the brokers' zookeeper.session.timeout.ms in the
// cluster tests: short, so failovers are quick.
const clusterSessionTimeout = 4 * time.Second

// Cluster is a real ZooKeeper server and real `strata broker` processes
// with broker ids 1..n, each on its own 127.0.0.1 port (or, from
// StartNetCluster, its own network namespace) with its own data
// directory, all under the chroot /strata.
type Cluster struct {
	ZK *zktest.Server
	// Connect is the brokers' zookeeper.connect.
	Connect string
	// brokers[i] has broker.id i+1.
	brokers []*Broker
	// net is where the processes run when the cluster is on the hosts of
	// a netlab.Lab (StartNetCluster); nil on 127.0.0.1.
	net *netHosts
	// dial, if set, is how the test's clients connect (kgo.Dialer): for
	// brokers that advertise names only their hosts resolve.
	dial func(ctx context.Context, network, host string) (net.Conn, error)
}

// clientOpts are the options every client of the cluster starts with.
func (c *Cluster) clientOpts(seeds ...string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	if c.dial != nil {
		opts = append(opts, kgo.Dialer(c.dial))
	}
	return opts
}

// StartCluster starts ZooKeeper and n brokers (one after the other) with
// the cluster settings plus overrides, and waits until Metadata lists all
// of them and a controller. Everything stops when the test ends (brokers
// first, with SIGTERM).
func StartCluster(t *testing.T, n int, overrides ...string) *Cluster {
	t.Helper()
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	c := &Cluster{ZK: zktest.Start(t)}
	c.Connect = c.ZK.ConnectString("/strata")
	for id := 1; id <= n; id++ {
		c.brokers = append(c.brokers, StartBroker(t, c.brokerOverrides(id, overrides)...))
	}
	c.waitAllSee(t, 30*time.Second, n)
	return c
}

// waitAllSee waits until every running broker's metadata lists n brokers
// and a controller.
func (c *Cluster) waitAllSee(t testing.TB, timeout time.Duration, n int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, b := range c.brokers {
		for {
			got := func() string {
				cl, err := kgo.NewClient(append(c.clientOpts(b.Addr), kgo.DialTimeout(time.Second))...)
				if err != nil {
					return err.Error()
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
				if err != nil {
					return err.Error()
				}
				if len(resp.Brokers) != n || resp.ControllerID < 1 {
					return fmt.Sprintf("%d brokers, controller %d", len(resp.Brokers), resp.ControllerID)
				}
				return ""
			}()
			if got == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker at %s: %s; want %d brokers and a controller", b.Addr, got, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (c *Cluster) brokerOverrides(id int, extra []string) []string {
	return append([]string{
		"broker.id=" + strconv.Itoa(id),
		"zookeeper.connect=" + c.Connect,
		"zookeeper.session.timeout.ms=" + strconv.Itoa(int(clusterSessionTimeout.Milliseconds())),
		"offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=0",
	}, extra...)
}

// Broker returns the broker with the given id.
func (c *Cluster) Broker(id int32) *Broker { return c.brokers[id-1] }

// IDs lists the broker ids.
func (c *Cluster) IDs() []int32 {
	ids := make([]int32, len(c.brokers))
	for i := range c.brokers {
		ids[i] = int32(i + 1)
	}
	return ids
}

// LiveAddrs lists the addresses of the broker processes that are running.
func (c *Cluster) LiveAddrs() []string {
	var out []string
	for _, b := range c.brokers {
		if b.Alive() {
			out = append(out, b.Addr)
		}
	}
	return out
}

// Client returns a franz-go client seeded with the running brokers, closed
// when the test ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := c.newClient(t, opts...)
	t.Cleanup(cl.Close)
	return cl
}

// newClient is Client without the cleanup: the caller closes it.
func (c *Cluster) newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := append(c.clientOpts(c.LiveAddrs()...),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(20*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	return cl
}

// Metadata asks a running broker for the cluster's metadata (all topics).
func (c *Cluster) Metadata(ctx context.Context, t testing.TB) (kadm.Metadata, error) {
	t.Helper()
	cl, err := kgo.NewClient(append(c.clientOpts(c.LiveAddrs()...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(2*time.Second))...)
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	return kadm.NewClient(cl).Metadata(ctx)
}

// WaitMetadata polls Metadata every 50ms until check returns "" and
// returns how long that took; check returns what it still waits for. The
// test fails after timeout with check's last answer.
func (c *Cluster) WaitMetadata(t testing.TB, timeout time.Duration, what string, check func(kadm.Metadata) string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		md, err := c.Metadata(ctx, t)
		cancel()
		if err != nil {
			last = err.Error()
		} else if last = check(md); last == "" {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting %v for %s: %s", timeout, what, last)
	return 0
}

// Describe runs `strata topic describe` against the running brokers.
func (c *Cluster) Describe(t testing.TB, topic string) string {
	t.Helper()
	return runCmd(t, 30*time.Second, "", strataBin, "topic", "describe", "--topic", topic, "--bootstrap-server", strings.Join(c.LiveAddrs(), ","))
}

// leadersOf maps each partition of topic in md to its leader.
func leadersOf(md kadm.Metadata, topic string) map[int32]int32 {
	out := map[int32]int32{}
	for p, d := range md.Topics[topic].Partitions {
		out[p] = d.Leader
	}
	return out
}

// partitionsLedBy lists the partitions of topic that broker id leads.
func partitionsLedBy(md kadm.Metadata, topic string, id int32) []int32 {
	var out []int32
	for p, l := range leadersOf(md, topic) {
		if l == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// produceTo produces n records to each partition of topic with acks=1 and
// fails the test on any error.
func produceTo(t testing.TB, cl *kgo.Client, topic string, partitions []int32, n int, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, p := range partitions {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", prefix, p, i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v", len(recs), topic, err)
	}
}

// producerClient is a client that produces to explicit partitions with
// acks=1 (so not idempotent).
func (c *Cluster) producerClient(t testing.TB) *kgo.Client {
	return c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
}

// consumeAll reads partitions of topic from the start until want records
// came, and returns their values.
func (c *Cluster) consumeAll(t testing.TB, topic string, partitions []int32, want int) []string {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for _, p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(got), want, topic, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
