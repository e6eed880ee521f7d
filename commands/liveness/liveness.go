// Package liveness hears each agent say it is alive (a core NATS message
// every events.LiveEvery that never enters the stream), and records only
// the changes as facts: NodeUnreachable for a node heard before and silent
// past the bound, NodeReachable once heard again. Status, node list and
// /metrics read when each node was last heard through a *Service.
package liveness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

// Service is what this controller hears of the agents, over one Core.
type Service struct {
	*core.Core
	// live is nil while liveness is off, and for the past, which has only
	// what the log recorded.
	live *hearing
}

// New is liveness over c, hearing nothing until Start.
func New(c *core.Core) *Service { return &Service{Core: c} }

// Hearing says whether this controller hears the agents now (false: off,
// or the past).
func (h *Service) Hearing() bool { return h.live != nil }

// Liveness (issue 28): the controller hears each agent say it is alive on
// events.LivenessSubject, a core NATS message every events.LiveEvery that
// never enters the stream, and keeps when it last heard each node in
// memory. Only the changes are facts: a node heard before and silent for
// longer than the bound is recorded NodeUnreachable, and NodeReachable once
// heard again. Status reads the recorded facts, so every controller of a
// stream, status --as-of and a rebuild agree on them.

// DefaultUnreachableAfter is how long a node may be silent before it is
// unreachable: four of its agent's beats, so one or two lost on a busy bus
// do not make it so.
const DefaultUnreachableAfter = 4 * events.LiveEvery

// stallGap is a gap between two liveness checks (each second) that says
// this controller did not run: the beats that arrived meanwhile wait
// unread, so every node would look silent. Silence counts again from then.
const stallGap = 5 * time.Second

// MinUnreachableAfter is the shortest bound: two beats. A bound shorter
// than an agent's beat would call every node lost between two.
const MinUnreachableAfter = 2 * events.LiveEvery

// hearing is what this controller hears of the agents.
type hearing struct {
	bound time.Duration
	nc    *nats.Conn
	sub   *nats.Subscription
	// now is the controller's clock as it started (ControllerConfig.Now),
	// not Handlers.Now read later: a test that moves Handlers.Now hours
	// ahead to age a report must not make every agent look silent.
	now func() time.Time

	mu sync.Mutex
	// heard is each node's newest beat this controller heard.
	heard map[string]beat
	// macs checks beats on the subscription's one goroutine.
	macs declaration.MACChecker
	// checked is when the last check ran, on this process's monotonic
	// clock: a controller that was stopped or starved (SIGSTOP, a paused
	// VM, swapping) heard nothing meanwhile, which says nothing of the
	// nodes.
	checked time.Time
	// lost is the nodes recorded unreachable, as this controller last
	// knew the read models (another controller may record them too:
	// every change is an append expecting the aggregate's version).
	lost map[string]projections.Liveness
	// hearing is when this controller began to hear (its start, and its
	// connection's last reconnect): a node silent since before it was
	// silent to a controller that could not hear, which says nothing of
	// the node, so its silence counts from here.
	hearing    time.Time
	reconnects uint64
	// known are the nodes that ever said anything (a report key
	// recorded) when this controller began to hear, with when the log
	// last heard them: each must be heard within the bound or is lost. A
	// node that never said anything is not lost, only never heard. Read
	// with lost from the read models at the first check (loaded), not at
	// the start, which a scan of every node would delay.
	known  map[string]time.Time
	loaded bool
}

// beat is a node's newest beat: when this controller heard it, and the
// time the beat says it was said, which the next must pass (a beat
// replayed, on an open bus where anyone hears them, is not the node alive
// now).
//
// It also carries whether the log has the node unreachable (lost holds the
// row, and since is its Since), so that a check reads each node heard
// once: it looked up every heard node in lost and every lost node in
// heard, two lookups in maps of 100,000 a node, some 30 ms of every
// second on a controller whose fleet of 100,000 was lost. hear, took,
// settle and forget keep the two the same.
//
// key is the key the node's last beat held under (its beat key, or its
// derived report MAC key), the one the next is checked under first
// (beatOf).
type beat struct {
	at    time.Time
	said  int64
	down  bool
	since time.Time
	key   []byte
}

// Start hears the agents and checks their silence every tick until
// stopped. bound 0 is DefaultUnreachableAfter; a negative bound hears
// nothing and records nothing (a test, or an operator who said off).
func (h *Service) Start(bound, every time.Duration) (stop func(), err error) {
	if bound < 0 {
		return func() {}, nil
	}
	if bound == 0 {
		bound = DefaultUnreachableAfter
	}
	if bound < MinUnreachableAfter {
		return nil, fmt.Errorf("an unreachable bound of %s is shorter than two of an agent's beats (%s); give at least %s", bound, events.LiveEvery, MinUnreachableAfter)
	}
	if every <= 0 {
		every = time.Second
	}
	nc := h.Store.NC()
	l := &hearing{bound: bound, nc: nc, now: h.Now, heard: map[string]beat{},
		hearing: h.Now(), reconnects: nc.Stats().Reconnects, checked: time.Now()}
	// The handler checks the beat's MAC and notes the time: at 100,000
	// nodes a beat every five seconds is 20,000 messages a second on this
	// one subscription (a microsecond each). A message that is not the
	// node's beat (another node's request answered onto this subject, a
	// stranger on an open bus, a replay) is not the node heard.
	l.sub, err = nc.Subscribe(events.SubjectsLiveness, func(m *nats.Msg) {
		node := m.Subject[len(events.LivenessPrefix)+1:]
		if events.ValidateName("node", node) != nil {
			return
		}
		l.beatOf(h.Keys, node, m.Subject, m.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("cannot hear the agents on %s: %w", events.SubjectsLiveness, err)
	}
	// Pending limits: a burst of beats after a bus restart must not be
	// dropped as a slow consumer, which would call live nodes lost.
	_ = l.sub.SetPendingLimits(1<<20, 64<<20)
	h.live = l
	stopTicking := h.TickUntilStopped(every, "cannot record a node's liveness; trying again", h.checkLiveness)
	return func() { stopTicking(); _ = l.sub.Unsubscribe() }, nil
}

// beatOf hears data on node's liveness subject when it is the node's beat,
// newer than the last heard; it says whether it did. A node that made its
// own keys MACs its beats with the key its enrolment answered
// (declaration.EnrolReply.Beat); one enrolled before, with its derived
// report MAC key. Either holds. The one that held at the node's last beat,
// kept in its beat, is tried first: a beat then costs one lookup of the
// node and one check, where asking the keyring (a lookup in a map of
// 100,000 under its lock) and, for a node of the older kind, a check under
// the beat key that failed first made most of liveness's CPU at rest
// (docs/performance.md, "Liveness"). Only the subscription's goroutine
// calls it (l.macs is its own); it holds mu throughout, a few
// microseconds, so the node's beat is read and written once.
func (l *hearing) beatOf(keys *declaration.Keyring, node, subject string, data []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, known := l.heard[node]
	at, ok := time.Time{}, false
	if b.key != nil {
		at, ok = l.macs.CheckBeat(b.key, subject, data)
	}
	if !ok {
		for _, key := range [2][]byte{keys.NodeBeat(node), keys.NodeMAC(node)} {
			if bytes.Equal(key, b.key) {
				continue // checked above
			}
			if at, ok = l.macs.CheckBeat(key, subject, data); ok {
				b.key = key
				break
			}
		}
	}
	if !ok {
		return false
	}
	return l.hear(node, b, known, l.now(), at.UnixNano())
}

// load reads what the log says: the nodes recorded unreachable, and the
// nodes that ever said anything, whose silence from now on counts.
func (l *hearing) load(h *Service) error {
	lost, known := map[string]projections.Liveness{}, map[string]time.Time{}
	err := h.Proj.Read(func(v *projections.View) error {
		rows, err := v.Liveness()
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Unreachable {
				lost[r.Node] = r
			}
		}
		keyed, err := v.ReportKeyNodes()
		if err != nil {
			return err
		}
		nodes, err := v.NodesBrief()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			// A node recorded lost is watched for its return (lost),
			// not its silence: kept here too, every check looked each
			// one up again, 37 ms of every second with 100,000 lost.
			if _, down := lost[n.Name]; !n.Retired && keyed[n.Name] && !down {
				// The last the log says it was heard: its last report, or
				// its last return.
				last := rows.Of(n.Name).LastHeard
				if n.LastReport != nil && n.LastReport.At.After(last) {
					last = n.LastReport.At
				}
				known[n.Name] = last
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.took(lost, known)
	return nil
}

// took makes what the log says (load) this hearing's; the caller holds mu.
// Beats heard before this first check: a node heard is watched by its
// beat, and one the log has lost is so in its beat too.
func (l *hearing) took(lost map[string]projections.Liveness, known map[string]time.Time) {
	for n := range known {
		if _, heard := l.heard[n]; heard {
			delete(known, n)
		}
	}
	for n, r := range lost {
		if b, heard := l.heard[n]; heard {
			b.down, b.since = true, r.Since
			l.heard[n] = b
		}
	}
	l.lost, l.known, l.loaded = lost, known, true
}

// hear notes node's beat, said at said, heard now; the caller holds mu. A
// beat no newer than the last heard is a replay, and is not the node
// alive. A node's first beat takes what the log says of it (lost), and
// the node is watched by its beats from then on, no longer as known.
// b is the node's beat as heard so far (ok: there is one), with the key
// this beat held under. It says whether the beat was heard.
func (l *hearing) hear(node string, b beat, ok bool, now time.Time, said int64) bool {
	if ok && said <= b.said {
		return false
	}
	if !ok {
		if r, down := l.lost[node]; down {
			b.down, b.since = true, r.Since
		}
		delete(l.known, node)
	}
	b.at, b.said = now, said
	l.heard[node] = b
	return true
}

// LastHeard is when node's agent was last heard: by this controller, or
// before it started as far as the log says (its last report, its last
// return); zero when neither, or liveness is off.
func (h *Service) LastHeard(node string) time.Time {
	if h.live == nil {
		return time.Time{}
	}
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	if b, ok := h.live.heard[node]; ok {
		return b.at
	}
	if at, ok := h.live.known[node]; ok {
		return at
	}
	return h.live.lost[node].LastHeard
}

// LastHeardAll is LastHeard of every node that has one (nil when liveness
// is off), for /metrics: a node silent since before this controller
// started keeps its time, so an alert on its age still fires after a
// restart. A copy of every entry: a listing asks LastHeard of each row.
func (h *Service) LastHeardAll() map[string]time.Time {
	if h.live == nil {
		return nil
	}
	l := h.live
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Time, len(l.heard)+len(l.known)+len(l.lost))
	for n, r := range l.lost {
		if !r.LastHeard.IsZero() {
			out[n] = r.LastHeard
		}
	}
	for n, t := range l.known {
		if !t.IsZero() {
			out[n] = t
		}
	}
	for n, b := range l.heard {
		out[n] = b.at
	}
	return out
}

// UnreachableAfter is the bound in force (0: liveness is off, or this is
// the past).
func (h *Service) UnreachableAfter() time.Duration {
	if h.live == nil {
		return 0
	}
	return h.live.bound
}

// change is one liveness change to record.
type change struct {
	node string
	ev   events.Event
}

// checkLiveness records the nodes that fell silent and those heard again.
// Each change is an append expecting the node's liveness version, so two
// controllers never record one change twice; one that lost the race reads
// the row again at the next tick.
func (h *Service) checkLiveness(ctx context.Context) error {
	l := h.live
	if l == nil || h.Writable() != nil {
		return nil
	}
	if !l.loaded {
		if err := l.load(h); err != nil {
			return err
		}
	}
	now := l.now()
	if !l.nc.IsConnected() {
		// Deaf, not the nodes: their silence counts from when this
		// controller hears again.
		l.mu.Lock()
		l.hearing = now
		l.mu.Unlock()
		return nil
	}
	changes := l.changes(now)
	if len(changes) == 0 {
		return nil
	}
	items := make([]store.One, 0, len(changes))
	var rows map[string]projections.Liveness
	var retired map[string]bool
	err := h.Proj.Read(func(v *projections.View) (err error) {
		rows, retired = map[string]projections.Liveness{}, map[string]bool{}
		for _, c := range changes {
			n, found, err := v.Node(c.node)
			if err != nil {
				return err
			}
			if !found || n.Retired {
				retired[c.node] = true
				continue
			}
			r, err := v.NodeLiveness(c.node)
			if err != nil {
				return err
			}
			rows[c.node] = r
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range changes {
		if retired[c.node] {
			// A retired node is not lost: it is forgotten.
			l.forget(c.node)
			continue
		}
		r := rows[c.node]
		if _, down := c.ev.(events.NodeUnreachable); down == r.Unreachable {
			// The read models already say so (another controller).
			l.settle(c.node, r)
			continue
		}
		items = append(items, store.One{Aggregate: events.LivenessAggregate(c.node), Expected: r.Version,
			CommandID: fmt.Sprintf("live.%s.%d", c.node, r.Version), Event: c.ev})
	}
	if len(items) == 0 {
		return nil
	}
	out, err := h.Store.AppendMany(ctx, items)
	if err != nil {
		return err
	}
	var errs []error
	lost, back, each := 0, 0, int(logEach.Load())
	for i, o := range out {
		it := items[i]
		switch {
		case o.Err == nil:
			l.settle(it.Aggregate.ID, livenessRow(it.Event, o.Seq, now))
			if ev, down := it.Event.(events.NodeUnreachable); down {
				if lost++; lost <= each {
					h.Log.Warn("node unreachable", "node", ev.Node, "last_heard", ev.LastHeard, "bound", ev.Bound)
				}
			} else if back++; back <= each {
				h.Log.Info("node reachable again", "node", it.Aggregate.ID)
			}
		case errors.Is(o.Err, store.ErrConflict):
			// Another controller recorded it first: the next tick reads it.
		default:
			errs = append(errs, o.Err)
		}
	}
	if lost > each {
		h.Log.Warn("more nodes unreachable than named above; mesh status names every one", "more", lost-each, "unreachable_now", lost)
	}
	if back > each {
		h.Log.Info("more nodes reachable again than named above", "more", back-each, "reachable_now", back)
	}
	return errors.Join(errs...)
}

// logEach is how many nodes one check names in the log as lost (and as
// back): a rack or a network lost is thousands at once, and a line each
// buried everything else the controller said (100,000 lines in a second
// at 100,000 nodes); the rest are counted in one line. An atomic only so
// that a test may lower it while other tests' controllers check.
var logEach = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(20)
	return &n
}()

// changes are the nodes silent past the bound and not yet recorded lost,
// and those recorded lost and heard since.
func (l *hearing) changes(now time.Time) []change {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.nc.Stats().Reconnects; r != l.reconnects {
		l.reconnects, l.hearing = r, now
	}
	// Real time, not the injected clock: what matters is whether this
	// process ran.
	if gap := time.Since(l.checked); gap > stallGap {
		l.hearing = now
	}
	l.checked = time.Now()
	var out []change
	silent := func(node string, last time.Time) {
		from := last
		if l.hearing.After(from) {
			from = l.hearing
		}
		if now.Sub(from) > l.bound {
			out = append(out, change{node, events.NodeUnreachable{Node: node, LastHeard: last, Bound: l.bound}})
		}
	}
	for node, b := range l.heard {
		switch {
		case !b.down:
			silent(node, b.at)
		case b.at.After(b.since):
			out = append(out, change{node, events.NodeReachable{Node: node, Heard: b.at}})
		}
	}
	// Never heard by this controller (hear takes a node out at its first
	// beat), and not lost (load and settle take those out): a node lost
	// and never heard cannot come back.
	for node, last := range l.known {
		silent(node, last)
	}
	return out
}

// livenessRow is the row a change appended at seq makes.
func livenessRow(ev events.Event, seq uint64, at time.Time) projections.Liveness {
	switch e := ev.(type) {
	case events.NodeUnreachable:
		return projections.Liveness{Node: e.Node, Unreachable: true, LastHeard: e.LastHeard, Bound: e.Bound, Since: at, Version: seq}
	case events.NodeReachable:
		return projections.Liveness{Node: e.Node, LastHeard: e.Heard, Since: at, Version: seq}
	}
	return projections.Liveness{}
}

// settle notes what the read models now say of node.
func (l *hearing) settle(node string, r projections.Liveness) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Unreachable {
		l.lost[node] = r
	} else {
		delete(l.lost, node)
	}
	if b, heard := l.heard[node]; heard {
		b.down, b.since = r.Unreachable, r.Since
		l.heard[node] = b
	}
	delete(l.known, node)
}

// forget drops a retired node: it is neither heard nor lost any more.
func (l *hearing) forget(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.heard, node)
	delete(l.known, node)
	delete(l.lost, node)
}

// Unreachable turns a node recorded unreachable into that state, saying
// what it was last known to be: its agent may have died, or its machine,
// or the network between, and its last report may no longer hold.
func Unreachable(state wire.State, since time.Time, detail string, lv projections.Liveness) (wire.State, time.Time, string) {
	if !lv.Unreachable {
		return state, since, detail
	}
	last := "never heard by this controller"
	if !lv.LastHeard.IsZero() {
		last = "last heard " + lv.LastHeard.UTC().Format(time.RFC3339)
	}
	// Joined, not fmt.Sprintf: a status of a fleet lost writes this for
	// every node, and the formatting was a sixth of it at 100,000 nodes.
	why := "silent for over " + lv.Bound.String() + " (" + last + "); its last state: " + string(state)
	if detail != "" {
		why += " (" + detail + ")"
	}
	return wire.StateUnreachable, lv.Since, why
}

// RuntimeOn is a program as status shows it: on an unreachable node its
// last report may no longer hold (a pid that is gone), so it is not
// running but unknown.
func RuntimeOn(rt projections.Runtime, lv projections.Liveness) projections.Runtime {
	if !lv.Unreachable {
		return rt
	}
	rt.Detail = fmt.Sprintf("its node has been unreachable since %s; last reported %s", lv.Since.UTC().Format(time.RFC3339), rt.State)
	rt.State, rt.PID = wire.RuntimeUnreachable, 0
	// Its health is as unknown as its state: a check's last word is no
	// more current than the pid.
	rt.Health, rt.HealthSince, rt.HealthDetail = "", time.Time{}, ""
	return rt
}
