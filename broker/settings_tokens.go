package broker

import "time"

// tokenSettings configure delegation tokens (KIP-48, delegation_tokens.go),
// as Kafka 3.9 names them.
var tokenSettings = []setting{
	{name: "delegation.token.secret.key", typ: typeString, unset: "none (delegation tokens are disabled)", sensitive: true,
		field: func(c *Config) any { return &c.DelegationTokenSecretKey },
		doc:   "The secret every broker of the cluster shares to make and check delegation tokens' HMACs (HmacSHA512 of the token ID): the same value on every broker. Without it CreateDelegationToken and the other token APIs answer DELEGATION_TOKEN_AUTH_DISABLED. Never shown by DescribeConfigs or in errors."},
	{name: "delegation.token.master.key", typ: typeString, unset: "none", sensitive: true,
		field: func(c *Config) any { return &c.DelegationTokenMasterKey },
		doc:   "Kafka's deprecated name of delegation.token.secret.key, read when that is not set."},
	{name: "delegation.token.max.lifetime.ms", typ: typeLong, def: "604800000", valid: between(1, maxMs),
		field: func(c *Config) any { return &c.DelegationTokenMaxLifetime }, unit: time.Millisecond,
		doc: "Longest a delegation token can live: renewals never take its expiry past its issue time plus this (or plus the shorter lifetime its creator asked for)."},
	{name: "delegation.token.expiry.time.ms", typ: typeLong, def: "86400000", valid: between(1, maxMs),
		field: func(c *Config) any { return &c.DelegationTokenExpiryTime }, unit: time.Millisecond,
		doc: "How long a delegation token lives from its creation or a renewal that asks for no period of its own, unless it must be renewed sooner."},
	{name: "delegation.token.expiry.check.interval.ms", typ: typeLong, def: "3600000", valid: between(1, maxMs),
		field: func(c *Config) any { return &c.DelegationTokenExpiryCheckInterval }, unit: time.Millisecond,
		doc: "How often the controller removes expired delegation tokens (an expired token never authenticates, removed or not)."},
}
