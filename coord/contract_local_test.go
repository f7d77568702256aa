package coord

import (
	"sync"
	"testing"
)

// localEnv runs the contract suite against LocalStore sessions.
type localEnv struct {
	t   *testing.T
	dir string
	mu  sync.Mutex
	st  *LocalStore
}

func newLocalEnv(t *testing.T) env {
	e := &localEnv{t: t, dir: t.TempDir()}
	e.st = e.openStore(t)
	return e
}

func (e *localEnv) openStore(t *testing.T) *LocalStore {
	st, err := OpenLocal(e.dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func (e *localEnv) open(t *testing.T) Coordinator {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.st.Connect()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *localEnv) partition(t *testing.T, c Coordinator) { c.(*LocalSession).partition() }
func (e *localEnv) heal(t *testing.T, c Coordinator)      { c.(*LocalSession).heal() }

func (e *localEnv) restart(t *testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e.st = e.openStore(t)
}

func (e *localEnv) setDeleteHook(c Coordinator, fn func() error) {
	c.(*LocalSession).store.hookAfterMarker = fn
}

func TestContractLocal(t *testing.T) { runContract(t, newLocalEnv) }
