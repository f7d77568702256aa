package broker

import (
	"github.com/stratastream/strata/broker/sasl"
)

// Kafka's ScramMechanism types in DescribeUserScramCredentials and
// AlterUserScramCredentials.
const (
	scramTypeSHA256 int8 = 1
	scramTypeSHA512 int8 = 2
)

func scramMechanismName(t int8) (string, bool) {
	switch t {
	case scramTypeSHA256:
		return sasl.MechanismScramSHA256, true
	case scramTypeSHA512:
		return sasl.MechanismScramSHA512, true
	}
	return "", false
}

func scramMechanismType(name string) int8 {
	if name == sasl.MechanismScramSHA512 {
		return scramTypeSHA512
	}
	return scramTypeSHA256
}

// scramCredentialStore gives broker/sasl the coordinator's SCRAM
// credentials (sasl.CredentialStore). A stored credential that does not
// parse is logged (never its value) and treated as missing.
type scramCredentialStore struct {
	s *Server // its coordinator is read at each call: it opens after the listeners
}

// ScramCredential implements sasl.CredentialStore.
func (s scramCredentialStore) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	str, ok := s.s.coord.ScramCredential(user, mechanism)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	cred, err := sasl.ParseScramCredential(str)
	if err != nil {
		s.s.log.Warn("stored SCRAM credential does not parse; the user cannot authenticate with it", "user", user, "mechanism", mechanism, "err", err)
		return sasl.ScramCredential{}, false
	}
	return cred, true
}

// ScramCredentialStore is the credential store of SCRAM for a listener's
// sasl.Config (sasl.NewConfig's store argument).
func (s *Server) ScramCredentialStore() sasl.CredentialStore {
	return scramCredentialStore{s: s}
}
