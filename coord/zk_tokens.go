package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Kafka's delegation token znodes (kafka.zk.DelegationToken*ZNode), under
// the chroot. Stored data: never change.
const (
	zTokenAuth       = "delegation_token"
	zTokens          = "delegation_token/tokens"
	zTokenChanges    = "delegation_token/token_changes"
	zTokenChangePfx  = "token_change_"
	zTokenVersion    = 3
	zTokenMinVersion = 1
	// zTokensResync re-reads the tokens even without a notification.
	zTokensResync = time.Minute
)

// zTokenData is DelegationTokenManagerZk.toJsonCompatibleMap.
type zTokenData struct {
	Version         int      `json:"version"`
	Owner           string   `json:"owner"`
	TokenRequester  string   `json:"tokenRequester,omitempty"`
	Renewers        []string `json:"renewers"`
	IssueTimestamp  int64    `json:"issueTimestamp"`
	MaxTimestamp    int64    `json:"maxTimestamp"`
	ExpiryTimestamp int64    `json:"expiryTimestamp"`
	TokenID         string   `json:"tokenId"`
}

func encodeToken(t DelegationToken) []byte {
	d := zTokenData{Version: zTokenVersion, Owner: SanitizeUser(t.Owner), TokenRequester: SanitizeUser(t.Requester),
		Renewers: []string{}, IssueTimestamp: t.IssueTimestamp, MaxTimestamp: t.MaxTimestamp,
		ExpiryTimestamp: t.ExpiryTimestamp, TokenID: t.TokenID}
	for _, r := range t.Renewers {
		d.Renewers = append(d.Renewers, SanitizeUser(r))
	}
	return encodeZ(d)
}

// decodeToken parses a token znode as Kafka's fromBytes: versions 1 to 3,
// the requester being the owner before version 3.
func decodeToken(b []byte) (DelegationToken, error) {
	var d zTokenData
	if err := json.Unmarshal(b, &d); err != nil {
		return DelegationToken{}, err
	}
	if d.Version < zTokenMinVersion || d.Version > zTokenVersion {
		return DelegationToken{}, fmt.Errorf("version %d, this build reads %d to %d", d.Version, zTokenMinVersion, zTokenVersion)
	}
	var t DelegationToken
	var err error
	if t.Owner, err = DesanitizeUser(d.Owner); err != nil {
		return t, fmt.Errorf("owner: %w", err)
	}
	t.Requester = t.Owner
	if d.Version >= 3 {
		if t.Requester, err = DesanitizeUser(d.TokenRequester); err != nil {
			return t, fmt.Errorf("tokenRequester: %w", err)
		}
	}
	for _, r := range d.Renewers {
		p, err := DesanitizeUser(r)
		if err != nil {
			return t, fmt.Errorf("renewer: %w", err)
		}
		t.Renewers = append(t.Renewers, p)
	}
	t.TokenID, t.IssueTimestamp, t.MaxTimestamp, t.ExpiryTimestamp = d.TokenID, d.IssueTimestamp, d.MaxTimestamp, d.ExpiryTimestamp
	return t, validateToken(t)
}

// zkTokens is the ZK coordinator's cache of delegation tokens, reloaded
// by its own goroutine whenever /delegation_token/token_changes gets a
// child.
type zkTokens struct {
	z    *ZK
	done chan struct{}
	mu   struct {
		sync.Mutex
		tokens map[string]DelegationToken
	}
}

// startTokens creates the token znodes if missing, loads the tokens and
// starts the watch loop (ended by Close).
func (z *ZK) startTokens(ctx context.Context) error {
	t := &zkTokens{z: z, done: make(chan struct{})}
	t.mu.tokens = map[string]DelegationToken{}
	if err := z.createPersistent(ctx, []string{zTokenAuth, zTokens, zTokenChanges}); err != nil {
		return err
	}
	if err := t.reload(ctx); err != nil {
		return err
	}
	z.tokens = t
	go z.watchChanges(changeWatch{dir: zTokenChanges, prefix: zTokenChangePfx, resync: zTokensResync,
		what: "delegation tokens", reload: t.reload}, t.done)
	return nil
}

// reload reads every token znode and replaces the cache. A znode that
// does not parse is skipped with a warning, as Kafka's loadCache does.
func (t *zkTokens) reload(ctx context.Context) error {
	z := t.z
	p := z.path(zTokens)
	var ids []string
	if err := z.call(ctx, "children", p, func() (err error) {
		ids, _, err = z.conn.Children(p)
		return err
	}); err != nil {
		return err
	}
	tokens := map[string]DelegationToken{}
	for _, id := range ids {
		np := z.path(zTokens + "/" + id)
		var data []byte
		err := z.call(ctx, "get", np, func() (err error) {
			data, _, err = z.conn.Get(np)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		tok, err := decodeToken(data)
		if err == nil && tok.TokenID != id {
			err = fmt.Errorf("tokenId %q in znode %q", tok.TokenID, id)
		}
		if err != nil {
			z.log.Warn("coord: delegation token znode does not parse; skipped", "znode", np, "err", err)
			continue
		}
		tokens[id] = tok
	}
	t.mu.Lock()
	t.mu.tokens = tokens
	t.mu.Unlock()
	return nil
}

func (t *zkTokens) noteOp(tokenID string) *zk.CreateRequest {
	return &zk.CreateRequest{Path: t.z.path(zTokenChanges + "/" + zTokenChangePfx), Data: []byte(tokenID),
		Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence}
}

// DelegationToken implements TokenStore.
func (z *ZK) DelegationToken(tokenID string) (DelegationToken, bool) {
	z.tokens.mu.Lock()
	defer z.tokens.mu.Unlock()
	t, ok := z.tokens.mu.tokens[tokenID]
	return t.clone(), ok
}

// DelegationTokens implements TokenStore.
func (z *ZK) DelegationTokens() []DelegationToken {
	z.tokens.mu.Lock()
	defer z.tokens.mu.Unlock()
	return sortedTokens(z.tokens.mu.tokens)
}

// PutDelegationToken implements TokenStore: one multi that sets (or
// creates) the token znode and creates the change notification, as
// Kafka's setOrCreateDelegationToken and createTokenChangeNotification.
func (z *ZK) PutDelegationToken(ctx context.Context, tok DelegationToken) error {
	if err := validateToken(tok); err != nil {
		return err
	}
	t := z.tokens
	p := z.path(zTokens + "/" + tok.TokenID)
	data := encodeToken(tok)
	for attempt := 0; ; attempt++ {
		if attempt >= 20 {
			return fmt.Errorf("%w: delegation token %s: writers kept conflicting", ErrVersionConflict, tok.TokenID)
		}
		_, _, err := z.multi(ctx, "set delegation token "+tok.TokenID, &zk.SetDataRequest{Path: p, Data: data, Version: -1}, t.noteOp(tok.TokenID))
		if errors.Is(err, zk.ErrNoNode) {
			_, _, err = z.multi(ctx, "create delegation token "+tok.TokenID,
				&zk.CreateRequest{Path: p, Data: data, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent}, t.noteOp(tok.TokenID))
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
		}
		if err != nil {
			return err
		}
		t.mu.Lock()
		tokens := make(map[string]DelegationToken, len(t.mu.tokens)+1)
		for k, v := range t.mu.tokens {
			tokens[k] = v
		}
		tokens[tok.TokenID] = tok.clone()
		t.mu.tokens = tokens
		t.mu.Unlock()
		return nil
	}
}

// DeleteDelegationToken implements TokenStore: the znode's deletion and
// the change notification in one multi.
func (z *ZK) DeleteDelegationToken(ctx context.Context, tokenID string) error {
	if err := validTokenID(tokenID); err != nil {
		return err
	}
	t := z.tokens
	p := z.path(zTokens + "/" + tokenID)
	_, _, err := z.multi(ctx, "delete delegation token "+tokenID, &zk.DeleteRequest{Path: p, Version: -1}, t.noteOp(tokenID))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	t.mu.Lock()
	tokens := make(map[string]DelegationToken, len(t.mu.tokens))
	for k, v := range t.mu.tokens {
		if k != tokenID {
			tokens[k] = v
		}
	}
	t.mu.tokens = tokens
	t.mu.Unlock()
	return nil
}
