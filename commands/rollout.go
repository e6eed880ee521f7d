package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
)

// RolloutRequest starts a rollout: the plan's waves, and whether a halted
// wave goes back to the builds it had.
type RolloutRequest struct {
	CommandID  string     `json:"command_id"`
	Module     string     `json:"module"`
	Build      string     `json:"build,omitempty"`
	Waves      []WaveSpec `json:"waves"`
	AutoRevert bool       `json:"auto_revert,omitempty"`
	// Bake and Deadline: see events.RolloutStarted.
	Bake     time.Duration `json:"bake,omitempty"`
	Deadline time.Duration `json:"deadline,omitempty"`
	// MaxParallel: see events.RolloutStarted.
	MaxParallel string `json:"max_parallel,omitempty"`
}

// RolloutControl pauses, resumes or aborts a rollout.
type RolloutControl struct {
	CommandID string `json:"command_id"`
	ID        string `json:"id"`
	Step      string `json:"step"` // events.StepPaused, StepResumed or StepAborted
}

// RolloutList is every rollout, newest last.
type RolloutList struct {
	Rollouts []projections.Rollout `json:"rollouts"`
}

// StartRollout records a rollout (rule 23): its waves are chosen now, from
// the nodes the module is assigned to, and the controllers' drive moves it
// wave by wave, each only once the one before applied the new build.
func (h *Handlers) StartRollout(ctx context.Context, r RolloutRequest) (projections.Rollout, error) {
	if err := h.writable(); err != nil {
		return projections.Rollout{}, err
	}
	if _, err := inFlightOf(r.MaxParallel, 1); err != nil {
		return projections.Rollout{}, &aggregates.Error{Op: "roll out", ID: r.Module, Err: aggregates.ErrInvalid, Detail: err.Error()}
	}
	plan, err := h.PlanRollout(ctx, RolloutPlanRequest{Module: r.Module, Build: r.Build, Waves: r.Waves})
	if err != nil {
		return projections.Rollout{}, err
	}
	ev := events.RolloutStarted{ID: "r-" + strings.ToLower(r.CommandID[:min(10, len(r.CommandID))]), Module: r.Module, Build: plan.Build,
		Previous: map[string]string{}, AutoRevert: r.AutoRevert, BakeSeconds: int(r.Bake.Seconds()), DeadlineSeconds: int(r.Deadline.Seconds()), MaxParallel: r.MaxParallel}
	err = h.Proj.Read(func(v *projections.View) error {
		for i, w := range plan.Waves {
			wave := events.RolloutWave{Name: w.Name, Selector: w.Selector}
			for _, n := range w.Nodes {
				wave.Nodes = append(wave.Nodes, n.Node)
			}
			for _, u := range w.Unsent {
				wave.Nodes = append(wave.Nodes, u.Node)
			}
			ev.Waves = append(ev.Waves, wave)
			for _, n := range ev.Waves[i].Nodes {
				as, err := v.AssignmentsOf(n)
				if err != nil {
					return err
				}
				for _, a := range as {
					if a.Module == r.Module {
						ev.Previous[n] = a.Build
					}
				}
			}
		}
		open, err := v.Rollouts()
		for _, o := range open {
			if o.Open() && o.Module == r.Module {
				return &aggregates.Error{Op: "roll out", ID: r.Module, Err: aggregates.ErrNameTaken,
					Detail: fmt.Sprintf("rollout %s of it is %s; abort it first (mesh rollout abort %s)", o.ID, o.State, o.ID)}
			}
		}
		return err
	})
	if err != nil {
		return projections.Rollout{}, err
	}
	seq, err := h.Store.Append(ctx, events.RolloutAggregate(ev.ID), 0, r.CommandID, ev)
	if err != nil {
		return projections.Rollout{}, err
	}
	h.Log.Info("rollout started", "id", ev.ID, "module", ev.Module, "waves", len(ev.Waves), "seq", seq)
	if err := h.landed(ctx, seq, ev); err != nil {
		return projections.Rollout{}, err
	}
	return h.rollout(ev.ID)
}

// ControlRollout pauses, resumes or aborts a rollout: a checked step.
func (h *Handlers) ControlRollout(ctx context.Context, r RolloutControl) (projections.Rollout, error) {
	for range maxAttempts {
		if err := h.catchUp(ctx); err != nil {
			return projections.Rollout{}, err
		}
		ro, err := h.rollout(r.ID)
		if err != nil {
			return ro, err
		}
		allowed := map[string]string{events.StepPaused: projections.RolloutRunning, events.StepResumed: projections.RolloutPaused}
		switch from, ok := allowed[r.Step]; {
		case r.Step == events.StepAborted && ro.Open():
		case ok && ro.State == from:
		case ok || r.Step == events.StepAborted:
			return ro, &aggregates.Error{Op: "change rollout", ID: r.ID, Err: aggregates.ErrInvalid, Detail: fmt.Sprintf("it is %s, so it cannot be %s", ro.State, r.Step)}
		default:
			return ro, &aggregates.Error{Op: "change rollout", ID: r.ID, Err: aggregates.ErrInvalid, Detail: fmt.Sprintf("%q is not paused, resumed or aborted", r.Step)}
		}
		err = h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: r.Step, Wave: ro.Wave})
		if errors.Is(err, store.ErrConflict) {
			continue // a controller's drive took a step meanwhile: decide again on it
		}
		if err != nil {
			return ro, err
		}
		return h.rollout(r.ID)
	}
	return projections.Rollout{}, fmt.Errorf("cannot change rollout %s: it moved under %d attempts in a row; try again", r.ID, maxAttempts)
}

// ListRollouts answers every rollout.
func (h *Handlers) ListRollouts(context.Context, Empty) (RolloutList, error) {
	var out RolloutList
	err := h.Proj.Read(func(v *projections.View) (err error) {
		out.Rollouts, err = v.Rollouts()
		return err
	})
	if out.Rollouts == nil {
		out.Rollouts = []projections.Rollout{}
	}
	return out, err
}

// ShowRollout answers one rollout.
func (h *Handlers) ShowRollout(_ context.Context, r NameRequest) (projections.Rollout, error) {
	return h.rollout(r.Name)
}

func (h *Handlers) rollout(id string) (projections.Rollout, error) {
	var ro projections.Rollout
	var found bool
	err := h.Proj.Read(func(v *projections.View) (err error) {
		ro, found, err = v.Rollout(id)
		return err
	})
	if err == nil && !found {
		err = &aggregates.Error{Op: "show rollout", ID: id, Err: aggregates.ErrUnknownNode, Detail: "there is no rollout of that id; mesh rollout list names them"}
	}
	return ro, err
}

// step appends one step of a rollout, expecting its version: of two
// controllers taking the same step, one lands and the other conflicts.
func (h *Handlers) step(ctx context.Context, ro projections.Rollout, ev events.RolloutStep) error {
	seq, err := h.Store.Append(ctx, events.RolloutAggregate(ro.ID), ro.Version, NewCommandID(), ev)
	if err != nil {
		return err
	}
	h.Log.Info("rollout step", "id", ro.ID, "step", ev.Step, "wave", ev.Wave, "node", ev.Node, "seq", seq)
	return h.landed(ctx, seq, ev)
}

// DriveRollouts moves every running rollout one step where it can: the
// controller calls it on a timer (every controller: several may), and a
// step taken by another meanwhile makes this one's append conflict, which
// is nothing to do. A wave starts once the one before it applied the new
// build everywhere; a node that failed or refused it halts the rollout.
func (h *Handlers) DriveRollouts(ctx context.Context) error {
	if h.writable() != nil || h.past {
		return nil
	}
	// Which run, from the read models as they are: a tick with none
	// running (nearly every one) asks the bus nothing.
	list, err := h.ListRollouts(ctx, Empty{})
	if err != nil || !slices.ContainsFunc(list.Rollouts, func(r projections.Rollout) bool { return r.State == projections.RolloutRunning }) {
		return err
	}
	if err := h.catchUp(ctx); err != nil {
		return err
	}
	if list, err = h.ListRollouts(ctx, Empty{}); err != nil {
		return err
	}
	for _, ro := range list.Rollouts {
		// Steps that need no agent (a wave's start, its nodes' moves) are
		// taken one after another in this call, each from read models that
		// hold the one before; it stops at what waits for agents.
		for range chainedSteps {
			if ro.State != projections.RolloutRunning {
				break
			}
			err := h.driveOne(ctx, ro)
			moved, taken := errors.Is(err, errMoved), errors.Is(err, store.ErrConflict)
			if err != nil && !moved && !taken {
				return fmt.Errorf("rollout %s: %w", ro.ID, err)
			}
			if err := h.catchUp(ctx); err != nil {
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

// errMoved: a wave's nodes were moved to their build just now; they are
// sent from read models that hold the move.
var errMoved = errors.New("rollout: nodes moved to their build; send next")

func (h *Handlers) driveOne(ctx context.Context, ro projections.Rollout) error {
	if ro.Wave < 0 {
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepWaveStarted, Wave: 0})
	}
	wave := ro.Waves[ro.Wave]
	done, err := h.moveWave(ctx, ro, wave.Nodes, func(string) string { return ro.Build })
	var halt *waveHalt
	switch {
	case errors.As(err, &halt):
		if err := h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepHalted, Wave: ro.Wave, Node: halt.node, Why: halt.why}); err != nil || !ro.AutoRevert {
			return err
		}
		ro, err := h.rollout(ro.ID)
		if err != nil {
			return err
		}
		// Moved back, then (from read models that hold the move) sent.
		for i := range 2 {
			if i > 0 {
				if err := h.catchUp(ctx); err != nil {
					return err
				}
			}
			if _, err := h.moveWave(ctx, ro, wave.Nodes, func(n string) string { return ro.Previous[n] }); err != nil && !errors.As(err, &halt) && !errors.Is(err, errMoved) {
				return err
			}
		}
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepReverted, Wave: ro.Wave})
	case err != nil:
		return err
	case !done && ro.DeadlineSeconds > 0 && h.Now().After(ro.WaveAt.Add(time.Duration(ro.DeadlineSeconds)*time.Second)):
		late := h.notApplied(wave.Nodes)
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepHalted, Wave: ro.Wave, Node: late,
			Why: fmt.Sprintf("it did not apply the build within the wave's deadline of %s", time.Duration(ro.DeadlineSeconds)*time.Second)})
	case !done:
		return nil
	case ro.BakeSeconds > 0 && h.Now().Before(h.lastApplied(wave.Nodes).Add(time.Duration(ro.BakeSeconds)*time.Second)):
		return nil // baking: the wave is watched a while before the next
	case ro.Wave == len(ro.Waves)-1:
		return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepFinished, Wave: ro.Wave})
	}
	return h.step(ctx, ro, events.RolloutStep{ID: ro.ID, Step: events.StepWaveStarted, Wave: ro.Wave + 1})
}

// notApplied is the first node of nodes not current, for a halt's sentence.
func (h *Handlers) notApplied(nodes []string) string {
	for _, n := range nodes {
		row, found, err := h.Proj.Node(n)
		if err == nil && found && (row.LastReport == nil || row.LastSent == nil || row.LastReport.Digest != row.LastSent.Digest) {
			return n
		}
	}
	return nodes[0]
}

// lastApplied is when the last of nodes reported applying what it was sent.
func (h *Handlers) lastApplied(nodes []string) time.Time {
	var last time.Time
	for _, n := range nodes {
		if row, found, err := h.Proj.Node(n); err == nil && found && row.LastReport != nil && row.LastReport.At.After(last) {
			last = row.LastReport.At
		}
	}
	return last
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

// waveHalt is a node of a wave that failed or refused its new build.
type waveHalt struct{ node, why string }

func (w *waveHalt) Error() string { return w.node + ": " + w.why }

// moveWave moves each node of a wave to its build (build(node)), sends it
// what it would be sent then, and answers whether every one applied it. A
// node already moved, or already sent it, is not moved or sent again: a
// step is safe to repeat, by this controller or another.
func (h *Handlers) moveWave(ctx context.Context, ro projections.Rollout, nodes []string, build func(string) string) (bool, error) {
	var moved []string
	err := h.Proj.Read(func(v *projections.View) error {
		for _, n := range nodes {
			node, err := nodeAggregateOf(v, n)
			if err != nil {
				return err
			}
			have, assigned := node.Assignments[ro.Module]
			if !node.Enrolled || node.Retired || !assigned || build(n) == "" || have.Build == build(n) {
				continue // retired or unassigned meanwhile: out of the rollout
			}
			m, found, err := h.manifests.get(v, compose.BuildRef{Module: ro.Module, Build: build(n)})
			if err != nil || !found {
				return fmt.Errorf("build %s of %s cannot be read: %v", build(n), ro.Module, err)
			}
			// The node aggregate decides, as for mesh assign: the build
			// moves, the settings stay as recorded (a sealed one sealed),
			// and a build they do not suit is refused, which halts the wave.
			evs, err := node.Decide(aggregates.AssignModule{Node: n, Module: ro.Module, Build: build(n), Spec: m.Settings, Settings: have.Settings}, h.Now())
			var refusal *aggregates.Error
			if errors.As(err, &refusal) {
				return &waveHalt{node: n, why: refusal.Detail}
			}
			if err != nil || len(evs) == 0 {
				return err
			}
			if _, err := h.Store.Append(ctx, events.NodeAggregate(n), node.Version, NewCommandID(), evs...); err != nil {
				return err
			}
			moved = append(moved, n)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if len(moved) > 0 {
		return false, errMoved // sent on the next step, from read models that hold the moves
	}
	composed, err := h.composeAll()
	if err != nil {
		return false, err
	}
	var send []string
	done, waiting := true, 0
	err = h.Proj.Read(func(v *projections.View) error {
		for _, n := range nodes {
			row, found, err := v.Node(n)
			if err != nil || !found || row.Retired {
				continue
			}
			w := composed[n]
			state, _, detail := stateOf(row, w)
			switch state {
			case StateCurrent:
			case StateFailed, StateRefused:
				return &waveHalt{node: n, why: fmt.Sprintf("%s: %s", state, detail)}
			case StateCannotCompose:
				return &waveHalt{node: n, why: "it cannot be composed: " + detail}
			case StateWaiting:
				done = false
				waiting++
			default: // never sent, behind: what it would be sent is not what it was
				send = append(send, n)
				done = false
			}
		}
		return nil
	})
	if err != nil || len(send) == 0 {
		return done, err
	}
	// At most max-parallel in flight: those sent and not yet applied count.
	limit, _ := inFlightOf(ro.MaxParallel, len(nodes))
	if room := limit - waiting; room < len(send) {
		send = send[:max(room, 0)]
		if len(send) == 0 {
			return false, nil
		}
	}
	r, err := h.Push(ctx, PushRequest{CommandID: NewCommandID(), Nodes: send})
	if err == nil && len(r.Unsent) > 0 {
		return false, &waveHalt{node: r.Unsent[0].Node, why: "it was not sent: " + r.Unsent[0].Reason}
	}
	return false, err
}
