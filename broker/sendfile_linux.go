package broker

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// sendfileSupported: zero-copy fetch is available.
const sendfileSupported = true

// sendFileRange sends size bytes of f starting at pos to the socket with
// sendfile(2), zero copy.
//
// It does not use (*net.TCPConn).ReadFrom: Go hands that to sendfile only
// for an *os.File (optionally inside an io.LimitedReader), and then sends
// from the file's shared position, which concurrent fetches of the same
// segment would race on; an io.SectionReader is not recognised and falls
// back to a user-space copy. Instead sendfile gets an explicit offset (so
// the file position is never used) through the connection's RawConn,
// which waits for writability and honours the write deadline. The file's
// descriptor is pinned with Control, which, unlike Read, does not
// serialize concurrent senders of the same file.
func sendFileRange(tc *net.TCPConn, f *os.File, pos, size int64) (int64, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var serr error
	cerr := fc.Control(func(ffd uintptr) {
		werr := rc.Write(func(sfd uintptr) bool {
			for written < size {
				off := pos + written
				n, err := syscall.Sendfile(int(sfd), int(ffd), &off, int(min(size-written, 1<<30)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err == syscall.EINTR:
					continue
				case err != nil:
					serr = &os.SyscallError{Syscall: "sendfile", Err: err}
					return true
				case n == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the range
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	return written, serr
}

// setCork sets TCP_CORK, so a response's header bytes and file ranges
// leave in full segments; clearing it flushes.
func setCork(tc *net.TCPConn, on bool) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	}); err != nil {
		return err
	}
	if serr != nil {
		return errors.Join(errors.New("broker: TCP_CORK"), serr)
	}
	return nil
}
