package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&command{
		name:    "certs",
		summary: "create a development CA, broker and client certificates",
		actions: map[string]func(args []string, stdout, stderr io.Writer) int{
			"create": runCertsCreate,
		},
		help: certsHelp,
	})
}

const certsHelp = `Usage: strata certs create --dir DIR [flags]

Makes the certificates a TLS cluster needs for development and tests: a CA,
broker keystores and client keystores, all PEM files that broker and client
ssl.* settings read directly (ECDSA P-256 keys, crypto/x509). For production
use your organisation's CA; see docs/security.md.

Run 'strata certs create --help' for the flags and the files written.
`

const certsCreateHelp = `Usage: strata certs create --dir DIR [--hosts H,...] [--broker-id N]... [--client NAME]... [flags]

Writes into DIR (created if missing):

  ca.pem            the CA's certificate
  ca.key            the CA's private key (mode 0600): keep it, or delete it
                    once every certificate is made
  truststore.pem    the CA's certificate, for ssl.truststore.location of
                    brokers and clients (kcat: -X ssl.ca.location)
  broker-N.pem      for each --broker-id N: the broker's private key and
                    certificate chain (mode 0600), for ssl.keystore.location
  broker.pem        the same, one shared by all brokers, when --hosts is
                    given without --broker-id
  client-NAME.pem   for each --client NAME: a client key and certificate
                    chain (mode 0600) with subject CN=NAME (principal
                    User:CN=NAME), for mutual TLS (kcat: -X
                    ssl.certificate.location and -X ssl.key.location, both
                    this file)

A CA already in DIR (ca.pem and ca.key) signs the new certificates, so
running the command again adds brokers or clients to the same cluster; to
start over with a new CA, remove DIR. An existing broker or client file is
not overwritten unless --force.

Broker certificates are for both server and client authentication (a
broker dials other brokers with it); their subject alternative names are
--hosts, where {id} stands for the broker id (broker-{id}.example.com). A
broker's certificate must name the host it advertises on its inter-broker
listener: replication refuses a follower whose certificate does not.

Flags:
`

const certsCreateExample = `
Exit status: 0 when every file is written, 1 when one cannot be, 2 for a
usage error (nothing is written then).

Example:
  strata certs create --dir certs --hosts 127.0.0.1,localhost --broker-id 1 --broker-id 2 --broker-id 3 --client admin
  strata certs create --dir certs --hosts 'broker-{id}.example.com' --broker-id 4      # same CA
  strata certs create --dir certs --client alice --days 30
`

// certFileName is what a --client name may be: it becomes a file name and
// a subject CN.
var certFileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// certFile is one file certs create writes.
type certFile struct {
	name string
	mode os.FileMode
	data []byte
}

func runCertsCreate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata certs create", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors reported below
	dir := fs.String("dir", "", "write the files into directory `DIR` (required)")
	hosts := fs.String("hosts", "", "comma-separated host names and IP addresses `H,...` for the brokers' SANs; {id} is the broker id")
	var ids, clients stringsFlag
	fs.Var(&ids, "broker-id", "make a keystore broker-`N`.pem for broker id N; repeat or comma-separate")
	fs.Var(&clients, "client", "make a client keystore client-`NAME`.pem with subject CN=NAME; repeat")
	days := fs.Int("days", 365, "the broker and client certificates are valid `N` days")
	caDays := fs.Int("ca-days", 3650, "a new CA is valid `N` days")
	force := fs.Bool("force", false, "overwrite broker and client files that exist")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), certsCreateHelp)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), certsCreateExample)
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata certs create: "+format+"\n", a...)
		fmt.Fprintf(stderr, "Run 'strata certs create --help' for the flags.\n")
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return usageErr("%s", flagErrorText(fs, err))
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *dir == "" {
		return usageErr("--dir is required")
	}
	if *days < 1 || *days > 3650 {
		return usageErr("--days %d: want 1 to 3650", *days)
	}
	if *caDays < *days || *caDays > 36500 {
		return usageErr("--ca-days %d: want --days (%d) to 36500", *caDays, *days)
	}
	var brokerIDs []int
	for _, v := range ids {
		for _, s := range strings.Split(v, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || id < 0 || id > 1<<31-1 {
				return usageErr("--broker-id %q: want a broker id, 0 or more", s)
			}
			brokerIDs = append(brokerIDs, id)
		}
	}
	var hostList []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if strings.ContainsAny(h, " /\\:") && net.ParseIP(h) == nil {
				return usageErr("--hosts %q: not a host name or IP address", h)
			}
			hostList = append(hostList, h)
		}
	}
	if len(brokerIDs) > 0 && len(hostList) == 0 {
		return usageErr("--broker-id needs --hosts: the names clients and brokers reach the broker by")
	}
	if len(brokerIDs) == 0 && strings.Contains(*hosts, "{id}") {
		return usageErr("--hosts %q: {id} needs --broker-id", *hosts)
	}
	for _, c := range clients {
		if !certFileName.MatchString(c) {
			return usageErr("--client %q: want letters, digits, '.', '_' or '-' (it names a file and the subject CN)", c)
		}
	}

	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "strata certs create: %v\n", err)
		return 1
	}
	now := time.Now()
	ca, caKey, caPEM, created, err := loadOrMakeCA(*dir, now, *caDays)
	if err != nil {
		fmt.Fprintf(stderr, "strata certs create: %v\n", err)
		return 1
	}
	var files []certFile
	if created {
		keyPEM, err := pemKey(caKey)
		if err != nil {
			fmt.Fprintf(stderr, "strata certs create: %v\n", err)
			return 1
		}
		files = append(files, certFile{"ca.key", 0o600, keyPEM}, certFile{"ca.pem", 0o644, caPEM})
	}
	// The truststore is rewritten when missing or with a new CA only: an
	// operator may have added a second CA to it for a rotation.
	if _, err := os.Stat(filepath.Join(*dir, "truststore.pem")); created || errors.Is(err, os.ErrNotExist) {
		files = append(files, certFile{"truststore.pem", 0o644, caPEM})
	}
	leaf := func(name string, subject pkix.Name, sans []string, server bool) error {
		data, err := issue(ca, caKey, subject, sans, server, now, *days)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, certFile{name, 0o600, append(data, caPEM...)})
		return nil
	}
	switch {
	case len(brokerIDs) > 0:
		for _, id := range brokerIDs {
			sans := make([]string, len(hostList))
			for i, h := range hostList {
				sans[i] = strings.ReplaceAll(h, "{id}", strconv.Itoa(id))
			}
			if err := leaf(fmt.Sprintf("broker-%d.pem", id), pkix.Name{CommonName: sans[0], Organization: []string{"Strata dev"}}, sans, true); err != nil {
				fmt.Fprintf(stderr, "strata certs create: %v\n", err)
				return 1
			}
		}
	case len(hostList) > 0:
		if err := leaf("broker.pem", pkix.Name{CommonName: hostList[0], Organization: []string{"Strata dev"}}, hostList, true); err != nil {
			fmt.Fprintf(stderr, "strata certs create: %v\n", err)
			return 1
		}
	}
	for _, c := range clients {
		if err := leaf("client-"+c+".pem", pkix.Name{CommonName: c}, nil, false); err != nil {
			fmt.Fprintf(stderr, "strata certs create: %v\n", err)
			return 1
		}
	}

	// Nothing is written when any leaf file exists and --force is not
	// given, so a refusal leaves the directory as it was.
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.name] {
			return usageErr("%s would be written twice (a repeated --broker-id or --client)", f.name)
		}
		seen[f.name] = true
		if f.name == "ca.pem" || f.name == "ca.key" || f.name == "truststore.pem" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(*dir, f.name)); err == nil && !*force {
			fmt.Fprintf(stderr, "strata certs create: %s exists; not overwriting it without --force\n", filepath.Join(*dir, f.name))
			return 1
		}
	}
	for _, f := range files {
		path := filepath.Join(*dir, f.name)
		if err := writeFileAtomic(path, f.data, f.mode); err != nil {
			fmt.Fprintf(stderr, "strata certs create: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	if !created {
		fmt.Fprintf(stdout, "signed with the CA in %s (%s, valid until %s)\n", filepath.Join(*dir, "ca.pem"), ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.DateOnly))
	}
	return 0
}

// loadOrMakeCA reads dir's ca.pem and ca.key, or makes a new CA when
// neither exists. created tells which.
func loadOrMakeCA(dir string, now time.Time, days int) (ca *x509.Certificate, key crypto.Signer, caPEM []byte, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	certData, certErr := os.ReadFile(certPath)
	keyData, keyErr := os.ReadFile(keyPath)
	switch {
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, nil, false, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          randomSerial(),
			Subject:               pkix.Name{CommonName: "Strata dev CA " + now.UTC().Format("2006-01-02T15:04:05Z"), Organization: []string{"Strata dev"}},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.AddDate(0, 0, days),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
			MaxPathLenZero:        true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
		if err != nil {
			return nil, nil, nil, false, err
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, nil, false, err
		}
		return c, k, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), true, nil
	case certErr != nil:
		return nil, nil, nil, false, fmt.Errorf("%s: %w (ca.pem and ca.key go together; remove both for a new CA)", certPath, certErr)
	case keyErr != nil:
		return nil, nil, nil, false, fmt.Errorf("%s: %w (ca.pem and ca.key go together; remove both for a new CA)", keyPath, keyErr)
	}
	b, _ := pem.Decode(certData)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, nil, false, fmt.Errorf("%s: no PEM CERTIFICATE block", certPath)
	}
	if ca, err = x509.ParseCertificate(b.Bytes); err != nil {
		return nil, nil, nil, false, fmt.Errorf("%s: %w", certPath, err)
	}
	if !ca.IsCA {
		return nil, nil, nil, false, fmt.Errorf("%s: not a CA certificate", certPath)
	}
	kb, _ := pem.Decode(keyData)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, nil, nil, false, fmt.Errorf("%s: no PEM PRIVATE KEY block (PKCS#8, unencrypted)", keyPath)
	}
	pk, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("%s: %w", keyPath, err)
	}
	signer, ok := pk.(crypto.Signer)
	if !ok || !publicKeysEqual(signer.Public(), ca.PublicKey) {
		return nil, nil, nil, false, fmt.Errorf("%s is not the key of %s", keyPath, certPath)
	}
	return ca, signer, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), false, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// issue makes a key and a certificate signed by ca, and returns the key
// then the certificate in PEM.
func issue(ca *x509.Certificate, caKey crypto.Signer, subject pkix.Name, sans []string, server bool, now time.Time, days int) ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(0, 0, days),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	for _, h := range sans {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pemKey(k)
	if err != nil {
		return nil, err
	}
	return append(keyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...), nil
}

func pemKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// randomSerial is a 128-bit random serial number, as RFC 5280 advises.
func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// writeFileAtomic writes data to path with mode through a temporary file
// in the same directory, synced and renamed into place.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
