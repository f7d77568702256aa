package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UpdateFeatures: v0-1 (KIP-584)
//
// Behavior:
//   - transaction.version (features.go) may be upgraded and downgraded
//     between 0 and 2, as Kafka 4.x's controller allows: the new level is
//     written to the cluster's finalized features (ZooKeeper's /feature,
//     or the embedded coordinator's file), which every broker watches
//     and ApiVersions advertises. A level above 2 is
//     INVALID_UPDATE_VERSION; a lower level than the finalized one needs
//     a downgrade type (SAFE_DOWNGRADE or UNSAFE_DOWNGRADE; v0's
//     allow_downgrade), else INVALID_UPDATE_VERSION; level 0 with a
//     downgrade type removes the feature. Transactions in flight finish
//     under the version they began with; clients learn the new level from
//     their next ApiVersions.
//   - ValidateOnly (v1) checks the update without writing it.
//   - Every other feature is refused as a Kafka 3.9 ZooKeeper broker
//     refuses it (KafkaController.validateFeatureUpdate): INVALID_REQUEST
//     with Kafka's message for an empty name, an unknown upgrade type,
//     the deletion of a feature not finalized, a level below 1 without a
//     downgrade type, and an unsupported feature.
//   - CLUSTER ALTER is required (else the top-level
//     CLUSTER_AUTHORIZATION_FAILED), and the request must reach the
//     controller (else NOT_CONTROLLER), as in Kafka. One result per
//     feature name, the last update of a name winning.

func init() { register(57, 0, 1, handleUpdateFeatures) }

// Kafka's FeatureUpdate.UpgradeType codes.
const (
	upgradeTypeUnknown       = 0
	upgradeTypeUpgrade       = 1
	upgradeTypeSafeDowngrade = 2
	upgradeTypeUnsafe        = 3
)

// featureWriteTimeout bounds the write of the finalized features.
const featureWriteTimeout = 10 * time.Second

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
	var order []string
	updates := map[string]kmsg.UpdateFeaturesRequestFeatureUpdate{}
	for _, u := range req.FeatureUpdates {
		if _, seen := updates[u.Feature]; !seen {
			order = append(order, u.Feature)
		}
		updates[u.Feature] = u
	}
	type outcome struct {
		code int16
		msg  string
	}
	results := map[string]outcome{}
	levels := map[string]int16{}
	cur, _ := s.finalizedFeatures()
	for _, name := range order {
		u := updates[name]
		upgrade := upgradeType(r.version, u)
		f, ok := supportedFeatureByName(name)
		if !ok || upgrade == upgradeTypeUnknown {
			results[name] = outcome{kerr.InvalidRequest.Code, featureUpdateRefusal(upgrade, u)}
			continue
		}
		if ke, msg := checkFeatureUpdate(f, cur[name], upgrade, u.MaxVersionLevel); ke != nil {
			results[name] = outcome{ke.Code, msg}
			continue
		}
		levels[name] = max(u.MaxVersionLevel, 0)
	}
	if len(levels) > 0 && !req.ValidateOnly {
		ctx, cancel := context.WithTimeout(context.Background(), featureWriteTimeout)
		err := s.coord.AlterFinalizedFeatures(ctx, func(cur map[string]int16) (map[string]int16, error) {
			if len(cur) == 0 {
				// (A cluster that never had them written: its levels
				// are the legacy ones.)
				if _, epoch := s.coord.FinalizedFeatures(); epoch < 0 {
					cur = map[string]int16{}
					for n, l := range legacyFinalizedFeatures {
						cur[n] = l
					}
				}
			}
			for n, l := range levels {
				cur[n] = l
			}
			return cur, nil
		})
		cancel()
		if err != nil {
			s.log.Warn("the finalized features could not be written", "err", err)
			code := kerr.UnknownServerError.Code
			if errors.Is(err, context.DeadlineExceeded) {
				code = kerr.RequestTimedOut.Code
			}
			for n := range levels {
				results[n] = outcome{code, fmt.Sprintf("writing the finalized features failed: %v", err)}
			}
		} else {
			s.log.Info("finalized features updated", "features", levels)
		}
	}
	for _, name := range order {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature = name
		if o, failed := results[name]; failed {
			res.ErrorCode, res.ErrorMessage = o.code, kmsg.StringPtr(o.msg)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{msg: resp}, nil
}

// upgradeType is an update's upgrade type: v0's allow_downgrade is a
// safe downgrade; an out-of-range v1 type is upgradeTypeUnknown.
func upgradeType(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) int8 {
	switch {
	case version == 0 && u.AllowDowngrade:
		return upgradeTypeSafeDowngrade
	case version == 0:
		return upgradeTypeUpgrade
	case u.UpgradeType < upgradeTypeUpgrade || u.UpgradeType > upgradeTypeUnsafe:
		return upgradeTypeUnknown
	}
	return u.UpgradeType
}

// checkFeatureUpdate validates the update of a supported feature from
// level cur to level (below 1: removed), as Kafka's
// FeatureControlManager does.
func checkFeatureUpdate(f supportedFeature, cur int16, upgrade int8, level int16) (*kerr.Error, string) {
	level = max(level, 0)
	switch {
	case level > f.max || level < f.min:
		return kerr.InvalidUpdateVersion, fmt.Sprintf("Invalid update version %d for feature %s. The broker only supports versions %d-%d", level, f.name, f.min, f.max)
	case level < cur && upgrade == upgradeTypeUpgrade:
		return kerr.InvalidUpdateVersion, fmt.Sprintf("Invalid update version %d for feature %s. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.", level, f.name)
	}
	return nil, ""
}

// featureUpdateRefusal is Kafka 3.9's message for an update of a feature
// that is not supported (or of an unknown upgrade type).
func featureUpdateRefusal(upgrade int8, u kmsg.UpdateFeaturesRequestFeatureUpdate) string {
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
