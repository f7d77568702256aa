package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment/atomicfile"
)

// ACLFile is the name of the embedded coordinator's ACL file in its
// directory, beside MetadataFile.
const ACLFile = "strata-acls.json"

// localACLFileVersion is the format of ACLFile.
const localACLFileVersion = 1

// localACLFile is ACLFile's JSON: per resource pattern, its entries in
// Kafka's stored form (acl.EncodeEntries). Field names are stored data.
//
//	{"version":1,"patterns":[{"resource_type":"Topic","pattern_type":"LITERAL",
//	  "name":"orders","acls":{"version":1,"acls":[{"principal":"User:alice",
//	  "permissionType":"Allow","operation":"Read","host":"*"}]}}]}
type localACLFile struct {
	Version  int               `json:"version"`
	Patterns []localACLPattern `json:"patterns"`
}

type localACLPattern struct {
	ResourceType string          `json:"resource_type"`
	PatternType  string          `json:"pattern_type"`
	Name         string          `json:"name"`
	ACLs         json.RawMessage `json:"acls"`
}

// loadLocalACLs reads dir/ACLFile into a table (empty if there is none).
func loadLocalACLs(dir string) (*aclTable, error) {
	t := newACLTable()
	path := filepath.Join(dir, ACLFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coord: %w", err)
	}
	var f localACLFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("coord: parse %s: %w", path, err)
	}
	if f.Version != localACLFileVersion {
		return nil, fmt.Errorf("coord: %s has format version %d, this build reads %d", path, f.Version, localACLFileVersion)
	}
	all := map[acl.Pattern][]acl.Entry{}
	for _, lp := range f.Patterns {
		p := acl.Pattern{Type: acl.ParseResourceType(lp.ResourceType), Name: lp.Name, Pattern: acl.ParsePatternType(lp.PatternType)}
		es, err := acl.DecodeEntries(lp.ACLs)
		if err != nil {
			return nil, fmt.Errorf("coord: %s: pattern %v: %w", path, p, err)
		}
		for _, e := range es {
			if err := (acl.Binding{Pattern: p, Entry: e}).Validate(); err != nil {
				return nil, fmt.Errorf("coord: %s: %w", path, err)
			}
		}
		all[p] = append(all[p], es...)
	}
	t.replaceAll(all)
	return t, nil
}

// persistACLsLocked writes all to ACLFile. The caller holds s.mu.
func (s *LocalStore) persistACLsLocked(all map[acl.Pattern][]acl.Entry) error {
	f := localACLFile{Version: localACLFileVersion, Patterns: []localACLPattern{}}
	var order []acl.Pattern
	for p := range all {
		order = append(order, p)
	}
	sortPatterns(order)
	for _, p := range order {
		if len(all[p]) == 0 {
			continue
		}
		f.Patterns = append(f.Patterns, localACLPattern{ResourceType: p.Type.Name(), PatternType: p.Pattern.String(), Name: p.Name,
			ACLs: acl.EncodeEntries(sortedEntries(all[p]))})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("coord: encode ACLs: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, ACLFile), append(b, '\n'), 0o600 /* owner only */); err != nil {
		return fmt.Errorf("coord: persist ACLs: %w", err)
	}
	return nil
}

// CreateACLs implements ACLStore.
func (ss *LocalSession) CreateACLs(ctx context.Context, bindings []acl.Binding) []error {
	errs := make([]error, len(bindings))
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	all := s.acls.all()
	grew := false
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs[i] = err
			continue
		}
		var g bool
		all[b.Pattern], g = merged(all[b.Pattern], []acl.Entry{b.Entry})
		grew = grew || g
	}
	if !grew {
		return errs
	}
	if err := s.persistACLsLocked(all); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	s.acls.replaceAll(all)
	return errs
}

// DeleteACLs implements ACLStore.
func (ss *LocalSession) DeleteACLs(ctx context.Context, filters []acl.Filter) []ACLDeleteResult {
	res := make([]ACLDeleteResult, len(filters))
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(err error) []ACLDeleteResult {
		for i := range res {
			res[i] = ACLDeleteResult{Err: err}
		}
		return res
	}
	if err := ss.checkLocked(); err != nil {
		return fail(err)
	}
	all := s.acls.all()
	perFilter, remove := deletions(all, filters)
	if len(remove) == 0 {
		return res
	}
	for p, drop := range remove {
		all[p] = without(all[p], drop)
	}
	if err := s.persistACLsLocked(all); err != nil {
		return fail(err)
	}
	s.acls.replaceAll(all)
	for i := range res {
		res[i].Deleted = perFilter[i]
	}
	return res
}

// ACLs implements ACLStore.
func (ss *LocalSession) ACLs() ([]acl.Binding, <-chan struct{}) { return ss.store.acls.snapshot() }
