package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Sockets of the test process in a host's namespace. A socket belongs to
// the namespace of the thread that creates it and stays there, so Listen
// and DialContext create theirs on a thread moved into the host's
// namespace (setns(2)) for that call only; the listener and the
// connection are then used from any goroutine.

// Listen listens on addr (host:port) in the host's namespace.
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := h.inNetns(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// DialContext connects to addr from the host's namespace (for a
// kgo.Dialer, an http.Transport or a zk.Dialer).
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.inNetns(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// inNetns runs fn on an OS thread of its own in the host's namespace. The
// thread goes back to the namespace it came from before it serves any
// other goroutine; if it cannot, it is left locked, and the runtime ends
// it with the goroutine.
func (h *Host) inNetns(fn func() error) error {
	if h.netns == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			restored = true // not moved yet
			done <- fmt.Errorf("netlab: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + h.netns)
		if err != nil {
			restored = true
			done <- fmt.Errorf("netlab: host %s: %w", h.name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true
			done <- fmt.Errorf("netlab: setns into %s: %w", h.netns, err)
			return
		}
		ferr := fn()
		restored = unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil
		done <- ferr
	}()
	return <-done
}
