package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/sasl"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Delegation tokens (KIP-48), as Kafka 3.9 with ZooKeeper serves them:
//
//   - The tokens live in the coordinator (coord.TokenStore: ZooKeeper's
//     /delegation_token/tokens/<id> with change notifications, so every
//     broker learns of new, renewed and removed tokens); any broker
//     creates, renews and expires them, as in Kafka's ZooKeeper mode.
//   - A token's HMAC is HmacSHA512(delegation.token.secret.key, token ID),
//     never stored: every broker of a cluster shares the secret. A client
//     authenticates with SCRAM-SHA-256/512 and the tokenauth=true
//     extension, the token ID as user name and the base64 HMAC as
//     password; each broker derives the token's SCRAM credential (random
//     salt, 4096 iterations) on first use, as Kafka's
//     DelegationTokenManager.prepareScramCredentials. The connection's
//     principal is User:<owner's name>, marked token-authenticated.
//   - The token APIs are refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) on
//     PLAINTEXT, on SSL without a client certificate, and on a
//     token-authenticated connection; without the secret they answer
//     DELEGATION_TOKEN_AUTH_DISABLED.
//   - The controller removes expired tokens every
//     delegation.token.expiry.check.interval.ms; an expired token never
//     authenticates, removed or not.

// tokenManager is the broker's part of delegation tokens.
type tokenManager struct {
	s      *Server
	secret []byte // nil: token authentication disabled
	// mu serializes this broker's token writes, as Kafka's lock.
	mu    sync.Mutex
	creds struct {
		sync.Mutex
		m map[string]map[string]sasl.ScramCredential // token ID to mechanism
	}
}

func newTokenManager(s *Server) *tokenManager {
	t := &tokenManager{s: s}
	key := s.cfg.DelegationTokenSecretKey
	if key == "" {
		key = s.cfg.DelegationTokenMasterKey
	}
	if key != "" {
		t.secret = []byte(key)
	}
	t.creds.m = map[string]map[string]sasl.ScramCredential{}
	return t
}

func (t *tokenManager) enabled() bool { return t.secret != nil }

// hmac is Kafka's DelegationTokenManager.createHmac.
func (t *tokenManager) hmac(tokenID string) []byte {
	m := hmac.New(sha512.New, t.secret)
	m.Write([]byte(tokenID))
	return m.Sum(nil)
}

func (t *tokenManager) nowMs() int64 { return t.s.nowFn().UnixMilli() }

// byHMAC finds the token whose HMAC is mac (Kafka's tokenForHmac).
func (t *tokenManager) byHMAC(mac []byte) (coord.DelegationToken, bool) {
	if len(mac) != sha512.Size {
		return coord.DelegationToken{}, false
	}
	for _, tok := range t.s.coord.DelegationTokens() {
		if hmac.Equal(t.hmac(tok.TokenID), mac) {
			return tok, true
		}
	}
	return coord.DelegationToken{}, false
}

// TokenCredential implements sasl.TokenStore.
func (t *tokenManager) TokenCredential(tokenID, mechanism string) (sasl.ScramCredential, string, time.Time, bool) {
	if !t.enabled() || t.s.coord == nil {
		return sasl.ScramCredential{}, "", time.Time{}, false
	}
	tok, ok := t.s.coord.DelegationToken(tokenID)
	if !ok || tok.Expired(t.nowMs()) {
		return sasl.ScramCredential{}, "", time.Time{}, false
	}
	t.creds.Lock()
	cred, ok := t.creds.m[tokenID][mechanism]
	t.creds.Unlock()
	if !ok {
		var err error
		cred, err = sasl.NewScramCredential(mechanism, []byte(base64.StdEncoding.EncodeToString(t.hmac(tokenID))), sasl.ScramMinIterations)
		if err != nil {
			return sasl.ScramCredential{}, "", time.Time{}, false
		}
		t.creds.Lock()
		if t.creds.m[tokenID] == nil {
			t.creds.m[tokenID] = map[string]sasl.ScramCredential{}
		}
		t.creds.m[tokenID][mechanism] = cred
		t.creds.Unlock()
	}
	_, owner, _ := strings.Cut(tok.Owner, ":")
	return cred, owner, time.UnixMilli(min(tok.ExpiryTimestamp, tok.MaxTimestamp)), true
}

// forget drops the derived credentials of tokens no longer known.
func (t *tokenManager) forget() {
	t.creds.Lock()
	defer t.creds.Unlock()
	for id := range t.creds.m {
		if _, ok := t.s.coord.DelegationToken(id); !ok {
			delete(t.creds.m, id)
		}
	}
}

// start runs the expiry check on the controller until the server closes.
func (t *tokenManager) start() {
	if !t.enabled() {
		return
	}
	t.s.bgWG.Add(1)
	go func() {
		defer t.s.bgWG.Done()
		tick := time.NewTicker(t.s.cfg.DelegationTokenExpiryCheckInterval)
		defer tick.Stop()
		for {
			select {
			case <-t.s.closed:
				return
			case <-tick.C:
			}
			if t.s.coord.Snapshot().Controller.ID == t.s.cfg.BrokerID {
				t.expireTokens()
			}
			t.forget()
		}
	}()
}

// expireTokens removes every expired token (Kafka's expireTokens).
func (t *tokenManager) expireTokens() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.nowMs()
	for _, tok := range t.s.coord.DelegationTokens() {
		if !tok.Expired(now) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		err := t.s.coord.DeleteDelegationToken(ctx, tok.TokenID)
		cancel()
		if err != nil {
			t.s.log.Warn("expired delegation token not removed; next check retries", "token", tok.TokenID, "err", err)
			return
		}
		t.s.log.Info("delegation token expired", "token", tok.TokenID, "owner", tok.Owner)
	}
}

// tokenCredentialStore adapts the server's token manager to sasl.TokenStore.
type tokenCredentialStore struct{ s *Server }

func (ts tokenCredentialStore) TokenCredential(id, mech string) (sasl.ScramCredential, string, time.Time, bool) {
	if ts.s.tokens == nil {
		return sasl.ScramCredential{}, "", time.Time{}, false
	}
	return ts.s.tokens.TokenCredential(id, mech)
}

// allowTokenRequests is Kafka's KafkaApis.allowTokenRequests: not on a
// token-authenticated connection, not on PLAINTEXT, not on SSL without a
// client identity.
func allowTokenRequests(r *request) bool {
	c := r.conn
	if c == nil {
		return false
	}
	sess := c.session()
	switch {
	case sess == nil, sess.token:
		return false
	case c.lis.protocol == ProtocolPlaintext:
		return false
	case c.lis.protocol == ProtocolSSL && sess.principal == anonymous:
		return false
	}
	return true
}

// parsePrincipal splits "Type:name".
func parsePrincipal(p string) (typ, name string) {
	typ, name, _ = strings.Cut(p, ":")
	return typ, name
}

// newTokenID is Kafka's CoreUtils.generateUuidAsBase64: 16 random bytes,
// URL-safe base64 without padding.
func newTokenID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, as Java's randomUUID
	b[8] = b[8]&0x3f | 0x80
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func init() { register(38, 0, 3, handleCreateDelegationToken) }

func handleCreateDelegationToken(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	requester, _ := r.peer()
	owner := requester
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil && *req.OwnerPrincipalType != "" {
			typ = *req.OwnerPrincipalType
		}
		owner = typ + ":" + *req.OwnerPrincipalName
	}
	resp.PrincipalType, resp.PrincipalName = parsePrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = parsePrincipal(requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
	resp.HMAC = []byte{}
	fail := func(e *kerr.Error) (reply, error) {
		resp.ErrorCode = e.Code
		return reply{msg: resp}, nil
	}
	if !allowTokenRequests(r) {
		return fail(kerr.DelegationTokenRequestNotAllowed)
	}
	if owner != requester && !s.authorize(r, acl.OpCreateTokens, acl.Resource{Type: acl.ResourceUser, Name: owner}) {
		return fail(kerr.DelegationTokenAuthorizationFailed)
	}
	var renewers []string
	for _, rn := range req.Renewers {
		if rn.PrincipalType != "User" || rn.PrincipalName == "" {
			return fail(kerr.InvalidPrincipalType)
		}
		renewers = append(renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	t := s.tokens
	if !t.enabled() {
		return fail(kerr.DelegationTokenAuthDisabled)
	}
	if _, name := parsePrincipal(owner); name == "" {
		return fail(kerr.InvalidPrincipalType)
	}
	id, err := newTokenID()
	if err != nil {
		return fail(kerr.UnknownServerError)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	issue := t.nowMs()
	maxLife := s.cfg.DelegationTokenMaxLifetime.Milliseconds()
	if req.MaxLifetimeMillis > 0 {
		maxLife = min(req.MaxLifetimeMillis, maxLife)
	}
	tok := coord.DelegationToken{TokenID: id, Owner: owner, Requester: requester, Renewers: renewers,
		IssueTimestamp: issue, MaxTimestamp: issue + maxLife}
	tok.ExpiryTimestamp = min(tok.MaxTimestamp, issue+s.cfg.DelegationTokenExpiryTime.Milliseconds())
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.coord.PutDelegationToken(ctx, tok); err != nil {
		s.log.Warn("delegation token not created", "owner", owner, "err", err)
		return fail(kerr.UnknownServerError)
	}
	s.log.Info("delegation token created", "token", id, "owner", owner, "requester", requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = tok.IssueTimestamp, tok.ExpiryTimestamp, tok.MaxTimestamp
	resp.TokenID, resp.HMAC = id, t.hmac(id)
	return reply{msg: resp}, nil
}

func init() { register(39, 0, 2, handleRenewDelegationToken) }

func handleRenewDelegationToken(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	code, expiry := s.tokens.update(r, req.HMAC, req.RenewTimeMillis, false)
	resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
	return reply{msg: resp}, nil
}

func init() { register(40, 0, 2, handleExpireDelegationToken) }

func handleExpireDelegationToken(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	code, expiry := s.tokens.update(r, req.HMAC, req.ExpiryPeriodMillis, true)
	resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
	return reply{msg: resp}, nil
}

// update renews (expire false) or expires a token, as Kafka's
// DelegationTokenManagerZk.renewToken and expireToken: the error code and
// the new expiry timestamp (-1 on error).
func (t *tokenManager) update(r *request, mac []byte, periodMs int64, expire bool) (int16, int64) {
	if !allowTokenRequests(r) {
		return kerr.DelegationTokenRequestNotAllowed.Code, -1
	}
	if !t.enabled() {
		return kerr.DelegationTokenAuthDisabled.Code, -1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tok, ok := t.byHMAC(mac)
	if !ok {
		return kerr.DelegationTokenNotFound.Code, -1
	}
	principal, _ := r.peer()
	if !tok.OwnerOrRenewer(principal) {
		return kerr.DelegationTokenOwnerMismatch.Code, -1
	}
	s := t.s
	now := t.nowMs()
	// Writes are bounded on their own, not by the client's connection.
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if expire && periodMs < 0 {
		if err := s.coord.DeleteDelegationToken(ctx, tok.TokenID); err != nil {
			s.log.Warn("delegation token not expired", "token", tok.TokenID, "err", err)
			return kerr.UnknownServerError.Code, -1
		}
		s.log.Info("delegation token expired by request", "token", tok.TokenID, "owner", tok.Owner, "by", principal)
		return 0, now
	}
	if tok.Expired(now) {
		return kerr.DelegationTokenExpired.Code, -1
	}
	if !expire && periodMs < 0 {
		periodMs = s.cfg.DelegationTokenExpiryTime.Milliseconds()
	}
	tok.ExpiryTimestamp = min(tok.MaxTimestamp, now+periodMs)
	if err := s.coord.PutDelegationToken(ctx, tok); err != nil {
		s.log.Warn("delegation token not updated", "token", tok.TokenID, "err", err)
		return kerr.UnknownServerError.Code, -1
	}
	s.log.Info("delegation token expiry changed", "token", tok.TokenID, "owner", tok.Owner, "expiry_ms", tok.ExpiryTimestamp, "by", principal)
	return 0, tok.ExpiryTimestamp
}

func init() { register(41, 0, 3, handleDescribeDelegationToken) }

func handleDescribeDelegationToken(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	t := s.tokens
	switch {
	case !allowTokenRequests(r):
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return reply{msg: resp}, nil
	case !t.enabled():
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
		return reply{msg: resp}, nil
	case req.Owners != nil && len(req.Owners) == 0:
		return reply{msg: resp}, nil
	}
	var owners []string
	for _, o := range req.Owners {
		owners = append(owners, o.PrincipalType+":"+o.PrincipalName)
	}
	principal, _ := r.peer()
	for _, tok := range s.coord.DelegationTokens() {
		if !tokenVisible(tok, principal, owners, req.Owners != nil,
			func() bool {
				return s.authorize(r, acl.OpDescribe, acl.Resource{Type: acl.ResourceDelegationToken, Name: tok.TokenID})
			},
			func() bool {
				return s.authorize(r, acl.OpDescribeTokens, acl.Resource{Type: acl.ResourceUser, Name: tok.Owner})
			}) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = parsePrincipal(tok.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = parsePrincipal(tok.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = tok.IssueTimestamp, tok.ExpiryTimestamp, tok.MaxTimestamp
		d.TokenID, d.HMAC = tok.TokenID, t.hmac(tok.TokenID)
		for _, rn := range tok.Renewers {
			x := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			x.PrincipalType, x.PrincipalName = parsePrincipal(rn)
			d.Renewers = append(d.Renewers, x)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return reply{msg: resp}, nil
}

// tokenVisible is Kafka's DelegationTokenManager.filterToken: a token of
// one of the owners asked for (when filtered) that the requester owns or
// renews, or may DESCRIBE (the token), or DESCRIBE_TOKENS (its owner).
func tokenVisible(tok coord.DelegationToken, requester string, owners []string, filtered bool, mayDescribe, mayDescribeOwner func() bool) bool {
	if filtered {
		match := false
		for _, o := range owners {
			if tok.OwnerOrRenewer(o) {
				match = true
				break
			}
		}
		if !match {
			return false
		}
	}
	return tok.OwnerOrRenewer(requester) || mayDescribe() || mayDescribeOwner()
}
