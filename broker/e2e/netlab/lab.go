package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Names and numbers of a lab (doc.go shows the layout).
const (
	// namePrefix starts every name a lab makes; the lab's number follows.
	namePrefix = "snl"
	// subnetBase is the /16 the labs' /24s are taken from.
	subnetBase = "10.219"
	// clientOctet is the client host's (the root namespace's) address.
	clientOctet = 254
	// maxHosts bounds the hosts of a lab (addresses .1 to .100).
	maxHosts = 100
	// firstProxyOctet is the first proxy address (.101 to .250).
	firstProxyOctet = 101
	lastProxyOctet  = 250
	// guardMetric is the guard route's metric: above the bridge's own
	// route (metric 0), so it only matters once the bridge is gone.
	guardMetric = "4000"
	// deadMAC is the MAC a cut sends frames to: locally administered,
	// unicast, and no host's.
	deadMAC = "02:53:4e:4c:de:ad"
	// aliasPrefix starts the bridge's alias, which names the owner.
	aliasPrefix = "strata-netlab"
	// lockPath serializes the taking of lab numbers with the sweep of
	// leftovers, among all processes of the machine.
	lockPath = "/run/lock/strata-netlab.lock"
	// cmdTimeout bounds one ip or tc command.
	cmdTimeout = 20 * time.Second
	// killTimeout bounds the wait for the processes of a namespace to
	// exit after SIGKILL.
	killTimeout = 10 * time.Second
)

// hostNameRE is what a host's name may be: it becomes part of the
// namespace's name.
var hostNameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// Lab is one test's hosts, bridge and faults. Its methods fail the test
// (t.Fatalf) when a command fails; they are safe for concurrent use.
type Lab struct {
	t      testing.TB
	n      int    // the lab's number: its subnet is 10.219.n.0/24
	bridge string // snl<n>br
	client *Host

	mu struct {
		sync.Mutex
		hosts     []*Host // the client first
		nextProxy int     // next proxy address's last octet
		cuts      map[cut]bool
		limits    map[limit]bool
		proxies   []*Proxy
		closed    bool
	}
}

// cut is one direction of a cut link.
type cut struct{ from, to *Host }

// limit is a tbf queue: on dev in the namespace of host (nil: root).
type limit struct {
	netns string
	dev   string
}

// Host is one network namespace of a lab, or the lab's client host (the
// root namespace, where the test process runs).
type Host struct {
	lab   *Lab
	name  string
	netns string // "" for the client host
	dev   string // its link: eth0 in its namespace, the bridge for the client
	veth  string // the bridge side of its link in the root namespace; "" for the client
	ip    string
	// addrs are all its addresses, ip first; guarded by lab.mu.
	addrs []string
}

// Name is the host's name as given to AddHost ("client" for the client
// host).
func (h *Host) Name() string { return h.name }

// IP is the host's address on the bridge.
func (h *Host) IP() string { return h.ip }

// Addr is IP:port.
func (h *Host) Addr(port int) string {
	return netip.AddrPortFrom(netip.MustParseAddr(h.ip), uint16(port)).String()
}

// Netns is the name of the host's namespace ("" for the client host).
func (h *Host) Netns() string { return h.netns }

// Exec returns argv prefixed so that it runs in the host's namespace:
// ip netns exec NAME argv... (ip execs the command, so the process
// started is the command itself). For the client host it is argv.
func (h *Host) Exec(argv ...string) []string {
	if h.netns == "" {
		return argv
	}
	return append([]string{"ip", "netns", "exec", h.netns}, argv...)
}

// String is the host's name and address.
func (h *Host) String() string { return h.name + "(" + h.ip + ")" }

// New creates a lab: a bridge with a /24 of its own and the client host's
// address on it. It skips the test where this machine refuses network
// namespaces (not root, no iproute2, a kernel without namespaces, veth,
// bridges or tbf), or fails it under CI=true. Leftovers of labs whose
// process has exited are removed first. Everything the lab makes is
// removed when the test ends.
func New(t testing.TB) *Lab {
	t.Helper()
	if err := probe(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("netlab: network namespaces are required in CI (CI=true): %v", err)
		}
		t.Skipf("netlab: network namespaces are not available here: %v", err)
	}
	l := &Lab{t: t}
	l.mu.cuts = map[cut]bool{}
	l.mu.limits = map[limit]bool{}
	l.mu.nextProxy = firstProxyOctet
	unlock, err := lockLabs()
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	for _, msg := range sweepStale() {
		t.Logf("netlab: %s", msg)
	}
	l.n, err = takeNumber()
	unlock()
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	l.bridge = fmt.Sprintf("%s%dbr", namePrefix, l.n)
	t.Cleanup(l.close)
	l.client = &Host{lab: l, name: "client", dev: l.bridge, ip: l.octet(clientOctet)}
	l.client.addrs = []string{l.client.ip}
	l.mu.hosts = []*Host{l.client}
	l.must("ip", "route", "add", "blackhole", l.subnet().String(), "metric", guardMetric)
	l.must("ip", "addr", "add", l.client.ip+"/24", "dev", l.bridge)
	l.must("ip", "link", "set", l.bridge, "up")
	return l
}

// subnet is the lab's /24.
func (l *Lab) subnet() netip.Prefix { return subnetOf(l.n) }

func subnetOf(n int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("%s.%d.0/24", subnetBase, n))
}

// octet is the lab's address ending in x.
func (l *Lab) octet(x int) string { return fmt.Sprintf("%s.%d.%d", subnetBase, l.n, x) }

// Client is the client host: the root namespace, where the test process
// runs, with its own address on the bridge.
func (l *Lab) Client() *Host { return l.client }

// Subnet is the lab's /24, e.g. 10.219.7.0/24.
func (l *Lab) Subnet() string { return l.subnet().String() }

// AddHost creates a host: a namespace with loopback up and an eth0 on
// the bridge with the next free address (.1, .2, ...). name must be 1 to
// 8 lower-case letters and digits, starting with a letter, and unique in
// the lab.
func (l *Lab) AddHost(name string) *Host {
	l.t.Helper()
	if !hostNameRE.MatchString(name) || name == "client" {
		l.t.Fatalf("netlab: host name %q: want 1 to 8 of [a-z0-9], starting with a letter, not \"client\"", name)
	}
	l.mu.Lock()
	for _, h := range l.mu.hosts {
		if h.name == name {
			l.mu.Unlock()
			l.t.Fatalf("netlab: host %q added twice", name)
		}
	}
	i := len(l.mu.hosts) // the client is hosts[0]
	if i > maxHosts {
		l.mu.Unlock()
		l.t.Fatalf("netlab: at most %d hosts", maxHosts)
	}
	h := &Host{lab: l, name: name, netns: fmt.Sprintf("%s%d-%s", namePrefix, l.n, name), dev: "eth0",
		veth: fmt.Sprintf("%s%dv%d", namePrefix, l.n, i), ip: l.octet(i)}
	h.addrs = []string{h.ip}
	// Listed before it exists, so that close removes it whatever step fails.
	l.mu.hosts = append(l.mu.hosts, h)
	l.mu.Unlock()
	l.must("ip", "netns", "add", h.netns)
	// The lab owns number n (it made the bridge), so a link of this name
	// is a leftover: the veth of an earlier lab n whose namespace the
	// kernel had not finished tearing down (namespaces die
	// asynchronously, their veths with them).
	_, _ = run("ip", "link", "del", h.veth)
	l.must("ip", "link", "add", h.veth, "type", "veth", "peer", "name", h.dev, "netns", h.netns)
	l.must("ip", "link", "set", h.veth, "master", l.bridge, "up")
	l.must("ip", "-n", h.netns, "addr", "add", h.ip+"/24", "dev", h.dev)
	l.must("ip", "-n", h.netns, "link", "set", h.dev, "up")
	l.must("ip", "-n", h.netns, "link", "set", "lo", "up")
	return h
}

// addAddress gives h one more address (for a proxy) and extends to it
// the cuts toward h.
func (l *Lab) addAddress(h *Host) string {
	l.t.Helper()
	if h.netns == "" {
		l.t.Fatalf("netlab: a proxy needs a host of the lab, not the client host")
	}
	l.mu.Lock()
	if l.mu.nextProxy > lastProxyOctet {
		l.mu.Unlock()
		l.t.Fatalf("netlab: out of proxy addresses")
	}
	ip := l.octet(l.mu.nextProxy)
	l.mu.nextProxy++
	var froms []*Host
	for c := range l.mu.cuts {
		if c.to == h {
			froms = append(froms, c.from)
		}
	}
	l.mu.Unlock()
	l.must("ip", "-n", h.netns, "addr", "add", ip+"/24", "dev", h.dev)
	for _, from := range froms {
		l.must(from.ipCmd("neigh", "replace", ip, "lladdr", deadMAC, "dev", from.dev, "nud", "permanent")...)
	}
	l.mu.Lock()
	h.addrs = append(h.addrs, ip)
	l.mu.Unlock()
	return ip
}

// Hosts lists the lab's hosts, the client host first.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Host(nil), l.mu.hosts...)
}

// HostOf returns the host that has address ip, or nil.
func (l *Lab) HostOf(ip string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.mu.hosts {
		for _, a := range h.addrs {
			if a == ip {
				return h
			}
		}
	}
	return nil
}

// ipCmd is an ip command run in the host's namespace.
func (h *Host) ipCmd(args ...string) []string {
	if h.netns == "" {
		return append([]string{"ip"}, args...)
	}
	return append([]string{"ip", "-n", h.netns}, args...)
}

// tcCmd is a tc command run in namespace netns ("" for the root).
func tcCmd(netns string, args ...string) []string {
	if netns == "" {
		return append([]string{"tc"}, args...)
	}
	return append([]string{"tc", "-n", netns}, args...)
}

// must runs a command and fails the test if it fails.
func (l *Lab) must(argv ...string) {
	l.t.Helper()
	if out, err := run(argv...); err != nil {
		l.t.Fatalf("netlab: %s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// run runs a command (bounded by cmdTimeout) and returns its output.
func run(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// close removes everything the lab made: proxies, the processes left in
// its namespaces, the namespaces (with their veths), the bridge and the
// guard route.
func (l *Lab) close() {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return
	}
	l.mu.closed = true
	proxies := l.mu.proxies
	hosts := l.mu.hosts[1:]
	l.mu.Unlock()
	for _, p := range proxies {
		p.Close()
	}
	var errs []string
	for _, h := range hosts {
		// The veth first, at once: the namespace's own teardown, which
		// would take it along, runs later in the kernel.
		if out, err := run("ip", "link", "del", h.veth); err != nil && !strings.Contains(out, "Cannot find device") {
			errs = append(errs, fmt.Sprintf("ip link del %s: %v: %s", h.veth, err, out))
		}
		if err := removeNetns(h.netns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if out, err := run("ip", "link", "del", l.bridge); err != nil && !strings.Contains(out, "Cannot find device") {
		errs = append(errs, fmt.Sprintf("ip link del %s: %v: %s", l.bridge, err, out))
	}
	if err := removeGuard(l.n); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		l.t.Errorf("netlab: removing lab %d: %s", l.n, strings.Join(errs, "; "))
	}
}

// removeNetns kills the processes in a namespace and deletes it (its
// veth goes with it). A namespace that does not exist is no error.
func removeNetns(name string) error {
	if _, err := os.Stat("/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(killTimeout)
	for {
		out, err := run("ip", "netns", "pids", name)
		if err != nil {
			return fmt.Errorf("ip netns pids %s: %v: %s", name, err, out)
		}
		pids := strings.Fields(out)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s: processes %v still there %v after SIGKILL", name, pids, killTimeout)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is fine
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := run("ip", "netns", "del", name); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, out)
	}
	return nil
}

// removeGuard deletes lab n's guard route, if there.
func removeGuard(n int) error {
	out, err := run("ip", "route", "del", "blackhole", subnetOf(n).String(), "metric", guardMetric)
	if err != nil && !strings.Contains(out, "No such process") {
		return fmt.Errorf("ip route del blackhole %s: %v: %s", subnetOf(n), err, out)
	}
	return nil
}
