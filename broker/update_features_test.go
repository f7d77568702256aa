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

// TestUpdateFeatures: a new cluster finalizes transaction.version 1;
// ApiVersions advertises it (v3: the finalized level only, v4 also the
// supported range 0-2); UpdateFeatures checks the level (above 2, or a
// downgrade without a downgrade type: INVALID_UPDATE_VERSION), validates
// only when asked, upgrades, downgrades and removes it, each change seen
// with a larger epoch. Every other feature is refused per feature with
// INVALID_REQUEST and Kafka 3.9's message (unsupported feature,
// deletion of a feature not finalized, a level below 1 without a
// downgrade type, an empty name, an unknown upgrade type), on v0 and
// v1, validate only or not.
func TestUpdateFeatures(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)

	level, epoch := finalizedTxnVersion(t, cl, 4)
	if level != 1 || epoch < 1 || s.transactionsV2() {
		t.Fatalf("new cluster: transaction.version %d epoch %d, want 1", level, epoch)
	}
	update := func(validate bool, level int16, upgrade int8) error {
		t.Helper()
		res, err := adm.UpdateFeatures(ctx, validate, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: upgrade})
		if err != nil {
			t.Fatal(err)
		}
		return res["transaction.version"].Err
	}
	if err := update(false, 3, 1); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Errorf("level 3: %v, want INVALID_UPDATE_VERSION", err)
	}
	if err := update(true, 2, 1); err != nil {
		t.Errorf("validate only: %v", err)
	}
	if l, e := finalizedTxnVersion(t, cl, 4); l != 1 || e != epoch {
		t.Fatalf("after validate only: %d epoch %d", l, e)
	}
	if err := update(false, 2, 1); err != nil {
		t.Fatal(err)
	}
	l, e := finalizedTxnVersion(t, cl, 3)
	if l != 2 || e <= epoch || !s.transactionsV2() {
		t.Fatalf("after the upgrade: %d epoch %d (was %d)", l, e, epoch)
	}
	if err := update(false, 1, 1); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Errorf("downgrade typed as upgrade: %v, want INVALID_UPDATE_VERSION", err)
	}
	if err := update(false, 1, 2); err != nil {
		t.Fatal(err)
	}
	if l, e2 := finalizedTxnVersion(t, cl, 4); l != 1 || e2 <= e || s.transactionsV2() {
		t.Fatalf("after the downgrade: %d epoch %d", l, e2)
	}
	if err := update(false, 0, 3); err != nil {
		t.Fatal(err)
	}
	if l, _ := finalizedTxnVersion(t, cl, 4); l != 0 {
		t.Fatalf("after the removal: %d", l)
	}
	res, err := adm.UpdateFeatures(ctx, true, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 1})
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
		{1, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 0}, false, "Received unknown upgrade type."},
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
}

// finalizedTxnVersion asks ApiVersions at version for the finalized
// transaction.version and the features' epoch, and checks the supported
// range (listed from v4 only: its minimum is 0). The client may answer
// from a version of its own choice: the response's version is checked.
func finalizedTxnVersion(t *testing.T, cl *kgo.Client, version int16) (int16, int64) {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = version, "test", "1"
	avr, err := av.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	wantSupported := 0
	if avr.Version >= 4 {
		wantSupported = 1
	}
	if len(avr.SupportedFeatures) != wantSupported ||
		wantSupported == 1 && (avr.SupportedFeatures[0].Name != "transaction.version" || avr.SupportedFeatures[0].MinVersion != 0 || avr.SupportedFeatures[0].MaxVersion != 2) {
		t.Fatalf("v%d supported features: %+v", avr.Version, avr.SupportedFeatures)
	}
	for _, f := range avr.FinalizedFeatures {
		if f.Name == "transaction.version" {
			if f.MinVersionLevel != f.MaxVersionLevel {
				t.Fatalf("finalized %+v", f)
			}
			return f.MaxVersionLevel, avr.FinalizedFeaturesEpoch
		}
	}
	return 0, avr.FinalizedFeaturesEpoch
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
