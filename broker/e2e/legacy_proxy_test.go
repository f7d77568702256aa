package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionProxy is a user-space Kafka proxy in front of one broker, for the
// old-client tests. It answers ApiVersions as a broker of an old Kafka
// release would (the broker's answer with every key's maximum clamped to
// that release's and the keys it lacked removed), so that a client
// configured for that release picks the versions it would pick against
// it; librdkafka asks ApiVersions whenever its broker.version.fallback is
// 0.10.0 or later. It also records which (API, version) each request used
// and, for Produce, the magic and codec of every partition's first
// message, so a test can prove the old formats were on the wire.
type versionProxy struct {
	t  testing.TB
	ln net.Listener

	mu struct {
		sync.Mutex
		target  string
		profile map[int16]int16 // nil: ApiVersions passes unchanged
		seen    map[string]int
		conns   []net.Conn
	}
	wg sync.WaitGroup
}

// kafkaMaxVersions are the client API versions old Kafka releases served
// (their ApiVersions answers): key to maximum version.
var kafkaMaxVersions = map[string]map[int16]int16{
	"0.10.0": {0: 2, 1: 2, 2: 0, 3: 1, 8: 2, 9: 1, 10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, 17: 0, 18: 0},
	"0.10.2": {0: 2, 1: 3, 2: 1, 3: 2, 8: 2, 9: 2, 10: 0, 11: 1, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, 17: 0, 18: 0, 19: 1, 20: 0},
}

// startVersionProxy listens on a free 127.0.0.1 port; target is dialed per
// connection, so the broker may start after the proxy (advertising it).
func startVersionProxy(t testing.TB) *versionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &versionProxy{t: t, ln: ln}
	p.mu.seen = map[string]int{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *versionProxy) addr() string { return p.ln.Addr().String() }

// setTarget names the broker the proxy forwards to.
func (p *versionProxy) setTarget(addr string) {
	p.mu.Lock()
	p.mu.target = addr
	p.mu.Unlock()
}

// setProfile makes ApiVersions answer as release does ("" passes through)
// and forgets what was seen.
func (p *versionProxy) setProfile(release string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.profile = kafkaMaxVersions[release]
	if release != "" && p.mu.profile == nil {
		p.t.Fatalf("no ApiVersions profile for Kafka %s", release)
	}
	p.mu.seen = map[string]int{}
}

// seen returns what the requests since the last setProfile used.
func (p *versionProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.mu.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (p *versionProxy) saw(what string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.seen[what] > 0
}

func (p *versionProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *versionProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.mu.target
		p.mu.Unlock()
		up, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.mu.conns = append(p.mu.conns, c, up)
		p.mu.Unlock()
		pending := make(chan [2]int32, 64) // ApiVersions requests: corr id, version
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.requests(c, up, pending) }()
		go func() { defer p.wg.Done(); p.responses(up, c, pending) }()
	}
}

// readKafkaFrame reads one size-prefixed Kafka frame (at most 64 MiB).
func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeKafkaFrame(w io.Writer, body []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	return err
}

// requests forwards client frames, noting what each one is.
func (p *versionProxy) requests(c, up net.Conn, pending chan<- [2]int32) {
	defer up.Close()
	defer close(pending)
	for {
		f, err := readKafkaFrame(c)
		if err != nil || len(f) < 8 {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(f)), int16(binary.BigEndian.Uint16(f[2:]))
		corr := int32(binary.BigEndian.Uint32(f[4:]))
		p.note(key, version, f)
		if key == 18 {
			pending <- [2]int32{corr, int32(version)}
		}
		if writeKafkaFrame(up, f) != nil {
			return
		}
	}
}

// note records a request's API and version, and for Produce the message
// format and codec of each partition's records.
func (p *versionProxy) note(key, version int16, frame []byte) {
	name := kmsg.NameForKey(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.seen[fmt.Sprintf("%s v%d", name, version)]++
	if key != 0 {
		return
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	body, ok := skipRequestHeader(frame, req.IsFlexible())
	if !ok || req.ReadFrom(body) != nil {
		p.mu.seen["Produce undecodable"]++
		return
	}
	for _, t := range req.Topics {
		for _, part := range t.Partitions {
			r := part.Records
			if len(r) < 23 {
				continue
			}
			magic, codec := r[16], r[17]&7 // magic 0 and 1: attributes follow the magic
			if magic == 2 {
				codec = r[22] & 7 // low byte of the int16 attributes
			}
			p.mu.seen[fmt.Sprintf("Produce v%d magic %d codec %d", version, magic, codec)]++
		}
	}
}

// skipRequestHeader returns the request body after the header (key,
// version, correlation id, client id, and tagged fields when flexible).
func skipRequestHeader(f []byte, flexible bool) ([]byte, bool) {
	if len(f) < 10 {
		return nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(f[8:])))
	rest := f[10:]
	if n > 0 {
		if n > len(rest) {
			return nil, false
		}
		rest = rest[n:]
	}
	if flexible {
		if len(rest) == 0 || rest[0] != 0 {
			return nil, false // no client sends header tags
		}
		rest = rest[1:]
	}
	return rest, true
}

// responses forwards broker frames, rewriting ApiVersions answers.
func (p *versionProxy) responses(up, c net.Conn, pending <-chan [2]int32) {
	defer c.Close()
	var queue [][2]int32 // ApiVersions requests not answered yet, in order
	for {
		f, err := readKafkaFrame(up)
		if err != nil || len(f) < 4 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(f))
	drain:
		for {
			select {
			case pv, ok := <-pending:
				if !ok {
					break drain
				}
				queue = append(queue, pv)
			default:
				break drain
			}
		}
		if len(queue) > 0 && queue[0][0] == corr {
			f = p.rewriteApiVersions(f, int16(queue[0][1]))
			queue = queue[1:]
		}
		if writeKafkaFrame(c, f) != nil {
			return
		}
	}
}

// rewriteApiVersions clamps an ApiVersions response (its header is always
// the correlation id alone) to the profile.
func (p *versionProxy) rewriteApiVersions(f []byte, version int16) []byte {
	p.mu.Lock()
	profile := p.mu.profile
	p.mu.Unlock()
	if profile == nil {
		return f
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if err := resp.ReadFrom(f[4:]); err != nil || resp.ErrorCode != 0 {
		return f
	}
	keys := resp.ApiKeys[:0]
	for _, k := range resp.ApiKeys {
		if max, ok := profile[k.ApiKey]; ok && k.MinVersion <= max {
			k.MaxVersion = min(k.MaxVersion, max)
			keys = append(keys, k)
		}
	}
	resp.ApiKeys = keys
	return resp.AppendTo(f[:4:4])
}
