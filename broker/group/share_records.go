package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The records of share groups (KIP-932) in __consumer_offsets, as Kafka's
// group coordinator writes them (its ShareGroup*Key/Value schemas): keys
// as the consumer group ones (an int16 record type, then int16-length
// strings), values of version 0 in the flexible encoding of
// consumer_records.go. doc.go draws them. Stored data depends on these
// numbers: never change or reuse them.
const (
	keyShareMemberV10          int16 = 10 // a member's subscription and client
	keyShareMetadataV11        int16 = 11 // group epoch
	keyShareTargetMetadataV12  int16 = 12 // the target assignment's epoch
	keyShareTargetMemberV13    int16 = 13 // a member's target assignment
	keyShareCurrentMemberV14   int16 = 14 // a member's epochs and assignment
	keyShareStatePartitionsV15 int16 = 15 // the topic partitions with share state

	shareValueV0 int16 = 0
)

// ShareGroupState is what __consumer_offsets holds of one share group.
// Package share owns the membership it describes; this package encodes
// it, appends it to the group's partition and reads it back on Load.
type ShareGroupState struct {
	ID string
	// Epoch is the group epoch (ShareGroupMetadata); AssignmentEpoch the
	// target assignment's (ShareGroupTargetAssignmentMetadata).
	Epoch, AssignmentEpoch int32
	// Members by member id.
	Members map[string]ShareMemberState
	// StatePartitions is ShareGroupStatePartitionMetadata; nil when the
	// group has none.
	StatePartitions *ShareStatePartitions
}

// ShareMemberState is one member's records: its subscription and client
// (ShareGroupMemberMetadata), its target assignment
// (ShareGroupTargetAssignmentMember) and its epochs with its current
// assignment (ShareGroupCurrentMemberAssignment).
type ShareMemberState struct {
	RackID               *string
	ClientID, ClientHost string
	Topics               []string // subscribed topic names
	Target               map[[16]byte][]int32
	Epoch, PreviousEpoch int32
	State                int8 // Kafka's MemberState; share members are 0, STABLE
	Assigned             map[[16]byte][]int32
}

// ShareTopicPartitions is one topic of ShareGroupStatePartitionMetadata:
// its id, name and partitions (none for a deleting topic).
type ShareTopicPartitions struct {
	ID         [16]byte
	Name       string
	Partitions []int32
}

// ShareStatePartitions is ShareGroupStatePartitionMetadataValue: the
// topic partitions whose share state is being initialized, is
// initialized, and the topics whose state is being deleted.
type ShareStatePartitions struct {
	Initializing, Initialized, Deleting []ShareTopicPartitions
}

// shareRecord is one decoded share group record: the key's type, group
// and member, and the value (tombstone for a null one).
type shareRecord struct {
	kind      int16
	member    string
	tombstone bool

	epoch  int32                 // kinds 11, 12
	mem    *ShareMemberState     // kinds 10 (subscription), 14 (epochs, assigned)
	target map[[16]byte][]int32  // kind 13
	state  *ShareStatePartitions // kind 15
}

func shareMemberKind(kind int16) bool {
	return kind == keyShareMemberV10 || kind == keyShareTargetMemberV13 || kind == keyShareCurrentMemberV14
}

// shareKey encodes the key of a share record; member is left out of the
// group-level kinds (11, 12, 15).
func shareKey(kind int16, group, member string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(kind))
	b = appendString(b, group)
	if shareMemberKind(kind) {
		b = appendString(b, member)
	}
	return b
}

func newShareValue() *flexWriter {
	return &flexWriter{b: binary.BigEndian.AppendUint16(nil, uint16(shareValueV0))}
}

// topicPartitions encodes Kafka's []TopicPartitions (topic id, []int32)
// in topic id order.
func (w *flexWriter) topicPartitions(m map[[16]byte][]int32) {
	ids := slices.SortedFunc(maps.Keys(m), func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	w.arrayLen(len(ids))
	for _, id := range ids {
		w.uuid(id)
		ps := slices.Sorted(slices.Values(m[id]))
		w.arrayLen(len(ps))
		for _, p := range ps {
			w.int32(p)
		}
		w.noTags()
	}
}

func (r *flexReader) topicPartitions() map[[16]byte][]int32 {
	out := make(map[[16]byte][]int32)
	for n := r.arrayLen(18); n > 0 && r.err == nil; n-- {
		id := r.uuid()
		ps := []int32{}
		for m := r.arrayLen(4); m > 0; m-- {
			ps = append(ps, r.int32())
		}
		r.skipTags()
		out[id] = append(out[id], ps...)
	}
	return out
}

// shareEpochValue encodes ShareGroupMetadataValue (its tagged
// MetadataHash left at its default) and
// ShareGroupTargetAssignmentMetadataValue: one epoch.
func shareEpochValue(epoch int32) []byte {
	w := newShareValue()
	w.int32(epoch)
	w.noTags()
	return w.b
}

// shareMemberValue encodes ShareGroupMemberMetadataValue.
func shareMemberValue(m ShareMemberState) []byte {
	w := newShareValue()
	w.nullableStr(m.RackID)
	w.str(m.ClientID)
	w.str(m.ClientHost)
	w.arrayLen(len(m.Topics))
	for _, t := range m.Topics {
		w.str(t)
	}
	w.noTags()
	return w.b
}

// shareTargetValue encodes ShareGroupTargetAssignmentMemberValue.
func shareTargetValue(m ShareMemberState) []byte {
	w := newShareValue()
	w.topicPartitions(m.Target)
	w.noTags()
	return w.b
}

// shareCurrentValue encodes ShareGroupCurrentMemberAssignmentValue.
func shareCurrentValue(m ShareMemberState) []byte {
	w := newShareValue()
	w.int32(m.Epoch)
	w.int32(m.PreviousEpoch)
	w.int8(m.State)
	w.topicPartitions(m.Assigned)
	w.noTags()
	return w.b
}

// shareStateValue encodes ShareGroupStatePartitionMetadataValue.
func shareStateValue(s *ShareStatePartitions) []byte {
	w := newShareValue()
	infos := func(ts []ShareTopicPartitions, withPartitions bool) {
		w.arrayLen(len(ts))
		for _, t := range ts {
			w.uuid(t.ID)
			w.str(t.Name)
			if withPartitions {
				w.arrayLen(len(t.Partitions))
				for _, p := range t.Partitions {
					w.int32(p)
				}
			}
			w.noTags()
		}
	}
	infos(s.Initializing, true)
	infos(s.Initialized, true)
	infos(s.Deleting, false)
	w.noTags()
	return w.b
}

func (r *flexReader) shareTopicInfos(withPartitions bool) []ShareTopicPartitions {
	var out []ShareTopicPartitions
	for n := r.arrayLen(17); n > 0 && r.err == nil; n-- {
		t := ShareTopicPartitions{ID: r.uuid(), Name: r.str()}
		if withPartitions {
			for m := r.arrayLen(4); m > 0; m-- {
				t.Partitions = append(t.Partitions, r.int32())
			}
		}
		r.skipTags()
		out = append(out, t)
	}
	return out
}

// decodeShareRecord decodes the record of a share group key (kinds
// 10-15); value nil is a tombstone. Errors wrap ErrBadRecord or
// ErrUnknownRecord.
func decodeShareRecord(kind int16, key, value []byte) (string, shareRecord, error) {
	kr := &flexReader{b: key[2:]}
	group := readKeyString(kr)
	rec := shareRecord{kind: kind}
	if shareMemberKind(kind) {
		rec.member = readKeyString(kr)
	}
	if kr.err != nil || len(kr.b) != 0 {
		return "", rec, fmt.Errorf("%w: share group key of type %d", ErrBadRecord, kind)
	}
	if value == nil {
		rec.tombstone = true
		return group, rec, nil
	}
	r := &flexReader{b: value}
	if v := r.int16(); r.err == nil && v != shareValueV0 {
		return "", rec, fmt.Errorf("%w: share group value of type %d, version %d", ErrUnknownRecord, kind, v)
	}
	switch kind {
	case keyShareMetadataV11, keyShareTargetMetadataV12:
		rec.epoch = r.int32()
	case keyShareMemberV10:
		m := &ShareMemberState{RackID: r.nullableStr(), ClientID: r.str(), ClientHost: r.str(), Topics: []string{}}
		for n := r.arrayLen(1); n > 0; n-- {
			m.Topics = append(m.Topics, r.str())
		}
		rec.mem = m
	case keyShareTargetMemberV13:
		rec.target = r.topicPartitions()
	case keyShareCurrentMemberV14:
		m := &ShareMemberState{Epoch: r.int32(), PreviousEpoch: r.int32(), State: r.int8()}
		m.Assigned = r.topicPartitions()
		rec.mem = m
	case keyShareStatePartitionsV15:
		rec.state = &ShareStatePartitions{
			Initializing: r.shareTopicInfos(true),
			Initialized:  r.shareTopicInfos(true),
			Deleting:     r.shareTopicInfos(false),
		}
	}
	r.skipTags()
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d bytes after the value", len(r.b)))
	}
	if r.err != nil {
		return "", rec, fmt.Errorf("%w: share group value of type %d of %s: %v", ErrBadRecord, kind, group, r.err)
	}
	return group, rec, nil
}

// shareRecords returns the records that bring a share group's records
// in the log from prev (nil: none) to next (nil: deleted), in Kafka's
// order: removed members' tombstones, member subscriptions, group epoch,
// target assignments, target epoch, current assignments, state
// partitions; a deletion tombstones every key prev has, members first.
func shareRecords(prev, next *ShareGroupState) []kv {
	if prev == nil && next == nil {
		return nil
	}
	id := shareGroupID(prev, next)
	var gone, metas, targets, currents []kv
	if prev != nil {
		for _, mid := range slices.Sorted(maps.Keys(prev.Members)) {
			if next == nil || !hasKey(next.Members, mid) {
				gone = append(gone,
					kv{key: shareKey(keyShareCurrentMemberV14, id, mid)},
					kv{key: shareKey(keyShareTargetMemberV13, id, mid)},
					kv{key: shareKey(keyShareMemberV10, id, mid)})
			}
		}
	}
	if next == nil {
		recs := append(gone,
			kv{key: shareKey(keyShareTargetMetadataV12, id, "")},
			kv{key: shareKey(keyShareMetadataV11, id, "")})
		if prev.StatePartitions != nil {
			recs = append(recs, kv{key: shareKey(keyShareStatePartitionsV15, id, "")})
		}
		return recs
	}
	changed := func(enc func(ShareMemberState) []byte, mid string, m ShareMemberState) ([]byte, bool) {
		v := enc(m)
		if prev == nil {
			return v, true
		}
		pm, ok := prev.Members[mid]
		return v, !ok || !bytes.Equal(enc(pm), v)
	}
	for _, mid := range slices.Sorted(maps.Keys(next.Members)) {
		m := next.Members[mid]
		if v, ok := changed(shareMemberValue, mid, m); ok {
			metas = append(metas, kv{key: shareKey(keyShareMemberV10, id, mid), value: v})
		}
		if v, ok := changed(shareTargetValue, mid, m); ok {
			targets = append(targets, kv{key: shareKey(keyShareTargetMemberV13, id, mid), value: v})
		}
		if v, ok := changed(shareCurrentValue, mid, m); ok {
			currents = append(currents, kv{key: shareKey(keyShareCurrentMemberV14, id, mid), value: v})
		}
	}
	recs := append(gone, metas...)
	if prev == nil || prev.Epoch != next.Epoch {
		recs = append(recs, kv{key: shareKey(keyShareMetadataV11, id, ""), value: shareEpochValue(next.Epoch)})
	}
	recs = append(recs, targets...)
	if prev == nil || prev.AssignmentEpoch != next.AssignmentEpoch {
		recs = append(recs, kv{key: shareKey(keyShareTargetMetadataV12, id, ""), value: shareEpochValue(next.AssignmentEpoch)})
	}
	recs = append(recs, currents...)
	switch {
	case next.StatePartitions != nil && (prev == nil || prev.StatePartitions == nil ||
		!bytes.Equal(shareStateValue(prev.StatePartitions), shareStateValue(next.StatePartitions))):
		recs = append(recs, kv{key: shareKey(keyShareStatePartitionsV15, id, ""), value: shareStateValue(next.StatePartitions)})
	case next.StatePartitions == nil && prev != nil && prev.StatePartitions != nil:
		recs = append(recs, kv{key: shareKey(keyShareStatePartitionsV15, id, "")})
	}
	return recs
}

// shareGroupID is the id of the group a store from prev to next is of.
func shareGroupID(prev, next *ShareGroupState) string {
	if next != nil {
		return next.ID
	}
	return prev.ID
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// StoreShareGroup appends the records that bring share group state from
// prev (nil: the log holds none of it) to next (nil: delete the group)
// to the group's partition of __consumer_offsets, in one batch queued
// behind the partition's earlier writes. It returns at once: the channel
// gets the append's result (nil when nothing differed, and no channel
// then). Callers that change a group from several goroutines serialize
// their calls per group, so the log holds the changes in their order.
// A partition this coordinator does not own, or one still loading, is
// its Kafka error code.
func (c *Coordinator) StoreShareGroup(prev, next *ShareGroupState) (int16, <-chan error) {
	recs := shareRecords(prev, next)
	if len(recs) == 0 {
		return 0, nil
	}
	id := shareGroupID(prev, next)
	c.mu.Lock()
	code := c.statusLocked(id)
	var w *writer
	if code == 0 {
		w = c.mu.partitions[c.PartitionFor(id)].w
	}
	c.mu.Unlock()
	if code != 0 {
		return code, nil
	}
	batch, err := buildBatch(c.cfg.Now().UnixMilli(), recs)
	if err != nil {
		c.cfg.Logger.Error("group: encoding share group records failed", "group", id, "err", err)
		return kerr.UnknownServerError.Code, nil
	}
	done := make(chan error, 1)
	if err := w.enqueue(batch, func(_ int64, err error) { done <- err }); err != nil {
		return kerr.NotCoordinator.Code, nil
	}
	return 0, done
}

// shareReplay is a share group's records met by Load.
type shareReplay struct {
	epoch           *int32
	assignmentEpoch int32
	members         map[string]*shareMemberReplay
	state           *ShareStatePartitions
}

type shareMemberReplay struct {
	meta, current *ShareMemberState
	target        map[[16]byte][]int32
}

// apply replays one record: the last record of each key wins, a
// tombstone deletes.
func (sr *shareReplay) apply(rec shareRecord) {
	if shareMemberKind(rec.kind) {
		m := sr.members[rec.member]
		if m == nil {
			m = &shareMemberReplay{}
			sr.members[rec.member] = m
		}
		switch rec.kind {
		case keyShareMemberV10:
			m.meta = rec.mem
		case keyShareTargetMemberV13:
			m.target = rec.target
		case keyShareCurrentMemberV14:
			m.current = rec.mem
		}
		if m.meta == nil && m.target == nil && m.current == nil {
			delete(sr.members, rec.member)
		}
		return
	}
	switch rec.kind {
	case keyShareMetadataV11:
		if rec.tombstone {
			sr.epoch = nil
		} else {
			e := rec.epoch
			sr.epoch = &e
		}
	case keyShareTargetMetadataV12:
		sr.assignmentEpoch = rec.epoch
	case keyShareStatePartitionsV15:
		sr.state = rec.state
	}
}

// build returns the share group the records describe, false when its
// epoch record is gone (deleted). A member without its subscription
// record is gone.
func (sr *shareReplay) build(id string) (ShareGroupState, bool) {
	if sr.epoch == nil {
		return ShareGroupState{}, false
	}
	st := ShareGroupState{ID: id, Epoch: *sr.epoch, AssignmentEpoch: sr.assignmentEpoch, Members: map[string]ShareMemberState{}, StatePartitions: sr.state}
	for mid, mr := range sr.members {
		if mr.meta == nil {
			continue
		}
		m := *mr.meta
		m.Target = mr.target
		if c := mr.current; c != nil {
			m.Epoch, m.PreviousEpoch, m.State, m.Assigned = c.Epoch, c.PreviousEpoch, c.State, c.Assigned
		}
		st.Members[mid] = m
	}
	return st, true
}
