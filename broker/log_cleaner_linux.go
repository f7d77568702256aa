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
// its OS thread and lowers that thread's priority; the goroutine calls
// the returned restore when it ends. restore puts the thread's priority
// back and unlocks it, so the thread goes on serving other goroutines.
// When the priority cannot be raised back (a process without
// CAP_SYS_NICE), restore leaves the thread locked and Go ends the thread
// with the goroutine, so the niceness never reaches other goroutines.
// Ending a thread is not free: a child process started from it with
// Pdeathsig (tests start ZooKeeper that way) is killed, hence the
// restore whenever it can.
func lowerCleanerPriority() (restore func(), err error) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	// The raw getpriority(2) value is 20 - nice.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	old := 20 - raw
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, cleanerNice); err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	return func() {
		if syscall.Setpriority(syscall.PRIO_PROCESS, tid, old) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}
