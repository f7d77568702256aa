package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&command{
		name:    "cluster",
		summary: "print the cluster id, the controller and the brokers; rebalance, add and decommission brokers",
		actions: clusterActions,
		run:     runCluster,
	})
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if run, ok := clusterActions[args[0]]; ok {
			return run(args[1:], stdout, stderr)
		}
		if !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "strata cluster: unknown action %q%s\n", args[0], didYouMean(args[0], slices.Collect(maps.Keys(clusterActions)), ""))
			fmt.Fprintln(stderr, "Run 'strata cluster --help' for its actions and flags.")
			return 2
		}
	}
	c := newClientCmd("cluster", `Usage: strata cluster [flags]
       strata cluster rebalance [flags]
       strata cluster add-broker N [flags]
       strata cluster decommission N [flags]
       strata cluster log-dirs [TOPIC] [--broker N] [--json] [flags]

Without an action, prints the cluster id, the controller's broker id, and
every live broker with its id, advertised address and rack, from a
Metadata request.

Actions (dry runs unless --execute; see 'strata cluster ACTION --help'):
  rebalance      even out replicas and preferred leaders over the brokers
  add-broker     fill a new broker up to its share of the replicas
  decommission   move every replica off a broker before stopping it
  log-dirs       describe the brokers' log directories and the partitions in them
`, `
Example:
  strata cluster --bootstrap-server 127.0.0.1:9092,127.0.0.1:9093
  strata cluster add-broker 4 --execute --throttle 10000000
`, stdout, stderr)
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		md, err := s.adm.BrokerMetadata(ctx)
		if err != nil {
			return c.fail(err)
		}
		if format.json() {
			out := jsonCluster{Controller: md.Controller, Brokers: []jsonBroker{}}
			if md.Cluster != "" {
				out.ClusterID = &md.Cluster
			}
			for _, b := range md.Brokers {
				jb := jsonBroker{ID: b.NodeID, Host: b.Host, Port: b.Port}
				if b.Rack != nil && *b.Rack != "" {
					jb.Rack = b.Rack
				}
				out.Brokers = append(out.Brokers, jb)
			}
			return c.printJSON(out)
		}
		cluster := md.Cluster
		if cluster == "" {
			cluster = "none"
		}
		fmt.Fprintf(stdout, "Cluster ID: %s\nController: %s\nBrokers: %d\n", cluster, brokerID(md.Controller), len(md.Brokers))
		tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "ID\tADDRESS\tRACK")
		for _, b := range md.Brokers {
			rack := "-"
			if b.Rack != nil && *b.Rack != "" {
				rack = *b.Rack
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack)
		}
		if err := tw.Flush(); err != nil {
			return c.fail(err)
		}
		return 0
	})
}
