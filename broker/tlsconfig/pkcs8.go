package tlsconfig

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// This file decrypts an encrypted PKCS#8 private key (RFC 5958,
// "-----BEGIN ENCRYPTED PRIVATE KEY-----"), which is what Kafka accepts
// for a PEM keystore with ssl.key.password. Only PBES2 (RFC 8018) is
// read: PBKDF2 with HMAC-SHA1/SHA-224/SHA-256/SHA-384/SHA-512, and
// AES-128/192/256-CBC or DES-EDE3-CBC; this covers what openssl pkcs8
// -topk8 and keytool write today. The older PBES1 schemes are refused.

var (
	oidPBES2        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1     = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC   = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
	maxPBKDF2Rounds = 10_000_000
)

// ErrKeyPassword is a private key that ssl.key.password does not decrypt.
var ErrKeyPassword = errors.New("tlsconfig: the private key does not decrypt with ssl.key.password (wrong password?)")

type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Scheme pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt      []byte
	Rounds    int
	KeyLength int                      `asn1:"optional"`
	PRF       pkix.AlgorithmIdentifier `asn1:"optional"`
}

// pbes2 is a parsed EncryptedPrivateKeyInfo.
type pbes2 struct {
	salt   []byte
	rounds int
	prf    func() hash.Hash
	keyLen int
	block  func(key []byte) (cipher.Block, error)
	iv     []byte
	data   []byte
}

// parseEncryptedPKCS8 reads the structure of an EncryptedPrivateKeyInfo
// without decrypting it.
func parseEncryptedPKCS8(der []byte) (*pbes2, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return nil, errors.New("tlsconfig: malformed encrypted PKCS#8 key")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("tlsconfig: encrypted key uses scheme %v; only PBES2 is supported: re-encrypt it with 'openssl pkcs8 -topk8 -v2 aes-256-cbc'", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if rest, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil || len(rest) != 0 {
		return nil, errors.New("tlsconfig: malformed PBES2 parameters")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("tlsconfig: PBES2 key derivation %v is not supported (only PBKDF2)", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if rest, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil || len(rest) != 0 {
		return nil, errors.New("tlsconfig: malformed PBKDF2 parameters")
	}
	if kdf.Rounds < 1 || kdf.Rounds > maxPBKDF2Rounds {
		return nil, fmt.Errorf("tlsconfig: PBKDF2 iteration count %d outside [1, %d]", kdf.Rounds, maxPBKDF2Rounds)
	}
	p := &pbes2{salt: kdf.Salt, rounds: kdf.Rounds, data: info.Data}
	switch prf := kdf.PRF.Algorithm; {
	case len(prf) == 0, prf.Equal(oidHMACSHA1):
		p.prf = sha1.New
	case prf.Equal(oidHMACSHA224):
		p.prf = sha256.New224
	case prf.Equal(oidHMACSHA256):
		p.prf = sha256.New
	case prf.Equal(oidHMACSHA384):
		p.prf = sha512.New384
	case prf.Equal(oidHMACSHA512):
		p.prf = sha512.New
	default:
		return nil, fmt.Errorf("tlsconfig: PBKDF2 PRF %v is not supported", prf)
	}
	switch s := params.Scheme.Algorithm; {
	case s.Equal(oidAES128CBC):
		p.keyLen, p.block = 16, aes.NewCipher
	case s.Equal(oidAES192CBC):
		p.keyLen, p.block = 24, aes.NewCipher
	case s.Equal(oidAES256CBC):
		p.keyLen, p.block = 32, aes.NewCipher
	case s.Equal(oidDESEDE3CBC):
		p.keyLen, p.block = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("tlsconfig: PBES2 cipher %v is not supported (AES-CBC or DES-EDE3-CBC)", s)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != p.keyLen {
		return nil, fmt.Errorf("tlsconfig: PBKDF2 key length %d does not fit the cipher (%d)", kdf.KeyLength, p.keyLen)
	}
	if rest, err := asn1.Unmarshal(params.Scheme.Parameters.FullBytes, &p.iv); err != nil || len(rest) != 0 {
		return nil, errors.New("tlsconfig: malformed cipher IV")
	}
	return p, nil
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo with password and
// parses the key within.
func decryptPKCS8(der []byte, password string) (crypto.PrivateKey, error) {
	p, err := parseEncryptedPKCS8(der)
	if err != nil {
		return nil, err
	}
	key, err := pbkdf2.Key(p.prf, password, p.salt, p.rounds, p.keyLen)
	if err != nil {
		return nil, fmt.Errorf("tlsconfig: PBKDF2: %w", err)
	}
	block, err := p.block(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(p.iv) != bs {
		return nil, fmt.Errorf("tlsconfig: cipher IV of %d bytes, want %d", len(p.iv), bs)
	}
	if len(p.data) == 0 || len(p.data)%bs != 0 {
		return nil, errors.New("tlsconfig: encrypted key is not a whole number of cipher blocks")
	}
	plain := make([]byte, len(p.data))
	cipher.NewCBCDecrypter(block, p.iv).CryptBlocks(plain, p.data)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > bs {
		return nil, ErrKeyPassword
	}
	for _, c := range plain[len(plain)-pad:] {
		if int(c) != pad {
			return nil, ErrKeyPassword
		}
	}
	k, err := x509.ParsePKCS8PrivateKey(plain[:len(plain)-pad])
	if err != nil {
		return nil, ErrKeyPassword
	}
	return k, nil
}
