package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// DelegationToken is what the cluster keeps of a delegation token
// (KIP-48), Kafka's TokenInformation: never its HMAC, which every broker
// derives from delegation.token.secret.key and the token ID. Principals
// are Kafka's "Type:name" strings; timestamps are milliseconds since the
// epoch.
type DelegationToken struct {
	TokenID         string
	Owner           string
	Requester       string
	Renewers        []string
	IssueTimestamp  int64
	MaxTimestamp    int64
	ExpiryTimestamp int64
}

// Expired reports whether the token is past its expiry or its maximum
// lifetime at nowMs, as Kafka's checks (maxTimestamp < now ||
// expiryTimestamp < now).
func (t DelegationToken) Expired(nowMs int64) bool {
	return t.MaxTimestamp < nowMs || t.ExpiryTimestamp < nowMs
}

// OwnerOrRenewer reports whether principal is the token's owner or one
// of its renewers (Kafka's TokenInformation.ownerOrRenewer).
func (t DelegationToken) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

func (t DelegationToken) clone() DelegationToken {
	t.Renewers = slices.Clone(t.Renewers)
	return t
}

// TokenStore keeps delegation tokens as Kafka 3.9 does with ZooKeeper:
// /delegation_token/tokens/<tokenId> holds the token's JSON (version 3:
// owner, tokenRequester, renewers (sanitized principals), issueTimestamp,
// maxTimestamp, expiryTimestamp, tokenId), and every change is followed by
// a notification /delegation_token/token_changes/token_change_<seq> whose
// data is the token ID, which every broker watches; the embedded
// coordinator keeps them in its file.
//
// Reads come from a cache: a change by any broker is seen by every other
// within about a second. After a write returns nil the caller's reads
// show it.
type TokenStore interface {
	// DelegationToken returns the token with that ID from the cache.
	DelegationToken(tokenID string) (DelegationToken, bool)

	// DelegationTokens returns every token from the cache (copies),
	// sorted by ID.
	DelegationTokens() []DelegationToken

	// PutDelegationToken creates or replaces a token (create, renew,
	// expire with a period). Errors: ErrUnavailable, and an invalid
	// argument error for a malformed token.
	PutDelegationToken(ctx context.Context, t DelegationToken) error

	// DeleteDelegationToken removes a token (expiry); a token that is
	// not there is no error.
	DeleteDelegationToken(ctx context.Context, tokenID string) error
}

// validTokenID: Kafka's IDs are URL-safe base64 UUIDs; anything that is a
// plain znode name of that alphabet is accepted.
func validTokenID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("coord: delegation token ID %q: empty or too long", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("coord: delegation token ID %q: only letters, digits, '-' and '_' are allowed", id)
		}
	}
	return nil
}

func validPrincipal(p string) bool {
	typ, name, ok := strings.Cut(p, ":")
	return ok && typ != "" && name != ""
}

// validateToken checks what both implementations refuse.
func validateToken(t DelegationToken) error {
	if err := validTokenID(t.TokenID); err != nil {
		return err
	}
	if !validPrincipal(t.Owner) || !validPrincipal(t.Requester) {
		return fmt.Errorf("coord: delegation token %s: owner %q and requester %q must be Type:name principals", t.TokenID, t.Owner, t.Requester)
	}
	for _, r := range t.Renewers {
		if !validPrincipal(r) {
			return fmt.Errorf("coord: delegation token %s: renewer %q is not a Type:name principal", t.TokenID, r)
		}
	}
	if t.IssueTimestamp <= 0 || t.MaxTimestamp < t.IssueTimestamp || t.ExpiryTimestamp > t.MaxTimestamp {
		return fmt.Errorf("coord: delegation token %s: timestamps issue %d, max %d, expiry %d out of order", t.TokenID, t.IssueTimestamp, t.MaxTimestamp, t.ExpiryTimestamp)
	}
	return nil
}

func sortedTokens(m map[string]DelegationToken) []DelegationToken {
	out := make([]DelegationToken, 0, len(m))
	for _, t := range m {
		out = append(out, t.clone())
	}
	slices.SortFunc(out, func(a, b DelegationToken) int { return strings.Compare(a.TokenID, b.TokenID) })
	return out
}
