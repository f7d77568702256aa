//go:build !linux

package broker

// lowerCleanerPriority: per-thread priorities are set on Linux only.
func lowerCleanerPriority() (restore func(), err error) { return func() {}, nil }
