package main

import (
	"context"
	"time"
)

// How the admin actions (topic, groups, cluster) talk to the cluster: one
// session for the action, bounded by adminTimeout and ended by Ctrl-C.

// adminContextFor bounds an admin action by d and ends it on Ctrl-C.
func adminContextFor(d time.Duration) (context.Context, context.CancelFunc) {
	sctx, stop := signalContext()
	ctx, cancel := context.WithTimeout(sctx, d)
	return ctx, func() { cancel(); stop() }
}

// withAdmin connects for an admin action, runs action with the session and
// the context its requests use, and closes the session. A failure to
// connect is reported (exit status 1); otherwise the exit status is
// action's.
func (c *clientCmd) withAdmin(action func(ctx context.Context, s *session) int) int {
	return c.withAdminFor(adminTimeout, action)
}

// withAdminFor is withAdmin bounded by d instead of adminTimeout.
func (c *clientCmd) withAdminFor(d time.Duration, action func(ctx context.Context, s *session) int) int {
	ctx, cancel := adminContextFor(d)
	defer cancel()
	s, ctx, err := c.connect(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	return action(ctx, s)
}
