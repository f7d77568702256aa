package acl

import (
	"encoding/json"
	"fmt"
)

// storedVersion is the "version" of Kafka's ACL znode JSON.
const storedVersion = 1

// storedEntry is one element of "acls" in Kafka's znode JSON. The field
// names are Kafka's stored format: never change them.
type storedEntry struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

type storedACLs struct {
	Version int           `json:"version"`
	ACLs    []storedEntry `json:"acls"`
}

// EncodeEntries returns Kafka's znode JSON for the entries of one
// resource pattern (kafka.zk.ResourceZNode.encode).
func EncodeEntries(entries []Entry) []byte {
	s := storedACLs{Version: storedVersion, ACLs: make([]storedEntry, 0, len(entries))}
	for _, e := range entries {
		s.ACLs = append(s.ACLs, storedEntry{Principal: e.Principal, PermissionType: e.Permission.Name(), Operation: e.Operation.Name(), Host: e.Host})
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic("acl: encode entries: " + err.Error()) // strings only
	}
	return b
}

// DecodeEntries parses Kafka's znode JSON (AclEntry.fromBytes). Empty
// data is no entries, as in Kafka. Every entry must be valid: a principal
// "Type:name", a host, a concrete operation and permission; otherwise
// the error wraps ErrInvalid.
func DecodeEntries(b []byte) ([]Entry, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s struct {
		Version *int          `json:"version"`
		ACLs    []storedEntry `json:"acls"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: stored ACLs: %w", ErrInvalid, err)
	}
	if s.Version == nil || *s.Version != storedVersion {
		return nil, fmt.Errorf("%w: stored ACLs: version is not %d", ErrInvalid, storedVersion)
	}
	out := make([]Entry, 0, len(s.ACLs))
	for _, se := range s.ACLs {
		e := Entry{Principal: se.Principal, Host: se.Host, Operation: ParseOperation(se.Operation), Permission: ParsePermissionType(se.PermissionType)}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("stored ACLs: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

func (e Entry) validate() error {
	switch {
	case !e.Operation.known():
		return fmt.Errorf("%w: invalid operation %s", ErrInvalid, e.Operation)
	case !e.Permission.known():
		return fmt.Errorf("%w: invalid permission type %s", ErrInvalid, e.Permission)
	case e.Host == "":
		return fmt.Errorf("%w: empty host", ErrInvalid)
	}
	_, _, err := ParsePrincipal(e.Principal)
	return err
}
