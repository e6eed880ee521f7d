package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// StartRollout records a rollout (rule 23): its waves are chosen now, from
// the nodes the module is assigned to whose policy lets a rollout move
// them, and the controllers' drive moves it wave by wave, each only once
// the one before passed its gate.
func (h *Service) StartRollout(ctx context.Context, r wire.RolloutRequest) (projections.Rollout, error) {
	return h.startRollout(ctx, "r-"+strings.ToLower(r.CommandID[:min(10, len(r.CommandID))]), r, false)
}

func (h *Service) startRollout(ctx context.Context, id string, r wire.RolloutRequest, auto bool) (projections.Rollout, error) {
	if err := h.Writable(); err != nil {
		return projections.Rollout{}, err
	}
	if _, err := inFlightOf(r.MaxParallel, 1); err != nil {
		return projections.Rollout{}, aggregates.Refuse("roll out", r.Module, aggregates.ErrInvalid, err.Error())
	}
	// The waves only: what would change on each node is the plan's to
	// show, and composing the fleet here would be most of a start's time.
	plan, _, waves, err := h.chooseWaves(ctx, wire.RolloutPlanRequest{Module: r.Module, Build: r.Build, Waves: r.Waves, Auto: auto})
	if err != nil {
		return projections.Rollout{}, err
	}
	ev := events.RolloutStarted{ID: id, Module: r.Module, Build: plan.Build, Previous: map[string]string{}, AutoRevert: r.AutoRevert,
		BakeSeconds: int(r.Bake.Seconds()), DeadlineSeconds: int(r.Deadline.Seconds()), MaxParallel: r.MaxParallel, Auto: auto}
	err = h.Proj.Read(func(v *projections.View) error {
		for _, wave := range waves {
			ev.Waves = append(ev.Waves, wave)
			for _, n := range wave.Nodes {
				a, _, err := assignmentOf(v, n, r.Module)
				if err != nil {
					return err
				}
				ev.Previous[n] = a.Build
			}
		}
		open, err := v.Rollouts()
		for _, o := range open {
			if o.Open() && o.Module == r.Module {
				return aggregates.Refuse("roll out", r.Module, aggregates.ErrNameTaken, fmt.Sprintf("rollout %s of it is %s; abort it first (mesh rollout abort %s)", o.ID, o.State, o.ID))
			}
		}
		return err
	})
	if err != nil {
		return projections.Rollout{}, err
	}
	// Expecting no event on the rollout's aggregate: the rollout a build
	// starts by itself has one id in every controller, so of two that
	// start it one lands and the other conflicts.
	seq, err := h.Store.Append(ctx, events.RolloutAggregate(ev.ID), 0, cmp.Or(r.CommandID, wire.NewCommandID()), ev)
	if err != nil {
		return projections.Rollout{}, err
	}
	h.Log.Info("rollout started", "id", ev.ID, "module", ev.Module, "waves", len(ev.Waves), "auto", auto, "seq", seq)
	if err := h.Landed(ctx, seq, ev); err != nil {
		return projections.Rollout{}, err
	}
	return h.rollout(ev.ID)
}

// ControlRollout pauses, resumes or aborts a rollout: a checked step.
func (h *Service) ControlRollout(ctx context.Context, r wire.RolloutControl) (projections.Rollout, error) {
	// Decided on read models caught up first, and again after each
	// conflict: a controller's drive took a step meanwhile, and the
	// control is decided again on it.
	if err := h.CatchUp(ctx); err != nil {
		return projections.Rollout{}, err
	}
	err := core.DecideAndAppend(ctx, "change rollout", r.ID, h.CatchUp, func(int) error {
		ro, err := h.rollout(r.ID)
		if err != nil {
			return err
		}
		allowed := map[string]string{events.StepPaused: projections.RolloutRunning, events.StepResumed: projections.RolloutPaused}
		switch from, ok := allowed[r.Step]; {
		case r.Step == events.StepAborted && (ro.Open() || ro.State == projections.RolloutHalted):
			// A halted rollout keeps the mesh not well until the operator
			// ends it, which is what status tells them to do.
		case ok && ro.State == from:
		case ok || r.Step == events.StepAborted:
			return aggregates.Refuse("change rollout", r.ID, aggregates.ErrInvalid, fmt.Sprintf("it is %s, so it cannot be %s", ro.State, r.Step))
		default:
			return aggregates.Refuse("change rollout", r.ID, aggregates.ErrInvalid, fmt.Sprintf("%q is not paused, resumed or aborted", r.Step))
		}
		// Expects the rollout's version as read: store.ErrConflict when
		// a step landed since.
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: r.Step, Wave: ro.Wave})
	})
	if err != nil {
		return projections.Rollout{}, err
	}
	return h.rollout(r.ID)
}

// ListRollouts answers every rollout.
func (h *Service) ListRollouts(context.Context, wire.Empty) (wire.RolloutList, error) {
	var out wire.RolloutList
	err := h.Proj.Read(func(v *projections.View) (err error) {
		out.Rollouts, err = v.Rollouts()
		return err
	})
	if out.Rollouts == nil {
		out.Rollouts = []projections.Rollout{}
	}
	return out, err
}

// ShowRollout answers one rollout, its nodes' states, and while it is
// open the plan of what is still to change.
func (h *Service) ShowRollout(ctx context.Context, r wire.NameRequest) (wire.RolloutView, error) {
	ro, err := h.rollout(r.Name)
	if err != nil {
		return wire.RolloutView{}, err
	}
	out := wire.RolloutView{Rollout: ro, Nodes: []wire.NodeStatus{}}
	in := map[string]bool{}
	for _, w := range ro.Waves {
		for _, n := range w.Nodes {
			in[n] = true
		}
	}
	s, err := h.status.Status(ctx, wire.StatusRequest{})
	if err != nil {
		return out, err
	}
	waiting := 0
	for _, n := range s.Nodes {
		if in[n.Name] {
			out.Nodes = append(out.Nodes, n)
		}
		if ro.Wave >= 0 && slices.Contains(ro.Waves[ro.Wave].Nodes, n.Name) && n.State != wire.StateCurrent {
			waiting++
		}
	}
	if ro.State == projections.RolloutRunning && ro.Wave >= 0 {
		if waiting > 0 {
			out.Gate = fmt.Sprintf("%d node(s) of wave %d have not applied the build", waiting, ro.Wave+1)
		} else if hold, err := h.waveGate(ro, ro.Waves[ro.Wave].Nodes); err == nil && hold.Node != "" {
			out.Gate = hold.Node + ": " + hold.Why
		} else if err != nil {
			out.Gate = err.Error()
		}
	}
	if !ro.Open() {
		return out, nil
	}
	plan := wire.RolloutPlan{Module: ro.Module, Build: ro.Build, Waves: []wire.WavePlan{}, Left: []string{}, Held: []wire.HeldNode{}}
	var world compose.Input
	rows := map[string]projections.Node{}
	err = h.Proj.Read(func(v *projections.View) (err error) {
		if world, err = h.world.Input(v); err != nil {
			return err
		}
		for n := range in {
			if row, found, err := v.Node(n); err != nil {
				return err
			} else if found {
				rows[n] = row
			}
		}
		return nil
	})
	if err == nil {
		err = h.planWaves(ctx, &plan, world, rows, ro.Waves)
	}
	out.Plan = &plan
	return out, err
}

func (h *Service) rollout(id string) (projections.Rollout, error) {
	var ro projections.Rollout
	var found bool
	err := h.Proj.Read(func(v *projections.View) (err error) {
		ro, found, err = v.Rollout(id)
		return err
	})
	if err == nil && !found {
		err = aggregates.Refuse("show rollout", id, aggregates.ErrUnknownNode, "there is no rollout of that id; mesh rollout list names them")
	}
	return ro, err
}

// step appends one step of a rollout, expecting its version: of two
// controllers taking the same step, one lands and the other conflicts.
func (h *Service) step(ctx context.Context, ro projections.Rollout, ev events.RolloutStep) error {
	seq, err := h.Store.Append(ctx, events.RolloutAggregate(ro.ID), ro.Version, wire.NewCommandID(), ev)
	if err != nil {
		return err
	}
	h.Log.Info("rollout step", "id", ro.ID, "step", ev.Step, "wave", ev.Wave, "node", ev.Node, "seq", seq)
	return h.Landed(ctx, seq, ev)
}
