package sasl

import (
	"fmt"
	"strings"
)

// JAASEntry is one login module of a sasl.jaas.config value: its class,
// control flag and options, in Kafka's syntax
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required
//	    username="admin" password="admin-secret" user_alice="alice-secret";
type JAASEntry struct {
	LoginModule string
	// Flag is REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL (upper case).
	Flag    string
	Options map[string]string
}

// Login module classes whose options this package reads.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// jaasMaxLen bounds a JAAS value: it is configuration, not data.
const jaasMaxLen = 1 << 20

// ParseJAAS parses a sasl.jaas.config value as Kafka's JaasConfig does (a
// java.io.StreamTokenizer): one or more entries "Class flag key=value ...;",
// values as words or in double or single quotes with Java's escapes (\n,
// \t, \\, \", octal \ooo, any other \c is c), // and /* */ comments.
// Errors never quote option values (they hold passwords).
func ParseJAAS(s string) ([]JAASEntry, error) {
	if len(s) > jaasMaxLen {
		return nil, fmt.Errorf("sasl: JAAS config longer than %d bytes", jaasMaxLen)
	}
	t := jaasTokenizer{s: s}
	var out []JAASEntry
	for {
		tok, err := t.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == tokEOF {
			break
		}
		if tok.kind != tokWord {
			return nil, fmt.Errorf("sasl: JAAS config: login module class expected at offset %d", tok.pos)
		}
		e := JAASEntry{LoginModule: tok.text, Options: map[string]string{}}
		flag, err := t.next()
		if err != nil {
			return nil, err
		}
		if flag.kind != tokWord {
			return nil, fmt.Errorf("sasl: JAAS config: login module control flag not specified for %s", e.LoginModule)
		}
		switch f := strings.ToUpper(flag.text); f {
		case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
			e.Flag = f
		default:
			return nil, fmt.Errorf("sasl: JAAS config: invalid login module control flag %q", flag.text)
		}
		for {
			key, err := t.next()
			if err != nil {
				return nil, err
			}
			if key.kind == tokSemicolon {
				break
			}
			if key.kind != tokWord {
				return nil, fmt.Errorf("sasl: JAAS config entry %s not terminated by semi-colon", e.LoginModule)
			}
			eq, err := t.next()
			if err != nil {
				return nil, err
			}
			val, err := t.next()
			if err != nil {
				return nil, err
			}
			if eq.kind != tokEquals || (val.kind != tokWord && val.kind != tokQuoted) {
				return nil, fmt.Errorf("sasl: JAAS config: value not specified for key %q", key.text)
			}
			e.Options[key.text] = val.text
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sasl: JAAS config: login module not specified")
	}
	return out, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokEquals
	tokSemicolon
	tokOther
)

type jaasToken struct {
	kind tokKind
	text string
	pos  int
}

type jaasTokenizer struct {
	s string
	i int
}

func isJAASWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == '$' || c >= 0x80
}

func (t *jaasTokenizer) next() (jaasToken, error) {
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c <= ' ':
			t.i++
		case c == '/' && t.i+1 < len(t.s) && t.s[t.i+1] == '/':
			for t.i < len(t.s) && t.s[t.i] != '\n' && t.s[t.i] != '\r' {
				t.i++
			}
		case c == '/' && t.i+1 < len(t.s) && t.s[t.i+1] == '*':
			end := strings.Index(t.s[t.i+2:], "*/")
			if end < 0 {
				return jaasToken{}, fmt.Errorf("sasl: JAAS config: unterminated comment at offset %d", t.i)
			}
			t.i += 2 + end + 2
		case c == '"' || c == '\'':
			return t.quoted(c)
		case isJAASWordByte(c):
			start := t.i
			for t.i < len(t.s) && isJAASWordByte(t.s[t.i]) {
				t.i++
			}
			return jaasToken{kind: tokWord, text: t.s[start:t.i], pos: start}, nil
		case c == '=':
			t.i++
			return jaasToken{kind: tokEquals, pos: t.i - 1}, nil
		case c == ';':
			t.i++
			return jaasToken{kind: tokSemicolon, pos: t.i - 1}, nil
		default:
			t.i++
			return jaasToken{kind: tokOther, pos: t.i - 1}, nil
		}
	}
	return jaasToken{kind: tokEOF, pos: t.i}, nil
}

// quoted reads a quoted string as StreamTokenizer does: it ends at the
// closing quote or at the end of the line.
func (t *jaasTokenizer) quoted(q byte) (jaasToken, error) {
	start := t.i
	t.i++
	var b strings.Builder
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c == q:
			t.i++
			return jaasToken{kind: tokQuoted, text: b.String(), pos: start}, nil
		case c == '\n' || c == '\r':
			return jaasToken{}, fmt.Errorf("sasl: JAAS config: unterminated quoted value at offset %d", start)
		case c == '\\' && t.i+1 < len(t.s):
			t.i++
			e := t.s[t.i]
			t.i++
			switch e {
			case 'a':
				b.WriteByte(7)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			default:
				if e >= '0' && e <= '7' {
					// Up to three octal digits, the first at most 3 for three.
					v := int(e - '0')
					n := 1
					for n < 3 && t.i < len(t.s) && t.s[t.i] >= '0' && t.s[t.i] <= '7' && (n < 2 || e <= '3') {
						v = v*8 + int(t.s[t.i]-'0')
						t.i++
						n++
					}
					b.WriteByte(byte(v))
				} else {
					b.WriteByte(e)
				}
			}
		default:
			b.WriteByte(c)
			t.i++
		}
	}
	return jaasToken{}, fmt.Errorf("sasl: JAAS config: unterminated quoted value at offset %d", start)
}

// jaasEntryFor returns the entry of the given login module class.
func jaasEntryFor(entries []JAASEntry, module string) (JAASEntry, bool) {
	for _, e := range entries {
		if e.LoginModule == module {
			return e, true
		}
	}
	return JAASEntry{}, false
}
