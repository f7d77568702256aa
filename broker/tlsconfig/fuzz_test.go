package tlsconfig

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"
)

// FuzzPrincipalRules: parsing any text never panics; rules that parse
// map any name without panicking, and DEFAULT-terminated rules always
// give a name.
func FuzzPrincipalRules(f *testing.F) {
	for _, s := range []string{"", "DEFAULT", "RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT", `RULE:a\/b/\$1/U`, "RULE:(/x/", "RULE:.*/$10$/"} {
		f.Add(s, "CN=alice,OU=eng,O=Strata")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		pm, err := ParsePrincipalRules(rules)
		if err != nil {
			return
		}
		_, _ = pm.Map(dn) // no rule may match: an error is an answer
		pm2, err := ParsePrincipalRules(rules + ",DEFAULT")
		if err != nil {
			return // e.g. rules ending in a comma
		}
		if _, err := pm2.Map(dn); err != nil {
			t.Fatalf("rules %q then DEFAULT: %v", rules, err)
		}
	})
}

// FuzzFormatDN: any bytes as a subject never panic; a Name that Go
// marshals prints.
func FuzzFormatDN(f *testing.F) {
	name, _ := pkixName("alice")
	f.Add(name)
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = FormatDN(der)
	})
}

func pkixName(cn string) ([]byte, error) {
	return asn1Marshal(pkix.Name{CommonName: cn, Organization: []string{"Strata"}}.ToRDNSequence())
}

// FuzzEncryptedPKCS8: parsing any bytes as an encrypted key never
// panics, and never accepts a PBKDF2 iteration count above the bound.
func FuzzEncryptedPKCS8(f *testing.F) {
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		p, err := parseEncryptedPKCS8(der)
		if err != nil {
			return
		}
		if p.rounds < 1 || p.rounds > maxPBKDF2Rounds {
			t.Fatalf("accepted %d rounds", p.rounds)
		}
	})
}

func asn1Marshal(v any) ([]byte, error) { return asn1.Marshal(v) }
