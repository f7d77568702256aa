package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPITableFacts checks the conformance table's own consistency: keys
// sorted and unique, names as kmsg knows them, ranges well formed, an
// owning issue for every difference from Kafka 3.9's range.
func TestAPITableFacts(t *testing.T) {
	for i, a := range Kafka39APIs {
		if i > 0 && Kafka39APIs[i-1].Key >= a.Key {
			t.Errorf("key %d: table not sorted by key", a.Key)
		}
		req := kmsg.RequestForKey(a.Key)
		if req == nil {
			t.Errorf("key %d (%s): unknown to kmsg", a.Key, a.Name)
			continue
		}
		if req.MaxVersion() < a.KafkaMax {
			t.Errorf("key %d (%s): kmsg knows up to v%d, Kafka 3.9 serves v%d", a.Key, a.Name, req.MaxVersion(), a.KafkaMax)
		}
		if a.KafkaMin < 0 || a.KafkaMin > a.KafkaMax {
			t.Errorf("key %d (%s): Kafka range %d-%d", a.Key, a.Name, a.KafkaMin, a.KafkaMax)
		}
		if a.Served() && (a.StrataMin < 0 || a.StrataMin > a.StrataMax) || !a.Served() && a.StrataMin != -1 {
			t.Errorf("key %d (%s): Strata range %d-%d", a.Key, a.Name, a.StrataMin, a.StrataMax)
		}
		if st := a.Status(); (st == "narrower" || st == "not served") && a.Issue == 0 {
			t.Errorf("key %d (%s): %s without an owning issue", a.Key, a.Name, st)
		}
		if a.Status() != "full range" && a.Note == "" {
			t.Errorf("key %d (%s): %s without a note", a.Key, a.Name, a.Status())
		}
	}
}

// conformanceRequest is the minimal valid request for key at version v.
func conformanceRequest(t *testing.T, key, v int16) kmsg.Request {
	t.Helper()
	req := kmsg.RequestForKey(key)
	req.SetVersion(v)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Acks, r.TimeoutMillis = -1, 5000
	case *kmsg.FetchRequest:
		r.MaxWaitMillis, r.MaxBytes = 0, 1<<20
	case *kmsg.ApiVersionsRequest:
		r.ClientSoftwareName, r.ClientSoftwareVersion = "strata-conformance", "1.0"
	case *kmsg.JoinGroupRequest:
		// A group of its own per version: v0-v3 joins are members at
		// once and would hold a shared group's next rebalance.
		r.Group = fmt.Sprintf("conformance-v%d", v)
		r.ProtocolType = "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		r.Protocols = append(r.Protocols, p)
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = "conformance"
		r.CoordinatorKeys = []string{"conformance"}
	case *kmsg.ListOffsetsRequest:
		r.ReplicaID = -1
	}
	return req
}

// closesAfterAnswer lists the keys whose minimal request is answered with
// an error and the connection then closed, as the handler documents.
var closesAfterAnswer = map[int16]string{
	36: "SaslAuthenticate without a SaslHandshake: ILLEGAL_SASL_STATE, then closed",
}

// TestAPIConformance holds the broker's ApiVersions answer against the
// conformance table and sends every advertised version of every key.
func TestAPIConformance(t *testing.T) {
	s := startServer(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	rc := dialRaw(t, s)

	// The real ApiVersions answer, raw, at v0 and at v3.
	advertised := map[int16][2]int16{}
	for _, v := range []int16{0, 3} {
		resp := rc.request(int32(v)+1, conformanceRequest(t, 18, v)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		if v > 0 && fmt.Sprint(got) != fmt.Sprint(advertised) {
			t.Fatalf("ApiVersions v%d advertises %v, v0 %v", v, got, advertised)
		}
		advertised = got
	}
	table := map[int16]Kafka39API{}
	for _, a := range Kafka39APIs {
		table[a.Key] = a
		got, ok := advertised[a.Key]
		switch {
		case a.Served() && !ok:
			t.Errorf("key %d (%s): the table says v%d-%d served, ApiVersions does not list it", a.Key, a.Name, a.StrataMin, a.StrataMax)
		case !a.Served() && ok:
			t.Errorf("key %d (%s): ApiVersions advertises v%d-%d, the table says not served", a.Key, a.Name, got[0], got[1])
		case ok && (got[0] != a.StrataMin || got[1] != a.StrataMax):
			t.Errorf("key %d (%s): ApiVersions advertises v%d-%d, the table says v%d-%d", a.Key, a.Name, got[0], got[1], a.StrataMin, a.StrataMax)
		}
	}
	keys := make([]int16, 0, len(advertised))
	for k := range advertised {
		keys = append(keys, k)
		if _, ok := table[k]; !ok {
			t.Errorf("key %d (%s): advertised, not in the conformance table", k, kmsg.NameForKey(k))
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })

	// Every advertised version of every key: a well-formed answer, on a
	// connection that stays open.
	start := time.Now()
	sent := 0
	for _, key := range keys {
		rng := advertised[key]
		for v := rng[0]; v <= rng[1]; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				c := dialRaw(t, s)
				req := conformanceRequest(t, key, v)
				c.send(7, req)
				corr, body, err := c.readFrame()
				if err != nil {
					t.Fatalf("no answer (the version is advertised but not handled): %v", err)
				}
				if corr != 7 {
					t.Fatalf("correlation id %d, want 7", corr)
				}
				resp := req.ResponseKind()
				resp.SetVersion(v)
				decodeResponse(t, resp, body)
				if why, ok := closesAfterAnswer[key]; ok {
					t.Logf("%s", why)
					c.expectClosed()
					return
				}
				c.barrier()
			})
			sent++
		}
	}
	t.Logf("%d requests (every advertised version of %d keys) answered in %v", sent, len(keys), time.Since(start).Round(time.Millisecond))

	// Versions not advertised, as Kafka 3.9 treats them
	// (SocketServer.parseRequestHeader, ApiKeys.isVersionEnabled): an
	// ApiVersions above the range is answered in v0 with
	// UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511); any other
	// key's unsupported version, a key not served, and an unknown key
	// close the connection without an answer.
	t.Run("ApiVersions/unsupported", func(t *testing.T) {
		c := dialRaw(t, s)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = advertised[18][1] + 1
		c.send(9, req)
		corr, body, err := c.readFrame()
		if err != nil || corr != 9 {
			t.Fatalf("corr %d err %v", corr, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 ||
			resp.ApiKeys[0].MaxVersion != advertised[18][1] {
			t.Fatalf("got error %d keys %+v", resp.ErrorCode, resp.ApiKeys)
		}
		c.barrier()
	})
	for _, a := range Kafka39APIs {
		if a.Key == 18 {
			continue
		}
		var versions []int16
		if !a.Served() {
			versions = []int16{a.KafkaMin, a.KafkaMax}
		} else {
			if a.StrataMin > 0 {
				versions = append(versions, a.StrataMin-1)
			}
			if a.StrataMax < kmsg.RequestForKey(a.Key).MaxVersion() {
				versions = append(versions, a.StrataMax+1)
			}
		}
		for _, v := range versions {
			t.Run(fmt.Sprintf("%s/v%d/unadvertised", a.Name, v), func(t *testing.T) {
				c := dialRaw(t, s)
				c.send(11, conformanceRequest(t, a.Key, v))
				expectClosedUnanswered(t, c)
			})
		}
	}
	t.Run("unknown-key", func(t *testing.T) {
		c := dialRaw(t, s)
		// key 32000 v0, correlation id 13, client id "raw".
		c.writeFrame([]byte{0x7d, 0x00, 0, 0, 0, 0, 0, 13, 0, 3, 'r', 'a', 'w'})
		expectClosedUnanswered(t, c)
	})
}

// expectClosedUnanswered checks that the server closes c without
// writing a response.
func expectClosedUnanswered(t *testing.T, c *rawConn) {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	corr, _, err := c.readFrame()
	if err == nil {
		t.Fatalf("answered (correlation id %d), want the connection closed", corr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection neither answered nor closed within 10s")
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
		t.Logf("closed with %v", err)
	}
}
