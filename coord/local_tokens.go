package coord

import (
	"context"
	"fmt"
	"maps"
)

// The embedded coordinator keeps delegation tokens in its file
// (localFile.Tokens, token ID to token), written with mode 0600 like the
// rest of the file.

// DelegationToken implements TokenStore.
func (ss *LocalSession) DelegationToken(tokenID string) (DelegationToken, bool) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.mu.file.Tokens[tokenID]
	return t.clone(), ok
}

// DelegationTokens implements TokenStore.
func (ss *LocalSession) DelegationTokens() []DelegationToken {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedTokens(s.mu.file.Tokens)
}

// PutDelegationToken implements TokenStore: the file is replaced
// atomically before it returns.
func (ss *LocalSession) PutDelegationToken(ctx context.Context, t DelegationToken) error {
	if err := validateToken(t); err != nil {
		return err
	}
	return ss.alterTokens(ctx, func(m map[string]DelegationToken) { m[t.TokenID] = t.clone() })
}

// DeleteDelegationToken implements TokenStore.
func (ss *LocalSession) DeleteDelegationToken(ctx context.Context, tokenID string) error {
	if err := validTokenID(tokenID); err != nil {
		return err
	}
	return ss.alterTokens(ctx, func(m map[string]DelegationToken) { delete(m, tokenID) })
}

func (ss *LocalSession) alterTokens(ctx context.Context, fn func(map[string]DelegationToken)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord: delegation tokens: %w", err)
	}
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return err
	}
	f := s.mu.file
	f.Tokens = maps.Clone(s.mu.file.Tokens)
	if f.Tokens == nil {
		f.Tokens = map[string]DelegationToken{}
	}
	fn(f.Tokens)
	if len(f.Tokens) == 0 {
		f.Tokens = nil
	}
	if err := s.persistLocked(&f, s.mu.topics); err != nil {
		return err
	}
	s.mu.file = f
	return nil
}
