package credentials

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	agg := events.ModuleAggregate(r.Provider)
	var plan rotation
	var items []store.One
	var seq uint64
	// No reread: each attempt catches up itself, after reading the
	// provider's version. An end or the provider that moved (a conflict)
	// is composed again from what it is now.
	err := core.DecideAndAppend(ctx, "rotate", fmt.Sprintf("the credentials %s mints for %s", r.Provider, r.Consumer), nil, func(int) error {
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
		if err := h.Proj.Read(func(v *projections.View) (err error) {
			plan, err = h.planRotation(v, r)
			return err
		}); err != nil {
			return err
		}
		items = []store.One{{Aggregate: agg, Expected: version, Event: plan.event}}
		items = append(items, plan.sends...)
		if len(items) > wire.MaxBatch {
			return aggregates.Refuse("rotate", plan.name(), aggregates.ErrInvalid, fmt.Sprintf("its ends are %d nodes, and one atomic write holds at most %d declarations besides the rotation", len(plan.sends), wire.MaxBatch-1))
		}
		seq, err = h.Store.AppendAtomic(ctx, r.CommandID, items)
		return err
	})
	if err != nil {
		return wire.RotateReply{}, err
	}
	// The batch's messages are consecutive and end at seq: the
	// rotation first, then each end's declaration.
	first := seq - uint64(len(items)) + 1
	reply := wire.RotateReply{Provider: r.Provider, Consumer: r.Consumer, Generation: plan.event.Generation, Seq: first, Sent: plan.sent}
	for i := range reply.Sent {
		reply.Sent[i].StreamSeq = first + uint64(i) + 1
	}
	h.Log.Info("credentials rotated", "provider", r.Provider, "consumer", r.Consumer, "generation", plan.event.Generation, "ends", len(plan.sent), "seq", seq)
	return reply, h.Landed(ctx, seq, plan.event)
}

// rotation is what one rotation writes.
type rotation struct {
	event events.CredentialRotated
	sends []store.One
	sent  []wire.PushedNode
}

func (p rotation) name() string {
	return fmt.Sprintf("the credentials %s mints for %s", p.event.Provider, p.event.Consumer)
}

// planRotation composes every end at the next generation, or refuses the
// whole rotation naming each end that cannot be composed and why.
func (h *Service) planRotation(v *projections.View, r wire.RotateRequest) (rotation, error) {
	plan := rotation{event: events.CredentialRotated{Provider: r.Provider, Consumer: r.Consumer}}
	refuse := func(err error, format string, args ...any) error {
		return aggregates.Refuse("rotate", plan.name(), err, fmt.Sprintf(format, args...))
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
	if plan.event, err = aggregates.DecideRotation(r.Provider, r.Consumer, gen-1, linked, decided); err != nil {
		return plan, err
	}
	for _, node := range plan.event.Ends {
		row, _, err := v.Node(node)
		if err != nil {
			return plan, err
		}
		ev, _ := h.sealer.Seal(*results[node].Declaration, row, "rotate", h.Now())
		plan.sends = append(plan.sends, store.One{Aggregate: events.NodeAggregate(node), Expected: row.Version, Event: ev})
		plan.sent = append(plan.sent, wire.PushedNode{Node: node, Sequence: ev.Sequence, Digest: ev.Digest, Resources: ev.Resources})
	}
	return plan, nil
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
			sent, rep := n.LastSent, n.LastReport
			if sent != nil && sent.StreamSeq > r.Seq && rep != nil && rep.Outcome == events.OutcomeApplied && rep.Digest == sent.Digest {
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
