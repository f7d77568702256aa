package tlsconfig_test

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"strings"
	"testing"

	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
)

// TestPrincipalRules runs cases of Kafka's SslPrincipalMapperTest and a
// few of our own.
func TestPrincipalRules(t *testing.T) {
	for i, tc := range []struct {
		rules, dn, want, wantErr string
	}{
		{"", "CN=alice,OU=eng,O=Strata", "CN=alice,OU=eng,O=Strata", ""},
		{"DEFAULT", "CN=alice,OU=eng", "CN=alice,OU=eng", ""},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=kafka-server,OU=ServiceUsers,O=Org", "kafka-server", ""},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft", ""},
		{"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "CN=Duke,OU=ServiceUsers", "duke", ""},
		{"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "cn=a,ou=b,dc=c,dc=d", "A@B", ""},
		{"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "CN=Kafka,OU=Ops", "Kafka", ""},
		{"RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT", `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`, ""},
		// The first matching rule wins; DEFAULT after rules catches the rest.
		{"RULE:^CN=(.*),OU=admins$/admin-$1/, RULE:^CN=(.*),OU=.*$/$1/, DEFAULT", "CN=bob,OU=admins", "admin-bob", ""},
		{"RULE:^CN=(.*),OU=admins$/admin-$1/, RULE:^CN=(.*),OU=.*$/$1/, DEFAULT", "CN=bob,OU=eng", "bob", ""},
		{"RULE:^CN=(.*),OU=admins$/admin-$1/, RULE:^CN=(.*),OU=.*$/$1/, DEFAULT", "O=x", "O=x", ""},
		// A slash escaped in the pattern and a dollar in the replacement.
		{`RULE:^CN=a\/b$/\$x/`, "CN=a/b", "$x", ""},
		{"RULE:^CN=(.*)$/$1/", "OU=eng", "", "no rule"},
	} {
		pm, err := tlsconfig.ParsePrincipalRules(tc.rules)
		if err != nil {
			t.Fatalf("#%d: ParsePrincipalRules(%q): %v", i, tc.rules, err)
		}
		got, err := pm.Map(tc.dn)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("#%d: Map(%q) = %q, %v; want an error containing %q", i, tc.dn, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("#%d: Map(%q) = %q, %v; want %q", i, tc.dn, got, err, tc.want)
		}
	}
	for i, bad := range []string{
		"RULE:^CN=(.*)$/$1", "RULE:^CN=(.*)$", "RULE:(/x/", "DEFAULT,", "DEFAULTX", "RULE:a/b/Lx", "RULE:a/b/,, DEFAULT", "KERBEROS",
	} {
		if _, err := tlsconfig.ParsePrincipalRules(bad); err == nil {
			t.Errorf("#%d: ParsePrincipalRules(%q) accepted", i, bad)
		}
	}
}

// TestDistinguishedName checks the subject printed as Java's
// X500Principal prints it: most specific first, RFC 2253 escapes.
func TestDistinguishedName(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	for i, tc := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strata"}}, "CN=alice,OU=eng,O=Strata"},
		{pkix.Name{CommonName: "Tkac, Adam", Country: []string{"CZ"}}, `CN=Tkac\, Adam,C=CZ`},
		{pkix.Name{CommonName: " x+y "}, `CN=\ x\+y\ `},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
			{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "svc"},
		}}, "CN=svc,DC=example"},
		// An attribute Java has no keyword for prints as OID=#hex of its DER.
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, Value: "a@b"}}}, "1.2.840.113549.1.9.1=#0c03614062"},
	} {
		c := ca.Client(t, tc.subject)
		got, err := tlsconfig.DistinguishedName(c.Cert)
		if err != nil || got != tc.want {
			t.Errorf("#%d: DistinguishedName = %q, %v; want %q", i, got, err, tc.want)
		}
	}
}
