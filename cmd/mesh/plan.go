package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/meshctl/mesh/compose"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// PlanCmd shows what a node would be sent now.
type PlanCmd struct {
	Node     string `arg:"" optional:""`
	JSON     bool   `help:"Print the plan as JSON: node, digest, resources, left_out, unresolved, changes."`
	Selector string `help:"Plan every active node this selects (as push --selector): which would be sent, and what changes on each."`
}

// Run prints the plan. A node that cannot be composed exits 1 after its plan
// is printed: nothing could be sent to it as things stand.
func (c *PlanCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	switch {
	case c.Node != "" && c.Selector != "":
		return usagef("name a node or give --selector, not both")
	case c.Selector != "":
		// The plan of many nodes is the plan of a push to them.
		return (&PushCmd{Selector: c.Selector, JSON: c.JSON, DryRun: true, Verbose: true}).dryRun(ctx, g, out)
	case c.Node == "":
		return usagef("name the node to plan (mesh plan NODE), or give --selector")
	}
	var p wire.Plan
	if err := g.call(ctx, wire.SubjectNodePlan, wire.NameRequest{Name: c.Node}, &p); err != nil {
		return err
	}
	if c.JSON {
		if err := printJSON(out.Out, p); err != nil {
			return err
		}
	} else {
		printPlan(out.Out, p)
	}
	if !p.Composable {
		return fmt.Errorf("%s cannot be composed: %s", p.Node, p.Reason)
	}
	return nil
}

func printPlan(w io.Writer, p wire.Plan) {
	sent := "nothing has been sent to " + p.Node + " yet"
	if p.Sent != nil {
		sent = fmt.Sprintf("last sent sequence %d, digest %s", p.Sent.Sequence, short(p.Sent.Digest))
	}
	if p.Composable {
		fmt.Fprintf(w, "plan for %s: digest %s (%s)\n", p.Node, p.Digest, sent)
	} else {
		fmt.Fprintf(w, "plan for %s: cannot be composed (%s)\n", p.Node, sent)
	}
	if p.Composable && len(p.Modules) == 0 {
		fmt.Fprintln(w, "  an empty declaration: nothing assigned that it can host; it would drop what the mesh gave it")
	}
	for _, m := range p.Modules {
		fmt.Fprintf(w, "module %s (build %s)\n", m.Module, manifest.ShortBuild(m.Build))
		for _, r := range p.Resources {
			if r.Module != m.Module {
				continue
			}
			fmt.Fprintf(w, "  %-9s %s %s\n", r.Kind, r.Path, r.Mode)
			if r.Content != nil {
				for _, line := range strings.Split(strings.TrimSuffix(*r.Content, "\n"), "\n") {
					fmt.Fprintf(w, "            | %s\n", line)
				}
			}
		}
	}
	for _, rc := range p.Chosen {
		fmt.Fprintf(w, "%s receives %s from %s on %s (%s)\n", rc.Consumer, rc.Requirement, rc.Module, rc.Node, rc.Why)
	}
	for _, l := range p.LeftOut {
		fmt.Fprintf(w, "left out: %s\n", l.Reason)
	}
	for _, u := range p.Unresolved {
		fmt.Fprintf(w, "unresolved: %s\n", u.Reason)
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "problem: %s\n", pr)
	}
	if p.Composable {
		printChanges(w, p.Sent != nil, p.Changes)
	}
}

func printChanges(w io.Writer, sent bool, changes []compose.Change) {
	switch {
	case !sent && len(changes) == 0:
		fmt.Fprintln(w, "changes: none; it has never been sent a declaration, and this one is empty")
		return
	case !sent:
		fmt.Fprintf(w, "changes: %d resource(s), all new to it (it has never been sent a declaration)\n", len(changes))
	case len(changes) == 0:
		fmt.Fprintln(w, "changes: none; it would be sent what it was last sent")
		return
	default:
		fmt.Fprintf(w, "changes against what it was last sent: %d\n", len(changes))
	}
	printChangeList(w, changes)
}

// printChangeList prints one line per changed resource, and the line diff
// of changed content under it.
func printChangeList(w io.Writer, changes []compose.Change) {
	for _, c := range changes {
		what := ""
		if len(c.What) > 0 {
			what = " (" + strings.Join(c.What, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-7s %s%s\n", c.Change, c.Path, what)
		if c.Change == "changed" {
			for _, l := range c.Lines {
				fmt.Fprintf(w, "          %s\n", l)
			}
		}
	}
}

func short(digest string) string { return manifest.ShortBuild(digest) }
