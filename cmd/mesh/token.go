package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// TokenCmd is the enrolment token group (issue 29).
type TokenCmd struct {
	Create TokenCreateCmd `cmd:"" help:"Make an enrolment token: a join string machines enrol themselves with, making their own keys."`
	List   TokenListCmd   `cmd:"" help:"List every token, with its uses and expiry (never its secret)."`
	Revoke TokenRevokeCmd `cmd:"" help:"Withdraw a token's unused uses."`
}

type TokenCreateCmd struct {
	Uses       int               `default:"1" help:"How many machines may enrol with it."`
	Expires    time.Duration     `default:"24h" help:"How long it may be used (at most 720h)."`
	Label      map[string]string `short:"l" help:"Labels every node it enrols has (KEY=VALUE, repeatable)."`
	Capability []string          `short:"c" help:"Capabilities every node it enrols has (repeatable)."`
	JSON       bool              `help:"Print the token (with the join string) as JSON."`
}

func (c *TokenCreateCmd) Help() string {
	return `Examples:
  mesh token create --uses 100 --expires 1h --label zone=eu-1   # its last line is the join string

Each machine runs: mesh agent --join JOIN --root DIR --name NAME (the name defaults to its host
name). Its agent makes its own keys and enrols them with the token; nothing the operator holds can
make its reports or open what is sealed to it. The join string is a secret until it is spent.`
}

func (c *TokenCreateCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var r wire.TokenReply
	req := wire.TokenRequest{CommandID: wire.NewCommandID(), Uses: c.Uses, Expires: c.Expires, Labels: c.Label, Capabilities: c.Capability}
	if err := cl.Call(ctx, wire.SubjectTokenCreate, req, &r); err != nil {
		return err
	}
	join := joinString(g, cl, r.Identity)
	if c.JSON {
		return text.JSON(out.Out, struct {
			wire.TokenReply
			Join string `json:"join"`
		}{r, join})
	}
	fmt.Fprintf(out.Out, "made token %s at sequence %d: %d use(s), until %s (labels: %s; capabilities: %s)\n",
		r.Token.ID, r.Seq, r.Token.Uses, text.Time(r.Token.Expires), text.OrNone(text.Labels(r.Token.Labels)), text.OrNone(strings.Join(r.Token.Capabilities, ", ")))
	fmt.Fprintf(out.Out, "join string (for mesh agent --join --name NAME on each machine):\n%s\n", join)
	return nil
}

type TokenListCmd struct {
	JSON bool `help:"Print {mesh, key, tokens} as JSON, the tokens oldest first."`
}

func (c *TokenListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.TokenList
	if err := g.Call(ctx, wire.SubjectTokenList, wire.Empty{}, &r); err != nil {
		return err
	}
	// Oldest first, for both forms: the read model keeps them by id, which
	// is random, so two listings of the same tokens would differ.
	slices.SortStableFunc(r.Tokens, func(a, b wire.Token) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	if c.JSON {
		r.Tokens = cmdline.NonNil(r.Tokens)
		for i := range r.Tokens {
			r.Tokens[i].Used = cmdline.NonNil(r.Tokens[i].Used)
		}
		return text.JSON(out.Out, r)
	}
	if len(r.Tokens) == 0 {
		fmt.Fprintln(out.Out, "no tokens: mesh token create makes one")
		return nil
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOKEN\tLEFT\tUSED\tEXPIRES\tFOR\tUSED BY")
	now := time.Now()
	for _, t := range r.Tokens {
		left, why := t.Left(now)
		leftText := fmt.Sprint(left)
		if why != "" {
			leftText = "0 (" + why + ")"
		}
		what := text.OrDash(t.Node)
		if t.Rekey {
			what = "re-key " + t.Node
		}
		fmt.Fprintf(tw, "%s\t%s\t%d of %d\t%s\t%s\t%s\n", t.ID, leftText, len(t.Used), t.Uses, text.Time(t.Expires), what, text.OrDash(strings.Join(t.Used, ",")))
	}
	return tw.Flush()
}

type TokenRevokeCmd struct {
	ID   string `arg:"" help:"The token's id (mesh token list)."`
	JSON bool   `help:"Print {id, changed, seq} as JSON (changed: false when it had no uses left)."`
}

// Revoked is token revoke --json: the token, and the event that withdrew
// its uses (none when there was nothing to do).
type Revoked struct {
	ID      string `json:"id"`
	Changed bool   `json:"changed"`
	Seq     uint64 `json:"seq"`
}

func (c *TokenRevokeCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.Changed
	if err := g.Call(ctx, wire.SubjectTokenRevoke, wire.NameRequest{Name: c.ID}, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, Revoked{ID: c.ID, Changed: r.Changed, Seq: r.Seq})
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "token %s has no uses left: nothing to do\n", c.ID)
		return nil
	}
	fmt.Fprintf(out.Out, "revoked token %s at sequence %d\n", c.ID, r.Seq)
	return nil
}

// NodeRekeyCmd makes a token that gives a node new keys.
type NodeRekeyCmd struct {
	Name string `arg:"" predictor:"node"`
	JSON bool   `help:"Print {node, join} as JSON (the join string is the new machine's secret)."`
}

func (c *NodeRekeyCmd) Help() string {
	return `Examples:
  mesh node rekey web-1   # its last line is the join string for the new machine

For a wiped or replaced machine, or a node enrolled before nodes made their own keys. Run its
agent with the join string this prints and a fresh state directory: it makes new keys, and from
then on the old ones are refused by the bus and set aside by the fold. mesh audit shows the re-key.`
}

func (c *NodeRekeyCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var id wire.Identity
	if err := cl.Call(ctx, wire.SubjectNodeRekey, wire.NameRequest{Name: c.Name}, &id); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, cmdline.Joining{Node: c.Name, Join: joinString(g, cl, id)})
	}
	fmt.Fprintf(out.Out, "re-key token for %s made; its keys change once its agent enrols with this join string:\n%s\n", c.Name, joinString(g, cl, id))
	return nil
}
