package main

import (
	"fmt"
	"strings"
)

// replayMarkdown is replay.md: every measurement of one replay run, with
// its ratios to the raw limits and its CPU cost.
func replayMarkdown(rep *replayReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Tiered-storage replay through the broker\n\n")
	fmt.Fprintf(&b, "%s, %s. Reproduce: `%s`\n\n", rep.Date, rep.Machine, rep.Command)
	where := "over loopback"
	if rep.StoreLink != "" {
		where = "MinIO in a network namespace of its own, behind a veth link shaped to " + rep.StoreLink + " (tc tbf): every byte MinIO sends, to the raw GETs and to the broker alike, crosses that link; broker and consumers on loopback"
	}
	fmt.Fprintf(&b, "MinIO (single drive, local disk) and one Strata broker on the same host, %s. Topic: %d partitions, "+
		"segment.bytes %d MiB, local.retention.bytes 1 and local.retention.ms 1000, %d B records, acks=1, no compression; segment.ms lowered after "+
		"the load so the active segments roll too. remote.cache.bytes %d MiB, chunks 4 MiB and read-ahead GETs of up to 4 chunks (the defaults). MB = 10^6 bytes.\n\n",
		where, rep.Partitions, rep.SegmentBytes>>20, replayRecordSize, rep.CacheBytes>>20)
	if p := rep.Produce; p != nil {
		fmt.Fprintf(&b, "Load: %d records, %.1f MB of values in %.1f s (%.1f MB/s). Tiered after a further %.1f s: "+
			"%d remote segments, %.1f MB of .log objects, %d bytes of local .log files left (the empty active segments).\n\n",
			p.Records, float64(p.Bytes)/1e6, p.Seconds, p.MBPerS, rep.TierWaitS, rep.RemoteSegs, float64(rep.RemoteBytes)/1e6, rep.LocalBytes)
	}
	var raw, rawEff, fwd float64 // best raw MB/s; raw MB per CPU second; best GET-and-forward MB/s
	for _, r := range rep.Raw {
		if r.Forward {
			fwd = max(fwd, r.MBPerS)
			continue
		}
		raw = max(raw, r.MBPerS)
		if c := r.MinIOCPUSPerGB + r.ClientCPUSPerGB; c > 0 {
			rawEff = max(rawEff, 1000/c)
		}
	}
	eff := func(c float64) string {
		if c <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f (%s)", 1000/c, ratio(1000/c, rawEff))
	}
	fmt.Fprintf(&b, "| measurement | MB | s | MB/s | ratio to raw | ratio to GET+forward | broker CPU s/GB | MinIO CPU s/GB | client CPU s/GB | CPU s/GB, all three | MB per CPU s, ratio to raw | host CPU busy | other load (cores) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Raw {
		what := "raw ranged GET, minio-go"
		if r.Forward {
			what = "ranged GET, minio-go, each body written to a loopback TCP connection and read back"
		}
		fmt.Fprintf(&b, "| %s, %d concurrent, %d MiB ranges (%s) | %.1f | %.2f | %.1f | %s | %s | | %.2f | %.2f | %.2f | %s | %.0f%% | %.2f |\n",
			what, r.Conns, r.Range>>20, r.Label, float64(r.Bytes)/1e6, r.Seconds, r.MBPerS, ratio(r.MBPerS, raw), ratio(r.MBPerS, fwd), r.MinIOCPUSPerGB, r.ClientCPUSPerGB,
			r.MinIOCPUSPerGB+r.ClientCPUSPerGB, eff(r.MinIOCPUSPerGB+r.ClientCPUSPerGB), 100*r.HostBusy, r.OtherCores)
	}
	for _, r := range rep.Replays {
		what := "bare Fetch v11 (loadgen -mode fetch, batch bytes)"
		if r.Mode == "consume" {
			what = "franz-go consumer (loadgen -mode consume, value bytes)"
		}
		fmt.Fprintf(&b, "| %s replay from offset 0, %s, %d records | %.1f | %.2f | %.1f | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %.0f%% | %.2f |\n",
			r.Label, what, r.Records, float64(r.Bytes)/1e6, r.Seconds, r.MBPerS, ratio(r.MBPerS, raw), ratio(r.MBPerS, fwd), r.BrokerCPUSPerGB, r.MinIOCPUSPerGB, r.ClientCPUSPerGB,
			r.BrokerCPUSPerGB+r.MinIOCPUSPerGB+r.ClientCPUSPerGB, eff(r.BrokerCPUSPerGB+r.MinIOCPUSPerGB+r.ClientCPUSPerGB), 100*r.HostBusy, r.OtherCores)
	}
	fmt.Fprintf(&b, "\nRatios are to the best raw pass (%.1f MB/s; GET and forward: %.1f MB/s). Goal for the cold replay: ≥ 0.8 of raw. "+
		"GET and forward is the least work any server that passes the bucket's bytes on to a consumer over TCP can do: the replay cannot pass it, and where the host's CPUs are saturated it, not the raw GET, is the physical limit of a replay through a broker on this host. Cold: broker restarted with an empty remote.cache.dir before the run; warm: the same broker again right after. "+
		"CPU s/GB are user+system seconds of the broker, MinIO and the client (loadgen, or the suite's minio-go for raw) per 10^9 bytes moved; "+
		"\"MB per CPU s\" is 1000 / their sum, with its ratio to the best raw pass: on a host whose CPUs are saturated (host CPU busy) it is the throughput ratio to expect, independent of load from elsewhere "+
		"(\"other load\": cores used by other processes during the step).\n\n", raw, fwd)
	if rep.Verified != "" {
		fmt.Fprintf(&b, "Content check (franz-go, separate cold start): %s.\n\n", rep.Verified)
	}
	if len(rep.Tail) > 0 {
		fmt.Fprintf(&b, "Tail consumer: one producer at %d records/s of %d B (acks=1, linger 0) to a 1-partition topic, a franz-go consumer at its end; latency from the producer's timestamp in the value to the poll that returned the record.\n\n", replayTailRate, replayRecordSize)
		fmt.Fprintf(&b, "| tail latency | records | s | p50 ms | p99 ms | p99.9 ms | max ms | p99 ratio to alone | produce ack p99 ms | produce ack max ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		base := rep.Tail[0].P99Ms
		for _, l := range rep.Tail {
			label := l.Label
			if l.Replay != nil {
				label += fmt.Sprintf(" (%d back-to-back bare-fetch replays, %.1f MB/s, %s of raw)", l.Replay.Conns, l.Replay.MBPerS, ratio(l.Replay.MBPerS, raw))
			}
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f |\n", label, l.Records, l.Seconds, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, ratio(l.P99Ms, base), l.AckP99Ms, l.AckMaxMs)
		}
		b.WriteString("\n")
	}
	if len(rep.Errors) > 0 {
		b.WriteString("Errors:\n\n")
		for _, e := range rep.Errors {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func ratio(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x/base)
}
