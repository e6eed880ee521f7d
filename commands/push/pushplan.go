package push

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/projections"
	"github.com/meshctl/mesh/wire"
)

// maxPlanned bounds how many nodes' changes a dry run reads from the log:
// a changed node is one read of its last declaration.
const maxPlanned = 1000

// PushPlan answers what Push would do with the same request, and does
// nothing: which nodes would be sent, and what changes on each.
func (h *Service) PushPlan(ctx context.Context, r wire.PushRequest) (wire.PushPlanReply, error) {
	only, within, err := h.PushScope(ctx, "plan a push to", r)
	if err != nil {
		return wire.PushPlanReply{}, err
	}
	if err := h.CatchUp(ctx); err != nil {
		return wire.PushPlanReply{}, err
	}
	sel, err := h.SelectTargets(only, within, r, 0)
	if err != nil {
		return wire.PushPlanReply{}, err
	}
	out := wire.PushPlanReply{Considered: len(sel.targets), WouldSend: []wire.PlannedNode{}, Unsent: []wire.UnsentNode{}, Held: sel.held}
	for i, name := range sel.targets {
		res := sel.w.Compose(name)
		if !res.Composable() {
			out.Unsent = append(out.Unsent, wire.UnsentNode{Node: name, Reason: res.Reason()})
			continue
		}
		p, err := h.Planned(ctx, sel.rows[i].node(), res, &out.Detailed)
		if err != nil {
			return out, err
		}
		p.Note = sel.notes[name]
		if len(res.LeftOut) > 0 {
			p.Note = fmt.Sprintf("%d left out: %s", len(res.LeftOut), res.LeftOut[0].Reason)
		}
		out.WouldSend = append(out.WouldSend, p)
	}
	return out, nil
}

// Planned is what a node would be sent against what it was sent: the
// same content, or its changes, read from the log for the first
// maxPlanned nodes that change (counted in detailed).
func (h *Service) Planned(ctx context.Context, row projections.Node, res compose.Result, detailed *int) (wire.PlannedNode, error) {
	p := wire.PlannedNode{Node: row.Name}
	switch {
	case row.LastSent != nil && row.LastSent.ContentDigest == res.Digest:
		p.Same = true
	case *detailed < maxPlanned:
		last, err := h.LastSent(ctx, row)
		if err != nil {
			return p, err
		}
		p.Changes = compose.Diff(last, res.Declaration)
		*detailed++
	}
	return p, nil
}
