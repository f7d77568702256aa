package tlsconfig

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// This file maps a client certificate to a principal name as Kafka's
// SslPrincipalMapper does (ssl.principal.mapping.rules, KIP-371):
//
//	rules  = rule *( "," rule )
//	rule   = "DEFAULT" | "RULE:" pattern "/" replacement "/" [ "L" | "U" ]
//
// A backslash in pattern or replacement escapes the next character (so
// "\/" is a slash that does not end the part). The rules are tried in
// order on the subject's distinguished name, printed as Kafka prints it
// (RFC 2253, most specific first: "CN=alice,OU=eng,O=Strata"). DEFAULT
// gives the name unchanged; RULE gives the name with every match of
// pattern replaced by replacement ($1 is the first group, "\$" a dollar
// sign) if pattern matches the whole name, lower- or upper-cased by L or
// U; a rule that does not match passes to the next. When no rule
// matches, the connection is refused, as Kafka does.
//
// The patterns are Go regular expressions (RE2): Java's syntax minus
// look-around and back-references.

// PrincipalMapper maps distinguished names to principal names.
type PrincipalMapper struct {
	rules []mappingRule
	text  string
}

type mappingRule struct {
	isDefault   bool
	anchored    *regexp.Regexp // pattern, matching the whole name
	pattern     *regexp.Regexp
	replacement string // in Go's Expand syntax
	lower       bool
	upper       bool
}

// ParsePrincipalRules parses ssl.principal.mapping.rules; "" is DEFAULT.
func ParsePrincipalRules(text string) (*PrincipalMapper, error) {
	pm := &PrincipalMapper{text: text}
	s := strings.TrimSpace(text)
	if s == "" {
		pm.rules = []mappingRule{{isDefault: true}}
		return pm, nil
	}
	for s != "" {
		var r mappingRule
		var err error
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			r.isDefault = true
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			r, s, err = parseRule(s[len("RULE:"):])
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %w", err)
			}
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule at %q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
		}
		s = strings.TrimLeft(s, " \t")
		if s != "" {
			if s[0] != ',' {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: unexpected %q after a rule: rules are separated by commas", s)
			}
			s = strings.TrimLeft(s[1:], " \t")
			if s == "" {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: a comma ends the rules: remove it or add a rule")
			}
		}
		pm.rules = append(pm.rules, r)
	}
	return pm, nil
}

// parseRule parses what follows "RULE:" up to the end of the rule and
// returns the rest.
func parseRule(s string) (mappingRule, string, error) {
	pattern, s, ok := cutEscaped(s)
	if !ok {
		return mappingRule{}, "", fmt.Errorf("RULE:%s: want RULE:pattern/replacement/[LU]", s)
	}
	repl, s, ok := cutEscaped(s)
	if !ok {
		return mappingRule{}, "", fmt.Errorf("RULE:%s/%s: want RULE:pattern/replacement/[LU]", pattern, s)
	}
	var r mappingRule
	if s != "" && (s[0] == 'L' || s[0] == 'U') {
		r.lower, r.upper = s[0] == 'L', s[0] == 'U'
		s = s[1:]
	}
	var err error
	if r.pattern, err = regexp.Compile(pattern); err != nil {
		return mappingRule{}, "", fmt.Errorf("RULE:%s/%s/: pattern: %v", pattern, repl, err)
	}
	// The whole name must match (Java's Matcher.matches). A pattern that
	// cannot be wrapped in a group, such as a \Q quote left open, is
	// refused rather than matched in part.
	if r.anchored, err = regexp.Compile(`^(?:` + pattern + `)$`); err != nil {
		return mappingRule{}, "", fmt.Errorf("RULE:%s/%s/: pattern cannot be matched whole (close a \\Q quote with \\E): %v", pattern, repl, err)
	}
	r.replacement = javaReplacement(repl)
	return r, s, nil
}

// cutEscaped returns s up to its first unescaped '/', and what follows it.
func cutEscaped(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// javaReplacement turns a java.util.regex replacement ("$1", "\$") into
// regexp.Expand's template ("${1}", "$$").
func javaReplacement(r string) string {
	var b strings.Builder
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\\' && i+1 < len(r):
			i++
			if r[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(r[i])
			}
		case c == '$' && i+1 < len(r) && r[i+1] >= '0' && r[i+1] <= '9':
			j := i + 1
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			b.WriteString("${" + r[i+1:j] + "}")
			i = j - 1
		case c == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map returns the principal name for distinguished name dn, or an error
// when no rule applies.
func (pm *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range pm.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.anchored.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("tlsconfig: no rule of ssl.principal.mapping.rules %q applies to %q", pm.text, dn)
}

// rfc2253Keywords are the attribute names Java's X500Principal prints in
// RFC 2253 form; other attributes print as their OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// rawRDNSET is one relative distinguished name; encoding/asn1 reads a
// SET OF into a slice type whose name ends in SET.
type rawRDNSET []rawAttribute

type rawAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// DistinguishedName prints cert's subject as Kafka does
// (X500Principal.getName(), RFC 2253): the RDNs most specific first,
// separated by commas, the attributes of a multi-valued RDN by "+".
func DistinguishedName(cert *x509.Certificate) (string, error) {
	return FormatDN(cert.RawSubject)
}

// FormatDN prints a DER-encoded X.501 Name in RFC 2253 form.
func FormatDN(der []byte) (string, error) {
	var rdns []rawRDNSET
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", fmt.Errorf("tlsconfig: subject: %w", err)
	}
	if len(rest) != 0 {
		return "", fmt.Errorf("tlsconfig: subject: %d bytes after the name", len(rest))
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			b.WriteString(formatAttribute(a))
		}
	}
	return b.String(), nil
}

func formatAttribute(a rawAttribute) string {
	oid := a.Type.String()
	kw, known := rfc2253Keywords[oid]
	if known {
		var s string
		if _, err := asn1.Unmarshal(a.Value.FullBytes, &s); err == nil {
			return kw + "=" + escapeDNValue(s)
		}
	} else {
		kw = oid
	}
	return kw + "=#" + hex.EncodeToString(a.Value.FullBytes)
}

// escapeDNValue escapes a value as RFC 2253 section 2.4 says.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(`,+"\<>;`, c) >= 0,
			c == '#' && i == 0,
			c == ' ' && (i == 0 || i == len(s)-1):
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
