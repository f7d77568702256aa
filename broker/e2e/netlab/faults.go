package netlab

import (
	"fmt"
	"strconv"
	"strings"
)

// Cut makes the packets from host from to every address of host to
// vanish, in that direction only: to's packets still reach from. It
// applies to new and established connections alike, and stays until Heal
// or HealAll. A cut that is already there is no error.
func (l *Lab) Cut(from, to *Host) {
	l.t.Helper()
	l.checkPair(from, to)
	l.mu.Lock()
	addrs := append([]string(nil), to.addrs...)
	l.mu.cuts[cut{from, to}] = true
	l.mu.Unlock()
	for _, a := range addrs {
		l.must(from.ipCmd("neigh", "replace", a, "lladdr", deadMAC, "dev", from.dev, "nud", "permanent")...)
	}
}

// Partition cuts the link between a and b both ways.
func (l *Lab) Partition(a, b *Host) {
	l.t.Helper()
	l.Cut(a, b)
	l.Cut(b, a)
}

// Isolate partitions h from each of others.
func (l *Lab) Isolate(h *Host, others ...*Host) {
	l.t.Helper()
	for _, o := range others {
		l.Partition(h, o)
	}
}

// Heal removes the cuts between a and b, both ways. Healing a link that
// is not cut is no error.
func (l *Lab) Heal(a, b *Host) {
	l.t.Helper()
	l.heal(a, b)
	l.heal(b, a)
}

// heal removes the cut from → to, if there.
func (l *Lab) heal(from, to *Host) {
	l.t.Helper()
	l.checkPair(from, to)
	l.mu.Lock()
	was := l.mu.cuts[cut{from, to}]
	delete(l.mu.cuts, cut{from, to})
	addrs := append([]string(nil), to.addrs...)
	l.mu.Unlock()
	if !was {
		return
	}
	for _, a := range addrs {
		argv := from.ipCmd("neigh", "del", a, "dev", from.dev)
		if out, err := run(argv...); err != nil && !strings.Contains(out, "No such file") {
			l.t.Fatalf("netlab: %s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
}

// Cuts lists the cut directions as "from->to" host names.
func (l *Lab) Cuts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for c := range l.mu.cuts {
		out = append(out, c.from.name+"->"+c.to.name)
	}
	return out
}

// HealAll removes every cut, every bandwidth limit and every proxy's
// faults.
func (l *Lab) HealAll() {
	l.t.Helper()
	l.mu.Lock()
	var cuts []cut
	for c := range l.mu.cuts {
		cuts = append(cuts, c)
	}
	var limits []limit
	for lim := range l.mu.limits {
		limits = append(limits, lim)
	}
	proxies := append([]*Proxy(nil), l.mu.proxies...)
	l.mu.Unlock()
	for _, c := range cuts {
		l.heal(c.from, c.to)
	}
	for _, lim := range limits {
		l.clearLimit(lim)
	}
	for _, p := range proxies {
		p.Clear()
	}
}

func (l *Lab) checkPair(from, to *Host) {
	l.t.Helper()
	if from == nil || to == nil || from.lab != l || to.lab != l {
		l.t.Fatalf("netlab: hosts %v and %v: both must be hosts of this lab", from, to)
	}
	if from == to {
		l.t.Fatalf("netlab: cannot cut host %s from itself", from.name)
	}
}

// LimitEgress limits what host h sends, to all hosts, to bitsPerSecond
// (a tc tbf queue on its link; bursts of up to 64 KiB or 20 ms of the
// rate pass at once). It replaces an earlier limit.
func (l *Lab) LimitEgress(h *Host, bitsPerSecond int64) {
	l.t.Helper()
	l.limit(limit{netns: h.netns, dev: h.dev}, bitsPerSecond)
}

// LimitIngress limits what host h receives, from all hosts, to
// bitsPerSecond (a tbf queue on the bridge side of its veth). The client
// host has no veth: LimitEgress the other hosts instead.
func (l *Lab) LimitIngress(h *Host, bitsPerSecond int64) {
	l.t.Helper()
	if h.veth == "" {
		l.t.Fatalf("netlab: LimitIngress: the client host has no link of its own")
	}
	l.limit(limit{dev: h.veth}, bitsPerSecond)
}

// ClearLimits removes host h's egress and ingress limits.
func (l *Lab) ClearLimits(h *Host) {
	l.t.Helper()
	l.clearLimit(limit{netns: h.netns, dev: h.dev})
	if h.veth != "" {
		l.clearLimit(limit{dev: h.veth})
	}
}

// minBurst is the smallest tbf bucket: a whole GSO packet of a veth.
const minBurst = 64 << 10

func (l *Lab) limit(lim limit, bitsPerSecond int64) {
	l.t.Helper()
	if bitsPerSecond < 8000 || bitsPerSecond > 100e9 {
		l.t.Fatalf("netlab: bandwidth limit %d bit/s: want 8 kbit/s to 100 Gbit/s", bitsPerSecond)
	}
	burst := max(bitsPerSecond/8/50, minBurst)
	l.mu.Lock()
	l.mu.limits[lim] = true
	l.mu.Unlock()
	l.must(tcCmd(lim.netns, "qdisc", "replace", "dev", lim.dev, "root", "tbf",
		"rate", strconv.FormatInt(bitsPerSecond, 10)+"bit", "burst", strconv.FormatInt(burst, 10), "latency", "200ms")...)
}

func (l *Lab) clearLimit(lim limit) {
	l.t.Helper()
	l.mu.Lock()
	was := l.mu.limits[lim]
	delete(l.mu.limits, lim)
	l.mu.Unlock()
	if !was {
		return
	}
	argv := tcCmd(lim.netns, "qdisc", "del", "dev", lim.dev, "root")
	if out, err := run(argv...); err != nil {
		l.t.Fatalf("netlab: %s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// String describes the lab: its number, subnet and hosts.
func (l *Lab) String() string {
	var hs []string
	for _, h := range l.Hosts() {
		hs = append(hs, h.String())
	}
	return fmt.Sprintf("lab %d (%s): %s", l.n, l.Subnet(), strings.Join(hs, " "))
}
