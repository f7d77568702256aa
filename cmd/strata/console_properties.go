package main

// --property KEY=VALUE of strata consume and produce: the properties of
// kafka-console-consumer.sh's DefaultMessageFormatter and of
// kafka-console-producer.sh's line reader that Strata implements. A
// property Strata does not know is a usage error naming the known ones.

import (
	"fmt"
	"slices"
	"strings"
)

// consoleProps is the parsed --property flags of one command.
type consoleProps struct {
	known []string // the names the command accepts
	set   map[string]string
}

// propertyFlag is --property, repeatable; each value is checked against
// known when given.
type propertyFlag struct{ p *consoleProps }

func (f propertyFlag) String() string { return "" }

func (f propertyFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, one of %s", strings.Join(f.p.known, ", "))
	}
	if !slices.Contains(f.p.known, k) {
		return fmt.Errorf("unknown property %q%s; the known ones: %s", k, didYouMean(k, f.p.known, ""), strings.Join(f.p.known, ", "))
	}
	if f.p.set == nil {
		f.p.set = map[string]string{}
	}
	f.p.set[k] = val
	return nil
}

// bool returns property k as true or false, def when not given; any other
// value is an error (Kafka takes anything but "true" for false: a typo
// there would silently print less).
func (p *consoleProps) bool(k string, def bool) (bool, error) {
	v, ok := p.set[k]
	if !ok {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("--property %s=%q: want true or false", k, v)
}

// str returns property k, def when not given.
func (p *consoleProps) str(k, def string) string {
	if v, ok := p.set[k]; ok {
		return v
	}
	return def
}

// consumerProperties are DefaultMessageFormatter's, without the
// deserializers (records print as their bytes).
var consumerProperties = []string{
	"headers.separator", "key.separator", "line.separator", "null.literal",
	"print.headers", "print.key", "print.offset", "print.partition", "print.timestamp", "print.value",
}

// producerProperties are LineMessageReader's that Strata implements.
var producerProperties = []string{"key.separator", "parse.key"}
