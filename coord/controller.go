package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// ControllerConfig configures RunController.
type ControllerConfig struct {
	// BrokerID is the broker the controller runs in.
	BrokerID int32
	// AutoLeaderRebalance is auto.leader.rebalance.enable: move
	// leadership back to a partition's preferred replica once it is live
	// and in the ISR again. Kafka's default, and DefaultControllerConfig's,
	// is true.
	AutoLeaderRebalance bool
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable (false); a topic's config overrides
	// it.
	UncleanLeaderElection bool
	// Logger receives the controller's log. Default slog.Default().
	Logger *slog.Logger
	// OnFailover, if set, is called after the partitions a lost broker
	// led have new leaders (or went offline), with the measured time.
	OnFailover func(FailoverReport)
	// OnActive, if set, is called with true once elected and with false
	// when the term ends (deposed, resigned, stopped): what Kafka's
	// ActiveControllerCount reports.
	OnActive func(active bool)
	// RetryBackoff is the wait before retrying failed writes or a failed
	// campaign. Default 200ms.
	RetryBackoff time.Duration
}

// DefaultControllerConfig returns Kafka's defaults for broker id.
func DefaultControllerConfig(id int32) ControllerConfig {
	return ControllerConfig{BrokerID: id, AutoLeaderRebalance: true}
}

// FailoverReport measures one failover.
type FailoverReport struct {
	// Broker is the lost broker; NoLeader when a newly elected controller
	// found partitions whose leaders were already gone (its own
	// predecessor, say), in which case LostAt is the election time.
	Broker int32
	// LostAt is when the controller saw the broker's registration
	// disappear (its session ended: closed, or expired a session timeout
	// after the broker died).
	LostAt time.Time
	// Written is when the last new state was written.
	Written time.Time
	// Moved counts partitions that got a new leader; Offline those left
	// without one.
	Moved, Offline int
}

// Elapsed is the time from loss to new leaders written.
func (r FailoverReport) Elapsed() time.Duration { return r.Written.Sub(r.LostAt) }

// UncleanConfig is the topic config enabling unclean leader election.
const UncleanConfig = "unclean.leader.election.enable"

// UncleanLeaderElection is the topic's unclean.leader.election.enable:
// its override, else the broker default def.
func (t *TopicInfo) UncleanLeaderElection(def bool) bool {
	if v, ok := t.Configs[UncleanConfig]; ok {
		return v == "true"
	}
	return def
}

// RunController runs the controller in the broker cfg.BrokerID: it
// campaigns, and while elected keeps every partition's leadership right
// (see PlanPartition), answers controlled shutdown and preferred election
// requests and finishes pending topic deletions. When it loses the role
// (deposed, session expired) it campaigns again. It returns nil when ctx
// ends (resigning if elected), or ErrClosed when the coordinator is
// closed.
func RunController(ctx context.Context, c Coordinator, cfg ControllerConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	log := cfg.Logger.With("broker", cfg.BrokerID)
	for {
		lead, err := c.Campaign(ctx, cfg.BrokerID)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil {
			log.Warn("controller: campaign failed", "err", err)
			if !sleepCtx(ctx, cfg.RetryBackoff, nil /* stop */) {
				return nil
			}
			continue
		}
		log.Info("controller: elected", "epoch", lead.Epoch())
		a := &activeController{c: c, lead: lead, cfg: cfg, log: log.With("epoch", lead.Epoch())}
		if cfg.OnActive != nil {
			cfg.OnActive(true)
		}
		err = a.run(ctx)
		if cfg.OnActive != nil {
			cfg.OnActive(false)
		}
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			rerr := lead.Resign(rctx)
			cancel()
			if rerr != nil {
				// The session's end removes the controller znode anyway;
				// the others elect a new controller then.
				log.Warn("controller: resign failed; the controller znode goes with the session", "epoch", lead.Epoch(), "err", rerr)
				return nil
			}
			log.Info("controller: resigned", "epoch", lead.Epoch())
			return nil
		}
		log.Warn("controller: stepped down", "epoch", lead.Epoch(), "err", err)
		if errors.Is(err, ErrClosed) {
			return err
		}
	}
}

// sleepCtx waits d, or less if ctx ends or stop is closed (false). A nil
// stop is never closed.
func sleepCtx(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// activeController is one term of an elected controller.
type activeController struct {
	c    Coordinator
	lead Leadership
	cfg  ControllerConfig
	log  *slog.Logger

	live     map[int32]bool
	lost     map[int32]*lostBroker
	overlay  map[TopicPartition]PartitionInfo // states written, until the snapshot has them
	requests []ControllerRequest
	reqStale bool
}

// completion is a reassignment the controller completes: replicas (the
// full set) become target.
type completion struct {
	tp               TopicPartition
	replicas, target []int32
	state            *StateUpdate // written with it, if not nil
}

type lostBroker struct {
	at             time.Time
	moved, offline int
}

func (a *activeController) run(ctx context.Context) error {
	snap, sub := a.c.Subscribe()
	defer sub.Close()
	now := time.Now()
	a.live = liveSet(snap)
	a.lost = map[int32]*lostBroker{}
	a.overlay = map[TopicPartition]PartitionInfo{}
	a.reqStale = true
	// Partitions already led by missing brokers: their loss predates
	// this term; measure from the election.
	for _, name := range snap.TopicNames() {
		for _, p := range snap.Topics[name].Partitions {
			if p.State.Leader != NoLeader && !a.live[p.State.Leader] {
				a.lost[NoLeader] = &lostBroker{at: now}
			}
		}
	}
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		dirty, err := a.pass(ctx)
		if err != nil {
			return err
		}
		if dirty {
			retry.Reset(a.cfg.RetryBackoff)
		}
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return ErrClosed
			}
			a.absorb(ev)
			for more := true; more; { // take what is queued, then act once
				select {
				case ev, ok := <-sub.Events():
					if !ok {
						return ErrClosed
					}
					a.absorb(ev)
				default:
					more = false
				}
			}
		case <-retry.C:
			a.reqStale = true
		case <-a.lead.Done():
			return ErrNotController
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// absorb notes what an event means for the controller.
func (a *activeController) absorb(ev Event) {
	switch ev.Kind {
	case EventRequests, EventSessionExpired, EventReconnected:
		a.reqStale = true
	}
}

// trackBrokers notes brokers lost and joined since the last pass.
func (a *activeController) trackBrokers(snap *Snapshot) {
	now := time.Now()
	live := liveSet(snap)
	for id := range a.live {
		if !live[id] {
			a.lost[id] = &lostBroker{at: now}
			a.log.Info("controller: broker lost", "lost", id)
		}
	}
	for id := range live {
		if !a.live[id] {
			delete(a.lost, id)
			a.log.Info("controller: broker joined", "joined", id)
		}
	}
	a.live = live
}

func liveSet(s *Snapshot) map[int32]bool {
	m := make(map[int32]bool, len(s.Brokers))
	for _, b := range s.Brokers {
		m[b.ID] = true
	}
	return m
}

// partition returns p's state, with the controller's own writes applied
// when the snapshot has not caught up with them yet.
func (a *activeController) partition(tp TopicPartition, p PartitionInfo) PartitionInfo {
	if o, ok := a.overlay[tp]; ok {
		if o.Version > p.Version {
			o.Replicas, o.Adding, o.Removing = p.Replicas, p.Adding, p.Removing
			return o
		}
		delete(a.overlay, tp)
	}
	return p
}

// pass makes one round of decisions and writes over snap. dirty asks for a
// retry; err ends the term.
func (a *activeController) pass(ctx context.Context) (dirty bool, err error) {
	if a.reqStale {
		reqs, err := a.lead.PendingRequests(ctx)
		switch {
		case errors.Is(err, ErrNotController):
			return false, err
		case err != nil:
			a.log.Warn("controller: reading requests", "err", err)
			dirty = true
		default:
			a.requests, a.reqStale = reqs, false
		}
	}
	// Requests are read from the service itself: decide on the newest
	// snapshot, at least as new as what their senders saw.
	snap := a.c.Snapshot()
	a.trackBrokers(snap)
	shutting := map[int32]bool{}
	offline := map[TopicPartition][]int32{} // replicas whose log directory failed
	for _, r := range a.requests {
		switch {
		case !snap.Live(r.BrokerID):
		case r.Kind == RequestControlledShutdown:
			shutting[r.BrokerID] = true
		case r.Kind == RequestOfflineReplicas:
			for _, tp := range r.Partitions {
				if !slices.Contains(offline[tp], r.BrokerID) {
					offline[tp] = append(offline[tp], r.BrokerID)
				}
			}
		}
	}
	l := Liveness{Live: snap.Live, ShuttingDown: func(id int32) bool { return shutting[id] }}
	epoch := a.lead.Epoch()

	var ups []StateUpdate
	var reasons []Reason
	var olds []int32
	var completions []completion
	for _, name := range snap.TopicNames() {
		t := snap.Topics[name]
		opts := PlanOptions{Unclean: t.UncleanLeaderElection(a.cfg.UncleanLeaderElection), Preferred: a.cfg.AutoLeaderRebalance}
		for i, p := range t.Partitions {
			tp := TopicPartition{name, int32(i)}
			p = a.partition(tp, p)
			if p.Version < 0 {
				continue
			}
			pl := l.withOffline(offline[tp])
			next, reason, changed := PlanPartition(p, pl, opts, epoch)
			if !changed && p.Reassigning() {
				if ready, st, stChanged := PlanReassignment(p, pl, epoch); ready {
					c := completion{tp: tp, replicas: p.Replicas, target: p.TargetReplicas()}
					if stChanged {
						c.state = &StateUpdate{TopicPartition: tp, State: st, Version: p.Version}
					}
					completions = append(completions, c)
				}
			}
			if changed {
				ups = append(ups, StateUpdate{TopicPartition: tp, State: next, Version: p.Version})
				reasons = append(reasons, reason)
				olds = append(olds, p.State.Leader)
			}
		}
	}
	failed := map[TopicPartition]bool{}
	if len(ups) > 0 {
		res, err := a.lead.UpdatePartitionStates(ctx, ups)
		if errors.Is(err, ErrNotController) {
			return false, err
		}
		for i, u := range ups {
			if i < len(res) && res[i].Err == nil {
				a.overlay[u.TopicPartition] = PartitionInfo{State: u.State, Version: res[i].Version}
				a.log.Info("controller: partition state", "partition", u.TopicPartition.String(),
					"leader", u.State.Leader, "leader_epoch", u.State.LeaderEpoch, "isr", u.State.ISR, "reason", string(reasons[i]))
				if lb := a.lostFor(olds[i]); lb != nil && olds[i] != u.State.Leader {
					if u.State.Leader == NoLeader {
						lb.offline++
					} else {
						lb.moved++
					}
				}
				continue
			}
			failed[u.TopicPartition] = true
			dirty = true
			var e error = err
			if i < len(res) {
				e = res[i].Err
			}
			a.log.Warn("controller: partition state write failed", "partition", u.TopicPartition.String(), "err", e)
		}
	}
	a.reportFailovers(snap)
	for _, c := range completions {
		version, err := a.lead.CompleteReassignment(ctx, c.tp, c.replicas, c.target, c.state)
		if err != nil {
			if errors.Is(err, ErrNotController) {
				return false, err
			}
			a.log.Warn("controller: completing a reassignment failed", "partition", c.tp.String(), "err", err)
			dirty = true
			continue
		}
		if c.state != nil {
			a.overlay[c.tp] = PartitionInfo{State: c.state.State, Version: version}
			a.log.Info("controller: partition state", "partition", c.tp.String(), "leader", c.state.State.Leader,
				"leader_epoch", c.state.State.LeaderEpoch, "isr", c.state.State.ISR, "reason", string(ReasonReassignment))
		}
		a.log.Info("controller: reassignment complete", "partition", c.tp.String(), "from", c.replicas, "replicas", c.target)
	}

	for _, r := range a.requests {
		if r.Answered {
			continue
		}
		var ans RequestAnswer
		switch r.Kind {
		case RequestControlledShutdown:
			blocked := false
			for tp := range failed {
				if p, ok := snap.Partition(tp); ok && a.partition(tp, p).State.Leader == r.BrokerID {
					blocked = true
				}
			}
			if blocked {
				continue // answer after the retry
			}
			ans.Remaining = a.ledBy(snap, r.BrokerID)
			a.log.Info("controller: controlled shutdown", "shutting_down", r.BrokerID, "still_leads", len(ans.Remaining))
		case RequestOfflineReplicas:
			blocked := false
			for _, tp := range r.Partitions {
				if failed[tp] {
					blocked = true
				}
			}
			if blocked {
				continue // answer after the retry
			}
			for _, tp := range r.Partitions {
				if p, ok := snap.Partition(tp); ok && a.partition(tp, p).State.Leader == r.BrokerID {
					ans.Remaining = append(ans.Remaining, tp)
				}
			}
			a.log.Warn("controller: replicas offline (log directory failed)", "broker", r.BrokerID,
				"partitions", len(r.Partitions), "still_leads", len(ans.Remaining))
		case RequestPreferredElection:
			ans.Results = a.electPreferred(ctx, snap, l, offline, r.Partitions)
		default:
			continue
		}
		if err := a.lead.Answer(ctx, r, ans); err != nil {
			if errors.Is(err, ErrNotController) {
				return false, err
			}
			dirty = true
			continue
		}
		a.reqStale = true
	}

	for name := range snap.PendingDeletion {
		if err := a.lead.FinishTopicDeletion(ctx, name); err != nil {
			if errors.Is(err, ErrNotController) {
				return false, err
			}
			a.log.Warn("controller: finishing topic deletion", "topic", name, "err", err)
			dirty = true
			continue
		}
		a.log.Info("controller: finished pending topic deletion", "topic", name)
	}
	return dirty, nil
}

func (a *activeController) lostFor(leader int32) *lostBroker {
	if lb, ok := a.lost[leader]; ok {
		return lb
	}
	if leader != NoLeader && !a.live[leader] {
		return a.lost[NoLeader]
	}
	return nil
}

// reportFailovers reports lost brokers that no longer lead anything.
func (a *activeController) reportFailovers(snap *Snapshot) {
	led := map[int32]bool{}
	for _, name := range snap.TopicNames() {
		for i, p := range snap.Topics[name].Partitions {
			p = a.partition(TopicPartition{name, int32(i)}, p)
			if p.State.Leader != NoLeader && !a.live[p.State.Leader] {
				led[p.State.Leader] = true
				led[NoLeader] = true // some pre-existing loss may be pending
			}
		}
	}
	now := time.Now()
	for id, lb := range a.lost {
		if (id != NoLeader && led[id]) || (id == NoLeader && led[NoLeader]) {
			continue
		}
		delete(a.lost, id)
		if lb.moved == 0 && lb.offline == 0 {
			continue // led nothing
		}
		r := FailoverReport{Broker: id, LostAt: lb.at, Written: now, Moved: lb.moved, Offline: lb.offline}
		a.log.Info("controller: failover done", "lost", id, "new_leaders", r.Moved, "offline", r.Offline,
			"elapsed", r.Elapsed().String())
		if a.cfg.OnFailover != nil {
			a.cfg.OnFailover(r)
		}
	}
}

func (a *activeController) ledBy(snap *Snapshot, id int32) []TopicPartition {
	out := []TopicPartition{}
	for _, name := range snap.TopicNames() {
		for i, p := range snap.Topics[name].Partitions {
			tp := TopicPartition{name, int32(i)}
			if a.partition(tp, p).State.Leader == id {
				out = append(out, tp)
			}
		}
	}
	return out
}

// electPreferred runs an on-demand preferred election.
func (a *activeController) electPreferred(ctx context.Context, snap *Snapshot, l Liveness, offline map[TopicPartition][]int32, tps []TopicPartition) []ElectionResult {
	if len(tps) == 0 {
		for _, name := range snap.TopicNames() {
			for i := range snap.Topics[name].Partitions {
				tps = append(tps, TopicPartition{name, int32(i)})
			}
		}
	}
	results := make([]ElectionResult, len(tps))
	var ups []StateUpdate
	var idx []int
	for i, tp := range tps {
		results[i].TopicPartition = tp
		t, ok := snap.Topics[tp.Topic]
		if !ok {
			results[i].Err = ErrUnknownTopic
			continue
		}
		if tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			results[i].Err = ErrUnknownPartition
			continue
		}
		p := a.partition(tp, t.Partitions[tp.Partition])
		next, err := PlanPreferred(p, l.withOffline(offline[tp]), a.lead.Epoch())
		if err != nil {
			results[i].Err = err
			continue
		}
		ups = append(ups, StateUpdate{TopicPartition: tp, State: next, Version: p.Version})
		idx = append(idx, i)
	}
	if len(ups) == 0 {
		return results
	}
	res, err := a.lead.UpdatePartitionStates(ctx, ups)
	for j, u := range ups {
		i := idx[j]
		switch {
		case j < len(res) && res[j].Err == nil:
			a.overlay[u.TopicPartition] = PartitionInfo{State: u.State, Version: res[j].Version}
			a.log.Info("controller: partition state", "partition", u.TopicPartition.String(),
				"leader", u.State.Leader, "leader_epoch", u.State.LeaderEpoch, "isr", u.State.ISR, "reason", string(ReasonPreferred))
		case j < len(res) && res[j].Err != nil:
			results[i].Err = res[j].Err
		default:
			results[i].Err = fmt.Errorf("coord: preferred election of %s: %w", u.TopicPartition, err)
		}
	}
	slices.SortStableFunc(results, func(x, y ElectionResult) int {
		if x.Topic != y.Topic {
			if x.Topic < y.Topic {
				return -1
			}
			return 1
		}
		return int(x.Partition - y.Partition)
	})
	return results
}
