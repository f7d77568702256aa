package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/coord/zktest"
)

// TestUpdateFeatures: a broker that, as a Kafka 3.9 ZooKeeper broker,
// supports no features advertises none in ApiVersions and refuses every
// UpdateFeatures update per feature with INVALID_REQUEST and Kafka's
// message (unknown feature, deletion of a feature not finalized, a level
// below 1 without a downgrade type, an empty name, an unknown upgrade
// type), on v0 and v1, validate only or not; nothing is finalized after.
func TestUpdateFeatures(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)

	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["transaction.version"]; !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Fatalf("transaction.version 2: %+v", res)
	}
	res, err = adm.UpdateFeatures(ctx, true, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 1})
	if err != nil || !errors.Is(res["metadata.version"].Err, kerr.InvalidRequest) {
		t.Fatalf("validate only metadata.version: %+v %v", res, err)
	}

	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(57, 0)
	clients := map[int16]*kgo.Client{0: newClient(t, s, kgo.MaxVersions(v0)), 1: cl}
	const notSupported = "Could not apply finalized feature update because the provided feature is not supported."
	for _, tc := range []struct {
		version  int16
		update   kmsg.UpdateFeaturesRequestFeatureUpdate
		validate bool
		msg      string
	}{
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "kraft.version", MaxVersionLevel: 1, UpgradeType: 1}, false, notSupported},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "kraft.version", MaxVersionLevel: 1, UpgradeType: 1}, true, notSupported},
		{0, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "group.version", MaxVersionLevel: 1}, false, notSupported},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 0, UpgradeType: 2}, false, "Can not delete non-existing finalized feature."},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 0, UpgradeType: 3}, false, "Can not delete non-existing finalized feature."},
		{0, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 0, AllowDowngrade: true}, false, "Can not delete non-existing finalized feature."},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 0, UpgradeType: 1}, false, "Can not provide versionLevel: 0 less than 1 without setting the SAFE downgradeType in the request."},
		{0, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: -1}, false, "Can not provide versionLevel: -1 less than 1 without setting the SAFE downgradeType in the request."},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "", MaxVersionLevel: 1, UpgradeType: 1}, false, "Feature name can not be empty."},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 1, UpgradeType: 9}, false, "Received unknown upgrade type."},
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "x", MaxVersionLevel: 1, UpgradeType: 0}, false, "Received unknown upgrade type."},
	} {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version, req.TimeoutMillis, req.ValidateOnly = tc.version, 5000, tc.validate
		req.FeatureUpdates = append(req.FeatureUpdates, tc.update)
		resp, err := req.RequestWith(ctx, clients[tc.version])
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != tc.version || resp.ErrorCode != 0 || len(resp.Results) != 1 || resp.Results[0].Feature != tc.update.Feature ||
			resp.Results[0].ErrorCode != kerr.InvalidRequest.Code || resp.Results[0].ErrorMessage == nil || *resp.Results[0].ErrorMessage != tc.msg {
			t.Fatalf("v%d %+v: %+v", tc.version, tc.update, resp)
		}
	}

	// Nothing is advertised or finalized, before or after.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 4, "test", "1"
	avr, err := av.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(avr.SupportedFeatures) != 0 || len(avr.FinalizedFeatures) != 0 {
		t.Fatalf("ApiVersions features: supported %+v finalized %+v", avr.SupportedFeatures, avr.FinalizedFeatures)
	}
}

// TestUpdateFeaturesAuthorization: without CLUSTER ALTER the answer is
// the top-level CLUSTER_AUTHORIZATION_FAILED; on a broker that is not the
// controller it is NOT_CONTROLLER, as in Kafka.
func TestUpdateFeaturesAuthorization(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-features")
	props := func(id string) map[string]string {
		return saslProps(map[string]string{"broker.id": id, "zookeeper.connect": connect,
			"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"})
	}
	s1 := startServer(t, props("1"))
	s2 := startServer(t, props("2"))
	addScramUser(t, s1, "alice", "alice-secret")
	ctx := testCtx(t)
	alice := kadm.NewClient(saslClient(t, s1, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	if _, err := alice.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 1}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice without CLUSTER ALTER: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	ctrl := s1.coord.Snapshot().Controller.ID
	other := s2
	if ctrl == 2 {
		other = s1
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.TimeoutMillis = 1, 5000
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	cl := newClient(t, other)
	resp, err := cl.Broker(int(other.cfg.BrokerID)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.UpdateFeaturesResponse); r.ErrorCode != kerr.NotController.Code || len(r.Results) != 0 {
		t.Fatalf("on broker %d (controller %d): %+v", other.cfg.BrokerID, ctrl, r)
	}
}
