package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/credentials"
	"github.com/meshctl/mesh/commands/liveness"
	"github.com/meshctl/mesh/commands/world"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// Status answers the whole mesh from the read models: a state per active
// node, every standing, and the verdict. The mesh is well only when every
// node is current and nothing is failing.
func (h *Service) Status(ctx context.Context, r wire.StatusRequest) (wire.StatusReport, error) {
	if !r.AsOf.IsZero() {
		var out wire.StatusReport
		err := h.inThePast(ctx, r.AsOf, func(past *Service) (err error) {
			out, err = past.Status(ctx, wire.StatusRequest{Brief: r.Brief, Selector: r.Selector, DetailsOnce: r.DetailsOnce})
			return err
		})
		out.AsOf = &r.AsOf
		return out, err
	}
	within, err := h.push.Within(ctx, wire.PushRequest{Selector: r.Selector})
	if err != nil {
		return wire.StatusReport{}, err
	}
	composed, err := h.world.ComposeAll()
	if err != nil {
		return wire.StatusReport{}, err
	}
	out := wire.StatusReport{Nodes: []wire.NodeStatus{}, Standings: []wire.StandingView{}, Runtimes: []projections.Runtime{}, Rollouts: []wire.RolloutProgress{}, Rotations: []wire.RotationStage{}}
	notCurrent, down := 0, 0
	err = h.Proj.Read(func(v *projections.View) error {
		out.Checkpoint = v.Checkpoint()
		// Only nodes once unreachable have a row: a handful while the
		// fleet is well, every node once a network is lost.
		lives, err := v.Liveness()
		if err != nil {
			return err
		}
		states, err := h.nodeStates(v, r, lives, within, composed, &out)
		if err != nil {
			return err
		}
		runtimes, err := v.Runtimes()
		if err != nil {
			return err
		}
		all, err := v.Rollouts()
		if err != nil {
			return err
		}
		// What the open or halted rollouts' progress reads of their
		// nodes' rows, marked in the same pass: a second reading of
		// every row for them cost what the pass saves.
		marks := waveMarks(all)
		// The nodes with a runtime are few: a set of every active node was
		// 100,000 insertions a status at 100,000 nodes (a tenth of the
		// handler's time), so only theirs are marked.
		active := make(map[string]bool, len(runtimes))
		for _, rt := range runtimes {
			active[rt.Node] = false
		}
		// Every row is judged as it is decoded, in runs (EachNode). Brief,
		// two arenas serve the runs in turn and the table keeps a node's
		// name, its state, its numbers and a copy of its detail: at
		// 100,000 nodes a slice of every node and an arena a run were 67
		// MB a status, which woke the collector within the status more
		// often than not (issue 34's 300 ms bound). Whole, the answer
		// keeps each node's digests and the like: an arena a run, kept
		// with the answer.
		err = v.EachNode(!r.Brief, func(n projections.Node) error {
			if _, ok := active[n.Name]; ok && !n.Retired {
				active[n.Name] = true
			}
			if m, ok := marks[n.Name]; ok && !n.Retired {
				state, _, _ := composed.Of(n.Name).StateOf(n)
				*m = waveMark{active: true, current: state == wire.StateCurrent}
			}
			states.add(n)
			return nil
		})
		if err != nil {
			return err
		}
		notCurrent = states.notCurrent
		down = programs(runtimes, active, lives, &out)
		if within == nil {
			// A copy: the memo is every status's of these would-sends.
			out.Chosen = slices.Clone(h.world.Memo(composed, func() any { return chosen(composed, nil) }).([]wire.ConsumerChoice))
		} else {
			out.Chosen = chosen(composed, within)
		}
		standings, err := v.Standings()
		if err != nil {
			return err
		}
		for _, s := range standings {
			out.Standings = append(out.Standings, wire.StandingView(s))
		}
		if out.Causes, err = h.causes(ctx, v, composed); err != nil {
			return err
		}
		if out.Rotations, err = credentials.Stages(v); err != nil {
			return err
		}
		return rollouts(v, all, marks, &out)
	})
	out.Well = verdict.Well(verdict.Counts{NotWell: notCurrent, ProgramsDown: down, Standings: len(out.Standings), Causes: len(out.Causes)})
	out.UnreachableAfter = h.live.UnreachableAfter().Seconds()
	out.LivenessOff = !h.live.Hearing() && !h.Past
	out.OpenBus = h.OpenBus && !h.Past
	if h.Reconciler != nil && !h.Past {
		out.Reconciler = h.Reconciler.Reconciling()
	}
	return out, err
}

// nodeStates puts each active node's state (those within, when the status
// is of a selector's) in out, as the brief table or whole, a node at a
// time (add), and counts those not well (notCurrent).
type nodeStates struct {
	h         *Service
	brief     bool
	out       *wire.StatusReport
	lives     *projections.LivesWalk
	within    map[string]bool
	drifts    map[string]projections.Drift
	holds     map[string]string
	addresses map[string]string
	walk      *world.Walk
	// heard is never grown past its capacity: pointers into it are kept.
	heard      []time.Time
	notCurrent int
}

// nodeStates readies the states of the nodes composed may hold.
func (h *Service) nodeStates(v *projections.View, r wire.StatusRequest, lives projections.Lives,
	within map[string]bool, composed *world.Composed, out *wire.StatusReport) (*nodeStates, error) {
	// The rows come in their names' order, as the liveness rows are.
	s := &nodeStates{h: h, brief: r.Brief, out: out, lives: lives.Walk(), within: within}
	// Room for every node composed: most are, and the columns are the
	// answer's largest part.
	if r.Brief {
		out.Table = newStatusTable(composed.Len())
		out.Table.DetailsOnce = r.DetailsOnce
	} else {
		out.Nodes = make([]wire.NodeStatus, 0, composed.Len())
	}
	var err error
	if s.drifts, err = v.Drifts(); err != nil {
		return nil, err
	}
	if s.holds, err = h.holdsAll(v); err != nil {
		return nil, err
	}
	// The brief table has no address column: it is read for the answer
	// that carries it.
	if !r.Brief {
		if s.addresses, err = v.NodeAddresses(); err != nil {
			return nil, err
		}
	}
	// The rows come in their names' order, and so does the walk: not a
	// lookup by name a node.
	s.walk = h.world.Walk(composed)
	return s, nil
}

// add puts n's state in the answer. Brief, n lives only until add returns
// (EachNode without keep): the table keeps its name (the read models'
// own), and its detail copied when that is the report's own words.
func (s *nodeStates) add(n projections.Node) {
	if n.Retired || s.within != nil && !s.within[n.Name] {
		return
	}
	ns := nodeStatus(n, s.walk.Of(n.Name))
	ns.State, ns.Detail = world.Drifted(ns.State, ns.Detail, n, s.drifts)
	ns.State, ns.Detail = held(ns.State, ns.Detail, s.holds[n.Name])
	ns.State, ns.Since, ns.Detail = liveness.Unreachable(ns.State, ns.Since, ns.Detail, s.lives.Of(n.Name))
	if !wire.WellState(ns.State) {
		s.notCurrent++
	}
	if s.brief {
		// The one detail that is the row's own string is a refusal's
		// reason: copied, since a later run writes over the row (on
		// the decoding goroutine, while the table still holds it). Every
		// other detail is made afresh or a constant; copying those too
		// was 100,000 copies of one sentence after a change.
		if r := n.LastReport; r != nil && r.Reason != "" && ns.Detail == r.Reason {
			ns.Detail = strings.Clone(ns.Detail)
		}
		s.out.Table.Add(ns)
		return
	}
	ns.Address = s.addresses[n.Name]
	// The brief table has no column for it: asked only for the answer
	// that carries it, a lookup a node. The moments share one array: a
	// pointer to a variable of the loop made it escape, an allocation a
	// node, heard or not (100,000 a status, issue 34).
	if at := s.h.live.LastHeard(n.Name); !at.IsZero() {
		if s.heard == nil {
			s.heard = make([]time.Time, 0, cap(s.out.Nodes))
		}
		if len(s.heard) < cap(s.heard) {
			s.heard = append(s.heard, at)
			ns.LastHeard = &s.heard[len(s.heard)-1]
		} else { // more nodes than composed: a moment of its own
			own := at
			ns.LastHeard = &own
		}
	}
	s.out.Nodes = append(s.out.Nodes, ns)
}

// programs puts the runtime of each program on an active node (active
// true) in out, as its node's liveness leaves it, and answers how many are
// not running, or run and are unhealthy (rule 14).
func programs(runtimes []projections.Runtime, active map[string]bool, lives projections.Lives, out *wire.StatusReport) (down int) {
	for _, rt := range runtimes {
		if active[rt.Node] {
			rt = liveness.RuntimeOn(rt, lives.Of(rt.Node))
			out.Runtimes = append(out.Runtimes, rt)
			if !rt.Well() {
				down++
			}
		}
	}
	return down
}

// rollouts puts the progress of each open or halted rollout of all in
// out, from marks (waveMarks), and a halted one among its causes.
func rollouts(v *projections.View, all []projections.Rollout, marks map[string]*waveMark, out *wire.StatusReport) error {
	var progress func(projections.Rollout) wire.RolloutProgress
	for _, ro := range all {
		if ro.Open() || ro.State == projections.RolloutHalted {
			if progress == nil {
				var err error
				if progress, err = rolloutProgress(v, marks); err != nil {
					return err
				}
			}
			out.Rollouts = append(out.Rollouts, progress(ro))
		}
		if ro.State == projections.RolloutHalted {
			out.Causes = append(out.Causes, fmt.Sprintf("rollout %s of %s halted at wave %d (%s): %s: %s (mesh rollout abort %s)",
				ro.ID, ro.Module, ro.Wave+1, ro.Waves[ro.Wave].Name, ro.Node, ro.Why, ro.ID))
		}
	}
	return nil
}

// waveMark is what a rollout's progress reads of one node of its waves:
// whether it is enrolled and not retired, and whether it is current.
type waveMark struct{ active, current bool }

// waveMarks is a mark for each node of the waves of the open or halted
// rollouts of all, to be set as the rows are read (none for none).
func waveMarks(all []projections.Rollout) map[string]*waveMark {
	var marks map[string]*waveMark
	for _, ro := range all {
		if !ro.Open() && ro.State != projections.RolloutHalted {
			continue
		}
		for _, w := range ro.Waves {
			for _, n := range w.Nodes {
				if marks == nil {
					marks = map[string]*waveMark{}
				}
				if marks[n] == nil {
					marks[n] = &waveMark{}
				}
			}
		}
	}
	return marks
}

func nodeStatus(n projections.Node, w world.Would) wire.NodeStatus {
	state, since, detail := w.StateOf(n)
	state, detail = partial(state, detail, w)
	ns := wire.NodeStatus{Name: n.Name, State: state, Since: since, Detail: detail, WouldSend: w.ContentDigest}
	if s := n.LastSent; s != nil {
		ns.Sequence, ns.Digest, ns.ContentDigest, ns.By = s.Sequence, s.Digest, s.ContentDigest, s.By
	}
	if r := n.LastReport; r != nil && r.Outcome != events.OutcomeApplied && !r.FailingSince.IsZero() {
		ns.FailingSince = &r.FailingSince
	}
	return ns
}

// inThePast runs fn against handlers over read models folded from the stream
// up to moment at, in a temporary store: the mesh as it was.
func (h *Service) inThePast(ctx context.Context, at time.Time, fn func(*Service) error) error {
	past, done, err := h.Core.InThePast(ctx, at)
	if err != nil {
		return err
	}
	defer done()
	return fn(Over(past))
}

// VerifyProjections folds the whole stream afresh and compares it with the
// live read models.
func (h *Service) VerifyProjections(ctx context.Context, r wire.FoldRequest) (wire.Verified, error) {
	start := time.Now()
	besideGC := core.BesideGC() // a second generation beside the live one
	diff, at, err := h.Proj.Verify(ctx, h.Progress(r.Progress))
	besideGC()
	if pending := (*projections.HistoryPending)(nil); errors.As(err, &pending) {
		return wire.Verified{}, aggregates.Refuse("verify", "the read models", aggregates.ErrNotYet, pending.Error())
	}
	if err != nil {
		return wire.Verified{}, err
	}
	v := wire.Verified{Checkpoint: at, Diff: diff}
	c, found, err := h.Proj.VerifyPublished(ctx)
	if found {
		v.Snapshot = &wire.VerifiedSnapshot{Name: c.Snapshot.Name, Checkpoint: c.Snapshot.Checkpoint, Bytes: c.Snapshot.Size, Digest: c.Snapshot.Digest,
			Stale: c.Stale, Refused: c.Refused, Diff: c.Diff}
	}
	v.Seconds = time.Since(start).Seconds()
	return v, err
}

// rolloutProgress answers a rollout's progress: its active nodes, and
// those that hold its build and applied what they would be sent now. The
// rows (marks) and the assignments are read once for every rollout listed,
// not a node at a time.
func rolloutProgress(v *projections.View, marks map[string]*waveMark) (func(projections.Rollout) wire.RolloutProgress, error) {
	assigned, err := v.Assignments()
	if err != nil {
		return nil, err
	}
	builds := make(map[[2]string]string, len(assigned))
	for _, a := range assigned {
		builds[[2]string{a.Module, a.Node}] = a.Build
	}
	return func(ro projections.Rollout) wire.RolloutProgress {
		p := wire.RolloutProgress{Rollout: ro}
		for _, w := range ro.Waves {
			for _, n := range w.Nodes {
				m := marks[n]
				if m == nil || !m.active {
					continue
				}
				p.Total++
				if m.current && builds[[2]string{ro.Module, n}] == ro.Build {
					p.Applied++
				}
			}
		}
		return p
	}, nil
}
