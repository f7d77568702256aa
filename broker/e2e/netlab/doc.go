// Package netlab puts the processes of a test on hosts of their own: each
// host is a Linux network namespace with its own address on a bridge that
// the lab creates, so that links between any two hosts can be cut, slowed
// and healed while the processes run. The test process itself is the
// lab's client host: it stays in the root namespace with an address on the
// bridge and reaches every host directly. It is an ordinary package (not
// a _test one) so that the end-to-end tests, the chaos run and the
// benchmarks can all use it.
//
//	lab := netlab.New(t)           // skips, or fails under CI=true, where namespaces are refused
//	zk := lab.AddHost("zk")        // namespace snl<N>-zk, address 10.219.N.1
//	b1 := lab.AddHost("b1")        // 10.219.N.2
//	cmd := exec.Command(b1.Exec("strata", "broker", ...)...) // ip netns exec snl<N>-b1 strata ...
//	lab.Partition(b1, zk)          // both ways
//	lab.Cut(b1, b2)                // one way: b1's packets to b2 vanish
//	lab.LimitEgress(b1, 8<<20)     // tc tbf on b1's link, 8 Mbit/s
//	p := lab.Proxy(b1, 9092, 9093) // a TCP proxy on a second address of b1
//	p.Set(b2, netlab.Faults{Latency: 200 * time.Millisecond})
//	lab.HealAll()
//
// # Layout
//
// A lab owns one /24 in 10.219.0.0/16, numbered N (0..255): N is taken by
// creating the bridge snl<N>br, which the kernel grants to one creator
// only, so labs of concurrent tests and test binaries never share a
// subnet; a number whose /24 overlaps a route the machine already has is
// skipped. Every name the lab makes starts with snl<N>:
//
//	root namespace                       host namespaces
//	┌────────────────────────────┐
//	│ bridge snl<N>br            │       snl<N>-zk: eth0 10.219.N.1/24
//	│   10.219.N.254 (client)    ├─veth──snl<N>-b1: eth0 10.219.N.2/24
//	│   alias: owner pid, start  │         (+ 10.219.N.101 for a proxy)
//	│ blackhole 10.219.N.0/24    │       snl<N>-b2: eth0 10.219.N.3/24
//	│   (metric 4000, a guard)   │       ...
//	└────────────────────────────┘
//
// Host veths are named snl<N>v<i> in the root namespace and eth0 in
// their host's. The guard route keeps the subnet's traffic on the machine
// should anything send to it after the bridge is gone. The bridge's alias
// records the owning process (pid and start time): New removes what a
// lab of a process that no longer runs left behind (its namespaces, with
// any process still in them, veths, bridge, guard route), and never
// touches a live process's lab. Everything a lab made is removed when the
// test ends, failed or not (t.Cleanup): processes still in its
// namespaces are killed first.
//
// # Faults
//
//   - Cut(from, to): packets from one host to another vanish, in that
//     direction only. In from's namespace every address of to gets a
//     permanent neighbour entry with a MAC no host has, so the frames
//     leave and are dropped on the bridge: new connections hang in
//     SYN-SENT and established flows retransmit into the void, as on a
//     real partition (a blackhole route would instead fail connect(2) at
//     once with EINVAL). Partition cuts both ways; Heal and HealAll
//     remove the entries, and ARP resolves the real address again.
//   - LimitEgress and LimitIngress: a tc tbf queue on the host's link
//     (its eth0, or the bridge side of its veth), a bandwidth limit for
//     everything the host sends or receives.
//   - Proxy: this machine's kernel has neither netem nor tc classifiers
//     nor iptables, so latency, jitter, loss and resets come from a TCP
//     proxy in the test process, listening on a second address of the
//     target host (inside its namespace) and forwarding to its first.
//     Processes that are told the proxy's address (a broker's
//     advertised.listeners) reach the target through it, and the faults
//     apply per source host, found from each connection's source
//     address: one-way Latency and Jitter on every chunk in each
//     direction, Loss as a retransmission delay, and Reset. Kernel faults
//     (Cut) apply to all of a host's addresses, proxy or not.
//
// # Requirements
//
// Root, iproute2 (ip, tc), and a kernel that allows network namespaces,
// veth pairs, bridges and the tbf queue. New probes them once and skips
// the test where any is refused, or fails it when CI=true (the project's
// CI installs and allows all of them).
package netlab
