package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"time"
	"unicode/utf8"
)

// plainMaxMessage bounds a PLAIN message. RFC 4616 has servers accept at
// least 255 octets per field; Kafka sets no limit of its own.
const plainMaxMessage = 64 << 10

// PlainUsers are the users of PLAIN: name to password, from the
// PlainLoginModule's user_<name>="<password>" options.
type PlainUsers map[string]string

// plainUsersFromJAAS reads the user_ options of the PlainLoginModule entry.
func plainUsersFromJAAS(jaas string) (PlainUsers, error) {
	entries, err := ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	e, ok := jaasEntryFor(entries, PlainLoginModule)
	if !ok {
		return nil, errorf("the JAAS config of PLAIN has no %s entry", PlainLoginModule)
	}
	users := PlainUsers{}
	for k, v := range e.Options {
		if name, ok := cutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// ParsePlain splits a PLAIN message "[authzid] NUL authcid NUL passwd"
// (RFC 4616). authcid and passwd must not be empty; none may hold NUL;
// all are UTF-8.
func ParsePlain(msg []byte) (authzid, authcid, passwd string, err error) {
	if len(msg) > plainMaxMessage {
		return "", "", "", failed("Invalid SASL/PLAIN response: too long", "")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", failed("Invalid SASL/PLAIN response: expected 3 tokens, got "+itoa(len(parts)), "")
	}
	for _, p := range parts {
		if !utf8.Valid(p) {
			return "", "", "", failed("Invalid SASL/PLAIN response: not UTF-8", "")
		}
	}
	if len(parts[1]) == 0 {
		return "", "", "", failed("Authentication failed: username not specified", "")
	}
	if len(parts[2]) == 0 {
		return "", "", "", failed("Authentication failed: password not specified", "")
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

type plainSession struct {
	users     PlainUsers
	principal string
	state     int // 0 waiting, 1 done, 2 failed
}

// NewPlainSession starts a PLAIN exchange against users.
func NewPlainSession(users PlainUsers) Session { return &plainSession{users: users} }

func (s *plainSession) Mechanism() string       { return MechanismPlain }
func (s *plainSession) Principal() string       { return s.principal }
func (s *plainSession) Lifetime() time.Duration { return 0 }

func (s *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if s.state != 0 {
		return nil, true, illegalState(MechanismPlain)
	}
	s.state = 2
	authzid, user, pass, err := ParsePlain(msg)
	if err != nil {
		return nil, true, err
	}
	if authzid != "" && authzid != user {
		return nil, true, failed("Authentication failed: Client requested an authorization id that is different from username", "")
	}
	want, ok := s.users[user]
	// Compare digests so the time taken depends on neither the length of
	// the password nor whether the user exists.
	if !ok {
		want = "\x00unknown user"
	}
	a, b := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 || !ok {
		return nil, true, failed("Authentication failed: Invalid username or password", "PLAIN user "+quoteName(user))
	}
	s.state = 1
	s.principal = principal(user)
	return nil, true, nil
}
