package push

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/commands/core"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/declaration"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// Plan answers what a node would be sent now, composed from one view of the
// read models, and how it differs from what it was last sent.
func (h *Service) Plan(ctx context.Context, r wire.NameRequest) (wire.Plan, error) {
	if err := core.ValidName("plan", r.Name); err != nil {
		return wire.Plan{}, err
	}
	n, found, err := h.Proj.Node(r.Name)
	if err != nil {
		return wire.Plan{}, err
	}
	switch {
	case !found:
		return wire.Plan{}, aggregates.Refuse("plan", r.Name, aggregates.ErrUnknownNode, "no node of that name is enrolled; see mesh node list")
	case n.Retired:
		return wire.Plan{}, aggregates.Refuse("plan", r.Name, aggregates.ErrRetired, "it is retired, and a retired node is sent nothing")
	}
	w, err := h.World()
	if err != nil {
		return wire.Plan{}, err
	}
	res := w.Compose(r.Name)
	last, err := h.LastSent(ctx, n)
	if err != nil {
		return wire.Plan{}, err
	}
	p := wire.Plan{
		Node: r.Name, Composable: res.Composable(), Digest: res.Digest,
		Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{}, Chosen: []compose.Chosen{},
		LeftOut: nonNil(res.LeftOut), Unresolved: nonNil(res.Unresolved), Problems: nonNil(res.Problems),
		Sent: core.ViewOf(n).LastSent, Changes: []compose.Change{},
	}
	if res.Composable() {
		p.Changes = compose.Diff(last, res.Declaration)
	}
	if !res.Composable() {
		p.Reason = res.Reason()
		return p, nil
	}
	d := res.Declaration
	p.Modules, p.Resources, p.Receives, p.Chosen = d.Modules, d.Resources, d.Receives, nonNil(res.Chosen)
	return p, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// LastSent reads the content of the last declaration sent to n from the log
// (one direct get by the sequence its row keeps), nil when none was sent.
func (h *Service) LastSent(ctx context.Context, n projections.Node) (*compose.Declaration, error) {
	if n.LastSent == nil {
		return nil, nil
	}
	m, err := h.Store.Get(ctx, n.LastSent.StreamSeq)
	if err != nil {
		return nil, err
	}
	_, ev, err := events.Decode(m.Data)
	if err != nil {
		return nil, err
	}
	sent, ok := ev.(events.DeclarationSent)
	if !ok {
		return nil, fmt.Errorf("event %d is a %s, not the declaration %s's row points at", m.Seq, ev.EventType(), n.Name)
	}
	var d declaration.Declaration
	if err := json.Unmarshal(sent.Declaration, &d); err != nil {
		return nil, fmt.Errorf("the declaration sent to %s at event %d cannot be read: %w", n.Name, m.Seq, err)
	}
	c := d.Content()
	return &c, nil
}
