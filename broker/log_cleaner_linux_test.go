package broker

import (
	"runtime"
	"syscall"
	"testing"
)

// TestCleanerPriorityRestored: a cleaner thread's OS thread runs at nice
// 10 and is put back to its priority when the thread ends, so Go keeps
// the OS thread (ending it would kill the children started from it with
// Pdeathsig, as the tests' ZooKeeper is).
func TestCleanerPriorityRestored(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // outer lock: the thread stays ours after restore unlocks once
		defer runtime.UnlockOSThread()
		tid := syscall.Gettid()
		before, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
		if err != nil {
			done <- err
			return
		}
		restore, err := lowerCleanerPriority()
		if err != nil {
			done <- err
			return
		}
		during, _ := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
		restore()
		after, _ := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
		if 20-during != cleanerNice || after != before {
			t.Errorf("nice before %d, during %d, after %d; want %d during and the first after", 20-before, 20-during, 20-after, cleanerNice)
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Skipf("priorities not settable here: %v", err)
	}
}
