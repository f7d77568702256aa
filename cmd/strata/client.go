package main

// What the client subcommands (topic, produce, consume, groups, cluster)
// share: their flag handling and help, the connection to
// --bootstrap-server, and errors that name the problem and the next step.
// They speak only the Kafka protocol, through franz-go.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	defaultBootstrap = "127.0.0.1:9092"

	// probeTimeout bounds the first exchange with the cluster: a broker
	// that does not answer ApiVersions within it is reported unreachable.
	probeTimeout = 10 * time.Second
	// dialTimeout bounds one TCP connection attempt.
	dialTimeout = 5 * time.Second
	// adminTimeout bounds an admin command once connected.
	adminTimeout = 30 * time.Second
)

// clientCmd is the flag set and help of one client subcommand, with the
// --bootstrap-server flag every one of them has.
type clientCmd struct {
	name    string // as typed: "topic create"
	usage   string // text before the flags
	example string // text after the flags, starting with "Example"
	fs      *flag.FlagSet
	stdout  io.Writer
	stderr  io.Writer

	// nameFlag is the flag naming the command's resource (topic, group,
	// user), which an argument may give instead; "" for none. Set by
	// parseFlagsOnly and parseTopicArg.
	nameFlag string

	bootstrap *string
	security  *securityFlags
	sec       *clientSecurity // resolved by parse
	watcher   *dialWatcher    // of the last connect
}

func newClientCmd(name, usage, example string, stdout, stderr io.Writer) *clientCmd {
	c := &clientCmd{name: name, usage: usage, example: example, stdout: stdout, stderr: stderr}
	c.fs = flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard) // errors reported by parse
	c.fs.Usage = func() {}     // printed by parse: to stdout for --help
	c.bootstrap = c.fs.String("bootstrap-server", defaultBootstrap, "the brokers to connect to first, as `host:port[,...]`")
	c.security = addSecurityFlags(c.fs)
	return c
}

// printHelp prints the usage, the flags with Kafka's double dashes, and the
// example.
func (c *clientCmd) printHelp(w io.Writer) {
	fmt.Fprint(w, c.usage)
	fmt.Fprint(w, "\nFlags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c.fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		arg := "--" + f.Name
		if len(f.Name) == 1 { // a short alias, as kcat's -e
			arg = "-" + f.Name
		}
		if name != "" {
			arg += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "-1" && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", arg, usage)
	})
	tw.Flush()
	if f := c.fs.Lookup(c.nameFlag); f != nil {
		verb := c.name
		if _, many := f.Value.(*stringsFlag); many {
			fmt.Fprintf(w, "\nThe --%s values may also be given as arguments: 'strata %s A B' is\n'strata %s --%s A --%s B'.\n", f.Name, verb, verb, f.Name, f.Name)
		} else {
			v := strings.ToUpper(f.Name)
			fmt.Fprintf(w, "\nThe --%s value may also be given as the argument: 'strata %s %s' is\n'strata %s --%s %s'.\n", f.Name, verb, v, verb, f.Name, v)
		}
	}
	fmt.Fprint(w, c.example)
}

// parse parses args; flags and positional arguments may be mixed. It
// returns the positional arguments, or ok false with the exit status: 0
// after --help, 2 after a usage error (already reported).
func (c *clientCmd) parse(args []string) (pos []string, status int, ok bool) {
	pos, err := parseMixed(c.fs, args)
	if err != nil {
		if !reportFlagError(c.stderr, c.name, c.fs, err) {
			c.printHelp(c.stdout)
			return nil, 0, false
		}
		return nil, c.usageHint(), false
	}
	if _, err := c.seeds(); err != nil {
		return nil, c.usageError("--bootstrap-server: %v", err), false
	}
	sec, err := c.security.resolve(envOrEmpty)
	if err != nil {
		return nil, c.usageError("%v", err), false
	}
	c.sec = sec
	return pos, 0, true
}

// usageError reports a usage error and returns exit status 2.
func (c *clientCmd) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "strata %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return c.usageHint()
}

func (c *clientCmd) usageHint() int {
	fmt.Fprintf(c.stderr, "Run 'strata %s --help' for its flags and an example.\n", c.name)
	return 2
}

// fail reports err, with its next step when there is one, and returns exit
// status 1.
func (c *clientCmd) fail(err error) int {
	if c.watcher != nil {
		err = c.watcher.explain(err)
	}
	fmt.Fprintf(c.stderr, "strata %s: %v\n", c.name, err)
	if h := hintFor(err); h != "" {
		fmt.Fprintln(c.stderr, h)
	}
	return 1
}

// failf is fail with a message and a next step.
func (c *clientCmd) failf(hint, format string, args ...any) int {
	return c.fail(withHint(fmt.Errorf(format, args...), hint))
}

// seeds splits --bootstrap-server.
func (c *clientCmd) seeds() ([]string, error) {
	var out []string
	for s := range strings.SplitSeq(*c.bootstrap, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("%q: want host:port", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no address given: want host:port[,host:port...]")
	}
	return out, nil
}

// session is a connection to the cluster.
type session struct {
	// ctx is the context given to connect, also canceled when a broker
	// cannot be reached at the address it advertises (the cause is an
	// *advertisedError). Requests of the session use it.
	ctx      context.Context
	abort    context.CancelCauseFunc
	cl       *kgo.Client
	adm      *kadm.Client
	seeds    []string
	versions *kmsg.ApiVersionsResponse // from the first broker that answered
}

// connect builds a client for --bootstrap-server and checks that a broker
// answers, so that an unreachable cluster is reported at once, naming the
// addresses, instead of being retried until a timeout. It returns the
// session and its context, to use for its requests.
func (c *clientCmd) connect(ctx context.Context, opts ...kgo.Opt) (*session, context.Context, error) {
	seeds, err := c.seeds()
	if err != nil {
		return nil, ctx, err
	}
	if c.sec == nil { // parse resolves it; a caller that skipped parse gets the same
		sec, err := c.security.resolve(envOrEmpty)
		if err != nil {
			return nil, ctx, err
		}
		c.sec = sec
	}
	sec := c.sec
	w := &dialWatcher{seeds: len(seeds), tlsOn: sec.tls != nil, sec: sec}
	c.watcher = w
	opts = append(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(dialTimeout),
		kgo.ClientID("strata-cli"),
		kgo.WithHooks(w),
	}, sec.opts()...), opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, ctx, err
	}
	sctx, abort := context.WithCancelCause(ctx)
	pctx, cancel := context.WithCancelCause(sctx)
	defer cancel(nil)
	w.start(cancel, abort)
	pctx, cancelT := context.WithTimeout(pctx, probeTimeout)
	defer cancelT()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(pctx, cl)
	w.probed()
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		cl.Close()
		abort(nil)
		if ctx.Err() != nil {
			return nil, ctx, ctx.Err()
		}
		cause := context.Cause(pctx)
		if cause == nil || errors.Is(cause, context.Canceled) {
			cause = err
		}
		tlsAddr, tlsErr := w.tlsFailure()
		if serr := explainSecurity(cause, tlsAddr, tlsErr, seeds, sec); serr != nil {
			return nil, ctx, serr
		}
		if errors.Is(cause, context.DeadlineExceeded) {
			cause = fmt.Errorf("no answer within %v", probeTimeout)
		}
		return nil, ctx, &unreachableError{addrs: seeds, cause: cause}
	}
	return &session{ctx: sctx, abort: abort, cl: cl, adm: kadm.NewClient(cl), seeds: seeds, versions: resp}, sctx, nil
}

func (s *session) close() {
	s.cl.Close()
	s.abort(nil)
}

// supports reports whether the broker that answered the probe serves the
// API key.
func (s *session) supports(key int16) bool {
	for _, k := range s.versions.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// advertisedFailures is how many failed connections to a broker that was
// never reached end a session: franz-go would retry until the request's
// timeout, and the user would see only that.
const advertisedFailures = 3

// dialWatcher watches franz-go's connection attempts. During the probe it
// cancels the probe once every seed broker failed to connect and none
// succeeded (franz-go itself retries dial errors until the request's
// context ends). After it, it aborts the session when a broker that was
// never reached fails to connect at the address it advertises, which is
// the mark of a wrong advertised.listeners.
type dialWatcher struct {
	seeds int
	tlsOn bool            // the client dials with TLS
	sec   *clientSecurity // for explaining a failed handshake
	mu    struct {
		sync.Mutex
		cancelProbe context.CancelCauseFunc // nil once the probe ended
		abort       context.CancelCauseFunc
		seedFailed  map[int32]bool // by seed index
		anyOK       bool
		aborted     *advertisedError
		reached     map[int32]bool // broker ids connected to once
		// unreached counts the failed connections to brokers never
		// reached, by broker id.
		unreached map[int32]advertisedError
		// tlsAddr and tlsErr are the last TLS handshake that failed.
		tlsAddr string
		tlsErr  error
	}
}

// tlsFailure returns the last TLS handshake that failed, if any.
func (w *dialWatcher) tlsFailure() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.tlsAddr, w.mu.tlsErr
}

var _ kgo.HookBrokerConnect = (*dialWatcher)(nil)

func (w *dialWatcher) start(cancelProbe, abort context.CancelCauseFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.cancelProbe, w.mu.abort = cancelProbe, abort
	w.mu.seedFailed = map[int32]bool{}
	w.mu.reached = map[int32]bool{}
	w.mu.unreached = map[int32]advertisedError{}
}

func (w *dialWatcher) probed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.cancelProbe = nil
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (w *dialWatcher) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.abort == nil {
		return // not started
	}
	// A TLS handshake is part of the dial (conn is nil when it fails),
	// but a TLS 1.3 server's refusal of the client's certificate comes
	// with the first answer (the hook reports the errors of the
	// connection's first requests too). With TCP connected, any error
	// of the dial is the handshake's.
	if err != nil && w.tlsOn && (isTLSError(err) || conn == nil && !isDialError(err) && !errors.Is(err, context.Canceled)) {
		w.mu.tlsAddr, w.mu.tlsErr = net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err
	}
	if err == nil {
		w.mu.anyOK = true
		if meta.NodeID >= 0 {
			w.mu.reached[meta.NodeID] = true
		}
		return
	}
	if meta.NodeID < 0 {
		// A seed broker: ids math.MinInt32, math.MinInt32+1, ...
		w.mu.seedFailed[meta.NodeID-math.MinInt32] = true
		if w.mu.cancelProbe != nil && !w.mu.anyOK && len(w.mu.seedFailed) >= w.seeds {
			w.mu.cancelProbe(err)
		}
		return
	}
	if w.mu.reached[meta.NodeID] || !isDialError(err) {
		return
	}
	u := w.mu.unreached[meta.NodeID]
	u.id, u.addr, u.err = meta.NodeID, net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err
	u.failures++
	w.mu.unreached[meta.NodeID] = u
	if u.failures >= advertisedFailures && w.mu.aborted == nil {
		w.mu.aborted = &u
		w.mu.abort(w.mu.aborted)
	}
}

// explain returns the error that explains err: the one that aborted the
// session, or for a connection error, the broker never reached at its
// advertised address; else err.
func (w *dialWatcher) explain(err error) error {
	if _, ok := errors.AsType[*advertisedError](err); ok {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.aborted != nil {
		return w.mu.aborted
	}
	if isDialError(err) {
		for _, u := range w.mu.unreached {
			return &u
		}
	}
	// A broker reached after the first (a partition's leader) whose
	// handshake failed: franz-go retries it until the request times out.
	if _, done := errors.AsType[*securityError](err); !done && w.mu.tlsErr != nil && w.sec != nil &&
		(errors.Is(err, context.DeadlineExceeded) || isTLSError(err)) {
		return withHintOf(explainTLS(w.mu.tlsAddr, w.mu.tlsErr, w.sec))
	}
	return err
}

// advertisedError is a broker that answered metadata requests through
// another address but cannot be reached at the one it advertises.
type advertisedError struct {
	id       int32
	addr     string
	err      error // the last one
	failures int
}

func (e *advertisedError) Error() string {
	return fmt.Sprintf("cannot reach broker %d at %s, the address it advertises: %v", e.id, e.addr, e.err)
}

func (e *advertisedError) Unwrap() error { return e.err }

// abortCause returns the *advertisedError that ended ctx, or nil.
func abortCause(ctx context.Context) error {
	if a, ok := errors.AsType[*advertisedError](context.Cause(ctx)); ok {
		return a
	}
	return nil
}

// unreachableError is no broker of --bootstrap-server answering.
type unreachableError struct {
	addrs []string
	cause error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach a broker at %s: %v", strings.Join(e.addrs, ","), e.cause)
}

func (e *unreachableError) Unwrap() error { return e.cause }

// hintedError carries the next step for the user.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &hintedError{err: err, hint: hint}
}

// hintFor returns the next step for err, or "".
func hintFor(err error) string {
	if h, ok := errors.AsType[*hintedError](err); ok {
		return h.hint
	}
	if u, ok := errors.AsType[*unreachableError](err); ok {
		h := fmt.Sprintf("Is a broker running there? Start one with 'strata broker' (it listens on %s; or 'make run' in a source checkout), or point --bootstrap-server at a running broker.", defaultBootstrap)
		if !isDialError(u.cause) {
			h += "\nIf a broker is running there, it may be starting or overloaded: check its log and try again."
		}
		return h
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		return "The broker closed the connection at once: its listener may use TLS or SASL. Set security.protocol (--security-protocol or --command-config) to match the listener, with its ssl.* and sasl.* settings (docs/security.md)."
	}
	if _, ok := errors.AsType[*advertisedError](err); ok {
		return "The broker answered at --bootstrap-server but gives clients another address to use: check its advertised.listeners setting, and that this machine can reach that address."
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "The broker did not answer in time: check that it is up and not overloaded (its log says), then try again."
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "List the topics with 'strata topic list', or create this one with 'strata topic create --topic NAME'."
	case errors.Is(err, kerr.InvalidConfig):
		return "See 'strata broker --help' for the topic configs the broker accepts."
	}
	return ""
}

func isDialError(err error) bool {
	if op, ok := errors.AsType[*net.OpError](err); ok {
		return op.Op == "dial"
	}
	return false
}

// brokerError is a Kafka error code with the broker's message.
type brokerError struct {
	err error // a kerr.Error, usually
	msg string
}

func (e *brokerError) Error() string {
	if ke, ok := errors.AsType[*kerr.Error](e.err); ok {
		if e.msg != "" {
			return ke.Message + ": " + e.msg
		}
		return ke.Message + ": " + ke.Description
	}
	if e.msg != "" {
		return e.err.Error() + ": " + e.msg
	}
	return e.err.Error()
}

func (e *brokerError) Unwrap() error { return e.err }

// kafkaError returns nil for a nil err, else err with the broker's message.
func kafkaError(err error, msg string) error {
	if err == nil {
		return nil
	}
	return &brokerError{err: err, msg: msg}
}

// signalContext is canceled by Ctrl-C or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// runActions dispatches `strata NAME ACTION ...` to an action's run
// function; help describes the actions.
func runActions(name, help string, actions map[string]func(args []string, stdout, stderr io.Writer) int, args []string, stdout, stderr io.Writer) int {
	if a := aliasOf(name); a != "" {
		help += fmt.Sprintf("\n'strata %s' is the same command.\n", a)
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "strata %s: no action given\n\n", name)
		fmt.Fprint(stderr, help)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, help)
		return 0
	}
	run, ok := actions[args[0]]
	if !ok {
		names := slices.Collect(maps.Keys(actions))
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "strata %s: %s before the action: flags go after it, as in 'strata %s <action> %s'\n\n", name, args[0], name, args[0])
		} else {
			fmt.Fprintf(stderr, "strata %s: unknown action %q%s\n\n", name, args[0], didYouMean(args[0], names, ""))
		}
		fmt.Fprint(stderr, help)
		return 2
	}
	return run(args[1:], stdout, stderr)
}

// plural is "1 record", "2 records".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// keyValueFlag collects repeated key=value flags in order.
type keyValueFlag [][2]string

func (f *keyValueFlag) String() string { return "" }

func (f *keyValueFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	*f = append(*f, [2]string{k, val})
	return nil
}

// stringsFlag collects a repeated flag.
type stringsFlag []string

func (f *stringsFlag) String() string { return "" }

func (f *stringsFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*f = append(*f, v)
	return nil
}
