package main

// The positional arguments of the client subcommands: none for the admin
// actions (topic and group names go in flags), one TOPIC for produce and
// consume.

// parseFlagsOnly parses args of a subcommand that takes no positional
// argument. One is a usage error that, when nameFlag is not "", suggests
// it as the value of --nameFlag. ok false comes with the exit status, as
// from parse.
func (c *clientCmd) parseFlagsOnly(args []string, nameFlag string) (status int, ok bool) {
	pos, status, ok := c.parse(args)
	switch {
	case !ok:
		return status, false
	case len(pos) == 0:
		return 0, true
	case nameFlag != "":
		return c.usageError("unexpected argument %q: did you mean --%s %s?", pos[0], nameFlag, pos[0]), false
	default:
		return c.usageError("unexpected argument %q", pos[0]), false
	}
}

// parseTopicArg parses args of a subcommand that takes exactly one
// positional argument, the TOPIC. ok false comes with the exit status, as
// from parse.
func (c *clientCmd) parseTopicArg(args []string) (topic string, status int, ok bool) {
	pos, status, ok := c.parse(args)
	switch {
	case !ok:
		return "", status, false
	case len(pos) != 1:
		return "", c.usageError("want exactly one TOPIC, got %d arguments", len(pos)), false
	}
	return pos[0], 0, true
}
