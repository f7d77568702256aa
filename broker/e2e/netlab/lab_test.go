package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer serves on h:port, echoing every line back, until the test
// ends.
func echoServer(t *testing.T, h *Host, port int) {
	t.Helper()
	ln, err := h.Listen("tcp", h.Addr(port))
	if err != nil {
		t.Fatalf("listen in %s: %v", h, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
}

// dial connects from h to addr, bounded by timeout.
func dial(h *Host, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return h.DialContext(ctx, "tcp", addr)
}

// roundTrip writes a line on c and reads it back within timeout, and
// returns how long it took.
func roundTrip(c net.Conn, line string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(start.Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return 0, err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if got != line+"\n" {
		return 0, fmt.Errorf("echo %q, want %q", got, line)
	}
	return time.Since(start), nil
}

// expectLines reads lines from c within timeout and checks they are want.
func expectLines(c net.Conn, timeout time.Duration, want ...string) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	r := bufio.NewReader(c)
	for _, w := range want {
		got, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got != w+"\n" {
			return fmt.Errorf("read %q, want %q", got, w)
		}
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// TestCutAndHeal: hosts reach each other and the client host; a one-way
// cut stalls an established connection and makes new ones hang (not
// fail) in that direction only; healing restores both.
func TestCutAndHeal(t *testing.T) {
	lab := New(t)
	a, b := lab.AddHost("a"), lab.AddHost("b")
	t.Logf("%v", lab)
	echoServer(t, b, 7000)
	echoServer(t, a, 7000)

	ab, err := dial(a, b.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("a -> b: %v", err)
	}
	defer ab.Close()
	if _, err := roundTrip(ab, "hello", 5*time.Second); err != nil {
		t.Fatalf("a -> b round trip: %v", err)
	}
	cl, err := dial(lab.Client(), b.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("client -> b: %v", err)
	}
	defer cl.Close()
	if _, err := roundTrip(cl, "hi", 5*time.Second); err != nil {
		t.Fatalf("client -> b round trip: %v", err)
	}

	lab.Cut(a, b)
	if _, err := roundTrip(ab, "during the cut", 500*time.Millisecond); !isTimeout(err) {
		t.Errorf("a -> b on an established connection during the cut: %v, want a timeout", err)
	}
	if c, err := dial(a, b.Addr(7000), 500*time.Millisecond); !isTimeout(err) {
		if c != nil {
			c.Close()
		}
		t.Errorf("new connection a -> b during the cut: %v, want a timeout (a hang, not a refusal)", err)
	}
	// b's packets still reach a: b's SYN arrives, a's answer does not.
	if c, err := dial(b, a.Addr(7000), 500*time.Millisecond); !isTimeout(err) {
		if c != nil {
			c.Close()
		}
		t.Errorf("new connection b -> a during the cut a -> b: %v, want a timeout (a's SYN-ACK is cut)", err)
	}
	if _, err := roundTrip(cl, "client unaffected", 5*time.Second); err != nil {
		t.Errorf("client -> b during the cut a -> b: %v", err)
	}
	if got := lab.Cuts(); len(got) != 1 || got[0] != "a->b" {
		t.Errorf("Cuts() = %v, want [a->b]", got)
	}

	lab.HealAll()
	// The established connection resumes once TCP retransmits: the line
	// written during the cut arrives first.
	if err := expectLines(ab, 30*time.Second, "during the cut"); err != nil {
		t.Errorf("a -> b established connection after healing: %v", err)
	}
	c, err := dial(a, b.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("a -> b after healing: %v", err)
	}
	c.Close()

	lab.Partition(a, lab.Client())
	if c, err := dial(lab.Client(), a.Addr(7000), 500*time.Millisecond); !isTimeout(err) {
		if c != nil {
			c.Close()
		}
		t.Errorf("client -> a during a partition: %v, want a timeout", err)
	}
	lab.Heal(a, lab.Client())
	c, err = dial(lab.Client(), a.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("client -> a after healing: %v", err)
	}
	c.Close()
}

// TestProxyFaults: a proxy forwards to its target, counts per source
// host, delays each direction by Latency, resets on demand, and a cut
// toward the target covers the proxy's address too.
func TestProxyFaults(t *testing.T) {
	lab := New(t)
	a, b := lab.AddHost("a"), lab.AddHost("b")
	echoServer(t, b, 7000)
	p := lab.Proxy(b, 7000)
	if lab.HostOf(p.IP()) != b {
		t.Fatalf("HostOf(%s) = %v, want b", p.IP(), lab.HostOf(p.IP()))
	}
	c, err := dial(a, p.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("a -> proxy: %v", err)
	}
	defer c.Close()
	base, err := roundTrip(c, "plain", 5*time.Second)
	if err != nil {
		t.Fatalf("round trip through the proxy: %v", err)
	}
	const lat = 150 * time.Millisecond
	p.Set(a, Faults{Latency: lat, Jitter: 20 * time.Millisecond})
	var slowest time.Duration
	for i := range 3 {
		d, err := roundTrip(c, fmt.Sprintf("slow %d", i), 10*time.Second)
		if err != nil {
			t.Fatalf("round trip with latency: %v", err)
		}
		// Two legs of at least lat-jitter each: a floor the proxy
		// guarantees whatever the machine's speed.
		if d < 2*(lat-20*time.Millisecond) {
			t.Errorf("round trip with %v latency each way took %v, want at least %v", lat, d, 2*(lat-20*time.Millisecond))
		}
		slowest = max(slowest, d)
	}
	// The client host has no faults set.
	cl, err := dial(lab.Client(), p.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("client -> proxy: %v", err)
	}
	defer cl.Close()
	fast, err := roundTrip(cl, "client", 5*time.Second)
	if err != nil {
		t.Fatalf("client round trip: %v", err)
	}
	t.Logf("round trips through the proxy: %v plain, up to %v with %v latency each way, %v from a source without faults", base, slowest, lat, fast)

	p.Set(a, Faults{Reset: 1})
	if _, err := roundTrip(c, "reset me", 5*time.Second); err == nil || isTimeout(err) {
		t.Errorf("round trip with Reset 1: %v, want the connection reset", err)
	}
	p.Clear()
	c2, err := dial(a, p.Addr(7000), 5*time.Second)
	if err != nil {
		t.Fatalf("a -> proxy after Clear: %v", err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, "again", 5*time.Second); err != nil {
		t.Fatalf("round trip after Clear: %v", err)
	}

	lab.Cut(a, b)
	if _, err := roundTrip(c2, "cut", 500*time.Millisecond); !isTimeout(err) {
		t.Errorf("a -> proxy of b during a cut a -> b: %v, want a timeout", err)
	}
	lab.HealAll()
	if err := expectLines(c2, 30*time.Second, "cut"); err != nil {
		t.Errorf("a -> proxy of b after healing: %v", err)
	}

	stats := map[string]ProxyStats{}
	for _, s := range p.Stats() {
		stats[s.From] = s
	}
	if s := stats["a"]; s.Connections != 2 || s.Resets != 1 || s.BytesIn == 0 {
		t.Errorf("proxy stats from a: %+v, want 2 connections, 1 reset, bytes in", s)
	}
	if s := stats["client"]; s.Connections != 1 {
		t.Errorf("proxy stats from the client: %+v, want 1 connection", s)
	}
}

// TestBandwidthLimit: a tbf limit on a host's egress makes a transfer
// take at least what the rate allows (less the bucket).
func TestBandwidthLimit(t *testing.T) {
	lab := New(t)
	a, b := lab.AddHost("a"), lab.AddHost("b")
	ln, err := b.Listen("tcp", b.Addr(7001))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	const rate = 8 << 20 // bit/s: 1 MiB/s
	const size = 1 << 20
	lab.LimitEgress(a, rate)
	c, err := dial(a, b.Addr(7001), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetDeadline(start.Add(60 * time.Second))
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = c.Close()
	n := <-got
	took := time.Since(start)
	if n != size {
		t.Fatalf("received %d bytes, want %d", n, size)
	}
	// tbf lets a bucket of max(rate/50, 64 KiB) through at once; the
	// rest at the rate, which is a floor on the time.
	bucket := max(int64(rate/8/50), minBurst)
	floor := time.Duration(float64(size-bucket) / (rate / 8) * float64(time.Second))
	t.Logf("%d bytes with a %d bit/s egress limit took %v (%.2f MiB/s); floor %v", size, rate, took, float64(size)/took.Seconds()/(1<<20), floor)
	if took < floor {
		t.Errorf("transfer took %v, below the floor %v the limit allows", took, floor)
	}
	lab.ClearLimits(a)
	if out, _ := run("tc", "-n", a.Netns(), "qdisc", "show", "dev", "eth0"); strings.Contains(out, "tbf") {
		t.Errorf("tbf still there after ClearLimits: %s", out)
	}
}

// TestSweepStale: New removes a lab whose owner process is gone, and
// nothing else.
func TestSweepStale(t *testing.T) {
	if err := probe(); err != nil {
		t.Skipf("netlab: %v", err)
	}
	// A lab of our own, made stale by naming a process that cannot exist
	// as its owner.
	unlock, err := lockLabs()
	if err != nil {
		t.Fatal(err)
	}
	n, err := takeNumber()
	if err != nil {
		unlock()
		t.Fatal(err)
	}
	br := fmt.Sprintf("%s%dbr", namePrefix, n)
	ns := fmt.Sprintf("%s%d-old", namePrefix, n)
	steps := [][]string{
		{"ip", "link", "set", br, "alias", aliasPrefix + " pid=999999999 start=1"},
		{"ip", "netns", "add", ns},
		{"ip", "route", "add", "blackhole", subnetOf(n).String(), "metric", guardMetric},
	}
	for _, argv := range steps {
		if out, err := run(argv...); err != nil {
			unlock()
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	unlock()
	live := New(t) // sweeps, and may take number n again
	if _, err := os.Stat("/run/netns/" + ns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale namespace %s still there (%v)", ns, err)
		_ = removeNetns(ns)
	}
	alias, err := os.ReadFile("/sys/class/net/" + br + "/ifalias")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err == nil && live.n == n && strings.TrimSpace(string(alias)) == ownerAlias(os.Getpid()):
		// The new lab took the number back, with its own bridge.
	default:
		t.Errorf("stale bridge %s still there (alias %q, %v)", br, alias, err)
		_, _ = run("ip", "link", "del", br)
	}
	if live.n != n {
		if out, _ := run("ip", "route", "show", "type", "blackhole", subnetOf(n).String()); out != "" {
			t.Errorf("stale guard route still there: %s", out)
			_ = removeGuard(n)
		}
	}
	// A second lab does not sweep the first, which is alive.
	other := New(t)
	if _, err := os.Stat("/sys/class/net/" + live.bridge); err != nil {
		t.Errorf("the live lab's bridge %s was removed: %v", live.bridge, err)
	}
	if other.n == live.n {
		t.Errorf("two live labs share number %d", live.n)
	}
}
