package e2e

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secCerts is a directory of certificates made by `strata certs create`.
type secCerts struct {
	dir        string
	truststore string
}

// makeCerts runs `strata certs create --dir <new dir>` with args.
func makeCerts(t *testing.T, args ...string) *secCerts {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	runCmd(t, 30*time.Second, "", strataBin, append([]string{"certs", "create", "--dir", dir}, args...)...)
	return &secCerts{dir: dir, truststore: filepath.Join(dir, "truststore.pem")}
}

func (c *secCerts) path(name string) string { return filepath.Join(c.dir, name) }

// ca loads the CA that strata certs create made, to issue what the
// command does not make (an expired certificate).
func (c *secCerts) ca(t *testing.T) *tlstest.CA {
	t.Helper()
	certPEM, err := os.ReadFile(c.path("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(c.path("ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		t.Fatal("ca.pem or ca.key: no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("ca.key: a %T, not a signer", key)
	}
	return &tlstest.CA{Cert: cert, Key: signer}
}

// listenerAddrs picks a free 127.0.0.1 address for each listener name.
func listenerAddrs(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		out[n] = freeAddr(t)
	}
	return out
}

func listenersValue(addrs map[string]string, names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, n+"://"+addrs[n])
	}
	return strings.Join(parts, ",")
}

// secBroker is one broker with every kind of listener the security tests
// use, and the files its clients need.
type secBroker struct {
	*Broker
	certs *secCerts
	addrs map[string]string // listener name -> 127.0.0.1:port
	// alice is the SCRAM user; alicePass her password.
	alicePass string
}

// secListeners: PLAINTEXT for the test's own admin client; SSL with
// client certificates required; SASL_SSL with SCRAM-SHA-512;
// SASL_PLAINTEXT with both SCRAM mechanisms and OAUTH (SASL_PLAINTEXT)
// with OAUTHBEARER's unsecured validator, for franz-go's own tests.
var secListeners = []string{"PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT", "OAUTH"}

func startSecBroker(t *testing.T) *secBroker {
	t.Helper()
	certs := makeCerts(t, "--hosts", "127.0.0.1,localhost", "--client", "alice")
	addrs := listenerAddrs(t, secListeners...)
	b := StartBroker(t,
		"listeners="+listenersValue(addrs, secListeners...),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,OAUTH:SASL_PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"num.partitions=3",
		"ssl.keystore.location="+certs.path("broker.pem"),
		"ssl.truststore.location="+certs.truststore,
		"listener.name.ssl.ssl.client.auth=required",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
	)
	b.Addr = addrs["PLAINTEXT"]
	sb := &secBroker{Broker: b, certs: certs, addrs: addrs, alicePass: "alice-Secret-1"}
	sb.addScramUser(t, "alice", sb.alicePass)
	return sb
}

// addScramUser sets user's SCRAM-SHA-256 and -512 credentials through the
// PLAINTEXT listener, and waits until the SASL_SSL listener lets the user
// in.
func (b *secBroker) addScramUser(t *testing.T, user, pass string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs["PLAINTEXT"]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs %s: %v", user, err)
	}
}

// kcatArgs are the librdkafka settings of a client of listener.
func (b *secBroker) kcatArgs(listener string, extra ...string) []string {
	args := []string{"-b", b.addrs[listener]}
	switch listener {
	case "SSL":
		args = append(args, "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+b.certs.truststore,
			"-X", "ssl.certificate.location="+b.certs.path("client-alice.pem"), "-X", "ssl.key.location="+b.certs.path("client-alice.pem"))
	case "SASL_SSL":
		args = append(args, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password="+b.alicePass, "-X", "ssl.ca.location="+b.certs.truststore)
	}
	return append(args, extra...)
}

// pyConf is the same for confluent_kafka, as a JSON object.
func (b *secBroker) pyConf(listener string) map[string]string {
	c := map[string]string{"bootstrap.servers": b.addrs[listener]}
	switch listener {
	case "SSL":
		c["security.protocol"] = "SSL"
		c["ssl.ca.location"] = b.certs.truststore
		c["ssl.certificate.location"] = b.certs.path("client-alice.pem")
		c["ssl.key.location"] = b.certs.path("client-alice.pem")
	case "SASL_SSL":
		c["security.protocol"] = "SASL_SSL"
		c["sasl.mechanisms"] = "SCRAM-SHA-512"
		c["sasl.username"] = "alice"
		c["sasl.password"] = b.alicePass
		c["ssl.ca.location"] = b.certs.truststore
	}
	return c
}

// pySecurityClient is run by Debian's Python with confluent_kafka
// (librdkafka): "produce CONF TOPIC PREFIX N" produces N values PREFIX-i
// and prints the delivery reports; "consume CONF TOPIC" reads every
// partition from offset 0 to its high watermark; "probe CONF" asks for
// metadata and prints the errors librdkafka reported. CONF is a JSON
// object of librdkafka settings.
const pySecurityClient = `
import json, sys, time
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaException

mode, conf = sys.argv[1], json.loads(sys.argv[2])
errors = []
conf['error_cb'] = lambda e: errors.append(str(e))
if mode == 'produce':
    topic, prefix, n = sys.argv[3], sys.argv[4], int(sys.argv[5])
    p = Producer(dict(conf, **{'enable.idempotence': True, 'acks': 'all'}))
    acked, failed = [], []
    def report(err, msg):
        if err is not None:
            failed.append([msg.value().decode(), str(err)])
        else:
            acked.append([msg.partition(), msg.offset(), msg.value().decode()])
    for i in range(n):
        p.produce(topic, key='k%d' % (i % 7), value='%s-%d' % (prefix, i), on_delivery=report)
        p.poll(0)
    left = p.flush(60)
    json.dump({'acked': acked, 'failed': failed, 'left': left, 'errors': errors[:10]}, sys.stdout)
elif mode == 'consume':
    topic = sys.argv[3]
    c = Consumer(dict(conf, **{'group.id': 'py-sec', 'enable.auto.commit': False}))
    md = c.list_topics(topic, timeout=20)
    parts = sorted(md.topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    got, pos = [], {p: 0 for p in parts}
    deadline = time.time() + 60
    while any(pos[p] < ends[p] for p in parts) and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
            continue
        got.append([m.partition(), m.offset(), m.value().decode()])
        pos[m.partition()] = m.offset() + 1
    c.close()
    json.dump({'records': got, 'ends': {str(k): v for k, v in ends.items()}, 'errors': errors[:10]}, sys.stdout)
elif mode == 'probe':
    p = Producer(conf)
    # error_cb runs from poll: wait for librdkafka's first error (or 15 s).
    deadline = time.time() + 15
    while not errors and time.time() < deadline:
        p.poll(0.2)
    ok = True
    try:
        p.list_topics(timeout=2)
    except KafkaException as e:
        ok = False
        errors.append(str(e))
    json.dump({'ok': ok, 'errors': errors[:10]}, sys.stdout)
`

type pyProduced struct {
	Acked  [][]any    `json:"acked"`
	Failed [][]string `json:"failed"`
	Left   int        `json:"left"`
	Errors []string   `json:"errors"`
}

func runPySecurity(t *testing.T, timeout time.Duration, out any, args ...string) {
	t.Helper()
	raw := runCmd(t, timeout, "", debianPython, append([]string{"-c", pySecurityClient}, args...)...)
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		t.Fatalf("python %s: %v\n%s", args[0], err, tailString(raw, 4096))
	}
}

func jsonArg(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kcatFails runs kcat -L with args, which must fail, and returns its
// output (stderr and stdout).
func kcatFails(t *testing.T, what string, args ...string) string {
	t.Helper()
	start := time.Now()
	stdout, stderr, err := tryCmd(60*time.Second, "", "kcat", append([]string{"-L", "-m", "2"}, args...)...)
	t.Logf("%s: kcat failed after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Errorf("%s: kcat -L succeeded; want a failure\n%s", what, tailString(stdout, 1024))
	}
	return stderr + stdout
}

// TestSecurityRealClients runs kcat and librdkafka (python3-confluent-kafka)
// against one broker over SSL with a client certificate (mTLS) and over
// SASL_SSL with SCRAM-SHA-512: each produces, consumes back and the history
// checker compares the acknowledged records with the log. Meanwhile a
// franz-go producer over SASL_SSL keeps producing while four bad clients
// fail one after the other: a wrong password, an expired client
// certificate, a client certificate of another CA, plaintext to the TLS
// port. Each fails with the client's own error text, and the producer and
// the good clients keep working.
func TestSecurityRealClients(t *testing.T) {
	requireKcat(t)
	requireConfluentKafka(t)
	b := startSecBroker(t)
	const topic = "sec-clients"
	hist := history.New()
	tp := func(p int32) history.TP { return history.TP{Topic: topic, Partition: p} }

	// A franz-go producer over SASL_SSL, from the start to the end.
	tlsCfg := &tls.Config{RootCAs: x509.NewCertPool()}
	caPEM, err := os.ReadFile(b.certs.truststore)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.RootCAs.AppendCertsFromPEM(caPEM)
	bg, err := kgo.NewClient(kgo.SeedBrokers(b.addrs["SASL_SSL"]), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: "alice", Pass: b.alicePass}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var bgWG sync.WaitGroup
	bgStop := make(chan struct{})
	var bgMu sync.Mutex
	bgAcked := 0
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		for i := 0; i < 100000; i++ {
			select {
			case <-bgStop:
				return
			default:
			}
			v := fmt.Sprintf("franz-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			r := &kgo.Record{Value: []byte(v)}
			res := bg.ProduceSync(ctx, r)
			cancel()
			rec, err := res.First()
			if rec != nil && rec.Partition >= 0 {
				hist.Sent("franz", tp(rec.Partition), v)
				if err == nil {
					hist.Answered(tp(rec.Partition), v, history.Acked, rec.Offset, "")
					bgMu.Lock()
					bgAcked++
					bgMu.Unlock()
				} else {
					hist.Answered(tp(rec.Partition), v, history.Unknown, -1, err.Error())
				}
			} else if err != nil {
				t.Errorf("franz-go producer over SASL_SSL: %v", err)
				return
			}
			select { // paced, not flooding
			case <-bgStop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	stopBG := func() {
		close(bgStop)
		bgWG.Wait()
		bg.Close()
	}
	defer func() {
		select {
		case <-bgStop:
		default:
			stopBG()
		}
	}()
	bgAckedNow := func() int {
		bgMu.Lock()
		defer bgMu.Unlock()
		return bgAcked
	}
	waitBG := func(what string) {
		t.Helper()
		n0 := bgAckedNow()
		if !poll.For(30*time.Second, func() bool { return bgAckedNow() >= n0+5 }) {
			t.Fatalf("%s: the franz-go SASL_SSL producer got no acknowledgements for 30s (%d in all)", what, bgAckedNow())
		}
	}
	waitBG("start")

	// kcat produces over both listeners; kcat's exit status 0 means every
	// message was delivered (offsets are not printed: the checker finds
	// them in the log).
	for _, l := range []string{"SSL", "SASL_SSL"} {
		var in strings.Builder
		for i := range 200 {
			fmt.Fprintf(&in, "kcat-%s-%d\n", l, i)
		}
		runCmd(t, 60*time.Second, in.String(), "kcat", b.kcatArgs(l, "-P", "-t", topic)...)
		// Which partition each went to is read back below; the history
		// learns of them then.
	}
	// librdkafka (python) produces over both listeners with
	// delivery reports.
	for _, l := range []string{"SSL", "SASL_SSL"} {
		var res pyProduced
		runPySecurity(t, 90*time.Second, &res, "produce", jsonArg(t, b.pyConf(l)), topic, "py-"+l, "300")
		if len(res.Failed) > 0 || res.Left > 0 || len(res.Acked) != 300 {
			t.Fatalf("python over %s: %d acknowledged of 300, %d failed (%v), %d left, errors %v", l, len(res.Acked), len(res.Failed), res.Failed[:min(3, len(res.Failed))], res.Left, res.Errors)
		}
		for _, a := range res.Acked {
			p, off, v := int32(a[0].(float64)), int64(a[1].(float64)), a[2].(string)
			hist.Sent("py-"+l, tp(p), v)
			hist.Answered(tp(p), v, history.Acked, off, "")
		}
		t.Logf("python (librdkafka) over %s: 300 acknowledged", l)
	}

	// The failures, one at a time, each while the others keep working.
	other := makeCerts(t, "--client", "mallory")
	expired := b.certs.ca(t).Expired(t, pkix.Name{CommonName: "old"}).WritePEMKeystore(t, filepath.Join(t.TempDir(), "expired.pem"), "")
	for _, f := range []struct {
		name string
		args []string
		py   map[string]string
		want *regexp.Regexp
	}{
		{"wrong password", b.kcatArgs("SASL_SSL", "-X", "sasl.password=not-alices"), nil,
			regexp.MustCompile(`SASL authentication error: Authentication failed`)},
		{"expired client certificate", []string{"-b", b.addrs["SSL"], "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + b.certs.truststore,
			"-X", "ssl.certificate.location=" + expired, "-X", "ssl.key.location=" + expired}, nil,
			regexp.MustCompile(`(?i)certificate expired`)},
		{"client certificate of another CA", []string{"-b", b.addrs["SSL"], "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + b.certs.truststore,
			"-X", "ssl.certificate.location=" + other.path("client-mallory.pem"), "-X", "ssl.key.location=" + other.path("client-mallory.pem")}, nil,
			regexp.MustCompile(`(?i)unknown ca`)},
		{"plaintext to the TLS port", []string{"-b", b.addrs["SSL"]}, nil,
			regexp.MustCompile(`security\.protocol`)},
	} {
		out := kcatFails(t, f.name, f.args...)
		if !f.want.MatchString(out) {
			t.Errorf("%s: kcat's output does not match %q:\n%s", f.name, f.want, tailString(out, 2048))
		} else {
			for _, line := range strings.Split(out, "\n") {
				if f.want.MatchString(line) {
					t.Logf("%s: kcat says %s", f.name, strings.TrimSpace(line))
					break
				}
			}
		}
		waitBG("after " + f.name)
	}
	// The same failures through librdkafka's python binding, whose
	// errors are librdkafka's: the wrong password and the expired
	// certificate.
	for _, f := range []struct {
		name string
		conf map[string]string
		want string
	}{
		{"python wrong password", func() map[string]string { c := b.pyConf("SASL_SSL"); c["sasl.password"] = "nope"; return c }(), "Authentication failed"},
		{"python expired certificate", func() map[string]string {
			c := b.pyConf("SSL")
			c["ssl.certificate.location"], c["ssl.key.location"] = expired, expired
			return c
		}(), "certificate expired"},
	} {
		var res struct {
			OK     bool     `json:"ok"`
			Errors []string `json:"errors"`
		}
		runPySecurity(t, 60*time.Second, &res, "probe", jsonArg(t, f.conf))
		joined := strings.Join(res.Errors, "\n")
		if res.OK || !strings.Contains(joined, f.want) {
			t.Errorf("%s: ok=%v, errors %q; want a failure saying %q", f.name, res.OK, joined, f.want)
		}
		waitBG("after " + f.name)
	}
	// The broker says why, per connection.
	for _, want := range []string{"authentication", "certificate"} {
		if !strings.Contains(strings.ToLower(b.Output()), want) {
			t.Errorf("broker log does not mention %q for the failed clients", want)
		}
	}
	stopBG()
	t.Logf("franz-go over SASL_SSL: %d acknowledged while the bad clients failed", bgAckedNow())

	// Read back: kcat over SSL (mTLS), python over SASL_SSL, and the
	// test's own client on PLAINTEXT for the final log.
	got := map[int32][]kcatRecord{}
	out := runCmd(t, 60*time.Second, "", "kcat", b.kcatArgs("SSL", "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%p %o %s\n`)...)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			t.Fatalf("kcat line %q", line)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		got[int32(p)] = append(got[int32(p)], kcatRecord{Partition: int32(p), Offset: o, Value: f[2]})
		hist.Read("kcat-ssl", tp(int32(p)), o, f[2])
		if strings.HasPrefix(f[2], "kcat-") {
			// kcat exited 0 after producing: each was acknowledged.
			hist.Sent("kcat", tp(int32(p)), f[2])
			hist.Answered(tp(int32(p)), f[2], history.Acked, o, "")
		}
	}
	var pyRead struct {
		Records [][]any  `json:"records"`
		Errors  []string `json:"errors"`
	}
	runPySecurity(t, 90*time.Second, &pyRead, "consume", jsonArg(t, b.pyConf("SASL_SSL")), topic)
	for _, r := range pyRead.Records {
		hist.Read("py-sasl-ssl", tp(int32(r[0].(float64))), int64(r[1].(float64)), r[2].(string))
	}
	c := &Cluster{brokers: []*Broker{b.Broker}}
	final := c.readLog(t, topic, []int32{0, 1, 2})
	nkcat := 0
	for _, recs := range final {
		for _, r := range recs {
			if strings.HasPrefix(string(r.Value), "kcat-") {
				nkcat++
			}
		}
	}
	if nkcat != 400 {
		t.Errorf("%d kcat records in the log, want the 400 kcat produced", nkcat)
	}
	total := 0
	for _, recs := range final {
		total += len(recs)
	}
	if len(pyRead.Records) != total {
		t.Errorf("python over SASL_SSL read %d records, the log has %d (errors %v)", len(pyRead.Records), total, pyRead.Errors)
	}
	rep := hist.Check(finalLog(topic, final))
	t.Logf("history: %s", rep)
	if !rep.OK() || rep.Lost != 0 {
		t.Fatalf("history check failed: %s", rep)
	}
}

// TestSecurityFranzGoSuite runs franz-go's own integration tests that need
// SASL (TestSCRAMAuth, TestSCRAMAuthBadCredentials, TestOAuthAuth from
// github.com/twmb/franz-go/pkg/kgo at the version in go.mod) as a
// subprocess against the broker's SASL_PLAINTEXT listeners: SCRAM users
// in the embedded coordinator and OAUTHBEARER with the unsecured
// validator. Each must run and pass, not skip.
func TestSecurityFranzGoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests do not run with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command to build franz-go's tests: %v", err)
	}
	b := startSecBroker(t)
	b.addScramUser(t, "kgo", "kgo-secret")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "github.com/twmb/franz-go/pkg/kgo",
		"-run", "^(TestSCRAMAuth|TestSCRAMAuthBadCredentials|TestOAuthAuth)$", "-count=1", "-v")
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+b.addrs["PLAINTEXT"],
		"KGO_TEST_SCRAM_SEEDS="+b.addrs["SASL_PLAINTEXT"],
		"KGO_TEST_SCRAM=kgo:kgo-secret:512",
		"KGO_TEST_OAUTH_SEEDS="+b.addrs["OAUTH"],
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("go test franz-go/pkg/kgo (build and run) took %v", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("franz-go's tests: %v\n%s", err, tailString(string(out), 8192))
	}
	for _, name := range []string{"TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth"} {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass (skipped or not run):\n%s", name, tailString(string(out), 4096))
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Errorf("a franz-go test skipped:\n%s", tailString(string(out), 4096))
	}
	t.Logf("franz-go:\n%s", tailString(string(out), 2048))
}

// produceHist produces n records per partition with acks=all (kgo's
// idempotent default) through c and notes each in hist.
func produceHist(t *testing.T, c *Cluster, hist *history.History, topic string, parts []int32, n int, prefix string) {
	t.Helper()
	cl := c.newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	produceHistWith(t, cl, hist, topic, parts, n, prefix)
}

// produceHistWith is produceHist through the client cl (which must
// partition manually): values prefix-partition-i.
func produceHistWith(t *testing.T, cl *kgo.Client, hist *history.History, topic string, parts []int32, n int, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for _, p := range parts {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			tp := history.TP{Topic: topic, Partition: p}
			hist.Sent(prefix, tp, v)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					hist.Answered(tp, v, history.Unknown, -1, err.Error())
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				hist.Answered(tp, v, history.Acked, r.Offset, "")
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("producing to %s with acks=all: %v", topic, firstErr)
	}
}

// followerLogEnds reads the log end of each partition of topic in the
// data directory of b with `strata tier status` (read only, the broker
// running).
func followerLogEnds(t *testing.T, b *Broker, topic string) map[int32]int64 {
	t.Helper()
	out := runCmd(t, 30*time.Second, "", strataBin, "tier", "status", topic, "--format", "json", "--override", "log.dirs="+b.Dir, "--override", "metrics.listener=")
	var st struct {
		Partitions []struct {
			Partition int32  `json:"partition"`
			LogEnd    *int64 `json:"log_end_offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("tier status: %v\n%s", err, tailString(out, 2048))
	}
	ends := map[int32]int64{}
	for _, p := range st.Partitions {
		if p.LogEnd != nil {
			ends[p.Partition] = *p.LogEnd
		}
	}
	return ends
}

// TestSecurityClusterMTLS runs three ZooKeeper brokers whose inter-broker
// listener is SSL (client certificates required), each with its own
// certificate from strata certs create, so replication runs over mutual
// TLS: a topic with replication factor 3 and min.insync.replicas=2 takes
// acks=all records, keeps a full ISR, every follower's log reaches the
// leader's end, and the records read back pass the history check. Then a
// fourth broker joins with a certificate of the same CA for another host:
// the leaders refuse its replication calls (PermissionDenied, in both
// logs), it never joins the ISR of the partitions it is assigned, while
// the others keep replicating and acks=all keeps working.
func TestSecurityClusterMTLS(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	certs := makeCerts(t, "--hosts", "127.0.0.1,broker-{id}.local", "--broker-id", "1,2,3")
	runCmd(t, 30*time.Second, "", strataBin, "certs", "create", "--dir", certs.dir, "--hosts", "broker-4.elsewhere.example", "--broker-id", "4")
	c := &Cluster{ZK: zktest.Start(t)}
	c.Connect = c.ZK.ConnectString("/strata")
	start := func(id int) *Broker {
		addrs := listenerAddrs(t, "PLAINTEXT", "INTERNAL")
		b := StartBroker(t, c.brokerOverrides(id, []string{
			"listeners=" + listenersValue(addrs, "PLAINTEXT", "INTERNAL"),
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
			"inter.broker.listener.name=INTERNAL",
			"ssl.keystore.location=" + certs.path(fmt.Sprintf("broker-%d.pem", id)),
			"ssl.truststore.location=" + certs.truststore,
			"listener.name.internal.ssl.client.auth=required",
			"replica.lag.time.max.ms=3000",
		})...)
		b.Addr = addrs["PLAINTEXT"]
		c.brokers = append(c.brokers, b)
		return b
	}
	for id := 1; id <= 3; id++ {
		start(id)
	}
	c.waitAllSee(t, 30*time.Second, 3)

	hist := history.New()
	const topic = "sec-mtls"
	parts := []int32{0, 1, 2}
	c.createTopicWith(t, topic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	produceHist(t, c, hist, topic, parts, 200, "rf3")
	md := c.waitFullISR(t, 30*time.Second, topic, 3, false)
	ends := map[int32]int64{}
	for _, p := range parts {
		ends[p] = 200
	}
	// Every replica's log reaches the end the leader acknowledged.
	for _, id := range c.IDs() {
		var got map[int32]int64
		poll.For(30*time.Second, func() bool {
			got = followerLogEnds(t, c.Broker(id), topic)
			return fmt.Sprint(got) == fmt.Sprint(ends)
		})
		if fmt.Sprint(got) != fmt.Sprint(ends) {
			t.Errorf("broker %d's log ends %v, want %v (leaders %v)", id, got, ends, leadersOf(md, topic))
		}
	}

	// Broker 4 with a certificate for another host.
	bad := start(4)
	c.waitAllSee(t, 30*time.Second, 4)
	const badTopic = "sec-mtls-wronghost"
	// Partition 0 on 1,2,4 (led by 1), partition 1 on 2,3,4 (led by 2).
	assign := map[int32][]int32{0: {1, 2, 4}, 1: {2, 3, 4}}
	createAssigned(t, c, badTopic, assign, map[string]string{"min.insync.replicas": "2"})
	produceHist(t, c, hist, badTopic, []int32{0, 1}, 100, "bad")
	produceHist(t, c, hist, topic, parts, 100, "rf3-more")
	// Broker 4 never gets into an ISR; 1,2,3 stay in theirs.
	c.WaitMetadata(t, 30*time.Second, "ISRs without broker 4, full otherwise", func(m kadm.Metadata) string {
		for p, reps := range assign {
			d := m.Topics[badTopic].Partitions[p]
			want := reps[:2]
			if !sameMembers(d.ISR, want) {
				return fmt.Sprintf("%s-%d: isr %v, want %v", badTopic, p, d.ISR, want)
			}
		}
		for p, d := range m.Topics[topic].Partitions {
			if len(d.ISR) != 3 {
				return fmt.Sprintf("%s-%d: isr %v", topic, p, d.ISR)
			}
		}
		return ""
	})
	looks := 0
	poll.For(2*time.Second, func() bool { // and stays out: looks for 2 s
		looks++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := c.Metadata(ctx, t)
		cancel()
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		for p := range assign {
			if isr := m.Topics[badTopic].Partitions[p].ISR; slicesContains(isr, 4) {
				t.Fatalf("%s-%d: broker 4 (certificate for another host) is in the ISR %v", badTopic, p, isr)
			}
		}
		return false
	})
	t.Logf("broker 4 stayed out of the ISR over %d looks", looks)
	poll.For(30*time.Second, func() bool { return strings.Contains(bad.Output(), "PermissionDenied") })
	if !strings.Contains(bad.Output(), "PermissionDenied") {
		t.Errorf("broker 4's log does not say PermissionDenied:\n%s", tailString(bad.Output(), 4096))
	}
	leaderSaid := false
	for _, id := range []int32{1, 2} {
		if strings.Contains(c.Broker(id).Output(), "not valid for") {
			leaderSaid = true
		}
	}
	if !leaderSaid {
		t.Errorf("neither leader (1, 2) logged the refused certificate")
	}
	if e := followerLogEnds(t, bad, badTopic); e[0] != 0 || e[1] != 0 {
		t.Errorf("broker 4 holds records of %s: log ends %v, want none", badTopic, e)
	}

	final := finalLog(topic, c.readLog(t, topic, parts))
	for tp, recs := range finalLog(badTopic, c.readLog(t, badTopic, []int32{0, 1})) {
		final[tp] = recs
	}
	rep := hist.Check(final)
	t.Logf("history: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %s", rep)
	}
}

func slicesContains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// createAssigned creates topic with a manual replica assignment and waits
// until each partition has its first replica as leader.
func createAssigned(t *testing.T, c *Cluster, topic string, assign map[int32][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = -1
	rt.ReplicationFactor = -1
	for p := int32(0); p < int32(len(assign)); p++ {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition = p
		ra.Replicas = assign[p]
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	if e := resp.Topics[0].ErrorCode; e != 0 {
		t.Fatalf("CreateTopics %s: error %d %v", topic, e, resp.Topics[0].ErrorMessage)
	}
	c.WaitMetadata(t, 30*time.Second, topic+" led by its first replicas", func(m kadm.Metadata) string {
		td, ok := m.Topics[topic]
		if !ok || len(td.Partitions) != len(assign) {
			return "not listed"
		}
		for p, reps := range assign {
			if d := td.Partitions[p]; d.Leader != reps[0] {
				return fmt.Sprintf("partition %d led by %d", p, d.Leader)
			}
		}
		return ""
	})
}
