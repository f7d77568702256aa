package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/term"
)

func init() {
	register(&command{
		name:    "users",
		summary: "create, delete, list users' SCRAM credentials",
		actions: usersActions,
		help:    usersHelp,
	})
}

var usersActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"create": runUsersCreate,
	"delete": runUsersDelete,
	"list":   runUsersList,
}

const usersHelp = `Usage: strata users <action> [flags]

Manages the SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512) SASL listeners
authenticate users with, through the Kafka APIs AlterUserScramCredentials and
DescribeUserScramCredentials, like kafka-configs.sh --entity-type users. The
password is salted here; only the salted password reaches the broker, which
keeps Kafka's salted keys in ZooKeeper (or the embedded coordinator).

Actions:
  create  set a user's password for one or more mechanisms (replaces an
          existing one)
  delete  remove a user's credentials
  list    print users, their mechanisms and iterations

Run 'strata users <action> --help' for its flags and an example.

Example:
  strata users create alice --mechanism SCRAM-SHA-512 --password-file alice.pw
  strata users list
`

// usersPassword is where create reads a password without --password-file
// or STRATA_PASSWORD; tests replace it.
var usersPassword io.Reader = os.Stdin

func scramMechanism(name string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(name) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("unknown mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", name)
}

func runUsersCreate(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("users create", `Usage: strata users create USER [--mechanism M]... [flags]

Sets USER's password for each --mechanism (SCRAM-SHA-512 when none is
given), with a new random salt and --iterations. An existing credential of
the mechanism is replaced. The password is read, in this order, from
--password-file (its first line), from the environment variable
STRATA_PASSWORD, or from stdin (asked for twice without echo on a
terminal). It is never printed or logged.
`, `
Example:
  strata users create alice --mechanism SCRAM-SHA-256 --mechanism SCRAM-SHA-512 --iterations 8192 < alice.pw
  STRATA_PASSWORD=alice-secret strata users create alice
`, stdout, stderr)
	user := c.fs.String("user", "", "the `USER` name (required)")
	var mechs stringsFlag
	c.fs.Var(&mechs, "mechanism", "`M`: SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (default SCRAM-SHA-512)")
	iterations := c.fs.Int("iterations", 4096, "SCRAM iterations `N`, 4096 to 16384")
	passFile := c.fs.String("password-file", "", "read the password from the first line of file `PATH`")
	if status, ok := c.parseFlagsOnly(args, "user"); !ok {
		return status
	}
	if *user == "" {
		return c.missingName()
	}
	if *iterations < 4096 || *iterations > 16384 {
		return c.usageError("--iterations %d: must be between 4096 and 16384", *iterations)
	}
	if len(mechs) == 0 {
		mechs = stringsFlag{"SCRAM-SHA-512"}
	}
	var upserts []kadm.UpsertSCRAM
	seen := map[kadm.ScramMechanism]bool{}
	for _, m := range mechs {
		mech, err := scramMechanism(m)
		if err != nil {
			return c.usageError("--mechanism: %v", err)
		}
		if seen[mech] {
			continue
		}
		seen[mech] = true
		upserts = append(upserts, kadm.UpsertSCRAM{User: *user, Mechanism: mech, Iterations: int32(*iterations)})
	}
	pass, err := readPassword(*passFile, stderr)
	if err != nil {
		return c.fail(err)
	}
	for i := range upserts {
		upserts[i].Password = pass
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		res, err := s.adm.AlterUserSCRAMs(ctx, nil, upserts)
		if err != nil {
			return c.fail(err)
		}
		if err := alteredErr(res, *user); err != nil {
			return c.fail(err)
		}
		var names []string
		for _, u := range upserts {
			names = append(names, u.Mechanism.String())
		}
		fmt.Fprintf(stdout, "Set the %s credentials of user %s.\n", strings.Join(names, " and "), *user)
		return 0
	})
}

// readPassword reads the password from file, STRATA_PASSWORD or stdin.
func readPassword(file string, stderr io.Writer) (string, error) {
	var pass string
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--password-file: %w", err)
		}
		defer f.Close()
		if pass, err = firstLine(f); err != nil {
			return "", fmt.Errorf("--password-file %s: %w", file, err)
		}
	case os.Getenv("STRATA_PASSWORD") != "":
		pass = os.Getenv("STRATA_PASSWORD")
	default:
		if f, ok := usersPassword.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return readTerminalPassword(int(f.Fd()), stderr)
		}
		var err error
		if pass, err = firstLine(usersPassword); err != nil {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
	}
	if pass == "" {
		return "", withHint(errors.New("the password is empty"), "Give it with --password-file, STRATA_PASSWORD or on stdin.")
	}
	return pass, nil
}

func firstLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func readTerminalPassword(fd int, stderr io.Writer) (string, error) {
	fmt.Fprint(stderr, "Password: ")
	a, err := term.ReadPassword(fd)
	fmt.Fprintln(stderr)
	if err != nil {
		return "", err
	}
	fmt.Fprint(stderr, "Again: ")
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(stderr)
	if err != nil {
		return "", err
	}
	if string(a) != string(b) {
		return "", errors.New("the passwords do not match")
	}
	if len(a) == 0 {
		return "", errors.New("the password is empty")
	}
	return string(a), nil
}

// alteredErr is the broker's error for user, if any.
func alteredErr(res kadm.AlteredUserSCRAMs, user string) error {
	a, ok := res[user]
	if !ok {
		return fmt.Errorf("the broker's answer does not mention user %s", user)
	}
	return kafkaError(a.Err, a.ErrMessage)
}

func runUsersDelete(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("users delete", `Usage: strata users delete USER [--mechanism M]... [flags]

Removes USER's credentials of each --mechanism, or all of them when none
is given. Connections already authenticated stay open; new ones are refused.
`, `
Example:
  strata users delete alice
  strata users delete alice --mechanism SCRAM-SHA-256
`, stdout, stderr)
	user := c.fs.String("user", "", "the `USER` name (required)")
	var mechs stringsFlag
	c.fs.Var(&mechs, "mechanism", "`M`: SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (default: all the user has)")
	if status, ok := c.parseFlagsOnly(args, "user"); !ok {
		return status
	}
	if *user == "" {
		return c.missingName()
	}
	var dels []kadm.DeleteSCRAM
	seen := map[kadm.ScramMechanism]bool{}
	for _, m := range mechs {
		mech, err := scramMechanism(m)
		if err != nil {
			return c.usageError("--mechanism: %v", err)
		}
		if !seen[mech] {
			seen[mech] = true
			dels = append(dels, kadm.DeleteSCRAM{User: *user, Mechanism: mech})
		}
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		if len(dels) == 0 {
			d, err := describeUser(ctx, s, *user)
			if err != nil {
				return c.fail(err)
			}
			for _, ci := range d.CredInfos {
				dels = append(dels, kadm.DeleteSCRAM{User: *user, Mechanism: ci.Mechanism})
			}
		}
		res, err := s.adm.AlterUserSCRAMs(ctx, dels, nil)
		if err != nil {
			return c.fail(err)
		}
		if err := alteredErr(res, *user); err != nil {
			if errors.Is(err, kerr.ResourceNotFound) {
				return c.fail(withHint(err, "List the user's credentials with 'strata users list --user "+*user+"'."))
			}
			return c.fail(err)
		}
		var names []string
		for _, d := range dels {
			names = append(names, d.Mechanism.String())
		}
		fmt.Fprintf(stdout, "Deleted the %s credentials of user %s.\n", strings.Join(names, " and "), *user)
		return 0
	})
}

func describeUser(ctx context.Context, s *session, user string) (kadm.DescribedUserSCRAM, error) {
	res, err := s.adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return kadm.DescribedUserSCRAM{}, err
	}
	d, ok := res[user]
	switch {
	case !ok:
		return d, fmt.Errorf("the broker's answer does not mention user %s", user)
	case errors.Is(d.Err, kerr.ResourceNotFound):
		return d, withHint(fmt.Errorf("user %q has no SCRAM credentials", user), "List the users with 'strata users list'.")
	case d.Err != nil:
		return d, kafkaError(d.Err, d.ErrMessage)
	}
	return d, nil
}

func runUsersList(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("users list", `Usage: strata users list [USER]... [flags]

Prints a line per user and mechanism: USER, MECHANISM, ITERATIONS, sorted by
user. Salts and keys are never shown (the broker does not answer them).
`, `
Example:
  strata users list
  strata users list alice
`, stdout, stderr)
	var users stringsFlag
	c.fs.Var(&users, "user", "only `USER`; repeat for more")
	format := c.formatFlag()
	if status, ok := c.parseFlagsOnly(args, "user"); !ok {
		return status
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		var list []kadm.DescribedUserSCRAM
		if len(users) == 0 {
			res, err := s.adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return c.fail(err)
			}
			list = res.Sorted()
		} else {
			for _, u := range users.unique() {
				d, err := describeUser(ctx, s, u)
				if err != nil {
					return c.fail(err)
				}
				list = append(list, d)
			}
		}
		if format.json() {
			out := jsonUsers{Users: []jsonUser{}}
			for _, d := range list {
				if d.Err != nil {
					return c.fail(fmt.Errorf("user %s: %w", d.User, kafkaError(d.Err, d.ErrMessage)))
				}
				u := jsonUser{User: d.User, Credentials: []jsonCredential{}}
				for _, ci := range d.CredInfos {
					u.Credentials = append(u.Credentials, jsonCredential{Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
				}
				out.Users = append(out.Users, u)
			}
			return c.printJSON(out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
		for _, d := range list {
			if d.Err != nil {
				return c.fail(fmt.Errorf("user %s: %w", d.User, kafkaError(d.Err, d.ErrMessage)))
			}
			for _, ci := range d.CredInfos {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", d.User, ci.Mechanism, ci.Iterations)
			}
		}
		tw.Flush()
		return 0
	})
}

// unique is the distinct values in order, as given.
func (f stringsFlag) unique() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range f {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
