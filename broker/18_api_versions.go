package broker

import (
	"maps"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behavior:
// * Lists every API in the registry (the NN_name.go files compiled in) with
//   the versions served; nothing else is advertised.
// * A version above 4 is answered with UNSUPPORTED_VERSION in v0 form,
//   listing only ApiVersions' own range, so the client retries at a version
//   we serve (KIP-511).
// * v3: the client software name and version must match
//   [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?, else INVALID_REQUEST.
// * The response header is always v0 (no tagged fields), even for v3.
// * v3+: the features the broker supports (SupportedFeatures:
//   transaction.version 0-2) and the cluster's finalized levels
//   (FinalizedFeatures, with FinalizedFeaturesEpoch; features.go), from
//   which clients learn transaction.version (KIP-584, KIP-1022). A
//   supported feature whose MinVersion is 0 is listed only from v4
//   (KAFKA-17011: older clients refuse a range starting at 0), so v3
//   lists no supported feature; a finalized feature is listed when its
//   level is at least 1, with MinVersionLevel and MaxVersionLevel both
//   the level, as Kafka does.

func init() { register(18, 0, 4, handleApiVersions) }

var validSoftware = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware.MatchString(req.ClientSoftwareName) || !validSoftware.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	for _, a := range servedAPIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if req.Version >= 3 {
		s.appendFeatures(req.Version, resp)
	}
	return reply{msg: resp}, nil
}

// appendFeatures fills the features of a v3+ response.
func (s *Server) appendFeatures(version int16, resp *kmsg.ApiVersionsResponse) {
	for _, f := range supportedFeatures {
		if f.min == 0 && version < 4 {
			continue
		}
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	fs, epoch := s.finalizedFeatures()
	resp.FinalizedFeaturesEpoch = epoch
	for _, name := range slices.Sorted(maps.Keys(fs)) {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = name, fs[name], fs[name]
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// apiVersionsUnsupported answers an ApiVersions request at a version we do
// not serve.
func apiVersionsUnsupported(r *request) reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	a := apis[apiVersionsKey]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	return reply{msg: resp}
}
