package broker

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlerFunc handles one decoded request. A non-nil error means the
// request cannot be answered and the connection is closed; Kafka errors go
// into the reply as error codes.
type handlerFunc func(s *Server, r *request) (reply, error)

// api is one served API key and its version range.
type api struct {
	key      int16
	min, max int16
	handle   handlerFunc
	// reusesFrame is set by reuseFrames.
	reusesFrame bool
}

// apis is the registry, indexed by API key, filled by the init functions of
// the NN_name.go files. It is never written after init.
var apis = map[int16]*api{}

// register adds an API to the registry. Adding an API to Strata is one file
// whose init calls register.
func register(key, min, max int16, handle handlerFunc) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("broker: api key %d registered twice", key))
	}
	if kmsg.RequestForKey(key) == nil {
		panic(fmt.Sprintf("broker: api key %d unknown to kmsg", key))
	}
	if kmsg.RequestForKey(key).MaxVersion() < max {
		panic(fmt.Sprintf("broker: api key %d: kmsg knows versions up to %d, registered %d", key, kmsg.RequestForKey(key).MaxVersion(), max))
	}
	apis[key] = &api{key: key, min: min, max: max, handle: handle}
}

// reuseFrames marks the handler of key as keeping nothing of its
// request's bytes once it has returned, so the request's frame goes back
// to the frame pool (broker/bufpool) after the answer is written. Decoded
// []byte fields alias the frame (kmsg's strings are copies): a handler
// that keeps one, or hands it to a goroutine that outlives it, must not
// be marked.
func reuseFrames(key int16) {
	apis[key].reusesFrame = true
}

// strataAPIs are Strata's own APIs (package strataapi), by key: served
// like Kafka's but never listed in ApiVersions, so no Kafka client sees
// them. Filled at init by registerStrata, never written after.
var strataAPIs = map[int16]*strataAPI{}

// strataAPI is one of Strata's own APIs: its served versions and a
// constructor of its request type.
type strataAPI struct {
	api
	newRequest func() kmsg.Request
}

// registerStrata adds one of Strata's own APIs. Its key must be outside
// Kafka's range (kmsg does not know it).
func registerStrata(key, min, max int16, newRequest func() kmsg.Request, handle handlerFunc) {
	if _, dup := strataAPIs[key]; dup || kmsg.RequestForKey(key) != nil || apis[key] != nil {
		panic(fmt.Sprintf("broker: strata api key %d registered twice or known to kmsg", key))
	}
	if r := newRequest(); r.Key() != key || r.MaxVersion() < max {
		panic(fmt.Sprintf("broker: strata api key %d: request type has key %d, max version %d", key, r.Key(), r.MaxVersion()))
	}
	strataAPIs[key] = &strataAPI{api: api{key: key, min: min, max: max, handle: handle}, newRequest: newRequest}
}

// servedAPIs returns the registry sorted by key.
func servedAPIs() []*api {
	out := make([]*api, 0, len(apis))
	for _, a := range apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
