package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/manifest"
)

// RolloutCmd groups what rolls a new build out in waves (issue 17). The
// plan of the whole rollout is built; starting one is not yet.
type RolloutCmd struct {
	Plan RolloutPlanCmd `cmd:"" help:"Every wave of a rollout, its nodes, and what would change on each, before anything is sent."`
}

type RolloutPlanCmd struct {
	Module string   `arg:""`
	Wave   []string `sep:"none" required:"" help:"A wave NAME=SELECTOR, in order (repeatable): the selector of push --selector, or * for every node of the module no earlier wave chose."`
	Build  string   `help:"The build to roll out (default: the module's latest)."`
	JSON   bool     `help:"Print the plan as JSON."`
	// Verbose: every node's changes, not only the first wave's.
	Verbose bool `short:"v" help:"Print each node's changes in every wave (the first wave's are always printed)."`
}

func (c *RolloutPlanCmd) Help() string {
	return "Examples:\n  mesh rollout plan app --wave canary=name=web-1 --wave half=zone=eu-1 --wave rest='*'"
}

func (c *RolloutPlanCmd) Run(ctx context.Context, g *Globals, out *Output) error {
	req := commands.RolloutPlanRequest{Module: c.Module, Build: c.Build}
	for _, w := range c.Wave {
		name, sel, ok := strings.Cut(w, "=")
		if !ok || name == "" || sel == "" {
			return usagef("--wave %q is not NAME=SELECTOR (for example canary=name=web-1, or rest=*)", w)
		}
		req.Waves = append(req.Waves, commands.WaveSpec{Name: name, Selector: sel})
	}
	var p commands.RolloutPlan
	if err := g.call(ctx, commands.SubjectRolloutPlan, req, &p); err != nil {
		return err
	}
	if c.JSON {
		return printJSON(out.Out, p)
	}
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	fmt.Fprintf(w, "rollout of %s build %s, %d wave(s); nothing is sent (a plan)\n", p.Module, manifest.ShortBuild(p.Build), len(p.Waves))
	for i, wave := range p.Waves {
		fmt.Fprintf(w, "wave %d %s (%s): %d node(s)\n", i+1, wave.Name, wave.Selector, len(wave.Nodes)+len(wave.Unsent))
		for _, n := range wave.Nodes {
			what := fmt.Sprintf("%d change(s)", len(n.Changes))
			if n.Same {
				what = "no change"
			}
			fmt.Fprintf(w, "  %s: %s\n", n.Node, what)
			if i == 0 || c.Verbose {
				for _, ch := range n.Changes {
					fmt.Fprintf(w, "    %-7s %s (%s)%s\n", ch.Change, ch.Path, ch.Module, whatOf(ch.What))
				}
			}
		}
		for _, u := range wave.Unsent {
			fmt.Fprintf(w, "  %s: cannot be composed: %s\n", u.Node, u.Reason)
		}
	}
	if len(p.Left) > 0 {
		fmt.Fprintf(w, "left on the build they have (no wave chose them): %s\n", strings.Join(p.Left, ", "))
	}
	return nil
}
