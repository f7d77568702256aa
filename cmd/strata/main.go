// Command strata is Strata's single binary: `strata broker` runs a broker and
// the other subcommands are the operator's tools. Each subcommand lives in a
// file of its own and registers itself in init; main only dispatches.
//
// Every subcommand follows one convention, kept here and in clientCmd
// (client.go, positional.go, flags.go) so that a new one inherits it: a
// resource command answers to its singular and its plural name (aliases);
// a resource's name may be given as an argument or with its Kafka flag
// (--topic, --group, --user); an unknown command, action or flag is
// answered with the nearest valid one.
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
	// actions are the sub-actions (`strata topic create`), with help
	// describing them. Without run, dispatch runs them through
	// runActions.
	actions map[string]func(args []string, stdout, stderr io.Writer) int
	help    string
	// run parses args (everything after the subcommand name) and does the
	// work. It returns the process exit status. A command with actions and
	// run dispatches to its actions itself.
	run func(args []string, stdout, stderr io.Writer) int
	// actionNames are the actions of a command that parses them itself
	// (run without actions), for completion.
	actionNames []string
}

var commands = map[string]*command{}

// aliases maps the other spelling of each resource command, singular or
// plural, to the name it is registered under. An alias whose command is
// not registered is not offered.
var aliases = map[string]string{
	"topics": "topic",
	"group":  "groups",
	"user":   "users",
	"acls":   "acl",
	"config": "configs",
	"cert":   "certs",
}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("strata: duplicate subcommand " + c.name)
	}
	if _, dup := aliases[c.name]; dup {
		panic("strata: subcommand " + c.name + " is an alias")
	}
	if c.run == nil && c.actions == nil {
		panic("strata: subcommand " + c.name + " has neither run nor actions")
	}
	commands[c.name] = c
}

// lookup returns the command registered as name or aliased by it.
func lookup(name string) (*command, bool) {
	if c, ok := commands[name]; ok {
		return c, true
	}
	c, ok := commands[aliases[name]]
	return c, ok
}

// aliasOf returns the alias of the command registered as name, or "".
func aliasOf(name string) string {
	for a, n := range aliases {
		if n == name {
			return a
		}
	}
	return ""
}

// commandNames returns the registered names and their aliases, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands)+len(aliases))
	for n := range commands {
		names = append(names, n)
	}
	for a, n := range aliases {
		if _, ok := commands[n]; ok {
			names = append(names, a)
		}
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "strata: a Kafka-compatible streaming log with tiered storage.\n\nUsage:\n  strata <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		label := n
		if a := aliasOf(n); a != "" {
			label += ", " + a
		}
		fmt.Fprintf(w, "  %-16s %s\n", label, commands[n].summary)
	}
	fmt.Fprintf(w, "\nA resource command answers to its singular and its plural name, and takes\nthe resource's name as an argument or with its flag: 'strata topic describe\norders' is 'strata topics describe --topic orders' (docs/cli.md).\n")
	fmt.Fprintf(w, "\nRun 'strata <command> --help' for a command's flags and an example;\n'strata --version' for this binary's version.\n")
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
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "--version", "-version":
		return runVersion(args[1:], stdout, stderr)
	}
	c, ok := lookup(args[0])
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "strata: unknown flag %s: flags go after the command, for example: strata broker --config server.properties\n\n", args[0])
		} else {
			fmt.Fprintf(stderr, "strata: unknown command %q%s\n\n", args[0], didYouMean(args[0], commandNames(), ""))
		}
		usage(stderr)
		return 2
	}
	if c.run == nil {
		return runActions(c.name, c.help, c.actions, args[1:], stdout, stderr)
	}
	return c.run(args[1:], stdout, stderr)
}
