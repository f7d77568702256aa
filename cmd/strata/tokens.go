package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	register(&command{
		name:    "tokens",
		summary: "create, renew, expire, describe delegation tokens",
		actions: tokensActions,
		help:    tokensHelp,
	})
}

var tokensActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"create":   runTokensCreate,
	"renew":    runTokensRenew,
	"expire":   runTokensExpire,
	"describe": runTokensDescribe,
}

const tokensHelp = `Usage: strata tokens <action> [flags]

Manages delegation tokens (KIP-48) through the Kafka APIs
CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
DescribeDelegationToken, like kafka-delegation-tokens.sh and with its flags.
The brokers need delegation.token.secret.key, and the command must
authenticate over SASL (or SSL with a client certificate) as the token's
owner, a renewer or a user allowed to: the brokers refuse token requests
on PLAINTEXT and on connections that authenticated with a token. A client
then authenticates with SCRAM-SHA-256 or SCRAM-SHA-512, the token ID as
user name, the HMAC as password and tokenauth=true (docs/security.md).

Actions:
  create    make a token; prints its ID and HMAC (a secret: keep it so)
  renew     push a token's expiry out, up to its max lifetime
  expire    bring a token's expiry in, or end it now
  describe  list the tokens the caller may see

Run 'strata tokens <action> --help' for its flags and an example.

Example:
  strata tokens create --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username alice --max-life-time-period 86400000
  strata tokens describe --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username alice
`

// parsePrincipal parses kafka-delegation-tokens.sh's "User:name".
func parseTokenPrincipal(s string) (kadm.Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return kadm.Principal{}, fmt.Errorf("%q is not a principal: want Type:name, such as User:alice", s)
	}
	return kadm.Principal{Type: typ, Name: name}, nil
}

func principalString(p kadm.Principal) string {
	if p.Type == "" {
		p.Type = "User"
	}
	return p.Type + ":" + p.Name
}

// tokenTime is kafka-delegation-tokens.sh's date, in UTC.
func tokenTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// printTokens writes the tool's table: the HMAC in base64.
func printTokens(w io.Writer, ts kadm.DelegationTokens) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOKENID\tHMAC\tOWNER\tREQUESTER\tRENEWERS\tISSUEDATE\tEXPIRYDATE\tMAXDATE")
	for _, t := range ts {
		var renewers []string
		for _, r := range t.Renewers {
			renewers = append(renewers, principalString(r))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.TokenID, base64.StdEncoding.EncodeToString(t.HMAC),
			principalString(t.Owner), principalString(t.TokenRequesterPrincipal), "["+strings.Join(renewers, ", ")+"]",
			tokenTime(t.IssueTimestamp), tokenTime(t.ExpiryTimestamp), tokenTime(t.MaxTimestamp))
	}
	_ = tw.Flush()
}

// tokenError adds the next step to the token errors a user can act on.
func tokenError(err error) error {
	switch {
	case errors.Is(err, kerr.DelegationTokenAuthDisabled):
		return withHint(err, "Set delegation.token.secret.key, the same on every broker, and restart them.")
	case errors.Is(err, kerr.DelegationTokenRequestNotAllowed):
		return withHint(err, "Authenticate over SASL as a user (--security-protocol SASL_PLAINTEXT or SASL_SSL with --sasl-mechanism and --sasl-username), not with a token or over PLAINTEXT.")
	case errors.Is(err, kerr.DelegationTokenOwnerMismatch):
		return withHint(err, "Only the token's owner and its renewers may renew or expire it.")
	case errors.Is(err, kerr.DelegationTokenAuthorizationFailed):
		return withHint(err, "Creating a token for another owner needs an ACL allowing you CreateTokens on resource type User, name the owner's principal (kafka-acls.sh --user-principal).")
	}
	return err
}

func runTokensCreate(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("tokens create", `Usage: strata tokens create [--max-life-time-period MS] [--renewer-principal P]... [--owner-principal P] [flags]

Creates a delegation token for the authenticated user, or for
--owner-principal (KIP-373: needs CREATE_TOKENS on that user), and prints
it with its HMAC. Its expiry is delegation.token.expiry.time.ms from now
(renew to push it out) and it can never live past --max-life-time-period
(capped by delegation.token.max.lifetime.ms).
`, `
Example:
  strata tokens create --renewer-principal User:bob --max-life-time-period 86400000 \
    --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username alice
`, stdout, stderr)
	maxLife := c.fs.Int64("max-life-time-period", -1, "longest life of the token in `MS` (-1: the broker's delegation.token.max.lifetime.ms)")
	var renewers stringsFlag
	c.fs.Var(&renewers, "renewer-principal", "`P` (User:name) who may renew the token; repeat for more")
	owner := c.fs.String("owner-principal", "", "`P` (User:name) to own the token instead of the authenticated user")
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	req := kadm.CreateDelegationToken{}
	if *maxLife > 0 {
		req.MaxLifetime = time.Duration(*maxLife) * time.Millisecond
	}
	for _, r := range renewers {
		p, err := parseTokenPrincipal(r)
		if err != nil {
			return c.usageError("--renewer-principal: %v", err)
		}
		req.Renewers = append(req.Renewers, p)
	}
	if *owner != "" {
		p, err := parseTokenPrincipal(*owner)
		if err != nil {
			return c.usageError("--owner-principal: %v", err)
		}
		req.Owner = &p
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		tok, err := s.adm.CreateDelegationToken(ctx, req)
		if err != nil {
			return c.fail(tokenError(err))
		}
		printTokens(stdout, kadm.DelegationTokens{tok})
		return 0
	})
}

// hmacFlag decodes --hmac.
func hmacFlag(c *clientCmd, v string) ([]byte, int, bool) {
	if v == "" {
		return nil, c.usageError("--hmac is required"), false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) == 0 {
		return nil, c.usageError("--hmac: not base64 (as tokens create prints it)"), false
	}
	return b, 0, true
}

func runTokensRenew(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("tokens renew", `Usage: strata tokens renew --hmac H [--renew-time-period MS] [flags]

Renews the token whose HMAC is H: its expiry becomes now plus
--renew-time-period (-1: delegation.token.expiry.time.ms), never past its
max date. The token's owner and renewers may renew it.
`, `
Example:
  strata tokens renew --hmac "$HMAC" --renew-time-period 3600000 --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username bob
`, stdout, stderr)
	h := c.fs.String("hmac", "", "the token's HMAC `H`, base64 (required)")
	period := c.fs.Int64("renew-time-period", -1, "renew for `MS` (-1: the broker's delegation.token.expiry.time.ms)")
	if status, ok := c.parseFlagsOnly(args, "hmac"); !ok {
		return status
	}
	mac, status, ok := hmacFlag(c, *h)
	if !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		exp, err := s.adm.RenewDelegationToken(ctx, mac, time.Duration(*period)*time.Millisecond)
		if err != nil {
			return c.fail(tokenError(err))
		}
		fmt.Fprintf(stdout, "Completed renew operation. New expiry date: %s\n", tokenTime(exp))
		return 0
	})
}

func runTokensExpire(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("tokens expire", `Usage: strata tokens expire --hmac H [--expiry-time-period MS] [flags]

Sets the expiry of the token whose HMAC is H to now plus
--expiry-time-period, or, with a negative period (the default), ends it
now: it no longer authenticates on any broker. The token's owner and
renewers may expire it.
`, `
Example:
  strata tokens expire --hmac "$HMAC" --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username alice
`, stdout, stderr)
	h := c.fs.String("hmac", "", "the token's HMAC `H`, base64 (required)")
	period := c.fs.Int64("expiry-time-period", -1, "expire in `MS` (negative: now)")
	if status, ok := c.parseFlagsOnly(args, "hmac"); !ok {
		return status
	}
	mac, status, ok := hmacFlag(c, *h)
	if !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		// kadm sends the period in whole milliseconds; a negative one
		// must stay negative.
		d := time.Duration(*period) * time.Millisecond
		exp, err := s.adm.ExpireDelegationToken(ctx, mac, d)
		if err != nil {
			return c.fail(tokenError(err))
		}
		fmt.Fprintf(stdout, "Completed expire operation. Max expiry date: %s\n", tokenTime(exp))
		return 0
	})
}

func runTokensDescribe(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("tokens describe", `Usage: strata tokens describe [--owner-principal P]... [flags]

Lists the tokens the authenticated user owns or renews, or may see
(DESCRIBE on the token, or DESCRIBE_TOKENS on its owner), of the owners
given (all when none is), with their HMACs.
`, `
Example:
  strata tokens describe --owner-principal User:alice --security-protocol SASL_PLAINTEXT --sasl-mechanism SCRAM-SHA-512 --sasl-username alice
`, stdout, stderr)
	var owners stringsFlag
	c.fs.Var(&owners, "owner-principal", "only tokens owned (or renewed) by `P` (User:name); repeat for more")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	var ps []kadm.Principal
	for _, o := range owners {
		p, err := parseTokenPrincipal(o)
		if err != nil {
			return c.usageError("--owner-principal: %v", err)
		}
		ps = append(ps, p)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		ts, err := s.adm.DescribeDelegationTokens(ctx, ps...)
		if err != nil {
			return c.fail(tokenError(err))
		}
		if format.json() {
			return c.printJSON(tokensJSON(ts))
		}
		printTokens(stdout, ts)
		return 0
	})
}

// describedTokens is tokens describe's JSON document.
type describedTokens struct {
	Tokens []describedToken `json:"tokens"`
}

type describedToken struct {
	TokenID   string   `json:"token_id"`
	HMAC      string   `json:"hmac"` // base64
	Owner     string   `json:"owner"`
	Requester string   `json:"requester"`
	Renewers  []string `json:"renewers"`
	// Times are Unix milliseconds.
	IssueTimestamp  int64 `json:"issue_timestamp"`
	ExpiryTimestamp int64 `json:"expiry_timestamp"`
	MaxTimestamp    int64 `json:"max_timestamp"`
}

func tokensJSON(ts kadm.DelegationTokens) describedTokens {
	out := describedTokens{Tokens: []describedToken{}}
	for _, t := range ts {
		d := describedToken{TokenID: t.TokenID, HMAC: base64.StdEncoding.EncodeToString(t.HMAC),
			Owner: principalString(t.Owner), Requester: principalString(t.TokenRequesterPrincipal), Renewers: []string{},
			IssueTimestamp: t.IssueTimestamp.UnixMilli(), ExpiryTimestamp: t.ExpiryTimestamp.UnixMilli(), MaxTimestamp: t.MaxTimestamp.UnixMilli()}
		for _, r := range t.Renewers {
			d.Renewers = append(d.Renewers, principalString(r))
		}
		out.Tokens = append(out.Tokens, d)
	}
	return out
}
