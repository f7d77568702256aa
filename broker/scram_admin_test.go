package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/broker/sasl"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// scramLogin runs franz-go's SCRAM client against a session of the
// server's credential store, as a SASL listener would.
func scramLogin(t *testing.T, s *Server, mech, user, pass string) error {
	t.Helper()
	cfg, err := sasl.NewConfig(map[string]string{sasl.PropEnabledMechanisms: "SCRAM-SHA-256,SCRAM-SHA-512"}, s.ScramCredentialStore(), sasl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cfg.NewSession(mech)
	if err != nil {
		t.Fatal(err)
	}
	a := scram.Auth{User: user, Pass: pass}
	m := a.AsSha256Mechanism()
	if mech == sasl.MechanismScramSHA512 {
		m = a.AsSha512Mechanism()
	}
	cs, msg, err := m.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		out, done, err := sess.Step(msg)
		if err != nil {
			return err
		}
		if _, msg, err = cs.Challenge(out); err != nil {
			t.Fatalf("client refused the server: %v", err)
		}
		if done {
			if sess.Principal() != "User:"+user {
				t.Fatalf("principal %q", sess.Principal())
			}
			return nil
		}
	}
	t.Fatal("exchange did not end")
	return nil
}

func TestUserScramCredentialsAdmin(t *testing.T) {
	s := startServer(t, nil)
	adm := kadm.NewClient(newClient(t, s))
	ctx := testCtx(t)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-512"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range altered.Sorted() {
		if a.Err != nil {
			t.Fatalf("alter %s: %v %s", a.User, a.Err, a.ErrMessage)
		}
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[kadm.ScramMechanism]int32{}
	for u, d := range described {
		if d.Err != nil {
			t.Fatalf("describe %s: %v", u, d.Err)
		}
		got[u] = map[kadm.ScramMechanism]int32{}
		for _, ci := range d.CredInfos {
			got[u][ci.Mechanism] = ci.Iterations
		}
	}
	if len(got) != 2 || got["alice"][kadm.ScramSha256] != 4096 || got["alice"][kadm.ScramSha512] != 8192 || len(got["bob"]) != 1 {
		t.Fatalf("describe all: got %v", got)
	}

	// The stored credentials authenticate the passwords, and only them.
	if err := scramLogin(t, s, sasl.MechanismScramSHA256, "alice", "alice-secret"); err != nil {
		t.Fatalf("alice SHA-256: %v", err)
	}
	if err := scramLogin(t, s, sasl.MechanismScramSHA512, "alice", "alice-512"); err != nil {
		t.Fatalf("alice SHA-512: %v", err)
	}
	if err := scramLogin(t, s, sasl.MechanismScramSHA512, "alice", "alice-secret"); !errors.Is(err, sasl.ErrAuthenticationFailed) {
		t.Fatalf("wrong password: got %v", err)
	}

	// Describe errors.
	described, err = adm.DescribeUserSCRAMs(ctx, "carol", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(described["carol"].Err, kerr.ResourceNotFound) || described["bob"].Err != nil {
		t.Fatalf("describe carol, bob: %+v", described)
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"bob", "bob", ""} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		dreq.Users = append(dreq.Users, u)
	}
	dresp, err := dreq.RequestWith(ctx, newClient(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe bob twice and empty: %+v", dresp.Results)
	}

	// Alter errors, one user each; a failed user changes nothing.
	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	upsert := func(name string, mech int8, iter int32, salt, salted string) {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = name, mech, iter, []byte(salt), []byte(salted)
		areq.Upsertions = append(areq.Upsertions, up)
	}
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		areq.Deletions = append(areq.Deletions, d)
	}
	del("bob", 2)  // bob has no SHA-512
	del("dave", 1) // dave has nothing
	upsert("dave", 2, 4096, "s", "p")
	upsert("few", 1, 4095, "s", "p")
	upsert("many", 1, 16385, "s", "p")
	upsert("twice", 1, 4096, "s", "p")
	upsert("twice", 1, 4096, "s", "q")
	upsert("erin", 3, 4096, "s", "p")
	upsert("frank", 1, 4096, "", "")
	upsert("", 1, 4096, "s", "p")
	aresp, err := areq.RequestWith(ctx, newClient(t, s))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{"bob": kerr.ResourceNotFound, "dave": kerr.ResourceNotFound, "few": kerr.UnacceptableCredential,
		"many": kerr.UnacceptableCredential, "twice": kerr.DuplicateResource, "erin": kerr.UnsupportedSaslMechanism,
		"frank": kerr.UnacceptableCredential, "": kerr.UnacceptableCredential}
	if len(aresp.Results) != len(want) {
		t.Fatalf("alter errors: %d results, want %d: %+v", len(aresp.Results), len(want), aresp.Results)
	}
	for _, r := range aresp.Results {
		if r.ErrorCode != want[r.User].Code {
			t.Errorf("alter %q: got code %d (%v), want %v", r.User, r.ErrorCode, r.ErrorMessage, want[r.User])
		}
	}
	described, err = adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 2 {
		t.Fatalf("failed alterations wrote something: %v", described)
	}

	// Deleting one mechanism leaves the other.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || len(described["alice"].CredInfos) != 1 || described["alice"].CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("after delete: %v %+v", err, described)
	}
	if err := scramLogin(t, s, sasl.MechanismScramSHA256, "alice", "alice-secret"); err == nil {
		t.Fatal("deleted credential still authenticates")
	}
}

// TestUserScramCredentialsAcrossBrokers: with ZooKeeper, a credential
// created through one broker authenticates on another as soon as that
// broker's watch brings it (logged), and a deletion likewise.
func TestUserScramCredentialsAcrossBrokers(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-scram")
	s1 := startServer(t, map[string]string{"broker.id": "1", "zookeeper.connect": connect})
	s2 := startServer(t, map[string]string{"broker.id": "2", "zookeeper.connect": connect})
	adm := kadm.NewClient(newClient(t, s1))
	ctx := testCtx(t)

	start := time.Now()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "zed", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "zed-secret"}})
	if err != nil || res["zed"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if !poll.For(30*time.Second, func() bool { return scramLogin(t, s2, sasl.MechanismScramSHA512, "zed", "zed-secret") == nil }) {
		t.Fatal("the other broker never accepted the new credential")
	}
	t.Logf("credential created on broker 1 authenticated on broker 2 after %v", time.Since(start))

	start = time.Now()
	res, err = kadm.NewClient(newClient(t, s2)).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "zed", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || res["zed"].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if !poll.For(30*time.Second, func() bool { return scramLogin(t, s1, sasl.MechanismScramSHA512, "zed", "zed-secret") != nil }) {
		t.Fatal("broker 1 still accepts the deleted credential")
	}
	t.Logf("credential deleted on broker 2 refused on broker 1 after %v", time.Since(start))
}
