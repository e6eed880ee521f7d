package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/meshctl/mesh/busauth"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// OperatorCmd is the operators group (issue 33): who may run which verbs,
// each with a key of its own.
type OperatorCmd struct {
	Add    OperatorAddCmd    `cmd:"" help:"Add an operator with a role (viewer, deployer, admin), making its key file."`
	List   OperatorListCmd   `cmd:"" help:"List the operators, removed ones included."`
	Show   OperatorShowCmd   `cmd:"" help:"Show one operator: its role, key, and who added and removed it."`
	Remove OperatorRemoveCmd `cmd:"" help:"Remove an operator: its key is refused, and its live connections end now."`
}

type OperatorAddCmd struct {
	Name string `arg:"" help:"The operator's name, as the log will say who did what: a person, or a program such as ci."`
	Role string `required:"" enum:"viewer,deployer,admin" help:"viewer (status, lists, history, audit), deployer (also assign, push, rollouts, declare, node set), admin (everything)."`
	Out  string `help:"Where to write the key (default: operators/NAME.nk in the home). It must not exist."`
	JSON bool   `help:"Print {changed, seq, operator, cut, key_file} as JSON."`
}

func (c *OperatorAddCmd) Help() string {
	return `Examples:
  mesh operator add alice --role viewer
  mesh operator add ci --role deployer --out ci.nk
  mesh --creds ci.nk push --wait 2m           # as ci, from anywhere that reaches the bus

The key is made here, written mode 0600, and only its public half is recorded: hand the file to
the person or program, who gives it with --creds (or MESH_CREDS). The nats CLI takes it too
(nats --nkey FILE). A removed operator's key is refused at once.`
}

// OperatorAdded is operator add --json: the answer, and where the key is.
type OperatorAdded struct {
	wire.OperatorChanged
	KeyFile string `json:"key_file"`
}

func (c *OperatorAddCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	role, err := events.ParseRole(c.Role)
	if err != nil {
		return cmdline.Usagef("--role: %v", err)
	}
	if err := events.ValidateName("operator", c.Name); err != nil {
		return cmdline.Usagef("%v", err)
	}
	path := c.Out
	if path == "" {
		path = filepath.Join(g.Home, "operators", c.Name+".nk")
	}
	key, err := busauth.WriteNewOperatorKey(path)
	if err != nil {
		return cmdline.Usagef("%v", err)
	}
	var r wire.OperatorChanged
	err = g.Call(ctx, wire.SubjectOperatorAdd, wire.OperatorAddRequest{CommandID: wire.NewCommandID(), Name: c.Name, Role: role, Key: key}, &r)
	switch {
	case errors.Is(err, client.ErrUnknownOutcome):
		return fmt.Errorf("%w; the key is kept in %s: mesh operator show %s says whether it was added", err, path, c.Name)
	case err != nil:
		os.Remove(path) // refused: nothing was recorded, so the key opens nothing
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, OperatorAdded{OperatorChanged: r, KeyFile: path})
	}
	fmt.Fprintf(out.Out, "added operator %s (role %s) at sequence %d; its key is in %s (mode 0600)\n", c.Name, role, r.Seq, path)
	fmt.Fprintf(out.Out, "hand it over: the operator runs mesh --creds %s COMMAND (or sets MESH_CREDS)\n", path)
	return nil
}

type OperatorListCmd struct {
	JSON bool `help:"Print {operators, caller} as JSON, by name."`
}

func (c *OperatorListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.OperatorList
	if err := g.Call(ctx, wire.SubjectOperatorList, wire.Empty{}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if len(r.Operators) == 0 {
		fmt.Fprintln(out.Out, "no operators: an open bus names none; mesh up closes its bus and makes admin")
		return nil
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR\tROLE\tADDED\tBY\tSTATE")
	for _, o := range r.Operators {
		state := "in"
		if o.Removed {
			state = "removed " + text.Time(*o.RemovedAt) + " by " + text.OrDash(o.RemovedBy)
		}
		if o.Name == r.Caller && !o.Removed {
			state += " (you)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, o.Role, text.Time(o.AddedAt), text.OrDash(o.AddedBy), state)
	}
	return tw.Flush()
}

func (c *OperatorListCmd) Help() string {
	return `Examples:
  mesh operator list          # each operator's role, who added it, and "(you)" beside the caller
  mesh operator list --json | jq -r '.operators[] | select(.removed | not) | .name'`
}

type OperatorShowCmd struct {
	Name string `arg:""`
	JSON bool   `help:"Print the operator as JSON."`
}

func (c *OperatorShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var o wire.Operator
	if err := g.Call(ctx, wire.SubjectOperatorShow, wire.NameRequest{Name: c.Name}, &o); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, o)
	}
	fmt.Fprintf(out.Out, "operator %s, role %s, key %s\n", o.Name, o.Role, o.Key)
	fmt.Fprintf(out.Out, "added %s by %s\n", text.Time(o.AddedAt), text.OrDash(o.AddedBy))
	if o.Removed {
		fmt.Fprintf(out.Out, "removed %s by %s: its key is refused\n", text.Time(*o.RemovedAt), text.OrDash(o.RemovedBy))
	}
	return nil
}

func (c *OperatorShowCmd) Help() string {
	return `Examples:
  mesh operator show ci       # its role, its public key (the nats CLI's inbox prefix is _INBOX_KEY), who added it`
}

type OperatorRemoveCmd struct {
	Name string `arg:""`
	JSON bool   `help:"Print {changed, seq, operator, cut} as JSON (changed: false when it was removed already)."`
}

func (c *OperatorRemoveCmd) Help() string {
	return `Examples:
  mesh operator remove ci     # its key is refused from now on, and its open connections end now

The last admin is not removed, and an operator does not remove itself: another admin does.`
}

func (c *OperatorRemoveCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.OperatorChanged
	if err := g.Call(ctx, wire.SubjectOperatorRemove, wire.NameRequest{Name: c.Name}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "operator %s was removed already: nothing to do\n", c.Name)
		return nil
	}
	fmt.Fprintf(out.Out, "removed operator %s at sequence %d: its key is refused, and %d live connection(s) of it ended\n", c.Name, r.Seq, r.Cut)
	return nil
}
