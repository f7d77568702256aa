package main

// The one --format flag of every command that prints data: text (the
// default, for people) or json (for programs). JSON field names are
// snake_case and stable: a field is only ever added (docs/cli.md lists
// them).

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
)

// The values of --format.
const (
	formatText = "text"
	formatJSON = "json"
)

// formatFlag is the value of --format: text or json, checked when parsed,
// so that a wrong value is a usage error naming both.
type formatFlag struct{ v string }

func (f *formatFlag) String() string {
	if f == nil || f.v == "" {
		return formatText
	}
	return f.v
}

func (f *formatFlag) Set(v string) error {
	switch v {
	case formatText, formatJSON:
		f.v = v
		return nil
	}
	return fmt.Errorf("want %s or %s", formatText, formatJSON)
}

// json reports whether --format json was given.
func (f *formatFlag) json() bool { return f.String() == formatJSON }

// formatUsage is --format's help, the same on every command.
const formatUsage = "output `FORMAT`: text or json"

// addFormatFlag defines --format on fs.
func addFormatFlag(fs *flag.FlagSet) *formatFlag {
	f := &formatFlag{v: formatText}
	fs.Var(f, "format", formatUsage)
	return f
}

// formatFlag defines --format on the command.
func (c *clientCmd) formatFlag() *formatFlag { return addFormatFlag(c.fs) }

// writeJSON writes v as one JSON document and a newline, not HTML-escaped.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSON is writeJSON to the command's stdout, failing it on a write
// error; it returns the exit status.
func (c *clientCmd) printJSON(v any) int {
	if err := writeJSON(c.stdout, v); err != nil {
		return c.fail(err)
	}
	return 0
}
