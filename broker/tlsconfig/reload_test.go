package tlsconfig_test

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/stratastream/strata/segment/poll"
)

// TestReloadPicksUpNewCertificate rotates the keystore file under a
// watching server: new connections get the new certificate, a
// connection opened before keeps working; a bad file is refused and the
// certificate before it kept.
func TestReloadPicksUpNewCertificate(t *testing.T) {
	p := newPKI(t)
	srv := newServer(t, p.serverProps("none"))
	var mu sync.Mutex
	var reports []error
	if err := srv.Watch(20*time.Millisecond, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, err)
	}); err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, srv.Config())
	cfg := p.clientConfig(t, nil)
	first, err := dial(t, addr, cfg)
	if err != nil || first != p.server.Cert.SerialNumber.String() {
		t.Fatalf("first dial: serial %s, %v; want %s", first, err, p.server.Cert.SerialNumber)
	}

	next := p.ca.Server(t, "127.0.0.1", "localhost") // same subject and names
	next.WritePEMKeystore(t, p.keystore, "")
	start := time.Now()
	want := next.Cert.SerialNumber.String()
	poll.Until(t, 30*time.Second, "new connections get the rotated certificate", func() bool {
		got, err := dial(t, addr, cfg)
		return err == nil && got == want
	})
	t.Logf("the rotated certificate served %v after the file changed", time.Since(start))

	// A file that does not parse: refused, reported, the rotated one kept.
	if err := os.WriteFile(p.keystore, []byte("-----BEGIN GARBAGE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the bad keystore is reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reports) >= 2 && reports[len(reports)-1] != nil
	})
	mu.Lock()
	if reports[0] != nil || !strings.Contains(reports[len(reports)-1].Error(), "reload refused") {
		t.Errorf("reports %v: want nil, then a refused reload", reports)
	}
	mu.Unlock()
	if got, err := dial(t, addr, cfg); err != nil || got != want {
		t.Fatalf("after a bad reload: serial %s, %v; want the rotated %s", got, err, want)
	}
}

// TestReloadRefusesIncompatibleKeystore checks Reload's checks: a
// certificate for another subject or other names, or an expired one.
func TestReloadRefusesIncompatibleKeystore(t *testing.T) {
	p := newPKI(t)
	srv := newServer(t, p.serverProps("none"))
	orig := p.server.Cert.SerialNumber
	for i, tc := range []struct {
		write func()
		want  string
	}{
		{func() { p.ca.Server(t, "127.0.0.2").WritePEMKeystore(t, p.keystore, "") }, "subject"},
		{func() {
			p.ca.Issue(t, optionsLike(p, []string{"127.0.0.1"})).WritePEMKeystore(t, p.keystore, "")
		}, "alternative names"},
		{func() {
			p.ca.Expired(t, p.server.Cert.Subject, "127.0.0.1", "localhost").WritePEMKeystore(t, p.keystore, "")
		}, "not now"},
		{func() { os.Remove(p.keystore) }, "no such file"},
	} {
		tc.write()
		err := srv.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("#%d: Reload error %v, want one containing %q", i, err, tc.want)
		}
		if got := srv.Certificate().Leaf.SerialNumber; got.Cmp(orig) != 0 {
			t.Errorf("#%d: serving serial %v after a refused reload, want %v", i, got, orig)
		}
	}
	// ssl.allow.san.changes lets the names change.
	props := p.serverProps("none")
	p.server.WritePEMKeystore(t, p.keystore, "")
	props["ssl.allow.san.changes"] = "true"
	srv = newServer(t, props)
	p.ca.Issue(t, optionsLike(p, []string{"127.0.0.1"})).WritePEMKeystore(t, p.keystore, "")
	if err := srv.Reload(); err != nil {
		t.Fatalf("Reload with ssl.allow.san.changes=true: %v", err)
	}
}

func optionsLike(p *pki, hosts []string) tlstest.Options {
	return tlstest.Options{Subject: p.server.Cert.Subject, Hosts: hosts}
}

// TestServerClientConfig: a broker's client side presents its keystore
// certificate and verifies the peer for the host dialed, with the
// stores loaded last.
func TestServerClientConfig(t *testing.T) {
	p := newPKI(t)
	peer := newServer(t, p.serverProps("required"))
	addr, acc := serve(t, peer.Config())

	self := newPKI(t) // another directory; the same CA is used below
	self.ca = p.ca
	self.server = p.ca.Server(t, "127.0.0.1")
	self.keystore = self.server.WritePEMKeystore(t, self.keystore, "")
	tlstest.WritePEM(t, self.truststore, p.ca)
	srv := newServer(t, self.serverProps("required"))
	cfg := srv.ClientConfig("127.0.0.1")
	if _, err := dial(t, addr, cfg); err != nil {
		t.Fatal(err)
	}
	if got, _ := peer.Principal((<-acc).state); got != "User:CN=127.0.0.1,O=Strata" {
		t.Fatalf("the peer saw %q", got)
	}
	wrongHost := srv.ClientConfig("broker-7.example")
	if _, err := dial(t, addr, wrongHost); err == nil || !strings.Contains(err.Error(), "broker-7.example") {
		t.Fatalf("dial for another host: %v, want the certificate refused", err)
	}
	<-acc

	// A reload changes the certificate presented to new connections.
	next := p.ca.Server(t, "127.0.0.1")
	next.WritePEMKeystore(t, self.keystore, "")
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, addr, cfg); err != nil {
		t.Fatal(err)
	}
	if got := (<-acc).state.PeerCertificates[0].SerialNumber; got.Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatalf("presented serial %v after the reload, want %v", got, next.Cert.SerialNumber)
	}
}
