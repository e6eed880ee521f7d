package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// RolloutCmd groups what rolls a new build out in waves (issue 17).
type RolloutCmd struct {
	Plan   RolloutPlanCmd   `cmd:"" help:"Every wave of a rollout, its nodes, and what would change on each, before anything is sent."`
	Start  RolloutStartCmd  `cmd:"" help:"Start a rollout: each wave is sent the build once the one before applied it."`
	List   RolloutListCmd   `cmd:"" help:"Every rollout and where it stands."`
	Show   RolloutShowCmd   `cmd:"" help:"One rollout, wave by wave."`
	Pause  RolloutPauseCmd  `cmd:"" help:"Hold a rollout where it is."`
	Resume RolloutResumeCmd `cmd:"" help:"Move a paused rollout on."`
	Abort  RolloutAbortCmd  `cmd:"" help:"End a rollout where it is (what was sent stays)."`
	Wait   RolloutWaitCmd   `cmd:"" help:"Wait for a rollout to end: exit 0 once it finished, 1 when it halted, was aborted, or still runs."`
}

type RolloutPlanCmd struct {
	Module string   `arg:"" predictor:"module"`
	Wave   []string `sep:"none" required:"" help:"A wave NAME=SELECTOR, in order (repeatable): the selector of push --selector, N% for that share of the module's nodes, or * for every node of the module no earlier wave chose."`
	Build  string   `help:"The build to roll out (default: the module's latest)."`
	JSON   bool     `help:"Print the plan as JSON."`
	// Verbose: every node's changes, not only the first wave's.
	Verbose bool `short:"v" help:"Print each node's changes in every wave (the first wave's are always printed)."`
}

func (c *RolloutPlanCmd) Help() string {
	return "Examples:\n  mesh rollout plan app --wave canary=name=web-1 --wave half=zone=eu-1 --wave rest='*'"
}

func (c *RolloutPlanCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.RolloutPlanRequest{Module: c.Module, Build: c.Build}
	waves, err := parseWaves(c.Wave)
	if err != nil {
		return err
	}
	req.Waves = waves
	var p wire.RolloutPlan
	if err := g.Call(ctx, wire.SubjectRolloutPlan, req, &p); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, p)
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
	for _, h := range p.Held {
		fmt.Fprintf(w, "held by its policy (%s), in no wave: %s\n", h.Policy, h.Node)
	}
	return nil
}

// RolloutStartCmd starts a rollout.
type RolloutStartCmd struct {
	Module      string        `arg:"" predictor:"module"`
	Wave        []string      `sep:"none" required:"" help:"A wave NAME=SELECTOR, in order (repeatable), as rollout plan takes them."`
	Build       string        `help:"The build to roll out (default: the module's latest)."`
	AutoRevert  bool          `name:"auto-revert" help:"When a node of a wave fails or refuses the build, send that wave back to the builds it had."`
	Bake        time.Duration `help:"Watch a wave this long after it applied the build before the next starts."`
	Deadline    time.Duration `help:"Halt the rollout when a wave has not applied the build this long after it started."`
	MaxParallel string        `name:"max-parallel" help:"At most this many nodes of a wave sent the build and not yet applied it: a count, or a percentage of the wave such as 25%."`
	JSON        bool          `help:"Print the rollout started as JSON (its id, waves, state)."`
}

func (c *RolloutStartCmd) Help() string {
	return "Examples:\n  mesh rollout start app --wave canary=name=web-1 --wave half=zone=eu-1 --wave rest='*' --auto-revert"
}

func (c *RolloutStartCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.RolloutRequest{CommandID: wire.NewCommandID(), Module: c.Module, Build: c.Build, AutoRevert: c.AutoRevert, Bake: c.Bake, Deadline: c.Deadline, MaxParallel: c.MaxParallel}
	waves, err := parseWaves(c.Wave)
	if err != nil {
		return err
	}
	req.Waves = waves
	var r wire.Rollout
	if err := g.Call(ctx, wire.SubjectRolloutStart, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	fmt.Fprintf(out.Out, "started rollout %s of %s build %s in %d wave(s); the controller moves it as each wave applies (mesh rollout show %s)\n",
		r.ID, r.Module, manifest.ShortBuild(r.Build), len(r.Waves), r.ID)
	return nil
}

func parseWaves(specs []string) ([]wire.WaveSpec, error) {
	var out []wire.WaveSpec
	for _, w := range specs {
		name, sel, ok := strings.Cut(w, "=")
		if !ok || name == "" || sel == "" {
			return nil, cmdline.Usagef("--wave %q is not NAME=SELECTOR (for example canary=name=web-1, or rest=*)", w)
		}
		out = append(out, wire.WaveSpec{Name: name, Selector: sel})
	}
	return out, nil
}

// RolloutListCmd lists the rollouts.
type RolloutListCmd struct {
	JSON bool `help:"Print {rollouts} as JSON."`
}

func (c *RolloutListCmd) Help() string { return "Examples:\n  mesh rollout list" }

func (c *RolloutListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var l wire.RolloutList
	if err := g.Call(ctx, wire.SubjectRolloutList, wire.Empty{}, &l); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, l)
	}
	text.Showable(&l)
	if len(l.Rollouts) == 0 {
		fmt.Fprintln(out.Out, "no rollouts yet; mesh rollout plan MODULE --wave ... shows one before it starts")
	}
	for _, r := range l.Rollouts {
		fmt.Fprintln(out.Out, text.RolloutLine(r))
	}
	return nil
}

// RolloutShowCmd shows one rollout, wave by wave.
type RolloutShowCmd struct {
	ID   string `arg:""`
	JSON bool   `help:"Print the rollout as JSON."`
}

func (c *RolloutShowCmd) Help() string { return "Examples:\n  mesh rollout show r-0a1b2c3d4e" }

func (c *RolloutShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.RolloutView
	if err := g.Call(ctx, wire.SubjectRolloutShow, wire.NameRequest{Name: c.ID}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	text.Showable(&r)
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	fmt.Fprintln(w, text.RolloutLine(r.Rollout))
	if r.Gate != "" {
		fmt.Fprintf(w, "  the next wave waits: %s\n", r.Gate)
	}
	states := map[string]wire.NodeStatus{}
	for _, n := range r.Nodes {
		states[n.Name] = n
	}
	changes := map[string]string{}
	if r.Plan != nil {
		for _, wave := range r.Plan.Waves {
			for _, n := range wave.Nodes {
				if !n.Same {
					changes[n.Node] = fmt.Sprintf("; to change: %d resource(s)", len(n.Changes))
				}
			}
			for _, u := range wave.Unsent {
				changes[u.Node] = "; cannot be composed with the build: " + u.Reason
			}
		}
	}
	for i, wave := range r.Waves {
		mark := "waits"
		switch {
		case i < r.Wave || r.State == wire.RolloutFinished:
			mark = "applied"
		case i == r.Wave:
			mark = "under way"
		}
		fmt.Fprintf(w, "  wave %d %s (%s), %s:\n", i+1, wave.Name, wave.Selector, mark)
		for _, n := range wave.Nodes {
			st := states[n]
			line := string(cmp.Or(st.State, "retired"))
			if st.Detail != "" {
				line += ": " + st.Detail
			}
			fmt.Fprintf(w, "    %s  %s%s\n", n, line, changes[n])
		}
	}
	return nil
}

// RolloutControlCmd pauses, resumes or aborts a rollout.
type RolloutControlCmd struct {
	ID   string `arg:""`
	JSON bool   `help:"Print the rollout as it stands after the step, as JSON."`
}

func (c *RolloutControlCmd) control(ctx context.Context, g *cmdline.Globals, out *cmdline.Output, step string) error {
	var r wire.Rollout
	req := wire.RolloutControl{CommandID: wire.NewCommandID(), ID: c.ID, Step: step}
	if err := g.Call(ctx, wire.SubjectRolloutControl, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	fmt.Fprintln(out.Out, text.RolloutLine(r))
	return nil
}

type RolloutPauseCmd struct{ RolloutControlCmd }
type RolloutResumeCmd struct{ RolloutControlCmd }
type RolloutAbortCmd struct{ RolloutControlCmd }

func (c *RolloutPauseCmd) Help() string  { return "Examples:\n  mesh rollout pause r-0a1b2c3d4e" }
func (c *RolloutResumeCmd) Help() string { return "Examples:\n  mesh rollout resume r-0a1b2c3d4e" }
func (c *RolloutAbortCmd) Help() string  { return "Examples:\n  mesh rollout abort r-0a1b2c3d4e" }

func (c *RolloutPauseCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	return c.control(ctx, g, out, events.StepPaused)
}
func (c *RolloutResumeCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	return c.control(ctx, g, out, events.StepResumed)
}
func (c *RolloutAbortCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	return c.control(ctx, g, out, events.StepAborted)
}
