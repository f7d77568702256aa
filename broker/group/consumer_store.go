package group

import (
	"bytes"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file writes a consumer group's state to __consumer_offsets and
// rebuilds it on Load, with Kafka's record types (consumer_records.go).
// After every change the group compares its state with what it last
// wrote and appends the records that differ, in Kafka's order: member
// subscriptions, group epoch, topic metadata, target assignment (members,
// then its epoch), current assignments; a removed member gets tombstones
// of its three records. A heartbeat is answered once its records are
// appended.

// consumerWritten is what the log holds of a consumer group, to compare
// the in-memory state with.
type consumerWritten struct {
	epoch, assignmentEpoch int32
	topics                 map[string]TopicMeta
	members                map[string]*writtenMember
	// dirty lists the members whose records may differ from the log's
	// (a heartbeat compares only those); all: every member's may (a new
	// target assignment, a load).
	dirty map[string]struct{}
	all   bool
}

// touch marks a member's records for comparison at the next store.
func (w *consumerWritten) touch(memberID string) { w.dirty[memberID] = struct{}{} }

type writtenMember struct{ meta, target, current []byte }

func newConsumerWritten() *consumerWritten {
	return &consumerWritten{epoch: -1, assignmentEpoch: -1, members: make(map[string]*writtenMember), dirty: make(map[string]struct{})}
}

// consumerRecordsLocked returns the records that bring the log up to the
// group's state, and marks them written.
func (g *group) consumerRecordsLocked() []kv {
	cg := g.consumer
	w := cg.written
	var metas, targets, currents, gone []kv
	for id, m := range cg.members {
		if _, ok := w.dirty[id]; !ok && !w.all {
			continue
		}
		wm := w.members[id]
		if wm == nil {
			wm = &writtenMember{}
			w.members[id] = wm
		}
		if v := consumerMemberValue(m); !bytes.Equal(v, wm.meta) {
			wm.meta = v
			metas = append(metas, kv{key: consumerKey(keyConsumerMemberV5, g.id, id), value: v})
		}
		if v := consumerTargetValue(cg.target[id]); !bytes.Equal(v, wm.target) {
			wm.target = v
			targets = append(targets, kv{key: consumerKey(keyConsumerTargetMemberV7, g.id, id), value: v})
		}
		if v := consumerCurrentValue(m); !bytes.Equal(v, wm.current) {
			wm.current = v
			currents = append(currents, kv{key: consumerKey(keyConsumerCurrentMemberV8, g.id, id), value: v})
		}
	}
	clear(w.dirty)
	w.all = false
	for id := range w.members {
		if cg.members[id] == nil {
			delete(w.members, id)
			gone = append(gone,
				kv{key: consumerKey(keyConsumerCurrentMemberV8, g.id, id)},
				kv{key: consumerKey(keyConsumerTargetMemberV7, g.id, id)},
				kv{key: consumerKey(keyConsumerMemberV5, g.id, id)})
		}
	}
	recs := append(gone, metas...)
	if cg.epoch != w.epoch {
		w.epoch = cg.epoch
		recs = append(recs, kv{key: consumerKey(keyConsumerMetadataV3, g.id, ""), value: consumerEpochValue(cg.epoch)})
	}
	if !maps.Equal(cg.subscribedTopics, w.topics) || w.topics == nil {
		w.topics = maps.Clone(cg.subscribedTopics)
		if w.topics == nil {
			w.topics = map[string]TopicMeta{}
		}
		recs = append(recs, kv{key: consumerKey(keyConsumerPartitionMetadataV4, g.id, ""), value: consumerTopicsValue(cg.subscribedTopics)})
	}
	recs = append(recs, targets...)
	if cg.assignmentEpoch != w.assignmentEpoch {
		w.assignmentEpoch = cg.assignmentEpoch
		recs = append(recs, kv{key: consumerKey(keyConsumerTargetMetadataV6, g.id, ""), value: consumerEpochValue(cg.assignmentEpoch)})
	}
	return append(recs, currents...)
}

// consumerTombstonesLocked returns the tombstones of every record of the
// consumer group (it is deleted, or becomes a classic group).
func (g *group) consumerTombstonesLocked() []kv {
	var recs []kv
	for id := range g.consumer.written.members {
		recs = append(recs,
			kv{key: consumerKey(keyConsumerCurrentMemberV8, g.id, id)},
			kv{key: consumerKey(keyConsumerTargetMemberV7, g.id, id)},
			kv{key: consumerKey(keyConsumerMemberV5, g.id, id)})
	}
	return append(recs,
		kv{key: consumerKey(keyConsumerTargetMetadataV6, g.id, "")},
		kv{key: consumerKey(keyConsumerPartitionMetadataV4, g.id, "")},
		kv{key: consumerKey(keyConsumerMetadataV3, g.id, "")})
}

// storeConsumerLocked appends what changed (and extra records first); the
// channel gets the append's result, nil when there was nothing to write.
func (g *group) storeConsumerLocked(extra ...kv) (int16, chan error) {
	recs := append(extra, g.consumerRecordsLocked()...)
	if len(recs) == 0 {
		return 0, nil
	}
	return g.appendLocked(recs, nil)
}

// storeConsumerAsyncLocked is storeConsumerLocked for a change no request
// waits for (a session or rebalance timeout).
func (g *group) storeConsumerAsyncLocked() {
	code, wait := g.storeConsumerLocked()
	if code != 0 {
		g.c.cfg.Logger.Warn("group: writing consumer group state failed", "group", g.id, "code", code)
		return
	}
	if wait != nil {
		go func() {
			if err := <-wait; err != nil {
				g.c.cfg.Logger.Warn("group: writing consumer group state failed", "group", g.id, "err", err)
			}
		}()
	}
}

// consumerReplay is a consumer group's records met by Load.
type consumerReplay struct {
	epoch           *int32
	assignmentEpoch int32
	topics          map[string]TopicMeta
	members         map[string]*memberReplay
}

type memberReplay struct {
	meta, current *consumerMember
	target        partitionSet
}

// apply replays one record: the last record of each key wins, a
// tombstone deletes.
func (cr *consumerReplay) apply(rec consumerRecord) {
	if rec.member != "" || rec.kind == keyConsumerMemberV5 || rec.kind == keyConsumerTargetMemberV7 || rec.kind == keyConsumerCurrentMemberV8 {
		m := cr.members[rec.member]
		if m == nil {
			m = &memberReplay{}
			cr.members[rec.member] = m
		}
		switch rec.kind {
		case keyConsumerMemberV5:
			m.meta = rec.memberMeta
		case keyConsumerTargetMemberV7:
			m.target = rec.target
		case keyConsumerCurrentMemberV8:
			m.current = rec.current
		}
		if m.meta == nil && m.target == nil && m.current == nil {
			delete(cr.members, rec.member)
		}
		return
	}
	switch rec.kind {
	case keyConsumerMetadataV3:
		if rec.tombstone {
			cr.epoch = nil
		} else {
			e := rec.epoch
			cr.epoch = &e
		}
	case keyConsumerPartitionMetadataV4:
		cr.topics = rec.topics
	case keyConsumerTargetMetadataV6:
		cr.assignmentEpoch = rec.epoch
	}
}

// restoreConsumerLocked makes the group the consumer group the records
// describe: epochs, topic metadata, members with their subscriptions,
// targets and current assignments, and the owners of their partitions.
// The members' sessions start now, so members that are gone expire;
// the others heartbeat on without rejoining.
func (g *group) restoreConsumerLocked(cr *consumerReplay) {
	g.toConsumerLocked()
	cg := g.consumer
	cg.epoch, cg.assignmentEpoch = *cr.epoch, cr.assignmentEpoch
	cg.subscribedTopics = cr.topics
	for id, mr := range cr.members {
		if mr.meta == nil {
			continue // a member whose subscription was deleted is gone
		}
		m := mr.meta
		m.assigned, m.revoking = make(partitionSet), make(partitionSet)
		if m.regex != "" {
			m.regexRE, _ = compileSubscriptionRegex(m.regex) // a regex that no longer compiles subscribes to nothing
		}
		if m.regexRE != nil {
			// What the regex resolved to when the records were written,
			// until the member's next heartbeat brings its authorization.
			m.regexTopics = make(map[string]struct{})
			for name := range cr.topics {
				if m.regexRE.MatchString(name) {
					m.regexTopics[name] = struct{}{}
				}
			}
		}
		if c := mr.current; c != nil {
			m.epoch, m.previousEpoch, m.state = c.epoch, c.previousEpoch, c.state
			m.assigned, m.revoking = c.assigned, c.revoking
			if m.state > memberUnreleased {
				m.state = memberStable
			}
		}
		cg.members[id] = m
		if mr.target != nil {
			cg.target[id] = mr.target
		}
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
		if bad := cg.claim(m); len(bad) > 0 {
			g.c.cfg.Logger.Warn("group: consumer group records give a partition to two members; kept with the first", "group", g.id, "member", id, "partitions", len(bad))
		}
	}
	// What was read is what the log holds.
	cg.topicsSeen, cg.subsChanged = nil, true
	cg.written.all = true
	g.consumerRecordsLocked()
	g.syncConsumerStateLocked()
	for _, m := range cg.members {
		g.consumerSessionLocked(m)
	}
}

// AwaitStore waits for the append of a group's records that a request's
// answer depends on (a consumer group's here, a share group's in package
// share): NOT_COORDINATOR if the append failed, REQUEST_TIMED_OUT if the
// request was abandoned first (done closed); nil wait: nothing to wait for.
func AwaitStore(done <-chan struct{}, wait <-chan error) int16 {
	if wait == nil {
		return 0
	}
	select {
	case err := <-wait:
		if err != nil {
			return kerr.NotCoordinator.Code
		}
		return 0
	case <-done:
		return kerr.RequestTimedOut.Code
	}
}
