package coord

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrUnknownCredential is returned by AlterScramCredentials when a
// deletion names a credential the user does not have. Nothing was written.
var ErrUnknownCredential = errors.New("coord: no such SCRAM credential")

// ScramMechanisms are the config keys of a user's SCRAM credentials, as
// Kafka names them in /config/users/<user>.
var ScramMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

func isScramMechanism(m string) bool {
	for _, s := range ScramMechanisms {
		if s == m {
			return true
		}
	}
	return false
}

// ScramAlteration is one user's change: credentials to set (mechanism to
// Kafka's credential string "salt=...,stored_key=...,server_key=...,
// iterations=N") and mechanisms whose credential to remove.
type ScramAlteration struct {
	Upsert map[string]string
	Delete []string
}

// ScramStore keeps users' SCRAM credentials as Kafka does: in ZooKeeper
// at /config/users/<url-encoded user>, JSON {"version":1,"config":
// {"SCRAM-SHA-256":"salt=...,..."}}, each write followed (in the same
// transaction) by a change notification /config/changes/config_change_<seq>
// {"version":2,"entity_path":"users/<url-encoded user>"}, which every
// broker watches; the embedded coordinator keeps them in its file. The
// credential strings are opaque here (broker/sasl formats and parses
// them) and never logged.
//
// Reads come from a cache: a change by any broker is seen by every other
// within about a second (the notification watch fires in milliseconds).
// After AlterScramCredentials returns nil the caller's reads show it.
type ScramStore interface {
	// ScramCredential is the credential of user for mechanism from the
	// cache.
	ScramCredential(user, mechanism string) (credential string, ok bool)

	// ScramUsers returns every user with at least one SCRAM credential:
	// user to mechanism to credential, from the cache (a copy).
	ScramUsers() map[string]map[string]string

	// AlterScramCredentials applies one user's deletions and upserts in
	// one atomic write; the user's other configs (quotas) are kept.
	// Errors: ErrUnknownCredential (a deletion of a missing credential),
	// ErrUnavailable, and an invalid argument error for an empty user, an
	// unknown mechanism, an empty credential, or a mechanism both set and
	// deleted.
	AlterScramCredentials(ctx context.Context, user string, alt ScramAlteration) error
}

// validateAlteration checks what both implementations refuse.
func validateAlteration(user string, alt ScramAlteration) error {
	if user == "" {
		return fmt.Errorf("coord: empty user name")
	}
	for m, c := range alt.Upsert {
		if !isScramMechanism(m) {
			return fmt.Errorf("coord: unknown SCRAM mechanism %q", m)
		}
		if c == "" {
			return fmt.Errorf("coord: empty %s credential", m)
		}
	}
	for _, m := range alt.Delete {
		if !isScramMechanism(m) {
			return fmt.Errorf("coord: unknown SCRAM mechanism %q", m)
		}
		if _, both := alt.Upsert[m]; both {
			return fmt.Errorf("coord: %s both set and deleted", m)
		}
	}
	return nil
}

// applyAlteration returns the user's config after alt (a new map; nil if
// nothing is left).
func applyAlteration(config map[string]string, alt ScramAlteration) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range config {
		out[k] = v
	}
	for _, m := range alt.Delete {
		if _, ok := out[m]; !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownCredential, m)
		}
		delete(out, m)
	}
	for m, c := range alt.Upsert {
		out[m] = c
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// scramOnly keeps the SCRAM keys of a user config; nil if none.
func scramOnly(config map[string]string) map[string]string {
	var out map[string]string
	for _, m := range ScramMechanisms {
		if c, ok := config[m]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[m] = c
		}
	}
	return out
}

// SanitizeUser is Kafka's Sanitizer.sanitize of a user name for a znode
// name: URL encoding (UTF-8, space as %20, '*' as %2A).
func SanitizeUser(user string) string {
	s := url.QueryEscape(user)
	s = strings.ReplaceAll(s, "+", "%20")
	return strings.ReplaceAll(s, "*", "%2A")
}

// DesanitizeUser undoes SanitizeUser (Kafka's URLDecoder.decode).
func DesanitizeUser(s string) (string, error) { return url.QueryUnescape(s) }
