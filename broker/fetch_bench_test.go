package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetch reads a partition from the page cache over loopback with
// raw Fetch requests, by response size: PLAINTEXT with zero copy
// (sendfile) and without, and over an SSL listener (TLS 1.3,
// AES-128-GCM or whatever Go picks; TLS forbids sendfile, so the broker
// reads and encrypts). The client discards the bytes (after decrypting
// them, for TLS), so the numbers are the broker's send path plus, for
// TLS, the client's decryption; cpu-s/GB is the whole process's CPU time
// (getrusage) per GB sent. The requests are Fetch v12 (by topic name),
// and in zerocopy-v17 Fetch v17 (by topic id), zero copy:
//
//	go test ./broker -run '^$' -bench 'BenchmarkFetch$' -benchtime 2s
func BenchmarkFetch(b *testing.B) {
	for _, mode := range []string{"zerocopy", "zerocopy-v17", "copy", "tls"} {
		for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
			name := mode + "/" + strconv.Itoa(size>>10) + "KiB"
			b.Run(name, func(b *testing.B) { benchFetch(b, mode, int32(size)) })
		}
	}
}

func benchFetch(b *testing.B, mode string, maxBytes int32) {
	props := map[string]string{
		"listeners":              "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":       "",
		"log.dirs":               b.TempDir(),
		"strata.fetch.zero.copy": strconv.FormatBool(strings.HasPrefix(mode, "zerocopy")),
	}
	var clientTLS *tls.Config
	if mode == "tls" {
		ca := tlstest.NewCA(b, "bench CA")
		props["listeners"] = "SSL://127.0.0.1:0"
		props["ssl.keystore.location"] = ca.Server(b, "127.0.0.1").WritePEMKeystore(b, filepath.Join(b.TempDir(), "ks.pem"), "")
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		clientTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}
	cfg, err := ConfigFromProperties(props)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	defer func() { _ = s.Shutdown(b.Context()) }()
	if _, err := s.createTopic(createTopicSpec{name: "bench", partitions: 1, replFactor: 1}); err != nil {
		b.Fatal(err)
	}
	p := s.topic("bench").parts[0]
	log := p.log
	spec := segment.BatchSpec{}
	for i := 0; i < 1000; i++ {
		spec.Records = append(spec.Records, segment.Record{Value: make([]byte, 1000)})
	}
	for log.LogEndOffset() < 64000 { // about 64 MB
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := log.Append(batch, segment.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	end := log.LogEndOffset()
	p.repl.AdvanceHighWatermark() // one replica: everything appended is committed
	if hw := log.HighWatermark(); hw != end {
		b.Fatalf("high watermark %d, log end %d", hw, end)
	}

	var c net.Conn
	if clientTLS != nil {
		c, err = tls.Dial("tcp", s.Addr().String(), clientTLS)
	} else {
		c, err = net.Dial("tcp", s.Addr().String())
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fmtr := kmsg.NewRequestFormatter()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "bench"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if mode == "zerocopy-v17" {
		req.Version, req.Topics[0].TopicID = 17, s.topic("bench").id
	}
	buf := make([]byte, 1<<20)
	var offset int64
	var total int64
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Topics[0].Partitions[0].FetchOffset = offset
		if _, err := c.Write(fmtr.AppendRequest(nil, req, int32(i))); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int64(binary.BigEndian.Uint32(size[:]))
		if _, err := io.CopyBuffer(io.Discard, io.LimitReader(c, n), buf); err != nil {
			b.Fatal(err)
		}
		total += n
		// Advance by roughly what was fetched; wrap at the end.
		offset += max(n/1070, 1000)
		offset -= offset % 1000
		if offset >= end {
			offset = 0
		}
	}
	b.StopTimer()
	b.SetBytes(total / int64(b.N))
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/(float64(total)/1e9), "cpu-s/GB")
	st := s.Stats()
	b.ReportMetric(float64(st.FetchZeroCopyBytes)/float64(b.N), "sendfile-B/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
