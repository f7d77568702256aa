//go:build !linux

package broker

import (
	"errors"
	"net"
	"os"
)

// sendfileSupported: zero-copy fetch is implemented for Linux only.
const sendfileSupported = false

// sendFileRange is Linux-only; elsewhere fetched records are copied.
func sendFileRange(tc *net.TCPConn, f *os.File, pos, size int64) (int64, error) {
	return 0, errors.ErrUnsupported
}

func setCork(tc *net.TCPConn, on bool) error { return nil }
