package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the version, commit and Go version of this binary (also: strata --version)",
		run:     runVersion,
	})
}

// version is set by the Makefile's build: -ldflags "-X main.version=$(git
// describe --always --dirty)". Without it, the module version from the
// build info, or "devel". commit is set the same way (git rev-parse HEAD),
// for builds whose build info has no vcs.revision (GOFLAGS=-buildvcs=false).
var version, commit = "", ""

// versionInfo is `strata version --format json`. Wire format of the CLI:
// only add fields.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go_version"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// buildVersion returns what this binary knows of its build.
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: "unknown", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Commit == "unknown" && commit != "" {
		v.Commit = commit
		v.Modified = strings.HasSuffix(version, "-dirty")
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

const versionUsage = `Usage: strata version [--format text|json]
       strata --version [--format text|json]

Prints the version of this binary (from 'git describe' when built with
make build), the commit it was built from (with "(modified)" when the work
tree had changes), and the Go version, OS and architecture it was built
with.
`

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := addFormatFlag(fs)
	help := func(w io.Writer) {
		fmt.Fprint(w, versionUsage)
		fmt.Fprintf(w, "\nFlags:\n  --format FORMAT  %s (default text)\n\nExample:\n  strata version --format json\n", "output FORMAT: text or json")
	}
	pos, err := parseMixed(fs, args)
	if err != nil {
		if !reportFlagError(stderr, "version", fs, err) {
			help(stdout)
			return 0
		}
		fmt.Fprintln(stderr, "Run 'strata version --help' for its flags.")
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "strata version: unexpected argument %q\nRun 'strata version --help' for its flags.\n", pos[0])
		return 2
	}
	v := buildVersion()
	if format.json() {
		if err := writeJSON(stdout, v); err != nil {
			fmt.Fprintf(stderr, "strata version: %v\n", err)
			return 1
		}
		return 0
	}
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(stdout, "strata %s\ncommit: %s\ngo: %s %s/%s\n", v.Version, commit, v.Go, v.OS, v.Arch)
	return 0
}
