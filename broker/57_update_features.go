package broker

import (
	"fmt"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UpdateFeatures: v0-1 (KIP-584), as a Kafka 3.9 cluster in ZooKeeper mode
// answers it.
//
// A Kafka 3.9 ZooKeeper-mode broker supports no features: KafkaServer
// builds its BrokerFeatures with createEmpty(), so ApiVersions advertises
// no SupportedFeatures and the controller's FeatureZNode holds no
// finalized ones (metadata.version and kraft.version are KRaft's;
// transaction.version's production maximum in 3.9 is 0, and its levels 1
// and 2, KIP-890 part 2, need metadata.version 4.0). Strata advertises
// none either, so every update is refused the way Kafka's
// KafkaController.validateFeatureUpdate refuses it, each feature with
// INVALID_REQUEST and Kafka's message, and nothing is ever written:
//
//   - CLUSTER ALTER is required (else the top-level
//     CLUSTER_AUTHORIZATION_FAILED), and the request must reach the
//     controller (else NOT_CONTROLLER), as in Kafka.
//   - An empty feature name, an unknown upgrade type (v1), a deletion of a
//     feature that is not finalized (level < 1 with a downgrade type, or v0's
//     allow_downgrade), a level below 1 without a downgrade type, and any
//     other update (the feature is not supported) each get their error.
//   - ValidateOnly (v1) changes nothing: Kafka's ZooKeeper controller does
//     not read it, and no update can succeed to be validated.

func init() { register(57, 0, 1, handleUpdateFeatures) }

// Kafka's FeatureUpdate.UpgradeType codes.
const (
	upgradeTypeUnknown       = 0
	upgradeTypeUpgrade       = 1
	upgradeTypeSafeDowngrade = 2
	upgradeTypeUnsafe        = 3
)

func handleUpdateFeatures(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	top := func(e *kerr.Error) (reply, error) {
		resp.ErrorCode = e.Code
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpAlter, acl.Cluster) {
		return top(kerr.ClusterAuthorizationFailed)
	}
	if s.coord.Snapshot().Controller.ID != s.cfg.BrokerID {
		return top(kerr.NotController)
	}
	// One result per feature name, the last update of a name winning, as
	// Kafka's map of errors.
	var order []string
	msgs := map[string]string{}
	for _, u := range req.FeatureUpdates {
		if _, seen := msgs[u.Feature]; !seen {
			order = append(order, u.Feature)
		}
		msgs[u.Feature] = featureUpdateRefusal(r.version, u)
	}
	for _, name := range order {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature, res.ErrorCode = name, kerr.InvalidRequest.Code
		res.ErrorMessage = kmsg.StringPtr(msgs[name])
		resp.Results = append(resp.Results, res)
	}
	return reply{msg: resp}, nil
}

// featureUpdateRefusal is Kafka's message for an update of a broker that
// supports and finalizes no features.
func featureUpdateRefusal(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) string {
	upgrade := int8(upgradeTypeUpgrade)
	switch {
	case version == 0 && u.AllowDowngrade:
		upgrade = upgradeTypeSafeDowngrade
	case version >= 1:
		upgrade = u.UpgradeType
		if upgrade < upgradeTypeUpgrade || upgrade > upgradeTypeUnsafe {
			upgrade = upgradeTypeUnknown
		}
	}
	switch {
	case u.Feature == "":
		return "Feature name can not be empty."
	case upgrade == upgradeTypeUnknown:
		return "Received unknown upgrade type."
	case u.MaxVersionLevel < 1 && upgrade != upgradeTypeUpgrade:
		return "Can not delete non-existing finalized feature."
	case u.MaxVersionLevel < 1:
		return fmt.Sprintf("Can not provide versionLevel: %d less than 1 without setting the SAFE downgradeType in the request.", u.MaxVersionLevel)
	}
	return "Could not apply finalized feature update because the provided feature is not supported."
}
