// Command strata is Strata's single binary: `strata broker` runs a broker and
// the other subcommands are the operator's tools. Each subcommand lives in a
// file of its own and registers itself in init; main only dispatches.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand of the strata binary.
type command struct {
	name    string
	summary string
	// run parses args (everything after the subcommand name) and does the
	// work. It returns the process exit status.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("strata: duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "strata: a Kafka-compatible streaming log with tiered storage.\n\nUsage:\n  strata <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'strata <command> --help' for a command's flags and an example.\n")
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n", args[0])
		usage(stderr)
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "\nFlags go after the command, for example: strata broker --config server.properties\n")
		}
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}
