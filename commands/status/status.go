package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
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
			out, err = past.Status(ctx, wire.StatusRequest{Brief: r.Brief, Selector: r.Selector})
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
		// Packed: the rows are read for this answer alone (a string of
		// theirs kept keeps its run: world's order clones its names).
		nodes, err := v.NodesPacked()
		if err != nil {
			return err
		}
		// Only nodes once unreachable have a row: a handful.
		lives, err := v.Liveness()
		if err != nil {
			return err
		}
		if notCurrent, err = h.nodeStates(v, r, nodes, lives, within, composed, &out); err != nil {
			return err
		}
		if down, err = programs(v, nodes, lives, &out); err != nil {
			return err
		}
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
		if out.Causes, err = h.causes(ctx, v); err != nil {
			return err
		}
		if out.Rotations, err = credentials.Stages(v); err != nil {
			return err
		}
		return rollouts(v, nodes, composed, &out)
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
// is of a selector's) in out, as the brief table or whole, and answers how
// many are not well.
func (h *Service) nodeStates(v *projections.View, r wire.StatusRequest, nodes []projections.Node, lives map[string]projections.Liveness,
	within map[string]bool, composed map[string]world.Would, out *wire.StatusReport) (notCurrent int, err error) {
	if r.Brief {
		out.Table = newStatusTable(len(nodes))
	} else {
		out.Nodes = make([]wire.NodeStatus, 0, len(nodes))
	}
	drifts, err := v.Drifts()
	if err != nil {
		return 0, err
	}
	holds, err := h.holdsAll(v)
	if err != nil {
		return 0, err
	}
	// The brief table has no address column: it is read for the answer
	// that carries it.
	var addresses map[string]string
	if !r.Brief {
		if addresses, err = v.NodeAddresses(); err != nil {
			return 0, err
		}
	}
	var heard []time.Time // never grown past its capacity: pointers into it are kept
	// The rows are in their names' order, and so is the walk's: not a
	// lookup by name a node.
	walk := h.world.Walk(composed, within == nil)
	defer walk.Done()
	for _, n := range nodes {
		if n.Retired || within != nil && !within[n.Name] {
			continue
		}
		ns := nodeStatus(n, walk.Of(n.Name))
		ns.State, ns.Detail = world.Drifted(ns.State, ns.Detail, n, drifts)
		ns.State, ns.Detail = held(ns.State, ns.Detail, holds[n.Name])
		ns.State, ns.Since, ns.Detail = liveness.Unreachable(ns.State, ns.Since, ns.Detail, lives[n.Name])
		ns.Address = addresses[n.Name]
		// The brief table has no column for it: asked only for the
		// answer that carries it, a lookup a node. The moments share one
		// array: a pointer to a variable of the loop made it escape, an
		// allocation a node, heard or not (100,000 a status, issue 34).
		if !r.Brief {
			if at := h.live.LastHeard(n.Name); !at.IsZero() {
				if heard == nil {
					heard = make([]time.Time, 0, len(nodes))
				}
				heard = append(heard, at)
				ns.LastHeard = &heard[len(heard)-1]
			}
		}
		if !wire.WellState(ns.State) {
			notCurrent++
		}
		if r.Brief {
			out.Table.Add(ns)
			continue
		}
		out.Nodes = append(out.Nodes, ns)
	}
	return notCurrent, nil
}

// programs puts the runtime of each program on an active node in out, as
// its node's liveness leaves it, and answers how many are not running,
// or run and are unhealthy (rule 14).
func programs(v *projections.View, nodes []projections.Node, lives map[string]projections.Liveness, out *wire.StatusReport) (down int, err error) {
	runtimes, err := v.Runtimes()
	if err != nil || len(runtimes) == 0 {
		return 0, err
	}
	// The nodes with a runtime are few: a set of every active node was
	// 100,000 insertions a status at 100,000 nodes (a tenth of the
	// handler's time), so only theirs are marked.
	active := make(map[string]bool, len(runtimes))
	for _, rt := range runtimes {
		active[rt.Node] = false
	}
	for _, n := range nodes {
		if _, ok := active[n.Name]; ok && !n.Retired {
			active[n.Name] = true
		}
	}
	for _, rt := range runtimes {
		if active[rt.Node] {
			rt = liveness.RuntimeOn(rt, lives[rt.Node])
			out.Runtimes = append(out.Runtimes, rt)
			if !rt.Well() {
				down++
			}
		}
	}
	return down, nil
}

// rollouts puts the progress of each open or halted rollout in out, and a
// halted one among its causes.
func rollouts(v *projections.View, nodes []projections.Node, composed map[string]world.Would, out *wire.StatusReport) error {
	all, err := v.Rollouts()
	if err != nil {
		return err
	}
	var progress func(projections.Rollout) wire.RolloutProgress
	for _, ro := range all {
		if ro.Open() || ro.State == projections.RolloutHalted {
			if progress == nil {
				if progress, err = rolloutProgress(v, nodes, composed); err != nil {
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
	diff, at, err := h.Proj.Verify(ctx, h.Progress(r.Progress))
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
// rows and the assignments are read once for every rollout listed, not a
// node at a time.
func rolloutProgress(v *projections.View, nodes []projections.Node, composed map[string]world.Would) (func(projections.Rollout) wire.RolloutProgress, error) {
	rows := make(map[string]projections.Node, len(nodes))
	for _, n := range nodes {
		rows[n.Name] = n
	}
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
				row, found := rows[n]
				if !found || row.Retired {
					continue
				}
				p.Total++
				if state, _, _ := composed[n].StateOf(row); builds[[2]string{ro.Module, n}] == ro.Build && state == wire.StateCurrent {
					p.Applied++
				}
			}
		}
		return p
	}, nil
}
