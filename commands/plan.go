package commands

import (
	"context"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
)

// Plan answers what a node would be sent now, composed from one view of the
// read models, and how it differs from what it was last sent.
func (h *Handlers) Plan(_ context.Context, r NameRequest) (Plan, error) {
	if err := validName("plan", r.Name); err != nil {
		return Plan{}, err
	}
	n, found, err := h.Proj.Node(r.Name)
	if err != nil {
		return Plan{}, err
	}
	switch {
	case !found:
		return Plan{}, &aggregates.Error{Op: "plan", ID: r.Name, Err: aggregates.ErrUnknownNode, Detail: "no node of that name is enrolled; see mesh node list"}
	case n.Retired:
		return Plan{}, &aggregates.Error{Op: "plan", ID: r.Name, Err: aggregates.ErrRetired, Detail: "it is retired, and a retired node is sent nothing"}
	}
	w, _, err := h.world()
	if err != nil {
		return Plan{}, err
	}
	res := w.Compose(r.Name)
	p := Plan{
		Node: r.Name, Composable: res.Composable(), Digest: res.Digest,
		Modules: []compose.ModuleBuild{}, Resources: []compose.Resource{}, Receives: []compose.Receipt{},
		LeftOut: nonNil(res.LeftOut), Unresolved: nonNil(res.Unresolved), Problems: nonNil(res.Problems),
		// Nothing is sent yet: delivery is the next capability. Until then
		// every planned resource is an addition.
		Sent:    nil,
		Changes: compose.Diff(nil, res.Declaration),
	}
	if !res.Composable() {
		p.Reason = res.Reason()
		return p, nil
	}
	d := res.Declaration
	p.Modules, p.Resources, p.Receives = d.Modules, d.Resources, d.Receives
	return p, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
