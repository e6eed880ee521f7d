package commands

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/projections"
)

// PushPlanReply is what a push would do now (push --dry-run): the
// mesh-wide plan. Nothing is sent or recorded.
type PushPlanReply struct {
	Considered int           `json:"considered"`
	WouldSend  []PlannedNode `json:"would_send"`
	Unsent     []UnsentNode  `json:"unsent"`
	// Detailed is how many nodes' changes were read (the first
	// maxPlanned that change); the others are counted.
	Detailed int `json:"detailed"`
}

// PlannedNode is one node a push would send to, and how what it would be
// sent differs from what it was sent (nil Changes: not read, see
// PushPlanReply.Detailed).
type PlannedNode struct {
	Node string `json:"node"`
	// Same: it would be sent the content it was sent (again, as push
	// does to a node that is not current).
	Same    bool             `json:"same"`
	Changes []compose.Change `json:"changes,omitempty"`
	Note    string           `json:"note,omitempty"`
}

// maxPlanned bounds how many nodes' changes a dry run reads from the log:
// a changed node is one read of its last declaration.
const maxPlanned = 1000

// PushPlan answers what Push would do with the same request, and does
// nothing: which nodes would be sent, and what changes on each.
func (h *Handlers) PushPlan(ctx context.Context, r PushRequest) (PushPlanReply, error) {
	only, within, err := h.pushScope(ctx, "plan a push to", r)
	if err != nil {
		return PushPlanReply{}, err
	}
	if err := h.catchUp(ctx); err != nil {
		return PushPlanReply{}, err
	}
	sel, err := h.selectTargets(only, within, r, 0)
	if err != nil {
		return PushPlanReply{}, err
	}
	out := PushPlanReply{Considered: len(sel.targets), WouldSend: []PlannedNode{}, Unsent: []UnsentNode{}}
	for _, name := range sel.targets {
		res := sel.w.Compose(name)
		if !res.Composable() {
			out.Unsent = append(out.Unsent, UnsentNode{Node: name, Reason: res.Reason()})
			continue
		}
		p, err := h.planned(ctx, sel.rows[name], res, &out.Detailed)
		if err != nil {
			return out, err
		}
		p.Note = sel.notes[name]
		if len(res.LeftOut) > 0 {
			p.Note = fmt.Sprintf("%d module(s) left out: %s", len(res.LeftOut), res.LeftOut[0].Reason)
		}
		out.WouldSend = append(out.WouldSend, p)
	}
	return out, nil
}

// planned is what a node would be sent against what it was sent: the
// same content, or its changes, read from the log for the first
// maxPlanned nodes that change (counted in detailed).
func (h *Handlers) planned(ctx context.Context, row projections.Node, res compose.Result, detailed *int) (PlannedNode, error) {
	p := PlannedNode{Node: row.Name}
	switch {
	case row.LastSent != nil && row.LastSent.ContentDigest == res.Digest:
		p.Same = true
	case *detailed < maxPlanned:
		last, err := h.lastSent(ctx, row)
		if err != nil {
			return p, err
		}
		p.Changes = compose.Diff(last, res.Declaration)
		*detailed++
	}
	return p, nil
}
