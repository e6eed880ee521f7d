package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// AssignCmd gives a node a module's latest build.
type AssignCmd struct {
	Node     string            `arg:"" predictor:"node" optional:"" help:"The node (with --selector or --from: leave it out and name only the module)."`
	Module   string            `arg:"" predictor:"module" optional:""`
	Set      map[string]string `mapsep:"none" help:"A setting k=v for the module on this node (repeatable; the value is everything after the first =, ; included)."`
	SetFile  map[string]string `name:"set-file" mapsep:"none" help:"A setting k=FILE read from FILE ('-': standard input), one trailing newline dropped: how a secret stays out of shell history and ps (repeatable)."`
	Unset    []string          `help:"Remove a setting KEY, so the manifest's default applies (repeatable). Settings not given, unset or reset stay as they are."`
	Reset    bool              `help:"Start from the manifest's defaults: every setting not given now is removed, secret ones included."`
	Selector string            `help:"Assign to every active node this selects: *, name=NODE, or KEY=VALUE label-or-fact and capability=NAME terms joined by commas (all must hold)."`
	From     string            `help:"Assign to every node a file names, one name a line ('-': standard input)."`
	Build    string            `help:"The build to assign (as mesh module show lists it); the latest when left out."`
	Policy   string            `help:"The upgrade policy: pinned (stays on its build until assigned again), manual (a newer build waits for a rollout) or auto (a newer build starts the module's rollout by itself). Kept when left out; manual for a new assignment."`
	JSON     bool              `help:"Print {changed, seq, node, module, build, previous, settings, policy, previous_policy, changes} as JSON; with --selector or --from, {module, build, changed, unchanged, seqs}: the nodes by name."`
}

func (c *AssignCmd) Help() string {
	return "Examples:\n  mesh assign db-1 postgres --set-file password=- --set port=5433   (the password on standard input)\n" +
		"  mesh assign --selector zone=eu-1,capability=linux app\n  mesh assign --from nodes.txt app\n" +
		"  mesh assign db-1 postgres --policy pinned --build 3f2a9c1e   (stay on this build until assigned again)\n" +
		"  mesh assign db-1 postgres --unset port   (back to the manifest's default; the other settings stay)\n\n" +
		"Only the settings given change; --reset starts from the manifest's defaults.\n" +
		"With --selector or --from, nodes are assigned in batches of a thousand, each all or nothing."
}

func (c *AssignCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.Set == nil {
		c.Set = map[string]string{}
	}
	if err := readSettingFiles(c.Set, c.SetFile); err != nil {
		return err
	}
	if _, err := events.ParsePolicy(c.Policy); err != nil {
		return cmdline.Usagef("%v; give --policy pinned, manual or auto", err)
	}
	for _, k := range c.Unset {
		if _, both := c.Set[k]; both {
			return cmdline.Usagef("setting %s is given with both --set and --unset; give it once", k)
		}
	}
	if c.Selector != "" || c.From != "" {
		return c.assignMany(ctx, g, out)
	}
	if c.Module == "" {
		return cmdline.Usagef("name a node and a module: mesh assign NODE MODULE (or mesh assign --selector SELECTOR MODULE)")
	}
	var r wire.Assigned
	req := wire.AssignRequest{CommandID: wire.NewCommandID(), Node: c.Node, Module: c.Module, Settings: c.Set, Unset: c.Unset, Reset: c.Reset, Build: c.Build, Policy: c.Policy}
	if err := g.Call(ctx, wire.SubjectNodeAssign, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	b := manifest.ShortBuild(r.Build)
	switch {
	case !r.Changed:
		fmt.Fprintf(out.Out, "%s is already assigned to %s as build %s with these settings, policy %s; nothing to do\n", r.Module, r.Node, b, r.Policy)
	case r.Previous == "":
		fmt.Fprintf(out.Out, "assigned %s (build %s, policy %s) to %s at sequence %d\n", r.Module, b, r.Policy, r.Node, r.Seq)
	case r.Previous != r.Build:
		fmt.Fprintf(out.Out, "assigned %s build %s (policy %s) to %s at sequence %d (from %s)\n", r.Module, b, r.Policy, r.Node, r.Seq, manifest.ShortBuild(r.Previous))
	default:
		fmt.Fprintf(out.Out, "changed %s on %s (build %s, policy %s) at sequence %d\n", r.Module, r.Node, b, r.Policy, r.Seq)
	}
	text.AssignChanges(out.Out, r)
	return nil
}

// UnassignCmd takes a module off a node.
type UnassignCmd struct {
	Node   string `arg:"" predictor:"node"`
	Module string `arg:"" predictor:"module"`
	JSON   bool   `help:"Print the answer as JSON (changed: false when there was nothing to do)."`
}

func (c *UnassignCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.Assigned
	req := wire.UnassignRequest{CommandID: wire.NewCommandID(), Node: c.Node, Module: c.Module}
	if err := g.Call(ctx, wire.SubjectNodeUnassign, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s does not have %s assigned; nothing to do\n", r.Node, r.Module)
		return nil
	}
	fmt.Fprintf(out.Out, "unassigned %s from %s at sequence %d\n", r.Module, r.Node, r.Seq)
	return nil
}

// readSettingFiles adds to set each setting --set-file names, read from
// its file ('-': standard input) with one trailing newline dropped (what
// echo and most editors add). A setting given both ways is refused.
func readSettingFiles(set, files map[string]string) error {
	for k, path := range files {
		if _, both := set[k]; both {
			return cmdline.Usagef("setting %s is given with both --set and --set-file; give it once", k)
		}
		var b []byte
		var err error
		if path == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(path)
		}
		if err != nil {
			return cmdline.Usagef("cannot read setting %s from %s: %v", k, path, err)
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		set[k] = s
	}
	return nil
}
