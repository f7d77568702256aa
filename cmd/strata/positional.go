package main

// The positional arguments of the client subcommands. A command that acts
// on a named resource (a topic, a group, a user) takes its name either as
// an argument or with the resource's Kafka flag: 'strata topic create
// orders' is 'strata topic create --topic orders', and 'strata produce
// orders' is 'strata produce --topic orders'. Both, different, is a usage
// error. A repeatable name flag (topic describe --topic A --topic B) takes
// any number of arguments.

import (
	"flag"
	"fmt"
	"strings"
)

// parseFlagsOnly parses args of a subcommand whose arguments, if any, are
// the value of --nameFlag (nameFlag "": it takes none). ok false comes
// with the exit status, as from parse.
func (c *clientCmd) parseFlagsOnly(args []string, nameFlag string) (status int, ok bool) {
	c.nameFlag = nameFlag
	pos, status, ok := c.parse(args)
	if !ok {
		return status, false
	}
	if err := c.bindName(pos); err != nil {
		return c.usageError("%v", err), false
	}
	return 0, true
}

// parseTopicArg parses args of a subcommand that needs exactly one TOPIC,
// as the argument or with --topic (which it defines). ok false comes with
// the exit status, as from parse.
func (c *clientCmd) parseTopicArg(args []string) (topic string, status int, ok bool) {
	f := c.fs.Lookup("topic")
	if f == nil {
		c.fs.String("topic", "", "the `TOPIC` (required)")
		f = c.fs.Lookup("topic")
	}
	if status, ok := c.parseFlagsOnly(args, "topic"); !ok {
		return "", status, false
	}
	if f.Value.String() == "" {
		return "", c.missingName(), false
	}
	return f.Value.String(), 0, true
}

// bindName sets the name flag from the arguments pos.
func (c *clientCmd) bindName(pos []string) error {
	return bindArgs(c.fs, c.nameFlag, pos)
}

// bindArgs sets fs's flag name, a resource's name, from the arguments
// pos: any number of them for a repeatable flag (a *stringsFlag), else at
// most one, which must agree with the flag if that was given too. With no
// such flag, an argument is an error.
func bindArgs(fs *flag.FlagSet, name string, pos []string) error {
	if len(pos) == 0 {
		return nil
	}
	f := fs.Lookup(name)
	if name == "" || f == nil {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if many, ok := f.Value.(*stringsFlag); ok {
		for _, p := range pos {
			if err := many.Set(p); err != nil {
				return fmt.Errorf("argument %q: %v", p, err)
			}
		}
		return nil
	}
	if len(pos) > 1 {
		return fmt.Errorf("want one %s, got %d arguments: %q", name, len(pos), pos)
	}
	if flagSet(fs, name) {
		if f.Value.String() != pos[0] {
			return fmt.Errorf("the %s is given twice, differently: %q as the argument and %q as --%s; give one", name, pos[0], f.Value.String(), name)
		}
		return nil
	}
	if pos[0] == "" {
		return fmt.Errorf("empty %s argument", name)
	}
	if err := f.Value.Set(pos[0]); err != nil {
		return fmt.Errorf("argument %q (the --%s): %v", pos[0], name, err)
	}
	return nil
}

// missingName reports that the resource's name is missing and returns
// exit status 2.
func (c *clientCmd) missingName() int {
	what := strings.ToUpper(c.nameFlag)
	return c.usageError("no %s given: name it as the argument ('strata %s %s') or with --%s %s",
		c.nameFlag, c.name, what, c.nameFlag, what)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
