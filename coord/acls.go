package coord

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/stratastream/strata/broker/acl"
)

// ACLStore is the part of Coordinator that keeps the cluster's ACLs (Kafka's
// authorization bindings, package acl): stored in ZooKeeper as Kafka stores
// them (doc.go, "ACLs"), or in the embedded store's ACLFile.
//
// Bindings are validated by the caller (acl.Binding.Validate; the store
// refuses invalid ones with an error wrapping acl.ErrInvalid). Durability
// and errors are Coordinator's: a nil error means the change is durable;
// ErrUnavailable and context errors leave it unknown.
type ACLStore interface {
	// CreateACLs adds bindings and returns one error per binding, nil when
	// the binding is stored (also when it was already there). Concurrent
	// creations on one resource pattern, from any broker, all land: each
	// is a compare-and-set on the pattern's znode version, retried.
	CreateACLs(ctx context.Context, bindings []acl.Binding) []error

	// DeleteACLs removes the bindings the filters match and returns, per
	// filter, the bindings it matched and deleted, or an error. Every
	// filter is matched against the bindings as they were before this
	// call, so a binding two filters match is reported by both (Kafka's
	// StandardAuthorizer does the same).
	DeleteACLs(ctx context.Context, filters []acl.Filter) []ACLDeleteResult

	// ACLs returns the last known bindings, sorted (resource type,
	// pattern type, name, principal, host, operation, permission), and a
	// channel closed at the next change after them. It never blocks on
	// the network. After CreateACLs or DeleteACLs returns, ACLs reflects
	// it; changes made by other brokers arrive through ZooKeeper's
	// change notifications, normally within milliseconds. The slice is
	// shared and must not be modified.
	ACLs() (bindings []acl.Binding, changed <-chan struct{})
}

// ACLDeleteResult is DeleteACLs' result for one filter.
type ACLDeleteResult struct {
	Deleted []acl.Binding
	Err     error
}

// aclTable is the in-memory set of ACLs of one coordinator (ZK: the
// cache fed by change notifications; Local: the store's state), by
// resource pattern. Its sorted binding list is built when first asked
// for after a change (so a burst of changes sorts once) and handed out
// shared.
type aclTable struct {
	mu struct {
		sync.Mutex
		byPattern map[acl.Pattern][]acl.Entry
		list      []acl.Binding // nil after a change until snapshot builds it
		changed   chan struct{}
	}
}

func newACLTable() *aclTable {
	t := &aclTable{}
	t.mu.byPattern = map[acl.Pattern][]acl.Entry{}
	t.mu.changed = make(chan struct{})
	return t
}

func (t *aclTable) snapshot() ([]acl.Binding, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.list == nil {
		t.mu.list = bindingList(t.mu.byPattern)
		if t.mu.list == nil {
			t.mu.list = []acl.Binding{}
		}
	}
	return t.mu.list, t.mu.changed
}

// set replaces a pattern's entries (none removes the pattern).
func (t *aclTable) set(p acl.Pattern, es []acl.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.mu.byPattern[p]
	if slices.Equal(sortedEntries(old), sortedEntries(es)) {
		return
	}
	if len(es) == 0 {
		delete(t.mu.byPattern, p)
	} else {
		t.mu.byPattern[p] = slices.Clone(es)
	}
	t.publishLocked()
}

// replaceAll replaces every pattern's entries.
func (t *aclTable) replaceAll(all map[acl.Pattern][]acl.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := map[acl.Pattern][]acl.Entry{}
	for p, es := range all {
		if len(es) > 0 {
			next[p] = slices.Clone(es)
		}
	}
	same := len(next) == len(t.mu.byPattern)
	for p, es := range next {
		if !same {
			break
		}
		same = slices.Equal(sortedEntries(es), sortedEntries(t.mu.byPattern[p]))
	}
	t.mu.byPattern = next
	if !same {
		t.publishLocked()
	}
}

func (t *aclTable) publishLocked() {
	t.mu.list = nil
	close(t.mu.changed)
	t.mu.changed = make(chan struct{})
}

// all returns a copy of the table by pattern.
func (t *aclTable) all() map[acl.Pattern][]acl.Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[acl.Pattern][]acl.Entry, len(t.mu.byPattern))
	for p, es := range t.mu.byPattern {
		out[p] = slices.Clone(es)
	}
	return out
}

func compareEntries(a, b acl.Entry) int {
	return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

func comparePatterns(a, b acl.Pattern) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(a.Name, b.Name))
}

func sortPatterns(ps []acl.Pattern) { slices.SortFunc(ps, comparePatterns) }

func compareBindings(a, b acl.Binding) int {
	return cmp.Or(comparePatterns(a.Pattern, b.Pattern), compareEntries(a.Entry, b.Entry))
}

func sortedEntries(es []acl.Entry) []acl.Entry {
	out := slices.Clone(es)
	slices.SortFunc(out, compareEntries)
	return slices.Compact(out)
}

func bindingList(m map[acl.Pattern][]acl.Entry) []acl.Binding {
	var out []acl.Binding
	for p, es := range m {
		for _, e := range es {
			out = append(out, acl.Binding{Pattern: p, Entry: e})
		}
	}
	slices.SortFunc(out, compareBindings)
	return slices.Compact(out)
}

// groupByPattern splits bindings by pattern, keeping each binding's index.
func groupByPattern(bindings []acl.Binding) (order []acl.Pattern, idx map[acl.Pattern][]int) {
	idx = map[acl.Pattern][]int{}
	for i, b := range bindings {
		if _, ok := idx[b.Pattern]; !ok {
			order = append(order, b.Pattern)
		}
		idx[b.Pattern] = append(idx[b.Pattern], i)
	}
	return order, idx
}

// merged returns es with add appended, without duplicates, and whether
// anything was added.
func merged(es []acl.Entry, add []acl.Entry) ([]acl.Entry, bool) {
	out := slices.Clone(es)
	grew := false
	for _, e := range add {
		if !slices.Contains(out, e) {
			out = append(out, e)
			grew = true
		}
	}
	return out, grew
}

// deletions matches filters against the table as it is: per filter the
// bindings it matches, and per pattern the entries to remove.
func deletions(all map[acl.Pattern][]acl.Entry, filters []acl.Filter) (perFilter [][]acl.Binding, remove map[acl.Pattern][]acl.Entry) {
	perFilter = make([][]acl.Binding, len(filters))
	remove = map[acl.Pattern][]acl.Entry{}
	for p, es := range all {
		for i, f := range filters {
			if !f.MatchesPattern(p) {
				continue
			}
			for _, e := range es {
				if f.MatchesEntry(e) {
					perFilter[i] = append(perFilter[i], acl.Binding{Pattern: p, Entry: e})
					if !slices.Contains(remove[p], e) {
						remove[p] = append(remove[p], e)
					}
				}
			}
		}
	}
	for i := range perFilter {
		slices.SortFunc(perFilter[i], compareBindings)
	}
	return perFilter, remove
}

// without returns es less the entries in drop.
func without(es, drop []acl.Entry) []acl.Entry {
	var out []acl.Entry
	for _, e := range es {
		if !slices.Contains(drop, e) {
			out = append(out, e)
		}
	}
	return out
}
