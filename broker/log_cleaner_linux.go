package broker

import (
	"runtime"
	"syscall"
)

// cleanerNice is the nice value of the cleaner threads' OS threads: the
// cleaner is background work, and on a busy machine the produce and
// fetch paths should get the CPU first (the scheduler gives a thread at
// nice 10 about a tenth of the share of one at 0).
const cleanerNice = 10

// lowerCleanerPriority locks the calling goroutine (a cleaner thread) to
// its OS thread and lowers that thread's priority. The goroutine must
// not unlock it: when it exits, Go ends the thread, so the niceness never
// reaches other goroutines.
func lowerCleanerPriority() error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), cleanerNice)
}
