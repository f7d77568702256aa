package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestDelegationTokensCluster runs delegation tokens on real processes:
// ZooKeeper and two `strata broker`s with the same
// delegation.token.secret.key in their properties and the ACL authorizer.
// `strata tokens create` (the binary) over broker 1's SASL listener as
// SCRAM user alice prints a token; a franz-go client authenticated with it
// through broker 2 (which learns the token through ZooKeeper) produces
// acks=all as alice, the only principal with ACLs on the topic; `strata
// tokens expire` through broker 2 ends it, after which new token
// connections to broker 1 fail (polled). The history checker proves every
// acknowledged record is in the log.
func TestDelegationTokensCluster(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	c := &Cluster{ZK: zktest.Start(t)}
	c.Connect = c.ZK.ConnectString("/strata")
	sasl := map[int32]string{}
	for id := 1; id <= 2; id++ {
		addrs := listenerAddrs(t, "PLAINTEXT", "SASL_PLAINTEXT")
		b := StartBroker(t, c.brokerOverrides(id, []string{
			"listeners=" + listenersValue(addrs, "PLAINTEXT", "SASL_PLAINTEXT"),
			"inter.broker.listener.name=PLAINTEXT",
			"sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
			"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
			"super.users=User:ANONYMOUS",
			"delegation.token.secret.key=e2e-cluster-secret",
		})...)
		b.Addr = addrs["PLAINTEXT"]
		c.brokers = append(c.brokers, b)
		sasl[int32(id)] = addrs["SASL_PLAINTEXT"]
	}
	c.waitAllSee(t, 30*time.Second, 2)
	const topic = "tok-e2e"
	parts := []int32{0, 1}
	c.createTopicWith(t, topic, 2, 2, nil)

	admin := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	acls, err := admin.CreateACLs(ctx, kadm.NewACLs().Topics(topic).Allow("User:alice").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(acls) != 1 || acls[0].Err != nil {
		t.Fatalf("ACL: %+v %v", acls, err)
	}

	asAlice := func(id int32) []string {
		return []string{"--bootstrap-server", sasl[id], "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", "alice", "--sasl-password", "alice-secret"}
	}
	out := runCmd(t, 60*time.Second, "", strataBin, append([]string{"tokens", "create", "--max-life-time-period", "3600000"}, asAlice(1)...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("tokens create printed:\n%s", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 8 || f[2] != "User:alice" {
		t.Fatalf("tokens create row %q", lines[1])
	}
	id, hmac := f[0], f[1]
	tokenClient := func(broker int32, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sasl[broker]), kgo.RetryTimeout(10 * time.Second),
			kgo.SASL(scram.Auth{User: id, Pass: hmac, IsToken: true}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ping := func(broker int32) error {
		cl := tokenClient(broker)
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer pcancel()
		return cl.Ping(pctx)
	}
	start := time.Now()
	if !poll.For(30*time.Second, func() bool { return ping(2) == nil }) {
		t.Fatalf("broker 2 never accepted the token: %v", ping(2))
	}
	t.Logf("token made through broker 1 accepted by broker 2 after %v", time.Since(start))

	// Produce as the token (alice) through broker 2, acks=all.
	hist := history.New()
	pcl := tokenClient(2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceHistWith(t, pcl, hist, topic, parts, 100, "tok")
	pcl.Close()

	// Expire through broker 2; broker 1 refuses new token connections.
	out = runCmd(t, 60*time.Second, "", strataBin, append([]string{"tokens", "expire", "--hmac", hmac}, asAlice(2)...)...)
	if !strings.HasPrefix(out, "Completed expire operation.") {
		t.Fatalf("tokens expire printed %q", out)
	}
	start = time.Now()
	if !poll.For(30*time.Second, func() bool { return errors.Is(ping(1), kerr.SaslAuthenticationFailed) }) {
		t.Fatalf("broker 1 still accepts the expired token: %v", ping(1))
	}
	t.Logf("token expired through broker 2 refused by broker 1 after %v", time.Since(start))
	out = runCmd(t, 60*time.Second, "", strataBin, append([]string{"tokens", "describe"}, asAlice(1)...)...)
	if strings.Contains(out, id) {
		t.Fatalf("tokens describe still lists the expired token:\n%s", out)
	}

	rep := hist.Check(finalLog(topic, c.readLog(t, topic, parts)))
	t.Logf("history: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %s", rep)
	}
}
