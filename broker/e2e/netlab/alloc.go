package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// This file takes a lab's number and sweeps the leftovers of labs whose
// process is gone.

var (
	probeOnce sync.Once
	probeErr  error
)

// probe checks, once per process, that this machine lets the lab do what
// it does: root, ip and tc, and a namespace with a veth whose root side
// is on a bridge and has a tbf queue.
func probe() error {
	probeOnce.Do(func() { probeErr = probeOnceErr() })
	return probeErr
}

func probeOnceErr() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s (iproute2) not found: %v", tool, err)
		}
	}
	pid := os.Getpid()
	ns := fmt.Sprintf("%sprobe-%d", namePrefix, pid)
	br := fmt.Sprintf("%sq%d", namePrefix, pid)
	veth := fmt.Sprintf("%sp%d", namePrefix, pid)
	defer func() {
		_ = removeNetns(ns) // best effort: the probe's own leftovers
		_, _ = run("ip", "link", "del", br)
	}()
	for _, argv := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", br, "type", "bridge"},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", veth, "master", br, "up"},
		{"tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", "1mbit", "burst", "64kb", "latency", "50ms"},
	} {
		if out, err := run(argv...); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// lockLabs takes the machine-wide lock of lab numbers; the returned
// function releases it.
func lockLabs() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// takeNumber takes a free lab number: one whose /24 overlaps no route of
// the root namespace (other labs' guard routes included) and whose bridge
// this call creates, with the owner's alias. Caller holds the lock.
func takeNumber() (int, error) {
	taken, err := rootPrefixes()
	if err != nil {
		return 0, err
	}
	alias := ownerAlias(os.Getpid())
	if alias == "" {
		return 0, errors.New("cannot read this process's start time")
	}
	start := os.Getpid() % 256
	for i := range 256 {
		n := (start + i) % 256
		sub := subnetOf(n)
		if overlapsAny(sub, taken) {
			continue
		}
		br := fmt.Sprintf("%s%dbr", namePrefix, n)
		out, err := run("ip", "link", "add", br, "type", "bridge")
		if err != nil {
			if strings.Contains(out, "File exists") {
				continue
			}
			return 0, fmt.Errorf("ip link add %s type bridge: %v: %s", br, err, out)
		}
		if out, err := run("ip", "link", "set", br, "alias", alias); err != nil {
			_, _ = run("ip", "link", "del", br) // undo the half-made lab
			return 0, fmt.Errorf("ip link set %s alias: %v: %s", br, err, out)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no free /24 in %s.0.0/16 (all 256 in use or overlapping this machine's routes)", subnetBase)
}

// overlapsAny reports whether p overlaps one of prefixes.
func overlapsAny(p netip.Prefix, prefixes []netip.Prefix) bool {
	for _, q := range prefixes {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

// routeTypes are the words ip route prints before a route's prefix.
var routeTypes = map[string]bool{"unicast": true, "local": true, "broadcast": true, "multicast": true, "blackhole": true,
	"unreachable": true, "prohibit": true, "throw": true, "nat": true, "anycast": true}

// rootPrefixes lists the prefixes of the root namespace's IPv4 routes
// (every table; default routes left out) and addresses.
func rootPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	routes, err := run("ip", "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return nil, fmt.Errorf("ip route show: %v: %s", err, routes)
	}
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && routeTypes[f[0]] {
			f = f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		if p, ok := parsePrefix(f[0]); ok {
			out = append(out, p)
		}
	}
	addrs, err := run("ip", "-4", "-o", "addr", "show")
	if err != nil {
		return nil, fmt.Errorf("ip addr show: %v: %s", err, addrs)
	}
	for _, line := range strings.Split(addrs, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, ok := parsePrefix(f[i+1]); ok {
					out = append(out, p.Masked())
				}
			}
		}
	}
	return out, nil
}

// parsePrefix parses "a.b.c.d/n" or "a.b.c.d" (a /32).
func parsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return netip.PrefixFrom(a, 32), true
	}
	return netip.Prefix{}, false
}

// ownerAlias is the bridge alias naming process pid as the owner, or ""
// if its start time cannot be read.
func ownerAlias(pid int) string {
	st := procStart(pid)
	if st == "" {
		return ""
	}
	return fmt.Sprintf("%s pid=%d start=%s", aliasPrefix, pid, st)
}

// procStart is process pid's start time (field 22 of /proc/PID/stat,
// clock ticks since boot), or "" if there is no such process.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

var (
	// probeNetnsRE and probeLinkRE are the probe's names, with its pid.
	probeNetnsRE = regexp.MustCompile(`^` + namePrefix + `probe-(\d+)$`)
	probeLinkRE  = regexp.MustCompile(`^` + namePrefix + `[pq](\d+)$`)
	bridgeNameRE = regexp.MustCompile(`^` + namePrefix + `(\d{1,3})br$`)
	netnsNameRE  = regexp.MustCompile(`^` + namePrefix + `(\d{1,3})-[a-z][a-z0-9]*$`)
	aliasRE      = regexp.MustCompile(`^` + aliasPrefix + ` pid=(\d+) start=(\d+)$`)
)

// sweepStale removes the labs whose owner process no longer runs (a
// bridge whose alias names a process that is gone, or was started at
// another time), and namespaces of a lab that has no bridge. It returns
// what it removed, or failed to. Caller holds the lock, so no lab is half
// made.
func sweepStale() []string {
	var msgs []string
	live := map[int]bool{}
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		if m := probeLinkRE.FindStringSubmatch(e.Name()); m != nil && !alive(m[1]) {
			if out, err := run("ip", "link", "del", e.Name()); err != nil && !strings.Contains(out, "Cannot find device") {
				msgs = append(msgs, fmt.Sprintf("leftover probe link %s: %v: %s", e.Name(), err, out))
			}
			continue
		}
		m := bridgeNameRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		alias, _ := os.ReadFile(filepath.Join("/sys/class/net", e.Name(), "ifalias"))
		if a := aliasRE.FindStringSubmatch(strings.TrimSpace(string(alias))); a != nil {
			pid, _ := strconv.Atoi(a[1])
			if procStart(pid) == a[2] {
				live[n] = true
				continue
			}
		}
		msgs = append(msgs, removeLab(n, e.Name())...)
	}
	nss, _ := os.ReadDir("/run/netns")
	for _, e := range nss {
		if m := probeNetnsRE.FindStringSubmatch(e.Name()); m != nil && !alive(m[1]) {
			if err := removeNetns(e.Name()); err != nil {
				msgs = append(msgs, fmt.Sprintf("leftover probe namespace %s: %v", e.Name(), err))
			}
			continue
		}
		m := netnsNameRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if live[n] {
			continue
		}
		if err := removeNetns(e.Name()); err != nil {
			msgs = append(msgs, fmt.Sprintf("leftover namespace %s: %v", e.Name(), err))
		} else {
			msgs = append(msgs, fmt.Sprintf("removed leftover namespace %s", e.Name()))
		}
	}
	return msgs
}

// alive reports whether process pid (decimal) runs.
func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	return err == nil && procStart(n) != ""
}

// removeLab removes a dead lab's namespaces, bridge and guard route.
func removeLab(n int, bridge string) []string {
	var msgs []string
	prefix := fmt.Sprintf("%s%d-", namePrefix, n)
	nss, _ := os.ReadDir("/run/netns")
	for _, e := range nss {
		if strings.HasPrefix(e.Name(), prefix) && netnsNameRE.MatchString(e.Name()) {
			if err := removeNetns(e.Name()); err != nil {
				msgs = append(msgs, fmt.Sprintf("leftover namespace %s: %v", e.Name(), err))
			}
		}
	}
	if out, err := run("ip", "link", "del", bridge); err != nil {
		msgs = append(msgs, fmt.Sprintf("leftover bridge %s: %v: %s", bridge, err, out))
	}
	if err := removeGuard(n); err != nil {
		msgs = append(msgs, err.Error())
	}
	return append(msgs, fmt.Sprintf("removed the leftovers of lab %d (%s), whose process is gone", n, subnetOf(n)))
}
