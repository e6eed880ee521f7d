package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/manifest"
	"github.com/meshctl/mesh/wire"
)

// ModuleCmd is the catalogue command group.
type ModuleCmd struct {
	Register ModuleRegisterCmd `cmd:"" help:"Register a module manifest (JSON); its build is the digest of its canonical form."`
	List     ModuleListCmd     `cmd:"" help:"List the catalogue."`
	Show     ModuleShowCmd     `cmd:"" help:"Show one module: builds, manifest, where it is assigned."`
}

type ModuleRegisterCmd struct {
	File string `arg:"" type:"existingfile" help:"The manifest, e.g. examples/postgres.json."`
	JSON bool   `help:"Print {changed, seq, module, build, previous} as JSON."`
}

func (c *ModuleRegisterCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	data, err := os.ReadFile(c.File)
	if err != nil {
		return fmt.Errorf("cannot read %s: %v", c.File, err)
	}
	var r wire.Registered
	req := wire.RegisterRequest{CommandID: wire.NewCommandID(), File: c.File, Manifest: string(data)}
	if err := g.Call(ctx, wire.SubjectModuleRegister, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	b := manifest.ShortBuild(r.Build)
	switch {
	case !r.Changed:
		fmt.Fprintf(out.Out, "%s is already registered as build %s; nothing to do\n", r.Module, b)
	case r.Previous == "":
		fmt.Fprintf(out.Out, "registered %s as build %s at sequence %d\n", r.Module, b, r.Seq)
	default:
		fmt.Fprintf(out.Out, "registered %s as build %s at sequence %d (was %s; nodes whose policy is auto get it by a rollout that starts by itself, manual ones by mesh rollout start, any one by mesh assign)\n",
			r.Module, b, r.Seq, manifest.ShortBuild(r.Previous))
	}
	return nil
}

type ModuleListCmd struct {
	JSON bool `help:"Print {modules} as JSON."`
}

func (c *ModuleListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.ModuleList
	if err := g.Call(ctx, wire.SubjectModuleList, wire.Empty{}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if len(r.Modules) == 0 {
		fmt.Fprintln(out.Out, "no modules registered yet; register one with mesh module register FILE")
		return nil
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tBUILD\tBUILDS\tREQUIRES\tPROVIDES\tCONSUMES\tASSIGNED")
	for _, m := range r.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\n", m.Name, manifest.ShortBuild(m.Latest), len(m.Builds),
			text.OrDash(strings.Join(m.Requires, ",")), text.OrDash(strings.Join(m.Provides, ",")), text.OrDash(strings.Join(m.Consumes, ",")), len(m.AssignedTo))
	}
	tw.Flush()
	unreadable := 0
	for _, m := range r.Modules {
		if m.Unreadable != "" {
			unreadable++
			fmt.Fprintf(out.Out, "%s: %s\n", m.Name, m.Unreadable)
		}
	}
	fmt.Fprintf(out.Out, "%d module(s)\n", len(r.Modules))
	if unreadable > 0 {
		return fmt.Errorf("%d module(s) have a latest build this controller cannot read, named above", unreadable)
	}
	return nil
}

type ModuleShowCmd struct {
	Name string `arg:"" predictor:"module"`
	JSON bool   `help:"Print the module as JSON."`
}

func (c *ModuleShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var m wire.ModuleView
	if err := g.Call(ctx, wire.SubjectModuleShow, wire.NameRequest{Name: c.Name}, &m); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, m)
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "module\t%s\n", m.Name)
	fmt.Fprintf(tw, "latest build\t%s\n", m.Latest)
	fmt.Fprintf(tw, "requires\t%s\n", text.OrNone(strings.Join(m.Requires, ", ")))
	fmt.Fprintf(tw, "provides\t%s\n", text.OrNone(strings.Join(m.Provides, ", ")))
	fmt.Fprintf(tw, "consumes\t%s\n", text.OrNone(strings.Join(m.Consumes, ", ")))
	var settings []string
	for _, k := range slices.Sorted(maps.Keys(m.Settings)) {
		s := m.Settings[k]
		switch {
		case s.Required:
			settings = append(settings, k+" (required)")
		case s.Default != nil:
			settings = append(settings, fmt.Sprintf("%s (default %q)", k, *s.Default))
		default:
			settings = append(settings, k)
		}
	}
	fmt.Fprintf(tw, "settings\t%s\n", text.OrNone(strings.Join(settings, ", ")))
	for _, r := range m.Resources {
		fmt.Fprintf(tw, "resource\t%s %s %s\n", r.Kind, r.Path, r.Mode)
	}
	for _, b := range m.Builds {
		fmt.Fprintf(tw, "build\t%s registered %s (sequence %d)\n", manifest.ShortBuild(b.Build), text.Time(b.RegisteredAt), b.Seq)
	}
	if len(m.AssignedTo) == 0 {
		fmt.Fprintf(tw, "assigned to\tno node\n")
	}
	for _, a := range m.AssignedTo {
		note := ""
		if !a.Latest {
			note = " (not the latest: mesh assign " + a.Node + " " + m.Name + " upgrades it)"
		}
		fmt.Fprintf(tw, "assigned to\t%s, build %s%s\n", a.Node, manifest.ShortBuild(a.Build), note)
	}
	return tw.Flush()
}
