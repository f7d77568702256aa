package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Iteration bounds of SCRAM credentials: Kafka's ScramMechanism minimum
// and the maximum AlterUserScramCredentials accepts.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramCredential is what the server keeps of a SCRAM password (RFC 5802
// section 3): never the password itself. Its String is redacted; the
// stored form is FormatScramCredential's.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// String implements fmt.Stringer without the keys, so a credential that
// reaches a log line gives nothing away.
func (c ScramCredential) String() string {
	return "ScramCredential{iterations=" + strconv.Itoa(c.Iterations) + ", redacted}"
}

// GoString implements fmt.GoStringer the same way, for %#v.
func (c ScramCredential) GoString() string { return c.String() }

// scramHash is the hash of a SCRAM mechanism name; nil if not one.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New
	case MechanismScramSHA512:
		return sha512.New
	}
	return nil
}

// IsScram reports whether mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
func IsScram(mechanism string) bool { return scramHash(mechanism) != nil }

// ScramSaltedPassword is Hi(password, salt, iterations) of RFC 5802 (PBKDF2
// with HMAC of the mechanism's hash), the password's UTF-8 bytes as Kafka
// uses them (no SASLprep).
func ScramSaltedPassword(mechanism string, password, salt []byte, iterations int) ([]byte, error) {
	h := scramHash(mechanism)
	if h == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	if err := checkIterations(iterations); err != nil {
		return nil, err
	}
	return pbkdf2.Key(h, string(password), salt, iterations, h().Size())
}

func checkIterations(n int) error {
	if n < ScramMinIterations || n > ScramMaxIterations {
		return fmt.Errorf("sasl: iterations %d out of range [%d, %d]", n, ScramMinIterations, ScramMaxIterations)
	}
	return nil
}

// ScramCredentialFromSaltedPassword derives the stored and server keys of
// a salted password (AlterUserScramCredentials sends the salted password
// and salt, never the password).
func ScramCredentialFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int) (ScramCredential, error) {
	h := scramHash(mechanism)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if len(salt) == 0 || len(saltedPassword) == 0 {
		return ScramCredential{}, fmt.Errorf("sasl: empty salt or salted password")
	}
	clientKey := hmacSum(h, saltedPassword, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, saltedPassword, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// NewScramCredential makes a credential of a password with a new random
// salt.
func NewScramCredential(mechanism string, password []byte, iterations int) (ScramCredential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, fmt.Errorf("sasl: random salt: %w", err)
	}
	salted, err := ScramSaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramCredentialFromSaltedPassword(mechanism, salt, salted, iterations)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// FormatScramCredential is Kafka's stored form of a credential
// (ScramCredentialUtils.credentialToString):
// "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>".
func FormatScramCredential(c ScramCredential) string {
	e := base64.StdEncoding
	return "salt=" + e.EncodeToString(c.Salt) + ",stored_key=" + e.EncodeToString(c.StoredKey) +
		",server_key=" + e.EncodeToString(c.ServerKey) + ",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseScramCredential parses FormatScramCredential's form. Each of the
// four keys must be there once; Kafka's parser ignores no other key
// either. Errors never quote the value.
func ParseScramCredential(s string) (ScramCredential, error) {
	var c ScramCredential
	seen := map[string]bool{}
	if len(s) > 4096 {
		return c, fmt.Errorf("sasl: SCRAM credential too long")
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return ScramCredential{}, fmt.Errorf("sasl: malformed SCRAM credential")
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
			if err == nil && (c.Iterations <= 0 || v != strconv.Itoa(c.Iterations)) {
				err = fmt.Errorf("bad iterations")
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return ScramCredential{}, fmt.Errorf("sasl: malformed SCRAM credential: key %q", k)
		}
	}
	if len(seen) != 4 || len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0 {
		return ScramCredential{}, fmt.Errorf("sasl: malformed SCRAM credential: salt, stored_key, server_key and iterations are required")
	}
	return c, nil
}
