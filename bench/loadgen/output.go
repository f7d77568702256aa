package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// write prints the text summary and writes the JSON and CSV files.
func write(c config, res *result) error {
	if c.JSONPath == "-" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Print(text(res))
	if c.JSONPath != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.JSONPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c.CSVPath != "" && res.Produce != nil {
		return appendCSV(c.CSVPath, res)
	}
	return nil
}

func text(res *result) string {
	var b strings.Builder
	c := res.Config
	if r := res.Read; r != nil {
		fmt.Fprintf(&b, "loadgen %s %s: %d records, %.1f MB in %.2fs: %.0f records/s, %.1f MB/s",
			c.Mode, c.Topic, r.Records, float64(r.Bytes)/1e6, r.Seconds, r.RecordsPerS, r.MBPerS)
		if c.Mode == "fetch" {
			fmt.Fprintf(&b, " (%d connection(s), %d pass(es), %d requests)", r.Conns, r.Passes, r.Requests)
		}
		b.WriteString("\n")
		return b.String()
	}
	rate := "unlimited"
	if c.Rate > 0 {
		rate = fmt.Sprintf("%.0f records/s", c.Rate)
	}
	fmt.Fprintf(&b, "loadgen %s: %d B records, %d partitions, %d producer(s), %d consumer(s), acks=%s, compression %s, rate %s\n",
		c.Topic, c.Size, c.Partitions, c.Producers, c.Consumers, c.Acks, c.Compression, rate)
	line := func(name string, s *side, what string) {
		if s == nil {
			return
		}
		l := s.Latency
		fmt.Fprintf(&b, "  %-8s %d records in %.2fs: %.0f records/s, %.2f MB/s; %s latency ms p50 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
			name, s.Records, s.Seconds, s.RecordsPerS, s.MBPerS, what, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
	}
	line("produce", res.Produce, "produce")
	line("consume", res.Consume, "end-to-end")
	if res.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", res.Error)
	}
	return b.String()
}

var csvHeader = []string{"label", "topic", "size", "partitions", "producers", "consumers", "acks", "compression", "target_rate",
	"records", "seconds", "records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms",
	"consumed", "consume_records_per_s", "consume_mb_per_s", "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms", "e2e_max_ms", "errors", "error"}

func appendCSV(path string, res *result) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if statErr != nil {
		_ = w.Write(csvHeader) // a write error is kept by w; w.Error reports it
	}
	c, p := res.Config, res.Produce
	g := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	row := []string{c.Label, c.Topic, fmt.Sprint(c.Size), fmt.Sprint(c.Partitions), fmt.Sprint(c.Producers), fmt.Sprint(c.Consumers),
		c.Acks, c.Compression, g(c.Rate), fmt.Sprint(p.Records), g(p.Seconds), g(p.RecordsPerS), g(p.MBPerS),
		g(p.Latency.P50Ms), g(p.Latency.P99Ms), g(p.Latency.P999Ms), g(p.Latency.MaxMs)}
	if s := res.Consume; s != nil {
		row = append(row, fmt.Sprint(s.Records), g(s.RecordsPerS), g(s.MBPerS), g(s.Latency.P50Ms), g(s.Latency.P99Ms), g(s.Latency.P999Ms), g(s.Latency.MaxMs))
	} else {
		row = append(row, "", "", "", "", "", "", "")
	}
	row = append(row, fmt.Sprint(res.Errors), res.Error)
	_ = w.Write(row) // as above: w.Error reports it
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}
