package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
)

// fuzzKeys are public keys the JWS fuzz target checks random signatures
// against.
var fuzzKeys = func() []crypto.PublicKey {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return []crypto.PublicKey{r.Public(), e.Public()}
}()
