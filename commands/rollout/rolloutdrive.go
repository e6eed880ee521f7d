package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/verdict"
	"github.com/meshctl/mesh/wire"
)

// DriveRollouts moves every running rollout one step where it can, and
// starts the rollout a new build of a module with auto nodes asks for: the
// controller calls it on a timer (every controller: several may), and a
// step taken by another meanwhile makes this one's append conflict, which
// is nothing to do (rule 23). A wave starts once the one before it passed
// its gate; a node that failed or refused the build, or whose program is
// crash-looping, halts the rollout.
func (h *Service) DriveRollouts(ctx context.Context) error {
	if h.Writable() != nil || h.Past {
		return nil
	}
	if err := h.startAutoRollouts(ctx); err != nil {
		return err
	}
	// Which run, from the read models as they are: a tick with none
	// running (nearly every one) asks the bus nothing.
	list, err := h.ListRollouts(ctx, wire.Empty{})
	if err != nil || !slices.ContainsFunc(list.Rollouts, func(r projections.Rollout) bool { return r.State == projections.RolloutRunning }) {
		return err
	}
	if err := h.CatchUp(ctx); err != nil {
		return err
	}
	if list, err = h.ListRollouts(ctx, wire.Empty{}); err != nil {
		return err
	}
	for _, ro := range list.Rollouts {
		// Steps that need no agent (a wave's start, its nodes' moves, the
		// sends) are taken one after another in this call, each from read
		// models that hold the one before; it stops at what waits for
		// agents.
		for range chainedSteps {
			if ro.State != projections.RolloutRunning {
				break
			}
			// Its steps are the rollout's, taken by itself (issue 33).
			err := h.driveOne(events.WithBy(ctx, events.ActorRolloutPrefix+ro.ID), ro)
			moved, taken := errors.Is(err, errMoved), errors.Is(err, store.ErrConflict)
			if err != nil && !moved && !taken {
				return fmt.Errorf("rollout %s: %w", ro.ID, err)
			}
			if err := h.CatchUp(ctx); err != nil {
				return err
			}
			next, err := h.rollout(ro.ID)
			if err != nil {
				return err
			}
			progressed := moved || next.Version != ro.Version
			ro = next
			if taken || !progressed {
				break // another controller took the step, or it waits for agents
			}
		}
	}
	return nil
}

// chainedSteps bounds the steps one drive takes of one rollout.
const chainedSteps = 4

// errMoved: some of a wave's nodes were moved to their build just now;
// they are sent on the next step, from read models that hold the moves.
var errMoved = errors.New("rollout: nodes moved to their build; send next")

func (h *Service) driveOne(ctx context.Context, ro projections.Rollout) error {
	at := aggregates.RolloutAt{Wave: ro.Wave, Waves: len(ro.Waves), WaveAt: ro.WaveAt, Deadline: time.Duration(ro.DeadlineSeconds) * time.Second}
	var done bool
	var held aggregates.GateHold
	var halt *waveHalt
	var notApplied string
	if ro.Wave >= 0 {
		wave := ro.Waves[ro.Wave]
		limit, _ := inFlightOf(ro.MaxParallel, len(wave.Nodes))
		var err error
		done, err = h.moveWave(ctx, ro, wave.Nodes, func(string) string { return ro.Build }, limit)
		if err == nil && done {
			held, err = h.waveGate(ro, wave.Nodes)
		}
		if !errors.As(err, &halt) && err != nil {
			return err
		}
		if !done {
			notApplied = h.notApplied(wave.Nodes)
		}
	}
	switch step := aggregates.NextRolloutStep(at, done, held, halt, notApplied, h.Now()); step.Kind {
	case aggregates.StepHalt:
		return h.halt(ctx, ro, step.Halt)
	case aggregates.StepStartWave:
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepWaveStarted, Wave: step.Wave})
	case aggregates.StepFinish:
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepFinished, Wave: step.Wave})
	}
	return nil // waits for agents, a program, a standing, or the bake
}

// halt records the halt, and with --auto-revert sends the wave back to the
// builds it had: moved back, then sent from read models that hold the move.
func (h *Service) halt(ctx context.Context, ro projections.Rollout, halt *waveHalt) error {
	if err := h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepHalted, Wave: ro.Wave, Node: halt.Node, Why: halt.Why}); err != nil || !ro.AutoRevert {
		return err
	}
	ro, err := h.rollout(ro.ID)
	if err != nil {
		return err
	}
	nodes := ro.Waves[ro.Wave].Nodes
	for i := range 2 {
		if i > 0 {
			if err := h.CatchUp(ctx); err != nil {
				return err
			}
		}
		// Back all at once: max-parallel bounds a build going out, not
		// a retreat from one that failed.
		if _, err := h.moveWave(ctx, ro, nodes, func(n string) string { return ro.Previous[n] }, len(nodes)); err != nil &&
			!errors.As(err, new(*waveHalt)) && !errors.Is(err, errMoved) {
			return err
		}
	}
	return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepReverted, Wave: ro.Wave})
}

// waveGate reads what the gate weighs of each node of a wave that applied
// its build, and asks aggregates.Gate (rule 23).
func (h *Service) waveGate(ro projections.Rollout, nodes []string) (aggregates.GateHold, error) {
	var in []aggregates.GateNode
	var runs, checked bool
	err := h.Proj.Read(func(v *projections.View) error {
		m, found, err := h.world.Manifest(v, compose.BuildRef{Module: ro.Module, Build: ro.Build})
		if err != nil || !found {
			return fmt.Errorf("build %s of %s cannot be read: %v", ro.Build, ro.Module, err)
		}
		runs = m.Run != nil
		checked = runs && m.Run.Health != nil
		standings, err := v.Standings()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			row, found, err := v.Node(n)
			if err != nil {
				return err
			}
			g := aggregates.GateNode{Node: n, Reported: found && !row.Retired && row.LastReport != nil}
			if !g.Reported {
				in = append(in, g)
				continue
			}
			g.ReportedAt = row.LastReport.At
			if runs {
				rt, err := runtimeOf(v, n, ro.Module)
				if err != nil {
					return err
				}
				g.Runtime, g.RuntimeDetail, g.RuntimeSince = rt.State, rt.Detail, rt.Since
				g.Health, g.HealthDetail, g.HealthSince = string(rt.Health), rt.HealthDetail, rt.HealthSince
				g.Applied, g.RuntimeDeclaration = row.LastReport.Sequence, rt.StartedUnder
			}
			for _, s := range standings {
				if s.Machine == n || s.Provider == ro.Module || s.Consumer == ro.Module {
					g.Standing = fmt.Sprintf("%s on %s is failing %s: %s", s.Provider, s.Machine, s.Consumer, s.Word)
					break
				}
			}
			in = append(in, g)
		}
		return nil
	})
	if err != nil {
		return aggregates.GateHold{}, err
	}
	hold, halt := aggregates.Gate(in, runs, checked, time.Duration(ro.BakeSeconds)*time.Second, h.Now())
	if halt != nil {
		return aggregates.GateHold{}, halt
	}
	return hold, nil
}

// runtimeOf is a node's runtime of module; State "" when none is reported.
func runtimeOf(v *projections.View, node, module string) (projections.Runtime, error) {
	rts, err := v.RuntimesOf(node)
	for _, rt := range rts {
		if rt.Module == module {
			return rt, err
		}
	}
	return projections.Runtime{}, err
}

// notApplied is the first node of nodes not current, for a halt's sentence.
func (h *Service) notApplied(nodes []string) string {
	for _, n := range nodes {
		row, found, err := h.Proj.Node(n)
		if err == nil && found && (row.LastReport == nil || row.LastSent == nil || row.LastReport.Digest != row.LastSent.Digest) {
			return n
		}
	}
	return nodes[0]
}

// inFlightOf reads --max-parallel for a wave of n nodes: a count, or a
// percentage of the wave (at least one); "" is the whole wave.
func inFlightOf(s string, n int) (int, error) {
	if s == "" {
		return max(n, 1), nil
	}
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	switch {
	case err != nil || v < 1 || pct && v > 100:
		return 0, fmt.Errorf("--max-parallel %q is not a count (such as 5) or a percentage (such as 25%%)", s)
	case pct:
		return max(n*v/100, 1), nil
	}
	return v, nil
}

// waveHalt is a node of a wave that halts the rollout (aggregates.WaveHalt).
type waveHalt = aggregates.WaveHalt

// moveWave takes one step of moving nodes to their build (build(node)):
// it sends those moved and not yet sent, or else moves more; at most limit
// are moved and not yet applied at once. A node is moved only when it is
// about to be sent, so push --behind never finds one a wave has not
// reached: the rollout, not a push, decides when each node goes. It
// answers whether every node applied its build. A node already moved, or
// already sent it, is not moved or sent again: a step is safe to repeat,
// by this controller or another.
func (h *Service) moveWave(ctx context.Context, ro projections.Rollout, nodes []string, build func(string) string, limit int) (bool, error) {
	in := make([]aggregates.WaveNode, 0, len(nodes))
	err := h.Proj.Read(func(v *projections.View) error {
		for _, n := range nodes {
			row, found, err := v.Node(n)
			if err != nil {
				return err
			}
			have, assigned, err := assignmentOf(v, n, ro.Module)
			if err != nil {
				return err
			}
			w := aggregates.WaveNode{Node: n, Out: !found || row.Retired || !assigned || build(n) == ""}
			w.Moved = !w.Out && have.Build == build(n)
			// Read from what was sent since the node took the build and
			// what it said of that, not from composing the fleet again
			// (which a rollout of 10,000 nodes would do at every step):
			// what the rollout waits for is its exact digest applied.
			sent, rep := row.LastSent, row.LastReport
			w.Sent = w.Moved && sent != nil && sent.StreamSeq >= have.Seq
			w.Answered = w.Sent && rep != nil && rep.Digest == sent.Digest
			if w.Answered {
				w.Outcome = rep.Outcome
				w.Why = rep.Reason
				if rep.Outcome == events.OutcomeFailed {
					w.Why = verdict.FailedShort(rep)
				}
			}
			in = append(in, w)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	p := aggregates.ProgressWave(in, limit)
	switch {
	case p.Halt != nil:
		return false, p.Halt
	case len(p.Send) > 0:
		return false, h.sendWave(ctx, ro, p.Send)
	case len(p.Move) > 0:
		return false, h.moveNodes(ctx, ro, p.Move, build)
	}
	return p.Done, nil
}

// assignmentOf is node's assignment of module, if it has one.
func assignmentOf(v *projections.View, node, module string) (projections.AssignmentRow, bool, error) {
	as, err := v.AssignmentsOf(node)
	for _, a := range as {
		if a.Module == module {
			return a, true, err
		}
	}
	return projections.AssignmentRow{}, false, err
}

// moveNodes moves each node to its build through the node aggregate's own
// decision, as mesh assign does: the build moves, the settings and policy
// stay as recorded (a sealed setting sealed), and a build they do not suit
// is refused, which halts the wave. The moves are appended together, each
// expecting its node's version: one that moved meanwhile (another
// controller's move) is left to the next step, which reads it again. It
// answers errMoved.
func (h *Service) moveNodes(ctx context.Context, ro projections.Rollout, nodes []string, build func(string) string) error {
	var items []store.One
	err := h.Proj.Read(func(v *projections.View) error {
		for _, n := range nodes {
			node, err := core.NodeOf(v, n)
			if err != nil {
				return err
			}
			m, found, err := h.world.Manifest(v, compose.BuildRef{Module: ro.Module, Build: build(n)})
			if err != nil || !found {
				return fmt.Errorf("build %s of %s cannot be read: %v", build(n), ro.Module, err)
			}
			// A build that claims a seat its node does not hold takes it
			// only by mesh assign, whose batch expects the seat's version.
			if claims, err := core.ClaimItems(v, n, ro.Module, m, nil); err != nil || len(claims) > 0 {
				why := fmt.Sprintf("build %s claims seats %v, which a rollout does not take; assign it to the node that is to hold them", manifest.ShortBuild(build(n)), m.Claims)
				if err != nil {
					why = err.Error()
				}
				return &waveHalt{Node: n, Why: why}
			}
			// No settings given: the assignment keeps those it holds (one the
			// new build no longer declares is dropped, not refused).
			evs, err := node.Decide(aggregates.AssignModule{Node: n, Module: ro.Module, Build: build(n), Spec: m.Settings}, h.Now())
			var refusal *aggregates.Error
			if errors.As(err, &refusal) {
				return &waveHalt{Node: n, Why: refusal.Detail}
			}
			if err != nil {
				return err
			}
			for _, ev := range evs {
				items = append(items, store.One{Aggregate: events.NodeAggregate(n), Expected: node.Version, CommandID: wire.NewCommandID(), Event: ev})
			}
		}
		return nil
	})
	if err != nil || len(items) == 0 {
		return err
	}
	outcomes, err := h.Store.AppendMany(ctx, items)
	if err != nil {
		return err
	}
	for _, o := range outcomes {
		if o.Err != nil && !errors.Is(o.Err, store.ErrConflict) {
			return o.Err
		}
	}
	return errMoved
}

// sendWave pushes nodes, recorded as sent by the rollout; one that could
// not be sent halts the wave, named.
func (h *Service) sendWave(ctx context.Context, ro projections.Rollout, nodes []string) error {
	r, err := h.push.Push(ctx, wire.PushRequest{CommandID: wire.NewCommandID(), Nodes: nodes, By: "rollout " + ro.ID, Once: true})
	switch {
	case err != nil:
		return err
	case len(r.Unsent) > 0:
		return &waveHalt{Node: r.Unsent[0].Node, Why: "it was not sent: " + r.Unsent[0].Reason}
	case len(r.Held) > 0:
		// The wave cannot pass a node it may not send to: halted, named.
		return &waveHalt{Node: r.Held[0].Node, Why: "it is held by its " + r.Held[0].Reason}
	}
	return nil
}
