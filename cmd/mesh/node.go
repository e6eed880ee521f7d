package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/meshctl/mesh/agent"
	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/wire"
)

// NodeCmd is the node command group.
type NodeCmd struct {
	Enroll NodeEnrollCmd `cmd:"" help:"Enroll a machine under a name, unique in the mesh for ever."`
	List   NodeListCmd   `cmd:"" help:"List every node, retired ones included."`
	Show   NodeShowCmd   `cmd:"" help:"Show one node."`
	Set    NodeSetCmd    `cmd:"" help:"Change a node's declared capabilities or labels (recorded; plan and push --behind follow)."`
	Retire NodeRetireCmd `cmd:"" help:"Retire a node: it can no longer be assigned or pushed to; its name stays taken."`
	Join   NodeJoinCmd   `cmd:"" help:"Print a new join string for a node whose agent has not made its keys yet (for mesh agent --join)."`
	Rekey  NodeRekeyCmd  `cmd:"" help:"Give a node new keys: a join string for its new or wiped machine (recorded; audit shows it)."`
}

type NodeEnrollCmd struct {
	Name       string            `arg:"" optional:"" help:"Lowercase letters, digits and '-', 1 to 63 characters."`
	Capability []string          `short:"c" help:"A capability the machine has (repeatable), e.g. linux."`
	Label      map[string]string `short:"l" mapsep:"none" help:"A label k=v (repeatable)."`
	From       string            `help:"Enroll every node a file lists ('-': standard input), in batches of a thousand, each all or nothing."`
	Address    string            `help:"The overlay address the node is to have (default: the next free one of mesh network set's range)."`
	JSON       bool              `help:"Print {changed, seq, node, join} as JSON (the join string is the node's secret); with --from, {changed, unchanged, seqs}: the nodes by name, no join strings."`
}

// Enrolled is node enroll --json: what was recorded, and the join string.
type Enrolled struct {
	Changed bool          `json:"changed"`
	Seq     uint64        `json:"seq"`
	Node    wire.NodeView `json:"node"`
	Join    string        `json:"join"`
}

func (c *NodeEnrollCmd) Help() string {
	return "Examples:\n  mesh node enroll web-1 --capability linux --label zone=eu-1\n  mesh node enroll --from nodes.txt\n\n" +
		"A node list holds one node a line: its name, then its capabilities and labels, separated by spaces.\n" +
		"A word with '=' is a label KEY=VALUE, any other a capability (commas join several); '#' starts a comment:\n" +
		"  web-1 linux zone=eu-1 tier=web\n  web-2 linux,arm64 zone=eu-2\n  spare-1\n" +
		"A node already enrolled exactly as listed is nothing to do, so a list can be given again."
}

func (c *NodeEnrollCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if c.From != "" {
		if c.Name != "" || len(c.Capability) > 0 || len(c.Label) > 0 {
			return cmdline.Usagef("give a node list (--from) or one node's name, capabilities and labels, not both")
		}
		return c.enrollFrom(ctx, g, out)
	}
	if c.Name == "" {
		return cmdline.Usagef("name the node to enroll: mesh node enroll NAME (or mesh node enroll --from FILE)")
	}
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var r wire.Changed
	req := wire.EnrollRequest{CommandID: wire.NewCommandID(), Name: c.Name, Capabilities: c.Capability, Labels: c.Label, Address: c.Address}
	if err := cl.Call(ctx, wire.SubjectNodeEnroll, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, Enrolled{Changed: r.Changed, Seq: r.Seq, Node: r.Node, Join: joinString(g, cl, r.Identity)})
	}
	fmt.Fprintf(out.Out, "enrolled %s at sequence %d (capabilities: %s; labels: %s; address: %s)\n",
		r.Node.Name, r.Seq, text.OrNone(strings.Join(r.Node.Capabilities, ", ")), text.OrNone(text.Labels(r.Node.Labels)), text.OrNone(r.Node.Address))
	fmt.Fprintf(out.Out, "join string (for mesh agent --join on %s):\n%s\n", r.Node.Name, joinString(g, cl, r.Identity))
	return nil
}

type NodeListCmd struct {
	JSON     bool   `help:"Print {nodes} as JSON."`
	Selector string `help:"Only the active nodes this selects (as push --selector)."`
}

func (c *NodeListCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.NodeList
	if err := g.Call(ctx, wire.SubjectNodeList, wire.ListRequest{Brief: !c.JSON}, &r); err != nil {
		return err
	}
	if c.Selector != "" {
		var sel wire.Selected
		if err := g.Call(ctx, wire.SubjectNodeSelect, wire.SelectRequest{Selector: c.Selector}, &sel); err != nil {
			return err
		}
		chosen := map[string]bool{}
		for _, n := range sel.Nodes {
			chosen[n] = true
		}
		r.Nodes = slices.DeleteFunc(r.Nodes, func(n wire.NodeView) bool { return !chosen[n.Name] })
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	text.Showable(&r)
	if len(r.Nodes) == 0 {
		fmt.Fprintln(out.Out, "no nodes enrolled yet; enroll one with mesh node enroll NAME")
		return nil
	}
	// Buffered: tabwriter writes cell by cell, ten thousand rows were
	// fifty thousand writes to the terminal.
	bw := bufio.NewWriterSize(out.Out, 64<<10)
	defer bw.Flush()
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHEARD\tADDRESS\tCAPABILITIES\tLABELS\tENROLLED")
	retired := 0
	for _, n := range r.Nodes {
		if n.Retired {
			retired++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, text.State(n), text.Heard(n), text.OrDash(n.Address), text.OrDash(strings.Join(n.Capabilities, ",")),
			text.OrDash(text.Labels(n.Labels)), text.Time(n.EnrolledAt))
	}
	tw.Flush()
	fmt.Fprintf(bw, "%d node(s), %d retired\n", len(r.Nodes), retired)
	return nil
}

type NodeShowCmd struct {
	Name string `arg:"" predictor:"node"`
	JSON bool   `help:"Print the node as JSON."`
	AsOf string `help:"Answer as the node was then: RFC 3339, or a duration ago such as 2h."`
}

func (c *NodeShowCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.NameRequest{Name: c.Name}
	var err error
	if req.AsOf, err = parseWhen("--as-of", c.AsOf); err != nil {
		return err
	}
	var n wire.NodeView
	if err := g.Call(ctx, wire.SubjectNodeShow, req, &n); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, n)
	}
	text.Showable(&n)
	return text.Node(out.Out, n)
}

type NodeRetireCmd struct {
	Name string `arg:"" predictor:"node"`
	JSON bool   `help:"Print the node as retired, as JSON (changed: false when it was already)."`
}

func (c *NodeRetireCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var r wire.Changed
	req := wire.RetireRequest{CommandID: wire.NewCommandID(), Name: c.Name}
	if err := g.Call(ctx, wire.SubjectNodeRetire, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s is already retired; nothing to do\n", r.Node.Name)
		return nil
	}
	fmt.Fprintf(out.Out, "retired %s at sequence %d; its name stays taken\n", r.Node.Name, r.Seq)
	return nil
}

// NodeSetCmd replaces what a node is declared to have.
type NodeSetCmd struct {
	Name              string            `arg:"" predictor:"node"`
	Capability        []string          `short:"c" help:"The node's declared capabilities, replacing those it had (repeatable)."`
	Label             map[string]string `short:"l" mapsep:"none" help:"The node's labels k=v, replacing those it had (repeatable)."`
	ClearCapabilities bool              `help:"Declare no capabilities (those its agent detects stay)."`
	ClearLabels       bool              `help:"Remove every label."`
	JSON              bool              `help:"Print the node as changed, as JSON (changed: false when there was nothing to do)."`
}

func (c *NodeSetCmd) Help() string {
	return "Examples:\n  mesh node set web-1 --capability linux --capability gpu\n  mesh node set web-1 --label zone=eu-2 --label tier=web\n\n" +
		"Capabilities the node's agent detects (its OS, its architecture, systemd) are its facts, beside these: node show lists both."
}

func (c *NodeSetCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	req := wire.ChangeNodeRequest{CommandID: wire.NewCommandID(), Name: c.Name, Capabilities: c.Capability, Labels: c.Label}
	switch {
	case c.ClearCapabilities && len(c.Capability) > 0:
		return cmdline.Usagef("--clear-capabilities and --capability say two things; give one")
	case c.ClearLabels && len(c.Label) > 0:
		return cmdline.Usagef("--clear-labels and --label say two things; give one")
	case c.ClearCapabilities:
		req.Capabilities = []string{}
	case c.ClearLabels:
		req.Labels = map[string]string{}
	}
	if c.ClearLabels {
		req.Labels = map[string]string{}
	}
	var r wire.Changed
	if err := g.Call(ctx, wire.SubjectNodeChange, req, &r); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, r)
	}
	what := fmt.Sprintf("capabilities %s, labels %s", text.OrNone(strings.Join(r.Node.Capabilities, ", ")), text.OrNone(text.Labels(r.Node.Labels)))
	if !r.Changed {
		fmt.Fprintf(out.Out, "%s has %s already; nothing to do\n", r.Node.Name, what)
		return nil
	}
	fmt.Fprintf(out.Out, "changed %s at sequence %d: %s (mesh plan %s shows what it would be sent now)\n", r.Node.Name, r.Seq, what, r.Node.Name)
	return nil
}

// NodeJoinCmd prints a node's join string again.
type NodeJoinCmd struct {
	Name string `arg:"" predictor:"node"`
	JSON bool   `help:"Print {node, join} as JSON (the join string is the node's secret)."`
}

func (c *NodeJoinCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	cl, closeFn, err := g.Client()
	if err != nil {
		return err
	}
	defer closeFn()
	var id wire.Identity
	if err := cl.Call(ctx, wire.SubjectNodeJoin, wire.NameRequest{Name: c.Name}, &id); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, cmdline.Joining{Node: c.Name, Join: joinString(g, cl, id)})
	}
	fmt.Fprintln(out.Out, joinString(g, cl, id))
	return nil
}

// joinString is the identity with the bus this client reached it on.
// On a bus that speaks TLS it carries the CA the command trusted (the
// home's, or --tls-ca), so the agent needs nothing else.
func joinString(g *cmdline.Globals, cl *client.Client, id wire.Identity) string {
	j := agent.Join{Mesh: id.Mesh, Bus: cl.NC.ConnectedUrlRedacted(), Node: id.Node, Key: id.Key, Seed: id.Seed, Token: id.Token}
	if cl.NC.TLSRequired() || strings.HasPrefix(j.Bus, "tls://") {
		ca := g.TLSCA
		if ca == "" {
			ca = cmdline.HomeCA(g.Home)
		}
		if b, err := os.ReadFile(ca); err == nil {
			j.CA = string(b)
		}
	}
	return j.String()
}
