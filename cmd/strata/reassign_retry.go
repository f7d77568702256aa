package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file holds the retries of the reassignment commands (`strata
// cluster rebalance|add-broker|decommission`, `strata topic reassign`).
// A broker answers AlterPartitionReassignments and IncrementalAlterConfigs
// with REQUEST_TIMED_OUT while it cannot reach the coordination service
// (ZooKeeper stalled or cut off: the outcome of the write is unknown), and
// NOT_CONTROLLER while it shuts down or the controller moves. Both change
// a reassignment target or a config to a value, so sending them again is
// safe: the commands retry those partitions and resources, with a
// doubling backoff, until they succeed or the retry bound is spent. Any
// other error (INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, ...) fails at
// once.

// Retry timing; tests shorten them.
var (
	// retryBound is how long a request answered with a retriable error is
	// retried before the command gives up (with --timeout, the smaller).
	retryBound = 60 * time.Second
	// retryFirstBackoff is the wait before the first retry; it doubles
	// up to retryMaxBackoff.
	retryFirstBackoff = 500 * time.Millisecond
	retryMaxBackoff   = 5 * time.Second
)

// retriableAdminErr reports whether err is an answer worth retrying.
func retriableAdminErr(err error) bool {
	return errors.Is(err, kerr.RequestTimedOut) || errors.Is(err, kerr.NotController)
}

// retrier retries one kind of request for a command.
type retrier struct {
	c     *clientCmd
	what  string // "AlterPartitionReassignments", printed when retrying
	bound time.Duration
}

// newRetrier retries what for at most retryBound, or limit if it is
// shorter and > 0.
func (c *clientCmd) newRetrier(what string, limit time.Duration) *retrier {
	bound := retryBound
	if limit > 0 && limit < bound {
		bound = limit
	}
	return &retrier{c: c, what: what, bound: bound}
}

// do calls attempt until it returns no pending names (those it must send
// again), the bound is spent, or ctx is done. attempt's err is the
// retriable error of the pending names (or of the whole request); any
// other error must not be returned as pending. do returns the last
// retriable error when it gives up, nil when nothing is pending.
func (r *retrier) do(ctx context.Context, attempt func(ctx context.Context) (pending []string, err error)) error {
	start := time.Now()
	backoff := retryFirstBackoff
	for try := 1; ; try++ {
		pending, err := attempt(ctx)
		if len(pending) == 0 {
			if try > 1 {
				fmt.Fprintf(r.c.stderr, "strata %s: %s succeeded after %s (%v).\n", r.c.name, r.what, plural(int64(try), "attempt"), time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		left := r.bound - time.Since(start)
		if left <= 0 {
			return fmt.Errorf("%s: still failing after %s over %v (the retry bound): %s: %w", r.what, plural(int64(try), "attempt"), r.bound, strings.Join(pending, ", "), err)
		}
		wait := min(backoff, left)
		fmt.Fprintf(r.c.stderr, "strata %s: %s of %s: %v; retrying in %v (attempt %d, giving up after %v).\n",
			r.c.name, r.what, strings.Join(pending, ", "), err, wait.Round(time.Millisecond), try+1, r.bound)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last answer: %w)", r.what, ctx.Err(), err)
		case <-time.After(wait):
		}
		backoff = min(2*backoff, retryMaxBackoff)
	}
}

// alterReassignments sends req, retrying the partitions answered with a
// retriable error, and returns every partition's last answer. A cancel
// retried after an unknown outcome that finds no reassignment in
// progress counts as done (the earlier attempt cancelled it, or it
// completed meanwhile), with a note.
func (r *retrier) alterReassignments(ctx context.Context, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) ([]kadm.AlterPartitionAssignmentsResponse, error) {
	results := map[string]kadm.AlterPartitionAssignmentsResponse{}
	pendingReq := req
	unknown := map[string]bool{} // partitions with an earlier retriable answer
	var fatal error
	err := r.do(ctx, func(ctx context.Context) ([]string, error) {
		res, err := adm.AlterPartitionAssignments(ctx, pendingReq)
		if err != nil {
			if !retriableAdminErr(err) {
				fatal = err
				return nil, nil
			}
			var names []string
			for t, ps := range pendingReq {
				for p := range ps {
					names = append(names, fmt.Sprintf("%s-%d", t, p))
					unknown[fmt.Sprintf("%s-%d", t, p)] = true
				}
			}
			slices.Sort(names)
			return names, err
		}
		next := kadm.AlterPartitionAssignmentsReq{}
		var names []string
		var last error
		for _, a := range res.Sorted() {
			tp := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
			cancel := pendingReq[a.Topic][a.Partition] == nil
			if cancel && unknown[tp] && errors.Is(a.Err, kerr.NoReassignmentInProgress) {
				fmt.Fprintf(r.c.stderr, "strata %s: %s: no reassignment in progress any more: the earlier attempt cancelled it, or it completed meanwhile.\n", r.c.name, tp)
				a.Err, a.ErrMessage = nil, ""
			}
			results[tp] = a
			if retriableAdminErr(a.Err) {
				next.Assign(a.Topic, a.Partition, pendingReq[a.Topic][a.Partition])
				names = append(names, tp)
				unknown[tp] = true
				last = kafkaError(a.Err, a.ErrMessage)
			}
		}
		pendingReq = next
		return names, last
	})
	if fatal != nil {
		return nil, fatal
	}
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	if len(results) == 0 { // every attempt failed as a whole
		return nil, err
	}
	// Partitions still answered with a retriable error after the bound
	// keep that answer in the results.
	out := make([]kadm.AlterPartitionAssignmentsResponse, 0, len(results))
	for _, k := range slices.Sorted(maps.Keys(results)) {
		out = append(out, results[k])
	}
	return out, nil
}

// alterConfigs applies configs to the brokers or topics (exactly one of
// them), retrying the resources answered with a retriable error; kind
// names them in errors ("broker", "topic").
func (r *retrier) alterConfigs(ctx context.Context, adm *kadm.Client, configs []kadm.AlterConfig, brokers []int32, topics []string) error {
	kind := "topic"
	if brokers != nil {
		kind = "broker"
	}
	pendingB, pendingT := brokers, topics
	var final error
	err := r.do(ctx, func(ctx context.Context) ([]string, error) {
		var res kadm.AlterConfigsResponses
		var err error
		if kind == "broker" {
			res, err = adm.AlterBrokerConfigs(ctx, configs, pendingB...)
		} else {
			res, err = adm.AlterTopicConfigs(ctx, configs, pendingT...)
		}
		if err != nil {
			if retriableAdminErr(err) {
				var names []string
				for _, b := range pendingB {
					names = append(names, fmt.Sprintf("broker %d", b))
				}
				for _, t := range pendingT {
					names = append(names, "topic "+t)
				}
				return names, err
			}
			final = err
			return nil, nil
		}
		var names []string
		var last error
		var nextB []int32
		var nextT []string
		for _, a := range res {
			switch {
			case a.Err == nil:
			case retriableAdminErr(a.Err):
				names = append(names, kind+" "+a.Name)
				last = kafkaError(a.Err, a.ErrMessage)
				if kind == "broker" {
					for _, b := range pendingB {
						if fmt.Sprint(b) == a.Name {
							nextB = append(nextB, b)
						}
					}
				} else {
					nextT = append(nextT, a.Name)
				}
			case final == nil:
				final = fmt.Errorf("%s %s: %w", kind, a.Name, kafkaError(a.Err, a.ErrMessage))
			}
		}
		pendingB, pendingT = nextB, nextT
		return names, last
	})
	return errors.Join(final, err)
}
