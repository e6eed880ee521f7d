package main

import (
	"context"
	"fmt"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// LogsCmd prints a module's program log, asked of its node's agent.
type LogsCmd struct {
	Node   string `arg:"" help:"The node the program runs on."`
	Module string `arg:"" help:"The module whose program's log to print."`
	Follow bool   `short:"f" help:"Then print each new line as the program writes it, until Ctrl-C (exit 0)."`
	Lines  int    `short:"n" placeholder:"N" help:"Only the newest N lines (default: every line the node keeps)."`
	JSON   bool   `help:"Print {node, module, lines: [{time, stream, text}]} as JSON; with --follow, each line's object on a line of its own (JSON lines)."`
}

func (c *LogsCmd) Help() string {
	return `The node keeps each program's newest output (stdout and stderr, and the agent's word on
a start that failed, an exit, a stop), 256 KiB a module by default (mesh agent --log-kib),
on its disk across restarts; it is asked over the bus, and only the operator may ask.

Examples:
  mesh logs db-1 greeter
  mesh logs db-1 greeter --lines 20 --follow`
}

// followWait is how long one request of --follow lets the agent hold it
// for a new line: short enough that an agent gone is noticed soon after,
// long enough that a quiet program costs a request now and then.
const followWait = 10_000 // milliseconds

func (c *LogsCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if err := events.ValidateName("node", c.Node); err != nil {
		return cmdline.Usagef("%v", err)
	}
	if err := events.ValidateName("module", c.Module); err != nil {
		return cmdline.Usagef("%v", err)
	}
	if c.Lines < 0 {
		return cmdline.Usagef("--lines %d is not a number of lines: give 1 or more, or leave it out for every line kept", c.Lines)
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	r, err := cl.LogsAll(ctx, c.Node, wire.LogsRequest{Module: c.Module, Lines: c.Lines})
	if err != nil && c.Follow && ctx.Err() != nil {
		return nil // Ctrl-C before the first lines came: the end of a follow
	}
	if err != nil {
		return err
	}
	c.dropped(out, r.Dropped)
	switch {
	case c.JSON && !c.Follow:
		return text.JSON(out.Out, wire.LogsOutput{Node: c.Node, Module: c.Module, Lines: r.Lines})
	case len(r.Lines) == 0 && !c.JSON:
		fmt.Fprintf(out.Out, "%s's program on %s has written nothing it keeps yet\n", c.Module, c.Node)
	}
	c.print(out, r.Lines)
	if !c.Follow {
		return nil
	}
	return c.follow(ctx, cl, out, r.Last)
}

// follow asks for the lines after last, again and again, each request held
// by the agent until a line comes (or followWait passes), until ctx ends:
// Ctrl-C ends a follow, which is no failure.
func (c *LogsCmd) follow(ctx context.Context, cl *client.Client, out *cmdline.Output, last uint64) error {
	for {
		r, err := cl.Logs(ctx, c.Node, wire.LogsRequest{Module: c.Module, After: last, WaitMS: followWait})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		c.dropped(out, r.Dropped)
		c.print(out, r.Lines)
		last = r.Last
	}
}

// dropped says how many lines the node's bound dropped before they were
// read: on stderr, since the lines printed are the log as it is, and a
// script reading them should not read this as one.
func (c *LogsCmd) dropped(out *cmdline.Output, n uint64) {
	if n > 0 {
		fmt.Fprintf(out.Err, "mesh: %d line(s) of %s's log were dropped before they were read: the program wrote more than %s keeps (mesh agent --log-kib)\n", n, c.Module, c.Node)
	}
}

// print writes lines: for a person, each with its time and stream and its
// text escaped as every node's word is (a program may print terminal
// controls); with --follow --json, a JSON object a line.
func (c *LogsCmd) print(out *cmdline.Output, lines []wire.LogLine) {
	for _, l := range lines {
		if c.JSON {
			_ = text.JSONLine(out.Out, l)
			continue
		}
		fmt.Fprintf(out.Out, "%s %-6s %s\n", l.Time.UTC().Format(logTime), l.Stream, text.Shown(l.Text))
	}
}

// logTime is RFC 3339 to the millisecond: lines a program wrote in one
// burst are told apart, and the column stays one width.
const logTime = "2006-01-02T15:04:05.000Z07:00"
