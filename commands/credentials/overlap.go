package credentials

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// appliedSince says whether node n applied a declaration sent after the
// event at seq: the test that names a rotation half applied in status,
// and that ends its overlap. A report on anything but what n was last
// sent is history, not this (the fold keeps the row's report on its last
// send only).
func appliedSince(n projections.Node, seq uint64) bool {
	sent, rep := n.LastSent, n.LastReport
	return sent != nil && sent.StreamSeq > seq && rep != nil && rep.Outcome == events.OutcomeApplied && rep.Digest == sent.Digest
}

// overlapOf is r as the completion is decided from: its bound, whether it
// completed, and the consumer ends that have not applied since it. A
// consumer end is a node of r.Ends still active with the consumer
// assigned: one retired, or whose consumer left, needs no old credential.
func overlapOf(v *projections.View, r projections.Rotation) (aggregates.Overlap, error) {
	o := aggregates.Overlap{Provider: r.Provider, Consumer: r.Consumer, Generation: r.Generation, Until: r.OverlapUntil, Completed: r.Completed != nil}
	holding, err := v.AssignedTo(r.Consumer)
	if err != nil {
		return o, err
	}
	for _, end := range r.Ends {
		n, found, err := v.Node(end)
		if err != nil {
			return o, err
		}
		if !found || n.Retired {
			continue
		}
		if slices.Contains(holding, end) && !appliedSince(n, r.Seq) {
			o.Pending = append(o.Pending, end)
		}
	}
	return o, nil
}

// Stages are status's view of every pair's last rotation: its stage, the
// consumer ends an overlap still waits on, and when and why it completed.
func Stages(v *projections.View) ([]wire.RotationStage, error) {
	rotations, err := v.Rotations()
	if err != nil {
		return nil, err
	}
	out := []wire.RotationStage{}
	for _, r := range rotations {
		o, err := overlapOf(v, r)
		if err != nil {
			return nil, err
		}
		s := wire.RotationStage{Provider: r.Provider, Consumer: r.Consumer, Generation: r.Generation, Stage: wire.RotationAtOnce, At: r.At, Until: r.OverlapUntil}
		switch o.Stage() {
		case aggregates.StageOverlap:
			s.Stage, s.Waiting = wire.RotationOverlap, o.Pending
		case aggregates.StageCompleted:
			s.Stage = wire.RotationCompleted
			s.CompletedAt, s.Reason = r.Completed.At, string(r.Completed.Reason)
		}
		out = append(out, s)
	}
	return out, nil
}

// DriveRotations ends each overlap that is due (every consumer end applied,
// or its bound passed at the controller's clock): the controller's
// periodic work, beside the rollouts', so a consumer end that comes back
// ends its overlap with no operator's command, and a controller started
// again mid-overlap finishes it from the read models alone. An overlap one
// of whose provider ends cannot be composed stays open, logged, and is
// tried again at the next tick.
func (h *Service) DriveRotations(ctx context.Context) error {
	if h.Writable() != nil || h.Past {
		return nil
	}
	var due []projections.Rotation
	if err := h.Proj.Read(func(v *projections.View) error {
		rotations, err := v.Rotations()
		for _, r := range rotations {
			if err != nil || !r.Overlapping() {
				continue
			}
			var o aggregates.Overlap
			if o, err = overlapOf(v, r); err == nil {
				if _, ok, _ := aggregates.DecideCompletion(o, nil, h.Now()); ok {
					due = append(due, r)
				}
			}
		}
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, r := range due {
		if err := h.complete(ctx, r.Provider, r.Consumer); err != nil && !errors.Is(err, store.ErrConflict) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// complete records the end of the pair's overlap and sends every provider
// end its declaration without the old credential, in one atomic batch
// through the same write as the rotation's (together), deciding again
// from read models that hold every write to the provider: a completion a
// second controller already made, or a rotation landed since, leaves
// nothing to do.
func (h *Service) complete(ctx context.Context, provider, consumer string) error {
	name := fmt.Sprintf("the overlap of the credentials %s mints for %s", provider, consumer)
	var done events.RotationCompleted
	seq, err := h.together(ctx, "complete", name, wire.NewCommandID(), provider, func(v *projections.View) (*rotation, error) {
		r, found, err := v.Rotation(provider, consumer)
		if err != nil || !found || !r.Overlapping() {
			return nil, err
		}
		o, err := overlapOf(v, r)
		if err != nil {
			return nil, err
		}
		if _, ok, _ := aggregates.DecideCompletion(o, nil, h.Now()); !ok {
			return nil, nil
		}
		in, err := h.world.Input(v)
		if err != nil {
			return nil, err
		}
		// Composed as the read models will be once the completion is
		// folded: the pair no longer overlapping.
		pair := compose.Pair{Provider: provider, Consumer: consumer}
		in.Overlapping = maps.Clone(in.Overlapping)
		delete(in.Overlapping, pair)
		w := compose.NewWorld(in)
		var names []string
		for _, a := range in.Assignments {
			if a.Module == provider {
				names = append(names, a.Node)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		results := make(map[string]compose.Result, len(names))
		ends := make([]aggregates.RotationEnd, len(names))
		for i, node := range names {
			results[node] = w.Compose(node)
			ends[i] = aggregates.RotationEnd{Node: node, Problem: endProblem(results[node], wire.RotateRequest{Provider: provider, Consumer: consumer})}
		}
		ev, ok, err := aggregates.DecideCompletion(o, ends, h.Now())
		if err != nil || !ok {
			return nil, err
		}
		done = ev
		plan := rotation{event: ev}
		return &plan, h.seal(v, &plan, results, ev.ProviderEnds, "rotation completed")
	})
	if err != nil || seq == 0 {
		return err
	}
	h.Log.Info("rotation completed: the old credential dropped", "provider", provider, "consumer", consumer, "generation", done.Generation, "reason", done.Reason, "provider_ends", done.ProviderEnds, "seq", seq)
	return h.Landed(ctx, seq, done)
}

// OpenRotation is a rotation not yet applied at every end: status names it
// until both ends report applying what they were sent with it or after.
type OpenRotation struct {
	Provider   string   `json:"provider"`
	Consumer   string   `json:"consumer"`
	Generation uint64   `json:"generation"`
	Applied    []string `json:"applied"`
	Pending    []string `json:"pending"`
}

func (r OpenRotation) String() string {
	what := fmt.Sprintf("the rotation of the credentials %s mints for %s to generation %d", r.Provider, r.Consumer, r.Generation)
	if len(r.Applied) == 0 {
		return fmt.Sprintf("%s is applied at no end yet: waiting on %s", what, strings.Join(r.Pending, ", "))
	}
	return fmt.Sprintf("%s is half applied: applied on %s, not on %s", what, strings.Join(r.Applied, ", "), strings.Join(r.Pending, ", "))
}

// OpenRotations are the rotations some active end has not applied: it was
// not sent a declaration since (the rotation event comes first in its
// batch, the ends' declarations after), or has not reported applying it.
func OpenRotations(v *projections.View) ([]OpenRotation, error) {
	rotations, err := v.Rotations()
	if err != nil {
		return nil, err
	}
	var out []OpenRotation
	for _, r := range rotations {
		o := OpenRotation{Provider: r.Provider, Consumer: r.Consumer, Generation: r.Generation}
		for _, end := range r.Ends {
			n, found, err := v.Node(end)
			switch {
			case err != nil:
				return nil, err
			case !found || n.Retired:
				continue // a retired end holds nothing any more
			}
			if appliedSince(n, r.Seq) {
				o.Applied = append(o.Applied, end)
			} else {
				o.Pending = append(o.Pending, end)
			}
		}
		if len(o.Pending) > 0 {
			out = append(out, o)
		}
	}
	return out, nil
}
