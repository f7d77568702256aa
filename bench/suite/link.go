package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
)

// storeLink puts MinIO behind a network link of a given bandwidth, as a
// bucket across a network is: MinIO runs in a network namespace of its
// own, joined to the host by a veth pair, and the namespace's end of the
// pair sends through a token-bucket filter (tc tbf) at the link's rate.
// Everything MinIO sends (GET bodies: the raw limit and the broker's
// reads alike) crosses that link; the broker and its consumers still talk
// over the host's loopback. The link's addresses are link-local
// (169.254.0.0/16), chosen at random per run, and the namespace (with the
// veth pair) is deleted by close.
//
// It needs root (CAP_NET_ADMIN), iproute2's ip and tc, and the kernel's
// tbf qdisc.
type storeLink struct {
	rate   string // tc's rate syntax, e.g. 2gbit
	ns     string
	hostIf string
	hostIP string
	nsIP   string
}

func newStoreLink(rate string) (*storeLink, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("-store-link needs root (CAP_NET_ADMIN) to create a network namespace and shape its link; run without it for the loopback figures")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("-store-link needs %s (Debian package iproute2): %w", tool, err)
		}
	}
	id := os.Getpid() % 100000
	sub := rand.IntN(1 << 14) // a /30 of 169.254.0.0/16, away from .0.x and .255.x
	a, b := 1+sub/64, (sub%64)*4
	l := &storeLink{
		rate:   rate,
		ns:     fmt.Sprintf("strata-bench-%d", id),
		hostIf: fmt.Sprintf("sbh%d", id),
		hostIP: fmt.Sprintf("169.254.%d.%d", a, b+1),
		nsIP:   fmt.Sprintf("169.254.%d.%d", a, b+2),
	}
	nsIf := fmt.Sprintf("sbn%d", id)
	// A namespace of this name is left over from a run that was killed
	// (its pid is ours now): remove it, with its veth pair.
	_ = exec.Command("ip", "netns", "del", l.ns).Run()
	steps := [][]string{
		{"ip", "netns", "add", l.ns},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", nsIf},
		{"ip", "link", "set", nsIf, "netns", l.ns},
		{"ip", "addr", "add", l.hostIP + "/30", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
		{"ip", "-n", l.ns, "addr", "add", l.nsIP + "/30", "dev", nsIf},
		{"ip", "-n", l.ns, "link", "set", nsIf, "up"},
		{"ip", "-n", l.ns, "link", "set", "lo", "up"},
		// burst: enough for the rate at any kernel HZ; latency bounds the
		// queue (it is not an added delay).
		{"tc", "-n", l.ns, "qdisc", "add", "dev", nsIf, "root", "tbf", "rate", rate, "burst", "4mb", "latency", "50ms"},
	}
	for i, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			if i > 0 {
				l.close()
			}
			return nil, fmt.Errorf("-store-link: %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return l, nil
}

// command returns the command line that runs bin with args inside the
// link's namespace (ip netns exec execs bin in place: the pid is bin's).
func (l *storeLink) command(bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", l.ns, bin}, args...)
}

// close deletes the namespace; the veth pair goes with it.
func (l *storeLink) close() {
	if out, err := exec.Command("ip", "netns", "del", l.ns).CombinedOutput(); err != nil {
		logf("deleting network namespace %s: %v: %s", l.ns, err, strings.TrimSpace(string(out)))
	}
}

func (l *storeLink) String() string {
	return fmt.Sprintf("a veth link shaped to %s (tc tbf) from a network namespace of its own", l.rate)
}
