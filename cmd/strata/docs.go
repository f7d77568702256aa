package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/stratastream/strata/broker"
)

func init() {
	register(&command{
		name:    "docs",
		summary: "print generated documentation (docs config: the configuration reference)",
		run:     runDocs,
	})
}

const docsUsage = `Usage: strata docs config

Prints documentation generated from the code. "config" is the Markdown
configuration reference (every broker setting and topic config with its
type, default, valid values and description), from the broker's settings
registry, as 'strata broker --help' is; docs/configuration.md is its
output. Regenerate it with

  ` + broker.ConfigReferenceCommand + `
`

func runDocs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata docs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stdout, docsUsage)
			return 0
		}
		fmt.Fprintf(stderr, "strata docs: %v\n\n%s", err, docsUsage)
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "config" {
		fmt.Fprint(stderr, docsUsage)
		return 2
	}
	if err := broker.WriteConfigReference(stdout); err != nil {
		fmt.Fprintf(stderr, "strata docs: %v\n", err)
		return 1
	}
	return 0
}
