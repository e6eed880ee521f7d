package credentials

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Rotate moves the credentials a provider module mints for a consumer
// module to the next generation, as one act (rule 7): every node holding
// either end is composed at the new generation, and if any cannot be,
// nothing is sent and nothing recorded; otherwise the CredentialRotated
// event and every end's declaration are one atomic write, so a controller
// killed at any point leaves both ends sent or neither.
func (h *Service) Rotate(ctx context.Context, r wire.RotateRequest) (wire.RotateReply, error) {
	if err := h.Writable(); err != nil {
		return wire.RotateReply{}, err
	}
	for _, m := range []string{r.Provider, r.Consumer} {
		if err := core.ValidName("rotate", m); err != nil {
			return wire.RotateReply{}, err
		}
	}
	if h.Keys == nil {
		return wire.RotateReply{}, fmt.Errorf("cannot rotate: %w", secrets.ErrNone)
	}
	overlap := r.Overlap
	switch {
	case r.NoOverlap:
		overlap = 0
	case overlap == 0:
		overlap = aggregates.DefaultOverlap
	}
	var plan rotation
	seq, err := h.together(ctx, "rotate", fmt.Sprintf("the credentials %s mints for %s", r.Provider, r.Consumer), r.CommandID, r.Provider, func(v *projections.View) (*rotation, error) {
		var err error
		plan, err = h.planRotation(v, r, overlap)
		return &plan, err
	})
	if err != nil {
		return wire.RotateReply{}, err
	}
	ev := plan.event.(events.CredentialRotated)
	// The batch's messages are consecutive and end at seq: the
	// rotation first, then each end's declaration.
	first := seq - uint64(len(plan.sends))
	reply := wire.RotateReply{Provider: r.Provider, Consumer: r.Consumer, Generation: ev.Generation, Seq: first, Sent: plan.sent, OverlapUntil: ev.OverlapUntil}
	for i := range reply.Sent {
		reply.Sent[i].StreamSeq = first + uint64(i) + 1
	}
	h.Log.Info("credentials rotated", "provider", r.Provider, "consumer", r.Consumer, "generation", ev.Generation, "ends", len(plan.sent), "overlap_until", ev.OverlapUntil, "seq", seq)
	return reply, h.Landed(ctx, seq, ev)
}

// together appends, through the one decide-and-append loop, what plan
// decides from read models that hold every write to the provider module's
// aggregate up to the version it expects: its event on that aggregate and
// each end's declaration, in one atomic batch (rule 7), so a controller
// killed at any point leaves every end told or none. plan answering nil
// (nothing to do) appends nothing and answers 0. Rotate and the completion
// of an overlap both write through it: both events are the provider's, so
// a rotation and a completion deciding at once cannot both land.
func (h *Service) together(ctx context.Context, op, name, commandID, provider string, plan func(*projections.View) (*rotation, error)) (uint64, error) {
	agg := events.ModuleAggregate(provider)
	var seq uint64
	// No reread: each attempt catches up itself, after reading the
	// provider's version. An end or the provider that moved (a conflict)
	// is composed again from what it is now.
	err := core.DecideAndAppend(ctx, op, name, nil, func(int) error {
		// The provider's version before the catch-up: the view then holds
		// every rotation up to it, and one landing after fails the append
		// rather than being given the same generation again.
		version, err := h.Store.Version(ctx, agg)
		if err != nil {
			return err
		}
		if err := h.CatchUp(ctx); err != nil {
			return err
		}
		var p *rotation
		if err := h.Proj.Read(func(v *projections.View) (err error) {
			p, err = plan(v)
			return err
		}); err != nil || p == nil {
			seq = 0
			return err
		}
		items := append([]store.One{{Aggregate: agg, Expected: version, Event: p.event}}, p.sends...)
		if len(items) > wire.MaxBatch {
			return aggregates.Refuse(op, name, aggregates.ErrInvalid, fmt.Sprintf("its ends are %d nodes, and one atomic write holds at most %d declarations besides the %s", len(p.sends), wire.MaxBatch-1, p.event.EventType()))
		}
		seq, err = h.Store.AppendAtomic(ctx, commandID, items)
		return err
	})
	return seq, err
}

// rotation is what one rotation, or the end of its overlap, writes: the
// provider's event, then each end's declaration.
type rotation struct {
	event events.Event
	sends []store.One
	sent  []wire.PushedNode
}

// planRotation composes every end at the next generation, or refuses the
// whole rotation naming each end that cannot be composed and why.
func (h *Service) planRotation(v *projections.View, r wire.RotateRequest, overlap time.Duration) (rotation, error) {
	var plan rotation
	refuse := func(err error, format string, args ...any) error {
		return aggregates.Refuse("rotate", fmt.Sprintf("the credentials %s mints for %s", r.Provider, r.Consumer), err, fmt.Sprintf(format, args...))
	}
	for _, m := range []string{r.Provider, r.Consumer} {
		if _, found, err := v.Module(m); err != nil || !found {
			if err == nil {
				err = refuse(aggregates.ErrUnknownModule, "no module %s is registered; mesh module list names those that are", m)
			}
			return plan, err
		}
	}
	in, err := h.world.Input(v)
	if err != nil {
		return plan, err
	}
	pair := compose.Pair{Provider: r.Provider, Consumer: r.Consumer}
	gen := in.Generations[pair] + 1
	in.Generations = maps.Clone(in.Generations)
	if in.Generations == nil {
		in.Generations = map[compose.Pair]uint64{}
	}
	in.Generations[pair] = gen
	// The new generation opens its own overlap (or none): whatever an
	// earlier rotation of the pair still accepted is dropped with it.
	in.Overlapping = maps.Clone(in.Overlapping)
	if in.Overlapping == nil {
		in.Overlapping = map[compose.Pair]bool{}
	}
	in.Overlapping[pair] = overlap > 0
	ends := map[string]bool{}
	linked := false
	for _, a := range in.Assignments {
		if a.Module == r.Provider || a.Module == r.Consumer {
			ends[a.Node] = true
		}
		if a.Module == r.Provider {
			linked = linked || provisionsFor(in, a, r.Consumer)
		}
	}
	// Every end composed at the next generation; the decision is the
	// aggregate's (all or nothing), then each end it keeps is sealed.
	w := compose.NewWorld(in)
	names := slices.Sorted(maps.Keys(ends))
	results := make(map[string]compose.Result, len(names))
	decided := make([]aggregates.RotationEnd, len(names))
	for i, node := range names {
		results[node] = w.Compose(node)
		decided[i] = aggregates.RotationEnd{Node: node, Problem: endProblem(results[node], r)}
	}
	ev, err := aggregates.DecideRotation(r.Provider, r.Consumer, gen-1, linked, decided, overlap, h.Now())
	if err != nil {
		return plan, err
	}
	plan.event = ev
	return plan, h.seal(v, &plan, results, ev.Ends, "rotate")
}

// seal numbers and signs each of nodes' composed declarations into plan,
// each expecting the node's version it was composed at.
func (h *Service) seal(v *projections.View, plan *rotation, results map[string]compose.Result, nodes []string, by string) error {
	for _, node := range nodes {
		row, _, err := v.Node(node)
		if err != nil {
			return err
		}
		ev, _ := h.sealer.Seal(*results[node].Declaration, row, by, h.Now())
		plan.sends = append(plan.sends, store.One{Aggregate: events.NodeAggregate(node), Expected: row.Version, Event: ev})
		plan.sent = append(plan.sent, wire.PushedNode{Node: node, Sequence: ev.Sequence, Digest: ev.Digest, Resources: ev.Resources})
	}
	return nil
}

// provisionsFor says whether provider assignment a's build provisions a
// credential for something consumer consumes in any build assigned.
func provisionsFor(in compose.Input, a compose.Assignment, consumer string) bool {
	pm, ok := in.Manifests[compose.BuildRef{Module: a.Module, Build: a.Build}]
	if !ok {
		return false
	}
	for _, c := range in.Assignments {
		cm, ok := in.Manifests[compose.BuildRef{Module: c.Module, Build: c.Build}]
		if c.Module != consumer || !ok {
			continue
		}
		for _, req := range pm.Provisions {
			if slices.Contains(cm.Consumes, req) {
				return true
			}
		}
	}
	return false
}

// endProblem says why an end's declaration would not carry the rotated
// credential: it cannot be composed, or its end of the pair is left out or
// does not resolve, so the node would keep the old credential while the
// other end took the new one.
func endProblem(res compose.Result, r wire.RotateRequest) string {
	if !res.Composable() {
		return res.Reason()
	}
	for _, l := range res.LeftOut {
		if l.Module == r.Provider || l.Module == r.Consumer {
			return l.Reason
		}
	}
	for _, u := range res.Unresolved {
		if u.Module == r.Consumer {
			return u.Reason
		}
	}
	return ""
}
