package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/stratastream/strata/broker"
)

func init() {
	register(&command{
		name:    "docs",
		summary: "print generated documentation (docs config: the configuration reference; docs apis: the API table)",
		run:     runDocs,
	})
}

const docsUsage = `Usage: strata docs config
       strata docs apis [--update FILE]

Prints documentation generated from the code.

"config" is the Markdown configuration reference (every broker setting and
topic config with its type, default, valid values and description), from
the broker's settings registry, as 'strata broker --help' is;
docs/configuration.md is its output. Regenerate it with

  ` + broker.ConfigReferenceCommand + `

"apis" is the table of Kafka 3.9's client API keys with the versions
Kafka and Strata serve (broker/kafka39_apis.go, the table the conformance
test holds the broker to). With --update FILE it replaces the part of FILE
between the generated-table markers instead of printing; docs/compatibility.md
holds it. Regenerate it with

  ` + broker.APITableCommand + `
`

func runDocs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata docs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	update := fs.String("update", "", "")
	if err := fs.Parse(reorderDocsArgs(args)); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stdout, docsUsage)
			return 0
		}
		fmt.Fprintf(stderr, "strata docs: %s\n\n%s", flagErrorText(fs, err), docsUsage)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, docsUsage)
		return 2
	}
	switch fs.Arg(0) {
	case "config":
		if *update != "" {
			fmt.Fprintf(stderr, "strata docs config: --update is for docs apis\n\n%s", docsUsage)
			return 2
		}
		if err := broker.WriteConfigReference(stdout); err != nil {
			fmt.Fprintf(stderr, "strata docs: %v\n", err)
			return 1
		}
		return 0
	case "apis":
		var table bytes.Buffer
		if err := broker.WriteAPITable(&table); err != nil {
			fmt.Fprintf(stderr, "strata docs: %v\n", err)
			return 1
		}
		if *update == "" {
			_, _ = stdout.Write(table.Bytes())
			return 0
		}
		doc, err := os.ReadFile(*update)
		if err != nil {
			fmt.Fprintf(stderr, "strata docs apis: %v\n", err)
			return 1
		}
		out, err := broker.ReplaceAPITable(string(doc), table.String())
		if err != nil {
			fmt.Fprintf(stderr, "strata docs apis: %s: %v\n", *update, err)
			return 1
		}
		if err := os.WriteFile(*update, []byte(out), 0o644); err != nil {
			fmt.Fprintf(stderr, "strata docs apis: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprint(stderr, docsUsage)
		return 2
	}
}

// reorderDocsArgs moves the subject ("config", "apis") after the flags,
// so that 'strata docs apis --update FILE' parses as the usage shows.
func reorderDocsArgs(args []string) []string {
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		return append(append([]string{}, args[1:]...), args[0])
	}
	return args
}
