package sasl

import (
	"errors"
	"time"
)

// Mechanism names, as SaslHandshake and sasl.enabled.mechanisms spell them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Errors of this package. Step's errors wrap ErrAuthenticationFailed (the
// connection answers SASL_AUTHENTICATION_FAILED and closes) or
// ErrIllegalState (a message after the exchange ended: Kafka's
// ILLEGAL_SASL_STATE); NewConfig's wrap ErrInvalidConfig; Start's
// ErrUnsupportedMechanism (UNSUPPORTED_SASL_MECHANISM).
var (
	ErrAuthenticationFailed = errors.New("sasl: authentication failed")
	ErrIllegalState         = errors.New("sasl: illegal SASL state")
	ErrUnsupportedMechanism = errors.New("sasl: unsupported SASL mechanism")
	ErrInvalidConfig        = errors.New("sasl: invalid configuration")
)

// Session is the server side of one SASL exchange on one connection. It
// is not safe for concurrent use (a connection authenticates one message
// at a time).
type Session interface {
	// Mechanism is the mechanism's name.
	Mechanism() string

	// Step takes the client's next message (SaslAuthenticate's
	// auth_bytes, or the raw token of a v0 handshake) and returns the
	// server's answer. done reports that the exchange is over: with a nil
	// err the client is authenticated (Principal and Lifetime are set) and
	// serverMessage, possibly empty, is the last message to send. A non-nil
	// err wraps ErrAuthenticationFailed (or ErrIllegalState) and ends the
	// exchange; serverMessage is then what the RFC answers (SCRAM's
	// "e=..."), which Kafka does not send: the error goes in
	// SaslAuthenticate's error code and message (PublicMessage(err)).
	Step(clientMessage []byte) (serverMessage []byte, done bool, err error)

	// Principal is "User:<name>" once the exchange succeeded, else "".
	Principal() string

	// Lifetime is how long the credentials stay valid from the moment of
	// success (OAUTHBEARER: until the token's exp; 0 means no limit),
	// for KIP-368's session_lifetime_ms: the connection takes the
	// minimum of it and connections.max.reauth.ms.
	Lifetime() time.Duration
}

// authError is what Step returns on failure: public is safe to send to the
// client; cause is for the broker's log and never holds a credential.
type authError struct {
	public string
	cause  string
	base   error
}

func (e *authError) Error() string {
	if e.cause == "" {
		return e.public
	}
	return e.public + ": " + e.cause
}

func (e *authError) Unwrap() error { return e.base }

func failed(public, cause string) error {
	return &authError{public: public, cause: cause, base: ErrAuthenticationFailed}
}

func illegalState(mech string) error {
	return &authError{public: "Unexpected SASL " + mech + " message after the exchange ended", base: ErrIllegalState}
}

// PublicMessage is the text of a Step error that may be sent to the
// client (SaslAuthenticate's error_message): it does not say whether a
// user exists.
func PublicMessage(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.public
	}
	if err == nil {
		return ""
	}
	return "Authentication failed"
}

// principal makes Kafka's principal string of a user name.
func principal(user string) string { return "User:" + user }
