package main

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// PlanCmd shows what a node would be sent now.
type PlanCmd struct {
	Node     string `arg:"" predictor:"node" optional:""`
	JSON     bool   `help:"Print the plan as JSON: node, digest, resources, left_out, unresolved, changes."`
	Selector string `help:"Plan every active node this selects (as push --selector): which would be sent, and what changes on each."`
}

// Run prints the plan. A node that cannot be composed exits 1 after its plan
// is printed: nothing could be sent to it as things stand.
func (c *PlanCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	switch {
	case c.Node != "" && c.Selector != "":
		return cmdline.Usagef("name a node or give --selector, not both")
	case c.Selector != "":
		// The plan of many nodes is the plan of a push to them.
		return (&PushCmd{Selector: c.Selector, JSON: c.JSON, DryRun: true, Verbose: true}).dryRun(ctx, g, out)
	case c.Node == "":
		return cmdline.Usagef("name the node to plan (mesh plan NODE), or give --selector")
	}
	var p wire.Plan
	if err := g.Call(ctx, wire.SubjectNodePlan, wire.NameRequest{Name: c.Node}, &p); err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, p); err != nil {
			return err
		}
	} else {
		text.Plan(out.Out, p)
	}
	if !p.Composable {
		return fmt.Errorf("%s cannot be composed: %s", p.Node, p.Reason)
	}
	return nil
}
