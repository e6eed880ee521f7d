package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events/store"
	"github.com/meshctl/mesh/wire"
)

// PushCmd sends each node its declaration.
type PushCmd struct {
	Node   string        `arg:"" predictor:"node" optional:"" help:"One node; without it, every active node."`
	Behind bool          `help:"Only the nodes not doing what they were told: never sent, or the last report failed or refused."`
	Wait   time.Duration `help:"With a node: wait this long for it to report applying exactly what it was sent."`
	// Selector bounds the push to the nodes it chooses.
	Selector string `help:"Only the active nodes this selects: *, name=NODE, or KEY=VALUE label-or-fact and capability=NAME terms joined by commas (all must hold)."`
	DryRun   bool   `name:"dry-run" help:"Send nothing: say which nodes would be sent, and what changes on each (the mesh-wide plan)."`
	JSON     bool   `help:"Print what was sent and not sent as JSON."`
	// Verbose: a push to ten thousand nodes is a summary and its
	// exceptions; every node's line is asked for.
	Verbose bool `short:"v" help:"Print a line for every node sent, and every node not sent."`
}

func (c *PushCmd) Help() string {
	return "Examples:\n  mesh push\n  mesh push web-1 --wait 10s\n  mesh push --behind\n  mesh push --selector zone=eu-1 --dry-run"
}

func (c *PushCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	switch {
	case c.Node != "" && c.Behind:
		return cmdline.Usagef("name a node or give --behind, not both: a named node is pushed whether it is behind or not")
	case c.Wait != 0 && c.Node == "":
		return cmdline.Usagef("--wait needs a node: mesh push NODE --wait %s", c.Wait)
	case c.Node != "" && c.Selector != "":
		return cmdline.Usagef("name a node or give --selector, not both")
	case c.DryRun && c.Wait != 0:
		return cmdline.Usagef("--dry-run sends nothing, so there is nothing to --wait for")
	}
	if c.DryRun {
		return c.dryRun(ctx, g, out)
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	cl.Timeout = g.TimeoutOr(5 * time.Minute)
	var r wire.PushReply
	req := wire.PushRequest{CommandID: wire.NewCommandID(), Node: c.Node, Behind: c.Behind, Selector: c.Selector}
	// On a terminal, how many nodes are sent so far, as the push goes.
	fr, done, err := followProgress(cl, out, "sent", "node(s)", true)
	if err != nil {
		return err
	}
	req.Progress = fr.Progress
	err = cl.Call(ctx, wire.SubjectPush, req, &r)
	done()
	if err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, r); err != nil {
			return err
		}
	} else {
		text.Showable(&r)
		text.Push(out.Out, r, c.Behind, c.Verbose)
	}
	switch {
	case len(r.Unsent) > 0 && len(r.Sent) == 0:
		return fmt.Errorf("none of the %d node(s) was sent", len(r.Unsent))
	case len(r.Unsent) > 0:
		return fmt.Errorf("%d of %d node(s) were not sent; the other %d were", len(r.Unsent), len(r.Unsent)+len(r.Sent), len(r.Sent))
	}
	if c.Wait > 0 {
		// With --json the answer above is the one object on stdout: the
		// wait's outcome is the exit code, a failure named on stderr.
		say := out
		if c.JSON {
			say = &cmdline.Output{Out: io.Discard, Err: out.Err}
		}
		for _, s := range r.Sent {
			if s.Node == c.Node {
				return waitFor(ctx, cl, say, s, c.Wait)
			}
		}
	}
	return nil
}

// dryRun prints the mesh-wide plan: what a push would send, and where.
func (c *PushCmd) dryRun(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var p wire.PushPlanReply
	req := wire.PushRequest{Node: c.Node, Behind: c.Behind, Selector: c.Selector}
	if err := g.Call(ctx, wire.SubjectPushPlan, req, &p); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, p)
	}
	w := bufio.NewWriter(out.Out)
	defer w.Flush()
	each := c.Verbose || len(p.WouldSend)+len(p.Unsent) <= text.PushExceptions
	changed := 0
	for _, n := range p.WouldSend {
		what := fmt.Sprintf("%d change(s)", len(n.Changes))
		switch {
		case n.Same:
			what = "the content it was sent, again"
		case n.Changes == nil:
			what = "changes not read (over the first 1,000 nodes; --json counts them)"
		default:
			changed++
		}
		if n.Note != "" {
			what += " (" + n.Note + ")"
		}
		if !each {
			continue
		}
		fmt.Fprintf(w, "would send %s: %s\n", n.Node, what)
		for _, ch := range n.Changes {
			fmt.Fprintf(w, "  %-7s %s (%s)%s\n", ch.Change, ch.Path, ch.Module, whatOf(ch.What))
		}
	}
	for _, u := range p.Unsent {
		fmt.Fprintf(w, "would not send %s: %s\n", u.Node, u.Reason)
	}
	text.Held(w, p.Held, "would leave out", each)
	fmt.Fprintf(w, "would send %d of %d node(s), %d with changes; nothing was sent (a dry run)\n", len(p.WouldSend), p.Considered, changed)
	return nil
}

func whatOf(what []string) string {
	if len(what) == 0 {
		return ""
	}
	return ": " + strings.Join(what, ", ")
}

// waitFor follows the node's reports until it reports on exactly what it was sent.
func waitFor(ctx context.Context, cl *client.Client, out *cmdline.Output, s wire.PushedNode, d time.Duration) error {
	st, err := store.Attach(ctx, cl.NC, "")
	if err != nil {
		return err
	}
	if err := client.WaitReport(ctx, st, cl, s.Node, s.Digest, s.StreamSeq, d); err != nil {
		return err
	}
	fmt.Fprintf(out.Out, "%s applied sequence %d (digest %s)\n", s.Node, s.Sequence, text.Short(s.Digest))
	return nil
}

// DeclareCmd sends a hand-written declaration.
type DeclareCmd struct {
	Node string        `arg:"" predictor:"node"`
	File string        `arg:"" type:"existingfile" help:"A JSON body: {\"resources\": [...], \"receives\": [...]}."`
	Wait time.Duration `help:"Wait this long for the node to report applying it."`
	JSON bool          `help:"Print what was sent as JSON (node, sequence, digest; before a --wait)."`
}

func (c *DeclareCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	body, err := os.ReadFile(c.File)
	if err != nil {
		return fmt.Errorf("cannot read %s: %v", c.File, err)
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var s wire.PushedNode
	req := wire.DeclareRequest{CommandID: wire.NewCommandID(), Node: c.Node, File: c.File, Body: string(body)}
	if err := cl.Call(ctx, wire.SubjectDeclare, req, &s); err != nil {
		return err
	}
	if c.JSON {
		if err := text.JSON(out.Out, s); err != nil || c.Wait == 0 {
			return err
		}
		return waitFor(ctx, cl, &cmdline.Output{Out: io.Discard, Err: out.Err}, s, c.Wait)
	}
	fmt.Fprintf(out.Out, "declared %s %d resource(s), sequence %d (builds unknown: status will not read it as what the mesh composes)\n", s.Node, s.Resources, s.Sequence)
	if c.Wait > 0 {
		return waitFor(ctx, cl, out, s, c.Wait)
	}
	return nil
}
