package commands

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/aggregates"
	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/projections"
)

// Assign gives a node the latest build of a module. The catalogue is read
// from the projections; the node aggregate decides. Assigning again after the
// module was re-registered is how an upgrade reaches a node.
func (h *Handlers) Assign(ctx context.Context, r AssignRequest) (Assigned, error) {
	if err := validName("assign to", r.Node); err != nil {
		return Assigned{}, err
	}
	cmd := aggregates.AssignModule{Node: r.Node, Module: r.Module, Settings: r.Settings}
	err := h.Proj.Read(func(v *projections.View) error {
		row, found, err := v.Module(r.Module)
		if err != nil || !found {
			return err
		}
		m, found, err := h.manifests.get(v, compose.BuildRef{Module: r.Module, Build: row.Latest})
		if err != nil || !found {
			return fmt.Errorf("the latest build of %s cannot be read: %v", r.Module, err)
		}
		cmd.Build, cmd.Spec = row.Latest, m.Settings
		return nil
	})
	if err != nil {
		return Assigned{}, err
	}
	var previous string
	seq, err := decide(ctx, h, events.NodeAggregate(r.Node), r.CommandID, newNode(r.Node),
		func(n *aggregates.Node) ([]events.Event, error) {
			previous = n.Assignments[r.Module].Build
			return n.Decide(cmd, h.Now())
		})
	if err != nil {
		return Assigned{}, err
	}
	if seq != 0 {
		h.Log.Info("module assigned", "node", r.Node, "module", r.Module, "build", manifest.ShortBuild(cmd.Build), "seq", seq)
	}
	return Assigned{Changed: seq != 0, Seq: seq, Node: r.Node, Module: r.Module, Build: cmd.Build, Previous: previous, Settings: r.Settings}, nil
}

// Unassign takes a module off a node; one it does not have is nothing to do.
func (h *Handlers) Unassign(ctx context.Context, r UnassignRequest) (Assigned, error) {
	if err := validName("unassign from", r.Node); err != nil {
		return Assigned{}, err
	}
	var previous string
	seq, err := decide(ctx, h, events.NodeAggregate(r.Node), r.CommandID, newNode(r.Node),
		func(n *aggregates.Node) ([]events.Event, error) {
			previous = n.Assignments[r.Module].Build
			return n.Decide(aggregates.UnassignModule{Node: r.Node, Module: r.Module}, h.Now())
		})
	if err != nil {
		return Assigned{}, err
	}
	if seq != 0 {
		h.Log.Info("module unassigned", "node", r.Node, "module", r.Module, "seq", seq)
	}
	return Assigned{Changed: seq != 0, Seq: seq, Node: r.Node, Module: r.Module, Previous: previous}, nil
}

func newNode(name string) func() *aggregates.Node {
	return func() *aggregates.Node { return aggregates.NewNode(name) }
}
