package acl

import (
	"bytes"
	"errors"
	"testing"
)

func sp(s string) *string { return &s }

func TestValidate(t *testing.T) {
	ok := lit("t", alice, Wildcard, OpRead, PermissionAllow)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Binding{
		bind(ResourceAny, "t", PatternLiteral, alice, "*", OpRead, PermissionAllow),
		bind(ResourceUnknown, "t", PatternLiteral, alice, "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "t", PatternAny, alice, "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "t", PatternMatch, alice, "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, alice, "*", OpAny, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, alice, "*", OpUnknown, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, alice, "*", OpRead, PermissionAny),
		bind(ResourceTopic, "", PatternLiteral, alice, "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "a/b", PatternLiteral, alice, "*", OpRead, PermissionAllow),
		bind(ResourceCluster, "my-cluster", PatternLiteral, alice, "*", OpAlter, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, "alice", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, ":alice", "*", OpRead, PermissionAllow),
		bind(ResourceTopic, "t", PatternLiteral, alice, "", OpRead, PermissionAllow),
	}
	for i, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("#%d: %v: got %v, want ErrInvalid", i, b, err)
		}
	}
}

// TestFilter follows Kafka's testAclsFilter and ResourcePatternFilterTest.
func TestFilter(t *testing.T) {
	acl1 := lit("foo-1", alice, Wildcard, OpRead, PermissionAllow)
	acl2 := lit("foo-1", alice, "192.168.0.1", OpWrite, PermissionAllow)
	acl3 := lit("bar-1", alice, Wildcard, OpDescribe, PermissionAllow)
	acl4 := bind(ResourceTopic, "bar-", PatternPrefixed, WildcardPrincipal, Wildcard, OpRead, PermissionAllow)
	acl5 := lit(Wildcard, rob, Wildcard, OpRead, PermissionAllow)
	all := []Binding{acl1, acl2, acl3, acl4, acl5}
	cases := []struct {
		f    Filter
		want []Binding
	}{
		{MatchAll, all},
		{Filter{Type: ResourceTopic, Name: sp("foo-1"), Pattern: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, []Binding{acl1, acl2}},
		{Filter{Type: ResourceTopic, Name: sp("bar-"), Pattern: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []Binding{acl4}},
		{Filter{Type: ResourceAny, Name: sp("bar-1"), Pattern: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []Binding{acl3, acl4, acl5}},
		{Filter{Type: ResourceAny, Name: sp("bar-1"), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{acl3}},
		{Filter{Type: ResourceGroup, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, nil},
		{Filter{Type: ResourceAny, Pattern: PatternAny, Principal: sp(WildcardPrincipal), Operation: OpAny, Permission: PermissionAny}, []Binding{acl4}},
		{Filter{Type: ResourceAny, Pattern: PatternAny, Host: sp("192.168.0.1"), Operation: OpAny, Permission: PermissionAny}, []Binding{acl2}},
		{Filter{Type: ResourceAny, Pattern: PatternAny, Operation: OpRead, Permission: PermissionAllow}, []Binding{acl1, acl4, acl5}},
		{Filter{Type: ResourceAny, Pattern: PatternLiteral, Operation: OpAny, Permission: PermissionDeny}, nil},
	}
	for i, c := range cases {
		var got []Binding
		for _, b := range all {
			if c.f.Matches(b) {
				got = append(got, b)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("#%d: got %v, want %v", i, got, c.want)
			continue
		}
		for j := range got {
			if got[j] != c.want[j] {
				t.Errorf("#%d: got %v, want %v", i, got, c.want)
			}
		}
	}
	if err := (Filter{Type: ResourceTopic, Pattern: PatternUnknown, Operation: OpAny, Permission: PermissionAny}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("UNKNOWN pattern: got %v", err)
	}
	if err := MatchAll.Validate(); err != nil {
		t.Errorf("MatchAll: %v", err)
	}
}

func TestNames(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{ResourceTransactionalID.Name(), "TransactionalId"},
		{ResourceTopic.Name(), "Topic"},
		{OpDescribeConfigs.Name(), "DescribeConfigs"},
		{OpIdempotentWrite.Name(), "IdempotentWrite"},
		{PermissionAllow.Name(), "Allow"},
		{OpClusterAction.String(), "CLUSTER_ACTION"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("#%d: got %q, want %q", i, c.got, c.want)
		}
	}
	for _, s := range []string{"TransactionalId", "TRANSACTIONALID", "transactional_id"} {
		if got := ParseResourceType(s); got != ResourceTransactionalID {
			t.Errorf("ParseResourceType(%q): got %v", s, got)
		}
	}
	if got := ParseOperation("nope"); got != OpUnknown {
		t.Errorf("ParseOperation(nope): got %v", got)
	}
}

func TestStoredEntries(t *testing.T) {
	kafka := []byte(`{"version":1,"acls":[{"host":"host1","permissionType":"Deny","operation":"Read","principal":"User:alice"},{"host":"*","permissionType":"Allow","operation":"DescribeConfigs","principal":"User:*"}]}`)
	got, err := DecodeEntries(kafka)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{alice, "host1", OpRead, PermissionDeny}, {WildcardPrincipal, Wildcard, OpDescribeConfigs, PermissionAllow}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	again, err := DecodeEntries(EncodeEntries(got))
	if err != nil || len(again) != 2 || again[0] != want[0] || again[1] != want[1] {
		t.Fatalf("round trip: got %v, %v", again, err)
	}
	for i, bad := range []string{`{"acls":[]}`, `{"version":2,"acls":[]}`, `[]`, `{"version":1,"acls":[{"host":"*","permissionType":"Maybe","operation":"Read","principal":"User:a"}]}`,
		`{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Any","principal":"User:a"}]}`,
		`{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Read","principal":"alice"}]}`} {
		if _, err := DecodeEntries([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("#%d: %s: got %v, want ErrInvalid", i, bad, err)
		}
	}
}

// FuzzDecodeEntries: never panics; what decodes re-encodes to data that
// decodes to the same entries.
func FuzzDecodeEntries(f *testing.F) {
	f.Add([]byte(`{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Read","principal":"User:alice"}]}`))
	f.Add([]byte(`{"version":1,"acls":[]}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeEntries(b)
		if err != nil {
			return
		}
		enc := EncodeEntries(es)
		again, err := DecodeEntries(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if len(again) != len(es) {
			t.Fatalf("got %d entries, want %d", len(again), len(es))
		}
		for i := range es {
			if es[i] != again[i] {
				t.Fatalf("entry %d: got %v, want %v", i, again[i], es[i])
			}
		}
		if !bytes.Equal(EncodeEntries(again), enc) {
			t.Fatal("encoding not stable")
		}
	})
}

// FuzzBinding: principal parsing and binding validation never panic; a
// valid binding's principal has a type and the stored form keeps it.
func FuzzBinding(f *testing.F) {
	f.Add(int8(2), "t", int8(3), "User:alice", "*", int8(3), int8(3))
	f.Add(int8(4), "kafka-cluster", int8(4), "User:", "1.2.3.4", int8(2), int8(2))
	f.Fuzz(func(t *testing.T, rt int8, name string, pt int8, principal, host string, op, perm int8) {
		b := bind(ResourceType(rt), name, PatternType(pt), principal, host, Operation(op), PermissionType(perm))
		typ, _, perr := ParsePrincipal(principal)
		err := b.Validate()
		if err == nil {
			if perr != nil || typ == "" {
				t.Fatalf("valid binding with bad principal %q", principal)
			}
			es, derr := DecodeEntries(EncodeEntries([]Entry{b.Entry}))
			if derr != nil || len(es) != 1 || es[0] != b.Entry {
				t.Fatalf("stored form of %v: %v %v", b, es, derr)
			}
		}
		f := Filter{Type: ResourceType(rt), Name: &name, Pattern: PatternType(pt), Principal: &principal, Host: &host, Operation: Operation(op), Permission: PermissionType(perm)}
		if err == nil && !f.Matches(b) {
			t.Fatalf("exact filter does not match %v", b)
		}
	})
}
