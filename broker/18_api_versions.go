package broker

import (
	"regexp"

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
// * No features are advertised (KIP-584), so v4 (KAFKA-17011: features
//   with MinVersion 0 shown only from v4) answers as v3 does.

func init() { register(18, 0, 4, handleApiVersions) }

var validSoftware = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware.MatchString(req.ClientSoftwareName) || !validSoftware.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	for _, a := range servedAPIs() {
		if a.served != nil && !a.served(s) {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return reply{msg: resp}, nil
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
